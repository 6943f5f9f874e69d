"""`nrtrewrite dump`: the rich view decodes only the rows it shows; --json is streamed block by
block and is exactly ``json.dumps(document, indent=1)`` of the whole document."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
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


def _records(path: Path):
    """A file's records read by numpy alone (not by the reader under test)."""
    from nrtrewrite.emit import formats as F
    return np.fromfile(path, dtype=F.ARTIFACTS[path.name][0])


def _whole(kind, targets) -> str:
    """The document built whole, as the dump command did before it streamed."""
    ranks = [{"rank_dir": d.name,
              "files": {n: [decode_record(n, r) for r in _records(d / n)] for n in names}}
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
    assert res.output == _whole("sem", [(f.parent, ["sem.bin"])])
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
    real_columns = artifacts.decode_columns

    def counting_columns(name, arr):
        seen.extend([name] * len(arr))
        return real_columns(name, arr)

    monkeypatch.setattr("nrtrewrite.cli.dump.decode_columns", counting_columns)
    read = []  # the records each file's reads asked for
    real_chunks = artifacts.RecordFile.chunks

    def chunks(self, stop=None, chunk=None):
        for part in real_chunks(self, stop, chunk):
            read.append((self.name, part.size))
            yield part

    monkeypatch.setattr(artifacts.RecordFile, "chunks", chunks)
    n = _records(out / "rank-0000" / "dma.bin").size
    assert n > 3
    res = CliRunner().invoke(main, ["dump", "--dma", str(out), "--rank", "0", "--limit", "3"])
    assert res.exit_code == 0, res.output
    # piped (CliRunner), a table is read twice, its widths first: only the rows shown
    assert seen.count("dma.bin") == 2 * 3
    assert read == [("dma.bin", 3)] * 2 + [("legs.bin", 3)] * 2
    assert f"rank-0000/dma.bin ({n} records)" in res.output
    assert f"... {n - 3} more records" in res.output


def test_json_errors_come_before_any_output(out, tmp_path):
    """Every file is checked before the document begins, so a torn record in the last rank
    gives the error document alone on stdout (docs/CLI.md "dump"), not a cut stream."""
    import shutil
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    last = sorted(copy.glob("rank-*"))[-1] / "sem.bin"
    last.write_bytes(last.read_bytes() + b"\0")  # a torn record in the last rank
    res = CliRunner().invoke(main, ["dump", "--sem", str(copy), "--json"])
    assert res.exit_code == 2
    line, = res.stderr.splitlines()
    assert "sem.bin" in line and "not a whole number" in line
    assert json.loads(res.stdout) == {"kind": "sem", "ranks": [],
                                      "error": line.removeprefix("nrtrewrite: error: ")}


def _on_check(monkeypatch, victim: Path, action) -> None:
    """``action(record_file)`` run right after dump has checked ``victim``: another process
    changing the file meanwhile."""
    real = artifacts.open_records

    def checked(path, name=None):
        rf = real(path, name)
        if Path(path) == victim:
            action(rf)
        return rf
    monkeypatch.setattr("nrtrewrite.cli.dump.open_records", checked)


def _stopped(res) -> str:
    """The error line of a ``dump --json`` stopped by an error once its document had begun:
    exit 2, one line, the document closed with that line as its ``"error"``."""
    assert res.exit_code == 2, res.output
    line, = res.stderr.splitlines()
    assert json.loads(res.stdout)["error"] == line.removeprefix("nrtrewrite: error: ")
    return line


# (file truncated to N records, RecordFile.CHUNK): the document's state when the error comes
SHRINK_CASES = {
    "a later rank's first file, nothing of it written": ("rank-0001/dma.bin", 1, None),
    "mid-file, after records were written": ("rank-0000/dma.bin", 3, 2),
    "a later file of a rank": ("rank-0000/legs.bin", 1, None),
}


@pytest.mark.parametrize("case", sorted(SHRINK_CASES))
@pytest.mark.parametrize("as_json", [False, True])
def test_a_file_that_shrinks_while_read_is_an_error_line(out, tmp_path, monkeypatch, as_json,
                                                         case):
    """A file truncated after its check (another process, meanwhile) is a one-line error,
    and with --json the document begun is closed with the ranks so far and "error": the
    files were memory-mapped, and reading a truncated map ended the process with SIGBUS,
    no message (found by a fault audit)."""
    import shutil
    rel, keep, chunk = SHRINK_CASES[case]
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    victim = copy / rel
    itemsize = artifacts.F.ARTIFACTS[victim.name][0].itemsize
    held = victim.stat().st_size
    assert held > (keep + 1) * itemsize  # (it does shrink, past a chunk)
    _on_check(monkeypatch, victim, lambda rf: os.truncate(victim, keep * itemsize))  # (same file)
    if chunk:
        monkeypatch.setattr(artifacts.RecordFile, "CHUNK", chunk)
    args = ["dump", "--dma", str(copy), "--limit", "0"] + (["--json"] if as_json else [])
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2, res.output
    line, = res.stderr.splitlines()
    assert line == (f"nrtrewrite: error: {victim}: changed while being read (it held "
                    f"{held} bytes, now ends at byte {keep * itemsize})")
    if as_json:
        doc = json.loads(res.stdout)
        assert doc["error"] == line.removeprefix("nrtrewrite: error: ")
        rank_dir, name = rel.split("/")
        last = doc["ranks"][-1]
        assert last["rank_dir"] == rank_dir and list(last["files"])[-1] == name
        # the records of the chunks read whole before the one that fell short
        whole = keep // chunk * chunk if chunk else 0
        assert last["files"][name] == [decode_record(name, r)
                                       for r in _records(out / rel)[:whole]]
        for r in doc["ranks"][:-1]:  # every rank before it whole
            for n, recs in r["files"].items():
                assert len(recs) == _records(out / r["rank_dir"] / n).size


def test_a_file_replaced_while_read_is_an_error_line(out, tmp_path, monkeypatch):
    """Another file renamed into a checked file's place (a `lower --force` swapping
    outputs) is refused, not read as that rank's records."""
    import shutil
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    victim = copy / "rank-0001" / "sem.bin"

    def replace(rf):
        shutil.copy(copy / "rank-0002" / "sem.bin", tmp_path / "other")
        (tmp_path / "other").rename(victim)
    _on_check(monkeypatch, victim, replace)
    line = _stopped(CliRunner().invoke(main, ["dump", "--sem", str(copy), "--json"]))
    assert line == (f"nrtrewrite: error: {victim}: changed while being read (another file "
                    "was put in its place)")


def test_dump_holds_no_descriptor_per_file(out):
    """A folder's files are checked and read one at a time: a dump of every rank does not
    need a descriptor per file (a 600-rank output ran out of them at `ulimit -n 1024`:
    each memory map holds one)."""
    import resource
    import subprocess
    import sys
    ranks = len(list(out.glob("rank-*")))
    assert ranks >= 8  # two files a rank: 16 maps, more than the limit leaves free

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (14, 14))
    proc = subprocess.run([sys.executable, "-m", "nrtrewrite.cli.__main__", "dump", "--dma",
                           str(out), "--json"], capture_output=True, text=True, timeout=120,
                          preexec_fn=limit)
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["ranks"]) == ranks


