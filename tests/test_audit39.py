"""Tests that kill the survivors of the mutation audit of the thirty-ninth session's code
(``git diff 0950f16..0a77e65 -- nrtrewrite/``): each asserts a value worked out by hand from
the docs (docs/CLI.md "Errors", FORMATS.md, TOPOLOGY.md, DESIGN.md), not read back from the
code."""

from __future__ import annotations

import io
import json
import sys

from rich.console import Console

import nrtrewrite.cli as cli_mod
import nrtrewrite.simulate.triggers as triggers_mod
from nrtrewrite.errors import OutputError, SimulationError, Where


def test_every_name_part_of_a_location_is_escaped_once():
    """docs/CLI.md "Errors": a name (the file, a tar member, a subgraph, a stream, an
    artifact) is shown with its backslash doubled and its control characters escaped, once;
    a rank, a trigger, a record are numbers and a field a key path, shown as given."""
    name = "a\\nb\tc"  # a backslash, n, a tab: shown a\\nb\tc
    shown = "a" + "\\" + "\\" + "nb" + "\\" + "tc"
    assert str(Where(file=name)) == shown
    assert str(Where(member=name)) == f"member {shown}"
    assert str(Where(subgraph=name)) == f"subgraph {shown}"
    assert str(Where(stream=name)) == f"stream {shown}"
    assert str(Where(artifact=name)) == f"artifact {shown}"
    # a field's key path keeps its own escape (a JSON string's \\r), its tab only guarded
    assert str(Where(field='["k\\r"]\t')) == 'field ["k\\r"]\\t'
    assert str(Where(file="f", subgraph="s\\", stream="t\\", rank=3, artifact="x\\",
                     record=7)) == ("f: subgraph s\\\\, stream t\\\\, rank 3, "
                                    "artifact x\\\\, record 7")


# ------------------------------------------------- HIER legs' channel ranges (DESIGN "HIER")


def _leg(name, plans, span):
    """A leg as ``_hier_legs`` reads it: (name, algorithm, plans of (channels, chunk,
    sections...), groups, buffers, (channel_base, channel_ids)); ``plans`` the ids of each."""
    return (name, "RING", [([(ch, [0, 1]) for ch in ids], {}, None, None) for ids in plans],
            [], [], span)


def _range_refusal(legs) -> str | None:
    try:
        triggers_mod._check_leg_channel_ranges(legs, {})
    except SimulationError as e:
        return e.why
    return None


def test_a_legs_range_counts_up_to_the_highest_id_of_any_of_its_plans():
    """A leg of two plans, the second running the higher id (channel 1, and channels 1 and
    2, each from base 1: DESIGN "HIER", each group's plan runs ids from channel_base on, as
    many as its channel count): its range is 2 ids, not the first plan's 1; a leg after it
    starts at 3."""
    legs = [_leg("intra_redsct", [[0]], (0, 1)), _leg("inter_allr", [[1], [1, 2]], (1, 2)),
            _leg("intra_allg", [[3]], (3, 1))]
    assert _range_refusal(legs) is None
    legs[1] = _leg("inter_allr", [[1], [1, 2]], (1, 1))
    assert _range_refusal(legs) == (
        "hier.legs[1].channel_ids should be 2, not 1: its plans run ids from channel_base 1 up "
        "to 2 (hier.legs[1].plans[1].channels[1]) (a leg's range counts the ids from its "
        'channel_base up to the highest its plans run: docs/DESIGN.md "HIER")')


def test_a_leg_whose_plans_run_no_channel_has_an_empty_range():
    """No id run, a range of 0 ids at where the leg before it ended; the next leg starts
    there too. A count of 1 is refused."""
    legs = [_leg("intra_redsct", [[0]], (0, 1)), _leg("inter_allr", [], (1, 0)),
            _leg("intra_allg", [[1]], (1, 1))]
    assert _range_refusal(legs) is None
    legs[1] = _leg("inter_allr", [], (1, 1))
    assert _range_refusal(legs) == (
        "hier.legs[1].channel_ids should be 0, not 1: its plans run no channel (a leg's range "
        "counts the ids from its channel_base up to the highest its plans run: docs/DESIGN.md "
        '"HIER")')


# ------------------------------------------------- escaping in reasons and the CLI's lines


def test_a_reason_is_guarded_not_escaped_again():
    """docs/CLI.md "Errors": a reason quotes its names escaped already, so its line break is
    shown as \\n and its backslash is kept single (a backslash, then b: one backslash)."""
    e = OutputError("name a\\b then\na line break")
    assert e.why == "name a" + "\\" + "b then" + "\\" + "na line break"
    assert e.line() == e.why


def test_plain_line_keeps_a_backslash_and_plain_doubles_it():
    """A message whose names were escaped where they were put in keeps its backslash
    (``plain_line``); a raw name has it doubled (``plain``); both escape a line break."""
    assert cli_mod.plain_line("a\\b\nc").plain == "a" + "\\" + "b" + "\\" + "nc"
    assert cli_mod.plain("a\\b\nc").plain == "a" + "\\" + "\\" + "b" + "\\" + "nc"


class _Stream(io.StringIO):
    def __init__(self, encoding):
        super().__init__()
        self._enc = encoding

    @property
    def encoding(self):
        return self._enc


