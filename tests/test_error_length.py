"""An error stays one readable line: a reason longer than ``MAX_WHY_CHARS`` (1000) keeps its
start and end and says how long it was (a value quoted in full - a list of 200,000 numbers
where an integer belongs - made a 1.5 MB line)."""

from __future__ import annotations

import functools
from pathlib import Path

from click.testing import CliRunner

from conftest import unvalidated_spec
from test_names_locale import UTF8, cli
import test_names_locale
from nrtrewrite.cli import main
from nrtrewrite.errors import MAX_WHY_CHARS, ValidationError

#: A Latin-1 locale made without root (its module-scoped fixture, shared)
latin1 = test_names_locale.latin1
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_a_long_reason_is_cut_in_the_middle():
    why = "A" * 5000 + "Z"
    err = ValidationError(why, file="m.neff", field="x")
    assert err.line().startswith("m.neff: field x: " + "A" * 700)
    assert "(5001 characters in all)" in err.line() and err.line().endswith("A" * 199 + "Z")
    assert len(err.why) <= MAX_WHY_CHARS + 60
    short = ValidationError("short reason")
    assert short.line() == "short reason"


def test_assemble_of_a_huge_wrong_value_is_one_short_line(tmp_path):
    import yaml

    def mut(s):  # (a list is worded `a list`: a string is the value shown whole)
        s["subgraphs"][0]["vars"][0]["var_id"] = "7" * 200_000
    spec = tmp_path / "big.yaml"
    spec.write_text(yaml.safe_dump(unvalidated_spec(mut)))
    res = CliRunner().invoke(main, ["assemble", str(spec), "-o", str(tmp_path / "m.neff")])
    assert res.exit_code == 2
    line, = res.stderr.splitlines()
    assert "field subgraphs[0].vars[0].var_id: must be an integer, not '7777" in line
    assert "characters in all" in line and len(line) < 1200, len(line)
    # (the reason, `must be an integer, not '77...7'`, is counted whole, though an error
    # holds at most MAX_HELD_WHY_CHARS of it: 24 + 200,002 characters)
    assert line.count(" characters in all) ") == 1
    assert f" ... ({len('must be an integer, not ') + 200_002} characters in all) ... " in line


def _ar2_with(extra: dict[str, bytes] | None = None, json_text=None) -> bytes:
    """fixtures/ar2.neff's members (neff.json's text replaced by ``json_text(text)``) and
    ``extra`` members, in a new NEFF."""
    import gzip
    import io
    import tarfile
    from pathlib import Path

    from nrtrewrite.neff.container import HEADER_SIZE, default_header, wrap_payload
    data = (Path(__file__).resolve().parents[1] / "fixtures" / "ar2.neff").read_bytes()
    members = []
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(data[HEADER_SIZE:]))) as tar:
        for info in tar:
            if info.isfile():
                body = tar.extractfile(info).read()
                if info.name == "neff.json" and json_text is not None:
                    body = json_text(body.decode()).encode()
                members.append((info.name, body))
    buf = io.BytesIO()  # (tarfile: build_payload refuses the names these tests need)
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, body in members + list((extra or {}).items()):
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return wrap_payload(default_header(), gzip.compress(buf.getvalue(), mtime=0))


def test_control_characters_in_names_do_not_break_the_one_line(tmp_path):
    """A tar member's name, a JSON key, a path with a line break or a terminal escape: the
    error stays one line, the characters escaped as Python writes them in a string."""
    cases = [
        (_ar2_with({"a\nb.txt": b"x"}), "member a\\nb.txt: "),
        (_ar2_with({"e\x1b[31m.txt": b"x"}), "member e\\x1b[31m.txt: "),
        (_ar2_with(json_text=lambda t: t.rstrip().rstrip("}") + ', "k\\r\\nx": 1e999}'),
         # (a key that is not a plain name is quoted in the key path, with JSON's escapes)
         'member neff.json, field ["k\\r\\nx"]: invalid JSON: 1e999 is not a finite number'),
    ]
    for i, (data, says) in enumerate(cases):
        path = tmp_path / f"m{i}.neff"
        path.write_bytes(data)
        res = CliRunner().invoke(main, ["lower", str(path), "-o", str(tmp_path / f"o{i}")])
        assert res.exit_code == 2
        line, = res.stderr.splitlines()
        assert says in line and "\x1b" not in line and "\r" not in line, line
    res = CliRunner().invoke(main, ["inspect", str(tmp_path / "no\nsuch.neff")])
    assert res.exit_code == 2 and res.stderr == (
        f"nrtrewrite: error: {tmp_path}/no\\nsuch.neff: cannot read: No such file or directory\n")
    res = CliRunner().invoke(main, ["lower", str(tmp_path / "no\nsuch.neff")])
    line, = res.stderr.splitlines()
    assert "'" + str(tmp_path) + "/no\\nsuch.neff' does not exist" in line


