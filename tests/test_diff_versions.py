"""`nrtrewrite diff` of outputs across versions (review 47h): a TOPSP_KICK word's fields named
as FORMATS §9 lays them out; the manifests' lists of keyed items lined up by their key."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner

from nrtrewrite import diff as D
from nrtrewrite.cli import main
from nrtrewrite.golden import lower_to

FIX = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def sbuf_out(tmp_path_factory):
    # sbuf.neff: four 0xD9+0xDA triggers on sg00 sp, at words 1-2, 3-4, 6-7, 8-9
    return lower_to(FIX / "sbuf.neff", tmp_path_factory.mktemp("kick") / "a", None)


def _rebuild_neff(path: Path, edit) -> None:
    """Rewrite the NEFF at ``path`` with ``edit(members)`` applied (header kept, hash and
    sizes recomputed)."""
    from nrtrewrite.neff.container import build_container, read_container
    c = read_container(path.read_bytes(), verify_hash=False)
    members = {k: bytes(v) for k, v in c.members.items()}
    edit(members)
    path.write_bytes(build_container(c.header, members))


def _edit_word(members: dict, member: str, index: int, at: int, new: bytes) -> None:
    data = bytearray(members[member])
    data[index * 64 + at:index * 64 + at + len(new)] = new
    members[member] = bytes(data)


def _neff_lines(a: Path, b: Path) -> list[str]:
    return [d.line() for d in D.diff_outputs(a, b) if d.where.startswith("sbuf.neff:")]


def test_a_kick_words_fields_are_named_where_both_manifests_name_it(sbuf_out, tmp_path):
    """docs/CLI.md "diff": a differing TOPSP_KICK word (one both manifests' `triggers[]`
    name, with the kick's opcode 0xA2 and length_dw 16 on both sides) is shown by the fields
    FORMATS §9 gives it, `spad_index` (bytes 12..13), `word` (14..15), `trigger` (16..19),
    its reserved bytes 20..63 as runs; another word keeps its operand bytes as runs.  It
    was `bytes[12:14]: '0100' != '0201'` and so on."""
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(sbuf_out, a)
    shutil.copytree(sbuf_out, b)
    top = json.loads((a / "manifest.json").read_text())
    t1 = top["triggers"][1]
    assert (t1["trigger"], t1["subgraph"], t1["engine"], t1["index"]) == (1, "sg00", "sp", 3)
    assert t1["src"]["ap"] is not None  # a former 0xD9+0xDA pair: words 3 and 4
    # A's word 4 read by the FORMATS §9 layout, with struct
    from nrtrewrite.neff.container import read_container
    sp = read_container((a / "sbuf.neff").read_bytes(), verify_hash=False).members["sg00/sp.bin"]
    word4 = bytes(sp[4 * 64:5 * 64])
    assert word4[0:2] == bytes([0xA2, 16])
    spad, wordno, trig = struct.unpack_from("<HHI", word4, 12)
    assert (wordno, trig) == (1, 1)  # the second word of trigger 1

    def edit(members):
        # kick word 4: spad_index 258, word 5, trigger 9, reserved byte 30 set
        _edit_word(members, "sg00/sp.bin", 4, 12, struct.pack("<HHI", 258, 5, 9))
        _edit_word(members, "sg00/sp.bin", 4, 30, b"\xab")
        # word 0, the input's own (no trigger's): its byte 12
        _edit_word(members, "sg00/sp.bin", 0, 12, bytes([sp[12] ^ 0xFF]))
    _rebuild_neff(b / "sbuf.neff", edit)
    assert _neff_lines(a, b) == [
        f"sbuf.neff:sg00/sp.bin[0] bytes[12:13]: '{sp[12]:02x}' != '{sp[12] ^ 0xFF:02x}'",
        f"sbuf.neff:sg00/sp.bin[4] spad_index: {spad} != 258",
        "sbuf.neff:sg00/sp.bin[4] word: 1 != 5",
        "sbuf.neff:sg00/sp.bin[4] trigger: 1 != 9",
        "sbuf.neff:sg00/sp.bin[4] reserved[30:31]: '00' != 'ab'"]
    res = CliRunner().invoke(main, ["diff", str(a), str(b), "--json", "--max", "0"])
    got = [(d["record"], d["field"], d["path"], d["a"], d["b"])
           for d in json.loads(res.stdout)["differences"] if d["record"] == 4]
    assert got == [(4, "spad_index", ["spad_index"], spad, 258),
                   (4, "word", ["word"], 1, 5), (4, "trigger", ["trigger"], 1, 9),
                   (4, "reserved[30:31]", ["reserved[30:31]"], "00", "ab")]

    # B's manifest no longer names trigger 1: its words are the input's own there (FORMATS
    # §9: a kick word is told by the manifest), shown by their bytes as before
    doc = json.loads((b / "manifest.json").read_text())
    del doc["triggers"][1]
    (b / "manifest.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    new4 = bytearray(word4)
    new4[12:20] = struct.pack("<HHI", 258, 5, 9)
    new4[30] = 0xAB
    sp4, j = [], 12  # each run of differing bytes from byte 12 on, a byte at a time
    while j < 64:
        k = j
        while k < 64 and word4[k] != new4[k]:
            k += 1
        if k > j:
            sp4.append(f"sbuf.neff:sg00/sp.bin[4] bytes[{j}:{k}]: '{word4[j:k].hex()}' != "
                       f"'{bytes(new4[j:k]).hex()}'")
        j = k + 1
    assert sp4[-1] == "sbuf.neff:sg00/sp.bin[4] bytes[30:31]: '00' != 'ab'"
    assert _neff_lines(a, b)[1:] == sp4

    # both manifests name it, but B's word is no kick word (opcode 0xC7): not named either
    shutil.copy(a / "manifest.json", b / "manifest.json")
    _rebuild_neff(b / "sbuf.neff", lambda m: _edit_word(m, "sg00/sp.bin", 4, 0, b"\xc7"))
    assert _neff_lines(a, b)[1:] == ["sbuf.neff:sg00/sp.bin[4] opcode: 162 != 199", *sp4]


def test_an_older_outputs_buffers_line_up_by_role(tmp_path):
    """docs/CLI.md "diff": a HIER leg's `buffers` of an output written before 2026-12-05
    (every leg listed `gw2` and `recv2`, after `gw` and at the end) against today's are the
    two added items, by role, and the length; each list was lined up by position, so the
    unchanged `out` buffer changed role and offset (50 differences for two_node128's
    golden)."""
    new = lower_to(FIX / "two_node128.neff", tmp_path / "new", [0])
    old = tmp_path / "old"
    shutil.copytree(new, old)
    doc = json.loads((old / "manifest.json").read_text())
    want = []
    for t in doc["triggers"]:
        for leg in t["hier"]["legs"]:
            bufs = leg["buffers"]
            assert bufs[0]["role"] == "gw"
            if "gw2" in [x["role"] for x in bufs]:  # (a single-cycle leg has them today)
                continue
            gw2 = {"offset": 4096, "region": "gw", "role": "gw2"}
            recv2 = {"offset": 8192, "region": "scratch", "role": "recv2"}
            leg["buffers"] = [bufs[0], gw2, *bufs[1:], recv2]
            at = f'triggers[{t["trigger"]}].hier.legs[name="{leg["name"]}"].buffers'
            want += [f"manifest.json {at} (length): {len(bufs) + 2} != {len(bufs)}",
                     f'manifest.json {at}[role="gw2"]: {json.dumps(gw2)} != <absent>',
                     f'manifest.json {at}[role="recv2"]: {json.dumps(recv2)} != <absent>']
    (old / "manifest.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    assert len(want) > 3
    assert [d.line() for d in D.diff_outputs(old, new)] == want
    res = CliRunner().invoke(main, ["diff", str(old), str(new), "--json", "--max", "2"])
    got = json.loads(res.stdout)["differences"][1]
    leg = doc["triggers"][0]["hier"]["legs"][0]
    assert leg["buffers"][1]["role"] == "gw2"  # (the first leg was edited)
    assert got["path"] == ["triggers", 0, "hier", "legs", {"name": leg["name"]}, "buffers",
                           {"role": "gw2"}]
    assert (got["a_present"], got["b_present"], got["b"]) == (True, False, None)


def _lines(a, b, keyed=True):
    return [d.line() for d in D._json_diff("m.json", a, b, keyed=keyed)]


def test_keyed_lists_line_up_by_key_and_others_by_position():
    """docs/CLI.md "diff": in a manifest, `buffers` by `role`, `channels` and `kangaring` and
    `fifo` by `channel`, `legs` by `name`, `regions` by `name`, where that key names each item
    once on both sides; another order of the same items is one `(order)` line with each
    side's keys; a key missing, repeated or of another type, another list (`groups`,
    `triggers`), or a NEFF's JSON member: by position, as before."""
    x, y, z = ({"name": n, "op": o} for n, o in (("x", 1), ("y", 2), ("z", 3)))
    assert _lines({"legs": [x, y, z]}, {"legs": [x, dict(z, op=4)]}) == [
        "m.json legs (length): 3 != 2", 'm.json legs[name="y"]: {"name": "y", "op": 2} != '
        "<absent>", 'm.json legs[name="z"].op: 3 != 4']
    assert _lines({"legs": [x, y]}, {"legs": [y, x]}) == [
        'm.json legs (order): ["x", "y"] != ["y", "x"]']
    assert _lines({"legs": [x, y]}, {"legs": [z, dict(x, op=5)]}) == [
        'm.json legs[name="x"].op: 1 != 5', 'm.json legs[name="y"]: {"name": "y", "op": 2} != '
        '<absent>', 'm.json legs[name="z"]: <absent> != {"name": "z", "op": 3}']
    c0, c1, c2 = ({"channel": c, "order": [c]} for c in range(3))
    for name in ("channels", "kangaring", "fifo"):
        assert _lines({name: [c0, c1, c2]}, {name: [c0, c2]}) == [
            f"m.json {name} (length): 3 != 2",
            f'm.json {name}[channel=1]: {{"channel": 1, "order": [1]}} != <absent>']
    r = [{"name": "a", "size": 1}, {"name": "scratch", "size": 2}]
    assert _lines({"memory": {"regions": r}}, {"memory": {"regions": r[1:]}}) == [
        "m.json memory.regions (length): 2 != 1",
        'm.json memory.regions[name="a"]: {"name": "a", "size": 1} != <absent>']
    # by position: a key repeated, missing, or a boolean; lists not keyed; a NEFF member
    positional = ["m.json channels (length): 3 != 2",
                  "m.json channels[1].order[0]: 1 != 2",
                  'm.json channels[2]: {"channel": 0, "order": [2]} != <absent>']
    twice = [c0, c1, dict(c2, channel=0)]
    assert _lines({"channels": twice}, {"channels": [c0, dict(c1, order=[2])]}) == positional
    assert _lines({"channels": [c0, {"order": [1]}]}, {"channels": [c0]}) == [
        "m.json channels (length): 2 != 1", 'm.json channels[1]: {"order": [1]} != <absent>']
    assert _lines({"channels": [{"channel": True}, {"channel": False}]},
                  {"channels": [{"channel": False}]}) == [
        "m.json channels (length): 2 != 1", "m.json channels[0].channel: true != false",
        'm.json channels[1]: {"channel": false} != <absent>']
    assert _lines({"groups": [c0, c1]}, {"groups": [c1]}) == [
        "m.json groups (length): 2 != 1", "m.json groups[0].channel: 0 != 1",
        "m.json groups[0].order[0]: 0 != 1", 'm.json groups[1]: {"channel": 1, "order": [1]} '
        "!= <absent>"]
    assert _lines({"legs": [x, y]}, {"legs": [y]}, keyed=False) == [
        "m.json legs (length): 2 != 1", 'm.json legs[0].name: "x" != "y"',
        "m.json legs[0].op: 1 != 2", 'm.json legs[1]: {"name": "y", "op": 2} != <absent>']


