"""Golden outputs: a fixture's lowered output packed as a deterministic tar.gz.

``python -m nrtrewrite.golden MODEL.neff GOLDEN.tar.gz [--rank R ...]`` (run by
``make golden``) lowers MODEL with the default options and packs the output
folder; tests unpack it next to a fresh lowering and compare the two with
:func:`nrtrewrite.diff.diff_outputs`, which names the field that differs.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import io
import os
import signal
import sys
import tarfile
import tempfile
from pathlib import Path

from nrtrewrite.bundle import rmtree_few_fds, write_output
# (the CLI's stops: SIGTERM and SIGHUP raised as Terminated while the command runs, later
# ones ignored during the cleanup, forked children given the default handlers back)
from nrtrewrite.cli import Terminated, encodable, terminate_cleanly
from nrtrewrite.errors import NrtRewriteError, escape_controls, escape_line
from nrtrewrite.lower import LowerOptions, plan_lowering
from nrtrewrite.neff.assembler import same_file
from nrtrewrite.neff.reader import read_model
from nrtrewrite.neff.writer import write_bytes_atomic
from nrtrewrite.select import ALGO_ENV


def lower_to(model_path: str | Path, out: Path, ranks: list[int] | None) -> Path:
    """Lower with the default options: the environment's ``NRTREWRITE_ALGO`` (an override
    ``lower`` reads, docs/SELECTION.md "Overrides") is not one of them, and is ignored."""
    data = Path(model_path).read_bytes()
    model = read_model(model_path)
    with _without_env(ALGO_ENV):
        plan = plan_lowering(model, LowerOptions(),
                             input_sha256=hashlib.sha256(data).hexdigest(),
                             input_bytes=len(data))
    return write_output(plan, out, ranks=ranks or None, workers=1)


@contextlib.contextmanager
def _without_env(name: str):
    saved = os.environ.pop(name, None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ[name] = saved


def pack(folder: Path) -> bytes:
    """A tar.gz of ``folder`` with sorted names and zeroed metadata (byte-deterministic).
    Each file is copied into the archive a block at a time (reading each whole held the
    largest artifact in memory beside the archive, until 2026-12-06)."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for path in sorted(folder.rglob("*")):
                rel = path.relative_to(folder).as_posix()
                info = tarfile.TarInfo(rel)
                info.mtime = 0
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                if path.is_dir():
                    info.type = tarfile.DIRTYPE
                    info.mode = 0o755
                    tar.addfile(info)
                else:  # (copied from the file a block at a time, never read whole)
                    with path.open("rb") as fh:
                        info.size = os.fstat(fh.fileno()).st_size
                        info.mode = 0o644
                        tar.addfile(info, fh)
    return buf.getvalue()


def unpack(golden: str | Path, dest: Path) -> Path:
    """Unpack a golden tar.gz (regular files and folders only) into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(golden, "r:gz") as tar:
        for m in tar.getmembers():
            if not (m.isfile() or m.isdir()) or m.name.startswith("/") or ".." in m.name.split("/"):
                raise ValueError(f"{escape_controls(os.fspath(golden))}: unexpected member "
                                 f"{m.name!r}")  # (the path escaped once, as a name is)
        tar.extractall(dest, filter="data")
    return dest


def _fail(line: str) -> None:
    """``line`` (its names escaped where they were put in) on stderr, exit status 2."""
    print(f"nrtrewrite.golden: error: {escape_line(line)}", file=sys.stderr)
    sys.exit(2)


def main(argv: list[str] | None = None) -> None:
    """Lower MODEL and write GOLDEN atomically; any error is one line on stderr and exit
    status 2 (nothing written: GOLDEN keeps its previous content).  A stop (Ctrl-C, SIGTERM,
    SIGHUP) removes the temporary folder and says so in one line, status 128 + the signal
    (nothing written either)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("golden")
    ap.add_argument("--rank", type=int, action="append", default=None)
    args = ap.parse_args(argv)
    if same_file(args.model, args.golden):
        _fail(f"{escape_controls(args.golden)}: the output is the model "
              f"{escape_controls(args.model)} itself; nrtrewrite never replaces its input: choose "
              "another output path")
    try:
        with terminate_cleanly():
            tmp = tempfile.mkdtemp(prefix="nrtrewrite-golden-")
            try:
                out = lower_to(args.model, Path(tmp) / "out", args.rank)
                write_bytes_atomic(args.golden, pack(out))
            finally:
                rmtree_few_fds(tmp)  # (TemporaryDirectory's cleanup failed at the fd limit)
    except NrtRewriteError as err:
        _fail(err.at(file=args.model).line())  # a planning error names the model
    except OSError as err:  # reading MODEL, or the temporary folder
        where = " -> ".join(escape_controls(os.fsdecode(p))
                            for p in (err.filename, err.filename2) if p)
        _fail(f"{where + ': ' if where else ''}{err.strerror or err}")
    except Terminated as stop:
        _stopped(stop.signum)
    except KeyboardInterrupt:
        _stopped(signal.SIGINT)
    # (escaped as the CLI's paths: a line break in GOLDEN split the line, until 2026-12-05)
    _say(f"{encodable(escape_controls(args.golden))}: written")


def _say(line: str) -> None:
    """``line`` on stdout; a standard output that cannot be written (``> /dev/full``,
    closed) is one error line and status 2, as in the CLI (GOLDEN is written by then)."""
    if sys.stdout is None:
        _fail("the standard output is closed")
    try:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    except OSError as err:
        sys.stdout = open(os.devnull, "w")  # (no second failure when Python flushes at exit)
        _fail(f"cannot write the standard output: {err.strerror or err}")


def _stopped(signum: int) -> None:
    print(f"nrtrewrite.golden: stopped by {signal.Signals(signum).name}: nothing written",
          file=sys.stderr)
    sys.exit(128 + signum)


if __name__ == "__main__":
    main()
