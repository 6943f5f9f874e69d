"""``schedule --json``: SINGLE_CYCLE_RING channels carry ``user_ranks`` (docs/CLI.md
"schedule"), flat and as a HIER leg.

What is checked here is derived from the seeds and docs/DESIGN.md, not from the composer:

* ``k`` is the chunk position as a rank id (seed 001 §4 ``p.k = na[...]``; docs/CLI.md): the
  group member at the position of the block the step's elements fall in.  The block comes
  from the step's ``elements`` through the seed 001 §2 layout: chunk group ``g`` holds
  ``rank_n * ch_n`` chunks, position ``pos`` of layout channel ``c`` at chunk
  ``rank_n * c + pos`` (``k_base = rank_n * (ch % ch_n)``), the last group with the tail
  chunk; a SINGLE_CYCLE_RING channel pair is one layout channel.
* ``user_ranks`` is the rank's ``enc_ring`` of the channel's ring (docs/CLI.md: ``user_ranks[0]``
  the rank, ``user_ranks[i]`` ``i`` hops ahead in the channel's direction): a permutation of
  the group, ``next`` / ``prev`` its neighbours, the CCW channel's the CW one's reversed, and
  the ring is the one the manifest gives the channel.
* docs/DESIGN.md "Single-cycle ring", step identity: the transfer at step ``t < h_cw`` leaves
  the rank ``h_cw - t`` hops from the chunk's root, toward the root (so the root is
  ``user_ranks[h_cw - t]`` on the channel it travels); the root combines and sends the result
  at step ``h_cw``; the result travels away from the root, reaching the rank ``d`` hops from
  it in the step keyed ``h_cw + d`` (the root is then ``d`` hops behind:
  ``user_ranks[n - d]``).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from irsim import SMALL_TWO_NODE_TOPOLOGY, ar, plan_ops
from nrtrewrite.cli import main
from nrtrewrite.cli.schedule import schedule_json
from nrtrewrite.codes import EncAlgType

FIX = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def small_topo(tmp_path_factory):
    path = tmp_path_factory.mktemp("topo") / "trn2-4dev.json"
    path.write_text(json.dumps(SMALL_TWO_NODE_TOPOLOGY))
    return str(path)


def _block(elements, g, offset, n, chunk, tail, pgta, ch_n):
    """(layout channel, group position) of a non-empty step, by seed 001 §2."""
    a, b = elements
    assert b > a
    cs = tail if g == pgta - 1 else chunk
    base = offset + g * n * ch_n * chunk
    idx, within = divmod(a - base, cs)
    assert 0 <= idx < n * ch_n and within + (b - a) <= cs
    return divmod(idx, n)


def _root_index(step, h_cw, n):
    """The index in the channel's user_ranks of the root of the chunk the step moves
    (docs/DESIGN.md step identity, module doc)."""
    if step < h_cw:
        return h_cw - step
    return (n - (step - h_cw)) % n


def _check_op(op, rank, group, orders, pairs, chunk, offset=0):
    """One SINGLE_CYCLE_RING op of ``rank`` over ``group`` (the order chunk positions are
    numbered in); ``orders``: channel -> ring order from the manifest; ``pairs``: the layout
    slots' [cw, ccw]; ``chunk``: the manifest ``chunk`` record."""
    n = len(group)
    chans = {c["channel"]: c for c in op["channels"]}
    if n == 1:
        (c,) = chans.values()
        assert c["user_ranks"] == [rank]
        assert {s["k"] for s in c["steps"]} == {rank}
        return 0
    checked = 0
    for slot, (cw, ccw) in enumerate(pairs):
        seen = set()
        for ch, d in ((cw, "cw"), (ccw, "ccw")):
            if ch not in chans:
                continue
            c = chans[ch]
            u = c["user_ranks"]
            assert c["direction"] == d and c["pair"] == [cw, ccw]
            assert sorted(u) == sorted(group) and u[0] == rank  # a permutation, from the rank
            assert c["next"] == u[1] and c["prev"] == u[-1]  # neighbours in the direction
            ring = list(orders[ch])  # the manifest's ring of the channel, from the rank on
            i = ring.index(rank)
            assert u == ring[i:] + ring[:i]
            h_cw = c["arcs"][0]
            for s in c["steps"]:
                assert s["k"] in u
                assert u[_root_index(s["step"], h_cw, n)] == s["k"]
                seen.add(s["k"])
                if s["elements"][1] > s["elements"][0]:
                    lay_ch, pos = _block(s["elements"], s["group"], offset, n,
                                         chunk["chunk_size_n"], chunk["tail_chunk"],
                                         chunk["pgta"], chunk["channels"])
                    assert lay_ch == slot
                    assert group[pos] == s["k"]  # the block's owner is the chunk's root
                    checked += 1
        if cw in chans and ccw in chans:  # CCW walks the CW ring backward
            u, v = chans[cw]["user_ranks"], chans[ccw]["user_ranks"]
            assert v == [u[0]] + u[:0:-1]
            assert seen == set(group)  # the pair moves every chunk position
    return checked


