"""The semaphore wiring check (nrtrewrite/simulate/wiring.py, docs/SIMULATOR.md §6): when it
finds the wiring persistent, one completed run proves that no interleaving deadlocks.

The claim is checked against an exhaustive search of every interleaving of small random
programs (ranks running entries one after the other, an entry's channels concurrently, legs
that wait on and increment semaphores, as the simulator runs them), independent of the
simulator's scheduler; then each reason the check gives is produced on purpose, and the
fixtures' lowerings are proven."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from nrtrewrite.simulate import simulate_output
from nrtrewrite.simulate.wiring import unproven

# a system: ranks -> entries -> {channel: [leg]}, a leg ([(sem, value)] waits on its own
# rank, [(rank, sem, value)] increments)


def program(rank: int, entries: list[dict]) -> SimpleNamespace:
    """A stand-in for simulate.program.RankProgram with the fields the check reads."""
    legs_ch, sem_first, sem_count = [], [], []
    s_wait, s_rank, s_sid, s_val = [], [], [], []
    ents = []
    for e, chans in enumerate(entries):
        queues = {}
        for c, legs in sorted(chans.items()):
            queues[c] = (len(legs_ch), len(legs))
            for waits, incs in legs:
                legs_ch.append(c)
                sem_first.append(len(s_wait))
                rows = [(1, rank, s, v) for s, v in waits] + [(0, *i) for i in incs]
                sem_count.append(len(rows))
                for w, r, s, v in rows:
                    s_wait.append(w), s_rank.append(r), s_sid.append(s), s_val.append(v)
        ents.append(SimpleNamespace(index=e, queues=queues))

    def a(x, t=np.int64):
        return np.array(x, t)
    return SimpleNamespace(legs=len(legs_ch), entries=ents, l_channel=a(legs_ch),
                           l_sem_first=a(sem_first), l_sem_count=a(sem_count),
                           s_wait=a(s_wait, bool), s_rank=a(s_rank), s_sid=a(s_sid),
                           s_val=a(s_val))


def check(system: list[list[dict]]) -> str | None:
    return unproven({r: program(r, ents) for r, ents in enumerate(system)}, {})


def explore(system: list[list[dict]]) -> tuple[bool, bool]:
    """(some interleaving completes, some interleaving deadlocks), by visiting every state."""
    n = len(system)

    def start(r, e):  # a rank entering entry e: every channel at its first leg
        return (e, tuple(0 for _ in system[r][e])) if e < len(system[r]) else (e, ())

    init = (tuple(start(r, 0) for r in range(n)), ())
    seen, stack = set(), [init]
    completes = deadlocks = False
    while stack:
        ranks, counts = stack.pop()
        if (ranks, counts) in seen:
            continue
        seen.add((ranks, counts))
        cnt = dict(counts)
        moved = False
        for r, (e, pos) in enumerate(ranks):
            if e >= len(system[r]):
                continue
            chans = sorted(system[r][e])
            for i, c in enumerate(chans):
                legs = system[r][e][c]
                if pos[i] >= len(legs):
                    continue
                waits, incs = legs[pos[i]]
                need: dict = {}
                for s, v in waits:
                    need[(r, s)] = need.get((r, s), 0) + v
                if any(cnt.get(k, 0) < v for k, v in need.items()):
                    continue
                moved = True
                nc = dict(cnt)
                for k, v in need.items():
                    nc[k] -= v
                for t, s, v in incs:
                    nc[(t, s)] = nc.get((t, s), 0) + v
                np_ = pos[:i] + (pos[i] + 1,) + pos[i + 1:]
                state = (e, np_)
                if all(p >= len(system[r][e][ch]) for p, ch in zip(np_, chans)):
                    state = start(r, e + 1)  # the entry completes: the next one starts
                nr = ranks[:r] + (state,) + ranks[r + 1:]
                stack.append((nr, tuple(sorted((k, v) for k, v in nc.items() if v))))
        if not moved:
            if all(e >= len(system[r]) for r, (e, _p) in enumerate(ranks)):
                completes = True
            else:
                deadlocks = True
    return completes, deadlocks


def random_system(rng: random.Random) -> list[list[dict]]:
    n = rng.randint(1, 3)
    sems = rng.randint(1, 2)
    system = []
    for _r in range(n):
        ents = []
        for _e in range(rng.randint(1, 2)):
            chans = {}
            for c in range(rng.randint(1, 3)):
                legs = []
                for _l in range(rng.randint(1, 2)):
                    waits = [(rng.randrange(sems), rng.randint(1, 2))
                             for _ in range(rng.choice((0, 0, 1)))]
                    incs = [(rng.randrange(n), rng.randrange(sems), rng.randint(1, 2))
                            for _ in range(rng.choice((0, 1, 1, 2)))]
                    legs.append((waits, incs))
                chans[c] = legs
            ents.append(chans)
        system.append(ents)
    return system


def test_a_persistent_wiring_cannot_deadlock_in_any_interleaving():
    """Over 1,200 random programs: whenever the check proves a wiring and some interleaving
    completes, no interleaving deadlocks; and the check does flag wirings where the order
    decides (else it would prove nothing by proving everything)."""
    rng = random.Random(20261202)
    proven_completing = flagged_mixed = 0
    for _ in range(1200):
        system = random_system(rng)
        why = check(system)
        completes, deadlocks = explore(system)
        if why is None and completes:
            assert not deadlocks, system
            proven_completing += 1
        if why is not None and completes and deadlocks:
            flagged_mixed += 1
    assert proven_completing >= 300 and flagged_mixed >= 15, (proven_completing, flagged_mixed)


def test_the_entry_release_shape_is_proven_and_splitting_it_is_not():
    """The entry handshake's release: channel 0 raises semaphore 8 once by 2, channels 1 and 2
    each wait for 1 (proven). Raised in two steps of 1, one channel may take the first token
    while the one whose progress the second increment needs waits for it: that order
    deadlocks, the other completes, and the check refuses it."""
    at_once = [[{0: [([], [(0, 8, 2)])], 1: [([(8, 1)], [])], 2: [([(8, 1)], [])]}]]
    assert check(at_once) is None and explore(at_once) == (True, False)
    split = [[{0: [([], [(0, 8, 1)]), ([(5, 1)], [(0, 8, 1)])],
               1: [([(8, 1)], [(0, 5, 1)])], 2: [([(8, 1)], [])]}]]
    assert "increased there in 2 steps" in check(split)
    assert explore(split) == (True, True)


@pytest.mark.parametrize("system, reason", [
    # two channels of one entry wait on semaphore 8; another rank increments it
    ([[{0: [([(8, 1)], [])], 1: [([(8, 1)], [])]}], [{0: [([], [(0, 8, 2)])]}]],
     "increased by another rank"),
    # the entry gives 3 and takes 2: the next entry would not start at 0
    ([[{0: [([], [(0, 8, 3)])], 1: [([(8, 1)], [])], 2: [([(8, 1)], [])]}]],
     "increases it by 3 and its waits take 2"),
    # one of the sharing channels waits twice
    ([[{0: [([], [(0, 8, 3)])], 1: [([(8, 1)], []), ([(8, 1)], [])], 2: [([(8, 1)], [])]}]],
     "waits on it more than once"),
])
def test_each_reason(system, reason):
    assert reason in check(system)


def test_a_semaphore_one_actor_waits_on_at_a_time_is_persistent():
    """One waiter per entry (ring channels, kangaring peers, mesh events, the leader's
    entry_post): proven whatever increments it, from any rank and in any steps."""
    system = [[{0: [([(3, 2)], []), ([(3, 1)], [])]}, {1: [([(3, 1)], [])]}],
              [{0: [([], [(0, 3, 1)]), ([], [(0, 3, 1)]), ([], [(0, 3, 2)])]}]]
    assert check(system) is None


def test_a_proxy_sharing_its_semaphore_is_not_proven():
    prog = program(0, [{0: [([(17, 1)], [])]}])
    proxy = SimpleNamespace(first=True, terminator=False, complete=False, handshake=(0, 17),
                            notify=None)
    assert "net proxy" in unproven({0: prog}, {(0, 0): [proxy]})
    assert unproven({0: program(0, [{0: [([], [(0, 17, 1)])]}])}, {(0, 0): [proxy]}) is None


@pytest.mark.parametrize("name, algo", [("mix8", None), ("c7c8", None), ("ar2", "ring"),
                                        ("groups", None)])
def test_the_fixtures_are_proven(tmp_path, name, algo):
    from nrtrewrite.bundle import write_output
    from nrtrewrite.cli.lower import load_and_plan

    fix = Path(__file__).resolve().parent.parent / "fixtures" / f"{name}.neff"
    plan, _warnings = load_and_plan(str(fix), topology=None, algo=algo, host_cc=False,
                                    no_verify_hash=False)
    write_output(plan, tmp_path / "o", ranks=None)
    res = simulate_output(tmp_path / "o")
    assert res.ok, res.error
    assert res.stats["deadlock_free_every_interleaving"] is True


def test_an_unproven_wiring_fails_the_completed_run(tmp_path, monkeypatch):
    """The plumbing: a reason from the check is the run's protocol error, after the run."""
    import nrtrewrite.simulate.engine as engine
    from nrtrewrite.bundle import write_output
    from nrtrewrite.cli.lower import load_and_plan

    fix = Path(__file__).resolve().parent.parent / "fixtures" / "ar2.neff"
    plan, _warnings = load_and_plan(str(fix), topology=None, algo=None, host_cc=False,
                                    no_verify_hash=False)
    write_output(plan, tmp_path / "o", ranks=None)
    monkeypatch.setattr(engine, "unproven_wiring", lambda programs, transfers: "WHY")
    res = simulate_output(tmp_path / "o")
    assert not res.ok and res.stats["deadlock_free_every_interleaving"] is False
    assert res.error.endswith("the run completed, but its semaphore wiring is not proven free "
                              "of deadlock in every interleaving: WHY")
    assert res.stats["legs_run"] == res.stats["legs"]  # the whole run ran first


