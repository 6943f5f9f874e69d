"""Write NEFF-like files: whole models, or a model with some streams replaced.

The lowering stage calls :func:`rewrite_streams` with the rewritten engine
streams (bundle.rewritten_neff) and writes the result into its own temporary output
folder, which is renamed into place whole (bundle.write_output).  Output is
deterministic (see :mod:`nrtrewrite.neff.container`).  :func:`write_bytes_atomic`
(a temp file in the destination folder, renamed over the target) serves other writers
of a single file; the temp files a killed writer left are removed by the next write of the
same target (:func:`remove_stale_temps`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import stat
import tempfile
import time
from typing import Callable, ContextManager, Iterable, Mapping, Union

from nrtrewrite.errors import OutputError, ValidationError, Where
from nrtrewrite.neff.container import build_container
from nrtrewrite.neff.instructions import WORD_SIZE
from nrtrewrite.neff.model import Model, NeffHeader

#: What :func:`write_model` accepts: a Model, (header, members), or finished file bytes.
ModelOrParts = Union[Model, tuple[NeffHeader, Union[Mapping[str, bytes],
                                                    Iterable[tuple[str, bytes]]]], bytes]


def model_bytes(model_or_parts: ModelOrParts) -> bytes:
    """The file bytes of a :class:`Model` (its header fields and members in order),
    of a ``(header, members)`` pair, or ``bytes`` unchanged."""
    if isinstance(model_or_parts, (bytes, bytearray)):
        return bytes(model_or_parts)
    if isinstance(model_or_parts, Model):
        return build_container(model_or_parts.header, model_or_parts.members)
    header, members = model_or_parts
    return build_container(header, members)


def write_model(model_or_parts: ModelOrParts, path: str | os.PathLike) -> None:
    """Write a NEFF-like file atomically (hash and sizes recomputed)."""
    write_bytes_atomic(path, model_bytes(model_or_parts))


def rewrite_streams(model: Model, new_streams: Mapping[tuple[str, str], bytes]) -> bytes:
    """A valid NEFF-like file equal to ``model`` with the given streams replaced.

    ``new_streams`` maps ``(subgraph, engine)`` to the new stream bytes (a
    multiple of 64).  Member order and every other member are kept; the header
    keeps every field but data_size and hash, which are recomputed.
    """
    members = dict(model.members)
    for (sg_name, engine), data in new_streams.items():
        where = Where(file=model.path, subgraph=sg_name, stream=engine)
        try:
            sg = model.subgraph(sg_name)
        except KeyError:
            raise ValidationError("no such subgraph", where) from None
        if engine not in sg.engines:
            raise ValidationError("no such engine in the subgraph", where)
        if len(data) % WORD_SIZE:
            raise ValidationError(f"new stream length {len(data)} is not a multiple of "
                                  f"{WORD_SIZE}", where)
        members[f"{sg_name}/{engine}.bin"] = bytes(data)
    return build_container(model.header, members)


def _replaceable(path: str) -> None:
    """Refuse what an atomic write must not replace: a folder (it would fail with a bare
    OS error), or a device, fifo or socket (as root, ``-o /dev/null`` replaced the device
    node with a regular file).  A missing path, a regular file or a symbolic link (the link
    itself is replaced, never its target) is fine."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as err:
        raise OutputError(f"cannot write: {err.strerror or err}", Where(file=path)) from None
    if stat.S_ISDIR(st.st_mode):
        raise OutputError("cannot write: it is a folder (give the path of the file to write)",
                          Where(file=path))
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
        raise OutputError("cannot write: it exists and is not a regular file (a device, fifo "
                          "or socket); refusing to replace it", Where(file=path))


def mode_for(path: str) -> int:
    """The permission bits the written file gets: those of the regular file it replaces (a
    model kept 0640 stays 0640), else what ``open`` would give a new file (0666 less the
    umask; ``mkstemp`` makes 0600)."""
    try:
        st = os.stat(path, follow_symlinks=False)
        if stat.S_ISREG(st.st_mode):
            return stat.S_IMODE(st.st_mode)
    except OSError:
        pass
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


#: The longest file name (bytes) most Linux file systems take (ext4, xfs, btrfs, tmpfs).
NAME_MAX = 255


