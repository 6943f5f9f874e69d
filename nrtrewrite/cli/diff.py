"""``nrtrewrite diff A B``: field-level differences; exit 0 identical, 1 different, 2 error."""

from __future__ import annotations

import json
import os
import shlex
import stat
import sys
from pathlib import Path

import click

from nrtrewrite.cli import (DASH_READ, IntRange, JsonErrorCommand, OneValue, PathArg, is_dash,
                            WholeWriter, json_why, main, note, stderr_console, stopped_why,
                            stops_deferred, warn)
from nrtrewrite.diff import (Report, check_ignored, checksum_note, compare, layout_note,
                             positional_note, recompressed_note, record_line_texts,
                             versions_text)
from nrtrewrite.errors import (NrtRewriteError, OutputError, counted, escape_controls, escape_line,
                               escape_path, path_text)


def _close_json(out, rep: Report, files: list, first: bool, error: str | None = None,
                versions: dict | None = None, checksums: list | None = None,
                layouts: list | None = None, recompressed: list | None = None,
                values: list | None = None, folders: list | None = None,
                positional: list | None = None) -> None:
    """End the streamed ``--json`` object: the differences' list (begun by the caller, empty
    if ``first``), ``files``, ``values`` when ``--max`` left out some differing values of a
    manifest or a NEFF JSON member (their :class:`~nrtrewrite.diff.ValueCount`),
    ``folders`` when it left out the line of a rank folder on one side only (their
    :class:`~nrtrewrite.diff.FolderCount`), the counts, ``versions`` when the two outputs'
    differ (``{"a": {...}, "b": {...}}``),
    ``checksums`` when a checksum key differs where what it covers compares identical (a
    line's object and ``covers``), ``layouts`` when the top
    manifests hold the same JSON in other bytes (the line's object), ``recompressed`` the
    rewritten NEFF's name when its members all compare identical and its payloads differ,
    ``positional`` the FIFO files compared by position, not by their ``fifo`` slices
    (``{"where", "why"}``), ``identical``, and ``error`` when one stopped it."""
    out.write(("" if first else "\n ") + "],\n")
    out.write(' "files": ' + json.dumps([f.to_json() for f in files]) + ",\n")
    if values:
        out.write(' "values": ' + json.dumps([v.to_json() for v in values]) + ",\n")
    if folders:
        out.write(' "folders": ' + json.dumps([f.to_json() for f in folders]) + ",\n")
    out.write(f' "count": {rep.count},\n "shown": {rep.shown},\n')
    if versions is not None:
        out.write(' "versions": ' + json.dumps(versions, default=str) + ",\n")
    if checksums:
        out.write(' "checksums": ' + json.dumps(checksums, default=str) + ",\n")
    if layouts:
        out.write(' "layouts": ' + json.dumps(layouts, default=str) + ",\n")
    if recompressed:
        out.write(' "recompressed": ' + json.dumps(recompressed) + ",\n")
    if positional:
        out.write(' "positional": ' + json.dumps(positional) + ",\n")
    if error is None:
        out.write(f' "identical": {json.dumps(rep.count == 0)}\n}}\n')
    else:  # stopped midway: the object is closed, so stdout is still one JSON document
        out.write(f' "identical": null,\n "error": {json.dumps(json_why(error))}\n}}\n')


class _DiffCommand(JsonErrorCommand):
    """``diff``, whose usage errors (an argument that is no folder, a bad ``--max``, a
    missing argument) with ``--json`` also write the JSON document on stdout, ``"identical":
    null`` and the message as ``"error"``: click checks the arguments before the command
    runs, and its line on stderr and status 2 follow as for every command.  Errors while
    comparing close the streamed document themselves (:func:`diff_cmd`)."""

    documents_command_errors = False

    def _print_error(self, params: dict, why: str, err=None) -> None:
        out = sys.stdout
        out.write('{\n "differences": [')
        _close_json(out, Report(), [], True, why)


def _ignored(ctx, param, value):
    """``--ignore``'s key paths, checked while the arguments are parsed (a usage error)."""
    try:
        return check_ignored(value)
    except ValueError as err:
        raise click.BadParameter(str(err)) from None