def test_a_long_line_keeps_its_reason_between_long_paths():
    """A line over 2000 characters cuts each long word (a path) first, so the reason between
    two paths of 4,000 characters survives (it was lost in the middle of the one cut: a
    fault audit's `lower -o` of a 4,050-character path)."""
    from nrtrewrite.cli import _capped_line
    from nrtrewrite.errors import MAX_LINE_CHARS
    out = "/" + "d" * 4049
    line = _capped_line(f"{out}: cannot write the output: File name too long ({out}/.o.tmp-1-ab)")
    assert "cannot write the output: File name too long (" in line
    assert line.startswith("/" + "d" * 199 + " ... (4051 characters in all) ... ")  # (its ":")
    assert line.endswith("d" * 137 + "/.o.tmp-1-ab)")
    assert len(line) < MAX_LINE_CHARS
    short = "m.neff: field x: too big"
    assert _capped_line(short) == short
    # a line of short words only is still cut as a whole
    words = " ".join(["word"] * 1000)
    assert len(_capped_line(words)) < MAX_LINE_CHARS and "characters in all" in _capped_line(words)


def test_a_value_cut_in_the_middle_never_ends_or_starts_on_half_an_escape():
    """``json_text`` keeps a value's first 200 and last 80 characters past 300 (docs/CLI.md
    "Errors"); where the cut falls inside an escape, the escape is left out whole: a
    JSON backslash (``\\\\``) at characters 199..200 and ``\\u00e8`` at 198..203 end no
    head, the ``n`` of a ``\\n`` starts no tail.  Until 2026-12-06 the heads ended ``a\\``
    and ``a\\u``, the tail began ``nbbb``."""
    from nrtrewrite.errors import json_text

    # JSON: '"' + 198 a (199 characters), then the backslash's two at 199 and 200
    assert json_text("a" * 198 + "\\" + "b" * 200) == (
        '"' + "a" * 198 + " ... (402 characters in all) ... " + "b" * 79 + '"')
    # '"' + 197 a (198 characters), then \u00e8 at 198..203
    assert json_text("a" * 197 + "\u00e8" + "b" * 200) == (
        '"' + "a" * 197 + " ... (405 characters in all) ... " + "b" * 79 + '"')
    # the tail: 382 characters, its last 80 from 302, the "n" of \n at 301..302
    assert json_text("a" * 300 + "\n" + "b" * 78) == (
        '"' + "a" * 199 + " ... (382 characters in all) ... " + "b" * 78 + '"')
    # a backslash escaped (\\) then a "u": no escape, the head whole
    text = json_text("a" * 196 + "\\u0041" + "b" * 200)
    assert text.startswith('"' + "a" * 196 + "\\\\u ... (")


def test_a_cut_tells_an_escape_from_an_escaped_backslash_and_keeps_its_length():
    """The escapes ``repr`` and :func:`escape_controls` write (``\\x1b``, ``\\\\``) and runs of
    backslashes: a backslash after an odd run is the second of an escaped one.  The cut
    only shortens the head and the tail."""
    from nrtrewrite.errors import cut_middle

    # head 10: "aaaaaaaa" then \x1b at 8..11
    assert cut_middle("aaaaaaaa\\x1b" + "z" * 30, 20, 10, 5) == (
        "aaaaaaaa ... (42 characters in all) ... zzzzz")
    # head 10: "aaaaaaa" then \\ (7, 8) and \\ (9, 10): the second split
    assert cut_middle("aaaaaaa\\\\\\\\" + "z" * 30, 20, 10, 5) == (
        "aaaaaaa\\\\ ... (41 characters in all) ... zzzzz")
    # tail 5 from 37: \U0001f600 at 32..41 left out, the tail its last character
    assert cut_middle("z" * 32 + "\\U0001f600" + "y", 20, 4, 5) == (
        "zzzz ... (43 characters in all) ... y")
    # a tail that starts right after an escape, a head that ends right before one: whole
    assert cut_middle("aaaa\\n" + "z" * 30 + "\\tyyy", 20, 4, 5) == (
        "aaaa ... (41 characters in all) ... \\tyyy")


