"""SINGLE_CYCLE_RING: the step-count identity of the design (docs/DESIGN.md "Single-cycle
ring"), derived here from the roles independently of the composer's ordering, and the
composed programs executed symbolically (tests/irsim.py) inside a node and across nodes."""

import json
from collections import Counter

import pytest

from irsim import SMALL_TWO_NODE_TOPOLOGY, ag, ar, plan_ops, run_all, run_trigger
from nrtrewrite.codes import EncAlgType, EncOpType
from nrtrewrite.compose.leaves import Leaf
from nrtrewrite.compose.single_cycle import arcs, chunk_roles, step_count
from nrtrewrite.errors import SelectionError
from nrtrewrite.lower import rank_entries

SENDS = {Leaf.send, Leaf.recv_reduce_send, Leaf.recv_reduce_copy_send, Leaf.direct_copy_send,
         Leaf.direct_recv_send}


def transfers(n):
    """Every transfer of one chunk group, half and channel pair as (root, rank, direction,
    step): rank ``r`` sends at ``step`` on ``direction`` for the chunk rooted at ``root``."""
    out = []
    for root in range(n):
        for r in range(n):
            for role in chunk_roles(n, (root - r) % n):
                if role.sends:
                    out.append((root, r, role.direction, role.step))
    return out


@pytest.mark.parametrize("n", range(2, 18))
def test_step_count_identity(n):
    h_cw, h_ccw = arcs(n)
    assert h_cw + h_ccw == n - 1 and h_cw - h_ccw in (0, 1)
    assert step_count(n) == (n - 1 if n % 2 else n) < 2 * (n - 1) or n == 2
    tr = transfers(n)
    steps = {s for *_x, s in tr}
    # one cycle: steps 0 .. step_count-1, each two legs wide (one per direction)
    assert steps == set(range(step_count(n)))
    per = Counter((r, d, s) for _root, r, d, s in tr)
    assert max(per.values()) == 1  # at most one transfer per rank, direction and step
    # every rank sends 2(n-1) chunks per chunk group (the ring's bandwidth) ...
    assert Counter(r for _root, r, _d, _s in tr) == {r: 2 * (n - 1) for r in range(n)}
    # ... and each chunk makes 2(n-1) hops: n-1 to reach its root, n-1 to come back out
    assert Counter(root for root, *_x in tr) == {r: 2 * (n - 1) for r in range(n)}
    # every rank is the root of exactly one chunk (the roles are relative to the root), which
    # it reduces once: the two arcs' partials and its own input (one arc for n = 2)
    red = [ro for ro in chunk_roles(n, 0) if len(ro.srcs) > 1]
    assert len(red) == 1 and red[0].srcs == (("recv", "recv2", "in") if h_ccw else ("recv", "in"))


@pytest.mark.parametrize("n", range(2, 14))
def test_the_transfer_chain_of_each_chunk(n):
    """Chase each chunk: partials flow toward the root on both arcs, one hop per step; the
    result leaves the root at step h_cw and reaches every other rank exactly once."""
    h_cw, h_ccw = arcs(n)
    for root in range(n):
        # the root sends the result at step h_cw (after its reduce)
        assert {ro.step for ro in chunk_roles(n, 0) if ro.sends} == {h_cw}
        received = Counter()  # rank -> how often it receives the result
        last = 0
        for r in range(n):
            d_cw = (root - r) % n
            if d_cw == 0:
                continue
            d = d_cw if d_cw <= h_cw else n - d_cw  # hops to the root on the rank's arc
            for role in chunk_roles(n, d_cw):
                if role.leaf in (Leaf.send, Leaf.recv_reduce_send):
                    assert role.step == h_cw - d  # one hop per step toward the root
                if role.leaf in (Leaf.direct_recv_send, Leaf.direct_recv):
                    received[r] += 1
                    assert role.step == h_cw + d  # one hop per step away from it
                    last = max(last, role.step)
        assert received == {r: 1 for r in range(n) if r != root}
        assert last - 1 == step_count(n) - 1  # the last result sent on the cycle's last step


