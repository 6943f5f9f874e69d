"""proxy_end_operation's terminators: one per op in each FIFO that exists for the op's entry.

Seed 003 §3: ``if next.src_addr_fifo: push(next.src_addr_fifo, terminator)`` and ``if
self.dest_addr_fifo: push(self.dest_addr_fifo, terminator)`` - the test is whether the FIFO
exists, not whether the op put an entry into it; and ``next.src_addr_fifo`` is non-null
exactly when the forward target is across the network (§4 NOTE).  Our reading
(docs/FORMATS.md §8 "Terminator"): a FIFO exists for a SPAD entry on a channel when the
entry's ops carry an entry in it; then every op of that entry has its terminator there, and
an entry without entries in it has none.  The expectations below are worked out from the
schedules and ring orders, not read off the emitter.
"""

from __future__ import annotations

import json
from pathlib import Path

import meshcase
import numpy as np
import pytest

from nrtrewrite.emit import formats as F
from test_mutation import Out, failure_text

NODES8 = [[0, 128, 256, 384, 512, 640, 768, 896]]


def _fifos(out: Path, rank: int) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per channel: (net_ops_info, net_src_addr, net_dest_addr) records of ``rank``."""
    rdir = out / f"rank-{rank:04d}"
    man = json.loads((rdir / "manifest.json").read_text())
    ops = np.fromfile(rdir / "net_ops.bin", F.NET_OPS_INFO_DTYPE)
    src = np.fromfile(rdir / "net_src.bin", F.NET_SRC_ADDR_DTYPE)
    dst = np.fromfile(rdir / "net_dest.bin", F.NET_DEST_ADDR_DTYPE)
    return {it["channel"]: tuple(a[it[k][0]:it[k][0] + it[k][1]]
                                 for a, k in ((ops, "ops"), (src, "src"), (dst, "dest")))
            for it in man["fifo"]}


@pytest.fixture(scope="module")
def xmesh(tmp_path_factory) -> Path:
    """A two-rank MESH all-reduce across the two nodes of trn2:nodes=2 at lnc 2 (ranks 0 and
    64), 32768 bf16 elements."""
    out = tmp_path_factory.mktemp("xmesh") / "out"
    meshcase.lower(meshcase.spec([[0, 64]], [("all_reduce", "bf16", "add", 32768)],
                                 lnc=2), out, algo="mesh", topology="trn2:nodes=2")
    return out


def test_cross_node_mesh_every_op_is_terminated_in_both_fifos(xmesh):
    """Each rank's one channel has two ops: the peer's half for the reduce arrives (event 1,
    op 0), then the peer's reduced half (event 2, op 1).  Both sends (my input half for the
    peer's reduce, my reduced half) happen before the second receive, so op 0 transmits twice
    and op 1 not at all (a transmit-only leg stays in the current op, FORMATS §8 "Ops").  The
    transmit FIFO exists for the entry, so op 1 still gets its terminator there: 2 entries + 2
    terminators (the output before 2026-12-01 had 1)."""
    half = 32768 // 2 * 2  # bytes of half the buffer
    for rank in (0, 64):
        fifos = _fifos(xmesh, rank)
        assert list(fifos) == [0]
        ops, src, dst = fifos[0]
        assert ops.size == 2
        assert ops["tx_entry_cnt"].tolist() == [2, 0]
        assert ops["rx_entry_cnt"].tolist() == [1, 1]
        # (one basic block: each FIFO ends with its EXEC_COMPLETE entry, net_op_idx 1, the
        # block's last op, FORMATS §8 "Basic blocks")
        assert src["mark"].tolist() == [0, 0, 1, 1, 2]
        assert src["net_op_idx"].tolist() == [0, 0, 0, 1, 1]
        assert src["size"].tolist() == [half, half, 0, 0, 0]
        assert src["dst_rank"].tolist() == [rank ^ 64, rank ^ 64, -1, -1, -1]
        assert dst["mark"].tolist() == [0, 1, 0, 1, 2]
        assert dst["net_op_idx"].tolist() == [0, 0, 1, 1, 1]
        assert dst["size"].tolist() == [half, 0, half, 0, 0]
        assert dst["src_rank"].tolist() == [rank ^ 64, -1, rank ^ 64, -1, -1]
    assert meshcase.run(xmesh)["simulator"] == "match"


def test_inter_rdh_every_op_is_terminated_in_both_fifos(tmp_path):
    """INTER_RDH over 8 nodes (one rank each): log2(8) = 3 recursive-halving and 3
    recursive-doubling steps, each receiving one event through the network: 6 ops on channel
    0.  The last op receives the final doubling piece and sends nothing after it
    (tx_entry_cnt 0), yet both FIFOs hold exactly 6 terminators, net_op_idx 0..5, each right
    after its op's entries."""
    out = tmp_path / "out"
    meshcase.lower(meshcase.spec(NODES8, [("all_reduce", "bf16", "add", 6000)]), out,
                   algo="inter_rdh")
    for rank in NODES8[0]:
        ops, src, dst = _fifos(out, rank)[0]
        assert ops.size == 6
        assert int(ops["tx_entry_cnt"][-1]) == 0
        for recs, cnt in ((src, "tx_entry_cnt"), (dst, "rx_entry_cnt")):
            term = np.flatnonzero(recs["mark"] == 1)
            assert recs["net_op_idx"][term].tolist() == list(range(6))
            # op k's terminator follows its entries: at (entries of ops 0..k) + k
            assert term.tolist() == (np.cumsum(ops[cnt]) + np.arange(6)).tolist()
            assert recs.size == int(ops[cnt].sum()) + 6 + 1  # and the EXEC_COMPLETE entry
            assert recs["mark"][-1] == 2 and recs["net_op_idx"][-1] == 5
    assert meshcase.run(out)["simulator"] == "match"


