"""Mutations the static checks cannot see: the decoded program is changed between
``Simulator.prepare()`` and ``execute()``, so only the dynamic semantics (data, semaphores,
happens-before, deadlock, end state) can catch them.  Every one must fail."""

from __future__ import annotations

import dataclasses

import pytest

from nrtrewrite.simulate import Simulator
from nrtrewrite.simulate.program import MARK_END

from test_simulate import coll_spec, lower_spec, rs_then_ar_spec, two_node_spec

SEND, RRS, RRC, DCS, DRS, DR = 1, 2, 3, 5, 6, 7


@pytest.fixture(scope="module")
def ar(tmp_path_factory):
    return lower_spec(coll_spec("all_reduce", "bf16", 4, 40_000),
                      tmp_path_factory.mktemp("e") / "o")


@pytest.fixture(scope="module")
def ag(tmp_path_factory):
    return lower_spec(coll_spec("all_gather", "fp16", 4, 10_000),
                      tmp_path_factory.mktemp("g") / "o")


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    return lower_spec(two_node_spec(num_elements=8192), tmp_path_factory.mktemp("n") / "o")


@pytest.fixture(scope="module")
def rs_ar(tmp_path_factory):
    """A reduce-scatter (trigger 0), then an all-reduce (trigger 1), on ranks 0..3."""
    return lower_spec(rs_then_ar_spec(), tmp_path_factory.mktemp("ra") / "o")


def run_mutated(out, rank, fn, *, seed=0, entry=0, channel=None):
    """Run ``out`` with ``fn(legs)`` applied to one queue's executable legs."""
    sim = Simulator(out, seed=seed)
    res = sim.prepare()
    assert res.error is None, res.error
    prog = sim.programs[rank]
    orig = prog.legs_of
    ch = channel if channel is not None else prog.entries[entry].channels[0]

    def legs_of(ent, c):
        legs = orig(ent, c)
        if ent.index == entry and c == ch:
            fn(legs)
        return legs
    prog.legs_of = legs_of
    sim.execute(res)
    return res


def find(legs, leaf, skip=0):
    return [i for i, leg in enumerate(legs) if leg.leaf == leaf][skip]


def assert_fails(res, *words):
    assert not res.ok
    text = " ".join([res.error or ""] + [t.detail for t in res.triggers])
    for w in words:
        assert w in text, text
    return text


def test_unmutated_run_passes(ar, ag, net):
    for out in (ar, ag, net):
        assert run_mutated(out, 1, lambda legs: None).ok


def test_a_consumer_that_does_not_wait(ar):
    def f(legs):
        legs[find(legs, RRS)].waits = []
    res = run_mutated(ar, 2, f)
    # the recv_sema token it should have consumed is left over, or the read races
    assert_fails(res)


@pytest.mark.parametrize("seed", range(4))
def test_a_consumer_that_does_not_wait_races_on_every_interleaving(ar, seed):
    """Whatever the scheduler does, reading a slot before its data-ready signal is caught
    (a happens-before race, or a read of bytes not written yet), never a lucky pass."""
    def f(legs):
        legs[find(legs, RRS, 1)].waits = []
    res = run_mutated(ar, 2, f, seed=seed)
    text = assert_fails(res)
    assert "happens-before" in text or "which nothing wrote" in text


def test_a_missing_data_ready_signal_deadlocks(ar):
    def f(legs):
        i = find(legs, SEND, 1)
        legs[i].incs = [x for x in legs[i].incs if x[0] == 1]  # drop the successor's inc
    res = run_mutated(ar, 1, f)
    text = assert_fails(res, "deadlock")
    assert "rank 2" in text and "recv_sema" in text and "waits" in text


def test_a_misdirected_signal_deadlocks_and_the_stray_token_is_named(ar):
    """Rank 1's data-ready increment lands on its successor's send_sema instead of its
    recv_sema: the successor waits forever, and the deadlock names where the token went."""
    def f(legs):
        i = find(legs, SEND, 1)
        legs[i].incs = [(r, s + 1, v) if r == 2 else (r, s, v) for r, s, v in legs[i].incs]
    res = run_mutated(ar, 1, f)
    text = assert_fails(res, "deadlock", "held but waited for by no blocked leg")
    # ... and which trigger put it there (ar has one, trigger 0)
    assert "send_sema) of rank 2 = 1 (last changed by trigger 0)" in text, text