def sibling_stem(name: str, room: int) -> str:
    """``name`` as it stands in the name of a temporary sibling ``.STEM`` + ``room`` more
    bytes (``.tmp-PID-HEX``): ``name`` itself where that fits :data:`NAME_MAX`, else its
    first bytes (whole UTF-8 characters), ``~`` and 16 hex digits of its sha256 (a legal
    name of up to 255 bytes was refused, ``File name too long``, for its temporary's;
    found by an exploratory tester).  Deterministic: a later run finds its siblings."""
    raw = os.fsencode(name)
    if 1 + len(raw) + room <= NAME_MAX:
        return name
    keep = NAME_MAX - 1 - room - 17
    return (raw[:max(keep, 0)].decode("utf-8", "ignore") + "~"
            + hashlib.sha256(raw).hexdigest()[:16])


#: The bytes after ``.STEM`` in the name of :func:`write_bytes_atomic`'s temporary file:
#: ``.``, the writer's PID (up to 10 digits), ``-``, mkstemp's 8 characters and ``.tmp``.
TEMP_ROOM = 1 + 10 + 1 + 8 + 4

#: The same before 2026-12-07 (``.STEM.XXXXXXXX.tmp``: no PID), for the cleanup of those left.
_OLD_TEMP_ROOM = 1 + 8 + 4

#: What follows ``.STEM.`` in a temporary file's name, matched whole: the writer's PID,
#: ``-`` and ``tempfile.mkstemp``'s 8 characters of ``[a-z0-9_]``; and the shape from
#: before 2026-12-07, mkstemp's 8 characters alone.
_TEMP_TAIL = re.compile(r"(?P<pid>[0-9]{1,10})-[a-z0-9_]{8}\.tmp", re.ASCII)
_OLD_TEMP_TAIL = re.compile(r"[a-z0-9_]{8}\.tmp", re.ASCII)

#: Seconds a temporary file must be unchanged before it is taken for a killed writer's where
#: its name's PID is a live process (a writer killed in another PID namespace, its lock
#: free: a live writer holds it from a moment after ``mkstemp``); ``bundle``'s rule for a
#: killed run's temporary folder takes the same.
STALE_AFTER_S = 60

