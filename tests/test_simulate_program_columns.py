"""The decoded program's narrow columns (nrtrewrite/simulate/program.py, docs/SIMULATOR.md §3
"Memory": each column as narrow as its values) each hold the largest value ``lower`` writes
in them, and a queue's lazily built legs (``QueueLegs``) behave as the list its docstring
promises.  Each test was written against a mutant that survived the simulator's tests (a
column one width narrower, a freed leg not remembered); the expected values come from
docs/FORMATS.md and the seeds, not from the code's output:

* ``runs["off"]``: a byte offset within a region is 64 bits (an operand at 4 GiB + 2);
* ``l_channel``: channel ids 0..31 (FORMATS §3 ``channel``), so the deadlock proof's
  (semaphore, entry, channel) keys tell channels 1, 2, 3 apart;
* ``s_sid``: semaphore ids 0..255 (FORMATS §7; the kangaring peer semaphores 144 + c);
* ``l_run_first``: an index into one rank's merged byte runs, past 32,767 on a rank with
  many legs."""

from __future__ import annotations

import numpy as np
import pytest

import nrtrewrite.select as S
from nrtrewrite.emit import formats as F
from nrtrewrite.simulate import simulate_output
from nrtrewrite.simulate.engine import Simulator
from nrtrewrite.simulate.wiring import unproven
from test_simulate import coll_spec, lower_spec
from test_simulate_hier_checks import kr16_out  # noqa: F401  (fixture)

G = 1 << 30


def _spec(n: int, *, src_off: int, dst_off: int, size: int, num_elements: int) -> dict:
    return {"header": {"pkg_version": 2, "name": "big", "lnc_size": 1},
            "subgraphs": [{"name": "sg00",
                           "vars": [{"name": "x_in", "type": "input", "size": size},
                                    {"name": "x_out", "type": "output", "size": size}],
                           "replica_groups": [list(range(n))],
                           "engines": {"sp": ["nop", {"all_reduce": {
                               "dtype": "bf16", "op": "add",
                               "src": {"var": "x_in", "offset": src_off},
                               "dst": {"var": "x_out", "offset": dst_off},
                               "num_elements": num_elements}}]}}]}


def test_byte_offsets_past_4_gib_are_simulated(tmp_path):
    """A 4-rank bf16 all-reduce of 40,000 elements whose operands start at 4 GiB + 2 and
    4 GiB + 6 of 5 GiB vars: the runs' offsets exceed 2^31 (and 2^32), and the run matches
    the reference (with 32-bit offsets it read and wrote 4 GiB lower)."""
    out = lower_spec(_spec(4, src_off=4 * G + 2, dst_off=4 * G + 6, size=5 * G,
                           num_elements=40_000), tmp_path / "o")
    sim = Simulator(out)
    res = sim.prepare()
    assert res.error is None, res.error
    off = sim.programs[0].runs["off"]
    assert off.dtype == np.int64 and int(off.max()) >= 4 * G
    sim.execute(res)
    assert res.ok, res.error
    assert [t.status for t in res.triggers] == ["match"]


def _four_channel_ring(tmp_path, monkeypatch):
    monkeypatch.setattr(S, "choose_channels", lambda *a, **k: (4, "test: four channels"))
    return lower_spec(coll_spec("all_reduce", "bf16", 4, 1 << 16), tmp_path / "o", algo="ring")


def test_the_channel_column_is_legs_bin_channel_and_keys_the_deadlock_proof(tmp_path,
                                                                         monkeypatch):
    """A 4-channel ring all-reduce over 4 ranks: every decoded leg's channel is its legs.bin
    record's `channel` byte (FORMATS §3), all of 0..3 present.  The entry handshake's release
    (FORMATS §3.4: channel 0 raises `entry_go`, semaphore 8, by channels - 1 = 3; channels
    1..3 each wait for 1) is proven; made 4 in the decoded program, the entry gives 4 where
    its three waiters take 3 and the proof says so: it needs channels 1, 2 and 3 told apart
    (merged into one channel, the semaphore has a single waiter and is proven whatever it
    is given)."""
    out = _four_channel_ring(tmp_path, monkeypatch)
    sim = Simulator(out)
    res = sim.prepare()
    assert res.error is None, res.error
    for r, prog in sim.programs.items():
        lg = np.fromfile(out / f"rank-{r:04d}" / "legs.bin", F.LEG_DTYPE)
        assert prog.l_channel.tolist() == lg["channel"].tolist()
        assert sorted(set(lg["channel"].tolist())) == [0, 1, 2, 3]
    assert unproven(sim.programs, {}) is None
    p = sim.programs[0]
    release = np.flatnonzero(~p.s_wait.astype(bool) & (p.s_sid == 8))
    assert p.s_val[release].tolist() == [3]
    p.s_val[release[0]] = 4
    assert unproven(sim.programs, {}) == (
        "semaphore 8 of rank 0: entry 0 increases it by 4 and its waits take 3, so a later "
        "entry whose channels share its tokens may not start at 0")