def test_a_one_word_kick_is_named_and_the_word_after_it_is_not(tmp_path):
    """A 0xC7 / 0xC8 trigger leaves one kick word, at its manifest index (ar2.neff: word 2 of
    sg00/sp.bin, FORMATS §9); the word after it is the input's own, shown by its bytes even
    when it has a kick's opcode and length on both sides (a rule off by one word, or taking
    two words a trigger, would name its fields)."""
    a, b = tmp_path / "a", tmp_path / "b"
    lower_to(FIX / "ar2.neff", a, None)
    (t,) = json.loads((a / "manifest.json").read_text())["triggers"]
    assert (t["subgraph"], t["engine"], t["index"], t["src"].get("ap")) == ("sg00", "sp", 2,
                                                                            None)

    def look_like_a_kick(members):  # word 3 with the kick's opcode and length_dw, both sides
        _edit_word(members, "sg00/sp.bin", 3, 0, bytes([0xA2, 16]))
    _rebuild_neff(a / "ar2.neff", look_like_a_kick)
    shutil.copytree(a, b)
    from nrtrewrite.neff.container import read_container
    sp = read_container((a / "ar2.neff").read_bytes(), verify_hash=False).members["sg00/sp.bin"]
    spad = struct.unpack_from("<H", sp, 2 * 64 + 12)[0]
    w3 = sp[3 * 64 + 12]

    def edit(members):
        _edit_word(members, "sg00/sp.bin", 2, 12, struct.pack("<H", spad + 7))
        _edit_word(members, "sg00/sp.bin", 3, 12, bytes([w3 ^ 0x5A]))
    _rebuild_neff(b / "ar2.neff", edit)
    got = [d.line() for d in D.diff_outputs(a, b) if d.where.startswith("ar2.neff:")]
    assert got == [f"ar2.neff:sg00/sp.bin[2] spad_index: {spad} != {spad + 7}",
                   f"ar2.neff:sg00/sp.bin[3] bytes[12:13]: '{w3:02x}' != '{w3 ^ 0x5A:02x}'"]


