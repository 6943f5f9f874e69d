"""`nrtrewrite dump`: the rich view decodes only the rows it shows; --json is streamed record by
record and is exactly ``json.dumps(document, indent=1)`` of the whole document."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from nrtrewrite import artifacts
from nrtrewrite.artifacts import KIND_FILES, decode_record, load_records
from nrtrewrite.cli import main
from nrtrewrite.golden import lower_to

FIX = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    return lower_to(FIX / "groups.neff", tmp_path_factory.mktemp("dump") / "out", None)


def _whole(kind, targets) -> str:
    """The document built whole, as the dump command did before it streamed."""
    ranks = [{"rank_dir": d.name,
              "files": {n: [decode_record(n, r) for r in load_records(d / n)] for n in names}}
             for d, names in targets]
    return json.dumps({"kind": kind, "ranks": ranks}, indent=1) + "\n"


@pytest.mark.parametrize("kind", sorted(KIND_FILES))
def test_json_is_the_whole_document(out, kind):
    res = CliRunner().invoke(main, ["dump", f"--{kind}", str(out), "--json"])
    assert res.exit_code == 0, res.output
    dirs = sorted(d for d in out.glob("rank-*"))
    assert res.output == _whole(kind, [(d, list(KIND_FILES[kind])) for d in dirs])


def test_json_of_one_file_and_of_empty_files(out):
    f = out / "rank-0001" / "sem.bin"
    res = CliRunner().invoke(main, ["dump", str(f), "--json"])
    assert res.output == _whole(None, [(f.parent, ["sem.bin"])])
    rdir = out / "rank-0000"  # one node: no network FIFO records
    assert all((rdir / n).stat().st_size == 0 for n in KIND_FILES["fifo"])
    res = CliRunner().invoke(main, ["dump", "--fifo", str(rdir), "--json"])
    assert json.loads(res.output) == {"kind": "fifo", "ranks": [
        {"rank_dir": "rank-0000", "files": {n: [] for n in KIND_FILES["fifo"]}}]}
    assert res.output == _whole("fifo", [(rdir, list(KIND_FILES["fifo"]))])


def test_the_table_decodes_only_the_rows_it_shows(out, monkeypatch):
    seen = []
    real = artifacts.decode_record

    def counting(name, rec):
        seen.append(name)
        return real(name, rec)

    monkeypatch.setattr("nrtrewrite.cli.dump.decode_record", counting)
    n = load_records(out / "rank-0000" / "dma.bin").size
    assert n > 3
    res = CliRunner().invoke(main, ["dump", "--dma", str(out), "--rank", "0", "--limit", "3"])
    assert res.exit_code == 0, res.output
    assert seen.count("dma.bin") == 3
    assert f"rank-0000/dma.bin ({n} records)" in res.output
    assert f"... {n - 3} more records" in res.output


def test_json_errors_come_before_any_output(out, tmp_path):
    import shutil
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    last = sorted(copy.glob("rank-*"))[-1] / "sem.bin"
    last.write_bytes(last.read_bytes() + b"\0")  # a torn record in the last rank
    res = CliRunner().invoke(main, ["dump", "--sem", str(copy), "--json"])
    assert res.exit_code == 2
    assert res.stdout == ""
    assert "sem.bin" in res.stderr and "not a whole number" in res.stderr
