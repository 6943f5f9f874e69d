"""`lower` never writes a rewritten NEFF its readers would refuse (docs/FORMATS.md §9: the
rewritten NEFF reads back): its tar stays within MAX_TOTAL_BYTES, the limit ``inspect``,
``lower`` and ``simulate`` allow a decompressed payload.

The limit is 4 GiB; here it is patched down to the size of a small input's tar, as the
report that found it did (an input tar ending right after its end-of-archive marker, 8192
bytes, was written back padded to 10240 and then refused by ``inspect --max-total-bytes
8192``).  Reading uses :class:`Limits`, whose defaults are bound when the class is made:
the patch moves only what the writer aims at, and each test reads with the limit given."""

from __future__ import annotations

import gzip
import io
import tarfile
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from nrtrewrite.cli import main
from nrtrewrite.neff import container
from nrtrewrite.neff.container import Limits, read_container, read_file_bytes, wrap_payload

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def _ar2():
    c = read_container(read_file_bytes(str(FIX / "ar2.neff")))
    return c.header, list(c.members.items())


def _tar(items, fmt) -> bytes:
    """The tar tarfile writes of ``items``, cut right after its end-of-archive marker (no
    padding to a 10240-byte record)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tf:
        for name, data in items:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        end = tf.offset  # after the last member's padded data
    return buf.getvalue()[:end + 1024]


def _lower(model: Path, out: Path):
    return CliRunner().invoke(main, ["lower", "-q", str(model), "-o", str(out), "-j", "1"])


def test_a_tar_within_the_limit_is_written_back_within_it(tmp_path, monkeypatch):
    """ar2's 8 members, 512-byte headers and data padded to 512-byte blocks, then the two
    zero blocks: 8192 bytes, read at a limit of 8192.  The rewritten NEFF's tar has the
    same members at the same sizes, so the same 8192 bytes; padding it to 10240 (a multiple
    of TAR_RECORD) made it unreadable at that limit.  Below the limit the padding is kept:
    8192 bytes at a limit of 9192 are padded to 8704 (the last whole block within it, 17
    blocks), at 9728 (19 blocks) to 9728, at 20480 to 10240."""
    header, items = _ar2()
    tar = _tar(items, tarfile.USTAR_FORMAT)
    assert len(tar) == sum(512 + -(-len(d) // 512) * 512 for _, d in items) + 1024 == 8192
    model = tmp_path / "nopad.neff"
    model.write_bytes(wrap_payload(header, gzip.compress(tar, mtime=0)))
    read_container(model.read_bytes(), limits=Limits(max_total_bytes=8192))  # reads
    for limit, written in ((8192, 8192), (8192 + 1000, 8704), (9728, 9728), (20480, 10240)):
        monkeypatch.setattr(container, "MAX_TOTAL_BYTES", limit)
        out = tmp_path / f"o{limit}"
        res = _lower(model, out)
        assert res.exit_code == 0, res.output
        data = (out / "nopad.neff").read_bytes()
        back = read_container(data, limits=Limits(max_total_bytes=limit))
        assert list(back.members) == [name for name, _ in items]
        assert len(zlib.decompress(data[1024:], wbits=31)) == written


def test_a_tar_that_grows_past_the_limit_is_refused_before_anything_is_written(tmp_path,
                                                                                monkeypatch):
    """A member name of 505 bytes does not fit ustar.  Read from a GNU tar it is a long name
    of 506 bytes of data (the name and a NUL: one block); written back, a pax record
    ``515 path=<name>\\n`` (3 + 1 + 5 + 505 + 1 bytes: two blocks).  So the rewritten tar is
    one block, 512 bytes, longer than the input's: at a limit of the input's own size,
    ``lower`` refuses, one line, status 2, and writes nothing."""
    header, items = _ar2()
    long = "x" * 505
    items.append((long, b"extra"))
    tar = _tar(items, tarfile.GNU_FORMAT)
    assert len(tar) == 8192 + 512 + 512 + 512 + 512  # the long name (2 blocks), header, data
    model = tmp_path / "long.neff"
    model.write_bytes(wrap_payload(header, gzip.compress(tar, mtime=0)))
    assert read_container(model.read_bytes(),
                          limits=Limits(max_total_bytes=len(tar))).members[long] == b"extra"
    monkeypatch.setattr(container, "MAX_TOTAL_BYTES", len(tar))
    out = tmp_path / "o"
    res = _lower(model, out)
    assert res.exit_code == 2, res.output
    assert res.stderr == (f"nrtrewrite: error: {model}: the rewritten NEFF's tar would be "
                          f"{len(tar) + 512} bytes, more than the limit of {len(tar)} bytes "
                          "its readers allow a decompressed payload (MAX_TOTAL_BYTES); nothing "
                          "was written\n")
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["long.neff"]
    monkeypatch.setattr(container, "MAX_TOTAL_BYTES", len(tar) + 512)  # one block more: fits
    res = _lower(model, out)
    assert res.exit_code == 0, res.output
    back = read_container((out / "long.neff").read_bytes(),
                          limits=Limits(max_total_bytes=len(tar) + 512))
    assert back.members[long] == b"extra"


@pytest.mark.parametrize("names, size", [
    ([("neff.json", 9)], 512 + 512 + 1024),
    ([("a" * 100, 0), ("b", 513)], 512 + 512 + 1024 + 1024),  # 100 bytes: still ustar
    ([("a" * 101, 1)], 512 + 512 + 512 + 512 + 1024),  # pax header, one block of records
    ([("d/" * 60 + "f", 0)], 512 + 1024),  # 121 bytes split at a "/": ustar prefix + name
    ([("\u00e9" * 50, 0)], 512 + 1024),  # 50 characters, 100 bytes: ustar
    ([("\u00e9" * 51, 0)], 512 + 512 + 512 + 1024),  # 102 bytes: a pax header first
])
def test_tar_size_counts_headers_blocks_and_the_end_marker(names, size):
    """tar_size: 512 per ustar header, a pax extended header (512) and its records (to a
    block) before a name that does not fit ustar, data to 512-byte blocks, and the two zero
    blocks; what build_tar writes before its record padding."""
    assert container.tar_size(names) == size
    tar = container.build_tar([(n, bytes(k)) for n, k in names])
    assert len(tar) == -(-size // 10240) * 10240  # padded to a record, far under 4 GiB
