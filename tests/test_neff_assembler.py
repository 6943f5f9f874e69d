"""The assembler: committed fixtures rebuild byte for byte, inspect reproduces each spec's
triggers, spec mistakes are one-line errors, and hypothesis round trips spec -> file -> model."""

from __future__ import annotations

import copy
import json
import re

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nrtrewrite.cli import main
from nrtrewrite.errors import ParseError, ValidationError
from nrtrewrite.neff.assembler import assemble, assemble_file, assemble_spec, parse_spec_text
from nrtrewrite.neff.container import read_container
from nrtrewrite.neff.reader import read_model_bytes

from conftest import FIXTURES

SPECS = sorted(FIXTURES.glob("*.yaml")) + sorted((FIXTURES / "bad").glob("*.yaml"))
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
DSIZE = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8_e4": 1, "int32": 4}


def size(v) -> int:
    if isinstance(v, int):
        return v
    m = re.fullmatch(r"(\d+)\s*(B|KiB|MiB|GiB)?", v.strip())
    return int(m.group(1)) * UNITS[m.group(2) or "B"]


def expand(body):
    for item in body or []:
        if item == "nop":
            continue
        (kind, val), = item.items()
        if kind == "repeat":
            for _ in range(val["count"]):
                yield from expand(val["body"])
        else:
            yield kind, val


def operand(ref, kind_sbuf):
    if isinstance(ref, str):
        return {"var": ref, "offset": 0}
    if not kind_sbuf:
        return {"var": ref["var"], "offset": size(ref.get("offset", 0))}
    parts = ref["partitions"]
    pstart, pcount = (0, parts) if isinstance(parts, int) else parts
    dims = [list(d) for d in ref["dims"]] + [[0, 1]] * (3 - len(ref["dims"]))
    return {"var": ref["var"], "ap": {"start": ref.get("start", 0), "partition_start": pstart,
                                      "partition_count": pcount, "dims": dims}}


def expected_triggers(spec: dict) -> list[dict]:
    """What inspect --json must show, derived from the spec text alone."""
    out = []
    for i, sg in enumerate(spec["subgraphs"]):
        for engine, body in sg["engines"].items():
            for kind, b in expand(body):
                if kind not in ("all_reduce", "all_gather", "reduce_scatter"):
                    continue
                sbuf = isinstance(b["src"], dict) and "partitions" in b["src"]
                opcode = b.get("opcode", 0xD9 if sbuf else 0xC8)
                if "num_elements" in b:
                    n = size(b["num_elements"])
                elif "bytes" in b:
                    n = size(b["bytes"]) // DSIZE[b["dtype"]]
                else:
                    s = operand(b["src"], True)["ap"]
                    n = s["partition_count"]
                    for _, num in s["dims"]:
                        n *= num
                sync = {"wait_mode": 0, "wait_idx": 0, "update_mode": 0, "update_idx": 0,
                        "semaphore_value": 0}
                out.append({
                    "subgraph": sg.get("name", f"sg{i:02d}"), "engine": engine,
                    "opcode": opcode, "ctype": kind.upper(), "dtype": b["dtype"].upper(),
                    "alu_op": b["op"].upper() if "op" in b else None,
                    "replica_group_id": b.get("group", 0), "stream_id": b.get("stream_id", 0),
                    "channel_id": b.get("channel_id", 0), "num_elements": n,
                    "src": operand(b["src"], sbuf), "dst": operand(b["dst"], sbuf),
                    "sync": dict(sync, **b.get("sync", {})),
                    "ext_sync": dict(sync, **b.get("ext_sync", {})) if sbuf else None,
                })
    return out


def strip(t: dict) -> dict:
    keys = ("subgraph", "engine", "opcode", "ctype", "dtype", "alu_op", "replica_group_id",
            "stream_id", "channel_id", "num_elements", "sync", "ext_sync")
    out = {k: t[k] for k in keys}
    for side in ("src", "dst"):
        op = dict(t[side])
        op.pop("var_id", None)
        out[side] = op
    return out


@pytest.mark.parametrize("spec_path", SPECS, ids=lambda p: p.stem)
def test_fixture_rebuilds_byte_identical(spec_path, tmp_path):
    out = tmp_path / "x.neff"
    res = assemble_file(spec_path, out)
    assert out.read_bytes() == res.data == spec_path.with_suffix(".neff").read_bytes()


@pytest.mark.parametrize("spec_path", SPECS, ids=lambda p: p.stem)
def test_inspect_reproduces_spec_triggers(spec_path):
    import yaml

    spec = yaml.safe_load(spec_path.read_text())
    res = CliRunner().invoke(main, ["inspect", "--json", str(spec_path.with_suffix(".neff"))])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert [strip(t) for t in doc["triggers"]] == expected_triggers(spec)
    assert doc["header"]["name"] == spec["header"]["name"]
    assert doc["header"]["pkg_version"] == spec["header"]["pkg_version"]
    assert doc["header"]["lnc_size"] == spec["header"]["lnc_size"]


def test_fixture_contents():
    docs = {}
    for p in SPECS:
        res = CliRunner().invoke(main, ["inspect", "--json", str(p.with_suffix(".neff"))])
        docs[p.stem] = json.loads(res.stdout)
    assert len(docs["ar2"]["world"]) == 2
    assert len(docs["node64"]["world"]) == 64 and docs["node64"]["header"]["lnc_size"] == 2
    assert len(docs["two_node128"]["world"]) == 128
    assert docs["c7c8"]["header"]["pkg_version"] == 1
    assert {t["opcode"] for t in docs["c7c8"]["triggers"]} == {0xC7, 0xC8}
    assert len(docs["c7c8"]["subgraphs"]) == 2
    assert {t["opcode"] for t in docs["sbuf"]["triggers"]} == {0xD9}
    assert len(docs["groups"]["subgraphs"][0]["replica_groups"]) == 4
    mix = docs["mix8"]["triggers"]
    assert {t["ctype"] for t in mix} == {"ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER"}
    assert {t["dtype"] for t in mix} == {"BF16", "FP16", "FP8_E4"}
    assert {1000003, 96} <= {t["num_elements"] for t in mix}
    assert max(t["in_bytes"] for t in mix) == 4 << 20
    assert [t["dtype"] for t in docs["fp32_allreduce"]["triggers"]] == ["FP32"]
    for p in SPECS:  # all small: sizes are declared, no data is stored
        assert p.with_suffix(".neff").stat().st_size < 8192


@pytest.mark.parametrize("mutate,where,why", [
    (lambda s: s.update(bogus=1), "", "unknown key 'bogus'"),
    (lambda s: s["subgraphs"][0]["engines"]["sp"].append({"frob": 1}),
     "field subgraphs[0].engines.sp[3]", "unknown instruction 'frob'"),
    (lambda s: s["subgraphs"][0]["engines"]["sp"][1]["all_reduce"].update(dtype="bf17"),
     "field subgraphs[0].engines.sp[1].all_reduce.dtype", "unknown dtype 'bf17'"),
    (lambda s: s["subgraphs"][0]["engines"]["sp"][1]["all_reduce"].update(src="nope"),
     "field subgraphs[0].engines.sp[1].all_reduce.src", "no var named 'nope'"),
    (lambda s: s["subgraphs"][0]["engines"]["sp"][1]["all_reduce"].update(bytes="3B",
                                                                        num_elements=1),
     "field subgraphs[0].engines.sp[1].all_reduce", "not both"),
    (lambda s: s["subgraphs"][0]["engines"]["sp"][1]["all_reduce"].update(opcode=0xC9),
     "field subgraphs[0].engines.sp[1].all_reduce.opcode", "opcode must be 0xC7, 0xC8 or 0xD9 (a "
     "collective's pseudo trigger), not 0xC9"),
    # ASSEMBLE.md: a collective's opcode is 0xC7, 0xC8 or 0xD9; 0x00 (a nop's) is refused too,
    # named in two hex digits (mutation audit round 8)
    (lambda s: s["subgraphs"][0]["engines"]["sp"][1]["all_reduce"].update(opcode=0),
     "field subgraphs[0].engines.sp[1].all_reduce.opcode",
     "opcode must be 0xC7, 0xC8 or 0xD9 (a collective's pseudo trigger), not 0x00"),
    (lambda s: s["subgraphs"][0]["engines"]["sp"].__setitem__(
        1, {"all_gather": {"dtype": "bf16", "op": "add", "src": "in", "dst": "out"}}),
     "field subgraphs[0].engines.sp[1].all_gather.op", "all_gather takes no op"),
    (lambda s: s["subgraphs"][0]["engines"]["sp"][1]["all_reduce"].update(patch={"nope": 1}),
     "field subgraphs[0].engines.sp[1].all_reduce.patch", "unknown key 'nope'"),
    (lambda s: s["subgraphs"][0]["vars"].append({"name": "in", "type": "input", "size": 1}),
     "field subgraphs[0].vars[5].name", "var name 'in' used twice"),
    (lambda s: s["subgraphs"][0]["vars"][0].update(size="4 KB"),
     "field subgraphs[0].vars[0].size", "bad size '4 KB'"),
    # found by an ASSEMBLE.md audit (2026-12-02): a wrong key path, and keys with no effect
    (lambda s: s["header"].update(pkg_version=3), "field header.pkg_version",
     "3 is outside 1..2"),
    (lambda s: s["subgraphs"][0]["engines"]["sp"][1]["all_reduce"].update(
        ext_sync={"update_mode": 1}), "field subgraphs[0].engines.sp[1].all_reduce.ext_sync",
     "only 0xD9+0xDA has a 0xDA word"),
    (lambda s: s["subgraphs"][0]["engines"]["sp"][1]["all_reduce"].update(patch_ext={}),
     "field subgraphs[0].engines.sp[1].all_reduce.patch_ext", "only 0xD9+0xDA has a 0xDA word"),
    (lambda s: s["subgraphs"][0]["engines"]["sp"][1]["all_reduce"].update(ext=False),
     "field subgraphs[0].engines.sp[1].all_reduce.ext", "only 0xD9+0xDA has a 0xDA word"),
    (lambda s: s.update(extra_members=[{"name": "a", "text": "hi", "hex": "00"}]),
     "field extra_members[0].hex", "give one of text, hex and json, not text and hex"),
    # a range is expanded in memory (about 150 bytes a rank): '0..2147483647' ran out of it
    (lambda s: s["subgraphs"][0].update(replica_groups=["0..1", "0..2147483647"]),
     "field subgraphs[0].replica_groups[1]",
     "holds 2147483648 ranks, 2 before it in the spec's ranges; the ranges hold at most "
     "1048576 ranks in all (MAX_TOPOLOGY_RANKS"),
    (lambda s: s["subgraphs"][0].update(replica_groups=["7..1048583"]),
     "field subgraphs[0].replica_groups[0]", "holds 1048577 ranks, 0 before it"),
    # many ranges each under the limit: 2^19 + 2^19 ranks fill it, one more rank is past it
    (lambda s: (s["subgraphs"][0].update(replica_groups=["0..524287"]),
                s["subgraphs"].append(dict(s["subgraphs"][0], name="sg01",
                                           replica_groups=["0..524287", "0..0"]))),
     "field subgraphs[1].replica_groups[1]", "holds 1 ranks, 1048576 before it"),
])
def test_spec_errors(base_spec, mutate, where, why):
    mutate(base_spec)
    with pytest.raises(ValidationError) as exc:
        assemble_spec(base_spec)
    assert str(exc.value).startswith(f"<spec>: {where}") and why in str(exc.value)


@pytest.mark.parametrize("item, where, words", [
    # 2 GiB (the reader's member limit) / 64-byte words = 33,554,432 words per stream
    ({"nop": 10**11}, "[3].nop", 10**11),
    ({"opaque": {"opcode": 5, "count": 10**12}}, "[3].opaque.count", 10**12),
    ({"repeat": {"count": 10**12, "body": ["nop", {"nop": 3}]}}, "[3].repeat.count",
     4 * 10**12),
])
def test_huge_counts_are_refused_before_building(base_spec, item, where, words):
    """A count past what a stream member can hold is a one-line spec error at once (it was
    a MemoryError traceback, or gigabytes built before the reader refused them)."""
    base_spec["subgraphs"][0]["engines"]["sp"].append(item)
    with pytest.raises(ValidationError) as exc:
        assemble_spec(base_spec)
    msg = str(exc.value)
    assert msg.startswith(f"<spec>: field subgraphs[0].engines.sp{where}: ")
    assert f"{words} instruction words" in msg and "at most 33554432" in msg


def test_the_stream_total_is_checked_too(base_spec, monkeypatch):
    """Items that fit one by one but not together (the stream limit made 10 words here)."""
    from nrtrewrite.neff import assembler
    monkeypatch.setattr(assembler, "MAX_STREAM_WORDS", 10)
    sp = base_spec["subgraphs"][0]["engines"]["sp"]
    assert len(sp) == 3  # three one-word items before
    sp.append({"nop": 7})  # 10 words: fits
    assemble_spec(base_spec)
    sp.append("nop")  # the 11th
    with pytest.raises(ValidationError, match=r"^<spec>: field subgraphs\[0\]\.engines\.sp"
                                              r"\[4\]: 11 instruction words: .* at most 10 "):
        assemble_spec(base_spec)


def test_spec_validates_by_reading_back(base_spec):
    base_spec["subgraphs"][0]["engines"]["sp"][1]["all_reduce"]["num_elements"] = 4096
    with pytest.raises(ValidationError, match=r"^<spec> \(assembled\): member sg00/sp.bin.*"
                                              r"field num_elements"):
        assemble_spec(base_spec)


def test_yaml_duplicate_keys_refused():
    with pytest.raises(ParseError, match="duplicate key 'a'.*line 2"):
        parse_spec_text("a: 1\na: 2\n")


def test_json_spec_and_repeat(base_spec):
    base_spec["subgraphs"][0]["engines"]["pool"] = [
        {"repeat": {"count": 3, "body": ["nop", {"opaque": {"opcode": 0xC1, "count": 2}}]}}]
    spec = parse_spec_text(json.dumps(base_spec))
    model = assemble(spec).model
    pool = model.subgraph("sg00").streams["pool"]
    assert len(pool) == 9 * 64 and pool[64] == 0xC1 and pool[0] == 0


# ---------------------------------------------------------------------------
# hypothesis: spec -> file -> read_model

DTYPES = ["bf16", "fp16", "fp8_e4", "fp32", "int32"]
KINDS = ["all_reduce", "all_gather", "reduce_scatter"]
G = 8


@st.composite
def trigger_specs(draw, k: int):
    kind = draw(st.sampled_from(KINDS))
    dtype = draw(st.sampled_from(DTYPES))
    ds = DSIZE[dtype]
    sbuf = draw(st.booleans())
    body = {"dtype": dtype}
    if kind != "all_gather":
        body["op"] = draw(st.sampled_from(["add", "max", "min"]))
    sync = draw(st.fixed_dictionaries({}, optional={
        "wait_mode": st.integers(0, 255), "wait_idx": st.integers(0, 255),
        "update_idx": st.integers(0, 255), "semaphore_value": st.integers(0, 2**32 - 1)}))
    if sync:
        body["sync"] = sync
    body["stream_id"] = draw(st.integers(0, 3))
    variables = []
    if sbuf:
        b, w = draw(st.integers(1, 16)), draw(st.integers(1, 64))
        start = draw(st.integers(0, 64))
        ps = {"all_reduce": b, "all_gather": b, "reduce_scatter": G * b}[kind]
        pd = {"all_reduce": b, "all_gather": G * b, "reduce_scatter": b}[kind]
        pstart = draw(st.integers(0, 128 - ps))
        for name in (f"s{k}", f"d{k}"):
            variables.append({"name": name, "type": "state-buffer", "size": start + w * ds,
                              "partitions": 128})
        body["src"] = {"var": f"s{k}", "start": start, "partitions": [pstart, ps],
                       "dims": [[1, w]]}
        body["dst"] = {"var": f"d{k}", "start": start, "partitions": pd, "dims": [[1, w]]}
        body["channel_id"] = draw(st.integers(0, 31))
        body["opcode"] = 0xD9
    else:
        n = draw(st.integers(1, 5000)) * (G if kind == "reduce_scatter" else 1)
        out_n = {"all_reduce": n, "all_gather": n * G, "reduce_scatter": n // G}[kind]
        so, do = draw(st.integers(0, 4096)), draw(st.integers(0, 4096))
        variables.append({"name": f"s{k}", "type": draw(st.sampled_from(["input", "tmp-buf"])),
                          "size": so + n * ds + draw(st.integers(0, 64))})
        variables.append({"name": f"d{k}", "type": draw(st.sampled_from(["output", "tmp-buf"])),
                          "size": do + out_n * ds})
        body["src"] = {"var": f"s{k}", "offset": so}
        body["dst"] = {"var": f"d{k}", "offset": do}
        body["num_elements"] = n
        opcodes = [0xC7, 0xC8] if kind == "all_reduce" else [0xC8]
        body["opcode"] = draw(st.sampled_from(opcodes))
        if body["opcode"] == 0xC7:
            body["stream_id"] = 0
    return kind, body, variables


@st.composite
def specs(draw):
    n = draw(st.integers(1, 6))
    items, variables = [], []
    for k in range(n):
        kind, body, vs = draw(trigger_specs(k))
        variables.extend(vs)
        items.extend(["nop"] * draw(st.integers(0, 2)))
        items.append({kind: body})
    split = draw(st.integers(0, len(items)))
    return {
        "header": {"pkg_version": draw(st.sampled_from([1, 2])), "name": "hyp",
                   "lnc_size": draw(st.sampled_from([1, 2]))},
        "subgraphs": [{"name": "sg00", "vars": variables, "replica_groups": [list(range(G))],
                       "engines": {"sp": items[:split], "pool": items[split:]}}],
    }


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs())
def test_hypothesis_round_trip(spec):
    data = assemble_spec(spec)
    model = read_model_bytes(data)
    from nrtrewrite.neff.summary import model_to_dict

    doc = model_to_dict(model)
    assert [strip(t) for t in doc["triggers"]] == expected_triggers(spec)
    assert assemble_spec(spec) == data  # deterministic
    assert doc["header"]["pkg_version"] == spec["header"]["pkg_version"]


def test_assemble_md_example_assembles():
    text = (FIXTURES.parent / "docs" / "ASSEMBLE.md").read_text()
    example = re.search(r"```yaml\n(.*?)```", text, re.S).group(1)
    spec = parse_spec_text(example)
    model = assemble(spec, default_name="example").model
    assert [t.opcode for t in model.triggers] == [0xC8, 0xC8, 0xC8, 0xC7, 0xD9]
    assert [t.num_elements for t in model.triggers] == [2097152, 96, 262144, 1000003, 65536]
    assert model.header.pkg_version == 1 and model.header.lnc_size == 2


