"""Numbers that are not finite in any JSON nrtrewrite reads (nrtrewrite/jsonin.py,
docs/RELIABILITY.md §1): Python's ``json`` reads ``NaN``, ``Infinity``, ``-Infinity`` (not
JSON) and ``1e999`` (an infinity); every reader refuses them with its one-line error naming
the file (or member) and the value's key path.  Readers: the NEFF's JSON members, topology
files (also through ``explain``'s guess of the lnc), ``assemble`` specs (YAML ``.inf``,
``.nan``, ``1.0e+999``), and the output manifests ``diff``, ``simulate``, ``dump`` and
``lower --force`` read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from nrtrewrite import jsonin
from nrtrewrite.artifacts import folder_rank, is_our_output
from nrtrewrite.cli import main
from nrtrewrite.errors import NrtRewriteError, ParseError, ValidationError
from nrtrewrite.neff.assembler import assemble_spec, parse_spec_text
from nrtrewrite.neff.reader import read_model_bytes
from nrtrewrite.topology.model import load_topology
from test_atomic_output import FIX

OVER = "(beyond the range of a double)"


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], prog_name="nrtrewrite")


def one_line_error(res, code: int = 2) -> str:
    assert res.exit_code == code, (res.exit_code, res.output, res.exception)
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nrtrewrite: error: "), res.stderr
    return lines[0][len("nrtrewrite: error: "):]


# --- the loader -----------------------------------------------------------------------------

@pytest.mark.parametrize("text, why, path", [
    ('{"a": 1e999}', f"1e999 is not a finite number {OVER}", "a"),
    ('{"a": -1E+400}', f"-1E+400 is not a finite number {OVER}", "a"),
    ('{"a": 1.5e308, "b": 2e308}', f"2e308 is not a finite number {OVER}", "b"),
    ('{"a": NaN}', "NaN is not a finite number", "a"),
    ('{"a": [0, {"b": Infinity}]}', "Infinity is not a finite number", "a[1].b"),
    ('{"x": {"y": [1, 2, -Infinity]}, "z": NaN}', "-Infinity is not a finite number", "x.y[2]"),
    ('[1, NaN]', "NaN is not a finite number", "[1]"),
    ('NaN', "NaN is not a finite number", None),
    ('{"a": ' + "9" * 400 + '.0}', "9999999999999999...999999.0 (a number of 402 characters) is "
                                  f"not a finite number {OVER}", "a"),
    # a number of 40 characters is shown whole, one of 41 by its ends
    ('{"a": ' + "1" * 36 + 'e999}', "1" * 36 + f"e999 is not a finite number {OVER}", "a"),
    ('{"a": ' + "1" * 37 + 'e999}',
     "1" * 16 + f"...1111e999 (a number of 41 characters) is not a finite number {OVER}", "a"),
])
def test_the_loader_refuses_numbers_that_are_not_finite(text, why, path):
    for strict in (True, False):
        with pytest.raises(jsonin.JsonRule) as exc:
            jsonin.loads(text, strict_objects=strict)
        assert (exc.value.why, exc.value.path) == (why, path)


def test_the_loader_keeps_finite_numbers_and_its_other_rules():
    assert jsonin.loads('{"a": 1e-999, "b": -0.0, "c": 1.7976931348623157e308, "d": 12}') == {
        "a": 0.0, "b": -0.0, "c": 1.7976931348623157e308, "d": 12}
    with pytest.raises(jsonin.JsonRule, match="duplicate key 'a'"):
        jsonin.loads('{"a": 1, "a": 2}')
    assert jsonin.loads('{"a": 1, "a": 2}', strict_objects=False) == {"a": 2}
    with pytest.raises(jsonin.JsonRule, match="an integer of 4301 digits, more than 4300"):
        jsonin.loads("[" + "1" * 4301 + "]")
    # 4300 digits pass, with a minus sign too (the sign is no digit)
    assert jsonin.loads("[" + "1" * 4300 + ", -" + "1" * 4300 + "]") == [int("1" * 4300),
                                                                         -int("1" * 4300)]
    with pytest.raises(jsonin.JsonRule, match="an integer of 4301 digits, more than 4300"):
        jsonin.loads("[-" + "1" * 4301 + "]")
    with pytest.raises(json.JSONDecodeError):
        jsonin.loads("{")


@pytest.mark.parametrize("text,path", [
    ('{"a": 1, "a": 2}', "a"),
    ('{"a": {"b": 1, "c": [0, {"d": 1, "e": {}, "d": 2}], "b": 3}}', "a.c[1].d"),
    ('[{"x": 1}, {"y": {"z": 0, "z": 0}}]', "[1].y.z"),
    ('{"p": {"q": 1, "q": 2}, "r": {"s": 1, "s": 2}}', "p.q"),  # the first object closed
    # an integer past the integers' rule (and CPython's 4300) after the key given twice: the
    # key, refused first, is named (the path was lost: the walk's parse met the integer)
    ('{"a": {"b": 1, "b": 2}, "c": ' + "1" * 4301 + "}", "a.b"),
    ('[{"x": {"y": 0, "y": 0}}, -' + "9" * 5000 + "]", "[0].x.y"),
])
def test_a_key_given_twice_is_named_by_its_key_path(text, path):
    for kw in ({}, {"strict_objects": False, "unique_keys": True}):
        with pytest.raises(jsonin.JsonRule) as exc:
            jsonin.loads(text, **kw)
        assert (exc.value.path, exc.value.why) == (path, f"duplicate key {path[-1]!r}")


@pytest.mark.parametrize("text, path", [
    # an integer of exactly 4300 digits is within the rule (more than 4300 is refused), so
    # the key given twice after it is the rule broken, named by its path
    ('{"a": ' + "1" * 4300 + ', "b": {"c": 1, "c": 2}}', "b.c"),
    # ... and a negative one: the minus sign is no digit
    ('{"a": -' + "1" * 4300 + ', "b": {"c": 1, "c": 2}}', "b.c"),
    # the same when the decoder cannot get through the document (3000 deep: the text walk
    # reads the integer)
    ('{"a": [' + "1" * 4300 + ', {"b": 1, "b": 2}, ' + "[" * 3000 + "]" * 3000 + "]}", "a[1].b"),
    # a number with a fraction before the object, in the walk: one scalar, 1.5, not 1 then
    # text that is not JSON
    ('{"a": [1.5, {"b": 1, "b": 2}, ' + "[" * 3000 + "]" * 3000 + "]}", "a[1].b"),
])
def test_a_key_given_twice_after_a_number_the_rules_let_pass_is_named(text, path):
    """The integers' rule refuses more than MAX_JSON_INT_DIGITS (4300) digits, the sign not
    counted; an integer it lets pass does not stand for the rule broken: the key given twice
    after it is named (its path was lost when the marking read or the walk took 4300 digits,
    or 4300 and a sign, for too many, or read 1.5 as 1)."""
    with pytest.raises(jsonin.JsonRule) as exc:
        jsonin.loads(text)
    assert (exc.value.why, exc.value.path) == (f"duplicate key {path[-1]!r}", path)


#: Nested deeper than the JSON decoder recurses (its parse is a RecursionError).
DEEP = "[" * 5000 + "]" * 5000
DUP_A = "duplicate key 'a'"
LONG = "an integer of 4301 digits, more than 4300"


@pytest.mark.parametrize("text, why, path", [
    # the object holding a key twice closes before the nesting: the walk that named the key
    # parsed the whole text again, met the nesting and lost the path
    ('{"x": {"a": 1, "a": 2}, "y": ' + DEEP + "}", DUP_A, "x.a"),
    ('[{"k": [0, {"a": 1, "a": 2}]}, ' + DEEP + "]", DUP_A, "[0].k[1].a"),
    # the key given twice holds the nesting (or the nesting follows it in its object): the
    # decoder never closed the object, a RecursionError; the object is wrong whatever follows
    ('{"a": 1, "a": ' + DEEP + "}", DUP_A, "a"),
    ('{"p": {"q": [{"a": 0, "s": 1, "a": ' + DEEP + "}]}}", DUP_A, "p.q[0].a"),
    ('{"a": 1, "a": 2, "b": ' + DEEP + "}", DUP_A, "a"),
    ('{"o": {"a": 1, "a": 2, "b": {"c": ' + DEEP + "}}}", DUP_A, "o.a"),
    # an integer of too many digits before the nesting: its path was lost the same way
    ('{"n": [1, ' + "1" * 4301 + '], "y": ' + DEEP + "}", LONG, "n[1]"),
    # a key given twice in the value of a key given twice (the walk kept a key's last value:
    # the object refused, under the first, was not found)
    ('{"a": {"b": 1, "b": 2}, "a": 3}', "duplicate key 'b'", "a.b"),
    ('{"a": [{"c": 0}, {"b": 1, "b": 2}], "a": 3}', "duplicate key 'b'", "a[1].b"),
])
def test_a_key_given_twice_before_nesting_too_deep_is_named(text, why, path):
    """The key path of a key given twice, or of an integer of too many digits, is named
    whatever the text holds after it; a text nested too deeply for the decoder is refused
    for a key given twice in an object the nesting is in, not as nested too deeply."""
    kws = [{}, {"strict_objects": False, "unique_keys": True}] if why != LONG else \
        [{}, {"strict_objects": False}]  # (CPython's own limit, 4300 digits by default)
    for kw in kws:
        with pytest.raises(jsonin.JsonRule) as exc:
            jsonin.loads(text, **kw)
        assert (exc.value.why, exc.value.path) == (why, path)


@pytest.mark.parametrize("text, kw", [
    (DEEP, {}),
    ('{"a": 1, "b": ' + DEEP + "}", {}),
    ('{"a": ' + DEEP + ', "a": 1}', {}),  # (the key comes again after the nesting)
    ('{"a": 1, "a": ' + DEEP + "}", {"strict_objects": False}),  # (keys twice allowed)
    # a key twice in an object 1000 deep: past the walk's 500 levels (half the recursion
    # limit), as deep as the decoder reaches: not looked for
    ("[" * 1000 + '{"a": 1, "a": ' + DEEP + "}" + "]" * 1000, {}),
])
def test_nesting_too_deep_without_a_key_given_twice_before_it_stays_nested_too_deeply(text, kw):
    with pytest.raises(RecursionError):
        jsonin.loads(text, **kw)


#: 900 arrays deep (the decoder reads it: under the recursion limit), the innermost holding
#: ``N`` zeros and then ``{"a": 1, "a": 1}``: the object's key path is ``x`` and 899 ``[0]``
#: down to the innermost array, then ``[N].a``.
N = 2000
NESTED = "[" * 900 + "0," * N + '{"a": 1, "a": 1}' + "]" * 900
NESTED_PATH = "x" + "[0]" * 899 + f"[{N}].a"
LONG_NESTED = "[" * 900 + "0," * N + "1" * 4301 + "]" * 900  # ([0] x 899, then [N])


@pytest.mark.parametrize("text, kw, why, path", [
    # (the reviewer's reproducers, 100,000 zeros there: 27 s and 22 s)
    ('{"x": ' + NESTED + "}", {}, DUP_A, NESTED_PATH),
    (LONG_NESTED, {"strict_objects": False}, LONG, "[0]" * 899 + f"[{N}]"),
    (LONG_NESTED, {}, LONG, "[0]" * 899 + f"[{N}]"),
    # the decoder cannot get through the text after the rule (nesting too deep, text that is
    # not JSON): the document's member holding it is read again, or walked by the loop
    ('{"x": ' + NESTED + ', "y": ' + DEEP + "}", {}, DUP_A, NESTED_PATH),
    ('{"x": ' + NESTED + ', "y": nonsense}', {}, DUP_A, NESTED_PATH),
    ('{"m": {"x": ' + NESTED + ', "y": ' + DEEP + "}}", {}, DUP_A, "m." + NESTED_PATH),
])
def test_the_key_path_search_reads_each_integer_a_bounded_number_of_times(
        monkeypatch, text, kw, why, path):
    """The path of a key given twice (an integer of too many digits) 900 containers deep
    behind N integers: the search read every container on the way down by the decoder
    again, each time the one holding it had failed, so each integer 900 times (the
    nesting's depth times the text: 27 s for 200 KB).  Counted without a clock: the calls
    the decoders make to read an integer.  Each integer is read at most three times here:
    by the parse that refused the text, the read marking the rule, and the read of the
    document's member holding it when the decoder could not get through the document (or,
    without the strict rule, the parse again with the integers' rule that CPython's limit
    calls for)."""
    reads = [0]
    real_init = json.JSONDecoder.__init__

    def counting_init(self, *, parse_int=None, **others):
        inner = parse_int or int

        def counted(num):
            reads[0] += 1
            return inner(num)
        real_init(self, parse_int=counted, **others)

    monkeypatch.setattr(json.JSONDecoder, "__init__", counting_init)
    with pytest.raises(jsonin.JsonRule) as exc:
        jsonin.loads(text, **kw)
    assert (exc.value.why, exc.value.path) == (why, path)
    ints = N + 3  # (the zeros, the object's two 1s; the long integer)
    assert reads[0] <= 3 * ints


@pytest.mark.parametrize("text, path", [
    # the first key read again, in the order the pairs are written (b, not a, read last)
    ('{"x": {"a": 1, "b": 1, "b": 2, "a": 2}}', "x.b"),
    # ... by the walk: in a member the decoder cannot get through, with the nesting after
    # the object, or in it (the object still open, nested too deeply)
    ('{"m": {"x": {"a": 1, "b": 1, "b": 2, "a": 2}, "y": ' + DEEP + "}}", "m.x.b"),
    ('{"x": {"a": 1, "b": 1, "b": 2, "a": 2, "y": ' + DEEP + "}}", "x.b"),
    # objects still open holding a key twice, nested too deeply: the innermost is named
    # (its key is the first the decoder would refuse, when the innermost closes)
    ('{"a": 1, "a": 2, "x": {"b": 1, "b": 2, "y": ' + "[" * 3000 + "]" * 3000 + "}}", "x.b"),
    ('[{"a": 1, "a": 2, "x": [{"b": 1, "b": 2, "y": ' + DEEP + "}]}]", "[0].x[0].b"),
])
def test_the_key_given_twice_first_and_the_innermost_object_are_named(text, path):
    """Of an object holding two keys twice, the one the decoder refuses is named: the first
    pair whose key an earlier pair holds (the walk's ``_read_key`` keeps the first, not the
    last); of objects still open where the walk stops, nested too deeply, the innermost
    (``_innermost_key_twice``), which jsonin's docstring promises.  No test failed when
    either was turned around."""
    for kw in ({}, {"strict_objects": False, "unique_keys": True}):
        with pytest.raises(jsonin.JsonRule) as exc:
            jsonin.loads(text, **kw)
        assert (exc.value.why, exc.value.path) == (f"duplicate key {path[-1]!r}", path)


def test_unique_keys_alone_and_exact_floats():
    """``diff``'s manifests: duplicate keys refused without the integers' rule; numbers with
    a fraction or an exponent kept exactly, equal only to one of the same exact value."""
    with pytest.raises(jsonin.JsonRule, match="duplicate key 'b'"):
        jsonin.loads('{"a": {"b": 1, "b": 1}}', strict_objects=False, unique_keys=True)
    assert jsonin.loads('{"a": 1, "a": 2}', unique_keys=False) == {"a": 2}
    big = "1" * 4301  # the interpreter's own limit: refused as the integers' rule says it
    for kw in ({"unique_keys": True}, {}):  # (CPython's ValueError names its own setting)
        with pytest.raises(jsonin.JsonRule, match="^an integer of 4301 digits, more than 4300$"):
            jsonin.loads(f"[{big}]", strict_objects=False, **kw)
    doc = jsonin.loads('[2, 2.0, 2.00, 1e0, 1.5, 1.50000000000000001, true, 1]',
                       strict_objects=False, exact_floats=True)
    two, two_f, two_ff, one_e, x, y, t, one = doc
    assert type(two) is int and isinstance(two_f, jsonin.JsonFloat)
    assert two_f.text == "2.0" and repr(two_ff) == "2.00" and str(one_e) == "1e0"
    assert two != two_f and two_f != two and not two_f == two and two_f == two_ff
    assert one_e != one and one_e != t and not t == one_e
    assert x != y and float(x) == float(y) and hash(x) == hash(1.5)
    assert json.dumps(doc) == "[2, 2.0, 2.0, 1.0, 1.5, 1.5, true, 1]"
    with pytest.raises(jsonin.JsonRule, match="1e999 is not a finite number"):
        jsonin.loads('{"a": 1e999}', strict_objects=False, exact_floats=True)
    x, = jsonin.loads('[1.5]', exact_floats=True)  # (diff compares it with any value)
    assert x != "1.5" and x != None and x not in ("1.5", None, [1.5])  # noqa: E711


def test_a_number_not_finite_under_a_key_given_again_is_refused_without_a_path():
    """Without strict_objects (the manifests nrtrewrite wrote) a key given twice keeps its
    last value, but a NaN given first is refused all the same: the text holds it; its key
    path is not told (the document no longer holds the value)."""
    with pytest.raises(jsonin.JsonRule) as exc:
        jsonin.loads('{"a": NaN, "a": 1}', strict_objects=False)
    assert (exc.value.why, exc.value.path) == ("NaN is not a finite number", None)


def test_an_interpreter_limit_below_the_integers_rule_is_its_own_error():
    """Under a lower ``sys.set_int_max_str_digits`` (640) an integer of 700 digits, which the
    integers' rule (4300) lets pass, cannot be read: CPython's ValueError, naming its
    setting, as the NEFF reader says it (tests/test_neff_reader.py), with or without the
    strict rules; 4301 digits are the rule's."""
    import sys
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(640)
    try:
        for strict in (True, False):
            with pytest.raises(ValueError) as exc:
                jsonin.loads("[" + "1" * 700 + "]", strict_objects=strict)
            assert not isinstance(exc.value, jsonin.JsonRule)
            assert str(exc.value).startswith("Exceeds the limit (640 digits) for integer string "
                                             "conversion: value has 700 digits")
            with pytest.raises(jsonin.JsonRule, match="^an integer of 4301 digits, more than "
                                                      "4300$"):
                jsonin.loads("[" + "1" * 4301 + "]", strict_objects=strict)
    finally:
        sys.set_int_max_str_digits(old)


