"""Reading an output folder back: artifact files as numpy records, decoded field by field.

Used by ``dump`` (tables), ``diff`` (field-level comparison) and tests.  Bit
fields are expanded into named fields following docs/FORMATS.md, with the raw
words kept too, so a diff names the exact field that changed.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path

import numpy as np

from nrtrewrite import jsonin
from nrtrewrite.codes import (DType, EncAlgMeshType, EncAlgType, EncdNeigh, EvtSemSubop,
                              NetAddrMark, SdmaCceType, enum_name)
from nrtrewrite.compose.leaves import leaf_name
from nrtrewrite.emit import formats as F
from nrtrewrite.errors import OutputError, did_you_mean, escape_controls, escape_path
from nrtrewrite.emit.formats import FORMAT_NAME

#: ``dump`` selectors -> artifact files.
KIND_FILES: dict[str, tuple[str, ...]] = {
    "spad": ("spad.bin", "tpinc.bin"),
    "sb2sb": ("sb2sb.bin",),
    "cce": ("cce.bin",),
    "dma": ("dma.bin", "legs.bin"),
    "sem": ("sem.bin",),
    "fifo": ("net_ops.bin", "net_src.bin", "net_dest.bin"),
}


def load_records(path: str | Path, name: str | None = None) -> np.ndarray:
    """A .bin artifact, read whole, as a structured array (``name`` defaults to the file's
    name)."""
    rf = open_records(path, name)
    return rf.head(rf.size)


class RecordFile:
    """An artifact file checked (a regular file, readable, a whole number of records) and
    read on demand, never memory-mapped: a mapped file truncated while it is read ends the
    process with SIGBUS and no message, and every map holds a descriptor (a ``dump`` of a
    600-rank output ran out of them); here a file that shrinks meanwhile is an error line.
    ``size`` is its record count when checked."""

    #: records read at a time by :meth:`chunks`
    CHUNK = 1 << 16

    def __init__(self, path: Path, name: str, dtype: np.dtype, size: int,
                 identity: tuple[int, int]):
        self.path, self.name, self.dtype, self.size = path, name, dtype, size
        #: (st_dev, st_ino) when checked: a file put in its place meanwhile is refused
        self.identity = identity

    def chunks(self, stop: int | None = None, chunk: int | None = None):
        """The first ``stop`` records (all: None), a numpy array of at most ``chunk``
        (default :data:`CHUNK`) records at a time."""
        stop = self.size if stop is None else max(0, min(stop, self.size))
        chunk = chunk or self.CHUNK
        if not stop:
            return
        try:
            with open_regular(self.path) as fh:
                st = os.fstat(fh.fileno())
                if (st.st_dev, st.st_ino) != self.identity:
                    raise OutputError(f"{escape_path(self.path)}: changed while being read "
                                      "(another file was put in its place)")
                for start in range(0, stop, chunk):
                    arr = np.empty(min(chunk, stop - start), self.dtype)
                    self._fill(fh, arr, start)
                    if start + arr.size == self.size and fh.read(1):
                        raise OutputError(f"{escape_path(self.path)}: changed while being "
                                          f"read (it held {self.size * self.dtype.itemsize} "
                                          "bytes, now more)")
                    yield arr
        except OSError as exc:
            raise _read_error(self.path, exc) from None

    def _fill(self, fh, arr: np.ndarray, start: int) -> None:
        view = memoryview(arr).cast("B")
        got = 0
        while got < view.nbytes:
            n = fh.readinto(view[got:])
            if not n:
                raise OutputError(f"{escape_path(self.path)}: changed while being read (it "
                                  f"held {self.size * self.dtype.itemsize} bytes, now ends at "
                                  f"byte {start * self.dtype.itemsize + got})")
            got += n

    def head(self, n: int) -> np.ndarray:
        """The first ``n`` records (fewer when the file has fewer), in one array."""
        n = max(0, min(n, self.size))
        return next(self.chunks(n, n), np.zeros(0, self.dtype))


class NotRegularFile(OSError):
    """What :func:`open_regular` found in a file's place is no regular file."""