def test_a_cut_never_parts_the_two_escapes_of_a_surrogate_pair():
    """A character past U+FFFF is two escapes in JSON (``\\ud83d\\ude00``): a head never
    ends on the high one of a pair, a tail never starts on the low one; a lone surrogate's
    escape (half of no pair), or a ``\\\\`` then ``ud83d``, is kept as any text.  Until
    2026-12-06 the head of ``json_text`` of 60 emoji ended ``\\ud83d``, its tail began
    ``\\ude00``."""
    from nrtrewrite.errors import cut_middle, json_text

    pair = "\\ud83d\\ude00"  # (12 characters: the high escape, then the low one)
    # '"' + 60 pairs (pair k at 1 + 12k) + '"': 722 characters.  Head 200: pair 16 at
    # 193..204, its low escape at 199..204 split, then its high one left out: 16 pairs.
    # Tail 80 from 642: pair 53 at 637..648, its high escape split, then its low one left
    # out: pairs 54..59 and the quote.
    assert json_text("\U0001F600" * 60) == (
        '"' + pair * 16 + " ... (722 characters in all) ... " + pair * 6 + '"')
    # a cut right between the two escapes (none split): head 8 of "ab" + pair + 20 c
    assert cut_middle("ab" + pair + "c" * 20, 24, 8, 0, "{head}...") == "ab..."
    assert cut_middle("ab\\uD83D\\uDE00" + "c" * 20, 24, 8, 0, "{head}...") == "ab..."
    # tail 8 of 20 c + pair + "yz" (34): from 26, the low escape's start
    assert cut_middle("c" * 20 + pair + "yz", 20, 4, 8) == (
        "cccc ... (34 characters in all) ... yz")
    # lone surrogates: a high escape then "b", a low escape after "z"
    assert cut_middle("a" * 10 + "\\ud83d" + "b" * 30, 20, 16, 5) == (
        "aaaaaaaaaa\\ud83d ... (46 characters in all) ... bbbbb")
    assert cut_middle("z" * 30 + "\\ude00y", 20, 4, 7) == (
        "zzzz ... (37 characters in all) ... \\ude00y")
    # an escaped backslash (\\ at 8..9) then "ud83d" is no high escape, nor a low one's pair
    assert cut_middle("a" * 8 + "\\\\ud83d" + "\\ude00" + "z" * 30, 20, 15, 5) == (
        "aaaaaaaa\\\\ud83d ... (51 characters in all) ... zzzzz")
    assert cut_middle("z" * 30 + "\\\\ud83d" + "\\ude00y", 20, 4, 7) == (
        "zzzz ... (44 characters in all) ... \\ude00y")


def test_an_error_line_is_capped_as_written_on_an_ascii_or_utf8_stderr(tmp_path):
    """The 2,000-character cap (``errors.MAX_LINE_CHARS``, docs/CLI.md "Errors") holds for the
    line as the stream writes it: a character its encoding cannot hold is escaped first
    (an emoji on ASCII or Latin-1 is ``\\U0001f600``, 10 characters), then the line is cut,
    never inside an escape.  Until 2026-12-06 the cut counted the characters before the
    escaping: a path of ten words of 399 emoji each made an ASCII line of 18,197."""
    esc = "\\U0001f600"
    word = "a" + "\U0001F600" * 399 + "b"
    path = " ".join([word] * 10) + ".neff"
    runs = {"ascii": ("ascii", dict(UTF8, PYTHONIOENCODING="ascii")),
            "utf8": ("utf-8", UTF8)}
    lines = {}
    for tag, (enc, extra) in runs.items():
        proc = cli(["inspect", path], tmp_path, extra)
        assert proc.returncode == 2, (tag, proc.stderr[:300])
        lines[tag], = proc.stderr.decode(enc).splitlines()
    for line in lines.values():
        assert len(line) <= 2000, len(line)
        assert line.startswith("nrtrewrite: error: a")
        assert line.endswith("b.neff: cannot read: File name too long")
    # ASCII: each word, 1 + 3990 + 1 = 3992 characters written, keeps its first 200 and last
    # 150 less the escapes a cut would split (the 20th at 191..201, the 385th at 3841..3851);
    # the line of those ten cut words (366 characters each, the last 372 with its
    # ".neff:"), 19 + 9 * 367 + 372 + 32 = 3726 characters, is then cut as a whole
    ascii_ = lines["ascii"]
    assert ascii_.isascii()
    assert ascii_.startswith("nrtrewrite: error: a" + esc * 19 + " ... (3992 characters in all) ")
    assert ascii_.endswith(esc * 14 + "b.neff: cannot read: File name too long")
    assert " ... (3726 characters in all) ... " in ascii_
    assert "\\" not in ascii_.replace(esc, "")  # (every escape kept whole)
    # UTF-8: the emoji written as they are, each word (401 characters) cut alone
    assert "\\" not in lines["utf8"] and " ... (401 characters in all) ... " in lines["utf8"]


def test_an_error_line_is_capped_as_written_under_a_latin1_locale(tmp_path, latin1):
    """As above under a Latin-1 locale (stderr's encoding Latin-1, which holds no emoji):
    the line is the ASCII one, at most 2,000 characters, each escape whole."""
    path = " ".join(["a" + "\U0001F600" * 399 + "b"] * 10) + ".neff"
    lines = []
    for extra in (latin1, dict(UTF8, PYTHONIOENCODING="ascii")):
        proc = cli(["inspect", path], tmp_path, extra)
        assert proc.returncode == 2, proc.stderr[:300]
        line, = proc.stderr.decode("latin-1").splitlines()
        assert len(line) <= 2000, len(line)
        assert "\\" not in line.replace("\\U0001f600", "")
        lines.append(line)
    assert lines[0] == lines[1]


def _long_model(tmp_path, parts: list[str]):
    """fixtures/ar2.neff copied under the folders ``parts`` of ``tmp_path``."""
    from pathlib import Path

    folder = tmp_path.joinpath(*parts)
    folder.mkdir(parents=True)
    model = folder / "ar2.neff"
    model.write_bytes((Path(__file__).resolve().parents[1] / "fixtures" / "ar2.neff").read_bytes())
    return str(model)


