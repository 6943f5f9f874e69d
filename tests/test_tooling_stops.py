"""The developer tools stopped by a signal leave nothing behind, as Ctrl-C always did:
``benchmarks/run.py``'s scratch folders (/tmp/nrtbench-*), ``python -m nrtrewrite.golden``'s
temporary folder (/tmp/nrtrewrite-golden-*, a partial output in it), what
``benchmarks/bench_read.py`` wrote into ``--out``.  Each tool runs in a subprocess whose
code sends itself the signal at a known step (no timing), with TMPDIR a folder of the test's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
FIX = ROOT / "fixtures"
sys.path.insert(0, str(BENCH))

import outdir  # noqa: E402


def _default_stops() -> None:
    """In the child: the stop signals at their default handling, as in a shell (the suite
    may run with SIGHUP ignored: under nohup, in some CI runners, where an ignored SIGHUP
    stays ignored by design and the SIGHUP cases would run to completion)."""
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)


def run_driver(code: str, tmpdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          cwd=ROOT, env=dict(os.environ, TMPDIR=str(tmpdir)), timeout=120,
                          preexec_fn=_default_stops)


#: run.py's measure_rank with the SIGTERM sent from the sink, on the lowering's writer
#: thread, once the rank's first file has records in it (files open in the scratch folder)
RUN_RANK = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
import run
import nrtrewrite.lower as L
real = L.lower_rank
def lower_rank(plan, rank, sink, **kw):
    def stopping(name, arr):
        sink(name, arr)
        os.kill(os.getpid(), signal.SIGTERM)
    return real(plan, rank, sink=stopping, **kw)
L.lower_rank = lower_rank
run.stop_cleanly()  # (as run.py's main installs it, in the driver and in every worker)
run.measure_rank(sys.argv[2], 0, 0, True)
print("not stopped")
"""


