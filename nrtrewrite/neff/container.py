"""The NEFF-like container: a 1024-byte header plus a gzip'd tar payload (NEFF-LIKE.md §1).

Reading never touches the disk beyond the input file: the payload is
decompressed in memory, streaming (so a gzip bomb stops at the limit), and the
tar is walked as it is decompressed, each member's data going straight into
the member's own buffer.  Every member is vetted from its tar header *before*
its data is decompressed: absolute paths, ``..``, links, devices, fifos and
other non-regular members, duplicated names and members over the size limit
are refused; a directory entry is accepted, and left out, only as the folder
of a file member.

Writing is deterministic: the tar keeps the given member order, every member
has mtime 0, uid/gid 0, empty owner names and mode 0644 (ustar format, with a pax
extended header holding the name before a member whose name does not fit
ustar); the gzip header has mtime 0; the header hash is computed from the payload.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import os
import re
import stat
import struct
import tarfile
import zlib
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Iterator, Mapping

import construct as cs
import numpy as np

from nrtrewrite.errors import LimitError, ParseError, ValidationError, Warning_, Where, cut_middle
from nrtrewrite.neff.fields import explain_construct_error, field_offsets, zero_bytes
from nrtrewrite.neff.model import NeffHeader

HEADER_SIZE = 1024
PKG_VERSION_SHA256 = 1
PKG_VERSION_MD5 = 2
PKG_VERSIONS = (PKG_VERSION_SHA256, PKG_VERSION_MD5)
#: ``lnc_size`` values (NEFF-LIKE.md §1: the logical NeuronCore size, 1 or 2).
LNC_SIZES = (1, 2)

#: Default decompression limits (see :class:`Limits`).
MAX_TOTAL_BYTES = 4 << 30  # the whole decompressed tar stream
MAX_MEMBER_BYTES = 2 << 30  # one member's data
MAX_MEMBERS = 65536  # number of tar members (file members: directory entries are not)
#: Directory entries of the tar (ours): they are not members (accepted and left out), so
#: ``MAX_MEMBERS`` does not count them; this bounds them apart, so that a tar of millions of
#: directory entries is no way around the limit on the reader's work.
MAX_DIRECTORY_ENTRIES = 65536
#: The input file itself (header + payload + zero padding), checked before it is read.
MAX_FILE_BYTES = MAX_TOTAL_BYTES + (1 << 30)
#: An ``assemble`` spec file (YAML or JSON), checked before it is read by
#: :func:`read_file_bytes` (``assemble /dev/zero`` read until memory ran out): a spec has
#: about a value per line, and the assembler's MAX_SPEC_VALUES are some 40 MB of YAML.
MAX_SPEC_FILE_BYTES = 64 << 20
#: Collective triggers per model (ours): the u16 ``spad_index`` of legs.bin and of the
#: TOPSP_KICK word names at most 65536 SPAD entries per rank, and the decode work stays
#: bounded however well a stream of trigger words compresses.
MAX_TRIGGERS = 65536
#: One tar header read (ours): a ustar header is one 512-byte block; a pax extended header
#: or a GNU long name carries its records as data, read whole by :mod:`tarfile` before the
#: member it describes, outside ``MAX_MEMBER_BYTES``.  1 MiB holds any name and record set
#: a NEFF-like member needs, and bounds what such a header can make the reader hold.
MAX_TAR_HEADER_BYTES = 1 << 20
#: A member name's bytes (ours; the Linux PATH_MAX, which counts the final NUL).
MAX_MEMBER_NAME_BYTES = 4096

#: Output chunk of the streaming gunzip (also the most a limit can be overshot by
#: in memory before the check fires).
_GUNZIP_CHUNK = 1 << 20
#: Input slices the streaming gunzip feeds the decompressor: at most this many bytes,
#: and a new gzip member's first slice this many, doubling up to the largest.
_GUNZIP_SLICE = 1 << 16
_GUNZIP_FIRST_SLICE = 1 << 9
#: The streaming gunzip's ``on_consumed`` is told at most once per this many payload bytes.
_CONSUMED_STEP = 8 << 20

#: The header, every field of NEFF-LIKE.md §1 at its offset.
NEFF_HEADER = cs.Struct(
    "pkg_version" / cs.Int64ul,
    "header_size" / cs.Int64ul,
    "data_size" / cs.Int64ul,
    "neff_version_major" / cs.Int64ul,
    "neff_version_minor" / cs.Int64ul,
    "neff_build_version" / cs.Bytes(128),
    "num_tpb" / cs.Int32ul,
    "hash" / cs.Bytes(32),
    "uuid" / cs.Bytes(16),
    "name" / cs.Bytes(256),
    "requested_tpb_count" / cs.Int32ul,
    "tpb_per_node" / cs.Bytes(64),
    "feature_bits" / cs.Int64ul,
    "lnc_size" / cs.Int32ul,
    "reserved" / zero_bytes(468),
)

#: ``{field: (offset, size)}`` of the header.
HEADER_FIELDS = field_offsets(NEFF_HEADER)

#: The header's text fields (UTF-8, zero-padded) and their sizes.
STRING_FIELDS = {"neff_build_version": 128, "name": 256}
#: The header's byte fields other than ``reserved`` and their sizes (the rest are integers).
BYTES_FIELDS = {"hash": 32, "uuid": 16, "tpb_per_node": 64}
_STRING_FIELDS, _BYTES_FIELDS = STRING_FIELDS, BYTES_FIELDS  # (their earlier names)


@dataclass(frozen=True)
class Limits:
    """Input limits; the defaults are :data:`MAX_TOTAL_BYTES`, :data:`MAX_MEMBER_BYTES`,
    :data:`MAX_MEMBERS`, :data:`MAX_FILE_BYTES` and :data:`MAX_TRIGGERS`.

    ``max_total_bytes`` bounds the whole decompressed tar stream (headers and
    padding included); ``max_member_bytes`` bounds one member's data as declared
    in its tar header (checked before the data is read); ``max_file_bytes`` the
    input file (checked from its size before reading); ``max_triggers`` the
    collective triggers of the model (counted before any is decoded).
    """

    max_total_bytes: int = MAX_TOTAL_BYTES
    max_member_bytes: int = MAX_MEMBER_BYTES
    max_members: int = MAX_MEMBERS
    max_file_bytes: int = MAX_FILE_BYTES
    max_triggers: int = MAX_TRIGGERS


@dataclass
class Container:
    """A parsed container: the header, the members in archive order, and warnings."""

    header: NeffHeader
    members: dict[str, bytes]
    warnings: list[Warning_] = field(default_factory=list)
    hash_verified: bool = True


# ---------------------------------------------------------------------------
# header

def _decode_string(raw: bytes, name: str, where: Where) -> str:
    text, _, pad = raw.partition(b"\0")
    if pad.strip(b"\0"):
        raise ParseError("string field has non-NUL bytes after its NUL terminator",
                         where.merged(field=name, offset=HEADER_FIELDS[name][0]))
    try:
        return text.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ParseError(f"string field is not UTF-8 ({err.reason} at byte {err.start})",
                         where.merged(field=name, offset=HEADER_FIELDS[name][0])) from None


def parse_header(data: bytes, where: Where = Where()) -> NeffHeader:
    """Parse the first 1024 bytes of ``data`` (structure only; sizes are checked by
    :func:`read_container`)."""
    if len(data) < HEADER_SIZE:
        raise ParseError(f"file too short: {len(data)} bytes, the header alone needs "
                         f"{HEADER_SIZE}", where)
    raw = bytes(data[:HEADER_SIZE])
    _check_identity(raw, where)
    try:
        c = NEFF_HEADER.parse(raw)
    except cs.ConstructError as err:
        fname, off, why = explain_construct_error(err, NEFF_HEADER, raw)
        raise ParseError(f"header: {why}", where.merged(field=fname, offset=off)) from None
    return NeffHeader(
        pkg_version=c.pkg_version,
        header_size=c.header_size,
        data_size=c.data_size,
        neff_version_major=c.neff_version_major,
        neff_version_minor=c.neff_version_minor,
        neff_build_version=_decode_string(c.neff_build_version, "neff_build_version", where),
        num_tpb=c.num_tpb,
        hash=bytes(c.hash),
        uuid=bytes(c.uuid),
        name=_decode_string(c.name, "name", where),
        requested_tpb_count=c.requested_tpb_count,
        tpb_per_node=bytes(c.tpb_per_node),
        feature_bits=c.feature_bits,
        lnc_size=c.lnc_size,
    )


#: What a file that is not a NEFF-like file often is, by its first bytes (the error says so).
_LOOKS_LIKE = ((b"\x1f\x8b", "a gzip stream (a NEFF-like file is a 1024-byte header and then "
                "its tar.gz)"),
               (b"\x7fELF", "an ELF binary"), (b"PK\x03\x04", "a zip archive"),
               (b"{", "JSON text"))


def _check_identity(raw: bytes, where: Where) -> None:
    """``header_size`` and ``pkg_version`` (the only header fields with fixed values before
    the reserved bytes), checked before the rest: a file with both wrong is not a NEFF-like
    file at all (a text file used to be refused for a non-zero reserved byte)."""
    pkg_version = int.from_bytes(raw[0:8], "little")
    header_size = int.from_bytes(raw[8:16], "little")
    size_ok, version_ok = header_size == HEADER_SIZE, pkg_version in PKG_VERSIONS
    if not size_ok and not version_ok:
        kind = next((f": it looks like {what}" for magic, what in _LOOKS_LIKE
                     if raw.lstrip()[:len(magic)] == magic), "")
        raise ParseError(f"not a NEFF-like file: its first 16 bytes hold pkg_version "
                         f"{pkg_version:#x} and header_size {header_size:#x}, where a NEFF-like "
                         f"header has 1 or 2, and {HEADER_SIZE}{kind}",
                         where.merged(offset=0))
    if not size_ok:
        raise ParseError(f"header_size must be {HEADER_SIZE}, not {header_size}",
                         where.merged(field="header_size", offset=8))
    if not version_ok:
        raise ParseError(f"unknown pkg_version {pkg_version} (1 = tar.gz + SHA-256, "
                         "2 = tar.gz + MD5)", where.merged(field="pkg_version", offset=0))


def build_header(header: NeffHeader) -> bytes:
    """The 1024 header bytes of ``header``, exactly as given (no hash computed).

    Raises :class:`ParseError` when a field does not fit its slot.
    """
    values = {}
    for name in HEADER_FIELDS:
        if name == "reserved":
            continue
        val = getattr(header, name)
        if name in STRING_FIELDS:
            raw = val.encode("utf-8")
            if len(raw) > STRING_FIELDS[name]:
                raise ParseError(f"{len(raw)} bytes do not fit the {STRING_FIELDS[name]}-byte "
                                 "field", Where(field=name))
            val = raw.ljust(STRING_FIELDS[name], b"\0")
        elif name in BYTES_FIELDS:
            if len(val) != BYTES_FIELDS[name]:
                raise ParseError(f"needs exactly {BYTES_FIELDS[name]} bytes, not {len(val)}",
                                 Where(field=name))
            val = bytes(val)
        else:
            size = HEADER_FIELDS[name][1]
            if not 0 <= int(val) < 1 << (8 * size):
                raise ParseError(f"value {val} does not fit u{8 * size}", Where(field=name))
        values[name] = val
    return NEFF_HEADER.build(values)


class FileBytes:
    """Bytes ``start..stop`` of an open file, read on demand by position (``os.pread``), for
    :func:`stream_container` to walk a file it neither holds nor maps: a mapped file that
    another process truncates meanwhile ends the reader with SIGBUS, no message; here a
    read that comes back short is a :class:`ParseError`.  Sliced (step 1) like ``bytes``,
    each slice a new ``bytes``; ``sub`` is a window without a read."""

    #: bytes read at a time by :meth:`chunks`
    CHUNK = 1 << 20

    def __init__(self, fd: int, size: int, where: Where = Where(), start: int = 0,
                 stop: int | None = None):
        self.fd, self.size, self.where = fd, size, where
        self.start, self.stop = start, size if stop is None else stop

    def __len__(self) -> int:
        return self.stop - self.start

    def sub(self, a: int, b: int) -> "FileBytes":
        a, b = max(0, min(a, len(self))), max(0, min(b, len(self)))
        return FileBytes(self.fd, self.size, self.where, self.start + a,
                         self.start + max(a, b))

    def __getitem__(self, key: slice) -> bytes:
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("FileBytes takes slices of step 1")
        a, b, _ = key.indices(len(self))
        if b <= a:
            return b""
        try:
            data = os.pread(self.fd, b - a, self.start + a)
        except OSError as err:
            raise ParseError(f"cannot read: {err.strerror or err}", self.where) from None
        if len(data) != b - a:
            raise ParseError(f"changed while being read (it held {self.size} bytes, now "
                             f"ends at byte {self.start + a + len(data)})", self.where)
        return data

    def chunks(self, a: int = 0):
        """The bytes from ``a`` to the end, :data:`CHUNK` at a time."""
        for pos in range(a, len(self), self.CHUNK):
            yield self[pos:pos + self.CHUNK]


def _first_nonzero(data, start: int) -> int | None:
    """The offset of the first non-zero byte of ``data`` (bytes, a buffer or
    :class:`FileBytes`) from ``start``, or None."""
    if isinstance(data, FileBytes):
        for k, part in enumerate(data.chunks(start)):
            arr = np.frombuffer(part, np.uint8)
            if arr.any():
                return start + k * FileBytes.CHUNK + int(np.argmax(arr != 0))
        return None
    if start >= len(data):
        return None
    arr = np.frombuffer(data, dtype=np.uint8, offset=start)
    return start + int(np.argmax(arr != 0)) if arr.any() else None


def payload_digest(pkg_version: int, payload) -> bytes:
    """The 32-byte hash field for ``payload`` (SHA-256, or MD5 + 16 zero bytes; a buffer or
    :class:`FileBytes`)."""
    if pkg_version == PKG_VERSION_SHA256:
        h = hashlib.sha256()
    elif pkg_version == PKG_VERSION_MD5:
        h = hashlib.md5()
    else:
        raise ParseError(f"unknown pkg_version {pkg_version} (1 = tar.gz + SHA-256, "
                         "2 = tar.gz + MD5)", Where(field="pkg_version"))
    for part in (payload.chunks() if isinstance(payload, FileBytes) else [payload]):
        h.update(part)
    return h.digest() + (bytes(16) if pkg_version == PKG_VERSION_MD5 else b"")


# ---------------------------------------------------------------------------
# payload

class _Gunzip:
    """The streaming gunzip of a payload (one or more gzip members) with at most ``limit``
    output bytes: :meth:`chunk` returns the output piece by piece.

    The limit is checked as the output grows, so a gzip bomb stops at the limit.  Zero
    bytes after the last gzip member are tolerated (padding); anything else is an error,
    as is a truncated stream.

    Linear time: the decompressor is fed slices of the payload (a ``memoryview``, no
    copy), each at most :data:`_GUNZIP_SLICE` bytes, so what zlib copies back (the
    ``unconsumed_tail`` of a slice when the output chunk is full, the ``unused_data``
    after a gzip member's end) is bounded by one slice.  Feeding the whole rest of the
    payload instead made each 1 MiB output chunk, and each gzip member, copy the rest:
    quadratic (docs/PERFORMANCE.md "Reading a large or many-member payload").  A new
    gzip member is fed slices from :data:`_GUNZIP_FIRST_SLICE` bytes, doubling, so the
    unused bytes copied at its end are bounded by its own size: 160,000 empty members
    cost no more than their 3.2 MB.

    ``on_consumed(offset)``, if given, is told every :data:`_CONSUMED_STEP` bytes of
    payload that no byte before ``offset`` will be read again (``diff`` drops those pages
    of its memory-mapped file, whose payload would otherwise stay resident whole).
    """

    def __init__(self, payload: bytes | memoryview, limit: int, where: Where = Where(),
                 on_consumed: Callable[[int], None] | None = None):
        self.where = where.merged(field="payload")
        self.view = payload if isinstance(payload, FileBytes) else memoryview(payload).cast("B")
        if not len(self.view):
            raise ParseError("empty payload (no gzip stream)", self.where)
        self.limit = limit
        self.produced = 0  # output bytes so far
        self.dec = zlib.decompressobj(wbits=31)
        self.pos = 0  # payload bytes handed to the decompressor so far
        self.step = _GUNZIP_FIRST_SLICE
        self.pending: bytes | memoryview = b""
        self.done = False
        self.on_consumed = on_consumed
        self.told = 0  # pos when on_consumed was last told

    def chunk(self, size: int = _GUNZIP_CHUNK) -> bytes:
        """The next at most ``size`` (> 0) output bytes; ``b""`` once the gzip stream has
        ended (and what follows it was found to be zero padding)."""
        view, total = self.view, len(self.view)
        while not self.done:
            if not self.pending and self.pos < total:
                self.pending = view[self.pos:self.pos + self.step]
                self.pos += len(self.pending)
                self.step = min(2 * self.step, _GUNZIP_SLICE)
                if self.on_consumed is not None and self.pos - self.told >= _CONSUMED_STEP:
                    # what is read from now on starts at most a slice back: a gzip
                    # member's end in the slice fed last, or the pending slice itself
                    self.told = self.pos
                    self.on_consumed(self.pos - _GUNZIP_SLICE)
            room = self.limit - self.produced + 1
            try:
                out = self.dec.decompress(self.pending, max(1, min(size, room)))
            except zlib.error as err:
                raise ParseError(f"corrupt gzip stream: {err}", self.where) from None
            self.produced += len(out)
            if self.produced > self.limit:
                raise LimitError(f"decompressed payload exceeds the limit of {self.limit} "
                                 "bytes", self.where)
            self.pending = self.dec.unconsumed_tail
            if self.dec.eof:
                # where this gzip member ends: zlib puts the rest of its last input in
                # unused_data (and leaves a stale copy in unconsumed_tail if that was not
                # empty)
                end = self.pos - len(self.dec.unused_data)
                if view[end:end + 2] == b"\x1f\x8b":
                    self.dec = zlib.decompressobj(wbits=31)
                    self.pos, self.step, self.pending = end, _GUNZIP_FIRST_SLICE, b""
                elif end < total and _first_nonzero(view, end) is not None:
                    raise ParseError(f"unexpected bytes after the gzip stream at payload "
                                     f"offset 0x{end:x}", self.where)
                else:
                    self.done = True  # the end, or zero padding
            elif not out and not self.pending and self.pos >= total:
                raise ParseError("truncated gzip stream", self.where)
            if out:
                return out
        return b""


def gunzip_limited(payload: bytes | memoryview, limit: int, where: Where = Where()) -> bytes:
    """Decompress a gzip stream (one or more members) with at most ``limit`` output bytes
    (:class:`_Gunzip`: a gzip bomb stops at the limit, zero padding after the last member
    is tolerated, linear time).

    The output goes straight into one growing buffer (``BytesIO.getvalue`` returns it
    without a copy): peak memory is about the output.  The reader does not use this: it
    decompresses each tar member straight into the member's own buffer
    (:func:`iter_members`)."""
    gz = _Gunzip(payload, limit, where)
    out = io.BytesIO()
    while chunk := gz.chunk():
        out.write(chunk)
    return out.getvalue()


class _TarStream:
    """A tar stream read forward only, from ``source.chunk(size)`` (the :class:`_Gunzip` of
    the payload): what :mod:`tarfile` needs to walk the headers (``read``, ``tell``,
    ``seek`` forward), and :meth:`member_data`, which reads a member's data straight into
    its own buffer, so no second copy of the tar is ever held."""

    def __init__(self, source: _Gunzip, where: Where = Where()):
        self.source = source
        self.where = where  # the payload's, for a header over MAX_TAR_HEADER_BYTES
        self.buf = b""  # the current piece of output
        self.off = 0  # the next byte in it
        self.position = 0  # stream offset of buf[off]
        self.last: tuple[int, bytes] = (0, b"")  # start and bytes of the last read()
        #: start and bytes of every read() since :func:`_check_extended_headers` last took
        #: them: the header blocks tarfile read, and the data of its extended headers
        self.reads: list[tuple[int, bytes]] = []

    def tell(self) -> int:
        return self.position

    def _fill(self, want: int) -> bool:
        if self.off >= len(self.buf):
            self.buf, self.off = self.source.chunk(max(want, _GUNZIP_CHUNK)), 0
        return self.off < len(self.buf)

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            raise tarfile.ReadError("unbounded read")  # tarfile never asks one
        if n > MAX_TAR_HEADER_BYTES:  # member data is read by member_data, never here
            raise LimitError(f"a tar header of {self._declared_size(n)} bytes (a pax extended "
                             f"header or GNU long name) at tar offset 0x{self.position:x}, "
                             f"more than {MAX_TAR_HEADER_BYTES} (MAX_TAR_HEADER_BYTES)",
                             self.where)
        start, parts = self.position, []
        while n > 0 and self._fill(n):
            piece = self.buf[self.off:self.off + n]
            self.off += len(piece)
            self.position += len(piece)
            n -= len(piece)
            parts.append(piece)
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        self.last = (start, data)
        self.reads.append(self.last)
        return data

    def _declared_size(self, n: int) -> int:
        """The data size its header block (the last read, just before this one) declares for
        a read of ``n`` bytes: tarfile reads an extended header's data rounded up to whole
        512-byte blocks; ``n`` itself when the last read is not that header."""
        start, block = self.last
        if len(block) == TAR_BLOCK and start + TAR_BLOCK == self.position:
            try:
                size = tarfile.nti(block[124:136])
            except (tarfile.TarError, ValueError, OverflowError):
                return n
            if -(-size // TAR_BLOCK) * TAR_BLOCK == n:
                return size
        return n

    def seek(self, pos: int, whence: int = 0) -> int:
        if whence != 0 or pos < self.position:
            raise tarfile.ReadError(f"tar stream cannot seek back to 0x{pos:x}")
        skip = pos - self.position
        while skip > 0:
            if self.off < len(self.buf):
                k = min(skip, len(self.buf) - self.off)
                self.off += k
            else:
                k = len(self.source.chunk(min(skip, _GUNZIP_CHUNK)))
                if not k:
                    break  # past the end: the next read returns b""
            self.position += k
            skip -= k
        return self.position

    def member_data(self, size: int) -> bytes | None:
        """The next ``size`` bytes (``size`` >= 0), or ``None`` when the stream ends before
        them."""
        if size < 0:  # (iter_members refuses a negative size first)
            raise ValueError(f"negative member size {size}")
        if self.off + size <= len(self.buf):
            data = self.buf[self.off:self.off + size]
            self.off += size
            self.position += size
            return data
        out = io.BytesIO()  # getvalue() hands over its buffer: the member is held once
        need = size
        while need:
            if self.off < len(self.buf):
                piece = memoryview(self.buf)[self.off:self.off + need]
                self.off += len(piece)
            else:
                piece = self.source.chunk(min(need, _GUNZIP_CHUNK))  # no more than needed
                if not piece:
                    return None
            out.write(piece)
            self.position += len(piece)
            need -= len(piece)
        return out.getvalue()

    def zeros_to_end(self) -> int | None:
        """How many bytes there are from here to the end of the stream, all zero, or
        ``None`` at the first that is not (read up to it: :meth:`tell` is its offset)."""
        start = self.position
        while self._fill(_GUNZIP_CHUNK):
            if (arr := np.frombuffer(self.buf, dtype=np.uint8, offset=self.off)).any():
                k = int(np.argmax(arr != 0))
                self.position += k
                self.off += k
                return None
            self.position += len(self.buf) - self.off
            self.off = len(self.buf)
        return self.position - start


_TYPE_NAMES = {
    tarfile.SYMTYPE: "symbolic link",
    tarfile.LNKTYPE: "hard link",
    tarfile.CHRTYPE: "character device",
    tarfile.BLKTYPE: "block device",
    tarfile.FIFOTYPE: "fifo",
    tarfile.DIRTYPE: "directory",
    tarfile.GNUTYPE_SPARSE: "sparse file",
}
#: Regular files: types '0' and NUL, and '7' (contiguous file, which POSIX readers read as
#: a regular file).
_REGULAR = (tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.CONTTYPE)


#: A control character (C0 or DEL) or a backslash, which no member name holds.
_CONTROL_OR_BACKSLASH = re.compile(r"[\x00-\x1f\x7f\\]").search


def check_member_name(name: str) -> str | None:
    """Why ``name`` is not an acceptable member name, or ``None`` if it is.

    A member name is a relative POSIX path of non-empty components, none of them
    ``.`` or ``..``, with no backslash or control character.
    """
    if not name:
        return "empty member name"
    if (n := len(name.encode(TAR_ENCODING, "surrogateescape"))) > MAX_MEMBER_NAME_BYTES:
        return (f"member name of {n} bytes, more than {MAX_MEMBER_NAME_BYTES} "
                "(MAX_MEMBER_NAME_BYTES)")
    if name.startswith("/"):
        return "absolute member path"
    if _CONTROL_OR_BACKSLASH(name):
        return "member name has a backslash or control character"
    parts = name.split("/")
    if ".." in parts:
        return "member path contains '..'"
    if any(p in ("", ".") for p in parts):
        return "member path has an empty or '.' component"
    return None


def _dot_prefix_hint(name: str) -> str:
    """What the error of a member ``.`` or ``./NAME`` adds: ``tar -C DIR -czf m.tgz .`` (GNU
    tar, bsdtar; Python's ``tarfile.add(DIR, ".")``) names its members so, and a NEFF-like
    member name has no ``.`` component (NEFF-LIKE.md §1: ``neff.json``, ``sg00/def.json``)."""
    if name != "." and not name.startswith("./"):
        return ""
    return (" (a tar made of a folder's '.' names its members './NAME'; make it of the "
            "folder's entries instead: tar -C DIR -czf m.tgz neff.json sg00 ...)")


#: A pax ``size`` record's value: ASCII decimal digits (POSIX pax: a decimal number).
_DECIMAL = re.compile(r"[0-9]+").fullmatch


def shown_member_name(name: str) -> str:
    """A member name as an error shows it: whole, unless it is over 200 characters."""
    return cut_middle(name, 200, 120, 40, "{head}...{tail} ({n} characters)")


#: The tar header types whose data tarfile reads itself, whole, before the header of the
#: member they describe (:func:`_check_extended_headers`), and what an error calls them.
_EXTENDED_HEADERS = {
    tarfile.XHDTYPE: "pax extended header",
    tarfile.SOLARIS_XHDTYPE: "pax extended header",  # type 'X', as tarfile reads it
    tarfile.XGLTYPE: "pax global header",
    tarfile.GNUTYPE_LONGNAME: "GNU long name",
    tarfile.GNUTYPE_LONGLINK: "GNU long link name",
}
_PAX_HEADERS = (tarfile.XHDTYPE, tarfile.SOLARIS_XHDTYPE, tarfile.XGLTYPE)
#: A GNU long name's data is the name, one NUL and, to the header's size, nothing but zeros
#: (GNU tar 1.34 and Python's tarfile write the name and one NUL, the size counting it):
#: tarfile and GNU tar end the name at the first NUL, so bytes after it would be read by
#: neither.  Without a NUL the data is the name, as both read it.
_GNU_LONG_NAMES = (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK)
#: The start of a pax record: its length in decimal digits and a space.
_PAX_LENGTH = re.compile(rb"([0-9]+) ")


def pax_records_fault(records: bytes) -> str | None:
    """Why ``records`` (the data of a pax extended header, as many bytes as its header's
    size says) is not a sequence of records ``"<length> <keyword>=<value>\n"`` (POSIX pax),
    each exactly ``<length>`` bytes long, its own digits and the newline included; or
    ``None``.  Python's tarfile before 3.12 reads the records up to the first bytes that do
    not start one and takes the rest as it comes (a record whose length falls short of its
    newline, or runs into the next one or the padding); 3.12 refuses some of these:
    two readers of one archive could see different names and sizes."""
    pos, size = 0, len(records)
    while pos < size:
        at = f"record at byte {pos} of its {size} bytes of records"
        m = _PAX_LENGTH.match(records, pos)
        if m is None:
            after = " (after the last record)" if pos else ""
            return (f"{at}{after} does not start with a decimal length and a space: it "
                    f"starts {bytes(records[pos:pos + 16])!r}")
        digits = m.group(1)
        length = int(digits) if len(digits) <= 20 else None  # (a 1 MiB number: int() is slow)
        shown = digits.decode() if length is not None else f"a number of {len(digits)} digits"
        if length is None or pos + length > size:
            return (f"{at} gives its length as {shown}, which runs past their end "
                    f"({size - pos} bytes left)")
        head = m.end() - pos  # the digits and the space
        if length < head + 3:
            return (f"{at} gives its length as {length}, too short for a record "
                    "('<length> <keyword>=<value>' and a newline)")
        record = records[pos:pos + length]
        if record[-1] != 0x0A:
            return (f"{at} does not end in a newline where its length {length} says: byte "
                    f"{length - 1} of the record is 0x{record[-1]:02x}")
        keyword, equals, _ = bytes(record[head:-1]).partition(b"=")
        if not equals or not keyword:
            return f"{at} has no '<keyword>=' after its length"
        pos += length
    return None


def _check_extended_headers(stream: _TarStream, where: Where) -> None:
    """Check the extended headers among the reads tarfile made since the last call (the
    header blocks of a member, and the data of the pax extended headers and GNU long names
    before it): a pax header's data must be well-formed records (:func:`pax_records_fault`),
    a GNU long name's nothing but zeros after the name's NUL (:data:`_GNU_LONG_NAMES`),
    and the padding after any extended header's data, to the next 512-byte block, zero
    bytes (as :func:`_member_data` checks a member's).  A :class:`ParseError` at ``where``
    (the member the headers describe, or the payload) names the header's tar offset."""
    reads, stream.reads = stream.reads, []
    i = 0
    while i + 1 < len(reads):
        start, block = reads[i]
        i += 1
        kind = _EXTENDED_HEADERS.get(block[156:157]) if len(block) == TAR_BLOCK else None
        if kind is None:
            continue
        try:  # (the size field alone, as tarfile.TarInfo.frombuf reads it)
            size = tarfile.nti(block[124:136])
        except (tarfile.TarError, ValueError, OverflowError):
            continue  # (tarfile read no data after it)
        at, data = reads[i]
        if at != start + TAR_BLOCK or not 0 <= size <= len(data):
            continue  # (not the data tarfile read for this header)
        i += 1
        head = f"{kind} at tar offset 0x{start:x}"
        if block[156:157] in _PAX_HEADERS and (why := pax_records_fault(data[:size])):
            raise ParseError(f"{head}: {why}", where)
        nul = data.find(0, 0, size) if block[156:157] in _GNU_LONG_NAMES else -1
        if nul >= 0 and (k := _first_nonzero(data[:size], nul + 1)) is not None:
            raise ParseError(f"{head}: non-zero byte 0x{data[k]:02x} at byte {k} of its {size} "
                             f"bytes of data, after the name's NUL (byte {nul}), where tar "
                             "readers end the name", where)
        if (k := _first_nonzero(data, size)) is not None:
            raise ParseError(f"{head}: non-zero byte 0x{data[k]:02x} at tar offset "
                             f"0x{at + k:x}, in the zero padding after its {size} bytes of "
                             "data", where)


#: The numeric fields of a ustar header :meth:`tarfile.TarInfo.frombuf` reads after the
#: checksum, in its order: name, offset, length (POSIX ustar; FORMATS.md §9).
_OCTAL_FIELDS = (("mode", 100, 8), ("uid", 108, 8), ("gid", 116, 8), ("size", 124, 12),
                 ("mtime", 136, 12), ("devmajor", 329, 8), ("devminor", 337, 8))


def _octal_fault(block: bytes, name: str, offset: int, length: int) -> str | None:
    """Why the header's field ``name`` is not a number tar readers read, or ``None``."""
    raw = bytes(block[offset:offset + length])
    try:
        tarfile.nti(raw)
    except (tarfile.TarError, ValueError):
        return f"its {name} field (bytes {offset}..{offset + length - 1}) {raw!r} is not an " \
               "octal number"
    return None


def header_fault(block: bytes) -> str | None:
    """Why ``block``, the bytes read for a tar header (512 bytes, fewer at the end of the
    tar), is not one, as POSIX ustar and :meth:`tarfile.TarInfo.frombuf` read it: cut short
    by the end of the tar, a checksum that is not its bytes' sum, or a numeric field that is
    not an octal number (or base-256); ``None`` for a block of zeros or a header of sound
    fields (tarfile refused it for something else)."""
    if len(block) < TAR_BLOCK:
        return (f"truncated header: the tar ends {len(block)} bytes into its "
                f"{TAR_BLOCK}-byte block")
    if not any(block):
        return None
    if why := _octal_fault(block, "chksum", 148, 8):
        return why
    said, sums = tarfile.nti(block[148:156]), tarfile.calc_chksums(block)
    if said not in sums:
        return (f"bad checksum: its chksum field says 0o{said:o}, its bytes (the field "
                f"counted as spaces) sum to 0o{sums[0]:o}")
    for name, offset, length in _OCTAL_FIELDS:
        if why := _octal_fault(block, name, offset, length):
            return why
    return None


def _extended_headers_at_end(reads: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    """``(tar offset, type)`` of each extended header tarfile read (``reads``, as
    :attr:`_TarStream.reads` holds them) right before a zero block, the end of the archive,
    or the end of the tar, where the header of the member they describe would be; empty if
    the reads are not that (the last neither a zero block nor the end of the tar, or a read
    before it not an extended header or its data)."""
    if not reads or len(reads[-1][1]) not in (0, TAR_BLOCK) or any(reads[-1][1]):
        return []
    chain, pos, i = [], reads[0][0], 0
    while i + 1 < len(reads):
        start, block = reads[i]
        kind = block[156:157]
        if start != pos or len(block) != TAR_BLOCK or kind not in _EXTENDED_HEADERS:
            return []
        try:
            size = tarfile.nti(block[124:136])
        except (tarfile.TarError, ValueError):
            return []
        at, data = reads[i + 1]  # (tarfile reads the data of every one, 0 bytes too)
        if at != start + TAR_BLOCK or len(data) != -(-size // TAR_BLOCK) * TAR_BLOCK:
            return []
        chain.append((start, kind))
        pos, i = at + len(data), i + 2
    return chain if pos == reads[-1][0] else []


def _header_failure(stream: _TarStream, err: Exception, after: int | None, offset: int,
                    pw: Where) -> int:
    """The archive's end when tarfile failed on a header after pax global headers alone
    (POSIX lets one stand anywhere; tarfile 3.11 refuses one with no member after it, GNU
    tar 1.34 lists the archive): the tar offset of the zero block after them.  Any other
    failure is a :class:`ParseError`: extended headers (a pax header, a GNU long name) with
    no member after them, or the header at fault, where it is and why (:func:`header_fault`).
    ``after`` is the number of members read (``None``: tarfile failed on the first header,
    opening the archive); ``offset``, where the member's headers start."""
    reads = list(stream.reads)
    _check_extended_headers(stream, pw)  # (a malformed one is said as such)
    head = "corrupt tar archive" if after is None else f"corrupt tar archive after member {after}"
    chain = _extended_headers_at_end(reads)
    end = reads[-1][0] if chain else None
    for at, kind in chain:
        if kind != tarfile.XGLTYPE:
            after = (f"the end of the archive (a zero block) follows at tar offset 0x{end:x}"
                     if reads[-1][1] else f"the tar ends at tar offset 0x{end:x}")
            raise ParseError(f"{head}: {_EXTENDED_HEADERS[kind]} at tar offset 0x{at:x} "
                             f"describes no member: {after}", pw)
    if end is not None:
        return end
    # the block tarfile failed on: the last header block it read (after an extended
    # header's data: the member header it announces), else where the member's headers start
    start, block = stream.last
    if start >= offset and len(block) <= TAR_BLOCK:
        if not block and start == 0:
            raise ParseError("corrupt tar archive: empty archive: the payload decompresses to "
                             "no bytes, not a header at tar offset 0x0 nor the end-of-archive "
                             "marker (two 512-byte zero blocks, POSIX tar)", pw)
        if block and (why := header_fault(block)):
            raise ParseError(f"{head}: invalid header at tar offset 0x{start:x}: {why}", pw)
    at = start if len(block) == TAR_BLOCK and start >= offset else offset
    raise ParseError(f"{head}: {err} (reading the header at tar offset 0x{at:x})", pw)


def _member_data(stream: _TarStream, size: int, mw: Where) -> bytes:
    """The member's ``size`` bytes of data, and the padding after them to the next 512-byte
    block checked: zero bytes, as every tar writer fills it (GNU tar, bsdtar, Python's
    tarfile, :func:`build_tar`); the bytes there are not the member's data its header
    declares (tarfile skipped them unread)."""
    data = stream.member_data(size)
    if data is None:
        raise ParseError("tar archive truncated inside this member", mw)
    start = stream.tell()
    pad = stream.member_data(-size % TAR_BLOCK)
    if pad is None:
        raise ParseError(f"tar archive truncated in the zero padding after this member's "
                         f"{size} bytes of data", mw)
    if (k := _first_nonzero(pad, 0)) is not None:
        raise ParseError(f"non-zero byte 0x{pad[k]:02x} at tar offset 0x{start + k:x}, in the "
                         f"zero padding after this member's {size} bytes of data", mw)
    return data


def iter_members(tar: _Gunzip, limits: Limits, where: Where = Where()
                 ) -> Iterator[tuple[str, bytes]]:
    """``(name, data)`` of each member of the tar the streaming gunzip of the payload gives,
    in archive order, each vetted from its header before its data is decompressed; the
    checks of the archive's end (zero blocks, the directory entries) after the last one.
    The walk keeps no member it has handed over: a caller that keeps none holds one member
    at a time (``diff``).

    A directory entry without data is accepted and left out (``tar czf m.neff.tgz sg00
    neff.json`` writes ``sg00/``) when it is the folder of a file member; any other
    directory entry is refused.  ``limits.max_members`` counts the file members; directory
    entries, not members, are bounded apart (:data:`MAX_DIRECTORY_ENTRIES`)."""
    names: set[str] = set()  # the members handed over so far
    folders: dict[str, Where] = {}  # directory entries: name -> where
    directories = 0  # directory entries so far (not members: MAX_DIRECTORY_ENTRIES)
    pw = where.merged(field="payload")
    stream = _TarStream(tar, pw)
    try:  # names are UTF-8, as written (TAR_ENCODING), whatever the locale's encoding
        tf = tarfile.open(fileobj=stream, mode="r:", encoding=TAR_ENCODING,
                          errors="surrogateescape")
    except (tarfile.TarError, ValueError, UnicodeError, OverflowError) as err:
        tf, end = None, _header_failure(stream, err, None, 0, pw)
    with tf or contextlib.nullcontext():
        while tf is not None:
            try:
                info = tf.next()
            except (tarfile.TarError, ValueError, UnicodeError, OverflowError) as err:
                end = _header_failure(stream, err, len(names), tf.offset, pw)
                break
            if info is None:
                end = tf.offset
                _check_extended_headers(stream, pw)
                break
            mw = where.merged(member=shown_member_name(info.name))
            _check_extended_headers(stream, mw if info.name else pw)  # first: they made the name
            name = info.name.rstrip("/") if info.type == tarfile.DIRTYPE else info.name
            why = check_member_name(name)
            if why:
                raise ParseError(why + _dot_prefix_hint(name), mw)
            if info.size < 0:  # a base-256 size field or a pax "size" record may say so
                raise ParseError(f"negative member size {info.size}", mw)
            if (pax := info.pax_headers.get("size")) is not None and not _DECIMAL(pax):
                # tarfile reads int(): "6_4" as 64, Arabic-Indic digits, and junk as 0
                raise ParseError(f"pax size record {shown_member_name(pax)!r} is not a decimal "
                                 "number", mw)
            if info.type == tarfile.DIRTYPE:
                if directories >= MAX_DIRECTORY_ENTRIES:
                    raise LimitError(f"more than {MAX_DIRECTORY_ENTRIES} directory entries "
                                     "(MAX_DIRECTORY_ENTRIES)", mw)
                directories += 1
                if info.size:
                    raise ParseError(f"directory member with data ({info.size} bytes)", mw)
                folders.setdefault(name, mw)
                continue
            if info.type not in _REGULAR or info.sparse is not None:
                kind = _TYPE_NAMES.get(info.type, f"non-regular (tar type {info.type!r})")
                if info.sparse is not None:
                    kind = "sparse file"
                raise ParseError(f"{kind} member is not allowed (only regular files)", mw)
            if len(names) >= limits.max_members:
                raise LimitError(f"more than {limits.max_members} members", mw)
            if info.name in names:
                raise ParseError("duplicate member name", mw)
            if info.size > limits.max_member_bytes:
                raise LimitError(f"member size {info.size} exceeds the limit of "
                                 f"{limits.max_member_bytes} bytes", mw)
            if stream.tell() != info.offset_data:
                raise ParseError(f"corrupt tar archive: member data at tar offset "
                                 f"0x{info.offset_data:x}, stream at 0x{stream.tell():x}", mw)
            names.add(info.name)  # (an error reading its data ends the walk)
            # no name holds the data: once handed over, the member is the caller's alone
            yield info.name, _member_data(stream, info.size, mw)
    tail = end
    # tarfile ends the archive at the first header block it cannot read: that block and
    # everything after it must be zero (end-of-archive blocks and padding), and at least the
    # two blocks of the end-of-archive marker
    start, block = stream.last
    rest = stream.zeros_to_end()
    if start == tail and any(block) and (why := header_fault(block)):
        raise ParseError(f"corrupt tar archive: invalid header at tar offset 0x{tail:x}: {why}",
                         pw)
    if start == tail and rest is None and not any(block) and len(block) == TAR_BLOCK:
        at = stream.tell()
        raise ParseError(f"corrupt tar archive: non-zero byte 0x{stream.buf[stream.off]:02x} at "
                         f"tar offset 0x{at:x}, after the zero block at tar offset 0x{tail:x} "
                         "that ends the archive (only zero bytes may follow it)", pw)
    if start != tail or any(block) or rest is None:
        raise ParseError(f"corrupt tar archive: invalid header at tar offset 0x{tail:x}", pw)
    if (zeros := len(block) + rest) < END_OF_ARCHIVE:
        after = "after its last member" if tail else "and no member"
        raise ParseError(f"corrupt tar archive: it ends at tar offset 0x{tail + zeros:x}, "
                         f"{zeros} zero bytes {after}, without the end-of-archive "
                         "marker (two 512-byte zero blocks, POSIX tar; a writer writes it when "
                         "it closes the tar)", pw)
    used = set()  # every folder a file member is in (its prefixes ending before a "/")
    for name in names:
        i = name.rfind("/")
        while i > 0:
            used.add(name[:i])
            i = name.rfind("/", 0, i)
    for name in sorted(used & names):  # (a pax path "sg00/" on a regular member: "sg00")
        raise ParseError("a file member is also the folder of other members",
                         where.merged(member=shown_member_name(name)))
    for name, mw in folders.items():
        if name not in used:
            raise ParseError("directory member is not the folder of any file member "
                             "(only a member's folder may be listed)", mw)


def check_header_hash(header: NeffHeader, expect: bytes, where: Where) -> None:
    """Refuse a header whose hash field is not ``expect`` (:func:`payload_digest` of its
    payload): the reader's check, and ``simulate --model``'s while it hashes the model in
    blocks (docs/SIMULATOR.md §1)."""
    algo = "SHA-256" if header.pkg_version == PKG_VERSION_SHA256 else "MD5"
    if header.pkg_version == PKG_VERSION_MD5 and any(header.hash[16:]):
        i = next(k for k in range(16, 32) if header.hash[k])
        raise ParseError(f"pkg_version 2 (MD5) needs hash[16:32] zero; hash[{i}] is "
                         f"0x{header.hash[i]:02x}",
                         where.merged(field="hash", offset=HEADER_FIELDS["hash"][0] + i))
    if header.hash != expect:
        n = 32 if header.pkg_version == PKG_VERSION_SHA256 else 16
        i = next(k for k in range(n) if header.hash[k] != expect[k])  # the first that differs
        raise ParseError(f"{algo} hash mismatch: header has {header.hash[:n].hex()}, "
                         f"payload hashes to {expect[:n].hex()}",
                         where.merged(field="hash", offset=HEADER_FIELDS["hash"][0] + i))


def read_container(data: bytes, *, path: str = "<bytes>", verify_hash: bool = True,
                   limits: Limits = Limits(), digest: bytes | None = None) -> Container:
    """Parse a whole NEFF-like file already in memory (``digest``: :func:`stream_container`'s)."""
    header, warnings, members = stream_container(data, path=path, verify_hash=verify_hash,
                                                 limits=limits, digest=digest)
    return Container(header=header, members=dict(members), warnings=warnings,
                     hash_verified=verify_hash)


def stream_container(data: bytes, *, path: str = "<bytes>", verify_hash: bool = True,
                     limits: Limits = Limits(), on_consumed: Callable[[int], None] | None = None,
                     digest: bytes | None = None
                     ) -> tuple[NeffHeader, list[Warning_], Iterator[tuple[str, bytes]]]:
    """:func:`read_container` one member at a time: the header, the file's size and the hash
    are checked now (an error raised here), the members are decompressed as the returned
    iterator is walked (:func:`iter_members`: every check of the payload, its errors raised
    from the walk; the archive is whole only once the walk has ended without one).
    ``on_consumed`` (:class:`_Gunzip`) is told which payload bytes are done with.
    ``digest``: :func:`payload_digest` of this payload, already computed by the caller over
    these very bytes (``simulate OUT --model``'s block pass, bound to them by the whole
    file's SHA-256: docs/SIMULATOR.md §1), held to the header in place of hashing the
    payload again."""
    where = Where(file=path)
    header = parse_header(data, where)  # header_size and pkg_version checked first
    if header.lnc_size not in LNC_SIZES:
        raise ValidationError(f"lnc_size must be 1 or 2 (the logical NeuronCore size), not "
                              f"{header.lnc_size}",
                              where.merged(offset=HEADER_FIELDS["lnc_size"][0], field="lnc_size"))
    avail = len(data) - HEADER_SIZE
    if header.data_size > avail:
        raise ParseError(f"data_size {header.data_size} runs past the end of the file "
                         f"({avail} payload bytes present)",
                         where.merged(field="data_size", offset=HEADER_FIELDS["data_size"][0]))
    end = HEADER_SIZE + header.data_size
    nz = _first_nonzero(data, end)
    if nz is not None:
        k = len(data) - end
        raise ParseError(f"non-zero byte after the payload ({k} trailing byte{'s' * (k != 1)})",
                         where.merged(offset=nz))
    # no copy of a payload of gigabytes
    payload = data.sub(HEADER_SIZE, end) if isinstance(data, FileBytes) else \
        memoryview(data)[HEADER_SIZE:end]
    warnings: list[Warning_] = []
    if verify_hash:
        if digest is None:
            digest = payload_digest(header.pkg_version, payload)
        check_header_hash(header, digest, where)
    else:
        warnings.append(Warning_("payload hash not verified", where.merged(field="hash")))
    gz = _Gunzip(payload, limits.max_total_bytes, where, on_consumed=on_consumed)
    return header, warnings, iter_members(gz, limits, where)


#: Bytes read at a time from an input file that grows while it is read.
_READ_GROWING = 64 << 20


def _open_input(path: str, where: Where) -> tuple[io.BufferedReader, os.stat_result]:
    """``path`` open for reading and its stat, if it is a regular file (a one-line
    :class:`ParseError` otherwise, before any byte is read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise ParseError(f"cannot read: {err.strerror or err}", where) from None
    try:  # (fdopen of a directory's descriptor raises IsADirectoryError: look first)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise ParseError(f"cannot read: {kind}", where)
        return os.fdopen(fd, "rb"), st
    except BaseException:
        os.close(fd)
        raise


def _open_within(path: str, where: Where, max_bytes: int, limit_name: str):
    """:func:`_open_input`, and :class:`LimitError` (the file closed) when its size passes
    ``max_bytes``: judged before any byte is read.  ``limit_name`` ends the line, as every
    limit line's name does (``(MAX_FILE_BYTES)``: docs/CLI.md "Errors"; until 2026-12-07
    the file's line alone had none)."""
    fh, st = _open_input(path, where)
    if st.st_size > max_bytes:
        with fh:
            raise LimitError(f"file of {st.st_size} bytes exceeds the limit of {max_bytes} "
                             f"bytes ({limit_name})", where)
    return fh, st


def read_file_bytes(path: str, max_bytes: int = MAX_FILE_BYTES,
                    limit_name: str = "MAX_FILE_BYTES") -> bytes:
    """Read a whole input file; an OS error becomes a one-line :class:`ParseError`.

    Only a regular file is read (a fifo, a device such as ``/dev/zero`` or a
    directory is refused before any byte is read: they could block or never end),
    and only up to ``max_bytes`` (:class:`LimitError` from its size, before reading, the
    limit named ``limit_name``).
    """
    where = Where(file=str(path))
    fh, st = _open_within(path, where, max_bytes, limit_name)
    with fh:
        try:
            # as much as the file has and a byte more (a read asks for its whole size up
            # front: max_bytes + 1 would ask 5 GiB of address space for any model)
            parts = [fh.read(min(st.st_size, max_bytes) + 1)]
            total = len(parts[0])
            while st.st_size < total <= max_bytes:  # it grows while we read it
                part = fh.read(min(_READ_GROWING, max_bytes + 1 - total))
                if not part:
                    break
                parts.append(part)
                total += len(part)
        except OSError as err:
            raise ParseError(f"cannot read: {err.strerror or err}", where) from None
    data = parts[0] if len(parts) == 1 else b"".join(parts)
    if len(data) > max_bytes:  # grew while we read it
        raise LimitError(f"file exceeds the limit of {max_bytes} bytes ({limit_name})", where)
    return data


def read_file_blocks(path: str, max_bytes: int = MAX_FILE_BYTES, block: int = 1 << 20,
                     sized: Callable[[int], None] | None = None,
                     limit_name: str = "MAX_FILE_BYTES") -> Iterator[bytes]:
    """The bytes :func:`read_file_bytes` reads, in blocks of at most ``block`` bytes (memory
    bounded by one block, for a file that is only hashed), refused as it refuses them: the
    same errors, the size limit judged from the file's size before any block and on the
    bytes read (a file that grows while it is read).  ``sized`` is told the size of the
    opened file (``os.fstat``) before any byte is read."""
    where = Where(file=str(path))
    fh, st = _open_within(path, where, max_bytes, limit_name)
    with fh:
        if sized is not None:
            sized(st.st_size)
        total = 0
        while True:
            try:
                part = fh.read(block)
            except OSError as err:
                raise ParseError(f"cannot read: {err.strerror or err}", where) from None
            if not part:
                return
            total += len(part)
            if total > max_bytes:  # grew while we read it
                raise LimitError(f"file exceeds the limit of {max_bytes} bytes "
                                 f"({limit_name})", where)
            yield part


# ---------------------------------------------------------------------------
# writing

#: How member names are stored in the tar; the reader decodes them the same way, whatever
#: the locale's encoding (tarfile's default), non-UTF-8 bytes as surrogates written back as
#: they were.
TAR_ENCODING = "utf-8"
#: The name of a pax extended header (as Python's tarfile and star write it).
PAX_HEADER_NAME = "././@PaxHeader"
TAR_BLOCK = 512
#: The end-of-archive marker of a tar: two zero blocks (POSIX tar; every writer writes
#: them, :func:`build_tar` too, and the reader asks for them).
END_OF_ARCHIVE = 2 * TAR_BLOCK
#: A tar archive is padded with zero blocks to a multiple of this (tarfile's RECORDSIZE).
TAR_RECORD = 20 * TAR_BLOCK


def _tar_header(name: str, size: int, kind: bytes = tarfile.REGTYPE) -> bytes:
    """One 512-byte ustar header: mtime 0, uid/gid 0, empty owner names, mode 0644.
    Raises ValueError when ``name`` does not fit ustar's 100-byte name (with the 155-byte
    prefix split at a ``/``).  A name of at most 100 bytes and a size ustar's 11 octal
    digits hold are written into tarfile's own header of the kind (:func:`_ustar_template`)
    and its checksum worked out again, as tarfile does (65,000 members' headers took 1.5 s
    through ``TarInfo.tobuf``); any other by tarfile."""
    raw = name.encode(TAR_ENCODING, "surrogateescape")
    if len(raw) <= 100 and 0 <= size < 8 ** 11:
        head = bytearray(_ustar_template(kind))
        head[0:len(raw)] = raw
        head[124:135] = b"%011o" % size
        # (tarfile's calc_chksums: the bytes summed, the checksum field as 8 spaces)
        head[148:155] = b"%06o\0" % (sum(head) - sum(head[148:156]) + 256)
        return bytes(head)
    return _tarfile_header(name, size, kind)


@functools.lru_cache(maxsize=None)
def _ustar_template(kind: bytes) -> bytes:
    """tarfile's ustar header of a member of type ``kind`` named ``""`` of size 0."""
    return _tarfile_header("", 0, kind)


def _tarfile_header(name: str, size: int, kind: bytes) -> bytes:
    """:func:`_tar_header` written by tarfile."""
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = 0
    info.mode = 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.type = kind
    return info.tobuf(tarfile.USTAR_FORMAT, TAR_ENCODING, "surrogateescape")


def _pax_record(keyword: bytes, value: bytes) -> bytes:
    """``"%d %s=%s\n"``, the length counting its own digits (POSIX pax)."""
    body = len(keyword) + len(value) + 3  # ' ', '=', '\n'
    n = body + 1
    while len(str(n)) + body != n:
        n = len(str(n)) + body
    return b"%d %s=%s\n" % (n, keyword, value)


def _pax_member_header(name: str, size: int) -> bytes:
    """A member whose name does not fit ustar: a pax extended header (type ``x``, named
    :data:`PAX_HEADER_NAME`, its other fields as :func:`_tar_header`'s) holding one
    ``path`` record - preceded by ``hdrcharset=BINARY`` when the name is not valid UTF-8
    (its bytes as the input had them) - then the member's ustar header with the name's
    first 100 bytes."""
    raw = name.encode(TAR_ENCODING, "surrogateescape")
    try:
        name.encode("utf-8", "strict")
        records = b""
    except UnicodeEncodeError:
        records = _pax_record(b"hdrcharset", b"BINARY")
    records += _pax_record(b"path", raw)
    short = raw[:100].decode(TAR_ENCODING, "surrogateescape")
    return (_tar_header(PAX_HEADER_NAME, len(records), tarfile.XHDTYPE) + _pad_block(records)
            + _tar_header(short, size))


def _pad_block(data: bytes) -> bytes:
    return data + bytes(-len(data) % TAR_BLOCK)


def _member_head(name: str, size: int) -> bytes:
    """The header blocks :func:`build_tar` writes before a member's data: its ustar header,
    or for a name that does not fit ustar the pax extended header with the name and then
    the ustar header (:func:`_pax_member_header`)."""
    try:
        try:
            return _tar_header(name, size)
        except ValueError:  # the name does not fit ustar
            return _pax_member_header(name, size)
    except ValueError as err:
        raise ParseError(f"cannot store member: {err}", Where(member=name)) from None


def tar_member_bytes(name: str, size: int) -> int:
    """The bytes :func:`build_tar` writes of a member of this name and data size: its header
    blocks and its data padded to 512-byte blocks.  A name of at most 100 bytes takes one
    ustar header, not built (65,536 members' headers took a second)."""
    if len(name.encode(TAR_ENCODING, "surrogateescape")) <= 100:  # ustar's name field
        head = TAR_BLOCK
    else:
        head = len(_member_head(name, size))
    return head + size + -size % TAR_BLOCK


def tar_size(members: Iterable[tuple[str, int]]) -> int:
    """The bytes of the tar :func:`build_tar` writes of members of these names and data
    sizes, but the record padding (which it leaves out where the tar would pass
    :data:`MAX_TOTAL_BYTES`): every member's :func:`tar_member_bytes`, and the
    end-of-archive marker."""
    return sum(tar_member_bytes(name, size) for name, size in members) + END_OF_ARCHIVE


def written_tar_refusal(members: Mapping[str, bytes]) -> str | None:
    """Why the tar :func:`build_tar` writes of ``members`` would not be read back (it passes
    :data:`MAX_TOTAL_BYTES`, which the reader's default limits allow a tar stream), or None.
    A tar read within the limit is written within it but for its names: a name that does not
    fit ustar is written with a pax extended header, which can be a block longer than the
    GNU long name the input had (docs/FORMATS.md §9)."""
    size = tar_size((name, len(data)) for name, data in members.items())
    if size <= MAX_TOTAL_BYTES:
        return None
    return (f"the rewritten NEFF's tar would be {size} bytes, more than the limit of "
            f"{MAX_TOTAL_BYTES} bytes its readers allow a decompressed payload (MAX_TOTAL_BYTES)")


def build_tar(members: Iterable[tuple[str, bytes]]) -> bytes:
    """A deterministic tar archive of ``members`` in the given order (docs/FORMATS.md §9):
    a ustar header per member (mtime 0, uid/gid 0, empty owner names, mode 0644), and for a
    member whose name does not fit ustar (more than 100 bytes, or 255 split at a ``/``) a
    pax extended header before it with the name (:func:`_pax_member_header`): every name
    the reader accepts is stored.  Two zero blocks end it, zeros pad it to 10240 bytes
    (:data:`TAR_RECORD`), or less where that would pass :data:`MAX_TOTAL_BYTES`: up to the
    last whole 512-byte block within it (tar readers take a last record shorter than 10240
    bytes; a tar that fits the reader's default limit unpadded is written within it)."""
    return b"".join(_tar_parts(members))


def _tar_parts(members: Iterable[tuple[str, bytes]]) -> Iterator[bytes]:
    """The bytes of :func:`build_tar`, in order: each member's header blocks, data and
    padding, then the end-of-archive marker and the record padding; ``members`` taken one at
    a time (an iterator of them is not held whole)."""
    seen: set[str] = set()
    size = 0
    for name, data in members:
        why = check_member_name(name)
        if why:
            raise ParseError(why, Where(member=name))
        if name in seen:
            raise ParseError("duplicate member name", Where(member=name))
        seen.add(name)
        head = _member_head(name, len(data))
        pad = -len(data) % TAR_BLOCK
        size += len(head) + len(data) + pad
        yield head
        yield data
        del data  # (before the next member is made)
        yield bytes(pad)
    yield bytes(END_OF_ARCHIVE)
    size += END_OF_ARCHIVE
    within = max(size, MAX_TOTAL_BYTES - MAX_TOTAL_BYTES % TAR_BLOCK)  # (4 GiB: 512-aligned)
    yield bytes(min(-size % TAR_RECORD, within - size))


#: The gzip member header we write (RFC 1952): magic, CM 8 (deflate), no flags (no file
#: name), MTIME 0, XFL 2 (maximum compression), OS 3 (Unix) whatever the platform: Python's
#: gzip.compress takes the header from the zlib build, whose OS byte differs by platform.
GZIP_HEADER = bytes([0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 2, 3])


def build_payload(members: Iterable[tuple[str, bytes]]) -> bytes:
    """gzip (mtime 0, level 9) of :func:`build_tar`: :data:`GZIP_HEADER`, the raw deflate
    stream zlib makes at level 9, CRC-32 and the size mod 2^32 (little-endian u32s).  The
    tar is compressed as it is laid out, a member at a time: ``members``, an iterator, is
    held one member at a time (the assembler makes each member's bytes as it is reached;
    until 2026-12-07 every member and the whole tar were held at once, 546 MB for four 64 MB
    streams).  zlib's stream does not depend on how its input is cut (no flush between)."""
    z = zlib.compressobj(9, zlib.DEFLATED, -15)
    out = [GZIP_HEADER]
    crc = 0
    size = 0
    for part in _tar_parts(members):
        out.append(z.compress(part))
        crc = zlib.crc32(part, crc)
        size += len(part)
    out.append(z.flush())
    out.append(struct.pack("<II", crc, size & 0xFFFFFFFF))
    return b"".join(out)


def build_container(header: NeffHeader, members: Iterable[tuple[str, bytes]] | Mapping[str, bytes]
                    ) -> bytes:
    """A whole NEFF-like file: ``header`` with header_size, data_size and hash
    recomputed, followed by the payload of ``members`` (in the given order; an iterator of
    them is consumed one member at a time)."""
    items = members.items() if isinstance(members, Mapping) else members
    return wrap_payload(header, build_payload(items))


def wrap_payload(header: NeffHeader, payload: bytes) -> bytes:
    """``header`` (header_size, data_size and hash recomputed) followed by ``payload``.

    The payload is taken as given: tests use this to wrap hand-made gzip/tar bytes.
    """
    hdr = replace(header, header_size=HEADER_SIZE, data_size=len(payload),
                  hash=payload_digest(header.pkg_version, payload))
    return build_header(hdr) + payload


def default_header(**fields) -> NeffHeader:
    """A :class:`NeffHeader` with neutral defaults, overridden by ``fields``."""
    base = dict(pkg_version=PKG_VERSION_MD5, header_size=HEADER_SIZE, data_size=0,
                neff_version_major=1, neff_version_minor=0, neff_build_version="",
                num_tpb=1, hash=bytes(32), uuid=bytes(16), name="", requested_tpb_count=1,
                tpb_per_node=bytes(64), feature_bits=0, lnc_size=1)
    base.update(fields)
    return NeffHeader(**base)
