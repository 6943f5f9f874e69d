"""``dump`` piped or redirected writes its tables row by row (``cli/dump.piped_table``): the
text must be exactly what rich prints for the same table held whole (``rich_table``), the
reference, for any records, or nothing is printed and rich prints it (a table wider than the
console)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from rich.console import Console

from nrtrewrite.artifacts import open_records
from nrtrewrite.cli.dump import PIPED_WIDTH, column_cells, piped_table, rich_table
from nrtrewrite.emit import formats as F

from test_dump_json_columns import records

NAMES = sorted(F.ARTIFACTS)


def console(width: int = PIPED_WIDTH) -> Console:
    """A piped console, as ``stdout_console`` makes it when stdout is no terminal."""
    return Console(file=io.StringIO(), width=width, force_terminal=False, color_system=None)


def both(rf, limit: int, title: str = "rank-0000/x.bin", width: int = PIPED_WIDTH):
    fast, slow = console(width), console(width)
    printed = piped_table(fast, title, rf, limit)
    slow.print(rich_table(title, rf, limit))
    return printed, fast.file.getvalue(), slow.file.getvalue()


def _file(tmp_path, name: str, arr: np.ndarray):
    path = tmp_path / name
    path.write_bytes(arr.tobytes())
    return open_records(path)


@pytest.mark.parametrize("name", NAMES)
def test_random_records_print_as_rich_prints_them(tmp_path, name):
    """Any bit pattern (unknown codes' ``0x..`` names, both spad key sets and their ``-``
    cells, hex columns, the TENSOR3D lists), all rows and the first few."""
    rng = np.random.default_rng(7 + len(name))
    arr = records(name, rng.bytes(F.ARTIFACTS[name][0].itemsize * 600))
    if name == "spad.bin":
        arr["alg"] = rng.integers(0, 256, arr.size)
    rf = _file(tmp_path, name, arr)
    for limit in (0, 1, 11, 599, 5000):
        printed, fast, slow = both(rf, limit)
        assert printed and fast == slow, (name, limit)


def test_a_file_of_several_blocks(tmp_path, monkeypatch):
    """Rows numbered on across the blocks the file is read in, widths over every block."""
    from nrtrewrite.artifacts import RecordFile
    monkeypatch.setattr(RecordFile, "CHUNK", 64)
    arr = records("dma.bin", np.random.default_rng(3).bytes(16 * 1000))
    arr["buf_ptr"][100:] = 1  # the widest cells only in the first blocks
    printed, fast, slow = both(_file(tmp_path, "dma.bin", arr), 0)
    assert printed and fast == slow
    assert fast.count("\n") == 4 + 1000 + 1  # title, top, header, rule; rows; bottom


def test_an_ascii_only_stdout_gets_rich_s_ascii_borders(tmp_path):
    """A stdout whose encoding is not UTF-8 (LANG=C): rich draws ``+``, ``-`` and ``|``."""
    arr = records("cce.bin", np.random.default_rng(9).bytes(16 * 50))
    rf = _file(tmp_path, "cce.bin", arr)
    texts = []
    for fast in (True, False):
        raw = io.BytesIO()
        f = io.TextIOWrapper(raw, encoding="ascii")
        c = Console(file=f, width=PIPED_WIDTH, force_terminal=False, color_system=None)
        if not fast or not piped_table(c, "t", rf, 0):
            assert not fast
            c.print(rich_table("t", rf, 0))
        f.flush()
        texts.append(raw.getvalue().decode("ascii"))
    assert texts[0] == texts[1] and "| 49 |" in texts[0]


def test_rows_rich_would_draw_otherwise_are_left_to_rich(tmp_path, monkeypatch):
    """The probe row must come out as the rows are written: a column rich centres (here
    made so) is not what piped_table writes, so it prints nothing and rich prints the
    table."""
    import nrtrewrite.cli.dump as D
    real = D._table

    def centred(title, name):
        table = real(title, name)
        table.columns[1].justify = "center"
        return table

    monkeypatch.setattr(D, "_table", centred)
    arr = records("sem.bin", np.random.default_rng(4).bytes(16 * 30))
    fast = console()
    assert not piped_table(fast, "t", _file(tmp_path, "sem.bin", arr), 0)
    assert fast.file.getvalue() == ""


def test_a_title_wider_than_the_table_wraps_as_rich_wraps_it(tmp_path):
    arr = np.zeros(3, F.ARTIFACTS["tpinc.bin"][0])
    printed, fast, slow = both(_file(tmp_path, "tpinc.bin", arr), 0,
                               title="a-rank-folder-with-a-long-name/tpinc.bin (3 records)")
    assert printed and fast == slow and len(fast.splitlines()[0]) < 40


def test_a_table_wider_than_the_console_is_left_to_rich(tmp_path):
    """legs.bin needs about 200 columns: in 120 rich shrinks and wraps it; nothing printed."""
    arr = records("legs.bin", np.random.default_rng(5).bytes(64 * 20))
    rf = _file(tmp_path, "legs.bin", arr)
    fast = console(120)
    assert not piped_table(fast, "t", rf, 0)
    assert fast.file.getvalue() == ""


def test_no_records_are_left_to_rich(tmp_path):
    rf = _file(tmp_path, "sem.bin", np.zeros(0, F.ARTIFACTS["sem.bin"][0]))
    assert not piped_table(console(), "t", rf, 0)


def test_cells_are_the_hand_written_forms():
    """dump's cells as docs/CLI.md shows them: hex addresses, decimal counts, names, lists."""
    sem = np.zeros(2, F.ARTIFACTS["sem.bin"][0])
    sem["ctrl"] = [20, 21 | (1 << 16)]
    sem["addr"] = [0xABC, 2**64 - 1]
    subop, role, remote, gen, value, addr = column_cells("sem.bin", sem)
    assert subop == ["WAIT_GE_AND_DEC", "INC"] and remote == ["0", "1"]
    assert addr == ["0xabc", "0xffffffffffffffff"]
    word = np.zeros(1, F.ARTIFACTS["sb2sb.bin"][0])
    word["src"]["num_elem"] = [[256, 64, 2]]
    word["dst"]["start_addr"] = 4096
    cells = dict(zip(("wait_mode", "wait_idx", "update_mode", "update_idx", "semaphore_value",
                      "in_dtype", "num_active_channels", "src.start_addr", "src.num_elem",
                      "dst.start_addr", "dst.num_elem"), column_cells("sb2sb.bin", word)))
    assert cells["src.num_elem"] == ["[256, 64, 2]"] and cells["dst.start_addr"] == ["0x1000"]