def _flat_cases(plan, rank):
    """(op, group, orders, pairs, chunk) of ``rank``'s flat SINGLE_CYCLE_RING ops."""
    doc = schedule_json(plan, rank)
    by_trigger = {tp.trigger.ordinal: tp for tp in plan.triggers}
    for op in doc["ops"]:
        if op["algorithm"] != "SINGLE_CYCLE_RING" or op["leg"] != "flat":
            continue
        tp = by_trigger[op["trigger"]]
        m = tp.prepared.manifest
        orders = {c["channel"]: c["order"] for c in m["channels"]}
        yield (op, tuple(tp.trigger.replica_group), orders, m["single_cycle"]["pairs"],
               m["chunk"])


@pytest.mark.parametrize("chunk_bytes", [256, None])
@pytest.mark.parametrize("ranks, topology", [
    (5, False), (16, False), (2, False), ([3], False), ([32, 0, 16], True), (6, True),
])
def test_flat_single_cycle_user_ranks(small_topo, monkeypatch, ranks, topology, chunk_bytes):
    if chunk_bytes:  # several chunk groups and a tail
        import nrtrewrite.compose.segments as S
        from nrtrewrite.compose.chunking import set_dynamic_chunk_size
        monkeypatch.setattr(S, "set_dynamic_chunk_size",
                            functools.partial(set_dynamic_chunk_size, chunk_bytes=chunk_bytes))
    plan = plan_ops([ar(9001), ar(1000, op="max")], ranks, algo="allreduce:single_cycle_ring",
                    topology=small_topo if topology else None)
    group = list(range(ranks)) if isinstance(ranks, int) else ranks
    checked = ops = 0
    pgta = set()
    for rank in group:
        for op, grp, orders, pairs, chunk in _flat_cases(plan, rank):
            pgta.add(chunk["pgta"])
            checked += _check_op(op, rank, grp, orders, pairs, chunk)
            ops += 1
    assert ops == 2 * len(group)
    assert checked or len(group) == 1
    if chunk_bytes and len(group) > 1:
        assert max(pgta) > 1  # the tail group was met


@pytest.mark.parametrize("ranks", [32, [33, 1, 17, 0, 32, 16]])
def test_hier_single_cycle_leg_user_ranks(small_topo, ranks):
    plan = plan_ops([ar(9001), ar(33 * 6, op="max")], ranks, algo="inter_allr:single_cycle_ring",
                    topology=small_topo)
    group = list(range(ranks)) if isinstance(ranks, int) else ranks
    legs = {tp.trigger.ordinal: {lp.name: lp for lp in tp.prepared.data.legs}
            for tp in plan.triggers if tp.alg == EncAlgType.HIER}
    assert legs
    checked = 0
    for rank in group:
        for op in schedule_json(plan, rank)["ops"]:
            if op["algorithm"] == "RING":  # the other legs' channels already had them
                assert all(c["user_ranks"][0] == rank for c in op["channels"])
                continue
            assert op["algorithm"] == "SINGLE_CYCLE_RING" and op["leg"] == "inter_allr"
            members = tuple(op["group"])  # the leg group, ranks of the world
            assert rank in members and set(members) <= set(group)
            sp = legs[op["trigger"]][op["leg"]].plans[members]
            lay = sp.layout
            chunk = {"chunk_size_n": lay.plan.chunk, "tail_chunk": lay.plan.tail_chunk,
                     "pgta": lay.plan.groups, "channels": lay.plan.channels}
            checked += _check_op(op, rank, members, sp.orders, sp.pairs, chunk,
                                 offset=lay.offset)
    assert checked


