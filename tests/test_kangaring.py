"""KANGARING: the __direct_fetch_send contract (flags, assertions as LoweringError), the
ring-versus-kangaring reduction_type fork, the peer semaphores, the selection rules, and the
composed programs executed symbolically (tests/irsim.py) for all-reduce, all-gather and
reduce-scatter at VNC 2 and VNC 1."""

from collections import Counter

import numpy as np
import pytest

from irsim import SymbolicError, ag, ar, plan_ops, rs, run_all, run_trigger
from nrtrewrite.codes import EncAlgType, EncdNeigh, EncOpType, ReductionType
from nrtrewrite.compose.kangaring import (
    KANGARING_SEM_BASE, KANGARING_SEM_LIMIT, PEER_POST, PEER_WAIT, AddrNeigh, FetchFlags,
    FetchPeer, direct_fetch_send, kangaring_sem,
)
from nrtrewrite.compose.leaves import Leaf
from nrtrewrite.errors import LimitError, LoweringError, SelectionError
from nrtrewrite.lower import lower_rank, rank_entries
from nrtrewrite.select import Request, enc_can_post_kangaring_operation
from nrtrewrite.topology.model import load_topology

L = EncdNeigh
RMTV, RMTV2, LOCAL = (FetchPeer(1, L.ENCD_NEIGH_PEER_RMTV), FetchPeer(2, L.ENCD_NEIGH_PEER_RMTV2),
                      FetchPeer(3, L.ENCD_NEIGH_PEER_LOCAL))


def _buf(view, peer, neigh=L.ENCD_NEIGH_LOCAL):
    return AddrNeigh(view, peer, neigh)


SELF, NEXT = _buf(0, 0), _buf(2, 4, L.ENCD_NEIGH_NEXT)
PEER_BUFS = [_buf(0, 1, L.ENCD_NEIGH_PEER_RMTV), _buf(0, 2, L.ENCD_NEIGH_PEER_RMTV2),
             _buf(0, 3, L.ENCD_NEIGH_PEER_LOCAL)]


# -- __direct_fetch_send ------------------------------------------------------------------------

def test_reduce_fan_in_is_the_addr_neigh_tuple_vector():
    f = direct_fetch_send(FetchFlags(send_to_peers=True), src=SELF, dst=NEXT,
                          peers=[RMTV, RMTV2, LOCAL], peer_bufs=PEER_BUFS, reduce=True,
                          is_next_net=False)
    assert f.reduce and f.dests == (NEXT,)
    assert [a.neigh for a in f.sources] == [L.ENCD_NEIGH_LOCAL, L.ENCD_NEIGH_PEER_RMTV,
                                            L.ENCD_NEIGH_PEER_RMTV2, L.ENCD_NEIGH_PEER_LOCAL]
    rev = direct_fetch_send(FetchFlags(send_to_peers=True, reverse_self_and_peer=True), src=SELF,
                            dst=NEXT, peers=[RMTV], peer_bufs=PEER_BUFS[:1], reduce=True,
                            is_next_net=False)
    assert [a.peer for a in rev.sources] == [1, 0]


def test_copy_fan_out_and_plain_flags():
    f = direct_fetch_send(FetchFlags(send_to_peers=True), src=SELF, dst=NEXT, peers=[RMTV],
                          peer_bufs=PEER_BUFS[:1], reduce=False, is_next_net=False)
    assert not f.reduce and f.sources == (SELF,) and f.dests == (NEXT, PEER_BUFS[0])
    plain = direct_fetch_send(FetchFlags(), src=SELF, dst=NEXT, peers=[RMTV],
                              peer_bufs=PEER_BUFS[:1], reduce=False, is_next_net=False)
    assert plain.dests == (NEXT,)
    sync = direct_fetch_send(FetchFlags(skip_data_transfer=True), src=SELF, dst=NEXT,
                             peers=[], peer_bufs=[], reduce=False, is_next_net=False)
    assert sync.sources == sync.dests == ()
    cb = _buf(2, 0)
    chan = direct_fetch_send(FetchFlags(use_channel_buffer=True), src=SELF, dst=NEXT, peers=[],
                             peer_bufs=[], reduce=False, is_next_net=False, channel_buffer=cb)
    assert chan.sources == (cb,)
    gw = _buf(3, 0, L.ENCD_NEIGH_GATEWAY)
    net = direct_fetch_send(FetchFlags(read_from_gw=True, write_to_gw=True), src=SELF, dst=NEXT,
                            peers=[], peer_bufs=[], reduce=False, is_next_net=True, gw=gw)
    assert net.sources == (gw,)


