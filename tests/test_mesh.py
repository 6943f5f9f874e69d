"""MESH and SINGLE_STEP_MESH: selection by default, SPAD entries, event schedules, execution of
the emitted bytes (tests/meshexec.py, and the simulator once it runs mesh entries), the
channel-buffer limit, the network path and mutations of mesh artifacts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import meshcase
import meshexec
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nrtrewrite.codes import DType, EncAlgMeshType, EncAlgType, EncMeshEventType, EncOpType
from nrtrewrite.compose.events import EVENT_SEMA_MASK, EVENT_SEMA_SHIFT_OFFSET, event_sem
from nrtrewrite.emit import formats as F
from nrtrewrite.emit.address import decode_sema_address
from nrtrewrite.errors import SelectionError
from nrtrewrite.golden import lower_to

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"
WINDOW = range(EVENT_SEMA_SHIFT_OFFSET, EVENT_SEMA_SHIFT_OFFSET + EVENT_SEMA_MASK + 1)


def _algos(out: Path) -> dict[int, tuple[str, str]]:
    man = json.loads((out / "manifest.json").read_text())
    return {t["trigger"]: (t["op"], t["algorithm"]) for t in man["triggers"]}


# -- the fixtures: small all-reduces lower to MESH, medium ones to RDH, everything runs -----

def test_mix8_defaults_mesh_small_rdh_medium_and_every_trigger_runs(tmp_path):
    out = lower_to(FIX / "mix8.neff", tmp_path / "out", None)
    alg = _algos(out)
    assert alg[5] == ("ALLREDUCE", "MESH")  # 64 KiB fp8: below op_max_limit 1 MiB
    assert alg[0] == ("ALLREDUCE", "INTRA_RDH") and alg[1] == ("ALLREDUCE", "INTRA_RDH")
    assert {a for _op, a in alg.values()} == {"MESH", "INTRA_RDH"}
    res = meshcase.run(out, seed=3)
    assert res["checked"] == 9 * 8


def test_node64_defaults_and_mesh_rdh_triggers_run(tmp_path):
    out = lower_to(FIX / "node64.neff", tmp_path / "out", None)
    alg = _algos(out)
    assert alg[0] == ("ALLREDUCE", "MESH")  # 256 KiB
    assert alg[1] == ("ALLREDUCE", "INTRA_RDH")  # 4 MiB
    assert alg[3] == ("ALLGATHER", "INTRA_RDH")  # 4 MiB gathered
    assert alg[2][1] in ("KANGARING", "RING")  # 64 MiB: KANGARING's window (RING if not lowerable)
    res = meshexec.execute(out, seed=1, only={0, 1, 3})
    assert res["checked"] == 3 * 64


# -- SPAD entries and the event window ---------------------------------------------------------

def test_mesh_spad_entry_overlay_legs_and_events(tmp_path):
    sp = meshcase.spec([[0, 1, 2, 3, 8, 9, 10, 11]], [("all_reduce", "bf16", "add", 3000)])
    plan = meshcase.lower(sp, tmp_path / "out")
    assert plan.triggers[0].alg == EncAlgType.MESH
    for rank in (0, 9):
        rdir = tmp_path / "out" / f"rank-{rank:04d}"
        spad = np.frombuffer((rdir / "spad.bin").read_bytes(), F.SPAD_DTYPE)
        raw = (rdir / "spad.bin").read_bytes()
        # FORMATS §2 bit by bit: cc_op 1; algo_type MESH (2) | algo_sub_type MESH_TRN2 (2) << 4,
        # no trigger_next; reporter (bit 0) on the leader, rank 0, | ring_wait_complete (bit
        # 1), no network; the overlay sema_shift_offset 192 | sema_mask 0x3F << 16 (its
        # worked example: 01 22 02 00 c0 00 3f 00 on a non-leader)
        flags = (rank == 0) | 1 << 1
        want = bytes([1, EncAlgType.MESH | EncAlgMeshType.MESH_TRN2 << 4, flags, 0]) + (
            (192 | 0x3F << 16).to_bytes(4, "little"))
        assert want == bytes([1, 0x22, 0x03 if rank == 0 else 0x02, 0, 0xC0, 0, 0x3F, 0])
        assert raw == want, raw.hex()
        assert (spad["alg"][0] >> 4) & 7 == EncAlgMeshType.MESH_TRN2
        man = json.loads((rdir / "manifest.json").read_text())
        e = man["entries"][0]
        assert e["sema_shift_offset"] == 192 and e["sema_mask"] == 63 and e["channels"] == [0]
        legs = np.frombuffer((rdir / "legs.bin").read_bytes(), F.LEG_DTYPE)
        assert set(legs["channel"]) == {0} and legs["leaf"][-1] == 15
        assert {16, 17, 20} <= set(legs["leaf"][:-1]) and not set(legs["leaf"]) & set(range(1, 9))
        sems = np.frombuffer((rdir / "sem.bin").read_bytes(), F.SEM_DTYPE)
        ids = {decode_sema_address(int(a) & ((1 << 48) - 1))[2] for a in sems["addr"]}
        # dma_compl of channel 0, the TOP_SP range (0..15), else the event window
        assert ids - {16 + 3} - set(range(16)) <= set(WINDOW)
    sched = meshcase.schedule_events(plan, 9)
    # rank 9 is on device 1 with 8, 10, 11: LOCAL handshake with them, GLOBAL with 0..3
    assert sched["EVT_LOCAL_HNDSHK"]["to"] == [8, 10, 11]
    assert sched["EVT_GLOBAL_HNDSHK"]["to"] == [0, 1, 2, 3]
    assert sched["EVT_REDUCE_COPY"]["wait_val"] == 3 and sched["EVT_REDUCE_COPY_2"]["wait_val"] == 4
    assert sched["EVT_INTRA_GRP_BRDCST"]["semaphore"] == event_sem(
        EncMeshEventType.EVT_INTRA_GRP_BRDCST) == 192 + 7


# -- property: any group, size, dtype and op, forced mesh / single-step mesh ---------------------

GROUPS = [[0, 1], [0, 1, 2], [0, 1, 2, 3, 4], [0, 1, 2, 3, 4, 5, 6, 7], [0, 9], [1, 2, 9, 12],
          [0, 1, 8, 9, 16, 17], [3, 4, 5, 11, 12, 13, 14]]


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(group=st.sampled_from(GROUPS), op=st.sampled_from(["all_reduce", "all_gather",
                                                          "reduce_scatter"]),
       dtype=st.sampled_from(["bf16", "fp16", "fp8_e4", "fp8_e5", "fp32r"]),
       alu=st.sampled_from(["add", "max", "min"]), count=st.integers(1, 3000),
       single=st.booleans(), seed=st.integers(0, 50))
def test_mesh_property_any_group_size_dtype(tmp_path, group, op, dtype, alu, count, single,
                                             seed):
    n = len(group)
    if op == "reduce_scatter":
        count *= n
    algo = "single_step_mesh" if single and op == "all_reduce" else "mesh"
    out = tmp_path / f"o{seed}"
    shutil.rmtree(out, ignore_errors=True)
    meshcase.lower(meshcase.spec([group], [(op, dtype, alu, count)]), out, algo=algo)
    assert _algos(out)[0][1] == algo.upper()
    meshcase.run(out, seed=seed)


def test_several_mesh_triggers_back_to_back_reuse_the_channel_buffer(tmp_path):
    g = [0, 1, 2, 3, 8, 9]
    trig = [("all_reduce", "bf16", "add", 999), ("reduce_scatter", "fp16", "min", 600),
            ("all_gather", "fp8_e4", None, 77), ("all_reduce", "fp32r", "max", 5000),
            ("reduce_scatter", "bf16", "add", 1200), ("all_reduce", "fp16", "add", 7)]
    meshcase.lower(meshcase.spec([g], trig), tmp_path / "out", algo="mesh")
    for seed in range(3):
        assert meshcase.run(tmp_path / "out", seed=seed)["checked"] == len(trig) * len(g)


# -- the channel buffer ----------------------------------------------------------------------

def test_single_step_mesh_refused_beyond_the_channel_buffer_and_across_nodes(tmp_path):
    g = list(range(64))
    fits = 8 * 1024 * 1024 // 63 // 2  # bf16 elements: (n - 1) x bytes <= 8 MiB
    plan = meshcase.lower(meshcase.spec([g], [("all_reduce", "bf16", "add", fits)], lnc=2),
                          tmp_path / "a", algo="single_step_mesh")
    assert plan.triggers[0].alg == EncAlgType.SINGLE_STEP_MESH
    with pytest.raises(SelectionError, match="ENC_MESH_CHANNEL_BUF_MAX_SIZE"):
        meshcase.lower(meshcase.spec([g], [("all_reduce", "bf16", "add", fits + 32)], lnc=2),
                       tmp_path / "b", algo="single_step_mesh")
    with pytest.raises(SelectionError, match="intra-node only"):
        meshcase.lower(meshcase.spec([[0, 128]], [("all_reduce", "bf16", "add", 64)]),
                       tmp_path / "c", algo="single_step_mesh")


def _ssm_event_text(n: int, in_place: bool, rank: int) -> str:
    """The ``what`` of SINGLE_STEP_MESH's EVT_REDUCE_WRITE on ``rank``: one bf16 all-reduce of
    600 elements over ranks 0 .. n - 1, in place on a tmp var or from an input to an output."""
    from nrtrewrite.lower import LowerOptions, plan_lowering
    from nrtrewrite.neff.assembler import assemble_spec
    from nrtrewrite.neff.reader import read_model_bytes
    sp = meshcase.spec([list(range(n))], [("all_reduce", "bf16", "add", 600)], lnc=2)
    if in_place:
        sg = sp["subgraphs"][0]
        sg["vars"] = [{"name": "t", "type": "tmp-buf", "size": 1200}]
        body = sg["engines"]["sp"][0]["all_reduce"]
        body["src"] = body["dst"] = "t"
    model = read_model_bytes(assemble_spec(sp), path="m.neff")
    plan = plan_lowering(model, LowerOptions(algo="single_step_mesh"))
    return meshcase.schedule_events(plan, rank)["EVT_REDUCE_WRITE"]["what"]


def test_single_step_mesh_reduce_event_says_how_its_chain_runs():
    """docs/CLI.md (schedule's ``events[]``): SINGLE_STEP_MESH's EVT_REDUCE_WRITE reads
    ``reduce IN and K slot(s) into OUT`` for one link (at most 8 sources); chained (more than
    8 ranks: 1 + ceil((n - 8) / 7) links a page) it says how the links run, through OUT out
    of place, through channel-buffer slot 0 in place (docs/DESIGN.md "Mesh and RDH"). Until
    2026-12-06 an in-place chain, whose links but the last write the accumulator, read
    ``... into OUT`` as one link does."""
    assert _ssm_event_text(8, True, 3) == "reduce IN and 7 slot(s) into OUT"
    assert _ssm_event_text(8, False, 0) == "reduce IN and 7 slot(s) into OUT"
    assert _ssm_event_text(9, False, 8) == (
        "reduce IN and 8 slot(s) into OUT in 2 links a page, each after the first adding OUT "
        "and up to 7 more sources")
    for n, rank, links in ((9, 0, 2), (9, 8, 2), (16, 5, 3), (17, 16, 3)):
        assert _ssm_event_text(n, True, rank) == (
            f"reduce IN and {n - 1} slot(s) in {links} links a page: each but the last into "
            "slot 0 (the accumulator), each after the first adding slot 0 and up to 7 more "
            "sources, the last into OUT")


def test_mesh_refused_when_its_slots_overflow_the_channel_buffer(tmp_path):
    with pytest.raises(SelectionError, match="channel-buffer slot"):
        meshcase.lower(meshcase.spec([list(range(8))], [("all_reduce", "bf16", "add",
                                                         5 * 1024 * 1024)]),
                       tmp_path / "o", algo="mesh")


def test_alltoall_stays_not_lowerable():
    from nrtrewrite.select import Request, select
    from nrtrewrite.topology.model import load_topology
    topo = load_topology("trn2", world=tuple(range(8)), lnc_size=1)
    req = Request.for_op(EncOpType.ALLTOALL, DType.BF16, tuple(range(8)), 4096)
    sel = select(req, topo, strict=False)
    assert sel.policy_alg == EncAlgType.MESH and sel.alg == EncAlgType.INVALID
    assert not sel.candidate(EncAlgType.MESH).lowerable


# -- across nodes: one rank per node ---------------------------------------------------------

NODES8 = [[0, 128, 256, 384, 512, 640, 768, 896]]


def test_inter_node_mesh_goes_through_the_proxy_with_event_semaphores(tmp_path):
    trig = [("all_reduce", "bf16", "add", 5000), ("all_gather", "fp16", None, 1000),
            ("reduce_scatter", "bf16", "add", 8 * 700)]
    plan = meshcase.lower(meshcase.spec(NODES8, trig), tmp_path / "out")
    assert [tp.alg for tp in plan.triggers] == [EncAlgType.MESH] * 3
    assert plan.triggers[0].selection.legs[0].sub_type == EncAlgMeshType.FULL_MESH
    rdir = tmp_path / "out" / "rank-0128"
    ops = np.frombuffer((rdir / "net_ops.bin").read_bytes(), F.NET_OPS_INFO_DTYPE)
    sems = [decode_sema_address(int(a))[2] for a in ops["inc_recv_complete"]]
    # per trigger one op per event that arrives through the network (DESIGN.md "Network
    # hops"), in schedule order: FORMATS §7's data events of each op on the side of peers on
    # other devices or nodes, which every peer is here (one rank a node); the handshakes never
    # cross the network and EVT_REDUCE_WRITE is a label
    E = EncMeshEventType
    net_events = {"all_reduce": [E.EVT_REDUCE_COPY_2, E.EVT_INTER_GRP_BRDCST_2],
                  "reduce_scatter": [E.EVT_REDUCE_COPY_2],
                  "all_gather": [E.EVT_INTER_GRP_BRDCST]}
    want = [(t, ev) for t, (op, *_rest) in enumerate(trig) for ev in net_events[op]]
    assert sems == [event_sem(ev) for _t, ev in want]
    assert set(ops["sema_shift_offset"]) == {192}
    # FORMATS §8.1: func_rel_op_idx is the op's trigger ordinal
    assert list(ops["func_rel_op_idx"]) == [t for t, _ev in want] == [0, 0, 1, 2]
    res = meshcase.run(tmp_path / "out", seed=5)
    assert res["transfers"] > 0 and res["checked"] == 24


# -- mutations of mesh artifacts are caught -----------------------------------------------------

@pytest.fixture(scope="module")
def mesh_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("mesh") / "out"
    meshcase.lower(meshcase.spec([[0, 1, 2, 3, 4]], [("all_reduce", "bf16", "add", 2000)]), out,
                   algo="mesh")
    meshcase.run(out)
    return out


def _mutate(src: Path, dst: Path, rank: int, name: str, fn) -> Path:
    shutil.copytree(src, dst)
    p = dst / f"rank-{rank:04d}" / name
    arr = np.frombuffer(bytearray(p.read_bytes()), F.ARTIFACTS[name][0])  # padding kept
    fn(arr)
    p.write_bytes(arr.tobytes())
    return dst


def _event_waits(arr, evt):
    sid = event_sem(evt)
    return [i for i, a in enumerate(arr["addr"]) if (arr["ctrl"][i] & 0xFF) == 20
            and decode_sema_address(int(a))[2] == sid]


@pytest.mark.parametrize("what", ["wait_too_low", "wait_too_high", "inc_elsewhere", "bd_target",
                                  "skip_a_leg_sem", "cce_op"])
def test_mutated_mesh_artifacts_are_caught(mesh_out, tmp_path, what):
    def wait_low(a):
        (i,) = _event_waits(a, EncMeshEventType.EVT_REDUCE_COPY)
        a["value"][i] -= 1

    def wait_high(a):
        (i,) = _event_waits(a, EncMeshEventType.EVT_INTRA_GRP_BRDCST)
        a["value"][i] += 1

    def inc_elsewhere(a):
        sid = event_sem(EncMeshEventType.EVT_REDUCE_COPY)
        i = next(i for i, x in enumerate(a["addr"]) if (a["ctrl"][i] & 0xFF) == 21
                 and decode_sema_address(int(x) & ((1 << 48) - 1))[2] == sid)
        a["addr"][i] += 4  # the next semaphore: EVT_REDUCE_COPY_2

    def bd_target(a):
        s2m = np.flatnonzero((a["meta_ctrl"] >> 4) & 1)
        a["buf_ptr"][s2m[0]] += 64

    def skip_sem(a):
        i = int(np.flatnonzero(a["ctrl"] & 0xFF == 21)[3])
        a["value"][i] = 2

    def cce_op(a):
        a["w1"][0] ^= 2  # ADD -> MAX

    cases = {"wait_too_low": ("sem.bin", wait_low), "wait_too_high": ("sem.bin", wait_high),
             "inc_elsewhere": ("sem.bin", inc_elsewhere), "bd_target": ("dma.bin", bd_target),
             "skip_a_leg_sem": ("sem.bin", skip_sem), "cce_op": ("cce.bin", cce_op)}
    name, fn = cases[what]
    bad = _mutate(mesh_out, tmp_path / "bad", 2, name, fn)
    with pytest.raises(AssertionError):
        for seed in range(4):  # a race needs the right interleaving: a few seeds
            meshexec.execute(bad, seed=seed)
    assert meshcase.simulator_catches(bad)


@pytest.mark.parametrize("algo", ["mesh", "intra_rdh"])
def test_mix8_every_trigger_forced_to_mesh_or_rdh_runs(tmp_path, algo):
    from nrtrewrite.bundle import write_output
    from nrtrewrite.lower import LowerOptions, plan_lowering
    from nrtrewrite.neff.reader import read_model
    plan = plan_lowering(read_model(FIX / "mix8.neff"), LowerOptions(algo=algo))
    assert {tp.alg.name for tp in plan.triggers} == {algo.upper()}
    out = write_output(plan, tmp_path / "out", ranks=None, workers=1)
    assert meshexec.execute(out, seed=4)["checked"] == 9 * 8


def test_lower_prints_its_summary_for_mesh_and_rdh(tmp_path):
    from click.testing import CliRunner

    from nrtrewrite.cli import main
    res = CliRunner().invoke(main, ["lower", str(FIX / "mix8.neff"), "-o", str(tmp_path / "o"),
                                    "-j", "1"])
    assert res.exit_code == 0, res.output
    assert "MESH" in res.output and "INTRA_R" in res.output


@pytest.mark.parametrize("nodes", [2, 3, 9, 10])
@pytest.mark.parametrize("op,count", [("all_reduce", 4096), ("all_gather", 512),
                                      ("reduce_scatter", 720)])
def test_the_mesh_gateway_reserves_one_copy_more_than_it_stages(tmp_path, nodes, op, count):
    """docs/DESIGN.md "The mesh gateway": (1 + ceil(n / 8)) whole-op copies reserved, copies
    0 .. ceil((n - 1) / 8) - 1 staged in (the scatter and the first broadcast row in copy 0).
    (Mutation audit: 1 + floor(n / 8) still simulated clean, the last copy is never written.)"""
    from nrtrewrite.compose import ir as IR
    from nrtrewrite.lower import rank_entries
    group = [k * 128 for k in range(nodes)]  # one rank a node (trn2: 128 ranks a node)
    alu = None if op == "all_gather" else "add"
    plan = meshcase.lower(meshcase.spec([group], [(op, "bf16", alu, count)]), tmp_path / "o",
                          algo="mesh", topology=f"trn2:nodes={nodes}")
    # op_bytes: the larger of input and output, bf16
    op_bytes = 2 * (count * nodes if op == "all_gather" else count)
    assert plan.triggers[0].prepared.gw_bytes == (1 + -(-nodes // 8)) * op_bytes
    used = set()
    for r in group:
        (_tp, spec), = rank_entries(plan, r)
        gw0 = int(spec.views.base[spec.gw_view])
        for row in spec.ir[spec.ir["leaf"] == 16]:  # mesh_send
            if not (row["dst_peer"][:row["n_dst"]] != 0).any():
                continue  # the rank's own copy: no network
            v = spec.gw_view if row["gw_view"] == IR.NO_VIEW else int(row["gw_view"])
            assert int(spec.views.origin[v]) == 0
            k, rest = divmod(int(spec.views.base[v]) - gw0, op_bytes)
            assert rest == 0 and int(row["stop"]) * 2 <= op_bytes
            used.add(k)
    staged = 1 if op == "reduce_scatter" else -(-(nodes - 1) // 8)
    assert used == set(range(staged))
