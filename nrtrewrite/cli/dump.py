"""``nrtrewrite dump``: decoded tables of emitted artifacts."""

from __future__ import annotations

import json
import os
import re
import sys
from itertools import chain
from pathlib import Path

import click
import numpy as np
from rich.table import Table

from nrtrewrite.artifacts import (
    HEX_FIELDS, KIND_FILES, column_texts, decode_columns, decode_record, open_records,
    open_regular, rank_dirs,
)
from nrtrewrite.cli import (Int, IntRange, JsonErrorCommand, OneValue, PathArg, WholeWriter,
                            json_why, main, plain, print_table, stderr_console, stdout_console,
                            stopped_why, stops_deferred, warn)
from nrtrewrite.codes import NetAddrMark
from nrtrewrite.compose.leaves import Leaf
from nrtrewrite.emit import formats as F
from nrtrewrite.errors import (NrtRewriteError, OutputError, counted,
                               escape_path, path_text)

#: Columns shown per file in the rich table (every field is in --json).
COLUMNS: dict[str, tuple[str, ...]] = {
    "spad.bin": ("cc_op", "algo_type_name", "algo_sub_type", "algo_sub_type_name",
                 "trigger_next", "reporter",
                 "ring_wait_complete", "ring_send_complete", "channel_list",
                 "sema_shift_offset", "sema_mask"),
    "tpinc.bin": ("m2s", "s2m", "repeat", "last_sync"),
    "legs.bin": ("trigger", "spad_index", "channel", "step", "leaf_name", "half", "sdma_op",
                 "reduction_type", "neigh_name", "num_elements", "n_tiles", "dma_count",
                 "cce_count", "sem_count", "sb2sb_count"),
    "sb2sb.bin": ("wait_mode", "wait_idx", "update_mode", "update_idx", "semaphore_value",
                  "in_dtype_name", "num_active_channels", "src.start_addr", "src.num_elem",
                  "dst.start_addr", "dst.num_elem"),
    "dma.bin": ("dir", "stream", "sdma_op", "length", "first", "last", "meta", "gen",
                "buf_ptr"),
    "cce.bin": ("meta", "meta_idx", "op_name", "last", "in_dtype_name", "out_dtype_name",
                "acc_dtype_name", "valid", "length", "num_sources", "reduction_type"),
    "sem.bin": ("subop_name", "role", "remote", "gen", "value", "addr"),
    # basic_block_id beside enc_channel: a FIFO record's net_op_idx counts from 0 in its
    # channel's block (FIFO_SLICES), so the table names the block of each op.
    "net_ops.bin": ("enc_channel", "basic_block_id", "func_rel_op_idx", "variable_peer",
                    "tx_entry_cnt", "rx_entry_cnt",
                    "initial_send_credits", "ending_recv_credits", "net_idx_loop_size",
                    "inc_send_handshake", "inc_recv_handshake"),
    "net_src.bin": ("channel", "block", "net_op_idx", "complete", "dev_addr", "size", "mark_name",
                    "dst_rank", "dst_addr"),
    "net_dest.bin": ("channel", "block", "net_op_idx", "complete", "dev_addr", "size", "mark_name",
                     "src_rank"),
}
#: The rank manifest's ``fifo`` slice of each FIFO address file (docs/FORMATS.md §1.2) and the
#: ``net_ops.bin`` column that counts its entries an op: dump shows a record's channel,
#: ``channel``, from the slice that holds it (``net_op_idx`` counts the ops of that channel's
#: basic block, from 0 in each block's segment, FORMATS §8 "Basic blocks"; ``net_ops.bin``
#: stores its channel, ``enc_channel``).
FIFO_SLICES = {"net_src.bin": (1, "tx_entry_cnt"), "net_dest.bin": (2, "rx_entry_cnt")}
#: The legs.bin ``leaf_name`` column is never narrower than the longest leaf name
#: (``direct_reduce_send_kangaring``, 28), so a piped table shows every name whole.
LEAF_NAME_WIDTH = max(len(leaf.name) for leaf in Leaf)
#: Columns of a piped or redirected table: the widest, of net_ops.bin, needs 206 and its row
#: number's digits (legs.bin about 207 with a 4-digit row number and the longest leaf name;
#: a stored u64 enc_channel of 20 digits, 9 more); rich draws a table no wider than it needs.
PIPED_WIDTH = 240
#: The most rows of one rich table on a terminal (``paged_tables``): a longer ``--limit``
#: prints its rows as consecutive tables of this many.
PAGE_ROWS = 1000


