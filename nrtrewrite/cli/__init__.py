"""The command-line layer: the only place (with the per-command modules here) that prints.

Each command lives in its own module and registers itself on :data:`main`.
"""

from __future__ import annotations

import codecs
import contextlib
import copy
import errno
import importlib
import io
import json
import os
import re
import signal
import sys
from collections.abc import Sequence
from itertools import chain
from typing import NoReturn

import click
from click.utils import format_filename
from rich.console import Console
from rich.text import Text

from nrtrewrite import __version__
from nrtrewrite.cli.commands import COMMANDS
from nrtrewrite.console import exit_status
from nrtrewrite.errors import (NrtRewriteError, ParseError, counted, cut_line, cut_middle,
                               escape_controls, escape_line, escape_path, path_text,
                               raised_from)


def plain(text: str, style: str = "") -> Text:
    """``text`` (a path, a name from a model, a title of our words and such names) as a rich
    ``Text``: never read as markup or emoji codes, escaped once as error lines show a name
    (``errors.escape_controls``: a backslash doubled, control characters escaped).  (Markup
    escaping is not enough: rich's ``escape`` leaves ``\\[1]`` alone and its renderer still
    eats the backslash, doubles a trailing one, and turns ``:thumbs_up:`` into an emoji.)
    Join it to markup with ``Text.assemble`` or :func:`styled`, never in an f-string.  A
    message whose names are escaped already (an error's line, a reason): :func:`plain_line`."""
    return Text(encodable(escape_controls(text)), style=style)


def plain_line(text: str, style: str = "") -> Text:
    """:func:`plain` for a message whose names were escaped where they were put in (an
    error's ``line()``, a reason quoting names with ``repr``): only its control characters
    escaped (``errors.escape_line``), its backslashes kept."""
    return Text(encodable(escape_line(text)), style=style)