@pytest.mark.parametrize("ranks", [2, 3, 4, 5, 7, 8, 16])
def test_single_cycle_all_reduce_is_correct(ranks):
    plan = plan_ops([ar(1000 + 33 * ranks)], ranks, algo="allreduce:single_cycle_ring")
    assert plan.triggers[0].alg == EncAlgType.SINGLE_CYCLE_RING
    for seed in (0, 3):
        run_all(plan, seed=seed)


def test_channel_pairs_are_one_ring_both_ways(monkeypatch):
    import nrtrewrite.select as S
    monkeypatch.setattr(S, "choose_channels", lambda *a, **k: (4, "test: two pairs"))
    plan = plan_ops([ar(9000)], 16, algo="allreduce:single_cycle_ring")
    sp = plan.triggers[0].prepared.data
    assert len(sp.pairs) >= 2
    for cw, ccw in sp.pairs:
        a, b = sp.orders[cw], sp.orders[ccw]
        succ = {a[i]: a[(i + 1) % len(a)] for i in range(len(a))}
        pred = {b[i]: b[(i - 1) % len(b)] for i in range(len(b))}
        assert succ == pred  # CCW walks the same ring backward
    run_all(plan)


def test_single_cycle_across_nodes_and_max(tmp_path):
    topo = tmp_path / "t.json"
    topo.write_text(json.dumps(SMALL_TWO_NODE_TOPOLOGY))
    # one rank per node over 3 nodes: the policy's own pick (inter, one rank per node)
    group = [0, 16, 32]
    plan = plan_ops([ar(40_000), ar(33_333, op="max")], group, topology=str(topo))
    assert [t.alg for t in plan.triggers] == [EncAlgType.SINGLE_CYCLE_RING] * 2
    run_all(plan)


def test_forcing_single_cycle_on_an_all_gather_is_refused():
    with pytest.raises(SelectionError, match="enc_can_post_single_cycle_ring: SINGLE_CYCLE_RING "
                                             "is all-reduce only"):
        plan_ops([ag(64)], 8, algo="single_cycle_ring")


def test_the_root_meets_both_directions_through_post_sema():
    from nrtrewrite.emit.address import SEM_POST, SEM_RECV, channel_sem

    plan = plan_ops([ar(4096)], 5, algo="allreduce:single_cycle_ring")
    sp = plan.triggers[0].prepared.data
    cw, ccw = sp.pairs[0]
    spec = rank_entries(plan, 0)[0][1]
    rows = spec.ir
    comb = rows[(rows["channel"] == cw) & (rows["leaf"] == int(Leaf.recv_reduce_copy_send))]
    assert comb.size and (comb["n_src"] == 3).all() and (comb["n_wait"] == 2).all()
    assert set(comb["wait_sem"][:, 0]) == {channel_sem(cw, SEM_RECV)}
    assert set(comb["wait_sem"][:, 1]) == {channel_sem(cw, SEM_POST)}
    dist = rows[(rows["channel"] == ccw) & (rows["leaf"] == int(Leaf.direct_copy_send))]
    assert dist.size and set(dist["wait_sem"][:, 0]) == {channel_sem(ccw, SEM_POST)}
    assert plan.triggers[0].trigger.op == EncOpType.ALLREDUCE
    run_trigger(plan, 0)


