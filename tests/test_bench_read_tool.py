"""benchmarks/bench_read.py: the inputs it writes are valid NEFF-like files holding what its
docstring says, and it reads each one back (sizes, not speed: no timed tests); bad names and
a bad ``--out`` are one line, status 2, before anything is written."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nrtrewrite.neff.container import read_container, read_file_bytes
from nrtrewrite.neff.reader import read_model

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "benchmarks" / "bench_read.py"
_spec = importlib.util.spec_from_file_location("bench_read", TOOL)
bench_read = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_read)


def test_inputs_hold_what_they_say(tmp_path):
    w = bench_read.make("w1", tmp_path)
    c = read_container(read_file_bytes(w))  # the header hash checked too
    assert len(c.members["weights.bin"]) == 1 << 20
    assert read_model(w).triggers  # the model itself is valid: one 0xC7
    g = bench_read.make("g50", tmp_path)
    data = g.read_bytes()
    assert data[1024:].count(b"\x1f\x8b\x08") >= 51  # the tar.gz and 50 empty members
    assert set(read_container(read_file_bytes(g)).members) == {
        "neff.json", "sg00/def.json", "sg00/sp.bin"}
    z = bench_read.make("z2", tmp_path)
    assert z.stat().st_size < 64 << 10
    assert read_container(read_file_bytes(z)).members["zeros.bin"] == bytes(2 << 20)


def test_the_tool_prints_a_row_per_input(tmp_path):
    out = tmp_path / "read"
    res = subprocess.run([sys.executable, str(TOOL), "--only", "w1,g20", "--out", str(out)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    rows = [line.split() for line in res.stdout.splitlines()[1:]]
    assert [r[0] for r in rows] == ["w1", "g20"]
    assert abs(float(rows[0][-1]) - (1 << 20) / 1e6) < 0.05  # the members: 1 MiB + a few hundred bytes
    assert float(rows[1][-1]) == 0.0
    assert not out.exists()  # removed without --keep


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


@pytest.mark.parametrize("names, bad", [("w2,x", "x"), ("bogus", "bogus"), ("g1,z", "z"),
                                        ("w１", "w１")])
def test_every_name_is_checked_before_anything_is_written(tmp_path, names, bad):
    """Before, ``--only w2,x`` wrote w2.neff and then stopped at x with it left behind."""
    out = tmp_path / "read"
    res = run("--only", names, "--out", str(out))
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.splitlines()[-1] == (f"bench_read.py: error: --only: unknown input "
                                           f"{bad!r}: wN, gK or zN (e.g. w32)")
    assert not out.exists()


@pytest.mark.parametrize("where, says", [
    ("a.neff", "--out {}: not a folder"),
    ("missing/deep/x", "--out {}: its parent folder {} does not exist"),
])
def test_a_bad_out_is_one_line_and_makes_no_folder(tmp_path, where, says):
    (tmp_path / "a.neff").write_bytes(b"model")
    out = tmp_path / where
    res = run("--only", "g1", "--out", str(out))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.splitlines()[-1] == "bench_read.py: error: " + says.format(out, out.parent)
    assert sorted(os.listdir(tmp_path)) == ["a.neff"]
    assert (tmp_path / "a.neff").read_bytes() == b"model"


def test_a_relative_out_is_the_starting_folders(tmp_path):
    res = run("--only", "g1", "--out", "read", "--keep", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert sorted(os.listdir(tmp_path / "read")) == ["g1.neff"]


def test_an_out_another_run_holds_is_refused_before_anything_is_written(tmp_path):
    """bench_read.py takes ``--out``'s lock, the one bench_diff.py holds on its own: a folder
    another run holds is refused in one line, status 2, nothing written, nothing removed
    (until 2026-12-07 it took no lock, and read, then removed as its own, what a bench_diff.py
    run was moving into the folder)."""
    import fcntl

    out = tmp_path / "read"
    out.mkdir()
    (out / "mine.txt").write_text("kept")
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as a running bench_diff.py or bench_read.py holds it
        res = run("--only", "g1", "--out", str(out))
    finally:
        os.close(fd)
    assert (res.returncode, res.stdout, res.stderr) == (
        2, "", f"bench_read.py: error: --out {out}: in use by another bench_diff.py or "
               "bench_read.py run (it holds the folder's lock); give each run its own --out\n")
    assert os.listdir(out) == ["mine.txt"]


#: A process that writes ``bench_read.make(NAME)``'s bytes to a path (argv: the benchmarks
#: folder, NAME, the path) in place and SIGKILLs itself half way, as a copy or a writer
#: killed would leave it
_KILLED_HALF_WAY = r"""
import os, signal, sys, tempfile
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import bench_read
data = bench_read.make(sys.argv[2], Path(tempfile.mkdtemp())).read_bytes()
with open(sys.argv[3], "wb") as fh:
    fh.write(data[:len(data) // 2])
    fh.flush()
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_an_input_cut_short_is_written_anew(tmp_path):
    """An input in ``--out`` whose header's size and MD5 are not its payload's (a process
    killed writing it: here one that writes half and SIGKILLs itself) is written anew, a
    note on stderr, and measured whole (until 2026-12-07 any file of the name was
    measured); one that is whole is taken as it is."""
    out = tmp_path / "read"
    out.mkdir()
    killed = subprocess.run([sys.executable, "-c", _KILLED_HALF_WAY, str(TOOL.parent), "w1",
                             str(out / "w1.neff")], capture_output=True, timeout=60)
    assert killed.returncode == -9 and 0 < (out / "w1.neff").stat().st_size
    whole = bench_read.make("w1", tmp_path)  # (in its own folder: tmp_path/w1.neff)
    assert (out / "w1.neff").stat().st_size < whole.stat().st_size
    res = run("--only", "w1", "--out", str(out), "--keep")
    assert res.returncode == 0, res.stderr
    assert res.stderr == (f"bench_read.py: {out / 'w1.neff'}: not whole (its header's size or "
                          "MD5 is not its payload's); written anew\n")
    assert (out / "w1.neff").read_bytes() == whole.read_bytes()
    read_container(read_file_bytes(out / "w1.neff"))  # the header hash checked too
    before = os.stat(out / "w1.neff")
    res = run("--only", "w1", "--out", str(out), "--keep")
    assert (res.returncode, res.stderr) == (0, "")
    after = os.stat(out / "w1.neff")
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert bench_read.is_whole(whole) and not bench_read.is_whole(tmp_path / "none.neff")


#: bench_read.py SIGKILLed once its first input is written whole into its temporary sibling
#: in ``--out``, before the rename (argv: the benchmarks folder, then its arguments)
_KILLED_BEFORE_RENAME = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
import bench_read
def replace(src, dst):
    print("TEMP", src, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
bench_read.os.replace = replace
sys.argv = ["bench_read.py", *sys.argv[2:]]
bench_read.main()
"""


def test_a_killed_runs_half_written_input_is_removed_by_the_next_run(tmp_path):
    """An input is written to ``.NAME.bench-read-tmp-PID-HEX`` in ``--out`` and renamed once
    whole: a run SIGKILLed before the rename leaves that sibling, which the next run (holding
    the lock, so no live run's) removes; a ``NAME.tmp`` of a run from before 2026-12-07
    (``outdir.write_new``'s, in ``--out``) an hour unchanged is removed too, a young one and
    other names kept (until 2026-12-07 ``w1.tmp`` stayed for good, counted by every later run
    as there before)."""
    import time

    out = tmp_path / "read"
    out.mkdir()
    res = subprocess.run([sys.executable, "-c", _KILLED_BEFORE_RENAME, str(TOOL.parent),
                          "--only", "g1", "--out", str(out)], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == -9, res.stderr
    (temp,) = [Path(line[5:]) for line in res.stdout.splitlines() if line.startswith("TEMP ")]
    assert temp.parent == out and temp.name.startswith(".g1.neff.bench-read-tmp-")
    assert os.listdir(out) == [temp.name]
    hour_ago = time.time() - 3700
    old, young, mine = out / "w1.tmp", out / "w2.tmp", out / "notes.tmp"
    for p in (old, young, mine):
        p.write_bytes(b"left")
    for p in (old, mine):
        os.utime(p, (hour_ago, hour_ago))
    res = run("--only", "g1", "--out", str(out), "--keep")
    assert (res.returncode, res.stderr) == (0, "")
    assert sorted(os.listdir(out)) == ["g1.neff", "notes.tmp", "w2.tmp"]

def test_the_tar_stream_is_counted_as_tarfile_writes_it():
    """The size the bound is judged on: USTAR's 512-byte header and data padded to 512 a
    member, two zero blocks at the end, the whole padded to tarfile's 10,240-byte record; a
    tar written with tarfile here is the oracle."""
    import io
    import tarfile

    for sizes in ([], [0], [1], [513], [10_000, 1 << 20]):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
            for i, (name, data) in enumerate(bench_read._members() + [
                    (f"m{i}", bytes(n)) for i, n in enumerate(sizes)]):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
        assert bench_read.tar_stream_bytes(sizes) == len(buf.getvalue()), sizes


@pytest.mark.parametrize("name, says", [
    # the reader reads a tar stream of at most 4 GiB (MAX_TOTAL_BYTES): 4095 MiB and the
    # four headers, the three small members' blocks and the end fit; 4096 MiB alone does not
    ("w4096", "input 'w4096': a member of 4,096 MiB is more than read_container reads (a tar "
              "stream of at most 4 GiB): N at most 4095"),
    ("z4096", "input 'z4096': a member of 4,096 MiB is more than read_container reads (a tar "
              "stream of at most 4 GiB): N at most 4095"),
    # tar's 11 octal digits end at 8 GiB: a traceback (overflow in number field) before
    ("w8192", "input 'w8192': a member of 8,192 MiB is more than read_container reads (a tar "
              "stream of at most 4 GiB): N at most 4095"),
    ("w1,g1000001", "input 'g1000001': 1,000,001 empty gzip members, more than the 1,000,000 "
                    "this script writes"),
])
def test_an_input_too_large_to_read_is_refused_before_anything_is_written(tmp_path, name, says):
    """Review 54f: ``--only w8192`` ended in ``ValueError: overflow in number field`` and
    ``w4096`` wrote a 4 GiB file the reading then failed on."""
    from nrtrewrite.neff.container import MAX_TOTAL_BYTES

    assert bench_read.READ_LIMIT == MAX_TOTAL_BYTES == 4 << 30
    # (an --out whose parent is missing: refused too, after --only, so a run that took
    # the selection would stop there before writing anything)
    out = tmp_path / "missing" / "read"
    res = run("--only", name, "--out", str(out))
    assert res.returncode == 2 and res.stdout == "" and "Traceback" not in res.stderr
    assert res.stderr.splitlines()[-1] == f"bench_read.py: error: --only: {says}"
    assert not out.exists()
    bench_read.parse_input("w4095")  # the largest that fits is taken
    bench_read.parse_input("g1000000")


@pytest.mark.parametrize("only", ["", " "])
def test_an_empty_selection_is_refused(tmp_path, only):
    """Review 54f: ``--only ''`` ran the whole default set, z3584's 3.6 GB read included."""
    # (an --out whose parent is missing: refused too, after --only, so a run that took
    # the selection would stop there before writing anything)
    out = tmp_path / "missing" / "read"
    res = run("--only", only, "--out", str(out))
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.splitlines()[-1] == (
        "bench_read.py: error: --only: no input named (leave --only out for the default set)")
    assert not out.exists()