def test_peer_fan_out_and_network_next_hop_are_exclusive():
    with pytest.raises(LoweringError, match="0x3FB"):
        direct_fetch_send(FetchFlags(send_to_peers=True, write_to_gw=True), src=SELF, dst=NEXT,
                          peers=[RMTV], peer_bufs=PEER_BUFS[:1], reduce=True, is_next_net=True)


@pytest.mark.parametrize("peers, match", [
    ([FetchPeer(1, L.ENCD_NEIGH_PEER_RMTV, output_shared_virtual_scratchpad=True)], "0x404"),
    ([RMTV, FetchPeer(2, L.ENCD_NEIGH_PEER_RMTV)], "0x421"),
    ([RMTV, RMTV2, FetchPeer(3, L.ENCD_NEIGH_NEXT)], "0x429"),
])
def test_fetch_send_assertions_are_lowering_errors(peers, match):
    with pytest.raises(LoweringError, match=match):
        direct_fetch_send(FetchFlags(send_to_peers=True), src=SELF, dst=NEXT, peers=peers,
                          peer_bufs=PEER_BUFS[:len(peers)], reduce=True, is_next_net=False)


def test_gateway_flag_must_match_the_next_hop():
    with pytest.raises(LoweringError, match="write_to_gw"):
        direct_fetch_send(FetchFlags(), src=SELF, dst=NEXT, peers=[], peer_bufs=[],
                          reduce=False, is_next_net=True)


def test_peer_semaphores_stay_in_their_block():
    assert kangaring_sem(0) == KANGARING_SEM_BASE == 144
    assert kangaring_sem(31) < KANGARING_SEM_LIMIT == 176  # 144 + 32 channels
    with pytest.raises(LimitError):
        kangaring_sem(KANGARING_SEM_LIMIT - KANGARING_SEM_BASE)


# -- selection ----------------------------------------------------------------------------------

def test_kangaring_reduces_add_only_and_says_why():
    topo = load_topology(None, world=tuple(range(64)), lnc_size=2)
    group = tuple(range(64))
    for alu, legal in (("ADD", True), ("MAX", False), ("MIN", False)):
        from nrtrewrite.codes import AluOp
        req = Request.for_op(EncOpType.ALLREDUCE, _bf16(), group, 64 << 20, alu=AluOp[alu])
        ok, why = enc_can_post_kangaring_operation(req, topo, check_window=False)
        assert ok is legal, why
        if not legal:
            assert "SDMA_CCETYPE_ADD" in why
    # an all-gather has no reduce op: always fine
    req = Request.for_op(EncOpType.ALLGATHER, _bf16(), group, 64 << 20)
    assert enc_can_post_kangaring_operation(req, topo)[0]


def _bf16():
    from nrtrewrite.codes import DType
    return DType.BF16


def test_big_intra_node_all_reduce_defaults_to_kangaring_and_max_does_not():
    p = plan_ops([ar(32 << 20), ar(32 << 20, op="max")], 64, nbytes=64 << 20)
    assert [t.alg for t in p.triggers][0] == EncAlgType.KANGARING
    assert p.triggers[1].alg != EncAlgType.KANGARING


def test_forcing_kangaring_on_max_is_refused_with_the_reason():
    with pytest.raises(SelectionError, match="enc_can_post_kangaring_operation: MAX ALLREDUCE"):
        plan_ops([ar(4096, op="max")], 16, algo="allreduce:kangaring")


# -- composed programs --------------------------------------------------------------------------

CASES = [(16, 2), (32, 2), (16, 1), (32, 1)]


@pytest.mark.parametrize("ranks, lnc", CASES)
def test_kangaring_collectives_are_correct(ranks, lnc):
    plan = plan_ops([ar(4000 + 3 * ranks), ag(300), rs(ranks * 130)], ranks, lnc=lnc,
                    algo="kangaring")
    assert [t.alg for t in plan.triggers] == [EncAlgType.KANGARING] * 3
    for seed in ((0, 1) if ranks == 16 else (0,)):
        run_all(plan, seed=seed)


