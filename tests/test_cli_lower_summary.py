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


def test_quiet_prints_nothing_on_success(tmp_path):
    """CLI.md "lower": on success a table is printed, "nothing with `--quiet`" (this model
    gives no warning): neither the table nor the rank count line."""
    path = tmp_path / "m.neff"
    path.write_bytes(_model([("all_reduce", "bf16", 64)]))
    res = CliRunner().invoke(main, ["lower", "-q", str(path), "-o", str(tmp_path / "o"),
                                    "-j", "1"])
    assert res.exit_code == 0 and res.output == "", res.output
    assert (tmp_path / "o" / "rank-0007").is_dir()


def test_exactly_64_triggers_still_get_one_row_each():
    """CLI.md "lower": one row per trigger, or, "for a model of more than 64 triggers", one
    row per (op, dtype, algorithm): 64 triggers are not grouped."""
    kinds = [("all_reduce", "bf16", 8 + 8 * i) for i in range(64)]
    plan = plan_lowering(read_model_bytes(_model(kinds), path="m.neff"),
                         LowerOptions(algo="ring"))
    text = _render(summary_table(plan, "title"))
    assert "triggers in" not in text
    rows = [[c for c in line.split() if c not in "│┃"] for line in text.splitlines()
            if "RING" in line]
    assert [r[0] for r in rows] == [str(i) for i in range(64)]
    assert rows[63][3] == str(8 + 8 * 63)


def test_per_trigger_rows_show_each_triggers_op_dtype_elements_and_group():
    """CLI.md "lower": up to 64 triggers, one row per trigger: ordinal, op, dtype, elements,
    replica group (and its size), algorithm."""
    kinds = [("reduce_scatter", "bf16", 64), ("all_gather", "fp8_e4", 24)]
    plan = plan_lowering(read_model_bytes(_model(kinds), path="m.neff"),
                         LowerOptions(algo="ring"))
    text = _render(summary_table(plan, "title"))
    rows = [[c for c in line.split() if c not in "│┃"] for line in text.splitlines()
            if "RING" in line]
    assert [r[:7] for r in rows] == [["0", "REDUCE_SCATTER", "BF16", "64", "0", "(8", "ranks)"],
                                     ["1", "ALLGATHER", "FP8_E4", "24", "0", "(8", "ranks)"]]
    assert all(r[7] == "RING" for r in rows)


def test_the_last_line_counts_the_rank_folders_written(tmp_path):
    """CLI.md "lower": `--rank` lowers only those ranks, a rank given twice once; the line
    after the table counts the rank folders written (2 here, not the world's 8)."""
    path = tmp_path / "m.neff"
    path.write_bytes(_model([("all_reduce", "bf16", 64)]))
    res = CliRunner().invoke(main, ["lower", str(path), "-o", str(tmp_path / "o"), "-j", "1",
                                    "--rank", "1", "--rank", "2", "--rank", "1"])
    assert res.exit_code == 0, res.output
    assert "\n2 rank folder(s) written in " in res.output
    assert sorted(p.name for p in (tmp_path / "o").iterdir() if p.is_dir()) == [
        "rank-0001", "rank-0002"]


