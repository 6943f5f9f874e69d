"""``golden.pack`` copies each file into the archive a block at a time: the archive is the
same bytes as one built from each file read whole (gzip at its default level, mtime 0, PAX
headers with zeroed owners), and packing a 48 MiB file holds about its compressed size, not
the file."""

from __future__ import annotations

import gzip
import io
import tarfile
import tracemalloc

import numpy as np

from nrtrewrite.golden import pack


def whole_files_pack(folder) -> bytes:
    """The archive as built from each file's bytes read whole (the reference)."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for path in sorted(folder.rglob("*")):
                info = tarfile.TarInfo(path.relative_to(folder).as_posix())
                info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
                if path.is_dir():
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
                else:
                    data = path.read_bytes()
                    info.size, info.mode = len(data), 0o644
                    tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_pack_streams_each_file_and_writes_the_same_bytes(tmp_path):
    out = tmp_path / "out"
    (out / "rank-0000").mkdir(parents=True)
    (out / "manifest.json").write_text('{"ranks": [0]}\n')
    (out / "rank-0000" / "empty.bin").write_bytes(b"")
    (out / "rank-0000" / "small.bin").write_bytes(bytes(range(256)) * 3)
    big = out / "rank-0000" / "dma.bin"
    # compressible, as artifacts are: a 48 MiB file of a repeated 4 KiB block
    np.tile(np.random.default_rng(7).integers(0, 256, 4096, np.uint8), 12288).tofile(big)
    tracemalloc.start()
    try:
        packed = pack(out)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert packed == whole_files_pack(out)
    assert peak < 16 * (1 << 20), peak  # (reading dma.bin whole held 48 MiB)
    with tarfile.open(fileobj=io.BytesIO(packed), mode="r:gz") as tar:
        assert tar.getnames() == ["manifest.json", "rank-0000", "rank-0000/dma.bin",
                                  "rank-0000/empty.bin", "rank-0000/small.bin"]
        assert tar.extractfile("rank-0000/dma.bin").read() == big.read_bytes()