@pytest.fixture(scope="module")
def two_groups(tmp_path_factory) -> Path:
    """Two ring all-reduces on channel 0 across trn2:nodes=2 at lnc 2 (64 ranks a node): trigger
    0 on ranks [0, 64] (sg00), trigger 1 on [0, 1, 64, 65] (sg01), 32768 bf16 elements each."""
    def sg(name, group):
        return {"name": name,
                "vars": [{"name": "i", "type": "input", "size": 65536},
                         {"name": "o", "type": "output", "size": 65536}],
                "replica_groups": [group],
                "engines": {"sp": [{"all_reduce": {"dtype": "bf16", "src": "i", "dst": "o",
                                                   "num_elements": 32768, "op": "add"}}]}}
    out = tmp_path_factory.mktemp("two_groups") / "out"
    meshcase.lower({"header": {"pkg_version": 2, "name": "two_groups", "lnc_size": 2},
                    "subgraphs": [sg("sg00", [0, 64]), sg("sg01", [0, 1, 64, 65])]},
                   out, algo="ring", topology="trn2:nodes=2")
    return out


def test_a_ring_op_whose_successor_is_on_its_node_has_no_transmit_terminator(two_groups):
    """Seed 003 §4 NOTE: ``next.src_addr_fifo`` is non-null exactly when the forward target is
    across the network, and only then does proxy_end_operation push the transmit terminator.
    Trigger 1's ring is 0 -> 1 -> 64 -> 65 -> 0: rank 0 sends to rank 1 on its own node and
    receives from 65 across the network, so its op for trigger 1 (op 1, after trigger 0's op
    0, which both sends to and receives from 64) is closed in the receive FIFO only; rank 1
    sends to 64 and receives from 0, so it has a transmit FIFO alone.  (Until 2026-12-02 a
    FIFO existed for the whole channel, and rank 0's op 1 had a transmit terminator too.)
    The two triggers are in two subgraphs, so two basic blocks: op 1 (block 1) has net_op_idx
    0, and each block's segment of a FIFO ends with an EXEC_COMPLETE entry (FORMATS §8 "Basic
    blocks"); block 1 has no transmit segment on ranks 0 and 64."""
    man = json.loads((two_groups / "manifest.json").read_text())
    assert [[(c["channel"], c["order"]) for c in t["channels"]] for t in man["triggers"]] == [
        [(0, [0, 64])], [(0, [0, 1, 64, 65])]]
    # per rank: (ops' triggers, net_op_idx of the transmit terminators, of the receive ones,
    # the EXEC_COMPLETE entries' net_op_idx in each FIFO: one per block with a segment there)
    want = {0: ([0, 1], [0], [0, 0], [0], [0, 0]), 64: ([0, 1], [0], [0, 0], [0], [0, 0]),
            1: ([1], [0], [], [0], []), 65: ([1], [0], [], [0], [])}
    for rank, (trigs, tx_terms, rx_terms, tx_ends, rx_ends) in want.items():
        ops, src, dst = _fifos(two_groups, rank)[0]
        assert ops["func_rel_op_idx"].tolist() == trigs
        assert ops["basic_block_id"].tolist() == trigs  # (trigger k is in subgraph k)
        assert src["net_op_idx"][src["mark"] == 1].tolist() == tx_terms
        assert dst["net_op_idx"][dst["mark"] == 1].tolist() == rx_terms
        assert src["net_op_idx"][src["mark"] == 2].tolist() == tx_ends
        assert dst["net_op_idx"][dst["mark"] == 2].tolist() == rx_ends
        assert src.size == int(ops["tx_entry_cnt"].sum()) + len(tx_terms) + len(tx_ends)
        assert dst.size == int(ops["rx_entry_cnt"].sum()) + len(rx_terms) + len(rx_ends)
        if rank in (0, 64):  # op 1 receives only
            assert ops["tx_entry_cnt"].tolist()[1] == 0 < ops["rx_entry_cnt"].tolist()[1]
    assert meshcase.run(two_groups)["simulator"] == "match"


