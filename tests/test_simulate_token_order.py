"""Semaphores with several producers (docs/SIMULATOR.md §6 "Which increment a wait takes").

A semaphore is a count: a wait takes tokens, not a producer's tokens.  When several actors
increase one semaphore and it is waited on more than once, which increment each wait gets
can depend on the interleaving; the run hands them out oldest first in its own order, so it
must refuse such a wiring unless the order is forced.  The reproducers are an adversarial
review's (51b): outputs of ``lower`` whose semaphore ids were renamed consistently on every
rank, the renaming done here on the bytes (FORMATS §7, §10: a ``sem.bin`` record's ``addr``
is ``... + w + 4 * id``; §4: a 0xBF word's byte 5 is the ``wait_idx`` of its first wait, byte 4
its ``wait_mode`` 20).  Each was accepted at some seeds before the check (named per case)
and is refused at every seed now.  The outputs as ``lower`` writes them, with their
legitimately shared semaphores (the entry handshake's ``entry_post``, a mesh reduce's
EVT_REDUCE_COPY that every peer increases once), still simulate clean.

Below, the same review's two ``neigh`` messages (docs/SIMULATOR.md §2): the reason names
what the leg does and the value it should have, and a network-bound leg that lost its
``send_sema`` increment is refused for that increment.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from nrtrewrite.emit.formats import (LEG_DTYPE, NET_OPS_INFO_DTYPE, NET_SRC_ADDR_DTYPE,
                                     SEM_DTYPE)
from nrtrewrite.simulate import simulate_output

from test_simulate import lower_spec

SEVERAL = "is increased by several producers and waited on more than once"


def ar4_spec() -> dict:
    """Two all-reduces of 4 KiB of bf16 on ranks 0..3 (the review's ar4.neff)."""
    v = [{"name": n, "type": t, "size": 4096}
         for n, t in (("a_in", "input"), ("a_out", "output"), ("b_in", "input"),
                      ("b_out", "output"))]
    ar = [{"all_reduce": {"dtype": "bf16", "op": "add", "src": s, "dst": d,
                          "num_elements": 2048}} for s, d in (("a_in", "a_out"), ("b_in", "b_out"))]
    return {"header": {"pkg_version": 2, "name": "ar4", "lnc_size": 1},
            "subgraphs": [{"name": "sg00", "vars": v, "replica_groups": [[0, 1, 2, 3]],
                           "engines": {"sp": ar}}]}


def ov_spec() -> dict:
    """Four subgraphs of two all-reduces of pairs, alternating the pairs [[0, 1], [2, 3]] and
    [[0, 2], [1, 3]] (the review's ov.neff): the handshakes alternate between the entry_post
    slots 9 and 176 (FORMATS §3.4)."""
    sgs = []
    for k, groups in enumerate(([[0, 1], [2, 3]], [[0, 2], [1, 3]]) * 2):
        x = "abcd"[k]
        sgs.append({
            "name": f"sg{k:02d}",
            "vars": [{"name": f"{x}_in", "type": "input", "size": 2048},
                     {"name": f"{x}_out", "type": "output", "size": 2048}],
            "replica_groups": groups,
            "engines": {"sp": [{"all_reduce": {"dtype": "bf16", "op": "add", "group": g,
                                               "src": f"{x}_in", "dst": f"{x}_out",
                                               "num_elements": 1024}} for g in (0, 1)]}})
    return {"header": {"pkg_version": 2, "name": "ov", "lnc_size": 1}, "subgraphs": sgs}


def rename(out: Path, frm: int, to: int) -> int:
    """Semaphore ``frm`` becomes ``to`` in every sem.bin record and 0xBF ``wait_idx`` of
    every rank; returns how many records changed."""
    n = 0
    for d in sorted(out.glob("rank-*")):
        sem = np.fromfile(d / "sem.bin", SEM_DTYPE)
        hit = (sem["addr"] & 0x3FF) // 4 == frm
        sem["addr"][hit] = sem["addr"][hit] - np.uint64(4 * frm) + np.uint64(4 * to)
        sem.tofile(d / "sem.bin")
        words = np.fromfile(d / "sb2sb.bin", np.uint8).reshape(-1, 64)
        w = (words[:, 4] == 20) & (words[:, 5] == frm)
        words[w, 5] = to
        words.tofile(d / "sb2sb.bin")
        n += int(hit.sum())
    return n


@pytest.fixture(scope="module")
def outs(tmp_path_factory):
    base = tmp_path_factory.mktemp("tok")
    return {"rdh": lower_spec(ar4_spec(), base / "rdh", algo="rdh"),
            "mesh": lower_spec(ar4_spec(), base / "mesh", algo="mesh"),
            "ring": lower_spec(ov_spec(), base / "ov", algo="ring")}


def _copy(src: Path, dst: Path) -> Path:
    import shutil
    shutil.copytree(src, dst)
    return dst


# (output, semaphore renamed, into, seeds; the seeds the simulator accepted before the check
# among them, from the review and rerun on the code before it)
CASES = [
    # INTRA_RDH: EVT_RH_STEP_1 (192 + 24) waited as step 0's (192 + 23): each rank's two
    # recursive-halving partners increase one semaphore it waits on twice
    ("rdh", 216, 215, [0, 1, 4, 7, 9]),  # accepted at 0, 4, 7, 9
    # INTRA_RDH: EVT_RD_STEP_1 (227) into EVT_RD_STEP_0 (226)
    ("rdh", 227, 226, [0, 9, 12]),  # accepted at 9 and 12
    # MESH: EVT_INTRA_GRP_BRDCST (192 + 7) into EVT_REDUCE_COPY (192 + 8)
    ("mesh", 199, 200, [0, 2, 10]),  # accepted at 2 and 10
    # RING: the entry_post slot 176 merged into 9: the pairs' handshakes of consecutive
    # subgraphs count on one semaphore, whose posts come from two different peers
    ("ring", 176, 9, [0, 1, 3, 5]),  # accepted at 0, 1, 5
]


@pytest.mark.parametrize("name,frm,to,seeds", CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in CASES])
def test_a_shared_semaphore_whose_token_order_is_not_forced_is_refused_at_every_seed(
        outs, tmp_path, name, frm, to, seeds):
    out = _copy(outs[name], tmp_path / "o")
    assert rename(out, frm, to) > 0
    msgs = []
    for seed in seeds:
        res = simulate_output(out, seed=seed)
        assert not res.ok, (seed, res.error)
        msgs.append(res.error)
    # where no earlier race or start-order fault stops the run, the token order is named
    assert any(SEVERAL in m for m in msgs), msgs