# --- the NEFF's JSON members ----------------------------------------------------------------

def error_of(spec: dict) -> NrtRewriteError:
    spec["validate"] = False
    with pytest.raises(NrtRewriteError) as exc:
        read_model_bytes(assemble_spec(spec), path="m.neff")
    assert "\n" not in str(exc.value)
    return exc.value


@pytest.mark.parametrize("member, text, says", [
    # in a key the reader ignores: accepted before, as an infinity
    ("neff.json", '{"neff_like_version": 1, "subgraphs": ["sg00"], "note": 1e999}',
     f"m.neff: member neff.json, field note: invalid JSON: 1e999 is not a finite number {OVER}"),
    ("neff.json", '{"neff_like_version": 1, "subgraphs": ["sg00"], "x": {"y": [-Infinity]}}',
     "m.neff: member neff.json, field x.y[0]: invalid JSON: -Infinity is not a finite number"),
    # in a field the reader reads: it was "must be an integer, got Infinity"
    ("sg00/def.json", '{"var": [{"var_id": 0, "name": "in", "type": "input", "size": 1e999}]}',
     "m.neff: member sg00/def.json, subgraph sg00, field var[0].size: invalid JSON: 1e999 is "
     f"not a finite number {OVER}"),
    ("sg00/def.json", '{"engines": ["sp"], "note": NaN}',
     "m.neff: member sg00/def.json, subgraph sg00, field note: invalid JSON: NaN is not a "
     "finite number"),
])
def test_neff_json_members_refuse_numbers_that_are_not_finite(base_spec, member, text, says):
    base_spec["extra_members"] = [{"name": member, "text": text}]
    err = error_of(base_spec)
    assert isinstance(err, ParseError) and str(err) == says


