"""Memory and time of ``nrtrewrite diff`` on outputs whose rewritten NEFFs hold large members
(docs/PERFORMANCE.md, "Reading a large or many-member payload").

    python benchmarks/bench_diff.py [--only w300,4x75,4x75:moved,...] [--out DIR] [--keep]
                                    [--tree DIR]

For each model (written under benchmarks/out/diff/ as benchmarks/bench_read.py writes its
inputs: the three members of a valid model plus large members of random bytes, gzip level 1):

* ``wN``: one member ``weights.bin`` of N MiB;
* ``KxN``: K members ``w0.bin`` ... of N MiB each (N and K at least 1; N at most 2048 and
  the tar stream at most 4 GiB, as ``lower`` reads a model: :data:`MEMBER_LIMIT`,
  :data:`STREAM_LIMIT`);

it lowers the model (``nrtrewrite lower -o A``), copies the output to ``B`` and rewrites B's
NEFF with the project's writer (``build_container``, as ``lower`` writes it) so that the last
64-byte instruction of every large member differs (one differing instruction per member).
A suffix changes B further: ``:moved``, its large members in the reverse order; ``:missing``,
without its first large member.  Then ``nrtrewrite diff A B`` runs in a fresh process (the
nrtrewrite of ``--tree``, default this checkout: point it at an older checkout for a before
figure; a folder without ``nrtrewrite/__init__.py``, or one whose nrtrewrite is not the one
Python imports there, is refused), and its wall time (import included) and peak RSS (VmHWM)
are printed with the count of differences.  Every row's name is checked before anything is
written.  Not a timed test: nothing is asserted.

The model, A and B are made in the run's temporary folder (``nrtrewrite-bench-diff-XXXXXXXX``
where ``simulate MODEL.neff`` makes its own: ``TMPDIR`` where Python can write there; the
model's ``.tmp`` and ``lower``'s temporary sibling of A there too) and moved into ``--out``
whole, so ``--out`` holds only results: each is moved (renamed, or copied where ``--out`` is
on another file system) to a temporary sibling of its place, ``.NAME.bench-diff-tmp-PID-HEX``,
then renamed into place, never over something there, so a result in ``--out`` is whole;
A and B are then marked whole (an empty ``.NAME.bench-diff-whole`` beside each, made last),
and a later run reuses a result only where it is marked, and a model only where its header's
size and MD5 are its payload's: one that is not (a run from before 2026-12-07 copied into
the place itself, and a kill left it half written) is removed, a note on stderr, and made
again.  The folder is removed when the run ends, on success, failure or
stop; it is locked while the run lasts, and the ones SIGKILLed runs left are removed by the
next run as ``simulate``'s are (that name shape, this user's, a minute old, the lock free).
A run holds ``--out``'s lock (``flock``) until it ends, as benchmarks/bench_read.py holds
its own: another run of either given the same ``--out`` meanwhile is refused, one line,
status 2, before it makes anything (``--out OUT: in use by another bench_diff.py or
bench_read.py run ...``: give each its own, or run them one after the other); so is a
``--out`` on a file system that refuses ``flock`` (``--out OUT: its file system takes no
locks ...``: runs sharing it could not be kept apart; until 2026-12-07 the run went on
unlocked); the run that holds it first removes the temporary siblings killed runs left
there.
A ``--out`` that is a dangling symbolic link is refused as one that is not a folder.

A step that fails (writing the model, lowering A, moving the model or A, reading A's
``manifest.json`` for its rewritten NEFF's name, copying A, rewriting the NEFF, moving B,
measuring ``diff``) stops the run with one line naming it and why, status 1: a child's
last line of stderr (``lower``'s, the rewrite's, ``diff``'s but its ``BENCH`` line), a
folder's copy or move that fails for many files its first file and why and the count of
the others; a file of the
temporary folder, gone by the time the line is read, named as it would be in ``--out``
(``A of w1: lower failed: nrtrewrite lower: error: OUT/w1/A: ...``) or as
``<temporary>/...``.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "out" / "diff"
DEFAULT = ("w300", "4x75", "4x75:moved", "4x75:missing")

#: What B is made of (the part of a row after ``:``; "": the last instruction changed only).
VARIANTS = ("", "moved", "missing")

sys.path.insert(0, str(HERE))
from bench_read import (_Source, _members, _neff, is_whole, largest_mib,  # noqa: E402
                        tar_stream_bytes)
from outdir import (checked_out, entries, raise_lost_stop, remove_new,  # noqa: E402
                    stop_cleanly, write_new)
from outdir import hold_out as outdir_hold_out  # noqa: E402


def _count(text: str) -> int:
    """A count of a row's name: decimal digits, at least 1 (ValueError otherwise)."""
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise ValueError
    return int(text)


