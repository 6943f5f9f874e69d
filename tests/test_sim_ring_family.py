"""KANGARING, SINGLE_CYCLE_RING and HIER outputs through the simulator (bit for bit, protocol,
happens-before), and mutations of HIER / multi-node outputs that it must catch."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from irsim import SMALL_TWO_NODE_TOPOLOGY, ag, ar, collective_spec, rs
from nrtrewrite.compose.kangaring import PEER_WAIT
from nrtrewrite.simulate import simulate_output
from test_mutation import Out, failure_text
from test_simulate import lower_spec


@pytest.fixture(scope="module")
def topo(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("topo") / "trn2-4dev.json"
    path.write_text(json.dumps(SMALL_TWO_NODE_TOPOLOGY))
    return str(path)


def lower(tmp: Path, ops, ranks, *, lnc=2, **opts) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    opts.setdefault("algo", None)  # the default selection unless a test forces one
    return lower_spec(collective_spec(ops, ranks, lnc=lnc), tmp / "out", **opts)


def clean(out: Path, seed: int = 0, algos=None):
    res = simulate_output(out, seed=seed)
    bad = [(t.trigger, t.status, t.detail) for t in res.triggers if t.status != "match"]
    assert res.ok, (res.error, bad)
    if algos is not None:
        man = json.loads((out / "manifest.json").read_text())
        assert [t["algorithm"] for t in man["triggers"]] == algos
    return res


@pytest.mark.parametrize("lnc", [2, 1])
def test_kangaring_simulates_clean(tmp_path, lnc):
    out = lower(tmp_path, [ar(4000), ag(300), rs(16 * 130)], 16, lnc=lnc, algo="kangaring")
    clean(out, seed=lnc, algos=["KANGARING"] * 3)


def test_single_cycle_simulates_clean(tmp_path, topo):
    out = lower(tmp_path / "a", [ar(4000), ar(999, op="min")], 5,
                algo="allreduce:single_cycle_ring")
    clean(out, algos=["SINGLE_CYCLE_RING"] * 2)
    # one rank per node over three nodes: every hop through the net proxy, both directions
    out = lower(tmp_path / "b", [ar(40_000), ar(33_333, op="max")], [0, 16, 32],
                topology=topo)
    res = clean(out, seed=3, algos=["SINGLE_CYCLE_RING"] * 2)
    assert res.stats["transfers"] > 0


@pytest.mark.parametrize("algo", [
    None, "inter_allr:single_cycle_ring;intra_redsct:kangaring;intra_allg:kangaring",
    # RING inter legs: their all-gather steps from the other node land in OUT (the net
    # receive view of direct_recv_send / direct_recv), their reduce-scatter steps in RECV
    "inter_allr:ring;inter_allg:ring;inter_redsct:ring"])
def test_hier_simulates_clean(tmp_path, topo, algo):
    out = lower(tmp_path, [ar(4001), ag(300), rs(32 * 64)], 32, topology=topo, algo=algo)
    res = clean(out, seed=4, algos=["HIER"] * 3)
    assert res.stats["transfers"] > 0


def test_hier_over_three_nodes_simulates_clean(tmp_path, topo):
    out = lower(tmp_path, [ar(5000), ag(100), rs(48 * 40)], 48, topology=topo,
                algo="inter_allr:single_cycle_ring;intra_redsct:kangaring")
    clean(out, algos=["HIER"] * 3)


# -- mutations ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hier_out(tmp_path_factory, topo) -> Path:
    out = lower(tmp_path_factory.mktemp("h"), [ar(4001), rs(32 * 64)], 32, topology=topo,
                algo="inter_allr:single_cycle_ring;intra_redsct:kangaring;intra_allg:kangaring")
    clean(out)
    return out


@pytest.fixture
def mut(hier_out, tmp_path) -> Out:
    return Out(hier_out, tmp_path / "mut")


def net_rank(o: Out, name: str) -> int:
    for r in range(32):
        if o.arr(r, name).size:
            return r
    raise AssertionError(f"no rank has {name} records")


@pytest.mark.parametrize("side", ["net_src.bin", "net_dest.bin"])
@pytest.mark.parametrize("field,value", [("size", 4), ("mark", 0), ("mark", 2)])
def test_hier_wrong_terminator(mut, side, field, value):
    r = net_rank(mut, side)
    a = mut.arr(r, side)
    i = int(np.flatnonzero(a["mark"] == 1)[-1])  # the last op's terminator
    mut.edit(r, side, lambda x: x[field].__setitem__(i, value))
    assert "terminator" in failure_text(mut.simulate()) or field == "mark"


@pytest.mark.parametrize("which", ["terminator", "entry"])
def test_hier_wrong_net_op_idx(mut, which):
    r = net_rank(mut, "net_src.bin")

    def f(a):
        term = np.flatnonzero(a["mark"] == 1)
        i = int(term[-1]) if which == "terminator" else int(term[-1]) - 1
        a["net_op_idx"][i] = int(a["net_op_idx"][i]) + 1
    mut.edit(r, "net_src.bin", f)
    assert "net_op_idx" in failure_text(mut.simulate())


def test_hier_wrong_unrolled_count(mut):
    r = net_rank(mut, "net_ops.bin")
    mut.edit(r, "net_ops.bin", lambda a: a["unrolled_count"].__setitem__(0, 7))
    text = failure_text(mut.simulate())
    assert "unrolled_count" in text
    # named by its rank folder, as every other decoding error (docs/SIMULATOR.md §8)
    assert text.startswith(f"{mut.path / f'rank-{r:04d}'}: "), text


def test_kangaring_reduce_leg_must_carry_nr1w(mut):
    legs = mut.arr(0, "legs.bin")
    i = int(np.flatnonzero(legs["reduction_type"] == 2)[0])
    mut.edit(0, "legs.bin", lambda a: a["reduction_type"].__setitem__(i, 0))
    assert "reduction_type" in failure_text(mut.simulate())


def test_secondary_that_does_not_wait_for_its_primary(mut):
    """A secondary's peer_wait lowered to 1: its entry completes before its primary wrote its
    output (or leaves its unit semaphore non-zero)."""
    from nrtrewrite.emit import formats as F
    for r in range(32):
        legs = mut.arr(r, "legs.bin")
        idx = np.flatnonzero(legs["leaf"] == PEER_WAIT)
        sems = mut.arr(r, "sem.bin")
        for i in idx:
            s0 = int(legs["sem_first"][i])
            if int(sems["value"][s0]) > 1 and (int(sems["ctrl"][s0]) & F.SEM_SUBOP_MASK) == 20:
                mut.edit(r, "sem.bin", lambda a, s0=s0: a["value"].__setitem__(s0, 1))
                mut.simulate()
                return
    raise AssertionError("no secondary wait found")


def test_tiny_and_single_rank_edges(tmp_path, topo):
    """5 elements over 16 local ranks cannot be sliced: HIER refuses (flat ring); tiny
    kangaring and single-cycle messages (mostly empty positions); a one-rank group."""
    out = lower(tmp_path / "h", [ar(5), ag(1), rs(32)], 32, topology=topo)
    clean(out, algos=["RING", "HIER", "HIER"])
    from nrtrewrite.codes import DType, EncAlgType, EncOpType
    from nrtrewrite.select import Request, select
    from nrtrewrite.topology.model import load_topology
    t = load_topology(topo, world=tuple(range(32)), lnc_size=2)
    sel = select(Request.for_op(EncOpType.ALLREDUCE, DType.BF16, range(32), 10), t)
    assert "cannot give each of the 16 local ranks a slice" in sel.candidate(EncAlgType.HIER).reason
    clean(lower(tmp_path / "k", [ar(3), ag(1), rs(16)], 16, algo="kangaring"))
    clean(lower(tmp_path / "s", [ar(1), ar(2)], 6, algo="allreduce:single_cycle_ring"))
    clean(lower(tmp_path / "one", [ar(100)], [3], algo="allreduce:single_cycle_ring"))
