"""The container: header bytes, hashes, the gzip'd tar and its hostile variants."""

from __future__ import annotations

import errno
import gzip
import hashlib
import io
import random
import struct
import tarfile
import zlib

import pytest

from nrtrewrite.errors import LimitError, ParseError, ValidationError
from nrtrewrite.neff.container import (
    HEADER_SIZE, Limits, build_container, build_header, build_payload, build_tar,
    default_header, gunzip_limited, parse_header, read_container, wrap_payload,
)
from nrtrewrite.neff.model import NeffHeader

from conftest import ustar_tar

# NEFF-LIKE.md §1: pkg_version, header_size, data_size, major, minor u64; build_version
# char[128]; num_tpb u32; hash u8[32]; uuid u8[16]; name char[256]; requested_tpb_count
# u32; tpb_per_node u8[64]; feature_bits u64; lnc_size u32; reserved u8[468]
HEADER_FMT = "<QQQQQ128sI32s16s256sI64sQI468x"

MEMBERS = [("neff.json", b'{"a": 1}\n'), ("sg00/def.json", b"{}\n"), ("sg00/sp.bin", bytes(64))]


def sample_header(**kw) -> NeffHeader:
    base = dict(pkg_version=1, header_size=1024, data_size=4321, neff_version_major=2,
                neff_version_minor=17, neff_build_version="2.31.0+abc", num_tpb=2,
                hash=bytes(range(32)), uuid=bytes(range(100, 116)), name="model-\u00e9",
                requested_tpb_count=64, tpb_per_node=bytes([8] * 16 + [0] * 48),
                feature_bits=0x8000_0000_0000_0001, lnc_size=2)
    base.update(kw)
    return NeffHeader(**base)


def packed(h: NeffHeader) -> bytes:
    return struct.pack(HEADER_FMT, h.pkg_version, h.header_size, h.data_size,
                       h.neff_version_major, h.neff_version_minor,
                       h.neff_build_version.encode(), h.num_tpb, h.hash, h.uuid,
                       h.name.encode(), h.requested_tpb_count, h.tpb_per_node,
                       h.feature_bits, h.lnc_size)


def test_header_round_trip_against_struct_pack():
    h = sample_header()
    raw = packed(h)
    assert len(raw) == HEADER_SIZE == struct.calcsize(HEADER_FMT)
    assert build_header(h) == raw
    assert parse_header(raw) == h
    # spot-check public offsets
    assert raw[172:204] == h.hash and raw[204:220] == h.uuid
    assert raw[552:556] == (2).to_bytes(4, "little") and raw[556:] == bytes(468)


def test_header_reserved_nonzero():
    raw = bytearray(packed(sample_header()))
    raw[600] = 7
    with pytest.raises(ParseError) as exc:
        parse_header(bytes(raw))
    assert "reserved" in str(exc.value) and "offset 0x258" in str(exc.value)


def test_header_string_not_utf8_and_junk_after_nul():
    raw = bytearray(packed(sample_header()))
    raw[220:222] = b"\xff\xfe"
    with pytest.raises(ParseError, match="field name.*not UTF-8"):
        parse_header(bytes(raw))
    raw = bytearray(packed(sample_header(name="ab")))
    raw[230] = 0x41
    with pytest.raises(ParseError, match="field name.*after its NUL"):
        parse_header(bytes(raw))


@pytest.mark.parametrize("version", [1, 2])
def test_hash_placement(version):
    data = build_container(default_header(pkg_version=version), MEMBERS)
    h = parse_header(data)
    payload = data[HEADER_SIZE:HEADER_SIZE + h.data_size]
    assert h.data_size == len(data) - HEADER_SIZE
    if version == 1:
        assert h.hash == hashlib.sha256(payload).digest()
    else:
        assert h.hash == hashlib.md5(payload).digest() + bytes(16)
    cont = read_container(data)
    assert list(cont.members.items()) == MEMBERS and cont.warnings == []


@pytest.mark.parametrize("version,algo", [(1, "SHA-256"), (2, "MD5")])
def test_hash_mismatch(version, algo):
    data = bytearray(build_container(default_header(pkg_version=version), MEMBERS))
    data[172] ^= 0xFF  # hash[0]: the header's hash is at offset 172 (NEFF-LIKE.md §1)
    with pytest.raises(ParseError) as exc:
        read_container(bytes(data), path="m.neff")
    assert str(exc.value).startswith("m.neff: offset 0xac, field hash: ")
    assert f"{algo} hash mismatch" in str(exc.value)
    # the offset is the first byte that differs, as for the other header fields' errors
    data[172] ^= 0xFF
    data[172 + 5] ^= 0x01
    with pytest.raises(ParseError) as exc:
        read_container(bytes(data), path="m.neff")
    assert str(exc.value).startswith("m.neff: offset 0xb1, field hash: ")
    # verify_hash=False skips it and says so
    cont = read_container(bytes(data), verify_hash=False)
    assert [w.message for w in cont.warnings] == ["payload hash not verified"]


@pytest.mark.parametrize("k", [16, 20, 31])
def test_md5_tail_must_be_zero(k):
    """NEFF-LIKE.md §1: hash is 32 bytes at offset 172 (0xac); pkg_version 2 puts the MD5 in
    the first 16 and zeros in the rest.  The error names the first non-zero byte's offset."""
    data = bytearray(build_container(default_header(pkg_version=2), MEMBERS))
    data[172 + k] = 0x5A
    with pytest.raises(ParseError) as exc:
        read_container(bytes(data), path="m.neff")
    assert str(exc.value) == (f"m.neff: offset 0x{172 + k:x}, field hash: pkg_version 2 (MD5) "
                              f"needs hash[16:32] zero; hash[{k}] is 0x5a")


def test_unknown_pkg_version():
    data = bytearray(build_container(default_header(), MEMBERS))
    data[0] = 3
    with pytest.raises(ParseError, match="field pkg_version: unknown pkg_version 3"):
        read_container(bytes(data))


@pytest.mark.parametrize("lnc", [0, 3, 4, 7, 2**32 - 1])
def test_lnc_size_must_be_1_or_2(lnc):
    """NEFF-LIKE.md §1: lnc_size (offset 552 = 0x228) is 1 or 2.  0 was read as 1, and 3 or
    7 passed `inspect` (only `lower`'s topology refused them, without the offset)."""
    data = bytearray(build_container(default_header(), MEMBERS))
    data[552:556] = lnc.to_bytes(4, "little")
    with pytest.raises(ValidationError) as exc:
        read_container(bytes(data), path="m.neff")
    assert str(exc.value) == ("m.neff: offset 0x228, field lnc_size: lnc_size must be 1 or 2 "
                              f"(the logical NeuronCore size), not {lnc}")
    for good in (1, 2):
        data[552:556] = good.to_bytes(4, "little")
        assert read_container(bytes(data), verify_hash=False).header.lnc_size == good


def test_short_file():
    with pytest.raises(ParseError, match="file too short: 100 bytes"):
        read_container(bytes(100), path="s.neff")


def test_header_size_not_1024():
    data = bytearray(build_container(default_header(), MEMBERS))
    data[8:16] = (1000).to_bytes(8, "little")
    with pytest.raises(ParseError, match="field header_size: header_size must be 1024, not 1000"):
        read_container(bytes(data))


def test_data_size_past_end():
    data = build_container(default_header(), MEMBERS)
    # data_size is the u64 at offset 16 (NEFF-LIKE.md §1): named with its offset, as every
    # other header field's error is
    with pytest.raises(ParseError, match="^<bytes>: offset 0x10, field data_size: data_size .* runs "
                       "past the end"):
        read_container(data[:-1])
    big = bytearray(data)
    big[16:24] = (2**64 - 1).to_bytes(8, "little")
    with pytest.raises(ParseError, match="runs past the end"):
        read_container(bytes(big))


