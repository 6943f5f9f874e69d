"""``cli.print_table`` on a piped console writes a table of plain one-line cells row by row
(``_print_rows``) instead of letting rich lay out every row: the text must be exactly what
rich prints for the table (the reference: ``console.print`` of the same table, measured and
widened as ``print_table`` does), for any cells, or rich prints it."""

from __future__ import annotations

import io
import random
from pathlib import Path

import pytest
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from nrtrewrite import cli
from nrtrewrite.cli import FAST_ROWS, print_table


def console(width: int = 132) -> Console:
    """A piped console, as ``stdout_console`` makes it when stdout is no terminal."""
    return Console(file=io.StringIO(), width=width, force_terminal=False, color_system=None)


def rich_print(table: Table, width: int = 132) -> str:
    """What rich itself prints for ``table`` under ``print_table``'s rules (every column
    folds and is held to LONG_CELL; a table wider than the console is drawn as wide as it
    needs), with the row-by-row path turned off."""
    con = console(width)
    saved = cli._plain_columns
    cli._plain_columns = lambda console, table: None
    try:
        print_table(con, table)
    finally:
        cli._plain_columns = saved
    return con.file.getvalue()


def fast_print(table: Table, width: int = 132) -> str:
    con = console(width)
    print_table(con, table)
    return con.file.getvalue()


def make(rows: list[list], *, justify=("left",), title="t", caption=None, min_width=None,
         **options) -> Table:
    table = Table(title=title, caption=caption, min_width=min_width, **options)
    for i in range(len(rows[0]) if rows else 2):
        table.add_column(f"c{i}", justify=justify[i % len(justify)])
    for row in rows:
        table.add_row(*row)
    return table


def twice(build) -> tuple[str, str]:
    """``build()`` printed by rich and by ``print_table`` (each gets its own table: rich's
    path changes the columns it prints)."""
    return rich_print(build()), fast_print(build())


CELLS = ["0", "12345", "[0, 4096)", "empty", "CHUNK_H1", "a b  c", "100%", "x", "xx", "y",
         "", "direct_reduce_send_kangaring", "EVT_GLOBAL_HNDSHK", "-", "9>=1 10>=2"]


@pytest.mark.parametrize("seed", range(40))
def test_random_plain_tables_print_as_rich_prints_them(seed):
    rng = random.Random(seed)
    ncols = rng.randint(1, 8)
    nrows = rng.choice([FAST_ROWS, FAST_ROWS + 1, 50, 300])
    rows = [[rng.choice(CELLS) for _ in range(ncols)] for _ in range(nrows)]
    justify = tuple(rng.choice(["left", "right"]) for _ in range(ncols))
    title = rng.choice(["t", "a title of some length " * rng.randint(1, 8)])
    caption = rng.choice([None, "a caption"])
    min_width = rng.choice([None, 10, 150])
    opts = rng.choice([{}, {"box": box.SIMPLE}, {"show_header": False}, {"padding": (0, 2)},
                       {"show_edge": False}, {"expand": True}, {"box": None}])
    ref, fast = twice(lambda: make(rows, justify=justify, title=title, caption=caption,
                                   min_width=min_width, **opts))
    assert fast == ref


@pytest.mark.parametrize("box_", [box.SIMPLE, box.MINIMAL, box.ASCII, box.ROUNDED, box.MARKDOWN,
                                  None])
@pytest.mark.parametrize("edge", [True, False])
def test_a_table_with_nothing_above_its_rows_starts_with_its_first_row(box_, edge):
    """No title, no header and no top edge: the first line is the first row (the rows were
    once preceded by an empty line, the join of no lines above them; a mutation audit)."""
    rows = [[f"r{i}", str(7 * i)] for i in range(20)]
    ref, fast = twice(lambda: make(rows, justify=("left", "right"), title=None,
                                   show_header=False, show_edge=edge, box=box_))
    assert fast == ref
    if not edge or box_ is None:  # (no top edge: the rows come first)
        assert fast.splitlines()[0].split()[0] == "r0"


@pytest.mark.parametrize("options, justify", [({"show_lines": True}, "left"), ({}, "center"),
                                              ({"show_lines": True}, "center")])
