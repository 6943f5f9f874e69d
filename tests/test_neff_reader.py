"""read_model: def.json / neff.json rules and every trigger rule of NEFF-LIKE.md §3.

Each bad case is built from a spec (with the assembler's escape hatches) and must
fail with one line that names where (member, stream, instruction, field) and why.
"""

from __future__ import annotations

import json
import os
import struct
import sys

import pytest

from nrtrewrite.codes import AluOp, CType, DType, Opcode
from nrtrewrite.errors import NrtRewriteError, ParseError, ValidationError
from nrtrewrite.neff.assembler import assemble_spec
from nrtrewrite.neff.reader import read_model, read_model_bytes
from nrtrewrite.neff.writer import rewrite_streams, write_model

SP = "m.neff: member sg00/sp.bin, subgraph sg00, stream sp, instruction 1"


def build(spec: dict) -> bytes:
    spec["validate"] = False
    return assemble_spec(spec)


def error_of(spec: dict) -> NrtRewriteError:
    with pytest.raises(NrtRewriteError) as exc:
        read_model_bytes(build(spec), path="m.neff")
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("m.neff: ")
    return exc.value


def trig(spec: dict) -> dict:
    """The body of the all-reduce at sg00/sp[1] of the base spec."""
    return spec["subgraphs"][0]["engines"]["sp"][1]["all_reduce"]


def set_trigger(spec: dict, kind: str, body: dict) -> None:
    spec["subgraphs"][0]["engines"]["sp"][1] = {kind: body}


SBUF_AR = {"dtype": "bf16", "op": "add",
           "src": {"var": "sb_in", "partitions": 128, "dims": [[1, 8]]},
           "dst": {"var": "sb_out", "partitions": 128, "dims": [[1, 8]]}}


# ---------------------------------------------------------------------------
# good input

def test_base_spec_decodes(base_spec):
    model = read_model_bytes(build(base_spec), path="m.neff")
    (t,) = model.triggers
    assert (t.ordinal, t.subgraph, t.engine, t.index) == (0, "sg00", "sp", 1)
    assert t.opcode is Opcode.PSEUDO_TRIGGER_COLLECTIVE and t.ctype is CType.ALL_REDUCE
    assert t.dtype is DType.BF16 and t.alu_op is AluOp.ADD
    assert t.replica_group == tuple(range(8)) and t.num_elements == 2048
    assert t.in_bytes == t.out_bytes == 4096
    assert model.world == tuple(range(8))
    assert list(model.members) == ["neff.json", "sg00/def.json", "sg00/sp.bin", "sg00/pool.bin"]


def test_ordinals_follow_subgraph_then_engine_then_index(fixtures_dir):
    model = read_model(fixtures_dir / "c7c8.neff")
    keys = [(t.subgraph, t.engine, t.index) for t in model.triggers]
    assert [t.ordinal for t in model.triggers] == list(range(len(keys)))
    assert keys == [("sg00", "sp", 2), ("sg00", "sp", 4), ("sg01", "act", 1),
                    ("sg01", "act", 3), ("sg01", "act", 4)]
    assert model.triggers[0].sync.semaphore_value == 1
    assert model.triggers[1].stream_id == 1


def test_sbuf_pair_decodes(fixtures_dir):
    model = read_model(fixtures_dir / "sbuf.neff")
    t = model.triggers[2]
    assert t.opcode is Opcode.PSEUDO_TRIGGER_COLLECTIVE2 and t.num_words == 2
    assert t.ctype is CType.ALL_GATHER and t.alu_op is None
    assert t.src.ap.partition_start == 32 and t.src.ap.partition_count == 16
    assert t.dst.ap.num_elements == t.out_elements == 16 * 64 * 8
    assert t.sync.wait_idx == 3 and t.ext_sync.update_idx == 4
    assert model.triggers[1].channel_id == 1 and model.triggers[1].stream_id == 1
    assert model.triggers[1].src.ap.dims == ((1, 64), (128, 8), (0, 1))


def test_stream_word_lengths_and_opaque_pass_through(fixtures_dir):
    model = read_model(fixtures_dir / "c7c8.neff")
    sp = model.subgraph("sg00").streams["sp"]
    assert len(sp) == 64 * 7
    assert sp[0] == 0x41 and sp[12:20] == bytes.fromhex("0102030405060708")


def test_reading_never_writes(fixtures_dir, tmp_path):
    src = tmp_path / "ro.neff"
    src.write_bytes((fixtures_dir / "mix8.neff").read_bytes())
    os.utime(src, (1_000_000, 1_000_000))
    before = (src.read_bytes(), src.stat().st_mtime_ns, sorted(os.listdir(tmp_path)))
    read_model(src)
    read_model(src, verify_hash=False)
    assert (src.read_bytes(), src.stat().st_mtime_ns, sorted(os.listdir(tmp_path))) == before