def test_channel_ids_and_entries_beyond_small_numbers():
    """The check keys (semaphore, entry, channel) arithmetically: channel ids 70 and 200 and a
    tenth entry are told apart (the split release is still found)."""
    quiet = {5: [([], [])]}
    split = {70: [([], [(0, 8, 1)]), ([], [(0, 8, 1)])], 200: [([(8, 1)], [])],
             71: [([(8, 1)], [])]}
    assert "increased there in 2 steps" in check([[quiet] * 9 + [split]])
    assert check([[quiet] * 9 + [{70: [([], [(0, 8, 2)])], 200: [([(8, 1)], [])],
                                  71: [([(8, 1)], [])]}]]) is None


def test_a_short_release_is_a_deadlock_not_a_crash(tmp_path, monkeypatch):
    """Four channels: the leader releases the other three through semaphore 8 by 3 (its one
    increment, found in sem.bin: FORMATS §7, `value` of the BD whose semaphore is 8). Cut to 1
    in the decoded program (in the bytes the static check now refuses it first), the three
    waiters were all made runnable by it and the second to run took a token that was gone
    (an IndexError from the engine); now a picked actor whose tokens another took waits
    again, and the run reports the deadlock."""
    import nrtrewrite.select as S
    from nrtrewrite.emit import formats as F
    from nrtrewrite.simulate.engine import Simulator
    from test_simulate import coll_spec, lower_spec

    monkeypatch.setattr(S, "choose_channels", lambda *a, **k: (4, "test: four channels"))
    out = lower_spec(coll_spec("all_reduce", "bf16", 4, 1 << 16), tmp_path / "o", algo="ring")
    prog = Simulator(out)
    prog.prepare()
    p = prog.programs[0]
    assert [e.channels for e in p.entries] == [[0, 1, 2, 3]]
    release = np.flatnonzero(~p.s_wait.astype(bool) & (p.s_sid == 8))
    assert p.s_val[release].tolist() == [3]
    for seed in range(3):
        sim = Simulator(out, seed=seed)
        res = sim.prepare()
        sim.programs[0].s_val[release[0]] = 1
        sim.execute(res)
        assert not res.ok and "deadlock: work remains but nothing can run" in res.error
        assert "waits semaphore 8 of rank 0 = 0 (needs 1)" in res.error
    sem = np.fromfile(out / "rank-0000" / "sem.bin", F.SEM_DTYPE)
    sem["value"][release[0]] = 1
    (out / "rank-0000" / "sem.bin").write_bytes(sem.tobytes())
    res = Simulator(out).run()
    assert "the entry has 4 channels, so it releases 3 (FORMATS §3.4)" in res.error