def test_regions_line_up_by_subgraph_and_name(tmp_path):
    """docs/CLI.md "diff": `memory.regions` by (`subgraph`, `name`), a var's name being its
    subgraph's: ar2.yaml with `grad_in` renamed `scratch` lowers regions named `scratch`,
    `grad_out`, `scratch` (the scratch region, subgraph null) and `gw`, so `name` alone
    repeats; the scratch region's offset moved is named `[subgraph=null, name="scratch"]`,
    JSON path element `{"subgraph": null, "name": "scratch"}`, and the var and the region
    swapped are one `(order)` line of [subgraph, name] pairs (by position: four values)."""
    spec = tmp_path / "sc.yaml"
    spec.write_text((FIX / "ar2.yaml").read_text().replace("grad_in", "scratch"))
    res = CliRunner().invoke(main, ["assemble", str(spec), "-o", str(tmp_path / "sc.neff")])
    assert res.exit_code == 0, res.output
    a, b = tmp_path / "a", tmp_path / "b"
    lower_to(tmp_path / "sc.neff", a, None)
    shutil.copytree(a, b)
    doc = json.loads((a / "manifest.json").read_text())
    regions = doc["memory"]["regions"]
    assert [(r["subgraph"], r["name"]) for r in regions] == [
        ("sg00", "scratch"), ("sg00", "grad_out"), (None, "scratch"), (None, "gw")]
    off = regions[2]["offset"]
    regions[2]["offset"] = off + 4096
    (b / "manifest.json").write_text(json.dumps(doc))
    assert [d.line() for d in D.diff_outputs(a, b)] == [
        f'manifest.json memory.regions[subgraph=null, name="scratch"].offset: {off} != '
        f'{off + 4096}']
    res = CliRunner().invoke(main, ["diff", str(a), str(b), "--json"])
    (got,) = json.loads(res.stdout)["differences"]
    assert got["path"] == ["memory", "regions", {"subgraph": None, "name": "scratch"},
                           "offset"]
    assert got["field"] == 'memory.regions[subgraph=null, name="scratch"].offset'
    regions[2]["offset"] = off
    regions[0], regions[2] = regions[2], regions[0]
    (b / "manifest.json").write_text(json.dumps(doc))
    assert [d.line() for d in D.diff_outputs(a, b)] == [
        'manifest.json memory.regions (order): [["sg00", "scratch"], ["sg00", "grad_out"], '
        '[null, "scratch"], [null, "gw"]] != [[null, "scratch"], ["sg00", "grad_out"], '
        '["sg00", "scratch"], [null, "gw"]]']