def test_missing_file():
    with pytest.raises(ParseError, match=r"^/nonexistent/x.neff: cannot read: No such file"):
        read_model("/nonexistent/x.neff")


def test_rewrite_streams_round_trip(fixtures_dir, tmp_path):
    model = read_model(fixtures_dir / "mix8.neff")
    nop = bytes((0, 16, 0, 0)) + bytes(60)
    data = rewrite_streams(model, {("sg00", "sp"): nop * 3})
    again = read_model_bytes(data)
    assert list(again.members) == list(model.members)
    assert again.subgraph("sg00").streams["sp"] == nop * 3
    assert [t.engine for t in again.triggers] == ["pool"] * 4
    assert again.header.name == model.header.name and again.header.hash != model.header.hash
    out = tmp_path / "out.neff"
    write_model(again, out)
    assert read_model(out).subgraph("sg00").streams["sp"] == nop * 3
    assert [p.name for p in tmp_path.iterdir()] == ["out.neff"]  # no temp file left
    with pytest.raises(ValidationError, match="multiple of 64"):
        rewrite_streams(model, {("sg00", "sp"): b"x"})
    with pytest.raises(ValidationError, match="no such engine"):
        rewrite_streams(model, {("sg00", "zz"): b""})


def test_write_model_takes_header_and_members_or_finished_bytes(fixtures_dir, tmp_path):
    """writer.write_model writes a Model, a (header, members) pair, whose members are
    written in the order given, or a file's bytes unchanged (ModelOrParts)."""
    model = read_model(fixtures_dir / "mix8.neff")
    whole = tmp_path / "whole.neff"
    write_model(model, whole)
    parts = tmp_path / "parts.neff"
    write_model((model.header, dict(model.members)), parts)
    assert parts.read_bytes() == whole.read_bytes()
    write_model((model.header, list(reversed(model.members.items()))), parts)
    assert list(read_model(parts).members) == list(reversed(model.members))
    raw = tmp_path / "raw.neff"
    write_model(b"not a model", raw)
    assert raw.read_bytes() == b"not a model"


# ---------------------------------------------------------------------------
# members and neff.json

@pytest.mark.parametrize("member,why", [
    ("neff.json", "member neff.json: member missing"),
    ("sg00/def.json", "member sg00/def.json, subgraph sg00: member missing"),
    ("sg00/pool.bin", "member sg00/pool.bin, subgraph sg00, stream pool: engine stream missing"),
])
def test_missing_members(base_spec, member, why):
    base_spec["omit_members"] = [member]
    assert why in str(error_of(base_spec))


@pytest.mark.parametrize("member,why", [
    ("sg00/dve.bin", "m.neff: member sg00/dve.bin, subgraph sg00: named like the stream of engine "
                     "'dve', which sg00/def.json does not list (engines: sp, pool): a trigger in "
                     "it would be left unlowered"),
    ("sg00/.bin", "m.neff: member sg00/.bin, subgraph sg00: named like the stream of engine '', "
                  "which sg00/def.json does not list (engines: sp, pool): a trigger in it would "
                  "be left unlowered"),
    ("sg01/sp.bin", "m.neff: member sg01/sp.bin: in the folder of subgraph 'sg01', which "
                    "neff.json does not list (subgraphs: sg00): a trigger in it would be left "
                    "unlowered"),
    ("sg7/def.json", "m.neff: member sg7/def.json: in the folder of subgraph 'sg7', which "
                     "neff.json does not list (subgraphs: sg00): a trigger in it would be left "
                     "unlowered"),
])
def test_streams_nobody_reads_are_refused(base_spec, member, why):
    """A stream def.json does not list, or in a subgraph neff.json does not list, was kept
    and passed through with its 0xC7 triggers live (NEFF-LIKE.md §1: members are of the
    forms listed, anything else is invalid)."""
    base_spec["extra_members"] = [{"name": member, "hex": "c7" + "00" * 63}]
    err = error_of(base_spec)
    assert isinstance(err, ValidationError) and str(err) == why


def test_other_extra_members_pass_through(base_spec, tmp_path):
    # (a def.json deeper than a top-level folder makes no subgraph folder, nor a file whose
    # name only ends in def.json: ASSEMBLE.md "Members", a folder that holds a `def.json`)
    extra = ["README", "sg00/notes.txt", "sg00/sub/dve.bin", "sgx/sp.bin", "weights/sg01.bin",
             "SG01/sp.bin", "weights/inner/def.json", "weights/inner/sp.bin",
             "notes/old-def.json", "notes/sp.bin"]
    base_spec["extra_members"] = [{"name": n, "text": n} for n in extra]
    model = read_model_bytes(build(base_spec), path="m.neff")
    assert list(model.members)[-len(extra):] == extra
    out = tmp_path / "out.neff"
    write_model(model, out)
    assert {n: read_model(out).members[n] for n in extra} == {n: n.encode() for n in extra}


