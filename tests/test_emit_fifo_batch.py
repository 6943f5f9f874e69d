"""The net-proxy FIFOs of a batch (emit_entries builds the records of all its ops at once) are
those of its entries emitted one at a time: net_ops / net_src / net_dest bytes, the FIFO
index, the per-channel record lists and the entries' tx / rx summaries; with several ops per
channel and entry (mesh and RDH events across nodes) and on several channels (HIER)."""

from __future__ import annotations

from pathlib import Path

import meshcase
import numpy as np
import pytest

from nrtrewrite.emit import formats as F
from nrtrewrite.emit.legs import RankBuilder, _terminator, emit_entries
from nrtrewrite.lower import LowerOptions, emit_items, plan_lowering, rank_entries
from nrtrewrite.neff.assembler import assemble_spec
from nrtrewrite.neff.reader import read_model, read_model_bytes

FIX = Path(__file__).resolve().parent.parent / "fixtures"
NODES8 = [[0, 128, 256, 384, 512, 640, 768, 896]]
FIFO_FILES = ("net_ops.bin", "net_src.bin", "net_dest.bin")


def _spec_plan(groups, trigs, algo=None):
    model = read_model_bytes(assemble_spec(meshcase.spec(groups, trigs)), path="fifo.neff")
    return plan_lowering(model, LowerOptions(algo=algo))


def _items(plan, rank: int):
    return emit_items(plan, rank_entries(plan, rank), rank)


def _emit(items, sizes):
    b = RankBuilder(0)
    summaries, k = [], 0
    for size in sizes:
        summaries += emit_entries(b, items[k:k + size])
        k += size
    lists = {c: tuple(tuple(a.tobytes() for a in recs)
                      for recs in (st.ops, st.fifo("src"), st.fifo("dest")))
             for c, st in b.channels.items()}
    parts = b.finish()
    b.close()
    files = {name: b"".join(p.tobytes() for p in parts[name]) for name in FIFO_FILES}
    return files, summaries, lists, b.fifo_index()


CASES = {
    # a mesh entry across nodes: one op per event that arrives through the network
    "mesh": lambda: _spec_plan(NODES8, [("all_reduce", "bf16", "add", 5000),
                                        ("all_gather", "fp16", None, 1000),
                                        ("reduce_scatter", "bf16", "add", 8 * 700)]),
    "inter_rdh": lambda: _spec_plan(NODES8, [("all_reduce", "bf16", "add", 50000),
                                             ("all_gather", "fp16", None, 10000),
                                             ("reduce_scatter", "bf16", "add", 8 * 7000)],
                                    algo="inter_rdh"),
    "hier": lambda: plan_lowering(read_model(FIX / "two_node128.neff"), LowerOptions()),
}


@pytest.mark.parametrize("case,rank", [("mesh", 128), ("inter_rdh", 896), ("inter_rdh", 0),
                                       ("hier", 0), ("hier", 97)])