def test_the_token_order_message_names_rank_semaphore_producer_and_waits(outs, tmp_path):
    out = _copy(outs["rdh"], tmp_path / "o")
    rename(out, 216, 215)
    res = simulate_output(out, seed=0)
    assert res.error is not None and SEVERAL in res.error, res.error
    # the semaphore with its id and FORMATS name, the waiting leg, the producer's leg and
    # the earlier wait that could have taken its increment
    assert "semaphore 215 (event 23, EVT_RH_STEP_0) of rank " in res.error
    assert res.error.count("leg rdh_reduce (rank ") == 3, res.error
    assert "which is not ordered after an earlier wait that took another producer's" \
        in res.error
    assert "(docs/SIMULATOR.md §6)" in res.error


NODES8 = [128 * i for i in range(8)]  # one rank on each of eight trn2 nodes (LNC 1)


def rename_net_ops(out: Path, frm: int, to: int) -> int:
    """Semaphore ``frm`` becomes ``to`` in every ``net_ops.bin`` op's ``inc_recv_handshake``
    and ``inc_recv_complete`` (FORMATS §8.1: INC-window addresses, the id at ``4 * id`` as
    in sem.bin); returns how many ops changed."""
    n = 0
    for d in sorted(out.glob("rank-*")):
        ops = np.fromfile(d / "net_ops.bin", NET_OPS_INFO_DTYPE)
        for f in ("inc_recv_handshake", "inc_recv_complete"):
            hit = (ops[f] & 0x3FF) // 4 == frm
            ops[f][hit] = ops[f][hit] - np.uint64(4 * frm) + np.uint64(4 * to)
            n += int(hit.sum()) if f == "inc_recv_complete" else 0
        ops.tofile(d / "net_ops.bin")
    return n


