"""`lower_rank` streaming to a sink (docs/PERFORMANCE.md "Memory speed"): the same bytes and
manifest as the in-memory path, in file order; a failing sink stops the lowering and leaves no
writer thread behind."""

import hashlib
import os
import threading
from pathlib import Path

import numpy as np
import pytest

from nrtrewrite.emit import formats as F
from nrtrewrite.emit.legs import RankBuilder
from nrtrewrite.lower import LowerOptions, lower_rank, plan_lowering
from nrtrewrite.neff.reader import read_model

FIX = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def node64():
    return read_model(FIX / "node64.neff")


def _sink_threads():
    return [t for t in threading.enumerate() if t.name == "nrtrewrite-sink"]


@pytest.mark.parametrize("rank", [0, 63])
def test_sink_gets_the_in_memory_bytes_in_order(node64, rank):
    kept = lower_rank(plan_lowering(node64, LowerOptions()), rank)
    got: dict[str, list[bytes]] = {}
    streamed = lower_rank(plan_lowering(node64, LowerOptions()), rank,
                          sink=lambda name, arr: got.setdefault(name, []).append(arr.tobytes()))
    assert not any(streamed.files.values())
    assert streamed.manifest == kept.manifest
    for name in F.ARTIFACTS:
        data = b"".join(p.tobytes() for p in kept.files[name])
        assert b"".join(got.get(name, [])) == data, name
        assert hashlib.sha256(data).hexdigest() == kept.manifest["files"][name]["sha256"]
    # the 64 MiB all-reduce's descriptors are big enough for the writer thread
    assert kept.manifest["files"]["dma.bin"]["bytes"] > RankBuilder.THREAD_BYTES
    assert not _sink_threads()


