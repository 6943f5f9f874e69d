"""The mutation audit of 2026-12-05 evening's code (the place check of every rank,
``Layout._check_places`` and ``_fit_shape``, the preset checks, the HIER legs' ``op``, the
escapes of the CLI's lines): the tests that killed its surviving mutants.

Expected values are worked out by hand from docs/TOPOLOGY.md §1 (rank = node x
ranks_per_node + device x ranks_per_device + logical_core; a device at most 16 TPBs,
``MAX_CORES_PER_DEVICE``, a node at most 64 devices, ``MAX_DEVICES_PER_NODE``),
docs/SIMULATOR.md and docs/DESIGN.md "HIER"."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from nrtrewrite.errors import SimulationError
from nrtrewrite.simulate.artifacts import read_top_manifest
from nrtrewrite.simulate.layout import Layout
from nrtrewrite.simulate.triggers import (
    check_hier_groups, check_kangaring_units, check_triggers, read_triggers,
)
from test_audit39_units import WHOLE
from test_simulate import assert_clean, coll_spec, lower_spec
from test_simulate_hier_checks import _field, _typed_refusal, hier16_out, kr8_out  # noqa: F401
from test_simulate_kick_leaf import HIER16, _rehier, copy, refused
from test_simulate_rank_places import (  # noqa: F401
    DIE_RULE, FILE_SHAPE, FORMULA, SENGINE_RULE, _retop, _unrecord, file_ring,
)


ROOT = Path(__file__).resolve().parents[1]


def _retop_unrecorded(out: Path, fn) -> None:
    """Edit the top manifest with ``fn``, and drop the platform fields it records for a
    platform not exactly a preset (since 2026-12-06), as the manifest of a file on a preset
    exactly (or of any file, written before): its rows are then held to the shape most of
    them fit, which these tests are about (with the fields, to the recorded platform:
    test_simulate_rank_places)."""
    _retop(out, lambda top: (fn(top), _unrecord(top)))


def _top(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def _lower_on_file(root: Path, topo: dict, ranks, n: int = 4096, lnc: int = 1) -> Path:
    """A bf16 all-reduce of ``n`` elements over ``ranks`` lowered with ``--topology t.json``
    (``topo`` written there), run from ``root`` as a user would."""
    (root / "t.json").write_text(json.dumps(topo))
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        return lower_spec(coll_spec("all_reduce", "bf16", ranks, n, lnc=lnc), root / "o",
                          topology="t.json")


# ---------------------------------------------------------------------------- _fit_shape

def test_a_topology_file_of_sixteen_tpbs_an_s_engine_simulates(tmp_path):
    """docs/TOPOLOGY.md §1 allows a device of 16 TPBs (MAX_CORES_PER_DEVICE), here one die of
    one s-engine of 16 TPBs: at LNC 1, 16 ranks a device, every TPB on s-engine 0. Ranks
    0 .. 17: rank r on device r // 16 (routing id 5, 6), logical core and TPB r % 16,
    s-engine 0, die 0. The shape the rows fit is the largest of each part (16 ranks a device,
    16 TPBs an s-engine): it is one of the shapes tried, and the output simulates (a search
    that stopped one short refused every row past core 14)."""
    out = _lower_on_file(tmp_path, {
        "format": "nrtrewrite-topology/1", "name": "wide", "nodes": 1,
        "devices_per_node": 4, "torus": [2, 2], "routing_ids": [5, 6, 7, 8],
        "device": {"dies": 1, "sengines_per_die": 1, "tpbs_per_sengine": 16,
                   "c2c_ports": 4}}, list(range(18)))
    rows = {r["rank"]: r for r in _top(out)["topology"]["ranks"]}
    assert {r: (p["node"], p["device"], p["logical_core"], p["tpb"], p["sengine"], p["die"],
                p["routing_id"]) for r, p in rows.items()} == {
        r: (0, r // 16, r % 16, r % 16, 0, 0, [5, 6][r // 16]) for r in range(18)}
    assert_clean(out)


# ---------------------------------------------------------------------------- check_hier_groups

def test_a_hier_leg_listing_more_groups_than_local_indexes_is_refused(tmp_path):
    """The count check of check_hier_groups (docs/SIMULATOR.md: ``hier.legs[0].groups lists 8
    groups, not 7: inter_allg has one per local index ...``) needs a table that puts 9 of
    HIER16's ranks on node 0 and 7 on node 1, the first 7 of each node's in rank order
    HIER16's: rank 71 on node 0. Since 2026-12-05 evening ``Layout.check`` refuses such a
    table first, on a preset and on a topology file alike (a rank's node is ``rank //
    ranks_per_node``, never lower for a higher rank), so the check is reached here on the
    checked layout with rank 71's place moved afterwards: HIER16's all-gather, inter_allg's
    groups [j, 64 + j] for j = 0 .. 7, 7 local indexes."""
    base = lower_spec(coll_spec("all_gather", "bf16", HIER16, 100, lnc=2), tmp_path / "o",
                      algo=None)
    top = read_top_manifest(base)
    fname = str(base / "manifest.json")
    layout = Layout.typed(top, file=fname)
    triggers = check_triggers(read_triggers(top, file=fname))
    layout.check()
    check_hier_groups(triggers, layout)  # (as lowered: DESIGN's groups)
    layout.places[71] = dataclasses.replace(layout.places[71], node=0)
    with pytest.raises(SimulationError) as exc:
        check_hier_groups(triggers, layout)
    assert exc.value.why == ("hier.legs[0].groups should list 7 groups, not 8: inter_allg has "
                             "one per local index (the fewest ranks of the replica_group on "
                             "a node) (docs/DESIGN.md \"HIER\")")


def test_a_topology_file_of_sixty_four_devices_a_node_simulates(tmp_path):
    """docs/TOPOLOGY.md §1 allows 64 devices a node (MAX_DEVICES_PER_NODE), here of one TPB
    each: at LNC 1, one rank a device, 64 a node. Ranks 0, 1, 64, 65: rank r on node r // 64,
    device r % 64, logical core 0 (routing ids the devices', a torus's default). 64 devices a
    node is one of the counts tried for node 1's rows, and the output simulates."""
    out = _lower_on_file(tmp_path, {
        "format": "nrtrewrite-topology/1", "name": "flat", "nodes": 2,
        "devices_per_node": 64, "torus": [8, 8],
        "device": {"dies": 1, "sengines_per_die": 1, "tpbs_per_sengine": 1,
                   "c2c_ports": 4}}, [0, 1, 64, 65])
    assert {r["rank"]: (r["node"], r["device"], r["logical_core"], r["tpb"], r["sengine"])
            for r in _top(out)["topology"]["ranks"]} == {
        r: (r // 64, r % 64, 0, 0, 0) for r in [0, 1, 64, 65]}
    assert_clean(out)


def test_node_1s_rows_on_a_device_no_count_of_devices_puts_them_are_refused(file_ring,
                                                                             tmp_path):
    """file_ring (ranks 0 .. 3 and 20 .. 23, 4 ranks a device, 4 devices a node) with node 1's
    rows said to be on device 5 (rank 20 + lc: q = 20 // 4 = 5 = the device): node 1 x
    devices_per_node = q - device = 0, which no count of devices a node (1 to 64) gives, so
    no shape fits those rows; of the shapes §1 allows the one the most rows fit is 4 ranks a
    device with every rank on node 0 (ranks 0 .. 3; any larger count of ranks a device fits
    those 4 rows too, the smallest is taken): rank 20, the first row off it, is on node 1,
    not 0."""
    out = copy(file_ring, tmp_path)

    def edit(top):
        for row in top["topology"]["ranks"][4:]:
            row["device"] = 5
    _retop_unrecorded(out, edit)
    assert refused(out) == (f"{_field(out, 'topology.ranks[4].node')}rank 20: node should be 0, "
                            "no count of devices a node (1 to 64) puts device 5's rank 20 "
                            f"there, not 1 ({FORMULA}; {FILE_SHAPE})")


# ---------------------------------------------------------------------------- HIER leg op

@pytest.mark.parametrize("edit, says", [
    (lambda leg: leg.pop("op"), "missing"),
    (lambda leg: leg.update(op=None), "must be a string, not null"),
], ids=["missing", "null"])
def test_a_hier_legs_op_missing_or_null_is_status_2(hier16_out, tmp_path, edit, says):
    """FORMATS §1.1: each HIER leg has ``op``, a string (docs/SIMULATOR.md: read as a string):
    a leg without one, or with null, cannot be read as the format (status 2), not a
    collective other than the leg's (status 1)."""
    out = copy(hier16_out, tmp_path)
    _rehier(out, lambda legs: edit(legs[0]))
    assert _typed_refusal(out) == f"{_field(out, 'triggers[0].hier.legs[0].op')}{says}"


def test_the_count_of_devices_a_node_most_rows_give_is_taken(file_ring, tmp_path):
    """file_ring with rank 23 said to be on device 0 (routing id 7, device 0's): node 1's
    other rows give 4 devices a node (rank 20 + lc: 20 // 4 = 5 = node 1 x 4 + device 1),
    rank 23 alone 5 (5 = 1 x 5 + 0). The count most rows give, 4, is the shape's (7 of the
    8 rows fit it), so rank 23 is refused on device 23 % 16 // 4 = 1, not taken as the
    larger count's."""
    out = copy(file_ring, tmp_path)
    _retop_unrecorded(out, lambda top: top["topology"]["ranks"][7].update(device=0, routing_id=7))
    assert refused(out) == (f"{_field(out, 'topology.ranks[7].device')}rank 23: device should be "
                            f"1, 23 % 16 // 4 (4 ranks a device), not 0 ({FORMULA}; {FILE_SHAPE})")


def test_a_device_past_the_count_a_node_holds_fits_no_shape(file_ring, tmp_path):
    """file_ring with rank 21's row said to be node 0's device 4 (logical core 1, routing id
    kept): 21 = 4 x 5 + 1 reads as 5 ranks a device, but of 3 devices a node (20 // 5 = 4 =
    1 x 3 + 1 for node 1's other rows) device 4 is none: under 5 ranks a device 7 rows fit,
    as under file_ring's own 4 ranks and 4 devices (every row but rank 21's). On the tie the
    smaller shape is the one taken, so rank 21 is on node 21 // 16 = 1, not 0."""
    out = copy(file_ring, tmp_path)
    _retop_unrecorded(out, lambda top: top["topology"]["ranks"][5].update(node=0, device=4))
    assert refused(out) == (f"{_field(out, 'topology.ranks[5].node')}rank 21: node should be 1, "
                            f"21 // 16 (4 devices of 4 ranks a node), not 0 ({FORMULA}; "
                            f"{FILE_SHAPE})")


def test_a_topology_files_device_holds_16_tpbs_at_most(hier16_out, tmp_path):
    """docs/TOPOLOGY.md §1: a device holds at most 16 TPBs, 8 ranks at LNC 2. hier16_out
    (LNC 2, ranks 0 .. 7 and 64 .. 71) said to be a topology file's of 9 ranks a device
    (rank r on device r // 9, logical core r % 9, TPB 2 (r % 9), s-engine r % 9, die 0): 18
    TPBs a device, no shape §1 allows. Of those, 8 ranks a device fits the most rows, ranks
    0 .. 7 (a smaller count fits fewer of them; node 1's rows, 64 = 7 x 9 + 1 on, fit none),
    and rank 64 is on device 64 // 8 = 8."""
    out = copy(hier16_out, tmp_path)

    def edit(top):
        top["options"]["topology"] = "t.json"
        for row in top["topology"]["ranks"]:
            r = row["rank"]
            row.update(node=0, device=r // 9, routing_id=r // 9, logical_core=r % 9,
                       tpb=2 * (r % 9), sengine=r % 9, die=0)
    _retop(out, edit)
    assert refused(out) == (f"{_field(out, 'topology.ranks[8].device')}rank 64: device should be "
                            f"8, 64 // 8 (8 ranks a device), not 7 ({FORMULA}; {FILE_SHAPE})")


def test_of_two_tpb_counts_fitting_as_many_rows_the_smaller_is_taken(file_ring, tmp_path):
    """file_ring's rows are s-engine tpb // 2 (TPB r % 4). Rank 2's s-engine said to be 0:
    2 TPBs an s-engine fits 7 rows (all but rank 2's), 3 fits 7 too (tpb 0 .. 2 on s-engine
    0, tpb 3 on 1: all but rank 22's), any more 5 (the rows of s-engine 0). Of the two the
    smaller is the shape's: rank 2 is refused, s-engine 2 // 2 = 1."""
    out = copy(file_ring, tmp_path)
    _retop_unrecorded(out, lambda top: top["topology"]["ranks"][2].update(sengine=0))
    assert refused(out) == (f"{_field(out, 'topology.ranks[2].sengine')}rank 2: sengine should "
                            f"be 1, tpb 2 // 2 (2 TPBs an s-engine), not 0 ({SENGINE_RULE}; "
                            f"{FILE_SHAPE})")


def test_of_s_engine_counts_fitting_as_many_rows_the_smallest_is_taken(file_ring, tmp_path):
    """file_ring's rows are all die 0 (s-engines 0 and 1). Rank 3's die said to be 1 (its
    s-engine 1): 1 s-engine a die fits 5 rows (s-engine 0's four and rank 3's), 2 to 16 fit 7
    (all but rank 3's). The smallest of those is the shape's: rank 3 is refused, sengine 1 // 2
    = 0, named as 2 s-engines a die."""
    out = copy(file_ring, tmp_path)
    _retop_unrecorded(out, lambda top: top["topology"]["ranks"][3].update(die=1))
    assert refused(out) == (f"{_field(out, 'topology.ranks[3].die')}rank 3: die should be 0, "
                            f"sengine 1 // 2 (2 s-engines a die), not 1 ({DIE_RULE}; "
                            f"{FILE_SHAPE})")


# ---------------------------------------------------------------------------- bundle

@pytest.mark.parametrize("names, shown", [
    (["a", "b"], "a, b, manifest.json"),
    (["a", "b", "c"], "a, b, c, ..."),
], ids=["three", "four"])
def test_entries_found_gone_name_three_then_an_ellipsis(tmp_path, names, shown):
    """lower's last check of its temporary folder (docs/RELIABILITY.md: ``OUT: N of the
    entries ... are gone (rank-0001): ...``) names up to three of the entries gone, then
    ``...`` only when there are more: three named whole, four as three and ``...``."""
    from nrtrewrite import bundle
    from nrtrewrite.errors import OutputError
    tmp = tmp_path / ".o.tmp-1"
    tmp.mkdir()
    with pytest.raises(OutputError) as exc:
        bundle._check_complete(tmp, tmp_path / "o", names)
    assert exc.value.why == (f"{tmp_path / 'o'}: {len(names) + 1} of the entries written into "
                             "the folder it was being built in, .o.tmp-1, are gone "
                             f"({shown}): another process removed them; nothing was written "
                             f"to {tmp_path / 'o'}")


def test_node_1s_rows_fit_no_shape_that_puts_every_rank_on_node_0(file_ring, tmp_path):
    """file_ring with node 1's rows (ranks 20 .. 23, logical cores 0 .. 3) said to be on
    device 4: 20 = 4 x 5 + 0 reads as 5 ranks a device, but node 1 x devices_per_node = 4 - 4
    = 0 no count of devices gives, so under 5 ranks a device only node 0's 4 rows fit (a row
    of node 1 never fits a shape that has every rank on node 0). 4 rows is the most any shape
    fits: 2 ranks a device first (ranks 0, 1 and, with 6 devices a node, 20 = 1 x 12 + 4 x 2
    + 0 and 21), so rank 2, the first row off it, is refused on device 2 % 12 // 2 = 1."""
    out = copy(file_ring, tmp_path)

    def edit(top):
        for row in top["topology"]["ranks"][4:]:
            row["device"] = 4
    _retop_unrecorded(out, edit)
    assert refused(out) == (f"{_field(out, 'topology.ranks[2].device')}rank 2: device should be "
                            f"1, 2 % 12 // 2 (2 ranks a device), not 0 ({FORMULA}; {FILE_SHAPE})")


# ---------------------------------------------------------------------------- console

@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_short_output_to_a_full_disk_is_status_2_when_stdout_is_block_buffered():
    """docs/CLI.md "Errors": a failed write of the standard output (``> /dev/full``) is
    ``nrtrewrite: error: cannot write the standard output: No space left on device``, status
    2. A block-buffered stdout (PYTHONUNBUFFERED unset, as a shell runs the command) holds
    a document under 8 KiB until the process ends (ar2's schedule of rank 0); the console
    script's last flush failed there and was ignored: status 0, nothing said (the suite's
    own environment sets PYTHONUNBUFFERED, so test_cli_errors' /dev/full test wrote it
    through)."""
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env["PYTHONPATH"] = str(ROOT)
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "nrtrewrite", "schedule", "fixtures/ar2.neff",
                               "--rank", "0", "--json"], stdout=full,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env, timeout=120)
    assert (proc.returncode, proc.stderr) == (
        2, "nrtrewrite: error: cannot write the standard output: No space left on device\n")



