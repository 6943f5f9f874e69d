"""``dump --fifo`` shows each net_src / net_dest record's channel (docs/CLI.md "dump"): the
channel of the rank manifest's ``fifo`` slice that holds it (docs/FORMATS.md §1.2), since
``net_op_idx`` counts the ops of that channel only.  The expected channels are worked out by
hand from the ring orders and FORMATS §8 (one op per channel and ring entry, one transmit
entry per half chunk sent, one terminator per op in each FIFO it uses), not read off the
slices."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from nrtrewrite.cli import main
from nrtrewrite.neff.assembler import assemble_spec

MIB4 = 4 << 20


def _model(tmp_path: Path, small_pairs: bool) -> Path:
    """A bf16 all-reduce of 4 MiB over [0, 1, 128, 129] of trn2:nodes=2 at LNC 1 (nodes 0
    and 1: ranks 0..127 and 128..255), lowered with --algo ring; with ``small_pairs`` a
    first subgraph all-reduces 4096 bytes over [0, 128] and [1, 129]."""
    sgs = []
    if small_pairs:
        sgs.append({"name": "sg00", "replica_groups": [[0, 128], [1, 129]],
                    "vars": [{"name": "a", "type": "input", "size": 4096},
                             {"name": "b", "type": "output", "size": 4096}],
                    "engines": {"sp": [{"all_reduce": {"dtype": "bf16", "op": "add", "src": "a",
                                                       "dst": "b", "bytes": 4096}}]}})
    sgs.append({"name": "sg01", "replica_groups": [[0, 1, 128, 129]],
                "vars": [{"name": "i", "type": "input", "size": MIB4},
                         {"name": "o", "type": "output", "size": MIB4}],
                "engines": {"sp": [{"all_reduce": {"dtype": "bf16", "op": "add", "src": "i",
                                                   "dst": "o", "bytes": MIB4}}]}})
    neff = tmp_path / "m.neff"
    neff.write_bytes(assemble_spec({"header": {"pkg_version": 2, "name": "m", "lnc_size": 1},
                                    "subgraphs": sgs}))
    out = tmp_path / "out"
    res = CliRunner().invoke(main, ["lower", str(neff), "--topology", "trn2:nodes=2",
                                    "--algo", "ring", "-o", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    return out


def _json_channels(out: Path, rank: int = 0) -> dict[str, list]:
    res = CliRunner().invoke(main, ["dump", "--fifo", str(out), "--rank", str(rank), "--json"])
    assert res.exit_code == 0, res.output
    files = json.loads(res.output)["ranks"][0]["files"]
    return {name: [r.get("channel", "absent") for r in recs] for name, recs in files.items()}


def _table_channels(out: Path, name: str, rank: int = 0) -> list[str]:
    """The ``channel`` cells of ``name``'s table (piped: CliRunner is no terminal)."""
    res = CliRunner().invoke(main, ["dump", str(out / f"rank-{rank:04d}" / name),
                                    "--limit", "0"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    head = next(i for i, line in enumerate(lines) if " channel " in line)
    assert lines[head].split("┃")[2].strip() == "channel"  # the first column after #
    rows = [line.split("│") for line in lines[head + 2:] if line.startswith("│")]
    return [r[2].strip() for r in rows]


def test_the_ring_s_two_channels_one_transmitting_one_receiving(tmp_path):
    """The task's case.  The ring orders (manifest ``channels``) are 0 -> 1 -> 128 -> 129
    on channel 0 and 0 -> 129 -> 128 -> 1 on channel 1: rank 0's channel-0 successor, 1, is
    on its node and its predecessor, 129, is not; on channel 1 its successor, 129, is across
    the network and its predecessor, 1, is not.  So rank 0 receives over the network only on
    channel 0 and transmits only on channel 1: net_ops has one op per channel (rows 0 and
    1, channel-major), every net_src record is channel 1's and every net_dest record channel
    0's, 2 (n - 1) = 6 chunks x 2 halves x 1 chunk group = 12 entries and a terminator each,
    then the basic block's EXEC_COMPLETE entry (FORMATS §8 "Basic blocks"), and net_src's
    net_op_idx 0 is channel 1's first op, net_ops row 1, not row 0."""
    out = _model(tmp_path, small_pairs=False)
    top = json.loads((out / "manifest.json").read_text())
    trig = top["triggers"][0]
    assert [c["order"] for c in trig["channels"]] == [[0, 1, 128, 129], [0, 129, 128, 1]]
    assert trig["chunk"]["pgta"] == 1
    got = _json_channels(out)
    assert got["net_ops.bin"] == ["absent", "absent"]  # (its channel is enc_channel)
    assert got["net_src.bin"] == [1] * 14
    assert got["net_dest.bin"] == [0] * 14
    assert _table_channels(out, "net_src.bin") == ["1"] * 14
    assert _table_channels(out, "net_dest.bin") == ["0"] * 14
    res = CliRunner().invoke(main, ["dump", "--fifo", str(out), "--rank", "0", "--json"])
    files = json.loads(res.output)["ranks"][0]["files"]
    assert [r["enc_channel"] for r in files["net_ops.bin"]] == [0, 1]
    assert {r["net_op_idx"] for r in files["net_src.bin"]} == {0}


def test_a_transmit_fifo_with_records_of_two_channels(tmp_path):
    """A first trigger over [0, 128] (one node each; one channel, 2048 elements: 2 (n - 1)
    = 2 chunks x 2 halves = 4 entries each way, and a terminator) before the 4-rank ring of
    the test above: rank 0 transmits on channel 0 (trigger 0) and on channel 1 (trigger 1),
    channel-major.  The triggers are in two subgraphs, two basic blocks, each segment of a
    FIFO ending with an EXEC_COMPLETE entry (FORMATS §8 "Basic blocks"), so net_src holds
    4 + 1 + 1 = 6 records of channel 0 (block 0's segment; trigger 1 does not transmit on
    channel 0) and then 12 + 1 + 1 = 14 of channel 1, and net_dest 6 + 14 of channel 0
    (both triggers receive on channel 0, one segment each)."""
    out = _model(tmp_path, small_pairs=True)
    top = json.loads((out / "manifest.json").read_text())
    assert [c["order"] for c in top["triggers"][0]["channels"]] == [[0, 128]]
    assert top["triggers"][0]["chunk"]["pgta"] == 1
    got = _json_channels(out)
    assert got["net_src.bin"] == [0] * 6 + [1] * 14
    assert got["net_dest.bin"] == [0] * 20
    assert _table_channels(out, "net_src.bin") == ["0"] * 6 + ["1"] * 14
    # rank 128, trigger 0's other end: in trigger 1's rings its channel-0 successor, 129,
    # is on its node and its predecessor, 1, is not; on channel 1 its successor, 1, is
    # across the network and its predecessor, 129, is not: rank 0's pattern
    got = _json_channels(out, 128)
    assert got["net_src.bin"] == [0] * 6 + [1] * 14
    assert got["net_dest.bin"] == [0] * 20


def test_without_a_readable_rank_manifest_the_channel_is_not_shown(tmp_path):
    """dump decodes what is there: a rank manifest that is gone, or whose fifo slices are
    not of their form, leaves every record's channel null (``-`` in the table)."""
    out = _model(tmp_path, small_pairs=False)
    man = out / "rank-0000" / "manifest.json"
    doc = json.loads(man.read_text())
    doc["fifo"][0]["src"] = "0, 0"
    man.write_text(json.dumps(doc))
    assert _json_channels(out)["net_src.bin"] == [None] * 14
    man.unlink()
    assert _json_channels(out)["net_dest.bin"] == [None] * 14
    assert _table_channels(out, "net_dest.bin") == ["-"] * 14


def _set_src(out: Path, rank: int, slices: list[list[int]]) -> None:
    """Rank ``rank``'s manifest with its fifo slices' ``src`` pairs set to ``slices``."""
    man = out / f"rank-{rank:04d}" / "manifest.json"
    doc = json.loads(man.read_text())
    for item, src in zip(doc["fifo"], slices):
        item["src"] = src
    man.write_text(json.dumps(doc))


def _simulate_refuses(out: Path, why: str) -> None:
    res = CliRunner().invoke(main, ["simulate", str(out), "--ignore-checksums"])
    assert res.exit_code != 0
    assert why in res.output, res.output


def test_a_slice_out_of_the_file_shows_no_channel(tmp_path):
    """Review 50l: rank 0 of the 4-rank ring holds 14 net_src records, all channel 1's
    (its slices: channel 0 src [0, 0], channel 1 src [0, 14]).  A channel-1 slice [-3, 5]
    (starts before record 0) or [5, 100] (runs past record 13) is one simulate refuses, and
    no record's channel can be told from it: every record shows null (``-`` in the table),
    not records 0-1, or 5-13, as channel 1."""
    out = _model(tmp_path, small_pairs=False)
    _set_src(out, 0, [[0, 0], [-3, 5]])
    _simulate_refuses(out, "fifo src slice [-3, 5] does not follow the previous channel's")
    assert _json_channels(out)["net_src.bin"] == [None] * 14
    assert _table_channels(out, "net_src.bin") == ["-"] * 14
    _set_src(out, 0, [[0, 0], [5, 100]])
    _simulate_refuses(out, "fifo src slice [5, 100] does not follow the previous channel's")
    assert _json_channels(out)["net_src.bin"] == [None] * 14
    assert _table_channels(out, "net_src.bin") == ["-"] * 14
    # (net_dest's slices are sound, but the manifest's slices are faulty: its channel is
    # not shown either)
    assert _json_channels(out)["net_dest.bin"] == [None] * 14


def test_overlapping_or_gapped_slices_show_no_channel(tmp_path):
    """The two-trigger case above: rank 0's net_src slices are channel 0 [0, 6] and channel
    1 [6, 14].  Channel 0 [0, 8] overlaps channel 1 on records 6 and 7; channel 0 [0, 5]
    leaves record 5 in no slice.  simulate refuses both (channel 1's slice does not follow
    channel 0's), and dump shows no channel for any record, not only for 5-6 or 4."""
    out = _model(tmp_path, small_pairs=True)
    _set_src(out, 0, [[0, 8], [6, 14]])
    _simulate_refuses(out, "fifo src slice [6, 14] does not follow the previous channel's")
    assert _json_channels(out)["net_src.bin"] == [None] * 20
    _set_src(out, 0, [[0, 5], [6, 14]])
    _simulate_refuses(out, "fifo src slice [6, 14] does not follow the previous channel's")
    assert _json_channels(out)["net_src.bin"] == [None] * 20
    assert _table_channels(out, "net_src.bin") == ["-"] * 20
    # slices that follow one another but leave the file's last record out
    _set_src(out, 0, [[0, 6], [6, 13]])
    _simulate_refuses(out, "the fifo slices cover 19 records of net_src.bin, the file holds 20")
    assert _json_channels(out)["net_src.bin"] == [None] * 20
    _set_src(out, 0, [[0, 6], [6, 14]])  # restored: the channels are back
    assert _json_channels(out)["net_src.bin"] == [0] * 6 + [1] * 14


def _hier(tmp_path: Path) -> Path:
    """A HIER all-reduce of 8192 bf16 over [0, 1, 128, 129] of trn2:nodes=2 (meshcase's
    topology): rank 0 crosses the network on channels 1 and 2, one op each
    (``fifo`` ops [0, 1] and [1, 1]), each op's transmit and receive FIFO two entries, a
    terminator and the block's EXEC_COMPLETE entry (src and dest [0, 4], [4, 4])."""
    import meshcase
    out = tmp_path / "hier"
    meshcase.lower(meshcase.spec([[0, 1, 128, 129]], [("all_reduce", "bf16", "add", 8192)]),
                   out, algo="hier")
    doc = json.loads((out / "rank-0000" / "manifest.json").read_text())
    assert [(f["channel"], f["ops"], f["src"], f["dest"]) for f in doc["fifo"]] == [
        (1, [0, 1], [0, 4], [0, 4]), (2, [1, 1], [4, 4], [4, 4])]
    return out


def _set_fifo(out: Path, key: str, values: list) -> None:
    """Rank 0's manifest with its fifo slices' ``key`` set to ``values``."""
    man = out / "rank-0000" / "manifest.json"
    doc = json.loads(man.read_text())
    for item, value in zip(doc["fifo"], values):
        item[key] = value
    man.write_text(json.dumps(doc))


def _no_channel_shown(out: Path) -> None:
    """Every net_src and net_dest record of rank 0 shows no channel, in --json, in the
    table of the output folder and of the file given alone, and no form has a traceback."""
    got = _json_channels(out)
    assert got["net_src.bin"] == [None] * 8 and got["net_dest.bin"] == [None] * 8
    for name in ("net_src.bin", "net_dest.bin"):
        assert _table_channels(out, name) == ["-"] * 8
    res = CliRunner().invoke(main, ["dump", "--fifo", str(out), "--rank", "0"])
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert "Traceback" not in json.dumps(got)


def test_slices_that_tile_the_files_but_split_an_op_show_no_channel(tmp_path):
    """Review 50p: rank 0's src slices moved to [0, 5] / [5, 3] still tile net_src.bin (8
    records), so the tiling check passes, but channel 1's slice then holds channel 2's
    first entry after its EXEC_COMPLETE entry (FORMATS §8: a slice's records are its ops'
    entries, each op closed by a terminator, each block's segment by an EXEC_COMPLETE
    entry), which simulate refuses; dump showed record 4 as channel 1.  [0, 3] / [3, 5]
    leaves channel 1's segment without its EXEC_COMPLETE entry and gives channel 2 two of
    them.  Same with dest.  None is shown."""
    out = _hier(tmp_path)
    assert _json_channels(out)["net_src.bin"] == [1] * 4 + [2] * 4
    for key in ("src", "dest"):
        name = {"src": "net_src.bin", "dest": "net_dest.bin"}[key]
        _set_fifo(out, key, [[0, 5], [5, 3]])
        _simulate_refuses(out, f"{name}, record 4: records after the last segment's "
                               "EXEC_COMPLETE entry")
        _no_channel_shown(out)
        _set_fifo(out, key, [[0, 3], [3, 5]])
        _simulate_refuses(out, f"{name}, record 2: the FIFO ends without block 0's "
                               "EXEC_COMPLETE entry")
        _no_channel_shown(out)
        _set_fifo(out, key, [[0, 4], [4, 4]])  # restored: the channels are back
        assert _json_channels(out)[name] == [1] * 4 + [2] * 4


def test_a_slice_labelled_with_another_channel_shows_no_channel(tmp_path):
    """Review 50p: rank 0's channel-2 slice relabelled channel 3 still tiles the files, but
    its net_ops.bin row 1 stores enc_channel 2 (FORMATS §8.1), so simulate refuses it; dump
    showed records 3-5 as channel 3.  None is shown."""
    out = _hier(tmp_path)
    _set_fifo(out, "channel", [1, 3])
    _simulate_refuses(out, "record 1: inc_send_handshake should be the INC window of this "
                           "rank's semaphore 29 (channel 3 send_sema)")
    _no_channel_shown(out)