def test_a_neff_with_an_infinite_number_through_the_cli(base_spec, tmp_path):
    base_spec["extra_members"] = [{"name": "neff.json", "text": (
        '{"neff_like_version": 1, "subgraphs": ["sg00"], "note": [1e999]}')}]
    base_spec["validate"] = False
    model = tmp_path / "m.neff"
    model.write_bytes(assemble_spec(base_spec))
    for args in (["inspect", model], ["lower", "-q", model, "-o", tmp_path / "out"],
                 ["explain", model], ["schedule", model, "--rank", "0"]):
        assert one_line_error(invoke(*args)) == (
            f"{model}: member neff.json, field note[0]: invalid JSON: 1e999 is not a finite "
            f"number {OVER}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.neff"]


# --- topology files -------------------------------------------------------------------------

TOPO = '{"format": "nrtrewrite-topology/1", "platform": "trn2", %s}'


def _topology_file_refused(tmp_path, body: str, says: str, commands) -> None:
    """A topology file holding ``body`` is refused with ``says`` by load_topology and by each
    of ``commands`` (one line, the file named)."""
    path = tmp_path / "t.json"
    path.write_text(TOPO % body)
    with pytest.raises(ValidationError) as exc:
        load_topology(str(path), world=(0, 1), lnc_size=2)
    assert str(exc.value) == f"{path}: {says}"
    for cmd in commands:
        assert one_line_error(invoke(*cmd, "--topology", path)) == f"{path}: {says}"