@functools.cache
def _doc_cut() -> dict[str, int]:
    """The numbers of docs/CLI.md "Errors"'s sentence on the whole line's cut, read from it:
    `a whole error line longer than L characters ... first each run of more than R
    characters without a space ... keeps its first RH and last RT characters, ... then a
    line still longer than L keeps its first H and last T characters` (until 2026-12-06 the
    doc stated none of the whole line's: these tests wrote 2000, 1500 and 400 themselves,
    review 51m)."""
    import re
    from pathlib import Path

    doc = " ".join((Path(__file__).resolve().parents[1] / "docs" / "CLI.md").read_text(
        encoding="utf-8").split())
    m = re.search(r"a whole error line longer than ([\d,]+) characters .*? first each run "
                  r"of more than ([\d,]+) characters without a space .*? keeps its first "
                  r"([\d,]+) and last ([\d,]+) characters, .*? then a line still longer than "
                  r"([\d,]+) keeps its first ([\d,]+) and last ([\d,]+) characters", doc)
    assert m, "docs/CLI.md \"Errors\" no longer states the whole line's cut"
    keys = ("limit", "run", "run_head", "run_tail", "limit_again", "head", "tail")
    return dict(zip(keys, (int(g.replace(",", "")) for g in m.groups())))


def _cut(text: str) -> str:
    """docs/CLI.md "Errors"'s cut of a whole line, written from its words (no escape and no
    run past the doc's run limit in these texts)."""
    limit, head, tail = _doc_cut()["limit"], _doc_cut()["head"], _doc_cut()["tail"]
    if len(text) <= limit:
        return text
    return f"{text[:head]} ... ({len(text)} characters in all) ... {text[-tail:]}"


def _cut_run(run: str) -> str:
    """The doc's cut of a run of more than its run limit without a space."""
    assert len(run) > _doc_cut()["run"]
    head, tail = _doc_cut()["run_head"], _doc_cut()["run_tail"]
    return f"{run[:head]} ... ({len(run)} characters in all) ... {run[-tail:]}"


def test_cli_md_states_the_whole_lines_cut_as_errors_cut_line_does():
    """docs/CLI.md "Errors" states the cut's numbers (until 2026-12-06 only `cut the same
    way`, the why's 700 and 200, which the line does not use): past 2,000 characters each
    run of more than 400 without a space keeps its first 200 and last 150, then the line
    its first 1,500 and last 400 (review 51m)."""
    from nrtrewrite.errors import cut_line

    assert _doc_cut() == {"limit": 2000, "run": 400, "run_head": 200, "run_tail": 150,
                          "limit_again": 2000, "head": 1500, "tail": 400}
    words = " ".join(["w"] * 1200)  # 2,399 characters, no run to cut first
    assert cut_line(words) == _cut(words)
    run = "r" * 401
    line = f"{run} {words}"
    assert cut_line(line) == _cut(f"{_cut_run(run)} {words}")
    assert cut_line(run) == run  # (a line of at most 2,000 is not cut at all)


def test_a_json_error_document_is_capped_as_the_error_line_is(tmp_path):
    """docs/CLI.md "Errors": `--json`'s `"error"` is capped by the line's rule, counted on
    its own text: past 2,000 characters its first 1,500 and last 400.  A path of 1,200
    words `w` (no run past 400 characters to cut first): the line (`nrtrewrite: error: `
    + the error) and the error each cut as a whole.  Until 2026-12-06 the error was in the
    document whole (only its reason was capped, at 1,000)."""
    import json

    path = "w " * 1200 + ".neff"
    error = f"{path}: cannot read: File name too long"
    res = CliRunner().invoke(main, ["inspect", "--json", path])
    assert res.exit_code == 2
    assert json.loads(res.stdout)["error"] == _cut(error)
    line, = res.stderr.splitlines()
    assert line == _cut("nrtrewrite: error: " + error)


def test_a_streamed_json_error_cuts_a_long_path_first_as_the_line_does(tmp_path):
    """The same for `diff --json`'s document (its own writer) and `dump --json`'s: a
    folder of 3,000 characters (twelve of 249 `d`, each within NAME_MAX: one name of 3,000
    is too long, ENAMETOOLONG, an error line of its own since review 59k) does not exist;
    quoted, a run of more than 400 without a space, which keeps its first 200 and last 150
    (the line is then short)."""
    import json

    path = str(tmp_path / "/".join(["d" * 249] * 12))
    quoted = f"'{path}'"
    run = _cut_run(quoted)
    for args, name in ((["diff", "--json", path, str(tmp_path)], "Directory"),
                       (["dump", "--json", "--spad", path], "Path")):
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 2, res.stderr[:300]
        why = json.loads(res.stdout)["error"]
        assert why.endswith(f": {name} {run} does not exist."), why[-300:]
        assert len(why) < 600
        line, = res.stderr.splitlines()
        assert f" {name} {run} does not exist. (see " in line