def test_fixture_single_cycle_user_ranks_and_text():
    """node64 forced to SINGLE_CYCLE_RING: the JSON on two ranks, and the table shows
    ``user_ranks:`` for both channels of a pair."""
    from nrtrewrite.cli.lower import load_and_plan
    model = str(FIX / "node64.neff")
    plan, _ = load_and_plan(model, topology=None, algo="allreduce:single_cycle_ring",
                            host_cc=False, no_verify_hash=False)
    for rank in (0, 37):
        n = 0
        for op, grp, orders, pairs, chunk in _flat_cases(plan, rank):
            n += _check_op(op, rank, grp, orders, pairs, chunk)
        assert n
    res = CliRunner().invoke(main, ["schedule", model, "--rank", "5", "--algo",
                                    "allreduce:single_cycle_ring", "--trigger", "0",
                                    "--limit", "1"], terminal_width=400)
    assert res.exit_code == 0, res.output
    chans = schedule_json(plan, 5)["ops"][0]["channels"]
    assert [c["direction"] for c in chans] == ["cw", "ccw"]
    shown, listing = [], False  # the ranks after each "user_ranks:" (a long list wraps)
    for word in res.output.split():
        if word == "user_ranks:":
            shown.append([])
        elif listing and word.isdigit():
            shown[-1].append(int(word))
        listing = word == "user_ranks:" or (listing and word.isdigit())
    assert shown == [c["user_ranks"] for c in chans]


def test_schedule_user_ranks_are_explain_rank_user_ranks():
    """``explain --rank`` already showed a SINGLE_CYCLE_RING ring's user_ranks: the same."""
    model = str(FIX / "node64.neff")
    runner = CliRunner()
    exp = json.loads(runner.invoke(main, ["explain", model, "--rank", "9", "--algo",
                                          "allreduce:single_cycle_ring", "--trigger", "1",
                                          "--json"]).output)
    rings = exp["triggers"][0]["channels"]["rings"]
    sch = json.loads(runner.invoke(main, ["schedule", model, "--rank", "9", "--algo",
                                          "allreduce:single_cycle_ring", "--trigger", "1",
                                          "--json"]).output)
    chans = sch["ops"][0]["channels"]
    assert rings and [(r["channel"], r["direction"], r["user_ranks"]) for r in rings] == [
        (c["channel"], c["direction"], c["user_ranks"]) for c in chans]


def test_text_titles_name_the_direction_pair_and_arcs():
    """The rich view shows what only the JSON had: each SINGLE_CYCLE_RING channel's direction,
    its pair and the arcs (DESIGN.md: h_cw = ceil((n-1)/2) = 4 and h_ccw = 3 for 8 ranks)."""
    res = CliRunner().invoke(main, ["schedule", str(FIX / "mix8.neff"), "--rank", "0",
                                    "--algo", "allreduce:single_cycle_ring", "--trigger", "0",
                                    "--limit", "1"])
    assert res.exit_code == 0, res.output
    titles = [ln for ln in res.output.splitlines() if ln.startswith("rank 0 trigger 0")]
    assert titles and all(" of pair " in t and t.endswith(", arcs 4/3") for t in titles)
    assert " cw of pair " in titles[0] and " ccw of pair " in titles[1]
