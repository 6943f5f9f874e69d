"""Mutation tests: corrupt the bytes of a correct output and the simulator must fail.

Each test copies a freshly lowered output, changes a few bytes of one artifact (and, unless
the test says so, nothing else), and runs ``nrtrewrite simulate --ignore-checksums``: the
exit code must be 1 and the JSON verdict not ok.  Without ``--ignore-checksums`` the same
output is refused (exit 2).  A simulator that passes any of these is broken.
"""

from __future__ import annotations

import hashlib
import os
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from nrtrewrite.emit import formats as F

from test_simulate import FIX, cli, coll_spec, lower_neff, lower_spec, two_node_spec

LEG = F.LEG_DTYPE


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """8 ranks, bf16 all-reduce, 2 channels and several tiles per leg."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 8, 600_000), tmp_path_factory.mktemp("m") / "o")
    man = json.loads((out / "manifest.json").read_text())
    assert len(man["triggers"][0]["channels"]) >= 2
    return out


@pytest.fixture(scope="module")
def base2(tmp_path_factory) -> Path:
    """Two nodes: ranks 0, 1 on node 0 and 64, 65 on node 1, so the rings use the net proxy."""
    return lower_spec(two_node_spec(num_elements=8192), tmp_path_factory.mktemp("m2") / "o")


class Out:
    """A writable copy of an output folder with record-level editing."""

    def __init__(self, src: Path, dst: Path):
        shutil.copytree(src, dst)
        self.path = dst

    def arr(self, rank: int, name: str) -> np.ndarray:
        return np.fromfile(self.path / f"rank-{rank:04d}" / name, F.ARTIFACTS[name][0])

    def put(self, rank: int, name: str, arr: np.ndarray) -> None:
        (self.path / f"rank-{rank:04d}" / name).write_bytes(arr.tobytes())

    def edit(self, rank: int, name: str, fn) -> None:
        # a writable array over a copy of the file's bytes: numpy's copy of a structured
        # array with explicit offsets leaves the padding (the reserved bytes) undefined
        a = np.frombuffer(bytearray((self.path / f"rank-{rank:04d}" / name).read_bytes()),
                          F.ARTIFACTS[name][0])
        fn(a)
        self.put(rank, name, a)

    def _manifest_path(self, rank: int | None) -> Path:
        return self.path / ("" if rank is None else f"rank-{rank:04d}") / "manifest.json"

    def manifest(self, rank: int | None = None) -> dict:
        """The top manifest, or rank ``rank``'s."""
        return json.loads(self._manifest_path(rank).read_text())

    def edit_manifest(self, rank: int | None, fn) -> dict:
        """Apply ``fn`` to the top manifest (``rank`` None) or rank ``rank``'s and write it
        back; the manifest as written."""
        man = self.manifest(rank)
        fn(man)
        self._manifest_path(rank).write_text(json.dumps(man, indent=1, sort_keys=True) + "\n")
        return man

    def fix_manifest_counts(self, rank: int) -> None:
        """Make the rank manifest agree with the files again (records, bytes, sha256)."""
        rdir = self.path / f"rank-{rank:04d}"

        def recount(man):
            for name, info in man["files"].items():
                data = (rdir / name).read_bytes()
                info.update(records=len(data) // F.ARTIFACTS[name][0].itemsize,
                            bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
        self.edit_manifest(rank, recount)

    def split_bd(self, rank: int, i: int, runs: list[tuple[int, int]]) -> None:
        """Replace BD ``i`` by one BD per ``(offset from its buf_ptr, length)`` of ``runs``,
        its FIRST bit on the first, its LAST bit on the last: its stream then moves those runs
        concatenated (FORMATS.md §5: a stream has one BD per contiguous run).  The leg's
        dma_count, the later legs' dma_first (§3) and the leg's M2S or S2M count in
        tpinc.bin (§2.2, encoded again: maximal runs, one last_sync group per entry and
        channel) follow, and the manifest counts; the rank keeps under 4096 BDs a channel, so
        every generation tag stays 0."""
        bds = self.arr(rank, "dma.bin")
        ln, meta, ptr = int(bds["len_ctrl"][i]), int(bds["meta_ctrl"][i]), int(bds["buf_ptr"][i])
        assert sum(n for _o, n in runs) == ln & 0xFFFF and (ln >> 24) & 3 == 0
        rest = ln & ~0xFFFF & ~(3 << 26)  # all but length, FIRST and LAST
        flags = [ln & (1 << 26)] + [0] * (len(runs) - 1)
        flags[-1] |= ln & (1 << 27)
        new = np.zeros(len(runs), bds.dtype)
        new["len_ctrl"] = [rest | n | f for (_o, n), f in zip(runs, flags)]
        new["meta_ctrl"] = meta
        new["buf_ptr"] = [ptr + o for o, _n in runs]
        bds = np.concatenate([bds[:i], new, bds[i + 1:]])
        assert bds.size < 4096
        self.put(rank, "dma.bin", bds)
        extra = len(runs) - 1
        legs = legs_of(self, rank)
        g = int(np.flatnonzero(legs["dma_first"].astype(np.int64) <= i)[-1])
        legs["dma_count"][g] += extra
        legs["dma_first"][g + 1:] += extra
        self.put(rank, "legs.bin", legs)
        t = self.arr(rank, "tpinc.bin")
        rep = t["repeat"].astype(np.int64)
        counts = np.repeat(np.stack([t["m2s"], t["s2m"]], 1).astype(np.int64), rep, 0)
        ends = np.cumsum(rep)[t["flags"] == 1] - 1  # the last leg of each group
        counts[g, meta >> 4 & 1] += extra
        recs: list[list[int]] = []
        for k, (m2s, s2m) in enumerate(counts.tolist()):
            if recs and recs[-1][:2] == [m2s, s2m] and not recs[-1][3] and recs[-1][2] < 65535:
                recs[-1][2] += 1
            else:
                recs.append([m2s, s2m, 1, 0])
            recs[-1][3] = int(k in ends)
        self.put(rank, "tpinc.bin", np.array([tuple(r) for r in recs], t.dtype))
        self.fix_manifest_counts(rank)

    def simulate(self, *extra) -> dict:
        res = cli("simulate", self.path, "--ignore-checksums", "--json", *extra)
        assert res.exit_code == 1, (res.exit_code, res.output)
        doc = json.loads(res.stdout)
        assert doc["ok"] is False
        return doc


def region_addr(o: Out, rank: int, name: str) -> tuple[int, dict]:
    """``rank``'s DRAM region ``name`` (a var, "scratch" or "gw"): the SoC address of its
    first byte, (logical core << 36) + 0x1_0000_0000 + the region's offset (FORMATS.md §10),
    and the region as the manifest's `memory` lists it."""
    top = o.manifest()
    reg = next(r for r in top["memory"]["regions"] if r["name"] == name)
    lc = next(p["logical_core"] for p in top["topology"]["ranks"] if p["rank"] == rank)
    return (lc << 36) + (1 << 32) + reg["offset"], reg


def failure_text(doc: dict) -> str:
    return " ".join([doc["error"] or ""] + [t["detail"] for t in doc["triggers"]])


@pytest.fixture
def mut(base, tmp_path) -> Out:
    return Out(base, tmp_path / "mut")


@pytest.fixture
def mut2(base2, tmp_path) -> Out:
    return Out(base2, tmp_path / "mut")


def legs_of(o: Out, rank: int) -> np.ndarray:
    return o.arr(rank, "legs.bin")


def first_leg(o: Out, rank: int, leaf: int, skip: int = 0) -> int:
    idx = np.flatnonzero(legs_of(o, rank)["leaf"] == leaf)
    return int(idx[skip])


# ---------------------------------------------------------------------------

def test_uncorrupted_output_passes(base):
    res = cli("simulate", base, "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["ok"] is True
    res = cli("simulate", base, "--json", "--seed", 7)
    assert res.exit_code == 0


def test_uncorrupted_two_node_output_passes(base2):
    res = cli("simulate", base2, "--json", "--seed", 2)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["stats"]["transfers"] > 0


def test_tampered_output_is_refused_without_ignore_checksums(mut):
    # (a numpy u64 scalar, not 2: numpy 1.x has no u64 ^ Python int, the floor is 1.26)
    mut.edit(3, "dma.bin", lambda a: a["buf_ptr"].__setitem__(0, a["buf_ptr"][0] ^ np.uint64(2)))
    res = cli("simulate", mut.path)
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1
    assert "rank-0003/dma.bin" in res.stderr and "sha256" in res.stderr


@pytest.mark.parametrize("byte", range(8))
@pytest.mark.parametrize("which", ["first", "reduce_src1", "last_dst"])
@pytest.mark.parametrize("bit", [0x01, 0x80])
def test_flip_an_address_byte(mut, byte, which, bit):
    rank = 5
    legs = legs_of(mut, rank)
    bds = mut.arr(rank, "dma.bin")
    if which == "first":
        i = 0
    elif which == "reduce_src1":  # source 1 (the rank's input) of tile 1 of a reduce leg
        g = first_leg(mut, rank, 2)
        first = int(legs["dma_first"][g])
        meta = bds["meta_ctrl"][first:first + int(legs["dma_count"][g])]
        src1 = np.flatnonzero(((meta >> 4) & 1 == 0) & ((meta >> 8) & 0x1F == 1))
        i = first + int(src1[1])
    else:  # the last destination BD of the rank
        i = int(np.flatnonzero((bds["meta_ctrl"] >> 4) & 1)[-1])

    def flip(a):
        raw = a.view(np.uint8).reshape(a.size, 16)
        raw[i, 8 + byte] ^= bit
    mut.edit(rank, "dma.bin", flip)
    mut.simulate()


def test_drop_a_leg(mut):
    g = first_leg(mut, 2, 2, skip=3)
    mut.put(2, "legs.bin", np.delete(legs_of(mut, 2), g))
    mut.simulate()


def test_drop_a_leg_and_zero_its_bds(mut):
    legs = legs_of(mut, 2)
    g = first_leg(mut, 2, 6, skip=2)
    first, count = int(legs["dma_first"][g]), int(legs["dma_count"][g])
    mut.edit(2, "dma.bin", lambda a: a.view(np.uint8).reshape(a.size, 16)
             .__setitem__(slice(first, first + count), 0))
    mut.put(2, "legs.bin", np.delete(legs, g))
    mut.simulate()


def test_drop_a_leg_with_consistent_manifest_counts(mut):
    """The manifest's record count no longer gives it away: the program itself must."""
    g = first_leg(mut, 2, 2, skip=3)
    mut.put(2, "legs.bin", np.delete(legs_of(mut, 2), g))
    mut.fix_manifest_counts(2)
    doc = mut.simulate()
    assert "legs.bin" in failure_text(doc)


@pytest.mark.parametrize("pair", ["compl_vs_next", "two_waits", "across_channels"])
def test_swap_two_semaphore_addresses(mut, pair):
    rank = 1
    legs = legs_of(mut, rank)
    sem = mut.arr(rank, "sem.bin")
    g = first_leg(mut, rank, 2)
    s0 = int(legs["sem_first"][g])
    if pair == "compl_vs_next":  # a recv_reduce_send's own completion vs the successor's recv
        i, j = s0 + 1, s0 + 2
    elif pair == "two_waits":  # the recv wait vs the mark_end wait of the same channel
        e = first_leg(mut, rank, 15)
        i, j = s0, int(legs["sem_first"][e])
    else:  # the same role on two channels
        other = np.flatnonzero((legs["leaf"] == 2) & (legs["channel"] != legs["channel"][g]))
        i, j = s0, int(legs["sem_first"][other[0]])
    assert sem["addr"][i] != sem["addr"][j]

    def swap(a):
        a["addr"][[i, j]] = a["addr"][[j, i]]
    mut.edit(rank, "sem.bin", swap)
    mut.simulate()


@pytest.mark.parametrize("op", [1, 2, 3, 5])
def test_change_a_cce_op(mut, op):
    mut.edit(4, "cce.bin", lambda a: a["w1"].__setitem__(7, (int(a["w1"][7]) & ~7) | op))
    mut.simulate()


@pytest.mark.parametrize("shift,code", [(8, 7), (8, 0xA), (12, 0xE), (16, 0xA), (8, 2)])
def test_corrupt_a_cce_dtype_nibble(mut, shift, code):
    def f(a):
        w = int(a["w1"][3])
        a["w1"][3] = (w & ~(0xF << shift)) | (code << shift)
    mut.edit(6, "cce.bin", f)
    mut.simulate()


@pytest.mark.parametrize("what", ["wait", "compl_inc", "next_inc", "mark_end+1", "mark_end-1"])
def test_flip_a_semaphore_value(mut, what):
    rank = 3
    legs = legs_of(mut, rank)
    g = first_leg(mut, rank, 2)
    s0 = int(legs["sem_first"][g])
    e = int(legs["sem_first"][first_leg(mut, rank, 15)])
    i, delta = {"wait": (s0, 1), "compl_inc": (s0 + 1, 1), "next_inc": (s0 + 2, 1),
                "mark_end+1": (e, 1), "mark_end-1": (e, -1)}[what]
    mut.edit(rank, "sem.bin", lambda a: a["value"].__setitem__(i, int(a["value"][i]) + delta))
    mut.simulate()


@pytest.mark.parametrize("name,index", [("dma.bin", 0), ("dma.bin", -1), ("sem.bin", 5)])
def test_flip_a_generation_tag(mut, name, index):
    field = "len_ctrl" if name == "dma.bin" else "ctrl"
    mut.edit(0, name, lambda a: a[field].__setitem__(index, int(a[field][index]) ^ (1 << 24)))
    mut.simulate()


@pytest.fixture(scope="module")
def base_big(tmp_path_factory) -> Path:
    """2 ranks, bf16 all-reduce of 6M elements: more than 4096 data BDs on one channel."""
    return lower_spec(coll_spec("all_reduce", "bf16", 2, 6_000_000),
                      tmp_path_factory.mktemp("big") / "o")


def test_a_zero_generation_tag_where_1_is_due(base_big, tmp_path):
    """dma.bin len_ctrl bits [25:24] (ring_id) are (index of the BD among the rank's data BDs
    of its channel) // 4096 mod 4 (FORMATS.md §5): the BD of index 4096 on a channel carries
    1; 0 there (the tag of the ring's previous pass) is refused.  A leg's BDs are its
    dma_first / dma_count range and its channel is legs.bin's (§3)."""
    o = Out(base_big, tmp_path / "mut")
    legs = legs_of(o, 0)
    chan = np.repeat(legs["channel"], legs["dma_count"].astype(np.int64))
    c = int(legs["channel"][0])
    on_c = np.flatnonzero(chan == c)
    assert on_c.size > 4096
    i = int(on_c[4096])
    assert (int(o.arr(0, "dma.bin")["len_ctrl"][i]) >> 24) & 3 == 1
    o.edit(0, "dma.bin",
           lambda a: a["len_ctrl"].__setitem__(i, int(a["len_ctrl"][i]) & ~(3 << 24)))
    assert (f"artifact dma.bin, record {i}: generation tag should be 1, not 0 (BD ring wraps every "
            f"4096 BDs of channel {c})") in failure_text(o.simulate())


def test_swap_two_legs(mut):
    def swap(a):
        g = int(np.flatnonzero(a["leaf"] == 2)[4])
        a[[g, g + 1]] = a[[g + 1, g]]
    mut.edit(7, "legs.bin", swap)
    mut.simulate()


def test_swap_two_legs_renumbered(mut):
    """Swapped and renumbered (steps ascending again): the record ranges give it away."""
    def swap(a):
        g = int(np.flatnonzero(a["leaf"] == 2)[4])
        a[[g, g + 1]] = a[[g + 1, g]]
        a["step"][[g, g + 1]] = a["step"][[g + 1, g]]
    mut.edit(7, "legs.bin", swap)
    mut.simulate()


@pytest.mark.parametrize("value", [0, 17, 19, 255])
def test_change_a_0xbf_wait_idx(mut, value):
    def f(a):
        i = int(np.flatnonzero(a["wait_mode"] == 20)[2])
        assert a["wait_idx"][i] != value
        a["wait_idx"][i] = value
    mut.edit(2, "sb2sb.bin", f)
    mut.simulate()


@pytest.mark.parametrize("field,value", [("update_idx", 18), ("update_mode", 0),
                                         ("semaphore_value", 2), ("in_dtype", 7)])
def test_change_other_0xbf_fields(mut, field, value):
    def f(a):
        i = int(np.flatnonzero(a["update_mode"] == 21)[3])
        a[field][i] = value
    mut.edit(2, "sb2sb.bin", f)
    mut.simulate()


def test_change_tp_inc_steps(mut):
    mut.edit(1, "tpinc.bin", lambda a: a["m2s"].__setitem__(1, int(a["m2s"][1]) + 1))
    mut.simulate()


def test_change_a_cce_length(mut):
    mut.edit(1, "cce.bin", lambda a: a["w2"].__setitem__(4, int(a["w2"][4]) - 2))
    mut.simulate()


def test_change_spad_channel_list(mut):
    mut.edit(0, "spad.bin", lambda a: a["channel_list"].__setitem__(0, int(a["channel_list"][0]) ^ 4))
    mut.simulate()


def test_a_reserved_spad_flag_bit(mut):
    """spad.bin byte 2 bits [7:3] are reserved, 0 (FORMATS.md §2): bit 3 set is refused."""
    mut.edit(3, "spad.bin", lambda a: a["flags"].__setitem__(0, int(a["flags"][0]) | 0x08))
    assert "reserved flag bits [7:3] are set" in failure_text(mut.simulate())


@pytest.mark.parametrize("what", ["valid_cleared", "last_on_source_0", "last_cleared"])
def test_cce_valid_and_last_bits(mut, what):
    """cce.bin W1 bit 25 (valid) is 1 in every descriptor and bit 7 (last) is 1 on exactly the
    last source of a tile (FORMATS.md §6); descriptors are in source order, meta_idx in W0
    bits [28:24]."""
    w0 = mut.arr(4, "cce.bin")["w0"].astype(np.int64)
    src = (w0 >> 24) & 0x1F
    i = int(np.flatnonzero(src == 0)[0])
    last = i + int(np.flatnonzero(src[i + 1:] == 0)[0])  # the tile's last source
    assert last > i
    w1 = mut.arr(4, "cce.bin")["w1"].astype(np.int64)
    assert ((w1[i:last + 1] >> 25) & 1).tolist() == [1] * (last + 1 - i)
    assert ((w1[i:last + 1] >> 7) & 1).tolist() == [0] * (last - i) + [1]
    at, bit = {"valid_cleared": (i, 1 << 25), "last_on_source_0": (i, 1 << 7),
               "last_cleared": (last, 1 << 7)}[what]
    mut.edit(4, "cce.bin", lambda a: a["w1"].__setitem__(at, int(a["w1"][at]) ^ bit))
    named = "valid bit (W1[25])" if what == "valid_cleared" else "W1 last bit"
    assert named in failure_text(mut.simulate())


def test_a_cce_tile_of_more_than_8_sources(mut):
    """cce.bin W3 num_sources is 1..8 (FORMATS.md §6): 9 is refused as such, whatever the tile
    holds (a tile that really had 9 sources and summed right would otherwise pass)."""
    mut.edit(4, "cce.bin", lambda a: a["w3"].__setitem__(0, (int(a["w3"][0]) & ~0x3F) | 9))
    assert "W3 num_sources should be at most 8, not 9" in failure_text(mut.simulate())


def test_two_reporters(mut):
    mut.edit(3, "spad.bin", lambda a: a["flags"].__setitem__(0, int(a["flags"][0]) | 1))
    mut.simulate()


# ---------------------------------------------------------------------------
# net-proxy FIFOs (two nodes)

def first_rank_with(o: Out, name: str) -> int:
    """The first rank of the two-node output whose ``name`` FIFO has records."""
    for r in (0, 1, 64, 65):
        if o.arr(r, name).size:
            return r
    raise AssertionError(f"no rank has records in {name}")


def sender(o: Out) -> int:
    return first_rank_with(o, "net_src.bin")


def first_terminator(o: Out, side: str) -> tuple[int, int]:
    """(rank, record) of the first terminator (mark 1) in a ``side`` FIFO."""
    r = first_rank_with(o, side)
    return r, int(np.flatnonzero(o.arr(r, side)["mark"] == 1)[0])


def test_truncate_a_fifo_terminator(mut2):
    r = sender(mut2)
    a = mut2.arr(r, "net_src.bin")
    # the last op's terminator, before its block's EXEC_COMPLETE entry (FORMATS §8 "Basic
    # blocks")
    assert a["mark"][-2:].tolist() == [1, 2]
    mut2.put(r, "net_src.bin", np.concatenate([a[:-2], a[-1:]]))
    mut2.simulate()


def test_truncate_a_fifo_terminator_with_consistent_manifest(mut2):
    r = sender(mut2)
    a = mut2.arr(r, "net_src.bin")
    assert a["mark"][-2:].tolist() == [1, 2]
    mut2.put(r, "net_src.bin", np.concatenate([a[:-2], a[-1:]]))
    mut2.edit_manifest(r, lambda man: man["fifo"][-1]["src"].__setitem__(
        1, man["fifo"][-1]["src"][1] - 1))
    mut2.fix_manifest_counts(r)
    doc = mut2.simulate()
    assert "terminator" in failure_text(doc)


@pytest.mark.parametrize("side", ["net_src.bin", "net_dest.bin"])
@pytest.mark.parametrize("mark", [0, 2])
def test_wrong_terminator_mark(mut2, side, mark):
    r, i = first_terminator(mut2, side)
    mut2.edit(r, side, lambda x: x["mark"].__setitem__(i, mark))
    text = failure_text(mut2.simulate())
    if mark == 0:  # it reads as a 0-byte entry: named at its own record, not a later one's
        assert f"artifact {side}, record {i}: " in text, text


@pytest.mark.parametrize("side,byte", [("net_src.bin", 40), ("net_src.bin", 44),
                                       ("net_dest.bin", 44), ("net_src.bin", 20)])
def test_a_terminator_byte_outside_its_three_fields(mut2, side, byte):
    """A terminator is zero but for net_op_idx (0..3), mark (36..39) and the rank field
    (dst_rank at 48 of net_src_addr, src_rank at 40 of net_dest_addr): FORMATS.md §8.2.
    Bytes 40..47 of a transmit terminator are proxy_histogram_tag, 44..47 of a receive
    terminator reserved_44, 16..23 host_addr."""
    r, i = first_terminator(mut2, side)

    def poke(x):
        x.view(np.uint8).reshape(x.size, -1)[i, byte] = 1
    mut2.edit(r, side, poke)
    text = failure_text(mut2.simulate())
    assert (f"artifact {side}, record {i}: terminator has non-zero bytes besides net_op_idx"
            in text)
    # the field the byte is in (review 58p: until 2026-12-07 a field "terminator")
    name = {("net_src.bin", 40): "proxy_histogram_tag", ("net_src.bin", 44):
            "proxy_histogram_tag", ("net_dest.bin", 44): "reserved_44",
            ("net_src.bin", 20): "host_addr"}[side, byte]
    assert f"field {name}," in text and f"{name} (bytes " in text, text


@pytest.mark.parametrize("which", ["terminator", "entry", "dest_entry"])
def test_wrong_net_op_idx(mut2, which):
    r = sender(mut2)
    if which == "dest_entry":
        for rr in (0, 1, 64, 65):
            if mut2.arr(rr, "net_dest.bin").size:
                mut2.edit(rr, "net_dest.bin", lambda a: a["net_op_idx"].__setitem__(3, 1))
                break
    else:
        def f(a):
            i = int(np.flatnonzero(a["mark"] == 1)[0]) if which == "terminator" else 2
            a["net_op_idx"][i] = int(a["net_op_idx"][i]) + 1
        mut2.edit(r, "net_src.bin", f)
    mut2.simulate()


@pytest.mark.parametrize("field,delta", [("size", 2), ("dst_addr", 0x400), ("dev_addr", 0x400),
                                         ("complete", -1), ("dst_rank", 1)])
def test_corrupt_a_transmit_entry(mut2, field, delta):
    r = sender(mut2)
    mut2.edit(r, "net_src.bin", lambda a: a[field].__setitem__(3, int(a[field][3]) + delta))
    mut2.simulate()


@pytest.mark.parametrize("field,value", [("initial_send_credits", 0),
                                         ("ending_recv_credits", 0x200), ("tx_entry_cnt", 1),
                                         ("net_idx_loop_size", 256), ("inc_recv_handshake", 0)])
def test_corrupt_net_ops_info(mut2, field, value):
    r = sender(mut2)
    mut2.edit(r, "net_ops.bin", lambda a: a[field].__setitem__(0, value))
    mut2.simulate()


@pytest.mark.parametrize("field,change,named", [
    # FORMATS.md §8.1: inc_send_complete = inc_send_handshake; data_type_sz of bf16 is 2;
    # basic_block_id is the subgraph's index (0: the model has one); enc_channel is the
    # channel whose FIFO holds the record; reserved_75 is 0
    ("inc_send_complete", lambda v: v + 8, "inc_send_complete differs from inc_send_handshake"),
    ("data_type_sz", lambda v: 4, "data_type_sz should be 2, sdma_data_type_size[BF16], not 4"),
    ("basic_block_id", lambda v: 1, "basic_block_id should be 0, the index of subgraph sg00 "
                                     "(trigger 0's), not 1"),
    ("enc_channel", lambda v: v + 1, "enc_channel should be 0, its FIFO's channel, not 1"),
    ("reserved_75", lambda v: 1, "reserved_75 should be 0, not 0x1"),
])
def test_corrupt_a_net_ops_info_field_named_in_the_verdict(mut2, field, change, named):
    r = sender(mut2)
    ops = mut2.arr(r, "net_ops.bin")
    assert int(ops["data_type_sz"][0]) == 2 and int(ops["basic_block_id"][0]) == 0
    assert int(ops["inc_send_complete"][0]) == int(ops["inc_send_handshake"][0])
    mut2.edit(r, "net_ops.bin", lambda a: a[field].__setitem__(0, change(int(a[field][0]))))
    assert named in failure_text(mut2.simulate())


@pytest.mark.parametrize("offsets, says", [
    # FORMATS §8.1: reserved_4 u8[4] at 4, reserved_60 u8[4] at 60, reserved_75 u8 at 75
    ([5], "field reserved_4, rank {r}, channel 0, artifact net_ops.bin, record 0: reserved_4 "
     "should be 00 00 00 00, not 00 01 00 00"),
    ([63], "field reserved_60, rank {r}, channel 0, artifact net_ops.bin, record 0: "
     "reserved_60 should be 00 00 00 00, not 00 00 00 01"),
    ([75], "field reserved_75, rank {r}, channel 0, artifact net_ops.bin, record 0: "
     "reserved_75 should be 0, not 0x1"),
    # several: the first by offset
    ([75, 60], "field reserved_60, rank {r}, channel 0, artifact net_ops.bin, record 0: "
     "reserved_60 should be 00 00 00 00, not 01 00 00 00"),
])
def test_a_reserved_net_ops_info_byte_names_its_field_and_value(mut2, offsets, says):
    """A byte of a reserved field of the first op's net_ops_info set to 1 is refused naming
    the FORMATS §8.1 field (the first by offset) and its value (it was ``field reserved``,
    a name §8.1 does not have, ``reserved bytes are not zero``)."""
    r = sender(mut2)
    path = mut2.path / f"rank-{r:04d}" / "net_ops.bin"
    b = bytearray(path.read_bytes())
    for off in offsets:
        assert b[off] == 0
        b[off] = 1
    path.write_bytes(bytes(b))
    text = failure_text(mut2.simulate())
    assert says.format(r=r) in text, text


@pytest.mark.parametrize("field,change", [
    ("size", lambda v: v // 2),
    ("complete", lambda v: 1 - v),
])
def test_a_receive_entry_that_disagrees_with_its_transmit_entry(mut2, field, change):
    """FORMATS.md §8: the proxy pairs a receiver's k-th receive entry with the k-th transmit
    entry addressed to it; the two carry the same size and the same complete bit. Nothing
    else fixes the complete bit, so the line names both records (the changed receive entry
    too: until 2026-12-07 only the transmit entry, which was not changed); the size of a
    ring leg's whole transfer is its sending leg's num_elements x element size, which the
    transmit entry keeps, so the receive entry alone is named (docs/SIMULATOR.md §2)."""
    r = first_rank_with(mut2, "net_dest.bin")
    old = int(mut2.arr(r, "net_dest.bin")[field][0])
    mut2.edit(r, "net_dest.bin", lambda a: a[field].__setitem__(0, change(old)))
    text = failure_text(mut2.simulate())
    if field == "size":
        assert (f"artifact net_dest.bin, record 0: size should be {old}, not {change(old)}: "
                "the paired transmit entry") in text, text
        return
    assert (f"{field} {change(old)} in the paired receive entry (rank {r}, net_dest.bin "
            f"record 0) should be equal") in text, text


def test_a_surplus_receive_entry(mut2):
    """A copy of an op's last receive entry added before its terminator, with rx_entry_cnt
    (FORMATS.md §8.1), the manifest's fifo slice (§1.2) and file counts following: the FIFO
    is well formed, but the proxy pairs the receiver's k-th receive entry from P with P's k-th
    transmit entry to it (§8.2 "Proxy semantics"), and P has one transmit entry fewer."""
    r, i = first_terminator(mut2, "net_dest.bin")
    rx = mut2.arr(r, "net_dest.bin")
    assert i > 0 and int(rx["mark"][i - 1]) == 0 and int(rx["complete"][i - 1]) == 1
    k, peer = int(rx["net_op_idx"][i]), int(rx["src_rank"][i - 1])
    mut2.put(r, "net_dest.bin", np.insert(rx, i, rx[i - 1]))
    mut2.edit(r, "net_ops.bin", lambda a: a["rx_entry_cnt"].__setitem__(
        k, int(a["rx_entry_cnt"][k]) + 1))

    def grow(man):
        for sl in man["fifo"]:  # the slice holding record i grows, the later ones move
            first, count = sl["dest"]
            sl["dest"] = [first + (first > i), count + (first <= i < first + count)]
    man = mut2.edit_manifest(r, grow)
    mut2.fix_manifest_counts(r)
    ch = [sl["channel"] for sl in man["fifo"] if sl["dest"][0] <= i][-1]
    assert (f"artifact net_dest.bin, record {i}: receive entry from rank {peer} has no transmit "
            f"entry of rank {peer} on channel {ch} to pair with") in failure_text(mut2.simulate())


def test_a_transmit_entry_that_reads_the_input_instead_of_the_gateway(mut2):
    """net_src_addr dev_addr is read from the sender's gateway buffer (FORMATS.md §8.2, §8
    "Entries"); the sender's first transmit entry (step 0 of the ring: its own input chunk,
    staged unchanged in gw at the same element offsets) moved to the same bytes of x_in, the
    DRAM var of the rank's window (§10: (lc << 36) + dram_base + region offset).  The bytes
    sent are the same, so only the region rule refuses it."""
    r = sender(mut2)
    gw0, gw = region_addr(mut2, r, "gw")
    x_in0, _ = region_addr(mut2, r, "x_in")
    addr = int(mut2.arr(r, "net_src.bin")["dev_addr"][0])
    assert 0 <= addr - gw0 < gw["size"]
    new = addr - gw0 + x_in0
    mut2.edit(r, "net_src.bin", lambda a: a["dev_addr"].__setitem__(0, new))
    assert (f"artifact net_src.bin, record 0: dev_addr {new:#x} is in region \"x_in\"; the proxy "
            "sends from the gateway buffer") in failure_text(mut2.simulate())


def test_swap_two_transmit_entries(mut2):
    r = sender(mut2)

    def f(a):
        a[[1, 4]] = a[[4, 1]]
    mut2.edit(r, "net_src.bin", f)
    mut2.simulate()


# ---------------------------------------------------------------------------
# mesh and RDH outputs: fewer leaf rules, so the run itself must catch these

@pytest.fixture(scope="module", params=["mesh", "intra_rdh"])
def base_mesh(request, tmp_path_factory) -> Path:
    out = lower_spec(coll_spec("all_reduce", "bf16", 8, 20000, lnc=2),
                     tmp_path_factory.mktemp(request.param) / "o", algo=request.param)
    res = cli("simulate", out, "--json")
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture
def mutm(base_mesh, tmp_path) -> Out:
    return Out(base_mesh, tmp_path / "mut")


@pytest.fixture(scope="module")
def base_mesh8(tmp_path_factory) -> Path:
    """8 ranks, fp32r MESH all-reduce: each mesh_reduce tile has 8 sources."""
    return lower_spec(coll_spec("all_reduce", "fp32r", 8, 4096),
                      tmp_path_factory.mktemp("mesh8") / "o", algo="mesh")


def test_mesh_reduce_tile_sources_out_of_order(base_mesh8, tmp_path):
    """Inside a tile the BDs are M2S source 0, 1, ... then S2M destination 0, 1, ...
    (FORMATS.md §5).  The first two BDs of a mesh_reduce (leaf 17, §3) tile swap their
    meta_ctrl and buf_ptr (bytes 4..15; len_ctrl with FIRST stays): each source still reads
    its own buffer, so the sum is the same, and only the order rule refuses it."""
    o = Out(base_mesh8, tmp_path / "mut")
    legs = legs_of(o, 0)
    i = int(legs["dma_first"][first_leg(o, 0, 17)])
    mc = o.arr(0, "dma.bin")["meta_ctrl"][i:i + 9].astype(np.int64)
    assert ((mc >> 4) & 1).tolist() == [0] * 8 + [1]  # dir: 8 sources, then a destination
    assert ((mc >> 8) & 0x1F).tolist() == list(range(8)) + [0]  # stream

    def swap(a):
        raw = a.view(np.uint8).reshape(a.size, 16)
        raw[[i, i + 1], 4:] = raw[[i + 1, i], 4:]
    o.edit(0, "dma.bin", swap)
    assert (f"artifact dma.bin, record {i + 1}: BDs of a tile are not ordered M2S sources 0, 1, "
            "... then S2M destinations 0, 1, ...") in failure_text(o.simulate())


def _event_sems(o: Out, rank: int):
    from nrtrewrite.simulate.layout import Layout
    lay = Layout(o.manifest())
    sem = o.arr(rank, "sem.bin")
    _t, _w, sid, _e = lay.resolve_sema(rank, sem["addr"])
    subop = sem["ctrl"] & 0xFF
    return sem, sid, subop


@pytest.mark.parametrize("what", ["wait+1", "wait-1", "inc+1", "inc_target"])
def test_mesh_event_semaphores(mutm, what):
    rank = 3
    sem, sid, subop = _event_sems(mutm, rank)
    ev = np.flatnonzero(sid >= 192)
    waits = ev[subop[ev] == 20]
    incs = ev[subop[ev] == 21]
    if what.startswith("wait"):
        i, d = int(waits[0]), (1 if what == "wait+1" else -1)
        if int(sem["value"][i]) + d <= 0:
            pytest.skip("a wait of 1 cannot go lower")
        mutm.edit(rank, "sem.bin", lambda a: a["value"].__setitem__(i, int(a["value"][i]) + d))
    elif what == "inc+1":
        i = int(incs[0])
        mutm.edit(rank, "sem.bin", lambda a: a["value"].__setitem__(i, int(a["value"][i]) + 1))
    else:  # increment another event semaphore of the same peer
        i = int(incs[0])
        mutm.edit(rank, "sem.bin", lambda a: a["addr"].__setitem__(i, int(a["addr"][i]) + 4))
    mutm.simulate()


@pytest.mark.parametrize("byte", [0, 1, 2, 4])
def test_mesh_address_byte(mutm, byte):
    def flip(a):
        raw = a.view(np.uint8).reshape(a.size, 16)
        raw[a.size // 2, 8 + byte] ^= 0x04
    mutm.edit(5, "dma.bin", flip)
    mutm.simulate()


def test_mesh_cce_op(mutm):
    mutm.edit(2, "cce.bin", lambda a: a["w1"].__setitem__(0, (int(a["w1"][0]) & ~7) | 3))
    mutm.simulate()


def test_mesh_drop_a_leg(mutm):
    legs = legs_of(mutm, 6)
    mutm.put(6, "legs.bin", np.delete(legs, len(legs) // 2))
    mutm.fix_manifest_counts(6)
    mutm.simulate()


# ---------------------------------------------------------------------------
# all-gather outputs: random bytes (docs/SIMULATOR.md §4), compared byte for byte

AGM_N = 1024  # int32 elements a rank: 4096 bytes, one tile a leg (FORMATS.md §3 n_tiles)


@pytest.fixture(scope="module")
def base_agm(tmp_path_factory) -> Path:
    """4 ranks (one device), int32 all-gather lowered with MESH: each rank copies its input
    into its own block of its output, and in one other leg into every peer's."""
    return lower_spec(coll_spec("all_gather", "int32", 4, AGM_N),
                      tmp_path_factory.mktemp("agm") / "o", algo="mesh")


@pytest.fixture
def mutagm(base_agm, tmp_path) -> Out:
    return Out(base_agm, tmp_path / "mut")


def agm_input(rank: int) -> np.ndarray:
    """Rank ``rank``'s input at seed 0: trigger 0, group position = rank (SIMULATOR.md §4:
    all-gather inputs are random bytes, a function of (seed, trigger, rank))."""
    from nrtrewrite.codes import DType
    from nrtrewrite.simulate.testdata import make_input
    return make_input(0, 0, rank, 4, AGM_N, DType.INT32, "", False)


def agm_out_addr(o: Out, rank: int, block: int) -> int:
    """SoC address of block ``block`` of ``rank``'s x_out (FORMATS.md §10: logical core
    ``rank`` of the one device, (lc << 36) + 0x1_0000_0000 + the region's offset)."""
    return region_addr(o, rank, "x_out")[0] + block * AGM_N * 4


def test_an_all_gather_element_off_in_its_lowest_bit(mutagm):
    """Rank 1's own-block copy reads element e's low byte from element e + 1, which differs
    from it by one: one element of rank 1's output is off by one unit in its lowest bit, a
    relative error under 1e-6 for the value chosen.  SIMULATOR.md §4: the dst operand must
    equal the reference (the inputs concatenated) byte for byte, so it is refused (a
    tolerant compare, np.allclose on the values, would take it)."""
    x = agm_input(1)
    lo = x.view(np.uint8)[::4].astype(np.int64)  # the low byte of each element
    e = next(e for e in range(1, AGM_N - 1)
             if abs(lo[e + 1] - lo[e]) == 1 and abs(int(x[e])) > 1 << 20)
    want = x[e:e + 1].copy()
    got = want.copy()
    got.view(np.uint8)[0] = lo[e + 1]
    # the copy into rank 1's own block 1: one tile, its source BD just before its destination
    bds = mutagm.arr(1, "dma.bin")
    i = int(np.flatnonzero(bds["buf_ptr"] == agm_out_addr(mutagm, 1, 1))[0]) - 1
    assert (int(bds["meta_ctrl"][i]) >> 4) & 1 == 0  # M2S: a source
    assert int(bds["len_ctrl"][i]) & 0xFFFF == AGM_N * 4
    mutagm.split_bd(1, i, [(0, 4 * e), (4 * e + 4, 1), (4 * e + 1, 4 * (AGM_N - e) - 1)])
    text = failure_text(mutagm.simulate())
    assert (f"rank 1: 1 element(s) differ, first element {AGM_N + e}: should be {want[0]} "
            f"({want.tobytes().hex()}), not {got[0]} ({got.tobytes().hex()})") in text, text


def test_all_gather_blocks_swapped_between_two_senders(mutagm):
    """Rank 0 writes its input into block 1 of rank 2's output and rank 1 into block 0:
    the two destination BDs' buf_ptr swapped.  Every byte of the output is still written
    once, before rank 2's check, by a leg the protocol orders; only the inputs being
    different on every rank (random bytes per (seed, trigger, rank), SIMULATOR.md §4) show
    it: rank 2's output is not the inputs concatenated in group order (§4), so it is
    refused (with the same input on every rank it would match)."""
    a0, a1 = agm_out_addr(mutagm, 2, 0), agm_out_addr(mutagm, 2, 1)
    i0 = int(np.flatnonzero(mutagm.arr(0, "dma.bin")["buf_ptr"] == a0)[0])
    i1 = int(np.flatnonzero(mutagm.arr(1, "dma.bin")["buf_ptr"] == a1)[0])
    mutagm.edit(0, "dma.bin", lambda a: a["buf_ptr"].__setitem__(i0, a1))
    mutagm.edit(1, "dma.bin", lambda a: a["buf_ptr"].__setitem__(i1, a0))
    x0, x1 = agm_input(0), agm_input(1)
    d = np.flatnonzero(x0 != x1)  # both blocks differ there
    e = int(d[0])
    text = failure_text(mutagm.simulate())
    assert (f"rank 2: {2 * d.size} element(s) differ, first element {e}: should be {x0[e]} "
            f"({x0[e:e + 1].tobytes().hex()}), not {x1[e]} ({x1[e:e + 1].tobytes().hex()})"
            in text), text


@pytest.fixture(scope="module")
def base_mesh4(tmp_path_factory) -> Path:
    """4 ranks on one device, a bf16 all-reduce lowered with MESH: every peer is on the device,
    so each rank's all-gather leg increments EVT_INTRA_GRP_BRDCST of each of its 3 peers once
    and each rank's mesh_sync waits for 3 of them (docs/DESIGN.md, the mesh schedule)."""
    return lower_spec(coll_spec("all_reduce", "bf16", 4, 4096),
                      tmp_path_factory.mktemp("mesh4") / "o", algo="mesh")


def _readdress_broadcast_inc(o: Out, rank: int, frm: int, to: int) -> None:
    """``rank``'s EVT_INTRA_GRP_BRDCST increment of rank ``frm`` goes to rank ``to`` instead:
    its address becomes that of the same leg's increment of ``to``."""
    from nrtrewrite.codes import EncMeshEventType
    from nrtrewrite.compose.events import event_sem
    from nrtrewrite.simulate.layout import Layout
    lay = Layout(o.manifest())
    sem = o.arr(rank, "sem.bin")
    target, _w, sid, _e = lay.resolve_sema(rank, sem["addr"])
    inc = ((sem["ctrl"] & 0xFF) == 21) & (sid == event_sem(EncMeshEventType.EVT_INTRA_GRP_BRDCST))
    (i,) = np.flatnonzero(inc & (target == frm))
    (j,) = np.flatnonzero(inc & (target == to))
    o.edit(rank, "sem.bin", lambda a: a["addr"].__setitem__(i, a["addr"][j]))


def test_mesh_broadcast_increments_readdressed_race_with_the_output_check(base_mesh4, tmp_path):
    """Rank 0's all-gather increment of rank 1 goes to rank 2, and rank 3's of rank 2 goes to
    rank 1: every count still balances and every value is right, but rank 1's mesh_sync is
    released by rank 2 once and rank 3 twice, never by rank 0, so nothing orders rank 0's
    broadcast into rank 1's output before rank 1 checks it (likewise rank 3's broadcast into
    rank 2).  The output check reads the output, and a read not ordered after the last write
    is a race (docs/SIMULATOR.md §5); checked before the write lands, the bytes are unwritten
    instead.  Every seed fails; seed 1 names the race.  A simulator that skipped the output
    check's race check passed it at every seed."""
    o = Out(base_mesh4, tmp_path / "mut")
    _readdress_broadcast_inc(o, 0, 1, 2)
    _readdress_broadcast_inc(o, 3, 2, 1)
    for seed in (0, 2):
        o.simulate("--seed", seed)
    text = failure_text(o.simulate("--seed", 1))
    # rank r's block of the 4096 bf16 elements: bytes [2048 r, 2048 (r + 1))
    races = [f"the output check of rank {r} for trigger 0 reads bytes [{lo:#x}, {hi:#x}) of "
             f"rank {r} dram \"x_out\"" for r, lo, hi in ((1, 0, 0x800), (2, 0x1800, 0x2000))]
    writers = ["written by leg mesh_send (rank 0, entry 0", "written by leg mesh_send (rank 3, "
               "entry 0"]
    assert any(race in text and w in text for race, w in zip(races, writers)), text
    assert "with no happens-before ordering" in text


# --- addresses (FORMATS §10): routing, DIE bit, semaphore alignment (mutation audit round 6)

VALID, DIE = 1 << 54, 1 << 47


def _place(o: Out, rank: int) -> dict:
    top = o.manifest()
    return next(p for p in top["topology"]["ranks"] if p["rank"] == rank)


def test_a_bd_routed_to_its_own_device_is_refused(mut):
    """FORMATS §10: "A target on the same device uses the plain local address". Rank 5's first
    data BD (a local address: every rank of the base is on one device) gets CAYMAN_ID_VALID
    and its own device's routing id; the target is the same memory, but the address is not one
    of §10's. A simulator that let it through resolved it to the same bytes and passed."""
    rank = 5
    rid = _place(mut, rank)["routing_id"]
    assert int(mut.arr(rank, "dma.bin")["buf_ptr"][0]) >> 47 == 0  # a plain local address
    mut.edit(rank, "dma.bin", lambda a: a["buf_ptr"].__setitem__(
        0, a["buf_ptr"][0] | np.uint64(VALID | rid << 48)))
    assert "routed to the issuing rank's own device" in failure_text(mut.simulate())


def _local_sem_bd(o: Out, rank: int) -> int:
    sem = o.arr(rank, "sem.bin")
    return int(np.flatnonzero((sem["addr"] >> np.uint64(47)) == 0)[0])


def test_a_semaphore_address_with_the_die_bit_of_a_missing_core_is_refused(mut):
    """FORMATS §10: the semaphore address of TOP_SP ``sp`` is ``0x8280000000 + ((sp & 7) << 30)
    + ((sp > 7) << 47) + w + 4 id``; setting bit 47 on rank 5's (core 5) semaphore address names
    TOP_SP 13, a core of no rank on the base's device (8 ranks, one device), so it is refused.
    A simulator that ignored the DIE bit (or masked the address to LOCAL's 47 bits first) took
    it for core 5's own semaphore and passed."""
    rank = 5
    assert _place(mut, rank)["logical_core"] == 5
    i = _local_sem_bd(mut, rank)
    mut.edit(rank, "sem.bin", lambda a: a["addr"].__setitem__(i, a["addr"][i] | np.uint64(DIE)))
    assert "targets a (device, core) where no rank of the world lives" in failure_text(
        mut.simulate())


@pytest.mark.parametrize("delta", [1, 2, 3])
def test_a_semaphore_address_between_two_semaphores_is_refused(mut, delta):
    """FORMATS §10: semaphore ``id`` of a window is at ``w + 4 * id``, so an address 1..3 bytes
    past one is no semaphore. A simulator that dropped the alignment check rounded it down to
    the semaphore below and passed."""
    rank = 5
    i = _local_sem_bd(mut, rank)
    mut.edit(rank, "sem.bin", lambda a: a["addr"].__setitem__(i, a["addr"][i] + np.uint64(delta)))
    assert "is not an EVT_SEM semaphore address" in failure_text(mut.simulate())


def test_a_bd_one_byte_past_the_end_of_its_region_is_refused(mut):
    """FORMATS §10 / SIMULATOR §3: a BD's whole transfer lies inside one region. Rank 5's BD
    that ends exactly at the end of ``x_in`` (DRAM at ``(core << 36) + 0x1_0000_0000 +
    offset``) is moved up one byte, so its last byte is the first byte past the region. A
    simulator whose end check was off by one byte took the address and failed later, for
    another reason (or not at all, had the bytes matched)."""
    rank = 5
    start, reg = region_addr(mut, rank, "x_in")
    end = start + reg["size"]
    bds = mut.arr(rank, "dma.bin")
    ends = (bds["buf_ptr"] & np.uint64((1 << 47) - 1)).astype(np.int64) + (
        bds["len_ctrl"] & 0xFFFF).astype(np.int64)
    i = int(np.flatnonzero(ends == end)[0])
    mut.edit(rank, "dma.bin", lambda a: a["buf_ptr"].__setitem__(i, a["buf_ptr"][i] + 1))
    assert "runs past the end of its region" in failure_text(mut.simulate())


def test_a_semaphore_of_top_sp_8_addressed_without_the_die_bit_is_refused(tmp_path):
    """FORMATS §10: TOP_SP ``sp`` 8..15 is addressed ``((sp & 7) << 30) + (1 << 47)``; writing
    TOP_SP 8's semaphore as ``8 << 30`` (no DIE bit) leaves the EVT_SEM aperture of TOP_SPs
    0..7 (``sp & 7`` is at most 7). On a 16-core device (test_limits.BIG16, ranks 0 and 8)
    rank 8's own semaphores carry the DIE bit; so readdressed, one is refused. A simulator that
    read ``sp`` as up to 8 from bits 30.. took it for core 8's and passed."""
    from test_limits import BIG16

    from nrtrewrite.neff.assembler import assemble_spec

    topo = tmp_path / "big16.json"
    topo.write_text(json.dumps(BIG16))
    spec = coll_spec("all_reduce", "bf16", [0, 8], 4096)
    neff = tmp_path / "m.neff"
    neff.write_bytes(assemble_spec(spec))
    res = cli("lower", neff, "--topology", topo, "--algo", "ring", "-o", tmp_path / "o", "-q")
    assert res.exit_code == 0, res.output
    o = Out(tmp_path / "o", tmp_path / "mut")
    res = cli("simulate", tmp_path / "o", "--json")
    assert res.exit_code == 0, res.output
    sem = o.arr(8, "sem.bin")
    i = int(np.flatnonzero((sem["addr"] >> np.uint64(47)) & np.uint64(1))[0])
    fixed = int(sem["addr"][i]) - DIE + (8 << 30)
    o.edit(8, "sem.bin", lambda a: a["addr"].__setitem__(i, np.uint64(fixed)))
    assert "is not an EVT_SEM semaphore address" in failure_text(o.simulate())


# --- the folder and its checksums (FORMATS §1, SIMULATOR §1; mutation audit round 6)

def _rehash_rank_manifest(o: Out, rank: int) -> None:
    """Record rank ``rank``'s manifest.json sha256 in the top manifest again."""
    name = f"rank-{rank:04d}"
    data = (o.path / name / "manifest.json").read_bytes()
    o.edit_manifest(None, lambda top: top["rank_manifests"].__setitem__(
        name, hashlib.sha256(data).hexdigest()))


def _exit2(o: Out, *words: str) -> None:
    res = cli("simulate", o.path)
    assert res.exit_code == 2, res.output
    for w in words:
        assert w in res.stderr, res.stderr


def test_a_rank_manifest_changed_after_writing_is_refused(mut):
    """SIMULATOR §1: an output folder is refused (exit 2) when any sha256 of its manifests does
    not match: ``rank_manifests`` holds each rank manifest's. A trailing blank line changes the
    bytes of rank 3's manifest and nothing it says."""
    p = mut.path / "rank-0003" / "manifest.json"
    p.write_text(p.read_text() + "\n")
    _exit2(mut, "rank-0003/manifest.json: sha256 does not match manifest.json rank_manifests")


def test_a_rewritten_neff_changed_after_writing_is_refused(mut):
    """SIMULATOR §1 / FORMATS §1.1 ``output_neff``: its sha256 is checked. A byte appended to
    the rewritten NEFF (which, without ``--model``, nothing else compares with the input)."""
    p = mut.path / mut.manifest()["output_neff"]["name"]
    p.write_bytes(p.read_bytes() + b"\0")
    _exit2(mut, "sha256 does not match manifest.json")


def test_a_folder_with_an_extra_rank_folder_is_refused(mut):
    """FORMATS §1.1 ``ranks``: the rank folders of the output; a ``rank-0099`` folder that no
    manifest names is refused (exit 2), as a folder would be that is missing."""
    shutil.copytree(mut.path / "rank-0003", mut.path / "rank-0099")
    _exit2(mut, "rank folders differ from manifest.json ranks (rank-0099)")


def test_a_rank_manifest_that_does_not_list_an_artifact_is_refused(mut):
    """FORMATS §1.2 ``files``: the record counts and sha256 of every file; a rank manifest
    without ``tpinc.bin`` (its own checksum recorded again) leaves that file unchecked, and is
    refused (exit 2)."""
    mut.edit_manifest(3, lambda m: m["files"].pop("tpinc.bin"))
    _rehash_rank_manifest(mut, 3)
    # (until 2026-12-06, with no key path: `rank-0003/manifest.json does not list tpinc.bin`)
    _exit2(mut, 'rank-0003/manifest.json: field files["tpinc.bin"]: missing')


def test_a_rank_manifest_listing_a_file_outside_its_folder_is_refused(mut, tmp_path):
    """FORMATS §1.2 ``files`` lists the artifact files and no other: a name ``../../x``
    (its size and sha256 recorded right, its own checksum too) had a file outside the output
    read and hashed; refused (exit 2) before any file is read."""
    outside = tmp_path / "x"
    outside.write_bytes(b"secret")
    rel = os.path.relpath(outside, mut.path / "rank-0003")
    info = {"bytes": 6, "records": 6, "sha256": hashlib.sha256(b"secret").hexdigest()}
    mut.edit_manifest(3, lambda m: m["files"].__setitem__(rel, info))
    _rehash_rank_manifest(mut, 3)
    # (the name as JSON writes it; until 2026-12-06 Python's, '../../x')
    _exit2(mut, f'rank-0003/manifest.json lists "{rel}", which is not an artifact file')


@pytest.mark.parametrize("what", ["rank", "records"])
def test_a_rank_manifest_that_contradicts_its_folder(mut, what):
    """FORMATS §1.2: ``rank`` is the folder's rank and ``files[f].records`` the records the
    file holds; rank 3's manifest saying rank 4, or one record more of ``sem.bin``, is a
    simulation error (with --ignore-checksums), the field named."""
    if what == "rank":
        mut.edit_manifest(3, lambda m: m.__setitem__("rank", 4))
        want = "rank-0003/manifest.json says rank 4"
    else:
        mut.edit_manifest(3, lambda m: m["files"]["sem.bin"].__setitem__(
            "records", m["files"]["sem.bin"]["records"] + 1))
        want = "records, the rank manifest's count, not"
    assert want in failure_text(mut.simulate())


def test_memory_regions_that_overlap_by_one_byte_are_refused(mut):
    """FORMATS §10 ``memory.regions``: the regions are disjoint (an address maps to one
    region). ``x_in`` made long enough to reach one byte into ``x_out``, the region after it;
    a simulator whose overlap check allowed one byte took the map (and the run, which never
    touches that byte, passed)."""

    def widen(top):
        regs = {r["name"]: r for r in top["memory"]["regions"]}
        a, b = regs["x_in"], regs["x_out"]
        assert a["offset"] + a["size"] <= b["offset"]
        a["size"] = b["offset"] - a["offset"] + 1
    mut.edit_manifest(None, widen)
    assert "overlap" in failure_text(mut.simulate())


# --- writes against the trigger's buffers (SIMULATOR §5; mutation audit round 7)

@pytest.fixture(scope="module")
def base_wide(tmp_path_factory) -> Path:
    """2 ranks, bf16 all-reduce of 1024 elements into an ``x_out`` of 2048 + 64 bytes: the
    output operand is its first 2048 bytes, the last 64 belong to no operand."""
    spec = coll_spec("all_reduce", "bf16", 2, 1024)
    spec["subgraphs"][0]["vars"][1]["size"] = 2048 + 64
    return lower_spec(spec, tmp_path_factory.mktemp("wide") / "o")


def test_a_write_one_byte_past_the_output_operand_is_refused(base_wide, tmp_path):
    """SIMULATOR §5: a leg writes only its trigger's output operand, scratch and gateway
    buffers. The output of base_wide is bytes [0, 2048) of ``x_out`` (1024 bf16); byte 2048
    is in the var but in no buffer of the trigger. A destination BD that ends the output
    of rank 1 (FORMATS §10: at ``(lc << 36) + 0x1_0000_0000 + offset + 2048`` of its target's
    window) is split in two (``Out.split_bd``): all but its last byte, then that byte written one
    byte up, at 2048. A simulator that let a write run one byte past the end of the
    buffers took it (and refused later, when a leg read the byte left unwritten)."""
    o = Out(base_wide, tmp_path / "mut")
    _start, reg = region_addr(o, 1, "x_out")
    end = (1 << 32) + reg["offset"] + 2048  # inside a core's window (the low 36 bits)
    bds = o.arr(1, "dma.bin")
    ln = (bds["len_ctrl"] & 0xFFFF).astype(np.int64)
    win = (bds["buf_ptr"] & np.uint64((1 << 36) - 1)).astype(np.int64)
    i = int(np.flatnonzero((win + ln == end) & ((bds["meta_ctrl"] >> 4) & 1 == 1))[0])
    n = int(ln[i])
    o.split_bd(1, i, [(0, n - 1), (n, 1)])
    text = failure_text(o.simulate())
    assert "writes bytes [0x800, 0x801) of rank" in text, text
    assert "dram \"x_out\", outside trigger 0's output, scratch and gateway buffers" in text, text


# --- the memory map, the topology table and the semaphore windows (mutation audit round 7)

def test_a_semaphore_address_below_the_read_window_is_refused(mut):
    """FORMATS §10: semaphore ``id`` of TOP_SP ``sp`` is at ``0x8280000000 + (sp << 30) + w +
    4 id`` with ``w`` one of READ ``+0x1000`` .. DEC ``+0x1C00`` and ``id`` 0..255, so the
    lowest semaphore address of TOP_SP 5 is ``0x8280000000 + 0x1_4000_0000 + 0x1000 =
    0x83_C000_1000``. Rank 5's (core 5) semaphore readdressed 4 bytes below it, to
    ``0x83_C000_0FFC``, is on the 4-byte grid of the windows but in none of them. A
    simulator without the lower window bound read it as semaphore -1 of the READ window."""
    rank = 5
    i = _local_sem_bd(mut, rank)
    assert (int(mut.arr(rank, "sem.bin")["addr"][i]) - 0x82_8000_0000) >> 30 == 5
    mut.edit(rank, "sem.bin", lambda a: a["addr"].__setitem__(i, np.uint64(0x83_C000_0FFC)))
    assert "is not an EVT_SEM semaphore address" in failure_text(mut.simulate())


def test_two_ranks_of_the_topology_table_on_one_core_are_refused(mut):
    """A rank is one logical core (FORMATS §1.1 ``topology.ranks``: its node, routing id and
    ``logical_core``; §10: the core's window and TOP_SP). The base's 8 ranks are cores 0..7 of
    one device; the manifest saying rank 5 is on core 4 puts ranks 4 and 5 on one core, so
    every address of core 4 would name two ranks: refused. A simulator without the check let
    rank 5 take core 4's place in the address table."""
    def move(top):
        places = {p["rank"]: p for p in top["topology"]["ranks"]}
        assert (places[4]["logical_core"], places[5]["logical_core"]) == (4, 5)
        assert places[4]["routing_id"] == places[5]["routing_id"]
        places[5]["logical_core"] = 4
    mut.edit_manifest(None, move)
    # (named by the row's own place rule, docs/TOPOLOGY.md §1: rank 5 is at logical core
    # 5 % 8; until 2026-12-05 late evening by `ranks 4 and 5 share a core`, which ran first)
    assert "rank 5: logical_core should be 5, 5 % 8 (8 ranks a device), not 4" in failure_text(
        mut.simulate())


@pytest.fixture(scope="module")
def base_sbuf(tmp_path_factory) -> Path:
    """fixtures/sbuf.neff: its four SBUF vars of 2048 bytes a partition at offsets 0, 2048,
    4096 and 6144 (``sb_a`` .. ``sb_d``), ``sbuf_partition_stride`` 8192."""
    return lower_neff(FIX / "sbuf.neff", tmp_path_factory.mktemp("sbuf") / "o")


def test_an_sbuf_region_one_byte_wider_than_the_partition_stride_is_refused(base_sbuf, tmp_path):
    """FORMATS §10: partition ``p`` of an SBUF var is at ``0x8_0000_0000 + p *
    sbuf_partition_stride + region.offset``, so every var's bytes of one partition lie inside
    the stride. ``sb_d`` (offset 6144, 2048 bytes) ends at byte 8192; a stride of 8191 leaves
    its last byte in the next partition: refused. (8192, as written, simulates.) A simulator
    that compared only the region's start with the stride took the map."""
    o = Out(base_sbuf, tmp_path / "mut")

    def shrink(top):
        mem = top["memory"]
        last = max((r for r in mem["regions"] if r["kind"] == "sbuf"), key=lambda r: r["offset"])
        assert (last["name"], last["offset"], last["size"]) == ("sb_d", 6144, 2048)
        assert mem["sbuf_partition_stride"] == 8192
        mem["sbuf_partition_stride"] = 8191
    o.edit_manifest(None, shrink)
    assert "an SBUF region is wider than sbuf_partition_stride" in failure_text(o.simulate())