#: A column the record does not have (a spad entry has channel_list or the mesh overlay).
ABSENT = "-"


def _cell(key: str, val) -> str:
    if val is None:
        return ABSENT
    if key in HEX_FIELDS and isinstance(val, int):
        return f"0x{val:x}"
    return str(val)


#: The selectors, in the order docs/CLI.md lists them, with their help.
SELECTORS: dict[str, str] = {
    "spad": "SPAD cc_op entries and tp_inc_steps.",
    "sb2sb": "0xBF S3D3_COLLECTIVE words.",
    "cce": "CCE compute descriptors.",
    "dma": "Legs and data buffer descriptors.",
    "sem": "EVT_SEM semaphore BDs.",
    "fifo": "Net-proxy FIFOs.",
}


def fifo_channels(rdir: Path, name: str, size: int) -> dict[str, np.ndarray] | None:
    """The ``channel`` and ``block`` of each of the ``size`` records of FIFO address file
    ``name`` (:data:`FIFO_SLICES`) of rank folder ``rdir``: the channel of the rank
    manifest's ``fifo`` slice that holds it, and the ``basic_block_id`` of the segment it is
    in (FORMATS §8 "Basic blocks": a block without entries in the file has no segment, so
    the n-th segment is not always block n - 1); None for every record when the manifest or
    its ``fifo``
    cannot be read, or when its slices are faulty in a way ``simulate`` refuses: not tiling
    the files (:func:`~nrtrewrite.simulate.artifacts.check_fifo_slices` against the records
    the three FIFO files hold: a slice out of range, not following the previous channel's,
    overlapping one, ...) or not splitting them at their ops (:func:`_slices_split_ops`),
    since a record's channel is then no better than a guess (dump decodes what is there;
    simulate checks more).  ``{"channel": values, "block": values}`` (object arrays), or
    None for another file."""
    from nrtrewrite.simulate.artifacts import FIFO_FILES, check_fifo_slices, read_rank_fifo
    if name not in FIFO_SLICES:
        return None
    channel = np.full(size, None, object)
    unsplit = {"channel": channel, "block": np.full(size, None, object)}
    try:
        fifo = read_rank_fifo(rdir)
        files = {fname: open_records(rdir / fname) for fname in FIFO_FILES}
        if files[name].size != size:
            return unsplit
        check_fifo_slices(fifo, {fname: rf.size for fname, rf in files.items()})
        blocks = _slices_split_ops(fifo, files)
        if blocks is None:
            return unsplit
    except NrtRewriteError:
        return unsplit
    for ch, slices in fifo:
        first, count = slices[FIFO_SLICES[name][0]]
        channel[first:first + count] = ch
    return {"channel": channel, "block": blocks[name]}