def test_batch_fifos_are_the_entries_fifos(case, rank):
    items = _items(CASES[case](), rank)
    one = _emit(items, [1] * len(items))
    files, summaries, lists, index = one
    assert files["net_ops.bin"] and files["net_src.bin"] and files["net_dest.bin"]
    ops = np.frombuffer(files["net_ops.bin"], F.NET_OPS_INFO_DTYPE)
    if case != "hier":  # several ops of one entry on one channel
        assert ops.size > sum(len(s["rx"]) for s in summaries)
    else:  # several channels with network legs
        assert len(index) > 1
    for sizes in ([len(items)], _cut([2, 1, 3], len(items))):
        assert _emit(items, sizes) == one
    # every record zeroed except its fields: the reserved bytes after the rank fields are 0
    src = np.frombuffer(files["net_src.bin"], np.uint8).reshape(-1, F.NET_SRC_ADDR_DTYPE.itemsize)
    dst = np.frombuffer(files["net_dest.bin"], np.uint8).reshape(-1,
                                                                  F.NET_DEST_ADDR_DTYPE.itemsize)
    assert not src[:, 52:56].any() and not dst[:, 44:48].any()
    assert not ops.view(np.uint8).reshape(-1, 96)[:, 4:8].any()
    # the counts of the ops match their entries; every terminator is _terminator's record
    for name, dtype, cnt, rank_field in (("net_src.bin", F.NET_SRC_ADDR_DTYPE, "tx_entry_cnt",
                                          "dst_rank"),
                                         ("net_dest.bin", F.NET_DEST_ADDR_DTYPE, "rx_entry_cnt",
                                          "src_rank")):
        recs = np.frombuffer(files[name], dtype)
        term = recs["mark"] == 1
        ends = recs["mark"] == 2
        assert int(ops[cnt].sum()) == int((recs["mark"] == 0).sum())
        for i in np.flatnonzero(term).tolist():
            assert recs[i:i + 1].tobytes() == _terminator(
                dtype, int(recs["net_op_idx"][i]), rank_field).tobytes()
        # a FIFO with entries on a channel closes every op of the channel (seed 003 §3); one
        # basic block (every case is one subgraph): the slice ends with one EXEC_COMPLETE
        # entry, net_op_idx the last op's, size 0, rank field -1, all else 0 (FORMATS §8
        # "Basic blocks")
        side = "src" if name == "net_src.bin" else "dest"
        for item in index:
            (o0, on), (s0, sn) = item["ops"], item[side]
            t = term[s0:s0 + sn]
            want = list(range(on)) if (recs["mark"][s0:s0 + sn] == 0).any() else []
            assert recs["net_op_idx"][s0:s0 + sn][t].tolist() == want
            assert np.flatnonzero(ends[s0:s0 + sn]).tolist() == ([sn - 1] if want else [])
            if want:
                end = np.zeros(1, dtype)
                end["net_op_idx"], end["mark"], end[rank_field] = on - 1, 2, -1
                assert recs[s0 + sn - 1:s0 + sn].tobytes() == end.tobytes()


def _cut(pattern, total):
    """Batch sizes cycling through ``pattern`` that add up to ``total``."""
    sizes, k = [], 0
    while total:
        sizes.append(min(pattern[k % len(pattern)], total))
        total -= sizes[-1]
        k += 1
    return sizes


def test_runs_and_addresses_over_many_views_are_each_views():
    """_runs / _addresses (the FIFO entries' runs and gateway addresses, linear views from the
    view tables, SBUF access patterns view by view) give each view's own runs and addresses,
    ordered by range."""
    from nrtrewrite.emit.buffers import BufferView, ViewList
    from nrtrewrite.emit.legs import _addresses, _runs
    from nrtrewrite.neff.model import AccessPattern

    ap = AccessPattern(start=64, partition_start=2, partition_count=4,
                       dims=((1, 10), (12, 3), (40, 2)))
    strided = AccessPattern(start=0, partition_start=0, partition_count=2,
                            dims=((2, 5), (10, 4), (40, 1)))
    views = [BufferView(2, 100, 4096), BufferView(2, 0, 1 << 20, ap=ap, partition_stride=1 << 16),
             BufferView(4, 7, 8192), BufferView(2, 0, 0, ap=strided, partition_stride=1 << 12)]
    vt = ViewList.of(views).tables()
    rng = np.random.default_rng(3)
    view = rng.integers(0, len(views), 40)
    a = rng.integers(0, 50, 40)
    b = a + rng.integers(0, 30, 40)
    a[view == 0] += 100
    b[view == 0] += 100
    owner, addr, nbytes = _runs(views, vt, view, a, b)
    want = []
    for i, v in enumerate(view.tolist()):
        o, ad, nb = views[v].runs(a[i:i + 1], b[i:i + 1])
        want += [(i, x, y) for x, y in zip(ad.tolist(), nb.tolist())]
    assert list(zip(owner.tolist(), addr.tolist(), nbytes.tolist())) == want
    got = _addresses(views, vt, view, b)
    assert got.tolist() == [int(views[v].address(np.array([e]))[0])
                            for v, e in zip(view.tolist(), b.tolist())]