#: the beginnings of a tar.gz (gzip) and of a tar (``ustar`` at byte 257) file
_GZIP_MAGIC = b"\x1f\x8b"
_TAR_MAGIC = (257, b"ustar")


def _tar_flags(path: str) -> str | None:
    """How ``tar`` extracts the regular file ``path`` when it is a tar or tar.gz archive (a
    golden output, ``fixtures/golden/NAME.tar.gz``): ``xzf`` for gzip bytes, ``xf`` for a
    plain tar's (``ustar`` at byte 257), by its name when its bytes say neither (``.tar.gz``,
    ``.tgz``: ``xzf``; ``.tar``: ``xf``); None for another file.  Until 2026-12-06 every
    archive got ``xzf``, which fails on a plain tar (not gzip)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(_TAR_MAGIC[0] + len(_TAR_MAGIC[1]))
    except OSError:
        head = b""
    if head.startswith(_GZIP_MAGIC):
        return "xzf"
    if head[_TAR_MAGIC[0]:] == _TAR_MAGIC[1]:
        return "xf"
    if path.endswith((".tar.gz", ".tgz")):
        return "xzf"
    return "xf" if path.endswith(".tar") else None


def _pastable(value) -> str | None:
    """``value``'s path as a shell word that names the file when pasted from stderr: None
    when stderr's encoding cannot write the path's bytes on disk as they are (the C locale
    and a non-ASCII name: it would show ``g\\xe9.tar.gz``; a Latin-1 locale and a UTF-8
    name: other bytes) or the path holds a character that is not printable (escaped in the
    line)."""
    shown = path_text(value)
    encoding = getattr(sys.stderr, "encoding", None) or "utf-8"
    try:
        same = shown.encode(encoding) == os.fsencode(value)
    except (UnicodeError, LookupError):
        same = False
    if not same or not shown.isprintable():
        return None
    return shlex.quote(shown)


def _tar_word(value) -> str | None:
    """``value``'s path as the word after ``tar xzf`` (:func:`_pastable`, None where it is
    not): a relative path that ``tar`` would read as another file is given as ``./PATH`` -
    a name beginning ``-`` and a name with ``:`` before any ``/`` (GNU tar's ``HOST:FILE``,
    a remote archive).  ``-`` itself (standard input: ``tar xzf - -C D`` waits on the
    terminal) never reaches here from the CLI, which refuses it earlier
    (:meth:`_OutputFolder.convert`, :data:`DASH_READ`); the case remains only for a caller
    passing a PathLike ``Path('-')``, a file named ``-``, given as ``./-``."""
    path = os.fspath(value)
    text = path.decode("utf-8", "surrogateescape") if isinstance(path, bytes) else path
    if not os.path.isabs(text) and (text.startswith("-") or ":" in text.split("/", 1)[0]):
        value = os.path.join(".", text)
    return _pastable(value)


#: the extraction ``diff`` of an archive prints (its flags and the archive's word): a new,
#: empty folder each run (``mktemp -d``), so nothing of an older extraction is left and no
#: folder the user names is removed first
RECIPE = 'D=$(mktemp -d) && tar {flags} {archive} -C "$D"'


class _OutputFolder(PathArg):
    """``A`` and ``B``: an output folder.  A regular file is refused saying so, and, for a
    tar or tar.gz archive (a golden output), how to extract it for ``diff``, as docs/CLI.md
    "diff" does (until 2026-12-06 click's ``Directory 'X' is a file.``, which called the
    file a folder and said nothing of what to do).  The recipe names the file when stderr's
    encoding can write its name, else ``ARCHIVE`` and why (until 2026-12-06 the escaped
    name, ``tar xzf 'g\\xe9.tar.gz'``, which names no file).  The recipe extracts into an
    empty folder, so run again it leaves nothing of an older extraction (:data:`RECIPE`).
    ``-`` is refused first, in the one wording of every command (:data:`DASH_READ`), a file
    named ``-`` in the working folder or not (until 2026-12-07 such a file was called a file,
    not an output folder)."""

    def unreadable(self, value, err: OSError) -> OutputError:
        """An output folder that cannot be looked at: ``PATH: cannot read (Permission
        denied)``, the form of diff's every file and side (``diff._why``)."""
        return OutputError(f"cannot read ({err.strerror or err})", file=os.fspath(value))

    def convert(self, value, param, ctx):
        if is_dash(value):
            self.fail(DASH_READ, param, ctx)
        if isinstance(value, (str, os.PathLike)) and value != "" and os.path.isfile(value):
            shown = path_text(value)
            why = f"{shown!r} is a file, not an output folder"
            flags = _tar_flags(os.fspath(value))
            if flags is not None:
                word = _tar_word(value)
                archive = word if word is not None else "ARCHIVE"
                # (into a new, empty folder: tar x over an older extraction keeps the files
                # the archive no longer has; until 2026-12-07 `mkdir -p DIR && tar ...`,
                # then `rm -rf DIR && mkdir DIR && tar ...`, which removed whatever was
                # put for DIR, the archive's own folder too)
                why += (": extract a golden archive first, "
                        + RECIPE.format(flags=flags, archive=archive)
                        + ', then diff "$D" (docs/CLI.md "diff")')
                if word is None:
                    why += ("; ARCHIVE is this file, whose name this locale's encoding "
                            "cannot write")
            self.fail(why, param, ctx)
        converted = super().convert(value, param, ctx)
        if (kind := _not_a_folder(value)) is not None:
            self.fail(f"{path_text(value)!r} must be an output folder, not {kind}", param, ctx)
        return converted