@pytest.mark.parametrize("body, says", [
    ('"nodes": 1e999', f"field nodes: cannot read topology file: invalid JSON: 1e999 is not a "
                       f"finite number {OVER}"),
    ('"note": NaN', "field note: cannot read topology file: invalid JSON: NaN is not a finite "
                    "number"),
    ('"device": {"dies": -Infinity}', "field device.dies: cannot read topology file: invalid "
                                      "JSON: -Infinity is not a finite number"),
    # a ValueError and a RecursionError traceback before; a key twice was taken silently
    ('"nodes": ' + "1" * 5000, "field nodes: cannot read topology file: invalid JSON: an "
                               "integer of 5000 digits, more than 4300"),
    ('"note": {"a": [1, ' + "2" * 5000 + ']}, "note": 1',
     "field note.a[1]: cannot read topology file: invalid JSON: an integer of 5000 digits, "
     "more than 4300"),
    ('"note": ' + "[" * 100000 + "]" * 100000, "cannot read topology file: invalid JSON: "
                                               "nested too deeply"),
    ('"nodes": 1, "nodes": 2', "field nodes: cannot read topology file: invalid JSON: duplicate "
                               "key 'nodes'"),
])
def test_topology_files_refuse_numbers_that_are_not_finite(tmp_path, body, says):
    # explain guesses the lnc from the file first (a RecursionError traceback before)
    _topology_file_refused(tmp_path, body, says, (
        ["lower", "-q", FIX / "ar2.neff", "-o", tmp_path / "out"], ["explain", FIX / "ar2.neff"],
        ["explain", "--op", "allreduce", "--bytes", "1MiB", "--ranks", "2"]))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]


