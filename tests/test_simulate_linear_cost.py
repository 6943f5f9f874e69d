"""simulate's cost is linear in the triggers (docs/SIMULATOR.md §9 "Cost"): no step does work
per trigger (or per SPAD entry, or per leg) over everything of the rank.  Checked by what the
code builds, not by timing: the elements of the rank's pieces compared against an entry
number, the BDs compared against a leg number, and how often a (rank, region) buffer is
made (until 2026-12-06 each SPAD entry masked every piece of its rank, each sequential leg
every BD of its rank, and each trigger made its rank's scratch buffer anew, zeroed whole).
"""

from __future__ import annotations

import numpy as np

from nrtrewrite.simulate import program as P
from nrtrewrite.simulate.engine import Simulator

from test_simulate import assert_clean, lower_spec

COUNT = 12  # triggers: the old structure compared COUNT x the pieces, made buffers COUNT x


def _spec(count: int = COUNT, ranks: int = 4) -> dict:
    """``count`` small bf16 all-reduces / all-gathers over ``ranks`` ranks in one subgraph."""
    body = []
    for i in range(count):
        t = {"dtype": "bf16", "src": "x_in", "dst": "x_out",
             "num_elements": 64 * ranks * (1 + i % 3)}
        if i % 4 == 3:
            body.append({"all_gather": dict(t, num_elements=64 * (1 + i % 3))})
        else:
            body.append({"all_reduce": dict(t, op="add")})
    return {"header": {"pkg_version": 2, "name": "many", "lnc_size": 1},
            "subgraphs": [{"name": "sg00",
                           "vars": [{"name": "x_in", "type": "input", "size": 4096},
                                    {"name": "x_out", "type": "output", "size": 4096}],
                           "replica_groups": [list(range(ranks))],
                           "engines": {"sp": body}}]}


class _Counted(np.ndarray):
    """An array that counts the elements it compares with ``==``."""
    compared = 0

    def __eq__(self, other):
        _Counted.compared += self.size
        return np.ndarray.__eq__(np.asarray(self), other)


def test_pieces_are_checked_per_entry_without_comparing_every_piece(tmp_path, monkeypatch):
    """The 0xBF pieces' start_addr checks group the pieces by SPAD entry once: the entry
    numbers of the pieces are compared against an entry at most once a piece, not once a
    piece per entry (COUNT entries: COUNT x as many)."""
    out = lower_spec(_spec(), tmp_path / "out", algo="mesh")
    seen = []
    orig = P.RankDecoder._check_pieces

    def counting(self):
        _Counted.compared = 0
        self.spi = self.spi.view(_Counted)
        try:
            orig(self)
        finally:
            self.spi = np.asarray(self.spi)
        seen.append((len(self.entry_trigger), int(self.sb_leg.size), _Counted.compared))
    monkeypatch.setattr(P.RankDecoder, "_check_pieces", counting)
    assert_clean(out)
    assert len(seen) == 4  # a rank each
    for entries, pieces, compared in seen:
        assert entries == COUNT and pieces >= COUNT
        assert compared <= pieces, (entries, pieces, compared)


def test_a_sequential_legs_bds_are_found_without_comparing_all_the_ranks(tmp_path,
                                                                          monkeypatch):
    """A sequential leg's tiles come from its own BDs (one slice of the rank's, which are in
    leg order), not from comparing every BD of the rank with the leg's number (INTRA_RDH
    makes sequential legs of these triggers)."""
    out = lower_spec(_spec(), tmp_path / "out", algo="intra_rdh")
    calls = []
    orig = P.RankProgram._tile_runs

    def counting(self, g):
        arrays = self.bds_arrays
        _Counted.compared = 0
        self.bds_arrays = (arrays[0].view(_Counted),) + arrays[1:]
        try:
            tiles = orig(self, g)
        finally:
            self.bds_arrays = arrays
        calls.append((g, int(arrays[0].size), int((arrays[0] == g).sum()), _Counted.compared,
                      sum(len(s) for src, dst in tiles for s in src + dst)))
        return tiles
    monkeypatch.setattr(P.RankProgram, "_tile_runs", counting)
    assert_clean(out)
    assert calls, "no sequential leg: the test lost its subject"
    for _g, bds, own, compared, runs in calls:
        assert bds > own > 0
        assert runs == own  # every BD of the leg is a run of a tile (no BD merges here)
        assert compared <= own


