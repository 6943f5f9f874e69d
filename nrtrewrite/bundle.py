"""Write back: the output folder (docs/FORMATS.md §1), atomically.

The folder is built in a temporary sibling (``.<name>.tmp-<pid>-<rand>``),
every file and directory is fsynced, and the folder is then renamed into place
(``renameat2(RENAME_NOREPLACE)``: never over something that appeared meanwhile):
the output appears complete or not at all.  An existing output is replaced only
with ``force``, and only when it is an nrtrewrite output holding nothing else (never a
folder holding the input model), by an atomic exchange
(``renameat2(RENAME_EXCHANGE)``) when the kernel offers it.  A ``lower`` killed
mid-way leaves its temporary sibling; the next ``write_output`` for the same
output removes the siblings whose process is gone: the building process holds an
exclusive ``flock`` on its temporary folder for the whole run, and a sibling is removed
only when that lock can be taken (a ``lower`` in another PID namespace, a container
sharing the folder, has a PID this kernel does not know).  Nothing is written outside
the output's parent folder, never through a symbolic link, and the input is
only ever read (docs/RELIABILITY.md).

Ranks are lowered one at a time (or by a fork-based process pool with
``workers > 1``) and each rank's files are written as soon as they are built, so
memory holds one rank's artifacts per worker, never the whole world's.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import fcntl
import hashlib
import json
import os
import queue
import re
import secrets
import shutil
import signal
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from nrtrewrite import __version__
from nrtrewrite.artifacts import is_our_output as _is_our_output
from nrtrewrite.emit import formats as F
from nrtrewrite.emit.formats import FORMAT_NAME, FORMAT_VERSION, rank_dir_name
from nrtrewrite.emit.legs import end_queue
from nrtrewrite.emit.tiling import cce_max_elements
from nrtrewrite.errors import (LimitError, LoweringError, OutputError, escape_path, json_text,
                               path_inside)
from nrtrewrite.limits import check_plan
from nrtrewrite import jsonin, jsonout, threads
from nrtrewrite.ahead import INTERRUPTED, ForkCall, ForkPool, WorkerLost
from nrtrewrite.ahead import available as fork_available
from nrtrewrite.lower import LoweringPlan, lower_rank, manifest_triggers, world_refusal
from nrtrewrite.neff.container import written_tar_refusal
from nrtrewrite.neff.instructions import LENGTH_DW, stream_words
from nrtrewrite.neff.writer import (  # (STALE_AFTER_S: the age after which an unlocked
    # temporary file or folder is taken for a killed run's whatever its PID says)
    STALE_AFTER_S, _remove_stale_temp, left_by_killed_writer, rewrite_streams, sibling_stem)
from nrtrewrite.topology.model import with_platform

#: The non-pseudo word a trigger becomes (docs/FORMATS.md §9; its layout is F.KICK_DTYPE).
TOPSP_KICK_OPCODE = F.TOPSP_KICK_OPCODE
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2


def default_output(model_path: str | os.PathLike) -> Path:
    p = Path(model_path)
    return p.with_name(p.stem + ".lowered")


def output_neff_name(model_path: str | os.PathLike) -> str:
    """The rewritten NEFF's file name in the output folder: the model's own name, unless it
    is one of the output's own names (:data:`~nrtrewrite.emit.formats.OUTPUT_OWN_NAMES`),
    which gets ``.neff`` added
    (``manifest.json`` -> ``manifest.json.neff``): no model name can collide with the
    output's manifest or rank folders (docs/FORMATS.md §1).  The top-level manifest's
    ``output_neff.name`` always names it."""
    name = Path(model_path).name or "model.neff"
    return name + ".neff" if F.OUTPUT_OWN_NAMES.fullmatch(name) else name


def _json_bytes(obj) -> bytes:
    """``json.dumps(obj, indent=1, sort_keys=True)`` and a newline (:mod:`nrtrewrite.jsonout`
    writes that text several times faster on big manifests)."""
    return (jsonout.dumps(obj, 1) + "\n").encode()


#: With a second core allowed and at least this many triggers, the top-level manifest's
#: ``triggers`` (a HIER plan's: tens of MB of JSON, seconds of encoding) are encoded in a
#: forked process while the ranks are lowered (docs/PERFORMANCE.md).
MANIFEST_AHEAD_TRIGGERS = 32


#: In the top-level manifest, containers this deep (the document is level 0) are written on
#: one line each: a HIER leg's plan and group records (``triggers[i].hier.legs[j].plans[k]``,
#: ``.groups[k]``) and buffers.  ``large128``'s manifest: 9.9 MB in 0.28 s (indented whole:
#: 52 MB in 1.6 s; docs/FORMATS.md §1.1).
MANIFEST_COMPACT_DEPTH = 7


def _top_json(obj, level: int = 0) -> str:
    """The top-level manifest's text of ``obj`` nested ``level`` deep (docs/FORMATS.md §1.1)."""
    return jsonout.dumps_nested(obj, level, 1, compact_from=MANIFEST_COMPACT_DEPTH)


def _triggers_json(plan: LoweringPlan) -> bytes:
    """The text of the top-level manifest's ``triggers`` value, as it appears in it."""
    return _top_json(manifest_triggers(plan), 1).encode()


#: A SHA-256 as the manifests write it (64 hex digits): what the hashes to come take in the
#: top-level manifest encoded before the ranks are lowered (:class:`_TopManifest`).
_SHA_STAND_IN = "0" * 64


def _digits_below(n: int) -> int:
    """The decimal digits of the numbers 0 .. n - 1 together."""
    total, width, lo, hi = 0, 1, 0, 10
    while lo < n:
        total += (min(n, hi) - lo) * width
        lo, hi, width = hi, hi * 10, width + 1
    return total


def _triggers_size_at_least(plan: LoweringPlan) -> int:
    """A lower bound of the bytes of the top-level manifest's ``triggers`` text, from the
    plan alone (no encoding): each trigger lists its ``replica_group``, n distinct ranks from
    0 (NEFF-LIKE.md: a rank at most once in a group), so at least the digits of 0 .. n - 1,
    n - 1 separators and the brackets."""
    return sum(_digits_below(len(tp.group)) + len(tp.group) + 1 for tp in plan.triggers)


class _TopManifest:
    """The top-level manifest (docs/FORMATS.md §1.1) encoded before any rank is lowered,
    with marks where the rewritten NEFF's hash, the rank manifests' and, when a forked
    process encodes them while the ranks are lowered, the ``triggers`` go; :meth:`text`
    puts them in (the same bytes as encoding the whole document).  ``size``: the bytes of
    the manifest to be written, exact when ``triggers`` is given (each hash to come has its
    64 hex digits), else ``exact`` is False and it counts the triggers at
    :func:`_triggers_size_at_least` (docs/RELIABILITY.md §4).

    A mark is a string with a random token: the model's names are the manifest's too, and
    a var named as a fixed mark (``"\\u0000nrtrewrite:triggers"`` in its JSON) stood twice
    in the text, an internal error."""

    _KEYS = ("output_neff.sha256", "rank_manifests", "triggers")

    def __init__(self, plan: LoweringPlan, ranks: list[int], neff_name: str,
                 triggers: bytes | None):
        self.triggers = triggers
        token = secrets.token_hex(16)
        mark = {k: f"\x00nrtrewrite:{token}:{k}" for k in self._KEYS}
        doc = build_manifest(plan, ranks, mark["rank_manifests"], neff_name,
                             mark["output_neff.sha256"], triggers=mark["triggers"])
        text = _top_json(doc)
        mark_text = {k: jsonout.dumps(m) for k, m in mark.items()}
        if any(text.count(t) != 1 for t in mark_text.values()):
            raise RuntimeError("each mark must stand exactly once in the manifest")
        self.order = sorted(self._KEYS, key=lambda k: text.index(mark_text[k]))
        self.pieces: list[bytes] = []
        at = 0
        for k in self.order:
            i = text.index(mark_text[k])
            self.pieces.append(text[at:i].encode())
            at = i + len(mark_text[k])
        self.pieces.append(text[at:].encode())
        hashes = dict.fromkeys((rank_dir_name(r) for r in ranks), _SHA_STAND_IN)
        self.exact = triggers is not None
        self.size = (sum(map(len, self.pieces)) + len(b"\n")
                     + len(jsonout.dumps(_SHA_STAND_IN)) + len(_top_json(hashes, 1))
                     + (len(triggers) if triggers is not None
                        else _triggers_size_at_least(plan)))

    def text(self, rank_manifests: dict[str, str], neff_sha: str,
             triggers: bytes | None = None) -> bytes:
        """The manifest's bytes, with ``triggers`` (default: those given ahead)."""
        values = {"output_neff.sha256": jsonout.dumps(neff_sha).encode(),
                  "rank_manifests": _top_json(rank_manifests, 1).encode(),
                  "triggers": self.triggers if triggers is None else triggers}
        out = [self.pieces[0]]
        for k, piece in zip(self.order, self.pieces[1:]):
            out += [values[k], piece]
        out.append(b"\n")
        return b"".join(out)


@contextlib.contextmanager
def _naming(path: Path):
    """An OS error of writing ``path`` that names no file (a ``write``, ``flush`` or
    ``fsync`` refused part way: ENOSPC of a full disk, EFBIG of a file-size limit) names
    ``path``: the error line says which file (``... (OUT/rank-0002/sem.bin)``, docs/CLI.md
    "lower"; until 2026-12-07 only the output folder).  ENOMEM and EAGAIN stay unnamed:
    memory or a process refused, not the file (:func:`write_output`)."""
    try:
        yield
    except OSError as err:
        if err.filename is None and err.errno not in (errno.EAGAIN, errno.ENOMEM):
            err.filename = str(path)
        raise