#: what ``diff`` calls a path that is neither a folder nor a regular file
_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _not_a_folder(value) -> str | None:
    """The kind of ``value`` when it is a FIFO, a device or a socket (``'p' must be an output
    folder, not a FIFO``, what it found last as docs/CLI.md "Errors" words it; a usage error
    as a regular file's: until 2026-12-07 ``p: cannot read (Not a directory)``, the OS's word
    for a folder it could not list), else None."""
    try:
        mode = os.stat(value).st_mode
    except (OSError, ValueError):
        return None  # (click's check, before, said what is wrong)
    return next((kind for test, kind in _KINDS if test(mode)), None)


#: ``diff``'s ``--help`` text (not a docstring: see :data:`nrtrewrite.cli.MAIN_HELP`)
DIFF_HELP = (
    "Compare two output folders field by field (rank, file, record, field, both values). A "
    "is the reference (a golden output): what cannot be read in A is an error, in B a "
    "difference; each line is FILE FIELD: A-VALUE != B-VALUE.\n\n"
    "Exit status: 0 identical, 1 the outputs differ, 2 an error (128 + N: stopped by "
    "signal N). Without --strict the top manifest's layout, a NEFF JSON member's and a "
    "checksum that differs where the file it covers compares identical are notes on stderr, "
    "and a rank manifest's layout is nothing: no difference (docs/CLI.md \"diff\").")