def small_chunks(monkeypatch, chunk_bytes=2048):
    """Chunks of ``chunk_bytes`` so that small messages need several chunk groups."""
    import functools
    import nrtrewrite.compose.segments as S
    from nrtrewrite.compose.chunking import set_dynamic_chunk_size
    monkeypatch.setattr(S, "set_dynamic_chunk_size",
                        functools.partial(set_dynamic_chunk_size, chunk_bytes=chunk_bytes))


def test_tiny_and_multi_group_messages(monkeypatch):
    # 5 elements: most chunk positions are empty everywhere; 30000: several chunk groups
    small_chunks(monkeypatch, chunk_bytes=512)
    plan = plan_ops([ar(5), ar(12_000), ag(1), rs(16 * 600)], 16, algo="kangaring")
    assert max(t.prepared.data.layout.groups for t in plan.triggers) > 1
    run_all(plan)


def test_units_primaries_and_secondaries():
    plan = plan_ops([ar(8192)], 16, algo="kangaring")
    kp = plan.triggers[0].prepared.data
    for ch in kp.channel_ids:
        kc = kp.channels[ch]
        for unit in kc.units:
            p, *secs = unit
            ent = rank_entries(plan, p)[0][1]
            assert ent.alg == EncAlgType.KANGARING
            for s in secs:
                sent = rank_entries(plan, s)[0][1]
                rows = sent.ir[sent.ir["channel"] == ch]
                # a secondary only posts to its primary and waits for its primary's legs
                assert rows["leaf"].tolist() == [PEER_POST, PEER_WAIT]
                assert rows["n_src"].sum() == rows["n_dst"].sum() == 0
                assert sent.peers[rows["inc_peer"][0, 0]] == p
                assert rows["inc_sem"][0, 0] == rows["wait_sem"][1, 0] == kangaring_sem(ch)
            prow = ent.ir[ent.ir["channel"] == ch]
            assert prow["leaf"][0] == PEER_WAIT and prow["wait_val"][0, 0] == len(secs)
            # every data leg but the plain forward to the next primary (the AR's
            # direct_copy_send) reads or writes its secondaries
            data = prow[(prow["n_dst"] > 0) & (prow["leaf"] != int(Leaf.direct_copy_send))]
            assert data.size
            for row in data:
                touched = {ent.peers[row["src_peer"][i]] for i in range(row["n_src"])} | \
                    {ent.peers[row["dst_peer"][j]] for j in range(row["n_dst"])}
                assert set(secs) <= touched


def test_reduction_type_fork_in_the_emitted_bytes():
    """Seed 000 §5.4: KANGARING_NR1W (2) in every kangaring reduce, RING_2R1W (0) in the ring."""
    ring = plan_ops([ar(8192)], 16, algo="ring")
    kang = plan_ops([ar(8192)], 16, algo="kangaring")
    p0 = kang.triggers[0].prepared.data.channels[kang.triggers[0].prepared.data.channel_ids[0]]
    primary = p0.units[0][0]
    for plan, want in ((ring, int(ReductionType.RING_2R1W)),
                       (kang, int(ReductionType.KANGARING_NR1W))):
        out = lower_rank(plan, primary)
        legs = np.concatenate(out.files["legs.bin"])
        cce = np.concatenate(out.files["cce.bin"])
        red = legs[legs["sdma_op"] == 4]
        assert red.size and set(red["reduction_type"].tolist()) == {want}
        assert set(((cce["w3"] >> 8) & 3).tolist()) == {want}
        if plan is kang:
            # direct_reduce_send_kangaring: self + one peer (VNC 2), CCE ADD
            first = legs[legs["leaf"] == int(Leaf.direct_reduce_send_kangaring)]
            assert first.size and set(first["sdma_op"].tolist()) == {4}
            assert set((cce["w1"] & 7).tolist()) == {0}
            assert Counter((cce["w3"] & 0x3F).tolist()).keys() <= {2, 3}


def test_symbolic_executor_catches_a_missing_peer_wait(monkeypatch):
    """Mutation: a secondary that does not wait for its primary finishes with its output
    unwritten; a primary that does not wait for the posts reads an input not yet there."""
    import nrtrewrite.compose.kangaring as K

    plan = plan_ops([ar(4096)], 16, algo="kangaring")
    orig = K._sync_leg

    def no_wait(ch, leaf, *, wait=None, inc=None, **kw):
        return orig(ch, leaf, wait=None, inc=inc, **kw)
    monkeypatch.setattr(K, "_sync_leg", no_wait)
    with pytest.raises(SymbolicError):
        for seed in range(4):
            run_trigger(plan, 0, seed=seed)


