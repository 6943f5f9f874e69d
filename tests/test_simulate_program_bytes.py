"""What a decoded program and a run keep per leg (docs/SIMULATOR.md §3 "Memory"): over hundreds
of ranks with small messages the decoded programs, not the operands, bound the run, so their
bytes a leg are bounded here from the columns they keep, and no executable leg outlives its
run (until 2026-12-06 about 400 bytes a leg were decoded, and the shadow state kept every
leg that had run, with its runs and semaphores: 2.4 KB a leg in all).
"""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np
import pytest

from nrtrewrite.simulate.artifacts import load_rank_files
from nrtrewrite.simulate.engine import Simulator
from nrtrewrite.simulate.program import Leg, LegName, decode_rank
from nrtrewrite.simulate.shadow import Access

from test_simulate import coll_spec, lower_spec

RANKS = 64

# The columns a decoded rank keeps, their widths in bytes (FORMATS §3 and §7 the fields they
# come from): a leg's step 4 (legs.bin u32), leaf 2, sdma_op 2, sem_first 4, sem_count 2,
# first run 4, runs 4, its CCE op and codes 3, sequential 1, channel 2, proxy sends 4,
# elem_start 8, num_elements 4; a semaphore record's wait flag 1, rank 4, semaphore 2,
# value 4; a merged byte run's leg 4, direction 1, stream 1, rank 4, region 4, offset 8,
# length 8.
LEG_BYTES = 4 + 2 + 2 + 4 + 2 + 4 + 4 + 3 + 1 + 2 + 4 + 8 + 4  # 44
SEM_BYTES = 1 + 4 + 2 + 4  # 11
RUN_BYTES = 4 + 1 + 1 + 4 + 4 + 8 + 8  # 30


@pytest.fixture(scope="module")
def ring64(tmp_path_factory):
    """A flat RING bf16 all-reduce of 8 elements a rank's share over 64 ranks: 2 x 63 legs
    a channel, a few bytes each."""
    out = tmp_path_factory.mktemp("ring64") / "out"
    return lower_spec(coll_spec("all_reduce", "bf16", RANKS, RANKS * 8), out)


def test_a_decoded_rank_keeps_its_columns_and_nothing_else(ring64):
    sim = Simulator(ring64)
    sim.load_manifest()
    rf = load_rank_files(sim.out, sim.rank_manifests[5])
    gc.collect()
    tracemalloc.start()
    try:
        prog = decode_rank(sim.layout, sim.triggers, rf)
        gc.collect()
        kept, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    legs, sems, runs = prog.legs, prog.s_val.size, prog.runs["len"].size
    assert legs >= 2 * (RANKS - 1)  # at least one channel's reduce-scatter and all-gather
    columns = LEG_BYTES * legs + SEM_BYTES * sems + RUN_BYTES * runs
    # a quarter for what the columns' counts leave out, and 32 KiB for the ~30 arrays'
    # headers, the entries and the dicts (decoded so, the rank keeps about 400 bytes a leg)
    assert kept <= columns * 1.25 + 32 * 1024, (kept / legs, columns / legs)


def test_no_executable_leg_outlives_its_run(ring64):
    sim = Simulator(ring64)
    res = sim.prepare()
    assert res.error is None, res.error
    sim.execute(res)
    assert res.ok, res.error
    gc.collect()
    assert sum(type(o) is Leg for o in gc.get_objects()) == 0
    # the shadow state names a leg that wrote a byte by its LegName packed into an int:
    # unpacked, who() as a Leg's
    writers = [w for sh in sim.shadows.values() for w in sh.w if w is not None
               and w.kind == Access.LEG]
    assert writers and all(type(w.who) is int for w in writers)
    name = LegName.of(writers[0].who)
    assert name.who() == Leg(name.rank, name.record, name.entry, name.channel, name.step,
                             name.leaf, 0, 0, [], [], [], [], None, False, 0).who()


