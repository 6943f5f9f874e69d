"""What `nrtrewrite lower` prints on success: one row per trigger, or grouped for big models."""

from __future__ import annotations

import io
from pathlib import Path

from click.testing import CliRunner
from rich.console import Console

from nrtrewrite.cli import main
from nrtrewrite.cli.lower import SUMMARY_TRIGGER_ROWS, summary_table
from nrtrewrite.lower import LowerOptions, plan_lowering
from nrtrewrite.neff.assembler import assemble_spec
from nrtrewrite.neff.reader import read_model_bytes


def _model(kinds: list[tuple[str, str, int]]) -> bytes:
    """An 8-rank model with one collective per (kind, dtype, elements)."""
    body = []
    for kind, dtype, elems in kinds:
        t = {"dtype": dtype, "src": "x_in", "dst": "x_out", "num_elements": elems}
        if kind != "all_gather":
            t["op"] = "add"
        body.append({kind: t})
    spec = {"header": {"pkg_version": 2, "name": "summary", "lnc_size": 2},
            "subgraphs": [{"name": "sg00",
                           "vars": [{"name": "x_in", "type": "input", "size": 1 << 20},
                                    {"name": "x_out", "type": "output", "size": 1 << 20}],
                           "replica_groups": ["0..7"], "engines": {"sp": body}}]}
    return assemble_spec(spec, source="summary")


def _render(table) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(table)
    return console.export_text()


def test_many_triggers_are_grouped_by_op_dtype_and_algorithm():
    # 40 all-reduces bf16 of 8 .. 8 + 39*8 elements, 30 all-gathers fp8 of 16 elements each
    kinds = ([("all_reduce", "bf16", 8 + 8 * i) for i in range(40)]
             + [("all_gather", "fp8_e4", 16)] * 30)
    assert len(kinds) > SUMMARY_TRIGGER_ROWS
    plan = plan_lowering(read_model_bytes(_model(kinds), path="m.neff"),
                         LowerOptions(algo="ring"))
    text = _render(summary_table(plan, "title"))
    rows = [line.split() for line in text.splitlines() if "RING" in line]
    cells = [[c for c in row if c not in "│┃"] for row in rows]
    assert [c[:5] for c in cells] == [["ALLGATHER", "FP8_E4", "RING", "30", "16"],
                                      ["ALLREDUCE", "BF16", "RING", "40", "8..320"]]
    assert "70 triggers in 2 rows" in text


def test_one_row_of_many_triggers_is_one_row():
    kinds = [("all_reduce", "bf16", 8 + 8 * i) for i in range(SUMMARY_TRIGGER_ROWS + 1)]
    plan = plan_lowering(read_model_bytes(_model(kinds), path="m.neff"),
                         LowerOptions(algo="ring"))
    assert f"{len(kinds)} triggers in 1 row;" in _render(summary_table(plan, "title"))


def test_few_triggers_get_one_row_each_and_names_are_not_cut_when_piped(tmp_path):
    path = tmp_path / "m.neff"
    path.write_bytes(_model([("reduce_scatter", "bf16", 64), ("all_gather", "bf16", 8)]))
    res = CliRunner().invoke(main, ["lower", str(path), "-o", str(tmp_path / "o"),
                                    "--algo", "ring", "-j", "1"])
    assert res.exit_code == 0, res.output
    assert "REDUCE_SCATTER" in res.output and "ALLGATHER" in res.output
    assert "…" not in res.output
    assert "0 (8 ranks)" in res.output


def test_redirected_stderr_gets_nothing_from_a_successful_lower(tmp_path):
    """No progress bar when stderr is not a terminal: rich's transient bar left a lone line
    break there (mix8: 8 ranks, the bar's threshold)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-m", "nrtrewrite", "lower",
                           str(root / "fixtures" / "mix8.neff"), "-o", str(tmp_path / "o")],
                          capture_output=True, text=True, cwd=root, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", repr(proc.stderr)
    assert "8 rank folder(s) written" in proc.stdout