def test_trailing_bytes():
    data = build_container(default_header(), MEMBERS)
    assert read_container(data + bytes(4096)).members  # zero padding is fine
    with pytest.raises(ParseError) as exc:
        read_container(data + bytes(10) + b"\x01", path="t.neff")
    assert f"offset 0x{len(data) + 10:x}" in str(exc.value)
    assert "non-zero byte after the payload" in str(exc.value)
    # the first byte after the payload is checked too (it is at 1024 + data_size)
    with pytest.raises(ParseError) as exc:
        read_container(data + b"\x01", path="t.neff")
    assert str(exc.value) == (f"t.neff: offset 0x{len(data):x}: non-zero byte after the payload "
                              "(1 trailing byte)")


def test_corrupt_and_truncated_gzip():
    payload = build_payload(MEMBERS)
    bad = bytearray(payload)
    bad[20] ^= 0xFF
    with pytest.raises(ParseError, match="field payload: corrupt gzip stream"):
        read_container(wrap_payload(default_header(), bytes(bad)))
    with pytest.raises(ParseError, match="(truncated|corrupt) gzip stream"):
        read_container(wrap_payload(default_header(), payload[:-12]))
    with pytest.raises(ParseError, match="empty payload"):
        read_container(wrap_payload(default_header(), b""))
    with pytest.raises(ParseError, match="unexpected bytes after the gzip stream"):
        read_container(wrap_payload(default_header(), payload + b"junk"))


def test_multi_member_gzip_and_zero_padding_inside_payload():
    raw = bytes(ustar_tar(MEMBERS))
    payload = gzip.compress(raw[:1000], mtime=0) + gzip.compress(raw[1000:], mtime=0) + bytes(9)
    cont = read_container(wrap_payload(default_header(), payload))
    assert list(cont.members.items()) == MEMBERS