def test_simulator_refuses_a_transmit_terminator_for_an_entry_without_transmits(two_groups,
                                                                                tmp_path):
    """Rank 0's transmit FIFO with a segment for block 1 appended, op 1's terminator and the
    EXEC_COMPLETE entry (what the whole-channel reading wrote, in segments) is refused:
    trigger 1's entry sends nothing across the network."""
    m = Out(two_groups, tmp_path / "mut")
    path = m.path / "rank-0000" / "net_src.bin"
    data = path.read_bytes()
    size = F.NET_SRC_ADDR_DTYPE.itemsize
    # block 1's segment (op 1 is trigger 1's, in subgraph sg01): op 1's terminator
    # (net_op_idx 0, its block's first op) and the block's EXEC_COMPLETE entry, both copied
    # from block 0's (net_op_idx 0 too)
    assert data[-size + 36] == 2 and data[-2 * size + 36] == 1
    path.write_bytes(data + data[-2 * size:])
    rdir = m.path / "rank-0000"
    man = json.loads((rdir / "manifest.json").read_text())
    man["fifo"][0]["src"][1] += 2
    (rdir / "manifest.json").write_text(json.dumps(man))
    m.fix_manifest_counts(0)
    text = failure_text(m.simulate())
    # op 1 of the channel is op 0 of block 1, as the FIFO numbers it (closing reading 58v:
    # until 2026-12-07 "op 1" alone, at a field "terminator" no record has)
    assert ("field mark, rank 0, channel 0, artifact net_src.bin" in text
            and "op 0 of block 1 (op 1 of its net_ops.bin slice) has a terminator in the "
            "transmit FIFO, but its entry 1 carries no entry there on this channel") in text, text


def test_simulator_refuses_a_missing_terminator(xmesh, tmp_path):
    """Dropping op 1's transmit terminator (an op without transmit entries) is refused."""
    m = Out(xmesh, tmp_path / "mut")
    a = m.arr(0, "net_src.bin")
    assert a["mark"].tolist() == [0, 0, 1, 1, 2]
    m.put(0, "net_src.bin", np.concatenate([a[:3], a[4:]]))
    rdir = m.path / "rank-0000"
    man = json.loads((rdir / "manifest.json").read_text())
    man["fifo"][0]["src"][1] -= 1
    (rdir / "manifest.json").write_text(json.dumps(man))
    m.fix_manifest_counts(0)
    text = failure_text(m.simulate())
    assert "op 1 of block 0 (op 1 of its net_ops.bin slice) has no terminator in the transmit " \
        "FIFO" in text, text
    assert "field mark, rank 0, channel 0, artifact net_src.bin, record 3:" in text, text