def test_stream_not_multiple_of_64(base_spec):
    base_spec["extra_members"] = [{"name": "sg00/pool.bin", "hex": "00" * 65}]
    err = error_of(base_spec)
    assert isinstance(err, ParseError)
    assert "stream pool: stream length 65 is not a multiple of 64" in str(err)


@pytest.mark.parametrize("neff_json,why", [
    ({"subgraphs": ["sg00"]}, "field neff_like_version: missing key"),
    ({"neff_like_version": 2, "subgraphs": ["sg00"]},
     "field neff_like_version: neff_like_version must be 1 (the one version nrtrewrite reads), "
     "not 2"),
    ({"neff_like_version": 1, "subgraphs": []}, "non-empty list"),
    ({"neff_like_version": 1, "subgraphs": ["sg00", "sg00"]}, "listed twice"),
    ({"neff_like_version": 1, "subgraphs": ["../x"]}, "not a plain file name"),
    ({"neff_like_version": 1, "subgraphs": ["sg01"]}, "member sg01/def.json, subgraph sg01: "
                                                      "member missing"),
])
def test_neff_json_rules(base_spec, neff_json, why):
    base_spec["neff_json"] = neff_json
    assert why in str(error_of(base_spec))


@pytest.mark.parametrize("raw,why", [
    ("{", "invalid JSON: Expecting property name"),
    ('{"a": 1, "a": 2}', "member neff.json, field a: invalid JSON: duplicate key 'a'"),
    # (the object given a key twice closes before the long integer is read: the path was lost)
    ('{"a": {"b": 1, "b": 2}, "note": ' + "1" * 4301 + "}",
     "member neff.json, field a.b: invalid JSON: duplicate key 'b'"),
    ('{"a": NaN}', "member neff.json, field a: invalid JSON: NaN is not a finite number"),
    ("[1]", "must be a JSON object"),
    ('{"neff_like_version": 1, "subgraphs": ["sg00"], "note": [-' + "7" * 4301 + ']}',
     "member neff.json, field note[0]: invalid JSON: an integer of 4301 digits, more than "
     "4300"),
    # deeper than the JSON decoder recurses (ASSEMBLE.md: `invalid JSON: nested too deeply`)
    ('{"note": ' + "[" * 100000 + "]" * 100000 + "}", "member neff.json: invalid JSON: nested "
                                                       "too deeply"),
])
def test_neff_json_syntax(base_spec, raw, why):
    base_spec["extra_members"] = [{"name": "neff.json", "text": raw}]
    assert why in str(error_of(base_spec))


def test_json_integers_of_many_digits(base_spec):
    """An integer of more digits than CPython converts (4300 by default) was a traceback
    (ValueError) even in an ignored key: a one-line error naming the member.  4300 digits
    are read; a lower interpreter setting is a one-line error too."""
    text = '{"neff_like_version": 1, "subgraphs": ["sg00"], "note": %s}'
    base_spec["extra_members"] = [{"name": "neff.json", "text": text % ("-" + "9" * 4300)}]
    model = read_model_bytes(build(base_spec), path="m.neff")
    assert model.neff_json["note"] == -(10 ** 4300 - 1)
    base_spec["extra_members"] = [{"name": "sg00/def.json", "text": '{"x": ' + "1" * 5000 + "}"}]
    assert str(error_of(base_spec)) == ("m.neff: member sg00/def.json, subgraph sg00, field x: "
                                        "invalid JSON: an integer of 5000 digits, more than "
                                        "4300")
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)
    try:
        base_spec["extra_members"] = [{"name": "neff.json", "text": text % ("1" * 700)}]
        assert str(error_of(base_spec)) == (
            "m.neff: member neff.json: invalid JSON: Exceeds the limit (640 digits) for integer "
            "string conversion: value has 700 digits")
    finally:
        sys.set_int_max_str_digits(old)


# ---------------------------------------------------------------------------
# def.json

def _def(spec: dict, **kw) -> None:
    spec["subgraphs"][0]["def_json"] = kw


V = [{"var_id": 0, "name": "in", "type": "input", "size": 4096},
     {"var_id": 1, "name": "out", "type": "output", "size": 32768}]


