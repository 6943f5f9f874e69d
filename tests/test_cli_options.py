"""Command-line options as docs/CLI.md "Errors" words them: an option that takes one value,
given twice with different values, is a usage error naming both (click kept the last
silently); the integer options' names and refusals ("is not a valid integer", ``INTEGER``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from nrtrewrite.cli import OneValue, main
from nrtrewrite.cli.commands import COMMANDS

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
AR2 = str(FIXTURES / "ar2.neff")
MIX8 = str(FIXTURES / "mix8.neff")


def run(*args):
    return CliRunner().invoke(main, list(args), prog_name="nrtrewrite", catch_exceptions=False,
                              terminal_width=200)


def usage_line(command: str, option: str, why: str) -> str:
    """The one line of a usage error, as docs/CLI.md "Errors" shows it."""
    return (f"nrtrewrite {command}: error: Invalid value for {option}: {why} "
            f"(see 'nrtrewrite {command} --help')\n")


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    """An output folder of ar2 (for diff, dump, simulate)."""
    path = tmp_path_factory.mktemp("opts") / "OUT"
    res = run("lower", AR2, "-o", str(path), "-q")
    assert res.exit_code == 0, res.stderr
    return str(path)


def test_algo_given_twice_is_refused_with_the_way_to_give_several_clauses(tmp_path):
    """The worst case of the review: ``--algo allreduce:ring --algo allgather:ring`` lowered
    with the second clause alone (the manifest's ``options.algo`` "allgather:ring")."""
    dest = tmp_path / "OUT"
    for command, args in (("lower", (MIX8, "-o", str(dest))), ("explain", (MIX8,)),
                          ("schedule", (MIX8, "--rank", "0")), ("simulate", (MIX8,))):
        res = run(command, *args, "--algo", "allreduce:ring", "--algo", "allgather:ring")
        assert res.exit_code == 2, command
        assert res.stderr == usage_line(
            command, "'--algo'", "given twice (allreduce:ring, allgather:ring); give several "
            "clauses in one --algo, separated by ';': --algo 'allreduce:ring;allgather:ring'")
        assert res.stdout == ""
    assert not dest.exists()


def test_each_one_value_option_given_twice_is_refused(out, tmp_path, monkeypatch):
    """Every option that takes one value, given twice with different values: one line naming
    both, status 2 (click took the last one silently)."""
    monkeypatch.chdir(tmp_path)
    other = tmp_path / "OTHER"
    shutil.copytree(out, other)
    model = ("--op", "allreduce", "--bytes", "1MiB", "--ranks", "4")
    cases = [
        ("lower", (AR2, "-o", "a", "-o", "b"), "'-o' / '--output'", "(a, b); --output"),
        ("lower", (AR2, "-o", "a", "-j", "1", "-j", "2"), "'-j' / '--jobs'", "(1, 2); --jobs"),
        ("lower", (AR2, "-o", "a", "--topology", "trn1", "--topology", "trn2"), "'--topology'",
         "(trn1, trn2); --topology"),
        ("simulate", (AR2, "--seed", "1", "--seed", "2"), "'--seed'", "(1, 2); --seed"),
        ("simulate", (out, "--model", AR2, "--model", MIX8), "'--model'",
         f"({AR2}, {MIX8}); --model"),
        ("diff", (out, str(other), "--max", "1", "--max", "2"), "'--max'", "(1, 2); --max"),
        ("dump", (out, "--limit", "1", "--limit", "2"), "'--limit'", "(1, 2); --limit"),
        ("schedule", (AR2, "--rank", "0", "--limit", "1", "--limit", "2"), "'--limit'",
         "(1, 2); --limit"),
        ("explain", (AR2, "--rank", "0", "--rank", "1"), "'--rank'", "(0, 1); --rank"),
        ("explain", ("--op", "allreduce", "--op", "allgather", "--bytes", "1MiB", "--ranks",
                     "4"), "'--op'", "(allreduce, allgather); --op"),
        ("explain", (*model, "--bytes", "2MiB"), "'--bytes'", "(1MiB, 2MiB); --bytes"),
        ("explain", (*model, "--ranks", "8"), "'--ranks'", "(4, 8); --ranks"),
        ("explain", (*model, "--nodes", "1", "--nodes", "2"), "'--nodes'", "(1, 2); --nodes"),
        ("explain", (*model, "--dtype", "bf16", "--dtype", "fp32"), "'--dtype'",
         "(bf16, fp32); --dtype"),
        ("explain", (*model, "--lnc", "1", "--lnc", "2"), "'--lnc'", "(1, 2); --lnc"),
        ("explain", (*model, "--alu", "add", "--alu", "max"), "'--alu'", "(add, max); --alu"),
        ("explain", (*model, "--group", "0-3", "--group", "0,1,2,3"), "'--group'",
         "(0-3, 0,1,2,3); --group"),
        ("inspect", (AR2, "--max-total-bytes", "1MiB", "--max-total-bytes", "2MiB"),
         "'--max-total-bytes'", "(1MiB, 2MiB); --max-total-bytes"),
        ("inspect", (AR2, "--max-member-bytes", "1MiB", "--max-member-bytes", "2MiB"),
         "'--max-member-bytes'", "(1MiB, 2MiB); --max-member-bytes"),
        ("assemble", (str(FIXTURES / "ar2.yaml"), "-o", "a", "-o", "b"), "'-o' / '--output'",
         "(a, b); --output"),
    ]
    for command, args, option, given in cases:
        res = run(command, *args)
        values, name = given.split("; ")
        assert res.exit_code == 2, (command, args, res.output)
        assert res.stderr == usage_line(command, option,
                                        f"given twice {values}; {name} takes one value"), args
    assert not Path("a").exists() and not Path("b").exists()


def test_an_option_given_three_times_names_each_value():
    res = run("simulate", AR2, "--seed", "1", "--seed", "1", "--seed", "2")
    assert res.exit_code == 2
    assert res.stderr == usage_line("simulate", "'--seed'",
                                    "given 3 times (1, 1, 2); --seed takes one value")


def test_the_same_value_twice_is_that_value(tmp_path):
    """As ``dump --rank 0 --rank 0``: the same value again (also as written otherwise, once
    converted) is accepted."""
    for again in (("--seed", "7", "--seed", "7"), ("--seed", "7", "--seed=+07")):
        res = run("simulate", AR2, *again, "--json")
        assert res.exit_code == 0, (again, res.stderr)
        assert json.loads(res.stdout)["seed"] == 7
    res = run("lower", AR2, "-o", str(tmp_path / "O"), "--algo", "ring", "--algo", "ring",
              "-q")
    assert res.exit_code == 0, res.stderr
    res = run("inspect", AR2, "--max-total-bytes", "1MiB", "--max-total-bytes", "1048576",
              "--json")
    assert res.exit_code == 0, res.stderr


def test_every_option_that_takes_one_value_is_a_one_value_option():
    """Every command's options: a flag, an option documented as repeatable
    (``multiple=True``, its help saying ``(repeatable)`` as docs/CLI.md does), or
    :class:`OneValue` - a new option cannot slip past the rule (``dump --rank`` and
    ``schedule --rank`` took one value through ``multiple=True`` and a callback until
    2026-12-06)."""
    ctx = click.Context(main)
    for name in sorted(COMMANDS):
        command = main.get_command(ctx, name)
        for param in command.params:
            if not isinstance(param, click.Option) or param.is_flag:
                continue
            if param.multiple:
                assert "(repeatable)" in param.help, (name, param.opts)
                continue
            if param.name in ("help",):
                continue
            assert isinstance(param, OneValue), (name, param.opts)


def test_dump_and_schedule_rank_given_twice_say_what_the_command_shows(out):
    """docs/CLI.md "dump" and "schedule": ``--rank`` given twice with different ranks ends
    with what the command shows (``lower`` takes it repeated as several ranks); the same
    rank again (once converted) is that rank."""
    for command, args, why, shown in (
            ("dump", (out, "--sem"),
             "dump shows one rank of an output folder, or every rank (no --rank)",
             lambda doc: [r["rank_dir"] for r in doc["ranks"]] == ["rank-0001"]),
            ("schedule", (AR2,), "schedule shows one rank's schedule: run it once per rank",
             lambda doc: doc["rank"] == 1)):
        res = run(command, *args, "--rank", "0", "--rank", "1")
        assert res.exit_code == 2 and res.stdout == ""
        assert res.stderr == usage_line(command, "'--rank'", f"given twice (0, 1); {why}")
        res = run(command, *args, "--rank", "1", "--rank", "01", "--json")
        assert res.exit_code == 0, res.stderr
        assert shown(json.loads(res.stdout)), command


def test_integer_options_are_named_integer_in_their_refusal_and_help(out):
    """``--seed``, ``--limit``, ``--max`` and ``-j`` said click's ``integer range``
    (``'x' is not a valid integer range.``, ``INTEGER RANGE`` in the help); docs/CLI.md
    says ``is not a valid integer.`` for every integer option."""
    for command, args, option in (("simulate", (AR2, "--seed", "x"), "'--seed'"),
                                  ("dump", (out, "--limit", "x"), "'--limit'"),
                                  ("schedule", (AR2, "--rank", "0", "--limit", "x"), "'--limit'"),
                                  ("diff", (out, out, "--max", "x"), "'--max'"),
                                  ("lower", (AR2, "-j", "x"), "'-j' / '--jobs'")):
        res = run(command, *args)
        assert res.exit_code == 2
        assert res.stderr == usage_line(command, option, "'x' is not a valid integer."), command
    for command, option in (("simulate", "--seed"), ("dump", "--limit"),
                            ("schedule", "--limit"), ("diff", "--max"), ("lower", "--jobs")):
        text = run(command, "--help").output
        assert f"{option} INTEGER " in text, command
        assert "RANGE" not in text, command


def test_an_empty_path_is_refused_in_one_wording(out):
    """``inspect ''``, ``assemble`` and ``lower -o ''`` said "an empty path", the other
    commands click's ``File '' does not exist.``: one wording (docs/CLI.md "Errors")."""
    for command, args, where in (("explain", ("",), "'MODEL'"), ("lower", ("",), "'MODEL'"),
                                 ("schedule", ("", "--rank", "0"), "'MODEL'"),
                                 ("dump", ("",), "'PATH'"), ("diff", ("", out), "'A'"),
                                 ("diff", (out, ""), "'B'"),
                                 ("simulate", ("",), "'MODEL.neff|OUT'"),
                                 ("simulate", (out, "--model", ""), "'--model'"),
                                 ("inspect", ("",), "'MODEL.neff'"),
                                 ("assemble", ("", "-o", "x"), "'SPEC'")):
        res = run(command, *args)
        assert res.exit_code == 2, (command, args)
        assert res.stderr == usage_line(command, where, "an empty path"), (command, args)


def test_an_empty_topology_is_empty_not_a_folder(tmp_path):
    """``--topology ''`` blamed the working folder (``Path('')`` is ``.``): refused as
    ``--algo ''`` is, an error of its field."""
    line = ("nrtrewrite: error: {where}field topology: --topology '' is empty (omit it for "
            "the default: trn2 sized to the model)\n")
    for command, args, where in (("lower", (AR2, "-o", str(tmp_path / "O")), f"{AR2}: "),
                                 ("explain", (AR2,), f"{AR2}: "),
                                 ("explain", ("--op", "allreduce", "--bytes", "1MiB",
                                              "--ranks", "4"), "")):
        res = run(command, *args, "--topology", "")
        assert res.exit_code == 2, (command, res.stderr)
        assert res.stderr == line.format(where=where), command
    assert not (tmp_path / "O").exists()


def test_explains_optional_model_is_named_model_in_errors():
    """click quoted explain's optional argument as ``'[MODEL]'``, the usage line's notation;
    docs/CLI.md shows ``'MODEL'``."""
    res = run("explain", str(FIXTURES))
    assert res.exit_code == 2
    assert res.stderr == usage_line("explain", "'MODEL'",
                                    f"File '{FIXTURES}' is a directory.")


def test_simulate_refuses_an_option_of_the_other_form_naming_it(out):
    """``simulate MODEL.neff --ignore-checksums`` was accepted and did nothing (``--model``
    with a MODEL.neff was refused); ``simulate OUT --no-verify-hash`` named all four options
    of the group. Each refusal names the options given."""
    for args, why in (
            ((AR2, "--ignore-checksums"),
             "--ignore-checksums applies only when an output folder OUT is given"),
            ((AR2, "--ignore-checksums", "--model", AR2),
             "--model and --ignore-checksums apply only when an output folder OUT is given"),
            ((out, "--no-verify-hash"), "--no-verify-hash applies only when a MODEL.neff is "
             "given (with OUT, only with --model)"),
            ((out, "--algo", "ring"), "--algo applies only when a MODEL.neff is given"),
            ((out, "--host-cc", "--topology", "trn2"),
             "--topology and --host-cc apply only when a MODEL.neff is given"),
            ((out, "--topology", ""), "--topology applies only when a MODEL.neff is given")):
        res = run("simulate", *args)
        assert res.exit_code == 2, args
        assert res.stderr == (f"nrtrewrite simulate: error: {why} "
                              "(see 'nrtrewrite simulate --help')\n"), args


def test_explain_names_the_option_given_of_the_other_mode():
    """``explain MODEL --lnc 1`` said ``--op/--bytes/--dtype/.../--alu describe ...``."""
    collective = ("--op", "allreduce", "--bytes", "1MiB", "--ranks", "4")
    for args, why in (
            ((AR2, "--lnc", "1"), "--lnc describes a collective without a MODEL; give one or "
             "the other"),
            ((AR2, "--sbuf", "--dtype", "fp32"), "--dtype and --sbuf describe a collective "
             "without a MODEL; give one or the other"),
            ((*collective, "--all"), "--all chooses among a MODEL's triggers; without one, "
             "--op/--bytes describe one collective"),
            ((*collective, "--trigger", "0", "--no-verify-hash"), "--trigger and "
             "--no-verify-hash choose among a MODEL's triggers; without one, --op/--bytes "
             "describe one collective")):
        res = run("explain", *args)
        assert res.exit_code == 2, args
        assert res.stderr == (f"nrtrewrite explain: error: {why} "
                              "(see 'nrtrewrite explain --help')\n"), args


def test_an_integer_of_too_many_digits_is_refused_as_a_size_is(out):
    """An integer of more than 4300 digits was "not a valid integer" (CPython's limit on
    reading one), one of 50 a rank looked for: more than 40 digits is refused as a size's
    number is (``has N digits, more than 40``), for every integer option."""
    many = "9" * 5000
    for command, args, option in (("dump", (out, "--spad", "--rank", many), "'--rank'"),
                                  ("dump", (out, "--rank", "9" * 41), "'--rank'"),
                                  ("simulate", (AR2, "--seed", "-" + many), "'--seed'"),
                                  ("schedule", (AR2, "--rank", "0", "--trigger", many),
                                   "'--trigger'"),
                                  ("diff", (out, out, "--max", many), "'--max'"),
                                  ("lower", (AR2, "-j", many), "'-j' / '--jobs'")):
        digits = len(args[-1].lstrip("-"))
        shown = args[-1][:12]
        res = run(command, *args)
        assert res.exit_code == 2, (command, option)
        assert res.stderr == usage_line(
            command, option, f"'{shown}...' has {digits} digits, more than 40."), command
    # 40 digits is a number, judged as one
    res = run("dump", out, "--spad", "--rank", "9" * 40)
    assert res.exit_code == 2 and "no folder for rank " + "9" * 40 in res.stderr


def test_leading_zeros_are_not_counted_by_the_digit_limits(out):
    """docs/CLI.md "Errors": the 40-digit limit counts a number's digits, its leading zeros
    left out: `--ranks`, `--rank`, `--seed`, `--bytes`, a `--group` rank and `golden
    --rank` written with 60 zeros before them are the values after the zeros.  Until
    2026-12-06 the integer options and sizes counted the zeros, and refused them."""
    from nrtrewrite.golden import _rank

    z = "0" * 60
    two = ("--bytes", "64", "--ranks", "2")
    for plain, zeros in ((two, ("--bytes", z + "64", "--ranks", "2")),
                         (two, ("--bytes", "64", "--ranks", z + "2")),
                         (two, ("--bytes", "64", "--group", f"{z}0-{z}1")),
                         ((*two, "--rank", "1"), (*two, "--rank", z + "1"))):
        want = run("explain", "--op", "allreduce", *plain)
        res = run("explain", "--op", "allreduce", *zeros)
        assert want.exit_code == 0, want.stderr
        assert (res.exit_code, res.stdout) == (0, want.stdout), (zeros, res.stderr[:300])
    # dump's --rank of 1 with 60 zeros is rank 1: ar2's second rank folder, as --rank 1
    ones = [run("dump", out, "--spad", "--rank", r, "--json") for r in ("1", z + "1")]
    assert ones[0].exit_code == 0 and ones[1].stdout == ones[0].stdout
    assert _rank(z + "1") == 1 and _rank("-" + z + "7") == -7


def test_a_number_of_too_many_digits_after_its_leading_zeros_says_so(out):
    """More than 40 digits after the zeros is refused, the number shown from its first
    digit that is not 0, the zeros counted (docs/CLI.md "Errors")."""
    z, n = "0" * 60, "1" * 41
    res = run("dump", out, "--spad", "--rank", z + n)
    assert res.stderr == usage_line(
        "dump", "'--rank'", "'111111111111...' has 41 digits after 60 leading zeros, more "
        "than 40.")
    res = run("simulate", AR2, "--seed", "-" + z + n)
    assert res.stderr == usage_line(
        "simulate", "'--seed'", "'-11111111111...' has 41 digits after 60 leading zeros, more "
        "than 40.")
    res = run("explain", "--op", "allreduce", "--ranks", "2", "--bytes", z + n)
    assert res.stderr == ("nrtrewrite: error: field --bytes: size '111111111111...' has 41 "
                          "digits after 60 leading zeros, more than 40\n")


def test_a_fractional_size_leaves_out_its_whole_parts_zeros_and_counts_its_fraction():
    """docs/CLI.md "Errors": a size with a point leaves out the leading zeros of its whole
    part, a 0 alone before the point too, and counts every digit after the point; one of
    too many is shown from its point.  `00.` + 40 zeros + `1`: 41 digits (40 zeros and the
    1 after the point) after 2 leading zeros; `0.` + 39 zeros + `1`: 40, within the limit,
    so judged as a number (not a whole number of bytes); `0.5KiB` and `00.5KiB` are 512
    bytes, as `--bytes 512`.  Until 2026-12-06 the 0 before the point counted: `'0.000...'
    has 42 digits after 1 leading zero` and 41 digits (review 51m)."""
    z40, z39 = "0" * 40, "0" * 39
    res = run("explain", "--op", "allreduce", "--ranks", "2", "--bytes", f"00.{z40}1")
    assert res.stderr == ("nrtrewrite: error: field --bytes: size '." + "0" * 11 + "...' "
                          "has 41 digits after 2 leading zeros, more than 40\n")
    res = run("explain", "--op", "allreduce", "--ranks", "2", "--bytes", f"0.{z39}1")
    assert res.stderr == (f"nrtrewrite: error: field --bytes: size '0.{z39}1' is not a "
                          "whole number of bytes\n")
    want = run("explain", "--op", "allreduce", "--ranks", "2", "--bytes", "512")
    assert want.exit_code == 0, want.stderr
    for size in ("0.5KiB", "00.5KiB"):
        res = run("explain", "--op", "allreduce", "--ranks", "2", "--bytes", size)
        assert (res.exit_code, res.stdout) == (0, want.stdout), (size, res.stderr)


def test_a_group_rank_of_too_many_digits_says_so_not_that_it_is_past_the_last_rank():
    """docs/CLI.md "explain": a `--group` rank of more than 40 digits is refused as an
    integer option's value is (`has N digits, more than 40`); one of at most 40 digits at
    or past 2^20 is beyond the last rank a topology may have.  Until 2026-12-06 a rank of
    5,000 digits was `rank of 5000 digits in ... is beyond the last rank ...`."""
    nines = "9" * 5000
    res = run("explain", "--op", "allreduce", "--bytes", "1MiB", "--group", f"0,{nines}")
    assert res.exit_code == 2
    assert res.stderr == ("nrtrewrite: error: field --group: rank '999999999999...' in "
                          "'9999999999999999'...'99999999' (5000 characters) has 5000 "
                          "digits, more than 40\n")
    res = run("explain", "--op", "allreduce", "--bytes", "1MiB", "--group",
              "0-" + "0" * 50 + "9" * 41)
    assert res.stderr == ("nrtrewrite: error: field --group: rank '999999999999...' in "
                          "'0-00000000000000'...'99999999' (93 characters) has 41 digits "
                          "after 50 leading zeros, more than 40\n")
    forty = "9" * 40
    res = run("explain", "--op", "allreduce", "--bytes", "1MiB", "--group", f"0,{forty}")
    assert res.stderr == (f"nrtrewrite: error: field --group: rank {forty} in '{forty}' is "
                          "beyond the last rank a topology may have, 1048575 "
                          "(MAX_TOPOLOGY_RANKS = 1048576)\n")


def test_bytes_takes_spaces_before_its_unit_but_no_line_break_inside():
    """``--bytes $'1\\nMiB'`` (a line break inside) was taken, undocumented: white space
    around a size is ignored as around an integer, spaces before its unit are taken
    (``64 MiB``), any other white space inside is a bad size.  T/TiB/TB are units
    (docs/CLI.md): 1 TiB = 2**40 bytes, 1 TB = 10**12."""
    from nrtrewrite.sizes import parse_size
    assert parse_size("64 MiB") == 64 * 2 ** 20 and parse_size(" 64MiB\n") == 64 * 2 ** 20
    assert parse_size("1TiB") == 2 ** 40 and parse_size("1 t") == 2 ** 40
    assert parse_size("1TB") == 10 ** 12
    for bad in ("1\nMiB", "1\tMiB", "1\r\nMiB", "1 \nMiB", "1\u00a0MiB"):
        res = run("explain", "--op", "allreduce", "--bytes", bad, "--ranks", "4")
        assert res.exit_code == 2, repr(bad)
        assert res.stderr == (f"nrtrewrite: error: field --bytes: bad size {bad!r} "
                              "(e.g. 4096, 512KiB, 64MiB, 1GB)\n"), repr(bad)


def test_lnc_is_read_as_an_integer_option_is():
    """``--lnc ' 1'`` was refused where integer options ignore white space around them."""
    base = ("explain", "--op", "allreduce", "--bytes", "1MiB", "--ranks", "4", "--json")
    for given, lnc in ((" 1", 1), ("2 ", 2), ("+1", 1), ("1", 1)):
        res = run(*base, "--lnc", given)
        assert res.exit_code == 0, (given, res.stderr)
        assert json.loads(res.stdout)["topology"]["lnc_size"] == lnc, given
    for bad in ("3", " 3", "\uff11", "x"):
        res = run(*base[:-1], "--lnc", bad)
        assert res.exit_code == 2
        assert res.stderr == usage_line("explain", "'--lnc'",
                                        f"{bad!r} is not one of '1', '2'."), bad