@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_a_failing_sink_stops_the_lowering(node64, where):
    total = []
    lower_rank(plan_lowering(node64, LowerOptions()), 0, sink=lambda n, a: total.append(n))
    fail_at = {"first": 1, "middle": len(total) // 2, "last": len(total)}[where]
    calls = []

    def sink(name, arr):
        calls.append(name)
        if len(calls) == fail_at:
            raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        lower_rank(plan_lowering(node64, LowerOptions()), 0, sink=sink)
    assert len(calls) == fail_at  # nothing reaches the sink after the error
    assert not _sink_threads()


def test_blocks_are_cache_sized_and_identical_to_one_block(node64, monkeypatch):
    """The emitter's block size changes the array boundaries, never the bytes."""
    import nrtrewrite.emit.legs as legs

    def files(block):
        monkeypatch.setattr(legs, "EMIT_BLOCK", block)
        out = lower_rank(plan_lowering(node64, LowerOptions()), 0)
        return {k: b"".join(p.tobytes() for p in v) for k, v in out.files.items()}, out

    small, out_small = files(1000)
    big, out_big = files(1 << 40)
    assert small == big
    # node64 has some 38 k data BDs: blocks of 1,000 descriptors cut them into many more
    # arrays than one block per batch does (a setting the emitter ignored would not)
    for name in ("dma.bin", "cce.bin"):
        assert len(out_small.files[name]) > len(out_big.files[name]) >= 1, name


def test_blocks_ramp_up_from_the_first_block():
    """Blocks grow from ``first``, doubling, to ``size``; each ends at the first leg whose
    running total of work reaches its mark (32768, 32768 + 65536, then every 131072)."""
    from nrtrewrite.emit.legs import _blocks

    work = np.full(1000, 1000)
    blocks = _blocks(work, 131072, 32768)
    assert [z - a for a, z in blocks[:4]] == [33, 66, 131, 131]
    assert blocks[0][0] == 0 and blocks[-1][1] == 1000
    assert all(z == a for (_a, z), (a, _z) in zip(blocks, blocks[1:]))
    assert _blocks(work, 131072) == _blocks(work, 131072, 131072)  # no ramp at full size
    assert [z - a for a, z in _blocks(work, 131072)[:2]] == [132, 131]
    assert _blocks(np.full(10, 5), 131072, 32768) == [(0, 10)]


def test_ramped_blocks_give_the_same_bytes(node64, monkeypatch):
    import nrtrewrite.emit.legs as legs

    def files(first, block):
        monkeypatch.setattr(legs, "EMIT_FIRST_BLOCK", first)
        monkeypatch.setattr(legs, "EMIT_BLOCK", block)
        out = lower_rank(plan_lowering(node64, LowerOptions()), 0)
        return {k: b"".join(p.tobytes() for p in v) for k, v in out.files.items()}, out

    ramped, out = files(64, 4096)
    whole, _ = files(1 << 40, 1 << 40)
    assert ramped == whole
    assert len(out.files["dma.bin"]) > 2  # the ramp did cut the descriptors


def test_coalesced_keeps_each_files_bytes_in_order():
    from nrtrewrite.emit.legs import COALESCE_BYTES, _coalesced

    big = COALESCE_BYTES // 8
    rng = np.random.default_rng(5)

    def arr(n):
        return rng.integers(0, 1 << 40, n).astype(np.int64)

    batch = [("a", arr(3)), ("b", arr(2)), ("a", arr(4)), ("a", arr(big)), ("b", arr(1)),
             ("a", arr(5)), ("c", arr(big + 1)), ("b", arr(7))]
    out = _coalesced(batch)
    for name in "abc":
        want = b"".join(x.tobytes() for n, x in batch if n == name)
        assert b"".join(x.tobytes() for n, x in out if n == name) == want, name
    # the small runs of a file between its big arrays become one array each
    assert [n for n, _ in out] == ["a", "b", "a", "a", "c"]
    assert all(x.dtype == np.int64 for _, x in out)


def _rank_files_with_advice(node64, tmp_path, monkeypatch, fadvise) -> None:
    """Lower node64 rank 0 into bundle._RankFiles with ``fadvise`` as posix_fadvise (every
    64 KiB) and check the files hold the in-memory lowering's bytes."""
    from nrtrewrite import bundle

    monkeypatch.setattr(bundle, "_FADV_DONTNEED", fadvise)
    monkeypatch.setattr(bundle._RankFiles, "WRITEBACK_BYTES", 1 << 16)
    kept = lower_rank(plan_lowering(node64, LowerOptions()), 0)
    rdir = tmp_path / "r"
    rdir.mkdir()
    files = bundle._RankFiles(rdir)
    lower_rank(plan_lowering(node64, LowerOptions()), 0, sink=files.write)
    files.close(F.ARTIFACTS)
    for name in F.ARTIFACTS:
        assert (rdir / name).read_bytes() == b"".join(p.tobytes() for p in kept.files[name])


def test_rank_files_start_writeback_of_every_written_range_once(node64, tmp_path, monkeypatch):
    """bundle._RankFiles hands each file's written bytes to the kernel's writeback in
    consecutive ranges that cover what was written when the threshold was passed (never a
    byte twice, never a byte not yet written); the files are the in-memory bytes."""
    calls: list[tuple[int, int, int]] = []
    sizes: dict[int, int] = {}

    def fadvise(fd, offset, length, advice):
        assert advice == os.POSIX_FADV_DONTNEED
        assert offset + length <= os.fstat(fd).st_size  # flushed before it is advised
        calls.append((fd, offset, length))

    _rank_files_with_advice(node64, tmp_path, monkeypatch, fadvise)
    assert calls, "no file of node64 rank 0 passed 64 KiB"
    for fd, offset, length in calls:
        assert offset == sizes.get(fd, 0) and length >= 1 << 16
        sizes[fd] = offset + length


def test_a_refused_writeback_advice_is_not_an_error(node64, tmp_path, monkeypatch):
    """posix_fadvise is advice: a file system that refuses it (an OSError) gets no more
    advice for that file and the rank is written all the same."""
    calls = []

    def refuse(fd, offset, length, advice):
        calls.append(fd)
        raise OSError(22, "Invalid argument")

    _rank_files_with_advice(node64, tmp_path, monkeypatch, refuse)
    assert calls and len(calls) == len(set(calls))  # once per file at most


@pytest.mark.parametrize("nbytes", [1 << 10, RankBuilder.THREAD_BYTES])
def test_hash_time_counts_inline_and_writer_thread_updates(nbytes):
    """``hash_s`` (the bench's "hash" stage) counts the SHA-256 updates of small ranks, made
    inline, and of the writer thread's arrays alike; the digest is the bytes' own."""
    b = RankBuilder(0, sink=lambda name, arr: None)
    data = np.arange(nbytes // F.BD_DTYPE.itemsize * 2, dtype=np.int64).view(F.BD_DTYPE)
    b.append("dma.bin", data)
    assert (b._consumer is not None) == (nbytes >= RankBuilder.THREAD_BYTES)
    b.close()
    assert b.hash_s > 0
    assert b.summary("dma.bin")["sha256"] == hashlib.sha256(data.tobytes()).hexdigest()


def test_lower_rank_reports_its_hash_time(node64):
    out = lower_rank(plan_lowering(node64, LowerOptions()), 0, sink=lambda name, arr: None)
    assert {"compose", "emit", "serialize", "hash"} <= set(out.timings)
    assert out.timings["hash"] > 0