@pytest.mark.parametrize("override,why", [
    (dict(var=V + [{"var_id": 1, "name": "x", "type": "input", "size": 4}]),
     "field var[2].var_id: duplicate var_id 1"),
    (dict(var=V + [{"var_id": 2, "name": "x", "type": "weird", "size": 4}]),
     'field var[2].type: unknown var type "weird"'),
    (dict(var=V + [{"var_id": 2, "name": "x", "type": "input", "size": 0}]),
     "field var[2].size: size must be a positive integer, not 0"),
    (dict(var=V + [{"var_id": 2, "name": "x", "type": "input", "size": -5}]),
     "field var[2].size: size must be a positive integer, not -5"),
    (dict(var=V + [{"var_id": 2, "name": "x", "type": "input", "size": 1.5}]),
     "field var[2].size: size must be a positive integer, not 1.5"),
    (dict(var=V + [{"var_id": 2, "name": "x", "type": "state-buffer", "size": 4}]),
     "field var[2].partitions: missing key"),
    (dict(var=V + [{"var_id": 2, "name": "x", "type": "state-buffer", "size": 4,
                    "partitions": 0}]), "field var[2].partitions: 0 is outside 1..128"),
    (dict(var=V + [{"var_id": 2, "name": "x", "type": "state-buffer", "size": 4,
                    "partitions": 129}]), "field var[2].partitions: 129 is outside 1..128"),
    (dict(var=V + [{"var_id": True, "name": "x", "type": "input", "size": 4}]),
     "field var[2].var_id: must be an integer, not true"),
    (dict(replica_groups=[]), "field replica_groups: must be a non-empty list"),
    (dict(replica_groups=[[0, 1], []]), "field replica_groups[1]: a replica group must be a "
                                        "non-empty list"),
    (dict(replica_groups=[[0, -1]]), "field replica_groups[0][1]: -1 is outside"),
    (dict(replica_groups=[[0, 1, 1]]), "field replica_groups[0][2]: rank 1 appears twice"),
    (dict(replica_groups=[[0, 1], [1, 2]]), "field replica_groups[1][0]: rank 1 is also in "
                                            "replica group 0"),
    (dict(replica_groups=[[r] for r in range(13)]), "13 replica groups, at most 12"),
    (dict(engines=[]), "field engines: must be a non-empty list"),
    (dict(engines=["sp", "sp"]), "field engines[1]: engine 'sp' listed twice"),
    (dict(engines=["../sp"]), "not a plain file name"),
    (dict(var={"in": V[0]}), "field var: must be a list"),
    (dict(var=[V[0], 1]), "field var[1]: must be an object"),
])
def test_def_json_rules(base_spec, override, why):
    _def(base_spec, **override)
    err = error_of(base_spec)
    assert isinstance(err, ValidationError)
    assert "m.neff: member sg00/def.json, subgraph sg00, field " in str(err)
    assert why in str(err)


@pytest.mark.parametrize("member,edit,where,why", [
    ("sg00/def.json", lambda d: d["var"][0].update(name="\ud800"),
     "member sg00/def.json, subgraph sg00, field var[0].name",
     "var name is not Unicode text: lone surrogate U+D800 (a JSON \\u escape) at character 0"),
    ("sg00/def.json", lambda d: d["var"][1].update(name="out\udfff"),
     "member sg00/def.json, subgraph sg00, field var[1].name",
     "var name is not Unicode text: lone surrogate U+DFFF (a JSON \\u escape) at character 3"),
    ("sg00/def.json", lambda d: d["engines"].append("p\udc80"),
     "member sg00/def.json, subgraph sg00, field engines[2]",  # after sp, pool
     "engine name is not Unicode text: lone surrogate U+DC80 (a JSON \\u escape) at character 1"),
    ("neff.json", lambda d: d["subgraphs"].append("\udbff"), "member neff.json, field subgraphs[1]",
     "subgraph name is not Unicode text: lone surrogate U+DBFF (a JSON \\u escape) at "
     "character 0"),
])
def test_names_that_are_not_unicode_text(base_spec, member, edit, where, why):
    """A JSON "\\ud800" escape is a lone surrogate: no UTF-8 output can hold it (`inspect`'s
    table crashed on a var name; `lower` put it in its manifest).  Names are refused where
    they are read."""
    doc = json.loads(read_model_bytes(build(base_spec)).members[member])
    edit(doc)
    base_spec["extra_members"] = [{"name": member, "text": json.dumps(doc)}]  # \u escapes
    err = error_of(base_spec)
    assert isinstance(err, ValidationError)
    assert str(err) == f"m.neff: {where}: {why}"