def test_a_group_of_one_rank_is_one_rank(tmp_path):
    """(Found by an exploratory tester: ``0 (1 ranks)``, ``1 ranks``.)"""
    spec = {"subgraphs": [{
        "vars": [{"name": "a", "type": "input", "size": 65536},
                 {"name": "b", "type": "output", "size": 65536}],
        "replica_groups": [[5]],
        "engines": {"sp": [{"all_reduce": {"dtype": "bf16", "op": "add", "src": "a",
                                           "dst": "b", "bytes": 4096}}]}}]}
    neff = tmp_path / "g1.neff"
    neff.write_bytes(assemble_spec(spec))
    res = CliRunner().invoke(main, ["lower", str(neff), "-o", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    assert "│ 0 (1 rank) │" in res.stdout and "ranks" not in res.stdout
    res = CliRunner().invoke(main, ["explain", str(neff)], terminal_width=200)
    assert res.exit_code == 0, res.output
    assert " 1 rank (node 0) " in res.stdout and " 1 ranks" not in res.stdout


def _subgraph(name: str, ranks: list[int]) -> dict:
    """An assemble spec's subgraph: one 4 KiB bf16 all-reduce on ``ranks``."""
    return {"name": name,
            "vars": [{"name": "a", "type": "input", "size": 4096},
                     {"name": "b", "type": "output", "size": 4096}],
            "replica_groups": [ranks],
            "engines": {"sp": [{"all_reduce": {"dtype": "bf16", "op": "add", "src": "a",
                                               "dst": "b", "bytes": 4096}}]}}

def test_a_group_id_is_named_with_its_subgraph_when_there_are_several():
    """Replica group ids count within a subgraph's def.json: two subgraphs each with group 0
    (ranks 0..3 and 4..7) showed '0 (4 ranks)' twice."""
    spec = {"subgraphs": [_subgraph("sg00", [0, 1, 2, 3]), _subgraph("sg01", [4, 5, 6, 7])]}
    plan = plan_lowering(read_model_bytes(assemble_spec(spec), path="m.neff"),
                         LowerOptions(algo="ring"))
    text = _render(summary_table(plan, "title"))
    rows = [[c for c in line.split() if c not in "│┃"] for line in text.splitlines()
            if "RING" in line]
    assert [r[4:6] for r in rows] == [["sg00/0", "(4"], ["sg01/0", "(4"]]


def test_a_subgraph_name_in_the_group_column_is_text_not_markup():
    """Subgraph names are the model's text: '[bold]a' showed as 'a' (rich markup)."""
    spec = {"subgraphs": [_subgraph("[bold]a", [0, 1]), _subgraph("[i]a", [2, 3])]}
    plan = plan_lowering(read_model_bytes(assemble_spec(spec), path="m.neff"),
                         LowerOptions(algo="ring"))
    text = _render(summary_table(plan, "title"))
    assert "[bold]a/0 (2 ranks)" in text and "[i]a/0 (2 ranks)" in text


def _terminal_stderr(monkeypatch) -> io.StringIO:
    """``lower``'s stderr console made a terminal's, its output kept."""
    import nrtrewrite.cli.lower as cli_lower

    buf = io.StringIO()
    monkeypatch.setattr(cli_lower, "stderr_console", lambda: Console(
        file=buf, force_terminal=True, width=100, color_system=None))
    return buf


def test_a_terminal_gets_a_progress_bar_from_8_ranks(tmp_path, monkeypatch):
    """CLI.md "lower": "A progress bar shows on stderr for 8 ranks or more when stderr is a
    terminal": 8 ranks lowered, the bar counts them to 8/8; 7 ranks (`--rank` 0..6), or
    `--quiet`, show none."""
    path = tmp_path / "m.neff"
    path.write_bytes(_model([("all_reduce", "bf16", 64)]))
    buf = _terminal_stderr(monkeypatch)
    res = CliRunner().invoke(main, ["lower", str(path), "-o", str(tmp_path / "o"), "-j", "1"])
    assert res.exit_code == 0, res.output
    assert "lowering" in buf.getvalue() and "8/8" in buf.getvalue(), repr(buf.getvalue())
    assert (tmp_path / "o" / "rank-0007").is_dir()
    seven = [arg for r in range(7) for arg in ("--rank", str(r))]
    for name, args in (("seven", seven), ("quiet", ["-q"])):
        buf = _terminal_stderr(monkeypatch)
        res = CliRunner().invoke(main, ["lower", str(path), "-o", str(tmp_path / name),
                                        "-j", "1", *args])
        assert res.exit_code == 0, res.output
        assert buf.getvalue() == "", (args, buf.getvalue())
