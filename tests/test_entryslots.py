"""The entry handshake's semaphore slots (nrtrewrite.entryslots, docs/DESIGN.md "Entry
handshake").  Expected slots are worked out by hand from the rule in the module's docstring:
a trigger u may not share a slot with a trigger t in which a rank R of u waited, when t
lies after the last trigger whose group held R and a same-node member Q of u's group."""

from __future__ import annotations

import numpy as np
import pytest

from nrtrewrite.entryslots import ENTRY_POST_SEMS, entry_post_slots
from nrtrewrite.errors import LimitError


def test_the_semaphores_are_9_then_the_16_ids_between_the_kangaring_block_and_the_events():
    # FORMATS §7: 144..175 kangaring peer semaphores (32 channels), 192..255 event window
    assert ENTRY_POST_SEMS == (9, 176, 177, 178, 179, 180, 181, 182, 183, 184, 185, 186, 187,
                               188, 189, 190, 191)


def test_ranks_that_always_meet_the_same_peers_use_slot_0_alone():
    assert entry_post_slots([(0, 1, 2, 3)] * 5, 64) == [0] * 5
    # disjoint groups of one instruction, then again
    assert entry_post_slots([(0, 1), (2, 3), (0, 1), (2, 3)], 64) == [0, 0, 0, 0]


def test_a_group_of_new_peers_after_earlier_entries_takes_the_next_slot():
    # the reproducer's shape: ranks 0..3 twice, then 1, 4, 5. Rank 1 never met 4 or 5 and
    # waited on slot 0 in triggers 0 and 1, so trigger 2 cannot use slot 0.
    assert entry_post_slots([(0, 1, 2, 3), (0, 1, 2, 3), (1, 4, 5)], 64) == [0, 0, 1]


def test_alternating_tensor_and_data_parallel_groups_use_two_slots():
    # T0 {0,1} T1 {2,3}: slot 0.  T2 {0,2}: 0 and 2 never met, 0 waited on slot 0 (T0) -> 1.
    # T3 {1,3}: likewise -> 1.  T4 {0,1}: last met at T0, 0 waited on slot 1 at T2 (after
    # T0) -> slot 1 taken, slot 0 last waited on at T0 (not after it) -> 0.  T5 {2,3}: -> 0.
    # T6 {0,2}: last met at T2, 0 waited on slot 0 at T4 -> 1.
    groups = [(0, 1), (2, 3), (0, 2), (1, 3), (0, 1), (2, 3), (0, 2)]
    assert entry_post_slots(groups, 64) == [0, 0, 1, 1, 0, 0, 1]


def test_only_ranks_on_one_node_constrain_the_slot():
    # 0 and 64 are on different nodes (64 ranks a node): no posts between them
    assert entry_post_slots([(0, 1), (0, 64), (0, 1)], 64) == [0, 0, 0]
    # with 2 ranks a node, 0 and 1 share node 0 but 0 and 2 do not
    assert entry_post_slots([(0, 1), (1, 2), (0, 2), (0, 1)], 2) == [0, 0, 0, 0]
    # ... whereas on one node the new pair (1, 2) must avoid slot 0
    assert entry_post_slots([(0, 1), (1, 2)], 64) == [0, 1]


def test_a_rank_meeting_a_new_peer_every_trigger_runs_out_after_17_slots():
    # rank 0 meets rank k for the first time in trigger k - 1, having waited on every slot
    # used so far: trigger j needs slot j, and trigger 17 would need an 18th
    groups = [(0, k) for k in range(1, 18)]
    assert entry_post_slots(groups, 64) == list(range(17))
    with pytest.raises(LimitError, match=r"^trigger 17: the entry handshake needs more than "
                                         r"the 17 entry_post semaphores \(9, 176\.\.191\)"):
        entry_post_slots(groups + [(0, 18)], 64)


def _sem_ids(path, window):
    """Semaphore ids of sem.bin's BDs in ``window`` (FORMATS §7, §10: addr = EVT_SEM base +
    TOP_SP stride + window + 4 x id; the low 10 bits are 4 x id, bits 10..12 the window)."""
    rec = np.fromfile(path, np.dtype([("ctrl", "<u4"), ("value", "<u4"), ("addr", "<u8")]))
    addr = rec["addr"].astype(np.int64)
    return sorted(set(((addr[(addr & 0x1C00) == window] >> 2) & 0xFF).tolist()))