def test_a_net_proxy_producer_is_named_as_the_other_proxy_lines_name_it(tmp_path):
    """ar4's two all-reduces over one rank on each of eight trn2 nodes, INTER_RDH: every
    exchange goes through the network, so every event a rank waits on is increased by a net
    proxy (FORMATS §8.1: an op's receives land on its event).  Recursive halving's steps 0,
    1, 2 pair a rank with the rank at node index xor 4, 2, 1 and land on EVT_RH_STEP_0..2
    (events 23..25: semaphores 215..217, FORMATS §7).  EVT_RH_STEP_2 renamed into
    EVT_RH_STEP_0 on every rank (sem.bin, the 0xBF waits and the ops' inc_recv_*; the ops of
    an entry stay apart, FORMATS §8 "Ops", as 215, 216, 215): semaphore 215 of a rank is
    increased by the proxies of its step-0 and its step-2 partner and waited twice in an
    entry; neither partner's transfer is ordered after the rank's first wait (the step-0
    partner sends at the entry's start, the step-2 partner after its own steps 0 and 1 with
    other ranks), so the second wait takes an increment that the first, which took the other
    producer's, could have taken: refused at every seed (SIMULATOR §6).  The producer is a net proxy
    transfer, named as the race and mismatch lines name one, with the receiving rank (until
    2026-12-07 `net proxy rank P channel 0 net_src.bin record N (trigger 0)`, no receiver):
    the partner's first transmit entry addressed to the refusing rank (FORMATS §8.2
    ``dst_rank``; trigger 0's entries come first)."""
    spec = ar4_spec()
    spec["header"]["name"] = "x8"
    spec["subgraphs"][0]["replica_groups"] = [NODES8]
    out = lower_spec(spec, tmp_path / "o", algo="inter_rdh", topology="trn2:nodes=8")
    assert rename(out, 217, 215) > 0 and rename_net_ops(out, 217, 215) > 0
    for seed in (0, 1):
        res = simulate_output(out, seed=seed)
        assert res.error is not None and SEVERAL in res.error, (seed, res.error)
        m = re.match(r"trigger 0, rank (\d+): semaphore 215 \(event 23, EVT_RH_STEP_0\) of rank "
                     r"(\d+) .* takes the one of net proxy transfer \(rank (\d+) -> (\d+), "
                     r"channel 0, net_src\.bin record (\d+)\), which is not ordered after",
                     res.error)
        assert m is not None, (seed, res.error)
        r, r2, p, to, rec = map(int, m.groups())
        assert r == r2 == to and r in NODES8, res.error
        assert NODES8.index(p) in (NODES8.index(r) ^ 4, NODES8.index(r) ^ 1), res.error
        src = np.fromfile(out / f"rank-{p:04d}" / "net_src.bin", NET_SRC_ADDR_DTYPE)
        assert rec == int(np.flatnonzero(src["dst_rank"] == r)[0]), res.error


@pytest.mark.parametrize("name", ["rdh", "mesh", "ring"])
def test_shared_semaphores_as_lower_writes_them_pass(outs, name):
    """entry_post (several peers post it), mesh events (every peer increases its block's
    event once) and the RDH events: several producers, each wait's tokens forced.  In the
    ring output a channel's recv_sema has one ring predecessor per pair (rank 1's: rank 0,
    then rank 3), and the predecessor runs ahead: a wait takes an increment not ordered
    after the wait before, which took the same producer's, so in no order could it have
    taken this one instead (refused by a first, stricter version of the check)."""
    for seed in (0, 1, 2):
        res = simulate_output(outs[name], seed=seed)
        assert res.ok, (seed, res.error)


# ------------------------------------------------------------------ neigh (legs.bin field 15)

def _set_rank_files(d: Path, **arrays) -> None:
    """Write the rank's files and the byte and record counts its manifest gives them."""
    man = json.loads((d / "manifest.json").read_text())
    for fname, arr in arrays.items():
        arr.tofile(d / fname)
        man["files"][fname]["bytes"] = arr.nbytes
        man["files"][fname]["records"] = len(arr)
    (d / "manifest.json").write_text(json.dumps(man, indent=1, sort_keys=True) + "\n")


