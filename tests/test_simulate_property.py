"""Property: any group size, element count, dtype, op and channel count assembles, lowers and
simulates bit-exactly (STYLE.md "Tests": the simulator proves the schedule correct).

Bounded so it stays fast: a handful of examples, no deadline, sizes up to 2**20 elements
only for small groups (the element volume of one example is capped)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conftest import examples
from test_simulate import assert_clean, coll_spec, lower_spec

REDUCE_DTYPES = ["bf16", "fp16", "fp32r", "fp8_e3", "fp8_e4", "fp8_e5"]
ANY_DTYPES = REDUCE_DTYPES + ["int32", "int8", "uint64", "int16", "fp32"]
PRIMES = [2, 3, 5, 7, 61, 509, 4099, 65537, 524287]
#: element volume (elements x ranks) of one example: keeps each example well under a second
VOLUME = 1 << 21


@st.composite
def collectives(draw):
    op = draw(st.sampled_from(["all_reduce", "all_gather", "reduce_scatter"]))
    ranks = draw(st.integers(2, 32))
    dtype = draw(st.sampled_from(ANY_DTYPES if op == "all_gather" else REDUCE_DTYPES))
    alu = draw(st.sampled_from(["add", "max", "min"]))
    cap = max(1, min(1 << 20, VOLUME // (ranks if op != "all_gather" else ranks * ranks)))
    count = draw(st.one_of(st.integers(1, cap), st.sampled_from([p for p in PRIMES if p <= cap]),
                           st.sampled_from([cap, cap - 1, max(1, cap // 3)])))
    if op == "reduce_scatter":
        count = max(1, count // ranks) * ranks
    seed = draw(st.integers(0, 2**31 - 1))
    lnc = draw(st.sampled_from([1, 2]))  # LNC 2 packs 4 ranks per device: more ring channels
    return op, ranks, dtype, alu, count, seed, lnc


@settings(max_examples=examples(15), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(collectives())
@example(("all_reduce", 16, "bf16", "add", 1 << 20, 1, 2))  # 4 channels
@example(("all_reduce", 2, "fp32r", "max", 1 << 20, 2, 1))  # 4 chunk groups (pgta)
@example(("all_gather", 2, "int32", "add", 1 << 19, 3, 1))  # pgta 4, integer copy
@example(("reduce_scatter", 3, "fp8_e4", "add", 3 * 65537, 4, 1))  # prime block
@example(("all_reduce", 31, "fp16", "min", 509, 5, 2))
@example(("all_reduce", 32, "fp8_e5", "add", 1, 6, 1))  # one element, fp8 with 32 > B ranks
def test_any_collective_simulates_bit_exactly(case):
    op, ranks, dtype, alu, count, seed, lnc = case
    with tempfile.TemporaryDirectory() as d:
        out = lower_spec(coll_spec(op, dtype, ranks, count, alu, lnc=lnc), Path(d) / "out")
        assert_clean(out, seed=seed)


@settings(max_examples=examples(4), deadline=None, derandomize=True)
@given(st.sampled_from(["all_reduce", "all_gather", "reduce_scatter"]),
       st.sampled_from(["bf16", "fp16", "fp8_e4"]), st.integers(1, 3000), st.integers(0, 99))
def test_two_node_collectives(op, dtype, count, seed):
    from test_simulate import two_node_spec
    if op == "reduce_scatter":
        count = max(1, count // 4) * 4
    with tempfile.TemporaryDirectory() as d:
        out = lower_spec(two_node_spec(op, dtype, count), Path(d) / "out")
        assert_clean(out, seed=seed)


# ---------------------------------------------------------------------------
# Every engine forced (review 53e: the tests above lower RING, lower_spec's default; MESH and
# INTRA_RDH have their own in test_mesh.py and test_rdh.py).  Each draws the groups where the
# engine is legal (docs/SELECTION.md §3) and lowers with ``--algo`` forcing it: a refusal
# fails the test as a mismatch does.  Sizes are small (a few seconds a test); more examples
# under NRTREWRITE_HYPOTHESIS_PROFILE=thorough (tests/conftest.py, :func:`examples`).

#: ranks a trn2 node holds at LNC 1 and 2 (128 NeuronCores, 8 a device)
TRN2_NODE = {1: 128, 2: 64}
TRN2_DEVICE = {1: 8, 2: 4}


def _count(draw, ranks: int, op: str, cap: int, least: int = 1) -> int:
    """An element count of at least ``least`` and at most ``cap`` a rank (a primes' share),
    a multiple of ``ranks`` for a reduce-scatter."""
    count = draw(st.one_of(st.integers(least, cap),
                           st.sampled_from([max(least, p) for p in PRIMES if p <= cap])))
    return max(1, count // ranks) * ranks if op == "reduce_scatter" else count


def _lower_and_simulate(case, topology: str, algo: str, *, in_place: bool = False) -> None:
    """Lower ``case`` (op, ranks, dtype, alu, count, seed, lnc) forced to ``algo`` on
    ``topology`` and simulate it: every trigger matches, and the engine is ``algo``'s.
    ``in_place``: an all-reduce or reduce-scatter whose dst is its src (a reduce-scatter's
    OUT the first block of its IN)."""
    import json
    from test_simulate import lower_neff
    from nrtrewrite.neff.assembler import assemble_spec
    op, ranks, dtype, alu, count, seed, lnc = case
    spec = coll_spec(op, dtype, ranks, count, alu, lnc=lnc)
    if in_place:
        sg = spec["subgraphs"][0]
        sg["vars"] = [{**sg["vars"][0], "type": "tmp-buf"}]  # x_in alone, a dst may write it
        sg["engines"]["sp"][1][op]["dst"] = "x_in"
    with tempfile.TemporaryDirectory() as d:
        neff = Path(d) / "m.neff"
        neff.write_bytes(assemble_spec(spec))
        out = lower_neff(neff, Path(d) / "out", topology=topology, algo=algo)
        trigger = json.loads((out / "manifest.json").read_text())["triggers"][0]
        engine = trigger["algorithm"]
        assert engine == algo.partition(";")[0].upper(), (engine, algo)
        # a leg clause (`hier;inter_allr:ring`) forced that leg's engine (SELECTION.md)
        legs = {leg["name"]: leg["algorithm"] for leg in trigger["legs"]}
        for clause in algo.split(";")[1:]:
            leg, _, leg_engine = clause.partition(":")
            assert legs[leg] == leg_engine.upper(), (legs, algo)
        assert_clean(out, seed=seed)
        _assert_peer_semaphore_increments_in_peer_order(out)


#: docs/FORMATS.md: legs.bin leaf 22 mark_complete (§3), sem.bin subop 21 inc (§7), the
#: kangaring peer semaphores 144..175 (§7), SoC addresses' local part bits [47:0] (§10)
MARK_COMPLETE, SEM_INC, PEER_SEMS, LOCAL_AND_DIE = 22, 21, range(144, 176), (1 << 48) - 1


def _assert_peer_semaphore_increments_in_peer_order(out: Path) -> int:
    """A leg that increments the peer semaphores of several unit ranks does so in its entry's
    peer order, the order its entry handshake's ``mark_complete`` legs post ``entry_post`` on
    those ranks (docs/FORMATS.md §3.3, §3.4): the simulator cannot tell (an increment's order
    among its leg's changes nothing it runs), so it is read from the bytes here.  A target is
    its increment's address less its semaphore's (same window, core and route).  Returns how
    many legs it checked."""
    import numpy as np
    from nrtrewrite.emit import formats as F
    from nrtrewrite.emit.address import EVT_SEM_STRIDE, decode_sema_address
    checked = 0
    for rdir in sorted(out.glob("rank-*")):
        legs = np.fromfile(rdir / "legs.bin", F.LEG_DTYPE)
        sem = np.fromfile(rdir / "sem.bin", F.SEM_DTYPE)
        posted: dict[int, list[int]] = {}  # entry (spad_index) -> handshake targets in order
        for i, leg in enumerate(legs.tolist()):
            rec = dict(zip(legs.dtype.names, leg))
            first = rec["sem_first"]
            incs = []
            for ctrl, _value, addr in sem[first:first + rec["sem_count"]].tolist():
                if ctrl & 0xFF == SEM_INC:
                    sem_id = decode_sema_address(addr & LOCAL_AND_DIE)[2]
                    incs.append((sem_id, addr - EVT_SEM_STRIDE * sem_id))
            entry = posted.setdefault(rec["spad_index"], [])
            if rec["leaf"] == MARK_COMPLETE:
                entry.extend(target for _sem, target in incs)
                continue
            mine = [target for sem_id, target in incs if sem_id in PEER_SEMS]
            if len(mine) > 1:
                at = [entry.index(t) for t in mine]
                assert at == sorted(at), (rdir.name, "legs.bin record", i, at)
                checked += 1
    return checked


@st.composite
def kangaring_cases(draw):
    """KANGARING: trn2, one node, whole devices, more than 4 ranks at LNC 2 and more than 8
    at LNC 1, a reduce only ADD; the group in any order, a reduce in place or not (an
    in-place reduce-scatter's unit steps run in group position: docs/DESIGN.md
    "Kangaring")."""
    op = draw(st.sampled_from(["all_reduce", "all_gather", "reduce_scatter"]))
    lnc = draw(st.sampled_from([1, 2]))
    n = TRN2_DEVICE[lnc] * draw(st.integers(2, 4))
    ranks = draw(st.one_of(st.just(list(range(n))), st.permutations(list(range(n)))))
    dtype = draw(st.sampled_from(ANY_DTYPES if op == "all_gather" else REDUCE_DTYPES))
    count = _count(draw, n, op, 4096 if op == "all_gather" else 16384)
    in_place = op != "all_gather" and draw(st.booleans())
    return (op, ranks, dtype, "add", count, draw(st.integers(0, 2**31 - 1)), lnc), in_place


@settings(max_examples=examples(4), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(kangaring_cases())
@example((("all_reduce", list(range(8)), "bf16", "add", 509, 1, 2), False))  # least, LNC 2
# 3 devices at LNC 1 (units of 4) on 4 channels (1 MiB, 256 KiB a channel: SELECTION.md §7): a
# rank primary on channel 1 has numbered its channel-0 primary first, so its legs' peer
# semaphore increments are not in its unit's PEER_RMTV, PEER_RMTV2, PEER_LOCAL order
@example((("all_reduce", list(range(24)), "fp8_e4", "add", 1 << 20, 2, 1), False))
# in place over a group out of order: each unit step's leg of group position 0 reads the block
# the others write
@example((("reduce_scatter", [7, 6, 5, 4, 3, 2, 1, 0], "bf16", "add", 8 * 509, 3, 2), True))
def test_kangaring_forced_simulates_bit_exactly(drawn):
    case, in_place = drawn
    _lower_and_simulate(case, "trn2", "kangaring", in_place=in_place)


@st.composite
def single_cycle_ring_cases(draw):
    """SINGLE_CYCLE_RING: an all-reduce of any group (docs/SELECTION.md §3: forced, any
    group): inside a device, over devices, or over two nodes, any reduce op."""
    plat = draw(st.sampled_from(["trn1", "trn2"]))
    lnc = 1 if plat == "trn1" else draw(st.sampled_from([1, 2]))
    per_node = (32 if plat == "trn1" else TRN2_NODE[lnc])
    n = draw(st.integers(2, 8))
    where = draw(st.sampled_from(["node", "strided", "two_nodes"]))
    if where == "node":
        ranks = list(range(n))
    elif where == "strided":
        stride = draw(st.sampled_from([2, 3, 4]))
        ranks = [i * stride for i in range(n)]
    else:
        half = draw(st.integers(1, n - 1))
        ranks = list(range(half)) + list(range(per_node, per_node + n - half))
    topology = f"{plat}:nodes=2" if where == "two_nodes" else plat
    dtype = draw(st.sampled_from(REDUCE_DTYPES))
    alu = draw(st.sampled_from(["add", "max", "min"]))
    count = _count(draw, n, "all_reduce", 8192)
    return ("all_reduce", ranks, dtype, alu, count, draw(st.integers(0, 2**31 - 1)),
            lnc), topology


@settings(max_examples=examples(5), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(single_cycle_ring_cases())
@example((("all_reduce", [0, 128], "fp32r", "max", 1, 2, 1), "trn2:nodes=2"))  # its libnrt gate
@example((("all_reduce", [0, 1, 2, 128], "fp8_e3", "min", 4097, 6, 1), "trn2:nodes=2"))
def test_single_cycle_ring_forced_simulates_bit_exactly(drawn):
    case, topology = drawn
    _lower_and_simulate(case, topology, "single_cycle_ring")


#: HIER overrides (docs/SELECTION.md §5, §8): the default legs, and its inter all-reduce leg
#: forced to SINGLE_CYCLE_RING or RING (a HIER leg is RING, KANGARING or SINGLE_CYCLE_RING)
HIER_ALGOS = ["hier", "hier;inter_allr:single_cycle_ring", "hier;inter_allr:ring"]


@st.composite
def hier_cases(draw):
    """HIER: a symmetric group over two nodes (or three), more than one rank a node, an
    all-reduce of at least the local ranks' count of elements."""
    op = draw(st.sampled_from(["all_reduce", "all_gather", "reduce_scatter"]))
    plat = draw(st.sampled_from(["trn1", "trn2"]))
    lnc = 1 if plat == "trn1" else draw(st.sampled_from([1, 2]))
    per_node = (32 if plat == "trn1" else TRN2_NODE[lnc])
    nodes = draw(st.sampled_from([2, 2, 3]))
    local = draw(st.integers(2, 4))
    first = draw(st.sampled_from([0, 1]))
    ranks = [nd * per_node + first + i for nd in range(nodes) for i in range(local)]
    n = len(ranks)
    dtype = draw(st.sampled_from(ANY_DTYPES if op == "all_gather" else REDUCE_DTYPES))
    alu = draw(st.sampled_from(["add", "max", "min"]))
    count = _count(draw, n, op, 2048 if op == "all_gather" else 8192, least=local)
    algo = draw(st.sampled_from(HIER_ALGOS)) if op == "all_reduce" else "hier"
    return ((op, ranks, dtype, alu, count, draw(st.integers(0, 2**31 - 1)), lnc),
            f"{plat}:nodes={nodes}", algo)


@settings(max_examples=examples(5), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(hier_cases())
@example((("all_reduce", [0, 1, 64, 65], "bf16", "add", 2, 3, 2), "trn2:nodes=2", "hier"))
@example((("all_reduce", list(range(8)) + list(range(64, 72)), "fp16", "add", 4099, 4, 2),
          "trn2:nodes=2", "hier;intra_redsct:kangaring;intra_allg:kangaring"))
@example((("all_reduce", [1, 2, 3, 33, 34, 35], "fp16", "max", 1000, 5, 1), "trn1:nodes=2",
          "hier;inter_allr:ring"))
@example((("all_reduce", [0, 1, 64, 65, 128, 129], "fp8_e5", "add", 255, 6, 2), "trn2:nodes=3",
          "hier;inter_allr:single_cycle_ring"))
def test_hier_forced_simulates_bit_exactly(drawn):
    case, topology, algo = drawn
    _lower_and_simulate(case, topology, algo)


@st.composite
def inter_rdh_cases(draw):
    """INTER_RDH: one rank a node, a power of two of nodes, at least 8 (inter_rdh_min_nodes)."""
    op = draw(st.sampled_from(["all_reduce", "all_gather", "reduce_scatter"]))
    plat = draw(st.sampled_from(["trn1", "trn2"]))
    lnc = 1 if plat == "trn1" else draw(st.sampled_from([1, 2]))
    per_node = (32 if plat == "trn1" else TRN2_NODE[lnc])
    nodes = draw(st.sampled_from([8, 8, 16]))
    ranks = [nd * per_node + draw(st.integers(0, 3)) for nd in range(nodes)]
    dtype = draw(st.sampled_from(ANY_DTYPES if op == "all_gather" else REDUCE_DTYPES))
    alu = draw(st.sampled_from(["add", "max", "min"]))
    count = _count(draw, nodes, op, 2048 if op == "all_gather" else 8192)
    return ((op, ranks, dtype, alu, count, draw(st.integers(0, 2**31 - 1)), lnc),
            f"{plat}:nodes={nodes}")


@settings(max_examples=examples(4), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(inter_rdh_cases())
@example((("reduce_scatter", [0, 64, 128, 192, 256, 320, 384, 448], "fp8_e4", "min", 8, 5, 2),
          "trn2:nodes=8"))
def test_inter_rdh_forced_simulates_bit_exactly(drawn):
    case, topology = drawn
    _lower_and_simulate(case, topology, "inter_rdh")