def test_corrupt_tar():
    with pytest.raises(ParseError, match="corrupt tar archive"):
        read_container(wrap_payload(default_header(), gzip.compress(b"x" * 1024, mtime=0)))
    # a valid first member then a garbage header block
    raw = bytearray(gzip.decompress(build_payload(MEMBERS)))
    raw[512 + 512] = 0x41  # first byte of the second header (neff.json data is 1 block)
    raw[512 + 512 + 148:512 + 512 + 156] = b"0000000\0"  # wrong checksum
    with pytest.raises(ParseError, match="corrupt tar archive: invalid header at tar offset"):
        read_container(wrap_payload(default_header(), gzip.compress(bytes(raw), mtime=0)))
    # a pax extended header (a valid record, path=zz) whose member header is garbage, after
    # the three members: tarfile's "invalid header", said after the members read, at the
    # garbage block (after the pax header block and its record's block)
    raw = gzip.decompress(build_payload(MEMBERS))
    end = sum(512 + -(-len(d) // 512) * 512 for _, d in MEMBERS)
    rec = b"11 path=zz\n"  # (11 bytes, its length included)
    pax = tarfile.TarInfo("PaxHeader")
    pax.type, pax.size = tarfile.XHDTYPE, len(rec)
    tar = (raw[:end] + pax.tobuf(format=tarfile.USTAR_FORMAT) + rec + bytes(512 - len(rec))
           + b"\x01" * 512 + bytes(10240))
    with pytest.raises(ParseError) as exc:
        read_container(wrap_payload(default_header(), gzip.compress(bytes(tar), mtime=0)),
                       path="m.neff")
    # (the garbage block's chksum field, bytes 148..155, is eight 0x01 bytes)
    assert str(exc.value) == ("m.neff: field payload: corrupt tar archive after member 3: "
                              f"invalid header at tar offset 0x{end + 1024:x}: its chksum field "
                              "(bytes 148..155) b'\\x01\\x01\\x01\\x01\\x01\\x01\\x01\\x01' "
                              "is not an octal number")


def _tar(*infos: tuple[tarfile.TarInfo, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for info, data in infos:
            info.size = len(data) if info.type in (tarfile.REGTYPE, tarfile.AREGTYPE) else 0
            tf.addfile(info, io.BytesIO(data) if data else None)
    return buf.getvalue()


def _reg(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), data


def _special(name: str, kind: bytes, **kw) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type = kind
    for k, v in kw.items():
        setattr(info, k, v)
    return info, b""


def _read_tar(tar: bytes, limits: Limits = Limits()):
    return read_container(wrap_payload(default_header(), gzip.compress(tar, mtime=0)),
                          path="h.neff", limits=limits)


@pytest.mark.parametrize("entry,member,why", [
    (_reg("/etc/passwd"), "/etc/passwd", "absolute member path"),
    (_reg("sg00/../../x"), "sg00/../../x", "contains '..'"),
    (_reg("sg00//sp.bin"), "sg00//sp.bin", "empty or '.' component"),
    (_special("sg00/sp.bin", tarfile.SYMTYPE, linkname="/etc/passwd"), "sg00/sp.bin",
     "symbolic link member"),
    (_special("sg00/sp.bin", tarfile.LNKTYPE, linkname="neff.json"), "sg00/sp.bin",
     "hard link member"),
    (_special("dev", tarfile.CHRTYPE, devmajor=1, devminor=3), "dev", "character device"),
    (_special("blk", tarfile.BLKTYPE), "blk", "block device"),
    (_special("fifo", tarfile.FIFOTYPE), "fifo", "fifo member"),
    (_special("sg00", tarfile.DIRTYPE), "sg00", "directory member"),
])
def test_hostile_members(entry, member, why):
    with pytest.raises(ParseError) as exc:
        _read_tar(_tar(_reg("neff.json"), entry))
    msg = str(exc.value)
    assert msg.startswith(f"h.neff: member {member}") and why in msg
    assert "\n" not in msg


def test_pax_sparse_member_is_refused():
    """A GNU sparse file in pax form (1.0) is a regular-typed member whose data starts with a
    sparse map; it was read as a regular file of its real size, 100 bytes taken from the
    tar (its 4 data bytes and what follows them)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        info = tarfile.TarInfo("neff.json")
        info.size = 2
        tf.addfile(info, io.BytesIO(b"{}"))
        data = b"1\n0\n4\n".ljust(512, b"\0") + b"abcd"  # map: one 4-byte run at 0
        info = tarfile.TarInfo("GNUSparseFile.0/x")
        info.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0",
                            "GNU.sparse.name": "x", "GNU.sparse.realsize": "100"}
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    with pytest.raises(ParseError) as exc:
        _read_tar(buf.getvalue())
    assert str(exc.value) == ("h.neff: member x: sparse file member is not allowed (only "
                              "regular files)")


def test_bytes_after_the_end_of_the_archive():
    """Everything after the last member must be zero: the end-of-archive blocks at 0xc00
    (three members of one data block each) and tarfile's padding to 10 KiB.  A byte in the
    first zero block makes it a header (its chksum field zeros, its bytes summing to 8 spaces
    and the 0x01: 257 = 0o401); one after it is named where it is."""
    raw = bytearray(gzip.decompress(build_payload(MEMBERS)))
    assert len(raw) == 10240 and not any(raw[0xc00:])
    read_container(wrap_payload(default_header(), gzip.compress(bytes(raw), mtime=0)))
    for at, why in [(0xc00, "invalid header at tar offset 0xc00: bad checksum: its chksum field "
                     "says 0o0, its bytes (the field counted as spaces) sum to 0o401"),
                    (0xe00, "non-zero byte 0x01 at tar offset 0xe00, after the zero block at tar "
                     "offset 0xc00 that ends the archive (only zero bytes may follow it)"),
                    (len(raw) - 1, "non-zero byte 0x01 at tar offset 0x27ff, after the zero "
                     "block at tar offset 0xc00 that ends the archive (only zero bytes may "
                     "follow it)")]:
        bad = bytearray(raw)
        bad[at] = 1
        with pytest.raises(ParseError) as exc:
            read_container(wrap_payload(default_header(), gzip.compress(bytes(bad), mtime=0)),
                           path="h.neff")
        assert str(exc.value) == f"h.neff: field payload: corrupt tar archive: {why}"


def _ustar_header(name: bytes, size: int, kind: bytes = b"0", *, size_field: bytes = b"",
                  chksum: bytes = b"") -> bytes:
    """A 512-byte ustar header written from the POSIX layout: name 0..99, mode 100, uid 108,
    gid 116 (8 bytes each), size 124 and mtime 136 (12 bytes), chksum 148 (8), typeflag 156,
    magic "ustar\\0" 257, version "00" 263; the checksum the sum of its bytes with the chksum
    field taken as 8 spaces, 6 octal digits, a NUL and a space (unless ``chksum`` is given)."""
    h = bytearray(512)
    h[0:len(name)] = name
    h[100:108] = b"0000644\0"
    h[108:116] = h[116:124] = b"0000000\0"
    h[124:136] = size_field or b"%011o\0" % size
    h[136:148] = b"00000000000\0"
    h[156:157] = kind
    h[257:265] = b"ustar\x0000"
    h[148:156] = b" " * 8
    h[148:156] = chksum or b"%06o\0 " % sum(h)
    return bytes(h)


def _ustar_member(name: bytes, data: bytes, kind: bytes = b"0") -> bytes:
    return _ustar_header(name, len(data), kind) + data + bytes(-len(data) % 512)


#: a member of one data block (0x400 bytes) and the end-of-archive marker
_ONE = _ustar_member(b"neff.json", b"{}")
_END = bytes(1024)


def _tar_error(tar: bytes) -> str:
    with pytest.raises(ParseError) as exc:
        read_container(wrap_payload(default_header(), gzip.compress(tar, mtime=0)),
                       path="h.neff")
    return str(exc.value)


def test_tar_header_faults_say_where_and_why():
    """Review 51c: a bad checksum, a non-octal size and a tar cut in a header all said
    'invalid header at tar offset 0x400', the first header's fault no offset, an empty tar
    'empty file'."""
    head = "h.neff: field payload: corrupt tar archive: "
    # the second header's chksum field says 0: its bytes sum to 8 spaces and the fields
    hdr = _ustar_header(b"sg00/sp.bin", 64, chksum=b"0000000\0")
    said = sum(hdr[:148]) + 8 * 0x20 + sum(hdr[156:])
    assert _tar_error(_ONE + hdr + bytes(512) + _END) == (
        f"{head}invalid header at tar offset 0x400: bad checksum: its chksum field says 0o0, "
        f"its bytes (the field counted as spaces) sum to 0o{said:o}")
    # the size field with a 9 and an x in it, the checksum right
    hdr = _ustar_header(b"sg00/sp.bin", 0, size_field=b"0000000009x\0")
    assert _tar_error(_ONE + hdr + _END) == (
        f"{head}invalid header at tar offset 0x400: its size field (bytes 124..135) "
        "b'0000000009x\\x00' is not an octal number")
    # the tar cut 300 bytes into the second header
    assert _tar_error(_ONE + _ustar_header(b"sg00/sp.bin", 0)[:300]) == (
        f"{head}invalid header at tar offset 0x400: truncated header: the tar ends 300 bytes "
        "into its 512-byte block")
    # the first header: garbage, a bad checksum, cut short
    assert _tar_error(b"x" * 512 + _END) == (
        f"{head}invalid header at tar offset 0x0: its chksum field (bytes 148..155) "
        "b'xxxxxxxx' is not an octal number")
    hdr = _ustar_header(b"neff.json", 2, chksum=b"0000001\0")
    assert _tar_error(hdr + b"{}" + bytes(510) + _END).startswith(
        f"{head}invalid header at tar offset 0x0: bad checksum: its chksum field says 0o1, ")
    assert _tar_error(_ONE[:100]) == (
        f"{head}invalid header at tar offset 0x0: truncated header: the tar ends 100 bytes "
        "into its 512-byte block")
    # no bytes at all
    assert _tar_error(b"") == (
        f"{head}empty archive: the payload decompresses to no bytes, not a header at tar offset "
        "0x0 nor the end-of-archive marker (two 512-byte zero blocks, POSIX tar)")


def test_pax_global_header_before_the_end_is_accepted():
    """POSIX lets a pax global header ('g') stand anywhere in the archive: one after the last
    member, right before the end-of-archive marker, was refused ('end of file header'; GNU
    tar 1.34 lists the archive).  Its records are still checked."""
    rec = b"13 comment=x\n"
    members = [("neff.json", b"{}"), ("sg00/sp.bin", bytes(64))]
    body = b"".join(_ustar_member(n.encode(), d) for n, d in members)
    gpax = _ustar_header(b"pax_global_header", len(rec), b"g") + rec + bytes(512 - len(rec))
    cont = read_container(wrap_payload(default_header(),
                                       gzip.compress(body + gpax + _END, mtime=0)))
    assert list(cont.members.items()) == members
    # the archive must still end with the two zero blocks
    assert _tar_error(body + gpax) == (
        "h.neff: field payload: corrupt tar archive: it ends at tar offset 0xc00, 0 zero bytes "
        "after its last member, without the end-of-archive marker (two 512-byte zero blocks, "
        "POSIX tar; a writer writes it when it closes the tar)")
    # (several of them, and a tar of nothing else)
    cont = read_container(wrap_payload(default_header(),
                                       gzip.compress(gpax + gpax + _END, mtime=0)))
    assert cont.members == {}
    bad = _ustar_header(b"pax_global_header", 4, b"g") + b"junk" + bytes(508)
    assert _tar_error(body + bad + _END) == (
        "h.neff: field payload: pax global header at tar offset 0x800: record at byte 0 of its "
        "4 bytes of records does not start with a decimal length and a space: it starts "
        "b'junk'")


@pytest.mark.parametrize("kind,called", [(b"x", "pax extended header"),
                                         (b"L", "GNU long name")])
def test_extended_header_with_no_member_after_it_is_refused(kind, called):
    """A pax extended header or GNU long name describes the member after it: one right
    before the end-of-archive marker describes none (it said 'end of file header')."""
    data = b"11 path=zz\n" if kind == b"x" else b"zz\0"
    ext = _ustar_header(b"././@x", len(data), kind) + data + bytes(512 - len(data))
    assert _tar_error(_ONE + ext + _END) == (
        f"h.neff: field payload: corrupt tar archive after member 1: {called} at tar offset "
        "0x400 describes no member: the end of the archive (a zero block) follows at tar "
        "offset 0x800")
    assert _tar_error(ext + _END) == (
        f"h.neff: field payload: corrupt tar archive: {called} at tar offset 0x0 describes no "
        "member: the end of the archive (a zero block) follows at tar offset 0x400")
    # the tar cut right after it
    assert _tar_error(_ONE + ext) == (
        f"h.neff: field payload: corrupt tar archive after member 1: {called} at tar offset "
        "0x400 describes no member: the tar ends at tar offset 0x800")


def test_contiguous_file_member_is_a_regular_file():
    """Tar type '7' (contiguous file) is read as a regular file, as POSIX readers do; the
    member after it is found at its place."""
    cont = _special("sg00/sp.bin", tarfile.CONTTYPE)[0]
    cont.size = 70
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for info, data in (_reg("neff.json", b"{}"), (cont, bytes(range(70))),
                           _reg("z", b"after")):
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    raw = buf.getvalue()
    assert raw[1024 + 156:1024 + 157] == b"7"  # the second header's typeflag
    assert _read_tar(raw).members == {"neff.json": b"{}", "sg00/sp.bin": bytes(range(70)),
                                      "z": b"after"}


def test_directory_entries_of_member_folders_are_left_out():
    """``tar czf m.tgz sg00 neff.json`` writes a directory entry ``sg00/`` before the files
    in it: accepted and not a member.  A directory that is the folder of no file member,
    or one with data, is refused."""
    tar = _tar(_special("a", tarfile.DIRTYPE), _special("a/b", tarfile.DIRTYPE),
               _reg("a/b/c", b"abc"), _special("sg00", tarfile.DIRTYPE), _reg("sg00/sp.bin"),
               _reg("neff.json"))
    assert list(_read_tar(tar).members.items()) == [("a/b/c", b"abc"), ("sg00/sp.bin", b"x"),
                                                    ("neff.json", b"x")]
    with pytest.raises(ParseError) as exc:
        _read_tar(_tar(_special("sg01", tarfile.DIRTYPE), _reg("sg00/sp.bin"),
                       _reg("sg011/x")))
    assert str(exc.value) == ("h.neff: member sg01: directory member is not the folder of any "
                              "file member (only a member's folder may be listed)")
    sized = tarfile.TarInfo("sg00")
    sized.type, sized.size = tarfile.DIRTYPE, 512
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        tf.addfile(sized, io.BytesIO(bytes(512)))
        tf.addfile(_reg("sg00/sp.bin")[0])
    with pytest.raises(ParseError) as exc:
        _read_tar(buf.getvalue())
    assert str(exc.value) == "h.neff: member sg00: directory member with data (512 bytes)"


def test_duplicate_member():
    with pytest.raises(ParseError, match="member neff.json.*duplicate member name"):
        _read_tar(_tar(_reg("neff.json"), _reg("a"), _reg("neff.json")))


def test_member_and_total_limits():
    tar = _tar(_reg("neff.json", b"a" * 5000), _reg("b", b"b" * 100))
    assert _read_tar(tar, Limits(max_member_bytes=5000)).members["b"] == b"b" * 100
    with pytest.raises(LimitError, match="member neff.json: member size 5000 exceeds the limit "
                                         "of 4999 bytes"):
        _read_tar(tar, Limits(max_member_bytes=4999))
    with pytest.raises(LimitError, match="decompressed payload exceeds the limit of 4096 bytes"):
        _read_tar(tar, Limits(max_total_bytes=4096))
    with pytest.raises(LimitError, match="more than 1 members"):
        _read_tar(tar, Limits(max_members=1))


def test_directory_entries_do_not_count_as_members():
    """A directory entry is not a member (left out, not written back): MAX_MEMBERS counts the
    three file members here, not the two folder entries (until 2026-12-05 it counted all five
    tar entries, and 65,536 file members and one folder entry were refused)."""
    tar = _tar(_special("a", tarfile.DIRTYPE), _reg("a/x"), _special("a/b", tarfile.DIRTYPE),
               _reg("a/b/y"), _reg("neff.json"))
    assert list(_read_tar(tar, Limits(max_members=3)).members) == ["a/x", "a/b/y", "neff.json"]
    with pytest.raises(LimitError) as exc:
        _read_tar(tar, Limits(max_members=2))
    assert str(exc.value) == "h.neff: member neff.json: more than 2 members"


def test_directory_entries_are_bounded_apart(monkeypatch):
    """Directory entries have their own bound, MAX_DIRECTORY_ENTRIES (65536), so a tar of
    millions of them (each 512 bytes, accepted when it names a member's folder, again and
    again) is no way around the bound on the reader's work."""
    from nrtrewrite.neff import container
    assert container.MAX_DIRECTORY_ENTRIES == 65536
    monkeypatch.setattr(container, "MAX_DIRECTORY_ENTRIES", 2)
    two = _tar(_special("a", tarfile.DIRTYPE), _special("a/b", tarfile.DIRTYPE), _reg("a/b/c"))
    assert list(_read_tar(two).members) == ["a/b/c"]
    three = _tar(_special("a", tarfile.DIRTYPE), _special("a/b", tarfile.DIRTYPE),
                 _special("a", tarfile.DIRTYPE), _reg("a/b/c"))
    with pytest.raises(LimitError) as exc:
        _read_tar(three)
    assert str(exc.value) == ("h.neff: member a: more than 2 directory entries "
                              "(MAX_DIRECTORY_ENTRIES)")


def test_member_size_refused_before_its_data_is_decompressed():
    """The tar is walked as it is decompressed: a member over the size limit is refused from
    its header, before its data (64 MiB of zeros here, over the total limit too) is
    decompressed; the total limit alone stops the same payload once 2 MiB are out."""
    tar = _tar(_reg("neff.json", b"{}"), _reg("big", bytes(64 << 20)))
    with pytest.raises(LimitError) as exc:
        _read_tar(tar, Limits(max_member_bytes=1 << 20, max_total_bytes=2 << 20))
    assert str(exc.value) == (f"h.neff: member big: member size {64 << 20} exceeds the limit "
                              f"of {1 << 20} bytes")
    with pytest.raises(LimitError, match=f"field payload: decompressed payload exceeds the "
                                         f"limit of {2 << 20} bytes"):
        _read_tar(tar, Limits(max_total_bytes=2 << 20))


def test_gzip_bomb_stops_at_limit():
    bomb = gzip.compress(bytes(8 << 20), compresslevel=9, mtime=0)  # 8 MiB of zeros
    assert len(bomb) < 64 << 10
    with pytest.raises(LimitError, match="exceeds the limit of 1048576 bytes"):
        read_container(wrap_payload(default_header(), bomb),
                       limits=Limits(max_total_bytes=1 << 20))


def test_gunzip_many_members_and_a_large_incompressible_one():
    """Correctness of the sliced streaming gunzip (its speed is measured, not tested:
    docs/PERFORMANCE.md "Reading a large or many-member payload"): many small gzip members
    (empty ones, and sizes around the 512-byte first slice), then an incompressible member
    of several slices and output chunks, a compressible one whose slices give several
    output chunks each, a last small one, then zero padding."""
    rng = random.Random(7)
    parts = [rng.randbytes(rng.choice([0, 0, 1, 100, 511, 512, 513, 3000])) for _ in range(5000)]
    big = rng.randbytes((5 << 20) + 12345)
    zeros = bytes(3 << 20)  # many 1 MiB output chunks from one slice: ends with a tail left
    members = [gzip.compress(p, compresslevel=rng.choice([1, 9]), mtime=0) for p in parts]
    members += [gzip.compress(big, compresslevel=1, mtime=0), gzip.compress(zeros, mtime=0),
                gzip.compress(b"end", mtime=0)]
    payload = b"".join(members)
    expect = b"".join(parts) + big + zeros + b"end"
    # (gzip.decompress of the whole payload is itself quadratic in the member count)
    assert b"".join(gzip.decompress(m) for m in members) == expect
    assert gunzip_limited(payload, len(expect)) == expect
    assert gunzip_limited(memoryview(payload + bytes(70000)), len(expect)) == expect
    with pytest.raises(LimitError, match=f"exceeds the limit of {len(expect) - 1} bytes"):
        gunzip_limited(payload, len(expect) - 1)
    # garbage after the last member is reported at its offset: the sum of the member sizes
    with pytest.raises(ParseError, match=f"at payload offset 0x{len(payload):x}$"):
        gunzip_limited(payload + bytes(3) + b"x", 1 << 30)
    with pytest.raises(ParseError, match="truncated gzip stream"):
        gunzip_limited(payload[:-9], 1 << 30)


def test_writer_is_deterministic_and_keeps_order():
    members = list(reversed(MEMBERS))
    a = build_container(default_header(name="x"), members)
    b = build_container(default_header(name="x"), members)
    assert a == b
    h = parse_header(a)
    assert h.data_size == len(a) - HEADER_SIZE  # the payload runs to the end of the file
    assert a[HEADER_SIZE:HEADER_SIZE + 4] == b"\x1f\x8b\x08\x00"
    assert a[HEADER_SIZE + 4:HEADER_SIZE + 8] == bytes(4)  # gzip mtime 0
    # XFL 2 (maximum compression), OS 3 (Unix) on every platform; then the raw deflate
    # stream, CRC-32 and ISIZE (RFC 1952)
    assert a[HEADER_SIZE + 8:HEADER_SIZE + 10] == b"\x02\x03"
    tar_bytes = gzip.decompress(a[HEADER_SIZE:])
    assert a[-8:] == struct.pack("<II", zlib.crc32(tar_bytes), len(tar_bytes))
    assert zlib.decompress(a[HEADER_SIZE + 10:-8], -15) == tar_bytes
    tar = gzip.decompress(a[HEADER_SIZE:])
    with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
        infos = tf.getmembers()
    assert [i.name for i in infos] == [n for n, _ in members]
    assert all(i.mtime == 0 and i.uid == 0 and i.gid == 0 and i.uname == "" for i in infos)
    assert list(read_container(a).members) == [n for n, _ in members]


@pytest.mark.parametrize("field, value, why", [
    # NEFF-LIKE.md §1: name is char[256], neff_build_version char[128] (UTF-8 bytes: "é" is 2)
    ("name", "\u00e9" * 129, "258 bytes do not fit the 256-byte field"),
    ("neff_build_version", "v" * 129, "129 bytes do not fit the 128-byte field"),
    ("uuid", bytes(3), "needs exactly 16 bytes, not 3"),
    ("num_tpb", 1 << 32, "value 4294967296 does not fit u32"),
    ("feature_bits", -1, "value -1 does not fit u64"),
    # (no digest for it)
    ("pkg_version", 3, "unknown pkg_version 3 (1 = tar.gz + SHA-256, 2 = tar.gz + MD5)"),
])
def test_a_header_field_that_does_not_fit_is_refused_by_the_writer(field, value, why):
    """build_container / wrap_payload (ASSEMBLE.md: tests wrap hand-made payloads with it)
    refuse a header field wider than its place in the 1024-byte header, naming the field."""
    with pytest.raises(ParseError) as exc:
        build_container(default_header(**{field: value}), MEMBERS)
    assert str(exc.value) == f"field {field}: {why}"


def test_a_long_name_that_is_not_utf8_is_written_with_a_binary_pax_record():
    """docs/FORMATS.md §9: a name that does not fit ustar goes in a pax record "<len>
    path=<name>\\n", preceded by "21 hdrcharset=BINARY\\n" when the name is not valid UTF-8
    (bytes kept as the input had them); the member's header holds its first 100 bytes."""
    raw = b"notes/" + b"x" * 120 + b"\xff.txt"  # 131 bytes, a byte 0xff
    name = raw.decode("utf-8", "surrogateescape")
    tar = build_tar([(name, b"data")])
    assert tar[156:157] == b"x" and tar[0:14] == b"././@PaxHeader"
    # " path=" + 131 + "\\n" is 138 bytes, 141 with the 3 digits of 141
    records = b"21 hdrcharset=BINARY\n" + b"141 path=" + raw + b"\n"
    assert int(tar[124:135], 8) == len(records) == 162
    assert tar[512:512 + 162] == records and tar[512 + 162:1024] == bytes(1024 - 512 - 162)
    assert tar[1024:1124] == raw[:100] and tar[1024 + 156:1024 + 157] == b"0"
    cont = read_container(build_container(default_header(), [(name, b"data")]))
    assert list(cont.members.items()) == [(name, b"data")]


def test_writer_refuses_bad_names():
    with pytest.raises(ParseError, match="absolute"):
        build_container(default_header(), [("/x", b"")])
    with pytest.raises(ParseError, match="duplicate"):
        build_container(default_header(), [("x", b""), ("x", b"")])


def test_not_a_neff_said_so_before_any_other_field():
    """A file whose first 16 bytes hold neither a pkg_version (1, 2) nor header_size 1024 is
    refused as not a NEFF-like file, at offset 0 (a text file used to be refused for its
    reserved bytes at 0x22c); what it looks like is said when its first bytes tell."""
    text = b"# nrtrewrite\n\nOffline Neuron load-time collective rewrite.\n" * 40
    with pytest.raises(ParseError) as exc:
        read_container(text, path="README.md")
    # b"# nrtrew" and b"rite\n\nOf" read as little-endian u64s
    assert str(exc.value) == (
        "README.md: offset 0x0: not a NEFF-like file: its first 16 bytes hold pkg_version "
        "0x77657274726e2023 and header_size 0x664f0a0a65746972, where a NEFF-like header has "
        "1 or 2, and 1024")
    payload = build_container(default_header(), MEMBERS)[HEADER_SIZE:]  # the tar.gz alone
    with pytest.raises(ParseError, match=r"offset 0x0: not a NEFF-like file: .*: it looks "
                                         r"like a gzip stream \(a NEFF-like file is a "
                                         r"1024-byte header and then its tar.gz\)$"):
        read_container(payload + bytes(HEADER_SIZE), path="m.tar.gz")


def test_header_size_and_pkg_version_come_before_the_reserved_bytes():
    data = bytearray(build_container(default_header(), MEMBERS))
    data[700] = 1  # reserved, non-zero
    data[8:16] = (1000).to_bytes(8, "little")
    with pytest.raises(ParseError) as exc:
        read_container(bytes(data), path="m.neff")
    assert str(exc.value) == ("m.neff: offset 0x8, field header_size: header_size must be "
                              "1024, not 1000")
    data[8:16] = (1024).to_bytes(8, "little")
    data[0:8] = (9).to_bytes(8, "little")
    with pytest.raises(ParseError) as exc:
        read_container(bytes(data), path="m.neff")
    assert str(exc.value) == ("m.neff: offset 0x0, field pkg_version: unknown pkg_version 9 "
                              "(1 = tar.gz + SHA-256, 2 = tar.gz + MD5)")


def test_file_bytes_slices_like_bytes_and_fails_short(tmp_path):
    """FileBytes (a file read by position, for diff's walk of a NEFF it does not map): its
    slices are those of the same bytes in memory; a read the file no longer holds is a
    ParseError naming it."""
    import os

    from nrtrewrite.errors import Where
    from nrtrewrite.neff.container import FileBytes
    data = bytes(range(256)) * 40  # 10,240 bytes
    p = tmp_path / "f.bin"
    p.write_bytes(data)
    fd = os.open(p, os.O_RDONLY)
    try:
        fb = FileBytes(fd, len(data), Where(file=str(p)))
        assert len(fb) == len(data)
        for a, b in [(0, 10), (5, 5), (9, 3), (10_000, 20_000), (-4, None), (None, 2)]:
            assert fb[a:b] == data[a:b], (a, b)
        sub = fb.sub(1000, 3000)
        assert len(sub) == 2000 and sub[0:10] == data[1000:1010] and sub[1990:] == data[2990:3000]
        assert b"".join(sub.chunks()) == data[1000:3000]
        with pytest.raises(TypeError):
            fb[::2]
        os.truncate(p, 100)
        with pytest.raises(ParseError, match=r"f\.bin: changed while being read \(it held 10240 "
                                             r"bytes, now ends at byte 100\)$"):
            fb[50:200]
    finally:
        os.close(fd)
    fd = os.open(tmp_path, os.O_RDONLY)  # a folder: its read fails (EISDIR), said so
    try:
        with pytest.raises(ParseError) as exc:
            FileBytes(fd, 100, Where(file="d.neff"))[0:10]
        assert str(exc.value) == f"d.neff: cannot read: {os.strerror(errno.EISDIR)}"
    finally:
        os.close(fd)


@pytest.mark.parametrize("fixture", ["ar2", "mix8", "sbuf"])
def test_stream_container_over_a_file_reads_what_it_reads_in_memory(fixture, tmp_path):
    """The same members, in order, whether the NEFF is given as bytes or as FileBytes; and
    its hash verifies from the file too."""
    import os
    from pathlib import Path

    from nrtrewrite.errors import Where
    from nrtrewrite.neff.container import FileBytes, stream_container
    path = Path(__file__).resolve().parents[1] / "fixtures" / f"{fixture}.neff"
    data = path.read_bytes() + bytes(100)  # (zero bytes after the payload: accepted)
    _, _, mem = stream_container(data)
    want = [(n, bytes(d)) for n, d in mem]
    p = tmp_path / "m.neff"
    p.write_bytes(data)
    fd = os.open(p, os.O_RDONLY)
    try:
        _, _, got = stream_container(FileBytes(fd, len(data), Where(file=str(p))), path=str(p))
        assert [(n, bytes(d)) for n, d in got] == want
    finally:
        os.close(fd)
    p.write_bytes(data + b"\x01")  # a non-zero byte after the payload, found in the file
    fd = os.open(p, os.O_RDONLY)
    try:
        with pytest.raises(ParseError, match=rf"m\.neff: offset 0x{len(data):x}: non-zero byte "
                                             r"after the payload \(101 trailing bytes\)$"):
            stream_container(FileBytes(fd, len(data) + 1), path=str(p))
    finally:
        os.close(fd)


# -- tar headers: sizes, extended headers, names (found 2026-12-04 by a reader review) ---------

def _with_size_field(header: bytes, field12: bytes) -> bytes:
    """A ustar header block with its size field (offset 124, 12 bytes, POSIX) replaced and
    its checksum (offset 148: the byte sum with the field as 8 spaces) recomputed."""
    h = bytearray(header[:512])
    h[124:136] = field12
    h[148:156] = b" " * 8
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h)


def test_a_negative_member_size_is_refused():
    """A base-256 size field (first byte 0xff: negative, two's complement over the other 11
    bytes) of -256, and a pax "size" record of -100: tarfile takes both; read, they moved
    the walk backwards and re-read earlier bytes as headers."""
    plain = _tar(_reg("neff.json", b"{}"), _reg("extra.bin", b""))
    minus_256 = b"\xff" + (256 ** 11 - 256).to_bytes(11, "big")
    tar = plain[:1024] + _with_size_field(plain[1024:1536], minus_256) + plain[1536:]
    with pytest.raises(ParseError) as exc:
        _read_tar(tar)
    assert str(exc.value) == "h.neff: member extra.bin: negative member size -256"

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        tf.addfile(tarfile.TarInfo("neff.json"))
        info = tarfile.TarInfo("extra.bin")
        info.pax_headers = {"size": "-100"}
        tf.addfile(info)
    with pytest.raises(ParseError) as exc:
        _read_tar(buf.getvalue())
    assert str(exc.value) == "h.neff: member extra.bin: negative member size -100"


@pytest.mark.parametrize("record", ["6_4", "\u0666\u0664", "64x", ""])
def test_a_pax_size_record_must_be_ascii_digits(record):
    """tarfile reads a pax size with int() (``6_4`` and Arabic-Indic ``٦٤`` are 64) and takes
    one it cannot read as 0; a pax record's number is decimal digits (POSIX pax)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        info = tarfile.TarInfo("extra.bin")
        info.pax_headers = {"size": record}
        tf.addfile(info)
    with pytest.raises(ParseError) as exc:
        _read_tar(buf.getvalue())
    assert str(exc.value) == (f"h.neff: member extra.bin: pax size record {record!r} is not "
                              "a decimal number")


def test_an_extended_header_over_the_limit_is_refused_from_its_size():
    """A pax header's records are read whole by tarfile, outside MAX_MEMBER_BYTES: a record
    of 2 MiB (a few KiB compressed) is refused from the header block's size, 0x200 being
    where the first member's pax data starts (after its 512-byte header block)."""
    from nrtrewrite.neff.container import MAX_TAR_HEADER_BYTES
    assert MAX_TAR_HEADER_BYTES == 1 << 20
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        info = tarfile.TarInfo("neff.json")
        info.pax_headers = {"comment": "x" * (2 << 20)}
        tf.addfile(info)
    raw = buf.getvalue()
    size = int(raw[124:136].rstrip(b"\0 "), 8)  # the pax header block's declared size
    assert size > 2 << 20
    with pytest.raises(LimitError) as exc:
        _read_tar(raw)
    assert str(exc.value) == (f"h.neff: field payload: a tar header of {size} bytes (a pax "
                              "extended header or GNU long name) at tar offset 0x200, more "
                              "than 1048576 (MAX_TAR_HEADER_BYTES)")


def _pax_tar_of_records(size: int) -> bytes:
    """A pax tar whose one member ``neff.json`` has a pax header of exactly ``size`` bytes
    of records: ``path=neff.json`` (18 bytes, "18 path=neff.json\n") and a ``comment``
    record of the rest, whose length field has 7 digits ("<7 digits> comment=<value>\n"
    is 17 bytes besides the value)."""
    value = "x" * (size - 18 - 17)
    records = f"18 path=neff.json\n{size - 18} comment={value}\n".encode()
    assert len(records) == size
    head = tarfile.TarInfo("././@PaxHeader")
    head.type, head.size = tarfile.XHDTYPE, size
    member = tarfile.TarInfo("neff.json")
    member.size = 1
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        tf.addfile(head, io.BytesIO(records))
        tf.addfile(member, io.BytesIO(b"x"))
    return buf.getvalue()


def test_an_extended_header_at_the_limit_is_read_and_one_byte_over_names_its_own_size():
    """At its boundary: 1048576 bytes of pax records are read; 1048577 are refused, the
    message giving the size the header declares, not the 1049088 bytes (whole 512-byte
    blocks) tarfile asks to read (until 2026-12-05 it gave those)."""
    assert _read_tar(_pax_tar_of_records(1 << 20)).members == {"neff.json": b"x"}
    with pytest.raises(LimitError) as exc:
        _read_tar(_pax_tar_of_records((1 << 20) + 1))
    assert str(exc.value) == ("h.neff: field payload: a tar header of 1048577 bytes (a pax "
                              "extended header or GNU long name) at tar offset 0x200, more "
                              "than 1048576 (MAX_TAR_HEADER_BYTES)")
    # a GNU long name, the same: its data (the name and a NUL) is read whole by tarfile
    long = tarfile.TarInfo("././@LongLink")
    long.type, long.size = tarfile.GNUTYPE_LONGNAME, (1 << 20) + 1
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        tf.addfile(long, io.BytesIO(b"a" * (1 << 20) + b"\0"))
    with pytest.raises(LimitError) as exc:
        _read_tar(buf.getvalue())
    assert "a tar header of 1048577 bytes" in str(exc.value)


def test_member_names_are_at_most_4096_bytes():
    ok = "a" * 4096
    assert _read_tar(_tar(_reg(ok))).members[ok] == b"x"
    long = "b" * 4097
    with pytest.raises(ParseError) as exc:
        _read_tar(_tar(_reg(long)))
    assert str(exc.value) == (f"h.neff: member {'b' * 120}...{'b' * 40} (4097 characters): "
                              "member name of 4097 bytes, more than 4096 "
                              "(MAX_MEMBER_NAME_BYTES)")
    # bytes, not characters: 2049 two-byte characters are 4098 bytes
    with pytest.raises(ParseError, match="member name of 4098 bytes"):
        _read_tar(_tar(_reg("\u00e9" * 2049)))


def test_member_names_are_read_as_utf8_under_any_locale(monkeypatch):
    """The writer stores names as UTF-8; tarfile decodes with the locale's file system
    encoding unless told: under Latin-1 ``notes/é.txt`` (c3 a9) read as ``notes/Ã©.txt`` and
    was written back double-encoded."""
    name = "notes/\u00e9.txt"
    tar = _tar(_reg("neff.json", b"{}"), _reg(name, b"n"))
    assert name.encode() in tar  # the bytes c3 a9 in the header
    monkeypatch.setattr(tarfile.TarFile, "encoding", "latin-1")  # a Latin-1 locale's default
    assert list(_read_tar(tar).members) == ["neff.json", name]


def test_a_file_member_that_is_also_a_folder_is_refused():
    """``sg00`` a file and ``sg00/def.json`` a member in it (a pax path ``sg00/`` on a
    regular member reads as ``sg00``): no file system holds both."""
    with pytest.raises(ParseError) as exc:
        _read_tar(_tar(_reg("sg00", b"f"), _reg("sg00/def.json", b"{}")))
    assert str(exc.value) == ("h.neff: member sg00: a file member is also the folder of other "
                              "members")


def _ustar(*members: tuple[str, bytes]) -> bytearray:
    """The tar Python's tarfile writes of ``members`` (ustar headers), to be patched."""
    return ustar_tar(members)


@pytest.mark.parametrize("at", [0x209, 0x3ff, 0x603])
def test_the_padding_after_a_members_data_must_be_zero(at):
    """A member's data is padded with zeros to the next 512-byte block (GNU tar, bsdtar and
    Python's tarfile all write zeros); tarfile skips those bytes unread, so any there were
    taken.  neff.json's 9 bytes of data are at tar offset 0x200 (after its header block),
    its padding 0x209..0x3ff; sg00/def.json's 3 bytes at 0x600, its padding from 0x603."""
    raw = _ustar(*MEMBERS)
    assert raw[0x200:0x209] == MEMBERS[0][1] and not any(raw[0x209:0x400])
    read_container(wrap_payload(default_header(), gzip.compress(bytes(raw), mtime=0)))
    raw[at] = 0x41
    with pytest.raises(ParseError) as exc:
        _read_tar(bytes(raw))
    member, size = ("neff.json", 9) if at < 0x400 else ("sg00/def.json", 3)
    assert str(exc.value) == (f"h.neff: member {member}: non-zero byte 0x41 at tar offset "
                              f"0x{at:x}, in the zero padding after this member's {size} bytes "
                              "of data")


def test_a_tar_that_ends_in_a_members_padding_is_truncated():
    """The tar cut at 0x300, inside the padding after neff.json's 9 bytes (0x209..0x3ff)."""
    with pytest.raises(ParseError) as exc:
        _read_tar(bytes(_ustar(*MEMBERS)[:0x300]))
    assert str(exc.value) == ("h.neff: member neff.json: tar archive truncated in the zero "
                              "padding after this member's 9 bytes of data")


def _block(data: bytes) -> bytes:
    return data + bytes(-len(data) % 512)


def _extended_tar(kind: bytes, ext_data: bytes, name: str = "neff.json", data: bytes = b"{}",
                  pad: bytes = b"") -> bytes:
    """A tar built block by block: a header of type ``kind`` (pax 'x' or 'g', GNU 'L')
    whose data is ``ext_data`` (its size field says ``len(ext_data)``) padded with ``pad``
    then zeros to 512 bytes, at tar offset 0x0 (its data at 0x200); then the member
    ``name`` with ``data``; then the two zero blocks that end a tar."""
    ext = tarfile.TarInfo("././@PaxHeader" if kind != tarfile.GNUTYPE_LONGNAME
                          else "././@LongLink")
    ext.type, ext.size = kind, len(ext_data)
    member = tarfile.TarInfo(name)
    member.size = len(data)
    return (ext.tobuf(tarfile.USTAR_FORMAT) + _block(ext_data + pad)
            + member.tobuf(tarfile.USTAR_FORMAT) + _block(data) + bytes(1024))


def test_extended_header_builder_makes_what_tarfile_writes():
    """The hand-built pax header (one record ``15 comment=abc\\n``: 2 digits, a space,
    ``comment=abc`` and a newline are 15 bytes) reads; tarfile writes these same records."""
    tar = _extended_tar(tarfile.XHDTYPE, b"15 comment=abc\n")
    assert list(_read_tar(tar).members.items()) == [("neff.json", b"{}")]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        info = tarfile.TarInfo("neff.json")
        info.pax_headers = {"comment": "abc"}
        tf.addfile(info)
    assert buf.getvalue()[0x200:0x400] == _block(b"15 comment=abc\n")


@pytest.mark.parametrize("records,member,why", [
    # junk after the last record (tarfile 3.11 stops at it and reads the member)
    (b"15 comment=abc\njunk", "neff.json",
     "record at byte 15 of its 19 bytes of records (after the last record) does not start "
     "with a decimal length and a space: it starts b'junk'"),
    # not '<keyword>=<value>'
    (b"15 comment+abc\n", "neff.json",
     "record at byte 0 of its 15 bytes of records has no '<keyword>=' after its length"),
    # a length one short of the record: tarfile 3.11 took the path 'sg00/sp.bi'
    (b"19 path=sg00/sp.bin\n", "sg00/sp.bi",
     "record at byte 0 of its 20 bytes of records does not end in a newline where its length "
     "19 says: byte 18 of the record is 0x6e"),
    # a length one over: the record would run into the padding
    (b"16 comment=abc\n", "neff.json",
     "record at byte 0 of its 15 bytes of records gives its length as 16, which runs past "
     "their end (15 bytes left)"),
    # the second record's length short (tarfile 3.11 took the path 'x', the bytes between
    # its '=' and the byte before where the length ends it)
    (b"15 comment=abc\n10 path=x/y\n", "x",
     "record at byte 15 of its 27 bytes of records does not end in a newline where its length "
     "10 says: byte 9 of the record is 0x2f"),
], ids=["junk_after", "no_equals", "length_short", "length_over", "second_short"])
def test_pax_records_must_be_well_formed(records, member, why):
    """A pax extended header's data is records ``"<length> <keyword>=<value>\\n"``, each of
    exactly ``<length>`` bytes (POSIX pax): tarfile before 3.12 reads them up to the first
    bytes that do not start one, and cuts a value where a wrong length says."""
    with pytest.raises(ParseError) as exc:
        _read_tar(_extended_tar(tarfile.XHDTYPE, records, "neff.json"))
    assert str(exc.value) == (f"h.neff: member {member}: pax extended header at tar offset "
                              f"0x0: {why}")


def test_pax_records_tarfile_refuses_are_said_as_such():
    """A record of length 0: tarfile (3.11) refuses the archive with 'invalid header'; the
    reader names the record."""
    with pytest.raises(ParseError) as exc:
        _read_tar(_extended_tar(tarfile.XHDTYPE, b"0 a=\n"))
    assert str(exc.value) == ("h.neff: field payload: pax extended header at tar offset 0x0: "
                              "record at byte 0 of its 5 bytes of records gives its length as 0, "
                              "too short for a record ('<length> <keyword>=<value>' and a "
                              "newline)")


def test_a_pax_record_that_cuts_the_name_to_nothing_is_named_at_the_payload():
    """``7 path=neff.json\n`` says the record is 7 bytes, ``7 path=``: tarfile 3.11 takes the
    path as the empty text before where that length ends it, so there is no member name to
    name; the error is the payload's (it said ``member : ...``)."""
    with pytest.raises(ParseError) as exc:
        _read_tar(_extended_tar(tarfile.XHDTYPE, b"7 path=neff.json\n"))
    assert str(exc.value) == ("h.neff: field payload: pax extended header at tar offset 0x0: "
                              "record at byte 0 of its 17 bytes of records does not end in a "
                              "newline where its length 7 says: byte 6 of the record is 0x3d")


@pytest.mark.parametrize("kind,what,data", [
    (tarfile.XHDTYPE, "pax extended header", b"15 comment=abc\n"),
    (tarfile.XGLTYPE, "pax global header", b"15 comment=abc\n"),
    (tarfile.GNUTYPE_LONGNAME, "GNU long name", b"neff.json\0"),
], ids=["pax", "pax_global", "gnu_long_name"])
def test_the_padding_after_an_extended_headers_data_must_be_zero(kind, what, data):
    """As after a member's data: the extended header's data at 0x200, a non-zero byte right
    after it (0x200 + its size) and at the block's last byte (0x3ff)."""
    assert list(_read_tar(_extended_tar(kind, data)).members) == ["neff.json"]
    for pad, at in ((b"A", 0x200 + len(data)), (bytes(511 - len(data)) + b"A", 0x3ff)):
        with pytest.raises(ParseError) as exc:
            _read_tar(_extended_tar(kind, data, pad=pad))
        assert str(exc.value) == (f"h.neff: member neff.json: {what} at tar offset 0x0: "
                                  f"non-zero byte 0x41 at tar offset 0x{at:x}, in the zero "
                                  f"padding after its {len(data)} bytes of data")


@pytest.mark.parametrize("kind,what,data,member,why", [
    # one byte after the name's NUL ("neff.json" is bytes 0..8, its NUL byte 9)
    (tarfile.GNUTYPE_LONGNAME, "GNU long name", b"neff.json\0X", "neff.json",
     "non-zero byte 0x58 at byte 10 of its 11 bytes of data, after the name's NUL (byte 9)"),
    # a NUL in the middle of the name: tarfile and GNU tar read the name 'neff'
    (tarfile.GNUTYPE_LONGNAME, "GNU long name", b"neff\0.json\0", "neff",
     "non-zero byte 0x2e at byte 5 of its 11 bytes of data, after the name's NUL (byte 4)"),
    # zeros, then a byte, after the NUL; the member named by its own header
    (tarfile.GNUTYPE_LONGLINK, "GNU long link name", b"sg00\0\0\0\0Y", "neff.json",
     "non-zero byte 0x59 at byte 8 of its 9 bytes of data, after the name's NUL (byte 4)"),
], ids=["after_nul", "nul_in_the_middle", "long_link"])
def test_a_gnu_long_name_holds_nothing_after_its_nul(kind, what, data, member, why):
    """GNU tar 1.34 (--format=gnu and oldgnu) and tarfile write a long name's data as the name
    and one NUL (its size counting the NUL); tarfile and GNU tar end the name at the first
    NUL and skip what follows it unread: a byte there is refused, as in the padding."""
    with pytest.raises(ParseError) as exc:
        _read_tar(_extended_tar(kind, data))
    assert str(exc.value) == (f"h.neff: member {member}: {what} at tar offset 0x0: {why}, "
                              "where tar readers end the name")


@pytest.mark.parametrize("data,name", [
    (b"neff.json\0", "neff.json"),  # as GNU tar and tarfile write it
    (b"neff.json\0\0\0", "neff.json"),  # zeros after the NUL, inside the size
    (b"neff.json", "neff.json"),  # no NUL: the data is the name, the padding after it zero
    (b"sg00/" + b"a" * 507, "sg00/" + "a" * 507),  # no NUL and no padding: 512 bytes of name
])
def test_a_gnu_long_name_is_read_up_to_its_nul_or_its_size(data, name):
    """The name tarfile and GNU tar read: the bytes before the first NUL, or all of them."""
    assert list(_read_tar(_extended_tar(tarfile.GNUTYPE_LONGNAME, data, name="x"))
                .members) == [name]


@pytest.mark.parametrize("zeros", [0, 100, 512, 1023])
def test_a_tar_must_end_with_two_zero_blocks(zeros):
    """POSIX tar ends an archive with two 512-byte zero blocks; GNU tar, bsdtar and Python's
    tarfile write them (and pad on to 10240 bytes), readers are lenient (tarfile reads none,
    GNU tar warns of 'a lone zero block').  The three members of MEMBERS take one header
    and one data block each: the last ends at tar offset 0xc00."""
    raw = _ustar(*MEMBERS)
    assert len(raw) == 10240 and not any(raw[0xc00:])
    assert list(_read_tar(bytes(raw[:0xc00 + 1024])).members.items()) == MEMBERS
    with pytest.raises(ParseError) as exc:
        _read_tar(bytes(raw[:0xc00 + zeros]))
    assert str(exc.value) == (f"h.neff: field payload: corrupt tar archive: it ends at tar "
                              f"offset 0x{0xc00 + zeros:x}, {zeros} zero bytes after its last "
                              "member, without the end-of-archive marker (two 512-byte zero "
                              "blocks, POSIX tar; a writer writes it when it closes the tar)")


def test_a_tar_of_zeros_without_the_marker_says_it_has_no_member():
    """A payload of one zero block: no member, and one block where the end-of-archive marker
    takes two; the message does not speak of a last member."""
    with pytest.raises(ParseError) as exc:
        _read_tar(bytes(512))
    assert str(exc.value) == ("h.neff: field payload: corrupt tar archive: it ends at tar "
                              "offset 0x200, 512 zero bytes and no member, without the "
                              "end-of-archive marker (two 512-byte zero blocks, POSIX tar; a "
                              "writer writes it when it closes the tar)")


DOT_HINT = (" (a tar made of a folder's '.' names its members './NAME'; make it of the folder's "
            "entries instead: tar -C DIR -czf m.tgz neff.json sg00 ...)")


def test_a_dot_slash_member_is_refused_saying_how_to_make_the_tar():
    """``tar -C DIR -czf m.tgz .`` writes ``./`` then ``./neff.json``, ...: NEFF-LIKE.md §1
    names members ``neff.json``, ``sg00/def.json`` (relative paths of that form), so they
    stay refused; the error says how to make a conforming tar.  ``./`` is a directory entry,
    which tarfile reads as ``.``; a name with a '.' elsewhere gets no hint."""
    dot = _special("./", tarfile.DIRTYPE)
    for entries, member in (((dot, _reg("./neff.json")), "."),
                            ((_reg("./neff.json"),), "./neff.json")):
        with pytest.raises(ParseError) as exc:
            _read_tar(_tar(*entries))
        assert str(exc.value) == (f"h.neff: member {member}: member path has an empty or '.' "
                                  f"component{DOT_HINT}")
    with pytest.raises(ParseError) as exc:
        _read_tar(_tar(_reg("sg00/./sp.bin")))
    assert str(exc.value) == ("h.neff: member sg00/./sp.bin: member path has an empty or '.' "
                              "component")


def test_a_tar_made_of_dot_by_gnu_tar(tmp_path):
    """The same through GNU tar's own archive of a model folder's '.'; made of the folder's
    entries, as the error says, it reads."""
    import shutil
    import subprocess
    if shutil.which("tar") is None:
        pytest.skip("no tar")
    for name, data in MEMBERS:
        (tmp_path / "m" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "m" / name).write_bytes(data)
    subprocess.run(["tar", "-C", str(tmp_path / "m"), "-czf", str(tmp_path / "dot.tgz"), "."],
                   check=True)
    with pytest.raises(ParseError) as exc:
        read_container(wrap_payload(default_header(), (tmp_path / "dot.tgz").read_bytes()),
                       path="h.neff")
    assert str(exc.value) == ("h.neff: member .: member path has an empty or '.' "
                              f"component{DOT_HINT}")
    subprocess.run(["tar", "-C", str(tmp_path / "m"), "-czf", str(tmp_path / "ok.tgz"),
                    "neff.json", "sg00"], check=True)
    cont = read_container(wrap_payload(default_header(), (tmp_path / "ok.tgz").read_bytes()))
    assert sorted(cont.members.items()) == sorted(MEMBERS)


def test_ustar_name_split_at_the_first_slash_that_fits():
    """FORMATS.md §9: a name over 100 bytes is split at the first '/' that leaves at most 155
    bytes before it (the prefix, bytes 345..499) and 100 after it (the name, 0..99)."""
    name = "x" * 30 + "/" + "y" * 30 + "/" + "z" * 60
    tar = build_tar([(name, b"")])
    assert tar[345:500] == b"x" * 30 + bytes(125)
    assert tar[0:100] == b"y" * 30 + b"/" + b"z" * 60 + bytes(9)


def test_a_short_names_ustar_header_is_written_without_tarfile(monkeypatch):
    """A name of at most 100 bytes is written straight into its ustar header, without
    ``TarInfo.tobuf`` (65,000 members' headers took 1.5 s through it), byte for byte the
    header POSIX ustar lays out (written out here): the name NUL-padded to 100 bytes, mode
    0644, uid and gid 0, the size and mtime in 11 octal digits and a NUL, the checksum (the
    header's bytes summed with the field as 8 spaces) in 6 octal digits, a NUL and a space,
    type '0', an empty link name, ``ustar\\0`` and ``00``, empty owner names and the rest NUL;
    names of other lengths and sizes, random, as tarfile writes them."""
    from nrtrewrite.neff import container

    for kind in (tarfile.REGTYPE, tarfile.XHDTYPE):  # (its template: tarfile's, once)
        container._tar_header("x", 0, kind)
    real_tobuf = tarfile.TarInfo.tobuf
    monkeypatch.setattr(tarfile.TarInfo, "tobuf", lambda *a, **k: 1 / 0)
    head = container._tar_header("sg00/sp.bin", 64)
    blank = (b"sg00/sp.bin".ljust(100, b"\0") + b"0000644\0" + b"0000000\0" * 2
             + b"00000000100\0" + b"00000000000\0" + b" " * 8 + b"0" + bytes(100)
             + b"ustar\x0000")
    blank += bytes(512 - len(blank))
    want = blank[:148] + b"%06o\0 " % sum(blank) + blank[156:]
    assert head == want
    monkeypatch.setattr(tarfile.TarInfo, "tobuf", real_tobuf)
    assert tarfile.TarInfo.frombuf(head, "utf-8", "surrogateescape").size == 64
    rnd = random.Random(5)
    for _ in range(2000):
        name = "".join(rnd.choice("ab/_.é权😀\udc80") for _ in range(rnd.choice([1, 34, 99, 100])))
        size = rnd.choice([0, 511, 8 ** 11 - 1, 8 ** 11, rnd.randrange(8 ** 12)])
        for kind in (tarfile.REGTYPE, tarfile.XHDTYPE):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode, info.type = size, 0, 0o644, kind
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            try:
                ref = info.tobuf(tarfile.USTAR_FORMAT, "utf-8", "surrogateescape")
            except ValueError:  # (a name or size ustar cannot hold: refused alike)
                with pytest.raises(ValueError):
                    container._tar_header(name, size, kind)
                continue
            assert container._tar_header(name, size, kind) == ref