def test_partitions_of_a_dram_var_are_ignored(base_spec):
    """NEFF-LIKE.md requires `partitions` of state-buffer vars only, and unknown keys are
    ignored: on a DRAM var it was refused; now it is ignored like any unknown key (the var's
    size stays its bytes), whatever its value."""
    _def(base_spec, var=V + [
        {"var_id": 2, "name": "x", "type": "input", "size": 4, "partitions": 4},
        {"var_id": 3, "name": "y", "type": "tmp-buf", "size": 8, "partitions": "junk"},
        {"var_id": 4, "name": "z", "type": "output", "size": 16, "partitions": 0}],
        replica_groups=[list(range(8))], engines=["sp", "pool"])
    model = read_model_bytes(build(base_spec), path="m.neff")
    got = {v.name: (v.size, v.partitions) for v in model.subgraph("sg00").vars.values()}
    assert got == {"in": (4096, None), "out": (32768, None), "x": (4, None), "y": (8, None),
                   "z": (16, None)}
    assert len(model.triggers) == 1


def test_twelve_groups_are_fine(base_spec):
    _def(base_spec, replica_groups=[[r] for r in range(12)])
    read_model_bytes(build(base_spec))


# ---------------------------------------------------------------------------
# trigger words

@pytest.mark.parametrize("patch,cls,where,why", [
    ({"length_dw": 15}, ParseError, "offset 0x41, field length_dw",
     "length_dw must be 16, not 15"),
    ({"ctype": 9}, ParseError, "offset 0x4c, field ctype", "unknown CType code 0x9"),
    ({"dtype": 0x20}, ParseError, "offset 0x4e, field dtype", "unknown DType code 0x20"),
    ({"alu_op": 5}, ParseError, "offset 0x4d, field alu_op", "unknown AluOp code 0x5"),
    ({"alu_op": 0}, ValidationError, "offset 0x4d, field alu_op", "ALL_REDUCE needs an alu_op"),
    ({"reserved_2": 1}, ParseError, "offset 0x42, field reserved_2", "reserved bytes must be zero"),
    ({"reserved_15": 1}, ParseError, "offset 0x4f, field reserved_15", "reserved bytes"),
    ({"reserved_28": "00000001"}, ParseError, "offset 0x5f, field reserved_28", "reserved"),
    ({"reserved_56": "0000000000000080"}, ParseError, "offset 0x7f, field reserved_56",
     "byte 63 of the record is 0x80"),
])
def test_c8_word_rules(base_spec, patch, cls, where, why):
    trig(base_spec)["patch"] = patch
    err = error_of(base_spec)
    assert isinstance(err, cls)
    assert str(err).startswith(f"{SP}, {where}: ") and why in str(err)


def test_c7_reserved(base_spec):
    trig(base_spec).update(opcode=0xC7, patch={"reserved_48": "00" * 15 + "01"})
    assert "field reserved_48: reserved bytes must be zero" in str(error_of(base_spec))


def test_all_gather_needs_alu_zero(base_spec):
    set_trigger(base_spec, "all_gather", {"dtype": "bf16", "src": "in", "dst": "out",
                                          "num_elements": 16, "patch": {"alu_op": 4}})
    assert "field alu_op: alu_op must be 0 for ALL_GATHER, not ADD" in str(error_of(base_spec))


def test_header_reserved_nonzero(base_spec):
    base_spec["raw_header"] = {"reserved": "0000ff"}
    err = error_of(base_spec)
    assert str(err) == ("m.neff: offset 0x22e, field reserved: header: reserved bytes must be "
                        "zero (byte 558 of the record is 0xff)")


def test_d9_not_followed_by_da(base_spec):
    set_trigger(base_spec, "all_reduce", dict(SBUF_AR, ext=False))
    assert "instruction 1, offset 0x40, field opcode: 0xD9 PSEUDO_TRIGGER_COLLECTIVE2 followed " \
           "by opcode 0x00; 0xDA must follow" in str(error_of(base_spec))
    base_spec["subgraphs"][0]["engines"]["sp"].pop()  # now the 0xD9 is the last word
    assert "0xD9 PSEUDO_TRIGGER_COLLECTIVE2 at the end of the stream" in str(error_of(base_spec))


def test_stray_da(base_spec):
    da = struct.pack("<BBHBBBBI", 0xDA, 16, 0, 0, 0, 0, 0, 0) + bytes(52)
    base_spec["subgraphs"][0]["engines"]["pool"] = ["nop", {"raw": da.hex()}]
    assert "stream pool, instruction 1, offset 0x40, field opcode: 0xDA PSEUDO_EXTENSION " \
           "without a 0xD9" in str(error_of(base_spec))