def open_regular(p: str | Path, *, follow_links: bool = True):
    """``p`` opened for reading as a regular file (``dump`` and ``diff`` read artifacts,
    manifests and NEFFs so): without blocking (``O_NONBLOCK``: a FIFO put in its place
    after the caller's check would wait for a writer forever), through a link only if
    ``follow_links``, and checked once open; anything else there is
    :class:`NotRegularFile`."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(p, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFile(errno.EINVAL, "not a regular file", str(p))
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _read_error(p: Path, exc: OSError) -> Exception:
    if isinstance(exc, NotRegularFile):
        return OutputError(f"{escape_path(p)}: not a regular file")
    if exc.errno == errno.ENOMEM:  # the process's limits, not the file: exit 71
        return MemoryError(f"{escape_path(p)}: {exc.strerror or exc}")
    return OutputError(f"{escape_path(p)}: cannot read ({exc.strerror or exc})")


def open_records(path: str | Path, name: str | None = None) -> RecordFile:
    """A .bin artifact checked, to be read by :class:`RecordFile` (``name`` defaults to the
    file's name): a regular file nrtrewrite writes, readable, of whole records."""
    p = Path(path)
    name = name or p.name
    if name not in F.ARTIFACTS:
        # (the closest by the part before the first dot: every artifact ends in .bin, which
        # would make any short NAME.bin close to one)
        stems = {a.partition(".")[0]: a for a in F.ARTIFACTS}
        hint = did_you_mean(name.partition(".")[0], stems, ", ".join(F.ARTIFACTS),
                            lambda stem: escape_controls(stems[stem]))
        raise OutputError(f"{escape_path(p)}: not an artifact file nrtrewrite writes{hint}")
    dtype = F.ARTIFACTS[name][0]
    # a folder or a device where a file should be: one line, not the OS error's traceback
    # (and a FIFO is never opened: reading it would wait for a writer)
    if p.exists() and not p.is_file():
        raise OutputError(f"{escape_path(p)}: not a regular file")
    try:
        with open_regular(p) as fh:
            st = os.fstat(fh.fileno())
            # a /proc or /sys file says 0 bytes and reads more: no artifact of ours
            more = fh.read(1) if not st.st_size else b""
    except OSError as exc:
        raise _read_error(p, exc) from None
    if more:
        raise OutputError(f"{escape_path(p)}: not an artifact file: its size says 0 bytes but "
                          "it reads more (a /proc or /sys file?)")
    nbytes = st.st_size
    if nbytes % dtype.itemsize:
        raise OutputError(f"{escape_path(p)}: {nbytes} bytes is not a whole number of "
                          f"{dtype.itemsize}-byte records")
    return RecordFile(p, name, dtype, nbytes // dtype.itemsize, (st.st_dev, st.st_ino))


def record_fields(rec: np.void) -> dict:
    """Raw fields of a structured record as plain Python values (nested TENSOR3D flattened)."""
    out = {}
    for name in rec.dtype.names:
        val = rec[name]
        if isinstance(val, np.void) and val.dtype.names:
            for sub, subval in record_fields(val).items():
                out[f"{name}.{sub}"] = subval
        elif isinstance(val, np.ndarray):
            out[name] = [int(x) for x in val.tolist()]
        else:
            out[name] = int(val)
    return out


#: spad.bin ``algo_type`` values whose bytes 4..7 hold the mesh overlay (``sema_shift_offset``
#: u16, ``sema_mask`` u16) instead of ``channel_list`` (docs/FORMATS.md §2): the engines the
#: runtime builds on its mesh object (MESH, SINGLE_STEP_MESH, INTRA_RDH, and the mesh variants
#: 8..10, which ``lower`` never writes).  Every other value is read as ``channel_list``.
SPAD_OVERLAY_ALGOS = frozenset(int(a) for a in (
    EncAlgType.MESH, EncAlgType.SINGLE_STEP_MESH, EncAlgType.INTRA_RDH,
    EncAlgType.TWO_STEP_POD_MESH, EncAlgType.LATENCY_OPT_MESH, EncAlgType.BW_OPT_MESH))


#: Decoded record fields shown in hex in text (addresses, handshake words, the channel
#: mask): ``dump``'s table and ``diff``'s lines; every other integer is decimal.
HEX_FIELDS = frozenset({"buf_ptr", "addr", "dev_addr", "dst_addr", "inc_send_handshake",
                        "inc_recv_handshake", "inc_send_complete", "inc_recv_complete",
                        "channel_list", "src.start_addr", "dst.start_addr"})


def _bit_fields(name: str, d: dict, w: dict, names, choose) -> None:
    """Add docs/FORMATS.md's bit fields of artifact ``name`` to ``d``, computed from ``w``,
    its integer fields: a record's (Python ints) or every record's (int64 columns), the same
    expressions for both.  ``names(enum_of, codes)`` names codes, ``choose(cond, a, b)``
    picks per record.  spad.bin's bytes 4..7 are left to the caller (their key depends on
    the entry's ``algo_type``)."""
    if name == "spad.bin":
        alg, flags = w["alg"], w["flags"]
        d.update(cc_op=w["header"] & 1, algo_type=alg & 0xF,
                 algo_type_name=names(lambda c: enum_name(EncAlgType, c), alg & 0xF),
                 algo_sub_type=(alg >> 4) & 7, trigger_next=alg >> 7,
                 reporter=flags & 1, ring_wait_complete=(flags >> 1) & 1,
                 ring_send_complete=(flags >> 2) & 1)
    elif name == "tpinc.bin":
        d["last_sync"] = w["flags"] & F.TPINC_LAST_SYNC
    elif name == "sb2sb.bin":
        d.update(in_dtype_name=names(_dtype_name, w["in_dtype"]),
                 out_dtype_name=names(_dtype_name, w["out_dtype"]))
    elif name == "legs.bin":
        d["leaf_name"] = names(leaf_name, w["leaf"])
        d["neigh_name"] = names(lambda c: enum_name(EncdNeigh, c), w["neigh"])
    elif name == "dma.bin":
        lc, mc = w["len_ctrl"], w["meta_ctrl"]
        length = lc & F.LEN_MASK
        d.update(length=choose(length == 0, 65536, length), meta=(lc >> 23) & 1,
                 gen=(lc >> F.GEN_SHIFT) & F.GEN_MASK, first=((lc & F.LEN_FIRST) != 0) * 1,
                 last=((lc & F.LEN_LAST) != 0) * 1, sdma_op=mc & 0xF,
                 dir=choose(mc & F.META_DIR_S2M, "S2M", "M2S"),
                 stream=(mc >> F.META_STREAM_SHIFT) & F.META_STREAM_MASK)
    elif name == "cce.bin":
        w0, w1, w2, w3 = w["w0"], w["w1"], w["w2"], w["w3"]
        d.update(meta=(w0 >> 23) & 1, meta_idx=(w0 >> 24) & 0x1F, op=w1 & 7,
                 op_name=names(lambda c: enum_name(SdmaCceType, c), w1 & 7),
                 last=(w1 >> 7) & 1, in_dtype=(w1 >> 8) & 0xF,
                 in_dtype_name=names(_dtype_name, (w1 >> 8) & 0xF), out_dtype=(w1 >> 12) & 0xF,
                 out_dtype_name=names(_dtype_name, (w1 >> 12) & 0xF),
                 acc_dtype=(w1 >> 16) & 0xF, acc_dtype_name=names(_dtype_name, (w1 >> 16) & 0xF),
                 valid=(w1 >> 25) & 1, length=w2 & 0xFFFFFF,
                 num_sources=w3 & 0x3F, reduction_type=(w3 >> 8) & 3)
    elif name == "sem.bin":
        c = w["ctrl"]
        d.update(subop=c & F.SEM_SUBOP_MASK,
                 subop_name=names(lambda v: enum_name(EvtSemSubop, v), c & F.SEM_SUBOP_MASK),
                 role=(c >> F.SEM_ROLE_SHIFT) & 0xFF, remote=((c & F.SEM_REMOTE) != 0) * 1,
                 gen=(c >> F.GEN_SHIFT) & F.GEN_MASK)
    elif name in ("net_src.bin", "net_dest.bin"):
        d["mark_name"] = names(lambda c: enum_name(NetAddrMark, c), w["mark"])


def _dtype_name(code: int) -> str:
    """The ``DType`` name of a dtype code (REFERENCES.md "Codes": ``BF16`` 6, ``FP32R``
    0xB, ...), ``0x..`` for a code it has none for (0)."""
    return enum_name(DType, code)


def _mesh_type_name(code: int) -> str:
    """The ``enc_alg_mesh_type`` name of a mesh entry's ``algo_sub_type`` (FORMATS.md §2:
    ``FULL_MESH`` 0 .. ``MESH_INVALID`` 4), ``0x..`` for 5 - 7."""
    return enum_name(EncAlgMeshType, code)


def decode_record(name: str, rec: np.void) -> dict:
    """Raw fields plus the bit fields of docs/FORMATS.md, named.  A spad.bin entry's bytes
    4..7 are named by its ``algo_type``: ``channel_list`` (ring family), or
    ``sema_shift_offset`` and ``sema_mask`` (:data:`SPAD_OVERLAY_ALGOS`), never both; a
    mesh-family entry (the overlay's) also names its ``algo_sub_type``,
    ``algo_sub_type_name`` (the ``enc_alg_mesh_type``), a ring-family one has no such key
    (its sub-type is no mesh type: 0, FORMATS.md §2)."""
    d = record_fields(rec)
    _bit_fields(name, d, dict(d), lambda enum_of, code: enum_of(code),
                lambda cond, a, b: a if cond else b)
    if name == "spad.bin" and d["algo_type"] in SPAD_OVERLAY_ALGOS:
        word = d["channel_list"]
        d = _in_place_of(d, "channel_list", sema_shift_offset=word & 0xFFFF, sema_mask=word >> 16)
        d = _in_place_of(d, "algo_sub_type", algo_sub_type=d["algo_sub_type"],
                         algo_sub_type_name=_mesh_type_name(d["algo_sub_type"]))
    return d


def _in_place_of(d: dict, key: str, **new) -> dict:
    """``d`` with ``key`` replaced by the keys of ``new`` where it stood: spad.bin's bytes
    4..7 among the stored fields whichever way they are read (the overlay's keys came last,
    after the bit fields)."""
    out = {}
    for k, v in d.items():
        if k == key:
            out.update(new)
        else:
            out[k] = v
    return out


def field_columns(arr: np.ndarray, prefix: str = "") -> dict[str, np.ndarray]:
    """:func:`record_fields` for every record of ``arr`` at once: the same keys in the same
    order, each a column of ``len(arr)`` rows (an array field: one row of its values)."""
    out = {}
    for name in arr.dtype.names:
        col = arr[name]
        if col.dtype.names:
            out.update(field_columns(col, f"{prefix}{name}."))
        else:
            out[prefix + name] = (col.reshape(len(arr), int(np.prod(col.shape[1:])))
                                  if col.ndim > 1 else col)
    return out


def _names(enum_of, codes: np.ndarray) -> np.ndarray:
    """``enum_of(code)`` for every code, as an object array: one call per distinct code."""
    uniq, inverse = np.unique(codes, return_inverse=True)
    return np.array([enum_of(c) for c in uniq.tolist()], object)[inverse.reshape(-1)]


def decode_columns(name: str, arr: np.ndarray) -> list[tuple[np.ndarray | None, dict]]:
    """:func:`decode_record` for every record of ``arr`` at once, as ``[(rows, columns)]``:
    ``columns`` maps the keys :func:`decode_record` gives, in its order, to a column each
    (integers: a numpy array, one row per record, ``(n, L)`` for an array field; names: an
    object array of str); ``rows`` is None (every record) or the indices the columns are of.
    Only spad.bin has two groups: its ring-family entries (``channel_list``) and its
    mesh-overlay ones (``sema_shift_offset``, ``sema_mask``), whose keys differ."""
    d = field_columns(arr)
    w = {k: v.astype(np.int64) for k, v in d.items() if v.ndim == 1 and v.dtype.itemsize < 8}
    _bit_fields(name, d, w, _names, lambda cond, a, b: np.where(cond, a, b).astype(
        object if isinstance(a, str) else np.int64))
    if name != "spad.bin":
        return [(None, d)]
    overlay = np.isin(d["algo_type"], list(SPAD_OVERLAY_ALGOS))
    if not overlay.any():
        return [(None, d)]
    ring = {k: v[~overlay] for k, v in d.items()}
    word = w["channel_list"][overlay]
    mesh = _in_place_of({k: v[overlay] for k, v in d.items()}, "channel_list",
                        sema_shift_offset=word & 0xFFFF, sema_mask=word >> 16)
    mesh = _in_place_of(mesh, "algo_sub_type", algo_sub_type=mesh["algo_sub_type"],
                        algo_sub_type_name=_names(_mesh_type_name, mesh["algo_sub_type"]))
    return [(np.flatnonzero(~overlay), ring), (np.flatnonzero(overlay), mesh)]


def column_texts(col: np.ndarray, hex_int: bool,
                 name_text: Callable[[str], str] | None = None) -> list[str]:
    """The values of a :func:`decode_columns` column as text, the way ``dump`` and ``diff``
    write a decoded value: names as they are, or through ``name_text`` (one call per
    distinct name); an array field's rows as Python lists (``[1, 2]``, which JSON writes
    alike); integers in hex (``0x1f``) when ``hex_int``, else in decimal."""
    if col.dtype == object:
        vals = col.tolist()
        if name_text is None:
            return vals
        text = {v: name_text(v) for v in set(vals)}
        return [text[v] for v in vals]
    if col.ndim == 2:
        return [str(v) for v in col.tolist()]
    if hex_int:
        return [f"0x{v:x}" for v in col.tolist()]
    return list(map(str, col.tolist()))


#: how a manifest of ours begins: its keys are sorted, so ``format`` comes first
OUR_MANIFEST_HEAD = re.compile(rb'\s*\{\s*"format"\s*:\s*"' + re.escape(FORMAT_NAME.encode())
                                + rb'"')


def is_our_output(path: Path) -> bool:
    """An empty folder, or one whose manifest.json says it is an nrtrewrite output (``lower
    --force`` replaces only these; ``diff`` compares only these).

    A manifest up to 1 MiB is parsed whole; a bigger one (a HIER plan's is tens of MB) is
    recognised by its beginning, without reading it all.  Only a regular file is (opened
    as :func:`open_regular`: a FIFO named manifest.json blocked ``lower -o`` and ``dump``)."""
    try:
        if not any(path.iterdir()):
            return True
        with open_regular(path / "manifest.json") as fh:
            head = fh.read(1 << 20)
            whole = not fh.read(1)
    except OSError:
        return False
    if not whole:
        return OUR_MANIFEST_HEAD.match(head) is not None
    try:
        doc = jsonin.loads(head, strict_objects=False)
    except (ValueError, RecursionError):
        return False
    return isinstance(doc, dict) and doc.get("format") == FORMAT_NAME


#: a rank folder's name (``F.rank_dir_name``): ``rank-`` and the rank's digits
RANK_DIR_NAME = re.compile(r"rank-([0-9]+)")


def rank_dir_order(name: str) -> tuple[int, str]:
    """Sort key of rank folder names: by rank, as the manifest's ``ranks`` (``rank-9999``
    before ``rank-10000``), then by name (``rank-1`` beside ``rank-0001``)."""
    return int(name[len("rank-"):]), name


def looks_like_rank_folder(p: Path) -> bool:
    """``p`` looks like one rank's folder of an output (its name, or a ``spad.bin`` in it):
    what a command that takes a whole output folder says it was given instead."""
    return (p / "spad.bin").exists() or RANK_DIR_NAME.fullmatch(p.name) is not None


def folder_rank(rdir: Path) -> int | None:
    """The rank of rank folder ``rdir``: from its name (``rank-0003``), else from its
    manifest's ``rank``; None when neither tells."""
    m = RANK_DIR_NAME.fullmatch(rdir.name)
    if m:
        return int(m.group(1))
    try:
        doc = jsonin.loads((rdir / "manifest.json").read_bytes(), strict_objects=False)
    except (OSError, ValueError, RecursionError):
        return None
    r = doc.get("rank") if isinstance(doc, dict) else None
    return r if isinstance(r, int) and not isinstance(r, bool) else None


def _one_rank_dir(rdir: Path, rank: int | None, what: Path) -> list[Path]:
    """``[rdir]``, refused when ``rank`` names another rank than the folder's."""
    if rank is not None:
        have = folder_rank(rdir)
        if have != rank:
            of = f"rank {have}" if have is not None else "a rank it does not name"
            raise OutputError(f"{escape_path(what)}: --rank {rank} names another rank than "
                              f"this rank folder's ({of}); --rank selects a rank of a whole "
                              "output folder")
    return [rdir]


def _not_a_folder(p: Path) -> str | None:
    """Why ``p`` is no rank folder to read (None: it is one): what it is, or the OS's reason.
    A link is none, even to a folder: ``lower`` writes none, and one to another rank's
    folder would show that rank's records under this rank's name."""
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        return "a link to nothing" if p.is_symlink() else "no such file"
    except OSError as exc:
        return (exc.strerror or str(exc)).lower()
    if p.is_symlink():
        return f"a link to {os.readlink(p)}, not a folder of the output"
    if stat.S_ISDIR(mode):
        return None
    return "a file" if stat.S_ISREG(mode) else "not a folder"


def rank_dirs(path: str | Path, rank: int | None = None) -> list[Path]:
    """The rank folders named by ``path``: an OUT folder, a rank folder (or a file's folder).
    ``rank`` selects one rank of an OUT folder; given with a rank folder or a file, it must
    be that folder's rank (an :class:`OutputError` otherwise)."""
    p = Path(path)
    if p.is_file():
        return _one_rank_dir(p.parent, rank, p)
    # an output folder: rank folders (``rank-`` and digits), not any entry named ``rank-*``
    named = sorted((d for d in p.glob("rank-*") if RANK_DIR_NAME.fullmatch(d.name)),
                   key=lambda d: rank_dir_order(d.name))
    dirs = [d for d in named if d.is_dir()]
    if dirs:
        # beside rank folders, an entry of a rank folder's name that is none (a file, a link
        # to nothing or to itself) is refused: a dump of every rank would silently lose it
        for d in named:
            if rank is None or d.name == F.rank_dir_name(rank):
                if (why := _not_a_folder(d)) is not None:
                    raise OutputError(f"{escape_path(d)}: not a rank folder ({why})")
        if rank is not None:
            dirs = [d for d in dirs if d.name == F.rank_dir_name(rank)]
            if not dirs:
                raise OutputError(f"{escape_path(p)}: no folder for rank {rank}")
        return dirs
    if (p / "manifest.json").exists() and (p / "spad.bin").exists():
        return _one_rank_dir(p, rank, p)
    if p.is_dir() and any(p.iterdir()) and is_our_output(p):  # its rank folders all gone
        raise OutputError(f"{escape_path(p)}: an nrtrewrite output folder without any rank "
                          "folder (its manifest.json lists the ranks lowered)")
    raise OutputError(f"{escape_path(p)}: neither an nrtrewrite output folder nor a rank "
                      "folder")