@pytest.mark.parametrize("body, says", [
    ('"note": {"a": 1, "a": 2}, "deep": ' + DEEP, "field note.a: cannot read topology file: "
                                                  "invalid JSON: duplicate key 'a'"),
    ('"note": 1, "note": ' + DEEP, "field note: cannot read topology file: invalid JSON: "
                                   "duplicate key 'note'"),
    ('"nodes": ' + "1" * 4301 + ', "note": ' + DEEP, "field nodes: cannot read topology file: "
                                                     f"invalid JSON: {LONG}"),
])
def test_a_topology_file_names_a_key_given_twice_before_deep_nesting(tmp_path, body, says):
    """A key given twice (an integer of too many digits) and nesting deeper than the JSON
    decoder recurses after it: the one-line error named no key path (the path's walk met the
    nesting), or said ``nested too deeply`` for the key holding the nesting."""
    _topology_file_refused(tmp_path, body, says, (
        ["lower", "-q", FIX / "ar2.neff", "-o", tmp_path / "out"],
        ["explain", "--op", "allreduce", "--bytes", "1MiB", "--ranks", "2"]))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]


# --- assemble specs -------------------------------------------------------------------------

@pytest.mark.parametrize("text, field, value", [
    ("header: {num_tpb: .inf}\nsubgraphs: []\n", "header.num_tpb", ".inf"),
    ("subgraphs:\n  - name: sg00\n    def_json: {note: [1, -.inf]}\n",
     "subgraphs[0].def_json.note[1]", "-.inf"),
    ("subgraphs:\n  - name: sg00\n    vars: [{name: a, size: .NaN}]\n", "subgraphs[0].vars[0].size",
     ".nan"),
    ("neff_json: {x: 1.0e+999}\n", "neff_json.x", ".inf"),
    # a JSON spec is read as JSON (and was as YAML until 2026-12-04: the same message); the
    # value as YAML writes it (JSON cannot)
    ('{"subgraphs": [{"name": "sg00", "vars": [{"name": "a", "size": -1.0e+999}]}]}',
     "subgraphs[0].vars[0].size", "-.inf"),
    ("extra_members: [{name: x.json, json: {.inf: 1}}]\n", "extra_members[0].json", ".inf"),
    # a key that is no string is written as JSON writes it (jsonin.joined_key), not as
    # Python's str() (True, None): ASSEMBLE.md names the spec's fields in the spec's words
    ("subgraphs: [{name: sg00, def_json: {x: {true: .nan}}}]\n",
     "subgraphs[0].def_json.x.true", ".nan"),
    ("subgraphs: [{name: sg00, def_json: {x: {null: [1, .inf]}}}]\n",
     "subgraphs[0].def_json.x.null[1]", ".inf"),
])
def test_assemble_specs_refuse_numbers_that_are_not_finite(tmp_path, text, field, value):
    with pytest.raises(ValidationError) as exc:
        parse_spec_text(text, source="s.yaml")
    assert str(exc.value) == (f"s.yaml: field {field}: {value} is not a finite number (NaN and "
                              "infinities are refused)")
    spec = tmp_path / "s.yaml"
    spec.write_text(text)
    assert one_line_error(invoke("assemble", spec, "-o", tmp_path / "m.neff")) == (
        f"{spec}: field {field}: {value} is not a finite number (NaN and infinities are refused)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


@pytest.mark.parametrize("text, digits, where", [
    ("header: {pkg_version: " + "9" * 5000 + "}\n", 5000, "line 1 column 23"),
    ("subgraphs:\n  - name: sg00\n    vars: [{name: a, size: -" + "1_2" * 3000 + "}]\n",
     6000, "line 3 column 28"),  # 4 + len("vars: [{name: a, size: ") + 1
    ('{"header": {"num_tpb": ' + "7" * 4301 + "}}", 4301, "line 1 column 24"),
])
def test_assemble_specs_refuse_integers_of_too_many_digits(tmp_path, text, digits, where):
    """(Found by a second exploratory tester: PyYAML let CPython's ValueError out, an
    internal error, exit 70.)"""
    why = f"invalid spec: an integer of {digits} digits, more than 4300 ({where})"
    with pytest.raises(ParseError) as exc:
        parse_spec_text(text, source="s.yaml")
    assert str(exc.value) == f"s.yaml: {why}"
    spec = tmp_path / "s.yaml"
    spec.write_text(text)
    assert one_line_error(invoke("assemble", spec, "-o", tmp_path / "m.neff")) == f"{spec}: {why}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


def test_assemble_specs_keep_integers_of_up_to_4300_digits():
    doc = parse_spec_text("a: " + "9" * 4300 + "\nb: -" + "1_2" * 2150 + "\nc: 0x" + "f" * 5000)
    assert doc == {"a": 10 ** 4300 - 1, "b": -int("12" * 2150), "c": 16 ** 5000 - 1}


def test_a_spec_whose_aliases_expand_past_the_limit_is_refused_at_once(tmp_path):
    """Eight lists of ten aliases each (found by an exploratory tester: 500 bytes of YAML
    took 14 GB and 86 s before the member's size limit refused them)."""
    levels = "abcdefgh"
    lines = ["subgraphs:", "  - name: sg00", "    def_json:",
             '      a: &a ["x","x","x","x","x","x","x","x","x","x"]']
    lines += [f"      {b}: &{b} [{','.join(['*' + a] * 10)}]"
              for a, b in zip(levels, levels[1:])]
    spec = tmp_path / "bomb.yaml"
    spec.write_text("\n".join(lines) + "\n")
    # h: 1 + 10 g; g: 1 + 10 f, ...; a: 11: g = 11,111,111 > 2^22, f = 1,111,111 below
    why = (f"{spec}: field subgraphs[0].def_json.h[0]: the spec expands to more than 4194304 "
           "values once its YAML aliases are resolved (each alias repeats what its anchor "
           "names)")
    assert one_line_error(invoke("assemble", spec, "-o", tmp_path / "m.neff")) == why
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bomb.yaml"]


def test_the_expansion_limit_counts_every_value_where_it_stands(monkeypatch):
    from nrtrewrite.neff import assembler
    monkeypatch.setattr(assembler, "MAX_SPEC_VALUES", 100)
    # the root 1 + its 2 keys + x (1 + 4) + y (1 + m x): 9 + 5 m values
    text = "x: &x [1, 1, 1, 1]\ny: [{}]\n"
    assert parse_spec_text(text.format(", ".join(["*x"] * 18)))  # 99 values
    with pytest.raises(ValidationError) as exc:
        parse_spec_text(text.format(", ".join(["*x"] * 19)), source="s.yaml")  # 104
    assert exc.value.where.field is None  # (no one key holds more than 100 alone)
    with pytest.raises(ValidationError) as exc:
        parse_spec_text(text.format(", ".join(["*x"] * 20)).replace("x: &x", "z: &x"),
                        source="s.yaml")  # 109: y alone 101
    assert exc.value.where.field == "y"


def test_a_spec_read_as_json_is_not_counted_by_the_expansion_limit(monkeypatch):
    """docs/ASSEMBLE.md: MAX_SPEC_VALUES bounds what YAML aliases expand to; a spec read as
    JSON has none, its values bounded by its text (MAX_SPEC_FILE_BYTES), and is never
    counted.  The same text read as YAML (a comment after it: not JSON) is: the root 1, its
    key 1, the list 1 and its 200 values, 203."""
    from nrtrewrite.neff import assembler
    monkeypatch.setattr(assembler, "MAX_SPEC_VALUES", 100)
    text = '{"a": [' + ", ".join(["0"] * 200) + "]}"
    assert len(parse_spec_text(text)["a"]) == 200
    with pytest.raises(ValidationError) as exc:
        parse_spec_text(text + " # YAML", source="s.yaml")
    assert str(exc.value) == ("s.yaml: field a: the spec expands to more than 100 values once "
                              "its YAML aliases are resolved (each alias repeats what its "
                              "anchor names)")


def test_a_spec_nested_too_deeply_is_a_spec_error(tmp_path):
    spec = tmp_path / "deep.yaml"
    spec.write_text("a: " + "[" * 5000 + "]" * 5000 + "\n")
    assert one_line_error(invoke("assemble", spec, "-o", tmp_path / "m.neff")) == (
        f"{spec}: invalid spec: nested too deeply")


def test_assemble_specs_keep_recursive_aliases_and_finite_floats():
    doc = parse_spec_text("a: &x [1.5, *x]\nb: 1e999\n")  # 1e999: a YAML 1.1 string
    assert doc["a"][0] == 1.5 and doc["a"][1] is doc["a"] and doc["b"] == "1e999"


# --- the output manifests -------------------------------------------------------------------

@pytest.fixture(scope="module")
def lowered(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("lowered") / "A"
    assert invoke("lower", "-q", FIX / "ar2.neff", "-o", out).exit_code == 0
    return out


def tampered(lowered: Path, tmp_path: Path, rel: str, insert: str) -> Path:
    b = tmp_path / "B"
    shutil.copytree(lowered, b)
    p = b / rel
    p.write_text(p.read_text().replace("{", "{\n " + insert + ",", 1))
    return b


def test_top_manifest_with_an_infinite_number(lowered, tmp_path):
    b = tampered(lowered, tmp_path, "manifest.json", '"extra": 1e999')
    man = b / "manifest.json"
    says = f"{man}: field extra: invalid JSON: 1e999 is not a finite number {OVER}"
    assert not is_our_output(b)
    assert one_line_error(invoke("diff", lowered, b)) == says
    assert one_line_error(invoke("diff", b, lowered)) == says
    assert one_line_error(invoke("simulate", b, "--ignore-checksums")) == (
        f"{man}: field extra: cannot read manifest.json: invalid JSON: 1e999 is not a finite "
        f"number {OVER}")
    # never replaced: it is not known to be an output of ours
    res = invoke("lower", "-q", FIX / "ar2.neff", "-o", b, "--force")
    assert "is not an nrtrewrite output" in one_line_error(res)


def test_rank_manifest_with_an_infinite_number(lowered, tmp_path):
    b = tampered(lowered, tmp_path, "rank-0001/manifest.json", '"extra": [NaN]')
    res = invoke("diff", lowered, b)
    assert res.exit_code == 1 and res.stdout.splitlines()[0] == (
        "rank-0001/manifest.json damaged in B: field extra[0]: invalid JSON: NaN is not a "
        "finite number")
    man = b / "rank-0001" / "manifest.json"
    assert one_line_error(invoke("diff", b, lowered)) == (
        f"{man}: field extra[0]: invalid JSON: NaN is not a finite number")
    res = invoke("simulate", b, "--ignore-checksums", "--json")
    assert res.exit_code == 2  # (a manifest that cannot be read: the simulation cannot be done)
    assert (f"{man}: field extra[0]: cannot read manifest.json: invalid JSON: NaN is not a "
            "finite number") in res.stdout
    renamed = b / "renamed"
    shutil.copytree(b / "rank-0001", renamed)
    assert folder_rank(renamed) is None  # its rank cannot be read from it


def test_a_manifest_integer_of_too_many_digits_before_deep_nesting_is_named(lowered, tmp_path):
    """An integer of more digits than CPython reads, then nesting deeper than the JSON
    decoder recurses: ``simulate`` and ``diff`` named no key path (the path's walk met the
    nesting)."""
    b = tampered(lowered, tmp_path, "rank-0001/manifest.json",
                 '"extra": [0, ' + "9" * 5000 + '], "deep": ' + DEEP)
    man = b / "rank-0001" / "manifest.json"
    why = "invalid JSON: an integer of 5000 digits, more than 4300"
    res = invoke("simulate", b, "--ignore-checksums", "--json")
    assert res.exit_code == 2
    assert f"{man}: field extra[1]: cannot read manifest.json: {why}" in res.stdout
    assert one_line_error(invoke("diff", b, lowered)) == f"{man}: field extra[1]: {why}"


BOM = "a byte order mark (U+FEFF) before the JSON text"


def test_json_text_is_utf8_without_a_byte_order_mark():
    """Bytes are read as UTF-8, as str text is: ``json.loads`` of bytes took a UTF-8 BOM and
    UTF-16 / -32 (found by an exploratory tester: diff read a manifest simulate refused)."""
    for text in (b"\xef\xbb\xbf{}", "\ufeff{}", bytearray(b"\xef\xbb\xbf[1]")):
        with pytest.raises(jsonin.JsonRule) as exc:
            jsonin.loads(text, strict_objects=False)
        assert exc.value.why == BOM and exc.value.path is None
    for enc in ("utf-16", "utf-16-le", "utf-32"):  # (not UTF-8, or NULs between the chars)
        with pytest.raises(ValueError):
            jsonin.loads('{"a": 1}'.encode(enc), strict_objects=False)
    assert jsonin.loads('{"é": 1}'.encode()) == {"é": 1}
    assert jsonin.loads(memoryview(b"[2]")) == [2]


@pytest.mark.parametrize("rel", ["rank-0001/manifest.json", "manifest.json"])
def test_a_manifest_with_a_byte_order_mark(lowered, tmp_path, rel):
    b = tmp_path / "B"
    shutil.copytree(lowered, b)
    man = b / rel
    man.write_bytes(b"\xef\xbb\xbf" + man.read_bytes())
    assert one_line_error(invoke("diff", b, lowered)) == f"{man}: invalid JSON: {BOM}"
    res = invoke("diff", lowered, b)
    if rel == "manifest.json":  # B's top manifest is what tells an output: an error
        assert one_line_error(res) == f"{man}: invalid JSON: {BOM}"
    else:
        assert res.exit_code == 1 and res.stdout.splitlines()[0] == (
            f"{rel} damaged in B: invalid JSON: {BOM}")
    res = invoke("simulate", b, "--ignore-checksums")
    assert res.exit_code == 2
    assert f"{man}: cannot read manifest.json: invalid JSON: {BOM}" in (
        res.stdout.replace("\n", "") + res.stderr)


@pytest.mark.parametrize("doc, found", [
    ({"a": {"b\ud800": 1}}, ("a", "b\ud800", 1, True)),  # a key: the object's path
    ({"a": ["x", "\udc80y"]}, ("a[1]", "\udc80y", 0, False)),  # a value: its own path
    ({"\ud800": 0}, ("", "\ud800", 0, True)),  # a top-level key
    ({"a": "x\ud800", "b": ["\udc80"]}, ("a", "x\ud800", 1, False)),  # the first
])
def test_lone_surrogate_tells_a_key_from_a_value(doc, found):
    """jsonin.lone_surrogate returns, for the first such string in document order, (path,
    string, index of the surrogate, is it a key):
    docs/TOPOLOGY.md names the key path of the value, of the object for a key, and the
    reader's message says "a key" for a key (topology/model._check_text)."""
    assert jsonin.lone_surrogate(doc) == found


def test_without_exact_floats_a_number_is_a_plain_float():
    """Only ``exact_floats`` keeps a number's text (jsonin's docstring): otherwise a JSON
    number with a fraction or an exponent is a float as ``json.loads`` gives it, equal to the
    int of the same value."""
    for kw in ({}, {"strict_objects": False}):
        doc = jsonin.loads('[2.0, 1e0, 1.50000000000000001]', **kw)
        assert [type(v) for v in doc] == [float, float, float]
        assert doc == [2, 1, 1.5] == json.loads('[2.0, 1e0, 1.50000000000000001]')


# --- key paths of keys that are not plain names ---------------------------------------------

@pytest.mark.parametrize("text, why, path", [
    # a key holding a dot, a bracket, a space or nothing is quoted as a JSON string in
    # brackets, as diff's key paths (CLI.md: files["cce.bin"].sha256); it was a.b, read as the
    # key b of the key a
    ('{"a.b": {"c": 1, "c": 2}}', "duplicate key 'c'", '["a.b"].c'),
    ('{"x": {"a.b": 1e999}}', f"1e999 is not a finite number {OVER}", 'x["a.b"]'),
    ('{"x": [{"y[0]": NaN}]}', "NaN is not a finite number", 'x[0]["y[0]"]'),
    ('{"x": {"": {"a b": Infinity}}}', "Infinity is not a finite number", 'x[""]["a b"]'),
    ('{"q\\"": {"n": ' + "1" * 4301 + "}}", "an integer of 4301 digits, more than 4300",
     '["q\\""].n'),
    # a plain name (letters, digits, _ and -) is not quoted
    ('{"sg-00_x": {"caf\u00e9": NaN}}', "NaN is not a finite number", "sg-00_x.caf\u00e9"),
])
def test_a_key_that_is_not_a_plain_name_is_quoted_in_the_key_path(text, why, path):
    with pytest.raises(jsonin.JsonRule) as exc:
        jsonin.loads(text)
    assert (exc.value.why, exc.value.path) == (why, path)


def test_a_neff_member_key_with_a_dot_is_quoted_in_the_readers_key_path(base_spec):
    base_spec["extra_members"] = [{"name": "neff.json", "text": (
        '{"neff_like_version": 1, "subgraphs": ["sg00"], "n.b": {"x": NaN}}')}]
    assert str(error_of(base_spec)) == ('m.neff: member neff.json, field ["n.b"].x: invalid '
                                        "JSON: NaN is not a finite number")


def test_top_only_keeps_the_top_level_object_and_reads_the_rest_by_the_same_rules():
    """``loads(top_only=True)``: the top-level object's members, each object inside it (in a
    list too) ``INNER_OBJECT``; a document that is not an object keeps its own shape.
    Every text the whole read refuses it refuses with the same words and key path."""
    I = jsonin.INNER_OBJECT
    text = '{"a": {"b": [1, {"c": 2}]}, "ranks": [0, 3, 7], "l": [1, {"d": 2}], "s": "x"}'
    assert jsonin.loads(text, strict_objects=False, top_only=True) == {
        "a": I, "ranks": [0, 3, 7], "l": [1, I], "s": "x"}
    assert jsonin.loads('[{"a": 1}, 2, null]', top_only=True) == [I, 2, None]
    assert jsonin.loads("null", top_only=True) is None
    assert jsonin.loads('{"k": 1, "k": 2}', strict_objects=False, top_only=True) == {"k": 2}
    bad = ['{"a": {"b": [1, NaN]}}', '{"a": {"b": {"c": 1e999}}, "z": 1}', '{"a": {"b": 1}',
           '\ufeff{"a": 1}', '{"a": {"b": ' + "9" * 5000 + "}}", '{"a": {"k": 1, "k": 2}}',
           '{"a": ' + "[" * 100000 + "]" * 100000 + "}", '{"a": {"b": -Infinity}}']


    def outcome(t, **kw):
        try:
            jsonin.loads(t, **kw)
        except (ValueError, RecursionError) as exc:
            return type(exc), str(exc), getattr(exc, "path", None)
        return "read"
    for t in bad:
        for kw in ({"strict_objects": False}, {}):
            assert outcome(t, top_only=True, **kw) == outcome(t, **kw), (t[:40], kw)
    assert outcome(bad[5], strict_objects=False, top_only=True) == "read"  # (no unique rule)
    assert outcome(bad[5], top_only=True)[1:] == ("duplicate key 'k'", "a.k")
    with pytest.raises(jsonin.JsonRule) as err:
        jsonin.loads('{"a": {"b": [1, NaN]}}', strict_objects=False, top_only=True)
    assert err.value.path == "a.b[1]"