def test_each_buffer_is_made_once_and_a_kept_one_is_cleared(tmp_path, monkeypatch):
    """A (rank, region) buffer another trigger will touch is kept when its triggers are
    done, cleared where they wrote it (zeros, as a new one), so each is made once a run; one
    no later trigger touches is freed (until 2026-12-06 each trigger made its scratch, input
    and output buffers anew)."""
    out = lower_spec(_spec(), tmp_path / "out", algo="mesh")
    made = []
    kept_checked = []
    orig_buffer = Simulator._buffer
    orig_done = Simulator._trigger_done

    def buffer(self, r, reg, trigger):
        if (r, reg) not in self.mem:
            made.append((r, reg))
        return orig_buffer(self, r, reg, trigger)

    def done(self, t):
        orig_done(self, t)
        for key, buf in self.mem.items():
            if key not in self.touch:  # no running trigger holds it: kept for a later one
                assert self.later[key] > 0
                assert not buf.any(), (t.ordinal, key)
                kept_checked.append(key)
    monkeypatch.setattr(Simulator, "_buffer", buffer)
    monkeypatch.setattr(Simulator, "_trigger_done", done)
    assert_clean(out)
    assert made and len(made) == len(set(made)), sorted(made)
    assert kept_checked  # some buffer outlived its trigger (the subject of the test)


def test_buffers_kept_between_their_triggers_stay_within_keep_bytes(tmp_path, monkeypatch):
    """The buffers kept with no trigger running on them hold at most ``KEEP_BYTES`` (a
    review, 2026-12-06: keeping every one held each var a later trigger reuses on every rank
    across the triggers between, 2.08 GB where the run took 0.91).  A budget of one buffer's
    bytes keeps one at a time; a budget of 0 keeps none, and every buffer is made again for
    each trigger that touches it, as before the change; the run is clean either way."""
    out = lower_spec(_spec(), tmp_path / "out", algo="mesh")
    orig_buffer = Simulator._buffer
    orig_done = Simulator._trigger_done
    seen = {"made": [], "idle_max": 0, "idle_count_max": 0}

    def buffer(self, r, reg, trigger):
        if (r, reg) not in self.mem:
            seen["made"].append((r, reg))
        return orig_buffer(self, r, reg, trigger)

    def done(self, t):
        orig_done(self, t)
        idle = {key: buf.nbytes for key, buf in self.mem.items() if key not in self.touch}
        assert idle == self.idle and sum(idle.values()) == self.idle_bytes
        assert self.idle_bytes <= self.KEEP_BYTES
        seen["idle_max"] = max(seen["idle_max"], self.idle_bytes)
        seen["idle_count_max"] = max(seen["idle_count_max"], len(idle))
    monkeypatch.setattr(Simulator, "_buffer", buffer)
    monkeypatch.setattr(Simulator, "_trigger_done", done)
    monkeypatch.setattr(Simulator, "KEEP_BYTES", 0)
    assert_clean(out)
    assert seen["idle_max"] == 0
    assert len(seen["made"]) > len(set(seen["made"]))  # made again, trigger after trigger
    # one buffer's worth: the 4096-byte vars (a region's storage may be larger: the largest)
    seen.update(made=[], idle_max=0, idle_count_max=0)
    monkeypatch.setattr(Simulator, "KEEP_BYTES", 4096)
    assert_clean(out)
    assert 0 < seen["idle_max"] <= 4096 and seen["idle_count_max"] == 1