def test_simulator_refuses_terminators_in_a_fifo_without_entries(xmesh, tmp_path):
    """A transmit FIFO holding only terminators (no entry: it does not exist for the entry)
    is refused, even with tx_entry_cnt made consistent."""
    m = Out(xmesh, tmp_path / "mut")
    a = m.arr(0, "net_src.bin")
    m.put(0, "net_src.bin", a[2:])  # the two terminators alone (and the EXEC_COMPLETE entry)
    m.edit(0, "net_ops.bin", lambda o: o["tx_entry_cnt"].__setitem__(0, 0))
    rdir = m.path / "rank-0000"
    man = json.loads((rdir / "manifest.json").read_text())
    man["fifo"][0]["src"][1] = 3
    (rdir / "manifest.json").write_text(json.dumps(man))
    m.fix_manifest_counts(0)
    text = failure_text(m.simulate())
    assert ("op 0 of block 0 (op 0 of its net_ops.bin slice) has a terminator in the "
            "transmit FIFO, but its entry 0 carries no entry there on this channel") in text, text


def test_simulator_refuses_an_extra_terminator(xmesh, tmp_path):
    """A third terminator in rank 0's transmit FIFO (for an op 2 the channel does not have),
    before the block's EXEC_COMPLETE entry."""
    m = Out(xmesh, tmp_path / "mut")
    path = m.path / "rank-0000" / "net_src.bin"
    data = path.read_bytes()
    size = F.NET_SRC_ADDR_DTYPE.itemsize
    term1 = data[-2 * size:-size]
    extra = (2).to_bytes(4, "little") + term1[4:]  # op 1's terminator, net_op_idx 2
    path.write_bytes(data[:-size] + extra + data[-size:])
    rdir = m.path / "rank-0000"
    man = json.loads((rdir / "manifest.json").read_text())
    man["fifo"][0]["src"][1] += 1
    (rdir / "manifest.json").write_text(json.dumps(man))
    m.fix_manifest_counts(0)
    assert "net_op_idx 2" in failure_text(m.simulate())


@pytest.mark.parametrize("rank", [0, 64])
def test_a_lost_terminator_mark_before_another_op_is_named_at_its_record(xmesh, tmp_path, rank):
    """Op 0's transmit terminator, its mark lost (1 -> 0), reads as a 0-byte entry of op 1:
    it is named at its own record, with the likely cause, not at op 1's terminator (which
    would then seem to close two ops; found by an adversarial tester)."""
    o = Out(xmesh, tmp_path / "m")
    a = o.arr(rank, "net_src.bin")
    terms = np.flatnonzero(a["mark"] == 1)
    assert terms.size == 2  # (op 0's entries, then both terminators: the test above)
    i = int(terms[0])
    o.edit(rank, "net_src.bin", lambda x: x["mark"].__setitem__(i, 0))
    text = failure_text(o.simulate())
    assert (f"rank-{rank:04d}: field size, rank {rank}, channel 0, artifact net_src.bin, record "
            f"{i}: entry with size 0 or complete not 0/1 (a terminator without its "
            "NET_OP_COMPLETE mark?)") in text, text


def test_simulator_refuses_a_fifo_slice_of_a_channel_without_network_traffic(xmesh, tmp_path):
    """FORMATS §1.2: the rank manifest's ``fifo`` lists the channels with network traffic,
    each of which has net_ops records (§8: an op per run of network legs).  An item of zero
    counts for channel 1 (what listing every channel the rank ran on would add) is refused."""
    m = Out(xmesh, tmp_path / "mut")
    rdir = m.path / "rank-0000"
    man = json.loads((rdir / "manifest.json").read_text())
    end = {k: sum(it[k][1] for it in man["fifo"]) for k in ("ops", "src", "dest")}
    man["fifo"].append({"channel": 1, **{k: [end[k], 0] for k in end}})
    (rdir / "manifest.json").write_text(json.dumps(man))
    m.fix_manifest_counts(0)
    text = failure_text(m.simulate())
    assert "a fifo slice for a channel without net_ops records" in text, text


def test_simulator_refuses_an_op_split_where_the_receive_semaphore_does_not_change(xmesh,
                                                                                   tmp_path):
    """FORMATS §8 "Ops": an op is a maximal run of the entry's network legs whose receives land
    on one semaphore, a new op starting only where that semaphore changes.  xmesh's two ops
    receive on two events; op 1 made to receive on op 0's semaphore is two ops where the
    format has one, and is refused."""
    m = Out(xmesh, tmp_path / "mut")

    def same(o):
        assert o.size == 2 and o["inc_recv_complete"][0] != o["inc_recv_complete"][1]
        for f in ("inc_recv_handshake", "inc_recv_complete"):
            o[f][1] = o[f][0]

    m.edit(0, "net_ops.bin", same)
    m.fix_manifest_counts(0)
    text = failure_text(m.simulate())
    assert "op 1 receives on the semaphore of op 0 of its entry" in text, text