# -- an eleventh mutation round (docs/RELIABILITY.md §6) -----------------------------------------

def test_direct_fetch_send_contract_at_its_edges():
    # 0x3FB holds for a copy fan-out as well as a reduce fan-in (seed 003 §4: the assert is
    # on send_to_peers and is_next_net, whatever is moved)
    with pytest.raises(LoweringError, match="0x3FB"):
        direct_fetch_send(FetchFlags(send_to_peers=True, write_to_gw=True), src=SELF, dst=NEXT,
                          peers=[RMTV], peer_bufs=PEER_BUFS[:1], reduce=False, is_next_net=True)
    # one buffer per peer: fewer buffers than peers are refused as well as more
    with pytest.raises(LoweringError, match="one buffer per peer"):
        direct_fetch_send(FetchFlags(send_to_peers=True), src=SELF, dst=NEXT,
                          peers=[RMTV, RMTV2], peer_bufs=PEER_BUFS[:1], reduce=True,
                          is_next_net=False)
    # without send_to_peers the peers take no part: the own source only, even for a reduce
    # (seed 003 §4: the tuple vector is built only under send_to_peers), and it is a copy
    # ("else if !skip_data_transfer: encd_dma_copy(dst, src, size)")
    f = direct_fetch_send(FetchFlags(), src=SELF, dst=NEXT, peers=[RMTV],
                          peer_bufs=PEER_BUFS[:1], reduce=True, is_next_net=False)
    assert f.sources == (SELF,) and f.dests == (NEXT,) and not f.reduce
    # a sync-only step moves no data, so it stages nothing in the gateway: no write_to_gw
    # needed toward a network next hop
    sync = direct_fetch_send(FetchFlags(skip_data_transfer=True), src=SELF, dst=NEXT, peers=[],
                             peer_bufs=[], reduce=False, is_next_net=True)
    assert sync.sources == sync.dests == () and not sync.reduce


def test_unit_peers_are_in_addr_neigh_tuple_order():
    """docs/DESIGN.md "Kangaring": the tuple vector is {self LOCAL, PEER_RMTV, PEER_RMTV2,
    PEER_LOCAL}; at VNC 1 a primary has all three, each with its own encd_neigh."""
    from nrtrewrite.compose.kangaring import _unit_peers
    kp = plan_ops([ar(8192)], 16, lnc=1, algo="kangaring").triggers[0].prepared.data
    for ch in kp.channel_ids:
        kc = kp.channels[ch]
        for p, *_secs in kc.units:
            v = kc.of(p)
            assert [(q.rank, q.neigh) for q in _unit_peers(kc, p)] == [
                (v.peer_rmtv, L.ENCD_NEIGH_PEER_RMTV), (v.peer_rmtv2, L.ENCD_NEIGH_PEER_RMTV2),
                (v.peer_local, L.ENCD_NEIGH_PEER_LOCAL)]


def test_a_kangaring_plan_keeps_the_selected_channel_count():
    """plan_kangaring asks the paths of the selected channels (at least one), no more: a
    message big enough for several channels selected with one runs on one."""
    from nrtrewrite.compose.kangaring import trigger_kangaring_plan
    plan = plan_ops([ar(1 << 18)], 16, algo="kangaring")
    tp = plan.triggers[0]
    assert len(tp.prepared.data.channel_ids) > 1
    for n in (0, 1):
        kp = trigger_kangaring_plan(plan.topology, tp.trigger, n)
        assert kp.channel_ids == [0] and list(kp.channels) == [0]


