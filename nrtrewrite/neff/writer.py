"""Write NEFF-like files: whole models, or a model with some streams replaced.

The lowering stage calls :func:`rewrite_streams` with the rewritten engine
streams (bundle.rewritten_neff) and writes the result into its own temporary output
folder, which is renamed into place whole (bundle.write_output).  Output is
deterministic (see :mod:`nrtrewrite.neff.container`).  :func:`write_bytes_atomic`
(a temp file in the destination folder, renamed over the target) serves other writers
of a single file.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
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


def _mode_for(path: str) -> int:
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
    ``on_placed`` (its stop then says the file is written), never between."""
    path = os.fspath(path)
    if not path:
        raise OutputError("cannot write: an empty path")
    _replaceable(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = None, None
    try:
        # (mkstemp adds 8 characters: ".STEM." 8 ".tmp")
        stem = sibling_stem(os.path.basename(path), 1 + 8 + 4)
        fd, tmp = tempfile.mkstemp(prefix=f".{stem}.", suffix=".tmp", dir=directory)
        with os.fdopen(fd, "wb") as fh:
            fd = None
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _mode_for(path))
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