def _write_file(path: Path, data: bytes, sync: bool = True) -> None:
    """Write bytes and fsync (unless ``sync`` is False: then the caller has it fsynced,
    :class:`_Syncer`); a rank's record arrays go through :class:`_RankFiles`."""
    with _naming(path), open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        if sync:
            os.fsync(fh.fileno())


def _fsync_open(path: Path, flags: int) -> None:
    fd = os.open(path, os.O_RDONLY | flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    _fsync_open(path, os.O_DIRECTORY)


def _fsync_path(path: Path) -> None:
    """fsync a file or folder by its path (any descriptor of a file flushes its data; an
    error of a writeback nobody has seen yet is reported to it, Linux 4.16 and later)."""
    _fsync_open(path, os.O_DIRECTORY if path.is_dir() else 0)


class _Syncer:
    """fsyncs the files and folders of finished ranks on a thread, in the order given, while
    the next ranks are lowered: an fsync waits for the disk and holds no lock, so neither the
    lowering nor a pool worker waits for it.  :meth:`drain` waits for every fsync and raises
    the first error; the output is renamed into place only after it (docs/RELIABILITY.md)."""

    def __init__(self) -> None:
        self.queue: queue.Queue = queue.Queue()
        self.error: OSError | None = None
        self.thread: threading.Thread | None = None

    def add(self, paths: Iterable[Path]) -> None:
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="nrtrewrite-fsync",
                                           daemon=True)
            threads.start(self.thread)  # (never waits forever: nrtrewrite.threads)
        for p in paths:
            self.queue.put(p)

    def _run(self) -> None:
        while (p := self.queue.get()) is not None:
            if self.error is None:
                try:
                    _fsync_path(p)
                except FileNotFoundError:  # written, then gone: not ours to lose quietly
                    self.error = OSError(errno.ENOENT, "removed by another process before it "
                                         "was fsynced", str(p))
                except OSError as err:  # fsync's own error names no file: name it
                    self.error = err if err.filename else OSError(err.errno, err.strerror, str(p))

    def abandon(self) -> None:
        """Stop fsyncing, without waiting (a failed run's cleanup): the thread skips what is
        left and ends (:func:`end_queue`: no lock waited for)."""
        self.error = self.error or OSError("abandoned")
        if self.thread is not None:
            end_queue(self.queue)
            self.thread = None

    def drain(self) -> None:
        """Wait until every path given is fsynced; raise the first error."""
        if self.thread is not None:
            self.queue.put(None)
            self.thread.join()
            self.thread = None
        if self.error is not None:
            err, self.error = self.error, None
            raise err


def _rank_paths(rdir: Path) -> list[Path]:
    """What a rank folder holds, in the order it is fsynced: its files, then the folder."""
    return [rdir / name for name in F.ARTIFACTS] + [rdir / "manifest.json", rdir]


def kick_words(model) -> int:
    """How many TOPSP_KICK words (opcode 0xA2, length_dw 16: what :func:`rewritten_neff`
    puts in place of a trigger) the model's streams hold."""
    n = 0
    for sg in model.subgraphs:
        for engine in sg.engines:
            w = stream_words(sg.streams[engine])
            n += int(np.count_nonzero((w["opcode"] == TOPSP_KICK_OPCODE)
                                      & (w["length_dw"] == LENGTH_DW)))
    return n


#: What a model without collective triggers means to each command (its warning's middle).
NOTHING_TO = {"lower": "nothing to lower, every rank file is empty",
              "explain": "nothing to explain", "schedule": "no legs to show",
              "simulate": "nothing to simulate, no collective is checked"}


#: Commands whose own output says that the model has no triggers: they warn only when it
#: looks already lowered.
SAY_NO_TRIGGERS = frozenset({"explain", "schedule"})


def no_trigger_warning(model, command: str = "lower") -> str | None:
    """The warning of ``command`` (:data:`NOTHING_TO`) for a model without collective
    triggers, saying when it looks already lowered (an output's rewritten NEFF given
    instead of the original model); None when the model has triggers, or when ``command``
    says so itself (:data:`SAY_NO_TRIGGERS`) and the model does not look lowered."""
    if model.triggers:
        return None
    kicks = kick_words(model)
    if not kicks and command in SAY_NO_TRIGGERS:
        return None
    note = (f"; it holds {kicks} TOPSP_KICK (0xA2) word{'s' if kicks != 1 else ''}: it looks "
            "already lowered (give the original model)" if kicks else "")
    return f"{escape_path(model.path)}: no collective triggers: {NOTHING_TO[command]}{note}"


def kick_word(sync: bytes, spad_index: int, word: int, trigger: int) -> bytes:
    """The TOPSP_KICK word replacing a trigger word (``sync``: its bytes 4..11, kept)."""
    return F.kick_words(np.frombuffer(sync, F.KICK_SYNC_DTYPE), spad_index, word,
                        trigger).tobytes()


def rewritten_neff(plan: LoweringPlan, leader_spad_index: dict[int, int]) -> bytes:
    """The input NEFF with every trigger replaced by TOPSP_KICK words."""
    model = plan.model
    new_streams: dict[tuple[str, str], bytes] = {}
    for sg in model.subgraphs:
        for engine in sg.engines:
            trigs = [t for t in model.triggers if t.subgraph == sg.name and t.engine == engine]
            if not trigs:
                continue
            stream = np.frombuffer(sg.streams[engine], F.KICK_DTYPE).copy()
            kicks = [(t.index + w, leader_spad_index[t.ordinal], w, t.ordinal)
                     for t in trigs for w in range(t.num_words)]
            at, spad_index, word, trigger = (np.array(c, np.int64) for c in zip(*kicks))
            stream[at] = F.kick_words(stream["sync"][at], spad_index, word, trigger)
            new_streams[(sg.name, engine)] = stream.tobytes()
    return rewrite_streams(model, new_streams)


# --- process pool plumbing (fork: the plan is inherited, never pickled) --------------------
_POOL_PLAN: LoweringPlan | None = None
_POOL_DIR: Path | None = None


def _lower_and_write(rank: int) -> tuple[int, bytes]:
    assert _POOL_PLAN is not None and _POOL_DIR is not None
    return _write_rank(_POOL_PLAN, _POOL_DIR, rank)


def _write_rank(plan: LoweringPlan, tmp: Path, rank: int, compose_ahead: bool = False
                ) -> tuple[int, bytes]:
    rdir = tmp / rank_dir_name(rank)
    rdir.mkdir()
    files = _RankFiles(rdir)
    try:
        out = lower_rank(plan, rank, sink=files.write, compose_ahead=compose_ahead)
        files.close(F.ARTIFACTS, sync=False)
    finally:
        files.abort()
    man = _json_bytes(out.manifest)
    _write_file(rdir / "manifest.json", man, sync=False)
    return rank, man  # the writing process fsyncs the folder (_rank_paths, _Syncer)


#: ``os.posix_fadvise`` where the platform has it: ``POSIX_FADV_DONTNEED`` on a written range
#: starts its writeback without waiting for it (Linux) and drops the pages already clean.
_FADV_DONTNEED = getattr(os, "posix_fadvise", None) if hasattr(os, "POSIX_FADV_DONTNEED") else None


class _RankFiles:
    """The artifact files of one rank folder, written record array by record array as
    :func:`nrtrewrite.lower.lower_rank` produces them (memory never holds a whole rank)."""

    #: Every this many bytes written to a file, its kernel writeback is started (and the
    #: written pages are let go of): the disk works while the rank is lowered, and the
    #: fsync at the end waits for the rest only (docs/PERFORMANCE.md "Writeback").
    WRITEBACK_BYTES = 4 << 20

    def __init__(self, rdir: Path):
        self.rdir = rdir
        self.open: dict[str, object] = {}
        #: name -> [bytes written, bytes handed to the writeback so far (-1: advice refused)]
        self.written: dict[str, list[int]] = {}

    def write(self, name: str, arr) -> None:
        with _naming(self.rdir / name):
            fh = self.open.get(name)
            if fh is None:
                fh = self.open[name] = open(self.rdir / name, "wb")
                self.written[name] = [0, 0]
            fh.write(arr.data)
            w = self.written[name]
            w[0] += arr.nbytes
            if w[0] - w[1] >= self.WRITEBACK_BYTES:
                fh.flush()
                self._advise(name, fh)

    def _advise(self, name: str, fh) -> None:
        """Start the writeback of what file ``name`` got since the last advice (flushed)."""
        w = self.written[name]
        if w[0] > w[1] >= 0 and _FADV_DONTNEED is not None:
            try:
                _FADV_DONTNEED(fh.fileno(), w[1], w[0] - w[1], os.POSIX_FADV_DONTNEED)
                w[1] = w[0]
            except OSError:  # advice only: a file system that refuses it gets none again
                w[1] = -1

    def close(self, names: Iterable[str], sync: bool = True) -> None:
        """Create the files that got no record, flush and fsync every file (``sync`` False:
        start the writeback of what is left, the caller fsyncs them), close them."""
        for name in names:
            if name not in self.open:
                self.open[name] = open(self.rdir / name, "wb")
                self.written[name] = [0, 0]
        for name, fh in self.open.items():
            with _naming(self.rdir / name):
                fh.flush()
                if sync:
                    os.fsync(fh.fileno())
                else:
                    self._advise(name, fh)
        self.abort()

    def abort(self) -> None:
        for fh in self.open.values():
            fh.close()
        self.open = {}


