"""An error stays one readable line: a reason longer than ``MAX_WHY_CHARS`` (1000) keeps its
start and end and says how long it was (a value quoted in full - a list of 200,000 numbers
where an integer belongs - made a 1.5 MB line)."""

from __future__ import annotations

from click.testing import CliRunner

from conftest import unvalidated_spec
from nrtrewrite.cli import main
from nrtrewrite.errors import MAX_WHY_CHARS, ValidationError


def test_a_long_reason_is_cut_in_the_middle():
    why = "A" * 5000 + "Z"
    err = ValidationError(why, file="m.neff", field="x")
    assert err.line().startswith("m.neff: field x: " + "A" * 700)
    assert "(5001 characters in all)" in err.line() and err.line().endswith("A" * 199 + "Z")
    assert len(err.why) <= MAX_WHY_CHARS + 60
    short = ValidationError("short reason")
    assert short.line() == "short reason"


def test_assemble_of_a_huge_wrong_value_is_one_short_line(tmp_path):
    import yaml

    def mut(s):
        s["subgraphs"][0]["vars"][0]["size"] = list(range(200_000))
    spec = tmp_path / "big.yaml"
    spec.write_text(yaml.safe_dump(unvalidated_spec(mut)))
    res = CliRunner().invoke(main, ["assemble", str(spec), "-o", str(tmp_path / "m.neff")])
    assert res.exit_code == 2
    line, = res.stderr.splitlines()
    assert "field subgraphs[0].vars[0].size: must be an integer, got [0, 1, 2" in line
    assert "characters in all" in line and len(line) < 1200, len(line)