def test_neigh_message_says_what_the_leg_does_and_the_value_it_should_have(outs, tmp_path):
    """FORMATS §3 neigh: a mark_complete leg that waits (entry_post) is 2 PREV; written 0 it
    is refused naming PREV and why (until now: 'that does not should be 2')."""
    out = _copy(outs["mesh"], tmp_path / "o")
    d = out / "rank-0001"
    legs = np.fromfile(d / "legs.bin", LEG_DTYPE)
    # rank 1's first entry: mark_complete legs (leaf 22), the one that waits is PREV
    mc = np.flatnonzero((legs["leaf"] == 22) & (legs["neigh"] == 2))
    i = int(mc[0])
    legs["neigh"][i] = 0
    legs.tofile(d / "legs.bin")
    res = simulate_output(out)
    assert res.error is not None
    assert res.error.endswith(
        f"record {i}: neigh for a mark_complete leg that reaches no other rank and waits "
        "without moving data should be 2 (PREV), not 0"), res.error


def x2_mesh(tmp_path: Path) -> Path:
    """ar4's two all-reduces over ranks 0 and 128 (two trn2 nodes) lowered as MESH: every
    leg of rank 128 that sends is network-bound (FORMATS §8)."""
    spec = ar4_spec()
    spec["header"]["name"] = "x2"
    spec["subgraphs"][0]["replica_groups"] = [[0, 128]]
    return lower_spec(spec, tmp_path / "o", algo="mesh", topology="trn2:nodes=2")


def test_a_network_bound_mesh_send_without_its_send_sema_increment_names_it(tmp_path):
    """FORMATS §8: a network-bound leg writes only its own gw region and increments its own
    send_sema for the net proxy.  With that increment dropped, the fault is the missing
    increment, not neigh (which stays 1)."""
    out = x2_mesh(tmp_path)
    d = out / "rank-0128"
    legs = np.fromfile(d / "legs.bin", LEG_DTYPE)
    sem = np.fromfile(d / "sem.bin", SEM_DTYPE)
    send_sema = 16 + 4 * 0 + 1  # channel 0's send_sema (FORMATS §7)
    sid = (sem["addr"] & 0x3FF) // 4
    inc = (sem["ctrl"] & 0xFF) == 21
    k = int(np.flatnonzero(inc & (sid == send_sema))[0])
    i = int(np.flatnonzero((legs["sem_first"] <= k)
                           & (k < legs["sem_first"] + legs["sem_count"]))[0])
    assert legs["leaf"][i] == 16 and legs["neigh"][i] == 1  # mesh_send, NEXT
    legs["sem_count"][i] -= 1
    legs["sem_first"][i + 1:] -= 1
    _set_rank_files(d, **{"legs.bin": legs, "sem.bin": np.delete(sem, k)})
    res = simulate_output(out)
    assert res.error is not None
    assert (f"field sem_count, rank 128, artifact legs.bin, record {i}: mesh_send leg "
            f"(legs.bin record {i}) writes this rank's gw region for the net proxy but has no "
            "increment of its own send_sema (semaphore 17 (channel 0 send_sema))") \
        in res.error, res.error


def test_a_network_bound_legs_neigh_says_it_hands_its_data_to_the_net_proxy(tmp_path):
    """FORMATS §3 neigh: NEXT when a leg touches another rank - writes, reads, increments,
    or hands data to the net proxy (SIMULATOR §2).  A network-bound mesh_send writes only its
    own gw region and increments its own send_sema: written 0, it is refused naming NEXT and
    saying it hands its data to the proxy, not that it reaches another rank (review 51y)."""
    out = x2_mesh(tmp_path)
    d = out / "rank-0128"
    legs = np.fromfile(d / "legs.bin", LEG_DTYPE)
    i = int(np.flatnonzero((legs["leaf"] == 16) & (legs["neigh"] == 1))[0])  # mesh_send
    legs["neigh"][i] = 0
    _set_rank_files(d, **{"legs.bin": legs})
    res = simulate_output(out)
    assert res.error is not None
    assert res.error.endswith(
        f"record {i}: neigh for a mesh_send leg that hands its data to the net proxy should "
        "be 1 (NEXT), not 0"), res.error