#: What ``lower`` (and ``diff``) read of a model: a member of at most 2 GiB
#: (``container.MAX_MEMBER_BYTES``), a decompressed tar stream of at most 4 GiB
#: (``MAX_TOTAL_BYTES``).  A model over either is refused before anything is written (until
#: 2026-12-07 ``w8192`` and above ended in tarfile's ``ValueError: overflow in number field``,
#: and a larger model than lower reads was written whole before lower refused it).
MEMBER_LIMIT, STREAM_LIMIT = 2 << 30, 4 << 30


def _sizes(model: str) -> list[tuple[str, int]]:
    """The large members of a model name: ``wN`` or ``KxN``; ValueError naming the name
    when it is neither, or when ``lower`` could not read the model (:data:`MEMBER_LIMIT`,
    :data:`STREAM_LIMIT`)."""
    try:
        if model.startswith("w"):
            k, n = 1, _count(model[1:])
            sizes = [("weights.bin", n << 20)]
        else:
            k_text, n_text = model.split("x")
            k, n = _count(k_text), _count(n_text)
            sizes = [(f"w{i}.bin", n << 20) for i in range(k)]
    except ValueError:
        raise ValueError(f"unknown model {model!r}: wN or KxN, N MiB each, N and K at least "
                         "1 (e.g. w300, 4x75)") from None
    if n << 20 > MEMBER_LIMIT:
        raise ValueError(f"model {model!r}: a member of {n:,} MiB is more than lower reads "
                         f"(at most {MEMBER_LIMIT >> 20} MiB a member)")
    if k > STREAM_LIMIT >> 20 or tar_stream_bytes([size for _, size in sizes]) > STREAM_LIMIT:
        most = largest_mib(k, STREAM_LIMIT) if k <= STREAM_LIMIT >> 20 else 0
        raise ValueError(f"model {model!r}: {k:,} members of {n:,} MiB are more than lower "
                         "reads (a tar stream of at most 4 GiB: "
                         + (f"N at most {most:,} for K = {k:,})" if most else "K too large)"))
    return sizes


def check_row(row: str) -> None:
    """ValueError naming what is wrong with a row's name: ``MODEL`` or ``MODEL:VARIANT``."""
    model, _, how = row.partition(":")
    _sizes(model)
    if how not in VARIANTS:
        raise ValueError(f"{row!r}: unknown variant {how!r} (moved or missing)")


def check_tree(tree: Path) -> str | None:
    """Why ``tree`` is not an nrtrewrite source tree whose package Python imports there
    (None: it is).  Without the check, Python would import the installed nrtrewrite (this
    checkout, installed in editable mode) and compare it with itself."""
    init = tree / "nrtrewrite" / "__init__.py"
    if not init.is_file():
        return f"{tree}: no nrtrewrite/__init__.py: not an nrtrewrite source tree"
    res = _run(["-c", "import nrtrewrite; print(nrtrewrite.__file__)"], tree)
    if res.returncode:
        last = (res.stderr.strip().splitlines() or ["no message"])[-1]
        return f"{tree}: its nrtrewrite cannot be imported: {last}"
    got = Path(res.stdout.strip()).resolve()
    if got != init.resolve():
        return f"{tree}: Python imports nrtrewrite from {got.parent}, not from this tree"
    return None


