"""benchmarks/bench_diff.py: the outputs it compares are what its docstring says, and it
prints a row per comparison (sizes and counts, not speed: no timed tests); bad rows, a
``--tree`` that is not an nrtrewrite source tree and a bad ``--out`` are one line, status 2,
before anything is written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "benchmarks" / "bench_diff.py"


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def test_the_tool_prints_a_row_per_comparison(tmp_path):
    # run from another folder with a relative --out: lower runs in the tree, so the paths
    # it is given must not be relative to where the script was started
    res = run("--only", "2x1,2x1:missing", "--out", "diff", "--keep", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    out = tmp_path / "diff"
    rows = [line.split() for line in res.stdout.splitlines()[1:]]
    assert [r[0] for r in rows] == ["2x1", "2x1:missing"]
    # the header's hash, and the last instruction of each 1 MiB member (data_size too when
    # the sizes differ); missing: w0.bin is A's only
    assert rows[0][-2:] == ["3", "difference(s)"], rows
    diff = subprocess.run([sys.executable, "-m", "nrtrewrite", "diff", str(out / "2x1" / "A"),
                           str(out / "2x1" / "missing")], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert diff.returncode == 1
    assert "2x1.neff:w0.bin member: True != False" in diff.stdout
    assert "2x1.neff:w1.bin[16383] semaphore_value" in diff.stdout


@pytest.mark.parametrize("rows, says", [
    ("foo", "unknown model 'foo'"),
    ("wabc", "unknown model 'wabc'"),
    ("w0", "unknown model 'w0'"),  # (a member too short to hold an instruction)
    ("0x5", "unknown model '0x5'"),
    ("2x2:bogus", "'2x2:bogus': unknown variant 'bogus'"),
    ("w1,w2x", "unknown model 'w2x'"),  # (every row checked before the first runs)
])
def test_a_bad_row_is_one_line_before_anything_is_written(tmp_path, rows, says):
    out = tmp_path / "diff"
    res = run("--only", rows, "--out", str(out))
    assert res.returncode == 2 and res.stdout == ""
    err = res.stderr.splitlines()
    assert err[-1].startswith("bench_diff.py: error: --only: ") and says in err[-1], err
    assert "Traceback" not in res.stderr and not out.exists()


def test_a_tree_without_nrtrewrite_is_refused(tmp_path):
    """Python would import the installed nrtrewrite (this checkout) and compare it with
    itself: before, ``--tree /tmp/empty`` measured this checkout."""
    out = tmp_path / "diff"
    res = run("--only", "w1", "--out", str(out), "--tree", str(tmp_path))
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.splitlines()[-1] == (
        f"bench_diff.py: error: --tree {tmp_path}: no nrtrewrite/__init__.py: not an "
        "nrtrewrite source tree")
    assert not out.exists()


def test_a_tree_whose_nrtrewrite_cannot_be_imported_is_refused(tmp_path):
    pkg = tmp_path / "src" / "nrtrewrite"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('half a checkout')\n")
    res = run("--only", "w1", "--out", str(tmp_path / "diff"), "--tree", str(pkg.parent))
    assert res.returncode == 2
    assert res.stderr.splitlines()[-1] == (
        f"bench_diff.py: error: --tree {pkg.parent}: its nrtrewrite cannot be imported: "
        "ImportError: half a checkout")


@pytest.mark.parametrize("where, says", [
    ("file", "not a folder"),
    ("missing/deep/out", "its parent folder"),
])
def test_a_bad_out_is_refused_and_no_parent_is_made(tmp_path, where, says):
    (tmp_path / "file").write_text("x")
    res = run("--only", "w1", "--out", str(tmp_path / where))
    assert res.returncode == 2 and says in res.stderr.splitlines()[-1]
    assert sorted(os.listdir(tmp_path)) == ["file"]


#: runs bench_diff.py's main with ARGS, B's NEFF written by a writer that finds the disk
#: full (ENOSPC) in the child that rewrites it
_FULL_DISK = r"""
import sys
sys.path.insert(0, sys.argv[1])
import bench_diff
bench_diff._EDIT = '''
import nrtrewrite.neff.container as _container
def _full(*args, **kwargs):
    raise OSError(28, "No space left on device")
_container.build_container = _full
''' + bench_diff._EDIT
sys.argv = ["bench_diff.py", *sys.argv[2:]]
bench_diff.main()
"""


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_a_failure_building_b_is_one_line_and_leaves_out_holding_only_results(tmp_path):
    """B is built in a temporary folder outside ``--out`` and moved there whole (review 49w:
    until 2026-12-06 it was built in a folder inside ``--out``, left there when the model's
    folder was an earlier run's, and the failure's line held the child's traceback)."""
    out, tmp = tmp_path / "diff", tmp_path / "tmp"
    tmp.mkdir()
    res = run("--only", "w1:missing", "--out", str(out), "--keep")  # an earlier run's results
    assert res.returncode == 0, res.stderr
    before = _tree(out)
    assert {"w1", "w1/A", "w1/missing"} <= set(before)
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, "-c", _FULL_DISK, str(TOOL.parent), "--only", "w1",
                          "--out", str(out)], capture_output=True, text=True, cwd=tmp_path,
                         env=env, timeout=300)
    assert res.returncode == 1
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    # (FORMATS §1.1: the rewritten NEFF is named by the top manifest's output_neff)
    neff = json.loads((out / "w1" / "A" / "manifest.json").read_text())["output_neff"]["name"]
    # (B's NEFF named as it would be in --out: the temporary folder is gone by then; until
    # 2026-12-07 its path there)
    assert lines[0] == (f"B of w1: rewriting {out / 'w1' / 'last' / neff} failed (in the "
                        "temporary folder): OSError: [Errno 28] No space left on device")
    assert _tree(out) == before  # nothing of B, no working folder
    assert os.listdir(tmp) == []  # the run's temporary folder removed