# xmesh's rank 0 (FORMATS §8): channel 0's fifo item is ops [0, 2], src [0, 5], dest [0, 5];
# net_src.bin records 0, 1 are op 0's two transfers (dst_rank 64, size 32768), 2 and 3 the
# terminators of ops 0 and 1; net_dest.bin records 0 and 2 op 0's and op 1's receives, 1 and
# 3 their terminators; record 4 of each the block's EXEC_COMPLETE entry; net_ops.bin op 0
# sends two entries, op 1 none.
def _fifo_item(**item):
    def edit(m: Out) -> None:
        m.edit_manifest(0, lambda man: man.update(
            fifo=[{"channel": 0, "ops": [0, 2], "src": [0, 5], "dest": [0, 5], **item}]))
    return edit


def _record(name: str, i: int, **values):
    def edit(m: Out) -> None:
        def put(a):
            for k, v in values.items():
                a[k][i] = v
        m.edit(0, name, put)
    return edit


def _op1_sends_without_a_terminator(m: Out) -> None:
    a = m.arr(0, "net_src.bin")
    m.put(0, "net_src.bin", np.concatenate([a[:3], a[4:]]))  # (the EXEC_COMPLETE entry kept)
    m.edit(0, "net_ops.bin", lambda a: a["tx_entry_cnt"].__setitem__(1, 1))
    m.edit_manifest(0, lambda man: man["fifo"][0].update(src=[0, 4]))


def _send_handshake_on_another_semaphore(m: Out) -> None:
    def put(a):  # op 0 signals its sends on the semaphore op 1 receives on
        a["inc_send_handshake"][0] = a["inc_send_complete"][0] = a["inc_recv_handshake"][1]
    m.edit(0, "net_ops.bin", put)