def make_model(model: str, out: Path, work: Path) -> Path:
    """The model file ``OUT/MODEL.neff`` (outside-tool style: Python's tarfile and gzip,
    level 1), written in ``work`` (its ``.tmp`` there) and moved into ``out`` whole (until
    2026-12-07 its ``.tmp`` was in ``out``).  One already there is taken only where whole:
    its header's ``data_size`` and MD5 those of the bytes after it (:func:`bench_read.
    is_whole`; until 2026-12-07 any file of the name was taken)."""
    path = out / f"{model}.neff"
    if path.is_file() and not path.is_symlink() and not is_whole(path):
        # (an earlier run's model cut short, or another file of the name: made anew)
        _note(f"{path}: not whole (its header's size or MD5 is not its payload's); made anew")
        _discard(path)
    if path.exists() or path.is_symlink():
        return path
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=1, mtime=0) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.USTAR_FORMAT) as tf:
            for name, data in _members():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
            for i, (name, size) in enumerate(_sizes(model)):
                info = tarfile.TarInfo(name)
                info.size = size
                src = _Source(size, False)
                src.rng.seed(i)  # (each member its own bytes)
                tf.addfile(info, io.BufferedReader(src, 1 << 20))
    made = work / f"{model}.neff"
    try:
        write_new(made, _neff(buf.getvalue()))
    except OSError as err:  # (a full TMPDIR: until 2026-12-07 a traceback)
        if err.filename is None:  # (a write's error names no file: its .tmp, until 2026-12-07
            err.filename = str(made.with_suffix(".tmp"))  # none named)
        raise SystemExit(f"model {model}: cannot write it in the temporary folder: "
                         f"{_why(err, work)}") from None
    out.mkdir(exist_ok=True)
    move_in(made, path, f"model {model}")
    return path


#: A file or folder being moved into ``--out``: ``.NAME.bench-diff-tmp-PID-HEX`` beside
#: its place, renamed to NAME once whole (:func:`move_in`); one a killed run left is removed
#: by the next run that holds ``--out``'s lock (:func:`remove_partial`).
_PARTIAL = re.compile(r"\..+\.bench-diff-tmp-[0-9]+-[0-9a-f]{8}", re.ASCII | re.DOTALL)


def move_in(src: Path, dst: Path, what: str) -> None:
    """Move ``src`` (a file or folder of the run's temporary folder) to ``dst`` in ``--out``
    whole: moved (a rename where both are on one file system, else a copy) to a temporary
    sibling of ``dst`` (:data:`_PARTIAL`), then renamed to ``dst``, never over one that
    appeared meanwhile, so ``dst`` is there whole or not at all (until 2026-12-07 a copy
    across file systems wrote into ``dst`` itself: a run killed mid-copy left it half
    written, and the next run took it for A).  Whatever stops the move (an error, a stop)
    removes the sibling, never ``dst``; an OS error is one line naming ``what``, status 1."""
    tmp = dst.parent / f".{dst.name}.bench-diff-tmp-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        shutil.move(src, tmp)
        _rename_noreplace(tmp, dst)
    except BaseException as err:
        _remove(tmp)
        if not isinstance(err, OSError):
            raise
        if isinstance(err, FileExistsError) and err.filename == str(dst):
            raise SystemExit(f"{what}: cannot move it from the temporary folder to {dst}: "
                             "it appeared meanwhile, made by something other than this run; "
                             "not replaced") from None
        raise SystemExit(f"{what}: cannot move it from the temporary folder to {dst}: "
                         f"{_why(err, src.parent, dst, tmp)}") from None


#: The mark of a result (A, B) this script moved into ``--out`` whole: an empty file
#: ``.NAME.bench-diff-whole`` beside it, made once it is in place (:func:`_mark_whole`), so a
#: result without one is an older run's (before 2026-12-07 a copy across file systems went
#: into its place directly, and a kill left it half written) or not this script's.
WHOLE = ".bench-diff-whole"


def _whole_mark(dst: Path) -> Path:
    return dst.parent / f".{dst.name}{WHOLE}"


def _taken_whole(dst: Path) -> bool:
    """Whether the result ``dst`` (``OUT/MODEL/A``, ``OUT/MODEL/last``, ...) is there and marked
    whole (:data:`WHOLE`), to be reused.  One there without its mark is discarded, a note
    on stderr, to be made again (until 2026-12-07 any folder there was taken: one a run from
    before the moves were whole left half written was used, the run failing and blaming B);
    a mark without its result is removed."""
    mark = _whole_mark(dst)
    try:
        os.lstat(dst)
        there = True
    except (FileNotFoundError, NotADirectoryError):
        there = False  # (another OSError, a folder that cannot be searched: the caller's)
    if there:
        if mark.is_file() and not mark.is_symlink():
            return True
        _note(f"{dst}: not marked whole (an earlier run's, maybe half written); made again")
        _discard(dst)
    mark.unlink(missing_ok=True)
    return False