def test_a_transfer_never_handed_to_the_net_proxy_deadlocks_naming_the_proxy(net):
    """FORMATS §7, §8: a leg hands a network transfer to its rank's net proxy by incrementing
    the channel's send_sema (channel 0: semaphore 17). net's ring is 0, 1, 64, 65 over two
    nodes: rank 1's transfers go to rank 64, its first at net_src.bin record 0. With rank
    1's legs not incrementing it, the proxy waits for its first hand-off forever, and the
    deadlock names the proxy, its record and peer and what it waits for."""
    def f(legs):
        for leg in legs:
            leg.incs = [x for x in leg.incs if x[:2] != (1, 17)]
    res = run_mutated(net, 1, f)
    assert_fails(res, "deadlock", "net proxy rank 1 channel 0 net_src.bin record 0 (to rank 64) "
                 "waits semaphore 17 (channel 0 send_sema) of rank 1 = 0 (needs 1)")


@pytest.mark.parametrize("sem", [5, 255])
def test_a_stray_increment_outside_the_channel_semaphores_names_its_trigger(rs_ar, sem):
    """FORMATS §7: semaphore 5 is one of the TOP_SP's unused ids, 255 the event window's
    event 63, which no schedule uses; neither is a channel semaphore (16..143). Rank 1's
    first leg of trigger 0 increments one on itself as well: the run ends with it at 1, and
    the error names trigger 0, whose leg put it there, though rank 1's last entry is
    trigger 1's (the channel of a semaphore named no trigger outside 16..143)."""
    sim = Simulator(rs_ar)
    assert sim.prepare().error is None
    entries = sim.programs[1].entries
    assert (entries[0].trigger.ordinal, entries[-1].trigger.ordinal) == (0, 1)

    def f(legs):
        legs[0].incs = legs[0].incs + [(1, sem, 1)]
    res = run_mutated(rs_ar, 1, f)
    assert res.error == (f"trigger 0, rank 1: semaphore {sem} of rank 1 is left at 1 at the end "
                         "of the program (1 non-zero semaphore(s); FORMATS §7: every semaphore "
                         "returns to 0)")


def test_an_extra_signal_is_left_over(ar):
    def f(legs):
        i = find(legs, SEND)
        legs[i].incs = legs[i].incs + [legs[i].incs[-1]]
    res = run_mutated(ar, 1, f)
    assert_fails(res)


def test_reading_the_wrong_source_bytes(ar):
    def f(legs):
        leg = legs[find(legs, RRS, 1)]
        r, reg, off, n = leg.srcs[1][0]
        leg.srcs[1][0] = (r, reg, off + 2, n)  # the rank's own input, one element further
    res = run_mutated(ar, 3, f)
    assert_fails(res, "differ")


def test_writing_the_wrong_chunk(ar):
    def f(legs):
        leg = legs[find(legs, DRS)]
        r, reg, off, n = leg.dsts[0][0]
        leg.dsts[0][0] = (r, reg, off + n, n)  # the next chunk of the successor's output
    res = run_mutated(ar, 0, f)
    assert_fails(res)


def test_two_unordered_writers(ag):
    """Rank 1 also writes the block its predecessor writes into rank 2: a write-write race
    (or a data race with the consumer), whatever the interleaving."""
    def f(legs):
        leg = legs[find(legs, DRS)]
        other = legs[find(legs, DRS, 2)]
        leg.dsts[0] = list(other.dsts[0])
    res = run_mutated(ag, 1, f)
    assert_fails(res)


def test_reordered_queue(ar):
    def f(legs):
        i = find(legs, RRS, 1)
        legs[i], legs[i + 1] = legs[i + 1], legs[i]
    res = run_mutated(ar, 2, f, seed=3)
    assert_fails(res)