def test_da_word_errors_point_at_second_word(base_spec):
    set_trigger(base_spec, "all_reduce", dict(SBUF_AR, patch_ext={"reserved_18": 1}))
    assert "instruction 2, offset 0x92, field reserved_18" in str(error_of(base_spec))
    set_trigger(base_spec, "all_reduce", dict(SBUF_AR, patch_ext={"length_dw": 8}))
    assert "instruction 2, offset 0x81, field length_dw: length_dw must be 16, not 8" in \
        str(error_of(base_spec))


@pytest.mark.parametrize("change,field,why", [
    ({"src": 99}, "src_var_id", "src var_id 99 is not in sg00/def.json"),
    ({"dst": 99}, "dst_var_id", "dst var_id 99 is not in sg00/def.json"),
    ({"src": "out"}, "src_var_id", "src var 1 ('out') is output, a src here must be input or "
                                   "tmp-buf"),
    ({"dst": "in"}, "dst_var_id", "dst var 0 ('in') is input, a dst here must be output or "
                                  "tmp-buf"),
    ({"src": "sb_in"}, "src_var_id", "src var 3 ('sb_in') is state-buffer"),
    ({"src": {"var": "in", "offset": 1}}, "src_offset",
     "src bytes [1, 4097) fall outside var 0 ('in') of 4096 bytes"),
    ({"dst": {"var": "out", "offset": 30721}}, "dst_offset", "dst bytes [30721, 34817)"),
    ({"num_elements": 0}, "num_elements", "num_elements must be > 0"),
    ({"group": 1}, "replica_group_id", "replica group 1 does not exist (sg00/def.json has 1)"),
    # num_elements is at fault when its bytes alone do not fit, the offset otherwise
    ({"num_elements": 2**64 - 1}, "num_elements", "src bytes [0, 36893488147419103230) fall"),
    ({"src": {"var": "in", "offset": 2**64 - 1}, "num_elements": 1}, "src_offset",
     f"src bytes [{2**64 - 1}, {2**64 + 1})"),
])
def test_dram_trigger_rules(base_spec, change, field, why):
    trig(base_spec).update(change)
    err = error_of(base_spec)
    assert isinstance(err, ValidationError)
    assert f"{SP}, offset 0x" in str(err) and f"field {field}: {why}" in str(err)


def test_tmp_buf_both_ways_is_fine(base_spec):
    trig(base_spec).update(src="tmp", dst={"var": "tmp", "offset": 0}, num_elements=16)
    read_model_bytes(build(base_spec))


def test_all_gather_overflow_near_2_64(base_spec):
    set_trigger(base_spec, "all_gather", {"dtype": "bf16", "src": "in", "dst": "out",
                                          "num_elements": 2**61})
    assert "field num_elements" in str(error_of(base_spec))
    # small src, huge dst: out = N x 8 elements must not wrap
    base_spec["subgraphs"][0]["vars"][0]["size"] = 2**64 - 1
    assert "field num_elements: dst bytes [0, 36893488147419103232)" in str(error_of(base_spec))


def test_reduce_scatter_divisible(base_spec):
    set_trigger(base_spec, "reduce_scatter", {"dtype": "bf16", "op": "add", "src": "in",
                                              "dst": "out", "num_elements": 2047})
    assert "field num_elements: REDUCE_SCATTER num_elements 2047 is not divisible by the " \
           "group size 8" in str(error_of(base_spec))


