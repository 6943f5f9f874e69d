"""``dump`` on a terminal (and a piped table too wide for ``piped_table``) prints more than
``PAGE_ROWS`` rows as consecutive rich tables of that many (``cli/dump.paged_tables``): every
row once, in order, with the cells of the record-at-a-time reference (``rich_table``), the
columns of every table as wide as the first's, and up to a page exactly the one table rich
printed before."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from click.testing import CliRunner
from rich.console import Console

import nrtrewrite.cli.dump as dump
from nrtrewrite.artifacts import open_records
from nrtrewrite.cli import main
from nrtrewrite.emit import formats as F

from test_dump_json_columns import records

NAMES = sorted(F.ARTIFACTS)


def _file(tmp_path, name: str, arr: np.ndarray):
    path = tmp_path / name
    path.write_bytes(arr.tobytes())
    return open_records(path)


def _rows(table) -> list[tuple[str, ...]]:
    return list(zip(*(col._cells for col in table.columns)))


def _random_file(tmp_path, name: str, n: int, seed: int):
    rng = np.random.default_rng(seed)
    arr = records(name, rng.bytes(F.ARTIFACTS[name][0].itemsize * n))
    if name == "spad.bin":
        arr["alg"] = rng.integers(0, 256, arr.size)
    return arr, _file(tmp_path, name, arr)


def _terminal(width: int = 400) -> Console:
    return Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)


@pytest.mark.parametrize("name", NAMES)
def test_pages_hold_every_row_once_in_order(tmp_path, monkeypatch, name):
    monkeypatch.setattr(dump, "PAGE_ROWS", 128)
    _, rf = _random_file(tmp_path, name, 600, 11 + len(name))
    for limit, n in ((0, 600), (300, 300), (129, 129)):
        tables = list(dump.paged_tables("t", rf, limit))
        assert len(tables) == math.ceil(n / 128)
        starts = range(0, n, 128)
        titles = [f"t: rows {a} - {min(a + 128, n) - 1}" for a in starts]
        assert [str(t.title) for t in tables] == titles
        rows = [r for t in tables for r in _rows(t)]
        assert rows == _rows(dump.rich_table("t", rf, limit))  # record by record
        assert [r[0] for r in rows] == [str(i) for i in range(n)]


@pytest.mark.parametrize("limit", [0, 5, 128])
def test_up_to_a_page_is_the_one_rich_table(tmp_path, monkeypatch, limit):
    monkeypatch.setattr(dump, "PAGE_ROWS", 128)
    _, rf = _random_file(tmp_path, "sem.bin", 128, 5)
    (table,) = dump.paged_tables("t", rf, limit)
    a, b = _terminal(), _terminal()
    a.print(table)
    b.print(dump.rich_table("t", rf, limit))
    assert a.file.getvalue() == b.file.getvalue()
    assert str(table.title) == "t"


def _page_lines(rf) -> list[list[str]]:
    """The header and row lines of each table ``paged_tables`` makes of ``rf``."""
    pages = []
    for table in dump.paged_tables("t", rf, 0):
        c = _terminal()
        c.print(table)
        pages.append([ln for ln in c.file.getvalue().splitlines() if ln[:1] in "┃│"])
    return pages


@pytest.mark.parametrize("widest", [0, 12, 34])
def test_no_column_narrows_from_one_page_to_the_next(tmp_path, monkeypatch, widest):
    """The widest buf_ptr in one row only (the file read in blocks of 8 records): the
    tables before its page are narrower, its page and every later one as wide as it."""
    from nrtrewrite.artifacts import RecordFile
    monkeypatch.setattr(RecordFile, "CHUNK", 8)
    monkeypatch.setattr(dump, "PAGE_ROWS", 10)
    arr = records("dma.bin", np.zeros(16 * 35, np.uint8).tobytes())
    arr["buf_ptr"][widest] = (1 << 40) - 1  # 0xffffffffff, where the others are 0x0
    pages = _page_lines(_file(tmp_path, "dma.bin", arr))
    assert [len(p) for p in pages] == [11, 11, 11, 6]  # a header line, the rows
    # (the meta column, bit 23 of word 0, since 2026-12-07: review 57i)
    narrow = len("│  0 │ M2S │ 0      │ 0       │ 65536  │ 0     │ 0    │ 0    │ 0   │ buf_ptr │")
    for k, lines in enumerate(pages):
        assert {len(ln) for ln in lines} == {narrow + 5 if k >= widest // 10 else narrow}
        if k >= widest // 10:
            row = next(ln for ln in lines[1:] if not ln.startswith("│ %2d │" % widest))
            assert row.split("│")[-2] == " 0x0          "  # as wide as 0xffffffffff


def test_a_piped_table_too_wide_for_the_console_is_paged(tmp_path, monkeypatch):
    """``piped_table`` leaves it to rich (drawn as wide as it needs); it comes out in pages
    too."""
    monkeypatch.setattr(dump, "PAGE_ROWS", 50)
    _, rf = _random_file(tmp_path, "legs.bin", 120, 3)
    c = Console(file=io.StringIO(), width=60, force_terminal=False, color_system=None)
    assert not dump.piped_table(c, "t", rf, 0)
    tables = list(dump.paged_tables("t", rf, 0))
    assert [len(_rows(t)) for t in tables] == [50, 50, 20]


@pytest.mark.parametrize("width", [40, 80, 120])
def test_pages_wider_than_the_console_lose_no_column_and_cut_no_cell(tmp_path, monkeypatch,
                                                                     width):
    """On a terminal too narrow for a page, the page is drawn as wide as it needs
    (``cli.print_table``; the terminal wraps its lines): every column there and every cell
    whole.  rich fitted it to the window: at 120 columns it dropped sem_count and
    sb2sb_count (a second exploratory tester), and at 80 it blanked 11 of legs.bin's 17
    columns and cut numbers to ``2…`` (a later one)."""
    from nrtrewrite.cli import print_table
    monkeypatch.setattr(dump, "PAGE_ROWS", 50)
    _, rf = _random_file(tmp_path, "legs.bin", 120, 3)
    columns = len(dump.COLUMNS["legs.bin"])
    assert dump.COLUMNS["legs.bin"][-2:] == ("sem_count", "sb2sb_count")
    first = 0
    widths = set()
    for table in dump.paged_tables("t", rf, 0):
        c = _terminal(width)
        print_table(c, table)
        assert c.width == width  # the console's own width again afterwards
        lines = c.file.getvalue().splitlines()
        assert "…" not in c.file.getvalue()
        header = next(ln for ln in lines if ln.startswith("┃"))
        assert header.count("┃") == columns + 2  # the row number, every field, two ends
        assert [h.strip() for h in header.split("┃")[1:-1]] == ["#", *dump.COLUMNS["legs.bin"]]
        rows = [ln for ln in lines if ln.startswith("│")]
        for k, ln in enumerate(rows):
            cells = [x.strip() for x in ln.split("│")[1:-1]]
            assert cells[0] == str(first + k)
        # each cell as column_cells decodes it, whole
        got = [[x.strip() for x in ln.split("│")[2:-1]] for ln in rows]
        want = list(zip(*(map(str, col) for col in (c_._cells for c_ in table.columns[1:]))))
        assert [tuple(r) for r in got] == want
        first += len(rows)
        widths.add(max(map(len, lines)))
    assert first == 120
    assert min(widths) > width  # wider than the window: drawn at its own width


def test_a_table_that_fits_is_fitted_to_the_console(tmp_path):
    """A table no wider than the console is printed as rich prints it: print_table changes
    nothing then."""
    from nrtrewrite.cli import print_table
    _, rf = _random_file(tmp_path, "sem.bin", 20, 4)
    (table,) = dump.paged_tables("t", rf, 0)
    a, b = _terminal(400), _terminal(400)
    a.print(table)
    print_table(b, table)
    assert a.file.getvalue() == b.file.getvalue()


def test_the_command_on_a_terminal_prints_pages(tmp_path, monkeypatch):
    """``dump`` with a terminal stdout: the pages, then the count of rows not shown."""
    monkeypatch.setattr(dump, "PAGE_ROWS", 7)
    out = io.StringIO()
    monkeypatch.setattr(dump, "stdout_console",
                        lambda width: Console(file=out, width=300, force_terminal=True,
                                              color_system=None))
    arr, _ = _random_file(tmp_path, "sem.bin", 30, 8)
    rdir = tmp_path / "rank-0003"
    rdir.mkdir()
    (rdir / "sem.bin").write_bytes(arr.tobytes())
    res = CliRunner().invoke(main, ["dump", str(rdir / "sem.bin"), "--limit", "20"])
    assert res.exit_code == 0, res.output
    text = out.getvalue()
    assert [ln.strip() for ln in text.splitlines() if "rows" in ln] == [
        f"rank-0003/sem.bin (30 records): rows {a} - {b}"
        for a, b in ((0, 6), (7, 13), (14, 19))]
    assert text.rstrip().endswith("... 10 more records (--limit 0 shows all)")


@pytest.mark.parametrize("width", [80, 240])
def test_a_very_long_cell_wraps_inside_its_column(width):
    """An exploratory tester: a replica group of 20,000 ranks (``inspect``'s ``ranks``) was
    cut at 65,536 columns and padded every row of its table that wide.  It wraps inside a
    column of at most max(console width, LONG_CELL) now, every rank shown."""
    from rich.table import Table

    from nrtrewrite.cli import LONG_CELL, print_table
    ranks = " ".join(str(r) for r in range(0, 40000, 2))
    table = Table(title="replica groups")
    for col in ("group", "size", "ranks"):
        table.add_column(col)
    table.add_row("0", "20000", ranks)
    c = _terminal(width)
    print_table(c, table)
    text = c.file.getvalue()
    assert "…" not in text
    lines = text.splitlines()
    cap = max(width, LONG_CELL)
    assert max(map(len, lines)) <= cap + len("│ group │ 20000 │  │") + 2
    cells = " ".join(ln.split("│")[3].strip() for ln in lines if ln.startswith("│"))
    assert cells.split() == ranks.split()