def _one_line_error(res, code=2, json_kind=None):
    """A refusal as docs/CLI.md has it: exit ``code``, one line on stderr, no traceback;
    nothing on stdout, or with ``--json`` (``json_kind``: the selector) the error document."""
    assert res.exit_code == code, (res.exit_code, res.output, res.exception)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    if json_kind is None:
        assert res.stdout == ""
    else:
        assert json.loads(res.stdout) == {
            "kind": json_kind, "ranks": [], "error": lines[0].removeprefix("nrtrewrite: error: ")}
    return lines[0]


@pytest.mark.parametrize("selectors", [["--spad", "--dma"], ["--dma", "--spad"],
                                       ["--sem", "--cce", "--fifo"]])
def test_selectors_are_exclusive(out, selectors):
    named = " and ".join(s for s in ("--spad", "--sb2sb", "--cce", "--dma", "--sem", "--fifo")
                         if s in selectors)
    for path in (out, out / "rank-0000", out / "rank-0000" / "sem.bin"):
        res = CliRunner().invoke(main, ["dump", *selectors, str(path)], prog_name="nrtrewrite")
        assert _one_line_error(res) == (f"nrtrewrite dump: error: {named} are exclusive: "
                                        "choose one selector (see 'nrtrewrite dump --help')")


def test_a_folder_without_a_selector_is_a_usage_error(out):
    for path in (out, out / "rank-0000"):
        res = CliRunner().invoke(main, ["dump", str(path)], prog_name="nrtrewrite")
        assert _one_line_error(res) == (
            "nrtrewrite dump: error: choose what to dump: --spad, --sb2sb, --cce, --dma, --sem "
            "or --fifo (a folder's files have no one kind) (see 'nrtrewrite dump --help')")


