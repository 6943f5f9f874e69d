"""``python -m nrtrewrite.golden``, as ``make golden`` runs it: it reproduces the committed
golden archives of the small fixtures byte for byte, and it runs under ``python -OO``
(``PYTHONOPTIMIZE=2``: no docstrings), as the CLI's help does."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import GOLDEN_SMALL

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"
#: the fixtures whose golden keeps every rank (the golden set without a Makefile
#: GOLDEN_RANKS_<name>: node64 and two_node128 keep a few ranks of large outputs)
SMALL = GOLDEN_SMALL


def run(module: str, args: list, cwd: Path, **extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", **extra)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


def test_the_makefile_lists_the_small_fixtures_without_ranks():
    """The six small fixtures are golden fixtures (every fixtures/*.yaml is: the Makefile's
    GOLDEN_FIXTURES) with no GOLDEN_RANKS_<name>."""
    assert {"ar2", "c7c8", "groups", "int32_allgather", "mix8", "sbuf"} <= set(SMALL)
    make = (ROOT / "Makefile").read_text()
    assert not any(f"GOLDEN_RANKS_{n} " in make for n in SMALL)


@pytest.mark.parametrize("name", SMALL)
def test_golden_reproduces_the_committed_archive(tmp_path, name):
    proc = run("nrtrewrite.golden", [FIX / f"{name}.neff", tmp_path / "g.tar.gz"], ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{tmp_path / 'g.tar.gz'}: written\n"
    assert (tmp_path / "g.tar.gz").read_bytes() == (FIX / "golden" / f"{name}.tar.gz").read_bytes()


#: ``python -m nrtrewrite.golden ARGV...`` with the fault review 51d used: every CCE
#: descriptor's ``out_dtype`` nibble flipped (nrtrewrite/emit/legs.py ``_cce_patterns``'s
#: ``(out_dt << 12)`` as ``((out_dt ^ 1) << 12)``), an output ``simulate`` refuses
FAULTY_GOLDEN = """
import sys
import time
import nrtrewrite.emit.legs as legs
real = legs.cce_dtype_nibbles
legs.cce_dtype_nibbles = lambda dtype: (lambda t: (t[0], t[1] ^ 1, t[2]))(real(dtype))
import nrtrewrite.golden as g
sys.argv = ["golden", *sys.argv[1:]]
g._run()
"""


@pytest.mark.parametrize("ranks", [[], ["--rank", "0"]])
def test_golden_refuses_an_output_simulate_refuses(tmp_path, ranks):
    """Bug (review 51d): ``python -m nrtrewrite.golden`` (``make golden``) packed whatever
    it lowered, an output ``simulate`` refuses included, and said ``written``.  Now the
    lowering is simulated against the model first (the whole model's, for a golden of some
    ranks): refused, one line naming the model and the simulator's finding, status 2, the
    archive there untouched (the same bytes and file) and none made where there was none."""
    kept = tmp_path / "kept.tar.gz"
    shutil.copyfile(FIX / "golden" / "ar2.tar.gz", kept)
    before = os.stat(kept)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", TMPDIR=str(tmp_path))
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    for golden in (kept, tmp_path / "new.tar.gz"):
        proc = subprocess.run([sys.executable, "-c", FAULTY_GOLDEN, "fixtures/ar2.neff",
                               str(golden), *ranks], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=300)
        assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
        (line,) = proc.stderr.splitlines()
        head = ("nrtrewrite.golden: error: fixtures/ar2.neff: simulate refuses the lowered "
                "output (<temporary>/")
        assert line.startswith(head), line
        assert "out_dtype should be 0x6, the trigger's data, not 0x7" in line
        assert line.endswith("); nothing written: a golden is only packed from an output "
                             "simulate accepts (nrtrewrite simulate fixtures/ar2.neff)")
    assert kept.read_bytes() == (FIX / "golden" / "ar2.tar.gz").read_bytes()
    after = os.stat(kept)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.tar.gz"]


@pytest.mark.parametrize("key,named", [("rank_manifests", "rank-0000"),
                                       ("output_neff", "the rewritten NEFF")])
def test_a_golden_of_some_ranks_must_be_the_whole_lowerings(tmp_path, key, named):
    """A golden of some ranks is simulated as the whole model's lowering (``simulate``
    needs every rank of a group), so its kept ranks must be that lowering's: a rank manifest
    (which records every artifact's sha256) or the rewritten NEFF recorded otherwise is
    refused, naming which."""
    import json

    from nrtrewrite.errors import NrtRewriteError
    from nrtrewrite.golden import _simulated, lower_to

    out = lower_to(FIX / "ar2.neff", tmp_path / "out", [0])
    top = json.loads((out / "manifest.json").read_text())
    if key == "rank_manifests":
        top[key]["rank-0000"] = "0" * 64
    else:
        top[key]["sha256"] = "0" * 64
    (out / "manifest.json").write_text(json.dumps(top))
    with pytest.raises(NrtRewriteError) as err:
        _simulated(str(FIX / "ar2.neff"), out, tmp_path, [0])
    assert str(err.value) == (f"the output of ranks 0 is not the whole lowering's ({named} "
                              "differs); nothing written")


def test_golden_says_written_changed_or_unchanged(tmp_path):
    """Bug (review 51d): every run said ``written``, whether the archive changed or not.
    Now ``written`` (there was none), ``unchanged`` (the same bytes: the file is left as it
    is, not even replaced) or ``changed`` (other bytes replaced)."""
    golden = tmp_path / "g.tar.gz"
    committed = (FIX / "golden" / "ar2.tar.gz").read_bytes()
    said = []
    for step in ("none", "same", "other"):
        if step == "other":
            golden.write_bytes(committed + b"x")
        before = os.stat(golden) if step == "same" else None
        proc = run("nrtrewrite.golden", [FIX / "ar2.neff", golden], ROOT)
        assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr
        said.append(proc.stdout)
        assert golden.read_bytes() == committed
        if before is not None:
            after = os.stat(golden)
            assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert said == [f"{golden}: written\n", f"{golden}: unchanged\n", f"{golden}: changed\n"]


@pytest.mark.parametrize("target", ["same", "other"])
def test_a_golden_that_is_a_symbolic_link_is_replaced_as_a_link(tmp_path, target):
    """GOLDEN a symbolic link: the write replaces the link itself, never its target, as
    ``assemble -o`` does (docs/RELIABILITY.md §4), so it is ``changed`` whatever its target
    holds (review 53f: its target's bytes judged it, so a target holding the archive was
    ``unchanged``, the link kept, while one with other bytes was ``changed``, the link
    replaced and the target left as it was)."""
    committed = (FIX / "golden" / "ar2.tar.gz").read_bytes()
    kept = committed if target == "same" else b"an older archive"
    real, golden = tmp_path / "real.tar.gz", tmp_path / "g.tar.gz"
    real.write_bytes(kept)
    golden.symlink_to(real.name)
    proc = run("nrtrewrite.golden", [FIX / "ar2.neff", golden], ROOT)
    assert (proc.returncode, proc.stderr, proc.stdout) == (0, "", f"{golden}: changed\n")
    assert not golden.is_symlink() and golden.read_bytes() == committed
    assert real.read_bytes() == kept  # (the target never written)


def test_golden_removes_a_killed_runs_temporary_folder(tmp_path):
    """A SIGKILLed golden leaves its ``nrtrewrite-golden-XXXXXXXX`` folder in TMPDIR: the
    next run removes it as ``simulate MODEL.neff`` removes its own (docs/RELIABILITY.md §4:
    mkdtemp's name shape, this user's, a minute old, its lock free), and keeps a live run's
    (locked), a young one and a user's folder of another shape (review 53f: nothing removed
    them)."""
    import fcntl

    tmpdir = tmp_path / "tmp"
    old = time.time() - 3600
    stale, live, young, mine = (tmpdir / f"nrtrewrite-golden-{n}"
                                for n in ("a1_b2c3d", "b2c3d4e5", "c3d4e5f6", "my-results"))
    for d in (stale, live, young, mine):
        (d / "out").mkdir(parents=True)
        if d is not young:
            os.utime(d, (old, old))
    fd = os.open(live, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as a running golden holds it
        proc = run("nrtrewrite.golden", [FIX / "ar2.neff", tmp_path / "g.tar.gz"], ROOT,
                   TMPDIR=str(tmpdir))
        assert (proc.returncode, proc.stderr) == (0, ""), proc.stderr
    finally:
        os.close(fd)
    assert sorted(p.name for p in tmpdir.iterdir()) == sorted(p.name for p in (live, young, mine))


def test_golden_and_the_help_run_without_docstrings(tmp_path):
    """Bug (review 47c): under ``PYTHONOPTIMIZE=2`` ``python -m nrtrewrite.golden`` failed
    with a traceback (``__doc__.splitlines()`` of None), as did the benchmark and fuzz
    scripts."""
    proc = run("nrtrewrite.golden", [FIX / "ar2.neff", tmp_path / "g.tar.gz"], ROOT,
               PYTHONOPTIMIZE="2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{tmp_path / 'g.tar.gz'}: written\n" and proc.stderr == ""
    assert (tmp_path / "g.tar.gz").read_bytes() == (FIX / "golden" / "ar2.tar.gz").read_bytes()
    proc = run("nrtrewrite.golden", ["--help"], ROOT, PYTHONOPTIMIZE="2")
    assert proc.returncode == 0 and proc.stdout.startswith("usage: "), proc.stderr
    proc = run("nrtrewrite", ["--help"], ROOT, PYTHONOPTIMIZE="2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Usage: nrtrewrite [OPTIONS] COMMAND [ARGS]...")
    commands = proc.stdout.split("Commands:\n")[1].split()
    assert {"lower", "inspect", "simulate", "explain"} <= set(commands)
    proc = run("nrtrewrite", ["lower", "--help"], ROOT, PYTHONOPTIMIZE="2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Usage: nrtrewrite lower [OPTIONS] MODEL")
    assert "--topology" in proc.stdout
    for script in ("benchmarks/bench_read.py", "benchmarks/report.py",
                   "benchmarks/leg_cost.py", "fuzz/soak_models.py"):
        proc = subprocess.run([sys.executable, str(ROOT / script),
                               "--help"], cwd=ROOT, capture_output=True, text=True,
                              env=dict(os.environ, PYTHONOPTIMIZE="2",
                                       PYTHONPATH=str(ROOT)), timeout=120)
        assert proc.returncode == 0 and proc.stdout.startswith("usage: "), (script, proc.stderr)


#: each command's description in its ``--help`` (whitespace aside: click wraps it), as
#: docs/CLI.md describes the command
DESCRIPTIONS = {
    "": "Offline Neuron load-time collective rewrite: inspect, explain, schedule, lower, dump, "
        "diff, simulate, assemble (every command, listed below).",
    "inspect": "Decode and validate MODEL.neff and show its header, members, vars, replica "
               "groups, instruction counts per engine and every collective trigger.",
    "assemble": "Assemble SPEC (YAML or JSON) into a NEFF-like file; the result is read back "
                "and validated unless the spec says `validate: false`.",
    "explain": "Explain the algorithm selection, legs, channels and rings of MODEL's "
               "collectives, or (without MODEL) of one collective given by "
               "--op/--bytes/--ranks.",
    "lower": "Lower every collective trigger of MODEL and write the rewritten NEFF and "
             "artifacts.",
    "schedule": "The per-channel step schedule of one rank: leaf, half, chunk position k, "
                "elements.",
    "dump": "Decoded tables of an artifact file, a rank folder, or a whole output folder.",
    "diff": "Compare two output folders field by field (rank, file, record, field, both "
            "values).",
    "simulate": "Run every rank's emitted bytes and check every collective bit for bit, on "
                "exact test data (what a match proves and what it cannot: docs/SIMULATOR.md §4). "
                "MODEL.neff is lowered into a temporary folder first (with --topology / "
                "--algo / --host-cc); an output folder OUT is checked first: with --model "
                "against the model it was lowered from, then against its sha256 checksums.",
}


@pytest.mark.parametrize("command", sorted(DESCRIPTIONS))
def test_every_commands_help_keeps_its_description_under_dash_oo(tmp_path, command):
    """Bug (left by session 47): under ``python -OO`` every command's ``--help`` lost its
    description, which click read from the docstring.  Run from a folder without
    ``nrtrewrite/`` (``python -m`` puts the working folder first on sys.path)."""
    args = [command, "--help"] if command else ["--help"]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(ROOT), COLUMNS="80")
    env.pop("PYTHONOPTIMIZE", None)
    plain, oo = (subprocess.run([sys.executable, *flags, "-m", "nrtrewrite", *args],
                                cwd=tmp_path, env=env, capture_output=True, text=True,
                                timeout=120) for flags in ([], ["-OO"]))
    assert plain.returncode == 0 and oo.returncode == 0, (plain.stderr, oo.stderr)
    assert oo.stdout == plain.stdout
    assert " ".join(DESCRIPTIONS[command].split()) in " ".join(oo.stdout.split())


#: every argparse script a make target runs (golden, bench, profile, fuzz, soak) and the
#: benchmark scripts beside them, as (a module for ``-m`` or a script's path)
SCRIPTS = ["nrtrewrite.golden", *(f"benchmarks/{n}.py" for n in (
    "bench_diff", "bench_read", "bench_simulate", "compiled_records", "digests", "leg_cost",
    "profile_rank", "report", "run")), "fuzz/fuzz_reader.py", "fuzz/soak_models.py"]


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_scripts_help_keeps_its_description_under_dash_oo(tmp_path, script):
    """Bug (left by session 48): under ``python -OO`` the ``--help`` of ``python -m
    nrtrewrite.golden`` and of the benchmark and fuzz scripts lost its description, which
    argparse read from the module docstring.  The description is that docstring's first
    paragraph, read here from the source (argparse wraps it: compared without the line
    breaks)."""
    import ast

    is_file = script.endswith(".py")
    path = ROOT / script if is_file else ROOT / (script.replace(".", "/") + ".py")
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    first = " ".join(doc.split("\n\n")[0].split())
    command = [str(path)] if is_file else ["-m", script]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(ROOT), COLUMNS="80")
    env.pop("PYTHONOPTIMIZE", None)
    plain, oo = (subprocess.run([sys.executable, *flags, *command, "--help"], cwd=tmp_path,
                                env=env, capture_output=True, text=True, timeout=120)
                 for flags in ([], ["-OO"]))
    assert plain.returncode == 0 and oo.returncode == 0, (plain.stderr, oo.stderr)
    assert oo.stdout == plain.stdout
    assert first in " ".join(oo.stdout.split())


def _tgz(path, members) -> None:
    """A tar.gz at ``path`` of ``ok.txt`` (a plain member first: it must not be written) and
    then ``members``, each (name, "file" of 2 bytes or "dir")."""
    import io
    import tarfile

    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT, encoding="utf-8") as tar:
        for name, kind in [("ok.txt", "file"), *members]:
            info = tarfile.TarInfo(name)
            if kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = 2
                tar.addfile(info, io.BytesIO(b"hi"))


#: odd member names (as written, the type, as read back) ``golden.unpack`` refuses: empty,
#: an empty or ``.`` component, absolute, ``..``, a NUL (a pax ``path`` record holds one)
ODD_MEMBERS = [
    ("", "file", ""),
    ("d/.", "file", "d/."),
    ("d/.", "dir", "d/."),  # (tarfile writes a folder as "d/./" and reads it back as "d/.")
    (".", "dir", "."),
    ("./x", "file", "./x"),
    ("a//b", "file", "a//b"),
    ("f/", "file", "f/"),
    ("d/./x", "file", "d/./x"),
    ("/abs", "file", "/abs"),
    ("../x", "file", "../x"),
    ("a/../../x", "file", "a/../../x"),
    ("a\0" + "b" * 120, "file", "a\0" + "b" * 120),
]


@pytest.mark.parametrize("written,kind,read", ODD_MEMBERS)
def test_golden_unpack_refuses_an_odd_member_name_before_writing_anything(tmp_path, written,
                                                                          kind, read):
    """Bug (left by session 47): a member named ``""`` or ``d/.`` stopped ``unpack`` with a
    raw ``IsADirectoryError`` after a member before it was written, and ``./x``, ``a//b``,
    ``f/`` or ``.`` were taken.  Every member is judged first: the one odd member is the
    ``unexpected member`` line, and nothing is written (``dest`` not even made)."""
    from nrtrewrite.golden import unpack

    tgz = tmp_path / "g.tar.gz"
    _tgz(tgz, [(written, kind)])
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(ValueError) as err:
        unpack(tgz, tmp_path / "out" / "dest")
    assert str(err.value) == f"{tgz}: unexpected member {read!r}"
    assert sorted(tmp_path.rglob("*")) == before


def test_golden_unpack_takes_plain_names(tmp_path):
    """The rule refuses no plain name: folders, files in them, dotted names."""
    import io
    import tarfile

    from nrtrewrite.golden import unpack

    tgz = tmp_path / "g.tar.gz"
    with tarfile.open(tgz, "w:gz", format=tarfile.PAX_FORMAT, encoding="utf-8") as tar:
        d = tarfile.TarInfo("rank-0000")
        d.type = tarfile.DIRTYPE
        tar.addfile(d)
        for name in ("rank-0000/.hidden", "rank-0000/a..b", "m.json", "\u00e9/\u6743.bin"):
            info = tarfile.TarInfo(name)
            info.size = 2
            tar.addfile(info, io.BytesIO(b"hi"))
    dest = unpack(tgz, tmp_path / "dest")
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*")) == [
        "m.json", "rank-0000", "rank-0000/.hidden", "rank-0000/a..b", "\u00e9",
        "\u00e9/\u6743.bin"]


#: members whose names clash (each (name, kind) in order) and the line's rest ``unpack``
#: refuses them with
CLASHING_MEMBERS = {
    "file then under it": ([("x", "file"), ("x/y", "file")], "'x/y': 'x' is a file"),
    "under a later file": ([("x/y", "file"), ("x", "file")], "'x/y': 'x' is a file"),
    "folder then file": ([("x", "dir"), ("x", "file")], "'x': given twice"),
    "file then folder": ([("x", "file"), ("x", "dir")], "'x': given twice"),
    "file twice": ([("x", "file"), ("x", "file")], "'x': given twice"),
    "deep": ([("a", "dir"), ("a/b", "file"), ("a/b/c/d", "file")], "'a/b/c/d': 'a/b' is a file"),
}


@pytest.mark.parametrize("case", sorted(CLASHING_MEMBERS))
def test_golden_unpack_refuses_clashing_members_before_writing_anything(tmp_path, case):
    """Bug (review 48j): each name was judged alone, so a file ``x`` and a member ``x/y``
    (or a folder and a file ``x``) passed and failed half-way with a raw
    ``NotADirectoryError`` / ``IsADirectoryError``, a member before them written; a file
    then a folder ``x`` was quietly taken.  Now the ``unexpected member`` line, nothing
    written (a folder given twice stays harmless: the last test)."""
    from nrtrewrite.golden import unpack

    names, rest = CLASHING_MEMBERS[case]
    tgz = tmp_path / "g.tar.gz"
    _tgz(tgz, names)
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(ValueError) as err:
        unpack(tgz, tmp_path / "dest")
    assert str(err.value) == f"{tgz}: unexpected member {rest}"
    assert sorted(tmp_path.rglob("*")) == before


def test_golden_unpack_takes_a_folder_given_twice(tmp_path):
    """A folder member given twice (as GNU tar may append one) is no clash."""
    import io
    import tarfile

    from nrtrewrite.golden import unpack

    tgz = tmp_path / "g.tar.gz"
    with tarfile.open(tgz, "w:gz", format=tarfile.PAX_FORMAT, encoding="utf-8") as tar:
        for _ in range(2):
            d = tarfile.TarInfo("d")
            d.type = tarfile.DIRTYPE
            tar.addfile(d)
        f = tarfile.TarInfo("d/f")
        f.size = 2
        tar.addfile(f, io.BytesIO(b"hi"))
    dest = unpack(tgz, tmp_path / "dest")
    assert (dest / "d" / "f").read_bytes() == b"hi"


@pytest.mark.parametrize("rank,why", [
    ("\uff14", "'\uff14' is not a valid integer"),
    ("1_0", "'1_0' is not a valid integer"),
    ("9" * 5000, "'999999999999...' has 5000 digits, more than 40"),
])
def test_golden_rank_takes_ascii_digits_as_the_cli(tmp_path, rank, why):
    """docs/CLI.md "Errors": integer options take ASCII digits (argparse's ``int`` took
    ``４`` and ``1_0``, and 5000 digits was ``invalid int value``); nothing written."""
    proc = run("nrtrewrite.golden", [FIX / "ar2.neff", tmp_path / "g.tar.gz", "--rank", rank],
               tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == (f"nrtrewrite.golden: error: argument --rank: {why} "
                           "(see 'python -m nrtrewrite.golden --help')\n")
    assert not (tmp_path / "g.tar.gz").exists()


@pytest.mark.parametrize("args,why", [
    ([], "the following arguments are required: MODEL, GOLDEN"),
    (["m.neff"], "the following arguments are required: GOLDEN"),
    (["m.neff", "g.tar.gz", "extra"], "unrecognized arguments: extra"),
    (["m.neff", "g.tar.gz", "--ranks", "1"], "unrecognized arguments: --ranks 1"),
    (["m.neff", "g.tar.gz", "--rank"], "argument --rank: expected one argument"),
])
def test_golden_usage_errors_are_one_line(tmp_path, args, why):
    """Bug (review 51d): a usage error was argparse's two lines, the usage then ``golden.py:
    error: ...``, where docs/RELIABILITY.md §4 has every error of the module one line
    ``nrtrewrite.golden: error: ...``; status 2, nothing written."""
    proc = run("nrtrewrite.golden", args, tmp_path)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (f"nrtrewrite.golden: error: {why} "
                           "(see 'python -m nrtrewrite.golden --help')\n")
    assert list(tmp_path.iterdir()) == []


#: docs/CLI.md "Standard input and output": the CLI's one wording for ``-``
DASH_READ = ("-: reading from the standard input is not supported; give a path "
             "(./- for one named -)")
DASH_WRITE = ("-: writing to the standard output is not supported; give a path "
              "(./- for one named -)")


@pytest.mark.parametrize("args,why", [
    (["-", "g.tar.gz"], f"argument MODEL: {DASH_READ}"),
    ([FIX / "ar2.neff", "-"], f"argument GOLDEN: {DASH_WRITE}"),
])
@pytest.mark.parametrize("dash_file", [False, True])
def test_golden_refuses_a_dash_as_the_cli_does(tmp_path, args, why, dash_file):
    """Review V5: ``GOLDEN`` ``-`` wrote the archive to a file named ``-``, ``MODEL`` ``-``
    read ./- (here a copy of ar2.neff) or failed with the OS's line; both are refused in
    the CLI's wording, a usage error, status 2, nothing written."""
    if dash_file:
        shutil.copy(FIX / "ar2.neff", tmp_path / "-")
    proc = run("nrtrewrite.golden", args, tmp_path)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (f"nrtrewrite.golden: error: {why} "
                           "(see 'python -m nrtrewrite.golden --help')\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == (["-"] if dash_file else [])
    if dash_file:
        assert (tmp_path / "-").read_bytes() == (FIX / "ar2.neff").read_bytes()


def test_golden_help_names_the_module_and_describes_every_argument(tmp_path):
    """Bug (review 51d): ``--help`` showed ``usage: golden.py`` and left ``model``,
    ``golden`` and ``--rank`` undescribed."""
    proc = run("nrtrewrite.golden", ["--help"], tmp_path, COLUMNS="200")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == ("usage: python -m nrtrewrite.golden [-h] [--rank R] [--no-memory-check] "
                        "MODEL GOLDEN")
    assert "golden.py" not in proc.stdout
    described = {ln.split()[0]: " ".join(ln.split()[1:]) for ln in lines
                 if ln.startswith("  ") and not ln.startswith("   ")}
    assert set(described) == {"MODEL", "GOLDEN", "-h,", "--rank", "--no-memory-check"}, \
        described
    assert all(described.values()), described


def test_a_memory_refusal_names_the_model_and_offers_an_option_golden_has(tmp_path, monkeypatch,
                                                                          capsys):
    """Bug (review 51r): golden's memory refusal named ``<temporary>/every-rank`` (the
    lowering) and said ``pass --no-memory-check to try anyway``, an option golden did not
    have.  Now the line names the model, golden takes ``--no-memory-check`` (passed through to
    simulate: docs/CLI.md "python -m nrtrewrite.golden"), and with it the golden is written."""
    import nrtrewrite.golden as golden
    import nrtrewrite.simulate.memguard as memguard
    monkeypatch.setattr(memguard, "available_bytes", lambda *a, **k: (1 << 10, "MemAvailable"))
    model = shutil.copy(FIX / "ar2.neff", tmp_path / "ar2.neff")
    out = tmp_path / "ar2.tar.gz"
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        golden.main(["ar2.neff", str(out)])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("nrtrewrite.golden: error: ar2.neff: trigger 0: cannot be simulated "
                          "on this machine: "), err
    assert err.rstrip().endswith("or pass --no-memory-check to try anyway"), err
    assert "<temporary>" not in err and not out.exists()
    help_text = subprocess.run([sys.executable, "-m", "nrtrewrite.golden", "--help"],
                               capture_output=True, text=True, cwd=ROOT, timeout=60,
                               env=dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")).stdout
    assert "--no-memory-check" in help_text
    golden.main([str(model), str(out), "--no-memory-check"])
    assert capsys.readouterr().out.endswith(": written\n")
    assert out.read_bytes() == (FIX / "golden" / "ar2.tar.gz").read_bytes()


def test_golden_cuts_a_long_protocol_reason_once(tmp_path, monkeypatch):
    """A protocol error's reason is quoted whole in golden's refusal and cut once, where the
    line is shown, its count the whole refusal's (review 53n: the error's line, cut already
    at 1,000 characters of reason, was quoted and cut again: a 3,021-character reason showed
    ``(1107 characters in all)``)."""
    import nrtrewrite.simulate.engine as engine
    from nrtrewrite.errors import NrtRewriteError, SimulationError
    from nrtrewrite.golden import _simulated, lower_to

    reason = "a protocol error " + "x" * 3000 + " END"  # 3,021 characters

    def refuse(self):
        raise SimulationError(reason, file=str(tmp_path / "rank-0000"), trigger=0)

    monkeypatch.setattr(engine.Simulator, "_setup", refuse)
    out = lower_to(FIX / "ar2.neff", tmp_path / "out", None)
    with pytest.raises(NrtRewriteError) as err:
        _simulated(str(FIX / "ar2.neff"), out, tmp_path, None)
    whole = ("simulate refuses the lowered output (<temporary>/rank-0000: trigger 0: "
             + reason + "); nothing written: a golden is only packed from an output "
             f"simulate accepts (nrtrewrite simulate {FIX / 'ar2.neff'})")
    assert len(reason) == 3021
    line = str(err.value)
    assert line.count("characters in all") == 1
    assert f"... ({len(whole)} characters in all) ..." in line
    assert line.startswith(whole[:650]) and line.endswith(whole[-150:])


@pytest.mark.parametrize("where, exc, phase, why", [
    ("simulate_output", lambda: OSError(errno.ENOMEM, os.strerror(errno.ENOMEM)),
     "simulating the lowering", "could not start a process or map memory (Cannot allocate "
     "memory): the limit on processes (ulimit -u) or on memory is reached"),
    ("plan_lowering", MemoryError, "lowering the model",
     "needed more memory than the machine gave it (MemoryError)"),
])
def test_golden_out_of_memory_is_the_resource_line_naming_model_and_phase(
        tmp_path, monkeypatch, capsys, where, exc, phase, why):
    """Bug (review 59l): golden out of memory printed the OS's bare reason,
    ``nrtrewrite.golden: error: Cannot allocate memory``, status 2, where simulate gives its
    resource line and status 71 (docs/CLI.md's exit table: 71 = out of memory).  Now the same
    line, naming the model and what golden was doing, status 71, nothing written."""
    import nrtrewrite.golden as golden

    def refuse(*a, **k):
        raise exc()
    monkeypatch.setattr(golden, where, refuse)
    shutil.copy(FIX / "ar2.neff", tmp_path / "ar2.neff")
    out = tmp_path / "ar2.tar.gz"
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stop:
        golden.main(["ar2.neff", str(out)])
    assert stop.value.code == 71
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("nrtrewrite.golden: error: ar2.neff: out of "), err
    assert f"'python -m nrtrewrite.golden' {why} (while {phase}); nothing written\n" in err, err
    assert "--traceback" not in err and not out.exists()


@pytest.mark.parametrize("limit", [60000, 150000])
def test_an_address_space_limit_while_golden_loads_is_one_line(tmp_path, limit):
    """Review 59q F4: `ulimit -v` too small for golden's modules (numpy's libraries: an
    ImportError from the loader at 60 MB, a MemoryError at 150 MB) printed Python's
    traceback or numpy's import banner, status 1; now the out-of-memory line the CLI gives
    (docs/CLI.md "Errors": status 71, one line), nothing written."""
    golden = tmp_path / "g.tar.gz"
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        ["sh", "-c", f'ulimit -v {limit} && exec "{sys.executable}" -m nrtrewrite.golden '
                     f'"{FIX / "ar2.neff"}" "{golden}"'],
        capture_output=True, cwd=tmp_path, env=env, timeout=120)
    err = proc.stderr.decode()
    if proc.returncode == 0:
        pytest.skip(f"{limit} KB of address space was enough here")
    assert proc.returncode == 71, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    if "(while loading its modules)" not in err:
        # (150 MB loads the modules since golden keeps BLAS to one thread, review 59s: the
        # limit then stops a later phase, which says so in simulate's resource line)
        assert limit > 60000, err
        assert err.startswith("nrtrewrite.golden: error: "), err
        assert " out of " in err and err.endswith("; nothing written\n"), err
        assert not golden.exists()
        return
    assert err.startswith("nrtrewrite.golden: error: out of memory: 'python -m "
                          "nrtrewrite.golden' "), err
    assert err.endswith("(while loading its modules); nothing written\n"), err
    assert not golden.exists()


@pytest.mark.parametrize("given, want", [(None, "1"), ("4", "4")])
def test_golden_keeps_blas_to_one_thread_before_numpy_loads(tmp_path, given, want):
    """Review 59s: `python -m nrtrewrite.golden` loaded numpy before anything set
    `OPENBLAS_NUM_THREADS`, so OpenBLAS started its own threads (under `ulimit -v 140000` it
    ended the run with SIGINT, status 130). CLI.md "Errors": numpy's BLAS starts no threads of
    its own, `OPENBLAS_NUM_THREADS=1` unless set (a value given is kept). Seen at the moment
    numpy is first imported, in a process run as `-m` runs it."""
    code = (
        "import builtins, os, runpy, sys\n"
        "real = builtins.__import__\n"
        "def imp(name, *a, **k):\n"
        "    if name == 'numpy' or name.startswith('numpy.'):\n"
        "        builtins.__import__ = real\n"
        "        sys.stderr.write('BLAS %s\\n' % os.environ.get('OPENBLAS_NUM_THREADS'))\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = imp\n"
        "sys.argv = ['nrtrewrite.golden', '--help']\n"
        "runpy.run_module('nrtrewrite.golden', run_name='__main__', alter_sys=True)\n")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=tmp_path,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.decode().splitlines()[0] == f"BLAS {want}"