@functools.lru_cache(maxsize=None)
def _renameat2():
    """libc's renameat2, or None: looked up in the process's own symbols, where the C
    library is loaded already (``ctypes.util.find_library`` would run ``ldconfig`` in a
    subprocess on every ``lower``, and where that does not list libc, gcc and ld with
    temporary files in TMPDIR: nothing may be written outside the output's parent)."""
    try:
        return getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    except (OSError, TypeError):
        return None


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths; False when the kernel or libc cannot."""
    fn = _renameat2()
    if fn is None:
        return False
    AT_FDCWD = -100
    rc = fn(AT_FDCWD, os.fsencode(str(a)), AT_FDCWD, os.fsencode(str(b)), RENAME_EXCHANGE)
    if rc != 0:
        err = ctypes.get_errno()
        if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
            return False
        raise OSError(err, os.strerror(err), str(b))
    return True


def _rename_noreplace(a: Path, b: Path) -> None:
    """rename(a, b) that fails when ``b`` appeared meanwhile (``RENAME_NOREPLACE`` when the
    kernel offers it; a plain rename, which cannot replace a non-empty folder, otherwise)."""
    fn = _renameat2()
    if fn is not None:
        AT_FDCWD = -100
        rc = fn(AT_FDCWD, os.fsencode(str(a)), AT_FDCWD, os.fsencode(str(b)), RENAME_NOREPLACE)
        if rc == 0:
            return
        err = ctypes.get_errno()
        if err not in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
            raise OSError(err, os.strerror(err), str(b))
    if b.exists() or b.is_symlink():
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(b))
    os.rename(a, b)


#: Temporary siblings of an output folder NAME: ``.NAME.tmp-PID-HEX`` while it is built,
#: ``.NAME.old-PID-HEX`` for a replaced output when the kernel cannot exchange atomically
#: (NAME shortened where the whole would be too long a name: ``_sibling``).
#: What follows ``.NAME`` in a temporary sibling's name, matched whole (``fullmatch``: a
#: ``$`` also matched before a final newline, and a user's folder ``.NAME.tmp-PID-HEX\n``
#: was removed, until 2026-12-05); NAME itself is compared literally (a NAME holding a
#: newline was never matched by the old pattern's ``.+``, its stale siblings kept).
_TEMP_SIBLING_TAIL = re.compile(r"\.(?:tmp|old)-(?P<pid>[0-9]+)-[0-9a-f]{8}", re.ASCII)

#: The bytes after NAME in a temporary sibling's name: ``.tmp-``, a PID of up to 10 digits,
#: ``-`` and 8 hex digits.
_SIBLING_TAIL = 5 + 10 + 1 + 8


def _sibling(out: Path, kind: str) -> Path:
    """A new temporary sibling of ``out``: ``.NAME.KIND-PID-HEX`` (``tmp``, ``old``)."""
    return out.parent / (f".{sibling_stem(out.name, _SIBLING_TAIL)}.{kind}-{os.getpid()}-"
                         f"{secrets.token_hex(4)}")




def _open_folder(path: str | os.PathLike) -> int | None:
    """A descriptor of the real folder ``path`` (never through a link), or None where it
    cannot be opened (gone, a link, not a folder, not readable)."""
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None


def _try_lock(path: str | os.PathLike) -> tuple[int | None, str]:
    """Open the real folder ``path`` (never through a link) and try its exclusive ``flock``
    without waiting: ``(fd, "taken")``; ``(fd, "no locks")`` where the file system has none;
    ``(None, "held")`` when another process holds it (a live build); ``(None, "absent")``
    when it cannot be opened (gone, a link, not a folder, not readable).  The caller closes
    the descriptor (which releases the lock)."""
    fd = _open_folder(path)
    if fd is None:
        return None, "absent"
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None, "held"
    except OSError:
        return fd, "no locks"
    return fd, "taken"


def lock_folder(path: Path) -> int | None:
    """Hold an exclusive ``flock`` on the folder ``path``: the mark of a live build, which
    :func:`clean_stale_temps` leaves alone whatever its PID says.  Returns the descriptor
    that holds it (closing it, or the process ending, releases the lock; forked children
    share it), or None where the file system has no such locks (then the PID alone
    tells)."""
    fd, state = _try_lock(path)
    if state != "taken":
        unlock_folder(fd)
        return None
    return fd


def unlock_folder(fd: int | None) -> None:
    if fd is not None:
        os.close(fd)


def _remove_if_stale(path: str, pid: int) -> bool:
    """Remove the temporary folder ``path`` of the process ``pid`` when nothing builds it any
    more (``writer.left_by_killed_writer``, the rule of a temporary file's): its lock can be
    taken (a live build holds it, :func:`lock_folder`), and ``pid`` is no running process
    here or the folder is more than :data:`STALE_AFTER_S` old (a build killed in another
    PID namespace: its PID may be a live process of this one, kthreadd's 2 say; the age
    covers the moment between a build's ``mkdir`` and its lock), and never this process's
    own (its one caller, :func:`clean_stale_temps`, skips it before).  Where the file system
    has no locks, the PID alone decides."""
    fd = _open_folder(path)
    if fd is None:
        return False  # not a folder to remove
    try:
        if not left_by_killed_writer(fd, pid):
            return False  # a live build's
        shutil.rmtree(path, ignore_errors=True)  # (the lock held meanwhile)
        return True
    finally:
        os.close(fd)


def clean_stale_temps(out: str | os.PathLike) -> list[Path]:
    """Remove the temporary siblings of ``out`` left by a ``lower`` that was killed.

    Only real folders named exactly ``.NAME.tmp-PID-HEX`` / ``.NAME.old-PID-HEX`` that no
    live process builds are removed (:func:`_remove_if_stale`: a concurrent ``lower`` of
    the same output keeps its own, in this PID namespace or another); symbolic links and
    anything else are left alone.  Returns what was removed."""
    out = Path(out)
    parent = out.parent if str(out.parent) else Path(".")
    removed = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    head = "." + sibling_stem(out.name, _SIBLING_TAIL)
    for entry in entries:
        if not entry.name.startswith(head):
            continue
        m = _TEMP_SIBLING_TAIL.fullmatch(entry.name, len(head))
        if not m:
            continue
        pid = int(m["pid"])
        if pid == os.getpid():
            continue
        if _remove_if_stale(entry.path, pid):
            removed.append(Path(entry.path))
    return removed


#: ``simulate MODEL.neff`` lowers into a folder of this prefix under the folder
#: :func:`temp_root` gives (``TMPDIR`` where Python can write there).
SIMULATE_TEMP_PREFIX = "nrtrewrite-simulate-"

#: The whole name ``tempfile.mkdtemp(prefix=SIMULATE_TEMP_PREFIX)`` gives: the prefix and 8
#: characters of CPython's ``tempfile._RandomNameSequence`` alphabet.  Only such names are
#: a killed run's (a user's ``nrtrewrite-simulate-my-results`` was removed, until
#: 2026-12-05).
_SIMULATE_TEMP_NAME = re.compile(re.escape(SIMULATE_TEMP_PREFIX) + r"[a-z0-9_]{8}", re.ASCII)

#: The prefixes of the other tools' temporary folders under :func:`temp_root`, which a
#: killed run leaves as a killed ``simulate MODEL.neff`` leaves its own, and removed the
#: same way (:func:`clean_stale_run_temps`): ``python -m nrtrewrite.golden``'s and
#: benchmarks/bench_diff.py's.
GOLDEN_TEMP_PREFIX = "nrtrewrite-golden-"
BENCH_DIFF_TEMP_PREFIX = "nrtrewrite-bench-diff-"


def temp_root() -> str:
    """The folder temporary folders are made in, found afresh from the environment at each
    call: the first of ``TMPDIR``, ``TEMP``, ``TMP``, then /tmp, /var/tmp, /usr/tmp and the
    working folder (``tempfile``'s list, in its order) Python can make a file in, tried as
    ``tempfile.gettempdir`` tries them.  Not ``gettempdir`` itself: it keeps the first folder
    it finds for the whole process (``tempfile.tempdir``), so a program calling
    ``nrtrewrite.cli.main`` that removed that folder or changed ``TMPDIR`` got a command
    refused, or a folder where ``TMPDIR`` no longer points (until 2026-12-07); nor is that
    global read or set here.  Where no folder can be written, an OSError for one error
    line: ``filename`` the first folder tried (``TMPDIR``'s value when it is set),
    ``strerror`` every folder tried, escaped (``gettempdir``'s own has no filename and lists
    them as a Python list; until 2026-12-06 ``simulate MODEL.neff`` called it outside its
    error handling: an internal error, exit 70).  On a Python whose ``tempfile`` lacks the
    private ``_candidate_tempdir_list``, ``gettempdir`` as it is, the variables' folders
    named."""
    candidates = getattr(tempfile, "_candidate_tempdir_list", None)
    if callable(candidates):
        tried = list(dict.fromkeys(candidates()))
        for folder in tried:
            if _can_make_a_file_in(folder):
                return folder if folder == os.curdir else os.path.abspath(folder)
        exc = FileNotFoundError(errno.ENOENT, "No usable temporary directory found")
    else:
        try:
            return tempfile.gettempdir()
        except FileNotFoundError as err:
            if err.filename is not None:
                raise
            exc = err
        tried = list(dict.fromkeys(os.environ.get(k) for k in ("TMPDIR", "TEMP", "TMP")
                                   if os.environ.get(k)))
    # (each folder's label: the first variable Python reads that gives it, so the dict
    # is filled in the reverse order and a later key wins)
    env = {os.environ.get(k): k for k in ("TMP", "TEMP", "TMPDIR") if os.environ.get(k)}
    names = ", ".join(escape_path(d) + (f" ({env[d]})" if d in env else "") for d in tried)
    raise FileNotFoundError(exc.errno, f"none of the folders tried can be written: {names}",
                            tried[0] if tried else None) from None


#: The name of :func:`_can_make_a_file_in`'s probe file: ``.nrtrewrite-probe-PID-XXXXXXXX``
#: (the prober's PID, ``mkstemp``'s 8 characters), or the shape from before 2026-12-07 with
#: no PID, ``.nrtrewrite-probe-XXXXXXXX``, matched whole (``-`` is none of mkstemp's
#: characters, so the two never overlap).
PROBE_PREFIX = ".nrtrewrite-probe-"
_PROBE_NAME = re.compile(re.escape(PROBE_PREFIX) + r"(?:(?P<pid>[0-9]{1,10})-)?[a-z0-9_]{8}",
                         re.ASCII)


def _can_make_a_file_in(folder: str) -> bool:
    """Whether a file can be made, written and removed in ``folder``, as
    ``tempfile._get_default_tempdir`` tells a usable temporary folder: a file of a random
    name made exclusively (``mkstemp``, given the folder: ``tempfile.tempdir`` is not read)
    and 4 bytes written; any OSError (not there, read-only, not searchable, full) says
    no.  Its name holds this process's PID (:data:`_PROBE_NAME`): one a SIGKILL left
    between ``mkstemp`` and ``unlink`` is removed by a later run's
    :func:`clean_stale_run_temps` (until 2026-12-07 it stayed for good)."""
    try:
        fd, name = tempfile.mkstemp(prefix=f"{PROBE_PREFIX}{os.getpid()}-", dir=folder)
    except OSError:
        return False
    try:
        try:
            os.write(fd, b"blat")
        finally:
            os.close(fd)
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)
    return True


def temp_folder_refusal(exc: OSError) -> OutputError:
    """The one line of a temporary folder ``simulate MODEL.neff`` or ``nrtrewrite.golden``
    cannot make to lower the model into (:func:`temp_root` found none, or ``mkdtemp`` failed
    there), naming the folder it tried (docs/SIMULATOR.md §1)."""
    return OutputError("cannot make a temporary folder to lower the model into: "
                       f"{exc.strerror or exc}",
                       file=exc.filename or os.environ.get("TMPDIR") or "TMPDIR")


def clean_stale_simulate_temps(tmpdir: str | os.PathLike) -> list[Path]:
    """Remove the folders a killed ``simulate MODEL.neff`` left in ``tmpdir``: real folders
    named exactly as ``mkdtemp`` names them (:data:`_SIMULATE_TEMP_NAME`), of this user,
    older than :data:`STALE_AFTER_S`, whose lock (:func:`lock_folder`, held by a live run)
    can be taken.  Where the file system has no locks nothing is removed.  Returns what was."""
    return clean_stale_run_temps(tmpdir, SIMULATE_TEMP_PREFIX)


def clean_stale_run_temps(tmpdir: str | os.PathLike, prefix: str | None) -> list[Path]:
    """:func:`clean_stale_simulate_temps` for the folders ``tempfile.mkdtemp(prefix=prefix)``
    makes (the prefix and 8 characters of ``[a-z0-9_]``): those a killed run of the tool
    that makes them left (a run holds its folder's lock, :func:`lock_folder`, until it has
    removed it).  The probe files :func:`temp_root` makes (:data:`_PROBE_NAME`) that a
    killed run left are removed too, by the rule of a killed writer's temporary file
    (``writer._remove_stale_temp``: a regular file of this user whose PID is no running
    process, or unchanged for :data:`STALE_AFTER_S`; one of the shape without a PID,
    unchanged for an hour): a probe lives for a write of 4 bytes, and one removed under a
    live prober costs it nothing (its ``unlink``'s error is passed over).  ``prefix`` None:
    the probes only."""
    name = None if prefix is None else re.compile(re.escape(prefix) + r"[a-z0-9_]{8}",
                                                  re.ASCII)
    removed: list[Path] = []
    try:
        entries = list(os.scandir(tmpdir))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        if (probe := _PROBE_NAME.fullmatch(entry.name)) is not None:
            pid = probe["pid"]
            if _remove_stale_temp(entry.path, None if pid is None else int(pid)):
                removed.append(Path(entry.path))
            continue
        if name is None or not name.fullmatch(entry.name):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if (not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid()
                or now - st.st_mtime < STALE_AFTER_S):
            continue
        fd, state = _try_lock(entry.path)
        try:
            if state == "taken":  # (held: a live run's; no locks: cannot tell)
                shutil.rmtree(entry.path, ignore_errors=True)
                removed.append(Path(entry.path))
        finally:
            unlock_folder(fd)
    return removed


#: A rank folder of an output (:func:`nrtrewrite.emit.formats.rank_dir_name`).
_RANK_DIR = re.compile(r"rank-[0-9]{4,}", re.ASCII)
#: What a rank folder holds: its manifest and the artifact files.
_RANK_FILES = frozenset(F.ARTIFACTS) | {"manifest.json"}
#: The top-level manifest's ``output_neff.name`` as :class:`_TopManifest` lays it out (for a
#: manifest too big to parse only to find it: read in chunks until it is found).
_NEFF_NAME_TEXT = re.compile(rb'\n "output_neff": \{\n  "name": ("(?:[^"\\\n]|\\.)*")')
_MANIFEST_CHUNK = 1 << 20


def _manifest_neff_name(manifest: Path) -> str | None:
    """The ``output_neff.name`` of an output's ``manifest.json`` (None: none, or unreadable).
    A manifest up to :data:`_MANIFEST_CHUNK` is parsed; a bigger one (tens of MB for a HIER
    plan) is searched chunk by chunk for the name in our layout (sorted keys: it comes
    before ``triggers``, in the first megabyte in practice)."""
    try:
        with open(manifest, "rb") as fh:
            head = fh.read(_MANIFEST_CHUNK)
            rest = fh.read(1)
            if not rest:
                try:
                    doc = jsonin.loads(head, strict_objects=False)
                except (ValueError, RecursionError):
                    return None
                neff = doc.get("output_neff") if isinstance(doc, dict) else None
                name = neff.get("name") if isinstance(neff, dict) else None
                return name if isinstance(name, str) else None
            text = head + rest
            while True:
                m = _NEFF_NAME_TEXT.search(text)
                if m:
                    try:
                        name = json.loads(m[1])
                    except ValueError:
                        return None
                    return name if isinstance(name, str) else None
                more = fh.read(_MANIFEST_CHUNK)
                if not more:
                    return None
                text = text[-8192:] + more  # a match straddling two chunks is kept whole
    except OSError:
        return None


#: The output folders :func:`write_output` names absolutely (``-o .``, ``-o t1/..``: it
#: renames the folder by its name in its parent), each mapped to the path as given, which its
#: messages name (docs/CLI.md "Paths in the output"; until 2026-12-07 ``/tmp/x/paths holds
#: the input model ...`` for ``-o .``).  Filled while a write_output runs.
_GIVEN: dict[str, str] = {}


def _given(out: str | os.PathLike) -> str:
    """The output folder ``out`` as the command line gave it (:data:`_GIVEN`)."""
    text = os.fspath(out)
    return _GIVEN.get(text, text)


def _shown(out: str | os.PathLike) -> str:
    """:func:`_given`, escaped as a message names a path (``errors.escape_path``)."""
    return escape_path(_given(out))


def _working_folder_inside(out: Path) -> str | None:
    """Why ``out`` must not be replaced for the working folder's sake, or None: ``out`` is
    the working folder or a folder above it (by identity, as :func:`_model_inside`).
    Replaced, the shell that ran the command was left in a deleted folder (``lower M -o .
    --force`` in an empty folder; until 2026-12-07)."""
    try:
        out_st = os.stat(out)
        here = Path(os.getcwd())
    except (OSError, RuntimeError):
        return None
    folder = _folder_among(out_st, (here, *here.parents))
    if folder is None:
        return None
    what = "is" if folder == here else "holds"
    return (f"{_shown(out)} {what} the working folder; nrtrewrite never replaces "
            "the folder it runs in nor one above it: choose another output folder")


def _folder_among(out_st: os.stat_result, folders: Iterable[Path]) -> Path | None:
    """The first of ``folders`` that is the folder ``out_st`` describes, by identity (a
    folder that cannot be looked at passed over), or None."""
    for folder in folders:
        try:
            if _same_file(os.stat(folder), out_st):
                return folder
        except OSError:
            continue
    return None


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _model_inside(out: Path, model: str | None) -> str | None:
    """Why replacing or deleting ``out`` would touch the input model, or None: the model
    lies inside ``out`` (by its real path, or by identity: ``out`` is one of the folders
    the model's real path goes through, whatever path or bind mount names it)."""
    if not model:
        return None
    try:
        out_st = os.stat(out)
        real = Path(model).resolve()
        os.stat(real)
    except (OSError, RuntimeError):
        return None  # no such model file (a model read from bytes): nothing to protect
    if _folder_among(out_st, real.parents) is None:
        return None
    return (f"{_shown(out)} holds the input model {escape_path(model)}; "
            "nrtrewrite never replaces nor deletes its input: choose another output folder")


def _foreign_entry(out: Path, model: str | None, model_st: os.stat_result | None = None
                   ) -> str | None:
    """Why ``out`` (an nrtrewrite output by its manifest, or empty) must not be replaced, or
    None: the first entry an output of ours does not hold (anything but ``manifest.json``,
    the NEFF its manifest names and ``rank-NNNN`` folders holding only their manifest and
    artifact files, each a regular file or a real folder), or a file that is the input model
    under another name (a hard link).  ``model_st``: the model's identity when taken before
    (the folder has been moved: the model's path may no longer name it)."""
    if model_st is None:
        try:
            model_st = os.stat(model) if model else None
        except OSError:
            model_st = None
    neff = _manifest_neff_name(out / "manifest.json")
    neff = F.name_on_disk(neff) if neff else neff

    def why(entry: os.DirEntry, rel: str, files: Iterable[str]) -> str | None:
        if entry.name in files and entry.is_file(follow_symlinks=False):
            if model_st is not None and entry.inode() == model_st.st_ino and _same_file(
                    entry.stat(follow_symlinks=False), model_st):
                return (f"{_shown(out)} holds the input model {escape_path(model)} "
                        f"as {escape_path(rel)} (a hard link); nrtrewrite never replaces nor "
                        "deletes its input: choose another output folder")
            return None
        return (f"{_shown(out)} holds {escape_path(rel)}, which an nrtrewrite output "
                "does not (only manifest.json, the rewritten NEFF its manifest names and "
                "rank-NNNN folders of artifacts); refusing to replace it")

    top_files = {"manifest.json"} | ({neff} if neff else set())
    listing = out  # the folder being listed: named when it cannot be
    try:
        entries = sorted(os.scandir(out), key=lambda e: e.name)
        for entry in entries:
            if _RANK_DIR.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False):
                listing = Path(entry.path)
                for sub in sorted(os.scandir(listing), key=lambda e: e.name):
                    if (refusal := why(sub, f"{entry.name}/{sub.name}", _RANK_FILES)):
                        return refusal
                listing = out
            elif (refusal := why(entry, entry.name, top_files)):
                return refusal
    except OSError as err:
        it = "it" if listing == out else f"its folder {escape_path(listing.name)}"
        return (f"{_shown(out)}: cannot list {it} ({err.strerror or err}); refusing to "
                "replace it")
    return None


def write_output(plan: LoweringPlan, out_dir: str | os.PathLike, *, ranks: Iterable[int] | None,
                 force: bool = False, workers: int = 1,
                 progress: Callable[[int, int], None] | None = None,
                 warn: Callable[[str], None] | None = None,
                 on_placed: Callable[[Path], None] | None = None,
                 before_placing: Callable[[], None] | None = None,
                 command: str = "lower") -> Path:
    """Lower ``ranks`` (default: the whole world) and write the output folder atomically.
    ``on_placed(out)`` is called the moment ``out`` is the new output, complete (a stop from
    then on leaves it whole: the CLI says so, ``cli.note_placed``); ``before_placing()``
    just before it is put in place, complete (the CLI raises there a stop Python dropped
    meanwhile, ``cli.raise_lost_stop``: the temporary folder is then removed as for any stop).
    ``command``: the CLI command lowering, whose options a killed worker's advice names
    (:data:`LOST_WORKER_HINTS`).

    Refused before anything is written (:class:`OutputError`): an existing ``out`` holding
    the input model (:func:`_model_inside`); an existing ``out`` without ``force``; with
    ``force``, an existing ``out`` that is not a folder, or not an nrtrewrite output (no
    ``manifest.json`` of ours, and not empty), or one holding anything an output of ours
    does not (:func:`_foreign_entry`); a symbolic link at ``out`` (we never write through
    one nor replace it); a missing parent folder (or a file in its place).
    Temporary siblings left by a killed earlier run are removed first
    (:func:`clean_stale_temps`).  Every hard limit of the plan is checked first
    (:func:`nrtrewrite.limits.check_plan`).  An OS error while writing (disk full, no
    permission; of the checks too: a folder on the way that cannot be searched) is an
    :class:`OutputError` naming ``out``; on it and on any other exception (a bug, Ctrl-C,
    SIGTERM raised as ``cli.Terminated``) the partial temporary folder is removed.
    """
    out = Path(out_dir)
    if os.path.basename(os.path.normpath(out_dir)) in ("", ".", ".."):
        # `-o .` or `-o ..`: the folder is renamed and exchanged by its name in its parent,
        # which "." and ".." do not give (rename(".") is EBUSY): name it absolutely
        out = Path(os.path.abspath(out_dir))
    if str(out) != os.fspath(out_dir):  # named as given all the same (`./`, `o/`)
        _GIVEN[str(out)] = os.fspath(out_dir)
    if plan.only is not None:  # (schedule --trigger's plan of some triggers: shown only)
        raise ValueError("a plan of some triggers (plan_lowering's only=) cannot be "
                         "emitted: plan every trigger")
    try:
        check_plan(plan)
        rank_list = _checked_output(plan, out, ranks, force)
        parent = out.parent if str(out.parent) else Path(".")
        return _write_output(plan, out, parent, rank_list, force, workers, progress, warn,
                             on_placed, before_placing, command)
    except OSError as err:  # also of the checks: a folder on the way that cannot be searched
        if err.filename is None and err.errno in (errno.EAGAIN, errno.ENOMEM):
            raise  # a process (fork) or memory refused, not a write: the CLI says so
        raise OutputError(f"cannot write the output: {err.strerror or err}"
                          + (f" ({escape_path(err.filename)})" if err.filename else ""),
                          file=_given(out)) from None
    finally:
        _GIVEN.pop(str(out), None)


def _unremovable(out: Path) -> str | None:
    """Why the previous output ``out`` (ours: :func:`_foreign_entry` found nothing else in it)
    could not be removed once replaced, or None: a folder of it (``out`` or a rank folder)
    whose entries this process may not delete (not writable and searchable: a read-only
    tree, as a build cache restores).  Replacing it anyway left it behind for good as a
    hidden ``.OUT.tmp-...`` sibling, the run exiting 0."""
    try:
        folders = [out] + sorted(Path(e.path) for e in os.scandir(out)
                                 if _RANK_DIR.fullmatch(e.name) and e.is_dir(follow_symlinks=False))
    except OSError as err:
        return (f"{_shown(out)}: cannot list it ({err.strerror or err}); refusing to "
                "replace it")
    for d in folders:
        if os.access(d, os.W_OK | os.X_OK):
            continue
        it = "it" if d == out else f"its folder {escape_path(d.name)}"
        if _on_read_only_file_system(d):  # no chmod helps: the mount is read-only
            return (f"{_shown(out)} cannot be replaced: {it} is on a read-only file "
                    "system, so the previous output could not be removed afterwards; write the "
                    "output elsewhere")
        if os.access(d, os.W_OK):  # writable, not searchable: its entries cannot be reached
            return (f"{_shown(out)} cannot be replaced: {it} cannot be searched (no x "
                    "permission), so the previous output could not be removed afterwards; chmod "
                    f"-R u+wx {_shown(out)} or remove it first")
        which = ("it is a read-only folder" if d == out
                 else f"its folder {escape_path(d.name)} is read-only")
        return (f"{_shown(out)} cannot be replaced: {which}, so the previous output "
                "could not be removed afterwards; make it writable (chmod -R u+w "
                f"{_shown(out)}) or remove it first")
    return None


def _on_read_only_file_system(path: Path) -> bool:
    """Whether ``path`` lies on a file system mounted read-only."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _replace_refusal(out: Path, model: str | None, force: bool = True,
                     model_st: os.stat_result | None = None) -> str | None:
    """Why what is at ``out`` must not be replaced, or None (nothing there, or an output of
    ours that ``force`` lets us replace).  Checked before anything is written, and with
    ``--force`` again on what is at ``out`` when the new output is moved into place (made or
    changed meanwhile: :class:`_ForcedSwap`).  ``model_st``: as :func:`_foreign_entry`'s."""
    if out.is_symlink():
        return (f"{_shown(out)} is a symbolic link; give the folder itself (nrtrewrite "
                "never writes through a link nor replaces one)")
    if out.is_dir() and (refusal := _model_inside(out, model) or _working_folder_inside(out)):
        return refusal
    if not out.exists():
        return None
    # what --force would refuse first, so that the hint to pass it is only given where it
    # would work
    if not out.is_dir():
        return f"{_shown(out)} exists and is not a folder"
    if _is_mount_point(out):
        return (f"{_shown(out)} is a mount point, which cannot be replaced (the output is "
                "built beside it and renamed into its place); write the output elsewhere, a "
                "folder inside it say")
    if (refusal := _unreadable(out)):
        return refusal
    if not _is_our_output(out):
        # (the format's name as a manifest's value is named, in JSON's form: until
        # 2026-12-06 Python's, 'nrtrewrite-lowered')
        return (f"{_shown(out)} exists and is not an nrtrewrite output (no manifest.json "
                f"of format {json_text(FORMAT_NAME)}); refusing to replace it")
    if (refusal := _foreign_entry(out, model, model_st)):
        return refusal
    if not force:
        return f"{_shown(out)} exists; pass --force to replace it"
    return _unremovable(out)


def _unreadable(out: Path) -> str | None:
    """Why the folder ``out`` cannot be told an output of ours for want of permission, or
    None: it cannot be listed (mode 0300, 0100), or its ``manifest.json`` cannot be looked at
    (0600: not searchable) or opened.  Until 2026-12-07 such an ``out`` was called "not an
    nrtrewrite output (no manifest.json ...)" though the manifest was there (``diff`` says
    the same since RELIABILITY's row on an unreadable manifest)."""
    hint = (f"; refusing to replace it: make it readable (chmod -R u+rwx {_shown(out)}) "
            "or remove it first")
    try:
        os.listdir(out)
    except OSError as err:
        return (f"{_shown(out)} cannot be read ({err.strerror or err}), so it cannot be "
                f"told an nrtrewrite output{hint}")
    man = out / "manifest.json"
    try:
        if not stat.S_ISREG(os.lstat(man).st_mode):
            return None
        os.close(os.open(man, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC))
    except FileNotFoundError:
        return None
    except OSError as err:
        return (f"{escape_path(man)} cannot be read ({err.strerror or err}), so "
                f"{_shown(out)} cannot be told an nrtrewrite output{hint}")
    return None


def _mount_id(path: str | os.PathLike) -> int | None:
    """The id of the mount ``path`` (its last part never followed if a link) lies on, as
    ``/proc/self/fdinfo`` gives it (Linux 3.15 and later), or None where it cannot tell."""
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except (OSError, AttributeError):
        return None
    try:
        with open(f"/proc/self/fdinfo/{fd}", "rb") as fh:
            for line in fh:
                if line.startswith(b"mnt_id:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    finally:
        os.close(fd)
    return None


def _is_mount_point(out: Path) -> bool:
    """Whether the folder ``out`` is a mount point: a rename, which ``lower`` places its
    output by, cannot move it (``EBUSY``).  ``os.path.ismount`` sees another file system;
    a bind mount of a folder of the parent's own file system only by its mount id."""
    if os.path.ismount(out):
        return True
    # above: the folder holding ``out`` itself, as ``os.path.ismount`` finds it (``out/..``):
    # OUT's parent named by the user may be a symbolic link to a folder on another mount
    # (``~/work -> /scratch/me``), and the link's own mount id is not its folder's (until
    # 2026-12-07 ``sw/o`` was refused as a mount point for a link ``sw`` to a tmpfs folder)
    here, above = _mount_id(out), _mount_id(os.path.join(out, os.pardir))
    return here is not None and above is not None and here != above


def _checked_output(plan: LoweringPlan, out: Path, ranks: Iterable[int] | None, force: bool
                    ) -> list[int]:
    """The refusals of :func:`write_output` before anything is written; the ranks to lower."""
    if (refusal := _replace_refusal(out, plan.model.path, force)):
        raise OutputError(refusal)
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        # (named by OUT, as the other refusals of the output: until 2026-12-06 the line was
        # the reason alone)
        if parent.exists():
            raise OutputError(f"the output's parent {escape_path(parent)} is "
                              "not a folder",
                              file=_given(out))
        raise OutputError(f"the output's parent folder {escape_path(parent)} "
                          "does not exist",
                          file=_given(out))
    rank_list = sorted(set(plan.world if ranks is None else ranks))  # a rank named twice: once
    for r in rank_list:
        if r not in plan.world:
            raise world_refusal(plan.world, r, plan.model.path)
    try:
        F.name_text(Path(plan.model.path).name)
    except UnicodeDecodeError:
        raise OutputError(f"the model's file name {os.fsencode(Path(plan.model.path).name)!r} "
                          "is not UTF-8; the output's manifest records it as UTF-8 text "
                          "(docs/FORMATS.md §1.1): rename the model", file=plan.model.path
                          ) from None
    return rank_list


def _check_manifest_size(plan: LoweringPlan, size: int, exact: bool = True) -> None:
    """Refuse a top-level manifest of ``size`` bytes (``exact`` False: at least) that
    ``diff`` and ``simulate`` would not read (over
    :data:`~nrtrewrite.emit.formats.MAX_MANIFEST_BYTES`): a :class:`LimitError` naming the
    model.  Nothing in the limits of the model bounds it (its triggers list their groups and
    ring orders, its memory map every var); a rank manifest stays under it
    (docs/RELIABILITY.md §4)."""
    if F.manifest_size_refusal(size) is not None:
        raise LimitError(f"the output's top-level manifest.json would be "
                         f"{'' if exact else 'at least '}{size} bytes, more than the limit of "
                         f"{F.MAX_MANIFEST_BYTES} bytes diff and simulate read "
                         "(MAX_MANIFEST_BYTES); nothing was written", file=plan.model.path)


def _check_neff_size(plan: LoweringPlan) -> None:
    """Refuse a rewritten NEFF whose tar would be over the limit its readers allow
    (:func:`~nrtrewrite.neff.container.written_tar_refusal`: ``inspect``, ``lower`` and
    ``simulate`` would refuse it): a :class:`LimitError` naming the model, before anything
    is written.  The streams keep their sizes, so only the members' headers can make the
    tar longer than the input's (docs/FORMATS.md §9)."""
    if (why := written_tar_refusal(plan.model.members)) is not None:
        raise LimitError(f"{why}; nothing was written", file=plan.model.path)


def _top_manifest_ahead(plan: LoweringPlan, rank_list: list[int], neff_name: str,
                        encode_triggers: bool) -> _TopManifest:
    """The top-level manifest but what the ranks and the NEFF give, encoded before anything
    is written, and refused there when over the limit (:func:`_check_manifest_size`): first
    from the triggers' lower bound alone (no encoding: a manifest of tens of GB is refused
    before its text is built), then from its size, exact when ``encode_triggers`` (else the
    triggers are encoded in a forked process while the ranks are lowered, and counted at
    their lower bound)."""
    _check_manifest_size(plan, _triggers_size_at_least(plan), exact=False)
    top = _TopManifest(plan, rank_list, neff_name,
                       _triggers_json(plan) if encode_triggers else None)
    _check_manifest_size(plan, top.size, exact=top.exact)
    return top


def _write_output(plan: LoweringPlan, out: Path, parent: Path, rank_list: list[int],
                  force: bool, workers: int, progress: Callable[[int, int], None] | None,
                  warn: Callable[[str], None] | None = None,
                  on_placed: Callable[[Path], None] | None = None,
                  before_placing: Callable[[], None] | None = None,
                  command: str = "lower") -> Path:
    forked = (workers > 1 and len(plan.triggers) >= MANIFEST_AHEAD_TRIGGERS
              and fork_available())
    neff_name = output_neff_name(plan.model.path)
    top_ahead = _top_manifest_ahead(plan, rank_list, neff_name, encode_triggers=not forked)
    _check_neff_size(plan)
    clean_stale_temps(out)
    # the name is this process's alone (its pid and a random token), so whatever stops the run
    # removes the folder by it; made inside the try: a SIGTERM raised as cli.Terminated
    # right after the mkdir, before the try began, left it behind (a loaded machine)
    tmp = _sibling(parent / out.name, "tmp")
    built = tmp  # (tmp names the previous output once a --force swap has placed this one)
    triggers_ahead = None
    syncer = _Syncer()  # no thread until the first rank is added
    lock = None
    placed = False  # out is the new output: what follows only tidies up
    swap: _ForcedSwap | None = None
    try:
        tmp.mkdir()
        lock = lock_folder(tmp)  # held until the end: no other lower's cleanup removes it
        if force:
            _take_mode(tmp, out)  # (built no more open than the output it is to replace)
        # forked first, before any lowering (its compose process, its writer threads, the pool)
        if forked:
            triggers_ahead = ForkCall(lambda: _triggers_json(plan))
        rank_manifests: dict[str, str] = {}
        done = 0
        if workers > 1 and len(rank_list) > 1:
            global _POOL_PLAN, _POOL_DIR
            _POOL_PLAN, _POOL_DIR = plan, tmp
            try:
                with ForkPool(_lower_and_write, workers) as pool:
                    for _r, (rank, man) in pool.imap(rank_list):
                        rank_manifests[rank_dir_name(rank)] = hashlib.sha256(man).hexdigest()
                        syncer.add(_rank_paths(tmp / rank_dir_name(rank)))
                        done += 1
                        if progress:
                            progress(done, len(rank_list))
            except WorkerLost as err:
                raise _worker_lost(plan, err, command) from None
            finally:
                _POOL_PLAN = _POOL_DIR = None
        else:
            # one rank and a second worker allowed: compose in a forked process meanwhile
            ahead = workers > 1 and len(rank_list) == 1
            for rank in rank_list:
                rank_, man = _write_rank(plan, tmp, rank, compose_ahead=ahead)
                rank_manifests[rank_dir_name(rank_)] = hashlib.sha256(man).hexdigest()
                syncer.add(_rank_paths(tmp / rank_dir_name(rank_)))
                done += 1
                if progress:
                    progress(done, len(rank_list))
        neff_bytes = rewritten_neff(plan, _leader_spad_index(plan))
        _write_file(tmp / neff_name, neff_bytes)
        triggers = triggers_ahead.result() if triggers_ahead is not None else None
        if triggers is None and top_ahead.triggers is None:  # the forked process failed
            triggers = _triggers_json(plan)
        top = top_ahead.text(rank_manifests, hashlib.sha256(neff_bytes).hexdigest(), triggers)
        _check_manifest_size(plan, len(top))  # exact now (the forked triggers counted)
        _write_file(tmp / "manifest.json", top)
        syncer.drain()  # every rank folder durable before the output's own folder
        _check_complete(tmp, out, [rank_dir_name(r) for r in rank_list] + [neff_name])
        _fsync_dir(tmp)
        if before_placing is not None:
            before_placing()
        if not (force and (out.exists() or out.is_symlink())):
            try:
                _rename_noreplace(tmp, out)
                placed = True
                if on_placed is not None:
                    on_placed(out)
            except FileExistsError:
                if not force:  # (absent when the run started: refused then otherwise)
                    refusal = (_replace_refusal(out, plan.model.path, force=False)
                               or f"{_shown(out)} exists")
                    raise OutputError(f"{refusal} ({_ForcedSwap.MEANWHILE})") from None
        if not placed:  # --force and something at OUT (there from the start, or made meanwhile)
            swap = _ForcedSwap(tmp, out, plan.model.path)
            tmp = swap.place(parent)  # now the previous output, checked ours
            placed = True
            if on_placed is not None:
                on_placed(out)
            _remove_replaced(out, tmp, warn)
            swap.release()  # (held through the removal: no other lower's cleanup takes it)
        _fsync_dir(parent)
    except BaseException as exc:
        if isinstance(exc, OSError) and not placed:
            _named_in_output(exc, built, out)
        if swap is not None:
            swap.undo()  # what was at OUT goes back unless it was checked ours
        # no lock taken here: a signal's Terminated may have left one held mid-operation
        # (raised between a lock's acquire and the `with` that releases it: the syncer's
        # queue), and waiting for it would hang the cleanup; the fsync thread is a daemon,
        # and an fsync of a file being removed fails harmlessly there
        syncer.abandon()
        # every descriptor of the run released first: removing a tree opens one or two per
        # level, and a run that failed for want of descriptors (EMFILE) left the folder
        held, lock = lock, None  # (cleared first: the finally never closes the number twice)
        unlock_folder(held)
        if swap is not None:
            swap.release()
        if triggers_ahead is not None:
            triggers_ahead.close()
            triggers_ahead = None
        rmtree_few_fds(tmp)
        if placed and not isinstance(exc, Exception):  # a stop (Ctrl-C, SIGTERM) came late
            with contextlib.suppress(OSError):
                _fsync_dir(parent)  # the rename made durable, as a finished run does
        raise
    finally:
        unlock_folder(lock)
        if swap is not None:
            swap.release()
        if triggers_ahead is not None:
            triggers_ahead.close()
    return out


def _named_in_output(err: OSError, tmp: Path, out: Path) -> None:
    """Name ``err``'s files inside the temporary sibling ``tmp`` by their place in the
    output ``out`` (``OUT/rank-0002/sem.bin``): ``tmp``, with this run's pid and a random
    token, is removed before the line is read, and would make two runs' lines differ
    (``simulate MODEL.neff`` then names them ``<temporary>/...``)."""
    for attr in ("filename", "filename2"):
        path = getattr(err, attr)
        if not isinstance(path, (str, os.PathLike)):
            continue
        rel = path_inside(path, tmp)
        if rel is not None:
            setattr(err, attr, os.path.join(out, rel))


def rmtree_few_fds(path: str | os.PathLike) -> None:
    """``shutil.rmtree(path)``, errors ignored; what it leaves (it holds two descriptors per
    level of the tree, more than a process at its descriptor limit has) removed again
    bottom up by ``os.walk``, which holds one at a time."""
    if os.path.islink(path):  # (never walked through: os.walk would follow it)
        with contextlib.suppress(OSError):
            os.unlink(path)
        return
    shutil.rmtree(path, ignore_errors=True)
    if not os.path.lexists(path):
        return
    for root, dirs, files in os.walk(path, topdown=False):
        for name in files + dirs:
            with contextlib.suppress(OSError):
                p = os.path.join(root, name)
                (os.rmdir if name in dirs and not os.path.islink(p) else os.unlink)(p)
    with contextlib.suppress(OSError):
        os.rmdir(path)


def remove_tree(path: Path, onerror=None) -> None:
    """``shutil.rmtree(path)`` (errors ignored, or given to ``onerror``) that a signal does not
    cut short: a Ctrl-C or SIGTERM whose exception lands while the tree is being removed on
    the way out of a run that did its work (simulate's temporary folder, the output that
    ``--force`` replaced) lets the removal finish, then is raised (the CLI's handlers raise
    only the first signal; later ones are ignored, so this ends)."""
    pending: BaseException | None = None
    while True:
        try:
            if onerror is None:
                shutil.rmtree(path, ignore_errors=True)
            else:
                shutil.rmtree(path, onerror=onerror)
            break
        except BaseException as exc:  # noqa: BLE001 - a signal's: finish first
            if pending is None:
                pending = exc
    if pending is not None:
        raise pending


def _remove_replaced(out: Path, old: Path, warn: Callable[[str], None] | None) -> None:
    """Remove the previous output ``old`` once ``out`` is the new one.  What cannot be removed
    (an immutable file, ``chattr +i``; a folder made read-only meanwhile) is said, not hidden:
    the new output is in place, the old one stays as the hidden sibling ``old``."""
    failed: list[tuple[str, BaseException]] = []
    remove_tree(old, onerror=lambda _fn, path, exc: failed.append((path, exc[1])))
    if failed and warn is not None:
        path, exc = failed[0]
        reason = getattr(exc, "strerror", None) or exc
        warn(f"{_shown(out)}: the new output is in place, but the previous one, moved "
             f"aside to {escape_path(old.name)}, could not be removed whole "
             f"({escape_path(path)}: {reason}); remove it by hand")


def _check_complete(tmp: Path, out: Path, names: list[str]) -> None:
    """Every top-level entry written into the temporary folder ``tmp`` is still there (and
    ``manifest.json`` last): nothing else removed part of it while it was built (another
    ``lower`` of the same output that took it for a killed run's: :func:`lock_folder`)."""
    try:
        have = set(os.listdir(tmp))
    except OSError as err:
        raise OutputError(f"{_shown(out)}: the folder it was being built in, "
                          f"{escape_path(tmp.name)}, cannot be read any more "
                          f"({err.strerror or err}); nothing was written to "
                          f"{_shown(out)}") from None
    missing = [n for n in [*names, "manifest.json"] if n not in have]
    if missing:
        raise OutputError(f"{_shown(out)}: {len(missing)} of the entries written into "
                          f"the folder it was being built in, {escape_path(tmp.name)}, are "
                          f"gone ({', '.join(map(escape_path, missing[:3]))}"
                          f"{', ...' if len(missing) > 3 else ''}): "
                          "another process removed them; nothing was written to "
                          f"{_shown(out)}")


class _ForcedSwap:
    """``--force`` moving the new output ``tmp`` into the place of what is at ``out``.

    ``out`` was checked when the run started, but anything may have been made or changed
    there while the output was built (a folder of the user's, a file dropped into the
    previous output): it is checked again right before the swap (:func:`_replace_refusal`),
    and what the swap took out of ``out`` once more after it, since it may have changed
    between the check and the swap; what fails goes back into ``out`` untouched and the run
    is refused in one line.  Whatever stops the run in between (a signal's exception)
    leads to :meth:`undo`, which puts back whatever the swap took out of ``out`` unless it
    had been checked: nothing but an output of ours is ever removed."""

    #: the end of a refusal here: OUT passed the check when the run started
    MEANWHILE = "it was made or changed there while the output was built"

    def __init__(self, tmp: Path, out: Path, model: str | None):
        self.tmp, self.out, self.model = tmp, out, model
        self.new = os.stat(tmp)  # the new output's identity: where it is tells what happened
        try:
            self.model_st = os.stat(model) if model else None
        except OSError:
            self.model_st = None
        self.exchanged = False  # True from the atomic exchange until what it took is checked
        self.held: int | None = None  # the previous output's lock (:meth:`place`)

    def _refusal(self, what: Path) -> str | None:
        return _replace_refusal(what, self.model, model_st=self.model_st)

    def place(self, parent: Path) -> Path:
        """Swap; the path that now holds the previous output (checked ours), to be removed.
        The previous output is locked (:func:`lock_folder`) from before the swap until
        :meth:`release`, after its removal: once swapped out it is a temporary sibling of
        ``out``, unlocked and as old as the previous output, which another ``lower`` of
        ``out`` starting meanwhile took for a killed run's (its PID alive, over a minute
        old: :func:`_remove_if_stale`) and deleted while this run checked or removed it."""
        tmp, out = self.tmp, self.out
        self.held = lock_folder(out)
        if (refusal := self._refusal(out)):
            raise OutputError(f"{refusal} ({self.MEANWHILE})")
        _take_mode(tmp, out)  # (what is at OUT now: it may have changed, or been made)
        self.exchanged = True  # (before: a signal landing right after the swap finds it set)
        if _exchange(tmp, out):
            self._hold(tmp)
            if (refusal := self._refusal(tmp)):  # changed between the check and the swap
                self.undo()
                raise OutputError(f"{refusal} ({self.MEANWHILE})")
            self.exchanged = False  # checked: the previous output of ours, at tmp
            return tmp
        self.exchanged = False
        old = _sibling(parent / out.name, "old")
        checked = False
        try:
            os.rename(out, old)
            self._hold(old)
            if (refusal := self._refusal(old)):  # changed between the check and the rename
                os.rename(old, out)
                raise OutputError(f"{refusal} ({self.MEANWHILE})")
            checked = True
            # never over what appeared at OUT between the two renames (a plain rename
            # replaced an empty folder made there)
            _rename_noreplace(tmp, out)
        except BaseException as exc:
            if _settle_swap(out, tmp, old, checked) and isinstance(exc, Exception):
                raise OutputError(f"{_shown(out)}: {self.TAKEN}") from None
            raise
        return old

    #: The refusal when something was put at OUT between the two renames of the swap without
    #: an atomic exchange (another ``lower --force`` of it, say): until 2026-12-07 the run
    #: failed naming the previous output's temporary name ("Directory not empty
    #: (.OUT.old-PID-HEX)"), left behind.
    TAKEN = ("something was put there while the previous output was moved aside for the new "
             "one (another lower --force of it, say: without an atomic exchange, "
             "RENAME_EXCHANGE, the swap is two renames); what is there now is kept, the new "
             "output was not placed and the previous one was removed")

    def _hold(self, path: Path) -> None:
        """Make the lock held that of the folder now at ``path``, what the swap took out of
        ``out``: another folder than the one locked before it when something else was put at
        ``out`` between the lock and the swap (another ``lower``'s new output: locked by
        that run while it lives, then taken here when it can be)."""
        try:
            if self.held is not None and _same_file(os.fstat(self.held), os.lstat(path)):
                return
        except OSError:
            pass
        self.release()
        self.held = lock_folder(path)

    def release(self) -> None:
        """Let go of the previous output's lock (it is removed, or back at ``out``)."""
        held, self.held = self.held, None
        unlock_folder(held)

    def undo(self) -> None:
        """After an exchange whose take was not checked yet: when ``out`` is the new output
        (the exchange happened), swap back, so that ``tmp`` is the new output again (the
        caller's cleanup removes it) and ``out`` what was there."""
        if not self.exchanged:
            return
        self.exchanged = False
        with contextlib.suppress(OSError):
            if _same_file(os.lstat(self.out), self.new):
                _exchange(self.tmp, self.out)


def _take_mode(new: Path, previous: Path) -> None:
    """Give the new output folder ``new`` the permission bits of the folder ``previous`` it
    is to replace, as ``assemble`` keeps a replaced file's: a previous output kept private
    (0700) stays so (until 2026-12-07 the new one had the umask's, 0755 say).  The files and
    rank folders inside are new, made with the umask's modes.  Nothing is done where the
    modes already agree; a chmod refused (a file system that does not take one) refuses the
    run, naming ``previous`` (``OUT``): the output is not replaced by a folder more open, or
    otherwise other, than the one it replaces (until 2026-12-07 the error named the
    temporary folder, removed by then, even where the modes agreed)."""
    try:
        st = os.lstat(previous)
    except OSError:
        return  # gone meanwhile: the swap says so
    mode = stat.S_IMODE(st.st_mode)
    if not stat.S_ISDIR(st.st_mode) or stat.S_IMODE(os.lstat(new).st_mode) == mode:
        return
    try:
        os.chmod(new, mode)
    except OSError as err:
        raise OutputError(f"{escape_path(previous)}: cannot give the new output the mode "
                          f"{mode:04o} of the folder it replaces ({err.strerror or err}); "
                          "not replaced: chmod it to the mode the file system gives new "
                          "folders, or write the output elsewhere") from None


def _settle_swap(out: Path, tmp: Path, old: Path, checked: bool = False) -> bool:
    """After the two renames of ``--force`` without an atomic exchange (``out`` -> ``old``,
    ``tmp`` -> ``out``) were cut short (a signal's exception, an OS error): ``out`` holds a
    complete output again.  Only the first done: the previous output goes back; both done
    (the exception landed right after the second returned): the new output stays and the
    previous one goes.  The caller's cleanup removes ``tmp`` if it is still there.  Only
    the first done and something else put at ``out`` meanwhile (another ``lower --force``'s
    output): the previous output, ``checked`` ours (and locked by the caller), is removed,
    superseded by what is there, and True is returned (the caller says so); not checked, the
    error of putting it back is raised."""
    if not (old.exists() or old.is_symlink()):
        return False  # neither rename happened: out is the previous output
    if tmp.exists() or tmp.is_symlink():  # the second rename did not happen
        try:
            _rename_noreplace(old, out)
        except OSError:
            if not (checked and (out.exists() or out.is_symlink())):
                raise
            remove_tree(old)
            return True
        return False
    shutil.rmtree(old, ignore_errors=True)
    return False


#: The advice of a pool worker killed by SIGKILL (the kernel's out-of-memory killer), by the
#: command lowering: its own options.  ``simulate MODEL.neff`` has neither ``-j`` nor
#: ``--rank`` (until 2026-12-07 it advised them, as ``lower``'s line does).
LOST_WORKER_HINTS = {
    "lower": "lower with fewer workers (-j 1), fewer ranks at once (--rank), or with more "
             "memory",
    "simulate": "simulate with more memory, or lower the model with fewer workers "
                "(nrtrewrite lower -j 1) and simulate that output folder",
}


def _worker_lost(plan: LoweringPlan, err: WorkerLost, command: str = "lower") -> LoweringError:
    """The error of a pool worker that died while lowering rank ``err.item`` or, idle, before
    it was handed that rank: killed by a signal (SIGKILL: the kernel's out-of-memory killer
    ends processes so, and only then is memory the likely cause), interrupted (a SIGINT of
    its own: it exits :data:`~nrtrewrite.ahead.INTERRUPTED`) or exited."""
    code = err.exitcode
    if code is not None and code < 0:
        try:
            how = f"died (killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"died (killed by signal {-code}"
        how += ", as the kernel's out-of-memory killer does)" if code == -signal.SIGKILL else ")"
    elif code == INTERRUPTED:
        how = "was interrupted (SIGINT)"
    else:  # it returned or failed on its own, without sending its result
        how = f"exited (status {code})" + (" without its result" if err.handed else "")
    if err.handed:
        who = "the worker process lowering this rank"
    else:
        who = "the worker process that was to lower this rank"
        how += " before it was handed the rank"
    hint = f": {LOST_WORKER_HINTS[command]}" if code == -signal.SIGKILL else ""
    return LoweringError(f"{who} {how}; nothing was written{hint}", file=plan.model.path,
                         rank=err.item)


def _leader_spad_index(plan: LoweringPlan) -> dict[int, int]:
    """Trigger ordinal -> its first SPAD entry index on its group's leader: the entries of
    the earlier triggers whose group holds that leader (only leaders are counted: a model of
    1,000 triggers over 128 ranks would otherwise update 128 counters per trigger)."""
    leaders = {tp.leader for tp in plan.triggers}
    counts = dict.fromkeys(leaders, 0)
    in_group: dict[tuple[int, ...], list[int]] = {}  # group -> the leaders among its ranks
    out: dict[int, int] = {}
    for tp in plan.triggers:
        out[tp.trigger.ordinal] = counts[tp.leader]
        group = tuple(tp.group)
        held = in_group.get(group)
        if held is None:
            ranks = set(group)
            held = in_group[group] = [r for r in leaders if r in ranks]
        n = getattr(getattr(tp, "prepared", None), "entries", 1)
        for r in held:
            counts[r] += n
    return out


def build_manifest(plan: LoweringPlan, ranks: list[int],
                   rank_manifests: dict[str, str] | str, neff_name: str, neff_sha: str, *,
                   triggers=None) -> dict:
    """The top-level manifest (docs/FORMATS.md §1.1); ``triggers``: what stands for
    :func:`nrtrewrite.lower.manifest_triggers` (default: it); ``rank_manifests`` and
    ``neff_sha`` may be marks too (:class:`_TopManifest`)."""
    topo = plan.topology
    gen = topo.platform.hw_generation
    return {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "tool_version": __version__,
        "input": {"name": F.name_text(Path(plan.model.path).name), "sha256": plan.input_sha256,
                  "bytes": plan.input_bytes if plan.input_bytes is not None
                  else plan.model.header.data_size + plan.model.header.header_size},
        "output_neff": {"name": F.name_text(neff_name), "sha256": neff_sha},
        "options": plan.options.to_json(),
        # the platform the lowering tiled for: simulate checks cce.bin against its cap
        # (a platform that is not exactly a preset whole: it loads back as --topology)
        "topology": with_platform(
            {"name": topo.name, "lnc_size": topo.lnc_size, "nodes": topo.nodes,
             "platform": topo.platform.name, "hw_generation": gen,
             "cce_max_elements": cce_max_elements(gen),
             # the algo_sub_type of its intra-node mesh entries (null: no mesh)
             "mesh_sub_type": (topo.platform.mesh_sub_type.name
                               if topo.platform.mesh else None),
             "ranks": [vars(topo.info(r)) for r in plan.world]},
            topo.platform),
        "memory": plan.memory.to_json(),
        "world": list(plan.world),
        "ranks": ranks,
        "triggers": manifest_triggers(plan) if triggers is None else triggers,
        "rank_manifests": rank_manifests,
    }