def test_no_usable_temporary_folder_is_one_line_before_anything_is_written(tmp_path):
    """B's temporary folder is made where ``simulate MODEL.neff`` makes its own: where
    Python finds no folder it can write in, one line naming the folders tried (as
    tests/test_scripts_temp_folder.py's scripts), status 2, ``--out`` not made."""
    from test_scripts_temp_folder import run_without_temp

    out = tmp_path / "diff"
    proc, line = run_without_temp(tmp_path, TOOL, "--only", "w1", "--out", out)
    want = line.replace("to lower the model into", "to build the model, A and B in")
    assert (proc.returncode, proc.stderr, proc.stdout) == (2, f"bench_diff.py: error: {want}\n",
                                                           "")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("manifest, says", [
    (None, "cannot read {m}: No such file or directory"),
    (b"{", "{m}: not valid JSON: Expecting property name enclosed in double quotes: line 1 "
           "column 2 (char 1)"),
    (b"\xff", "{m}: not valid JSON: 'utf-8' codec can't decode byte 0xff in position 0: "
              "invalid start byte"),
    (b'{"input": {}}', "{m}: no output_neff name (the rewritten NEFF of A is not known)"),
    (b'{"output_neff": {"name": 5}}',
     "{m}: no output_neff name (the rewritten NEFF of A is not known)"),
])
def test_an_earlier_a_without_a_readable_manifest_is_one_line(tmp_path, manifest, says):
    """B's NEFF is named by A's top manifest (FORMATS §1.1): an earlier run's A without one,
    or with one that is not JSON or names no rewritten NEFF, is the docstring's one line
    naming the step and why, status 1 (review 51j: a traceback, the manifest read outside
    every ``try`` since fixer 51g moved it from the child)."""
    out, tmp = tmp_path / "diff", tmp_path / "tmp"
    a = out / "w1" / "A"
    a.mkdir(parents=True)
    (out / "w1" / ".A.bench-diff-whole").touch()  # (marked whole: taken, not made again)
    tmp.mkdir()
    if manifest is not None:
        (a / "manifest.json").write_bytes(manifest)
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, str(TOOL), "--only", "w1", "--out", str(out)],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    m = a / "manifest.json"
    assert (res.returncode, res.stderr) == (1, f"B of w1: {says.format(m=m)}\n")
    assert _tree(out) == ["w1", "w1/.A.bench-diff-whole", "w1/A"] + (
        ["w1/A/manifest.json"] if manifest else [])
    assert os.listdir(tmp) == []  # the run's temporary folder removed


#: bench_diff.py with ``lower`` faked to die by SIGKILL once it has made its temporary
#: sibling of ``-o`` (docs/CLI.md "lower": ``.OUT.tmp-PID-HEX`` beside OUT), which a killed
#: lower cannot remove; and every file ``write_new`` writes (``PATH.tmp``) recorded on stdout
_KILLED_LOWER = r"""
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import bench_diff
real_write = bench_diff.write_new
def write_new(path, data):
    print("WROTE", path.with_suffix(".tmp"), flush=True)
    real_write(path, data)
bench_diff.write_new = write_new
class Killed:
    returncode, stderr = -9, ""
def run(args, tree=bench_diff.ROOT):
    if "lower" in args:
        o = Path(args[args.index("-o") + 1])
        print("LOWER", o, flush=True)
        (o.parent / f".{o.name}.tmp-1-0123456789abcdef").mkdir()
        return Killed()
    return real_run(args, tree)
real_run, bench_diff._run = bench_diff._run, run
sys.argv = ["bench_diff.py", *sys.argv[2:]]
bench_diff.main()
"""