@pytest.mark.parametrize("lnc", [2, 1])
def test_host_cc_kangaring_all_reduce_is_correct(lnc):
    """With host CC the all-reduce's last reduce step is recv_reduce_copy_send (docs/DESIGN.md
    "Kangaring": the CCE writes OUT of self and every secondary and OUT@next), in place of
    the device path's recv_reduce_copy and direct_copy_send (FORMATS §8.3), neither of which
    is left."""
    plan = plan_ops([ar(4000)], 16, lnc=lnc, algo="kangaring", host_cc=True)
    legs = np.concatenate([spec.ir for r in plan.triggers[0].group
                           for _t, spec in rank_entries(plan, r)])
    rrcs = legs[legs["leaf"] == int(Leaf.recv_reduce_copy_send)]
    assert rrcs.size
    assert not np.isin(legs["leaf"], [int(Leaf.recv_reduce_copy),
                                      int(Leaf.direct_copy_send)]).any()
    assert (rrcs["reduction_type"] == int(ReductionType.KANGARING_NR1W)).all()
    run_all(plan)


def test_exactly_two_chunk_groups(monkeypatch):
    """Two chunk groups (the smallest count that repeats the template): every collective
    still correct; a group's legs are its own template rows, numbered by group."""
    small_chunks(monkeypatch, chunk_bytes=512)
    plan = plan_ops([ar(6000), ag(375), rs(16 * 375)], 16, algo="kangaring")
    assert [t.prepared.data.layout.groups for t in plan.triggers] == [2, 2, 2]
    run_all(plan)
    for tp in plan.triggers:
        kc = tp.prepared.data.channels[tp.prepared.data.channel_ids[0]]
        spec = next(s for t, s in rank_entries(plan, kc.primaries[0]) if t is tp)
        data = spec.ir[spec.ir["leaf"] != PEER_WAIT]
        g0, g1 = data[data["group"] == 0], data[data["group"] == 1]
        assert g0.size == g1.size == data.size // 2
        for name in ("leaf", "step", "phase", "k"):
            assert g0[name].tolist() == g1[name].tolist()


@pytest.mark.parametrize("lnc", [2, 1])
def test_a_primary_runs_the_ring_steps_over_its_units(lnc):
    """docs/DESIGN.md "Kangaring": the primary runs the ring all-reduce over the cycle of u
    units: steps 0 .. 2u - 2 (u - 1 reduce steps after the send, then u - 1 to pass the
    result on), the first u in phase 0 (reduce-scatter), the rest in phase 1 (all-gather);
    every (step, leaf, member) is two half-chunk legs, H1 starting where H0 stops."""
    plan = plan_ops([ar(8 << 10)], 16, lnc=lnc, algo="kangaring")
    tp = plan.triggers[0]
    kp = tp.prepared.data
    for ch in kp.channel_ids:
        kc = kp.channels[ch]
        u, p = len(kc.units), kc.primaries[0]
        assert u == 16 // (4 // lnc)
        spec = next(s for t, s in rank_entries(plan, p) if t is tp)
        legs = spec.ir[(spec.ir["channel"] == ch) & (spec.ir["leaf"] != PEER_WAIT)]
        assert set(legs["group"].tolist()) == {0}
        steps = legs["step"].tolist()
        assert sorted(set(steps)) == list(range(2 * u - 1))
        assert legs["phase"].tolist() == [int(s >= u) for s in steps]
        halves = {}
        for row in legs:
            key = (int(row["step"]), int(row["leaf"]), int(row["k"]))
            halves.setdefault(key, {})[int(row["half"])] = (int(row["start"]), int(row["stop"]))
        for key, h in halves.items():
            assert set(h) == {0, 1}, key
            assert h[0][1] == h[1][0], key


def test_a_unit_step_has_its_legs_in_the_units_member_order():
    """docs/TOPOLOGY.md "Units": a unit is its primary then its secondaries, the order of
    ``logical_path``; each unit step expands to one leg per member in that order."""
    plan = plan_ops([ar(8 << 10), ag(512), rs(16 * 512)], 16, lnc=1, algo="kangaring")
    for tp in plan.triggers:
        kp = tp.prepared.data
        for ch in kp.channel_ids:
            kc = kp.channels[ch]
            units = set(kc.units)
            assert all(len(u) == 4 for u in units)
            spec = next(s for t, s in rank_entries(plan, kc.primaries[0]) if t is tp)
            legs = spec.ir[(spec.ir["channel"] == ch) & (spec.ir["leaf"] != PEER_WAIT)]
            runs: dict = {}
            for row in legs:
                runs.setdefault((int(row["step"]), int(row["half"]), int(row["leaf"])),
                                []).append(int(row["k"]))
            for key, ks in runs.items():
                assert tuple(ks) in units, (key, ks)