def test_a_short_output_to_a_closed_pipe_is_status_141_when_stdout_is_block_buffered():
    """docs/CLI.md "Errors": a closed pipe ends the command quietly with status 141 (128 +
    SIGPIPE). A short document waiting in a block-buffered stdout (PYTHONUNBUFFERED unset)
    met the closed pipe only at the console script's last flush, which exited 0 there."""
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env["PYTHONPATH"] = str(ROOT)
    read, write = os.pipe()
    os.close(read)  # (a reader gone before the first byte)
    try:
        proc = subprocess.run([sys.executable, "-m", "nrtrewrite", "schedule", "fixtures/ar2.neff",
                               "--rank", "0", "--json"], stdout=write,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env, timeout=120)
    finally:
        os.close(write)
    assert (proc.returncode, proc.stderr) == (141, "")

# ---------------------------------------------------------------------------- check_kangaring_units

def test_a_kangaring_device_whose_cores_skip_one_is_refused(kr8_out):
    """docs/TOPOLOGY.md §4: KangaRing needs every rank of each device it touches. kr8_out
    (LNC 2, device 0 ranks 0 .. 3 on logical cores 0 .. 3) with rank 3 on logical core 4
    (TPB 8): the group holds 4 of the device's cores, 0, 1, 2, 4, no whole device. A row
    saying so is refused by Layout.check first (rank 3 is core 3 % 4, docs/TOPOLOGY.md §1),
    on a preset and on a topology file alike (a device's ranks are consecutive, so the
    group's cores on it are 0 up); the units' check is reached on the checked layout with
    the place moved afterwards."""
    top = read_top_manifest(kr8_out)
    fname = str(kr8_out / "manifest.json")
    layout = Layout.typed(top, file=fname)
    triggers = check_triggers(read_triggers(top, file=fname))
    layout.check()
    check_kangaring_units(triggers, layout)  # (as lowered: whole devices)
    layout.places[3] = dataclasses.replace(layout.places[3], core=4, tpb=8, sengine=4)
    with pytest.raises(SimulationError) as exc:
        check_kangaring_units(triggers, layout)
    assert exc.value.why == ("kangaring: the logical cores the replica_group holds of the "
                             "device of node 0, routing_id 0, "
                             + WHOLE.format("[0, 1, 2, 4]"))