def test_the_model_and_lowers_temporary_sibling_are_written_outside_out(tmp_path):
    """The model's ``.tmp`` and ``lower``'s temporary sibling of A are in the run's temporary
    folder, not in ``--out``: a ``lower`` killed (its sibling left behind) leaves ``--out``
    holding the model only, and the run's temporary folder is removed (until 2026-12-07 the
    model's ``.tmp`` was written in ``--out`` and A lowered there, so the sibling stayed in
    ``OUT/w1/`` with ``--keep``)."""
    out, tmp = tmp_path / "diff", tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, "-c", _KILLED_LOWER, str(TOOL.parent), "--only", "w1",
                          "--out", str(out), "--keep"], capture_output=True, text=True,
                         cwd=tmp_path, env=env, timeout=300)
    # (lower's last line, or its status where it wrote none: until 2026-12-07 "lower w1: ")
    assert res.returncode == 1 and res.stderr == "A of w1: lower failed: exit -9\n", res.stderr
    written = [Path(line.split(" ", 1)[1]) for line in res.stdout.splitlines()
               if line.startswith(("WROTE ", "LOWER "))]
    assert len(written) == 2 and all(tmp in p.parents for p in written), written
    assert _tree(out) == ["w1.neff"]  # (the model, moved in whole: no sibling, no .tmp)
    assert os.listdir(tmp) == []


sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_diff  # noqa: E402


def test_a_folder_that_cannot_be_moved_in_is_one_line(tmp_path, monkeypatch):
    """A moved across file systems (``os.rename`` refused, EXDEV: ``shutil.move`` copies it)
    onto a full disk (every file's copy refused, ENOSPC): ``shutil.Error``, one entry a
    file, is one line naming the first file as it is in ``--out``, why, and the count of
    the others (until 2026-12-07 the list of every entry, thousands of characters)."""
    import errno
    import shutil

    work, out = tmp_path / "work", tmp_path / "out"
    made = work / "w1-A"
    (made / "rank-0000").mkdir(parents=True)
    for name in ("a.bin", "b.bin", "c.bin"):
        (made / "rank-0000" / name).write_bytes(b"x")
    out.mkdir()

    def other_fs(src, dst, *a, **k):
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), src, dst)

    def full(src, dst, *a, **k):  # (as shutil's sendfile copy raises it: both files named)
        err = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        err.filename, err.filename2 = os.fspath(src), os.fspath(dst)
        raise err

    monkeypatch.setattr(os, "rename", other_fs)
    monkeypatch.setattr(shutil, "copyfile", full)
    with pytest.raises(SystemExit) as exc:
        bench_diff.move_in(made, out / "A", "A of w1")
    first = out / "A" / "rank-0000" / "a.bin"  # (copytree copies in sorted order)
    assert str(exc.value.code) == (
        f"A of w1: cannot move it from the temporary folder to {out / 'A'}: {first}: "
        f"[Errno {errno.ENOSPC}] {os.strerror(errno.ENOSPC)} (and 2 other files)")
    assert not (out / "A").exists()


def test_a_named_pipe_that_cannot_be_moved_in_is_named_in_out(tmp_path, monkeypatch):
    """A FIFO in a folder moved across file systems: shutil's text, ```PATH` is a named
    pipe``, names the file itself, not after ``: '``: it is named as it is in ``--out``,
    once (until 2026-12-07 its path in the deleted temporary folder, after the --out one)."""
    import errno

    work, out = tmp_path / "work", tmp_path / "out"
    made = work / "w1-A"
    (made / "rank-0000").mkdir(parents=True)
    os.mkfifo(made / "rank-0000" / "p.bin")
    out.mkdir()

    def other_fs(src, dst, *a, **k):
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), src, dst)

    monkeypatch.setattr(os, "rename", other_fs)
    with pytest.raises(SystemExit) as exc:
        bench_diff.move_in(made, out / "A", "A of w1")
    pipe = out / "A" / "rank-0000" / "p.bin"
    assert str(exc.value.code) == (
        f"A of w1: cannot move it from the temporary folder to {out / 'A'}: "
        f"`{pipe}` is a named pipe")
    assert not (out / "A").exists()