def test_sigterm_during_a_run_measurement_removes_its_scratch_folder(tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    res = run_driver(RUN_RANK, tmpdir, str(BENCH), str(FIX / "mix8.neff"))
    assert res.returncode == 128 + signal.SIGTERM, res.stderr
    assert res.stdout == ""
    assert list(tmpdir.iterdir()) == []  # (before: nrtbench-XXXX with the rank's files)


#: golden's main with the signal sent once the output is lowered into its temporary folder
GOLDEN = r"""
import os, signal, sys
import nrtrewrite.golden as g
real = g.pack
def pack(folder):
    assert (folder / "manifest.json").is_file()  # the lowered output, in the temporary folder
    os.kill(os.getpid(), getattr(signal, sys.argv[3]))
    return real(folder)
g.pack = pack
g.main([sys.argv[1], sys.argv[2]])
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_stopped_golden_leaves_no_temporary_folder_and_no_golden(tmp_path, sig):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    golden = tmp_path / "g.tar.gz"
    res = run_driver(GOLDEN, tmpdir, str(FIX / "ar2.neff"), str(golden), sig)
    assert res.returncode == 128 + getattr(signal, sig)
    assert res.stderr == f"nrtrewrite.golden: stopped by {sig}: nothing written\n"
    assert list(tmpdir.iterdir()) == [] and sorted(os.listdir(tmp_path)) == ["tmp"]


#: bench_read's main with SIGTERM sent as the first input is read back (it is written)
BENCH_READ = r"""
import os, signal, sys
sys.path.insert(0, sys.argv[1])
import bench_read
def measure(what, path):
    assert path.is_file()
    os.kill(os.getpid(), signal.SIGTERM)
bench_read.measure = measure
sys.argv = ["bench_read.py", *sys.argv[2:]]
bench_read.main()
"""


@pytest.mark.parametrize("existing", [False, True])
def test_sigterm_during_bench_read_removes_what_it_wrote(tmp_path, existing):
    out = tmp_path / "read"
    if existing:  # what was there before stays
        out.mkdir()
        (out / "mine.txt").write_text("keep")
    res = run_driver(BENCH_READ, tmp_path, str(BENCH), "--only", "g1,g2", "--out", str(out))
    assert res.returncode == 128 + signal.SIGTERM, res.stderr
    if existing:
        assert sorted(os.listdir(out)) == ["mine.txt"]
        assert (out / "mine.txt").read_text() == "keep"
    else:
        assert not out.exists()


@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit])
def test_a_stopped_write_leaves_no_tmp_file(tmp_path, monkeypatch, stop):
    """A write cut short (here: the rename) removes its PATH.tmp, which a later run would
    count among the entries that were there before and never remove."""
    def rename(self, target):
        raise stop()

    monkeypatch.setattr(Path, "replace", rename)
    with pytest.raises(stop):
        outdir.write_new(tmp_path / "w1.neff", b"x" * 100)
    assert os.listdir(tmp_path) == []


#: bench_read's main, ``measure`` wrapped: argv[2] the stop, argv[3] what each measurement
#: does first: ``drop`` the stop sent inside a finalizer (Python prints the handler's
#: exception, "Exception ignored in ...", and drops it), ``drop+stop`` that and the stop
#: again at once, as a second stop from outside; ``hook`` the stop sent while the
#: unraisable hook prints another finalizer's error (a handler that raised there would be
#: printed and dropped too; the hook in place before stop_cleanly, Python's otherwise).
#: Each measurement prints its name as it ends.
BENCH_READ_DROPPED = r"""
import os, signal, sys, threading, time
sys.path.insert(0, sys.argv[1])
import bench_read
SIG = getattr(signal, sys.argv[2])
HOW = sys.argv[3]
class Dropped:
    def __del__(self):
        signal.pthread_kill(threading.get_ident(), SIG)
        time.sleep(0.02)
class Failing:
    def __del__(self):
        raise ValueError("another finalizer's error")
def before(info):  # the hook stop_cleanly finds in place, printing another error
    print(f"printed: {info.exc_value}", file=sys.stderr)
    signal.pthread_kill(threading.get_ident(), SIG)
    time.sleep(0.02)
if HOW == "hook":
    sys.unraisablehook = before
def measure(what, path):
    if HOW == "hook":
        Failing()
    else:
        Dropped()
    if HOW == "drop+stop":
        os.kill(os.getpid(), SIG)
    print(f"measured {what} {path.name}", flush=True)
    return 1, 0.0, 0.0
bench_read.measure = measure
sys.argv = ["bench_read.py", *sys.argv[4:]]
bench_read.main()
print("ran to its end", flush=True)
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
@pytest.mark.parametrize("how", ["drop", "hook"])
def test_a_stop_python_dropped_is_raised_at_the_next_step(tmp_path, sig, how):
    """A stop whose handler ran inside a finalizer (multiprocessing's
    ``_ConnectionBase.__del__`` is one) was printed as an ignored exception and dropped: the
    benchmark ran on to its end, exit 0.  Now it is not printed, and it is raised as the next
    input begins (``outdir.raise_lost_stop``): g1's two measurements end and its row is
    printed, g2's never begin, and what the run wrote is removed."""
    out = tmp_path / "read"
    res = run_driver(BENCH_READ_DROPPED, tmp_path, str(BENCH), sig, how,
                     "--only", "g1,g2", "--out", str(out))
    assert res.returncode == 128 + getattr(signal, sig), res.stderr
    _, gunzip, read, row, *rest = res.stdout.splitlines()  # (the header first)
    assert (gunzip, read, row.split()[0], rest) == (
        "measured gunzip g1.neff", "measured read g1.neff", "g1", [])
    other = "printed: another finalizer's error\n"
    assert res.stderr == (other * 2 if how == "hook" else "")
    assert not out.exists()


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_a_stop_after_one_python_dropped_is_not_ignored(tmp_path, sig):
    """A second stop after one Python dropped: it was ignored ("while the first one's
    cleanup runs", though none ran), so that only SIGKILL ended the benchmark.  Now it
    stops the run where it lands: no measurement ends."""
    out = tmp_path / "read"
    res = run_driver(BENCH_READ_DROPPED, tmp_path, str(BENCH), sig, "drop+stop",
                     "--only", "g1,g2", "--out", str(out))
    assert res.returncode == 128 + getattr(signal, sig), res.stderr
    assert res.stdout.splitlines()[1:] == []
    assert res.stderr == ""
    assert not out.exists()


#: run.py's driver: a stop Python dropped before a measurement (argv[2] the stop), then the
#: measurement of the machine, in a fresh process (``_sub``)
RUN_DROPPED = r"""
import signal, sys, threading, time
sys.path.insert(0, sys.argv[1])
import run
SIG = getattr(signal, sys.argv[2])
class Dropped:
    def __del__(self):
        signal.pthread_kill(threading.get_ident(), SIG)
        time.sleep(0.02)
run.stop_cleanly()
Dropped()
print("dropped", flush=True)
run._sub("machine")
print("measured", flush=True)
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP", "SIGINT"])
def test_a_stop_python_dropped_stops_run_py_before_its_next_measurement(tmp_path, sig):
    """run.py's driver: the stop Python dropped is raised before the next measurement's
    process starts (``_sub``), not printed; it ran every measurement, exit 0.  Ctrl-C ends
    it as an uncaught KeyboardInterrupt does: its traceback, then Python's own SIGINT."""
    res = run_driver(RUN_DROPPED, tmp_path, str(BENCH), sig)
    assert res.stdout == "dropped\n"
    if sig == "SIGINT":
        assert res.returncode == -signal.SIGINT
        assert res.stderr.startswith("Traceback (most recent call last):\n")
        assert res.stderr.endswith("\nKeyboardInterrupt\n") and "ignored" not in res.stderr
    else:
        assert (res.returncode, res.stderr) == (128 + getattr(signal, sig), "")