def _slices_split_ops(fifo: list[tuple[int, tuple[tuple[int, int], ...]]],
                      files: dict) -> dict[str, np.ndarray] | None:
    """Whether the ``fifo`` slices of a rank folder (tiling its FIFO files, ``files``: their
    :class:`~nrtrewrite.artifacts.RecordFile`) also split them at their ops as FORMATS §8
    says, the part of ``simulate``'s checks that tells which channel a record is: each
    slice's ``net_ops.bin`` rows have the slice's channel as ``enc_channel``; a
    ``net_src.bin`` or ``net_dest.bin`` slice is one segment per basic block (a run of the
    slice's ops with one ``basic_block_id``) with an op whose ``tx_entry_cnt``
    (``rx_entry_cnt``) > 0, in order, each of NET_TRANSFER entries and NET_OP_COMPLETE
    terminators ending with a terminator, then one EXEC_COMPLETE entry whose ``net_op_idx``
    is the block's last op (FORMATS §8 "Basic blocks"); each terminator closes the entries
    before it (after the previous one), all of them and it with one ``net_op_idx`` k, op k
    of the segment's block (counted from 0, ascending), whose count counts those entries.
    If so, per FIFO address file, the ``basic_block_id`` of the segment each record is in
    (an object array); else None.  An :class:`NrtRewriteError` when a file cannot be read
    or changed since it was checked (``RecordFile.chunks``)."""
    ops_all = _columns(files["net_ops.bin"], ("enc_channel", "basic_block_id", "tx_entry_cnt",
                                              "rx_entry_cnt"))
    sides_all = {fname: _columns(files[fname], ("mark", "net_op_idx")) for fname in FIFO_SLICES}
    transfer, complete = int(NetAddrMark.NET_TRANSFER), int(NetAddrMark.NET_OP_COMPLETE)
    exec_complete = int(NetAddrMark.EXEC_COMPLETE)
    block = {fname: np.full(files[fname].size, None, object) for fname in FIFO_SLICES}
    for ch, slices in fifo:
        o0, on = slices[0]
        if (ops_all["enc_channel"][o0:o0 + on] != ch).any():
            return None
        bb = ops_all["basic_block_id"][o0:o0 + on]
        firsts = np.flatnonzero(np.append(True, bb[1:] != bb[:-1])) if on else np.zeros(0, int)
        blocks = list(zip(firsts.tolist(), np.diff(np.append(firsts, on)).tolist()))
        for fname, (side, cnt) in FIFO_SLICES.items():
            first, count = slices[side]
            counts = ops_all[cnt][o0:o0 + on]
            segs = [(a, m) for a, m in blocks if counts[a:a + m].any()]
            mark = sides_all[fname]["mark"][first:first + count]
            idx = sides_all[fname]["net_op_idx"][first:first + count]  # (unsigned)
            stops = np.flatnonzero(mark == exec_complete)  # each segment's last record
            if (stops.size != len(segs) or (count and mark[-1] != exec_complete)
                    or not ((mark == transfer) | (mark == complete)
                            | (mark == exec_complete)).all()):
                return None
            for (a, m), lo, hi in zip(segs, np.append(-1, stops[:-1]) + 1, stops):
                smark, sidx = mark[lo:hi], idx[lo:hi]
                if not smark.size or smark[-1] != complete or idx[hi] != m - 1:
                    return None
                block[fname][first + lo:first + hi + 1] = int(bb[a])
                ends = np.flatnonzero(smark == complete)  # each op's terminator
                k = sidx[ends]                             # the op each terminator closes
                entries = np.diff(ends, prepend=-1) - 1    # the entries before each terminator
                if ((k >= m).any() or (k[1:] <= k[:-1]).any()
                        or (np.repeat(k, entries + 1) != sidx).any()
                        or (counts[a:a + m][k] != entries).any()):
                    return None
    return block