def _mark_whole(dst: Path, what: str) -> None:
    """Mark ``dst``, moved into place whole, as whole (:data:`WHOLE`), the last step of its
    making; an OS error is one line naming ``what``, status 1."""
    try:
        with open(_whole_mark(dst), "wb"):
            pass
    except OSError as err:
        raise SystemExit(f"{what}: cannot mark {dst} whole: {_why(err)}") from None


def _discard(path: Path) -> None:
    """Remove ``path`` of ``--out`` (a result not known whole): renamed first to a temporary
    sibling's name (:data:`_PARTIAL`), so that what a stop during the removal leaves is
    removed by the next run, never taken for a result."""
    aside = path.parent / f".{path.name}.bench-diff-tmp-{os.getpid()}-{secrets.token_hex(4)}"
    os.rename(path, aside)
    _remove(aside)


def _note(line: str) -> None:
    print(f"bench_diff.py: {line}", file=sys.stderr, flush=True)


def _rename_noreplace(src: Path, dst: Path) -> None:
    """``rename(src, dst)`` that fails (FileExistsError naming ``dst``) where ``dst``
    exists: ``lower``'s (:func:`nrtrewrite.bundle._rename_noreplace`); a plain rename
    would replace a file, or an empty folder."""
    from nrtrewrite.bundle import _rename_noreplace as rename

    rename(src, dst)