FIFO_FAULTS = [
    # the rank manifest's fifo items (FORMATS §1.2): channel-major, ascending, the files whole
    (lambda m: m.edit_manifest(0, lambda man: man.update(fifo=[
        {"channel": 0, "ops": [0, 1], "src": [0, 2], "dest": [0, 2]},
        {"channel": 0, "ops": [1, 1], "src": [2, 3], "dest": [2, 3]}])),
     "rank 0, channel 0: fifo slices are not in ascending channel order"),
    (_fifo_item(ops=[1, 2]), "rank 0, channel 0: fifo ops slice [1, 2] does not follow the "
     "previous channel's"),
    (_fifo_item(src=[0, -1]), "rank 0, channel 0: fifo src slice [0, -1] does not follow"),
    (_fifo_item(src=[0, 3]), "rank 0, artifact net_src.bin: the fifo slices cover 3 records of "
     "net_src.bin, the file holds 5"),
    # net_ops_info (FORMATS §8)
    (_record("net_ops.bin", 0, func_rel_op_idx=7), "field func_rel_op_idx, rank 0, channel 0, "
     "artifact net_ops.bin, record 0: net op 0: func_rel_op_idx 7 names no entry of this rank "
     "on channel 0"),
    (_record("net_ops.bin", 0, sema_shift_offset=5), "field sema_shift_offset, rank 0, "
     "channel 0, artifact net_ops.bin, record 0: sema_shift_offset should be 192, the entry's, "
     "not 5"),
    (_record("net_ops.bin", 0, early_send_completion=1), "field early_send_completion, rank 0, "
     "channel 0, artifact net_ops.bin, record 0: early_send_completion should be 0, not 1"),
    # (a MESH op's peer is resolved per op: FORMATS §8.1 variable_peer 1)
    (_record("net_ops.bin", 1, variable_peer=0), "field variable_peer, rank 0, channel 0, "
     "artifact net_ops.bin, record 1: variable_peer should be 1, not 0"),
    (_record("net_ops.bin", 0, inc_send_handshake=0x1234, inc_send_complete=0x1234),
     "field inc_send_handshake, rank 0, channel 0, artifact net_ops.bin, record 0: "
     "inc_send_handshake 0x1234 is not an EVT_SEM semaphore address"),
    # (send_sema of channel 0 is semaphore 16 + 4 x 0 + 1 = 17, FORMATS §7)
    (_send_handshake_on_another_semaphore, "field inc_send_handshake, rank 0, channel 0, "
     "artifact net_ops.bin, record 0: inc_send_handshake should be the INC window of this "
     "rank's semaphore 17 (channel 0 send_sema), not semaphore "),
    (_op1_sends_without_a_terminator, "field tx_entry_cnt, rank 0, channel 0, artifact "
     "net_ops.bin, record 1: op 1: tx_entry_cnt should be 0, not 1: the transmit FIFO has no "
     "entries for it"),
    # FIFO entries and terminators (FORMATS §8)
    (_record("net_src.bin", 2, dst_rank=5), "field dst_rank, rank 0, channel 0, artifact "
     "net_src.bin, record 2: terminator dst_rank should be -1, not 5"),
    (_record("net_dest.bin", 1, src_rank=5), "field src_rank, rank 0, channel 0, artifact "
     "net_dest.bin, record 1: terminator src_rank should be -1, not 5"),
    (_record("net_src.bin", 0, host_addr=1), "field host_addr, rank 0, channel 0, artifact "
     "net_src.bin, record 0: host_addr should be 0, not 0x1"),
    (_record("net_dest.bin", 2, nccl_mhandle=1), "field nccl_mhandle, rank 0, channel 0, "
     "artifact net_dest.bin, record 2: nccl_mhandle should be 0, not 0x1"),
    (_record("net_src.bin", 0, dst_rank=0), "field dst_rank, rank 0, channel 0, artifact "
     "net_src.bin, record 0: dst_rank 0 is not a rank on another node"),
    (_record("net_src.bin", 1, dst_rank=7), "field dst_rank, rank 0, channel 0, artifact "
     "net_src.bin, record 1: dst_rank 7 is not a rank on another node"),
    # op 0's count of transmit entries (FORMATS §8.1 tx_entry_cnt): net_src.bin holds 2 before
    # op 0's terminator (records 0 and 1), named at the count's own record, net_ops.bin 0
    (_record("net_ops.bin", 0, tx_entry_cnt=3), "field tx_entry_cnt, rank 0, channel 0, "
     "artifact net_ops.bin, record 0: tx_entry_cnt of op 0 should be 2, the entries before its "
     "terminator in net_src.bin, not 3"),
    # a dev_addr with CAYMAN_ID set (bits 48+: FORMATS §10): a network peer is never routed to
    (_record("net_src.bin", 0, dev_addr=(1 << 48) | 0x1_0000_0000), "field dev_addr, rank 0, "
     "artifact net_src.bin, record 0: dev_addr 0x1000100000000 is not a local SoC address"),
]


@pytest.mark.parametrize("spoil, says", FIFO_FAULTS)
def test_simulator_refuses_a_fifo_record_or_slice_the_format_does_not_allow(xmesh, tmp_path,
                                                                            spoil, says):
    """Each fault of rank 0's FIFOs or their manifest items is a protocol error naming the
    rank folder, the rank, the channel, the file, the record and the field where it has
    one (its manifest counts made to agree, so it is the values that are refused)."""
    m = Out(xmesh, tmp_path / "mut")
    net = {n: m.arr(0, n) for n in ("net_ops.bin", "net_src.bin", "net_dest.bin")}
    assert net["net_src.bin"]["mark"].tolist() == [0, 0, 1, 1, 2]
    assert net["net_src.bin"]["dst_rank"].tolist() == [64, 64, -1, -1, -1]
    assert net["net_dest.bin"]["mark"].tolist() == [0, 1, 0, 1, 2]
    assert net["net_ops.bin"]["tx_entry_cnt"].tolist() == [2, 0]
    spoil(m)
    m.fix_manifest_counts(0)
    text = failure_text(m.simulate())
    assert f"{m.path / 'rank-0000'}: {says}" in text, text


def _flip(name: str, record: int, *offsets: int):
    """Set byte ``offset`` of record ``record`` of rank 0's ``name`` to 1 (it was 0)."""
    def edit(m: Out) -> None:
        path = m.path / "rank-0000" / name
        b = bytearray(path.read_bytes())
        size = F.ARTIFACTS[name][0].itemsize
        for off in offsets:
            assert b[record * size + off] == 0
            b[record * size + off] = 1
        path.write_bytes(bytes(b))
    return edit