def test_a_rank_manifests_fifo_lines_up_by_channel(tmp_path):
    """A rank manifest's `fifo` (FORMATS §1.2) is lined up by `channel` (docs/CLI.md
    "diff"): channel 1's slices removed is that item `<absent>` in B, not channel 2's slices
    compared with channel 1's by position."""
    def fifo(c, first):
        return {"channel": c, "ops": [first, 2], "src": [first, 1], "dest": [first, 1]}
    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    pa.write_text(json.dumps({"rank": 0, "fifo": [fifo(0, 0), fifo(1, 2), fifo(2, 4)]}))
    pb.write_text(json.dumps({"rank": 0, "fifo": [fifo(0, 0), fifo(2, 4)]}))
    lines = []
    rep = D.Report(on_difference=lambda i, ls: lines.extend(d.line() for d in ls))
    D._rank_manifest_diff(rep, "rank-0000", pa, pb, True, True)
    assert lines == [
        "rank-0000/manifest.json fifo (length): 3 != 2",
        'rank-0000/manifest.json fifo[channel=1]: {"channel": 1, "ops": [2, 2], '
        '"src": [2, 1], "dest": [2, 1]} != <absent>']


def _set_top(out: Path, **keys) -> None:
    """Rewrite ``out``'s top-level manifest with ``keys`` set (a value None: the key removed),
    in lower's layout."""
    doc = json.loads((out / "manifest.json").read_text())
    for k, v in keys.items():
        if v is None:
            del doc[k]
        else:
            doc[k] = v
    (out / "manifest.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def test_outputs_of_other_versions_are_noted(tmp_path):
    """Bug (fixer 48b): ``diff`` of outputs written by other versions (a golden of an older
    nrtrewrite) said nothing of it: with ``--ignore tool_version``, as CI runs it, not even
    the field.  docs/CLI.md "diff": a note on stderr names both manifests' `format_version`
    and `tool_version` (`no KEY` for one a manifest lacks), `--json` has `"versions"`; the
    exit status and the differences are as before (0: identical once ignored)."""
    a, b = tmp_path / "a", tmp_path / "b"
    lower_to(FIX / "ar2.neff", a, None)
    shutil.copytree(a, b)
    top = json.loads((a / "manifest.json").read_text())
    assert top["format_version"] == 2  # (FORMATS.md §1.1)
    _set_top(b, tool_version="0.0.9")
    note = (f"nrtrewrite: note: the outputs' versions differ: {a}/manifest.json has "
            f"format_version 2, tool_version \"{top['tool_version']}\"; {b}/manifest.json "
            "has format_version 2, tool_version \"0.0.9\"; differences may come from the "
            "versions alone\n")
    run = CliRunner().invoke
    res = run(main, ["diff", str(a), str(b), "--ignore", "tool_version"])
    assert (res.exit_code, res.stdout, res.stderr) == (0, "identical\n", note)
    res = run(main, ["diff", str(a), str(b)])
    assert res.exit_code == 1 and res.stderr == note
    assert res.stdout == (f"manifest.json tool_version: \"{top['tool_version']}\" != "
                          "\"0.0.9\"\n1 difference(s)\n")
    res = run(main, ["diff", str(a), str(b), "--json", "--ignore", "tool_version"])
    doc = json.loads(res.stdout)
    assert (res.exit_code, res.stderr, doc["identical"], doc["count"]) == (0, "", True, 0)
    assert doc["versions"] == {"a": {"format_version": 2, "tool_version": top["tool_version"]},
                               "b": {"format_version": 2, "tool_version": "0.0.9"}}

    # another format version (written as a number with a fraction: another JSON type),
    # and no tool_version in B: the note says so; format_version stays a field difference
    _set_top(b, tool_version=None, format_version=2.0)
    res = run(main, ["diff", str(a), str(b), "--ignore", "tool_version"])
    assert res.exit_code == 1
    assert res.stdout == "manifest.json format_version: 2 != 2.0\n1 difference(s)\n"
    assert res.stderr == (f"nrtrewrite: note: the outputs' versions differ: {a}/manifest.json "
                          f"has format_version 2, tool_version \"{top['tool_version']}\"; "
                          f"{b}/manifest.json has format_version 2.0, no tool_version; "
                          "differences may come from the versions alone\n")
    doc = json.loads(run(main, ["diff", str(a), str(b), "--json"]).stdout)
    assert doc["versions"]["b"] == {"format_version": 2.0}
    assert type(doc["versions"]["b"]["format_version"]) is float


def test_outputs_of_one_version_are_not_noted(tmp_path):
    """docs/CLI.md "diff": two outputs of the same versions get no note and no `"versions"`:
    their report is as before, byte for byte (the document's keys those it always had)."""
    a, b = tmp_path / "a", tmp_path / "b"
    lower_to(FIX / "ar2.neff", a, None)
    shutil.copytree(a, b)
    top = json.loads((a / "manifest.json").read_text())
    _set_top(b, input={**top["input"], "name": "other.neff"})
    run = CliRunner().invoke
    res = run(main, ["diff", str(a), str(b)])
    assert (res.exit_code, res.stderr) == (1, "")
    assert res.stdout == ('manifest.json input.name: "ar2.neff" != "other.neff"\n'
                          "1 difference(s)\n")
    res = run(main, ["diff", str(a), str(b), "--json"])
    assert res.stderr == ""
    assert list(json.loads(res.stdout)) == ["differences", "files", "count", "shown",
                                            "identical"]
    res = run(main, ["diff", str(a), str(a), "--json"])
    assert res.stdout == ('{\n "differences": [],\n "files": [],\n "count": 0,\n "shown": 0,\n'
                          ' "identical": true\n}\n')