def _in_place_reduce_scatter(n_elements: int, group: list, *, lnc: int = 2,
                             in_place: bool = True, dtype: str = "bf16") -> dict:
    """A reduce-scatter over ``group``, dst = src (in place) or apart."""
    size = n_elements * (1 if dtype.startswith("fp8") else 2)
    vars_ = [{"name": "buf", "type": "tmp-buf", "size": size}]
    if not in_place:
        vars_.append({"name": "out", "type": "tmp-buf", "size": size})
    return {"header": {"pkg_version": 2, "name": "rs", "lnc_size": lnc},
            "subgraphs": [{"name": "sg00", "vars": vars_, "replica_groups": [group],
                           "engines": {"sp": [{"reduce_scatter": {
                               "dtype": dtype, "op": "add", "num_elements": n_elements,
                               "src": "buf", "dst": "buf" if in_place else "out"}}]}}]}


def _lower_and_simulate(tmp_path, spec: dict, *args: str) -> str:
    """``lower`` then ``simulate --model`` through the CLI; the simulate output."""
    from click.testing import CliRunner

    from nrtrewrite.cli import main
    from nrtrewrite.neff.assembler import assemble_spec
    runner = CliRunner()
    neff, out = tmp_path / "m.neff", tmp_path / "out"
    neff.write_bytes(assemble_spec(spec))
    res = runner.invoke(main, ["lower", "-q", str(neff), "-o", str(out), "--force", *args],
                        prog_name="nrtrewrite")
    assert res.exit_code == 0, res.output
    res = runner.invoke(main, ["simulate", str(out), "--model", str(neff)],
                        prog_name="nrtrewrite")
    assert res.exit_code == 0, res.output
    return res.output


#: groups not in ascending order: member order inside a unit then differs from group order
_IN_PLACE_CASES = [
    ("vnc2-descending", 2, list(range(7, -1, -1)), 8),
    ("vnc2-shuffled", 2, [3, 6, 1, 5, 0, 7, 2, 4], 8 * 70_000),
    ("vnc1-descending", 1, list(range(15, -1, -1)), 16 * 3),
    ("vnc1-shuffled", 1, [9, 2, 14, 7, 0, 11, 4, 13, 6, 1, 15, 8, 3, 10, 5, 12], 16 * 4096),
]


@pytest.mark.parametrize("lnc, group, n", [c[1:] for c in _IN_PLACE_CASES],
                         ids=[c[0] for c in _IN_PLACE_CASES])
def test_an_in_place_reduce_scatter_on_kangaring_matches(tmp_path, lnc, group, n):
    """An in-place reduce-scatter (dst = src: a rank's OUT is the first block of its IN)
    over a group not in ascending order got one wrong element from KANGARING (found on
    2026-12-05: `rank 7: 1 element(s) differ ... last written by leg recv_reduce_copy`):
    a unit member's recv_reduce_copy wrote its OUT before the leg of group position 0 had
    read that block.  The legs of a unit step now go in group position (docs/DESIGN.md
    "Kangaring"), and the simulator's numpy reference agrees on every rank, from one element
    a rank to several channels and chunk groups."""
    out = _lower_and_simulate(tmp_path, _in_place_reduce_scatter(n, group, lnc=lnc),
                              "--algo", "kangaring")
    assert "1/1 trigger(s) match" in out


def test_an_in_place_sbuf_reduce_scatter_on_kangaring_matches(tmp_path):
    """The same in state-buffer access patterns: a reduce-scatter whose dst elements are its
    first out_elements src elements (16 elements a partition: 8 x 16 partitions in place of
    128) is in place too (apoverlap), and it got 250 wrong elements on rank 7 before."""
    spec = {"header": {"pkg_version": 2, "name": "sb", "lnc_size": 2},
            "subgraphs": [{"name": "sg00",
                           "vars": [{"name": "sb_a", "type": "state-buffer", "size": 4096,
                                     "partitions": 128}],
                           "replica_groups": [list(range(7, -1, -1))],
                           "engines": {"sp": [{"reduce_scatter": {
                               "dtype": "bf16", "op": "add",
                               "src": {"var": "sb_a", "start": 0, "partitions": 128,
                                       "dims": [[1, 16]]},
                               "dst": {"var": "sb_a", "start": 0, "partitions": 16,
                                       "dims": [[1, 16]]}}}]}}]}
    out = _lower_and_simulate(tmp_path, spec, "--algo", "kangaring")
    assert "1/1 trigger(s) match" in out