#: The same for a file of the shape from before 2026-12-07, which names no PID and whose
#: writer held no lock: only its age tells, and an hour is longer than any write of a file
#: (a slow disk's fsync of 2 GiB included) takes.
OLD_STALE_AFTER_S = 3600


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` runs here (another user's too); 0 and below are taken for
    alive (never for a dead writer's).  The stale-temporary rules of this module and of
    ``bundle`` (a killed run's folder) share it."""
    if pid <= 0:
        return True  # (never taken for a dead writer's)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def left_by_killed_writer(fd: int, pid: int | None) -> bool:
    """Whether the temporary file or folder open as ``fd``, named with its writer's ``pid``,
    is a killed writer's, for the caller to remove while it holds ``fd``: its ``flock`` is
    taken here, without waiting (a live writer holds it: :func:`temp_sibling`,
    ``bundle.lock_folder``; the lock stays held through ``fd``), and ``pid`` is no running
    process here (never this process), or, where the file system takes locks, it has not
    changed for :data:`STALE_AFTER_S` (a writer killed in another PID namespace, whose PID
    may be a live process of this one); ``pid`` None, a file of the old shape: unchanged
    for :data:`OLD_STALE_AFTER_S`.  Where the file system has no locks the PID alone decides
    (the old shape: the age).  The stale-temporary rule of this module's files and of
    ``bundle``'s folders (a killed ``lower``'s temporary sibling)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        locks = True
    except BlockingIOError:
        return False  # a live writer's
    except OSError:
        locks = False  # (a file system without locks)
    if pid is not None:
        if pid == os.getpid():
            return False
        if not pid_alive(pid):
            return True
        if not locks:
            return False
    try:
        age = time.time() - os.fstat(fd).st_mtime
    except OSError:
        return False
    return age > (OLD_STALE_AFTER_S if pid is None else STALE_AFTER_S)


def _remove_stale_temp(path: str, pid: int | None) -> bool:
    """Remove the temporary file ``path`` when no writer writes it any more: a regular file
    of this user (never a link, a folder, another user's) that :func:`left_by_killed_writer`
    takes for a killed writer's."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
        return False
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        held = os.fstat(fd)
        if (held.st_dev, held.st_ino) != (st.st_dev, st.st_ino):
            return False  # (replaced meanwhile: not the file looked at)
        if not left_by_killed_writer(fd, pid):
            return False
        now = os.lstat(path)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            return False
        os.unlink(path)  # (the lock held meanwhile)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def remove_stale_temps(path: str | os.PathLike) -> list[str]:
    """Remove the temporary files beside ``path`` that writers of ``path`` killed by SIGKILL
    (or a power cut) left (:func:`write_bytes_atomic`, benchmarks/run.py's results pair):
    ``.STEM.PID-XXXXXXXX.tmp`` whose writer is gone, and ``.STEM.XXXXXXXX.tmp`` of the shape
    before 2026-12-07 an hour unchanged (:func:`_remove_stale_temp`: this user's regular
    files, never a live writer's).  Only those names, STEM compared literally
    (:func:`sibling_stem`), the tail matched whole; anything else is left alone.  Returns
    what was removed; an error is passed over (the write goes on).  Until 2026-12-07 nothing
    removed them."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    name = os.path.basename(path)
    if not name:
        return []
    shapes = [("." + sibling_stem(name, TEMP_ROOM) + ".", _TEMP_TAIL),
              ("." + sibling_stem(name, _OLD_TEMP_ROOM) + ".", _OLD_TEMP_TAIL)]
    removed = []
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return removed
    for entry in names:
        for head, tail in shapes:
            m = tail.fullmatch(entry, len(head)) if entry.startswith(head) else None
            if m is None:
                continue
            found = os.path.join(directory, entry)
            if _remove_stale_temp(found, int(m["pid"]) if tail is _TEMP_TAIL else None):
                removed.append(found)
            break
    return removed


def temp_sibling(path: str | os.PathLike) -> tuple[int, str]:
    """A new temporary file beside ``path`` for a write renamed over it: ``(fd, name)``,
    ``.STEM.PID-XXXXXXXX.tmp`` (mode 0600), its ``flock`` held through ``fd`` (closing it,
    or the process ending, releases it), the mark of a live writer that
    :func:`remove_stale_temps` leaves alone whatever its PID says; those killed writers
    left are removed first.  An OSError of ``mkstemp`` is the caller's."""
    path = os.fspath(path)
    remove_stale_temps(path)
    stem = sibling_stem(os.path.basename(path), TEMP_ROOM)
    fd, tmp = tempfile.mkstemp(prefix=f".{stem}.{os.getpid()}-", suffix=".tmp",
                               dir=os.path.dirname(os.path.abspath(path)))
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            # another writer's cleanup holds it this instant, looking at it (it leaves a
            # live writer's fresh file alone): wait for it, so this write is never unlocked
            # (review 54k: it went on without its lock, and after a minute unchanged, a slow
            # fsync, the next writer removed it)
            fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
        pass  # (no locks there: the PID alone tells)
    return fd, tmp


def write_bytes_atomic(path: str | os.PathLike, data: bytes, *,
                       placing: Callable[[], ContextManager] = contextlib.nullcontext,
                       on_placed: Callable[[str], None] | None = None) -> None:
    """Write ``data`` to ``path`` via a temp file in the same directory and a rename.

    Any OS error (a full disk, no permission, a read-only file system, a file where a
    folder is expected) is an :class:`OutputError` naming ``path`` and the OS's reason;
    whatever stops the write (an error, Ctrl-C, SIGTERM raised as an exception) removes the
    temp file, and ``path`` keeps its previous content.  The rename and ``on_placed(path)``
    (the new content is in place, complete) run inside ``placing()``: the CLI's
    ``stops_deferred``, so that a stop comes before the rename (nothing replaced) or after
    ``on_placed`` (its stop then says the file is written), never between.  The temp file,
    ``.NAME.PID-XXXXXXXX.tmp`` (:func:`temp_sibling`), is locked until the rename is done;
    those a killed writer left beside ``path`` are removed first (:func:`remove_stale_temps`;
    until 2026-12-07 a SIGKILL left ``.NAME.XXXXXXXX.tmp`` for good)."""
    path = os.fspath(path)
    if not path:
        raise OutputError("cannot write: an empty path")
    _replaceable(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = None, None
    try:
        fd, tmp = temp_sibling(os.path.join(directory, os.path.basename(path)))
        with os.fdopen(fd, "wb") as fh:  # (open, so locked, until the rename is done)
            fd = None
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
            os.chmod(tmp, mode_for(path))
            with placing():
                os.replace(tmp, path)
                tmp = None
                if on_placed is not None:
                    on_placed(path)
    except OSError as err:
        raise OutputError(f"cannot write: {err.strerror or err}", Where(file=path)) from None
    finally:
        if fd is not None:
            os.close(fd)
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass  # already gone, or not removable: the error above is the one to report