def test_a_skipped_reduction(ar):
    def f(legs):
        leg = legs[find(legs, RRS)]
        leg.cce = None  # a copy of the partial instead of partial + own input
        leg.srcs = leg.srcs[:1]
    res = run_mutated(ar, 1, f)
    assert_fails(res, "differ")


def test_a_wrong_reduce_op(ar):
    def f(legs):
        leg = legs[find(legs, RRC)]
        leg.cce = (2,) + leg.cce[1:]  # MAX instead of ADD
    res = run_mutated(ar, 2, f)
    assert_fails(res, "differ")


def test_writing_outside_the_trigger_buffers(ar):
    def f(legs):
        leg = legs[find(legs, RRC)]
        r, reg, off, n = leg.srcs[1][0]  # the input var: not an output of this trigger
        leg.dsts[0][0] = (r, reg, off, n)
    res = run_mutated(ar, 1, f)
    assert_fails(res, "outside trigger 0")


def test_mark_end_that_does_not_wait_for_every_leg(ar):
    def f(legs):
        end = legs[-1]
        assert end.leaf == MARK_END
        r, s, v = end.waits[0]
        end.waits = [(r, s, v - 1)]
    res = run_mutated(ar, 0, f)
    assert_fails(res)


def test_a_reduce_sums_a_ninth_source_too():
    """FORMATS.md §3.1: a reduce leg reduces all its source streams.  No emitted output
    reaches the engine with more than 8 (W3 num_sources 1..8, §6, is refused statically,
    test_mutation.py), so this runs ``Simulator._move`` alone: ADD of 2**0 .. 2**8 in FP32R
    is 2**9 - 1 = 511, exact; an engine that stopped at 8 sources would give 255, and a
    nine-source tile whose first eight sum right would pass if that static check were lost."""
    import numpy as np

    from nrtrewrite.codes import DType
    from test_simulate_numerics import ADD, engine_reduce
    sources = [np.full(4, 2.0 ** k, np.float32) for k in range(9)]
    assert engine_reduce(ADD, DType.FP32R, sources).tolist() == [511.0] * 4


# ---------------------------------------------------------------------------
# the net proxy

def run_proxy_mutated(out, fn, seed=0):
    sim = Simulator(out, seed=seed)
    res = sim.prepare()
    assert res.error is None
    key = sorted(sim.transfers)[0]
    sim.transfers[key] = fn(sim.transfers[key])
    sim.execute(res)
    return res


def test_proxy_without_the_send_handshake(net):
    def f(lst):
        return [dataclasses.replace(t, first=False) if i == 2 else t for i, t in enumerate(lst)]
    assert_fails(run_proxy_mutated(net, f))


def test_proxy_writes_the_wrong_place(net):
    def f(lst):
        t = lst[1]
        return [dataclasses.replace(t, dst=(t.dst[0], t.dst[1], t.dst[2] + 2))
                if i == 1 else x for i, x in enumerate(lst)]
    assert_fails(run_proxy_mutated(net, f))


def test_proxy_drops_a_transfer(net):
    def f(lst):
        return lst[:3] + lst[4:]
    assert_fails(run_proxy_mutated(net, f))


def test_proxy_does_not_signal(net):
    def f(lst):
        return [dataclasses.replace(t, notify=None, complete=False) if i == 0 else t
                for i, t in enumerate(lst)]
    assert_fails(run_proxy_mutated(net, f), "deadlock")


# ---------------------------------------------------------------------------
# the tile-by-tile path

def test_tile_by_tile_execution_gives_the_same_result(ar):
    """Running every data leg tile by tile (the path for overlapping streams) changes nothing
    on a correct program."""
    def f(legs):
        for leg in legs:
            if leg.srcs:
                leg.sequential = True
                leg.tiles = [(leg.srcs, leg.dsts)]
    for rank in range(4):
        assert run_mutated(ar, rank, f, seed=rank).ok


