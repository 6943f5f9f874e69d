"""``explain --json`` written a trigger record at a time (fixer 57l, review 57j: the document
whole took about 7 times its size in memory): the bytes of ``json.dumps(doc, indent=2)`` and
a newline, as before (docs/CLI.md "explain --json").
"""

from __future__ import annotations

import json

import pytest

from nrtrewrite.cli.explain import _json_pieces

from test_simulate import FIX, cli


def _doc(triggers):
    # the keys in explain's order, values of every JSON kind, non-ASCII text and a string
    # with a newline (escaped by json.dumps, so no line of it is indented)
    return {"model": "m\u00e9/\u6743.neff",
            "topology": {"name": "trn2", "nodes": 2, "links": [[0, 1, 2], []]},
            "override": None, "override_source": None, "rank": 3,
            "policy": {"lowerable": ["RING"], "precedence": []},
            "model_refusal": "a\nb \"q\"", "refused_not_shown": [],
            "triggers": triggers, "skipped_triggers": [1, 2]}


@pytest.mark.parametrize("triggers", [
    [],
    [{"trigger": 0, "group": [0, 1], "lowered": {"algorithm": "RING", "legs": []},
      "x": 1.5, "ok": True, "none": None}],
    [{"trigger": k, "candidates": [{"legal": k % 2 == 0, "reason": "r\u00e9"}], "mesh": {}}
     for k in range(3)],
])
def test_pieces_join_to_json_dumps_indent_2(triggers):
    doc = _doc(triggers)
    pieces = list(_json_pieces(doc, "triggers"))
    assert "".join(pieces) == json.dumps(doc, indent=2) + "\n"
    # one piece per trigger record (plus the head, keys and the closing), not one document
    assert sum(p.lstrip(",").startswith(("[\n    {", "\n    {")) for p in pieces) \
        == len(triggers)


@pytest.mark.parametrize("args", [
    ["ar2.neff"], ["groups.neff", "--rank", "5"], ["groups.neff", "--rank", "5", "--trigger", "0"],
    ["mix8.neff", "--algo", "ring"],
])
def test_explain_json_is_json_dumps_indent_2_of_its_document(args):
    res = cli("explain", FIX / args[0], *args[1:], "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)  # (dict keeps the keys' order)
    assert list(doc)[-2:] == ["triggers", "skipped_triggers"]
    assert res.stdout == json.dumps(doc, indent=2) + "\n"


@pytest.mark.parametrize("k", [1, 3])
def test_an_error_while_the_pieces_are_made_is_the_error_document_alone(k, monkeypatch):
    """Review 57s: the pieces were written as they were made, so a MemoryError from the
    k-th trigger record's ``json.dumps`` (a big record; the command's out-of-memory line,
    exit 71) came after a cut document: stdout no JSON.  Every piece is made before the
    first is written: stdout is the error document alone (CLI.md "Errors": on an error
    stdout is still one document)."""
    import types
    import nrtrewrite.cli.explain as ex
    real, seen = json.dumps, []

    def dumps(obj, *a, **kw):
        if isinstance(obj, dict) and "trigger" in obj and "lowered" in obj:  # a record
            seen.append(obj)
            if len(seen) == k:
                raise MemoryError
        return real(obj, *a, **kw)

    fake = types.SimpleNamespace(**{n: getattr(json, n) for n in dir(json)
                                    if not n.startswith("__")})
    fake.dumps = dumps
    monkeypatch.setattr(ex, "json", fake)
    res = cli("explain", "--json", FIX / "mix8.neff")
    assert len(seen) == k and res.exit_code == 71, (len(seen), res.output)
    doc = json.loads(res.stdout)  # one document, nothing before it
    assert doc["triggers"] == [] and "memory" in doc["error"], doc