@pytest.mark.parametrize("n", [3, 4, 5])
def test_the_roots_final_reduce_step_is_in_the_reduce_scatter_phase(tmp_path, n):
    """schedule's ``phase`` counts steps as the ring does (docs/DESIGN.md "Step counting": the
    final reduce step belongs to the reduce-scatter): the root's step h_cw -- its CCW
    direct_recv of the CCW partial, its combining recv_reduce_copy_send and its CCW
    direct_copy_send of the result -- is ``reduce_scatter``, as the steps before it; every
    later step (the result travelling back out) is ``all_gather``.  The root's three legs were
    labelled ``all_gather``."""
    from click.testing import CliRunner

    from nrtrewrite.cli import main
    from nrtrewrite.neff.assembler import assemble_spec
    count = 64 * n
    spec = {"header": {"name": "p"}, "subgraphs": [{
        "name": "sg00", "vars": [{"name": "a", "type": "input", "size": 2 * count},
                                 {"name": "b", "type": "output", "size": 2 * count}],
        "replica_groups": [list(range(n))],
        "engines": {"sp": [{"all_reduce": {"dtype": "bf16", "op": "add", "src": "a",
                                           "dst": "b", "num_elements": count}}]}}]}
    neff = tmp_path / "p.neff"
    neff.write_bytes(assemble_spec(spec))
    h_cw = (n - 1 + 1) // 2  # ceil((n - 1) / 2)
    for rank in range(n):
        res = CliRunner().invoke(main, ["schedule", str(neff), "--rank", str(rank), "--algo",
                                        "single_cycle_ring", "--json"])
        assert res.exit_code == 0, res.output
        rows = [(ch["direction"], s) for ch in json.loads(res.output)["ops"][0]["channels"]
                for s in ch["steps"]]
        root = sorted((d, s["leaf"]) for d, s in rows
                      if s["k"] == rank and s["step"] == h_cw and s["half"] == 0)
        assert root == [("ccw", "direct_copy_send"), ("ccw", "direct_recv"),
                        ("cw", "recv_reduce_copy_send")]
        for _d, s in rows:
            assert s["phase"] == ("reduce_scatter" if s["step"] <= h_cw else "all_gather"), s
        assert {s["phase"] for _d, s in rows} == {"reduce_scatter", "all_gather"}


@pytest.mark.parametrize("algo", ["single_cycle_ring", "ring"])
def test_a_one_rank_groups_copy_is_in_the_all_gather_phase(tmp_path, algo):
    """A one-rank group runs enc_1rank_primitive (its input copied to its output, no
    reduction): schedule's ``phase`` is ``all_gather`` under either engine (a forced
    SINGLE_CYCLE_RING showed ``reduce_scatter``, the ring ``all_gather``)."""
    from click.testing import CliRunner

    from nrtrewrite.cli import main
    from nrtrewrite.neff.assembler import assemble_spec
    spec = {"header": {"name": "p"}, "subgraphs": [{
        "name": "sg00", "vars": [{"name": "a", "type": "input", "size": 64},
                                 {"name": "b", "type": "output", "size": 64}],
        "replica_groups": [[0]],
        "engines": {"sp": [{"all_reduce": {"dtype": "bf16", "op": "add", "src": "a",
                                           "dst": "b", "num_elements": 32}}]}}]}
    neff = tmp_path / "p.neff"
    neff.write_bytes(assemble_spec(spec))
    res = CliRunner().invoke(main, ["schedule", str(neff), "--rank", "0", "--algo", algo,
                                    "--json"])
    assert res.exit_code == 0, res.output
    steps = [s for ch in json.loads(res.output)["ops"][0]["channels"] for s in ch["steps"]]
    assert [(s["leaf"], s["phase"]) for s in steps] == [("direct_copy", "all_gather")] * 2


def _one_rank_spec(in_size, out_size, num_elements, op="all_reduce"):
    return {"header": {"name": "one", "lnc_size": 2}, "subgraphs": [{
        "name": "sg00", "vars": [{"name": "a", "type": "input", "size": in_size},
                                 {"name": "b", "type": "output", "size": out_size}],
        "replica_groups": [[0]],
        "engines": {"sp": [{op: {"dtype": "bf16", "op": "add", "src": "a", "dst": "b",
                                 "num_elements": num_elements}}]}}]}


@pytest.mark.parametrize("algo", ["ring", "single_cycle_ring"])
def test_a_one_rank_group_reserves_no_scratch(algo):
    """A one-rank group receives nothing (its legs copy IN to OUT, enc_1rank_primitive:
    docs/DESIGN.md), so it reserves no scratch: RING reserved the message (RECV), a
    SINGLE_CYCLE_RING two of them (RECV, RECV2).  Vars of 12 GiB + 4 KiB and 12 GiB fit the
    28 GiB core window (docs/FORMATS.md §10), a 4 GiB all-reduce's scratch did not: lower
    refused the model blaming it.  Now the plan lays out the vars alone: scratch and gw
    regions of 0 bytes, both right after the vars (24 GiB + 4 KiB)."""
    from nrtrewrite.lower import LowerOptions, plan_lowering
    from nrtrewrite.neff.assembler import assemble_spec
    from nrtrewrite.neff.reader import read_model_bytes
    data = assemble_spec(_one_rank_spec((12 << 30) + 4096, 12 << 30, 1 << 31))
    plan = plan_lowering(read_model_bytes(data, path="one.neff"),
                         LowerOptions(topology=None, algo=algo, host_cc=False))
    regions = {r.kind: r for r in plan.memory.regions if r.kind in ("scratch", "gw")}
    assert (regions["scratch"].size, regions["gw"].size) == (0, 0)
    assert regions["scratch"].offset == regions["gw"].offset == (24 << 30) + 4096