@pytest.mark.parametrize("change,where,why", [
    ({"src": {"var": "in", "partitions": 128, "dims": [[1, 8]]}}, "instruction 1, offset 0x50,"
     " field src_var_id", "src var 0 ('in') is input, a src here must be state-buffer"),
    ({"dst": {"var": "out", "partitions": 128, "dims": [[1, 8]]}}, "instruction 2, offset 0x94,"
     " field dst_var_id", "dst var 1 ('out') is output"),
    ({"src": {"var": "sb_in", "partitions": [100, 29], "dims": [[1, 8]]},
      "dst": {"var": "sb_out", "partitions": 29, "dims": [[1, 8]]}},
     "instruction 1, offset 0x58, field src_partition_start",
     "src partitions [100, 129) fall outside var 3 ('sb_in') with 128 partitions"),
    ({"dst": {"var": "sb_out", "start": 2040, "partitions": 128, "dims": [[1, 8]]}},
     "instruction 2, offset 0x98, field dst_start",  # (an extent that fits, placed outside)
     "dst access pattern addresses bytes [2040, 2056) of each partition, outside var 4"),
    ({"src": {"var": "sb_in", "start": 2, "partitions": 128, "dims": [[-1, 8]]}},
     "field src_start", "src access pattern addresses bytes [-12, 4)"),
    ({"src": {"var": "sb_in", "partitions": 128, "dims": [[1, 8], [1024, 2]]},
      "dst": {"var": "sb_out", "partitions": 128, "dims": [[1, 16]]}},
     "field src_dims", "addresses bytes [0, 2064)"),
    ({"num_elements": 100}, "field num_elements",
     "num_elements 100 != src access pattern elements 128x8x1x1 = 1024"),
    # an AP without elements is named at its own field (0xD9 at byte 64: src_partition_count
    # at 64 + 26, src dims at 64 + 28; 0xDA at byte 128: dst dims at 128 + 32), not as a
    # count that differs from num_elements
    ({"src": {"var": "sb_in", "partitions": 128, "dims": [[1, 8], [8, 0]]},
      "num_elements": 1024}, "instruction 1, offset 0x5c, field src_dims",
     "src free dimension has num 0 (unused dimensions have num 1)"),
    ({"src": {"var": "sb_in", "partitions": 0, "dims": [[1, 8]]}, "num_elements": 1024},
     "instruction 1, offset 0x5a, field src_partition_count", "src partition_count is 0"),
    ({"dst": {"var": "sb_out", "partitions": 128, "dims": [[1, 0]]}},
     "instruction 2, offset 0xa0, field dst_dims",
     "dst free dimension has num 0 (unused dimensions have num 1)"),
    ({"dst": {"var": "sb_out", "partitions": 64, "dims": [[1, 8]]}}, "instruction 2, offset "
     "0xa0, field dst_dims", "dst access pattern has 512 elements, ALL_REDUCE of 1024 over 8 "
                             "ranks writes 1024"),
    ({"src": {"var": "sb_in", "partitions": 0, "dims": [[1, 8]]}}, "field num_elements",
     "num_elements must be > 0"),
    ({"group": 2}, "instruction 2, offset 0x8c, field replica_group_id", "replica group 2"),
    ({"num_elements": 2**64 - 1}, "field num_elements", "!= src access pattern elements"),
])
def test_sbuf_trigger_rules(base_spec, change, where, why):
    set_trigger(base_spec, "all_reduce", dict(SBUF_AR, **change))
    msg = str(error_of(base_spec))
    assert where in msg and why in msg


def test_sbuf_access_pattern_may_end_at_the_last_byte_of_the_var_not_one_element_after(base_spec):
    """A bf16 access pattern of 8 elements from byte 2032 ends at 2048, the size of sb_out per
    partition: accepted.  From 2034 it ends at 2050, one element past: refused, naming the
    byte range (NEFF-LIKE.md: an access pattern stays inside its var)."""
    set_trigger(base_spec, "all_reduce", dict(SBUF_AR, dst={"var": "sb_out", "start": 2032,
                                                            "partitions": 128, "dims": [[1, 8]]}))
    (t,) = read_model_bytes(build(base_spec)).triggers
    assert t.dst.ap.start == 2032
    set_trigger(base_spec, "all_reduce", dict(SBUF_AR, dst={"var": "sb_out", "start": 2034,
                                                            "partitions": 128, "dims": [[1, 8]]}))
    msg = str(error_of(base_spec))
    assert msg.endswith("instruction 2, offset 0x98, field dst_start: dst access pattern "
                        "addresses bytes [2034, 2050) of each partition, outside var 4 "
                        "('sb_out') of 2048 bytes per partition"), msg
    # an extent of more than the var is the dims' fault wherever it starts
    set_trigger(base_spec, "all_reduce", dict(SBUF_AR, dst={"var": "sb_out", "start": 0,
                                                            "partitions": 128,
                                                            "dims": [[1, 4], [1024, 2]]}))
    assert "instruction 2, offset 0xa0, field dst_dims: dst access pattern addresses bytes " \
        "[0, 2056)" in str(error_of(base_spec))


def test_sbuf_all_gather_counts(base_spec):
    good = {"dtype": "bf16", "src": {"var": "sb_in", "partitions": 16, "dims": [[1, 8]]},
            "dst": {"var": "sb_out", "partitions": 128, "dims": [[1, 8]]}}
    set_trigger(base_spec, "all_gather", good)
    (t,) = read_model_bytes(build(base_spec)).triggers
    assert t.out_elements == 1024 == t.dst.ap.num_elements
    set_trigger(base_spec, "all_gather", dict(good, dst={"var": "sb_out", "partitions": 16,
                                                         "dims": [[1, 8]]}))
    assert "ALL_GATHER of 128 over 8 ranks writes 1024" in str(error_of(base_spec))