@pytest.mark.parametrize("model, args, kinds", [
    ("c7c8", ["--algo", "ring"], ("spad", "sb2sb", "cce", "dma", "sem")),
    ("mix8", [], ("spad",)),  # the mesh overlay's columns
    ("two_node128", ["--rank", "0"], ("fifo",)),
])
def test_dump_piped_prints_every_file_as_rich_prints_it(tmp_path, model, args, kinds):
    """Through the CLI (CliRunner's stdout is no terminal): the selectors' files of a
    lowering, all rows, equal to the rich tables of the same files."""
    from click.testing import CliRunner

    from conftest import FIXTURES
    from nrtrewrite.cli import main
    from nrtrewrite.cli.dump import KIND_FILES, fifo_channels
    out = tmp_path / "o"
    res = CliRunner().invoke(main, ["lower", str(FIXTURES / f"{model}.neff"), "-o", str(out),
                                    "--quiet", *args])
    assert res.exit_code == 0, res.output
    rdir = sorted(out.glob("rank-*"))[-1]
    for kind in kinds:
        names = KIND_FILES[kind]
        res = CliRunner().invoke(main, ["dump", f"--{kind}", str(rdir), "--limit", "0"])
        assert res.exit_code == 0, res.output
        want = console()
        for name in names:
            rf = open_records(rdir / name)
            want.print(rich_table(f"{rdir.name}/{name} ({rf.size} records)", rf, 0,
                                  fifo_channels(rdir, name, rf.size)))
        assert res.output == want.file.getvalue(), kind