@pytest.mark.parametrize("algo,op", [("ring", "all_reduce"), ("ring", "reduce_scatter"),
                                     ("single_cycle_ring", "all_reduce")])
def test_a_one_rank_groups_output_has_no_scratch_and_simulates(tmp_path, algo, op):
    """lower a one-rank 32-element bf16 trigger: the manifest's scratch region is empty, a
    SINGLE_CYCLE_RING trigger lists no recv2 (``buffers: []``: docs/FORMATS.md §1.1), and
    simulate matches it."""
    from click.testing import CliRunner

    from nrtrewrite.cli import main
    from nrtrewrite.neff.assembler import assemble_spec
    neff = tmp_path / "one.neff"
    neff.write_bytes(assemble_spec(_one_rank_spec(64, 64, 32, op)))
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["lower", str(neff), "-o", str(out), "-q", "--algo", algo])
    assert res.exit_code == 0, res.output
    man = json.loads((out / "manifest.json").read_text())
    sizes = {r["kind"]: r["size"] for r in man["memory"]["regions"]
             if r["kind"] in ("scratch", "gw")}
    assert sizes == {"scratch": 0, "gw": 0}
    assert man["triggers"][0].get("buffers") == ([] if algo == "single_cycle_ring" else None)
    res = CliRunner().invoke(main, ["simulate", str(out), "--json"])
    assert res.exit_code == 0, res.output
    assert [t["status"] for t in json.loads(res.output)["triggers"]] == ["match"]