def test_lone_surrogate_in_yaml_is_an_error(base_spec):
    """YAML's "\\ud800" escape gives a lone surrogate, which UTF-8 cannot hold: a one-line
    error, where it was a UnicodeEncodeError traceback; at the var's name, where it was at
    the subgraph (`field subgraphs[0]: cannot be written as JSON: 'utf-8' codec can't
    encode character '\\ud800' ...`)."""
    spec = parse_spec_text('name: "v\\ud800"\n')
    assert spec["name"] == "v\ud800"
    base_spec["subgraphs"][0]["vars"][2]["name"] = spec["name"]  # tmp, unused
    with pytest.raises(ValidationError) as exc:
        assemble_spec(base_spec)
    assert str(exc.value) == ("<spec>: field subgraphs[0].vars[2].name: not Unicode text "
                              "(\"\\ud800\" is a lone surrogate, which UTF-8 cannot hold)")


@pytest.mark.parametrize("where, text, field, kind", [
    # (the key path is where the alias closes its cycle, in the spec's words: def.json's
    # generated keys under their spec fields, vars and replica_groups)
    ("def_json", "{a: &d [1, {b: *d}]}", "subgraphs[0].def_json.a[1].b", "a list"),
    ("def_json", "&d {a: [*d]}", "subgraphs[0].def_json.a[0].a", "a list"),
    ("neff_json", "&x {a: [*x]}", "neff_json.a[0]", "a mapping"),
    ("neff_json", "&x [0, [*x]]", "neff_json[1][0]", "a list"),
    ("extra_members", "[{name: q, json: {k: 1}}, {name: r, json: &n [*n]}]",
     "extra_members[1].json[0]", "a list"),
    ("partitions", "&p [128, *p]", "subgraphs[0].vars[3].partitions[1]", "a list"),
    ("type", "&t {a: [*t]}", "subgraphs[0].vars[0].type.a[0]", "a mapping"),
    ("replica_groups", "&g [[0, 1], *g]", "subgraphs[0].replica_groups[1]", "a list"),
])
def test_a_recursive_yaml_alias_in_a_json_member_is_named_where_it_closes(
        base_spec, where, text, field, kind):
    """A value of a JSON member (def_json, neff_json, extra_members[].json; a var's type or
    partitions and the replica groups, which def.json holds) that contains itself through a
    YAML alias was reported at the member with Python's words (`field subgraphs[0]: cannot be
    written as JSON: Circular reference detected`): at the key path where the alias closes
    the cycle, as a recursive repeat body is."""
    value = parse_spec_text(f"v: {text}\n")["v"]
    sg = base_spec["subgraphs"][0]
    if where in ("def_json", "replica_groups"):
        sg[where] = value
    elif where == "partitions":
        sg["vars"][3]["partitions"] = value
    elif where == "type":
        sg["vars"][0]["type"] = value
    else:
        base_spec[where] = value
    with pytest.raises(ValidationError) as exc:
        assemble_spec(base_spec)
    assert str(exc.value) == (f"<spec>: field {field}: {kind} contains itself (a recursive "
                              "YAML alias), which JSON cannot hold")


@pytest.mark.parametrize("text, col", [
    ("neff_json: &n {a: *n}\n", 12),
    ("def_json: {a: &m {b: {c: *m}}}\n", 15),
])
def test_a_mapping_that_contains_itself_through_mappings_is_named(text, col):
    """A mapping that contains itself through mappings alone cannot be read (it is built
    whole, where a list is built empty and filled later): it was PyYAML's `found
    unconstructable recursive node`; it is said as the assembler's other recursive aliases,
    at the anchor's line and column."""
    with pytest.raises(ParseError) as exc:
        parse_spec_text(text, source="s.yaml")
    assert str(exc.value) == ("s.yaml: invalid spec: a mapping contains itself (a recursive "
                              f"YAML alias) (line 1 column {col})")


def test_a_recursive_yaml_alias_is_found_past_shared_aliases(base_spec):
    """The walk that finds a recursive alias (once json.dumps has met it) takes each distinct
    list once: a chain of 64 shared aliases beside it (2^64 values expanded, never walked so)
    is passed in its length."""
    chain: list = [1]
    for _ in range(64):
        chain = [chain, chain]
    loop: list = [2]
    loop.append({"again": loop})
    base_spec["subgraphs"][0]["def_json"] = {"loop": loop, "shared": chain}
    with pytest.raises(ValidationError) as exc:
        assemble_spec(base_spec)
    assert str(exc.value) == ("<spec>: field subgraphs[0].def_json.loop[1].again: a list "
                              "contains itself (a recursive YAML alias), which JSON cannot hold")


def test_a_json_member_nested_too_deeply_through_aliases_is_a_spec_error():
    """A chain of 1,500 YAML aliases, each list holding the one before, is 1,500 lists deep
    in def.json: more than JSON's writer (and the NEFF reader's ``nested too deeply``) takes,
    though the spec's text is three levels deep. A spec error at the subgraph whose def.json
    it is, saying so (it was Python's ``maximum recursion depth exceeded while calling a
    Python object``)."""
    lines = ["header: {name: x}", "subgraphs:", "  - name: sg00", "    replica_groups: [[0, 1]]",
             "    engines: {sp: [nop]}", "    def_json:", "      note:", "        a0: &a0 [1]"]
    lines += [f"        a{i}: &a{i} [*a{i - 1}]" for i in range(1, 1500)]
    with pytest.raises(ValidationError) as exc:
        assemble_spec(parse_spec_text("\n".join(lines) + "\n"))
    assert str(exc.value) == ("<spec>: field subgraphs[0]: cannot be written as JSON: nested "
                              "too deeply (a chain of YAML aliases nesting lists or mappings)")


def _alias_chain_spec(before: str = "") -> str:
    """The spec text of the test above: 1,500 aliases under ``def_json.note``, each list
    holding the one before; ``before``: a line of ``def_json`` written before ``note``."""
    lines = ["header: {name: x}", "subgraphs:", "  - name: sg00", "    replica_groups: [[0, 1]]",
             "    engines: {sp: [nop]}", "    def_json:"]
    lines += [f"      {before}"] if before else []
    lines += ["      note:", "        a0: &a0 [1]"]
    lines += [f"        a{i}: &a{i} [*a{i - 1}]" for i in range(1, 1500)]
    return "\n".join(lines) + "\n"


def _no_python_encoder(monkeypatch) -> None:
    """Make json.dumps's pure-Python encoder (the one an indent takes) fail if it is used."""
    import json.encoder

    def refused(*args, **kwargs):
        raise AssertionError("json's pure-Python encoder was used")
    monkeypatch.setattr(json.encoder, "_make_iterencode", refused)


def test_a_json_member_nested_too_deeply_is_refused_without_the_python_encoder(monkeypatch):
    """The chain of 1,500 aliases took 35 s to refuse: json.dumps with an indent writes in
    pure Python, each token yielded up through every level it stands in, and wrote each of
    the ~1,000 chains it could before the one too deep.  It is refused before that encoder
    runs, with the same line."""
    _no_python_encoder(monkeypatch)
    with pytest.raises(ValidationError) as exc:
        assemble_spec(parse_spec_text(_alias_chain_spec()))
    assert str(exc.value) == ("<spec>: field subgraphs[0]: cannot be written as JSON: nested "
                              "too deeply (a chain of YAML aliases nesting lists or mappings)")


@pytest.mark.parametrize("before, nan, why", [
    ("a: 0", True, "field subgraphs[0].def_json.a: .nan is not a finite number (NaN and "
                   "infinities are refused)"),
    ("a: 2001-12-14", False, "field subgraphs[0].def_json.a: a date (2001-12-14), which JSON "
                             "cannot hold (YAML 1.1 reads this form as a date: quote it for a "
                             "string)"),
    ("a: &d [1, {b: *d}]", False, "field subgraphs[0].def_json.a[1].b: a list contains itself "
                                  "(a recursive YAML alias), which JSON cannot hold"),
])
def test_a_fault_before_a_member_nested_too_deeply_is_named_first(
        monkeypatch, before, nan, why):
    """ASSEMBLE.md: of a JSON member's refusals the first in the spec's order is named.  A
    NaN (from the API), a date or a list containing itself in ``def_json.a``, before the
    chain of 1,500 aliases in ``def_json.note``, is named, not the depth; and without the
    pure-Python encoder."""
    spec = parse_spec_text(_alias_chain_spec(before))
    if nan:
        spec["subgraphs"][0]["def_json"]["a"] = float("nan")
    _no_python_encoder(monkeypatch)
    with pytest.raises(ValidationError) as exc:
        assemble_spec(spec)
    assert str(exc.value) == f"<spec>: {why}"


def _nested(levels: int, inner=1) -> list:
    """``inner`` in ``levels`` lists, each a list of its own."""
    for _ in range(levels):
        inner = [inner]
    return inner


def test_a_json_member_past_500_deep_is_named_before_a_later_nan(base_spec, monkeypatch):
    """ASSEMBLE.md: a JSON member nests at most 500 lists or mappings (its own object one).
    def.json's object, then ``note``: 600 lists (600 + 1 deep, which json.dumps wrote), then a
    NaN (from the API) at ``z``: the depth is met first, and named."""
    base_spec["subgraphs"][0]["def_json"] = {"note": _nested(600), "z": float("nan")}
    _no_python_encoder(monkeypatch)
    with pytest.raises(ValidationError) as exc:
        assemble_spec(base_spec)
    assert str(exc.value) == ("<spec>: field subgraphs[0]: cannot be written as JSON: nested "
                              "too deeply (more than 500 lists or mappings deep)")


@pytest.mark.parametrize("shared", [False, True])
def test_a_json_member_500_deep_is_written_and_read_back_501_refused(base_spec, shared):
    """def.json's object (level 1) holding ``note``, 499 lists deep, is 500 deep: written, and
    the NEFF reader (with validate: true) reads it back; 500 lists are one too many.  With
    ``shared`` the depth comes through a list met before (as a chain of YAML aliases does):
    ``a``, 250 lists, then ``note``, 249 or 250 lists around that same ``a``."""
    def refusal(levels: int) -> str | None:
        sg = copy.deepcopy(base_spec)["subgraphs"][0]
        if shared:
            a = _nested(250)
            sg["def_json"] = {"a": a, "note": _nested(levels - 250, a)}
        else:
            sg["def_json"] = {"note": _nested(levels)}
        spec = dict(base_spec, subgraphs=[sg])
        try:
            data = assemble_spec(spec)
        except ValidationError as err:
            return str(err)
        note = json.loads(read_container(data).members["sg00/def.json"])["note"]
        for _ in range(levels):
            note, = note
        assert note == 1
        return None

    assert refusal(499) is None
    why = ("a chain of YAML aliases nesting lists or mappings" if shared else
           "more than 500 lists or mappings deep")
    assert refusal(500) == ("<spec>: field subgraphs[0]: cannot be written as JSON: nested too "
                            f"deeply ({why})")


def _chain(indent: str, last: int) -> list[str]:
    """YAML lines ``a0: &a0 [1]``, then ``aI: &aI [*aI-1]`` up to ``last``: ``aI`` is I + 1
    lists deep."""
    return [f"{indent}a0: &a0 [1]"] + [f"{indent}a{i}: &a{i} [*a{i - 1}]"
                                       for i in range(1, last + 1)]


@pytest.mark.parametrize("where", ["extra_members", "def_json"])
def test_a_member_nested_too_deeply_through_aliases_anchored_outside_it_says_aliases(where):
    """A chain of aliases anchored outside the member (in ``extra_members[0].json``, used by
    ``def_json``; in ``def_json``, 499 lists deep there, used three lists in by
    ``neff_json``) is met first in the member where it is too deep: it was named ``more than
    500 lists or mappings deep``, as a spec read as JSON, though the spec's text is a few
    levels deep and its aliases nest it."""
    sg = ["subgraphs:", "  - name: sg00", "    replica_groups: [[0, 1]]",
          "    engines: {sp: [nop]}"]
    if where == "extra_members":
        lines = (["extra_members:", "  - name: chain.json", "    json:"] + _chain("      ", 599)
                 + sg + ["    def_json: {note: *a599}"])
        field = "subgraphs[0]"
    else:
        lines = (sg + ["    def_json:"] + _chain("      ", 498)
                 + ["neff_json: {neff_like_version: 1, subgraphs: [sg00], x: [[[*a498]]]}"])
        field = "neff_json"
    with pytest.raises(ValidationError) as exc:
        assemble_spec(parse_spec_text("\n".join(lines) + "\n"))
    assert str(exc.value) == (f"<spec>: field {field}: cannot be written as JSON: nested too "
                              "deeply (a chain of YAML aliases nesting lists or mappings)")


# -- the bytes of a JSON member (MAX_JSON_MEMBER_BYTES: the reader's MAX_MEMBER_BYTES) --------

def _too_large(field: str, member: str, size: int, limit: int) -> str:
    """ASSEMBLE.md's refusal of a JSON member of ``size`` bytes, past ``limit``."""
    return (f"<spec>: field {field}: member {member}: its JSON would be {size} bytes, more "
            f"than the {limit} bytes a member may hold (MAX_MEMBER_BYTES, the reader's limit)")


@pytest.mark.parametrize("limit", [4096, 100_000])
def test_a_json_member_of_exactly_the_limit_is_written_and_read_back_one_byte_more_refused(
        base_spec, monkeypatch, limit):
    """``{"a": "x...x"}`` with k x's is written ``{``, newline, 2 spaces, ``"a"``, ``: ``,
    the k + 2 bytes of the string, newline, ``}``, newline: k + 14 bytes.  With the limit
    patched to ``limit``, k = limit - 14 is written, byte for byte, and a reader allowing a
    member ``limit`` bytes reads it back; one x more is refused, naming the spec's key, the
    member and the limit."""
    import nrtrewrite.neff.assembler as asm
    from nrtrewrite.errors import LimitError
    from nrtrewrite.neff.container import Limits

    monkeypatch.setattr(asm, "MAX_JSON_MEMBER_BYTES", limit)

    def spec(k: int) -> dict:
        return dict(copy.deepcopy(base_spec),
                    extra_members=[{"name": "big.json", "json": {"a": "x" * k}}])

    data = assemble_spec(spec(limit - 14))
    want = ('{\n  "a": "' + "x" * (limit - 14) + '"\n}\n').encode()
    assert read_container(data, limits=Limits(max_member_bytes=limit)).members["big.json"] \
        == want
    with pytest.raises(LimitError):  # (the reader's limit is the assembler's)
        read_container(data, limits=Limits(max_member_bytes=limit - 1))
    with pytest.raises(ValidationError) as exc:
        assemble_spec(spec(limit - 13))
    assert str(exc.value) == _too_large("extra_members[0].json", "big.json", limit + 1, limit)


def _aliased_json_text() -> tuple[str, dict]:
    """A YAML value of shared lists and mappings nested four deep (each alias repeats what its
    anchor names, indented deeper each time), with escapes, non-ASCII text, numbers and
    literals; and the same value without sharing (a copy json.dumps writes, as the oracle)."""
    text = ('{k: &m {"q\\"u": ["é€𝄞", "a\\tb", 1.5, -7, 12345678901234567890123, true, false,'
            ' null, {}, []]}, l: &l [*m, [*m, {z: *m}], "\\u2028"], '
            'n: [*l, [*l, *l], {deep: [*l, {x: *m}]}]}')
    return text, yaml.safe_load(text)


@pytest.mark.parametrize("member", ["neff_json", "extra_members", "def_json"])
def test_a_json_member_of_shared_values_is_counted_exactly_at_the_limit(
        base_spec, monkeypatch, member):
    """The bytes json.dumps (the standard library, with the 2-space indent) writes a value of
    YAML aliases as, counted from a copy without them: a limit of exactly that many bytes
    writes the member (those bytes), one less refuses it saying that many.  (def.json: the
    copy is def.json as ASSEMBLE.md makes it from the spec - ``var``, each var with its
    ``var_id`` (by default its position), name, type, size and partitions if given;
    ``replica_groups``; ``engines``, their names in order - then ``def_json``'s keys, its
    ``note`` the value.)"""
    import nrtrewrite.neff.assembler as asm

    text, plain = _aliased_json_text()
    value = parse_spec_text("v: " + text + "\n")["v"]
    if member == "neff_json":
        value.update(neff_like_version=1, subgraphs=["sg00"])
        plain.update(neff_like_version=1, subgraphs=["sg00"])
        name, field = "neff.json", "neff_json"
        base_spec["neff_json"] = value
    elif member == "extra_members":
        name, field = "v.json", "extra_members[0].json"
        base_spec["extra_members"] = [{"name": "v.json", "json": value}]
    else:
        name, field = "sg00/def.json", "subgraphs[0]"
        sg = base_spec["subgraphs"][0]
        sg["def_json"] = {"note": value}
        var = [{"var_id": i, "name": v["name"], "type": v["type"], "size": v["size"],
                **({"partitions": v["partitions"]} if "partitions" in v else {})}
               for i, v in enumerate(sg["vars"])]
        plain = {"var": var, "replica_groups": sg["replica_groups"],
                 "engines": list(sg["engines"]), "note": plain}
    want = (json.dumps(plain, indent=2, ensure_ascii=False) + "\n").encode()
    assert want.count(b"\n") > 200  # (the value is repeated, indented deeper each time)
    monkeypatch.setattr(asm, "MAX_JSON_MEMBER_BYTES", len(want))
    assert read_container(assemble_spec(base_spec)).members[name] == want
    monkeypatch.setattr(asm, "MAX_JSON_MEMBER_BYTES", len(want) - 1)
    with pytest.raises(ValidationError) as exc:
        assemble_spec(base_spec)
    assert str(exc.value) == _too_large(field, name, len(want), len(want) - 1)


def _python_encoder_writes_at_most(monkeypatch, limit: int) -> None:
    """Make json.dumps's pure-Python encoder (the one an indent takes) fail once it has
    written more than ``limit`` characters in one call (the small members of the spec are
    written by it)."""
    import json.encoder

    make = json.encoder._make_iterencode

    def bounded(*args, **kwargs):
        iterencode = make(*args, **kwargs)

        def counted(o, level):
            written = 0
            for chunk in iterencode(o, level):
                written += len(chunk)
                if written > limit:
                    raise AssertionError(f"json's pure-Python encoder wrote {written} "
                                         "characters")
                yield chunk
        return counted
    monkeypatch.setattr(json.encoder, "_make_iterencode", bounded)


def _refused_cheaply(monkeypatch, spec: dict) -> ValidationError:
    """``assemble_spec(spec)``'s refusal, met with json's pure-Python encoder writing at most
    1 MiB and a traced peak under 16 MiB (a member too large refused before it is built)."""
    import tracemalloc
    _python_encoder_writes_at_most(monkeypatch, 1 << 20)
    tracemalloc.start()
    try:
        with pytest.raises(ValidationError) as exc:
            assemble_spec(spec)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20
    return exc.value


def _four_gib_of_aliases(tail: str = "") -> str:
    """A spec whose ``extra_members[0].json`` is a list of 16 lists of 16 lists of 16 lists
    of 16 times one string of 65,536 x's (``tail``: an item after them), from 64 KiB of YAML
    text: 16^4 strings of 65,538 bytes written, each on a line of its own."""
    s = '&s "' + "x" * 65536 + '"'
    level = "[" + ", ".join([s] + ["*s"] * 15) + "]"
    for depth in (1, 2, 3):
        level = f"[&l{depth} {level}, " + ", ".join([f"*l{depth}"] * 15) + "]"
    level = level[:-1] + (f", {tail}]" if tail else "]")
    return "extra_members: [{name: big.json, json: " + level + "}]\n"


