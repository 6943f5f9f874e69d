"""A spec read as YAML is read by libyaml (PyYAML's C loader) where it makes the values
PyYAML's pure-Python loader makes, and by the pure-Python loader otherwise and on any error,
so that every refusal is worded, line and column, as before (docs/ASSEMBLE.md: a spec of
65,535 extra_members lines took 22 s to read with the pure-Python loader alone)."""

from __future__ import annotations

import datetime
import math

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nrtrewrite.neff.assembler as asm
from nrtrewrite.errors import ParseError
from nrtrewrite.neff.assembler import parse_spec_text

from conftest import FIXTURES

libyaml = pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML built without libyaml")


def _no_python_scanner(monkeypatch) -> None:
    """Make PyYAML's pure-Python scanner fail if it is asked for a token."""
    def refuse(self):
        raise AssertionError("the pure-Python YAML scanner was used")
    monkeypatch.setattr(yaml.scanner.Scanner, "fetch_more_tokens", refuse)


def _python_only(text: str, monkeypatch) -> dict:
    """``text`` read as it was before libyaml was used: by the pure-Python loader alone."""
    with monkeypatch.context() as patched:
        patched.setattr(asm, "_CSafeLoader", None)
        return parse_spec_text(text, source="s.yaml")


def _shape(val, seen=None):
    """``val`` with each value's type, and each list or mapping met again named by when it was
    first met (so that two readings agree on the types and on what an alias shares)."""
    seen = {} if seen is None else seen
    if isinstance(val, (list, dict)):
        if id(val) in seen:
            return ("again", seen[id(val)])
        seen[id(val)] = len(seen)
        if isinstance(val, list):
            return ("list", [_shape(item, seen) for item in val])
        return ("map", [(_shape(k, seen), _shape(v, seen)) for k, v in val.items()])
    if isinstance(val, float) and math.isnan(val):
        return ("float", "nan")
    return (type(val).__name__, repr(val))


@libyaml
def test_a_long_ascii_spec_is_read_without_the_pure_python_scanner(monkeypatch):
    """2,000 extra_members lines, flow and block, an anchor and an alias: read with PyYAML's
    pure-Python scanner made to fail (it read every spec, some 170 microseconds a line); the
    values, their types and what the alias shares, and that the text uses an alias, are what
    the pure-Python loader makes of the text."""
    lines = ["validate: false", "subgraphs: [{name: sg00, vars: [], replica_groups: [[0, 1]], "
             "engines: {sp: [nop]}}]", "extra_members:", "  - &m {name: m, text: 'it''s'}"]
    for i in range(1000):
        lines += [f"  - {{name: x/{i}, text: \"a\\tb {i}\", json: [1, 0x1F, 1.5, yes, ~]}}",
                  f"  - name: y/{i}", f"    hex: '{i:04x}'"]
    lines.append("  - *m")
    text = "\n".join(lines) + "\n"
    want = _python_only(text, monkeypatch)
    _no_python_scanner(monkeypatch)
    spec = parse_spec_text(text, source="s.yaml")
    assert type(spec) is type(want) is asm._AliasedSpec
    assert _shape(spec) == _shape(want)
    assert spec["extra_members"][1] == {"name": "x/0", "text": "a\tb 0",
                                        "json": [1, 31, 1.5, True, None]}
    assert spec["extra_members"][-1] is spec["extra_members"][0]


_DEEP = "a: " + "[" * 2000 + "]" * 2000 + "\n"


@libyaml
@pytest.mark.parametrize("text, why", [
    ("a: 1\na: 2\n", "duplicate key 'a' (line 2 column 1)"),
    ("a: [1, 2}\n", "expected ',' or ']', but got '}' (line 1 column 9)"),
    ("a: *x\n", "found undefined alias 'x' (line 1 column 4)"),
    ("a: &x 1\nb: &x 2\n", "second occurrence (line 2 column 4)"),
    ("a: 'x\n", "found unexpected end of stream (line 2 column 1)"),
    ("a:\n  - b\n c: 1\n",
     "expected <block end>, but found '<block mapping start>' (line 3 column 2)"),
    ("a: 1\n---\nb: 2\n", "but found another document (line 2 column 1)"),
    ("a: " + "1" * 5000 + "\n", "an integer of 5000 digits, more than 4300 (line 1 column 4)"),
    ("a: 2001-02-30\n", "'2001-02-30' is not a date (YAML 1.1 reads this form as a date: "
                        "quote it for a string) (line 1 column 4)"),
    ("b: &x {<<: *x, c: 1}\n", "a mapping merges itself (a recursive YAML alias) (line 1 "
                               "column 4)"),
    ("a: &n {b: *n}\n", "a mapping contains itself (a recursive YAML alias) (line 1 column 4)"),
    ("[a, b]: 1\n", "a list or a mapping as a mapping key (found unhashable key) (line 1 "
                    "column 1)"),
    (_DEEP, "nested too deeply"),
], ids=["duplicate-key", "flow-end", "undefined-alias", "duplicate-anchor", "open-quote",
        "indentation", "two-documents", "long-int", "bad-date", "merge-itself",
        "recursive-mapping", "list-key", "deep"])