def test_an_older_one_rank_single_cycle_output_still_simulates(tmp_path):
    """An output lowered before 2026-12-06 reserved a one-rank SINGLE_CYCLE_RING trigger two
    spaces of scratch (2 x 64 bytes) and listed recv2 at one space (64); its rank artifacts
    are today's bytes (the views of a one-rank group touch no scratch or gw): the manifest
    made so still simulates.  recv2 listed with the empty scratch of today's layout is
    refused as outside its region, two recv2 as one too many."""
    from click.testing import CliRunner

    from nrtrewrite.cli import main
    from nrtrewrite.neff.assembler import assemble_spec
    neff = tmp_path / "one.neff"
    neff.write_bytes(assemble_spec(_one_rank_spec(64, 64, 32)))
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["lower", str(neff), "-o", str(out), "-q", "--algo",
                                    "single_cycle_ring"])
    assert res.exit_code == 0, res.output
    path = out / "manifest.json"
    man = json.loads(path.read_text())

    def simulate(scratch, buffers):
        m = json.loads(json.dumps(man))
        for r in m["memory"]["regions"]:
            if r["kind"] == "scratch":
                r["size"] = scratch
            if r["kind"] == "gw":  # (REGION_ALIGN past the scratch: 128 bytes are 4 KiB)
                r["offset"] += -(-scratch // 4096) * 4096
        m["triggers"][0]["buffers"] = buffers
        path.write_text(json.dumps(m, indent=2, sort_keys=True))
        return CliRunner().invoke(main, ["simulate", str(out)])
    recv2 = {"offset": 64, "region": "scratch", "role": "recv2"}
    res = simulate(128, [recv2])
    assert res.exit_code == 0, res.output
    res = simulate(0, [recv2])
    assert res.exit_code == 1 and ("buffers[0].offset 64 is outside the memory map's scratch "
                                   "region, which is empty") in res.output, res.output
    res = simulate(128, [recv2, recv2])
    # (both counts it accepts: it said "should list 0 recv2 buffers, not 2", though 1 is
    # accepted above)
    assert res.exit_code == 1 and "buffers should list 0 or 1 recv2 buffers (1 as lowered " \
        "before 2026-12-06), not 2: its replica_group is one rank" in res.output, res.output


def _directed(order):
    """A ring order as its directed cycle: the set of (rank, successor) hops."""
    return frozenset((order[i], order[(i + 1) % len(order)]) for i in range(len(order)))


def test_no_single_cycle_channel_repeats_an_earlier_channels_directed_ring():
    # 2-rank-per-device ranks over three trn2 nodes: 8 channels, 4 pairs; the group has 8
    # and more distinct rings (docs/TOPOLOGY.md §3 step 5), so no channel, CW or CCW, may
    # walk the directed cycle of an earlier one (until 2026-12-06 a later pair's CW ring
    # was an earlier pair's CCW ring: ch2 = ch1, ch3 = ch0, ...); the pairs still simulate
    group = [1, 8, 20, 49, 102, 130]
    plan = plan_ops([ar(1 << 20)], group, algo="allreduce:single_cycle_ring",
                    topology="trn2:nodes=3", nbytes=2 << 20)
    sp = plan.triggers[0].prepared.data
    assert len(sp.pairs) == 4
    cycles = [_directed(sp.orders[c]) for c in sp.channel_ids]
    assert len(set(cycles)) == len(cycles) == 8
    for cw, ccw in sp.pairs:  # each pair still one ring both ways
        assert _directed(sp.orders[ccw]) == {(b, a) for a, b in _directed(sp.orders[cw])}
    run_all(plan)


@pytest.mark.parametrize("group, topology, n", [("0-127", "trn2:nodes=2", 16),
                                                ("0-191", "trn2:nodes=3", 16),
                                                ("0-63", "trn2", 4)])
def test_explain_single_cycle_rings_are_distinct_and_none_duplicate(group, topology, n):
    from click.testing import CliRunner
    from nrtrewrite.cli import main
    res = CliRunner().invoke(main, ["explain", "--op", "allreduce", "--bytes", "64MiB",
                                    "--group", group, "--topology", topology,
                                    "--algo", "single_cycle_ring", "--json"])
    assert res.exit_code == 0, res.output
    rings = json.loads(res.output)["triggers"][0]["channels"]["rings"]
    assert [r["channel"] for r in rings] == list(range(n))
    assert len({_directed(r["order"]) for r in rings}) == n
    assert [r["duplicate"] for r in rings] == [False] * n


def test_a_two_rank_groups_ccw_channel_is_a_duplicate():
    # a ring of two ranks walked backward is the same directed cycle (0 -> 1 -> 0): channel
    # 1 repeats channel 0, duplicate (docs/TOPOLOGY.md §3 step 5)
    from click.testing import CliRunner
    from nrtrewrite.cli import main
    res = CliRunner().invoke(main, ["explain", "--op", "allreduce", "--bytes", "64MiB",
                                    "--group", "0,1", "--algo", "single_cycle_ring",
                                    "--rank", "0", "--json"])
    assert res.exit_code == 0, res.output
    rings = json.loads(res.output)["triggers"][0]["channels"]["rings"]
    assert [(r["channel"], r["direction"], r["prev"], r["next"], r["duplicate"])
            for r in rings] == [(0, "cw", 1, 1, False), (1, "ccw", 1, 1, True)]


def _words(text: str) -> str:
    return " ".join(text.split())


def test_a_two_rank_roots_step_is_a_cw_recv_reduce_copy_and_a_ccw_direct_copy_send(tmp_path):
    """docs/DESIGN.md "Single-cycle ring" and CLI.md ``schedule``'s ``phase``: with two ranks
    (h_cw = 1, h_ccw = 0) there is no CCW arc, so the root has no CCW ``direct_recv`` and its
    step h_cw is the CW ``recv_reduce_copy`` (CW partial + IN -> OUT, no send) and the CCW
    ``direct_copy_send`` of the result; the other rank sends its input CW at step 0 and takes
    the result by a CCW ``direct_recv`` at step 2.  The docs described only h_ccw > 0 (three
    legs at the root, ``recv_reduce_copy_send``).  Legs worked out by hand from that rule: a
    bf16 all-reduce of 64 elements over [0, 1], one channel pair, position i's chunk
    [32 i, 32 i + 32), halves of 16."""
    import re

    from click.testing import CliRunner

    from nrtrewrite.cli import main
    from nrtrewrite.emit.address import SEM_POST, SEM_RECV, channel_sem
    from nrtrewrite.neff.assembler import assemble_spec
    from test_atomic_output import ROOT

    cli = _words((ROOT / "docs" / "CLI.md").read_text())
    m = re.search(r"with two ranks, `h_ccw` = 0, .*?the step is the CW `(\w+)` \(.*?\) and the "
                  r"CCW `(\w+)` of the result, at step 1\)", cli)
    assert m, "CLI.md schedule phase: the two-rank root step"
    assert m.groups() == ("recv_reduce_copy", "direct_copy_send")
    design = _words((ROOT / "docs" / "DESIGN.md").read_text())
    design = design.split("## Single-cycle ring")[1].split("**Step identity**")[0]
    assert "two ranks (`n = 2`: `h_cw = 1`, `h_ccw = 0`) have no CCW arc" in design
    assert "`recv_reduce_copy` (CW partial + IN -> OUT: two sources, no send)" in design

    spec = {"header": {"name": "sc2", "lnc_size": 2}, "subgraphs": [{
        "name": "sg00", "vars": [{"name": "a", "type": "input", "size": 128},
                                 {"name": "b", "type": "output", "size": 128}],
        "replica_groups": [[0, 1]],
        "engines": {"sp": [{"all_reduce": {"dtype": "bf16", "op": "add", "src": "a",
                                           "dst": "b", "bytes": 128}}]}}]}
    neff = tmp_path / "sc2.neff"
    neff.write_bytes(assemble_spec(spec))
    RS, AG = "reduce_scatter", "all_gather"
    for rank, other in ((0, 1), (1, 0)):
        res = CliRunner().invoke(main, ["schedule", str(neff), "--rank", str(rank), "--algo",
                                        "single_cycle_ring", "--json"])
        assert res.exit_code == 0, res.output
        chans = json.loads(res.output)["ops"][0]["channels"]
        got = [(ch["direction"], s["step"], s["phase"], s["leaf"], s["half"], s["k"],
                s["elements"]) for ch in chans for s in ch["steps"]]

        def legs(direction, step, phase, leaf, k):
            return [(direction, step, phase, leaf, h, k, [32 * k + 16 * h, 32 * k + 16 * h + 16])
                    for h in (0, 1)]
        want = (legs("cw", 0, RS, "send", other)
                + legs("cw", 1, RS, "recv_reduce_copy", rank)
                + legs("ccw", 1, RS, "direct_copy_send", rank)
                + legs("ccw", 2, AG, "direct_recv", other))
        assert got == want, rank
        assert [(ch["direction"], ch["arcs"]) for ch in chans] == [("cw", [1, 0]),
                                                                   ("ccw", [1, 0])]

    # the legs' semaphores: the combine waits only its recv_sema and posts the CCW channel's
    # post_sema, which the CCW direct_copy_send waits
    plan = plan_ops([ar(64)], 2, algo="allreduce:single_cycle_ring")
    cw, ccw = plan.triggers[0].prepared.data.pairs[0]
    rows = rank_entries(plan, 0)[0][1].ir
    assert not (rows["leaf"] == int(Leaf.recv_reduce_copy_send)).any()
    comb = rows[rows["leaf"] == int(Leaf.recv_reduce_copy)]
    assert comb.size and (comb["channel"] == cw).all()
    assert (comb["n_src"] == 2).all() and (comb["n_dst"] == 1).all()
    assert (comb["n_wait"] == 1).all() and set(comb["wait_sem"][:, 0]) == {
        channel_sem(cw, SEM_RECV)}
    assert (comb["n_inc"] == 1).all() and set(comb["inc_sem"][:, 0]) == {
        channel_sem(ccw, SEM_POST)}
    dist = rows[rows["leaf"] == int(Leaf.direct_copy_send)]
    assert dist.size and (dist["channel"] == ccw).all()
    assert (dist["n_wait"] == 1).all() and set(dist["wait_sem"][:, 0]) == {
        channel_sem(ccw, SEM_POST)}
    run_trigger(plan, 0)