@pytest.mark.parametrize("tail, why", [
    ("", None),
    ("2001-12-14", "field extra_members[0].json[16]: a date (2001-12-14), which JSON cannot "
                   "hold (YAML 1.1 reads this form as a date: quote it for a string)"),
    ('"a\\ud800"', 'field extra_members[0].json[16]: not Unicode text ("\\ud800" is a lone '
                   "surrogate, which UTF-8 cannot hold)"),
])
def test_a_json_member_past_max_member_bytes_is_refused_before_it_is_written(
        base_spec, monkeypatch, tail, why):
    """64 KiB of YAML whose aliases make a member of 4 GiB, past the reader's 2 GiB
    (MAX_MEMBER_BYTES, the real limit): refused without json's pure-Python writer (the
    encoder an indent takes, which would write it all first) and in a few MiB of memory,
    saying its size, worked out line by line: a list at level d (the member's own at 0) opens
    on a line of 2d spaces and ``[`` and closes on one of 2d spaces and ``]``, each line with
    its newline (16^d lists at level d); each string's line is 8 spaces, its 65,538 bytes
    and a newline; and a comma after each item but its list's last.  A date or a lone
    surrogate after it all is named instead: a fault in the spec, met before the size."""
    base_spec["extra_members"] = parse_spec_text(_four_gib_of_aliases(tail))["extra_members"]
    lines = sum(16 ** d * 2 * (2 * d + 2) for d in range(4)) + 16 ** 4 * (8 + 65538 + 1)
    commas = 15 * sum(16 ** d for d in range(4))
    size = lines + commas
    assert size > 2 << 30
    err = _refused_cheaply(monkeypatch, base_spec)
    assert str(err) == (f"<spec>: {why}" if why else
                        _too_large("extra_members[0].json", "big.json", size, 2 << 30))


def test_the_depth_check_walks_each_distinct_mapping_a_bounded_number_of_times(base_spec):
    """The depth check walked level by level, each list or mapping once a level: a mapping
    shared by 600 nested lists (a dict through the API) was walked at each of the 500
    levels, 8 s for a dict of many.  Now once: counted by the mapping's own iterations, the
    member refused for its depth (so no JSON is written, which would walk it at each place
    it stands)."""
    calls = []

    class Counted(dict):
        def items(self):
            calls.append("items")
            return super().items()

        def values(self):
            calls.append("values")
            return super().values()

        def keys(self):
            calls.append("keys")
            return super().keys()

        def __iter__(self):
            calls.append("iter")
            return super().__iter__()

    shared = Counted(a=1)
    chain: list = [1]
    for _ in range(600):
        chain = [chain, shared]
    base_spec["subgraphs"][0]["def_json"] = {"note": chain}
    with pytest.raises(ValidationError) as exc:
        assemble_spec(base_spec)
    assert str(exc.value) == ("<spec>: field subgraphs[0]: cannot be written as JSON: nested "
                              "too deeply (more than 500 lists or mappings deep)")
    assert len(calls) <= 6, calls[:10]


# ---------------------------------------------------------------------------
# mutation audit round 5: defaults, field widths and spec refusals of docs/ASSEMBLE.md

def _sp(spec: dict) -> list:
    return spec["subgraphs"][0]["engines"]["sp"]


def _refused_at(spec: dict, field: str) -> str:
    """Assemble ``spec``; it must be a one-line spec error naming ``field`` (ASSEMBLE.md:
    mistakes in the spec are one-line errors naming the spec path)."""
    with pytest.raises(ValidationError) as exc:
        assemble_spec(spec)
    msg = str(exc.value)
    assert msg.startswith(f"<spec>: field {field}: ") and "\n" not in msg, msg
    return msg


def test_pkg_version_defaults_to_2_with_md5_in_hash_0_16(base_spec):
    """ASSEMBLE.md: pkg_version "(default 2)"; NEFF-LIKE.md §1: 2 = MD5 of the payload in
    hash[0:16] (header offset 172), hash[16:32] zero; pkg_version is the u64 at offset 0."""
    import hashlib

    del base_spec["header"]["pkg_version"]
    data = assemble_spec(base_spec)
    assert int.from_bytes(data[0:8], "little") == 2
    data_size = int.from_bytes(data[16:24], "little")
    assert data[172:188] == hashlib.md5(data[1024:1024 + data_size]).digest()
    assert data[188:204] == bytes(16)


@pytest.mark.parametrize("key, offset, width", [("name", 220, 256),
                                                ("neff_build_version", 40, 128)])
def test_header_strings_may_fill_their_field_and_no_more(base_spec, key, offset, width):
    """NEFF-LIKE.md §1: name is char[256] at 220, neff_build_version char[128] at 40, UTF-8
    NUL-padded: a string of exactly the width fills the field; one byte more is a spec error
    at header.<key> (ASSEMBLE.md: spec mistakes name the spec path)."""
    base_spec["header"][key] = "n" * width
    data = assemble_spec(base_spec)
    assert data[offset:offset + width] == b"n" * width
    base_spec["header"][key] = "n" * (width + 1)
    assert str(width) in _refused_at(base_spec, f"header.{key}")


def test_tpb_per_node_takes_64_byte_values(base_spec):
    """ASSEMBLE.md: tpb_per_node is "up to 64 byte values (zero-padded)"; NEFF-LIKE.md §1:
    u8[64] at offset 480.  64 values of 255 fill it; a 65th value, or a value of 256, is a
    spec error naming the key."""
    base_spec["header"]["tpb_per_node"] = [255] * 64
    assert assemble_spec(base_spec)[480:544] == b"\xff" * 64
    base_spec["header"]["tpb_per_node"] = [1] * 65
    _refused_at(base_spec, "header.tpb_per_node")
    base_spec["header"]["tpb_per_node"] = [1, 256]
    _refused_at(base_spec, "header.tpb_per_node[1]")


@pytest.mark.parametrize("key", ["wait_mode", "wait_idx", "update_mode", "update_idx"])
def test_sync_bytes_are_u8(base_spec, key):
    """NEFF-LIKE.md §2: wait_mode, wait_idx, update_mode, update_idx are the u8s at 4..7: 255
    is written there, 256 is a spec error at that sync key."""
    at = 4 + ["wait_mode", "wait_idx", "update_mode", "update_idx"].index(key)
    _sp(base_spec).append({"opaque": {"opcode": 0x41, "sync": {key: 255}}})
    model = assemble(base_spec).model
    assert model.subgraph("sg00").streams["sp"][3 * 64 + at] == 255
    _sp(base_spec)[3]["opaque"]["sync"][key] = 256
    _refused_at(base_spec, f"subgraphs[0].engines.sp[3].opaque.sync.{key}")


def _sbuf_trigger(src_dims, **extra) -> dict:
    return {"all_reduce": {"dtype": "bf16", "op": "add",
                           "src": {"var": "sb_in", "partitions": 128, "dims": src_dims},
                           "dst": {"var": "sb_out", "partitions": 128, "dims": [[1, 8]]},
                           **extra}}


def test_sbuf_steps_take_the_whole_i32_range(base_spec):
    """NEFF-LIKE.md §2 / instructions.py: a 0xD9 dimension step is an i32 (src dims at 28..51,
    (step, num) pairs); ASSEMBLE.md: negative steps are allowed.  -2^31 with num 1 (never
    stepped) is written as 00 00 00 80 at byte 36 (dims[1].step); -2^31 - 1 is a spec
    error at that dims item."""
    _sp(base_spec)[1] = _sbuf_trigger([[1, 8], [-2**31, 1]])
    word = assemble(base_spec).model.subgraph("sg00").streams["sp"][64:128]
    assert word[0] == 0xD9 and word[36:40] == b"\x00\x00\x00\x80"
    _sp(base_spec)[1] = _sbuf_trigger([[1, 8], [-2**31 - 1, 1]])
    _refused_at(base_spec, "subgraphs[0].engines.sp[1].all_reduce.src.dims[1][0]")


def test_partitions_on_dst_alone_make_the_default_opcode_0xd9(base_spec):
    """ASSEMBLE.md: the default opcode is 0xD9 "when src or dst has partitions"; a 0xD9 src
    is {var, start, partitions, dims}: a src pattern without partitions is refused at
    src.partitions (as a 0xD9 operand), not read as a DRAM {var, offset} operand."""
    trig = _sbuf_trigger([[1, 8]])
    del trig["all_reduce"]["src"]["partitions"]
    _sp(base_spec)[1] = trig
    _refused_at(base_spec, "subgraphs[0].engines.sp[1].all_reduce.src.partitions")


@pytest.mark.parametrize("operand, parts, field, why", [
    ("src", [0, -1], "src.partitions[1]", "-1 is outside 0..65535"),
    ("src", [65536, 1], "src.partitions[0]", "65536 is outside 0..65535"),
    ("dst", ["0", 128], "dst.partitions[0]", "must be an integer, not '0'"),
    ("dst", [0, 1.5], "dst.partitions[1]", "must be an integer, not 1.5"),
    ("dst", 65536, "dst.partitions", "65536 is outside 0..65535"),
])
def test_a_partitions_start_or_count_is_named_at_its_item(base_spec, operand, parts, field,
                                                          why):
    """ASSEMBLE.md: a 0xD9 operand's `partitions` is a count (from 0) or `[start, count]`,
    each a u16 of the word (partition_start, partition_count: 0..65535): a bad item of the
    pair is refused at `partitions[0]` or `partitions[1]` (it was at `partitions`, which of
    the two left to guess); a bad count alone at `partitions`."""
    trig = _sbuf_trigger([[1, 8]])
    trig["all_reduce"][operand]["partitions"] = parts
    _sp(base_spec)[1] = trig
    path = f"subgraphs[0].engines.sp[1].all_reduce.{field}"
    assert _refused_at(base_spec, path) == f"<spec>: field {path}: {why}"


@pytest.mark.parametrize("omit, field, why", [
    (["sg00/pool.bin", 1], "omit_members[1]", "must be a member name, not 1"),
    ([["sg00/pool.bin"]], "omit_members[0]", "must be a member name, not a list of 1 item"),
    ([None], "omit_members[0]", "must be a member name, not null"),
    ("sg00/pool.bin", "omit_members", "must be a list of member names, not 'sg00/pool.bin'"),
])
def test_an_omit_members_item_that_is_no_name_is_named_at_its_item(base_spec, omit, field, why):
    """ASSEMBLE.md: `omit_members: [name, ...]`: an item that is not a string is refused at
    `omit_members[N]`, in YAML's words for what it is, as an `extra_members[].text` (it was
    at `omit_members`: `must be a list of member names`, which item left to guess); a value
    that is not a list still at `omit_members`."""
    base_spec["omit_members"] = omit
    assert _refused_at(base_spec, field) == f"<spec>: field {field}: {why}"


@pytest.mark.parametrize("opcode, key", [(0xC7, "stream_id"), (0xC8, "channel_id"),
                                         (0xC7, "channel_id")])
def test_a_field_the_word_does_not_have_is_refused(base_spec, opcode, key):
    """ASSEMBLE.md trigger keys: stream_id is for 0xC8 and 0xDA ("0xC7 has no stream field"),
    channel_id for 0xDA only: given a non-zero value on a word without the field, the spec
    is refused at that key (the value would be lost silently)."""
    _sp(base_spec)[1]["all_reduce"].update(opcode=opcode, **{key: 1})
    _refused_at(base_spec, f"subgraphs[0].engines.sp[1].all_reduce.{key}")


def test_bytes_must_be_a_whole_number_of_elements(base_spec):
    """ASSEMBLE.md: bytes is input bytes per rank "(must be a whole number of elements)":
    4097 bytes of bf16 (2 bytes) is refused at .bytes; 4096 is 2048 elements."""
    trig = _sp(base_spec)[1]["all_reduce"]
    del trig["num_elements"]
    trig["bytes"] = 4096
    assert assemble(base_spec).model.triggers[0].num_elements == 2048
    trig["bytes"] = 4097
    _refused_at(base_spec, "subgraphs[0].engines.sp[1].all_reduce.bytes")


def test_raw_header_int_fields_take_their_width(base_spec):
    """ASSEMBLE.md: raw_header overwrites a header field, "int fields take ints"; num_tpb is a
    u32 at 168 (NEFF-LIKE.md §1): 2^32 - 1 is written there, 2^32 is a spec error at
    raw_header.num_tpb."""
    base_spec.update(validate=False, raw_header={"num_tpb": 2**32 - 1})
    assert assemble_spec(base_spec)[168:172] == b"\xff" * 4
    base_spec["raw_header"]["num_tpb"] = 2**32
    _refused_at(base_spec, "raw_header.num_tpb")


def test_an_extra_member_replacing_one_moves_to_the_end(base_spec):
    """ASSEMBLE.md extra_members: "a member of the same name is replaced (and moves to the
    end)": members are neff.json, sg00/def.json, sg00/sp.bin, sg00/pool.bin in spec order;
    a replaced neff.json comes last with the new bytes."""
    from nrtrewrite.neff.container import read_container

    base_spec.update(validate=False, extra_members=[{"name": "neff.json", "text": "{}"}])
    members = read_container(assemble_spec(base_spec)).members
    assert list(members) == ["sg00/def.json", "sg00/sp.bin", "sg00/pool.bin", "neff.json"]
    assert members["neff.json"] == b"{}"


def test_omitting_a_member_that_is_not_there_is_a_spec_error(base_spec):
    """ASSEMBLE.md: omit_members drops generated members; a name no member has is a spec
    mistake, a one-line error naming omit_members[k] (nothing would be omitted)."""
    base_spec["omit_members"] = ["sg00/pool.bin", "sg00/nope.bin"]
    _refused_at(base_spec, "omit_members[1]")


def test_size_suffixes_are_binary(base_spec):
    """ASSEMBLE.md: sizes take "a string with a binary suffix: 512B, 64KiB, 4MiB, 1GiB"
    (2^10, 2^20, 2^30); def.json records the byte counts."""
    from nrtrewrite.neff.container import read_container

    base_spec["validate"] = False
    base_spec["subgraphs"][0]["vars"] = [
        {"name": f"v{k}", "type": "input", "size": s}
        for k, s in enumerate(["512B", "64KiB", "4MiB", "1GiB", "3 GiB", "7"])]
    _sp(base_spec)[1] = "nop"
    members = read_container(assemble_spec(base_spec)).members
    sizes = [v["size"] for v in json.loads(members["sg00/def.json"])["var"]]
    assert sizes == [512, 64 << 10, 4 << 20, 1 << 30, 3 << 30, 7]


@pytest.mark.parametrize("kind", ["all_gather", "reduce_scatter"])
def test_0xc7_carries_only_all_reduce(base_spec, kind):
    """ASSEMBLE.md: opcode "0xC7 (all_reduce only)" (NEFF-LIKE.md: 0xC7 has no ctype field, its
    ctype is implicitly ALL_REDUCE): another kind with opcode 0xC7 is refused at .opcode,
    not written as an all-reduce."""
    trig = {"dtype": "bf16", "src": "in", "dst": "out", "num_elements": 256, "opcode": 0xC7}
    if kind == "reduce_scatter":
        trig["op"] = "add"
    _sp(base_spec)[1] = {kind: trig}
    _refused_at(base_spec, f"subgraphs[0].engines.sp[1].{kind}.opcode")


def test_opaque_words_take_every_u8_opcode(base_spec):
    """NEFF-LIKE.md §2: the opcode is a u8 (0..255); ASSEMBLE.md: opaque writes `count` words
    of that opcode, operands hex for bytes 12..63, zero-padded.  0xFF with operands "ab"
    is ff 10 00 00, 8 zero sync bytes, ab and 51 zeros (length_dw 16 at byte 1)."""
    _sp(base_spec).append({"opaque": {"opcode": 0xFF, "operands": "ab"}})
    word = assemble(base_spec).model.subgraph("sg00").streams["sp"][3 * 64:4 * 64]
    assert word == b"\xff\x10\x00\x00" + bytes(8) + b"\xab" + bytes(51)
    _sp(base_spec)[3]["opaque"]["opcode"] = 0x100
    _refused_at(base_spec, "subgraphs[0].engines.sp[3].opaque.opcode")


def test_the_header_name_defaults_to_the_spec_file_name_without_extension(base_spec, tmp_path):
    """ASSEMBLE.md: header name "default: the spec file name without extension" (char[256] at
    220, NUL-padded: NEFF-LIKE.md §1)."""
    del base_spec["header"]["name"]
    spec = tmp_path / "my_model.v2.yaml"
    spec.write_text(json.dumps(base_spec))
    data = assemble_file(spec).data
    assert data[220:476] == b"my_model.v2".ljust(256, b"\0")


def test_opaque_operands_are_at_most_52_bytes(base_spec):
    """ASSEMBLE.md: opaque `operands` is hex for bytes 12..63 (zero-padded): 52 bytes fill
    the word's operands; 53 bytes are a spec error at .operands."""
    _sp(base_spec).append({"opaque": {"opcode": 0x41, "operands": "5a" * 52}})
    word = assemble(base_spec).model.subgraph("sg00").streams["sp"][3 * 64:4 * 64]
    assert word[12:] == b"\x5a" * 52
    _sp(base_spec)[3]["opaque"]["operands"] = "5a" * 53
    _refused_at(base_spec, "subgraphs[0].engines.sp[3].opaque.operands")


def test_a_var_of_size_0_is_the_readers_error(base_spec):
    """ASSEMBLE.md: the assembler only encodes; a rule of the reader ("def.json: sizes are
    positive") is reported as the reader reports it, from the assembled bytes (`<spec>
    (assembled): member sg00/def.json, ...`); with `validate: false` the size 0 is written."""
    from nrtrewrite.neff.container import read_container

    base_spec["subgraphs"][0]["vars"][2]["size"] = 0  # tmp, unused by the trigger
    with pytest.raises(ValidationError) as exc:
        assemble_spec(base_spec)
    msg = str(exc.value)
    assert msg.startswith("<spec> (assembled): member sg00/def.json") and "var[2].size" in msg
    base_spec["validate"] = False
    members = read_container(assemble_spec(base_spec)).members
    assert json.loads(members["sg00/def.json"])["var"][2]["size"] == 0


def test_a_default_var_id_is_one_more_than_the_highest_so_far():
    """docs/ASSEMBLE.md `vars`: a var without `var_id` gets one more than the highest
    `var_id` of the vars before it (0 for the first), so a default never repeats an id given
    earlier: a -> 0, b (given 10), c (given 3), d -> 11 (not 4)."""
    spec = {"header": {"name": "v"}, "subgraphs": [{
        "vars": [{"name": "a", "type": "input", "size": 64},
                 {"name": "b", "type": "output", "size": 64, "var_id": 10},
                 {"name": "c", "type": "tmp-buf", "size": 64, "var_id": 3},
                 {"name": "d", "type": "tmp-buf", "size": 64}],
        "replica_groups": [[0, 1]], "engines": {"sp": ["nop"]}}]}
    model = read_model_bytes(assemble_spec(spec))
    assert {v.name: v.var_id for v in model.subgraphs[0].vars.values()} == {
        "a": 0, "b": 10, "c": 3, "d": 11}