def encodable(text: str, stream=None) -> str:
    """``text`` with what the standard output's encoding (``stream``'s) cannot hold escaped
    (``\u6743``) before rich lays it out: escaped by the stream afterwards, it made cells
    wider than rich measured them and the table's columns misaligned (a Latin-1 or ASCII
    locale)."""
    encoding = getattr(stream or sys.stdout, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
        return text
    except UnicodeEncodeError:
        return text.encode(encoding, "backslashreplace").decode(encoding)
    except LookupError:  # an encoding Python does not know: leave it to the stream
        return text


def styled(*parts) -> Text:
    """One line from ``parts``: a ``str`` is our own rich markup (no emoji codes), a ``Text``
    (from :func:`plain`) is kept as it is."""
    out = Text()
    for part in parts:
        out.append(Text.from_markup(part, emoji=False) if isinstance(part, str) else part)
    return out


def is_tty(stream) -> bool:
    """Whether ``stream`` is a terminal, by the stream itself (rich's ``is_terminal`` also
    believes ``FORCE_COLOR`` and ``TTY_COMPATIBLE``, which CI systems set)."""
    try:
        return stream is not None and stream.isatty()
    except (ValueError, OSError):  # closed, or no descriptor
        return False


class _Console(Console):
    """rich's console, but for a closed pipe: rich ends the process with status 1, which
    reads as ``diff``'s "the outputs differ"; ours is 128 + SIGPIPE, as everywhere else."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        _quiet_closed_pipe()
        raise SystemExit(STATUS_CLOSED_PIPE)


def print_table(console: Console, table) -> None:
    """Print ``table`` cutting and dropping nothing.  rich fits a table wider than the console
    by cutting cells (98304 shown as ``983…``) and, below its columns' least widths, by
    blanking whole columns.  Here a table wider than the console is drawn as wide as it needs
    (on a terminal its lines wrap; ``less -S`` scrolls them), and a cell wider than the
    console (at least :data:`LONG_CELL` columns), a list of 20,000 ranks, wraps inside its
    column instead of making every row that wide (docs/CLI.md, "Output")."""
    cap = max(console.width, LONG_CELL)
    for column in table.columns:
        column.overflow = "fold"  # a cell wider than its column wraps: never "…"
        if column.max_width is None or column.max_width > cap:
            column.max_width = cap
    columns = _plain_columns(console, table)
    widths = _widths_of(columns)
    probe = None if widths is None else _probe(table, widths)
    # (a probe measures as its table: each column's widest cell is as wide in both)
    need = console.measure(probe or table,
                           options=console.options.update_width(_UNBOUNDED)).maximum
    saved = console._width  # rich's own: None while it follows the terminal's width
    if need > console.width:
        console.width = need
    title = table.title
    try:
        if _title_apart(console, table, need):
            if probe is not None:
                probe.title = None
        if probe is None or not _print_rows(console, table, columns, widths, probe):
            console.print(table)
    finally:
        console._width = saved
        table.title = title


def _title_apart(console: Console, table, width: int) -> bool:
    """Print ``table``'s title on a line of its own, whole, and take it off the table, where
    it is wider than the table (``width`` columns): rich wrapped it at the table's width,
    and a path in it (``lower``'s ``MODEL -> OUT``, ``simulate``'s ``simulate OUT (seed
    S)``, ``dump``'s rank folder) was split across lines (docs/CLI.md "Paths in the
    output"; until 2026-12-07).  A title that fits stays the table's, as rich lays it out.
    False when the title stays."""
    title = table.title
    if title is None:
        return False
    text = title if isinstance(title, Text) else console.render_str(title, highlight=False)
    if text.cell_len <= width:
        return False
    table.title = None
    console.print(text, style=table.title_style or "table.title", highlight=False,
                  soft_wrap=True)
    return True


def print_plain(console: Console, table) -> None:
    """``console.print(table)``, rich's own layout (a table wider than the console shrunk to
    it, unlike :func:`print_table`), but a piped table of plain cells written row by row
    (:func:`_print_rows`), the same bytes."""
    columns = _plain_columns(console, table)
    widths = _widths_of(columns)
    if widths is None or not _print_rows(console, table, columns, widths,
                                         _probe(table, widths)):
        console.print(table)


#: rows from which a piped table is written row by row (:func:`_print_rows`) rather than
#: laid out by rich (about a millisecond a row): the one-row probe costs what rich takes for
#: one row (2.7 ms of CPU either way; 2 rows, 2.8 ms against rich's 3.9 ms; 7 rows of
#: `schedule`'s events, 3.5 ms against 8 ms).  (16 until 2026-12-06, when the probe was
#: drawn twice.)
FAST_ROWS = 4
#: a cell rich shows as it is (one line, no markup, no emoji code, no control character, no
#: space at either end that a right-justified column would drop)
_PLAIN_CELL = re.compile(r"(?:[!-~](?:[ -~]*[!-~])?)?\Z")
_EMOJI_CODE = re.compile(r":\S*:")


def _plain_widths(console: Console, table) -> list[int] | None:
    """Each column's widest cell where ``table`` may be written row by row on ``console``
    (:func:`_plain_columns`); None otherwise."""
    return _widths_of(_plain_columns(console, table))


def _widths_of(columns: list[list[str]] | None) -> list[int] | None:
    """Each column's widest cell (None for None)."""
    return None if columns is None else [max(map(len, cells), default=0) for cells in columns]


def _plain_columns(console: Console, table) -> list[list[str]] | None:
    """Each column's cells as rich shows them, where ``table`` may be written row by row on
    ``console`` (:func:`_print_rows`): a plain console (piped or redirected, no colour), at
    least :data:`FAST_ROWS` rows of plain cells (``str``, its markup drawn as rich draws it,
    or unstyled-layout ``Text``; printable ASCII), left- or right-justified columns, no row
    separators, no padding above or below a cell, a box whose rows are drawn alike; None
    otherwise."""
    from rich.errors import MarkupError
    from rich.markup import RE_TAGS

    if (console.is_terminal or console.color_system is not None or console.record
            or getattr(console, "_buffer_index", 0)  # (inside console.capture(): rich's)
            or table.width is not None  # (a measure its columns may draw wider than)
            or len(table.rows) < FAST_ROWS or table.show_lines or table.leading
            or any(row.end_section for row in table.rows)
            or table.padding[0] or table.padding[2] or not _rows_alike(table.box)):
        return None
    drawn: dict[str, str] = {}  # a cell of markup or an emoji code: the text rich draws
    columns = []
    for column in table.columns:
        cells = list(column.cells)  # (rich's public view of the column's cells)
        if (column.justify not in ("left", "right") or column.width is not None
                or len(cells) != len(table.rows)):
            return None
        shown = []
        for cell in cells:
            if isinstance(cell, Text):
                if (cell.justify is not None or cell.overflow is not None
                        or cell.no_wrap is not None):
                    return None
                cell = cell.plain
            elif not isinstance(cell, str):
                return None
            elif RE_TAGS.search(cell) or _EMOJI_CODE.search(cell) or "\\" in cell:
                # (a backslash may escape a bracket: rich draws "x\\[1]" as "x[1]")
                if cell not in drawn:
                    try:  # ("[green]yes[/]" is drawn "yes": style is all it adds)
                        drawn[cell] = console.render_str(cell).plain
                    except MarkupError:  # (rich says so itself)
                        return None
                cell = drawn[cell]
            if not _PLAIN_CELL.match(cell):
                return None
            shown.append(cell)
        columns.append(shown)
    return columns


def _rows_alike(box) -> bool:
    """Whether ``box`` (None: none) draws a table's rows with the same edges and dividers
    whichever row they are (the one row of a probe is the first row or the last; rich draws
    the first with the header's, the last with the footer's).  Every box rich has does but
    HEAVY_HEAD, whose header's differ, and rich draws a table without a header in SQUARE."""
    if box is None:
        return True
    plain = box.get_plain_headed_box()
    return all((b.mid_left, b.mid_vertical, b.mid_right)
               == (b.foot_left, b.foot_vertical, b.foot_right) for b in (box, plain)) and (
        (plain.head_left, plain.head_vertical, plain.head_right)
        == (plain.mid_left, plain.mid_vertical, plain.mid_right))


#: the character a probe's cells are made of (:func:`_print_rows`): a private-use code point,
#: one column wide, in no cell :func:`_plain_widths` passes (printable ASCII); a title or
#: header holding it would fail the check of the probe's row
_MARK = "\ue000"


def _probe(table, widths: list[int], char: str = _MARK):
    """``table`` with one row, each cell ``char`` as many times as its column's widest cell."""
    probe = copy.copy(table)
    probe.columns = [column.copy() for column in table.columns]
    probe.rows = []
    probe.add_row(*(char * w for w in widths))
    return probe


def _print_rows(console: Console, table, columns: list[list[str]], widths: list[int],
                probe) -> bool:
    """Print ``table`` (:func:`_plain_columns` gave its ``columns``, each column's widest
    cell ``widths``) as ``console.print`` would, byte for byte, without rich laying out its
    rows: rich draws ``probe`` (one row, each cell :data:`_MARK` as many times as its
    column's widest cell); the lines that hold the mark are the row, and in the first of
    them each run of marks is a column's cell.  A run
    as long as the column's widest cell is a column whose every cell fits on one line; a
    shorter one is a column narrower than its widest cell (folded at :data:`LONG_CELL`, or
    shrunk to the console by rich), whose longer cells rich wraps over several lines:
    those cells are wrapped by rich's own ``Text.wrap`` at the run's width and the other
    cells of their row padded below with blank lines, as rich shapes a row.  Every row of
    ``table`` is written into that line (and blank copies of it), its cells padded as the
    columns justify them.  False, nothing printed, where the probe's row is not such runs
    or where the probe's own row written so is not the lines rich drew for it."""
    from rich.measure import Measurement

    # a column's min_width (cells of one mark: no cell's own width) past the console: rich
    # crops every line at the console's edge (left to rich); Measurement.get clamps to width
    if (table.min_width is not None or any(c.min_width is not None for c in table.columns)) \
            and Measurement.get(console, console.options.update(width=2 ** 20),
                                _probe(table, [1] * len(widths))).minimum > console.width:
        return False
    with console.capture() as cap:
        console.print(probe)
    lines = cap.get().split("\n")
    marked = [i for i, text in enumerate(lines) if _MARK in text]
    if not marked or marked[-1] - marked[0] != len(marked) - 1:
        return False
    row, end = marked[0], marked[-1] + 1
    line = lines[row]
    runs = [m.span() for m in re.finditer(f"{_MARK}+", line)]
    cells = [i for i, w in enumerate(widths) if w]  # (a column of empty cells is all padding)
    if len(runs) != len(cells):
        return False
    slots = []  # each shown column: (its width in the line, its column, whether it wraps)
    for (a, b), i in zip(runs, cells):
        column = table.columns[i]
        if b - a > widths[i]:
            return False
        wraps = b - a < widths[i]
        if wraps and (column.vertical != "top" or column.overflow not in ("fold", "crop")):
            return False  # (an ellipsis or a row aligned otherwise: left to rich)
        slots.append((b - a, column, wraps))
    parts, at = [], 0
    for (a, b), (_, column, _) in zip(runs, slots):
        parts.append(line[at:a].replace("%", "%%"))
        parts.append("%-*s" if column.justify == "left" else "%*s")
        at = b
    parts.append(line[at:].replace("%", "%%"))
    fmt = "".join(parts) + "\n"
    shown_widths = [w for w, _, _ in slots]
    wrapped = [(j, w, column) for j, (w, column, wraps) in enumerate(slots) if wraps]
    if wrapped and any(column.vertical != "top" for column in table.columns):
        return False  # (rich aligns a short cell in a tall row: left to rich)

    def write_row(r) -> str:
        """One row of ``table`` (the shown columns' plain cells) as rich draws it."""
        if all(len(r[j]) <= w for j, w, _ in wrapped):
            return fmt % tuple(chain.from_iterable(zip(shown_widths, r)))
        tall = [[cell] for cell in r]
        for j, w, column in wrapped:
            if len(r[j]) > w:
                tall[j] = [part.plain[:w].ljust(w) for part in Text(r[j]).wrap(
                    console, w, justify=column.justify, overflow=column.overflow,
                    no_wrap=column.no_wrap)]
        return "".join(
            fmt % tuple(chain.from_iterable(zip(shown_widths, (
                c[k] if k < len(c) else "" for c in tall))))
            for k in range(max(map(len, tall))))

    if write_row([_MARK * widths[i] for i in cells]) != "".join(
            f"{text}\n" for text in lines[row:end]):
        return False  # (the runs are not the columns as this reads them)
    columns = [columns[i] for i in cells]
    out = console.file
    out.write("".join(f"{text}\n" for text in lines[:row]))  # (none: a table without a top)
    rows = list(zip(*columns)) if columns else [()] * len(table.rows)
    for first in range(0, len(rows), 4096):
        out.write("".join(map(write_row, rows[first:first + 4096])) if wrapped else
                  "".join(fmt % tuple(chain.from_iterable(zip(shown_widths, r)))
                          for r in rows[first:first + 4096]))
    out.write("\n".join(lines[end:]))
    out.flush()  # (as rich does after each print: a later stderr line comes after the table)
    return True


#: the width a cell may take before it wraps inside its column, where the console is narrower
LONG_CELL = 120
#: a width no table reaches (measuring a table at it gives its columns' own widths)
_UNBOUNDED = 1 << 30


#: On a terminal, the width tables, rules and progress bars are laid out at: the terminal's
#: (or ``COLUMNS``'), held to this range (docs/CLI.md, "Output").  Narrower, rich blanked
#: whole columns of ``explain``'s tables (every cell at 10 columns) and cut its headings;
#: wider, ``COLUMNS=1000000`` drew megabytes of rule and ``COLUMNS=99999999999`` ran out of
#: memory (until 2026-12-05).
TERMINAL_WIDTH_RANGE = (80, 1000)


def _held_width(console: Console) -> Console:
    """``console`` at its width held to :data:`TERMINAL_WIDTH_RANGE` (fixed: a terminal
    resized meanwhile is not followed)."""
    low, high = TERMINAL_WIDTH_RANGE
    console.width = min(max(console.width, low), high)
    return console


def stdout_console(width: int = 132, **options) -> Console:
    """A rich console on stdout.  Piped or redirected: plain text exactly ``width`` columns
    wide (rich would assume 80 and cut names and reasons), whatever ``COLUMNS``,
    ``FORCE_COLOR`` or ``TTY_COMPATIBLE`` say, so the bytes are the same on every
    machine.  On a terminal: its width, held to :data:`TERMINAL_WIDTH_RANGE`."""
    if is_tty(sys.stdout):
        return _held_width(_Console(**options))
    return _Console(width=width, force_terminal=False, color_system=None, **options)


def stderr_console() -> Console:
    """A rich console on stderr for warnings and progress; redirected, plain text and no
    progress display (``is_terminal`` False) whatever the environment says.  On a terminal:
    its width, held to :data:`TERMINAL_WIDTH_RANGE`."""
    if is_tty(sys.stderr):
        return _held_width(_Console(stderr=True))
    return _Console(stderr=True, force_terminal=False, color_system=None)


def warn(err: Console, text: str) -> None:
    """One warning line on stderr, never wrapped (rich wraps at 80 columns when piped), its
    control characters escaped and its brackets not read as markup (a path may hold either;
    a name in ``text`` is escaped where it was put in: ``errors.escape_controls``), capped
    as an error line is (:func:`_capped_line`, :data:`errors.MAX_LINE_CHARS` characters as
    written; a warning naming a path of 100,000 characters was written whole until
    2026-12-06).  Best effort: a stderr that cannot be written (``2>/dev/full``) loses the
    warning, never the command's work."""
    _stderr_line(err, "warning", "yellow", text)


def note(err: Console, text: str) -> None:
    """One note line on stderr, ``nrtrewrite: note: TEXT``: something to know that is not
    wrong (``diff`` of outputs of other versions); written as :func:`warn` writes."""
    _stderr_line(err, "note", "cyan", text)


def line_text(label: str, text: str) -> str:
    """The text of the stderr line ``nrtrewrite: LABEL: TEXT`` after its prefix, as
    written: escaped and capped with the prefix counted (:func:`_capped_line`).  Both the
    line (:func:`warn`, :func:`note`) and a ``--json`` document's ``warnings`` entries
    (docs/CLI.md "Warnings under --json") are made of it: until 2026-12-07 the entries were
    ``text`` cut alone, unescaped (a path's line break a real one) and counted without the
    prefix (``(3655 characters in all)`` where the line said 3676)."""
    prefix = f"nrtrewrite: {label}: "  # (kept whole: the cut keeps a line's first 1,500)
    return _capped_line(prefix + text)[len(prefix):]


#: ``click.Context.meta`` key of the warnings a :class:`JsonErrorCommand` carrying them has
#: given (:func:`line_text` each), for its ``--json`` documents (:func:`given_warnings`)
GIVEN_WARNINGS = "nrtrewrite.warnings"


def given_warnings() -> list[str]:
    """The warnings the running command has given on stderr, each its line's text after
    ``nrtrewrite: warning: `` (:func:`line_text`), where it carries them
    (:attr:`JsonErrorCommand.carries_warnings`: its ``--json`` documents' ``warnings``,
    docs/CLI.md "Warnings under --json"); else none."""
    ctx = click.get_current_context(silent=True)
    return list(ctx.meta.get(GIVEN_WARNINGS, ())) if ctx is not None else []


def _stderr_line(err: Console, label: str, style: str, text: str) -> None:
    written = line_text(label, text)
    ctx = click.get_current_context(silent=True)
    if label == "warning" and ctx is not None and GIVEN_WARNINGS in ctx.meta:
        ctx.meta[GIVEN_WARNINGS].append(written)
    line = Text.assemble((f"nrtrewrite: {label}:", style), " " + written)
    with contextlib.suppress(OSError, ValueError):
        err.print(line, highlight=False, soft_wrap=True)


def usage_message(err: click.UsageError) -> str:
    """``err``'s message, as click words it, but an unknown option's in one wording whatever
    click's version: ``No such option '--bogus'.``, ``Did you mean '--json'?`` or ``(Did you
    mean one of: '--rank', '--ranks'?)`` after it for close options (click 8.4's; click 8.2 -
    8.3 wrote ``No such option: --bogus Did you mean --json?``, so a usage error's line and
    its JSON document's ``"error"`` differed within the declared ``click>=8.2``; until
    2026-12-06)."""
    if not isinstance(err, click.NoSuchOption):
        return err.format_message()
    text = f"No such option {err.option_name!r}."
    close = sorted(err.possibilities or ())
    if len(close) == 1:
        text += f" Did you mean {close[0]!r}?"
    elif close:
        text += f" (Did you mean one of: {', '.join(repr(p) for p in close)}?)"
    return text


def ascii_int(value) -> int:
    """``int`` of ASCII digits with an optional sign (``int`` itself also takes other
    scripts' digits, ``４``, and ``1_000``); ``ValueError`` otherwise.  Leading zeros are
    dropped before ``int`` reads the digits (CPython counts them against its 4300 digits)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = str(value).strip()
    m = _ASCII_INT.fullmatch(text)
    if not m:
        raise ValueError(text)
    return int(m.group(1) + (m.group(2).lstrip("0") or "0"))  # (ValueError past 4300 digits)


_ASCII_INT = re.compile(r"([+-]?)([0-9]+)")

#: The most digits an integer option's value may have, as a size's (``sizes.MAX_SIZE_DIGITS``):
#: more than any rank, count or seed.  CPython reads no integer of more than 4300 digits.
#: Leading zeros are not counted (:func:`significant_digits`).
MAX_INT_DIGITS = 40


def significant_digits(digits: str) -> int:
    """How many digits the number of ASCII ``digits`` has, its leading zeros not counted
    (``0001`` has 1, ``000`` 1): what the digit limits count (docs/CLI.md "Errors"; until
    2026-12-06 they counted the zeros, so ``--rank`` 1 written with 40 zeros was refused)."""
    return len(digits.lstrip("0")) or 1


def too_many_digits(value) -> str | None:
    """The refusal of an integer option's ``value`` of more than :data:`MAX_INT_DIGITS`
    digits, leading zeros not counted (:func:`significant_digits`), as a size's is worded
    (``'999999999999...' has 5000 digits, more than 40``; until 2026-12-06 one of more than
    4300 was "not a valid integer", CPython's limit, and a shorter one was taken); None
    for any other value."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    m = _ASCII_INT.fullmatch(text)
    if m is None:
        return None
    digits = significant_digits(m.group(2))
    if digits <= MAX_INT_DIGITS:
        return None
    sign, zeros = m.group(1), len(m.group(2)) - digits
    shown = cut_middle(sign + m.group(2)[zeros:], 24, 12, 0, "{head}...")
    return f"{shown!r} has {digits} digits{after_zeros(zeros)}, more than {MAX_INT_DIGITS}"


def after_zeros(zeros: int) -> str:
    """`` after 60 leading zeros`` in a refusal of a number of too many digits shown without
    its ``zeros`` leading zeros (:func:`significant_digits`); nothing for none."""
    return f" after {counted(zeros, 'leading zero')}" if zeros else ""


class _AtMostDigits:
    """An integer type refusing a value of more than :data:`MAX_INT_DIGITS` digits."""

    def convert(self, value, param, ctx):
        if (why := too_many_digits(value)) is not None:
            self.fail(f"{why}.", param, ctx)
        return super().convert(value, param, ctx)


class Int(_AtMostDigits, click.types.IntParamType):
    """An integer option in ASCII digits, as ``--group`` and ``--bytes`` take them, of at
    most :data:`MAX_INT_DIGITS` digits."""

    _number_class = staticmethod(ascii_int)


class IntRange(_AtMostDigits, click.types.IntRange):
    """:class:`Int` within a range (``click.IntRange``'s ``min``, ``max``), named as
    :class:`Int` is: ``'x' is not a valid integer.`` and ``INTEGER`` in the help, as every
    integer option (click's ``integer range``, until 2026-12-06)."""

    name = "integer"
    _number_class = staticmethod(ascii_int)


#: The refusal of an empty path argument, every command's (``inspect ''``, ``lower -o ''``,
#: a :class:`PathArg`: click's ``File '' does not exist.`` until 2026-12-06)
EMPTY_PATH = "an empty path"


#: ``-`` given for a file to read or to write (docs/CLI.md "Standard input and output"):
#: refused, in one wording for every command (until 2026-12-07 three: click's ``File '-'
#: does not exist.``, ``-: cannot read: No such file or directory`` and ``--topology``'s
#: "neither a preset nor a readable file"; ``assemble -o -`` wrote a file named ``-``)
def dash_refusal(what: str) -> str:
    """The one wording refusing ``-`` for a file, ``what`` being the standard stream's use
    (``reading from the standard input``): :data:`DASH_READ` and :data:`DASH_WRITE`."""
    return f"-: {what} is not supported; give a path (./- for one named -)"


DASH_READ = dash_refusal("reading from the standard input")
DASH_WRITE = dash_refusal("writing to the standard output")


def is_dash(value) -> bool:
    """Whether a path as given is ``-`` (a PathLike never is: ``Path('-')`` names a file)."""
    return isinstance(value, str) and value == "-"


def dash_callback(message: str):
    """A parameter's callback refusing ``-`` (:func:`is_dash`) with ``message``
    (:data:`DASH_READ` or :data:`DASH_WRITE`), any other value returned as it is."""
    def callback(ctx: click.Context, param: click.Parameter, value):
        if is_dash(value):
            raise click.BadParameter(message, ctx=ctx, param=param)
        return value
    return callback


#: A parameter's callback refusing ``-`` as a file to read (:data:`DASH_READ`).
no_dash = dash_callback(DASH_READ)
#: A parameter's callback refusing ``-`` as a file to write (:data:`DASH_WRITE`).
no_dash_out = dash_callback(DASH_WRITE)


class PathArg(click.Path):
    """click's ``Path`` (``exists``, ``file_okay``, ``dir_okay`` as there), but its refusals
    (``Path 'X' does not exist.``, ``... is a directory.``) quote the path as every other
    message does, its bytes read as UTF-8 whatever the locale (:func:`errors.path_text`,
    docs/CLI.md "Paths in the output"), in click's ``repr`` quotes; click quoted the
    locale's text (``'nÃ¶'`` for ``nö`` under a Latin-1 locale, in the line and in
    ``--json``'s ``error``, until 2026-12-06) and a byte that is not UTF-8 as U+FFFD.  An
    empty path is :data:`EMPTY_PATH`, as ``inspect`` and ``assemble`` refuse one.  A path
    that cannot be looked at for another reason than its absence (a folder on the way the
    user may not search, EACCES; a path or a name too long, ENAMETOOLONG; a file on the
    way, ENOTDIR) is the OS's reason in the one line of an error, ``PATH: cannot read:
    Permission denied``, as ``inspect`` says it (:meth:`unreadable`; docs/CLI.md "Errors"):
    click called it ``File 'PATH' does not exist.`` until 2026-12-07."""

    def unreadable(self, value, err: OSError) -> NrtRewriteError:
        """The error of ``value`` that ``os.stat`` refused with ``err`` (not ENOENT)."""
        return ParseError(f"cannot read: {err.strerror or err}", file=os.fspath(value))

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value == "":  # (Path('') is '.', the working folder)
            self.fail(EMPTY_PATH, param, ctx)
        if is_dash(value):
            self.fail(DASH_READ, param, ctx)
        if self.exists and isinstance(value, (str, os.PathLike)):
            try:
                os.stat(value)
            except OSError as err:  # (ENOENT: click's "does not exist", below)
                if err.errno != errno.ENOENT:
                    raise self.unreadable(value, err) from None
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter as err:
            if isinstance(value, (str, os.PathLike)):
                err.message = err.message.replace(repr(format_filename(value)),
                                                  repr(path_text(value)), 1)
            raise


def options_given(*options: tuple[str, bool]) -> list[str]:
    """The names of ``options`` (each ``(name, given)``) that were given: a usage error names
    those, not every option of its group (``simulate OUT --no-verify-hash`` listed
    ``--topology, --algo, --host-cc and --no-verify-hash`` until 2026-12-06)."""
    return [name for name, given in options if given]


def and_list(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return " and ".join(filter(None, (", ".join(names[:-1]), names[-1]))) if names else ""


def verb(names: list[str], one: str, several: str) -> str:
    """``one`` (``applies``) after one name, ``several`` (``apply``) after more."""
    return one if len(names) == 1 else several


def _given_times(values) -> str:
    """The refusal of a one-value option given with different ``values``: ``given twice
    (0, 1)``, each value escaped once as a name (a user's values)."""
    times = "twice" if len(values) == 2 else f"{len(values)} times"
    return f"given {times} ({', '.join(escape_controls(str(v)) for v in values)})"


#: The end of ``--algo``'s refusal given twice: its clauses go in one value
ALGO_TWICE = ("give several clauses in one --algo, separated by ';': "
              "--algo 'allreduce:ring;allgather:ring'")


class OneValue(click.Option):
    """An option that takes one value (every option of nrtrewrite that takes a value and is
    not documented as repeatable: ``cls=OneValue``).  Given twice with different values it
    is a usage error naming them, ``Invalid value for '--seed': given twice (1, 2); --seed
    takes one value`` (click kept the last silently: ``--algo allreduce:ring --algo
    allgather:ring`` lowered with the second clause alone, until 2026-12-06); the same value
    again (once converted: ``--seed 1 --seed 01``) is that value.  ``twice``: what to do
    instead, ending the message (default: ``OPT takes one value``; an option whose
    repetition means something elsewhere says what this command does instead: ``dump
    --rank``, since ``lower`` takes ``--rank`` repeated as several ranks)."""

    def __init__(self, *args, twice: str | None = None, **attrs):
        super().__init__(*args, **attrs)
        self.twice = twice

    def add_to_parser(self, parser, ctx: click.Context) -> None:
        # every occurrence kept (as for multiple=True), checked in consume_value
        parser.add_option(obj=self, opts=self.opts, dest=self.name, action="append",
                          nargs=self.nargs)

    def consume_value(self, ctx: click.Context, opts):
        given = opts.get(self.name)
        if isinstance(given, list):
            if len(given) > 1 and not ctx.resilient_parsing:
                values = [self.type(v, self, ctx) for v in given]
                if any(v != values[0] for v in values[1:]):
                    raise click.BadParameter(
                        f"{_given_times(given)}; "
                        f"{self.twice or self.opts[-1] + ' takes one value'}", ctx, self)
            opts = {**opts, self.name: given[-1]}
        return super().consume_value(ctx, opts)


class ByteSize(click.ParamType):
    """A byte count option: ``4096``, ``512KiB``, ``64MiB``, ``1GB`` (``sizes.parse_size``),
    at least 0."""

    name = "bytes"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        from nrtrewrite.sizes import EXAMPLES, parse_size
        try:
            return parse_size(str(value))
        except NrtRewriteError:
            self.fail(f"{value!r} is not a byte count ({EXAMPLES})", param, ctx)


class WholeWriter:
    """A text stream (``sys.stdout``) written in whole pieces: each :meth:`write` goes out
    entire with stops deferred (:func:`stops_deferred`), so a SIGTERM, SIGHUP or Ctrl-C comes
    between two pieces, never inside one; a second stop while a piece is written (a pipe
    nobody reads) ends the process at once (:func:`_writing_out`), so nothing that must be
    cleaned up (a temporary folder) may wait on a write here further out.  The bytes go to
    the stream's binary buffer until all are taken: interrupted by a signal after part of
    a large write, CPython's ``BufferedWriter.write`` returns the short count and
    ``TextIOWrapper.write`` drops the rest without a word (3.11: 2 MB written to a pipe,
    128 KiB arrived and the next write followed them).  A stream without a buffer
    (``io.StringIO``) is written as it is."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.buffer = getattr(stream, "buffer", None)
        self.encoding = getattr(stream, "encoding", None) or "utf-8"
        self.errors = getattr(stream, "errors", None) or "strict"
        if self.buffer is not None:
            stream.flush()  # what was written through the text layer goes first

    def write(self, text: str) -> None:
        if self.buffer is None:
            with _writing_out():
                self.stream.write(text)
            return
        self.write_bytes(text.encode(self.encoding, self.errors))

    def write_bytes(self, data) -> None:
        """Bytes already encoded as :meth:`write` encodes a text (the stream's encoding and
        errors), written whole as it writes one: a stream without a buffer is given their
        text."""
        with _writing_out():
            if self.buffer is None:
                self.stream.write(bytes(data).decode(self.encoding, self.errors))
                return
            view = memoryview(data)
            while view:
                n = self.buffer.write(view)
                view = view[len(view) if n is None else n:]

    def flush(self) -> None:
        with _writing_out():
            (self.buffer or self.stream).flush()


def stopped_why(exc: BaseException) -> str:
    """The ``"error"`` that closes a streamed JSON document ``exc`` stopped: an error's line,
    else ``Terminated: 15``, ``KeyboardInterrupt``, the exception's type and message as the
    internal error's line shows them (:func:`_one_line`: a ``KeyError``'s key escaped once, a
    nested class by its qualified name, a worker's exception by its own type; until
    2026-12-05 this repeated ``_one_line`` with small differences and a ``KeyError``'s
    ``repr`` was escaped a second time)."""
    return json_why(_stopped_text(exc))


def _stopped_text(exc: BaseException) -> str:
    if isinstance(exc, NrtRewriteError):
        return exc.line()
    if (line := _resource_why(exc)) is not None:  # (status 71: its line, as its document's)
        return line
    return _one_line(exc)


def json_why(why: str) -> str:
    """A ``--json`` document's ``"error"``: ``why`` (the line without its ``nrtrewrite:
    error: `` prefix) capped as the error line is (:func:`errors.cut_line`: past
    :data:`errors.MAX_LINE_CHARS` characters), counted on its own characters, as the JSON
    string holds them (none escaped for stderr's encoding: JSON holds every character).  Until
    2026-12-06 only its reason was capped (``errors.MAX_WHY_CHARS``): a path of 100,000
    characters was in it whole."""
    return cut_line(why)


def _resource_why(exc: BaseException, ctx: click.Context | None = None) -> str | None:
    """The ``"error"`` of a ``--json`` document stopped by the system refusing a resource
    (status 71; None for any other exception): its line on stderr (:func:`_resource_line`,
    naming the command of ``ctx`` or of the current click context) without its
    ``nrtrewrite: error: `` prefix, as an error of status 2 gives its document's."""
    if isinstance(exc, OSError) and exc.filename is not None:
        return None  # (a path's OS error: status 2, never a resource's)
    ctx = ctx or click.get_current_context(silent=True)
    line = _resource_line(exc, _what(ctx.find_root() if ctx is not None else None))
    return None if line is None else line.removeprefix("nrtrewrite: error: ")


def echo_whole(text: str) -> None:
    """``text`` and a newline on stdout as one piece (:class:`WholeWriter`): a JSON document
    printed at once is never cut by a stop, which is raised once it is out."""
    WholeWriter(sys.stdout).write(text + "\n")


def echo_whole_pieces(pieces) -> None:
    """The texts ``pieces`` yields, one after the other, on stdout as one piece, as
    :func:`echo_whole` of their join writes it (a stop comes after the last; a second stop
    meanwhile ends the process at once), without holding the whole text: a document printed
    at once written a part at a time (``explain --json``'s triggers, a record each).  A
    piece that is not a text has ``write_to(out)``, which writes what it holds through the
    :class:`WholeWriter` ``out`` (``explain --json``'s records, made before: its
    ``_RecordSpool``)."""
    out = WholeWriter(sys.stdout)
    with _writing_out():
        for text in pieces:
            if isinstance(text, str):
                out.write(text)
            else:
                text.write_to(out)


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived: raised where the process is, so that every ``finally`` and
    ``except BaseException`` runs (a half-written output's temporary folder is removed, as
    for Ctrl-C), then the process exits with 128 + the signal number."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


#: The stopping signals the ``nrtrewrite`` process blocked while its modules loaded
#: (``console._hold_stops``): :func:`terminate_cleanly` releases them once its handlers are
#: in place, so that a stop that came meanwhile is raised there, as any other.
HELD_WHILE_LOADING: set[int] = set()

#: The signals turned into :class:`Terminated` (SIGINT is Python's KeyboardInterrupt).
TERMINATING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP")
                            if hasattr(signal, name))


#: While :func:`terminate_cleanly` is active: the signals' handlers it replaced.
_REPLACED: dict[int, object] = {}


class _Stops:
    """The stops of the running command (:func:`terminate_cleanly`): ``raised`` the signal
    raised (one: a later one is ignored while its cleanup runs), ``deferring`` how deep in
    :func:`stops_deferred` the command is, ``pending`` the signal that came meanwhile;
    ``writing``: a second stop now ends the process at once (:func:`_end_at_once`)."""

    def __init__(self) -> None:
        self.raised: list[int] = []
        self.deferring = 0
        self.pending: int | None = None
        #: how deep in a write of the standard output (:func:`_writing_out`) the command is
        self.writing = 0
        #: the stop raised was dropped by Python (a finalizer) or only noted (``drop``): no
        #: cleanup of it runs, so a later stop raises it at once (:func:`_stop`)
        self.dropped = False


#: The running command's stops; None outside :func:`terminate_cleanly`.
_STOPS: _Stops | None = None


def _stop(stops: _Stops, signum: int, drop: bool = False) -> None:
    """Raise the stop of ``signum`` (Ctrl-C: KeyboardInterrupt), or note it while stops are
    deferred; nothing once one has been raised (its cleanup runs).  ``drop``: note it as
    raised without raising it, where Python would drop the exception and print it
    (:func:`raise_lost_stop` raises it later).  A second stop while the command writes its
    standard output (:func:`_writing_out`: a piece, the ``"error"`` that closes a document,
    into a pipe nobody reads, where the first one waits for the piece or is raised and the
    closing write waits in turn) ends the process at once with the first one's line and
    status, in the ``nrtrewrite`` process (:data:`LATE_STOPS_END_THE_PROCESS`); until
    2026-12-06 it was ignored there too, and only SIGKILL ended the process).  A later stop
    after one Python dropped (no cleanup of it runs) raises that first one at once (until
    2026-12-06 it was ignored: the command ran on to its end, ``lower`` to the moment it
    would place its output, and only then stopped)."""
    first = stops.raised[0] if stops.raised else stops.pending
    if first is not None:
        if stops.writing and LATE_STOPS_END_THE_PROCESS:
            _end_at_once(first)
        elif stops.raised and stops.dropped and not drop:
            if stops.deferring:  # (raised as the step a stop must not cut ends)
                stops.pending = signum
                return
            if sys.exc_info()[1] is not None:
                # an exception is being handled: an error's cleanup may be running (a
                # review found one cut, `.OUT.tmp-*` left, status 143 for an error's 2);
                # the dropped stop waits for a later stop or the command's end, as before
                return
            stops.dropped = False  # (raised now: a later stop is ignored while it cleans up)
            raise _stop_exception(first)
        return
    if stops.deferring:
        stops.pending = signum
        return
    stops.raised.append(signum)
    if drop:
        stops.dropped = True
    else:
        raise _stop_exception(signum)


def _stop_exception(signum: int) -> BaseException:
    """The exception a stop raises: Ctrl-C Python's KeyboardInterrupt, else Terminated."""
    return KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)