def test_the_handshake_bds_count_on_the_trigger_slot(tmp_path):
    """Lowered: rank 4 (only in sg01's trigger) posts to 1 and 5 and waits on 176; rank 0
    (only in sg00's) uses 9; rank 1 (both) uses 9 and 176."""
    from test_simulate import _overlapping_subgraphs_spec, lower_spec

    out = lower_spec(_overlapping_subgraphs_spec(), tmp_path / "o")
    inc, dec = 0x1800, 0x1C00
    handshake = set(ENTRY_POST_SEMS)  # entry_go (8) aside

    def ids(rank, window):
        return [s for s in _sem_ids(out / f"rank-{rank:04d}" / "sem.bin", window)
                if s in handshake]
    assert ids(4, dec) == [176] and ids(4, inc) == [176]
    assert ids(0, dec) == [9] and ids(0, inc) == [9]
    assert ids(1, dec) == [9, 176] and ids(1, inc) == [9, 176]


def _rule_slots(groups, ranks_per_node, k=len(ENTRY_POST_SEMS)):
    """The rule of docs/DESIGN.md "Entry handshake" transcribed pair by pair, trigger by
    trigger (quadratic; no run shortcut): the lowest slot no constraint forbids, or None
    where a trigger would need more than ``k``."""
    def node(r):
        return r // ranks_per_node

    def waits(t, r):
        return r in groups[t] and any(x != r and node(x) == node(r) for x in groups[t])
    slots = []
    for u, g in enumerate(groups):
        bad = set()
        for r in g:
            for q in g:
                if q == r or node(q) != node(r):
                    continue
                t0 = max([t for t in range(u) if r in groups[t] and q in groups[t]],
                         default=-1)
                bad |= {slots[t] for t in range(t0 + 1, u) if waits(t, r)}
        slot = min(set(range(k + 1)) - bad)
        if slot == k:
            return slots, u
        slots.append(slot)
    return slots, None


def test_the_slots_are_the_rules_on_random_group_sequences():
    """Random sequences, half of them drawn from a few recurring groups (runs of the same
    members, which the implementation skips over), against the pair-by-pair rule."""
    import random
    rng = random.Random(20261201)
    for _ in range(300):
        n, per_node = rng.randint(2, 10), rng.randint(2, 6)
        families = [tuple(rng.sample(range(n), rng.randint(1, n))) for _ in range(3)]
        groups = [rng.choice(families) if rng.random() < 0.5
                  else tuple(rng.sample(range(n), rng.randint(1, n)))
                  for _ in range(rng.randint(1, 30))]
        want, stop = _rule_slots(groups, per_node)
        if stop is None:
            assert entry_post_slots(groups, per_node) == want, (groups, per_node)
        else:
            assert entry_post_slots(groups[:stop], per_node) == want
            with pytest.raises(LimitError):
                entry_post_slots(groups, per_node)


def test_a_model_needing_more_slots_than_there_are_is_refused_in_one_line(tmp_path,
                                                                         monkeypatch):
    """The limit through the CLI: with a single slot (patched), the reproducer's third
    trigger (ranks 1, 4, 5 after two on 0..3) cannot get one. One line naming the file and
    the trigger, exit 2, no output left behind."""
    import nrtrewrite.entryslots as slots_mod
    from test_simulate import _overlapping_subgraphs_spec, cli

    from nrtrewrite.neff.assembler import assemble_spec
    neff = tmp_path / "m.neff"
    neff.write_bytes(assemble_spec(_overlapping_subgraphs_spec()))
    monkeypatch.setattr(slots_mod, "ENTRY_POST_SEMS", (9,))
    res = cli("lower", neff, "-o", tmp_path / "out", "-j", "1", "--algo", "ring")
    assert res.exit_code == 2
    lines = res.output.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0] == (
        f"nrtrewrite: error: {neff}: member sg01/sp.bin, subgraph sg01, stream sp, "
        "instruction 0, trigger 2: the entry handshake needs more than the 1 entry_post "
        "semaphores (9): ranks of this replica group on one node have waited on every one of "
        "them in other groups' entries since they last met")
    assert not (tmp_path / "out").exists()


#: Two-rank groups {0, x + 1} in this order (one subgraph each) need all 17 semaphores by
#: the 31st trigger and an 18th at the 32nd: found by the handshake fuzzer's search (the
#: simplest pattern, a new peer every trigger, needs 18 distinct groups, more than a model
#: may hold: NEC_MAX_COMM_N = 12).
STAR = [1, 8, 7, 3, 0, 6, 2, 4, 3, 1, 0, 11, 10, 6, 8, 7, 8, 5, 7, 0, 9, 11, 1, 11, 8, 6, 10,
        3, 7, 8, 2, 4]