# ---------------------------------------------------------------------------
# review of the assembler's input handling (thirty-first session)

@pytest.mark.parametrize("text, line, column", [
    ("? [a, b]\n: 1\n", 1, 3),
    ("header:\n  name: x\n  ? {a: 1}\n  : 1\n", 3, 5),
    ("subgraphs: [{engines: {[sp]: []}}]\n", 1, 24),
])
def test_a_list_or_mapping_as_a_key_is_a_spec_error(text, line, column):
    """A YAML key that is a list or a mapping crashed the duplicate-key check with
    TypeError unhashable (an internal error, exit 70): a one-line error at the key."""
    with pytest.raises(ParseError) as exc:
        parse_spec_text(text, source="s.yaml")
    assert str(exc.value) == ("s.yaml: invalid spec: a list or a mapping as a mapping key "
                              f"(found unhashable key) (line {line} column {column})")


def test_yaml_merge_keys_are_read_and_a_merged_key_may_be_overridden():
    """YAML 1.1 merge keys (`{<<: *v, name: b}`, as yaml.safe_load reads them) were refused
    ("could not determine a constructor for the tag ...merge"): the duplicate-key check
    constructed every key before PyYAML flattened the merge.  A key the mapping gives itself
    overrides a merged one (not a duplicate); of `<<: [A, B]` the earlier mapping's key wins
    (yaml.org/type/merge.html; PyYAML 6.0.4 lets the later one win for keys of two
    characters or more); its own keys twice, `<<` twice, a key twice in a mapping merged in
    place, or a mapping merging itself, are refused."""
    text = ("header: {name: m}\n"
            "subgraphs:\n"
            "- vars:\n"
            "  - &v {name: a, type: input, size: 64}\n"
            "  - &w {<<: *v, name: b, var_id: 7, size: 32}\n"
            "  - {<<: [{size: 96}, *v], name: c}\n"
            "  - {<<: [*w, *v], name: d, var_id: 9}\n"
            "  replica_groups: [[0, 1]]\n"
            "  engines: {<<: {pool: [nop], sp: []}, sp: [nop, nop]}\n")
    model = assemble(parse_spec_text(text)).model
    assert [(v.name, v.var_id, v.size, v.type.name) for v in model.subgraphs[0].vars.values()
            ] == [("a", 0, 64, "INPUT"), ("b", 7, 32, "INPUT"), ("c", 8, 96, "INPUT"),
                  ("d", 9, 32, "INPUT")]
    sg = model.subgraphs[0]
    assert list(sg.streams) == ["pool", "sp"]  # a merged key keeps its place
    assert (len(sg.streams["pool"]), len(sg.streams["sp"])) == (64, 128)
    for bad, why, col in (("b: {<<: {a: 1}, n: 1, n: 2}\n", "duplicate key 'n'", 23),
                          ("b: {<<: {a: 1}, <<: {c: 2}}\n", "duplicate merge key '<<' (merge "
                           "several mappings with one: <<: [*a, *b])", 17),
                          ("b: {<<: {a: 1, a: 2}}\n", "duplicate key 'a'", 16),
                          ("b: &x {<<: *x, c: 1}\n", "a mapping merges itself (a recursive "
                           "YAML alias)", 4)):
        with pytest.raises(ParseError) as exc:
            parse_spec_text(bad, source="s.yaml")
        assert str(exc.value) == f"s.yaml: invalid spec: {why} (line 1 column {col})"


@pytest.mark.parametrize("where, value", [
    ("vars[2].size", "9" * 5000),
    ("vars[2].size", "1" * 41 + " KiB"),
    ("engines.sp[1].all_reduce.num_elements", "9" * 4301),
    ("engines.sp[1].all_reduce.src", {"var": "in", "offset": "7" * 5000 + "B"}),
])
def test_a_size_of_thousands_of_digits_is_a_spec_error(base_spec, where, value):
    """A size string of more than 4300 digits was int()'s ValueError (an internal error,
    exit 70); sizes have at most 40 digits (sizes.MAX_SIZE_DIGITS, as the command line's)."""
    sg = base_spec["subgraphs"][0]
    if where.startswith("vars"):
        sg["vars"][2]["size"] = value
    elif where.endswith("src"):
        sg["engines"]["sp"][1]["all_reduce"]["src"] = value
        where += ".offset"
    else:
        sg["engines"]["sp"][1]["all_reduce"]["num_elements"] = value
    digits = sum(c.isdigit() for c in json.dumps(value))
    shown = (value["offset"] if isinstance(value, dict) else value)[:12]
    msg = _refused_at(base_spec, f"subgraphs[0].{where}")
    assert msg.endswith(f": size '{shown}...' has {digits} digits, more than 40"), msg


def test_a_size_has_at_most_40_digits():
    """40 digits are read (10^39, written with validate: false); 41 are refused, as on the
    command line (sizes.MAX_SIZE_DIGITS); before, any count below 4301 was read."""
    from nrtrewrite.neff.container import read_container

    spec = {"validate": False, "subgraphs": [{
        "vars": [{"name": "a", "type": "input", "size": "1" + "0" * 39}],
        "replica_groups": [[0]], "engines": {"sp": []}}]}
    members = read_container(assemble_spec(spec)).members
    assert json.loads(members["sg00/def.json"])["var"][0]["size"] == 10**39
    spec["subgraphs"][0]["vars"][0]["size"] = "1" + "0" * 40 + "B"
    msg = _refused_at(spec, "subgraphs[0].vars[0].size")
    assert msg.endswith(": size '100000000000...' has 41 digits, more than 40"), msg


@pytest.mark.parametrize("rng, digits", [("0.." + "9" * 5000, 5000),
                                         ("9" * 4301 + ".. 1", 4301),
                                         (" " + "1" * 4400 + ".." + "1" * 4400, 4400)])
def test_a_rank_range_of_thousands_of_digits_is_a_spec_error(base_spec, rng, digits):
    """'0..<5000 digits>' was int()'s ValueError (an internal error, exit 70)."""
    base_spec["subgraphs"][0]["replica_groups"] = [rng]
    msg = _refused_at(base_spec, "subgraphs[0].replica_groups[0]")
    assert msg.endswith(f": rank range '{rng.strip()[:12]}...': a rank of {digits} digits, "
                        "more than 4300 (as a YAML integer of the spec)"), msg


@pytest.mark.parametrize("engines, where", [
    ("{sp: &x [{repeat: {count: 1, body: *x}}]}", "sp[0].repeat.body"),
    ("{sp: [nop, &r {repeat: {count: 2, body: [nop, *r]}}]}", "sp[1].repeat.body[1].repeat.body"),
])
def test_a_repeat_body_containing_itself_is_a_spec_error(engines, where):
    """A repeat body that contains itself through a YAML alias recursed until RecursionError
    (an internal error, exit 70)."""
    text = f"subgraphs:\n- replica_groups: [[0]]\n  engines: {engines}\n"
    msg = _refused_at(parse_spec_text(text), f"subgraphs[0].engines.{where}")
    assert msg.endswith(": a repeat body contains itself (a recursive YAML alias)")


def test_repeats_nested_too_deeply_through_aliases_are_a_spec_error():
    """A chain of aliases, each a repeat of the one before (`- &r1 {repeat: {count: 1, body:
    [*r0]}}`, 700 lines under def_json), nests repeats as deep as the chain is long without
    nesting the text: RecursionError (exit 70).  Built here 5000 deep, past any recursion
    limit near the default; the same body used twice is fine."""
    item: object = "nop"
    for _ in range(5000):
        item = {"repeat": {"count": 1, "body": [item]}}
    spec = {"subgraphs": [{"replica_groups": [[0]], "engines": {"sp": [item]}}]}
    msg = _refused_at(spec, "subgraphs[0].engines.sp")
    assert msg.endswith(": repeat bodies nested too deeply (a chain of YAML aliases)")
    twice = parse_spec_text("subgraphs:\n- replica_groups: [[0]]\n  engines:\n"
                            "    sp: [{repeat: {count: 2, body: &b [nop]}},"
                            " {repeat: {count: 3, body: *b}}]\n")
    assert len(assemble(twice).model.subgraphs[0].streams["sp"]) == 5 * 64


LONE = "(\"\\ud800\" is a lone surrogate, which UTF-8 cannot hold)"


@pytest.mark.parametrize("field", ["header.name", "header.neff_build_version",
                                   "extra_members[0].text", "extra_members[0].name",
                                   "subgraphs[0].name"])
def test_a_lone_surrogate_is_named_by_its_field(base_spec, field):
    """A lone surrogate ("\\ud800" in YAML) in a header string or an extra member escaped as
    UnicodeEncodeError, which the command line then blamed on a path and the locale
    ("\\ud800: this path cannot be encoded in the locale's encoding"); in a subgraph name
    it was reported at `neff_json`, a key the spec did not have."""
    if field.startswith("header."):
        base_spec["header"][field[7:]] = "a\ud800"
    elif field.startswith("extra_members"):
        base_spec["extra_members"] = [{"name": "x", "text": "t"}]
        base_spec["extra_members"][0][field.rsplit(".", 1)[1]] = "a\ud800"
    else:
        base_spec["subgraphs"][0]["name"] = "a\ud800"
    assert _refused_at(base_spec, field).endswith(f": not Unicode text {LONE}")


def test_a_default_name_from_an_undecodable_file_name_says_to_give_header_name(
        base_spec, tmp_path):
    """`assemble $'\\xff.yaml'` under a UTF-8 locale: the default header name is '\\udcff'
    (Python's surrogateescape of the byte), which UTF-8 cannot hold; it was reported as the
    path's fault.  The error names header.name and says to give it."""
    import os

    del base_spec["header"]["name"]
    path = os.path.join(os.fsdecode(bytes(tmp_path)), os.fsdecode(b"\xff.yaml"))
    with open(path, "w") as fh:
        fh.write(json.dumps(base_spec))
    with pytest.raises(ValidationError) as exc:
        assemble_file(path)
    assert str(exc.value).endswith(
        ".yaml: field header.name: the default, the spec file's name without extension "
        "(\"\\udcff\"), is not Unicode text (it holds a lone surrogate, which UTF-8 cannot "
        "hold): give header.name")


@pytest.mark.parametrize("yaml_text, kind", [
    ("!!set {a, b}", "a set (!!set)"), ("!!binary aGk=", "binary data (!!binary)"),
    ("[1, 2]", "a list of 2 items"), ("{a: 1}", "a mapping of 1 key"), ("12", "12"),
    ("[]", "an empty list"),
    ("true", "true"), ("2001-12-14", "a date (2001-12-14)"),
])  # (null is as if text were missing: an empty member, ASSEMBLE.md)
def test_an_extra_members_text_must_be_a_string(base_spec, yaml_text, kind):
    """extra_members[].text was written as str() of any value: a !!set gave bytes that
    depend on the hash seed, !!binary "b'hi'", a list "[1, 2]"."""
    base_spec["extra_members"] = [{"name": "x", "text": parse_spec_text(
        f"t: {yaml_text}\n")["t"]}]
    assert _refused_at(base_spec, "extra_members[0].text").endswith(
        f": must be a string, not {kind}")


@pytest.mark.parametrize("where, value, why", [
    ("header", [], "must be a mapping, not an empty list"),
    ("header", 0, "must be a mapping, not 0"), ("header", False, "must be a mapping, not false"),
    ("subgraphs[0].vars", 0, "must be a list, not 0"),
    ("subgraphs[0].vars", "", "must be a list, not ''"),
    ("subgraphs[0].engines.pool", 0, "must be a list of instructions, not 0"),
    ("subgraphs[0].engines.pool", False, "must be a list of instructions, not false"),
    ("subgraphs[0].engines.pool", {}, "must be a list of instructions, not an empty mapping"),
    ("subgraphs[0].engines.pool[0].repeat.body", {},
     "must be a list of instructions, not an empty mapping"),
    ("subgraphs[0].engines.pool[0].repeat.body", 0, "must be a list of instructions, not 0"),
    ("omit_members", 0, "must be a list of member names, not 0"),
    ("extra_members", False, "must be a list, not false"),
    ("extra_members", {}, "must be a list, not an empty mapping"),
])
def test_an_empty_value_of_the_wrong_type_is_refused(base_spec, where, value, why):
    """`header: []`, `vars: 0`, `engines: {pool: false}`, `repeat: {body: {}}`... were read
    as the key missing (`x or default`); null still is (docs/ASSEMBLE.md: an engine's
    `null` is an empty stream).  The message says what the key holds, as the spec writes
    it (it said only what it must be)."""
    sg = base_spec["subgraphs"][0]

    def put(val):
        if where == "subgraphs[0].vars":
            sg["vars"] = val
            sg["engines"]["sp"] = []
        elif where == "subgraphs[0].engines.pool":
            sg["engines"]["pool"] = val
        elif where.startswith("subgraphs[0].engines.pool[0]"):
            sg["engines"]["pool"] = [{"repeat": {"count": 1, "body": val}}]
        else:
            base_spec[where] = val
        return base_spec
    assemble(put(None), default_name="d")
    assert _refused_at(put(value), where) == f"<spec>: field {where}: {why}"


def test_a_spec_file_is_read_only_if_regular_and_of_at_most_64_mib(base_spec, tmp_path,
                                                                    monkeypatch):
    """The spec was read whole with no limit: `assemble /dev/zero` ran out of memory, a FIFO
    blocked.  Only a regular file is read, of at most MAX_SPEC_FILE_BYTES (64 MiB), checked
    from its size before reading."""
    import os
    import subprocess
    import sys

    from nrtrewrite.errors import LimitError
    from nrtrewrite.neff import assembler

    assert assembler.MAX_SPEC_FILE_BYTES == 64 * 1024 * 1024
    with pytest.raises(ParseError, match=r"^/dev/zero: cannot read: not a regular file$"):
        assemble_file("/dev/zero")
    fifo = tmp_path / "f.yaml"
    os.mkfifo(fifo)
    proc = subprocess.run([sys.executable, "-m", "nrtrewrite", "assemble", str(fifo), "-o",
                           str(tmp_path / "f.neff")], capture_output=True, text=True,
                          timeout=60)
    assert (proc.returncode, proc.stderr) == (
        2, f"nrtrewrite: error: {fifo}: cannot read: not a regular file\n")
    big = tmp_path / "big.yaml"
    with open(big, "wb") as fh:
        fh.truncate(64 * 1024 * 1024 + 1)  # (sparse)
    with pytest.raises(LimitError) as exc:
        assemble_file(big)
    assert str(exc.value) == (f"{big}: spec file of 67108865 bytes exceeds the limit of "
                              "67108864 bytes (MAX_SPEC_FILE_BYTES)")
    spec = tmp_path / "s.yaml"
    spec.write_text(json.dumps(base_spec))
    size = spec.stat().st_size
    monkeypatch.setattr(assembler, "MAX_SPEC_FILE_BYTES", size)
    assert assemble_file(spec).model.triggers  # exactly the limit: read
    monkeypatch.setattr(assembler, "MAX_SPEC_FILE_BYTES", size - 1)
    with pytest.raises(LimitError, match=f"spec file of {size} bytes exceeds the limit of "
                                         f"{size - 1} bytes"):
        assemble_file(spec)


@pytest.mark.parametrize("text, char, line, column", [("a: \0\n", "0000", 1, 4),
                                                      ("a: 1\n\x07\n", "0007", 2, 1)])
def test_a_control_character_in_the_spec_is_a_spec_error(text, char, line, column):
    """PyYAML's reader refuses a NUL or another control character when the loader is made,
    which was outside the error handling: ReaderError, an internal error (exit 70)."""
    with pytest.raises(ParseError) as exc:
        parse_spec_text(text, source="s.yaml")
    assert str(exc.value) == (f"s.yaml: invalid spec: unacceptable character #x{char}: special "
                              f"characters are not allowed (line {line} column {column})")


def _d9(**kw) -> dict:
    return {"all_reduce": {"dtype": "bf16", "op": "add",
                           "src": {"var": "sb_in", "partitions": 128, "dims": [[1, 8]]},
                           "dst": {"var": "sb_out", "partitions": 128, "dims": [[1, 8]]}, **kw}}


def _no_src(s):
    del _sp(s)[1]["all_reduce"]["src"]


def _last_id(s):
    s["subgraphs"][0]["vars"][0]["var_id"] = 2**32 - 1


def _huge_pattern(s):
    _sp(s)[1] = _d9()
    _sp(s)[1]["all_reduce"]["src"].update(partitions=0xFFFF, dims=[[1, 2**32 - 1]] * 3)


@pytest.mark.parametrize("mutate, field, why", [
    (_no_src, "sp[1].all_reduce.src", "src is missing: give a var name"),
    (lambda s: _sp(s)[1]["all_reduce"].update(dst={"offset": 0}), "sp[1].all_reduce.dst.var",
     "var is missing: give a var name"),
    (_last_id, "vars[1]", "its default var_id follows the highest var_id before it "
     "(4294967295): 4294967296 is outside 0..4294967295; give var_id"),
    (_huge_pattern, "sp[1].all_reduce.src", f"the pattern's {0xFFFF * (2**32 - 1) ** 3} "
     "elements (partitions times each dimension's num), num_elements by default, are more than "
     "18446744073709551615 (u64): give num_elements"),
    (lambda s: _sp(s).__setitem__(1, _d9(ext=False, patch_ext={"reserved_2": 1})),
     "sp[1].all_reduce.patch_ext", "ext: false leaves out the 0xDA word, which patch_ext is for"),
    (lambda s: _sp(s).__setitem__(1, _d9(ext=False, ext_sync={"wait_mode": 1})),
     "sp[1].all_reduce.ext_sync", "ext: false leaves out the 0xDA word, which ext_sync is for"),
    (lambda s: _sp(s).__setitem__(1, _d9(ext=False, channel_id=1)),
     "sp[1].all_reduce.channel_id", "ext: false leaves out the 0xDA word, which channel_id is "
     "for"),
])
def test_spec_errors_say_what_the_spec_wrote(base_spec, mutate, field, why):
    """A missing src read `no var named None in this subgraph`; after var_id 4294967295 the
    next var's default was refused at a `var_id` the spec did not write; a 0xD9's default
    num_elements past u64 was `cannot encode: struct '<Q' error` at the trigger; `ext:
    false` dropped patch_ext, ext_sync and channel_id without a word."""
    base_spec["validate"] = False
    mutate(base_spec)
    where = f"subgraphs[0].{field}" if field.startswith("vars") else \
        f"subgraphs[0].engines.{field}"
    assert _refused_at(base_spec, where).endswith(f": {why}")