def _runs_in(frame, code) -> bool:
    """Is ``frame`` a frame of ``code``, or called from one?"""
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False


def raise_lost_stop() -> None:
    """Raise again the stop of the running command that Python dropped: a stopping signal's
    handler that ran inside a finalizer (``__del__``, as multiprocessing's
    ``_ConnectionBase.__del__``) or an at-fork callback raises its exception where Python
    prints it ("Exception ignored in ...") and goes on, and the command would run to its
    end, exit 0, its output written (once in a full test run on 2026-12-05, a SIGTERM to
    ``lower -j 2``). Nothing when no stop was raised, or outside a command. Called before
    ``lower`` puts its output in place (``bundle.write_output``'s ``before_placing``) and
    as a command ends (:func:`terminate_cleanly`); a stop that did propagate never gets
    there (its cleanup runs instead)."""
    stops = _STOPS
    if stops is not None and stops.raised:
        signum = stops.raised[0]
        stops.dropped = False  # (raised now: a later stop is ignored while it cleans up)
        raise _stop_exception(signum)


@contextlib.contextmanager
def stops_deferred():
    """A step a stop (SIGTERM, SIGHUP, Ctrl-C) must not cut: a block of a streamed JSON
    document written whole with the count that says it was (a stop in the middle of a write
    left half a record before the closing ``"error"``, found by an exploratory tester).  A
    stop that comes meanwhile is raised as the step ends; the step runs on until then (a
    write to a pipe nobody reads waits as it would without the stop)."""
    stops = _STOPS
    if stops is None:
        yield
        return
    stops.deferring += 1
    try:
        yield
    finally:
        stops.deferring -= 1
    if not stops.deferring and stops.pending is not None:
        signum, stops.pending = stops.pending, None
        _stop(stops, signum)