def test_a_kangaring_deadlock_names_the_peer_semaphore_144(kr16_out):  # noqa: F811
    """kr16_out (test_simulate_hier_checks.py): 16 ranks, one channel, unit [0, 4, 5, 1] with
    primary 0. Its secondaries 4, 5 and 1 each raise rank 0's peer semaphore 144 + 0 by 1
    (FORMATS §3.3 `peer_post`) and rank 0's `peer_wait` waits for it to reach 3. With rank 5's
    post made 0 in the decoded program the count stops at 2 and the deadlock names semaphore
    144 (an id past 127: the column is wider than a signed byte)."""
    sim = Simulator(kr16_out)
    res = sim.prepare()
    assert res.error is None, res.error
    p = sim.programs[5]
    post = np.flatnonzero(~p.s_wait.astype(bool) & (p.s_sid == 144) & (p.s_rank == 0))
    assert post.size == 1 and p.s_val[post].tolist() == [1]
    p.s_val[post[0]] = 0
    sim.execute(res)
    assert not res.ok and "deadlock: work remains but nothing can run" in res.error
    assert "waits semaphore 144 of rank 0 = 2 (needs 3)" in res.error


def test_a_rank_with_more_than_32767_byte_runs(tmp_path, monkeypatch):
    """80 bf16 all-reduces of 4096 elements over 2 ranks, each on 32 channels (the most,
    FORMATS §3 `channel` 0..31): every channel program of a 2-rank ring moves a chunk half
    per leg, and rank 0 holds over 32,767 merged byte runs, so its later legs' first run is
    past a signed 16-bit index. Every trigger matches."""
    monkeypatch.setattr(S, "choose_channels", lambda *a, **k: (32, "test: 32 channels"))
    spec = coll_spec("all_reduce", "bf16", 2, 4096)
    sp = spec["subgraphs"][0]["engines"]["sp"]
    spec["subgraphs"][0]["engines"]["sp"] = ["nop"] + [sp[1]] * 80
    out = lower_spec(spec, tmp_path / "o", algo="ring")
    sim = Simulator(out)
    res = sim.prepare()
    assert res.error is None, res.error
    assert sim.programs[0].runs["off"].size > 32_767
    sim.execute(res)
    assert res.ok, res.error
    assert {t.status for t in res.triggers} == {"match"} and len(res.triggers) == 80


# -- QueueLegs: a list of legs -----------------------------------------------------------------

def _queue(tmp_path, monkeypatch):
    out = _four_channel_ring(tmp_path, monkeypatch)
    sim = Simulator(out)
    res = sim.prepare()
    assert res.error is None, res.error
    prog = sim.programs[0]
    ent = prog.entries[0]
    return prog, ent, prog.legs_of(ent, 1)


def test_queue_legs_read_set_and_swap_as_a_list(tmp_path, monkeypatch):
    """QueueLegs' docstring: reading, replacing and swapping legs work as on a list; a leg
    set to None reads None until replaced, whether or not it was built before."""
    prog, ent, q = _queue(tmp_path, monkeypatch)
    first, count = ent.queues[1]
    assert len(q) == count and count > 3
    fresh = prog.build_legs(ent, 1, first, count)  # an independent build of the same legs
    assert [leg.record for leg in q] == [first + k for k in range(count)]
    assert [leg.step for leg in q] == [leg.step for leg in fresh]
    assert q[-1].record == first + count - 1 and [x.record for x in q[1:3]] == [first + 1,
                                                                              first + 2]
    with pytest.raises(IndexError):
        q[count]
    # set to None: one built (read above) and one never read in a new queue
    q[1] = None
    assert q[1] is None and q[1] is None  # stays None: not rebuilt
    q2 = prog.legs_of(ent, 1)
    q2[count - 1] = None
    assert q2[0].record == first  # (builds a batch from 0: stops at the freed leg)
    assert q2[count - 1] is None and list(q2)[count - 1] is None
    # replaced, then swapped
    q[1] = fresh[1]
    assert q[1] is fresh[1]
    q[0], q[2] = q[2], q[0]
    assert (q[0].record, q[2].record) == (first + 2, first)
    # take: the leg, then None here (the engine's queue holds it)
    leg = q.take(3)
    assert leg.record == first + 3 and q[3] is None
