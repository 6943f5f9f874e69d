"""Golden outputs: a fixture's lowered output packed as a deterministic tar.gz.

``python -m nrtrewrite.golden MODEL.neff GOLDEN.tar.gz [--rank R ...]`` (run by
``make golden``) lowers MODEL with the default options, simulates the lowering against
MODEL (every rank: an output ``simulate`` refuses is never packed) and packs the output
folder, writing GOLDEN only when its bytes change; tests unpack it next to a fresh lowering
and compare the two with :func:`nrtrewrite.diff.diff_outputs`, which names the field that
differs.  Adding a fixture and its golden: README.md "Adding a fixture and its golden".
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import io
import json
import os
import signal
import stat
import sys
import tarfile
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import NoReturn

#: GOLDEN once :func:`main` has written it (a stop from then on says so: :func:`_stopped`).
_WRITTEN: list[str] = []
_PARENT = os.getpid()


def _written() -> str | None:
    """GOLDEN if :func:`main` has written it, else None."""
    return _WRITTEN[0] if _WRITTEN else None


def _stop_outside(signum, frame) -> None:
    """``python -m nrtrewrite.golden`` stopped outside the run's ``terminate_cleanly``: while
    its modules load, or once :func:`main` is done until the process ends (until 2026-12-06
    SIGTERM and SIGHUP then ended it silently, by the signal, and Ctrl-C while the modules
    loaded printed Python's traceback): the stop's one line (:func:`_stopped`), its status.
    Nothing of a run is half done there, so the process ends at once."""
    if os.getpid() != _PARENT:  # a forked child, before the CLI's at-fork restore: as without us
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stdout.flush()
    if not _WRITTEN:  # (maybe while the modules load: nothing below is defined yet)
        with contextlib.suppress(OSError, ValueError, AttributeError):
            sys.stderr.write(f"nrtrewrite.golden: stopped by {signal.Signals(signum).name}: "
                             "nothing written\n")
            sys.stderr.flush()
        os._exit(128 + signum)
    try:
        _stopped(signum, _WRITTEN[0])
    except SystemExit as stop:
        os._exit(stop.code)


def _stops_outside() -> None:
    """:func:`_stop_outside` for SIGTERM, SIGHUP and Ctrl-C (a signal ignored stays so)."""
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, _stop_outside)


#: Substrings of an ImportError's innermost message that mean the loader could not map a
#: shared library (an address-space limit): as nrtrewrite.cli._MAP_FAILURES, which may be
#: what could not be loaded.
_MAP_FAILURES = ("failed to map segment", "cannot allocate memory")


def _cannot_load(err: BaseException) -> None:
    """``python -m nrtrewrite.golden`` whose modules (numpy's libraries) could not be loaded
    for want of memory: the CLI's out-of-memory line, status 71 (docs/CLI.md "Errors"), as
    ``nrtrewrite simulate`` gives it under the same limit (review 59q F4: until 2026-12-08
    Python's traceback or numpy's import banner, status 1).  Anything else is raised."""
    chain, e = [], err
    while e is not None and e not in chain:
        chain.append(e)
        e = e.__cause__ or e.__context__
    root = chain[-1]
    text = str(root)
    if any(isinstance(e, MemoryError) for e in chain):
        why = "needed more memory than the machine gave it (MemoryError)"
    elif isinstance(err, ImportError) and any(m in text.lower() for m in _MAP_FAILURES):
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
        why = (f"could not load its modules ({type(root).__name__}: {text}): the memory or "
               "address-space limit (ulimit -v) is too small")
    else:
        return
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stderr.write(f"nrtrewrite.golden: error: out of memory: 'python -m "
                         f"nrtrewrite.golden' {why} (while loading its modules); nothing "
                         "written\n")
        sys.stderr.flush()
    os._exit(71)  # (EXIT_OUT_OF_MEMORY of nrtrewrite.cli, which may not have loaded)


if __name__ == "__main__":
    # numpy's BLAS starts no threads of its own, as under the console script (console.main;
    # CLI.md "Errors"): its thread pool alone could fail a small memory limit, SIGINT or not
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    _stops_outside()

try:
    from nrtrewrite.bundle import (GOLDEN_TEMP_PREFIX, clean_stale_run_temps, lock_folder,
                                   rmtree_few_fds, temp_folder_refusal, temp_root, unlock_folder,
                                   write_output)
    # (the CLI's stops: SIGTERM and SIGHUP raised as Terminated while the command runs, later
    # ones ignored during the cleanup, forked children given the default handlers back)
    from nrtrewrite.cli import (DASH_READ, DASH_WRITE, EXIT_OUT_OF_MEMORY, Terminated,
                                _resource_line, ascii_int, encodable, is_dash, stop_status,
                                stops_deferred, terminate_cleanly, too_many_digits)
    from nrtrewrite.console import exit_status
    from nrtrewrite.emit.formats import name_on_disk
    from nrtrewrite.errors import (NrtRewriteError, ResourceError, escape_line, escape_path,
                                   path_text)
    from nrtrewrite.lower import LowerOptions, plan_lowering
    from nrtrewrite.neff.assembler import same_file
    from nrtrewrite.neff.reader import read_model
    from nrtrewrite.neff.writer import remove_stale_temps, write_bytes_atomic
    from nrtrewrite.select import ALGO_ENV
    from nrtrewrite.simulate import simulate_output
except (MemoryError, ImportError) as _err:  # (numpy's libraries under a small ulimit -v)
    if __name__ == "__main__":
        _cannot_load(_err)
    raise


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
    largest artifact in memory beside the archive, until 2026-12-06).  A member's name is
    its path's bytes read as UTF-8 whatever the locale (:func:`path_text`; docs/FORMATS.md
    §9: until 2026-12-06 as the locale decoded it, so under ``LC_ALL=C`` a non-ASCII model
    name's member got a ``hdrcharset=BINARY`` record and the archive other bytes)."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT,
                          encoding="utf-8") as tar:
            for path in sorted(folder.rglob("*")):
                rel = path_text(path.relative_to(folder).as_posix())
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


def _plain_member(member: tarfile.TarInfo) -> bool:
    """Whether ``member`` is a regular file or a folder under a plain relative name: not
    absolute, no empty, ``.`` or ``..`` component (``""``, ``d/.``, ``a//b``, ``./x``,
    ``f/``), no NUL (until 2026-12-06 ``""`` and ``d/.`` failed half-way with a raw
    ``IsADirectoryError``)."""
    parts = member.name.split("/")
    return ((member.isfile() or member.isdir()) and "\0" not in member.name
            and not any(p in ("", ".", "..") for p in parts))


def _clashing_member(members: list[tarfile.TarInfo]) -> str | None:
    """The first member whose name another member's takes (review 48j: each name judged
    alone, a file ``x`` then a member ``x/y`` failed half-way with a raw
    ``NotADirectoryError``, a folder ``x`` then a file ``x`` with an ``IsADirectoryError``, a
    file ``x`` then a folder ``x`` was quietly taken), as the rest of the line that refuses
    it, else None: a name given twice, unless as a folder both times, or a member under a
    file's name."""
    kinds: dict[str, bool] = {}  # (name: a folder?)
    for m in members:
        if m.name in kinds and not (kinds[m.name] and m.isdir()):
            return f"{m.name!r}: given twice"
        kinds[m.name] = m.isdir()
    for m in members:
        parts = m.name.split("/")
        for i in range(1, len(parts)):
            if kinds.get(up := "/".join(parts[:i])) is False:
                return f"{m.name!r}: {up!r} is a file"
    return None


def unpack(golden: str | Path, dest: Path) -> Path:
    """Unpack a golden tar.gz (regular files and folders only) into ``dest``, each member
    under the file name its UTF-8 name stands for whatever the locale
    (:func:`~nrtrewrite.emit.formats.name_on_disk`: until 2026-12-06 a non-ASCII name
    under ``LC_ALL=C`` stopped the extraction half-way with a ``UnicodeEncodeError``).
    Every member is judged (:func:`_plain_member`, :func:`_clashing_member`) before
    anything is written: one that is not is a ``ValueError`` naming it, and ``dest`` is not
    even made."""
    with tarfile.open(golden, "r:gz", encoding="utf-8") as tar:
        members = tar.getmembers()
        for m in members:
            if not _plain_member(m):
                raise ValueError(f"{escape_path(os.fspath(golden))}: unexpected member "
                                 f"{m.name!r}")  # (the path escaped once, as a name is)
        if (clash := _clashing_member(members)) is not None:
            raise ValueError(f"{escape_path(os.fspath(golden))}: unexpected member {clash}")
        for m in members:
            m.name = name_on_disk(m.name)
        dest.mkdir(parents=True, exist_ok=True)
        tar.extractall(dest, members=members, filter="data")
    return dest


def _simulated(model_path: str, out: Path, tmp: Path, ranks: list[int] | None,
               memory_check: bool = True) -> None:
    """Simulate ``out``, the lowering of ``model_path`` about to be packed, against the model
    (as ``nrtrewrite simulate OUT --model MODEL`` does, seed 0), and refuse it (an
    :class:`~nrtrewrite.errors.NrtRewriteError` naming the model) unless every trigger
    matches: until 2026-12-06 ``make golden`` packed whatever it lowered, so a wrong
    lowering became the golden the tests then held every later lowering to.  An output
    of some ``ranks`` cannot be simulated alone (every rank of every replica group is
    needed): the whole model is lowered beside it and simulated, and the kept ranks must
    be that lowering's (the same rank manifests, which record every artifact's sha256, and
    the same rewritten NEFF).  ``memory_check`` False: simulate's ``--no-memory-check``
    (golden's own option of that name, passed through); the memory guard's refusal names
    the model, not the temporary lowering (until 2026-12-06 ``<temporary>/every-rank``, and
    it offered an option golden did not have)."""
    model = read_model(model_path)
    whole = out
    if ranks:
        whole = lower_to(model_path, tmp / "every-rank", None)
        part, full = (json.loads((o / "manifest.json").read_bytes()) for o in (out, whole))
        differ = [k for k in part["rank_manifests"]
                  if part["rank_manifests"][k] != full["rank_manifests"].get(k)]
        if differ or part["output_neff"] != full["output_neff"]:
            raise NrtRewriteError(
                f"the output of ranks {', '.join(map(str, sorted(set(ranks))))} is not the "
                f"whole lowering's ({', '.join(differ) or 'the rewritten NEFF'} differs); "
                "nothing written")
    try:
        res = simulate_output(whole, seed=0, model=model, names_within=tmp,
                              memory_check=memory_check)
    except ResourceError as err:  # the memory guard's: the model's lowering is too large
        err.where = replace(err.where, file=model_path)
        err.args = (err.line(),)
        raise err
    except NrtRewriteError as err:  # (a protocol error ...: named as simulate's)
        raise err.named_within(tmp)
    if not res.ok:  # (the protocol error, which names the record, else the first verdict)
        bad = next(t for t in res.triggers if t.status != "match") if not res.error else None
        if bad is None:  # (its location and reason whole, cut once below: until 2026-12-07
            # its line, cut already, was quoted and cut again, counting the cut line's length)
            what, left_out = res.error_reason or res.error, res.error_left_out
            if res.error_reason is not None and res.error_where:
                what = f"{res.error_where}: {what}"
        else:
            what = (f"trigger {bad.trigger} ({bad.label}): {bad.status}"
                    f"{': ' + bad.detail if bad.detail else ''}")
            left_out = bad.detail_left_out
        raise NrtRewriteError(
            f"simulate refuses the lowered output ({what}); nothing written: a golden is only "
            f"packed from an output simulate accepts (nrtrewrite simulate "
            f"{escape_path(model_path)})", left_out=left_out)


def _fail(line: str) -> None:
    """``line`` (its names escaped where they were put in) on stderr, exit status 2."""
    print(f"nrtrewrite.golden: error: {escape_line(line)}", file=sys.stderr)
    sys.exit(2)


#: the ``--help`` description, the docstring's first paragraph as a string: ``python -OO``
#: strips docstrings, where argparse read it from (no description until 2026-12-06)
DESCRIPTION = "Golden outputs: a fixture's lowered output packed as a deterministic tar.gz."
#: the program as ``--help``'s usage line names it (``golden.py`` until 2026-12-06)
PROG = "python -m nrtrewrite.golden"


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line, ``nrtrewrite.golden: error: MESSAGE (see
    'python -m nrtrewrite.golden --help')``, status 2, as every error of the module
    (docs/RELIABILITY.md §4; until 2026-12-06 argparse's two lines, the usage then
    ``golden.py: error: ...``)."""

    def error(self, message: str) -> NoReturn:
        _fail(f"{message} (see '{PROG} --help')")
        raise AssertionError  # (_fail exits)


def _rank(text: str) -> int:
    """``--rank``'s value as the CLI's integer options take it (docs/CLI.md "Errors"): ASCII
    digits with an optional sign, at most ``cli.MAX_INT_DIGITS`` of them (argparse's
    ``int`` took ``４`` and ``1_0``, until 2026-12-06)."""
    if (why := too_many_digits(text)) is not None:
        raise argparse.ArgumentTypeError(why)
    try:
        return ascii_int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a valid integer") from None


def _no_dash(why: str):
    """An argument's ``type``: the path as given, ``-`` refused with ``why`` (the CLI's one
    wording, docs/CLI.md "Standard input and output"; until 2026-12-07 ``GOLDEN`` ``-``
    wrote a file named ``-`` and ``MODEL`` ``-`` read one or failed with the OS's line)."""
    def path(text: str) -> str:
        if is_dash(text):
            raise argparse.ArgumentTypeError(why)
        return text
    return path


def main(argv: list[str] | None = None) -> None:
    """Lower MODEL and write GOLDEN atomically; any error is one line on stderr and exit
    status 2, 71 out of memory (:func:`_out_of_memory`) (nothing written: GOLDEN keeps its
    previous content).  A stop (Ctrl-C, SIGTERM,
    SIGHUP) removes the temporary folder and says so in one line, status 128 + the signal:
    nothing written, or, once GOLDEN is (:func:`_stopped`), that it is complete."""
    ap = _Parser(prog=PROG, description=DESCRIPTION)
    ap.add_argument("model", metavar="MODEL", type=_no_dash(DASH_READ),
                    help="the fixture's NEFF-like model, e.g. fixtures/ar2.neff (make fixtures "
                         "assembles it from its .yaml)")
    ap.add_argument("golden", metavar="GOLDEN", type=_no_dash(DASH_WRITE),
                    help="the archive to write, e.g. fixtures/golden/ar2.tar.gz; written only "
                         "when the lowering simulates clean, and only when its bytes change")
    ap.add_argument("--rank", metavar="R", type=_rank, action="append", default=None,
                    help="keep only this rank's output (repeatable; default: every rank); "
                         "the Makefile's GOLDEN_RANKS_<name> for a large fixture")
    ap.add_argument("--no-memory-check", dest="memory_check", action="store_false",
                    help="simulate the lowering even when the machine has less memory "
                         "available than its largest trigger holds (nrtrewrite simulate's "
                         "--no-memory-check; make golden GOLDEN_FLAGS=--no-memory-check)")
    args = ap.parse_args(argv)
    if same_file(args.model, args.golden):
        _fail(f"{escape_path(args.golden)}: the output is the model "
              f"{escape_path(args.model)} itself; nrtrewrite never replaces its input: choose "
              "another output path")
    _WRITTEN.clear()
    phase = ["reading the model"]  # what the run is doing (an out-of-memory line names it)
    if signal.getsignal(signal.SIGINT) is _stop_outside:  # (the run's own Ctrl-C: below)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with terminate_cleanly():
            try:
                root = temp_root()
                # (a killed run's, as simulate MODEL.neff removes its own: until 2026-12-07
                # a SIGKILLed golden's folder stayed in TMPDIR, nothing removed it)
                clean_stale_run_temps(root, GOLDEN_TEMP_PREFIX)
                tmp = tempfile.mkdtemp(prefix=GOLDEN_TEMP_PREFIX, dir=root)
            except OSError as err:  # none usable, or one that fails (a race)
                _fail(temp_folder_refusal(err).line())
            lock = lock_folder(Path(tmp))  # this run's: no other run's cleanup removes it
            try:
                phase[0] = "lowering the model"
                out = lower_to(args.model, Path(tmp) / "out", args.rank)
                phase[0] = "simulating the lowering"
                _simulated(args.model, out, Path(tmp), args.rank, args.memory_check)
                phase[0] = "packing the output"
                data = pack(out)
                phase[0] = "writing GOLDEN"
                said = _previous(args.golden, data)
                if said == "unchanged":  # (the same bytes: GOLDEN is left as it is, a
                    remove_stale_temps(args.golden)  # killed write's temporary files go)
                else:
                    with stops_deferred():  # GOLDEN written and known to be, or neither
                        write_bytes_atomic(args.golden, data)
                        _WRITTEN.append(args.golden)
            finally:
                # (TemporaryDirectory's cleanup failed at the fd limit); whole: a stop that
                # comes meanwhile is raised once the folder is gone (until 2026-12-06 it cut
                # the removal short and left the folder in TMPDIR)
                with stops_deferred():
                    rmtree_few_fds(tmp)
                    unlock_folder(lock)
            # (escaped as the CLI's paths: a line break in GOLDEN split the line, until
            # 2026-12-05); a stop from here on: GOLDEN is written (_stopped says so)
            _say(f"{encodable(escape_path(args.golden))}: {said}")
    except NrtRewriteError as err:
        _fail(err.at(file=args.model).line())  # a planning error names the model
    except (MemoryError, OSError) as err:  # reading MODEL, the temporary folder, the machine
        if (line := _resource_line(err, PROG)) is not None:
            _out_of_memory(line, args.model, phase[0])
        if isinstance(err, MemoryError):  # (not reached: a MemoryError always has its line)
            raise
        where = " -> ".join(escape_path(p)
                            for p in (err.filename, err.filename2) if p)
        _fail(f"{where + ': ' if where else ''}{err.strerror or err}")
    except Terminated as stop:
        _stopped(stop.signum, _written())
    except KeyboardInterrupt:
        _stopped(signal.SIGINT, _written())


def _out_of_memory(line: str, model: str, phase: str) -> NoReturn:
    """The system refusing memory, a process or a thread while golden was ``phase`` of
    ``model``: the CLI's resource line (``line``: :func:`nrtrewrite.cli._resource_line`, as
    ``simulate`` gives it), naming the model and the phase, status 71 (docs/CLI.md
    "Errors": out of memory; until 2026-12-07 golden printed the OS's bare reason,
    ``Cannot allocate memory``, status 2)."""
    body = line.removeprefix("nrtrewrite: error: ").replace(
        "; rerun with --traceback to see where", "")  # (golden has no --traceback)
    done = ("nothing written" if not _WRITTEN
            else f"{escape_path(_WRITTEN[0])} was written, complete")
    print(escape_line(f"nrtrewrite.golden: error: {escape_path(model)}: {body} (while "
                      f"{phase}); {done}"), file=sys.stderr)
    sys.exit(EXIT_OUT_OF_MEMORY)


def _previous(golden: str, data: bytes) -> str:
    """What writing ``data`` to ``golden`` does: ``written`` (there is none), ``changed``
    (one with other bytes is replaced) or ``unchanged`` (it holds ``data``: not rewritten).
    Until 2026-12-06 every run said ``written``, changed or not.  A symbolic link is
    ``changed``: the write replaces the link itself with the archive, never its target, as
    ``assemble -o`` does (docs/RELIABILITY.md §4; until 2026-12-07 it was judged by its
    target, ``unchanged`` left the link and ``changed`` replaced it)."""
    try:
        st = os.lstat(golden)
        if not stat.S_ISREG(st.st_mode) or st.st_size != len(data):
            return "changed"  # (a link, a folder, a FIFO ...: the write replaces the link,
            # refuses the others, never opened)
        with open(golden, "rb") as fh:
            return "unchanged" if fh.read(len(data) + 1) == data else "changed"
    except FileNotFoundError:
        return "written"
    except OSError:  # (not readable: the write names its reason, or replaces it)
        return "changed"


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


def _stopped(signum: int, golden: str | None = None) -> NoReturn:
    """A stop's one line and status 128 + ``signum``: ``nothing written``, or, ``golden``
    written already (the stop came after its atomic write: while the temporary folder was
    removed, the ``written`` line printed, or the process exited), that it is complete
    (until 2026-12-06 such a stop said ``nothing written`` of a written GOLDEN)."""
    what = ("nothing written" if golden is None else
            f"{encodable(escape_path(golden))} was written, complete, before the stop")
    with contextlib.suppress(OSError, ValueError, AttributeError):
        print(f"nrtrewrite.golden: stopped by {signal.Signals(signum).name}: {what}",
              file=sys.stderr, flush=True)
    sys.exit(stop_status(signum))


def _run() -> NoReturn:
    """``python -m nrtrewrite.golden``: :func:`main`, then the process ends at once with its
    status, its streams flushed (no teardown, in which a stop was silent)."""
    try:
        try:
            main()
            _stops_outside()  # (the run's handlers restored: from here to the end, ours)
        except KeyboardInterrupt:  # (Ctrl-C as main returned, before the line above)
            _stopped(signal.SIGINT, _written())
        status = 0
    except SystemExit as done:
        status = exit_status(done.code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            if stream is sys.stdout and status == 0:
                status = 2  # (the written line was lost: as _say's failed write)
    os._exit(status)


if __name__ == "__main__":
    _run()