def test_an_in_place_hier_reduce_scatter_with_a_kangaring_intra_leg_matches(tmp_path):
    """A HIER reduce-scatter in place: its intra_redsct leg on KANGARING reads IN and writes
    MID, in the scratch region (docs/DESIGN.md "HIER"), so it never meets the in-place
    overlap, and the inter leg writes OUT only after the rank's intra entry, whose
    peer_wait holds it until its primary's last read of its IN.  Two nodes of two devices
    (8 ranks each at vnc 2), the group not in ascending order."""
    import json
    topo = tmp_path / "small2.json"
    topo.write_text(json.dumps({"format": "nrtrewrite-topology/1", "nodes": 2,
                                "devices_per_node": 2, "links": [[0, 1]],
                                "kangaring": True}))
    group = [3, 14, 7, 9, 0, 12, 5, 10, 1, 15, 6, 8, 2, 13, 4, 11]
    out = _lower_and_simulate(tmp_path, _in_place_reduce_scatter(16 * 300, group),
                              "--topology", str(topo), "--algo", "hier;intra_redsct:kangaring")
    assert "1/1 trigger(s) match" in out


def test_in_place_unit_steps_run_in_group_position_order():
    """The order docs/DESIGN.md "Kangaring" gives: in place, each unit step's legs go in
    ascending group position, so position 0's leg - which reads block 0 of every member,
    the bytes the others' OUT is - comes first in its unit step; out of place, the unit's
    member order (test_a_unit_step_has_its_legs_in_the_units_member_order)."""
    from nrtrewrite.lower import LowerOptions, plan_lowering
    from nrtrewrite.neff.assembler import assemble_spec
    from nrtrewrite.neff.reader import read_model_bytes
    group = list(range(15, -1, -1))
    for in_place in (True, False):
        model = read_model_bytes(assemble_spec(_in_place_reduce_scatter(
            16 * 64, group, lnc=1, in_place=in_place)))
        plan = plan_lowering(model, LowerOptions(algo="kangaring"))
        (tp,) = plan.triggers
        kp = tp.prepared.data
        assert kp.inplace is in_place
        seen_first = False
        for ch in kp.channel_ids:
            kc = kp.channels[ch]
            for p in kc.primaries:
                spec = next(s for t, s in rank_entries(plan, p) if t is tp)
                legs = spec.ir[(spec.ir["channel"] == ch) & (spec.ir["leaf"] != PEER_WAIT)]
                runs: dict = {}
                for row in legs:
                    runs.setdefault((int(row["group"]), int(row["step"]), int(row["half"]),
                                     int(row["leaf"])), []).append(int(row["k"]))
                for key, ks in runs.items():
                    if in_place:
                        positions = [group.index(k) for k in ks]
                        assert positions == sorted(positions), (p, key, ks)
                        seen_first |= len(ks) > 1 and positions[0] == 0
                    else:
                        assert tuple(ks) in set(kc.units), (p, key, ks)
        assert seen_first or not in_place  # the case the order is for did occur


def _apart_then_in_place_reduce_scatter() -> dict:
    """Two KANGARING reduce-scatters of 8 bf16 elements on one group [7 .. 0] at vnc 2 (four
    units of two ranks): trigger 0 out of place (buf -> out), trigger 1 in place (buf2)."""
    rs_ = {"dtype": "bf16", "op": "add", "num_elements": 8}
    return {"header": {"pkg_version": 2, "name": "rs2", "lnc_size": 2},
            "subgraphs": [{"name": "sg00",
                           "vars": [{"name": v, "type": "tmp-buf", "size": 16}
                                    for v in ("buf", "out", "buf2")],
                           "replica_groups": [list(range(7, -1, -1))],
                           "engines": {"sp": [
                               {"reduce_scatter": {**rs_, "src": "buf", "dst": "out"}},
                               {"reduce_scatter": {**rs_, "src": "buf2", "dst": "buf2"}}]}}]}