@contextlib.contextmanager
def _writing_out():
    """A write of the standard output (:class:`WholeWriter`), whole (:func:`stops_deferred`);
    meanwhile a second stop ends the process at once (:func:`_stop`): the write may wait
    for a reader that never reads.  No cleanup is left to run further out when it does:
    the commands that write so (``dump``, ``diff``, ``schedule --json``, a document printed
    at once) hold no temporary folder by then (``simulate`` has removed its own)."""
    with stops_deferred():
        stops = _STOPS
        if stops is None:
            yield
            return
        stops.writing += 1
        try:
            yield
        finally:
            stops.writing -= 1


#: The outputs the running command has put in place, complete (``lower``'s OUT: the
#: ``on_placed`` of ``bundle.write_output``): a stop that comes after says so first.
_PLACED: list[str] = []

#: True in the ``nrtrewrite`` process itself (``nrtrewrite.console``), where the process ends
#: with the command: a stop while it exits (after the command, the handlers restored, the
#: default SIGTERM would end it silently) still gets the warning and the line, and the
#: status of a stop.  False where the CLI runs inside another program (tests' CliRunner).
LATE_STOPS_END_THE_PROCESS = False


@contextlib.contextmanager
def placing_output():
    """The step that puts a command's new output in place and notes it (:func:`note_placed`):
    a stop Python dropped is raised first (:func:`raise_lost_stop`: nothing is replaced),
    and one that comes meanwhile waits until the output is noted (:func:`stops_deferred`),
    so a stop either leaves the previous output or says the new one is in place."""
    raise_lost_stop()
    with stops_deferred():
        yield


def note_placed(out) -> None:
    """``out`` is the command's new output, complete and in place (``on_placed``)."""
    _PLACED.append(str(out))


def _say_placed() -> None:
    """For a stop: the warning that each output put in place is complete nonetheless (once:
    the outputs are forgotten as they are named)."""
    while _PLACED:
        out = _PLACED.pop(0)
        warn(stderr_console(), f"{escape_path(out)}: the new output is complete and in "
             "place; the run was stopped after it was written")