def test_a_warning_line_is_capped_as_the_error_line_is(tmp_path):
    """docs/CLI.md "Errors": warning lines are capped by the same rule.  The model in nine
    folders of 255 characters `w w ... w` (128 words): `explain --no-verify-hash`'s
    warning `nrtrewrite: warning: PATH: header hash not verified (--no-verify-hash)`, past
    2,000 characters, keeps its first 1,500 and last 400.  Until 2026-12-06 it was written
    whole."""
    model = _long_model(tmp_path, [" ".join(["w"] * 128)] * 9)
    res = CliRunner().invoke(main, ["explain", model, "--no-verify-hash"])
    assert res.exit_code == 0, res.stderr[:300]
    warning = f"nrtrewrite: warning: {model}: header hash not verified (--no-verify-hash)"
    assert len(warning) > 2000
    assert res.stderr.splitlines()[0] == _cut(warning)


def test_inspects_warning_cuts_a_long_path_first(tmp_path):
    """`inspect --no-verify-hash`'s warning (written by its own code) on a model in nine
    folders of 250 `d`: `PATH: field hash: payload hash not verified`, past 2,000
    characters, the path and its colon, a run of more than 400 characters, keeps its first
    200 and last 150 (the line is then short), with `--json` too."""
    model = _long_model(tmp_path, ["d" * 250] * 9)
    token = f"{model}:"
    cut = _cut_run(token)
    for extra in ([], ["--json"]):
        res = CliRunner().invoke(main, ["inspect", model, "--no-verify-hash", *extra])
        assert res.exit_code == 0, res.stderr[:300]
        assert res.stderr.splitlines() == [
            f"nrtrewrite: warning: {cut} field hash: payload hash not verified"]


def test_the_error_closing_a_streamed_document_and_a_protocol_error_are_capped():
    """`stopped_why`, the `"error"` closing `dump`'s, `schedule`'s and `diff`'s streamed
    documents, and `simulate`'s protocol error (its document's `"error"` and its line) are
    capped by the same rule: a file of 3,000 characters and its colon, a run of more than
    400, keeps its first 200 and last 150."""
    from nrtrewrite.cli import stopped_why
    from nrtrewrite.errors import SimulationError
    from nrtrewrite.simulate.engine import Simulator
    from nrtrewrite.simulate.result import SimulationResult

    name = "/" + "d" * 2999
    token = name + ":"
    want = f"{_cut_run(token)} a stop"
    assert " ... (3001 characters in all) ... " in want
    assert stopped_why(SimulationError("a stop", file=name)) == want
    res = SimulationResult(output="o", seed=0)
    sim = Simulator.__new__(Simulator)
    sim.names_within, sim.given, sim.verdict = None, None, {}
    sim._record(res, SimulationError("a stop", file=name))
    assert res.error == want


def test_the_protocol_error_line_is_capped_as_written_on_an_ascii_stdout(tmp_path):
    """docs/CLI.md "Errors": `simulate`'s `protocol error:` line is capped as written, its
    prefix counted: on an ASCII stdout (the C locale) each emoji of the output's path is
    `\\U0001f600`, 10 characters, escaped before the line is measured and cut.  The output
    of fixtures/c7c8.neff (`--algo mesh`) in ten folders of 40 emoji parted by spaces (no
    run past 400 characters) and two of 100 `y`, sem.bin's records 6 and 10 of rank 0
    swapped: its line, past 2,000 characters as written, keeps its first 1,500 (a pad folder
    of `x` makes the 1,500th the last of an escape) and last 400 (all ASCII).  The
    `--json` `"error"` stays the raw line, under 2,000 characters.  Until 2026-12-06 the raw
    line was cut, then escaped, the prefix not counted: about 5,100 characters here, 9,267
    with a path of 900 emoji (review 51m)."""
    import json

    from test_names_locale import NOT_UTF8

    fixture = __import__("pathlib").Path(__file__).resolve().parents[1] / "fixtures"
    prefix = "protocol error: "
    # the first emoji's backslash at 16 + len(tmp_path) + 1 + k + 1; each emoji then takes
    # 11 characters (itself, 10, and a space or a "/"): its escape ends at the 1,500th
    head, tail = _doc_cut()["head"], _doc_cut()["tail"]  # (1,500 and 400)
    k = next(k for k in range(1, 12)
             if (head - (len(prefix) + len(str(tmp_path)) + k + 2)) % 11 == 10)
    folder = " ".join(["\U0001F600"] * 40)
    out = tmp_path.joinpath("x" * k, *[folder] * 10, *[" ".join(["y"] * 100)] * 2, "o")
    out.parent.mkdir(parents=True)
    lowered = CliRunner().invoke(main, ["lower", "-q", "--algo", "mesh", "-o", str(out),
                                        str(fixture / "c7c8.neff")])
    assert lowered.exit_code == 0, lowered.output[-300:]
    sem = out / "rank-0000" / "sem.bin"
    data = bytearray(sem.read_bytes())
    data[96:112], data[160:176] = data[160:176], data[96:112]
    sem.write_bytes(bytes(data))
    res = CliRunner().invoke(main, ["simulate", "--ignore-checksums", "--json", str(out)])
    assert res.exit_code == 1, res.output[-300:]
    error = json.loads(res.stdout)["error"]
    assert error.startswith(f"{out}/rank-0000: ") and len(error) < 2000
    proc = cli(["simulate", "--ignore-checksums", str(out)], tmp_path, NOT_UTF8)
    assert proc.returncode == 1, proc.stderr[-300:]
    line, = [x for x in proc.stdout.decode("ascii").splitlines() if x.startswith(prefix)]
    written = prefix + error.replace("\U0001F600", "\\U0001f600")
    assert len(written) > _doc_cut()["limit"]
    assert written[head - 10:head + 1] in ("\\U0001f600 ", "\\U0001f600/")  # (an escape ends)
    assert "\\" not in written[-tail:]  # (the last 400 are ASCII: no escape to keep whole)
    assert line == _cut(written)
    assert len(line) == 1500 + len(f" ... ({len(written)} characters in all) ... ") + 400