def test_semaphores_of_ranks_past_0_and_ids_past_127():
    """The check keys a semaphore by (rank, id), ids 0..255 (SEMAPHORES_PER_CORE, FORMATS §7:
    the kangaring peer semaphores 144..175, the event window 192..255). The entry release
    shape is proven on rank 1 (semaphore 8), on rank 2 with id 144 and on the last rank
    MAX_TOPOLOGY_RANKS - 1 with id 255, and a split release there is named with its rank and
    id; rank 1's id 255 and rank 2's id 0 are two semaphores (the one is proven, the other,
    raised by another rank, is not)."""
    from nrtrewrite.topology.model import MAX_TOPOLOGY_RANKS

    def release(rank, sid, *, split=False):
        incs = [([], [(rank, sid, 1)]), ([], [(rank, sid, 1)])] if split else \
            [([], [(rank, sid, 2)])]
        return {0: incs, 1: [([(sid, 1)], [])], 2: [([(sid, 1)], [])]}

    quiet = [{0: [([], [])]}]
    assert check([quiet, [release(1, 8)]]) is None
    assert check([quiet, quiet, [release(2, 144)]]) is None
    last = MAX_TOPOLOGY_RANKS - 1
    assert unproven({last: program(last, [release(last, 255)])}, {}) is None
    assert unproven({last: program(last, [release(last, 255, split=True)])}, {}) == (
        f"semaphore 255 of rank {last} is waited on by 2 channels in entry 0 and increased "
        "there in 2 steps: one channel can take what another is ready for")
    # rank 1's 255 released by its own channel 0; rank 2's 0 shared, raised by rank 0
    system = [[{0: [([], [(2, 0, 2)])]}], [release(1, 255)],
              [{1: [([(0, 1)], [])], 2: [([(0, 1)], [])]}]]
    assert check(system) == ("semaphore 0 of rank 2 is waited on by several channels of one "
                             "entry and increased by another rank: their waits may compete "
                             "for its tokens")
    assert check(system[:2]) is None