def test_a_repeated_selector_is_no_conflict(out):
    res = CliRunner().invoke(main, ["dump", "--sem", "--sem", str(out / "rank-0000"), "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["kind"] == "sem"


def test_rank_must_match_a_rank_folder_or_a_file(out, tmp_path):
    rdir = out / "rank-0001"
    for path in (rdir, rdir / "sem.bin"):
        for extra in ([], ["--json"]):
            line = _one_line_error(CliRunner().invoke(
                main, ["dump", "--sem", str(path), "--rank", "2", *extra]),
                json_kind="sem" if extra else None)
            assert line == (f"nrtrewrite: error: {path}: --rank 2 names another rank than this "
                            "rank folder's (rank 1); --rank selects a rank of a whole output "
                            "folder")
        res = CliRunner().invoke(main, ["dump", "--sem", str(path), "--rank", "1", "--json"])
        assert res.exit_code == 0, res.output
        assert [r["rank_dir"] for r in json.loads(res.output)["ranks"]] == ["rank-0001"]
    # a rank folder copied under another name: its manifest tells its rank
    import shutil
    shutil.copytree(rdir, tmp_path / "r1")
    assert "(rank 1)" in _one_line_error(CliRunner().invoke(
        main, ["dump", "--sem", str(tmp_path / "r1"), "--rank", "0"]))
    assert CliRunner().invoke(main, ["dump", "--sem", str(tmp_path / "r1"), "--rank", "1"]
                              ).exit_code == 0


def test_limit_zero_shows_all_and_a_negative_limit_is_a_usage_error(out):
    path = str(out / "rank-0000")
    n = load_records(out / "rank-0000" / "dma.bin").size
    res = CliRunner().invoke(main, ["dump", "--dma", path, "--limit", "0"])
    assert res.exit_code == 0 and f"({n} records)" in res.output and "more records" not in res.output
    for bad in ("-1", "-200"):
        res = CliRunner().invoke(main, ["dump", "--dma", path, "--limit", bad],
                                 prog_name="nrtrewrite")
        assert _one_line_error(res).startswith(
            f"nrtrewrite dump: error: Invalid value for '--limit': {bad} is not in the range x>=0.")


def test_a_limit_one_short_of_the_records_notes_the_one_more(out):
    """--limit n - 1 shows n - 1 rows and says "... 1 more record"; --limit n shows all,
    without the note."""
    path = str(out / "rank-0000")
    n = load_records(out / "rank-0000" / "dma.bin").size
    res = CliRunner().invoke(main, ["dump", "--dma", path, "--limit", str(n - 1)])
    assert res.exit_code == 0, res.output
    assert "... 1 more record (--limit 0 shows all)" in res.output
    res = CliRunner().invoke(main, ["dump", "--dma", path, "--limit", str(n)])
    assert res.exit_code == 0 and f"({n} records)" in res.output
    assert "more records" not in res.output  # (legs.bin, also shown, has fewer records)


def test_piped_tables_are_as_wide_as_they_need(out):
    # (rich assumes 80 columns off a terminal: the dma.bin headers were cut to `t…`)
    res = CliRunner().invoke(main, ["dump", "--dma", str(out / "rank-0000"), "--limit", "2"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    header = next(ln for ln in lines if "sdma_op" in ln)
    for col in ("#", "dir", "stream", "sdma_op", "length", "first", "last", "gen", "buf_ptr"):
        assert f" {col} " in header, header
    # legs.bin's leaf_name column holds "direct_reduce_send_kangaring" (28) whole: about 206
    assert 200 < max(map(len, lines)) <= 240
    # legs.bin, the widest table of --dma, is no longer abbreviated
    res = CliRunner().invoke(main, ["dump", "--dma", str(out / "rank-0000"), "--limit", "1"])
    assert "…" not in res.output, res.output


def _table_widths(text: str) -> dict[str, int]:
    """Each table's widest line, by the file its title names (``rank-0000/net_ops.bin``)."""
    widths, name = {}, None
    for line in text.splitlines():
        title = line.strip().split(" (")[0]
        if title.startswith("rank-") and title.endswith(".bin"):
            name = title.split("/")[1]
        elif name is not None:
            widths[name] = max(widths.get(name, 0), len(line))
    return widths


def test_the_widest_piped_table_net_ops_is_whole(tmp_path):
    """The widest dump table is net_ops.bin's since it gained basic_block_id and
    variable_peer (docs/CLI.md dump: 206 plus its row number's digits; legs.bin's about 206
    with a 3-digit row number, so 203 plus its digits): piped, it is drawn at that width,
    within the 240 columns, no header abbreviated.  Rank 0 of two_node128 (HIER across
    nodes: net-proxy FIFO records); rows 0..1 (1 digit) of every table."""
    out = lower_to(FIX / "two_node128.neff", tmp_path / "o", [0])
    rdir = out / "rank-0000"
    assert _records(rdir / "net_ops.bin").size >= 2
    widths = {}
    for kind in KIND_FILES:
        res = CliRunner().invoke(main, ["dump", f"--{kind}", str(rdir), "--limit", "2"])
        assert res.exit_code == 0, res.output
        assert "…" not in res.output, res.output
        widths.update(_table_widths(res.output))
    assert widths["net_ops.bin"] == 206 + 1
    assert widths["legs.bin"] <= 203 + 1
    assert max(widths, key=widths.get) == "net_ops.bin"
    assert all(w < widths["net_ops.bin"] for n, w in widths.items() if n != "net_ops.bin")


@pytest.mark.parametrize("name", sorted(n for names in KIND_FILES.values() for n in names))
def test_a_files_kind_comes_from_its_name_as_with_its_selector(out, name):
    f = out / "rank-0001" / name
    kind = next(k for k, names in KIND_FILES.items() if name in names)
    bare = CliRunner().invoke(main, ["dump", str(f), "--json"])
    selected = CliRunner().invoke(main, ["dump", f"--{kind}", str(f), "--json"])
    assert bare.exit_code == selected.exit_code == 0
    assert json.loads(bare.output)["kind"] == kind
    assert bare.output == selected.output


def test_a_folder_with_an_entry_named_rank_but_no_rank_folder_is_refused(tmp_path):
    w = tmp_path / "w"
    w.mkdir()
    (w / "rank-notes.txt").write_text("hi")
    (w / "rank-0003").write_text("a file, not a folder")
    why = f"{w}: neither an nrtrewrite output folder nor a rank folder"
    for extra in ([], ["--json"]):
        res = CliRunner().invoke(main, ["dump", "--cce", str(w), *extra])
        assert res.exit_code == 2 and why in res.stderr
        assert res.stdout == ("" if not extra else
                              json.dumps({"kind": "cce", "ranks": [], "error": why}, indent=1)
                              + "\n")


def test_a_proc_file_in_an_artifacts_place_is_refused(out, tmp_path):
    """/proc files are regular files whose size says 0 bytes: one linked in place of
    spad.bin was dumped as 0 records, exit 0 (found by an audit)."""
    import shutil
    if not Path("/proc/self/status").exists():
        pytest.skip("no /proc")
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    victim = copy / "rank-0001" / "spad.bin"
    victim.unlink()
    victim.symlink_to("/proc/self/status")
    for args in (["dump", "--spad", str(copy), "--rank", "1", "--json"], ["dump", str(victim)]):
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 2, res.output
        line, = res.stderr.splitlines()
        assert line == (f"nrtrewrite: error: {victim}: not an artifact file: its size says 0 "
                        "bytes but it reads more (a /proc or /sys file?)")


def test_a_file_that_grows_while_read_is_an_error_line(out, tmp_path, monkeypatch):
    import shutil
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    victim = copy / "rank-0000" / "sem.bin"
    held = victim.stat().st_size
    _on_check(monkeypatch, victim, lambda rf: victim.write_bytes(victim.read_bytes() + bytes(16)))
    line = _stopped(CliRunner().invoke(main, ["dump", "--sem", str(copy), "--json"]))
    assert line == (f"nrtrewrite: error: {victim}: changed while being read (it held {held} "
                    "bytes, now more)")


@pytest.mark.parametrize("selectors", [["--spad", "--dma"], ["--sem", "--cce", "--fifo"]])
def test_exclusive_selectors_with_json_name_no_kind(out, selectors):
    """docs/CLI.md "dump": with --json, a usage error's document has ``kind`` the one
    selector given, else null (two or three selectors are no one kind), and ``error`` click's
    message alone (docs/CLI.md "inspect --json")."""
    res = CliRunner().invoke(main, ["dump", "--json", *selectors, str(out / "rank-0000")],
                             prog_name="nrtrewrite")
    assert res.exit_code == 2, res.output
    named = " and ".join(s for s in ("--spad", "--sb2sb", "--cce", "--dma", "--sem", "--fifo")
                         if s in selectors)
    why = f"{named} are exclusive: choose one selector"
    assert json.loads(res.stdout) == {"kind": None, "ranks": [], "error": why}
    assert res.stderr == f"nrtrewrite dump: error: {why} (see 'nrtrewrite dump --help')\n"


def test_a_file_the_selector_does_not_dump_is_refused(out):
    """docs/CLI.md "dump": a file is dumped by the selector its name belongs to; another
    selector is an error, with --json the document of that selector."""
    path = out / "rank-0000" / "sem.bin"
    for args, kind in ((["--cce"], None), (["--cce", "--json"], "cce"),
                       (["--spad", "--json"], "spad")):
        res = CliRunner().invoke(main, ["dump", *args, str(path)], prog_name="nrtrewrite")
        files = "cce.bin" if kind != "spad" else "spad.bin / tpinc.bin"
        sel = "spad" if kind == "spad" else "cce"
        assert _one_line_error(res, json_kind=kind) == (
            f"nrtrewrite: error: {path}: not a {files} file (what --{sel} dumps, told by the "
            "file's name)")


def test_the_streamed_json_of_no_ranks_or_no_files_is_still_json_dumps(out):
    """``_write_json``'s contract (its docstring) for targets the command never passes today
    (rank_dirs names at least one folder, a selector at least one file): no ranks, and a
    rank of no files, are still ``json.dumps(document, indent=1)`` and a newline."""
    import io

    from nrtrewrite.cli.dump import _write_json
    for targets in ([], [(out / "rank-0000", [])],
                    [(out / "rank-0000", []), (out / "rank-0001", ["sem.bin"])]):
        buf = io.StringIO()
        _write_json(buf, "sem", targets)
        assert buf.getvalue() == _whole("sem", targets)


def test_rank_folders_come_in_rank_order_in_dump_and_diff(tmp_path):
    """Ranks 9999 and 10000: ``rank-10000`` sorts before ``rank-9999`` as text; dump's
    document and diff's lines follow the ranks, as the manifest's ``ranks`` (found by an
    exploratory tester)."""
    from nrtrewrite.neff.assembler import assemble_spec
    spec = {"header": {"name": "far", "lnc_size": 1},
            "subgraphs": [{"name": "sg00",
                           "vars": [{"name": "a", "type": "input", "size": 4096},
                                    {"name": "b", "type": "output", "size": 4096}],
                           "replica_groups": [[9999, 10000]],
                           "engines": {"sp": [{"all_reduce": {
                               "dtype": "bf16", "op": "add", "src": "a", "dst": "b",
                               "bytes": 4096}}]}}]}
    neff = tmp_path / "far.neff"
    neff.write_bytes(assemble_spec(spec))
    a, b = tmp_path / "a", tmp_path / "b"
    assert CliRunner().invoke(main, ["lower", "-q", str(neff), "-o", str(a)]).exit_code == 0
    assert json.loads((a / "manifest.json").read_text())["ranks"] == [9999, 10000]
    res = CliRunner().invoke(main, ["dump", "--spad", str(a), "--json"])
    assert [r["rank_dir"] for r in json.loads(res.stdout)["ranks"]] == ["rank-9999",
                                                                         "rank-10000"]
    import shutil
    shutil.copytree(a, b)
    for r in ("rank-9999", "rank-10000"):
        (b / r / "extra.txt").write_text("x")
    res = CliRunner().invoke(main, ["diff", str(a), str(b)])
    assert res.exit_code == 1
    lines = [ln for ln in res.stdout.splitlines() if "extra.txt" in ln]
    assert [ln.split("/")[0] for ln in lines] == ["rank-9999", "rank-10000"], res.stdout


@pytest.mark.parametrize("kind", ["file", "loop", "dangling"])
def test_a_rank_folder_replaced_by_something_else_is_refused_not_skipped(out, tmp_path, kind):
    """Found by an exploratory tester: a whole-output dump skipped a rank folder replaced
    by a file or a link to itself and exited 0 with the other ranks, and ``--rank`` of it
    said only "no folder for rank 1"."""
    import shutil
    t = tmp_path / "t"
    shutil.copytree(out, t)
    victim = t / "rank-0001"
    shutil.rmtree(victim)
    if kind == "file":
        victim.write_text("x")
    elif kind == "loop":
        victim.symlink_to("rank-0001")
    else:
        victim.symlink_to("nowhere")
    why = {"file": "a file", "loop": "too many levels of symbolic links",
           "dangling": "a link to nothing"}[kind]
    for args, json_kind in ((["--spad", str(t)], None), (["--spad", str(t), "--json"], "spad"),
                            (["--sem", str(t), "--rank", "1"], None)):
        res = CliRunner().invoke(main, ["dump", *args])
        assert _one_line_error(res, json_kind=json_kind) == (
            f"nrtrewrite: error: {victim}: not a rank folder ({why})")
    # another rank of that output is still dumped
    res = CliRunner().invoke(main, ["dump", "--spad", str(t), "--rank", "0", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["ranks"][0]["rank_dir"] == "rank-0000"


def test_rank_dir_is_the_folders_name_when_given_as_dot(out, monkeypatch):
    """Found by an exploratory tester: ``dump --spad .`` inside a rank folder, and ``dump
    spad.bin`` there, gave ``"rank_dir": ""`` and the title ``/spad.bin``."""
    monkeypatch.chdir(out / "rank-0001")
    for args in (["--spad", "."], ["spad.bin"], ["--spad", "./"], ["--spad", "../rank-0001"]):
        res = CliRunner().invoke(main, ["dump", *args, "--json"])
        assert res.exit_code == 0, res.output
        assert [r["rank_dir"] for r in json.loads(res.stdout)["ranks"]] == ["rank-0001"], args
        res = CliRunner().invoke(main, ["dump", *args])
        assert res.exit_code == 0 and res.stdout.lstrip().startswith("rank-0001/spad.bin ("), \
            res.stdout[:200]


def test_rank_given_twice_is_a_usage_error(out):
    """Found by an exploratory tester: ``--rank 0 --rank 1`` dumped rank 1 alone, silently."""
    res = CliRunner().invoke(main, ["dump", "--spad", str(out), "--rank", "0", "--rank", "1"],
                             prog_name="nrtrewrite")
    assert _one_line_error(res) == (
        "nrtrewrite dump: error: Invalid value for '--rank': given twice (0, 1); dump shows one "
        "rank of an output folder, or every rank (no --rank) (see 'nrtrewrite dump --help')")
    res = CliRunner().invoke(main, ["dump", "--spad", str(out), "--rank", "1", "--rank", "1",
                                    "--json"])
    assert res.exit_code == 0
    assert [r["rank_dir"] for r in json.loads(res.stdout)["ranks"]] == ["rank-0001"]


def test_counts_of_one_are_singular(out, tmp_path):
    """Found by an exploratory tester: ``(1 records)`` and ``... 1 more steps``."""
    rdir = tmp_path / "rank-0000"
    rdir.mkdir()
    sem = (out / "rank-0000" / "sem.bin").read_bytes()
    (rdir / "sem.bin").write_bytes(sem[:32])  # two 16-byte records
    res = CliRunner().invoke(main, ["dump", str(rdir / "sem.bin"), "--limit", "1"])
    assert res.exit_code == 0, res.output
    assert "rank-0000/sem.bin (2 records)" in res.output
    assert "... 1 more record (--limit 0 shows all)" in res.output
    (rdir / "sem.bin").write_bytes(sem[:16])
    res = CliRunner().invoke(main, ["dump", str(rdir / "sem.bin")])
    assert res.exit_code == 0 and "rank-0000/sem.bin (1 record)" in res.output


def test_a_rank_folder_that_is_a_link_to_another_is_refused(out, tmp_path):
    """An exploratory tester: rank-0001 made a link to rank-0000 was dumped as rank 1 (rank
    0's records under rank 1's name), exit 0."""
    import shutil
    t = tmp_path / "t"
    shutil.copytree(out, t)
    shutil.rmtree(t / "rank-0001")
    (t / "rank-0001").symlink_to("rank-0000")
    res = CliRunner().invoke(main, ["dump", "--spad", str(t)])
    assert _one_line_error(res) == (f"nrtrewrite: error: {t / 'rank-0001'}: not a rank folder "
                                    "(a link to rank-0000, not a folder of the output)")


def test_rank_dir_is_the_real_folders_name_through_a_link(out, tmp_path, monkeypatch):
    """``LINK/..`` where LINK points into a rank folder is that rank folder (the lexical
    path named the working folder: an exploratory tester)."""
    (out / "rank-0000" / "zz").mkdir(exist_ok=True)
    try:
        monkeypatch.chdir(tmp_path)
        (tmp_path / "Z").symlink_to(out / "rank-0000" / "zz")
        res = CliRunner().invoke(main, ["dump", "--spad", "Z/..", "--json"])
        assert res.exit_code == 0, res.output
        assert [r["rank_dir"] for r in json.loads(res.stdout)["ranks"]] == ["rank-0000"]
    finally:
        (out / "rank-0000" / "zz").rmdir()


@pytest.mark.parametrize("as_json", [False, True])
def test_a_listed_rank_without_its_folder_is_warned_about(out, tmp_path, as_json):
    """An output whose manifest.json lists ranks whose folders were deleted: dump shows the
    folders there and says on stderr which listed ranks it cannot show (it used to leave them
    out without a word); the whole output and a rank folder give no warning."""
    import shutil
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    listed = json.loads((copy / "manifest.json").read_text())["ranks"]
    assert len(listed) > 3
    for r in listed[1:3]:
        shutil.rmtree(copy / f"rank-{r:04d}")
    args = ["dump", "--spad", str(copy)] + (["--json"] if as_json else [])
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert res.stderr == (f"nrtrewrite: warning: {copy}/manifest.json lists 2 ranks "
                          f"({listed[1]}, {listed[2]}) with no rank folder in the output; "
                          f"dumping the {len(listed) - 2} rank folders there\n")
    if as_json:
        shown = [d["rank_dir"] for d in json.loads(res.stdout)["ranks"]]
        assert shown == [f"rank-{r:04d}" for r in listed if r not in listed[1:3]]
    for quiet in (out, out / f"rank-{listed[0]:04d}"):
        res = CliRunner().invoke(main, ["dump", "--spad", str(quiet), "--json"])
        assert res.exit_code == 0 and res.stderr == "", res.stderr


def test_the_note_builds_the_top_level_object_of_the_manifest_only(out, tmp_path, monkeypatch):
    """The note on rank folders gone reads the whole top manifest, checked as before, but
    builds only its top-level object (jsonin.loads top_only: a 34 MB HIER manifest's
    triggers were built whole until 2026-12-06)."""
    import shutil

    from nrtrewrite import jsonin
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    shutil.rmtree(copy / "rank-0005")
    reads = []
    real = jsonin.loads

    def loads(text, **kw):
        reads.append(kw.get("top_only", False))
        return real(text, **kw)
    monkeypatch.setattr(jsonin, "loads", loads)
    res = CliRunner().invoke(main, ["dump", "--sem", str(copy), "--limit", "1"])
    assert res.exit_code == 0, res.output
    assert res.stderr == (f"nrtrewrite: warning: {copy}/manifest.json lists 1 rank (5) with "
                          "no rank folder in the output; dumping the 15 rank folders there\n")
    assert reads == [True]  # (one read, of the top manifest: no rank manifest is read)


def _damaged(text: str) -> dict[str, str]:
    """Manifest texts damaged inside an object the note does not keep, or in a key it
    checks (the note is given for none of them, as when the manifest was built whole)."""
    doc = json.loads(text)
    deep = dict(doc, memory=dict(doc["memory"], dram_base=float("nan")))
    objs = dict(doc, ranks=[{"rank": r} for r in doc["ranks"]])
    # (a format that is an object is another format: refused since 2026-12-06,
    # test_a_manifest_of_another_format_or_version_is_refused)
    return {"NaN deep": json.dumps(deep), "cut short": text[:-2],
            "1e999 deep": text.replace('"dram_base": ', '"dram_base": 1e999, "x": ', 1),
            "integer of 5000 digits deep": text.replace(
                '"dram_base": ', '"dram_base": ' + "9" * 5000 + ', "x": ', 1),
            "ranks objects": json.dumps(objs)}


def test_a_manifest_damaged_anywhere_gives_no_note(out, tmp_path):
    """docs/CLI.md "dump": a manifest that cannot be read gives no note, wherever its damage
    lies (read whole, checked as simulate reads it); one whose objects are merely laid out
    otherwise still gives it."""
    import shutil
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    shutil.rmtree(copy / "rank-0005")
    text = (copy / "manifest.json").read_text()
    assert '"dram_base": ' in text
    for what, bad in _damaged(text).items():
        (copy / "manifest.json").write_text(bad)
        res = CliRunner().invoke(main, ["dump", "--sem", str(copy), "--limit", "1"])
        assert res.exit_code == 0 and res.stderr == "", (what, res.stderr)
    (copy / "manifest.json").write_text(json.dumps(json.loads(text), indent=None))
    res = CliRunner().invoke(main, ["dump", "--sem", str(copy), "--limit", "1"])
    assert res.exit_code == 0 and "lists 1 rank (5) with no rank folder" in res.stderr


def test_an_output_without_any_rank_folder_says_so(out, tmp_path):
    """Only the manifest left of an output: said so (it was 'neither an nrtrewrite output
    folder nor a rank folder'); an empty folder is still neither."""
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "manifest.json").write_bytes((out / "manifest.json").read_bytes())
    res = CliRunner().invoke(main, ["dump", "--spad", str(bare)])
    assert res.exit_code == 2
    assert res.stderr == (f"nrtrewrite: error: {bare}: an nrtrewrite output folder without any "
                          "rank folder (its manifest.json lists the ranks lowered)\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    res = CliRunner().invoke(main, ["dump", "--spad", str(empty)])
    assert res.stderr == (f"nrtrewrite: error: {empty}: neither an nrtrewrite output folder "
                          "nor a rank folder\n")


def _denied_open(monkeypatch, victim: Path, exc: OSError, after: int = 0) -> None:
    """Opening ``victim`` fails with ``exc`` from its ``after``-th opening on (0: the check;
    1: the read after the check), as a file whose permissions or the process's limits
    refuse it (a test run as root reads whatever its mode says)."""
    real = artifacts.open_regular
    seen = []

    def opening(p, **kw):
        if Path(p) == victim:
            seen.append(p)
            if len(seen) > after:
                raise exc
        return real(p, **kw)
    monkeypatch.setattr(artifacts, "open_regular", opening)


@pytest.mark.parametrize("after", [0, 1])
def test_an_artifact_that_cannot_be_read_is_named_with_the_os_reason(out, monkeypatch, after):
    """docs/CLI.md "Errors": a file that cannot be read is one line naming it and the
    OS's reason, exit 2; refused when it is checked, or when it is read after the check
    (its permissions changed meanwhile)."""
    import errno
    victim = out / "rank-0000" / "cce.bin"
    _denied_open(monkeypatch, victim,
                 PermissionError(errno.EACCES, "Permission denied", str(victim)), after)
    res = CliRunner().invoke(main, ["dump", "--cce", str(victim)], prog_name="nrtrewrite")
    assert _one_line_error(res) == f"nrtrewrite: error: {victim}: cannot read (Permission denied)"


def test_an_artifact_refused_for_want_of_memory_is_the_out_of_memory_line(out, monkeypatch):
    """ENOMEM opening an artifact is the process's limit, not the file's fault: the
    out-of-memory line and exit 71 (docs/CLI.md "Errors"), never "cannot read"."""
    import errno
    victim = out / "rank-0000" / "cce.bin"
    _denied_open(monkeypatch, victim, OSError(errno.ENOMEM, "Cannot allocate memory"))
    res = CliRunner().invoke(main, ["dump", "--cce", str(victim)], prog_name="nrtrewrite")
    line = _one_line_error(res, code=71)
    assert line.startswith("nrtrewrite: error: out of memory: 'nrtrewrite dump' needed more "
                           "memory"), line
    assert "cannot read" not in line


def test_a_fifo_put_in_place_of_a_checked_artifact_is_not_read(out, tmp_path):
    """A FIFO put where an artifact was checked is refused when the records are read (never
    opened for a writer to come), naming the file."""
    import shutil
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    victim = copy / "rank-0000" / "sem.bin"
    rf = artifacts.open_records(victim)
    victim.unlink()
    os.mkfifo(victim)
    with pytest.raises(artifacts.OutputError, match=rf"^{victim}: not a regular file$"):
        list(rf.chunks())


@pytest.mark.parametrize("name, hint", [
    ("log.bin", ""),
    # docs/CLI.md "Errors": the artifact whose name before its first dot is closest, when one
    # is close (spad: 4 of spad's 4 letters)
    ("spad.bn", "did you mean spad.bin? "),
    ("net-src.bin", "did you mean net_src.bin? "),
])
def test_load_records_refuses_a_file_name_nrtrewrite_never_writes(tmp_path, name, hint):
    """``load_records`` reads an artifact by its name's record layout: another name
    (``log.bin``) is refused naming the file and the ten artifacts (docs/FORMATS.md §1)."""
    p = tmp_path / name
    p.write_bytes(bytes(64))
    with pytest.raises(artifacts.OutputError) as err:
        load_records(p)
    assert str(err.value) == (f"{p}: not an artifact file nrtrewrite writes ({hint}spad.bin, "
                              "legs.bin, sb2sb.bin, dma.bin, cce.bin, sem.bin, tpinc.bin, "
                              "net_ops.bin, net_src.bin, net_dest.bin)")


def test_a_rank_the_output_has_no_folder_for_is_one_line(out):
    """``dump --rank R`` of an output of ranks 0..15 (groups.neff) without a folder for R
    (16, outside the world): one line naming the output and the rank, exit 2; with --json
    the document of the selector with that error."""
    for args, kind in ((["--sem"], None), (["--sem", "--json"], "sem")):
        res = CliRunner().invoke(main, ["dump", *args, str(out), "--rank", "16"],
                                 prog_name="nrtrewrite")
        assert _one_line_error(res, json_kind=kind) == (
            f"nrtrewrite: error: {out}: no folder for rank 16")


def test_a_file_rewritten_in_place_between_the_table_s_two_passes_is_an_error_line(
        tmp_path, monkeypatch):
    """The piped table measures its columns in a first pass over the file and writes its rows
    in a second: a file rewritten in place meanwhile (same file, same size) had rows wider
    than their borders, exit 0 (found by a review of ``piped_table`` against rich). Each
    record is 16 bytes of zeros when measured and of 0xff bytes when written: now an error
    line."""
    from nrtrewrite.cli import dump as dump_cli

    victim = tmp_path / "r" / "sem.bin"
    victim.parent.mkdir()
    victim.write_bytes(bytes(16 * 100))
    measure = dump_cli._cell_widths

    def measure_then_rewrite(rf, n, *extra):
        widths = measure(rf, n, *extra)
        with open(victim, "r+b") as fh:  # in place: the same inode, the same size
            fh.write(b"\xff" * (16 * 100))
        return widths
    monkeypatch.setattr(dump_cli, "_cell_widths", measure_then_rewrite)
    res = CliRunner().invoke(main, ["dump", str(victim), "--limit", "0"])
    assert res.exit_code == 2, res.output
    assert res.stderr.splitlines() == [
        f"nrtrewrite: error: {victim}: changed while being read (a record is wider than when "
        "the table's columns were measured)"]


_NEWER = ("; a newer nrtrewrite wrote it: dump it with that version, or lower the model again "
          "with this one (docs/FORMATS.md §1.1)")


# (the values as JSON writes them, docs/SIMULATOR.md §1; until 2026-12-06 Python's,
# 'nrtrewrite-lowered', {'name': ...}, None)
@pytest.mark.parametrize("edit, shown, hint", [
    ({"format_version": 3}, 'format "nrtrewrite-lowered", version 3', _NEWER),
    ({"format_version": 1}, 'format "nrtrewrite-lowered", version 1',
     "; an older nrtrewrite wrote it: lower the model again (docs/FORMATS.md §1.1)"),
    ({"format": "something-else"}, 'format "something-else", version 2', ""),
    ({"format": {"name": "nrtrewrite-lowered"}},
     'format {"name": "nrtrewrite-lowered"}, version 2', ""),
    ({"format_version": None}, 'format "nrtrewrite-lowered", version null', ""),
    ({"format_version": True}, 'format "nrtrewrite-lowered", version true', ""),
    # no nrtrewrite wrote version 0 or below: no "older" hint (review 47l)
    ({"format_version": 0}, 'format "nrtrewrite-lowered", version 0', ""),
    ({"format_version": -1}, 'format "nrtrewrite-lowered", version -1', "")])
@pytest.mark.parametrize("layout", ["sorted", "reordered"])
@pytest.mark.parametrize("rank", [None, 0])
def test_a_manifest_of_another_format_or_version_is_refused(out, tmp_path, edit, shown, hint,
                                                            layout, rank):
    """docs/CLI.md "dump": an output folder whose manifest.json is of another format or
    version is refused in one line, simulate's (docs/SIMULATOR.md §1), worded for dump, exit
    2, with or without --rank, whether the manifest begins with its format (as ours do) or
    not; it was dumped as if it were ours, exit 0."""
    import shutil
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    doc = json.loads((copy / "manifest.json").read_text())
    doc.update(edit)
    if layout == "sorted":
        text = json.dumps(doc, indent=1, sort_keys=True)
    else:  # (format last: the beginning does not tell)
        text = json.dumps({**{k: v for k, v in doc.items() if not k.startswith("format")},
                           "format_version": doc["format_version"], "format": doc["format"]})
    (copy / "manifest.json").write_text(text + "\n")
    args = ["dump", "--spad", str(copy)] + (["--rank", str(rank)] if rank is not None else [])
    res = CliRunner().invoke(main, args)
    assert (res.exit_code, res.stdout) == (2, "")
    assert res.stderr == (f"nrtrewrite: error: {copy}/manifest.json: not an "
                          f"nrtrewrite-lowered v2 manifest ({shown}){hint}\n")
    res = CliRunner().invoke(main, args + ["--json"])
    assert res.exit_code == 2
    assert json.loads(res.stdout) == {"kind": "spad", "ranks": [], "error": res.stderr[
        len("nrtrewrite: error: "):-1]}


def test_a_rank_folder_or_a_file_of_a_newer_output_and_outputs_without_a_manifest_dump(
        out, tmp_path):
    """docs/CLI.md "dump": a rank folder or an artifact file is dumped as given (no top
    manifest is read for it, as before), and an output folder without a manifest.json, or
    with one that is not JSON, is dumped as before: only a manifest read as another format
    or version is refused."""
    import shutil
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    doc = json.loads((copy / "manifest.json").read_text())
    (copy / "manifest.json").write_text(json.dumps(dict(doc, format_version=3)))
    for path in (copy / "rank-0000", copy / "rank-0000" / "spad.bin"):
        res = CliRunner().invoke(main, ["dump", "--spad", str(path), "--json"])
        assert res.exit_code == 0 and res.stderr == "", res.output
        assert [r["rank_dir"] for r in json.loads(res.stdout)["ranks"]] == ["rank-0000"]
    for manifest in ("gone", "not JSON"):
        if manifest == "gone":
            (copy / "manifest.json").unlink()
        else:
            (copy / "manifest.json").write_text('{"format": "nrtrewrite-lowered", ')
        for rank in ([], ["--rank", "0"]):
            res = CliRunner().invoke(main, ["dump", "--spad", str(copy), "--json", *rank])
            assert res.exit_code == 0 and res.stderr == "", (manifest, res.output)


@pytest.mark.parametrize("damage", ["cut", "formfeed"])
def test_a_newer_manifest_that_is_not_json_is_dumped_with_or_without_rank(out, tmp_path,
                                                                           damage):
    """Review 47l: with --rank, the manifest's first 4 KiB saying version 3 refused an
    output whose manifest is not JSON (cut short after its first keys, or beginning with a
    form feed, which JSON's whitespace is not), which a dump without --rank dumps (CLI.md
    "dump": a manifest that cannot be read or is not JSON is dumped as before).  Both now
    decide as the whole read does: dumped."""
    import shutil
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    text = json.dumps(dict(json.loads((copy / "manifest.json").read_text()), format_version=3),
                      indent=1, sort_keys=True)
    assert text.startswith('{\n "format": "nrtrewrite-lowered",\n "format_version": 3,')
    text = text[:100] if damage == "cut" else "\f" + text
    (copy / "manifest.json").write_text(text)
    for rank in ([], ["--rank", "0"]):
        res = CliRunner().invoke(main, ["dump", "--spad", str(copy), "--json"] + rank)
        assert res.exit_code == 0, (rank, res.output)
        assert [r["rank_dir"] for r in json.loads(res.stdout)["ranks"]][:1] == ["rank-0000"]


#: a key given again at the end of a manifest of ours: (its text, the manifest's format and
#: version as JSON reads it: a repeated key's last value, RFC 8259 leaving it open), and a
#: key spelled with an escape is the same key
_REPEATS = {
    "2 then 3": ('"format_version": 3', ("nrtrewrite-lowered", 3)),
    "escaped 2 then 3": ('"format\\u005fversion": 3', ("nrtrewrite-lowered", 3)),
    "escaped F 2 then 3": ('"\\u0046ormat_version": 3', None),  # (another key: "Format_...")
    "escaped f 2 then 3": ('"\\u0066ormat_version": 3', ("nrtrewrite-lowered", 3)),
    "format again": ('"format": "something-else"', ("something-else", 2)),
    "3 then 2": ('"format_version": 2', ("nrtrewrite-lowered", 2)),
}


@pytest.mark.parametrize("case", sorted(_REPEATS))
@pytest.mark.parametrize("rank", [None, 0])
def test_a_repeated_format_key_is_read_alike_with_or_without_rank(out, tmp_path, case, rank):
    """Bug (left by session 47): with --rank the manifest's head took a repeated
    ``format_version``'s FIRST value, where the whole read (without --rank) takes the
    LAST: a hand-made manifest saying 2 then 3 was dumped with --rank and refused without.
    Now both read the last: 2 then 3 (or the key spelled ``format\\u005fversion``, or
    ``format`` again) is refused, 3 then 2 dumped."""
    import shutil
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    again, last = _REPEATS[case]
    doc = json.loads((copy / "manifest.json").read_text())
    first = 3 if case == "3 then 2" else 2
    text = json.dumps(dict(doc, format_version=first), indent=1, sort_keys=True)
    assert text.startswith('{\n "format": "nrtrewrite-lowered",\n "format_version": ')
    (copy / "manifest.json").write_text(text[:-2] + ",\n " + again + "\n}\n")
    args = ["dump", "--spad", str(copy), "--json"]
    args += ["--rank", str(rank)] if rank is not None else []
    res = CliRunner().invoke(main, args)
    if last is None or last == ("nrtrewrite-lowered", 2):
        assert res.exit_code == 0 and res.stderr == "", res.output
        assert [r["rank_dir"] for r in json.loads(res.stdout)["ranks"]][:1] == ["rank-0000"]
    else:
        hint = _NEWER if last[1] == 3 else ""
        assert (res.exit_code, res.stderr) == (2, (
            f"nrtrewrite: error: {copy}/manifest.json: not an nrtrewrite-lowered v2 manifest "
            f'(format "{last[0]}", version {last[1]}){hint}\n'))


@pytest.mark.parametrize("shift", [1, 2, 8, 15, 16, 17])
def test_a_format_key_across_two_scanned_blocks_is_seen(shift):
    """``format_version`` given again so that its name straddles the scan's 1 MiB blocks
    (review 48j: a scan keeping no bytes of the block before passed every other case):
    found wherever it is cut.  A value merely beginning with "format (the model
    ``format.neff``, review 48j: the whole 60 MB manifest read) is not a key given again."""
    import io
    from nrtrewrite.cli.dump import _may_repeat_the_head
    key = b'"format_version": 3'
    start = 7
    pad = b" " * ((1 << 20) - shift)
    assert _may_repeat_the_head(io.BytesIO(b"x" * start + pad + key + b"}"), start)
    assert not _may_repeat_the_head(io.BytesIO(
        b"x" * start + pad + b'"name": "format.neff", "n": "\\n"}'), start)


def test_dump_rank_accepts_our_v2_manifest_from_its_head_alone(out, tmp_path, monkeypatch):
    """nrtrewrite/cli/dump.py ``check_top_format``: with --rank, a v2 manifest of ours
    (sorted keys: it begins `{"format": "nrtrewrite-lowered", "format_version": 2`,
    FORMATS.md §1.1) is accepted from its first 4 KiB, never read whole
    (``read_top_manifest`` not called); the same manifest with its format keys last is
    decided by the whole read, once.  Dumped alike, exit 0."""
    import shutil
    from nrtrewrite.simulate import artifacts as SA
    calls = []
    real = SA.read_top_manifest

    def counted(*args, **kwargs):
        calls.append(kwargs.get("only"))
        return real(*args, **kwargs)
    monkeypatch.setattr(SA, "read_top_manifest", counted)
    doc = json.loads((out / "manifest.json").read_text())
    assert list(doc)[:2] == ["format", "format_version"] and doc["format_version"] == 2
    args = ["dump", "--spad", str(out), "--rank", "0", "--json"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0 and res.stderr == "", res.output
    assert calls == []
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    (copy / "manifest.json").write_text(json.dumps(
        {**{k: v for k, v in doc.items() if not k.startswith("format")},
         "format_version": doc["format_version"], "format": doc["format"]}))
    res2 = CliRunner().invoke(main, ["dump", "--spad", str(copy), "--rank", "0", "--json"])
    assert res2.exit_code == 0 and res2.stderr == "", res2.output
    assert calls == [()]
    assert json.loads(res2.stdout)["ranks"] == json.loads(res.stdout)["ranks"]
