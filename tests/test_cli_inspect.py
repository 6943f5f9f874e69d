"""``nrtrewrite inspect`` and ``nrtrewrite assemble`` through click's CliRunner."""

from __future__ import annotations

import json

from click.testing import CliRunner

from nrtrewrite.cli import main
from nrtrewrite.neff.assembler import assemble_spec


def run(*args):
    return CliRunner().invoke(main, list(args))


def test_inspect_json_and_table(tmp_path, base_spec):
    path = tmp_path / "m.neff"
    path.write_bytes(assemble_spec(base_spec))
    res = run("inspect", str(path), "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["format"] == "nrtrewrite.inspect/1"
    assert [t["ctype"] for t in doc["triggers"]] == ["ALL_REDUCE"]
    res = run("inspect", str(path))
    assert res.exit_code == 0 and "ALL_REDUCE" in res.stdout and res.stderr == ""