def test_a_full_temporary_folder_writing_the_model_is_one_line(tmp_path, monkeypatch):
    """``make_model``'s write (its ``.tmp`` in the run's temporary folder) on a full disk:
    one line naming the step, the file in the folder (``<temporary>/...``, gone by then),
    not a traceback (until 2026-12-07)."""
    import errno

    def full(path, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path.with_suffix(".tmp")))

    monkeypatch.setattr(bench_diff, "write_new", full)
    with pytest.raises(SystemExit) as exc:
        bench_diff.make_model("w1", tmp_path / "out", tmp_path)
    assert str(exc.value.code) == ("model w1: cannot write it in the temporary folder: "
                                   f"{os.strerror(errno.ENOSPC)} (<temporary>/w1.tmp)")
    assert not (tmp_path / "out").exists()


def test_a_full_temporary_folder_naming_no_file_names_the_models_tmp(tmp_path, monkeypatch):
    """A write's ENOSPC names no file (``write`` raises it so): the line names the model's
    ``.tmp`` in the temporary folder all the same (until 2026-12-07 no file)."""
    import errno

    def full(self, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Path, "write_bytes", full)
    with pytest.raises(SystemExit) as exc:
        bench_diff.make_model("w1", tmp_path / "out", tmp_path)
    assert str(exc.value.code) == ("model w1: cannot write it in the temporary folder: "
                                   f"{os.strerror(errno.ENOSPC)} (<temporary>/w1.tmp)")


def test_a_failing_lower_is_its_last_line_naming_a_as_in_out(tmp_path, monkeypatch):
    """``lower`` of A fails with lines on stderr: the line keeps the last, as B's does,
    its ``-o`` (in the temporary folder, gone by then) named as A is in ``--out`` (until
    2026-12-07 its whole stderr, naming the temporary path)."""
    out, work = tmp_path / "out", tmp_path / "work"
    work.mkdir()

    class Failed:
        returncode = 2

    def run(args, tree=None):
        o = args[args.index("-o") + 1]
        Failed.stderr = (f"warning: one\nnrtrewrite lower: error: {o}: cannot write the "
                         "output: No space left on device\n")
        return Failed()

    monkeypatch.setattr(bench_diff, "_run", run)
    with pytest.raises(SystemExit) as exc:
        bench_diff.make_pair("w1", out, work)
    assert str(exc.value.code) == (
        f"A of w1: lower failed: nrtrewrite lower: error: {out / 'w1' / 'A'}: cannot write "
        "the output: No space left on device")


def test_a_failing_diff_is_one_line_its_last(tmp_path, monkeypatch):
    """``diff A B`` measured fails with a traceback on stderr: the line keeps its last line
    (not a ``BENCH`` line), as a failing ``lower`` of A does (until 2026-12-07 its whole
    stderr, a traceback of many lines)."""
    class Failed:
        returncode = 3
        stdout = ""
        stderr = ("Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
                  "ValueError: boom\n\nBENCH 0.50 40\n")

    monkeypatch.setattr(bench_diff, "_run", lambda args, tree=None: Failed())
    a, b = tmp_path / "A", tmp_path / "B"
    with pytest.raises(SystemExit) as exc:
        bench_diff.measure(a, b)
    assert str(exc.value.code) == f"diff {a} {b}: exit 3: ValueError: boom"


def test_an_out_another_run_holds_is_refused_before_anything_is_written(tmp_path):
    """Runs sharing one ``--out``: each holds the folder's lock while it runs, and one that
    finds it held is refused in one line, status 2, before it makes anything (review 53f:
    two runs moved their A into each other's, ``OUT/w1/A/w1-A``, each counting 4 differences
    for 2; with three one printed a traceback and one's failure removed another's A)."""
    import fcntl

    out, tmp = tmp_path / "diff", tmp_path / "tmp"
    out.mkdir()
    tmp.mkdir()
    (out / "mine.txt").write_text("kept")
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as a running bench_diff.py holds it
        env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(ROOT))
        res = subprocess.run([sys.executable, str(TOOL), "--only", "w1", "--out", str(out)],
                             capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    finally:
        os.close(fd)
    assert (res.returncode, res.stdout, res.stderr) == (
        2, "", f"bench_diff.py: error: --out {out}: in use by another bench_diff.py or "
               "bench_read.py run (it holds the folder's lock); give each run its own --out\n")
    assert _tree(out) == ["mine.txt"] and os.listdir(tmp) == []


def test_a_dangling_out_link_is_refused_before_the_model_is_built(tmp_path):
    """``--out`` a symbolic link to nothing: one line, status 2, before anything is made
    (review 53f: a traceback, ``FileExistsError`` from its ``mkdir``, once the model was
    built in the temporary folder)."""
    tmp, out = tmp_path / "tmp", tmp_path / "diff"
    tmp.mkdir()
    out.symlink_to(tmp_path / "gone")
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, str(TOOL), "--only", "w1", "--out", str(out)],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert (res.returncode, res.stdout) == (2, "") and "Traceback" not in res.stderr
    assert res.stderr.splitlines()[-1] == (  # (after argparse's usage line)
        f"bench_diff.py: error: --out {out}: a symbolic link to nothing"), res.stderr
    assert os.listdir(tmp) == [] and sorted(os.listdir(tmp_path)) == ["diff", "tmp"]