def _star_spec(n: int) -> dict:
    subgraphs = [{"name": f"sg{k:02d}",
                  "vars": [{"name": f"i{k}", "type": "input", "size": 256},
                           {"name": f"o{k}", "type": "output", "size": 256}],
                  "replica_groups": [[0, x + 1]],
                  "engines": {"sp": [{"all_reduce": {"dtype": "bf16", "op": "add",
                                                     "num_elements": 128, "src": f"i{k}",
                                                     "dst": f"o{k}"}}]}}
                 for k, x in enumerate(STAR[:n])]
    return {"header": {"pkg_version": 2, "name": "star", "lnc_size": 2},
            "subgraphs": subgraphs}


def test_twelve_star_groups_reach_the_limit_on_the_32nd_trigger():
    groups = [(0, x + 1) for x in STAR]
    want, stop = _rule_slots(groups, 64)
    assert stop == 31 and sorted(set(want)) == list(range(17))
    assert entry_post_slots(groups[:31], 64) == want
    with pytest.raises(LimitError, match="^trigger 31: the entry handshake"):
        entry_post_slots(groups, 64)


def test_a_model_on_all_17_semaphores_simulates_clean_and_the_next_trigger_is_refused(
        tmp_path):
    from test_simulate import assert_clean, cli, lower_spec

    from nrtrewrite.neff.assembler import assemble_spec
    out = lower_spec(_star_spec(31), tmp_path / "o")
    handshake = set()
    for rank in range(13):
        handshake |= set(_sem_ids(out / f"rank-{rank:04d}" / "sem.bin", 0x1C00))
    assert set(ENTRY_POST_SEMS) <= handshake
    assert_clean(out)
    neff = tmp_path / "star32.neff"
    neff.write_bytes(assemble_spec(_star_spec(32)))
    res = cli("lower", neff, "-o", tmp_path / "out32", "-j", "1")
    assert res.exit_code == 2
    assert res.output == (
        f"nrtrewrite: error: {neff}: member sg31/sp.bin, subgraph sg31, stream sp, "
        "instruction 0, trigger 31: the entry handshake needs more than the 17 entry_post "
        "semaphores (9, 176..191): ranks of this replica group on one node have waited on "
        "every one of them in other groups' entries since they last met\n")
    assert not (tmp_path / "out32").exists()


def test_explain_shows_the_trigger_without_a_semaphore_invalid(tmp_path):
    """explain says what lower will do: the 32nd star trigger INVALID with lower's reason,
    the 31 before it lowered."""
    import json

    from test_simulate import cli

    from nrtrewrite.neff.assembler import assemble_spec
    neff = tmp_path / "star32.neff"
    neff.write_bytes(assemble_spec(_star_spec(32)))
    res = cli("explain", neff, "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    lowered = [t["lowered"] for t in doc["triggers"]]
    assert [low["algorithm"] == "INVALID" for low in lowered] == [False] * 31 + [True]
    assert lowered[31]["fallback_reason"].startswith(
        "the entry handshake needs more than the 17 entry_post semaphores (9, 176..191)")
    # the head names the trigger as lower's line does (test above), without the path
    assert doc["model_refusal"] == ("member sg31/sp.bin, subgraph sg31, stream sp, "
                                    "instruction 0, trigger 31: " + lowered[31]["fallback_reason"])


def test_schedule_names_the_handshake_semaphore(tmp_path):
    """schedule --json gives every entry its entry_post semaphore; the rich view names it
    where it is not 9 (the reproducer: rank 1's third trigger counts on 176)."""
    import json

    from test_simulate import _overlapping_subgraphs_spec, cli

    from nrtrewrite.neff.assembler import assemble_spec
    neff = tmp_path / "m.neff"
    neff.write_bytes(assemble_spec(_overlapping_subgraphs_spec()))
    res = cli("schedule", neff, "--rank", "1", "--algo", "ring", "--json")
    assert res.exit_code == 0, res.output
    ops = json.loads(res.output)["ops"]
    assert [(op["trigger"], op["entry_post_sem"]) for op in ops] == [(0, 9), (1, 9), (2, 176)]
    text = cli("schedule", neff, "--rank", "1", "--algo", "ring").output
    titles = [line for line in text.splitlines() if "rank 1 trigger" in line]
    assert ["handshake on entry_post 176" in t for t in titles] == [False, False, True]