def test_an_in_place_reduce_scatter_after_one_apart_on_the_same_group_matches(tmp_path):
    """The composer keeps a group's leg order per channel for the triggers after the first;
    the order of an in-place reduce-scatter differs from the one apart (docs/DESIGN.md
    "Kangaring": ascending group position, not member order), so the in-place trigger must
    not be handed the first one's (a memo keyed without ``inplace`` simulated 1/2)."""
    out = _lower_and_simulate(tmp_path, _apart_then_in_place_reduce_scatter(),
                              "--algo", "kangaring")
    assert "2/2 trigger(s) match" in out


def test_in_place_unit_steps_keep_the_ring_step_order(tmp_path):
    """docs/DESIGN.md "Kangaring": the primary runs the ring's step template over its units,
    each unit step one leg per member, in place in ascending group position. A reduce-scatter
    over 4 units takes ring steps 0 .. 3 (send, two recv_reduce_send, recv_reduce_copy), so on
    rank 1 (a primary on channel 0) the in-place trigger's legs, peer waits aside, are steps
    0, 0, 1, 1, 2, 2, 3, 3, each step's two members in ascending group position (rank r at
    position 7 - r): the position order is kept inside a step, never across steps.

    The expected steps worked out: VNC 2 gives a unit a primary and 1 secondary (unit_size
    2), so 8 ranks are 4 units and the template has rank_n = 4 reduce-scatter steps (DESIGN.md
    "Step counting": send, rank_n - 2 recv_reduce_send, recv_reduce_copy). 8 elements over 8
    ranks is a block of 1 element: its one chunk is re-clamped to 2 (DESIGN.md "Chunking"),
    H0 holds the element and the empty H1 emits no leg, so each (step, member) is one leg."""
    import json

    from click.testing import CliRunner

    from nrtrewrite.cli import main
    from nrtrewrite.neff.assembler import assemble_spec
    neff = tmp_path / "m.neff"
    neff.write_bytes(assemble_spec(_apart_then_in_place_reduce_scatter()))
    res = CliRunner().invoke(main, ["schedule", str(neff), "--rank", "1", "--trigger", "1",
                                    "--algo", "kangaring", "--json"], prog_name="nrtrewrite")
    assert res.exit_code == 0, res.output
    (op,) = json.loads(res.stdout)["ops"]
    ranks, unit_size, elements = 8, 2, 8
    units = ranks // unit_size
    block = elements // ranks
    chunk = max(2, block + block % 2)  # re-clamped: the smallest even size covering it
    # H0 [0, chunk / 2) and H1 [chunk / 2, chunk), each clamped to the block's end
    halves = len([h for h in (min(chunk // 2, block), min(chunk, block) - chunk // 2) if h > 0])
    template = (["direct_reduce_send_kangaring"] + ["recv_reduce_send"] * (units - 2)
                + ["recv_reduce_copy"])
    want_steps = [s for s in range(units) for _ in range(unit_size * halves)]
    want_leaves = [template[s] for s in want_steps]
    seen = []
    for ch in op["channels"]:
        if ch["role"] != "primary":
            continue
        legs = [s for s in ch["steps"] if s["leaf"] != "peer_wait"]
        assert [s["leaf"] for s in legs] == want_leaves, (ch["channel"], legs)
        by_step: dict = {}
        for s in legs:
            by_step.setdefault((s["group"], s["step"]), []).append(7 - s["k"])
        assert [s["step"] for s in legs] == want_steps == [0, 0, 1, 1, 2, 2, 3, 3], (
            ch["channel"], legs)
        for key, positions in by_step.items():
            assert positions == sorted(positions), (ch["channel"], key, positions)
        seen.append(ch["channel"])
    assert seen  # rank 1 is a primary somewhere


def test_an_in_place_reduce_scatter_takes_kangaring_in_its_window():
    """In place or apart, a 60 MiB reduce-scatter over a whole vnc 2 device group is
    KANGARING's by default (its window starts at 56 MiB, docs/SELECTION.md)."""
    from nrtrewrite.neff.assembler import assemble_spec
    from nrtrewrite.neff.reader import read_model_bytes
    from nrtrewrite.select import select_all
    n = 60 * 2 ** 20 // 2
    for in_place in (True, False):
        model = read_model_bytes(assemble_spec(_in_place_reduce_scatter(
            n, list(range(7, -1, -1)), in_place=in_place)))
        topo = load_topology(None, world=model.world, lnc_size=2)
        (sel,) = select_all(model, topo)
        assert sel.alg == EncAlgType.KANGARING, (in_place, sel.alg, sel.reason)