def test_a_reason_is_capped_after_its_control_characters_are_escaped():
    """A reason's control characters are escaped, then the reason is capped (docs/CLI.md
    "Errors": the cap counts what is written): 600 ESC and a `Z` are 2,401 characters as
    `\\x1b` each; past 1,000 the first 700 (175 escapes) and the last 200, which would
    start 1 character into an escape, so start after it (49 escapes and the `Z`).  Until
    2026-12-07 the reason was capped on its 601 raw characters and escaped after: 2,401
    characters in `simulate`'s detail cell."""
    from nrtrewrite.errors import SimulationError

    why = SimulationError("\x1b" * 600 + "Z").why
    assert why == ("\\x1b" * 175 + " ... (2401 characters in all) ... " + "\\x1b" * 49 + "Z")


def test_simulates_detail_cell_is_capped_as_written_on_an_ascii_stdout(monkeypatch):
    """docs/CLI.md "simulate": the verdict table's detail is escaped as the table writes it,
    then capped as a reason is shown.  A detail of 1,000 `é` (a reason at its cap) on an
    ASCII stdout is 1,000 `\\xe9`, 4,000 characters: its first 700 (175 escapes) and last
    200 (50 escapes), `... (1000 characters in all) ...` between, the reason's length as
    its error line and `--json` count it.  Until 2026-12-07 the cell was escaped after the
    cap, 4,000 characters; then, for a while, it counted `(4000 characters in all)` where a
    reason of 1,001 `é` counted 1,001."""
    import io
    import sys

    from rich.console import Console

    from nrtrewrite.cli.simulate import render
    from nrtrewrite.simulate.result import SimulationResult, TriggerResult

    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO(), encoding="ascii"))
    res = SimulationResult(output="o", seed=0)
    res.triggers = [TriggerResult(0, "allreduce", "allreduce", "fp32", 8, 2, status="error",
                                  detail="\u00e9" * 1000)]
    res.stats = {}
    buf = io.StringIO()
    render(res, Console(file=buf, width=3000, color_system=None, highlight=False))
    want = "\\xe9" * 175 + " ... (1000 characters in all) ... " + "\\xe9" * 50
    row, = [line for line in buf.getvalue().splitlines() if " error " in line]
    assert row.split("\u2502")[6].strip() == want  # (detail: the 6th column, after algorithm)


def test_simulates_detail_cell_of_a_cut_reason_keeps_the_reasons_count(monkeypatch):
    """docs/CLI.md "simulate": a reason past its cap (2,000 `é`) is held whole and cut
    where it is shown: its error line's `<why>` is its first 700 and last 200 `é` around
    `(2000 characters in all)`; the cell, on an ASCII stdout (each `é` `\\xe9`), 175
    escapes, the same count, 50 escapes.  Until 2026-12-07 the error held its reason cut
    and the cell cut the escaped cut text again: `(3634 characters in all)`, the length of
    neither."""
    import io
    import sys

    from rich.console import Console

    from nrtrewrite.cli.simulate import render
    from nrtrewrite.errors import SimulationError
    from nrtrewrite.simulate.result import SimulationResult, TriggerResult

    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO(), encoding="ascii"))
    res = SimulationResult(output="o", seed=0)
    err = SimulationError("\u00e9" * 2000)
    assert err.why == "\u00e9" * 700 + " ... (2000 characters in all) ... " + "\u00e9" * 200
    assert err.reason == "\u00e9" * 2000  # (whole: the simulator's detail)
    res.triggers = [TriggerResult(0, "allreduce", "allreduce", "fp32", 8, 2, status="error",
                                  detail=err.reason)]
    res.stats = {}
    buf = io.StringIO()
    render(res, Console(file=buf, width=3000, color_system=None, highlight=False))
    want = "\\xe9" * 175 + " ... (2000 characters in all) ... " + "\\xe9" * 50
    row, = [line for line in buf.getvalue().splitlines() if " error " in line]
    assert row.split("\u2502")[6].strip() == want


NAME_WITH_A_MARK = "v ... (5 characters in all) ... w"  # (a model's name: any text)


