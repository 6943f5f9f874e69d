"""The developer scripts that make temporary folders (``make soak``'s fuzz/soak_models.py,
``make bench``'s benchmarks/run.py) where Python finds no folder it can write in: the one
line ``simulate MODEL.neff`` and ``nrtrewrite.golden`` print (docs/SIMULATOR.md §1, the
folder tried first and every folder tried), under the script's name, status 2; until
2026-12-06 each died with a traceback (left by session 48)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"
SOAK = ROOT / "fuzz" / "soak_models.py"
BENCH = ROOT / "benchmarks" / "run.py"

#: runs SCRIPT ARGS... as ``python SCRIPT`` does, in a Python that finds no folder it can
#: write temporary files in: the folders ``tempfile`` tries are the two named in
#: ``NOTMP_TRIED`` (neither there), as in test_write_errors' ``_no_usable_temporary_folder``
_DRIVER = """
import os, runpy, sys, tempfile
tempfile._candidate_tempdir_list = lambda: os.environ["NOTMP_TRIED"].split(os.pathsep)
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(sys.argv[0]))  # (as python SCRIPT puts its folder first)
if os.environ.get("NOTMP_NO_PROCESSES"):  # (a run gone on fails here, writing nothing)
    import subprocess
    def _refused(*args, **kwargs):
        raise RuntimeError("went on to start a process")
    subprocess.Popen = _refused
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def run_without_temp(tmp_path: Path, script: Path, *args,
                     **extra: str) -> tuple[subprocess.CompletedProcess, str]:
    """``script ARGS`` with TMPDIR a folder that is not there and no other to fall back on;
    the line expected (the folder tried first, then each folder tried, TMPDIR's named)."""
    gone, none = str(tmp_path / "gone"), str(tmp_path / "none")
    env = {k: v for k, v in os.environ.items() if k not in ("TMPDIR", "TEMP", "TMP")}
    env.update(TMPDIR=gone, NOTMP_TRIED=os.pathsep.join([gone, none]),
               PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1", **extra)
    proc = subprocess.run([sys.executable, "-c", _DRIVER, str(script), *map(str, args)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    line = (f"{gone}: cannot make a temporary folder to lower the model into: none of the "
            f"folders tried can be written: {gone} (TMPDIR), {none}")
    return proc, line


@pytest.mark.parametrize("args", [["--count", "1"], ["--replay", "3"]])
def test_soak_with_no_usable_temporary_folder_is_one_line(tmp_path, args):
    log = tmp_path / "failures.jsonl"
    log_args = ["--log", log] if "--count" in args else []
    proc, line = run_without_temp(tmp_path, SOAK, *args, *log_args)
    assert proc.returncode == 2
    assert (proc.stderr, proc.stdout) == (f"soak_models.py: error: {line}\n", "")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("args", [
    ["--quick"],  # the run itself: refused before it builds a model
    ["--worker", "rank", FIX / "ar2.neff", "0", "10", "write"],
    ["--worker", "cli", FIX / "ar2.neff", "0"],
    ["--worker", "all", FIX / "ar2.neff", "1"]])
def test_bench_with_no_usable_temporary_folder_is_one_line(tmp_path, args):
    # (the run itself starts no process before its check: one that goes on fails at once
    # rather than build its models and measure in the /tmp its workers fall back on)
    extra = {"NOTMP_NO_PROCESSES": "1"} if args == ["--quick"] else {}
    proc, line = run_without_temp(tmp_path, BENCH, *args, **extra)
    assert (proc.returncode, proc.stderr, proc.stdout) == (2, f"run.py: error: {line}\n", "")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_workers_refusal_is_the_benchs_own_line(tmp_path, monkeypatch, capsys):
    """A measurement's process that cannot make its scratch folder (one that fails once the
    run has found one: a race, a full disk) refuses in one line: the run passes that line
    on, status 2, not a traceback of its output."""
    sys.path.insert(0, str(BENCH.parent))
    try:
        import run  # benchmarks/run.py
    finally:
        sys.path.remove(str(BENCH.parent))
    line = "run.py: error: /t/x: cannot make a temporary folder to lower the model into: full"
    worker = tmp_path / "worker.py"
    worker.write_text(f"import sys\nsys.stderr.write({line + chr(10)!r})\nsys.exit(2)\n")
    monkeypatch.setattr(run, "__file__", str(worker))
    with pytest.raises(SystemExit) as exc:
        run._sub("rank", "m.neff", "0", "10", "write")
    assert exc.value.code == 2
    assert capsys.readouterr().err == line + "\n"


def test_a_soak_models_folder_that_cannot_be_made_is_one_line(tmp_path, monkeypatch, capsys):
    """Each model's folder inside the run's (a full file system, say): until 2026-12-06 a
    traceback; the same line, naming the folder mkdtemp tried, status 2, nothing logged."""
    import errno
    import tempfile

    sys.path.insert(0, str(SOAK.parent))
    try:
        import soak_models
    finally:
        sys.path.remove(str(SOAK.parent))
    made = tempfile.mkdtemp

    def mkdtemp(suffix=None, prefix=None, dir=None):
        if prefix == "soak-":
            raise OSError(errno.ENOSPC, "No space left on device", f"{dir}/soak-x")
        return made(suffix, prefix, dir)

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # (temp_root reads it each run)
    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    log = tmp_path / "failures.jsonl"
    with pytest.raises(SystemExit) as exc:
        soak_models.main(["--count", "1", "--log", str(log)])
    assert exc.value.code == 2
    out = capsys.readouterr()
    work = out.err.split(": ")[2][:-len("/soak-x")]  # (the run's folder, a random name)
    assert Path(work).parent == tmp_path and Path(work).name.startswith("nrtrewrite-soak-")
    assert (out.out, out.err) == ("", f"soak_models.py: error: {work}/soak-x: cannot make a "
                                      "temporary folder to lower the model into: No space "
                                      "left on device\n")
    assert os.listdir(tmp_path) == []


def _stale_probe(tmpdir: Path) -> Path:
    """The probe file a process SIGKILLed inside ``temp_root``'s probe left in ``tmpdir``
    (test_simulate's ``_KILLED_PROBING``: its PID no running process any more)."""
    import signal

    from test_simulate import _KILLED_PROBING

    proc = subprocess.run([sys.executable, "-c", _KILLED_PROBING, str(tmpdir)],
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    (left,) = tmpdir.iterdir()
    assert left.name.startswith(".nrtrewrite-probe-")
    return left


def test_bench_removes_the_probe_files_a_killed_run_left(tmp_path):
    """Review 56r: benchmarks/run.py finds its scratch folders' place with ``temp_root``,
    whose probe file a run killed while probing leaves, and removed none: only a
    ``simulate`` or ``golden`` there did.  The run removes them as simulate does
    (CLI.md "simulate"), before it builds anything: here it is stopped at its first
    process (the machine's reading), after its temporary folder's check."""
    tmpdir = tmp_path / "t"
    tmpdir.mkdir()
    _stale_probe(tmpdir)
    mine = tmpdir / "nrtbench-abcd1234"  # (a scratch folder's name, a moment old: kept)
    mine.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("TMPDIR", "TEMP", "TMP")}
    env.update(TMPDIR=str(tmpdir), NOTMP_TRIED=str(tmpdir), NOTMP_NO_PROCESSES="1",
               PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run([sys.executable, "-c", _DRIVER, str(BENCH), "--quick"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert "RuntimeError: went on to start a process" in proc.stderr  # (past the check)
    assert [p.name for p in tmpdir.iterdir()] == [mine.name]


def test_soak_removes_the_probe_files_a_killed_run_left(tmp_path, monkeypatch, capsys):
    """The same for ``make soak`` (fuzz/soak_models.py): its run folder is made where
    ``temp_root`` says, and the probe a killed run left there is removed first; the run is
    stopped at its first model's folder (a full disk), after its own folder was made."""
    import errno
    import tempfile

    sys.path.insert(0, str(SOAK.parent))
    try:
        import soak_models
    finally:
        sys.path.remove(str(SOAK.parent))
    made = tempfile.mkdtemp

    def mkdtemp(suffix=None, prefix=None, dir=None):
        if prefix == "soak-":
            raise OSError(errno.ENOSPC, "No space left on device", f"{dir}/soak-x")
        return made(suffix, prefix, dir)

    _stale_probe(tmp_path)
    for name in ("TEMP", "TMP"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    with pytest.raises(SystemExit) as exc:
        soak_models.main(["--count", "1", "--log", str(tmp_path / "log" / "f.jsonl")])
    assert exc.value.code == 2
    assert "soak-x: cannot make a temporary folder" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []  # (the probe removed; the run's folder removed too)


#: a process holding the ``flock`` of the folder argv[1] (as a live run holds its scratch
#: folder's), saying so on stdout, until its stdin closes
_HOLDER = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""


def _left_folders(tmpdir: Path, names: list[str]):
    """In ``tmpdir``: a folder of each of ``names`` a killed run left (an hour old, its lock
    free), one a live run holds (an hour old, locked by a live child process), one made a
    moment ago (its run between ``mkdtemp`` and its lock), all of the first name's shape;
    returns (stale folders, the live one, the young one, the holder)."""
    import time

    old = time.time() - 3600
    stale = [tmpdir / f"{name}{k}b_c3d4e" for k, name in enumerate(names)]
    live, young = tmpdir / f"{names[0]}live0000", tmpdir / f"{names[0]}young000"
    for d in (*stale, live, young):
        (d / "inside").mkdir(parents=True)
        if d != young:
            os.utime(d, (old, old))
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(live)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    return stale, live, young, holder


def test_bench_removes_the_scratch_folders_a_killed_run_left_never_a_live_ones(tmp_path):
    """The fifty-seventh session's "Left": benchmarks/run.py's scratch folders
    (``nrtbench-``, ``nrtbench-cli-``, ``nrtbench-all-`` and mkdtemp's 8 characters) held
    no lock, so one a SIGKILLed measurement left could not be told from a live run's, and
    none was removed.  Each is locked while its measurement runs; the run removes, before it
    builds anything, those an hour old whose lock is free, and keeps the one a live process
    holds and one a moment old (simulate's rule for its own)."""
    tmpdir = tmp_path / "t"
    tmpdir.mkdir()
    stale, live, young, holder = _left_folders(
        tmpdir, ["nrtbench-", "nrtbench-cli-", "nrtbench-all-"])
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("TMPDIR", "TEMP", "TMP")}
        env.update(TMPDIR=str(tmpdir), NOTMP_TRIED=str(tmpdir), NOTMP_NO_PROCESSES="1",
                   PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
        proc = subprocess.run([sys.executable, "-c", _DRIVER, str(BENCH), "--quick"],
                              cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)
        assert "RuntimeError: went on to start a process" in proc.stderr  # (past the check)
        assert sorted(p.name for p in tmpdir.iterdir()) == sorted([live.name, young.name])
        assert (live / "inside").is_dir()
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)


def test_a_bench_scratch_folder_is_locked_while_its_measurement_runs(tmp_path, monkeypatch):
    import fcntl

    sys.path.insert(0, str(BENCH.parent))
    try:
        import run  # benchmarks/run.py
    finally:
        sys.path.remove(str(BENCH.parent))
    for name in ("TEMP", "TMP"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    tmp = run.scratch_folder("nrtbench-")
    assert tmp.parent == tmp_path and tmp.name.startswith("nrtbench-")
    fd = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(BlockingIOError):  # (held by this process)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)
        for lock in run._SCRATCH_LOCKS:
            os.close(lock)
        run._SCRATCH_LOCKS.clear()


def test_soak_removes_the_folders_a_killed_run_left_never_a_live_ones(
        tmp_path, monkeypatch, capsys):
    """The same for ``make soak`` (fuzz/soak_models.py, ``nrtrewrite-soak-XXXXXXXX``): its
    folder is locked while the run uses it (seen as the first model's folder is made), and
    the run removes a killed run's first, keeping a live run's and a young one."""
    import errno
    import fcntl
    import tempfile

    sys.path.insert(0, str(SOAK.parent))
    try:
        import soak_models
    finally:
        sys.path.remove(str(SOAK.parent))
    made, locked = tempfile.mkdtemp, []

    def mkdtemp(suffix=None, prefix=None, dir=None):
        if prefix == "soak-":
            fd = os.open(dir, os.O_RDONLY | os.O_DIRECTORY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                locked.append(False)
            except BlockingIOError:
                locked.append(True)
            finally:
                os.close(fd)
            raise OSError(errno.ENOSPC, "No space left on device", f"{dir}/soak-x")
        return made(suffix, prefix, dir)

    (stale,), live, young, holder = _left_folders(tmp_path, ["nrtrewrite-soak-"])
    try:
        for name in ("TEMP", "TMP"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("TMPDIR", str(tmp_path))
        monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
        with pytest.raises(SystemExit) as exc:
            soak_models.main(["--count", "1", "--log", str(tmp_path / "log" / "f.jsonl")])
        assert exc.value.code == 2
        assert "soak-x: cannot make a temporary folder" in capsys.readouterr().err
        assert locked == [True]
        assert sorted(os.listdir(tmp_path)) == sorted([live.name, young.name])
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