#: The status of a Ctrl-C and of a closed pipe: 128 + the signal, as SIGTERM's 143 (a shell's
#: status for a process the signal ended), so that no stop reads as ``diff``'s or
#: ``simulate``'s 1 ("the outputs differ", "a trigger does not match").
STATUS_INTERRUPTED = 128 + signal.SIGINT  # 130
STATUS_CLOSED_PIPE = 128 + signal.SIGPIPE  # 141


#: The standard output's descriptor :func:`_quiet_closed_pipe` pointed at /dev/null, and a
#: copy of what it was before (None: not done in this command), which
#: :func:`_unquiet_closed_pipe` puts back when the command returns inside another program.
_QUIETED: list = [None]


def _quiet_closed_pipe() -> None:
    """After a closed pipe: the standard output onto /dev/null (the Python documentation's
    way, "Note on SIGPIPE"), so that flushing it at exit raises no second BrokenPipeError
    (click's PacifyFlushWrapper did this, deprecated in click 8.2); stderr is left as it
    is, for a line that still has to be said.  What the descriptor was is kept
    (:data:`_QUIETED`), for :func:`_unquiet_closed_pipe`."""
    try:
        target = sys.stdout.fileno()
        fd = os.open(os.devnull, os.O_WRONLY)
        try:
            if _QUIETED[0] is None:  # (a second call: the copy is /dev/null's)
                _QUIETED[0] = (target, os.dup(target))
            os.dup2(fd, target)
        finally:
            os.close(fd)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass  # (a stream without a descriptor: a test's, nothing is flushed to a pipe)


def _unquiet_closed_pipe() -> None:
    """After a command run inside another program (``nrtrewrite.cli.main`` called): the
    descriptor :func:`_quiet_closed_pipe` pointed at /dev/null is the program's own again
    (until 2026-12-07 it stayed /dev/null for good, and the program's later writes to its
    stdout vanished without an error).  What the standard output holds is flushed first,
    into /dev/null: those bytes were for the closed pipe, and flushed later into it they
    would raise the BrokenPipeError the redirection is there to spare.  In the
    ``nrtrewrite`` process, which ends with the command, nothing is put back."""
    quieted, _QUIETED[0] = _QUIETED[0], None
    if quieted is None:
        return
    target, saved = quieted
    try:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            sys.stdout.flush()
        with contextlib.suppress(OSError):
            os.dup2(saved, target)
    finally:
        os.close(saved)


def stop_status(signum: int) -> int:
    """The status the process ends with for the stop ``signum``: 128 + the signal (Ctrl-C's
    130, :data:`STATUS_INTERRUPTED`)."""
    return 128 + signum


def stop_line(signum: int) -> str:
    """The stop's one line: ``Aborted!`` (Ctrl-C), ``nrtrewrite: terminated by SIGTERM``."""
    if signum == signal.SIGINT:
        return "Aborted!"
    return f"nrtrewrite: terminated by {signal.Signals(signum).name}"


#: The stop whose report (:func:`_report_stop`) has begun, and True once it is printed.
_REPORTING: list[int] = []
_REPORTED: list[bool] = []
#: The stops that came while that report was printed (the second ends the process).
_STOPS_WHILE_REPORTING: list[int] = []


def _report_stop(signum: int) -> None:
    """The warning for each output put in place, then the stop's line: once, whoever comes
    first (the command's end, or a later stop that ends the process at once,
    :func:`_end_at_once`)."""
    if _REPORTING:
        return
    _REPORTING.append(signum)
    _say_placed()
    _say(stop_line(signum))
    _REPORTED.append(True)


def _end_at_once(first: int, status: int | None = None) -> None:
    """A later stop once the first one's cleanup has finished, or while the command waits
    on its standard output: the process ends now with the first stop's line (printed once)
    and status, what its standard output still holds lost (a document cut).  While the
    first one's report is printed (its warning, its line), nothing: the report goes on and
    ends the process (one line, not lost to a stop that came in the middle of it).
    ``status``: the status the process was exiting with (an error's, its line printed),
    which it keeps, with no line."""
    if status is None:
        if _REPORTING and not _REPORTED:
            # the first stop's report is being printed: a stop now is ignored (two stops
            # together print one line), but one more (or the first after a stop that forced
            # the end, above) ends the process, the line perhaps unwritten: stderr on a pipe
            # nobody reads (`2>&1 | less`) blocked the report for good (until 2026-12-06 no
            # number of stops ended it)
            _STOPS_WHILE_REPORTING.append(first)
            if len(_STOPS_WHILE_REPORTING) < 2:
                return
            os._exit(stop_status(first))
        if not _REPORTING:
            # (this stop forces the end: one more while the report is printed ends it too)
            _STOPS_WHILE_REPORTING.append(first)
            if first == signal.SIGINT and is_tty(sys.stderr):
                _say("")  # past the terminal's ^C
        _report_stop(first)
        status = stop_status(first)
    with contextlib.suppress(OSError, ValueError, AttributeError, RuntimeError):
        sys.stderr.flush()
    os._exit(status)


def _ends_at_once(first: int, ending: BaseException | None):
    """The handler of every stop once the first one's cleanup has finished (the command
    left :func:`terminate_cleanly`): the process reports the first and exits, and a second
    stop ends it at once (:func:`_end_at_once`), as it waits in the exit flush of a
    standard output nobody reads; until 2026-12-06 every later stop was ignored and only
    SIGKILL ended the process.  ``ending``: what the command ended with (a SystemExit: an
    error's status, which is kept)."""
    status = exit_status(ending.code) if isinstance(ending, SystemExit) else None

    def handler(signum, frame):
        _end_at_once(first, status)

    return handler


#: The stop :func:`_late_stop` is reporting, or that waits for the exit flush (one: a
#: later one ends the process at once).
_LATE_STOPPED: list[int] = []


def _flushed(stream) -> bool:
    """Flush ``stream``; False if this interrupted a write or flush of it (Python refuses
    the reentrant call: the stop came while the process flushed its standard output at
    exit, ``console._end_now``)."""
    try:
        stream.flush()
    except RuntimeError:
        return False
    except (OSError, ValueError, AttributeError):
        pass
    return True


def _late_stop(signum, frame) -> None:
    """SIGTERM, SIGHUP or Ctrl-C once the command has finished and the process is exiting
    (:data:`LATE_STOPS_END_THE_PROCESS`): the warning, the line of a stop and its status,
    at once (what was printed flushed first).  One that comes while the standard output is
    flushed at exit waits until that ends (a slow reader gets the whole output), then is
    reported (:func:`report_deferred_stop`; until 2026-12-06 Python refused the flush
    inside the flush, ``Exception ignored in atexit callback`` and a ``RuntimeError:
    reentrant call`` traceback, with no line).  A second stop while the first one's line
    is printed is ignored (until 2026-12-06 its handler ran inside the first's: a second
    line, ``nrtrewrite: terminated by SIGHUP`` under ``... by SIGTERM``, and the second's
    status); at any other moment (the flush waiting on a pipe nobody reads) it ends the
    process at once with the first one's line and status (:func:`_end_at_once`; until
    2026-12-06 it was ignored and the process hung)."""
    if _LATE_STOPPED:
        _end_at_once(_LATE_STOPPED[0])
        return  # (its report is being printed: it goes on)
    _LATE_STOPPED.append(signum)
    if not _flushed(sys.stdout):
        return  # (reported once the exit flush is done)
    _flushed(sys.stderr)
    _report_stop(signum)
    for stream in (sys.stdout, sys.stderr):
        _flushed(stream)
    os._exit(stop_status(signum))


def report_deferred_stop() -> None:
    """The stop that came while the standard output was flushed at exit
    (:func:`_late_stop`), reported now that the flush is done: its line and status, the
    process ended.  Nothing if none came."""
    if _LATE_STOPPED:
        _flushed(sys.stderr)
        _report_stop(_LATE_STOPPED[0])
        _flushed(sys.stderr)
        os._exit(stop_status(_LATE_STOPPED[0]))


def _restore_in_child() -> None:
    """In a forked child (a pool worker, a compose-ahead process): the handlers as they were
    before :func:`terminate_cleanly`, so the child dies of SIGTERM at once, as before (a
    Python-level handler runs only between bytecodes of the main thread: a worker blocked on
    a queue lock while its parent terminated the pool could wait there forever)."""
    for sig, h in _REPLACED.items():
        signal.signal(sig, h)
    _REPLACED.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_restore_in_child)


@contextlib.contextmanager
def terminate_cleanly():
    """While the command runs, SIGTERM and SIGHUP raise :class:`Terminated` in this process
    (unless ignored: under ``nohup`` SIGHUP stays ignored).  A forked child gets the previous handlers back as it starts (:func:`_restore_in_child`)."""
    global _STOPS
    me = os.getpid()
    stops = _Stops()
    raised = stops.raised
    unraisable_before = sys.unraisablehook

    def unraisable(info):
        # our stop, raised where Python drops it (a finalizer, an at-fork callback): not
        # printed as "Exception ignored in ..." with its traceback before the stop's one line
        # (it is raised again: raise_lost_stop); anything else as before
        if not (stops.raised and isinstance(info.exc_value, (Terminated, KeyboardInterrupt))):
            unraisable_before(info)
        else:
            stops.dropped = True  # (a later stop raises it at once: _stop)

    def handler(signum, frame):
        if os.getpid() != me:  # forked, before _restore_in_child ran: die as without us
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        # once raised, a second stop is ignored: the first one's cleanup is running (a second
        # Terminated raised inside it would leave the temporary folder behind); inside the
        # hook above, printing another finalizer's exception, a stop raised would be printed
        # by Python ("Exception ignored in sys.unraisablehook", a traceback, "Terminated:
        # 15") and dropped: it is only noted, and raised again (raise_lost_stop)
        _stop(stops, signum, drop=_runs_in(frame, unraisable.__code__))

    def interrupt(signum, frame):  # Ctrl-C: Python's KeyboardInterrupt, once
        if os.getpid() != me:
            return signal.default_int_handler(signum, frame)
        # Ctrl-C twice, or after SIGTERM: the first stop's cleanup goes on
        _stop(stops, signum, drop=_runs_in(frame, unraisable.__code__))

    try:
        # a signal ignored (nohup, a supervisor) stays ignored
        old = {sig: signal.signal(sig, handler) for sig in TERMINATING_SIGNALS
               if signal.getsignal(sig) != signal.SIG_IGN}
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            old[signal.SIGINT] = signal.signal(signal.SIGINT, interrupt)
    except ValueError:  # not the main thread (an embedding application): leave them be
        yield
        return
    _REPLACED.update(old)
    _STOPS = stops
    sys.unraisablehook = unraisable
    ending = None  # what the command ended with
    try:
        if HELD_WHILE_LOADING:  # a stop held while the modules loaded is raised here
            held = frozenset(HELD_WHILE_LOADING)
            HELD_WHILE_LOADING.clear()
            signal.pthread_sigmask(signal.SIG_UNBLOCK, held)
        try:
            yield
        except SystemExit as done:
            # a command that ends with its result's status (diff's and simulate's sys.exit
            # 0 or 1): a stop raised and dropped meanwhile is raised instead (until
            # 2026-12-06 it was lost there: `diff` exited 1 as though no Ctrl-C had come);
            # an error's status (its line printed) stays
            if done.code in (None, 0, 1):
                raise_lost_stop()
            raise
        raise_lost_stop()  # (the command ran to its end: a stop raised was dropped)
    except BaseException as exc:
        ending = exc
        raise
    finally:
        _STOPS = None
        _REPLACED.clear()
        if sys.unraisablehook is unraisable:
            sys.unraisablehook = unraisable_before
        if raised:
            # stopped by a signal, its cleanup done: the process reports it and exits; a
            # later one ends it at once with the first one's line and status (restored, the
            # default would kill it with its own status after the line; ignored, as until
            # 2026-12-06, an exit flush into a pipe nobody reads hung it for good)
            after = _ends_at_once(raised[0], ending)
        for sig, h in old.items():
            # the command done and the process exiting with it: a stop still reports itself;
            # outside the nrtrewrite process (a test's CliRunner, a program calling main) the
            # handlers as they were (until 2026-12-06 ignored after a stop, for good: the
            # next command took the stops as ignored, `nohup`'s, and could not be stopped,
            # nor could the program)
            if not LATE_STOPS_END_THE_PROCESS:
                signal.signal(sig, h)
            else:
                signal.signal(sig, after if raised else _late_stop)