def test_encodable_asks_the_stream_it_is_given(monkeypatch):
    """The stream's own encoding decides (stderr's for an error line), not stdout's:
    U+6743 on an ASCII stream is \\u6743 though stdout is UTF-8, and kept on a UTF-8 one
    though stdout is ASCII."""
    monkeypatch.setattr(sys, "stdout", _Stream("utf-8"))
    assert cli_mod.encodable("\u6743.neff", _Stream("ascii")) == "\\u6743.neff"
    monkeypatch.setattr(sys, "stdout", _Stream("ascii"))
    assert cli_mod.encodable("\u6743.neff", _Stream("utf-8")) == "\u6743.neff"


def test_the_placed_outputs_warning_names_the_output_escaped_once(monkeypatch):
    """A stop after ``lower`` put its output in place warns naming it, escaped as a name
    (its backslash doubled, its line break \\n), once."""
    buf = io.StringIO()
    monkeypatch.setattr(cli_mod, "stderr_console", lambda: Console(
        file=buf, force_terminal=False, color_system=None, width=200))
    monkeypatch.setattr(cli_mod, "_PLACED", ["o\\ut\nx"])
    cli_mod._say_placed()
    assert buf.getvalue() == ("nrtrewrite: warning: o" + "\\" + "\\" + "ut" + "\\" + "nx: the new "
                              "output is complete and in place; the run was stopped after it "
                              "was written\n")


def test_an_error_line_is_guarded_once_as_printed():
    """The printed line (``_capped_line``) escapes a line break an argument brought in and
    keeps the single backslash of a name escaped already."""
    assert cli_mod._capped_line("nrtrewrite: error: a\\b: x\ny") == \
        "nrtrewrite: error: a" + "\\" + "b: x" + "\\" + "ny"


def test_an_os_errors_paths_are_names_escaped_once():
    """An OS error names its file(s) as names: a backslash doubled, a line break \\n."""
    line, code = cli_mod._os_error_line(FileNotFoundError(2, "No such file or directory",
                                                          "a\\b\nc"))
    assert (line, code) == ("nrtrewrite: error: a" + "\\" + "\\" + "b" + "\\" + "nc: No such "
                            "file or directory", 2)
    line, _ = cli_mod._os_error_line(OSError(18, "Invalid cross-device link", "x\\y", None,
                                             "z"))  # (errno, strerror, filename, winerror,
    # filename2)
    assert line == "nrtrewrite: error: x" + "\\" + "\\" + "y -> z: Invalid cross-device link"


def test_a_path_the_locale_cannot_encode_is_a_name_escaped_once():
    """A path argument holding a backslash and a lone surrogate: its backslash doubled, the
    surrogate \\ud800 (one backslash, Python's escape of what ASCII cannot hold)."""
    path = "a\\b\ud800"
    err = UnicodeEncodeError("utf-8", path, 3, 4, "surrogates not allowed")
    assert cli_mod._unencodable_path_line(err, [path]) == (
        "nrtrewrite: error: a" + "\\" + "\\" + "b" + "\\" + "ud800: this path cannot be encoded "
        "in the locale's encoding (utf-8: surrogates not allowed); run under a UTF-8 locale "
        "(LC_ALL=C.UTF-8) or rename it")


def test_an_error_line_is_escaped_for_stderrs_encoding_not_stdouts(monkeypatch):
    """``_say`` escapes what stderr's encoding cannot hold (U+6743 as \\u6743 on an ASCII
    stderr), whatever stdout's encoding is."""
    err = _Stream("ascii")
    monkeypatch.setattr(sys, "stdout", _Stream("utf-8"))
    monkeypatch.setattr(sys, "stderr", err)
    cli_mod._say("nrtrewrite: error: \u6743.neff: file too short")
    assert err.getvalue() == "nrtrewrite: error: \\u6743.neff: file too short\n"


def test_a_usage_error_in_a_json_document_is_the_stderr_lines_message():
    """docs/CLI.md "Errors": ``--json``'s ``"error"`` is the line, escaped once. A usage
    error the command raises quoting an argument with a backslash (``--topology
    trn2:nodes=2\\x`` beside ``--nodes 2``) shows it doubled, a name escaped once, in both;
    the whole message is only guarded (a second escape doubled it again in the document
    alone)."""
    from click.testing import CliRunner

    res = CliRunner().invoke(cli_mod.main, ["explain", "--json", "--op", "allreduce",
                                            "--bytes", "1MiB", "--ranks", "2", "--nodes", "2",
                                            "--topology", "trn2:nodes=2\\x"],
                             prog_name="nrtrewrite")
    assert res.exit_code == 2
    why = ("--nodes and --topology trn2:nodes=2" + "\\" * 2 + "x both give the node count; give "
           "it once (--topology trn2 --nodes 2, or --topology trn2:nodes=2)")
    assert json.loads(res.stdout)["error"] == why
    assert res.stderr == f"nrtrewrite explain: error: {why} (see 'nrtrewrite explain --help')\n"


def test_a_var_of_a_subgraph_off_the_memory_map_names_the_subgraph_escaped_once():
    """A subgraph is a name: its backslash doubled, its line break \\n, in the reason."""
    from nrtrewrite.simulate.layout import Layout

    layout = Layout.__new__(Layout)
    layout._by_var, layout.file = {}, "o/manifest.json"
    try:
        layout.var_region("sg\\0\n1", 3)
    except SimulationError as e:
        assert e.line() == ("o/manifest.json: var 3 of sg" + "\\" + "\\" + "0" + "\\" + "n1 is "
                            "not in the memory map")
    else:
        raise AssertionError("not refused")
