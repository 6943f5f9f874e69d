"""docs/CLI.md "Paths in the output": a plain-text line that names a path (``lower``'s title
``MODEL -> OUT``, ``simulate``'s ``simulate OUT (seed S)``, ``inspect``'s first line,
``explain``'s ``topology file PATH, named NAME``) holds the path as given, whole, on one
line: piped, and whatever ``COLUMNS`` says (review R2: each was wrapped at its table's or
console's width, and ``lower`` named MODEL's file name alone)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from rich.console import Console
from rich.table import Table

from nrtrewrite.cli import print_table
from test_atomic_output import FIX, ROOT, env


def run(*args, cwd=ROOT) -> list[str]:
    """The command's stdout lines, piped, with COLUMNS=20 (a path whole whatever it says)."""
    proc = subprocess.run([sys.executable, "-m", "nrtrewrite", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, env=env(COLUMNS=20),
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


@pytest.fixture(scope="module")
def long_place(tmp_path_factory):
    """A folder whose path is more than 300 characters (each name under 255 bytes)."""
    base = tmp_path_factory.mktemp("p")
    where = base / ("d" * 150) / ("e" * 150)
    where.mkdir(parents=True)
    assert len(str(where)) > 300
    shutil.copy(FIX / "ar2.neff", where / "m.neff")
    shutil.copy(FIX / "topologies" / "trn2-2node.json", where / "t.json")
    return where


def test_lowers_title_names_model_and_out_as_given_on_one_line(long_place):
    model, out = f"{long_place}/m.neff", f"{long_place}/./o.lowered/"
    lines = run("lower", model, "-o", out)
    # the rule's text: MODEL and OUT exactly as typed (OUT's "./" and trailing "/" kept)
    assert f"{model} -> {out}" in lines
    assert run("lower", "m.neff", "-o", "./o2/", cwd=long_place)[0].strip() == "m.neff -> ./o2/"


def test_simulates_title_holds_out_whole_on_one_line(long_place):
    out = f"{long_place}/s.lowered"
    run("lower", "-q", f"{long_place}/m.neff", "-o", out)
    assert f"simulate {out} (seed 0)" in run("simulate", out)


@pytest.mark.parametrize("given", ["./s2.lowered/", "s2.lowered//", "./s2.lowered"])
def test_simulates_title_and_json_output_name_out_as_given(long_place, given):
    """Review 56r: ``simulate ./o/`` named ``o`` (pathlib's normalised path) in its title and
    its ``--json`` ``output``, where ``lower`` names OUT as typed and simulate's own error
    document named ``./o/``: both are OUT exactly as given (CLI.md "Paths in the output")."""
    if not (long_place / "s2.lowered").is_dir():
        run("lower", "-q", "m.neff", "-o", "s2.lowered", cwd=long_place)
    assert run("simulate", given, cwd=long_place)[0].strip() == f"simulate {given} (seed 0)"
    doc = json.loads("\n".join(run("simulate", given, "--json", cwd=long_place)))
    assert (doc["output"], doc["ok"]) == (given, True)


def test_inspects_first_line_holds_the_path_whole(long_place):
    model = f"{long_place}/m.neff"
    first = run("inspect", model)[0]
    assert first.startswith(f"{model}  NEFF-like, pkg_version ")


def test_explains_topology_line_holds_the_files_path_whole(long_place):
    topo = f"{long_place}/t.json"
    first = run("explain", "--topology", topo, "--op", "allreduce", "--bytes", "1KiB",
                "--ranks", "2")[0]
    assert first.startswith(f"topology file {topo}, named trn2-2node (")


def _drawn(title: str) -> list[str]:
    """A one-column table (a cell ``abc``: 3 + 2 padding + 2 borders = 7 columns wide)
    titled ``title``, printed by print_table on a plain 40-column console."""
    con = Console(width=40, force_terminal=False, color_system=None, record=True)
    table = Table(title=title)
    table.add_column("abc")
    table.add_row("abc")
    with con.capture() as cap:
        print_table(con, table)
    return cap.get().splitlines()


def test_a_title_as_wide_as_its_table_stays_the_tables_and_a_wider_one_is_its_own_line():
    assert _drawn("T" * 7)[0] == "T" * 7  # 7 columns: the table's, centred in its 7
    assert _drawn("T" * 8)[0] == "T" * 8  # 8: its own line, whole (rich wrapped it at 7)
    assert _drawn("T" * 8)[1].startswith("\u250f")  # the table's top edge right under it
    assert _drawn("T" * 5)[0] == " TTTTT "  # a short one centred by rich, as before


@pytest.mark.parametrize("given", ["./s3.lowered/", "./s3.lowered"])
def test_simulates_error_lines_name_outs_files_from_out_as_given(long_place, given):
    """Review 57p: ``simulate ./o/``'s title named OUT as given but its error line and
    ``--json`` ``error`` named pathlib's ``o/rank-0000``: the file an error line names is
    the path as given (CLI.md "Paths in the output"), OUT as typed, then its member joined
    on; here record 0's leaf (byte 12 of legs.bin) set to direct_recv (7), which no entry
    of ar2's runs."""
    if not (long_place / "s3.lowered").is_dir():
        run("lower", "-q", "m.neff", "-o", "s3.lowered", cwd=long_place)
        p = long_place / "s3.lowered" / "rank-0000" / "legs.bin"
        b = bytearray(p.read_bytes())
        b[12] = 7
        p.write_bytes(bytes(b))

    def sim(*extra):
        return subprocess.run([sys.executable, "-m", "nrtrewrite", "simulate", given, *extra],
                              capture_output=True, text=True, cwd=long_place,
                              env=env(COLUMNS=20), timeout=120)
    rank = given.rstrip("/") + "/rank-0000"
    proc = sim()
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"nrtrewrite: error: {given}: rank-0000/legs.bin: sha256 "
                                  "does not match rank-0000/manifest.json;"), proc.stderr
    doc = json.loads(sim("--json").stdout)
    assert doc["error"].startswith(f"{given}: rank-0000/legs.bin: sha256 does not match")
    proc = sim("--ignore-checksums")
    assert proc.returncode == 1
    assert f"protocol error: {rank}: field leaf, rank 0, artifact legs.bin, record 0: " \
        in proc.stdout + proc.stderr
    doc = json.loads(sim("--ignore-checksums", "--json").stdout)
    assert doc["error"].startswith(f"{rank}: field leaf, rank 0, artifact legs.bin, record 0: ")


@pytest.mark.parametrize("given", ["./short.neff", ".//short.neff"])
def test_simulate_names_a_model_as_given(long_place, given):
    """RELIABILITY 57th Left: ``simulate ./m.neff`` named the model ``m.neff`` (pathlib's
    form) in its lines, where ``lower ./m.neff`` names it as typed (CLI.md "Paths in the
    output"). A model of 500 bytes is refused by its header's size (NEFF-LIKE.md: the header is
    1,024 bytes), the error line naming MODEL exactly as typed, as lower's does; and
    --no-verify-hash's warning names it so."""
    (long_place / "short.neff").write_bytes((long_place / "m.neff").read_bytes()[:500])
    why = "file too short: 500 bytes, the header alone needs 1024"
    for cmd in ("simulate", "lower"):
        proc = subprocess.run([sys.executable, "-m", "nrtrewrite", cmd, given, "-o", "x.lowered"]
                              if cmd == "lower" else
                              [sys.executable, "-m", "nrtrewrite", cmd, given],
                              capture_output=True, text=True, cwd=long_place,
                              env=env(COLUMNS=20), timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr == f"nrtrewrite: error: {given}: {why}\n", (cmd, proc.stderr)
    proc = subprocess.run([sys.executable, "-m", "nrtrewrite", "simulate", "./m.neff",
                           "--no-verify-hash"], capture_output=True, text=True,
                          cwd=long_place, env=env(COLUMNS=20), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("nrtrewrite: warning: ./m.neff: header hash not verified"), \
        proc.stderr