class _ClosedStdout(io.TextIOBase):
    """The standard output when the process started without one (``>&-``): Python then
    leaves ``sys.stdout`` None and click's ``echo`` drops every line without a word, so a
    command whose output is its printout would exit 0 having delivered nothing.  Writing
    here fails as writing a closed descriptor does (EBADF); a command that prints nothing
    (``lower -q``, whose output is files) is unaffected.  Nothing is buffered, so nothing
    fails again at exit."""

    encoding = "utf-8"
    errors = "strict"

    def writable(self) -> bool:
        return True

    def write(self, s) -> int:
        raise OSError(errno.EBADF, "the standard output is closed")


def _escape_unencodable_output() -> None:
    """The standard output escapes what its encoding cannot hold (``\\u6743``), as Python's
    stderr does, instead of failing: a model's names in a Latin-1 or EUC-JP locale."""
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:
        with contextlib.suppress(ValueError, OSError, AttributeError):
            reconfigure(errors="backslashreplace")


def _unbuffered_stderr() -> None:
    """``sys.stderr`` written straight to its descriptor, as ``python -u`` (PYTHONUNBUFFERED)
    writes it: without it Python keeps a ``BufferedWriter`` under stderr's text layer, and a
    write that fails there (``2>/dev/full``) stays in that buffer, so every later flush fails
    again; the flush multiprocessing makes before it forks a worker then raised it inside
    ``lower``, which reported `OUT: cannot write the output: No space left on device`, status
    2, and wrote nothing, for a warning it could not print (until 2026-12-05; the suite runs
    with PYTHONUNBUFFERED=1, where the lost warning was only lost).  Over an unbuffered
    descriptor a failed write leaves nothing behind.  A stream that is no ``BufferedWriter``
    over a descriptor (a test runner's, ``python -u``'s) is left as it is."""
    err = sys.stderr
    if type(getattr(err, "buffer", None)) is not io.BufferedWriter:
        return
    try:
        fd = err.fileno()
        err.flush()
        sys.stderr = io.TextIOWrapper(io.FileIO(fd, "w", closefd=False),
                                      encoding=err.encoding, errors=err.errors,
                                      line_buffering=err.line_buffering, write_through=True)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass  # (a stderr that cannot be flushed now: kept, as before)


def _put_streams_back(before: tuple, ours: tuple) -> None:
    """After a command run inside another program (``nrtrewrite.cli.main`` called, click's
    ``CliRunner``): the standard streams as they were before :func:`_standard_output_closed`,
    :func:`_escape_unencodable_output` and :func:`_unbuffered_stderr` (``before``: stdout,
    its errors handler, stderr), as the signal handlers and ``sys.unraisablehook`` are put
    back (until 2026-12-07 the program's stdout kept ``backslashreplace`` and its stderr our
    unbuffered wrapper for good).  Each is flushed first, so nothing written is lost; a
    stream the command or the program replaced meanwhile (not ``ours``) is left as it is."""
    stdout, errors, stderr = before
    our_out, our_err = ours
    for now, was, attr in ((our_err, stderr, "stderr"), (our_out, stdout, "stdout")):
        if now is not was and getattr(sys, attr) is now:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                now.flush()  # (write-through: nothing held; a closed stdout's: nothing)
            setattr(sys, attr, was)
    if (stdout is not None and sys.stdout is stdout and errors is not None
            and getattr(stdout, "errors", errors) != errors):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stdout.flush()  # (written with the command's handler before it changes)
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stdout.reconfigure(errors=errors)


def _standard_output_closed() -> None:
    """Install :class:`_ClosedStdout` as ``sys.stdout`` if the process has no standard
    output (descriptor 1 closed at start)."""
    if sys.stdout is None:
        sys.stdout = _ClosedStdout()


