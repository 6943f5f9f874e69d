"""The assembler: committed fixtures rebuild byte for byte, inspect reproduces each spec's
triggers, spec mistakes are one-line errors, and hypothesis round trips spec -> file -> model."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nrtrewrite.cli import main
from nrtrewrite.errors import ParseError, ValidationError
from nrtrewrite.neff.assembler import assemble, assemble_file, assemble_spec, parse_spec_text
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
                                                                        num_elements=None),
     "field subgraphs[0].engines.sp[1].all_reduce", "not both"),
    (lambda s: s["subgraphs"][0]["engines"]["sp"][1]["all_reduce"].update(opcode=0xC9),
     "field subgraphs[0].engines.sp[1].all_reduce.opcode", "0xC7, 0xC8 or 0xD9"),
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
    error, where it was a UnicodeEncodeError traceback."""
    spec = parse_spec_text('name: "v\\ud800"\n')
    assert spec["name"] == "v\ud800"
    base_spec["subgraphs"][0]["vars"][2]["name"] = spec["name"]  # tmp, unused
    with pytest.raises(ValidationError) as exc:
        assemble_spec(base_spec)
    assert str(exc.value).startswith("<spec>: field subgraphs[0]: cannot be written as JSON: "
                                     "'utf-8' codec can't encode character '\\ud800'")


def test_recursive_yaml_alias_is_an_error(base_spec):
    spec = parse_spec_text("neff_json: &x {a: [*x]}\nsubgraphs: []\n")
    base_spec["neff_json"] = spec["neff_json"]
    with pytest.raises(ValidationError, match="^<spec>: field neff_json: cannot be written as "
                                              "JSON: Circular reference"):
        assemble_spec(base_spec)