# ---------------------------------------------------------------------------- cli.Command

def test_a_commands_extra_arguments_are_refused_only_where_click_refuses_them():
    """cli.Command quotes each extra argument with ``repr`` (its docstring: ``('x', 'b c')``),
    and otherwise refuses extra arguments where click does: not while click parses
    resiliently (shell completion, ``resilient_parsing``), nor for a command that allows
    them (``allow_extra_args``), whose extras stay in ``ctx.args``."""
    import click

    from nrtrewrite.cli import Command

    @click.command(cls=Command)
    @click.argument("model")
    def cmd(model):
        pass

    @click.command(cls=Command, context_settings={"allow_extra_args": True})
    @click.argument("model")
    def loose(model):
        pass

    with pytest.raises(click.UsageError) as exc:
        cmd.make_context("cmd", ["m", "x", "b c"])
    assert exc.value.format_message() == "Got unexpected extra arguments ('x', 'b c')"
    with pytest.raises(click.UsageError) as exc:
        cmd.make_context("cmd", ["m", "x"])
    assert exc.value.format_message() == "Got unexpected extra argument ('x')"
    assert cmd.make_context("cmd", ["m", "x"], resilient_parsing=True).params == {"model": "m"}
    ctx = loose.make_context("loose", ["m", "x", "b c"])
    assert (ctx.params, ctx.args) == ({"model": "m"}, ["x", "b c"])


class OddKeyError(KeyError):
    """A KeyError whose message is its own (a backslash then ``n``, raw)."""

    def __str__(self) -> str:
        return "a\\nb"


def test_only_a_keyerror_of_one_string_is_shown_as_its_repr_alone():
    """cli._one_line: a ``KeyError`` of one string is its key in ``repr``'s quotes, only
    guarded; any other message is escaped once as a name is (a backslash doubled), as
    test_escape_once_units' tuple key: a KeyError of two arguments (its message the tuple's
    repr) and a subclass with a message of its own (a backslash then ``n``, raw) included."""
    from nrtrewrite.cli import _one_line

    assert _one_line(KeyError("a\\", 1)) == "KeyError: ('a\\\\\\\\', 1)"
    assert _one_line(OddKeyError("k")) == "OddKeyError: a\\\\nb"