def test_simulates_detail_cell_takes_a_mark_in_a_name_for_text(monkeypatch):
    """A reason of 941 characters, not cut, quoting a name that holds the mark's text: the
    cell is the reason escaped (`var '...': ` then 900 `\\xe9`, 3,641 characters) and cut
    as a whole, its first 700 and last 200 around the reason's count, 941 (review 52n,
    r5cell2.py: until 2026-12-07 the name's mark was taken for the cut, `(5 characters in
    all)` the only count, and the cell 237 characters)."""
    import io
    import sys

    from nrtrewrite.cli.simulate import detail_cell

    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO(), encoding="ascii"))
    prefix = f"var {NAME_WITH_A_MARK!r}: "  # (41 characters)
    cell = detail_cell(prefix + "\u00e9" * 900).plain
    n = len(prefix) + 900
    assert cell == (prefix + "\\xe9" * ((700 - len(prefix)) // 4) + " ... "
                    f"({n} characters in all) ... " + "\\xe9" * 50)


def test_simulates_detail_cell_of_a_cut_reason_quoting_a_mark_keeps_the_real_count(
        monkeypatch):
    """The same name before 2,000 `é`: the reason, 2,041 characters, is past its cap; the
    cell cuts it once, the count 2,041, the name's mark in its head (until 2026-12-07 two
    marks: the escaped cut text cut again, `(3511 characters in all)`)."""
    import io
    import sys

    from nrtrewrite.cli.simulate import detail_cell
    from nrtrewrite.errors import SimulationError

    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO(), encoding="ascii"))
    prefix = f"var {NAME_WITH_A_MARK!r}: "
    cell = detail_cell(SimulationError(prefix + "\u00e9" * 2000).reason).plain
    assert cell == (prefix + "\\xe9" * ((700 - len(prefix)) // 4) + " ... "
                    "(2041 characters in all) ... " + "\\xe9" * 50)


def test_inspect_jsons_warning_is_capped_as_the_warning_line_is(tmp_path):
    """docs/CLI.md "inspect --json": each `warnings[]` entry's `where` and `message` are cut
    as the `"error"` is, each on its own characters.  The model in nine folders of 250 `d`:
    the where `PATH: field hash`, past 2,000 characters, keeps of the run `PATH:` (more than
    400 without a space) its first 200 and last 150; the message stays whole; `file` keeps
    the path whole (data).  Until 2026-12-07 the where was the whole path."""
    import json

    model = _long_model(tmp_path, ["d" * 250] * 9)
    res = CliRunner().invoke(main, ["inspect", model, "--no-verify-hash", "--json"])
    assert res.exit_code == 0, res.stderr[:300]
    doc = json.loads(res.stdout)
    assert len(f"{model}: field hash") > 2000 and doc["file"] == model
    assert doc["warnings"] == [{"where": f"{_cut_run(model + ':')} field hash",
                                "message": "payload hash not verified"}]


def test_a_reason_holding_the_cut_marks_exact_text_is_shown_as_text(monkeypatch):
    """A reason of 934 characters, not past its cap, that holds the cut's mark where a cut
    would put it (700 `é`, `... (1500 characters in all) ...`, 200 `é`: a name quoted
    there is any text).  Its error line's `<why>` is the reason whole; the cell, on an
    ASCII stdout 3,634 characters, is cut once, its first 700 (175 escapes) and last 200
    (50) around the reason's count, 934 (docs/CLI.md "simulate"); `--json`'s `detail` is
    the reason whole.  Until 2026-12-07 the cell took the text for a cut reason's mark and
    showed `(1500 characters in all)`, a length the reason never had."""
    import io
    import sys

    from nrtrewrite.cli.simulate import detail_cell
    from nrtrewrite.errors import SimulationError
    from nrtrewrite.simulate.result import TriggerResult

    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(io.BytesIO(), encoding="ascii"))
    reason = "\u00e9" * 700 + " ... (1500 characters in all) ... " + "\u00e9" * 200
    assert len(reason) == 934
    assert detail_cell(reason).plain == (
        "\\xe9" * 175 + " ... (934 characters in all) ... " + "\\xe9" * 50)
    err = SimulationError(reason, trigger=0)
    assert err.why == reason and err.line() == "trigger 0: " + reason
    assert err.reason == reason  # (the simulator's detail)
    tr = TriggerResult(0, "allreduce", "allreduce", "fp32", 8, 2, status="error",
                       detail=reason)
    assert tr.to_json()["detail"] == reason


