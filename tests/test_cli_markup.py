"""Paths and names shown through rich are shown as they are (found by an exploratory
tester): an output folder ``z]`` in ``o[`` stopped ``lower`` and ``simulate`` after their work with
a MarkupError (exit 70, "a bug in nrtrewrite"), ``out[v2]`` lost its ``[v2]`` in the titles,
and ``dump`` of a file in a folder ``[bold]x`` titled it ``x/sem.bin``."""

from __future__ import annotations

import io
import shutil

from rich.console import Console

from nrtrewrite.cli import plain, plain_line, styled
from nrtrewrite.neff.assembler import assemble_spec

from test_simulate import cli, coll_spec


def _rendered(text: str) -> str:
    c = Console(file=io.StringIO(), width=200, force_terminal=False, color_system=None)
    c.print(text, highlight=False)
    return c.file.getvalue()


def test_plain_shows_brackets_and_escapes_controls():
    for raw in ("o[/z]", "out[v2]", "[bold]x", "a[", "b]c", "[red]r[/red]", "[[x]]"):
        assert _rendered(plain(raw)) == raw + "\n"
    assert _rendered(plain("\\[x]")) == "\\\\[x]\n"  # (a name's backslash doubled)
    assert _rendered(plain("a\nb[/z]")) == "a\\nb[/z]\n"


def test_plain_keeps_backslashes_and_emoji_codes():
    """(Found by a second exploratory tester: rich's markup ``escape`` left ``o\\[1]``
    alone and the renderer ate its backslash; a trailing backslash came out doubled;
    ``:thumbs_up:`` became an emoji.)  Since 2026-12-05 a name's backslash is shown doubled
    by ``plain`` itself (once: rich adds or eats none), a message's (``plain_line``) kept."""
    for raw, shown in (("o\\[1]", "o\\\\[1]"), ("p\\", "p\\\\"), ("x\\[b]", "x\\\\[b]"),
                       ("a\\\\[red]", "a\\\\\\\\[red]"), (":thumbs_up:", ":thumbs_up:"),
                       ("e:smile:.neff", "e:smile:.neff")):
        assert _rendered(plain(raw)) == shown + "\n"
        assert _rendered(styled("[bold]A[/] ", plain(raw), " B")) == f"A {shown} B\n"
        assert _rendered(plain_line(raw)) == raw + "\n"
        assert _rendered(styled("[bold]A[/] ", plain_line(raw), " B")) == f"A {raw} B\n"
    assert _rendered(plain("\x1b]0;pwn\x07")) == "\\x1b]0;pwn\\x07\n"


def test_lower_and_simulate_of_an_output_named_like_markup(tmp_path):
    neff = tmp_path / "m.neff"
    neff.write_bytes(assemble_spec(coll_spec("all_reduce", "bf16", 2, 64)))
    (tmp_path / "o[").mkdir()
    for name in ("o[/z]", "out[v2]"):  # the first: o[ / z]
        out = tmp_path / name
        res = cli("lower", neff, "-o", out)
        assert res.exit_code == 0, res.output
        # (MODEL as given, docs/CLI.md "Paths in the output"; one line, never wrapped)
        assert res.stdout.splitlines()[0].strip() == f"{neff} -> {out}"
        res = cli("simulate", out)
        assert res.exit_code == 0, res.output
        assert res.stdout.splitlines()[0].strip() == f"simulate {out} (seed 0)"


def test_dump_titles_a_folder_named_like_markup(tmp_path):
    neff = tmp_path / "m.neff"
    neff.write_bytes(assemble_spec(coll_spec("all_reduce", "bf16", 2, 64)))
    out = tmp_path / "out"
    assert cli("lower", "-q", neff, "-o", out).exit_code == 0
    for name in ("[bold]x", "a[", "b]c"):
        (tmp_path / name).mkdir()
        shutil.copy(out / "rank-0000" / "sem.bin", tmp_path / name / "sem.bin")
        res = cli("dump", tmp_path / name / "sem.bin", "--limit", "1")
        assert res.exit_code == 0, res.output
        assert res.stdout.splitlines()[0].strip().startswith(f"{name}/sem.bin (")


def test_explain_shows_a_subgraph_named_like_markup(tmp_path):
    spec = coll_spec("all_reduce", "bf16", 2, 64)
    spec["subgraphs"][0]["name"] = "sg[b]x"
    neff = tmp_path / "m.neff"
    neff.write_bytes(assemble_spec(spec))
    res = cli("explain", neff)
    assert res.exit_code == 0, res.output
    assert "sg[b]x/sp #1" in res.stdout


def test_inspect_shows_names_as_they_are(tmp_path):
    """``inspect`` printed a var's name with its escape sequence raw (a terminal obeyed it)
    and lost or doubled backslashes in names and the file's path."""
    spec = coll_spec("all_reduce", "bf16", 2, 64)
    sg = spec["subgraphs"][0]
    sg["name"] = "sg[b]:smile:"  # (no backslash: a member name)
    sg["vars"].append({"name": "v\x1b[31mred\\", "type": "tmp-buf", "size": 64})
    (tmp_path / "d\\[x]").mkdir()
    neff = tmp_path / "d\\[x]" / "m:fire:.neff"
    neff.write_bytes(assemble_spec(spec))
    res = cli("inspect", neff)
    assert res.exit_code == 0, res.output
    assert "\x1b" not in res.stdout
    lines = res.stdout.splitlines()
    assert lines[0].startswith(f"{tmp_path}/d\\\\[x]/m:fire:.neff  NEFF-like")  # (doubled)
    assert "sg[b]:smile:: vars" in res.stdout
    assert "v\\x1b[31mred\\\\" in res.stdout
