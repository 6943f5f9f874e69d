"""What a decoded program and a run keep per leg (docs/SIMULATOR.md §3 "Memory"): over hundreds
of ranks with small messages the decoded programs, not the operands, bound the run, so their
bytes a leg are bounded here from the columns they keep, and no executable leg outlives its
run (until 2026-12-06 about 400 bytes a leg were decoded, and the shadow state kept every
leg that had run, with its runs and semaphores: 2.4 KB a leg in all).
"""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from nrtrewrite.simulate.artifacts import load_rank_files
from nrtrewrite.simulate.engine import Simulator
from nrtrewrite.simulate.program import Leg, LegName, decode_rank

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
    # the shadow state names a leg that wrote a byte by a LegName: who() as a Leg's
    writers = [w for sh in sim.shadows.values() for w in sh.w if w is not None
               and isinstance(w.who, LegName)]
    assert writers
    name = writers[0].who
    assert name.who() == Leg(name.rank, name.record, name.entry, name.channel, name.step,
                             name.leaf, 0, 0, [], [], [], [], None, False, 0).who()