@pytest.mark.parametrize("new, why", [
    ({("sg00", "sp"): bytes(32)}, "new stream length 32 is not a multiple of 64"),
    ({("sg00", "sp"): bytes(96)}, "new stream length 96 is not a multiple of 64"),
    ({("sg09", "sp"): bytes(64)}, "no such subgraph"),
])
def test_rewrite_streams_refuses_what_is_not_a_stream_of_the_model(fixtures_dir, new, why):
    """writer.rewrite_streams: new streams are "a multiple of 64" bytes (NEFF-LIKE.md §2:
    64-byte instructions; 32 and 96 are multiples of 16 and 32, not of 64), for a subgraph
    and engine of the model: otherwise a ValidationError naming the stream, never a bare
    KeyError."""
    model = read_model(fixtures_dir / "mix8.neff")
    with pytest.raises(ValidationError, match=why):
        rewrite_streams(model, new)


def test_an_sbuf_all_gather_takes_0_or_a_known_alu_op():
    """NEFF-LIKE.md: 0xC8's alu_op is "0 for ALL_GATHER", 0xD9's table says only alu_op and
    §3 asks for a known one: an SBUF all-gather with ADD was refused (an independent writer's
    file).  It takes 0 or a known op and ignores it; 0xC8 stays strict
    (``test_all_gather_needs_alu_zero``); an unknown code is refused in both."""
    import yaml
    from nrtrewrite.errors import ParseError
    from nrtrewrite.neff.assembler import assemble_spec
    from pathlib import Path
    spec = yaml.safe_load((Path(__file__).parent.parent / "fixtures" / "sbuf.yaml").read_text())
    ops = spec["subgraphs"][0]["engines"]
    eng = next(iter(ops))
    i = next(k for k, w in enumerate(ops[eng]) if "all_gather" in w)
    for code, ok in ((0x04, True), (0x08, True), (0x09, True), (0x00, True), (0x05, False)):
        ops[eng][i]["all_gather"]["patch"] = {"alu_op": code}
        spec["validate"] = ok  # (an unknown code: written without the read-back)
        data = assemble_spec(spec)
        if ok:
            model = read_model_bytes(data, path="m.neff")
            ag = [t for t in model.triggers if t.ctype.name == "ALL_GATHER"]
            assert ag and all(t.alu_op is None for t in ag)
        else:
            with pytest.raises(ParseError, match="field alu_op: unknown AluOp code 0x5"):
                read_model_bytes(data, path="m.neff")


@pytest.mark.parametrize("names", [["x"] * 5, ["scratch", "gw", "scratch", "gw", "x"]],
                         ids=["x", "region-names"])
def test_vars_of_one_subgraph_may_share_a_name(base_spec, tmp_path, names):
    """NEFF-LIKE.md §1 leaves open whether two vars of one def.json may share a ``name``;
    nothing reads a var by name (a trigger's operands name a ``var_id``, NEFF-LIKE.md §2; the
    memory map places each var by its id), so the reader accepts it (docs/ASSEMBLE.md
    "def.json"). The base spec's all-reduce (src var 0, dst var 1, 2048 bf16 over 8 ranks)
    with all five vars named "x" (or named "scratch" and "gw", the names of the memory
    map's own regions, found by their kind): the trigger reads var 0 and writes var 1, each
    of its own region of the memory map (var 0 at DRAM offset 0, var 1 after its 4096
    bytes), and the output simulates as a match against the model; a reader error names
    the var by its id."""
    from test_simulate import lower_neff
    from nrtrewrite.simulate import simulate_output

    names = [{**v, "var_id": i, "name": name}
             for i, (v, name) in enumerate(zip(base_spec["subgraphs"][0]["vars"], names))]
    _def(base_spec, var=names, replica_groups=[list(range(8))], engines=["sp", "pool"])
    neff = tmp_path / "m.neff"
    neff.write_bytes(build(base_spec))
    model = read_model(str(neff))
    assert [(v.var_id, v.name) for v in model.subgraph("sg00").vars.values()] == [
        (i, v["name"]) for i, v in enumerate(names)]
    (t,) = model.triggers
    assert (t.src.var_id, t.dst.var_id) == (0, 1)
    out = lower_neff(neff, tmp_path / "o")
    top = json.loads((out / "manifest.json").read_text())
    regions = {r["var_id"]: (r["name"], r["offset"], r["size"]) for r in top["memory"]["regions"]
               if r["var_id"] is not None}
    assert regions[0] == (names[0]["name"], 0, 4096) and regions[1][0] == names[1]["name"]
    assert regions[1][1] >= 4096 and regions[1][2] == 32768
    (tr,) = top["triggers"]
    assert (tr["src"]["var_id"], tr["dst"]["var_id"]) == (0, 1)
    res = simulate_output(out, model=model)
    assert res.ok, res.error
    names[1]["type"] = "input"  # (the dst var: a dst must be output or tmp-buf)
    err = error_of(base_spec)
    assert f"dst var 1 ({names[1]['name']!r}) is input" in str(err)