def test_lines_between_rows_and_centred_cells_print_as_rich_prints_them(options, justify):
    """A line between rows, and cells centred in their column (the row-by-row path draws
    neither: rich does; a mutation audit found both unguarded by the random tables)."""
    rows = [["x" * (i % 5 + 1), str(i)] for i in range(20)]
    ref, fast = twice(lambda: make(rows, justify=(justify, "right"), **options))
    assert fast == ref


#: cells wider than a column may be (LONG_CELL, or a console rich shrinks a table to): rank
#: lists, words of several spaces, unbroken runs longer than a line, a run inside words
WIDE = [" ".join(map(str, range(4, 64))), " ".join(map(str, range(1000, 1090))),
        "z" * 121, "w" * 300, "a b  c " * 30 + "d", "scatter " + "q" * 130 + " to peer j",
        "1 2 3 " + "9" * 119 + " 4", "x" * 119 + "  y", "e" * 240 + " f" * 5,
        "handshake with the node's peers on other devices or nodes, " * 4 + "end"]


@pytest.mark.parametrize("seed", range(60))
def test_random_tables_with_cells_wider_than_their_column(seed):
    """Cells rich wraps inside their column (``print_table``'s LONG_CELL, or ``print_plain``
    at a console narrower than the table: rich shrinks the widest columns): every such cell
    wrapped as rich wraps it, the row's other cells padded below, byte for byte."""
    rng = random.Random(seed)
    ncols = rng.randint(1, 7)
    nrows = rng.choice([FAST_ROWS, FAST_ROWS + 3, 40, 200])
    pool = CELLS + WIDE + [f"{rng.choice(WIDE)[:rng.randint(20, 200)].strip()}"
                           for _ in range(6)]
    rows = [[rng.choice(pool) if rng.random() < 0.6 else rng.choice(CELLS)
             for _ in range(ncols)] for _ in range(nrows)]
    justify = tuple(rng.choice(["left", "right"]) for _ in range(ncols))
    title = rng.choice(["t", "events (semaphore = sema_shift_offset + event)"])
    caption = rng.choice([None, "a caption"])
    opts = rng.choice([{}, {"box": box.SIMPLE}, {"show_header": False}, {"padding": (0, 2)},
                       {"show_edge": False, "pad_edge": False}, {"box": None},
                       {"min_width": 150}, {"expand": True}])
    width = rng.choice([60, 132, 200])

    def build() -> Table:
        table = make(rows, justify=justify, title=title, caption=caption, **opts)
        for column in table.columns:  # (print_table folds every column; print_plain's own)
            column.overflow = rng.choice(["fold", "fold", "crop"])
        return table

    state = rng.getstate()
    ref = rich_print(build(), width)
    rng.setstate(state)
    assert fast_print(build(), width) == ref
    con = console(width)  # print_plain: rich's own layout, a table shrunk to the console
    rng.setstate(state)
    con.print(build())
    rng.setstate(state)
    plain = console(width)
    cli.print_plain(plain, build())
    assert plain.file.getvalue() == con.file.getvalue()


