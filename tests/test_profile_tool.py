"""benchmarks/profile_rank.py (``make profile``): profiles one rank's lowering of a model with
the standard library's profiler (pyinstrument when installed, line_profiler on request), and
names a missing model in one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "benchmarks" / "profile_rank.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_lower_profile_names_the_stages_and_the_lowering():
    res = run(str(ROOT / "fixtures" / "mix8.neff"), "--rank", "3", "--tool", "cprofile",
              "--top", "10")
    assert res.returncode == 0, res.stderr
    head = res.stdout.splitlines()
    assert head[0] == "mix8.neff rank 3, lower, cprofile:"
    for stage in ("read", "plan (select, prepare)", "lower_rank", "compose", "emit",
                  "serialize", "records"):
        assert any(line.strip().startswith(stage + ":") for line in head[1:9]), stage
    assert "by tottime" in res.stdout and "by cumulative" in res.stdout
    # the profiled call: first by cumulative time whatever the machine's speed (the emitter's
    # own functions rank by their time, which varies: emit_entries fell out of a top 10)
    assert "(lower_rank)" in res.stdout.split("by cumulative")[1]


def test_plan_profile_and_warm_run():
    res = run(str(ROOT / "fixtures" / "groups.neff"), "--what", "plan", "--tool", "cprofile",
              "--warm")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("groups.neff, plan, cprofile (warm):")
    assert "plan_lowering" in res.stdout


def test_line_profile_of_the_emitter():
    pytest.importorskip("line_profiler")
    res = run(str(ROOT / "fixtures" / "ar2.neff"), "--tool", "lines")
    assert res.returncode == 0, res.stderr
    assert "Function: emit_entries" in res.stdout


@pytest.mark.parametrize("model, says", [("missing.neff", "missing.neff: no such file"),
                                         ("no_such_model", "no such model")])
def test_a_missing_model_is_one_line(model, says):
    res = run(model)
    assert res.returncode != 0 and res.stdout == ""
    assert says in res.stderr and res.stderr.count("\n") == 1
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("name, ranks, size", [("size_x1", 64, 64 << 20),
                                               ("ranks_8", 8, 8 * (32 << 20))])
def test_a_sweep_model_is_built_when_missing(tmp_path, monkeypatch, name, ranks, size):
    """Before, ``profile_rank.py size_x1`` (docs/PERFORMANCE.md's profile block) refused: the
    sweep models came from ``make bench`` only.  Built as make bench's full run builds them
    (benchmarks/run.py: size_x{m} is 64 ranks of 64 MiB x m, ranks_{r} r ranks of 32 MiB x r)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import models
    import profile_rank

    from nrtrewrite.neff.assembler import assemble_spec

    monkeypatch.setattr(models, "OUT", tmp_path)
    path = profile_rank.model_path(name)
    assert path == tmp_path / f"{name}.neff"
    assert path.read_bytes() == assemble_spec(models.sweep_spec(ranks, size), source=name)


def _make_n_profile(tool: str) -> str:
    res = subprocess.run(["make", "--no-print-directory", "-n", "profile", f"TOOL={tool}",
                          f"PY={sys.executable}"], capture_output=True, text=True, cwd=ROOT,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    return res.stdout


@pytest.mark.parametrize("tool, installs", [("cprofile", []), ("lines", ["line_profiler"]),
                                            ("pyinstrument", ["pyinstrument"]),
                                            ("", ["pyinstrument"])])
def test_make_profile_installs_only_the_tool_it_runs(tool, installs):
    """Before, ``TOOL=cprofile`` (the standard library's) pip-installed pyinstrument too.
    ``make -n`` prints the recipe without running it."""
    recipe = _make_n_profile(tool).splitlines()
    pips = [line.split("pip install -q ")[1].split()[0] for line in recipe
            if "pip install -q " in line]
    assert pips == installs
    assert recipe[-1].split()[1:] == ["benchmarks/profile_rank.py", "large64", "--rank", "0",
                                      *(["--tool", tool] if tool else [])]


def test_the_writer_thread_is_profiled_and_measured():
    """Review 54f: cProfile (and pyinstrument) profiled the main thread only, so the writer
    thread's SHA-256 never appeared.  node64's rank 0 has arrays of 256 KiB and more, which
    start the writer thread (``RankBuilder.THREAD_BYTES``): its own profile follows the main
    thread's, with the hash updates in it, and its CPU time is in the header."""
    res = run(str(ROOT / "fixtures" / "node64.neff"), "--rank", "0", "--tool", "cprofile",
              "--top", "40")
    assert res.returncode == 0, res.stderr
    head, _, rest = res.stdout.partition("\n--- by tottime ---")
    assert "  writer thread nrtrewrite-sink, CPU: " in head
    assert "    of it in the sink (records discarded here), CPU: " in head
    main, _, thread = rest.partition("\n--- thread nrtrewrite-sink, by tottime ---\n")
    assert "(_timed_update)" in thread and "'update' of '_hashlib.HASH' objects" in thread
    assert "(lower_rank)" in main and "(lower_rank)" not in thread


def test_the_sink_figure_is_the_writer_threads_cpu(monkeypatch):
    """Review 54o: "of it in the sink", printed under the writer thread's CPU time, was wall
    time (``perf_counter``), of the main thread's calls too.  Now the writer thread's CPU
    time in the sink: with fabricated clocks, the thread's CPU reads 1.0 -> 1.25 around its
    first array and 2.0 -> 2.5 around its second (0.75 s in the sink, of 2.5 s as of its
    last array), while the wall clock and a main-thread call add nothing."""
    import threading
    import time

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import profile_rank

    cpu = iter([1.0, 1.25, 2.0, 2.5])
    wall = iter(range(0, 1000, 100))
    monkeypatch.setattr(time, "thread_time", lambda: next(cpu))
    monkeypatch.setattr(time, "perf_counter", lambda: float(next(wall)))
    w = profile_rank.Writer()
    w.sink("main.bin", None)  # (the main thread: a rank's first arrays, hashed inline)
    t = threading.Thread(target=lambda: [w.sink("a.bin", None), w.sink("b.bin", None)],
                         name="nrtrewrite-sink")
    t.start()
    t.join()
    assert (w.thread, w.cpu_s, w.sink_s) == ("nrtrewrite-sink", 2.5, 0.75)


@pytest.mark.parametrize("top", ["0", "-3"])
def test_top_below_one_is_a_usage_error(top):
    """Review 54o: ``--top -3`` was accepted (and showed no function)."""
    res = run(str(ROOT / "fixtures" / "ar2.neff"), "--top", top)
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr.splitlines()[-1] == (f"profile_rank.py: error: argument --top: {top}: at "
                                           "least 1 function is shown")