def test_both_loaders_word_a_bad_spec_alike(monkeypatch, text, why):
    """A bad spec libyaml is given (printable ASCII, none of the characters it is not given)
    is refused in PyYAML's pure-Python loader's words, line and column (libyaml's differ:
    ``did not find expected ',' or ']'``), as it was before libyaml was used: an error of
    the scanner, the parser, the composer, the spec's constructor, and a text nested past
    libyaml's limit (1000 levels) and Python's recursion."""
    assert asm._LIBYAML_TEXT.fullmatch(text) and not asm._LIBYAML_AVOIDS.search(text)
    with pytest.raises(ParseError) as exc:
        parse_spec_text(text, source="s.yaml")
    assert str(exc.value) == f"s.yaml: invalid spec: {why}"
    with pytest.raises(ParseError) as alone:
        _python_only(text, monkeypatch)
    assert str(alone.value) == str(exc.value)


_TEXTS = [
    "a: &x {b: [1, 2, {c: d}]}\ne: *x\nf: {<<: *x, g: 'h''i', j: \"k\\tl\\u00e9\\x41\"}\n",
    "- a\n- - b\n  - c\n-\n  d: e\n  f:\n",
    "k: 'multi\n  line'\nm: \"q\n\n  r\"\nn: plain\n  continued\n# a comment\n",
    "[1, 2.5, 0x10, 017, 0b11, 1:20, 1_000, .inf, -.nan, 1.0e+999, yes, No, on, ~, null, '',"
    " 2001-12-14, 2001-12-14 21:59:43.10, =, -, a b]\n",
    "{a: [b, c], d: {e: f}, 'g h': \"i\", 1: 2, 1.5: x, true: y, null: z, 2001-12-14: d}\n",
    "a: " + "[" * 150 + "]" * 150 + "\n",  # (past the depth libyaml is given: PyYAML's reading)
]


@libyaml
@pytest.mark.parametrize("text", _TEXTS + [p.read_text() for p in sorted(
    FIXTURES.glob("*.yaml"))], ids=lambda text: text[:12])
def test_both_loaders_make_the_same_values(monkeypatch, text):
    """Anchors, aliases and a merge, nested block sequences, quoted and multi-line scalars,
    every YAML 1.1 number, boolean, null and date form, keys of each kind, a text nested 150
    deep (read by the pure-Python loader: it nests past the 100 levels libyaml is given), and
    every fixture spec: the same values, types, shared lists and mappings and spec class as
    the pure-Python loader alone makes; a non-finite number is still refused at its key
    path."""
    try:
        want = ("ok", _shape(_python_only(text, monkeypatch)))
    except Exception as err:  # (a non-finite number: a ValidationError at its key path)
        want = ("error", str(err))
    try:
        spec = parse_spec_text(text, source="s.yaml")
        got = ("ok", _shape(spec))
    except Exception as err:
        got = ("error", str(err))
    assert got == want


_SCALARS = (st.none() | st.booleans() | st.integers(-10**6, 10**6)
            | st.floats(allow_nan=False, allow_infinity=False)
            | st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=8)
            | st.dates(min_value=datetime.date(1900, 1, 1)))
_VALUES = st.recursive(_SCALARS, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(
    st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=6), kids, max_size=4),
    max_leaves=20)


@libyaml
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(value=_VALUES, flow=st.sampled_from([None, True, False]), width=st.integers(20, 80))
def test_both_loaders_read_what_yaml_writes_alike(value, flow, width):
    """Values written by PyYAML's writer in flow, block and mixed styles and line widths
    (which fold long strings over lines): libyaml's reading, where it is given the text, is
    the pure-Python loader's, value for value and type for type."""
    text = yaml.safe_dump({"v": value}, default_flow_style=flow, width=width)
    got = asm._load_with_libyaml(text)
    if got is None:
        return
    python = asm._load_with_python(text, "s.yaml")
    assert (_shape(got[0]), got[1], got[2]) == (_shape(python[0]), python[1], python[2])