#: bench_diff.py with ``--out`` on another file system than the temporary folder (every
#: ``os.rename`` refused, EXDEV: ``shutil.move`` copies) and the process SIGKILLed once the
#: first file of A has been copied into ``--out``
_KILLED_COPYING_A = r"""
import errno, os, shutil, signal, sys
sys.path.insert(0, sys.argv[1])
import bench_diff
def other_fs(src, dst, *a, **k):
    raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), src, dst)
os.rename = other_fs
real_copyfile, copied = shutil.copyfile, []
def copyfile(src, dst, *a, **k):
    if copied and "w1-A" in os.fspath(src):  # (copytree gives a DirEntry)
        os.kill(os.getpid(), signal.SIGKILL)
    copied.append(src)
    return real_copyfile(src, dst, *a, **k)
shutil.copyfile = copyfile
sys.argv = ["bench_diff.py", *sys.argv[2:]]
bench_diff.main()
"""


def test_a_run_killed_copying_a_into_out_leaves_no_a_the_next_run_takes(tmp_path):
    """A moved across file systems is copied into a temporary sibling in ``--out`` and
    renamed once whole: a run SIGKILLed mid-copy leaves no ``OUT/w1/A``, and the next run
    removes the sibling and makes A whole (review 53f: the copy went into ``OUT/w1/A``
    itself, left half written, which the next run took for A, failing and blaming B)."""
    out, tmp = tmp_path / "diff", tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, "-c", _KILLED_COPYING_A, str(TOOL.parent), "--only",
                          "w1", "--out", str(out), "--keep"], capture_output=True, text=True,
                         cwd=tmp_path, env=env, timeout=300)
    assert res.returncode == -9, res.stderr
    left = os.listdir(out / "w1")
    assert len(left) == 1 and left[0].startswith(".A.bench-diff-tmp-"), left
    res = subprocess.run([sys.executable, str(TOOL), "--only", "w1", "--out", str(out),
                          "--keep"], capture_output=True, text=True, cwd=tmp_path, env=env,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    # (the header's hash and the last instruction of the one 1 MiB member)
    assert res.stdout.splitlines()[-1].split()[-2:] == ["2", "difference(s)"]
    assert sorted(os.listdir(out / "w1")) == [
        ".A.bench-diff-whole", ".last.bench-diff-whole", "A", "last"]
    assert sorted(os.listdir(out / "w1" / "A")) == sorted(os.listdir(out / "w1" / "last"))


def test_a_place_taken_meanwhile_is_refused_and_kept(tmp_path):
    """``move_in`` never moves into, nor removes, what is at its place: a folder there
    (made by something else meanwhile) is one line, kept as it was, the copy removed (review
    53f: ``shutil.move`` put A inside it, ``OUT/w1/A/w1-A``, and a failure removed it)."""
    work, out = tmp_path / "work", tmp_path / "out"
    (work / "w1-A").mkdir(parents=True)
    (work / "w1-A" / "manifest.json").write_text("ours")
    (out / "A").mkdir(parents=True)
    (out / "A" / "manifest.json").write_text("theirs")
    with pytest.raises(SystemExit) as exc:
        bench_diff.move_in(work / "w1-A", out / "A", "A of w1")
    assert str(exc.value.code) == (
        f"A of w1: cannot move it from the temporary folder to {out / 'A'}: it appeared "
        "meanwhile, made by something other than this run; not replaced")
    assert _tree(out) == ["A", "A/manifest.json"]
    assert (out / "A" / "manifest.json").read_text() == "theirs"


def test_the_work_folder_is_locked_and_a_killed_runs_is_removed(tmp_path, monkeypatch):
    """The run's temporary folder is locked while it runs, and the ones SIGKILLed runs left
    (``nrtrewrite-bench-diff-XXXXXXXX``) are removed as ``simulate MODEL.neff`` removes its
    own: mkdtemp's name shape, a minute old, the lock free; a live run's (locked), a young
    one and a user's folder of another shape are kept (review 53f: nothing removed them)."""
    import fcntl
    import tempfile
    import time

    old = time.time() - 3600
    stale, live, young, mine = (tmp_path / f"nrtrewrite-bench-diff-{n}"
                                for n in ("a1_b2c3d", "b2c3d4e5", "c3d4e5f6", "my-results"))
    for d in (stale, live, young, mine):
        (d / "w1-A").mkdir(parents=True)
        if d is not young:
            os.utime(d, (old, old))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # (temp_root reads it each run)
    fd = os.open(live, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as a running bench_diff.py holds it
        work, lock = bench_diff.work_folder()
    finally:
        os.close(fd)
    try:
        assert sorted(os.listdir(tmp_path)) == sorted(p.name for p in (live, young, mine, work))
        probe = os.open(work, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with pytest.raises(BlockingIOError):  # (held by this run)
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(probe)
    finally:
        os.close(lock)


def _without_read_capabilities(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: permissions are not checked")
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner,-fsetid",
            *cmd]


def test_an_unreadable_model_folder_in_out_is_one_line(tmp_path):
    """The run's own model folder ``OUT/w1`` unreadable (mode 000): a PermissionError
    traceback from make_pair (review 53r); one line naming the row, what cannot be used and
    why, status 1, nothing left in --out but what was there."""
    out = tmp_path / "X"
    (out / "w1").mkdir(parents=True)
    (out / "w1").chmod(0)
    cmd = _without_read_capabilities([sys.executable, str(TOOL), "--only", "w1", "--out",
                                      str(out)])
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    finally:
        (out / "w1").chmod(0o700)
    assert res.returncode == 1, res.stderr
    assert res.stderr.splitlines() == [
        f"w1: cannot use what is in --out: Permission denied ({out / 'w1' / 'A'})"]
    assert os.listdir(out) == ["w1"] and os.listdir(out / "w1") == []


def test_an_unreadable_folder_in_out_is_passed_over(tmp_path):
    """A folder in ``--out`` the user cannot read (a mount root's ``lost+found``, mode 000):
    the cleanup of a killed run's siblings listed every subfolder of ``--out`` and stopped
    the run with a PermissionError traceback (review 53m); it lists only its own model
    folders, and passes over one it cannot list.  Run without the capabilities that let
    root read anything, where root."""
    out = tmp_path / "X"
    (out / "private").mkdir(parents=True)
    (out / "private").chmod(0)
    cmd = [sys.executable, str(TOOL), "--only", "w1", "--out", str(out)]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: permissions are not checked")
        cmd = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner,-fsetid",
               *cmd]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    finally:
        (out / "private").chmod(0o700)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1].split()[-2:] == ["2", "difference(s)"]
    assert "Traceback" not in res.stderr
    assert os.listdir(out) == ["private"]


def test_remove_partial_removes_only_its_own_names(tmp_path):
    """What a killed run left (``.NAME.bench-diff-tmp-PID-HEX`` in ``--out`` and in a model's
    folder) is removed; the same shape in a folder that is no model's name, and other names
    in a model's folder, are not looked at."""
    out = tmp_path / "out"
    left = [out / ".w1.neff.bench-diff-tmp-12-0123abcd",
            out / "w1" / ".A.bench-diff-tmp-12-89abcdef",
            out / "2x3" / ".last.bench-diff-tmp-7-deadbeef"]
    kept = [out / "notes" / ".A.bench-diff-tmp-12-89abcdef", out / "w1" / "A" / "manifest.json",
            out / "w1x" / ".A.bench-diff-tmp-1-00000000", out / "w1" / ".A.bench-diff-tmp-x-1"]
    for p in left + kept:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("x")
    assert sorted(bench_diff.remove_partial(out)) == sorted(left)
    assert all(p.exists() for p in kept) and not any(p.exists() for p in left)


#: A process that copies a file or folder (argv: source, destination) as bench_diff.py did
#: before 2026-12-07 across file systems, into the place itself, and SIGKILLs itself half
#: way: a file after half its bytes, a folder after its first file
_KILLED_OLD_COPY = r"""
import os, shutil, signal, sys
src, dst = sys.argv[1], sys.argv[2]
if os.path.isdir(src):
    copied = []
    def copy(s, d):
        if copied:
            os.kill(os.getpid(), signal.SIGKILL)
        copied.append(shutil.copy2(s, d))
    shutil.copytree(src, dst, copy_function=copy)
else:
    data = open(src, "rb").read()
    with open(dst, "wb") as fh:
        fh.write(data[:len(data) // 2])
        fh.flush()
        os.kill(os.getpid(), signal.SIGKILL)
"""


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*")
            if p.is_file()}


