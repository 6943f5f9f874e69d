"""nrtrewrite.jsonout.dumps writes exactly ``json.dumps(obj, indent=N, sort_keys=True)``, and with
``compact_from`` the containers that deep on one line as ``json.dumps`` writes them compactly."""

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nrtrewrite.codes import EncAlgType
from nrtrewrite.jsonout import dumps

FIX = Path(__file__).resolve().parents[1] / "fixtures"

scalars = (st.none() | st.booleans() | st.integers(-2**70, 2**70)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12))
keys = st.text(max_size=6) | st.integers(-5, 5)
documents = st.recursive(
    scalars,
    lambda inner: (st.lists(inner, max_size=5) | st.tuples(inner, inner)
                   | st.dictionaries(st.text(max_size=6), inner, max_size=5)
                   | st.dictionaries(st.integers(-9, 9), inner, max_size=4)),
    max_leaves=40)


@settings(max_examples=400, deadline=None)
@given(documents, st.sampled_from([1, 2]))
def test_same_text_as_json_dumps(doc, indent):
    assert dumps(doc, indent) == json.dumps(doc, indent=indent, sort_keys=True)


def compact_reference(doc, indent: int, depth: int) -> str:
    """The compact_from rule with the standard library only: every container ``depth`` deep
    is replaced by a placeholder string, the rest encoded by ``json.dumps(indent=...)``, and
    each placeholder's text replaced by ``json.dumps(container, separators=(", ", ": "))``."""
    subs: dict[str, str] = {}

    def cut(obj, lvl):
        if isinstance(obj, (dict, list, tuple)) and lvl >= depth:
            mark = f"\x00placeholder{len(subs)}"
            subs[json.dumps(mark)] = json.dumps(obj, sort_keys=True, separators=(", ", ": "))
            return mark
        if isinstance(obj, dict):
            return {k: cut(v, lvl + 1) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [cut(v, lvl + 1) for v in obj]
        return obj

    text = json.dumps(cut(doc, 0), indent=indent, sort_keys=True)
    for mark, sub in subs.items():
        text = text.replace(mark, sub, 1)
    return text


@settings(max_examples=300, deadline=None)
@given(documents, st.sampled_from([1, 2]), st.integers(0, 4))
def test_compact_from_is_the_reference(doc, indent, depth):
    assert dumps(doc, indent, compact_from=depth) == compact_reference(doc, indent, depth)


def test_enums_nonascii_and_special_floats():
    doc = {"alg": EncAlgType.RING, "name": "größe \u2603 \"q\"\n", "x": [math.inf, -math.inf,
           1e300, -0.0, 0.1], "nested": [[], {}, [[1, [2]]], {"b": {}, "a": []}],
           3: "int key", "": None}
    with pytest.raises(TypeError):  # mixed key types cannot be sorted, as in json
        json.dumps(doc, indent=1, sort_keys=True)
    del doc[3]
    assert dumps(doc) == json.dumps(doc, indent=1, sort_keys=True)


def test_not_json_raises_type_error():
    with pytest.raises(TypeError):
        dumps({"a": {1, 2}})
    with pytest.raises(TypeError):
        dumps({(1, 2): 3})
    with pytest.raises(TypeError):  # compact from the document itself, as json.dumps refuses it
        dumps({1, 2}, compact_from=0)


def test_the_fixtures_manifests(tmp_path):
    from nrtrewrite.golden import unpack

    golden = Path(__file__).resolve().parents[1] / "fixtures" / "golden"
    for tgz in sorted(golden.glob("*.tar.gz")):
        out = unpack(tgz, tmp_path / tgz.stem)
        for man in out.rglob("manifest.json"):
            text = man.read_text()
            top = man.parent == out
            assert dumps(json.loads(text), compact_from=7 if top else None) + "\n" == text, man


@pytest.mark.parametrize("name", ["two_node128", "mix8", "sbuf"])
def test_top_level_manifest_with_its_triggers_spliced_in_is_the_whole_encoding(name):
    """bundle writes the top-level manifest with its ``triggers`` encoded apart (possibly in
    another process) and spliced in: the bytes of json.dumps of the whole document, with the
    containers 7 deep (a HIER leg's groups and buffers) on one line each (FORMATS §1.1)."""
    from nrtrewrite.bundle import _TopManifest, _triggers_json, build_manifest
    from nrtrewrite.lower import LowerOptions, plan_lowering
    from nrtrewrite.neff.reader import read_model

    plan = plan_lowering(read_model(FIX / f"{name}.neff"), LowerOptions())
    ranks = list(plan.world)
    hashes = {f"rank-{r:04d}": f"{r:064x}" for r in ranks}
    args = (plan, ranks, hashes, "x.neff", "cd" * 32)
    doc = build_manifest(*args)
    whole = compact_reference(doc, 1, 7) + "\n"
    # the triggers given ahead, or only when the text is made (a forked process's)
    ahead = _TopManifest(plan, ranks, "x.neff", _triggers_json(plan))
    spliced = ahead.text(hashes, "cd" * 32)
    assert spliced == whole.encode()
    assert ahead.exact and ahead.size == len(spliced)
    later = _TopManifest(plan, ranks, "x.neff", None)
    assert later.text(hashes, "cd" * 32, _triggers_json(plan)) == spliced
    assert not later.exact and later.size < len(spliced)
    assert json.loads(spliced) == json.loads(json.dumps(doc))
    if name == "two_node128":  # a HIER plan: one line per plan and per group of each leg
        legs = [leg for t in doc["triggers"] for leg in t["hier"]["legs"]]
        lines = spliced.decode().splitlines()
        assert (sum(1 for ln in lines if ln.lstrip().startswith('{"group": '))
                == sum(len(leg["groups"]) for leg in legs))
        assert (sum(1 for ln in lines if ln.lstrip().startswith('{"channels": '))
                == sum(len(leg["plans"]) for leg in legs))


@pytest.mark.parametrize("name", ["\x00nrtrewrite:triggers", "\x00nrtrewrite:rank_manifests"])
def test_a_var_named_as_a_manifest_mark_is_written_as_any_name(name, tmp_path):
    """The model's names are written into the top-level manifest (its memory map names every
    var), which is encoded with marks where the triggers and hashes go: a var named as the
    fixed triggers mark (``"\\u0000nrtrewrite:triggers"`` in JSON) made it stand twice,
    `internal error: RuntimeError: the triggers mark must stand exactly once` (status 70).
    Lowered, its manifest is the whole document's encoding with the name in it."""
    from nrtrewrite.bundle import write_output
    from nrtrewrite.lower import LowerOptions, plan_lowering
    from nrtrewrite.neff.assembler import assemble_spec
    from nrtrewrite.neff.reader import read_model_bytes

    spec = {"header": {"pkg_version": 2, "name": "marks", "lnc_size": 1},
            "subgraphs": [{"name": "sg00",
                           "vars": [{"name": name, "type": "input", "size": 4096},
                                    {"name": "o", "type": "output", "size": 4096}],
                           "replica_groups": [[0, 1]],
                           "engines": {"sp": [{"all_reduce": {
                               "dtype": "bf16", "op": "add", "src": name, "dst": "o",
                               "num_elements": 1024}}]}}]}
    model = read_model_bytes(assemble_spec(spec), path="marks.neff")
    out = write_output(plan_lowering(model, LowerOptions()), tmp_path / "o", ranks=None)
    text = (out / "manifest.json").read_text()
    doc = json.loads(text)
    assert text == compact_reference(doc, 1, 7) + "\n"
    assert json.dumps(name) in text
    assert sorted(doc["rank_manifests"]) == ["rank-0000", "rank-0001"]


@pytest.mark.parametrize("key", [True, False, None, 1.5, float("inf"), -3])
def test_non_string_keys_are_converted_as_json_converts_them(key):
    """The module's contract (jsonout docstring): dict keys str, int, float, bool or None,
    converted as ``json`` converts them (`true`, `null`, `1.5`, `Infinity`), the text of
    ``json.dumps(obj, indent=N, sort_keys=True)``."""
    doc = {"a": {key: [1, 2]}, "z": {key: None}}
    assert dumps(doc) == json.dumps(doc, indent=1, sort_keys=True)