def test_overlapping_streams_are_detected_and_run_in_order(ar, tmp_path):
    """A reduce leg whose destination is its own RECV source: decoded as sequential, and the
    successor never gets its partial."""
    import json
    import shutil

    import numpy as np

    from nrtrewrite.emit import formats as F
    from test_simulate import cli

    out = tmp_path / "o"
    shutil.copytree(ar, out)
    rdir = out / "rank-0001"
    legs = np.fromfile(rdir / "legs.bin", F.LEG_DTYPE)
    bds = np.fromfile(rdir / "dma.bin", F.BD_DTYPE)
    g = int(np.flatnonzero(legs["leaf"] == RRS)[0])
    first, count = int(legs["dma_first"][g]), int(legs["dma_count"][g])
    meta = bds["meta_ctrl"][first:first + count]
    src0 = first + int(np.flatnonzero(((meta >> 4) & 1 == 0) & ((meta >> 8) & 31 == 0))[0])
    dst0 = first + int(np.flatnonzero((meta >> 4) & 1 == 1)[0])
    bds["buf_ptr"][dst0] = bds["buf_ptr"][src0]
    (rdir / "dma.bin").write_bytes(bds.tobytes())
    sim = Simulator(out)
    res = sim.prepare()
    assert res.error is None, res.error  # the static checks take it: the run must catch it
    assert bool(sim.programs[1].l_seq[g])  # decoded as sequential (its source is its output)
    sim.execute(res)
    assert not res.ok
    assert cli("simulate", out, "--ignore-checksums").exit_code == 1
    assert json  # noqa: the module import is used by the helpers above


@pytest.fixture(scope="module")
def two_ag(tmp_path_factory):
    """Two all-gathers over ranks 0..3 (one subgraph), lowered with the ring: each writes
    its peers' own output, so no access of one trigger can conflict with the other's."""
    from test_simulate import _subgraphs_spec
    spec = _subgraphs_spec([([[0, 1, 2, 3]], [("all_gather", "bf16", "add", 4096),
                                              ("all_gather", "bf16", "add", 4096)])])
    return lower_spec(spec, tmp_path_factory.mktemp("ag2") / "o")


def _without_rank1_handshake(out, seed: int, check: bool = True):
    """Run ``out`` with rank 1's second entry freed of its handshake: its waits on
    ``entry_post`` (9) dropped, and the peers' posts to it in that entry dropped too, so
    every count still balances and the end state is clean."""
    from nrtrewrite.simulate.program import MARK_COMPLETE
    sim = Simulator(out, seed=seed)
    if not check:
        sim._check_peers_started = lambda q, leg, vc: None
    res = sim.prepare()
    assert res.error is None, res.error
    for rank, prog in sim.programs.items():
        orig = prog.legs_of

        def legs_of(ent, c, orig=orig, rank=rank):
            legs = orig(ent, c)
            if ent.index == 1:
                for leg in legs:
                    if leg.leaf != MARK_COMPLETE:
                        continue
                    if rank == 1:
                        leg.waits = [w for w in leg.waits if w[1] != 9]
                    else:
                        leg.incs = [x for x in leg.incs if (x[0], x[1]) != (1, 9)]
            return legs
        prog.legs_of = legs_of
    sim.execute(res)
    return res


@pytest.mark.parametrize("seed", range(3))
def test_a_leg_that_touches_a_peer_before_it_started_the_entry(two_ag, seed):
    """docs/FORMATS.md §3.4: rank 1's second entry, freed of its handshake, writes into a
    peer that may still be in its first entry.  No access conflicts and every semaphore
    balances, so without the start-ordering check the run passes; with it, it fails at
    every interleaving (nothing else orders the peer's start before the write)."""
    assert _without_rank1_handshake(two_ag, seed, check=False).ok
    text = assert_fails(_without_rank1_handshake(two_ag, seed),
                        "no happens-before ordering after rank", "of trigger 1",
                        "entry handshake")
    assert "(rank 1, entry 1" in text


def test_the_handshake_orders_every_peer_access_in_a_clean_run(two_ag):
    for seed in range(3):
        assert run_mutated(two_ag, 1, lambda legs: None, seed=seed).ok