def test_the_simulators_verdict_holds_a_protocol_errors_reason_whole():
    """A protocol error naming a trigger: the trigger's `detail` is the reason whole, cut
    only where shown: `--json`'s `detail` and the cell as a reason is, past 1,000 characters
    its first 700 and last 200 around the whole's count (docs/CLI.md "simulate"), once.
    Until 2026-12-07 the detail was the reason already cut (`SimulationError.why`), and the
    cell looked for that cut's mark in it to count it once."""
    from types import SimpleNamespace

    from nrtrewrite.cli.simulate import detail_cell
    from nrtrewrite.errors import SimulationError
    from nrtrewrite.simulate.engine import Simulator
    from nrtrewrite.simulate.result import SimulationResult, TriggerResult

    reason = "leg " + "x" * 1500 + " ... (9 characters in all) ... " + "y" * 300
    tr = TriggerResult(3, "allreduce", "allreduce", "fp32", 8, 2, status="match")
    engine = SimpleNamespace(names_within=None, given=None, verdict={3: tr})
    res = SimulationResult(output="o", seed=0)
    Simulator._record(engine, res, SimulationError(reason, trigger=3))
    assert (tr.status, tr.detail) == ("error", reason)
    assert tr.detail_left_out == 0
    n = 4 + 1500 + len(" ... (9 characters in all) ... ") + 300
    want = "leg " + "x" * 696 + f" ... ({n} characters in all) ... " + "y" * 200
    assert tr.to_json()["detail"] == want
    assert detail_cell(tr.detail, tr.detail_left_out).plain == want
    assert res.error == "trigger 3: " + want  # (the line: 1,000 + 11 characters, not cut)


def test_a_reason_quoting_another_errors_long_reason_is_cut_once(tmp_path):
    """`--algo allreduce:NAME`, an unknown NAME of 2,000 `x`: the reason quotes the
    option's text whole and, after it, the reason the name was refused for, which quotes it
    too.  The line cuts that reason once, counting it whole (`--algo '...': ` and the inner
    reason).  Until
    2026-12-07 the inner reason came cut (at 1,000) and the whole was cut again:
    `(2955 characters in all)`, the length of neither (the whole is 4,230)."""
    import pytest

    from nrtrewrite.select import parse_alg_name

    name = "x" * 2000
    with pytest.raises(ValidationError) as inner:  # (a short name: its line whole)
        parse_alg_name("zzz")
    known = inner.value.line().split("unknown algorithm 'zzz'", 1)[1]  # (` (known: ...)`)
    assert known.startswith(" (known: ")
    text = f"allreduce:{name}"
    n = len(f"--algo {text!r}: unknown algorithm {name!r}{known}")
    res = CliRunner().invoke(main, ["lower", str(FIXTURES / "ar2.neff"), "--algo", text,
                                    "-o", str(tmp_path / "o")])
    assert res.exit_code == 2 and not (tmp_path / "o").exists()
    line, = res.stderr.splitlines()
    assert line.count(" characters in all) ") == 1
    assert f" ... ({n} characters in all) ... " in line, line[-400:]
    assert line.endswith(f"{name!r}{known}"[-200:])


def test_an_error_holds_a_huge_reason_bounded_and_counts_it_whole():
    """A reason past MAX_HELD_WHY_CHARS (300,001 characters) is held as its first 60,000
    and last 30,000 around the cut's mark, and its whole length; shown, it is its first 700
    and last 200 around the whole's count, as a reason held whole would be; a reason
    quoting it (with its ``left_out``) counts the whole too."""
    from nrtrewrite.errors import MAX_HELD_WHY_CHARS

    err = ValidationError("A" * 300_000 + "Z", field="x")
    assert err.reason_chars == 300_001 and len(err.reason) <= MAX_HELD_WHY_CHARS
    assert err.reason == ("A" * 60_000 + " ... (300001 characters in all) ... "
                          + "A" * 29_999 + "Z")
    assert err.why == "A" * 700 + " ... (300001 characters in all) ... " + "A" * 199 + "Z"
    assert err.line() == "field x: " + err.why
    from nrtrewrite.cli.simulate import detail_cell
    from nrtrewrite.simulate.result import TriggerResult
    assert detail_cell(err.reason, err.left_out).plain == err.why  # (as simulate shows it)
    tr = TriggerResult(0, "allreduce", "allreduce", "fp32", 8, 2, detail=err.reason,
                       detail_left_out=err.left_out)
    assert tr.to_json()["detail"] == err.why
    outer = ValidationError("spec " + err.reason + "!", left_out=err.left_out)
    assert outer.why == ("spec " + "A" * 695 + " ... (300007 characters in all) ... "
                         + "A" * 198 + "Z!")


def test_a_path_quoted_in_a_long_reason_is_cut_once(tmp_path):
    """Review 59k: ``lower -o`` of 5,024 characters (past PATH_MAX) gave a line whose reason,
    capped at 1,000 (its first 700 and last 200), had its head's path piece cut again by the
    line's rule for runs past 400, ``(656 characters in all)`` counting a piece of a cut.
    docs/CLI.md "Errors": the location's run (``OUT:``) keeps 200 + 150, the reason (5,070
    characters) is cut once, ``N`` counting it whole."""
    out = "/".join(["b" * 200] * 25)  # 5,024 characters: ENAMETOOLONG
    res = CliRunner().invoke(main, ["lower", "-q", str(FIXTURES / "ar2.neff"), "-o", out],
                             prog_name="nrtrewrite")
    assert res.exit_code == 2
    reason = f"cannot write the output: File name too long ({out})"
    assert len(reason) == 5070
    loc = out + ":"
    want = ("nrtrewrite: error: " + loc[:200] + " ... (5025 characters in all) ... "
            + loc[-150:] + " " + reason[:700] + " ... (5070 characters in all) ... "
            + reason[-200:])
    assert res.stderr == want + "\n"