def test_a_json_spec_indented_with_tabs_is_read_as_json(base_spec):
    """JSON was read as YAML, which refuses a tab as indentation: `json.dumps(spec,
    indent="\\t")` was `invalid spec: found character '\\t' that cannot start any token`.
    Flow YAML starting with `{` is still YAML, and JSON YAML refuses keeps YAML's error."""
    spec = parse_spec_text(json.dumps(base_spec, indent="\t"))
    assert spec == base_spec and assemble(spec).model.triggers[0].num_elements == 2048
    # a number JSON reads but that is not finite is refused, not read again as YAML (which
    # took 1e999, and with it 1e3 elsewhere in the text, for strings)
    base_spec["subgraphs"][0]["def_json"] = {"note": "@@"}
    text = json.dumps(base_spec, indent="\t")
    assert parse_spec_text(text.replace('"@@"', "[1e3]"))["subgraphs"][0]["def_json"] == {
        "note": [1000.0]}
    with pytest.raises(ValidationError) as exc:
        parse_spec_text(text.replace('"@@"', "[1e3, 1e999]"))
    assert str(exc.value) == ("<spec>: field subgraphs[0].def_json.note[1]: .inf is not a "
                              "finite number (NaN and infinities are refused)")
    del base_spec["subgraphs"][0]["def_json"]
    # a byte-order mark before it (Windows editors write one) as YAML would skip it
    assert parse_spec_text("\ufeff" + json.dumps(base_spec, indent="\t")) == base_spec
    assert parse_spec_text("{a: 1, b: [x]}") == {"a": 1, "b": ["x"]}
    with pytest.raises(ParseError, match=r"duplicate key 'a' \(line 1 column 10\)"):
        parse_spec_text('{"a": 1, "a": 2}')


# ---------------------------------------------------------------------------
# input handling: digits, YAML's value key, lone surrogates at their field

SIZE_WHY = "(an integer in ASCII digits, optionally with B, KiB, MiB or GiB)"


@pytest.mark.parametrize("where, value", [
    ("vars[0].size", "\u0664KiB"),  # ARABIC-INDIC DIGIT FOUR: int() reads 4
    ("vars[0].size", "\uff14096"),  # FULLWIDTH DIGIT FOUR
    ("vars[0].size", "\u0664"),
    ("engines.sp[1].all_reduce.num_elements", "\uff12048"),
    ("engines.sp[1].all_reduce.src.offset", "\u0660"),  # ARABIC-INDIC DIGIT ZERO
])
def test_a_size_string_is_ascii_digits(base_spec, where, value):
    """ASSEMBLE.md: a size is an integer or `512B`, `64KiB`...; the size pattern's `\\d` took
    any Unicode digit and int() read it, so `size: "٤KiB"` was 4096 bytes.  The same size in
    ASCII digits is read (4KiB = 4 * 1024)."""
    sg = base_spec["subgraphs"][0]
    trig = sg["engines"]["sp"][1]["all_reduce"]
    if where.startswith("vars"):
        sg["vars"][0]["size"] = value
    elif where.endswith("offset"):
        trig["src"] = {"var": "in", "offset": value}
    else:
        trig["num_elements"] = value
    assert _refused_at(base_spec, f"subgraphs[0].{where}").endswith(
        f": bad size {value!r} {SIZE_WHY}")
    sg["vars"][0]["size"] = "4KiB"
    trig.update(num_elements="2048", src={"var": "in", "offset": "0"})
    assert assemble(base_spec).model.subgraphs[0].vars[0].size == 4096


@pytest.mark.parametrize("rng", ["\u0660..\u0667", "0..\uff17", "\uff10..7"])
def test_a_rank_range_is_ascii_digits(base_spec, rng):
    """`"٠..٧"` (Arabic-Indic 0 and 7) was the group 0..7: the range pattern's `\\d`."""
    base_spec["subgraphs"][0]["replica_groups"] = [rng]
    assert _refused_at(base_spec, "subgraphs[0].replica_groups[0]").endswith(
        f": bad rank range {rng!r} (use 'first..last' in ASCII digits)")
    base_spec["subgraphs"][0]["replica_groups"] = ["0..7"]
    assert assemble(base_spec).model.subgraphs[0].replica_groups == [tuple(range(8))]


@pytest.mark.parametrize("space", ["\u00a0", "\u3000", "\u2009"])
def test_unicode_space_around_a_size_or_a_range_is_space(base_spec, space):
    """Only the digits are ASCII: a no-break, ideographic or thin space around a size or in a
    range is white space, as around a size on the command line (``sizes.py``): `"64KiB\u00a0"`
    is 64 * 1024 bytes, `"0..1\u00a0"` the group (0, 1)."""
    sg = base_spec["subgraphs"][0]
    sg["vars"][0]["size"] = f"{space}64{space}KiB{space}"
    sg["replica_groups"] = [f"0{space}..{space}1{space}"]
    model = assemble(base_spec).model
    assert model.subgraphs[0].vars[0].size == 65536
    assert model.subgraphs[0].replica_groups == [(0, 1)]


def test_a_uuid_is_ascii(base_spec, tmp_path):
    """uuid.UUID() reads its hex with int(), which takes full-width digits: the uuid with a
    full-width 6 first was 6e726e72-...; through the CLI a one-line error, exit 2."""
    text = "\uff16e726e72-6577-7269-7465-000000000001"
    base_spec["header"]["uuid"] = text
    assert _refused_at(base_spec, "header.uuid").endswith(f": not a UUID: {text!r}")
    spec = tmp_path / "u.json"
    spec.write_text(json.dumps(base_spec), encoding="utf-8")
    res = CliRunner().invoke(main, ["assemble", str(spec), "-o", str(tmp_path / "u.neff")])
    assert (res.exit_code, res.output) == (
        2, f"nrtrewrite: error: {spec}: field header.uuid: not a UUID: {text!r}\n")
    base_spec["header"]["uuid"] = "6" + text[1:]
    assert assemble(base_spec).model.header.uuid == bytes.fromhex(
        "6e726e7265777269746500000000" "0001")


@pytest.mark.parametrize("value, why", [
    ('!!int "\u0664"', "'\u0664' is not an integer (a YAML number is ASCII text)"),
    ('!!int "0x\uff11F"', "'0x\uff11F' is not an integer (a YAML number is ASCII text)"),
    ('!!int "1:\u0663\u0660"', "'1:\u0663\u0660' is not an integer (a YAML number is ASCII "
     "text)"),
    ('!!float "\u0664.5"', "'\u0664.5' is not a number (a YAML number is ASCII text)"),
    ('!!int "abc"', "'abc' is not an integer"),
    ('!!int ""', "'' is not an integer"),
    ('!!float "abc"', "'abc' is not a number"),
    ('!!float ""', "'' is not a number"),
    # YAML 1.1 reads a leading 0 as octal: 9 is no octal digit (was "an integer of 2 digits,
    # more than 4300")
    ('!!int "09"', "'09' is not an integer"),
    ('!!int "0_9"', "'0_9' is not an integer"),
])
def test_a_tagged_number_must_be_one_in_ascii(value, why):
    """`!!int` and `!!float` hand the text to int() and float(): `!!int "٤"` was 4, `!!int
    "1:٣٠"` 90 (YAML 1.1's base 60); `!!float abc` and `!!int ""` were ValueError and
    IndexError (internal errors, exit 70), `!!int abc` "an integer of 0 digits, more than
    4300".  The ASCII ones are read (0x1F = 31, 1:30 = 90)."""
    with pytest.raises(ParseError) as exc:
        parse_spec_text(f"a: [1, {value}]\n", source="s.yaml")
    assert str(exc.value) == f"s.yaml: invalid spec: {why} (line 1 column 8)"  # (at the tag)
    assert parse_spec_text('a: [!!int "0x1F", !!int "1:30", !!float "4.5", !!int "1_0"]\n') \
        == {"a": [31, 90, 4.5, 10]}


def test_a_base_60_integer_of_too_many_digits_says_so():
    """YAML 1.1 reads `1...1:30` as an integer in base 60; one of 5,000 ones and `30` has 5,002
    digits, more than CPython converts (4300): said so, not "is not an integer"."""
    with pytest.raises(ParseError) as exc:
        parse_spec_text(f"a: {'1' * 5000}:30\n", source="s.yaml")
    assert str(exc.value) == ("s.yaml: invalid spec: an integer of 5002 digits, more than 4300 "
                              "(line 1 column 4)")


def test_a_tagged_number_that_is_none_is_a_spec_error_on_the_command_line(base_spec,
                                                                          tmp_path):
    """`header: {feature_bits: !!float abc}` ended assemble with an internal error (exit 70)."""
    spec = tmp_path / "t.yaml"
    spec.write_text("header: {feature_bits: !!float abc}\n"
                    "subgraphs: [{replica_groups: [[0]], engines: {sp: []}}]\n")
    res = CliRunner().invoke(main, ["assemble", str(spec), "-o", str(tmp_path / "t.neff")])
    assert (res.exit_code, res.output) == (
        2, f"nrtrewrite: error: {spec}: invalid spec: 'abc' is not a number (line 1 "
           "column 24)\n")


@pytest.mark.parametrize("value, why", [
    ("!!bool abc", "'abc' is not a boolean"),
    ("!!timestamp abc", "'abc' is not a date"),
    ("2001-02-30", "'2001-02-30' is not a date (YAML 1.1 reads this form as a date: quote it "
     "for a string)"),
    ("2001-13-01", "'2001-13-01' is not a date (YAML 1.1 reads this form as a date: quote it "
     "for a string)"),
])
def test_a_bool_or_date_that_is_none_is_a_spec_error(value, why):
    """PyYAML's bool and timestamp constructors do not check the text: `!!bool abc` was
    KeyError, `!!timestamp abc` AttributeError, and `2001-02-30` (a date by its form, no tag
    needed: February has no 30th) ValueError, internal errors (exit 70).  Dates that are
    dates, and `yes`, still read as YAML 1.1 reads them."""
    import datetime

    with pytest.raises(ParseError) as exc:
        parse_spec_text(f"a: [1, {value}]\n", source="s.yaml")
    assert str(exc.value) == f"s.yaml: invalid spec: {why} (line 1 column 8)"
    assert parse_spec_text("a: [2001-02-28, '2001-02-30', !!bool yes, off]\n") == {
        "a": [datetime.date(2001, 2, 28), "2001-02-30", True, False]}


def test_a_plain_equals_sign_is_the_string_equals():
    """`=` as a key (`{=: 1}`) was refused with PyYAML's "could not determine a constructor for
    the tag 'tag:yaml.org,2002:value'": YAML 1.1 makes a plain `=` its value key, which
    PyYAML reads as the string "=" only where it flattens merge keys (ours does so only for
    mappings with `<<`).  ASSEMBLE.md: a plain `=` is the string "=", key or value (as YAML
    1.2 reads it); a key given twice, once quoted, is a duplicate."""
    assert parse_spec_text("a: {=: 1}\nb: =\nc: [=, x]\nd: {<<: {=: 1, e: 2}, =: 3}\n") == {
        "a": {"=": 1}, "b": "=", "c": ["=", "x"], "d": {"=": 3, "e": 2}}
    with pytest.raises(ParseError) as exc:
        parse_spec_text('a: {=: 1, "=": 2}\n', source="s.yaml")
    assert str(exc.value) == "s.yaml: invalid spec: duplicate key '=' (line 1 column 11)"
    text = ("subgraphs:\n- replica_groups: [[0]]\n  engines: {sp: []}\n"
            "  def_json: {note: {=: 1}}\n")
    from nrtrewrite.neff.container import read_container

    members = read_container(assemble(parse_spec_text(text)).data).members
    assert json.loads(members["sg00/def.json"])["note"] == {"=": 1}
    spec = parse_spec_text("=: 1\nsubgraphs: [{replica_groups: [[0]], engines: {sp: []}}]\n")
    with pytest.raises(ValidationError) as exc:
        assemble_spec(spec)
    assert str(exc.value).startswith("<spec>: unknown key '=' (allowed: header, ")


def _sg0(s: dict) -> dict:
    return s["subgraphs"][0]


@pytest.mark.parametrize("mutate, field, key", [
    (lambda s: _sg0(s)["vars"][2].update(name="a\ud800"), "subgraphs[0].vars[2].name", None),
    (lambda s: _sg0(s)["vars"][2].update(type="a\ud800"), "subgraphs[0].vars[2].type", None),
    (lambda s: _sg0(s)["vars"][3].update(partitions=["a\ud800"]),
     "subgraphs[0].vars[3].partitions[0]", None),
    (lambda s: _sg0(s).update(replica_groups=[[0, "a\ud800"]]),
     "subgraphs[0].replica_groups[0][1]", None),
    (lambda s: _sg0(s).update(def_json={"note": {"x": [1, "a\ud800"]}}),
     "subgraphs[0].def_json.note.x[1]", None),
    (lambda s: _sg0(s).update(def_json={"var": [{"name": "a\ud800"}]}),
     "subgraphs[0].def_json.var[0].name", None),
    (lambda s: _sg0(s).update(def_json={"note": {"a\ud800": 1}}), "subgraphs[0].def_json.note",
     "a\ud800"),
    (lambda s: _sg0(s).update(def_json={"a\ud800": 1}), "subgraphs[0].def_json", "a\ud800"),
    (lambda s: s.update(neff_json={"subgraphs": ["sg00", "a\ud800"]}), "neff_json.subgraphs[1]",
     None),
    (lambda s: s.update(extra_members=[{"name": "x", "json": {"a": ["a\ud800"]}}]),
     "extra_members[0].json.a[0]", None),
])
def test_a_lone_surrogate_in_a_json_member_is_named_at_its_field(base_spec, mutate, field, key):
    """A lone surrogate in a var's name or type (and anywhere else written into def.json)
    was reported at the subgraph, `field subgraphs[0]: cannot be written as JSON: 'utf-8'
    codec can't encode character '\\ud800' in position 54: surrogates not allowed`, one in
    neff_json or an extra member's json at that key: now at its own field, as the header's
    strings and names are (ASSEMBLE.md), the key path being the spec's (`vars`, where
    def.json says `var`)."""
    mutate(base_spec)
    msg = _refused_at(base_spec, field)
    why = "not Unicode text (\"\\ud800\" is a lone surrogate, which UTF-8 cannot hold)"
    assert msg == f"<spec>: field {field}: " + (f"key \"a\\ud800\" is {why}" if key else why)


def test_a_lone_surrogate_in_an_engine_name_is_named_at_the_engines(base_spec, tmp_path):
    """An engine name with a lone surrogate went into def.json (refused at the subgraph) and
    named its stream in errors (`field subgraphs[0].engines.a\\ud800[0].nop: -1 is outside
    0..inf`): refused before its stream is read, at `engines`."""
    _sg0(base_spec)["engines"]["a\ud800"] = [{"nop": -1}]
    assert _refused_at(base_spec, "subgraphs[0].engines").endswith(
        ": engine name \"a\\ud800\" is not Unicode text (\"\\ud800\" is a lone surrogate, which "
        "UTF-8 cannot hold)")
    spec = tmp_path / "e.json"
    spec.write_text(json.dumps(base_spec), encoding="utf-8")  # ("\ud800" escaped in JSON)
    res = CliRunner().invoke(main, ["assemble", str(spec), "-o", str(tmp_path / "e.neff")])
    assert (res.exit_code, res.output) == (
        2, f"nrtrewrite: error: {spec}: field subgraphs[0].engines: engine name \"a\\ud800\" is "
           "not Unicode text (\"\\ud800\" is a lone surrogate, which UTF-8 cannot hold)\n")


# ---------------------------------------------------------------------------
# coverage audit (2026-12-05): spec refusals no test reached, each at the key path the spec
# gives it (ASSEMBLE.md: "one-line errors naming the spec path")

def _d9_pattern(var: str, dims) -> dict:
    return {"var": var, "partitions": 128, "dims": dims}