def _columns(rf, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The columns ``names`` of every record of ``rf`` (a FIFO file's
    :class:`~nrtrewrite.artifacts.RecordFile`), read a block at a time (checked a regular
    file, never blocking, never mapped), so only those columns are held, not the whole
    records (a 200 MB ``net_src.bin``: 5 bytes a record of its 72)."""
    cols = {name: np.empty(rf.size, rf.dtype[name]) for name in names}
    at = 0
    for block in rf.chunks():
        for name in names:
            cols[name][at:at + block.size] = block[name]
        at += block.size
    return cols


def _part(extra: dict[str, np.ndarray] | None, first: int, n: int) -> dict[str, np.ndarray]:
    """The values of ``extra`` (per record of a file) for its records [first, first + n)."""
    return {key: col[first:first + n] for key, col in (extra or {}).items()}


def _selectors(f):
    for kind in reversed(SELECTORS):  # (click lists options in decoration order, bottom up)
        f = click.option(f"--{kind}", f"sel_{kind}", is_flag=True, help=SELECTORS[kind])(f)
    return f


class _DumpCommand(JsonErrorCommand):
    """``dump``: with ``--json``, an error (exit 2) is ``{"kind", "ranks": [], "error"}`` on
    stdout (then the error line on stderr): every file is checked before the first byte of
    the document is written, so an error comes before it (unless a file changes while it
    is read: then :func:`_write_json` closes the document begun with ``"error"``).
    ``kind`` is the selector given, else null."""

    json_indent = 1

    @staticmethod
    def error_document(params: dict, why: str) -> dict:
        given = [k for k in SELECTORS if params.get(f"sel_{k}")]
        return {"kind": given[0] if len(given) == 1 else None, "ranks": [], "error": why}


#: ``dump``'s ``--help`` text (not a docstring: see :data:`nrtrewrite.cli.MAIN_HELP`)
DUMP_HELP = "Decoded tables of an artifact file, a rank folder, or a whole output folder."


@main.command("dump", cls=_DumpCommand, help=DUMP_HELP)
@click.argument("path", type=PathArg(exists=True))
@_selectors
@click.option("--rank", cls=OneValue, type=Int(), default=None,
              help="Only this rank of an output folder.",
              twice="dump shows one rank of an output folder, or every rank (no --rank)")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (docs/CLI.md).")
@click.option("--limit", cls=OneValue, type=IntRange(min=0), default=200, show_default=True,
              help="Rows per table in the rich view (0 = all); --json is never cut.")
def dump_cmd(path, rank, as_json, limit, **selected):
    """The command (its help: :data:`DUMP_HELP`)."""
    p = Path(path)
    if not p.is_file() and not p.is_dir():  # a FIFO, a device, a socket: neither form
        raise OutputError(f"{escape_path(p)}: not a regular file nor a folder (dump reads an "
                          "artifact file, a rank folder or an output folder)")
    kinds = [k for k in SELECTORS if selected[f"sel_{k}"]]
    if len(kinds) > 1:  # (click's flag_value options kept the last one silently)
        raise click.UsageError(f"{' and '.join('--' + k for k in kinds)} are exclusive: "
                               "choose one selector")
    kind = kinds[0] if kinds else None
    if kind is None:
        if p.is_file():
            files = [p.name]
            # the selector the file's name belongs to (docs/FORMATS.md §1), as if given
            kind = next((k for k, names in KIND_FILES.items() if p.name in names), None)
        else:
            raise click.UsageError("choose what to dump: --spad, --sb2sb, --cce, --dma, --sem "
                                   "or --fifo (a folder's files have no one kind)")
    else:
        files = list(KIND_FILES[kind])
    if p.is_file():
        if p.name not in files:
            raise OutputError(f"{escape_path(p)}: not a {' / '.join(files)} file (what "
                              f"--{kind} dumps, told by the file's name)")
        rank_dirs(p, rank)  # (checks --rank against the file's rank folder)
        targets = [(p.parent, [p.name])]
    else:
        targets = [(d, files) for d in rank_dirs(p, rank)]
        if all(d != p for d, _ in targets):  # an output folder's rank folders (not p's own)
            if rank is None:  # (the manifest read whole: its format checked there)
                if note := check_format_and_note_missing_ranks(p, [d for d, _ in targets]):
                    warn(stderr_console(), note)
            else:
                check_top_format(p)
    if as_json:  # streamed: one block of 65,536 records decoded at a time, whatever the size
        _write_json(WholeWriter(sys.stdout), kind, targets)
        return
    console = stdout_console(PIPED_WIDTH)
    for rdir, names in targets:
        for name in names:
            rf = open_records(rdir / name)
            extra = fifo_channels(rdir, name, rf.size)
            title = f"{folder_name(rdir)}/{name} ({counted(rf.size, 'record')})"
            if console.is_terminal or not piped_table(console, title, rf, limit, extra):
                for table in paged_tables(title, rf, limit, extra):
                    print_table(console, table)
            if limit and rf.size > limit:
                more = counted(rf.size - limit, "more record")
                console.print(f"... {more} (--limit 0 shows all)")


def check_format_and_note_missing_ranks(out: Path, dirs: list[Path]) -> str | None:
    """Refuse output folder ``out`` when its ``manifest.json`` is of another format or
    version (``ManifestFormatError``, ``simulate``'s line, as :func:`check_top_format`
    refuses it); else a warning when the ranks it lists (an output folder's, FORMATS.md
    §1.1) are not all among the rank folders ``dirs`` dump found: a deleted rank folder
    would otherwise be left out without a word.  None for a rank folder, a manifest that
    cannot be read or is not JSON, or whose ``ranks`` are not a list of ranks (dump decodes
    what is there; ``simulate`` checks).  The manifest is read whole, checked as
    ``simulate`` reads it, but only its top-level object is built (:func:`_top_manifest`,
    ``read_top_manifest``'s ``only``: until 2026-12-06 the whole of it, tens of MB for a
    HIER plan)."""
    from nrtrewrite.simulate.artifacts import manifest_ranks
    if not _has_manifest(out) or (top := _top_manifest(out, ("ranks",))) is None:
        return None
    try:
        ranks = manifest_ranks(out, top)
    except NrtRewriteError:
        return None
    found = {d.name for d in dirs}
    missing = [r for r in ranks if F.rank_dir_name(r) not in found]
    if not missing:
        return None
    shown = ", ".join(map(str, missing[:8])) + (", ..." if len(missing) > 8 else "")
    return (f"{escape_path(out / 'manifest.json')} lists {counted(len(missing), 'rank')} "
            f"({shown}) with no rank folder in the output; dumping the "
            f"{counted(len(dirs), 'rank folder')} there")


def _top_manifest(out: Path, only: tuple[str, ...]) -> dict | None:
    """``out/manifest.json``'s top-level object with the keys ``only`` built
    (``read_top_manifest``), refused when it is of another format or version (as
    ``simulate`` refuses it); None when it cannot be read or is not JSON (``dump`` decodes
    what is there)."""
    from nrtrewrite.simulate.artifacts import ManifestFormatError, read_top_manifest
    try:
        return read_top_manifest(out, only=only, command="dump")
    except ManifestFormatError:
        raise
    except NrtRewriteError:
        return None


def _has_manifest(out: Path) -> bool:
    """Whether output folder ``out`` has a ``manifest.json`` entry (a link included)."""
    man = out / "manifest.json"
    return man.exists() or man.is_symlink()


#: The first two keys of a top-level manifest of ours (its keys are sorted: FORMATS.md §1.1),
#: ``format`` and ``format_version``, each a JSON string or a JSON literal or integer.
_WS = rb"[ \t\n\r]*"  # JSON's whitespace (not \s: \f and \v are no JSON)
_FORMAT_HEAD = re.compile(_WS + rb'\{' + _WS + rb'"format"' + _WS + rb':' + _WS
                          + rb'("(?:[^"\\\x00-\x1f]|\\.)*")' + _WS + rb',' + _WS
                          + rb'"format_version"' + _WS + rb':' + _WS
                          + rb'(-?[0-9]+|true|false|null)' + _WS + rb'[,}]')
#: Bytes of a manifest's beginning :func:`check_top_format` reads.
FORMAT_HEAD_BYTES = 4096
#: What may spell the key ``format`` or ``format_version`` again past the head: either name
#: whole, its closing quote included (so a value such as the model ``format.neff`` in
#: ``input.name`` keeps the fast path), or any ``\\u0050`` to ``\\u007f`` escape (the
#: prefixes ``\\u005``, ``\\u006``, ``\\u007``: a superset of their characters' escapes,
#: ``\\u005f`` to ``\\u0076``, whatever the case of the last digit), which ``json.dumps``
#: never writes (it escapes control and non-ASCII characters only)
_HEAD_KEY_SPELLINGS = (b'"format"', b'"format_version"', b"\\u005", b"\\u006", b"\\u007")


def _may_repeat_the_head(fh, start: int) -> bool:
    """Whether the manifest open as ``fh`` may give ``format`` or ``format_version`` again
    from byte ``start`` on (:data:`_HEAD_KEY_SPELLINGS`): scanned a block at a time, never
    parsed (a 34 MB manifest in some tens of milliseconds)."""
    fh.seek(start)
    keep = max(map(len, _HEAD_KEY_SPELLINGS)) - 1  # (a spelling across two blocks)
    tail = b""
    while block := fh.read(1 << 20):
        window = tail + block
        if any(text in window for text in _HEAD_KEY_SPELLINGS):
            return True
        tail = window[-keep:]
    return False


def check_top_format(out: Path) -> None:
    """Refuse output folder ``out`` when its ``manifest.json`` is of another format or
    version (``simulate``'s line, ``read_top_manifest``).  Its first two keys, where it
    begins as ours does (:data:`_FORMAT_HEAD`), accept a v2 manifest of ours at once (a
    dump of ``--rank R`` does not parse a 34 MB manifest) where neither key may be given
    again past them (:func:`_may_repeat_the_head`: the whole read takes a repeated key's
    last value, and until 2026-12-06 the head took the first); anything else is decided by
    reading it whole (its top-level object), as a dump without ``--rank`` decides.  A
    folder without one, or one that cannot be read or is not JSON, is not refused here:
    ``dump`` decodes what is there."""
    from nrtrewrite.simulate.artifacts import format_refusal
    if not _has_manifest(out):
        return
    man = out / "manifest.json"
    try:
        with open_regular(man) as fh:
            head = fh.read(FORMAT_HEAD_BYTES)
            if (m := _FORMAT_HEAD.match(head)) is not None and _may_repeat_the_head(fh, m.end()):
                m = None  # (a key given again: decided by the whole read, below)
    except OSError:
        return
    if m is not None:
        try:
            doc = {"format": json.loads(m.group(1)), "format_version": json.loads(m.group(2))}
        except ValueError:  # (not UTF-8, a bad escape, 5,000 digits: read whole below)
            m = None
    if m is not None and format_refusal(doc, man, "dump") is None:
        return  # (ours, v2: the fast path; a refusal is decided by the whole read below, as
        #         without --rank: a manifest cut short or not JSON is dumped, not refused)
    _top_manifest(out, ())


def folder_name(rdir: Path) -> str:
    """The name of rank folder ``rdir`` as shown (``rank_dir``, a table's title): its own
    name also when given as ``.``, ``..``, through a file's folder (``Path(".").name`` is
    empty) or through a link (``link/..`` is the link's target's parent, not the link's)."""
    return path_text(Path(os.path.realpath(rdir)).name)  # (UTF-8 whatever the locale)


def _table(title: str, name: str, widths: list[int] | None = None) -> Table:
    """The empty rich table of artifact ``name``: the row number, then :data:`COLUMNS`;
    with ``widths`` (one per column, the row number's first) no column narrower than its
    width."""
    table = Table(title=plain(title))
    least = widths or [None] * (1 + len(COLUMNS[name]))
    table.add_column("#", justify="right", min_width=least[0])
    for c, w in zip(COLUMNS[name], least[1:]):
        if c == "leaf_name":
            table.add_column(c, min_width=max(LEAF_NAME_WIDTH, w or 0), no_wrap=True)
        else:
            table.add_column(c, min_width=w)
    return table


def rich_table(title: str, rf, limit: int, extra: dict | None = None) -> Table:
    """The first ``limit`` records of ``rf`` (all: 0) as one rich table, a record decoded
    at a time (a terminal's view: rich styles it and fits it to the window); ``extra``:
    columns that are not the record's, a value per record of the file (``fifo_channels``)."""
    table = _table(title, rf.name)
    cols = COLUMNS[rf.name]
    for i, rec in enumerate(chain.from_iterable(rf.chunks(limit or None))):  # only these
        row = decode_record(rf.name, rec)
        row.update({key: col[i] for key, col in (extra or {}).items()})
        table.add_row(str(i), *(_cell(c, row.get(c)) for c in cols))
    return table


def paged_tables(title: str, rf, limit: int, extra: dict | None = None):
    """The first ``limit`` records of ``rf`` (all: 0) as rich tables (a terminal's view, or
    a piped table :func:`piped_table` leaves to rich): one, :func:`rich_table`, up to
    :data:`PAGE_ROWS` rows; beyond, a table of that many rows at a time (the title says
    which rows), each yielded as it is made, so the first rows come at once and memory
    stays one table's whatever the file's size (rich holds a table whole and lays it out at
    some 2,000 rows a second).  No column is narrower than it was in an earlier table (each
    at least its widest cell so far), so the tables line up unless a later one holds a
    wider cell; each is printed no narrower than it needs (``cli.print_table``).  ``extra``
    as :func:`rich_table`'s."""
    n = rf.size if not limit else min(limit, rf.size)
    if n <= PAGE_ROWS:
        yield rich_table(title, rf, limit, extra)
        return
    name = rf.name
    widths = [len(str(n - 1))] + [0] * len(COLUMNS[name])
    first = 0
    for chunk in rf.chunks(n, PAGE_ROWS):
        last = first + len(chunk) - 1
        cells = column_cells(name, chunk, _part(extra, first, len(chunk)))
        widths[1:] = [max(w, max(map(len, c))) for w, c in zip(widths[1:], cells)]
        table = _table(f"{title}: rows {first} - {last}", name, widths)
        for row in zip(range(first, last + 1), *cells):
            table.add_row(str(row[0]), *row[1:])
        first = last + 1
        yield table


def _shown_widths(name: str, widths: list[int]) -> list[int]:
    """The widths rich gives the columns of artifact ``name``'s table (:func:`_table`) whose
    widest cells are ``widths`` (the row number's first), where the console is wide enough:
    at least each header, and ``LEAF_NAME_WIDTH`` for ``leaf_name``."""
    return [max(w, len(h), LEAF_NAME_WIDTH if h == "leaf_name" else 0)
            for w, h in zip(widths, ("#",) + COLUMNS[name])]


def _table_width(name: str, widths: list[int]) -> int:
    """The width of that table: each column padded by a space each side, a border between
    columns and at each end."""
    shown = _shown_widths(name, widths)
    return sum(shown) + 3 * len(shown) + 1


def _cell_widths(rf, n: int, extra: dict | None = None) -> list[int]:
    """The widest cell of each column of ``rf``'s first ``n`` records (``n`` > 0), the row
    number's first: a pass over the file, a block at a time."""
    widths = [len(str(n - 1))] + [0] * len(COLUMNS[rf.name])
    first = 0
    for chunk in rf.chunks(n):
        for j, cells in enumerate(column_cells(rf.name, chunk, _part(extra, first, len(chunk)))):
            widths[j + 1] = max(widths[j + 1], max(map(len, cells)))
        first += len(chunk)
    return widths


def _in_record_order(n: int, parts: list, fill=None) -> list:
    """The values of ``parts`` (``[(rows, values)]``, one item per group of
    ``decode_columns``: rows None for every record) as one list of ``n`` in record order,
    ``fill`` where no group has a value (a spad key the entry does not have)."""
    if len(parts) == 1 and parts[0][0] is None:
        return parts[0][1]
    out = np.full(n, fill, object)
    for rows, values in parts:
        out[rows] = np.array(values, object)
    return out.tolist()


def column_cells(name: str, arr: np.ndarray, extra: dict | None = None) -> list[list[str]]:
    """The :data:`COLUMNS` cells of every record of ``arr``, column by column, as
    :func:`_cell` writes them (``column_texts``): decoded a block at a time
    (``decode_columns``); ``extra``: columns that are not the record's, a value per record
    of ``arr`` (``fifo_channels``)."""
    groups = decode_columns(name, arr)
    extra = extra or {}
    return [[_cell(key, v) for v in extra[key].tolist()] if key in extra else
            _in_record_order(len(arr), [(rows, column_texts(cols[key], key in HEX_FIELDS))
                                        for rows, cols in groups if key in cols], ABSENT)
            for key in COLUMNS[name]]


def piped_table(console, title: str, rf, limit: int, extra: dict | None = None) -> bool:
    """Print the first ``limit`` records of ``rf`` (all: 0) on a piped console as
    :func:`rich_table` would print them, byte for byte, at any size: a first pass over the
    file takes each column's widest cell, rich draws the title, the header and the borders
    of a table of one row of that many ``x``, and every row is then written between its
    borders a block at a time (rich holds the whole table and lays out some 2,000 rows a
    second).  False, nothing printed, where rich would not lay the table out at its cells'
    widths (wider than the console: rich shrinks and wraps) or draws its rows otherwise."""
    name, cols = rf.name, COLUMNS[rf.name]
    n = rf.size if not limit else min(limit, rf.size)
    if not n:
        return False
    widths = _cell_widths(rf, n, extra)
    probe = _table(title, name)
    probe.add_row(*("x" * w for w in widths))
    with console.capture() as cap:
        console.print(probe)
    # the title's lines, the top border, the header, its rule, the row, the bottom border
    lines = cap.get().split("\n")
    row = len(lines) - 3
    shown = _shown_widths(name, widths)
    if row < 3 or len(lines[row]) != _table_width(name, widths):
        return False
    left, mid, right = lines[row][0], lines[row][shown[0] + 3], lines[row][-1]
    fmt = left + " " + f" {mid} ".join(["%*s"] + ["%-*s"] * len(cols)) + " " + right
    if lines[row] != fmt % tuple(chain.from_iterable(zip(shown, ["x" * w for w in widths]))):
        return False  # rich shrank a column or draws rows otherwise: it prints the table
    out = console.file
    out.write("\n".join(lines[:row]) + "\n")
    first = 0
    for chunk in rf.chunks(n):
        cells = column_cells(name, chunk, _part(extra, first, len(chunk)))
        if any(max(map(len, c)) > w for c, w in zip(cells, widths[1:])):
            # rewritten in place between the two passes (same file, same size): its rows
            # would stand out of their borders (until 2026-12-06 they did, exit 0)
            raise OutputError(f"{escape_path(rf.path)}: changed while being read (a "
                              "record is wider than when the table's columns were measured)")
        numbers = range(first, first + len(chunk))
        first += len(chunk)
        out.write("".join(fmt % tuple(chain.from_iterable(zip(shown, r))) + "\n"
                          for r in zip(numbers, *cells)))
    out.write("\n".join(lines[row + 1:]))
    return True


#: how deep a record's object stands in the ``dump --json`` document: ranks[] / {} / files
#: {} / name: [] / the record
RECORD_LEVEL = 5


def _record_template(cols: dict) -> tuple[str, list[list]]:
    """A ``%`` format string for records of the key set ``cols`` (``decode_columns``), laid
    out as ``json.dumps(record, indent=1)`` nested :data:`RECORD_LEVEL` containers deep, and
    its values column by column (names already JSON strings)."""
    pad = " " * (RECORD_LEVEL + 1)
    parts, values = [], []
    for key, col in cols.items():
        head = f"{pad}{json.dumps(key).replace('%', '%%')}: "
        if col.dtype == object:
            quoted = {v: json.dumps(v).replace("%", "%%") for v in set(col.tolist())}
            parts.append(head + "%s")
            values.append([quoted[v] for v in col.tolist()])
        elif col.ndim == 2:  # (no artifact has an array field of length 0)
            parts.append(head + "[\n" + ",\n".join([pad + " %d"] * col.shape[1]) + f"\n{pad}]")
            values.extend(col[:, j].tolist() for j in range(col.shape[1]))
        else:
            parts.append(head + "%d")
            values.append(col.tolist())
    return "{\n" + ",\n".join(parts) + "\n" + " " * RECORD_LEVEL + "}", values


def record_texts(name: str, arr: np.ndarray, extra: dict | None = None) -> list[str]:
    """The text of each record of ``arr`` in the ``dump --json`` document: exactly
    ``json.dumps(decode_record(name, rec), indent=1)`` with every line after the first
    indented by :data:`RECORD_LEVEL` spaces, made column by column (``decode_columns``)
    and one format string per key set, so that a large file is written at several hundred
    thousand records a second, not a few ten thousand.  ``extra``: keys that are not the
    record's, added after its own, a value per record of ``arr`` (an object array:
    ``fifo_channels``)."""
    parts = []
    for rows, cols in decode_columns(name, arr):
        for key, col in (extra or {}).items():
            cols[key] = col if rows is None else col[rows]
        fmt, values = _record_template(cols)
        parts.append((rows, [fmt % t for t in zip(*values)]))
    return _in_record_order(len(arr), parts)


def _write_json(out, kind, targets) -> None:
    """``json.dumps({"kind": kind, "ranks": [...]}, indent=1)`` and a newline, written as it
    is made: ``ranks`` holds ``{"rank_dir", "files": {name: [decoded record, ...]}}``.  An
    error once the document has begun (a file changed while it is read) closes it with
    the ranks so far and ``"error"`` (still one JSON document), then is raised; so does a
    stop (SIGTERM, SIGHUP, Ctrl-C), which never cuts a piece (``stops_deferred``): a block of
    records is formatted first, then written whole with what closes it noted."""
    # every file checked before the first byte is written (then read as it is decoded)
    files = [(rdir, [(name, open_records(rdir / name)) for name in names])
             for rdir, names in targets]
    closers: list[str] = []  # what closes each level open, innermost last

    def put(text: str, *opens: str, closes: bool = False) -> None:
        """Write ``text``, which closes the innermost level open or opens levels closed by
        ``opens`` (outermost first), as one step."""
        with stops_deferred():
            out.write(text)
            if closes:
                closers.pop()
            closers.extend(opens)

    try:
        head = '{\n "kind": ' + json.dumps(kind) + ',\n "ranks": '
        if not files:
            put(head + "[]\n}\n")
            return
        put(head + "[", "\n ]")
        for t, (rdir, named) in enumerate(files):
            head = ("," if t else "") + '\n  {\n   "rank_dir": ' + json.dumps(folder_name(rdir))
            if named:
                put(head + ',\n   "files": {', "\n  }", "\n   }")
            else:
                put(head + ',\n   "files": {}', "\n  }")
            for k, (name, rf) in enumerate(named):
                head = ("," if k else "") + "\n    " + json.dumps(name) + ": "
                if not rf.size:
                    put(head + "[]")
                    continue
                put(head + "[", "\n    ]")
                extra, first = fifo_channels(rdir, name, rf.size), 0
                for c, chunk in enumerate(rf.chunks()):
                    texts = record_texts(name, chunk, _part(extra, first, len(chunk)))
                    first += len(chunk)
                    put(("," if c else "") + "\n     " + ",\n     ".join(texts))
                put(closers[-1], closes=True)
            if named:
                put(closers[-1], closes=True)
            put(closers[-1], closes=True)
    except NrtRewriteError as err:
        if closers:
            _close_json(out, closers, err.line())
            err.json_documented = True  # (JsonErrorCommand prints no second document)
        raise
    except BaseException as exc:  # a signal, Ctrl-C, a bug: still a closed document
        if closers:
            _close_json(out, closers, stopped_why(exc))
            exc.json_documented = True  # (JsonErrorCommand prints no second document)
        raise
    put("\n ]\n}\n", closes=True)


def _close_json(out, closers: list[str], why: str) -> None:
    with stops_deferred():
        out.write("".join(reversed(closers)) + ',\n "error": ' + json.dumps(json_why(why))
                  + "\n}\n")
        out.flush()