def test_a_leg_name_packs_into_one_int_and_back():
    """LegName.pack: leaf u16, channel u16, step, record and entry u32 below the rank; a
    field past its width keeps the LegName itself (named the same)."""
    key = LegName.pack(1087, 70000, 3, 31, 4294967295, 65535)
    assert type(key) is int
    assert key == (((((1087 << 32 | 3) << 32 | 70000) << 32 | 4294967295) << 16 | 31) << 16
                   | 65535)
    n = LegName.of(key)
    assert (n.rank, n.record, n.entry, n.channel, n.step, n.leaf) == (
        1087, 70000, 3, 31, 4294967295, 65535)
    wide = LegName.pack(1, 2, 3, 1 << 16, 5, 999)
    assert isinstance(wide, LegName) and LegName.of(wide) is wide
    assert wide.who() == "leg 999 (rank 1, entry 3, channel 65536, step 5)"


# What the shadow state keeps (CPython 3.11, 64-bit, as tracemalloc counts it: an object 16
# bytes, a pointer 8, the collector's header 16 more): an access (shadow.Access, 5 slots)
# 16 + 5 x 8 + 16 = 72, its clock an int 28 (32 allowed), a leg's packed name an int of up to
# 6 digits of 30 bits (144 bits and the rank's, under 2^20: 2^164) 24 + 6 x 4 = 48; a run a
# boundary int 32 and its three list slots 24; a read set a tuple, 24 + 16 and 8 a reader.
ACCESS_BYTES = 72 + 32 + 48  # 152 (until 2026-12-06 a LegName object more, 80 and its ints)
RUN_BYTES_SHADOW = 32 + 3 * 8
TUPLE_BYTES, READER_BYTES = 24 + 16, 8


def test_the_shadow_state_keeps_its_records_and_nothing_else(ring64):
    """After the run, what it still holds is the shadow state (the decoded programs were
    made before tracing started, the modules a run imports by a first run; the buffers are
    freed with their triggers): bounded by its live accesses, runs and read sets at the sizes
    above."""
    assert Simulator(ring64).run().ok
    sim = Simulator(ring64)
    res = sim.prepare()
    assert res.error is None, res.error
    gc.collect()
    tracemalloc.start()
    try:
        sim.execute(res)
        gc.collect()
        kept, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert res.ok, res.error
    accesses, sets, runs, readers = set(), set(), 0, 0
    for sh in sim.shadows.values():
        runs += len(sh.w)
        accesses.update(id(w) for w in sh.w if w is not None)
        for rk in sh.r:
            if rk is not None and id(rk) not in sets:
                sets.add(id(rk))
                readers += len(rk)
                accesses.update(id(x) for x in rk)
    assert runs > 4 * RANKS and len(accesses) > 2 * RANKS
    records = (ACCESS_BYTES * len(accesses) + RUN_BYTES_SHADOW * runs
               + TUPLE_BYTES * len(sets) + READER_BYTES * readers)
    # 64 KiB for the run's other state (the verdicts, the clocks, the references)
    # 4 KiB a rank for the run's other state (its semaphore counts, 2 KiB, the tokens'
    # queues, the clocks) and 64 KiB (the verdicts, the references); a LegName object an
    # access, as until 2026-12-06, would be some 36 bytes an access more than this allows
    assert kept <= records + 4096 * RANKS + 64 * 1024, (kept, records, len(accesses), runs,
                                                         len(sets))


def test_vector_clocks_are_as_narrow_as_the_threads_steps(ring64):
    """A thread's steps bound every entry of every clock (docs/SIMULATOR.md §3 "Memory"): a
    few hundred legs a channel make int16 clocks, so a semaphore token's copy is 2 bytes a
    thread; past 32,766 steps of one thread, int32."""
    sim = Simulator(ring64)
    res = sim.prepare()
    assert res.error is None, res.error
    sim.execute(res)
    assert res.ok, res.error
    assert {v.dtype for v in sim.vc} == {np.dtype(np.int16)}
    ent = sim.programs[0].entries[0]
    c = next(iter(ent.queues))
    first, _count = ent.queues[c]
    ent.queues[c] = (first, 32766)
    assert sim._clock_dtype() is np.int16
    ent.queues[c] = (first, 32767)
    assert sim._clock_dtype() is np.int32