@pytest.mark.parametrize("name, offsets, says", [
    # net_src_addr (FORMATS §8.2): host_addr u64 at 16, nccl_mhandle u64 at 24,
    # proxy_histogram_tag u64 at 40, reserved_52 u8[4] at 52, dst_mhandle u64 at 64
    ("net_src.bin", [17], "field host_addr, rank 0, channel 0, artifact net_src.bin, record 0: "
     "host_addr should be 0, not 0x100"),
    ("net_src.bin", [31], "field nccl_mhandle, rank 0, channel 0, artifact net_src.bin, "
     "record 0: nccl_mhandle should be 0, not 0x100000000000000"),
    ("net_src.bin", [40], "field proxy_histogram_tag, rank 0, channel 0, artifact net_src.bin, "
     "record 0: proxy_histogram_tag should be 0, not 0x1"),
    ("net_src.bin", [53], "field reserved_52, rank 0, channel 0, artifact net_src.bin, "
     "record 0: reserved_52 should be 00 00 00 00, not 00 01 00 00"),
    ("net_src.bin", [66], "field dst_mhandle, rank 0, channel 0, artifact net_src.bin, "
     "record 0: dst_mhandle should be 0, not 0x10000"),
    # several: the first by offset is named
    ("net_src.bin", [71, 44, 24], "field nccl_mhandle, rank 0, channel 0, artifact "
     "net_src.bin, record 0: nccl_mhandle should be 0, not 0x1"),
    # net_dest_addr: host_addr at 16, nccl_mhandle at 24, reserved_44 u8[4] at 44
    ("net_dest.bin", [16], "field host_addr, rank 0, channel 0, artifact net_dest.bin, "
     "record 0: host_addr should be 0, not 0x1"),
    ("net_dest.bin", [28], "field nccl_mhandle, rank 0, channel 0, artifact net_dest.bin, "
     "record 0: nccl_mhandle should be 0, not 0x100000000"),
    ("net_dest.bin", [47], "field reserved_44, rank 0, channel 0, artifact net_dest.bin, "
     "record 0: reserved_44 should be 00 00 00 00, not 00 00 00 01"),
])
def test_a_fifo_entry_field_fixed_at_zero_is_named_when_a_byte_of_it_is_not(xmesh, tmp_path,
                                                                           name, offsets, says):
    """FORMATS §8.2: the fields a FIFO entry holds at 0 (the runtime's pointers and handles,
    the histogram tag, the reserved bytes). One byte of rank 0's first transmit or receive
    entry set to 1 is refused naming that field and its value (little-endian: byte k of a
    u64 is 1 << 8k), the first by offset when several are set (the refusal was
    "host_addr / nccl_mhandle / histogram / reserved bytes are not zero", no field)."""
    m = Out(xmesh, tmp_path / "mut")
    assert m.arr(0, name)["mark"][0] == 0  # an entry, not a terminator
    _flip(name, 0, *offsets)(m)
    m.fix_manifest_counts(0)
    text = failure_text(m.simulate())
    assert f"{m.path / 'rank-0000'}: {says}" in text, text


@pytest.mark.parametrize("record,value", [(0, 1), (0, -1), (2, 2), (2, 0)])
def test_a_single_entry_ops_net_op_idx_changed_is_named_at_the_entry(
        xmesh, tmp_path, record, value):
    """Rank 0's receive FIFO: op 0's one entry and terminator, then op 1's (FORMATS §8.2, the
    test above). One entry's net_op_idx changed: the entry and its terminator disagree, and
    the ops' order decides (§8.2: ops in net_op_idx order, each once, 2 on the channel): the
    terminator's value fits between the op before and the next terminator, the entry's does
    not, so the entry is named (review 57o: the untouched terminator was, with the entry's
    value as the right one)."""
    o = Out(xmesh, tmp_path / "m")
    a = o.arr(0, "net_dest.bin")
    assert a["mark"].tolist() == [0, 1, 0, 1, 2]
    assert a["net_op_idx"].tolist() == [0, 0, 1, 1, 1]
    o.edit(0, "net_dest.bin",
           lambda x: x["net_op_idx"].__setitem__(record, np.uint32(value % 2 ** 32)))
    text = failure_text(o.simulate())
    op = record // 2
    assert (f"rank-0000: field net_op_idx, rank 0, channel 0, artifact net_dest.bin, record "
            f"{record}: net_op_idx {value % 2 ** 32} inside op {op}: its terminator (record "
            f"{record + 1}) carries {op}") in text, text