@pytest.mark.parametrize("mutate, field, why", [
    (lambda s: s.update(validate="yes"), "validate", "must be true or false, not 'yes'"),
    (lambda s: s.update(trailing=5), "trailing", "must be a hex string, not 5"),
    (lambda s: s.update(trailing="zz"), "trailing", "not a hex string: 'zz'"),
    (lambda s: s["header"].update(name=5), "header.name", "must be a string, not 5"),
    (lambda s: s["header"].update(neff_build_version=[]), "header.neff_build_version",
     "must be a string, not an empty list"),
    (lambda s: s["subgraphs"].append(copy.deepcopy(s["subgraphs"][0])), "subgraphs[1].name",
     "subgraph 'sg00' defined twice"),
    (lambda s: s.update(extra_members=[{"text": "x"}]), "extra_members[0].name",
     "name is missing: give the member's path in the archive"),
    (lambda s: s.update(extra_members=[{"name": ["x"]}]), "extra_members[0].name",
     "must be a string, not a list of 1 item"),
    (lambda s: _sg0(s).update(name=""), "subgraphs[0].name",
     "must be a non-empty string, not ''"),
    (lambda s: _sg0(s).update(name=7), "subgraphs[0].name", "must be a non-empty string, not 7"),
    (lambda s: _sg0(s).update(engines={}), "subgraphs[0].engines",
     "needs a mapping of engine name -> instructions, not an empty mapping"),
    (lambda s: _sg0(s).update(engines=["sp"]), "subgraphs[0].engines",
     "needs a mapping of engine name -> instructions, not a list of 1 item"),
    (lambda s: _sg0(s).pop("engines"), "subgraphs[0].engines",
     "needs a mapping of engine name -> instructions"),
    (lambda s: _sg0(s)["engines"].update({3: []}), "subgraphs[0].engines",
     "engine name 3 is not a string"),
    (lambda s: _sg0(s).update(def_json=[1]), "subgraphs[0].def_json",
     "must be a mapping, not a list of 1 item"),
    (lambda s: _sg0(s)["vars"][0].update(name=""), "subgraphs[0].vars[0].name",
     "needs a non-empty name, not ''"),
    (lambda s: _sg0(s)["vars"][0].update(name=None), "subgraphs[0].vars[0].name",
     "needs a non-empty name"),  # (null is as if missing: ASSEMBLE.md)
    (lambda s: _sg0(s)["vars"][0].pop("name"), "subgraphs[0].vars[0].name",
     "needs a non-empty name"),
    (lambda s: _sg0(s)["vars"].__setitem__(0, "in"), "subgraphs[0].vars[0]",
     "must be a mapping, not 'in'"),
    (lambda s: _sg0(s).update(replica_groups="0..7"), "subgraphs[0].replica_groups",
     "needs a list of replica groups, not '0..7'"),
    (lambda s: _sg0(s).pop("replica_groups"), "subgraphs[0].replica_groups",
     "needs a list of replica groups"),
    (lambda s: _sg0(s).update(replica_groups=[5]), "subgraphs[0].replica_groups[0]",
     "a group is a list of ranks or 'first..last', not 5"),
    (lambda s: _sg0(s).update(replica_groups=[{"0": 7}]), "subgraphs[0].replica_groups[0]",
     "a group is a list of ranks or 'first..last', not a mapping of 1 key"),
    (lambda s: _sp(s).append("nap"), "subgraphs[0].engines.sp[3]",
     "an instruction is a one-key mapping (nop, opaque, raw, repeat, all_reduce, all_gather, "
     "reduce_scatter) or 'nop', not 'nap' (did you mean 'nop'?)"),
    (lambda s: _sp(s).append("all_reduce"), "subgraphs[0].engines.sp[3]",
     "an instruction is a one-key mapping (nop, opaque, raw, repeat, all_reduce, all_gather, "
     "reduce_scatter) or 'nop', not 'all_reduce'"),
    (lambda s: _sp(s).append({"nop": 1, "raw": "00"}), "subgraphs[0].engines.sp[3]",
     "an instruction is a one-key mapping (nop, opaque, raw, repeat, all_reduce, all_gather, "
     "reduce_scatter) or 'nop', not a mapping of 2 keys"),
    (lambda s: _sp(s).append({}), "subgraphs[0].engines.sp[3]",
     "an instruction is a one-key mapping (nop, opaque, raw, repeat, all_reduce, all_gather, "
     "reduce_scatter) or 'nop', not an empty mapping"),
    (lambda s: _sp(s).append({"all_reduce": 5}), "subgraphs[0].engines.sp[3].all_reduce",
     "must be a mapping, not 5"),
    (lambda s: _sp(s)[1]["all_reduce"].update(op="mul"),
     "subgraphs[0].engines.sp[1].all_reduce.op", "unknown op 'mul' (one of add, max, min)"),
    (lambda s: _sp(s)[1]["all_reduce"].update(op=None),
     "subgraphs[0].engines.sp[1].all_reduce.op", "op is missing: give one of add, max, min"),
    (lambda s: _sp(s)[1]["all_reduce"].pop("op"),
     "subgraphs[0].engines.sp[1].all_reduce.op", "op is missing: give one of add, max, min"),
    (lambda s: _sp(s)[1]["all_reduce"].pop("num_elements"),
     "subgraphs[0].engines.sp[1].all_reduce", "needs num_elements or bytes"),
    # 0xD9: both operands are access patterns; dims are 1 to 3 [step, num] pairs
    (lambda s: _sp(s)[1]["all_reduce"].update(opcode=0xD9),
     "subgraphs[0].engines.sp[1].all_reduce.src",
     "0xD9 needs an SBUF access pattern {var, start, partitions, dims}, not 'in'"),
    (lambda s: _sp(s)[1]["all_reduce"].update(opcode=0xD9, src=_d9_pattern("sb_in", [[1, 8]]),
                                              dst=None),
     "subgraphs[0].engines.sp[1].all_reduce.dst",
     "0xD9 needs an SBUF access pattern {var, start, partitions, dims}"),
    (lambda s: _sp(s)[1]["all_reduce"].update(opcode=0xD9, src=_d9_pattern("sb_in", [[1, 8]]))
     or _sp(s)[1]["all_reduce"].pop("dst"), "subgraphs[0].engines.sp[1].all_reduce.dst",
     "0xD9 needs an SBUF access pattern {var, start, partitions, dims}"),
    (lambda s: s["header"].update(tpb_per_node=[1] * 65), "header.tpb_per_node",
     "at most 64 entries, not 65"),
    (lambda s: _sp(s)[1]["all_reduce"].update(src=_d9_pattern("sb_in", []),
                                              dst=_d9_pattern("sb_out", [[1, 8]])),
     "subgraphs[0].engines.sp[1].all_reduce.src.dims",
     "needs 1 to 3 [step, num] pairs, innermost first, not an empty list"),
    (lambda s: _sp(s)[1]["all_reduce"].update(src=_d9_pattern("sb_in", [[1, 8]] * 4),
                                              dst=_d9_pattern("sb_out", [[1, 8]])),
     "subgraphs[0].engines.sp[1].all_reduce.src.dims",
     "needs 1 to 3 [step, num] pairs, innermost first, not a list of 4 items"),
    (lambda s: _sp(s)[1]["all_reduce"].update(src=_d9_pattern("sb_in", [[1, 8]]),
                                              dst={"var": "sb_out", "partitions": 128}),
     "subgraphs[0].engines.sp[1].all_reduce.dst.dims",
     "needs 1 to 3 [step, num] pairs, innermost first"),
    (lambda s: _sp(s)[1]["all_reduce"].update(src=_d9_pattern("sb_in", [[1, 8]]),
                                              dst=_d9_pattern("sb_out", [[1, 8], 5])),
     "subgraphs[0].engines.sp[1].all_reduce.dst.dims[1]", "a dimension is [step, num], not 5"),
    (lambda s: _sp(s)[1]["all_reduce"].update(src=_d9_pattern("sb_in", [[1, 8]]),
                                              dst=_d9_pattern("sb_out", [[1, 8], [1]])),
     "subgraphs[0].engines.sp[1].all_reduce.dst.dims[1]",
     "a dimension is [step, num], not a list of 1 item"),
    (lambda s: _sp(s)[1]["all_reduce"].update(src=_d9_pattern("sb_in", [[1, 8]]),
                                              dst=dict(_d9_pattern("sb_out", [[1, 8]]),
                                                       partitions="all")),
     "subgraphs[0].engines.sp[1].all_reduce.dst.partitions",
     "needs a count or [start, count], not 'all'"),
    (lambda s: _sp(s)[1]["all_reduce"].update(src=_d9_pattern("sb_in", [[1, 8]]),
                                              dst=dict(_d9_pattern("sb_out", [[1, 8]]),
                                                       partitions=[0, 64, 1])),
     "subgraphs[0].engines.sp[1].all_reduce.dst.partitions",
     "needs a count or [start, count], not a list of 3 items"),
    (lambda s: _sp(s)[1]["all_reduce"].update(src=_d9_pattern("sb_in", [[1, 8]]),
                                              dst=_d9_pattern("sb_out", [[1, 8]]), ext="no"),
     "subgraphs[0].engines.sp[1].all_reduce.ext", "must be true or false, not 'no'"),
])
def test_more_spec_refusals_name_their_key(base_spec, mutate, field, why):
    """Each refusal whole, at its key; a refusal of a value's type says what the key holds,
    as the spec writes it (``not 'yes'``, ``not null``, ``not a list of 4 items``: a list's
    items or a mapping's keys counted), and nothing of a key that is missing."""
    mutate(base_spec)
    assert _refused_at(base_spec, field) == f"<spec>: field {field}: {why}"