@libyaml
def test_a_spec_with_non_ascii_text_cr_lf_and_tabs_is_read_without_the_pure_python_scanner(
        monkeypatch):
    """Non-ASCII names and comments, CR LF line ends (and a lone CR) and tabs in quoted
    scalars and comments, where PyYAML takes them (until 2026-12-07 any of them sent the
    whole spec to the pure-Python scanner: a 10,000-var spec took 1.6 s to load, 0.45 s in
    ASCII).  The values are YAML's reading, written out here: a CR LF or lone CR is one line
    break, a line break inside a quoted scalar folds to a space, a tab in a quoted scalar is
    kept."""
    text = ("header: {name: \"权重\tmodel\"}  # 名前\tcomment\r\n"
            "subgraphs:\r\n"
            "  - name: sg00  # a\ttab in a comment\r"
            "    vars:\r\n"
            "      - {name: grad_权重, type: input, size: 64}\r\n"
            "      - {name: 'é\tx\r\n         y', type: output, size: 64}\r\n")
    want = {"header": {"name": "权重\tmodel"},
            "subgraphs": [{"name": "sg00", "vars": [
                {"name": "grad_权重", "type": "input", "size": 64},
                {"name": "é\tx y", "type": "output", "size": 64}]}]}
    assert _python_only(text, monkeypatch) == want
    _no_python_scanner(monkeypatch)
    spec = parse_spec_text(text, source="s.yaml")
    assert spec == want and type(spec) is asm._TextSpec


@libyaml
@pytest.mark.parametrize("text", [
    "a:\tb\n", "a: b\t# c\n", "[a,\tb]\n", "a: b\tc\n", "a: &x\t'y'\n", "a: 'b'\t\n",
    "- a\n-\tb\n", "a: b # c\n\td: e\n", "a: \"b#\"\tc\n", "a: b#c\td\n",
])
def test_a_tab_pyyaml_refuses_is_refused_in_its_words_where_libyaml_takes_it(monkeypatch, text):
    """A tab between tokens, before a comment, inside a plain scalar or after an anchor: libyaml
    takes it (``{'a': 'b'}`` of ``a:\\tb``), PyYAML refuses it, and so does the spec, in the
    pure-Python loader's words, line and column."""
    assert asm._load_with_libyaml(text) is None
    with pytest.raises(ParseError) as exc:
        parse_spec_text(text, source="s.yaml")
    assert "found character '\\t' that cannot start any token" in str(exc.value)
    with pytest.raises(ParseError) as alone:
        _python_only(text, monkeypatch)
    assert str(alone.value) == str(exc.value)


@libyaml
@pytest.mark.parametrize("tail, why", [
    ("  k: 1\n  k: 2\n", "duplicate key 'k' (line 2003 column 3)"),
    ("  d: 2001-02-30\n", "'2001-02-30' is not a date (YAML 1.1 reads this form as a date: "
                          "quote it for a string) (line 2002 column 6)"),
    ("  m: {<<: [1]}\n", "expected a mapping or list of mappings for merging, but found scalar "
                         "(line 2002 column 12)"),
], ids=["duplicate-key", "bad-date", "merge-scalar"])
def test_a_spec_the_constructor_refuses_is_read_once(monkeypatch, tail, why):
    """2,000 lines libyaml reads, then a key the spec's constructor refuses: refused from
    libyaml's reading, without the pure-Python scanner (until 2026-12-07 such a text was read
    a second time by the pure-Python loader for its message: +30 % on 20,000 lines), in its
    words, line and column (counted by hand: the 2,000 lines, ``last:``, then the tail)."""
    text = "".join(f"v{i}: [{i}, x]\n" for i in range(2000)) + "last:\n" + tail
    _no_python_scanner(monkeypatch)
    with pytest.raises(ParseError) as exc:
        parse_spec_text(text, source="s.yaml")
    assert str(exc.value) == f"s.yaml: invalid spec: {why}"


@libyaml
def test_a_constructor_refusal_at_an_empty_scalar_keeps_pyyamls_column():
    """libyaml places an empty plain scalar (``{<<: , a: 1}``) at the next token, column 9;
    PyYAML right after the ``:``, column 8 (counted by hand): a refusal there is worded from
    the pure-Python loader's reading, as before."""
    text = "x: {<<: , a: 1}\n"
    assert asm._CSafeLoader(text).get_single_node().value[0][1].value[0][1].start_mark.column == 8
    with pytest.raises(ParseError) as exc:
        parse_spec_text(text, source="s.yaml")
    assert str(exc.value) == ("s.yaml: invalid spec: expected a mapping or list of mappings for "
                              "merging, but found scalar (line 1 column 8)")