def _remove(path: Path) -> None:
    """Remove a file or folder of ``--out`` (a link as a link), if it is there."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            path.unlink(missing_ok=True)
        except OSError:
            pass


def hold_out(out: Path) -> tuple[set[Path] | None, int]:
    """Make ``--out`` (where it is not there) and hold its exclusive ``flock`` for the whole
    run (:func:`outdir.hold_out`): ``(what it held before, the descriptor holding the
    lock)``, the first None where this run made it (:func:`outdir.entries`).  A folder
    another run holds (this script's or bench_read.py's), or one on a file system that
    refuses locks, is refused, one line naming it, status 2, before anything is written
    (until 2026-12-07 runs sharing one ``--out`` moved their results into each other's:
    ``OUT/w1/A/w1-A``, counts doubled, a traceback, one run's failure removing the other's
    A; and without locks a run went on unlocked).  The temporary siblings a killed run left
    there (:func:`remove_partial`) are removed first, so they are not counted as there
    before."""
    made, fd = outdir_hold_out("bench_diff.py", out)
    remove_partial(out)
    return (None if made else entries(out)), fd


def remove_partial(out: Path) -> list[Path]:
    """Remove what killed runs left half moved into ``--out`` (:data:`_PARTIAL`: in ``out``
    the models, in ``out/MODEL/`` A and B); called with ``--out``'s lock held, so no live
    run's.  Returns what was removed.  Only this tool's own names are looked at: the
    folders ``out/MODEL`` of a model name (:func:`_sizes`), and in them and in ``out``
    the siblings of :data:`_PARTIAL`'s shape; a folder that cannot be listed is passed over
    (until 2026-12-07 every subfolder of ``out`` was listed, and one the user cannot read,
    a mount root's ``lost+found`` say, stopped the run with a traceback)."""
    removed = []
    for folder in [out, *(out / name for name in _names(out) if _is_model_name(name))]:
        if folder != out and (not folder.is_dir() or folder.is_symlink()):
            continue
        for name in _names(folder):
            if _PARTIAL.fullmatch(name):
                _remove(folder / name)
                removed.append(folder / name)
    return removed


def _names(folder: Path) -> list[str]:
    """The names in ``folder``; none where it cannot be listed (not ours to read)."""
    try:
        return sorted(os.listdir(folder))
    except OSError:
        return []


#: A model's name, the shape :func:`_sizes` takes (matched, not counted: ``99999999x1`` is
#: a folder name, not a list to build).
_MODEL_NAME = re.compile(r"w[0-9]+|[0-9]+x[0-9]+", re.ASCII)


def _is_model_name(name: str) -> bool:
    return _MODEL_NAME.fullmatch(name) is not None


def _run(args: list[str], tree: Path = ROOT) -> subprocess.CompletedProcess:
    # (run in the tree: ``python -c`` puts the working folder first on sys.path)
    return subprocess.run([sys.executable, *args], env=dict(os.environ, PYTHONPATH=str(tree)),
                          cwd=tree, capture_output=True, text=True)


def make_pair(row: str, out: Path, work: Path) -> tuple[Path, Path]:
    """Output folders A (``lower`` of the model) and B (A with B's NEFF rewritten), each
    made in ``work`` (the run's temporary folder, outside ``out``: the model's ``.tmp`` and
    ``lower``'s temporary sibling of A there too) and moved into ``out`` whole: ``out`` holds
    only results, and a failure is one line naming the step (until 2026-12-06 B was built
    in a folder inside ``out``, left there by a failure of a run that found the model's
    folder, and the line held the child's traceback; until 2026-12-07 the model and A were
    written in ``out``, a ``lower`` killed leaving its ``.A.tmp-...`` there)."""
    model, _, how = row.partition(":")
    a, b = out / model / "A", out / model / (how or "last")
    if not _taken_whole(a):
        neff = make_model(model, out, work)
        made = work / f"{model}-A"
        res = _run(["-m", "nrtrewrite", "lower", str(neff), "-o", str(made), "-q", "-j", "1"])
        if res.returncode:  # (its last line, as B's; A named as it would be in --out)
            last = (res.stderr.strip().splitlines() or [f"exit {res.returncode}"])[-1]
            raise SystemExit(f"A of {model}: lower failed: {last.replace(str(made), str(a))}")
        a.parent.mkdir(parents=True, exist_ok=True)  # (OUT/MODEL; OUT's parent exists)
        move_in(made, a, f"A of {model}")
        _mark_whole(a, f"A of {model}")
    if not _taken_whole(b):
        tmp = work / f"{model}-{how or 'last'}"
        name = _output_neff(a, row)
        try:
            shutil.copytree(a, tmp)
        except OSError as err:
            raise SystemExit(f"B of {row}: cannot copy {a} to the temporary folder: "
                             f"{_why(err, work, b)}") from None
        neff = tmp / name
        res = _run(["-c", _EDIT, str(neff), how, ",".join(n for n, _ in _sizes(model))])
        if res.returncode:
            last = (res.stderr.strip().splitlines() or [f"exit {res.returncode}"])[-1]
            raise SystemExit(f"B of {row}: rewriting {b / name} failed (in the temporary "
                             f"folder): {last.replace(str(tmp), str(b))}")
        move_in(tmp, b, f"B of {row}")
        _mark_whole(b, f"B of {row}")
    return a, b


def _output_neff(a: Path, row: str) -> str:
    """The name of A's rewritten NEFF, from A's top manifest (FORMATS §1.1: its
    ``output_neff``'s ``name``); one line naming the step and why, status 1, where A (an
    earlier run's) has no manifest, or one that is not JSON or names no rewritten NEFF."""
    manifest = a / "manifest.json"
    try:
        doc = json.loads(manifest.read_bytes())
    except OSError as err:
        raise SystemExit(f"B of {row}: cannot read {manifest}: {err.strerror or err}") from None
    except ValueError as err:  # (not UTF-8 or not JSON)
        raise SystemExit(f"B of {row}: {manifest}: not valid JSON: {err}") from None
    entry = doc.get("output_neff") if isinstance(doc, dict) else None
    name = entry.get("name") if isinstance(entry, dict) else None
    if not isinstance(name, str) or not name:
        raise SystemExit(f"B of {row}: {manifest}: no output_neff name (the rewritten NEFF "
                         "of A is not known)")
    return name


def _why(err: OSError, folder: Path | None = None, dest: Path | None = None,
         copy: Path | None = None) -> str:
    """An OSError's reason and the file it names, in one line, a file of ``folder`` (the
    run's temporary folder, deleted by the time the line is read) named as it is in
    ``dest`` (its place in ``--out``, the folder's first part dropped) or as
    ``<temporary>/...``.  A ``shutil.Error`` (a copy, or a move across file systems, of a
    folder: one error a file) is its first file's copy and why, and the count of the
    others (until 2026-12-07 its list of every file's ``(source, destination, why)``,
    thousands of characters); a path of ``folder`` anywhere in the text (shutil's ``PATH
    is a named pipe``, PATH in backquotes: the file then named once) is named so too (until
    2026-12-07 only one that followed ``: '`` or ``: "``, dropped).  A path of ``copy``
    (the temporary sibling of ``dest`` that :func:`move_in` moves into, removed by then too)
    is named as it is in ``dest``."""
    def named(path) -> str:
        path = str(path)
        if copy is not None and dest is not None and (
                path == str(copy) or path.startswith(str(copy) + os.sep)):
            return str(dest) + path[len(str(copy)):]
        if folder is None or not path.startswith(str(folder) + os.sep):
            return path
        rest = path[len(str(folder)) + 1:]
        if dest is not None:  # (the copy's own folder's name dropped: DEST is its place)
            return str(dest / rest.partition(os.sep)[2]) if os.sep in rest else str(dest)
        return f"<temporary>/{rest}"

    def within(text: str) -> str:  # (a path of ``folder`` or ``copy`` anywhere in a text)
        heads = [re.escape(str(f)) for f in (copy, folder) if f is not None]
        if not heads:
            return text
        return re.sub(f"(?:{'|'.join(heads)})(?:{re.escape(os.sep)}" + r"[^\s'\"`]*)?",
                      lambda m: named(m.group()), text)

    if isinstance(err, shutil.Error) and err.args and isinstance(err.args[0], list) \
            and err.args[0]:
        failed = err.args[0]
        _, file, why = failed[0]  # (copytree's: the source, its copy, str(the OSError))
        # (the OSError's text without the files it names, ``: 'SRC' -> 'DST'``: the line
        # names the copy once, as it is in --out; until 2026-12-07 three times, once as
        # <temporary>/...)
        why = within(re.split(r": ['\"]", str(why), maxsplit=1)[0])
        others = len(failed) - 1
        more = f" (and {others} other file{'s' * (others != 1)})" if others else ""
        # (a text naming the file itself, shutil's "`PATH` is a named pipe": once)
        where = "" if named(file) in why else f"{named(file)}: "
        return f"{where}{why}{more}".replace("\n", " ")
    return (within(f"{err.strerror or err}")
            + (f" ({named(err.filename)})" if err.filename else ""))


#: The child that rewrites B's NEFF (argv: the NEFF, the variant, the large members' names)
#: in place, in the run's temporary folder: one line on stderr if it fails.
_EDIT = r"""
import sys
from nrtrewrite.neff.container import build_container, read_container, read_file_bytes
neff, how, large = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
try:
    c = read_container(read_file_bytes(neff), verify_hash=False)
    members = dict(c.members)
    for name in large:
        data = bytearray(members.pop(name))
        data[-64 + 8] ^= 0x01  # the last instruction's semaphore_value
        members[name] = bytes(data)
    del data
    order = [n for n in members if n not in large]
    if how == "moved":
        order += large[::-1]
    elif how == "missing":
        order += large[1:]
    else:
        order += large
    with open(neff, "wb") as fh:
        fh.write(build_container(c.header, [(n, members[n]) for n in order]))
except Exception as err:
    sys.exit(f"{type(err).__name__}: {err}".replace("\n", " "))
"""

_WORKER = r"""
import atexit, os, sys, time
t = time.perf_counter()
def _report():
    # VmHWM, not ru_maxrss: the latter keeps the forked parent's pages across the exec
    rss = next(int(l.split()[1]) for l in open("/proc/self/status")
               if l.startswith("VmHWM")) / 1024
    os.write(2, f"\nBENCH {time.perf_counter() - t:.2f} {rss:.0f}\n".encode())
atexit.register(_report)
from nrtrewrite.cli import main
main(["diff", sys.argv[1], sys.argv[2]], prog_name="nrtrewrite")
"""


def measure(a: Path, b: Path, tree: Path = ROOT) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MB) and the last line (the count) of ``diff A B``."""
    res = _run(["-c", _WORKER, str(a), str(b)], tree)
    bench = [line for line in res.stderr.splitlines() if line.startswith("BENCH ")]
    if res.returncode not in (0, 1) or not bench:  # (one line: its last, as lower's above)
        last = next((line for line in reversed(res.stderr.strip().splitlines())
                     if line.strip() and not line.startswith("BENCH ")), "no message")
        raise SystemExit(f"diff {a} {b}: exit {res.returncode}: {last}")
    _, dt, rss = bench[-1].split()
    return float(dt), float(rss), res.stdout.splitlines()[-1]


#: the ``--help`` description, the docstring's first paragraph as a string: ``python -OO``
#: strips docstrings, where argparse read it from (no description until 2026-12-06)
DESCRIPTION = ('Memory and time of ``nrtrewrite diff`` on outputs whose rewritten NEFFs hold large '
               'members (docs/PERFORMANCE.md, "Reading a large or many-member payload").')


def main() -> None:
    ap = argparse.ArgumentParser(description=DESCRIPTION)
    ap.add_argument("--only", help="comma-separated rows (default: %s)" % ",".join(DEFAULT))
    ap.add_argument("--out", type=Path, help="where the models and outputs are written "
                    "(default benchmarks/out/diff/; its parent folder must exist); locked "
                    "while the run lasts: another bench_diff.py or bench_read.py run given "
                    "the same --out is refused, and so is a folder whose file system takes no "
                    "locks")
    ap.add_argument("--keep", action="store_true", help="keep them afterwards (without it, only "
                    "what this run wrote into --out is removed)")
    ap.add_argument("--tree", type=Path, default=ROOT, help="the nrtrewrite source tree whose "
                    "diff is measured (default: this checkout)")
    args = ap.parse_args()
    if args.only is not None and not args.only.strip():  # (until 2026-12-07 the default set)
        ap.error("--only: no row named (leave --only out for the default rows)")
    rows = args.only.split(",") if args.only is not None else list(DEFAULT)
    for row in rows:  # every name checked before anything is written
        try:
            check_row(row)
        except ValueError as err:
            ap.error(f"--only: {err}")
    tree = args.tree.resolve()
    why = check_tree(tree)
    if why:
        ap.error(f"--tree {why}")
    out = checked_out(ap, args.out, OUT)  # (absolute: lower runs in the tree)
    stop_cleanly()  # SIGTERM and SIGHUP too remove what this run wrote, as Ctrl-C does

    before, held = hold_out(out)  # (never removed; --out this run's alone until it ends)
    work = lock = None
    try:
        work, lock = work_folder()  # (removed on success, failure and stop)
        print(f"{'row':>14} {'NEFF MB':>8} | {'diff s':>7} {'peak MB':>8} | count")
        for row in rows:
            raise_lost_stop()  # (a stop Python dropped in a finalizer: outdir.stop_cleanly)
            try:
                a, b = make_pair(row, out, work)
            except OSError as err:  # (its own folders in --out unreadable: a traceback, until
                raise SystemExit(f"{row}: cannot use what is in --out: "  # 2026-12-07)
                                 f"{_why(err, work)}") from None
            size = max(p.stat().st_size for p in a.glob("*.neff")) / 1e6
            dt, rss, last = measure(a, b, tree)
            print(f"{row:>14} {size:8.1f} | {dt:7.2f} {rss:8.0f} | {last}", flush=True)
        raise_lost_stop()
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
            _unlock(lock)
        if not args.keep:
            remove_new(out, before)
        _unlock(held)


def _unlock(fd: int | None) -> None:
    if fd is not None:
        os.close(fd)


def work_folder() -> tuple[Path, int | None]:
    """The run's temporary folder, where the model, A and B are made (:func:`make_pair`),
    made where ``simulate MODEL.neff`` makes its own (:func:`nrtrewrite.bundle.temp_root`),
    and the descriptor that holds its lock (None: the file system has none) until it is
    removed; one line, status 2, where none can be made.  The folders a killed run left
    there are removed first, as simulate's are (:func:`nrtrewrite.bundle.clean_stale_run_temps`:
    until 2026-12-07 nothing removed them)."""
    from nrtrewrite.bundle import (BENCH_DIFF_TEMP_PREFIX, clean_stale_run_temps, lock_folder,
                                   temp_root)

    try:
        root = temp_root()
        clean_stale_run_temps(root, BENCH_DIFF_TEMP_PREFIX)
        work = Path(tempfile.mkdtemp(prefix=BENCH_DIFF_TEMP_PREFIX, dir=root))
        return work, lock_folder(work)
    except OSError as err:  # none usable, or one that fails (a race)
        print(f"bench_diff.py: error: {err.filename or 'TMPDIR'}: cannot make a temporary "
              f"folder to build the model, A and B in: {err.strerror or err}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