@main.command("diff", cls=_DiffCommand, help=DIFF_HELP)
@click.argument("a", type=_OutputFolder(exists=True, file_okay=False))
@click.argument("b", type=_OutputFolder(exists=True, file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (docs/CLI.md).")
@click.option("--max", "max_lines", cls=OneValue, type=IntRange(min=0), default=50,
              show_default=True,
              help="Differences shown (0 = all); the count is always exact.")
@click.option("--ignore", "ignore", multiple=True, metavar="KEY", callback=_ignored,
              help="A key path of the top-level manifest.json not to compare, e.g. "
                   "tool_version, input.name (repeatable).")
@click.option("--strict", is_flag=True,
              help="Differ unless every file holds the same bytes (CI), but for the top "
                   "manifest's values --ignore leaves out: each checksum note and each "
                   "manifest of the same JSON in other bytes is a difference.")
def diff_cmd(a, b, as_json, max_lines, ignore, strict):
    """The command (its help: :data:`DIFF_HELP`)."""
    out = WholeWriter(sys.stdout)  # (pieces a stop cannot cut)
    limit = max_lines or None
    files = []
    values = []  # the manifests and NEFF JSON members some of whose values --max left out
    folders = []  # the rank folders on one side only whose line --max left out

    def say(text: str) -> None:  # a warning on stderr
        warn(stderr_console(), text)

    versions = {}  # both outputs' versions, when they differ
    checksums = []  # the checksum keys that differ where what they cover compares identical

    def on_checksum(lines, covers: str) -> None:  # a note on stderr; with --json, a field
        if as_json:
            checksums.extend({**d.to_json(), "covers": covers} for d in lines)
        else:
            note(stderr_console(), checksum_note(lines, covers, escape_controls))

    layouts = []  # the top manifests' line, when they hold the same JSON in other bytes
    recompressed = []  # the rewritten NEFF's name, when only its payload's encoding differs

    def on_layout(lines) -> None:  # a note on stderr; with --json, a field
        if as_json:
            layouts.extend(d.to_json() for d in lines)
        else:
            note(stderr_console(), layout_note(lines, escape_controls))

    def on_recompressed(name: str) -> None:  # a note on stderr; with --json, a field
        if as_json:
            recompressed.append(name)
        else:
            note(stderr_console(), recompressed_note(name, escape_controls))

    positional = []  # the FIFO files compared by position, not by their fifo slices

    def on_positional(where: str, why: str) -> None:  # a note on stderr; with --json, a field
        if as_json:
            positional.append({"where": where, "why": why})
        else:
            note(stderr_console(), positional_note(where, why, escape_controls))

    def on_versions(va: dict, vb: dict) -> None:  # a note on stderr; with --json, a field
        versions.update(a=va, b=vb)
        if not as_json:
            note(stderr_console(), versions_text(escape_path(Path(a, "manifest.json")), va,
                                                 escape_path(Path(b, "manifest.json")), vb))

    if as_json:  # streamed: the differences as they are found, the counts at the end
        first = [True]

        def on_difference(index, lines):
            for d in lines:
                out.write(("\n  " if first[0] else ",\n  ")
                          + json.dumps({"index": index, **d.to_json()}, default=str))
                first[0] = False

        def close(rep, error=None):
            if opened:
                with stops_deferred():
                    _close_json(out, rep, files, first[0], error, versions or None,
                                checksums, layouts, recompressed, values, folders, positional)

        def on_records(index, where, name, recs, xa, xb, channel=None, blocks=None):
            texts = record_line_texts(index, where, name, recs, xa, xb, as_json=True,
                                      channel=channel, blocks=blocks)
            if texts is None:
                return False
            out.write(("\n  " if first[0] else ",\n  ") + ",\n  ".join(texts))
            first[0] = False
            return True

        rep = Report(limit, on_difference, files.append, on_records, stops_deferred,
                     on_checksum, strict, on_layout, on_recompressed, values.append,
                     folders.append, on_positional)
        opened = []  # (the document begun: a stop before it writes none)
        try:
            with stops_deferred():
                out.write('{\n "differences": [')
                opened.append(True)
            compare(a, b, rep, ignore, warn=say, on_versions=on_versions)
        except NrtRewriteError as err:  # the line on stderr and exit 2 follow (cli._Group)
            close(rep, err.line())
            raise
        except BaseException as exc:  # a signal, Ctrl-C, a bug: still a closed document
            close(rep, stopped_why(exc))
            raise
        close(rep)
    else:
        # one line each: an entry's name with a line break or an escape sequence in it is
        # escaped, as error lines are
        def on_difference(index, lines):
            for d in lines:
                out.write(escape_line(d.line(escape_controls)) + "\n")

        def on_records(index, where, name, recs, xa, xb, channel=None, blocks=None):
            texts = record_line_texts(index, where, name, recs, xa, xb,
                                      escape=escape_controls, channel=channel, blocks=blocks)
            if texts is None:
                return False
            out.write("\n".join(texts) + "\n")
            return True

        def on_file(fc):
            out.write(escape_line(fc.line(escape_controls)) + "\n")

        rep = compare(a, b, Report(limit, on_difference, on_file,
                                   on_records, stops_deferred, on_checksum, strict, on_layout,
                                   on_recompressed, on_file, on_file, on_positional),
                      ignore, warn=say, on_versions=on_versions)
        if rep.shown < rep.count:
            out.write(f"... {counted(rep.count - rep.shown, 'more difference')} "
                      "(--max 0 shows all)\n")
        out.write("identical\n" if not rep.count else f"{rep.count} difference(s)\n")
    sys.exit(1 if rep.count else 0)