@pytest.mark.parametrize("name, why", [
    ("../evil", "member path contains '..'"),
    ("a/../b", "member path contains '..'"),
    ("/abs", "absolute member path"),
    ("a//b", "member path has an empty or '.' component"),
    ("./x", "member path has an empty or '.' component"),
    ("", "empty member name"),
    ("a\\b", "member name has a backslash or control character"),
    ("a\x01b", "member name has a backslash or control character"),
    # MAX_MEMBER_NAME_BYTES = 4096 bytes of UTF-8: 'é' is two
    ("x" * 4097, "member name of 4097 bytes, more than 4096 (MAX_MEMBER_NAME_BYTES)"),
    ("\u00e9" * 2049, "member name of 4098 bytes, more than 4096 (MAX_MEMBER_NAME_BYTES)"),
])
def test_a_member_name_the_reader_refuses_is_not_written(base_spec, name, why, tmp_path):
    """ASSEMBLE.md: tar-level pathologies (absolute paths, ...) cannot be written by the
    assembler: an ``extra_members[].name`` the tar writer refuses is a spec error at its key
    path, as every other spec error (it was named as a member, ``member ../evil: ...``,
    where the spec has no such key), also with validate: false (nothing is read back); the
    CLI says it in one line, exit 2."""
    base_spec.update(validate=False, extra_members=[{"name": "ok", "text": "hi"},
                                                    {"name": name, "text": "hi"}])
    assert _refused_at(base_spec, "extra_members[1].name") == (
        f"<spec>: field extra_members[1].name: {why}")
    spec = tmp_path / "m.json"
    spec.write_text(json.dumps(base_spec), encoding="utf-8")
    res = CliRunner().invoke(main, ["assemble", str(spec), "-o", str(tmp_path / "m.neff")])
    assert (res.exit_code, res.output) == (
        2, f"nrtrewrite: error: {spec}: field extra_members[1].name: {why}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


# A member name as an error shows it (container.check_member_name's refusals): whole up to 200
# characters, else its first 120 and last 40 characters and its length.
_X4097 = "x" * 120 + "..." + "x" * 31 + "/def.json (4097 characters)"


@pytest.mark.parametrize("name, member, why", [
    ("/abs", "/abs/def.json", "absolute member path"),
    ("../x", "../x/def.json", "member path contains '..'"),
    ("a/../b", "a/../b/def.json", "member path contains '..'"),
    ("a//b", "a//b/def.json", "member path has an empty or '.' component"),
    ("a/", "a//def.json", "member path has an empty or '.' component"),
    (".", "./def.json", "member path has an empty or '.' component"),
    # (a name's backslash shown doubled: docs/CLI.md "Errors")
    ("a\\b", "a\\\\b/def.json", "member name has a backslash or control character"),
    ("a\x01b", "a\\x01b/def.json", "member name has a backslash or control character"),
    ("a\nb", "a\\nb/def.json", "member name has a backslash or control character"),
    # MAX_MEMBER_NAME_BYTES = 4096: 4088 + len("/def.json") = 4097 bytes ('é' is two)
    ("x" * 4088, _X4097, "member name of 4097 bytes, more than 4096 (MAX_MEMBER_NAME_BYTES)"),
    ("\u00e9" * 2044, "\u00e9" * 120 + "..." + "\u00e9" * 31 + "/def.json (2053 characters)",
     "member name of 4097 bytes, more than 4096 (MAX_MEMBER_NAME_BYTES)"),
])
@pytest.mark.parametrize("validate", [True, False])
def test_a_subgraph_name_the_tar_writer_refuses_is_named_at_its_key(base_spec, name, member,
                                                                    why, validate, tmp_path):
    """ASSEMBLE.md: a subgraph `name` is its folder, `NAME/def.json`: a name making a member
    the tar writer refuses is a spec error at `subgraphs[N].name` naming the member (it was
    `<spec>: member ../x/def.json: member path contains '..'`, which the spec has no key
    for), also with validate: false; the CLI says it in one line, exit 2, and writes
    nothing."""
    base_spec["validate"] = validate
    base_spec["subgraphs"].insert(0, copy.deepcopy(base_spec["subgraphs"][0]))
    base_spec["subgraphs"][1]["name"] = name
    assert _refused_at(base_spec, "subgraphs[1].name") == (
        f"<spec>: field subgraphs[1].name: member {member}: {why}")
    spec = tmp_path / "m.json"
    spec.write_text(json.dumps(base_spec), encoding="utf-8")
    res = CliRunner().invoke(main, ["assemble", str(spec), "-o", str(tmp_path / "m.neff")])
    assert (res.exit_code, res.output) == (
        2, f"nrtrewrite: error: {spec}: field subgraphs[1].name: member {member}: {why}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


@pytest.mark.parametrize("engine, member, why", [
    ("/abs", "sg00//abs.bin", "member path has an empty or '.' component"),
    ("../x", "sg00/../x.bin", "member path contains '..'"),
    ("a/../b", "sg00/a/../b.bin", "member path contains '..'"),
    ("a//b", "sg00/a//b.bin", "member path has an empty or '.' component"),
    ("./x", "sg00/./x.bin", "member path has an empty or '.' component"),
    ("a\\b", "sg00/a\\\\b.bin", "member name has a backslash or control character"),
    ("a\tb", "sg00/a\\tb.bin", "member name has a backslash or control character"),
    ("a\x7fb", "sg00/a\\x7fb.bin", "member name has a backslash or control character"),
    # 5 + 4088 + len(".bin") = 4097 bytes
    ("x" * 4088, "sg00/" + "x" * 115 + "..." + "x" * 36 + ".bin (4097 characters)",
     "member name of 4097 bytes, more than 4096 (MAX_MEMBER_NAME_BYTES)"),
])
@pytest.mark.parametrize("validate", [True, False])
def test_an_engine_name_the_tar_writer_refuses_is_named_at_the_engines(base_spec, engine, member,
                                                                       why, validate, tmp_path):
    """ASSEMBLE.md: an engine's stream is the member `SUBGRAPH/ENGINE.bin`: an engine name
    making a member the tar writer refuses is a spec error at `subgraphs[N].engines`, where
    an engine name that is not Unicode text is (a key path cannot hold such a name), naming
    the member (it was `<spec>: member sg00/../x.bin: ...`), before its stream is read (the
    stream's own mistake, nop: -1, is not the one reported); the CLI says it in one line,
    exit 2."""
    base_spec["validate"] = validate
    _sg0(base_spec)["engines"][engine] = [{"nop": -1}]
    assert _refused_at(base_spec, "subgraphs[0].engines") == (
        f"<spec>: field subgraphs[0].engines: member {member}: {why}")
    spec = tmp_path / "m.json"
    spec.write_text(json.dumps(base_spec), encoding="utf-8")
    res = CliRunner().invoke(main, ["assemble", str(spec), "-o", str(tmp_path / "m.neff")])
    assert (res.exit_code, res.output) == (
        2, f"nrtrewrite: error: {spec}: field subgraphs[0].engines: member {member}: {why}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


def test_member_names_are_judged_whole_at_the_key_that_passes_the_limit(base_spec):
    """MAX_MEMBER_NAME_BYTES (4096) bounds the member name, folder and file: a subgraph name
    of 4087 bytes makes `NAME/def.json` of 4096 and `NAME/pool.bin` of 4096, which are
    written; an engine name of 12 under a subgraph name of 4080 makes 4080 + 1 + 12 + 4 =
    4097 bytes, refused at the engines, the subgraph's own def.json (4089) passing."""
    name = "x" * 4087
    _sg0(base_spec)["name"] = name
    base_spec["validate"] = False
    members = read_container(assemble_spec(base_spec)).members
    assert {f"{name}/def.json", f"{name}/pool.bin"} <= set(members)
    _sg0(base_spec)["name"] = "x" * 4080
    _sg0(base_spec)["engines"]["y" * 12] = []
    assert _refused_at(base_spec, "subgraphs[0].engines") == (
        "<spec>: field subgraphs[0].engines: member " + "x" * 120 + "..." + "x" * 23
        + "/" + "y" * 12 + ".bin (4097 characters): member name of 4097 bytes, more than 4096 "
        "(MAX_MEMBER_NAME_BYTES)")


def test_names_the_tar_writer_takes_are_written_with_validate_false(base_spec):
    """Only the tar writer's refusals are the assembler's: a subgraph `a/b` and an engine `.`
    or `` make members it writes (`a/b/def.json`, `a/b/..bin`, `a/b/.bin`), which the
    reader refuses (not plain file names: ASSEMBLE.md, Members), so validate: false builds
    them."""
    base_spec["validate"] = False
    _sg0(base_spec)["name"] = "a/b"
    _sg0(base_spec)["engines"].update({".": [], "": []})
    members = read_container(assemble_spec(base_spec)).members
    assert list(members) == ["neff.json", "a/b/def.json", "a/b/sp.bin", "a/b/pool.bin",
                             "a/b/..bin", "a/b/.bin"]


def test_two_engines_making_one_member_are_named_at_the_second(base_spec):
    """Subgraph `a` with engine `b/x` and subgraph `a/b` with engine `x` both make `a/b/x.bin`
    (validate: false; the reader refuses both names): the tar writer's `duplicate member
    name` is a spec error at the second subgraph's engines, naming the first's (it was
    `<spec>: member a/b/x.bin: duplicate member name`)."""
    base_spec["validate"] = False
    first = _sg0(base_spec)
    first.update(name="a", engines={"b/x": []})
    base_spec["subgraphs"].append(dict(copy.deepcopy(first), name="a/b", engines={"x": []}))
    assert _refused_at(base_spec, "subgraphs[1].engines") == (
        "<spec>: field subgraphs[1].engines: member a/b/x.bin: duplicate member name "
        "(subgraphs[0].engines makes it too)")


def test_trailing_bytes_and_a_hex_tpb_per_node_are_written_as_given(base_spec):
    """ASSEMBLE.md: `trailing: HEX` is appended after the payload (which the reader refuses
    unless zero: NEFF-LIKE.md, bytes after data_size must be zero), `tpb_per_node` may be a
    hex string, zero-padded to its 64 bytes at header offset 480 (NEFF-LIKE.md §1), and an
    extra member without text, hex or json is empty."""
    base_spec["header"]["tpb_per_node"] = "08 04"
    base_spec["extra_members"] = [{"name": "notes/empty"}]
    plain = assemble_spec(copy.deepcopy(base_spec))
    assert plain[480:544] == bytes([8, 4]) + bytes(62)
    from nrtrewrite.neff.container import read_container
    assert read_container(plain).members["notes/empty"] == b""
    base_spec["trailing"] = "00 00"
    assert assemble_spec(copy.deepcopy(base_spec)) == plain + bytes(2)
    base_spec["trailing"] = "00ff"
    with pytest.raises(ParseError, match=r"^<spec> \(assembled\): .*non-zero byte after the "
                                         r"payload"):
        assemble_spec(copy.deepcopy(base_spec))
    base_spec["validate"] = False
    assert assemble_spec(base_spec) == plain + b"\x00\xff"


@pytest.mark.parametrize("text, why", [
    # (a YAML merge takes a mapping or a list of them: yaml.org/type/merge.html)
    ("a: 1\nb: {<<: 3}\n", "expected a mapping or list of mappings for merging, but found "
                           "scalar (line 2 column 9)"),
    ("a: &a {x: 1}\nb: {<<: [*a, 3]}\n", "expected a mapping or list of mappings for "
                                         "merging, but found scalar (line 2 column 14)"),
])
def test_a_merge_of_a_scalar_is_refused(text, why):
    with pytest.raises(ParseError) as exc:
        parse_spec_text(text)
    assert str(exc.value) == f"<spec>: invalid spec: {why}"


@pytest.mark.parametrize("text, kind", [
    ("- 1\n- 2\n", "a list of 2 items"), ("hello\n", "'hello'"), ("[1, 2]\n", "a list of 2 items"),
    ("", "null"), ("# nothing\n", "null"), ("12\n", "12"),
])
def test_a_spec_that_is_not_a_mapping_is_refused(text, kind):
    """Saying what the spec is, as it writes it (an empty one is YAML's null)."""
    with pytest.raises(ValidationError) as exc:
        parse_spec_text(text)
    assert str(exc.value) == f"<spec>: a spec must be a mapping, not {kind}"


def test_a_spec_file_that_is_not_utf8_is_refused(tmp_path):
    """ASSEMBLE.md: the spec is UTF-8: a byte 0xff is a one-line error naming the file, exit
    status 2."""
    spec = tmp_path / "bad.yaml"
    spec.write_bytes(b"header: {name: \xff}\n")
    res = CliRunner().invoke(main, ["assemble", str(spec), "-o", str(tmp_path / "b.neff")],
                             prog_name="nrtrewrite")
    assert (res.exit_code, res.output) == (
        2, f"nrtrewrite: error: {spec}: spec is not UTF-8 (invalid start byte)\n")
    assert not (tmp_path / "b.neff").exists()


@pytest.mark.parametrize("value, why", [
    (float("nan"), ".nan is not a finite number (NaN and infinities are refused)"),
    (float("-inf"), "-.inf is not a finite number (NaN and infinities are refused)"),
    ({1, 2}, "a set (!!set), which JSON cannot hold"),
])
def test_a_value_json_cannot_hold_is_refused_at_its_member(base_spec, value, why):
    """A value JSON cannot hold (a NaN from the API, a YAML !!set) in neff_json is a one-line
    error at its key path (it was at neff_json, in json's words: `cannot be written as JSON:
    Object of type set is not JSON serializable`); a number that is not finite in the words
    the spec's text gets (ASSEMBLE.md)."""
    base_spec["neff_json"] = {"neff_like_version": 1, "subgraphs": ["sg00"], "a": [0, value]}
    assert _refused_at(base_spec, "neff_json.a[1]") == f"<spec>: field neff_json.a[1]: {why}"


_DATE_HINT = "which JSON cannot hold (YAML 1.1 reads this form as a date: quote it for a string)"


@pytest.mark.parametrize("yaml_text, field, why", [
    ("  def_json: {released: 2001-12-14}\n", "subgraphs[0].def_json.released",
     f"a date (2001-12-14), {_DATE_HINT}"),
    ("  def_json: {note: [1, {at: 2001-12-14 21:59:43}]}\n", "subgraphs[0].def_json.note[1].at",
     f"a date (2001-12-14T21:59:43), {_DATE_HINT}"),
    ("  def_json: {note: {2001-12-14: x}}\n", "subgraphs[0].def_json.note",
     "key 2001-12-14 is a date, JSON keys are strings: quote it"),
    ("  vars: [{name: a, type: !!set {input}, size: 64}]\n", "subgraphs[0].vars[0].type",
     "a set (!!set), which JSON cannot hold"),
    ("  vars: [{name: a, type: state-buffer, size: 64, partitions: 2001-01-01}]\n",
     "subgraphs[0].vars[0].partitions", f"a date (2001-01-01), {_DATE_HINT}"),
    ("  replica_groups: [[0, !!binary AQ==]]\n", "subgraphs[0].replica_groups[0][1]",
     "binary data (!!binary), which JSON cannot hold"),
    ("neff_json: {neff_like_version: 1, subgraphs: [sg00], built: 2026-12-05}\n",
     "neff_json.built", f"a date (2026-12-05), {_DATE_HINT}"),
    ("extra_members: [{name: x.json, json: {a: [1, !!set {b}]}}]\n", "extra_members[0].json.a[1]",
     "a set (!!set), which JSON cannot hold"),
    ("extra_members: [{name: x.json, json: 2001-12-14}]\n", "extra_members[0].json",
     f"a date (2001-12-14), {_DATE_HINT}"),
])
def test_a_value_json_cannot_hold_is_named_at_its_key_path(yaml_text, field, why, tmp_path):
    """ASSEMBLE.md: a value written as JSON (def_json, neff_json, extra_members[].json, a
    var's type or partitions, the replica groups) that JSON cannot hold - a plain
    2001-12-14, which YAML 1.1 reads as a date, a !!set, !!binary, a date as a key - is
    refused at its key path; it was at the member's holder in json's words (`field
    subgraphs[0]: cannot be written as JSON: Object of type date is not JSON
    serializable`).  The CLI says it in one line, exit 2, and writes nothing."""
    text = "subgraphs:\n- engines: {sp: []}\n"
    if "replica_groups" not in yaml_text:
        text += "  replica_groups: [[0]]\n"
    text = (text + yaml_text) if yaml_text.startswith(" ") else (yaml_text + text)
    with pytest.raises(ValidationError) as exc:
        assemble_spec(parse_spec_text(text))
    assert str(exc.value) == f"<spec>: field {field}: {why}"
    spec = tmp_path / "m.yaml"
    spec.write_text(text, encoding="utf-8")
    res = CliRunner().invoke(main, ["assemble", str(spec), "-o", str(tmp_path / "m.neff")])
    assert (res.exit_code, res.output) == (2, f"nrtrewrite: error: {spec}: field {field}: {why}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.yaml"]


@pytest.mark.parametrize("def_json, field", [
    ("{a: &d [*d, *d]}", "a[0]"),
    ("{a: &d [1, *d], c: &e [*e]}", "a[1]"),
])
def test_of_two_recursive_aliases_the_first_is_named(def_json, field):
    """ASSEMBLE.md: a value that contains itself through a YAML alias is refused at the key
    path where the alias closes the cycle; with two, the first in the spec's order."""
    text = ("subgraphs:\n- replica_groups: [[0]]\n  engines: {sp: []}\n"
            f"  def_json: {def_json}\n")
    with pytest.raises(ValidationError) as exc:
        assemble_spec(parse_spec_text(text))
    assert str(exc.value) == (f"<spec>: field subgraphs[0].def_json.{field}: a list contains "
                              "itself (a recursive YAML alias), which JSON cannot hold")


# ---------------------------------------------------------------------------
# a spec value in a message is worded as the spec writes it (ASSEMBLE.md), not as Python's
# repr: `got None`, `got True`, `got datetime.date(2001, 1, 1)`, `got b'\x01'`, `not a UUID: [1]`

_WORDING_SPEC = """\
header: {num_tpb: %(num_tpb)s, uuid: %(uuid)s}
subgraphs:
- vars: [{name: a, type: input, size: 64}, {name: b, type: output, size: 64}]
  replica_groups: [[0, 1]]
  engines:
    %(engine)s: [{all_reduce: {dtype: %(dtype)s, op: add, src: %(src)s, dst: b, bytes: 64}}]
"""
_WORDING_DEFAULTS = {"num_tpb": "1", "uuid": "null", "engine": "sp", "dtype": "bf16", "src": "a"}

#: A wrong value as the spec writes it, and as the message must word it (worked out by hand
#: from YAML 1.1: ~ and null are null, yes is true, a plain 2001-01-01 is a date, 1.0e+20 a
#: float; a list or a mapping by its kind, its items or keys counted; a string in single
#: quotes, in double quotes with JSON's escapes when it holds a single quote or a character
#: that is not printable).
_WORDED = [
    ("null", "null"), ("~", "null"), ("true", "true"), ("yes", "true"), ("false", "false"),
    ("2001-01-01", "a date (2001-01-01)"), ("!!binary AQ==", "binary data (!!binary)"),
    ("[1, 2]", "a list of 2 items"), ("{a: 1}", "a mapping of 1 key"), ("[]", "an empty list"),
    ("!!set {a}", "a set (!!set)"), ("1.5", "1.5"), ("1.0e+20", "1.0e+20"), ("'12'", "'12'"),
    ('"it\'s"', '"it\'s"'), ('"a\\tb"', '"a\\tb"'),
]


@pytest.mark.parametrize("yaml_value, worded", _WORDED)
def test_an_integer_refused_is_worded_as_the_spec_writes_it(yaml_value, worded):
    """At ``header.num_tpb``; a null there is its default (ASSEMBLE.md: a key given null is
    as if it were missing), so null is shown at ``tpb_per_node[0]``, a list item."""
    if worded == "null":
        text = _WORDING_SPEC.replace("uuid:", "tpb_per_node: [%(num_tpb)s], uuid:")
        field = "header.tpb_per_node[0]"
        text = text % dict(_WORDING_DEFAULTS, num_tpb=yaml_value)
    else:
        text, field = _WORDING_SPEC % dict(_WORDING_DEFAULTS, num_tpb=yaml_value), "header.num_tpb"
    with pytest.raises(ValidationError) as exc:
        assemble_spec(parse_spec_text(text))
    assert str(exc.value) == f"<spec>: field {field}: must be an integer, not {worded}"


@pytest.mark.parametrize("key, yaml_value, field, why", [
    ("uuid", "[1]", "header.uuid", "not a UUID: a list"),
    ("uuid", "12", "header.uuid", "not a UUID: 12"),
    ("uuid", "true", "header.uuid", "not a UUID: true"),
    ("uuid", "2001-01-01", "header.uuid", "not a UUID: a date (2001-01-01)"),
    ("dtype", "null", "subgraphs[0].engines.sp[0].all_reduce.dtype",
     "dtype is missing: give one of "),  # (the list of names: checked elsewhere)
    ("src", "true", "subgraphs[0].engines.sp[0].all_reduce.src",
     "must be a var name or a var_id, not true"),
    ("src", "1.5", "subgraphs[0].engines.sp[0].all_reduce.src",
     "must be a var name or a var_id, not 1.5"),
    ("src", "[a]", "subgraphs[0].engines.sp[0].all_reduce.src",
     "must be a var name or a var_id, not a list of 1 item"),
    ("src", "'c'", "subgraphs[0].engines.sp[0].all_reduce.src",
     "no var named 'c' in this subgraph"),
    ("engine", "null", "subgraphs[0].engines", "engine name null is not a string"),
    ("engine", "2001-01-01", "subgraphs[0].engines",
     "engine name a date (2001-01-01) is not a string"),
])
def test_other_values_refused_are_worded_as_the_spec_writes_them(key, yaml_value, field, why):
    text = _WORDING_SPEC % dict(_WORDING_DEFAULTS, **{key: yaml_value})
    with pytest.raises(ValidationError) as exc:
        assemble_spec(parse_spec_text(text))
    msg = str(exc.value)
    if key == "dtype":
        assert msg.startswith(f"<spec>: field {field}: {why}"), msg
    else:
        assert msg == f"<spec>: field {field}: {why}"


@pytest.mark.parametrize("yaml_text, why", [
    ("header: {~: 1}\nsubgraphs: []\n", "field header: unknown key null (allowed: pkg_version, "
     "name, neff_version_major, neff_version_minor, neff_build_version, num_tpb, uuid, "
     "requested_tpb_count, tpb_per_node, feature_bits, lnc_size)"),
    ("subgraphs:\n- replica_groups: [[0]]\n  engines: {sp: [{1: 2}]}\n",
     "field subgraphs[0].engines.sp[0]: unknown instruction 1 (one of nop, opaque, raw, "
     "repeat, all_reduce, all_gather, reduce_scatter)"),
    ("subgraphs:\n- replica_groups: [[0]]\n  engines: {sp: [{nop: 2001-01-01}]}\n",
     "field subgraphs[0].engines.sp[0].nop: must be an integer, not a date (2001-01-01)"),
    ("omit_members: [yes]\nsubgraphs: [{replica_groups: [[0]], engines: {sp: []}}]\n",
     "field omit_members[0]: must be a member name, not true"),
    ("extra_members: [{name: x, text: 1.0e+20}]\n"
     "subgraphs: [{replica_groups: [[0]], engines: {sp: []}}]\n",
     "field extra_members[0].text: must be a string, not 1.0e+20"),
])
def test_keys_and_list_items_refused_are_worded_as_the_spec_writes_them(yaml_text, why):
    with pytest.raises(ValidationError) as exc:
        assemble_spec(parse_spec_text(yaml_text))
    assert str(exc.value) == f"<spec>: {why}"


def test_a_yaml_key_given_twice_is_worded_as_the_spec_writes_it():
    """`{~: 1, null: 2}` is the key null twice (it said `duplicate key None`)."""
    with pytest.raises(ParseError) as exc:
        parse_spec_text("a: {~: 1, null: 2}\n")
    assert str(exc.value) == "<spec>: invalid spec: duplicate key null (line 1 column 11)"


def test_a_value_refused_is_worded_as_the_spec_writes_it_through_the_cli(tmp_path):
    spec = tmp_path / "w.yaml"
    spec.write_text(_WORDING_SPEC % dict(_WORDING_DEFAULTS, num_tpb="2001-01-01"))
    res = CliRunner().invoke(main, ["assemble", str(spec), "-o", str(tmp_path / "w.neff")])
    assert (res.exit_code, res.output) == (
        2, f"nrtrewrite: error: {spec}: field header.num_tpb: must be an integer, not a date "
           "(2001-01-01)\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.yaml"]


@pytest.mark.parametrize("text, field, why", [
    ("header: {pkg_version: 2, name: m, lnc_size: 1}\n"
     "subgraphs:\n"
     "- name: sg00\n"
     "  replica_groups: [[0, 1]]\n"
     "  vars: [{name: a, type: input, size: 64}, {name: b, type: output, size: 64}]\n"
     "  engines: {sp: [{all_reduce: {dtype: bf16, src: a, dst: b, num_elements: 32, "
     "op: [add]}}]}\n",
     "subgraphs[0].engines.sp[0].all_reduce.op", "unknown op a list (one of add, max, min)"),
    ("subgraphs: 5\n", "subgraphs", "needs a non-empty list of subgraphs, not 5"),
], ids=["op-list", "subgraphs-integer"])
def test_a_value_of_the_wrong_kind_is_refused_at_its_key_through_the_cli(tmp_path, text, field,
                                                                         why):
    """ASSEMBLE.md: a value a refusal shows is worded as the spec writes it, a list by its
    kind (an ALU op given as ``[add]``: ``unknown op a list``, as ``not a UUID: a list``);
    a refusal of a value's type says what the key holds (``subgraphs: 5``: ``not 5``; the
    table: ``subgraphs`` is a non-empty list of subgraphs).  Exit 2, one line, no file."""
    spec = tmp_path / "s.yaml"
    spec.write_text(text)
    res = CliRunner().invoke(main, ["assemble", str(spec), "-o", str(tmp_path / "x.neff")])
    assert (res.exit_code, res.output) == (2, f"nrtrewrite: error: {spec}: field {field}: {why}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


# ---------------------------------------------------------------------------
# a mapping key that is not a string in a value written as JSON: json.dumps wrote it as a
# string, so `{1: a, "1": b}` wrote the key "1" twice (silently with validate: false)

@pytest.mark.parametrize("yaml_text, field, why", [
    ("  def_json: {1: a, '1': b}\n", "subgraphs[0].def_json",
     "key 1 is an integer, JSON keys are strings: quote it"),
    ("  def_json: {note: [0, {~: a}]}\n", "subgraphs[0].def_json.note[1]",
     "key null is null, JSON keys are strings: quote it"),
    ("  def_json: {note: {yes: a}}\n", "subgraphs[0].def_json.note",
     "key true is a boolean, JSON keys are strings: quote it"),
    ("  vars: [{name: a, type: state-buffer, size: 64, partitions: {1.5: x}}]\n",
     "subgraphs[0].vars[0].partitions", "key 1.5 is a number, JSON keys are strings: quote it"),
    ("  replica_groups: [[0, {false: 1}]]\n", "subgraphs[0].replica_groups[0][1]",
     "key false is a boolean, JSON keys are strings: quote it"),
    ("neff_json: {neff_like_version: 1, subgraphs: [sg00], 7: x}\n", "neff_json",
     "key 7 is an integer, JSON keys are strings: quote it"),
    ("extra_members: [{name: x.json, json: {a: {2001-12-14: x}}}]\n", "extra_members[0].json.a",
     "key 2001-12-14 is a date, JSON keys are strings: quote it"),
    ("extra_members: [{name: x.json, json: {!!binary AQ==: x}}]\n", "extra_members[0].json",
     "a key that is binary data (!!binary), JSON keys are strings"),
])
@pytest.mark.parametrize("validate", ["true", "false"])
def test_a_json_key_that_is_not_a_string_is_refused(yaml_text, field, why, validate):
    """ASSEMBLE.md: a key of a value written as JSON (def_json, neff_json,
    extra_members[].json, a var's type or partitions, the replica groups) must be a string,
    whatever `validate` says: it is refused at the mapping that holds it, the first in the
    spec's order."""
    text = "subgraphs:\n- engines: {sp: []}\n"
    if "replica_groups" not in yaml_text:
        text += "  replica_groups: [[0]]\n"
    text = (text + yaml_text) if yaml_text.startswith(" ") else (yaml_text + text)
    with pytest.raises(ValidationError) as exc:
        assemble_spec(parse_spec_text(f"validate: {validate}\n" + text))
    assert str(exc.value) == f"<spec>: field {field}: {why}"


def test_the_first_value_json_cannot_hold_is_named_a_key_or_not():
    """A value JSON cannot hold before a key that is not a string is named first (the spec's
    order), and a key before such a value."""
    base = "subgraphs:\n- replica_groups: [[0]]\n  engines: {sp: []}\n  def_json: "
    with pytest.raises(ValidationError) as exc:
        assemble_spec(parse_spec_text(base + "{a: 2001-12-14, b: {1: x}}\n"))
    assert str(exc.value).startswith("<spec>: field subgraphs[0].def_json.a: a date (2001-12-14)")
    with pytest.raises(ValidationError) as exc:
        assemble_spec(parse_spec_text(base + "{b: {1: x}, a: 2001-12-14}\n"))
    assert str(exc.value) == ("<spec>: field subgraphs[0].def_json.b: key 1 is an integer, "
                              "JSON keys are strings: quote it")


def test_a_json_key_that_is_not_a_string_through_the_cli(tmp_path):
    """One line, exit 2, nothing written, with validate: false too (the file had the key "1"
    twice in sg00/def.json)."""
    spec = tmp_path / "k.yaml"
    spec.write_text("validate: false\nsubgraphs:\n- replica_groups: [[0]]\n"
                    "  engines: {sp: []}\n  def_json: {1: a, '1': b}\n")
    res = CliRunner().invoke(main, ["assemble", str(spec), "-o", str(tmp_path / "k.neff")])
    assert (res.exit_code, res.output) == (
        2, f"nrtrewrite: error: {spec}: field subgraphs[0].def_json: key 1 is an integer, JSON "
           "keys are strings: quote it\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.yaml"]


# ---------------------------------------------------------------------------
# a key that is not a plain name (a dot, a bracket, a space) in a spec's key path is quoted,
# def_json["a.b"], as diff's and the JSON reader's key paths: a def_json key "a.b" was
# mapped by its first part, `a`, to the subgraph (field subgraphs[0].a.b), and "var.x" to
# the subgraph's vars (field subgraphs[0].vars.x[0])

_DATE = "which JSON cannot hold (YAML 1.1 reads this form as a date: quote it for a string)"


@pytest.mark.parametrize("def_json, field, why", [
    ('{"a.b": 2001-12-14}', 'subgraphs[0].def_json["a.b"]', f"a date (2001-12-14), {_DATE}"),
    ('{"var.x": [{1: a}]}', 'subgraphs[0].def_json["var.x"][0]',
     "key 1 is an integer, JSON keys are strings: quote it"),
    ('{"x[0]": 2001-12-14}', 'subgraphs[0].def_json["x[0]"]', f"a date (2001-12-14), {_DATE}"),
    ('{"a b": {c: 2001-12-14}}', 'subgraphs[0].def_json["a b"].c',
     f"a date (2001-12-14), {_DATE}"),
    ('{n: {"": 2001-12-14}}', 'subgraphs[0].def_json.n[""]', f"a date (2001-12-14), {_DATE}"),
    ('{var: [{"c.d": 2001-12-14}]}', 'subgraphs[0].def_json.var[0]["c.d"]',
     f"a date (2001-12-14), {_DATE}"),
    ('{"a.b": &d [*d]}', 'subgraphs[0].def_json["a.b"][0]',
     "a list contains itself (a recursive YAML alias), which JSON cannot hold"),
    ('{"a.b": ["\\ud800"]}', 'subgraphs[0].def_json["a.b"][0]',
     'not Unicode text ("\\ud800" is a lone surrogate, which UTF-8 cannot hold)'),
])
def test_a_def_json_key_with_a_dot_is_quoted_in_its_key_path(def_json, field, why):
    text = ("subgraphs:\n- replica_groups: [[0]]\n  engines: {sp: []}\n"
            f"  def_json: {def_json}\n")
    with pytest.raises(ValidationError) as exc:
        assemble_spec(parse_spec_text(text))
    assert str(exc.value) == f"<spec>: field {field}: {why}"


@pytest.mark.parametrize("yaml_text, field, why", [
    ("subgraphs:\n- replica_groups: [[0]]\n  engines: {s.p: [{nop: x}]}\n",
     'subgraphs[0].engines["s.p"][0].nop', "must be an integer, not 'x'"),
    ("subgraphs:\n- replica_groups: [[0]]\n  vars: [{name: a, size: 1, type: {t.u: 2001-12-14}}]"
     "\n  engines: {sp: []}\n", 'subgraphs[0].vars[0].type["t.u"]',
     f"a date (2001-12-14), {_DATE}"),
    ("neff_json: {neff_like_version: 1, subgraphs: [sg00], x.y: 2001-12-14}\n"
     "subgraphs:\n- replica_groups: [[0]]\n  engines: {sp: []}\n", 'neff_json["x.y"]',
     f"a date (2001-12-14), {_DATE}"),
])
def test_other_spec_keys_with_a_dot_are_quoted_in_their_key_paths(yaml_text, field, why):
    with pytest.raises(ValidationError) as exc:
        assemble_spec(parse_spec_text(yaml_text))
    assert str(exc.value) == f"<spec>: field {field}: {why}"


def test_a_non_finite_number_under_a_key_with_a_dot_is_quoted_in_its_key_path(tmp_path):
    spec = tmp_path / "d.yaml"
    spec.write_text("subgraphs:\n- replica_groups: [[0]]\n  engines: {sp: []}\n"
                    "  def_json: {a.b: [1, -.inf]}\n")
    res = CliRunner().invoke(main, ["assemble", str(spec), "-o", str(tmp_path / "d.neff")])
    assert (res.exit_code, res.output) == (
        2, f'nrtrewrite: error: {spec}: field subgraphs[0].def_json["a.b"][1]: -.inf is not a '
           "finite number (NaN and infinities are refused)\n")


# ---------------------------------------------------------------------------
# ASSEMBLE.md "Top-level keys": a key given null is as if it were missing (its default); a
# required key given null is refused as missing (until 2026-12-06 most scalar keys said
# `must be ..., not null`, and a missing size, count, opcode, dtype or type read as a null)

#: A spec with every kind of mapping of the schema: an opaque word, a repeat, a 0xC8
#: all-reduce (a DRAM operand given as {var}, a sync, a patch), a 0xD9 all-gather (SBUF
#: operands), a raw_header, two extra members.
_NULL_BASE = {
    "header": {"name": "nulls"},
    "raw_header": {},
    "extra_members": [{"name": "a.txt", "text": "hi"}, {"name": "b.bin"}],
    "subgraphs": [{
        "vars": [
            {"name": "in", "type": "input", "size": 256},
            {"name": "out", "type": "output", "size": 256},
            {"name": "sa", "type": "state-buffer", "size": 64, "partitions": 128},
            {"name": "sb", "type": "state-buffer", "size": 64, "partitions": 128},
        ],
        "replica_groups": [[0, 1]],
        "engines": {"sp": [
            {"opaque": {"opcode": 0x41}},
            {"repeat": {"count": 2, "body": ["nop"]}},
            {"all_reduce": {"dtype": "bf16", "op": "add", "src": "in", "dst": {"var": "out"},
                            "bytes": 64, "sync": {"wait_mode": 1}, "patch": {}}},
            {"all_gather": {"dtype": "bf16",
                            "src": {"var": "sa", "partitions": 128, "dims": [[1, 8]]},
                            "dst": {"var": "sb", "partitions": 128, "dims": [[1, 16]]}}},
        ]},
    }],
}

#: Each mapping of _NULL_BASE by a name, and its keys a null of which is its default (the
#: tables of ASSEMBLE.md).  A 0xC8 trigger's ext, ext_sync and patch_ext are refused when
#: given, and an all-gather's op: given null, each is as if missing, so allowed.
_NULL_AT = {
    "top": (lambda s: s, ["header", "validate", "raw_header", "trailing", "neff_json",
                          "extra_members", "omit_members"]),
    "header": (lambda s: s["header"], [
        "pkg_version", "name", "neff_version_major", "neff_version_minor",
        "neff_build_version", "num_tpb", "uuid", "requested_tpb_count", "tpb_per_node",
        "feature_bits", "lnc_size"]),
    "raw_header": (lambda s: s["raw_header"], ["reserved", "num_tpb"]),
    "extra_members[0]": (lambda s: s["extra_members"][0], ["hex", "json"]),
    "extra_members[1]": (lambda s: s["extra_members"][1], ["text", "hex", "json"]),
    "subgraph": (lambda s: s["subgraphs"][0], ["name", "vars", "def_json"]),
    "var": (lambda s: s["subgraphs"][0]["vars"][0], ["partitions", "var_id"]),
    "opaque": (lambda s: _sp(s)[0]["opaque"], ["count", "sync", "operands"]),
    "repeat": (lambda s: _sp(s)[1]["repeat"], ["body"]),
    "0xC8": (lambda s: _sp(s)[2]["all_reduce"], [
        "opcode", "group", "num_elements", "stream_id", "channel_id", "ext_sync", "patch",
        "patch_ext", "ext"]),
    "dram operand": (lambda s: _sp(s)[2]["all_reduce"]["dst"], ["offset"]),
    "sync": (lambda s: _sp(s)[2]["all_reduce"]["sync"], [
        "wait_mode", "wait_idx", "update_mode", "update_idx", "semaphore_value"]),
    "patch": (lambda s: _sp(s)[2]["all_reduce"]["patch"], ["length_dw", "reserved_2"]),
    "0xD9": (lambda s: _sp(s)[3]["all_gather"], [
        "op", "opcode", "group", "num_elements", "bytes", "stream_id", "channel_id", "sync",
        "ext_sync", "patch", "patch_ext", "ext"]),
    "sbuf operand": (lambda s: _sp(s)[3]["all_gather"]["src"], ["start"]),
}


@pytest.mark.parametrize("where, key", [(where, key) for where, (_, keys) in _NULL_AT.items()
                                        for key in keys])
def test_a_key_given_null_is_as_if_it_were_missing(where, key):
    """The same bytes with ``key: null`` as without the key (the reproducer: ``header:
    {num_tpb: null}`` said `must be an integer, not null`); without ``vars`` the triggers
    name no var: the same line."""
    get, _ = _NULL_AT[where]
    without, with_null = copy.deepcopy(_NULL_BASE), copy.deepcopy(_NULL_BASE)
    get(without).pop(key, None)
    get(with_null)[key] = None

    def outcome(spec: dict) -> bytes | str:
        try:
            return assemble_spec(spec)
        except ValidationError as err:
            return str(err)

    assert outcome(with_null) == outcome(without)
    if (where, key) != ("subgraph", "vars"):
        assert isinstance(outcome(without), bytes)


def test_a_key_given_null_in_a_yaml_spec_is_as_if_it_were_missing(tmp_path):
    """The reproducer through the CLI: ``header: {num_tpb: null}`` (and ``~``) is the spec
    without it, byte for byte."""
    body = ("subgraphs: [{vars: [{name: a, type: input, size: 64}], replica_groups: "
            "['0..1'], engines: {sp: []}}]\n")
    outs = []
    for i, header in enumerate(("", "header: {num_tpb: null}\n", "header: {num_tpb: ~}\n")):
        (tmp_path / str(i)).mkdir()
        spec = tmp_path / str(i) / "n.yaml"
        spec.write_text(header + body)
        res = CliRunner().invoke(main, ["assemble", str(spec), "-o", str(spec) + ".neff"])
        assert res.exit_code == 0, res.output
        outs.append((tmp_path / str(i) / "n.yaml.neff").read_bytes())
    assert outs[1] == outs[0] and outs[2] == outs[0]


_DTYPES_LISTED = ("uint64, int8, uint8, int16, uint16, bf16, fp16, int32, uint32, fp32, "
                  "fp32r, int64, fp8_e3, fp8_e4, fp8_e5")

#: A required key: where (in _NULL_BASE), the key, the field refused and the line (ASSEMBLE.md:
#: each says the key is missing, or what is needed there, as `needs a non-empty name` and
#: `src is missing` do).
_REQUIRED = [
    ("top", "subgraphs", "subgraphs", "needs a non-empty list of subgraphs"),
    ("subgraph", "replica_groups", "subgraphs[0].replica_groups",
     "needs a list of replica groups"),
    ("subgraph", "engines", "subgraphs[0].engines",
     "needs a mapping of engine name -> instructions"),
    ("var", "name", "subgraphs[0].vars[0].name", "needs a non-empty name"),
    ("var", "type", "subgraphs[0].vars[0].type",
     "type is missing: give one of input, output, tmp-buf, state-buffer"),
    ("var", "size", "subgraphs[0].vars[0].size", "size is missing: give the var's size in bytes"),
    ("opaque", "opcode", "subgraphs[0].engines.sp[0].opaque.opcode",
     "opcode is missing: give the word's opcode, 0..255"),
    ("repeat", "count", "subgraphs[0].engines.sp[1].repeat.count",
     "count is missing: give how many times to repeat the body"),
    ("0xC8", "dtype", "subgraphs[0].engines.sp[2].all_reduce.dtype",
     f"dtype is missing: give one of {_DTYPES_LISTED}"),
    ("0xC8", "op", "subgraphs[0].engines.sp[2].all_reduce.op",
     "op is missing: give one of add, max, min"),
    ("0xC8", "src", "subgraphs[0].engines.sp[2].all_reduce.src",
     "src is missing: give a var name"),
    ("0xC8", "dst", "subgraphs[0].engines.sp[2].all_reduce.dst",
     "dst is missing: give a var name"),
    ("0xC8", "bytes", "subgraphs[0].engines.sp[2].all_reduce", "needs num_elements or bytes"),
    ("dram operand", "var", "subgraphs[0].engines.sp[2].all_reduce.dst.var",
     "var is missing: give a var name"),
    ("0xD9", "dtype", "subgraphs[0].engines.sp[3].all_gather.dtype",
     f"dtype is missing: give one of {_DTYPES_LISTED}"),
    ("sbuf operand", "var", "subgraphs[0].engines.sp[3].all_gather.src.var",
     "var is missing: give a var name"),
    ("sbuf operand", "partitions", "subgraphs[0].engines.sp[3].all_gather.src.partitions",
     "needs a count or [start, count]"),
    ("sbuf operand", "dims", "subgraphs[0].engines.sp[3].all_gather.src.dims",
     "needs 1 to 3 [step, num] pairs, innermost first"),
    ("extra_members[1]", "name", "extra_members[1].name",
     "name is missing: give the member's path in the archive"),
]


@pytest.mark.parametrize("where, key, field, why", _REQUIRED)
def test_a_required_key_missing_or_null_is_refused_as_missing(where, key, field, why):
    """A required key's absence is one line at its key path saying so (a missing size said
    `must be an integer, not null`, count and opcode alike, dtype `unknown dtype null`, a
    missing type passed the spec and failed in the reader: `member sg00/def.json ... unknown
    var type null`); given null, the same line."""
    get, _ = _NULL_AT[where]
    lines = []
    for null in (False, True):
        spec = copy.deepcopy(_NULL_BASE)
        if null:
            get(spec)[key] = None
        else:
            del get(spec)[key]
        with pytest.raises(ValidationError) as exc:
            assemble_spec(spec)
        lines.append(str(exc.value))
    assert lines == [f"<spec>: field {field}: {why}"] * 2


def test_a_missing_type_is_refused_by_the_spec_without_validation():
    """A var without ``type`` is the spec's refusal, not the reader's: so also with
    ``validate: false`` (it wrote ``"type": null`` into def.json)."""
    spec = copy.deepcopy(_NULL_BASE)
    spec["validate"] = False
    del spec["subgraphs"][0]["vars"][0]["type"]
    with pytest.raises(ValidationError) as exc:
        assemble_spec(spec)
    assert str(exc.value) == ("<spec>: field subgraphs[0].vars[0].type: type is missing: give "
                              "one of input, output, tmp-buf, state-buffer")


def test_the_null_tests_cover_every_key_of_the_schema():
    """Every key of ASSEMBLE.md's tables is tested above, given null, once with its default
    or as required (so a key added later is not left out)."""
    from nrtrewrite.neff import assembler

    tested: dict[str, set] = {}
    for where, (_, keys) in _NULL_AT.items():
        tested.setdefault(where, set()).update(keys)
    for where, key, _, _ in _REQUIRED:
        tested[where].add(key)
    assert tested["top"] == set(assembler._TOP_KEYS)
    assert tested["header"] == set(assembler._HEADER_KEYS)
    assert tested["subgraph"] == set(assembler._SG_KEYS)
    assert tested["var"] == set(assembler._VAR_KEYS)
    assert tested["0xC8"] | tested["0xD9"] == set(assembler._TRIGGER_KEYS)
    assert tested["sync"] == set(assembler._SYNC_KEYS)
    assert tested["opaque"] == {"opcode", "count", "sync", "operands"}
    assert tested["repeat"] == {"count", "body"}
    assert tested["dram operand"] == {"var", "offset"}
    assert tested["sbuf operand"] == {"var", "start", "partitions", "dims"}
    assert tested["extra_members[0]"] | tested["extra_members[1]"] == {"name", "text", "hex",
                                                                       "json"}


def test_a_lone_surrogate_in_a_tuple_is_named_by_its_index(base_spec):
    """A tuple in a JSON member (a spec given to ``assemble_spec`` as Python values) is written
    as a list, and a lone surrogate in it is named as a list's item is, by its index in
    brackets (review 53n: ``json.a.1``, the tuple's item named as a mapping's key)."""
    for value in ((1, "\ud800"), [1, "\ud800"]):
        spec = dict(copy.deepcopy(base_spec),
                    extra_members=[{"name": "b.json", "json": {"a": value}}])
        with pytest.raises(ValidationError) as exc:
            assemble_spec(spec)
        assert str(exc.value) == ("<spec>: field extra_members[0].json.a[1]: not Unicode text "
                                  "(\"\\ud800\" is a lone surrogate, which UTF-8 cannot hold)")


def _random_json_value(rng, depth: int = 0):
    """A random value of lists, tuples, mappings (keys with escapes and non-ASCII text) and
    scalars of every kind json writes, at most 6 deep."""
    r = rng.random()
    if depth < 6 and r < 0.3:
        return [_random_json_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if depth < 6 and r < 0.5:
        return {rng.choice(["a", "\u00e9", "k\n", "\u2028", "x" * 70]) + str(i):
                _random_json_value(rng, depth + 1) for i in range(rng.randrange(4))}
    if depth < 6 and r < 0.55:
        return tuple(_random_json_value(rng, depth + 1) for _ in range(rng.randrange(3)))
    return rng.choice([0, -5, 10**30, 1.5, -0.0, 1e300, True, False, None, "", "abc",
                       "\u00e9\u20ac\U0001d11e", "a\"b\\c\t", "x" * 100])


def test_an_unshared_member_is_counted_from_jsons_c_writer_exactly():
    """``_json_size_unshared`` (a spec read from text without an alias) counts the bytes
    json.dumps with the 2-space indent writes, plus the newline, from its compact writing and
    the lists' and mappings' levels: equal to the oracle (json.dumps itself) for 2,000 random
    values; 500 lists deep counted, 501 left to the walk (None), as is what json's writer or
    UTF-8 refuses (NaN, a lone surrogate, a date)."""
    import datetime
    import random

    from nrtrewrite.neff.assembler import _json_size_unshared

    rng = random.Random(53)
    for _ in range(2000):
        value = _random_json_value(rng)
        want = len((json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode())
        assert _json_size_unshared(value) == want, value
    deep: object = 1
    for _ in range(500):
        deep = [deep]
    assert _json_size_unshared(deep) == len(json.dumps(deep, indent=2)) + 1
    for refused in ([deep], {"a": float("nan")}, ["a\ud800"], [datetime.date(2001, 1, 1)]):
        assert _json_size_unshared(refused) is None


@pytest.mark.parametrize("form", ["yaml", "json"])
def test_a_spec_read_from_text_without_alias_counts_its_members_without_the_walk(
        monkeypatch, form):
    """A spec read from text without a YAML alias (YAML or JSON) counts its JSON members
    from json's C writer, not by ``_json_size``'s walk of every scalar (review 53n: the walk
    made assembling a member of 1,000,000 values 10 - 22 % slower): the member is written as
    json.dumps writes it, and with the limit patched to its size less one it is refused
    saying its size.  A lone surrogate there is still named at its key path (by the walk)."""
    import nrtrewrite.neff.assembler as asm

    def no_walk(*args, **kwargs):
        raise AssertionError("the walk counted a member of a spec without aliases")

    monkeypatch.setattr(asm, "_json_size", no_walk)
    value = {"k\u00e9": [1.5, -7, "a\tb", {"z": [None, True, {}]}, []], "n": list(range(50))}
    spec = {"header": {"pkg_version": 2, "name": "t", "lnc_size": 1},
            "subgraphs": [{"name": "sg00", "replica_groups": [[0, 1]],
                           "engines": {"sp": ["nop"]}}],
            "extra_members": [{"name": "v.json", "json": value}]}
    text = json.dumps(spec) if form == "json" else yaml.safe_dump(spec, allow_unicode=True)
    want = (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode()
    assert read_container(assemble_spec(parse_spec_text(text))).members["v.json"] == want
    monkeypatch.setattr(asm, "MAX_JSON_MEMBER_BYTES", len(want) - 1)
    with pytest.raises(ValidationError) as exc:
        assemble_spec(parse_spec_text(text))
    assert str(exc.value) == _too_large("extra_members[0].json", "v.json", len(want),
                                        len(want) - 1)
    monkeypatch.undo()
    bad = text.replace("a\\tb", "a\\ud800")  # (JSON's and YAML's escape alike)
    assert bad != text
    with pytest.raises(ValidationError) as exc:
        assemble_spec(parse_spec_text(bad))
    assert str(exc.value) == ('<spec>: field extra_members[0].json.k\u00e9[2]: not Unicode '
                              'text ("\\ud800" is a lone surrogate, which UTF-8 cannot hold)')