def test_a_half_written_model_a_and_b_of_an_older_run_are_made_again(tmp_path):
    """A model, an A and a B that a run from before 2026-12-07 left half written (it copied
    across file systems into their places, and was SIGKILLed: here a process doing just
    that) are not reused: the model is taken only where its header's size and MD5 are its
    payload's, A and B only where marked whole (``.NAME.bench-diff-whole``, made once each
    is in place); each is made again, a note naming it on stderr, and the count is a whole
    run's (the Left paragraph of the fifty-third session: such an A was taken, the run
    failing or blaming B)."""
    whole, out, tmp = tmp_path / "whole", tmp_path / "diff", tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, str(TOOL), "--only", "w1", "--out", str(whole),
                          "--keep"], capture_output=True, text=True, cwd=tmp_path, env=env,
                         timeout=300)
    assert (res.returncode, res.stderr) == (0, ""), res.stderr
    (out / "w1").mkdir(parents=True)
    for name in ("w1.neff", "w1/A", "w1/last"):
        killed = subprocess.run([sys.executable, "-c", _KILLED_OLD_COPY, str(whole / name),
                                 str(out / name)], capture_output=True, timeout=60)
        assert killed.returncode == -9
    assert (out / "w1.neff").stat().st_size < (whole / "w1.neff").stat().st_size
    assert len(_files(out / "w1" / "A")) == 1 and len(_files(out / "w1" / "last")) == 1
    res = subprocess.run([sys.executable, str(TOOL), "--only", "w1", "--out", str(out),
                          "--keep"], capture_output=True, text=True, cwd=tmp_path, env=env,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stderr.splitlines() == [
        f"bench_diff.py: {out / 'w1' / 'A'}: not marked whole (an earlier run's, maybe half "
        "written); made again",
        f"bench_diff.py: {out / 'w1.neff'}: not whole (its header's size or MD5 is not its "
        "payload's); made anew",
        f"bench_diff.py: {out / 'w1' / 'last'}: not marked whole (an earlier run's, maybe half "
        "written); made again"]
    # (the header's hash and the last instruction of the one 1 MiB member, as a whole run)
    assert res.stdout.splitlines()[-1].split()[-2:] == ["2", "difference(s)"]
    assert (out / "w1.neff").read_bytes() == (whole / "w1.neff").read_bytes()
    for name in ("A", "last"):
        assert _files(out / "w1" / name) == _files(whole / "w1" / name)
    assert sorted(os.listdir(out / "w1")) == sorted(os.listdir(whole / "w1"))
    # (marked now: the next run takes all three, says nothing)
    res = subprocess.run([sys.executable, str(TOOL), "--only", "w1", "--out", str(out),
                          "--keep"], capture_output=True, text=True, cwd=tmp_path, env=env,
                         timeout=300)
    assert (res.returncode, res.stderr) == (0, "")


#: A bench_read.py run that, while it holds ``--out`` (at its first measurement), starts a
#: bench_diff.py run given the same ``--out`` (argv: the benchmarks folder, bench_diff.py,
#: then bench_read.py's arguments) and prints how it ended
_READ_WHILE_DIFF = r"""
import subprocess, sys
sys.path.insert(0, sys.argv[1])
import bench_read
real, tool = bench_read.measure, sys.argv[2]
def measure(what, path):
    if what == "gunzip":
        other = subprocess.run([sys.executable, tool, "--only", "w1", "--out", str(path.parent)],
                               capture_output=True, text=True)
        print("OTHER", other.returncode, other.stderr.strip(), flush=True)
    return real(what, path)
bench_read.measure = measure
sys.argv = ["bench_read.py", *sys.argv[3:]]
bench_read.main()
"""


def test_bench_read_and_bench_diff_on_one_out_take_turns(tmp_path):
    """bench_read.py holds ``--out``'s lock while it runs, the lock bench_diff.py holds: a
    bench_diff.py run given the same ``--out`` meanwhile is refused, one line, status 2,
    and the folder holds bench_read.py's input alone (until 2026-12-07 bench_read.py took
    no lock: the two wrote the same ``w1.neff``, and each removed at its end, as its own,
    what the other moved in meanwhile)."""
    out = tmp_path / "shared"
    res = subprocess.run([sys.executable, "-c", _READ_WHILE_DIFF, str(TOOL.parent), str(TOOL),
                          "--only", "w1", "--out", str(out), "--keep"], capture_output=True,
                         text=True, cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                         timeout=300)
    assert res.returncode == 0, res.stderr
    (other,) = [line for line in res.stdout.splitlines() if line.startswith("OTHER ")]
    assert other == (f"OTHER 2 bench_diff.py: error: --out {out}: in use by another "
                     "bench_diff.py or bench_read.py run (it holds the folder's lock); give "
                     "each run its own --out")
    assert os.listdir(out) == ["w1.neff"]


#: A benchmark script run where every ``flock`` is refused, as on a file system without
#: locks (NFS without its lock manager: ENOLCK); argv: the script, then its arguments
_NO_LOCKS = r"""
import errno, fcntl, os, runpy, sys
def flock(fd, op):
    raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))
fcntl.flock = flock
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.parametrize("script", ["bench_diff.py", "bench_read.py"])
@pytest.mark.parametrize("there", [False, True])
def test_an_out_whose_file_system_takes_no_locks_is_refused(tmp_path, script, there):
    """``--out`` on a file system that refuses ``flock``: one line, status 2, before
    anything is written, a folder the run made removed again (until 2026-12-07 bench_diff.py
    went on unlocked, so runs sharing the folder were not kept apart, and bench_read.py
    took no lock at all)."""
    out, tmp = tmp_path / "out", tmp_path / "tmp"
    tmp.mkdir()
    if there:
        out.mkdir()
        (out / "mine.txt").write_text("kept")
    res = subprocess.run([sys.executable, "-c", _NO_LOCKS, str(TOOL.parent / script), "--only",
                          "w1", "--out", str(out)], capture_output=True, text=True,
                         cwd=tmp_path, env=dict(os.environ, TMPDIR=str(tmp),
                                                PYTHONPATH=str(ROOT)), timeout=300)
    assert (res.returncode, res.stdout, res.stderr) == (
        2, "", f"{script}: error: --out {out}: its file system takes no locks (flock: No "
               "locks available), so another run given the same --out could not be kept "
               "out; give an --out on a file system that takes them (a local one)\n")
    assert (_tree(out) == ["mine.txt"]) if there else not out.exists()
    assert os.listdir(tmp) == []

@pytest.mark.parametrize("rows, says", [
    # lower reads a member of at most 2 GiB (MAX_MEMBER_BYTES)
    ("w2049", "model 'w2049': a member of 2,049 MiB is more than lower reads (at most 2048 "
              "MiB a member)"),
    # tar's 11 octal digits end at 8 GiB: a traceback (overflow in number field) before
    ("w8192", "model 'w8192': a member of 8,192 MiB is more than lower reads (at most 2048 "
              "MiB a member)"),
    # and a tar stream of at most 4 GiB (MAX_TOTAL_BYTES): two 2048 MiB members and their
    # headers are over it, two of 2047 MiB are not
    ("w1,2x2048", "model '2x2048': 2 members of 2,048 MiB are more than lower reads (a tar "
                  "stream of at most 4 GiB: N at most 2,047 for K = 2)"),
    # 4096 members of 1 MiB: 4 GiB of data and 4096 headers more
    ("4096x1", "model '4096x1': 4,096 members of 1 MiB are more than lower reads (a tar "
               "stream of at most 4 GiB: K too large)"),
    ("", "no row named (leave --only out for the default rows)"),
    (" ", "no row named (leave --only out for the default rows)"),
])
def test_a_model_lower_cannot_read_is_refused_before_anything_is_written(tmp_path, rows, says):
    """Review 54f: ``--only w8192`` ended in tarfile's ``ValueError: overflow in number
    field``, a model larger than lower reads was written whole first, and ``--only ''`` ran
    the default rows."""
    from nrtrewrite.neff.container import MAX_MEMBER_BYTES, MAX_TOTAL_BYTES

    # (an --out whose parent is missing: refused too, after --only, so a run that took
    # the selection would stop there before writing anything)
    out = tmp_path / "missing" / "diff"
    res = run("--only", rows, "--out", str(out))
    assert res.returncode == 2 and res.stdout == "" and "Traceback" not in res.stderr
    assert res.stderr.splitlines()[-1] == f"bench_diff.py: error: --only: {says}"
    assert not out.exists()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_diff
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    assert (bench_diff.MEMBER_LIMIT, bench_diff.STREAM_LIMIT) == (MAX_MEMBER_BYTES,
                                                                  MAX_TOTAL_BYTES)
    for fits in ("w2048", "2x2047", "4000x1"):
        bench_diff.check_row(fits)