class Command(click.Command):
    """A command of nrtrewrite: click's, except that its refusal of extra arguments quotes
    each with ``repr`` (as click quotes a path), ``('x', 'b c')``, where click joined them
    raw with spaces (until 2026-12-05 an ESC and a typed ``\\x1b``, or one argument ``a b``
    and the two ``a`` ``b``, printed alike: ``(a b)``)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        allow = ctx.allow_extra_args
        ctx.allow_extra_args = True  # (click's check, after the parameters: made here)
        try:
            rest = super().parse_args(ctx, args)
        finally:
            ctx.allow_extra_args = allow
        if rest and not allow and not ctx.resilient_parsing:
            ctx.fail(f"Got unexpected extra argument{'s' if len(rest) > 1 else ''} "
                     f"({', '.join(map(repr, rest))})")
        return rest


class _Group(click.Group):
    """Turns an :class:`NrtRewriteError` into one line on stderr and a non-zero exit, and
    click's usage errors (unknown option, missing argument, a folder given as MODEL) into
    one line as well, instead of click's usage block.  Any other exception escaping a
    command is one line too (docs/CLI.md "Errors"): an OS error names its path and reason
    (exit 2), the system refusing memory, processes or threads says so (exit 71), anything
    else is an internal error (exit 70).  ``--traceback`` prints the traceback above the line,
    with the same status (a Ctrl-C and a closed pipe it still re-raises).  A stderr
    that cannot be written loses the line, never the status (:func:`_say`)."""

    #: the command line's arguments, as the last ``main`` was given them
    argv: list = []
    command_class = Command

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True,
             **extra):
        argv = sys.argv[1:] if args is None else list(args)
        self.argv = argv  # (a path the locale cannot encode is one of them)
        # (the outputs this command puts in place, for a stop's warning: cleared at each
        # command in either mode; until 2026-12-07 only in standalone mode, so a program
        # calling main(..., standalone_mode=False) kept one path per lower for good)
        _PLACED.clear()
        if not standalone_mode:
            try:
                return super().main(args, prog_name, complete_var, standalone_mode, **extra)
            finally:
                _PLACED.clear()
                _unquiet_closed_pipe()  # (the program's own stdout back)
        before = (sys.stdout, getattr(sys.stdout, "errors", None), sys.stderr)
        _standard_output_closed()
        _escape_unencodable_output()
        _unbuffered_stderr()
        ours = (sys.stdout, sys.stderr)
        try:
            self._standalone(args, prog_name, complete_var, argv, **extra)
        finally:
            if not LATE_STOPS_END_THE_PROCESS:
                _unquiet_closed_pipe()  # (flushed into /dev/null, then the program's)
                _put_streams_back(before, ours)

    def _standalone(self, args, prog_name, complete_var, argv, **extra):
        """:meth:`main` in standalone mode, its streams set up: the command, its errors and
        stops each one line and a status (``sys.exit``)."""
        _REPORTING.clear()
        _REPORTED.clear()
        _STOPS_WHILE_REPORTING.clear()
        try:
            with terminate_cleanly():
                rv = super().main(args, prog_name, complete_var, False, **extra)
        except Terminated as err:
            _report_stop(err.signum)
            sys.exit(stop_status(err.signum))
        except click.exceptions.NoArgsIsHelpError as err:  # bare `nrtrewrite`: the help
            err.show()
            sys.exit(err.exit_code)
        except click.UsageError as err:
            where = err.ctx.command_path if err.ctx is not None else (prog_name or "nrtrewrite")
            _say(_capped_line(f"{where}: error: {usage_message(err)} "
                              f"(see '{where} --help')"))
            sys.exit(err.exit_code)
        except click.ClickException as err:
            with contextlib.suppress(OSError, ValueError):
                err.show()
            sys.exit(err.exit_code)
        except (click.exceptions.Abort, KeyboardInterrupt) as err:
            # (a KeyboardInterrupt here: a Ctrl-C Python dropped, raised again as the command
            # ended, raise_lost_stop, or one held while the modules loaded; until 2026-12-06
            # the first was printed as a traceback)
            if isinstance(err, KeyboardInterrupt) and is_tty(sys.stderr):
                _say("")  # past the terminal's ^C, as invoke does
            _report_stop(signal.SIGINT)
            sys.exit(STATUS_INTERRUPTED)
        except OSError as err:  # before a command runs: --help or --version printing
            if "--traceback" in argv:
                _print_traceback(err)
            _exit_os_error(err)
        except Exception as err:  # noqa: BLE001 - before a command runs: loading its module
            if "--traceback" in argv:
                _print_traceback(err)
            _exit_unexpected(err, _what(None, argv))
        sys.exit(rv if isinstance(rv, int) else 0)

    def make_context(self, info_name, args, parent=None, **extra) -> click.Context:
        """click's, but a closed pipe met while the group's own options print (``--help``,
        ``-h``, ``--version``: they print while the command line is parsed, before any
        command runs) ends the process quietly with 141, as a command's does (:meth:`invoke`).
        click's ``main`` caught it itself and exited 1 (``diff``'s "the outputs differ"),
        even outside its standalone mode (until 2026-12-07)."""
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except OSError as err:
            if err.errno != errno.EPIPE:
                raise
            _quiet_closed_pipe()
            sys.exit(STATUS_CLOSED_PIPE)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str):
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            importlib.import_module(COMMANDS[cmd_name])  # registers the command on main
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except NrtRewriteError as err:
            if _want_traceback(ctx):
                _print_traceback(err)
            _say(_capped_line(f"nrtrewrite: error: {err.line()}"))
            sys.exit(err.exit_code)
        except click.UsageError as err:
            if err.ctx is None and ctx.invoked_subcommand is not None:
                # click's parser raises some (an option without its value, a flag given
                # one) without the command's context: named by the command, as the others
                cmd = self.get_command(ctx, ctx.invoked_subcommand)
                if cmd is not None:
                    err.ctx = click.Context(cmd, info_name=ctx.invoked_subcommand, parent=ctx)
            raise
        except _PASSED_THROUGH:
            raise  # click's own (usage errors, Exit, Abort; EOFError becomes Abort)
        except KeyboardInterrupt:  # no error, so no traceback under --traceback either
            if is_tty(sys.stderr):
                _say("")  # past the terminal's ^C; redirected: no blank line
            raise click.exceptions.Abort() from None
        except OSError as err:
            if err.errno == errno.EPIPE:  # a closed pipe (`| head`): quietly, 128 + SIGPIPE
                _quiet_closed_pipe()
                sys.exit(STATUS_CLOSED_PIPE)
            if _want_traceback(ctx):
                _print_traceback(err)
            _exit_os_error(err, _what(ctx))
        except UnicodeEncodeError as err:
            if (line := _unencodable_path_line(err, self.argv)) is None:
                raise  # not a path's: an internal error (main)
            if _want_traceback(ctx):
                _print_traceback(err)
            _say(_capped_line(line))
            sys.exit(NrtRewriteError.exit_code)
        except Exception as err:  # noqa: BLE001 - a bug of ours, or the system's refusal (memory)
            if (cause := _interruption(err)) is not None:
                raise cause from None  # a signal wrapped by Python itself, not a bug
            if _want_traceback(ctx):
                _print_traceback(err)
            _exit_unexpected(err, _what(ctx))


def _unencodable_path_line(err: UnicodeEncodeError, args: Sequence = ()) -> str | None:
    """The line for a path (an argument) the file-system encoding cannot encode, or None
    when ``err`` is another encoding's, or its text is not one of the command's ``args``
    nor a path made from one.  Python decodes the command line with the C
    library's idea of the locale and encodes paths with its own codec: under
    ``LC_ALL=ja_JP.EUC-JP`` a UTF-8 name such as ``权重.neff`` is decoded into characters the
    ``euc_jp`` codec cannot encode back, so ``os.open`` of the very argument given fails.
    Text of an input that fails to encode in UTF-8 (a spec's ``"\\ud800"``) is no path's:
    blaming a path and the locale for it misled (the assembler now names the field)."""
    try:
        same = codecs.lookup(err.encoding).name == codecs.lookup(sys.getfilesystemencoding()).name
    except LookupError:
        return None
    if not same or not isinstance(err.object, str) or not _from_an_argument(err, args):
        return None
    path = escape_controls(err.object).encode("ascii", "backslashreplace").decode("ascii")
    return (f"nrtrewrite: error: {path}: this path cannot be encoded in the locale's encoding "
            f"({err.encoding}: {err.reason}); run under a UTF-8 locale (LC_ALL=C.UTF-8) or "
            "rename it")


def _from_an_argument(err: UnicodeEncodeError, args: Sequence) -> bool:
    """Whether the text ``err`` could not encode comes from the command line's ``args`` or
    the working folder's name: a path made from them (an argument itself, a path beneath
    or beside it, made absolute) holds it.  Text of a file's contents (a spec's
    ``"\\ud800"``) does not."""
    bad = err.object[err.start:err.end]
    places = []
    for arg in args:
        try:
            places.append(os.fspath(arg))
        except TypeError:
            continue
    with contextlib.suppress(OSError, ValueError):
        places.append(os.getcwd())
    return any(isinstance(p, str) and bad in p for p in places)


def _what(ctx: click.Context | None, argv: list[str] | None = None) -> str:
    """``nrtrewrite COMMAND``, as the messages name what ran (while the command's module
    loads, click has not named it yet: the first command name on the command line)."""
    command = ctx.invoked_subcommand if ctx is not None else None
    if command is None:
        command = next((a for a in (sys.argv[1:] if argv is None else argv)
                        if a in COMMANDS), None)
    return " ".join(filter(None, ("nrtrewrite", command)))


def _print_traceback(err: BaseException) -> None:
    """``--traceback``: the Python traceback of ``err`` on stderr, above the error's own line
    and before its own exit status (so that a script passing it can still tell statuses
    apart, e.g. ``diff``'s 1 from an error's 2).  Without a stderr (closed, ``2>&-``: Python
    sets it to None) there is none: ``print_exception`` wrote it on stdout then, into a
    ``--json`` document, and the flush of None made the status 1 (until 2026-12-05)."""
    import traceback

    stream = sys.stderr
    if stream is None or getattr(stream, "closed", False):
        return
    with contextlib.suppress(OSError, ValueError):
        traceback.print_exception(err, file=stream)
        stream.flush()


def _say(line: str) -> None:
    """Print ``line`` on stderr.  A stderr that cannot be written (closed, a full disk,
    ``2>/dev/full``) loses the line; the command's exit status stays its own (before, the
    failed write escaped as a traceback nobody saw, and the status became 1, which ``diff``
    uses for "the outputs differ").  What stderr's encoding cannot hold is escaped first
    (``\u6743``), as Python's stderr escapes it: click wrote an ASCII stderr's line in
    UTF-8 (``PYTHONIOENCODING=ascii``: raw bytes, until 2026-12-05)."""
    with contextlib.suppress(OSError, ValueError):
        click.echo(encodable(line, sys.stderr), err=True)


def _chain(err: BaseException) -> list[BaseException]:
    """``err`` and the exceptions it was raised from or during, innermost last.  A pool
    worker's traceback text (``ahead.RemoteTraceback``, the ``__cause__`` of a worker's
    exception, above the chain the worker sent) is not one of them: until 2026-12-07 it was
    taken for the innermost, whose message, a whole traceback, was printed escaped."""
    # (nrtrewrite.ahead is loaded if a worker ran; not imported here, as in _one_line)
    remote = getattr(sys.modules.get("nrtrewrite.ahead"), "RemoteTraceback", None)
    return [e for e in raised_from(err) if remote is None or not isinstance(e, remote)]


def _str_or_empty(err: BaseException) -> str:
    """``str(err)``, or empty where its ``__str__`` fails (until 2026-12-07 that failure
    escaped the handler classifying ``err``: a raw traceback, status 1)."""
    try:
        return str(err)
    except Exception:  # noqa: BLE001 - a __str__ that fails
        return ""


#: Substrings of an ``ImportError``'s innermost message that mean the loader could not map a
#: shared library into memory (an address-space limit, ``ulimit -v``), not a broken install.
_MAP_FAILURES = ("failed to map segment", "cannot allocate memory")


def _resource_line(err: BaseException, what: str) -> str | None:
    """The line for ``err`` when it is the system refusing a resource (status 71), or None:
    memory (``MemoryError`` anywhere in its chain; a shared library that could not be mapped
    while a module loaded), a thread (``can't start new thread``), a process or mapping
    (``EAGAIN`` / ``ENOMEM`` naming no file: ``fork``, ``mmap``)."""
    chain = _chain(err)
    if any(isinstance(e, MemoryError) for e in chain):
        return (f"nrtrewrite: error: out of memory: '{what}' needed more memory than the "
                "machine gave it (MemoryError; rerun with --traceback to see where)")
    root = chain[-1]
    text = _str_or_empty(root)
    if isinstance(err, ImportError) and any(m in text.lower() for m in _MAP_FAILURES):
        # (the loader's reason names the library's path: escaped once, as in _one_line)
        return (f"nrtrewrite: error: out of memory: '{what}' could not load its modules "
                f"({type(root).__name__}: {escape_controls(text)}): the memory or "
                "address-space limit "
                "(ulimit -v) is too small")
    for e in chain:
        if isinstance(e, RuntimeError) and "can't start new thread" in _str_or_empty(e):
            return (f"nrtrewrite: error: out of a system resource: '{what}' could not start "
                    "a thread (RuntimeError: can't start new thread): the limit on processes "
                    "and threads (ulimit -u) or on memory is reached")
        if (isinstance(e, OSError) and e.errno in (errno.EAGAIN, errno.ENOMEM)
                and e.filename is None):
            hint = " (lower -j 1 starts no process)" if what.endswith(" lower") else ""
            return (f"nrtrewrite: error: out of a system resource: '{what}' could not start a "
                    f"process or map memory "
                    f"({e.strerror or escape_controls(_str_or_empty(e))}): the limit on "
                    "processes "
                    f"(ulimit -u) or on memory is reached{hint}")
    return None


def _exit_unexpected(err: BaseException, what: str) -> NoReturn:
    """One line and the status for an exception nothing raised on purpose: the system's
    refusal of a resource (:func:`_resource_line`, status 71), otherwise a bug of
    nrtrewrite (status 70)."""
    line = _resource_line(err, what)
    if line is not None:
        _say(_capped_line(line))
        sys.exit(EXIT_OUT_OF_MEMORY)
    _say(_capped_line(f"nrtrewrite: internal error: {_one_line(err)} (a bug in nrtrewrite; "
                      "rerun with --traceback for the details and report it)"))
    sys.exit(EXIT_INTERNAL_ERROR)


#: Exit status of an internal error: an exception nrtrewrite did not raise on purpose
#: escaped a command (EX_SOFTWARE of sysexits.h; docs/CLI.md "Errors").
EXIT_INTERNAL_ERROR = 70
#: Exit status when the system refused memory, a process or a thread (EX_OSERR of sysexits.h:
#: a resource of the system).
EXIT_OUT_OF_MEMORY = 71

#: What :meth:`_Group.invoke` lets through to click as it is: click's usage errors, ``Exit``
#: and ``Abort`` (``RuntimeError`` subclasses) and ``EOFError`` (which click makes an Abort).
_PASSED_THROUGH = (click.exceptions.ClickException, click.exceptions.Exit,
                   click.exceptions.Abort, EOFError)


def _capped_line(line: str) -> str:
    """An error line as printed: its control characters escaped (a path or argument with a
    line break stays one line; its names were escaped once where they were put in, and
    their backslashes are not doubled again), what stderr's encoding cannot hold escaped
    (:func:`encodable`, as :func:`_say` writes it) and its length capped: its long words
    first, then the line.  The cap counts the characters written: until 2026-12-06 it
    counted them before the escaping, so on an ASCII stderr (each emoji ``\\U0001f600``,
    10 characters) a line the cap had cut to 1,935 characters was written as 18,197."""
    return cut_line(encodable(escape_line(line), sys.stderr))


def _exit_os_error(err: OSError, what: str = "nrtrewrite") -> NoReturn:
    """Print :func:`_os_error_line`'s line for ``err`` and exit with its status."""
    line, code = _os_error_line(err, what)
    _say(_capped_line(line))
    sys.exit(code)


def _interruption(err: BaseException) -> BaseException | None:
    """The :class:`Terminated` or ``KeyboardInterrupt`` that ``err`` wraps, if any: Python
    turns an exception raised while a class is being made (``__set_name__``, as a signal
    arriving during a lazy import of a dataclass) into a ``RuntimeError`` whose cause it is."""
    return next((e for e in _chain(err) if isinstance(e, (Terminated, KeyboardInterrupt))),
                None)


def _want_traceback(ctx: click.Context) -> bool:
    """``--traceback`` was given (read from the parsed options: the group's callback, which
    fills ``ctx.obj``, has not run when the command's module fails to import)."""
    return bool((ctx.obj or {}).get("traceback") or ctx.params.get("traceback"))


def _one_line(err: BaseException) -> str:
    """``Type: message`` on one line: the message, text nrtrewrite did not write (a name or
    a path may be in it, raw), escaped once as a name is (:func:`errors.escape_controls`:
    a line break as ``\\n``, a backslash doubled), so that two messages never print alike
    (until 2026-12-05 its white space was folded into single spaces and its backslashes
    kept: ``a`` + line break + ``b`` printed as ``a b``, and ``a`` + ESC + ``b`` as
    ``a\\x1bb``).  A ``KeyError`` of one string is its key quoted with ``repr``, which
    escapes it already: only guarded (:func:`errors.escape_line`), so it shows once."""
    try:
        if type(err) is KeyError and len(err.args) == 1 and isinstance(err.args[0], str):
            text = escape_line(str(err))  # (repr: its backslash doubled, controls escaped)
        else:
            text = escape_controls(str(err))
    except Exception:  # noqa: BLE001 - a __str__ that fails: the type still tells something
        text = ""
    # a worker's exception: its own type's name (nrtrewrite.ahead is loaded if a worker ran;
    # not imported here: out of memory, the import itself would fail inside this handler)
    ahead = sys.modules.get("nrtrewrite.ahead")
    remote = getattr(ahead, "RemoteError", None)
    name = err.type_name if remote is not None and isinstance(err, remote) \
        else type(err).__qualname__
    return f"{name}: {text}" if text else name


def _writing_stdout(err: BaseException) -> bool:
    """Whether ``err`` was raised writing the standard output: the innermost Python frame of
    its traceback holds ``sys.stdout`` (or its buffer, or a rich console or a
    :class:`WholeWriter` writing to it).
    Python's own write errors name no file; this is how the standard output gets named."""
    tb = err.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    streams = [s for s in (sys.stdout, sys.__stdout__) if s is not None]
    streams += [s.buffer for s in list(streams) if getattr(s, "buffer", None) is not None]
    for val in tb.tb_frame.f_locals.values():
        if isinstance(val, WholeWriter):
            val = val.stream
        if isinstance(val, Console):
            try:
                val = val.file
            except Exception:  # noqa: BLE001
                continue
        if any(val is s for s in streams):
            return True
    return False


def _working_folder_line() -> str | None:
    """The error line when the working folder cannot be used (None: it can): removed while
    a shell was in it, a relative path cannot be made absolute (``os.getcwd`` fails with an
    OS error that names no path)."""
    try:
        os.getcwd()
    except OSError as exc:
        return (f"nrtrewrite: error: the working folder cannot be used (removed while in use?): "
                f"{exc.strerror or escape_controls(exc)}; cd to a folder that exists")
    return None


def _os_error_line(err: OSError, what: str = "nrtrewrite") -> tuple[str, int]:
    """The line and exit status for an OS error no command turned into an
    :class:`NrtRewriteError`: the path and the OS's reason when it has a path; the standard
    output named when writing it failed (a full disk, ``> /dev/full``); the system refusing
    a process or memory (:func:`_resource_line`); otherwise an internal error (nrtrewrite
    should have said where)."""
    reason = err.strerror or _one_line(err)
    # (a descriptor's number stands where a path would for some errors: not a path)
    paths = [p for p in (err.filename, err.filename2) if isinstance(p, (str, bytes, os.PathLike))]
    if paths:
        return ("nrtrewrite: error: "
                f"{' -> '.join(escape_path(p) for p in paths)}: {reason}",
                NrtRewriteError.exit_code)
    if _writing_stdout(err):
        return f"nrtrewrite: error: cannot write the standard output: {reason}", \
            NrtRewriteError.exit_code
    if (line := _resource_line(err, what)) is not None:
        return line, EXIT_OUT_OF_MEMORY
    if (line := _working_folder_line()) is not None:
        return line, NrtRewriteError.exit_code
    return (f"nrtrewrite: internal error: {_one_line(err)} (a bug in nrtrewrite; rerun with "
            "--traceback for the details and report it)", EXIT_INTERNAL_ERROR)


def asks_json(args: list[str]) -> bool:
    """Whether a command line asks for ``--json`` (before a ``--``: after it, a path), also
    as ``--json=VALUE``, which click refuses (a flag takes no value)."""
    return any(a == "--json" or a.startswith("--json=")
               for a in (args[:args.index("--")] if "--" in args else args))


class JsonErrorCommand(Command):
    """A command whose ``--json`` output is one JSON document on stdout even when it stops
    on an error (exit 2): its error document, :meth:`error_document` (the command's format
    with ``"error"``: the one-line message without the ``nrtrewrite: error: `` prefix), is
    printed, then the line on stderr and the status follow as for every command.  A usage
    error click finds before the command runs (a path that does not exist, a bad integer)
    counts when ``--json`` is given before any ``--``; its parameters are then unknown
    (``params`` empty).  For commands that print their document whole at the end (a
    streamed one may have begun)."""

    #: ``(params, message) -> dict``: the command's error document
    error_document = staticmethod(lambda params, why: {"error": why})
    #: ``json.dumps`` indentation of the command's documents
    json_indent = 2
    #: False for a command that closes its own streamed document on an error (``diff``):
    #: only the usage errors found before it runs are this class's
    documents_command_errors = True

    #: ``(error) -> dict``: keys of the error document taken from the error itself (an
    #: :class:`NrtRewriteError`, None for a usage or OS error), over
    #: :meth:`error_document`'s (``simulate``'s ``error_trigger``)
    error_fields = staticmethod(lambda err: {})
    #: True for a command whose error document carries the warnings it gave on stderr
    #: before the error, ``warnings`` before its ``triggers`` (``explain``, ``simulate``:
    #: docs/CLI.md "Warnings under ``--json``"; until 2026-12-07 only their documents of a
    #: command that finished did); ``[]`` for a usage error found before the command ran
    carries_warnings = False

    def _print_error(self, params: dict, why: str, err: NrtRewriteError | None = None) -> None:
        doc = self.error_document(params, json_why(why))
        doc.update(self.error_fields(err))
        if self.carries_warnings:
            keys = list(doc)
            at = keys.index("triggers") if "triggers" in keys else len(keys)
            doc = {**{k: doc[k] for k in keys[:at]}, "warnings": given_warnings(),
                   **{k: doc[k] for k in keys[at:]}}
        echo_whole(json.dumps(doc, indent=self.json_indent))

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        given = list(args)  # (click's parser consumes the list)
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as err:
            if asks_json(given):  # (guarded as invoke's are: click quotes paths with repr)
                self._print_error({}, escape_line(usage_message(err)))
            raise
        except NrtRewriteError as err:  # a path argument that cannot be read (PathArg)
            if asks_json(given):
                self._print_error({}, err.line(), err)
            raise

    def invoke(self, ctx: click.Context):
        if self.carries_warnings:
            ctx.meta[GIVEN_WARNINGS] = []
        try:
            return super().invoke(ctx)
        except (NrtRewriteError, click.UsageError) as err:
            if (ctx.params.get("as_json") and self.documents_command_errors
                    and not getattr(err, "json_documented", False)):
                ours = err if isinstance(err, NrtRewriteError) else None
                why = err.line() if ours is not None else \
                    escape_line(usage_message(err))  # (click quotes paths with repr)
                self._print_error(ctx.params, why, ours)
            raise
        except OSError as err:  # one the command left as it was: a file it could not read
            line, status = _os_error_line(err)
            if (ctx.params.get("as_json") and self.documents_command_errors
                    and err.filename is not None and status == NrtRewriteError.exit_code):
                self._print_error(ctx.params, line.removeprefix("nrtrewrite: error: "))
            elif status == EXIT_OUT_OF_MEMORY:  # a process or mapping refused
                self._print_stopped(ctx, err, _resource_why(err, ctx))
            elif status == EXIT_INTERNAL_ERROR and err.errno != errno.EPIPE:
                self._print_stopped(ctx, err, _one_line(err))
            raise
        except _PASSED_THROUGH:
            raise
        except Exception as err:  # noqa: BLE001 - documented: an internal or resource error
            if _interruption(err) is not None:
                raise
            if _resource_line(err, "") is not None:  # memory, a thread refused (status 71)
                self._print_stopped(ctx, err, _resource_why(err, ctx))
            elif not (isinstance(err, UnicodeEncodeError) and _unencodable_path_line(
                    err, getattr(ctx.find_root().command, "argv", ())) is not None):
                self._print_stopped(ctx, err, _one_line(err))
            raise

    def _print_stopped(self, ctx: click.Context, err: Exception, why: str) -> None:
        """The error document of an error of status 70 (an exception escaped the command that
        :class:`_Group` reports as a bug: ``why`` its ``Type: message``, :func:`_one_line`)
        or 71 (the system refusing memory, a thread or a process: ``why`` its line without
        the ``nrtrewrite: error: `` prefix, :func:`_resource_why`), as a streamed document
        stopped by it closes, unless the command closed its streamed document with it
        already.  The document is small (the command's error document: a few keys) and made
        whole before a byte of it is written; where the machine cannot give even that (a
        ``MemoryError`` again) or stdout cannot take it, nothing is printed (never part of a
        document): the line and the status stand, as until 2026-12-06 for every such error."""
        if (ctx.params.get("as_json") and self.documents_command_errors
                and not getattr(err, "json_documented", False)):
            with contextlib.suppress(MemoryError, OSError):
                self._print_error(ctx.params, why)


#: ``nrtrewrite --help``'s text.  Each command's help is such a string too, never its
#: docstring, where click would read it from: ``python -OO`` strips docstrings, and the help
#: lost every description (until 2026-12-06)
MAIN_HELP = ("Offline Neuron load-time collective rewrite: inspect, explain, schedule, lower, "
             "dump, diff, simulate, assemble (every command, listed below).")


@click.group(cls=_Group, help=MAIN_HELP,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="nrtrewrite")
@click.option("--traceback", is_flag=True, help="Show the Python traceback on errors.")
@click.pass_context
def main(ctx: click.Context, traceback: bool) -> None:
    """The ``nrtrewrite`` group (its help: :data:`MAIN_HELP`)."""
    ctx.ensure_object(dict)
    ctx.obj["traceback"] = traceback