def test_a_folded_cell_is_wrapped_as_rich_wraps_it_not_left_to_rich(monkeypatch):
    """``schedule``'s events table of a 64-rank mesh: the ranks 4..63 (179 columns) fold at
    the piped console's 132 columns (a column is held to the console's width, at least
    LONG_CELL); the rows are written by ``_print_rows`` (rich renders the probe's cells and the
    headers, not the 40 rows), and the folded cell reads, worked out by hand from rich's
    rules (a line breaks before the word that would pass 120 columns; the space after the
    last word stays, padded), as its two lines."""
    ranks = " ".join(map(str, range(4, 64)))

    def build() -> Table:
        table = Table(title="events")
        for col in ("event", "to", "wait"):
            table.add_column(col)
        for i in range(40):
            table.add_row(f"EVT_{i}", ranks if i % 2 else "1 2 3", "60")
        return table

    ref = rich_print(build())
    calls = []
    real = Console.render_str
    monkeypatch.setattr(Console, "render_str",
                        lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    fast = fast_print(build())
    assert fast == ref
    assert 0 < len(calls) <= 30  # (rich's own path: 240, each of the 120 cells twice)
    # "4 " .. "9 " take 6 x 2 = 12 columns and each of "10 " .. "49 " 3 more: 132, the word
    # "49" (2) fitting the 3 left after "48 "; "50" finds none left and starts the next line
    first = " ".join(map(str, range(4, 50))) + " "
    second = " ".join(map(str, range(50, 64)))
    assert len(first) == 132
    lines = fast.splitlines()
    at = next(i for i, text in enumerate(lines) if "EVT_1 " in text)
    assert lines[at] == f"\u2502 EVT_1  \u2502 {first} \u2502 60   \u2502"
    assert lines[at + 1] == f"\u2502        \u2502 {second:<132} \u2502      \u2502"


@pytest.mark.parametrize("cell", [
    ":thumbs_up:",  # an emoji code
    " lead", "trail ",  # a right-justified column drops the trailing space
    "two\nlines",
    "tab\there",
    "\u00e9t\u00e9",  # not ASCII (rich measures cells, not characters)
    "w" * 300,  # wider than LONG_CELL: rich folds it
])
def test_cells_rich_would_change_are_left_to_rich(cell):
    rows = [["a", "1"]] * (FAST_ROWS + 3) + [[cell, "2"]]
    ref, fast = twice(lambda: make(rows, justify=("left", "right")))
    assert fast == ref
    assert cli._plain_widths(console(), make(rows)) is None or cell.startswith("w")


@pytest.mark.parametrize("opts", [
    {"padding": (1, 1)},  # a blank line above and below every row
    {"padding": (0, 1, 1, 1)},
    # a box whose last row is drawn with other edges than the rows above it
    {"box": box.Box("\u250c\u2500\u252c\u2510\n\u2502 \u2502\u2502\n\u251c\u2500\u253c\u2524\n"
                    "\u2502 \u2502\u2502\n\u251c\u2500\u253c\u2524\n\u251c\u2500\u253c\u2524\n"
                    "\u2503 \u2503\u2503\n\u2514\u2500\u2534\u2518\n")},
])
def test_rows_rich_draws_unlike_the_probes_row_are_left_to_rich(opts):
    """The probe's one row is the table's first and last: a cell's padding above and below
    is drawn once for it, and a box may draw the last row (the probe's) with other edges.
    Written row by row, 20 rows had one blank line above them all (until 2026-12-06)."""
    rows = [["a", str(i)] for i in range(20)]
    ref, fast = twice(lambda: make(rows, **opts))
    assert fast == ref
    assert cli._plain_widths(console(), make(rows, **opts)) is None


@pytest.mark.parametrize("seed", range(12))
def test_markup_cells_print_as_rich_draws_them(seed):
    """``explain``'s candidates: ``[green]yes[/]`` and ``[red]no[/]`` cells (drawn ``yes``
    and ``no`` on a plain console), a reason ``Text`` rich wraps at a column it shrinks to
    the console; ``print_plain`` (as ``console.print``) and ``print_table``."""
    rng = random.Random(seed)
    yes, no = "[green]yes[/]", "[red]no[/]"
    reasons = ["always legal (the fallback)", "1 KiB below op_min_limit[ALLREDUCE] 1 MiB",
               "policy gate: SINGLE_CYCLE_RING is inter-node only (group lies within one "
               "node; --algo may force it)", "needs an UltraServer pod (enable_pod); topology "
               "trn2 has no pods", "\\[1] escaped", "[bold]strong[/bold] words"]
    rows = [[rng.choice(["->", ""]), rng.choice(["MESH (2)", "RING (0)", "HIER (1)"]),
             "enc_can_post_mesh_operation", rng.choice([yes, no]), rng.choice([yes, no, "-"]),
             rng.choice([yes, no]), Text(rng.choice(reasons))]
            for _ in range(rng.choice([FAST_ROWS, 11, 30]))]

    def build() -> Table:
        table = Table(title="candidates (every gate runs; precedence order)",
                      title_justify="left", show_edge=False, pad_edge=False)
        for col in ("", "engine", "predicate", "legal", "window", "lowerable", "reason"):
            table.add_column(col, overflow="fold")
        for row in rows:
            table.add_row(*row)
        return table

    width = rng.choice([80, 132])
    ref, fast = console(width), console(width)
    ref.print(build())
    cli.print_plain(fast, build())
    assert fast.file.getvalue() == ref.file.getvalue()
    assert cli._plain_widths(console(width), build())[3] == (3 if any(
        row[3] == yes for row in rows) else 2)  # (as drawn: "yes", "no")
    ref, fast = twice(build)
    assert fast == ref


def test_markup_rich_refuses_is_left_to_rich():
    rows = [["a", "1"]] * FAST_ROWS + [["[/bold]", "2"]]
    assert cli._plain_widths(console(), make(rows)) is None


def test_text_cells_and_a_column_of_empty_cells():
    rows = [[Text(f"name{i}", style="bold"), "", str(i * 1000)] for i in range(40)]
    ref, fast = twice(lambda: make(rows, justify=("left", "left", "right")))
    assert fast == ref


def test_a_table_wider_than_the_console_is_drawn_as_wide_as_it_needs():
    rows = [[f"{i:0{90}d}", "b" * 100] for i in range(30)]
    ref, fast = twice(lambda: make(rows))
    assert fast == ref
    assert max(map(len, fast.splitlines())) > 132


def test_rows_are_not_laid_out_by_rich(monkeypatch):
    """A 5,000-row table: rich renders the cells of the two one-row probes and the headers,
    not the rows (the rich path renders every cell: 15,000 here)."""
    rows = [[str(i), f"[{i}, {i + 7})", "recv_reduce_copy"] for i in range(5000)]
    ref = rich_print(make(rows))
    calls = []
    real = Console.render_str
    monkeypatch.setattr(Console, "render_str",
                        lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    assert fast_print(make(rows)) == ref
    assert 0 < len(calls) <= 60


def test_a_terminal_or_a_short_table_is_left_to_rich():
    rows = [["a", "b"]] * (FAST_ROWS - 1)
    assert cli._plain_widths(console(), make(rows)) is None
    tty = Console(file=io.StringIO(), width=132, force_terminal=True)
    assert cli._plain_widths(tty, make(rows * 3)) is None
    assert cli._plain_widths(console(), make(rows * 3)) == [1, 1]


@pytest.mark.parametrize("seed", range(20))
def test_print_plain_prints_as_console_print(seed):
    """``print_plain`` (explain's overview) keeps rich's own layout: a table wider than the
    console is shrunk by rich (its no_wrap cells cut), so the probe's row is not the runs
    and rich prints it."""
    rng = random.Random(seed)
    ncols = rng.randint(1, 8)
    rows = [[rng.choice(CELLS) * rng.choice([1, 1, 1, 3]) for _ in range(ncols)]
            for _ in range(rng.choice([FAST_ROWS, 40, 200]))]

    def build():
        table = Table(title="200 triggers", caption="--trigger K explains trigger K in full")
        for i in range(ncols):
            table.add_column(f"c{i}", no_wrap=rng.random() < 0.5)
        for row in rows:
            table.add_row(*row)
        return table

    width = rng.choice([60, 132, 200])
    ref, fast = console(width), console(width)
    state = rng.getstate()
    ref.print(build())
    rng.setstate(state)
    cli.print_plain(fast, build())
    assert fast.file.getvalue() == ref.file.getvalue()


def _both(printer, build, width: int = 132) -> tuple[str, str]:
    """``build()`` printed by ``printer`` with the row-by-row path off (rich) and on."""
    ref, fast = console(width), console(width)
    saved = cli._plain_columns
    cli._plain_columns = lambda console, table: None
    try:
        printer(ref, build())
    finally:
        cli._plain_columns = saved
    printer(fast, build())
    return ref.file.getvalue(), fast.file.getvalue()


def _one_column(rows, **column) -> Table:
    table = Table(width=column.pop("table_width", None))
    table.add_column("c0", **column)
    for row in rows:
        table.add_row(row)
    return table


#: tables a report-only review printed differently from rich (none a command prints):
#: an escaped bracket, a middle-aligned column beside a cell wrapped over 3 lines, a
#: column whose least width is more than the console's (rich crops each line), a table
#: given a width its columns draw wider than
REVIEWED = {
    "escaped bracket": (cli.print_table, lambda: _one_column(["x\\[1]"] * 4), 132),
    "middle beside a wrapped cell": (cli.print_table, lambda: make(
        [["x", " ".join(["y" * 67] * 3)]] * 4, title=None), 132),
    "least width past the console": (cli.print_plain, lambda: _one_column(
        ["a", "bbbb cccc dddd", "d", "e"], min_width=30, overflow="crop"), 12),
    "table width": (cli.print_table, lambda: _one_column(
        ["a", "bbbb cccc dddd", "d", "e"], min_width=30, no_wrap=True, justify="right",
        table_width=20), 10),
}


@pytest.mark.parametrize("case", REVIEWED)
def test_tables_a_review_found_print_as_rich_prints_them(case):
    printer, build, width = REVIEWED[case]
    if case.startswith("middle"):
        def build(plain=build):  # (the first column middle-aligned)
            table = plain()
            table.columns[0].vertical = "middle"
            return table
    ref, fast = _both(printer, build, width)
    assert fast == ref
    if case == "escaped bracket":  # (rich's markup draws the escape as the bracket)
        assert "x[1]" in fast and "\\" not in fast


def test_a_table_printed_inside_a_capture_is_captured():
    con = console()
    with con.capture() as captured:
        print_table(con, make([["a", "b"]] * FAST_ROWS))
    assert con.file.getvalue() == "" and "a" in captured.get()


def _mesh64(tmp_path) -> str:
    """A 64-rank model (trn2, lnc 2: one node) of three small collectives, which MESH lowers:
    its events tables list the ranks 4..63, 179 columns, in a cell."""
    from nrtrewrite.neff.assembler import assemble_spec

    body = [{"all_reduce": {"dtype": "bf16", "op": "add", "src": "x_in", "dst": "x_out",
                            "num_elements": 64 * 64}},
            {"all_gather": {"dtype": "fp16", "src": "x_in", "dst": "x_out", "num_elements": 96}},
            {"reduce_scatter": {"dtype": "fp8_e4", "op": "add", "src": "x_in", "dst": "x_out",
                                "num_elements": 64 * 80}}]
    spec = {"header": {"pkg_version": 2, "name": "mesh64", "lnc_size": 2},
            "subgraphs": [{"name": "sg00",
                           "vars": [{"name": "x_in", "type": "input", "size": 65536},
                                    {"name": "x_out", "type": "output", "size": 65536}],
                           "replica_groups": ["0..63"], "engines": {"sp": body}}]}
    path = tmp_path / "mesh64.neff"
    path.write_bytes(assemble_spec(spec))
    return str(path)


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.mark.parametrize("args", [
    ("schedule", "{mesh64}", "--rank", "0", "--algo", "MESH", "--all", "--limit", "0"),
    ("schedule", "{mesh64}", "--rank", "37", "--algo", "MESH"),
    ("schedule", f"{FIXTURES}/mix8.neff", "--rank", "3", "--all"),
    ("explain", "{mesh64}", "--all", "--algo", "MESH"),
    ("explain", f"{FIXTURES}/mix8.neff", "--all"),
    ("explain", f"{FIXTURES}/two_node128.neff", "--all", "--rank", "100"),
    ("explain", f"{FIXTURES}/node64.neff", "--all"),
    ("explain", "--op", "allreduce", "--bytes", "64MiB", "--ranks", "128"),
])
def test_commands_print_what_rich_prints(args, tmp_path, monkeypatch):
    """``schedule`` and ``explain`` piped: the same bytes as rich laying out every table
    itself, and some tables written row by row (the 64-rank mesh's with folded rank lists,
    ``explain``'s with wrapped reasons)."""
    from click.testing import CliRunner

    from nrtrewrite.cli import main

    if "{mesh64}" in args:
        args = tuple(a.replace("{mesh64}", _mesh64(tmp_path)) for a in args)

    def run() -> str:
        res = CliRunner().invoke(main, list(args), env={}, catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return res.stdout

    written = []
    real = cli._print_rows
    monkeypatch.setattr(cli, "_print_rows", lambda *a: written.append(real(*a)) or written[-1])
    fast = run()
    assert any(written)
    monkeypatch.setattr(cli, "_plain_columns", lambda console, table: None)
    assert run() == fast
