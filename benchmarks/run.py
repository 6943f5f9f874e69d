"""`make bench`: lowering speed, measured side by side (docs/PERFORMANCE.md).

Every figure is taken in the same run, and the ones that matter are ratios (this machine is
shared and noisy):

* records/s and artifact bytes/s of ``lower --rank R`` on a generated large model
  (1,000 collectives, sizes log-uniform 4 KiB..256 MiB, all-reduce / all-gather /
  reduce-scatter in bf16 and fp8) on 64 ranks (one node) and 128 ranks (two nodes): the
  whole command (the CLI's ``main`` in a fresh process), and the lowering alone with the
  time of each stage, the records streamed to the rank's files as the CLI does; the
  median of 3 fresh processes of each;
* the ratio to the physical bound: artifact bytes/s over numpy's copy bandwidth for a
  buffer of the same size, measured in each run's process after its run, into a reused
  (warm) destination (the bound: the best of the model's six runs, :func:`copy_bound`) and
  into a freshly allocated one (first-touch page faults included);
* the ratio to the reference path: the same records built one at a time with the
  construct structs, compiled (judged) and as declared (per file, weighted by the file's
  record count);
* peak RSS (summed over every process of a run, sampled), time per stage (parse, select,
  plan, compose,
  emit, serialize, write), the channels the rank uses;
* all-rank lowering with the process pool vs serial: time, CPU use, byte identity (of
  ``all64``, written); every rank of ``large64`` with the pool into a sink;
* what other processes took of the cores during each measurement;
* scaling: time vs emitted records over message size x1..x64 and ranks 8..128 (sizes large
  enough that records, not per-trigger costs, dominate), fitted on a log-log scale;
* the machine as the run found it (first, in a fresh process): the interpreter's speed, the
  cost of a small numpy call, the copy and SHA-256 rates of a 64 MiB buffer and the load
  average, so that runs on different days can be told apart from changes in the code.

Each measurement runs in a fresh subprocess (clean RSS).  Results go to stdout, to
benchmarks/out/last-run.json, and as the markdown of docs/PERFORMANCE.md's "Latest run"
section to benchmarks/out/last-run.md (benchmarks/report.py), the two replaced together:
each written whole to a temporary file, then renamed into place, the JSON last
(:func:`write_results`).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NoReturn

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from models import MIB, OUT, build, large_spec, sweep_spec  # noqa: E402
from outdir import raise_lost_stop, replace_together, stop_cleanly  # noqa: E402
from profile_rank import check_rank, fail  # noqa: E402
import report  # noqa: E402

#: Records kept per file for the construct reference path.
SAMPLE = 4000
#: Fresh-process runs of each ``lower --rank 0`` measurement (each kind judged on its median;
#: every run's time is printed).
RANK_RUNS = 3
#: Lowerings of rank 0 per scaling-sweep point, in one process (the best is reported).  The
#: small points take 5 - 6 ms, where a shared machine's hiccups weigh most: over four runs of
#: the ring's size sweep, 5 gave exponents 0.848 - 0.877 and 11 gave 0.868 - 0.882.
SWEEP_REPS = 11
#: The scaling exponent's target, 1 +/- 0.15, as its two ends (report.LINEAR, which shows
#: an exponent beside its verdict with the digits that agree with it).
LINEAR = report.LINEAR


# ----------------------------------------------------------------------------------------------
# worker: one measurement in this process

def _maxrss_mb(who: int) -> float:
    """Peak RSS of this process (``RUSAGE_SELF``) or of its largest waited-for child, in MB
    of 10^6 bytes (``ru_maxrss`` is in KiB on Linux), the unit of the artifact sizes."""
    return resource.getrusage(who).ru_maxrss * 1024 / 1e6


def _largest_process_mb() -> float:
    """The largest peak RSS of this process and its waited-for children (MB)."""
    return max(_maxrss_mb(resource.RUSAGE_SELF), _maxrss_mb(resource.RUSAGE_CHILDREN))


def rss_target_mb(artifact_bytes: int) -> float:
    """Issue 8's memory target for a rank of ``artifact_bytes``: 2 x its artifacts + 300 MB."""
    return (2 * artifact_bytes + 300e6) / 1e6


class Probe:
    """The sink of ``lower_rank``: writes each record array to the rank's files (when
    ``files`` is given), times the writes (they run on the lowering's writer thread,
    overlapped with the lowering), keeps the first ``sample`` records of each file."""

    def __init__(self, files, sample: int):
        self.files, self.sample = files, sample
        self.kept: dict[str, list[np.ndarray]] = {}
        self.have: dict[str, int] = {}
        self.write_s = 0.0

    def __call__(self, name: str, arr: np.ndarray) -> None:
        if self.files is not None:
            t0 = time.perf_counter()
            self.files.write(name, arr)
            self.write_s += time.perf_counter() - t0
        have = self.have.get(name, 0)
        if have < self.sample:
            part = arr[:self.sample - have]  # bytes as written (padding included)
            self.kept.setdefault(name, []).append(np.frombuffer(part.tobytes(), arr.dtype))
            self.have[name] = have + min(arr.size, self.sample - have)


def refuse_temp_folder(err: OSError) -> NoReturn:
    """No temporary folder can be made (:func:`nrtrewrite.bundle.temp_root` found none
    usable, or ``mkdtemp`` failed there): the line ``simulate MODEL.neff`` prints
    (:func:`nrtrewrite.bundle.temp_folder_refusal`) as ``run.py: error: ...``, status 2
    (until 2026-12-06 a traceback)."""
    from nrtrewrite.bundle import temp_folder_refusal
    from nrtrewrite.errors import escape_line

    print(f"run.py: error: {escape_line(temp_folder_refusal(err).line())}", file=sys.stderr)
    sys.exit(2)


#: The prefixes of the measurements' scratch folders (``mkdtemp``'s, then 8 characters).
SCRATCH_PREFIXES = ("nrtbench-", "nrtbench-cli-", "nrtbench-all-")

#: The descriptors holding this process's scratch folders' locks, until it ends.
_SCRATCH_LOCKS: list[int] = []


def scratch_folder(prefix: str) -> Path:
    """A measurement's scratch folder, made where ``simulate MODEL.neff`` makes its own
    (:func:`nrtrewrite.bundle.temp_root`), or :func:`refuse_temp_folder`.  Its ``flock`` is
    held until the process ends (:func:`nrtrewrite.bundle.lock_folder`), the mark of a live
    run's folder: the next run removes one a SIGKILLed measurement left
    (:func:`clean_stale_scratch`; until 2026-12-07 no lock told a live one, and none was)."""
    from nrtrewrite.bundle import lock_folder, temp_root

    try:
        tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=temp_root()))
    except OSError as err:  # none usable, or one that fails (a race)
        refuse_temp_folder(err)
    lock = lock_folder(tmp)
    if lock is not None:
        _SCRATCH_LOCKS.append(lock)
    return tmp


def clean_stale_scratch(root: str) -> None:
    """The scratch folders (:data:`SCRATCH_PREFIXES`) and the probe files of ``temp_root``
    that killed runs left in ``root``, removed as ``simulate`` removes its own
    (:func:`nrtrewrite.bundle.clean_stale_run_temps`: this user's, a minute old, the lock
    free; a live measurement holds its folder's)."""
    from nrtrewrite.bundle import clean_stale_run_temps

    for prefix in SCRATCH_PREFIXES:
        clean_stale_run_temps(root, prefix)


def measure_rank(model: str, rank: int, sample: int, write: bool) -> dict:
    """The lowering of one rank with its stages timed: parse, plan, then ``lower_rank`` with
    compose ahead, streaming to the rank's files, as ``lower --rank R`` lowers it; not the
    whole command (no NEFF, no manifests, no rename: :func:`measure_cli` runs that)."""
    from nrtrewrite.bundle import _RankFiles
    from nrtrewrite.emit import formats as F
    from nrtrewrite.limits import check_plan
    from nrtrewrite.lower import LowerOptions, lower_rank, plan_lowering
    from nrtrewrite.neff.reader import read_model
    from nrtrewrite.compose import algorithm
    algorithm.lowerable()  # (the composers: imported on first use since 2026-12-06, not timed)

    tmp = scratch_folder("nrtbench-")
    try:  # (the summed RSS of this process and its compose process, sampled)
        with TreeMemory() as mem:  # (started before the timed part)
            t0 = time.perf_counter()
            data = Path(model).read_bytes()
            m = read_model(model)
            t1 = time.perf_counter()
            check_rank(m, rank, Path(model))  # (a rank outside the world lowers to nothing)
            plan = plan_lowering(m, LowerOptions(),
                                 input_sha256=hashlib.sha256(data).hexdigest())
            check_plan(plan)
            t2 = time.perf_counter()
            files = _RankFiles(tmp) if write else None
            probe = Probe(files, sample)
            # as the CLI lowers one rank with two cores: composing ahead in a forked process
            c2 = os.times()
            out = lower_rank(plan, rank, sink=probe, compose_ahead=True)
            t3 = time.perf_counter()
            c3 = os.times()  # the compose process has been waited for: its time is the
            # children's
            if files is not None:
                files.close(F.ARTIFACTS)
            t4 = time.perf_counter()
            rss_mb = _maxrss_mb(resource.RUSAGE_SELF)
            # the compose-ahead process (forked from this one: shared pages are counted twice;
            # read before the sampler, a child too, is waited for)
            child_rss_mb = _maxrss_mb(resource.RUSAGE_CHILDREN)
    finally:
        shutil.rmtree(tmp)
    summary = out.manifest["files"]
    nbytes = sum(f["bytes"] for f in summary.values())
    records = sum(f["records"] for f in summary.values())
    # lowering: compose, emit and serialize, the records hashed and handed to the files on
    # the writer thread meanwhile (its time in the SHA-256 is "hash", in the file writes
    # "write", both overlapped);
    # "fsync" is the wait for the disk at the end
    lower_s = t3 - t2
    # CPU seconds of the lowering: this process (emitter, writer thread) and the compose
    # process; over the wall time, the cores kept busy
    cpu_s = sum(c3[i] - c2[i] for i in range(4))
    tm = out.timings
    stages = {"parse": t1 - t0, "select": plan.timings["select"],
              "plan": (t2 - t1) - plan.timings["select"],
              "compose": tm["compose"], "compose_wait": tm.get("compose_wait", 0.0),
              "compose_here": tm.get("compose_here", 0.0), "emit": tm["emit"], "serialize": tm["serialize"],
              "hash": tm["hash"], "write": probe.write_s, "fsync": t4 - t3}
    res = {
        "model": Path(model).name, "rank": rank, "records": records, "bytes": nbytes,
        "files": {k: v["bytes"] for k, v in summary.items()},
        "stages": stages, "lower_s": lower_s, "total_s": t4 - t0,
        "lower_cpu_s": cpu_s, "lower_cores_busy": cpu_s / lower_s,
        "records_per_s": records / lower_s, "bytes_per_s": nbytes / lower_s,
        "records_per_s_with_fsync": records / (t4 - t2),
        "bytes_per_s_with_fsync": nbytes / (t4 - t2),
        # judged: the peak of the summed RSS of the process tree, sampled, and at least the
        # largest single process's own peak (a sample can miss a short peak)
        "peak_rss_sum_mb": max(mem.rss_mb, rss_mb, child_rss_mb),
        "peak_pss_sum_mb": mem.pss_mb, "memory_samples": mem.samples,
        # (until 2026-12-07 the judged figure: this process's peak plus its child's)
        "peak_rss_self_plus_child_mb": rss_mb + child_rss_mb, "peak_rss_self_mb": rss_mb,
        "peak_rss_compose_mb": child_rss_mb,
        "rss_target_mb": rss_target_mb(nbytes),
    }
    if sample:
        warm, fresh = copy_bandwidth(nbytes)
        sha = sha256_bandwidth(nbytes)
        res.update({"copy_warm_bytes_per_s": warm, "copy_fresh_bytes_per_s": fresh,
                    "sha256_bytes_per_s": sha,
                    "ratio_to_copy_bound": (nbytes / lower_s) / warm,
                    "ratio_to_fresh_copy": (nbytes / lower_s) / fresh,
                    "ratio_to_sha256": (nbytes / lower_s) / sha})
        ours = lower_s / max(records, 1)
        res["ours_s_per_record"] = ours
        for key, compiled in (("construct", False), ("construct_compiled", True)):
            per_file = construct_seconds(probe.kept, compiled)
            ref = sum(per_file[k] * summary[k]["records"] for k in per_file) / max(
                sum(summary[k]["records"] for k in per_file), 1)
            res.update({f"{key}_s_per_record": ref, f"{key}_per_file": per_file,
                        f"ratio_to_{key}": ref / ours})
    res["channels"] = channels_in_use(out.manifest)
    return res


def measure_cli(model: str, rank: int) -> dict:
    """``nrtrewrite lower MODEL --rank R -o OUT -q`` run whole, in this fresh process, as a
    user runs it, after the imports of the command's modules (timed apart and printed;
    numpy is loaded already, as this script needs it: the console script's cold start
    pays about a second more for the interpreter and every import): reading, planning,
    lowering, the rank's files and manifest, the rewritten NEFF and the top-level manifest
    (its triggers encoded in a forked process), every file fsynced and the folder moved
    into place.  The copy bandwidth is measured afterwards in this process, at the size of
    the rank's artifacts (the model's bound is the best of its runs: :func:`copy_bound`)."""
    c_imp = time.perf_counter()
    import importlib

    import click
    importlib.import_module("nrtrewrite.cli.lower")  # (click imports a command lazily)
    from nrtrewrite.cli import main
    from nrtrewrite.compose import algorithm
    algorithm.lowerable()  # (the composers, imported by the command as it meets their engines)
    import_s = time.perf_counter() - c_imp
    tmp = scratch_folder("nrtbench-cli-")
    try:  # (the summed RSS of this process and its children, sampled)
        with TreeMemory() as mem:  # (started before the timed part)
            c0, t0 = os.times(), time.perf_counter()
            said = io.StringIO()  # (its stderr: -q prints nothing there unless it fails)
            try:
                with contextlib.redirect_stderr(said):
                    main.main(["lower", model, "--rank", str(rank), "-o", str(tmp / "out"),
                               "-q"], prog_name="nrtrewrite", standalone_mode=False)
            except SystemExit as exc:  # (the command's own exit: 0, or its error line)
                if exc.code:
                    # its one line as this script's, which the driver passes on (until
                    # 2026-12-07 `nrtrewrite: error: ...`, which the driver took for a crash)
                    line = said.getvalue().strip().splitlines() or [f"status {exc.code}"]
                    fail(f"nrtrewrite lower: {line[-1].removeprefix('nrtrewrite: error: ')}")
            except click.ClickException as exc:  # (its usage errors: a traceback until
                # 2026-12-07)
                fail(f"nrtrewrite lower: {exc.format_message()}")
            sys.stderr.write(said.getvalue())
            dt = time.perf_counter() - t0
            c1 = os.times()
            rss = _maxrss_mb(resource.RUSAGE_SELF)  # (before the copy's two nbytes buffers)
            child = _maxrss_mb(resource.RUSAGE_CHILDREN)  # (before the sampler is waited for)
    except BaseException:
        shutil.rmtree(tmp)
        raise
    try:
        rdir = tmp / "out" / f"rank-{rank:04d}"
        files = json.loads((rdir / "manifest.json").read_text())["files"]
        written = sum(f.stat().st_size for f in (tmp / "out").rglob("*") if f.is_file())
    finally:
        shutil.rmtree(tmp)
    nbytes = sum(v["bytes"] for v in files.values())
    records = sum(v["records"] for v in files.values())
    cpu = sum(c1[i] - c0[i] for i in range(4))  # this process and its waited-for children
    warm, fresh = copy_bandwidth(nbytes)
    return {"model": Path(model).name, "rank": rank, "records": records, "bytes": nbytes,
            "written_bytes": written, "seconds": dt, "import_s": import_s, "cpu_s": cpu,
            "cores_busy": cpu / dt, "records_per_s": records / dt, "bytes_per_s": nbytes / dt,
            "copy_warm_bytes_per_s": warm, "copy_fresh_bytes_per_s": fresh,
            "ratio_to_copy_bound": nbytes / dt / warm, "ratio_to_fresh_copy": nbytes / dt / fresh,
            # judged: the peak of the summed RSS of the process tree (this process, the
            # compose-ahead and the triggers-manifest forks: three at once), sampled, and at
            # least the largest single process's own peak
            "peak_rss_sum_mb": max(mem.rss_mb, rss, child), "peak_pss_sum_mb": mem.pss_mb,
            "memory_samples": mem.samples,
            # (until 2026-12-07 the judged figure: this process's peak plus its largest child's)
            "peak_rss_self_plus_child_mb": rss + child,
            "peak_rss_self_mb": rss, "peak_rss_children_mb": child,
            "rss_target_mb": rss_target_mb(nbytes)}


def channels_in_use(manifest: dict) -> dict:
    """The channels a rank's SPAD entries use (the rank manifest's ``entries``): all of
    them, and how many entries use how many channels, per algorithm."""
    from nrtrewrite.codes import EncAlgType

    used: set[int] = set()
    per_alg: dict[str, dict[int, int]] = {}
    for e in manifest["entries"]:
        used.update(e["channels"])
        alg = per_alg.setdefault(EncAlgType(e["algo_type"]).name, {})
        alg[len(e["channels"])] = alg.get(len(e["channels"]), 0) + 1
    return {"used": sorted(used), "entries": len(manifest["entries"]),
            "per_algorithm": {a: {str(k): v for k, v in sorted(c.items())}
                              for a, c in sorted(per_alg.items())}}


def measure_sweep(models: list[str], algo: str | None, reps: int = SWEEP_REPS) -> list[dict]:
    """The points of one scaling sweep: for each model the best of ``reps`` lowerings of
    rank 0 in this process (each from a fresh plan; warm: the first run's one-time costs -
    imports, caches, the heap's first page faults - are not per-record costs), records
    discarded after hashing.  The repetitions go round the points (x1, x4, x16, x64, x1,
    ...), so a slow spell of the shared machine falls on every point alike instead of on
    the few that happened to run in it: point by point, one spell bent the slope."""
    from nrtrewrite.lower import LowerOptions, lower_rank, plan_lowering
    from nrtrewrite.neff.reader import read_model

    read = [read_model(m) for m in models]
    for path, m in zip(models, read):
        check_rank(m, 0, Path(path))
    for m in read:  # the warm-up: one-time costs of each model's first lowering
        lower_rank(plan_lowering(m, LowerOptions(algo=algo)), 0, sink=lambda name, arr: None)
    best: list = [None] * len(models)
    cpu = [math.inf] * len(models)
    for _ in range(reps):
        for i, m in enumerate(read):
            plan = plan_lowering(m, LowerOptions(algo=algo))
            c0, t0 = time.process_time(), time.perf_counter()
            out = lower_rank(plan, 0, sink=lambda name, arr: None)
            dt = time.perf_counter() - t0
            c = time.process_time() - c0  # both threads (no compose process)
            if best[i] is None or dt < best[i][0]:
                best[i], cpu[i] = (dt, out, plan), c  # the CPU of the same repetition
    res = []
    for model, (dt, out, plan), c in zip(models, best, cpu):
        res.append({"model": Path(model).name, "lower_s": dt, "cpu_s": c, "stages": out.timings,
                    "records": sum(f["records"] for f in out.manifest["files"].values()),
                    "bytes": sum(f["bytes"] for f in out.manifest["files"].values()),
                    "algorithms": sorted({tp.alg.name for tp in plan.triggers})})
    return res


def _best(fn, reps: int) -> float:
    """The least wall time of ``reps`` calls of ``fn``."""
    best = math.inf
    for _ in range(reps):
        c0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - c0)
    return best


def _python_loop(n: int = 100_000) -> int:
    """A fixed piece of pure-Python work: integer arithmetic, a comparison, a list append."""
    acc, out = 0, []
    for i in range(n):
        acc = (acc * 31 + i) & 0xFFFF
        if acc & 1:
            out.append(acc)
    return len(out)


def _cpu_times() -> list[int] | None:
    """The first line of /proc/stat (Linux: jiffies per state, all cores), or None."""
    try:
        with open("/proc/stat") as f:
            return [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None


def others_busy(seconds: float = 1.0) -> dict:
    """What the other processes do to the cores while this one sleeps for ``seconds``:
    the busy and the stolen share of all cores (/proc/stat; None elsewhere).  The load
    average lags by a minute, so it cannot tell a machine that was busy from one that is."""
    a = _cpu_times()
    time.sleep(seconds)
    b = _cpu_times()
    if a is None or b is None:
        return {"busy": None, "steal": None}
    busy, total, steal = _jiffies(a, b)
    return {"busy": busy / (total or 1), "steal": steal / (total or 1)}


def _jiffies(a: list[int], b: list[int]) -> tuple[int, int, int]:
    """Between two /proc/stat samples: the busy, all and stolen jiffies of all cores
    (user nice system idle iowait irq softirq steal; idle and iowait are not busy)."""
    d = [y - x for x, y in zip(a, b)]
    total = sum(d[:8])
    return total - d[3] - d[4], total, d[7]


def measure_machine() -> dict:
    """The machine as this run finds it: what other processes keep busy (a second's
    sample of /proc/stat, this process asleep), the interpreter's speed (ns per iteration of
    :func:`_python_loop`), a small numpy call (us per ``a + b`` of 1,000 int64: what the
    per-leg and per-trigger work is made of), and the bulk rates (numpy's warm copy and
    hashlib's SHA-256 of a 64 MiB buffer: what the per-record work is bound by).  The two
    kinds of cost move apart from one day to the next on this shared VM, and the size
    sweep's exponent with them (its small points are per-trigger work, its large ones
    bulk work): docs/PERFORMANCE.md "The machine"."""
    busy = others_busy()
    _python_loop()
    loop_ns = _best(_python_loop, 7) / 100_000 * 1e9
    a = np.arange(1000, dtype=np.int64)
    b = a.copy()

    def calls():
        for _ in range(1000):
            a + b
    numpy_us = _best(calls, 7) / 1000 * 1e6
    warm, _fresh = copy_bandwidth(64 * MIB)
    return {"python_loop_ns": loop_ns, "numpy_call_us": numpy_us,
            "copy_warm_bytes_per_s": warm, "sha256_bytes_per_s": sha256_bandwidth(64 * MIB),
            "others_busy": busy["busy"], "steal": busy["steal"],
            "loadavg": list(os.getloadavg())}


def _print_machine(m: dict) -> None:
    busy = ("" if m["others_busy"] is None else
            f"; other processes kept {100 * m['others_busy']:.0f} % of the cores busy "
            f"({100 * m['steal']:.0f} % stolen by the host)")
    print(f"machine: pure Python {m['python_loop_ns']:.0f} ns per loop iteration, numpy "
          f"{m['numpy_call_us']:.2f} us per small call, copy {m['copy_warm_bytes_per_s'] / 1e9:.1f}"
          f" GB/s warm (64 MiB), SHA-256 {m['sha256_bytes_per_s'] / 1e9:.2f} GB/s{busy}; load "
          f"average {m['loadavg'][0]:.2f}", flush=True)
    if m["others_busy"] is not None and m["others_busy"] > 0.1:
        print("  (other work was running at the start: it slows every figure below)",
              flush=True)


def copy_bandwidth(nbytes: int) -> tuple[float, float]:
    """numpy's copy bandwidth for a buffer of ``nbytes`` (best of 3): into a destination
    already touched (warm: the bound), and into a freshly allocated one (first touch)."""
    src = np.ones(max(nbytes, 8) // 8, np.int64)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    warm = fresh = math.inf
    for _ in range(3):
        c0 = time.perf_counter()
        np.copyto(dst, src)
        warm = min(warm, time.perf_counter() - c0)
    del dst
    for _ in range(3):
        c0 = time.perf_counter()
        d = np.empty_like(src)
        np.copyto(d, src)
        fresh = min(fresh, time.perf_counter() - c0)
        del d
    return src.nbytes / warm, src.nbytes / fresh


def sha256_bandwidth(nbytes: int) -> float:
    """hashlib's SHA-256 rate (best of 2 over 2 MiB blocks, ``nbytes`` in all): every artifact
    file's SHA-256 is in the rank manifest, so one core hashes every byte the lowering
    emits."""
    block = np.ones(2 << 20, np.uint8)
    n = max(1, nbytes // block.nbytes)
    best = math.inf
    for _ in range(2):
        h = hashlib.sha256()
        c0 = time.perf_counter()
        for _ in range(n):
            h.update(block.data)
        best = min(best, time.perf_counter() - c0)
    return n * block.nbytes / best


def construct_seconds(kept: dict[str, list[np.ndarray]], compiled: bool = False
                      ) -> dict[str, float]:
    """Seconds per record to build each file's records one at a time with the construct
    structs (``compiled``: with ``struct.compile()``, construct's code-generated build,
    two to three times faster), best of 5 after a warm-up pass (from the field values our
    numpy path computed, so it only measures building the bytes: a per-record path that
    also computed the fields would be slower still).  Checks that the bytes agree with
    ours."""
    from nrtrewrite.emit import formats as F

    out = {}
    for name, parts in kept.items():
        recs = [r for p in parts for r in p]
        if not recs:
            continue
        struct = F.ARTIFACTS[name][1]
        values = [_as_construct(struct, r) for r in recs]
        build = (struct.compile() if compiled else struct).build
        built = [build(v) for v in values]  # warm-up (and the check below)
        for b_, r in zip(built, recs):
            if b_ != r.tobytes():
                raise AssertionError(f"{name}: construct and numpy disagree")
        best = math.inf
        for _ in range(5):
            c0 = time.perf_counter()
            for v in values:
                build(v)
            best = min(best, time.perf_counter() - c0)
        out[name] = best / len(values)
    return out


def _as_construct(struct, rec) -> dict:
    import construct as cs
    consts = {sc.name for sc in struct.subcons
              if isinstance(sc, cs.Renamed) and isinstance(sc.subcon, cs.Const)}
    out = {}
    for name in rec.dtype.names:
        if name in consts:
            continue
        v = rec[name]
        if isinstance(v, np.void):
            out[name] = {k: (v[k].tolist() if isinstance(v[k], np.ndarray) else int(v[k]))
                         for k in v.dtype.names}
        elif isinstance(v, np.ndarray):
            out[name] = v.tolist()
        else:
            out[name] = int(v)
    return out


def measure_all_ranks(model: str, jobs: int) -> dict:
    """``lower`` of every rank (``-j jobs``): time, CPU use, records, peak RSS, a digest."""
    from nrtrewrite.bundle import write_output
    from nrtrewrite.lower import LowerOptions, plan_lowering
    from nrtrewrite.neff.reader import read_model

    tmp = scratch_folder("nrtbench-all-")
    try:
        plan = plan_lowering(read_model(model), LowerOptions())
        with TreeMemory() as mem:
            c0 = os.times()
            t0 = time.perf_counter()
            out = write_output(plan, tmp / "out", ranks=None, workers=jobs)
            dt = time.perf_counter() - t0
            c1 = os.times()
        cpu = sum(c1[:4]) - sum(c0[:4])  # user + system, this process and its workers
        nbytes = records = largest = 0
        digest = hashlib.sha256()
        for f in sorted(out.rglob("*")):
            if f.is_file():
                digest.update(f.relative_to(out).as_posix().encode())
                digest.update(f.read_bytes())
            if f.name == "manifest.json" and f.parent != out:
                files = json.loads(f.read_text())["files"].values()
                rank_bytes = sum(v["bytes"] for v in files)
                nbytes += rank_bytes
                records += sum(v["records"] for v in files)
                largest = max(largest, rank_bytes)
        # the largest single process's peak (ru_maxrss), and the whole tree's, sampled (at
        # least that: a sample can miss a short peak)
        rss = _largest_process_mb()
        return {"model": Path(model).name, "jobs": jobs, "seconds": dt, "bytes": nbytes,
                "records": records, "bytes_per_s": nbytes / dt, "records_per_s": records / dt,
                "cpu_s": cpu, "cores_busy": cpu / dt, "sha256": digest.hexdigest(),
                "peak_rss_largest_process_mb": rss, "peak_rss_sum_mb": max(mem.rss_mb, rss),
                "peak_pss_sum_mb": mem.pss_mb, "memory_samples": mem.samples,
                "rss_target_mb": rss_target_mb(largest)}
    finally:
        shutil.rmtree(tmp)


class TreeMemory:
    """The memory of this process and every process below it (the pool's workers, the
    compose and manifest processes), sampled every ``interval`` seconds by a process of its
    own (``run.py --worker treemem``: not a thread of the measured process, whose CPU time
    and forks it would share): the peaks of their summed RSS (shared pages - the plan a
    fork inherits - counted once per process: the target is judged on it) and of their
    summed PSS (each shared page split between its sharers: the memory the machine gives
    them).  A sample can miss a short peak, so the judged figure is also at least the
    largest single process's own peak (``ru_maxrss``).  Linux only (/proc)."""

    def __init__(self, interval: float = 0.05):
        self.interval, self.rss_mb, self.pss_mb, self.samples = interval, 0.0, 0.0, 0

    def __enter__(self):
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--worker", "treemem", str(os.getpid()),
             str(self.interval)], stdout=subprocess.PIPE, text=True)
        if self.proc.stdout.readline() != "ready\n":  # (its first sample taken)
            raise RuntimeError("the memory sampler did not start")
        return self

    def __exit__(self, exc_type, *exc):
        import signal
        if exc_type is not None:  # (a stop: the sampler may have stopped too; no figures)
            self.proc.kill()
            self.proc.wait()
            return
        self.proc.send_signal(signal.SIGUSR1)
        res = json.loads(self.proc.stdout.read())
        self.proc.wait()
        self.rss_mb, self.pss_mb, self.samples = res["rss_mb"], res["pss_mb"], res["samples"]


def sample_tree(root: int, interval: float) -> None:
    """``--worker treemem ROOT INTERVAL``: sample the summed RSS and PSS of ROOT and its
    descendants (this process left out) until SIGUSR1, then print the peaks as JSON.  Ends
    without a word when it is orphaned (the process that started it, the measured one, was
    killed: since 2026-12-07, when every rank measurement starts one, it no longer samples
    on forever)."""
    import signal
    stop = []
    signal.signal(signal.SIGUSR1, lambda *_: stop.append(1))
    rss_peak = pss_peak = 0
    samples = 0
    parent = os.getppid()
    while True:
        if os.getppid() != parent:  # (orphaned)
            return
        rss, pss = _tree_memory_kb(root, os.getpid())
        rss_peak, pss_peak, samples = max(rss_peak, rss), max(pss_peak, pss), samples + 1
        if samples == 1:
            print("ready", flush=True)
        if stop:
            break
        time.sleep(interval)
    print(json.dumps({"rss_mb": rss_peak * 1024 / 1e6, "pss_mb": pss_peak * 1024 / 1e6,
                      "samples": samples}), flush=True)


def _tree_memory_kb(root: int, me: int) -> tuple[int, int]:
    """The summed RSS and PSS (kB, /proc/PID/smaps_rollup) of ``root`` and every process
    below it but ``me``."""
    parent: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    # pid (comm) state ppid ...: comm may hold spaces, so after the last ')'
                    parent[int(name)] = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo += [c for c, p in parent.items() if p == pid and c != me]
    rss = pss = 0
    for pid in tree:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1])
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1])
        except (OSError, ValueError):
            continue  # (a process that ended meanwhile)
    return rss, pss


_SINK_PLAN = None


def _lower_to_sink(rank: int) -> dict:
    """One rank lowered, its records hashed (the rank manifest's SHA-256s) and dropped."""
    from nrtrewrite.lower import lower_rank
    return lower_rank(_SINK_PLAN, rank, sink=lambda name, arr: None).manifest["files"]


def measure_all_ranks_sink(model: str, jobs: int) -> dict:
    """Every rank of ``model`` lowered with the product's process pool (``ForkPool``, as
    ``lower -j N`` forks it) into a sink: each rank's records hashed for its manifest and
    dropped, no file written (every rank of ``large64`` would be 32 GB of files).  Then
    three ranks lowered again in this process, serially: their manifests (every file's
    SHA-256) must equal the pool's."""
    global _SINK_PLAN
    from nrtrewrite.ahead import ForkPool
    from nrtrewrite.limits import check_plan
    from nrtrewrite.lower import LowerOptions, lower_rank, plan_lowering
    from nrtrewrite.neff.reader import read_model

    plan = plan_lowering(read_model(model), LowerOptions())
    check_plan(plan)
    ranks = list(plan.world)
    _SINK_PLAN = plan
    try:
        with TreeMemory() as mem:
            c0, t0 = os.times(), time.perf_counter()
            with ForkPool(_lower_to_sink, jobs) as pool:
                got = dict(pool.imap(ranks))
            dt = time.perf_counter() - t0
            c1 = os.times()
    finally:
        _SINK_PLAN = None
    cpu = sum(c1[:4]) - sum(c0[:4])
    largest_process = _largest_process_mb()
    per_rank = [sum(v["bytes"] for v in got[r].values()) for r in ranks]
    records = sum(v["records"] for r in ranks for v in got[r].values())
    checked = [ranks[0], ranks[len(ranks) // 2], ranks[-1]]
    same = all(lower_rank(plan, r, sink=lambda name, arr: None).manifest["files"] == got[r]
               for r in checked)
    return {"model": Path(model).name, "jobs": jobs, "ranks": len(ranks), "seconds": dt,
            "bytes": sum(per_rank), "records": records, "bytes_per_s": sum(per_rank) / dt,
            "records_per_s": records / dt, "cpu_s": cpu, "cores_busy": cpu / dt,
            "serial_checked": checked, "serial_identical": same,
            "peak_rss_largest_process_mb": largest_process,
            "peak_rss_sum_mb": max(mem.rss_mb, largest_process), "peak_pss_sum_mb": mem.pss_mb,
            "memory_samples": mem.samples, "rss_target_mb": rss_target_mb(max(per_rank))}


# ----------------------------------------------------------------------------------------------
# driver

def others_share(a: list[int], b: list[int], own_cpu_s: float, wall_s: float, cores: int,
                 hz: int) -> float:
    """The share of all ``cores`` that processes other than a measurement kept busy over its
    ``wall_s``: the cores' busy time between two /proc/stat samples ``a`` and ``b`` (jiffies
    of ``hz``; user nice system idle iowait irq softirq steal), less the measurement's own
    CPU time ``own_cpu_s``, at least 0."""
    busy = _jiffies(a, b)[0] / hz
    return max(0.0, busy - own_cpu_s) / (wall_s * cores)


def _sub(*args: str) -> dict:
    """One measurement in a fresh process; its result gains ``others_busy_during``: the
    share of all cores that processes other than it kept busy meanwhile (/proc/stat's busy
    time less the measurement's own CPU time: a measurement that shared the machine shows
    it)."""
    raise_lost_stop()  # (a stop Python dropped in a finalizer: outdir.stop_cleanly)
    a, r0, t0 = _cpu_times(), resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    with subprocess.Popen([sys.executable, __file__, "--worker", *args], text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        try:
            stdout, stderr = proc.communicate()
        except BaseException:  # a stop: passed on, the worker removes its scratch folder
            proc.terminate()   # (subprocess.run would SIGKILL it, leaving the folder)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise
    wall = time.perf_counter() - t0
    b, r1 = _cpu_times(), resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode == 2 and stderr.startswith("run.py: error: ") and stderr.count("\n") == 1:
        sys.stderr.write(stderr)  # (a worker's refusal: no temporary folder) passed on
        sys.exit(2)
    if proc.returncode:
        raise RuntimeError(stderr[-2000:])
    res = json.loads(stdout)
    others = None
    if a is not None and b is not None:
        own = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
        others = others_share(a, b, own, wall, os.cpu_count() or 1, os.sysconf("SC_CLK_TCK"))
    for item in (res if isinstance(res, list) else [res]):
        item["others_busy_during"] = others  # (the machine's "others_busy" is its own sample)
    return res


def _busy_note(res: dict) -> str:
    """`` (other processes: N % of the cores)`` when they kept more than 5 % busy."""
    o = res.get("others_busy_during")
    return "" if o is None or o <= 0.05 else f" [other processes: {100 * o:.0f} % of the cores]"


def slope(xs, ys) -> float:
    lx, ly = np.log(np.asarray(xs, float)), np.log(np.asarray(ys, float))
    return float(np.polyfit(lx, ly, 1)[0])


#: ``--worker KIND ARGS...``: one measurement in this process, as the driver runs it
#: (:func:`_sub`); each kind's arguments: ``model`` a NEFF file, ``int``/``count``/``float``
#: numbers (``count`` at least 1), ``write`` the word ``write`` or ``nowrite``, ``algo``
#: an algorithm or ``-`` (the default policy), ``models...`` one NEFF file or more.
WORKERS = {"rank": ("model", "int", "int", "write"), "cli": ("model", "int"),
           "sweep": ("algo", "models..."), "machine": (), "treemem": ("int", "float"),
           "sink": ("model", "count"), "all": ("model", "count")}


def worker_arguments(words: list[str]) -> tuple[str, list]:
    """``--worker``'s words as ``(kind, arguments)``, each argument converted; a word that
    is not one (:data:`WORKERS`) is refused, one line, status 2 (:func:`fail`; until
    2026-12-07 a missing one was an IndexError, an unknown kind measured every rank)."""
    kind, words = words[0], words[1:]
    if kind not in WORKERS:
        fail(f"--worker {kind!r}: not a measurement (one of {', '.join(WORKERS)})")
    shape = WORKERS[kind]
    many = bool(shape) and shape[-1].endswith("...")
    usage = " ".join([kind, *(w.upper() for w in shape)])
    if len(words) < len(shape) or (len(words) > len(shape) and not many):
        fail(f"--worker {kind}: {len(words)} argument(s) where it takes {usage}")
    out: list = []
    for i, word in enumerate(words):
        what = shape[min(i, len(shape) - 1)]
        out.append(_worker_word(kind, what, word))
    if many:
        out[len(shape) - 1:] = [out[len(shape) - 1:]]
    return kind, out


def _worker_word(kind: str, what: str, word: str):
    """One ``--worker`` argument of kind ``what`` converted, or :func:`fail`."""
    if what in ("model", "models..."):
        if not Path(word).is_file():
            fail(f"--worker {kind}: {word}: no such file")
        return word
    if what == "write":
        if word not in ("write", "nowrite"):
            fail(f"--worker {kind}: {word!r}: write or nowrite")
        return word == "write"
    if what == "algo":
        return None if word == "-" else word
    try:
        value = float(word) if what == "float" else int(word)
    except ValueError:
        fail(f"--worker {kind}: {word!r}: not {'a number' if what == 'float' else 'an integer'}")
    if (what == "count" and value < 1) or (what == "float" and not 0 < value < math.inf):
        fail(f"--worker {kind}: {word!r}: at least 1" if what == "count" else
             f"--worker {kind}: {word!r}: a finite number of seconds above 0")
    return value


def run_worker(kind: str, args: list) -> dict | list | None:
    """The measurement ``kind`` with its converted ``args`` (:func:`worker_arguments`); a
    model the reader refuses is one line, status 2, as ``lower`` says it."""
    from nrtrewrite.errors import NrtRewriteError

    try:
        if kind == "rank":
            model, rank, sample, write = args
            return measure_rank(model, rank, sample, write)
        if kind == "sweep":  # ALGO ('-': the default policy) MODEL...
            return measure_sweep(args[1], args[0])
        if kind == "machine":
            return measure_machine()
        if kind == "cli":
            return measure_cli(*args)
        if kind == "treemem":
            sample_tree(*args)
            raise_lost_stop()
            return None
        if kind == "sink":
            return measure_all_ranks_sink(*args)
        return measure_all_ranks(*args)
    except NrtRewriteError as err:  # (a model or an --algo lower refuses)
        fail(err.line())


#: the ``--help`` description, the docstring's first paragraph as a string: ``python -OO``
#: strips docstrings, where argparse read it from (no description until 2026-12-06)
DESCRIPTION = "`make bench`: lowering speed, measured side by side (docs/PERFORMANCE.md)."


def main() -> None:
    ap = argparse.ArgumentParser(description=DESCRIPTION)
    ap.add_argument("--worker", nargs="+")
    ap.add_argument("--quick", action="store_true", help="smaller models (smoke run)")
    ap.add_argument("--all-large", action="store_true",
                    help="also lower every rank of large64, serial and with the pool (about "
                         "3 minutes and 32 GB of disk, one output at a time)")
    args = ap.parse_args()
    # SIGTERM and SIGHUP too remove the scratch folders (/tmp/nrtbench-*), as Ctrl-C does
    stop_cleanly()
    if args.worker:
        res = run_worker(*worker_arguments(args.worker))
        if res is None:  # (treemem: printed its own)
            return
        raise_lost_stop()  # (a stop Python dropped in a finalizer: outdir.stop_cleanly)
        print(json.dumps(res))
        return

    from nrtrewrite.bundle import temp_root
    try:  # (refused before the models are built: each measurement makes its scratch there)
        root = temp_root()
    except OSError as err:
        refuse_temp_folder(err)
    # the scratch folders and the probe files temp_root makes (here and in each
    # measurement's process) that a killed run left, removed as simulate removes its own
    clean_stale_scratch(root)
    cores = os.cpu_count() or 2
    count = 200 if args.quick else 1000
    # a smoke run keeps its smaller models and results apart from the full run's
    out = OUT / "quick" if args.quick else OUT
    cmd = "python benchmarks/run.py" + (" --quick" if args.quick else "")
    results: dict = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "cores": cores,
                     "command": cmd, "quick": args.quick}
    results["provenance"] = provenance()
    results["machine"] = _sub("machine")
    _print_machine(results["machine"])
    print(f"{cmd}: building models under {out} ...", flush=True)
    m64 = build("large64", large_spec(64, count=count), out)
    m128 = build("large128", large_spec(128, count=count), out)
    results["large"] = []
    results["large_cli"] = []
    for model, rank in ((m64, 0), (m128, 0)):
        # RANK_RUNS fresh processes, alternating the stage-timed lowering and the whole
        # command; each is judged on its median run (the machine is shared: one run's
        # verdict can be noise, and the best would hide a slow first run); peak RSS is the
        # largest of them, every run's time is kept
        runs, cli = [], []
        for _ in range(RANK_RUNS):
            runs.append(_sub("rank", str(model), str(rank), str(SAMPLE), "write"))
            cli.append(_sub("cli", str(model), str(rank)))
        r = _summary(runs, "lower_s", "peak_rss_compose_mb")
        c = _summary(cli, "seconds", "peak_rss_children_mb")
        copy_bound(r, c, runs, cli)
        results["large"].append(r)
        results["large_cli"].append(c)
        _print_rank(r, c)

    # all ranks: process pool vs serial, byte-identical
    mall = build("all64", large_spec(64, count=30 if args.quick else 100, hi=16 * MIB), out)
    results["all_ranks"] = all_ranks(mall, cores)
    # every rank of the large model, lowered with the pool into a sink (no files: 32 GB)
    sink = results["all_ranks_large_sink"] = _sub("sink", str(m64), str(cores))
    _print_sink(sink, cores)
    if args.all_large:  # the large model's every rank written: 64 x 507 MB
        results["all_ranks_large"] = all_ranks(m64, cores)

    # scaling sweeps: time vs emitted records, sizes large enough that records dominate;
    # with the default policy, and with every collective forced to the ring.  The sizes are
    # the largest every point can address: a 32-bit TENSOR3D start_addr reaches 4 GiB, which
    # is 64 MiB x 64 (the size sweep's x64) and 32 MiB x 128 ranks (the rank sweep's largest)
    base = 16 * MIB if args.quick else 64 * MIB
    per_rank = 4 * MIB if args.quick else 32 * MIB
    results["scaling"] = {}
    print("\nscaling (log-log slopes; 4 collectives: AR bf16, AG bf16, RS bf16, AR fp8):")
    for policy, algo in (("default", []), ("ring", ["ring"])):
        mults, rank_counts = (1, 4, 16, 64), (8, 16, 32, 64, 128)
        size_models = [build(f"size_x{mult}", sweep_spec(64, base * mult), out)
                       for mult in mults]
        rank_models = [build(f"ranks_{ranks}", sweep_spec(ranks, per_rank * ranks), out)
                       for ranks in rank_counts]
        # each sweep in one fresh process, its points measured round-robin
        size_runs = [dict(r, x=x) for r, x in zip(
            _sub("sweep", algo[0] if algo else "-", *map(str, size_models)), mults)]
        rank_runs = [dict(r, x=x) for r, x in zip(
            _sub("sweep", algo[0] if algo else "-", *map(str, rank_models)), rank_counts)]
        sc = results["scaling"][policy] = {}
        for key, runs, what in (("message_size", size_runs, f"{base // MIB} MiB x mult"),
                                ("ranks", rank_runs, f"{per_rank // MIB} MiB x ranks")):
            fit = np.polyfit([r["records"] for r in runs], [r["lower_s"] for r in runs], 1)
            sc[key] = {
                "runs": [{"x": r["x"], "records": r["records"], "lower_s": r["lower_s"],
                          "cpu_s": r["cpu_s"], "stages": r["stages"],
                          "algorithms": r["algorithms"]} for r in runs],
                "affine_fit": {"ns_per_record": fit[0] * 1e9, "fixed_ms": fit[1] * 1e3},
                "exponent_time_vs_records": slope([r["records"] for r in runs],
                                                  [r["lower_s"] for r in runs]),
                "exponent_records_vs_x": slope([r["x"] for r in runs],
                                               [r["records"] for r in runs]),
                "exponent_time_vs_x": slope([r["x"] for r in runs], [r["lower_s"] for r in runs]),
                # CPU seconds of both threads: the wall time's slope is lower, as the writer
                # thread's overlap grows with the records (idle for most of a small point)
                "exponent_cpu_vs_records": slope([r["records"] for r in runs],
                                                 [r["cpu_s"] for r in runs]),
                "message": what}
        both = size_runs + rank_runs
        sc["combined_exponent_time_vs_records"] = slope([r["records"] for r in both],
                                                        [r["lower_s"] for r in both])
        print(f" policy {policy}" + (" (--algo ring)" if algo else "") + ": "
              + ", ".join(sorted({a for r in both for a in r["algorithms"]})))
        for key in ("message_size", "ranks"):
            k = sc[key]
            print(f"  {key} ({k['message']}): time ~ records^"
                  f"{report.exponent_text(k['exponent_time_vs_records'])}"
                  f"  (records ~ x^{k['exponent_records_vs_x']:.2f}, "
                  f"time ~ x^{k['exponent_time_vs_x']:.2f}); affine fit "
                  f"{k['affine_fit']['fixed_ms']:.1f} ms + "
                  f"{k['affine_fit']['ns_per_record']:.1f} ns/record; CPU (both threads) ~ "
                  f"records^{k['exponent_cpu_vs_records']:.3f}")
            print("    " + ", ".join(f"x{r['x']}: {r['records']:,} rec {r['lower_s'] * 1e3:.2f} ms"
                                     f" (hash {r['stages']['hash'] * 1e3:.1f}, CPU "
                                     f"{r['cpu_s'] * 1e3:.1f})"
                                     for r in k["runs"]))
        print(f"  both sweeps: time ~ records^{sc['combined_exponent_time_vs_records']:.3f}")
    # the checkout read again: a tree edited during the run is not the commit it names
    results["provenance"] = provenance_at_end(results["provenance"])
    results["targets"] = targets(results)
    print("\ntargets:")
    for t in results["targets"]:
        print(f"  [{'x' if t['holds'] else ' '}] {t['target']}: {t['measured']}")
    raise_lost_stop()  # (a stopped run writes no results)
    write_results(out, results)
    print(f"\nwritten {out / 'last-run.json'} and {out / 'last-run.md'}")


def write_results(out: Path, results: dict) -> None:
    """``last-run.json`` and, rendered from the same ``results``, ``last-run.md`` (docs/
    PERFORMANCE.md "Latest run" is this file, pasted: benchmarks/report.py) into ``out``:
    both rendered, then both written whole to temporary siblings, then renamed into place,
    the markdown first and the JSON last (:func:`outdir.replace_together`), so each file is
    whole and a failure or stop before the renames leaves both as they were (until
    2026-12-07 each was written in place, the JSON before the markdown was even rendered:
    a render that failed, a full disk or a stop left a truncated file, or a new JSON beside
    the previous run's markdown).  A file replaced keeps its mode, a symbolic link is
    replaced as a link, and a killed run's temporary files are removed by the next run."""
    files = [(out / "last-run.md", report.render(results).encode()),
             (out / "last-run.json", json.dumps(results, indent=1).encode())]
    out.mkdir(parents=True, exist_ok=True)
    replace_together(files)


def _median(runs: list[dict], key: str) -> dict:
    """The run whose ``key`` is the median (of an odd count; the upper middle otherwise)."""
    return sorted(runs, key=lambda x: x[key])[len(runs) // 2]


def _summary(runs: list[dict], key: str, rss_part: str) -> dict:
    """The median run by ``key`` with every run's ``key`` (``KEY_runs``) and share of other
    processes, and the peak RSS of the run with the largest (with its parts: self and
    ``rss_part``)."""
    out = dict(_median(runs, key))
    out[f"{key}_runs"] = [x[key] for x in runs]
    out["others_busy_runs"] = [x["others_busy_during"] for x in runs]
    top = max(runs, key=lambda x: x["peak_rss_sum_mb"])
    kept = ("peak_rss_sum_mb", "peak_pss_sum_mb", "peak_rss_self_plus_child_mb",
            "peak_rss_self_mb", rss_part)
    out.update({k: top[k] for k in kept})
    return out


def copy_bound(r: dict, c: dict, runs: list[dict], cli: list[dict]) -> None:
    """The copy bound of one model, the same for its lowering alone ``r`` and its whole
    command ``c`` (the medians of ``runs`` and ``cli``): the best warm (and fresh) copy
    bandwidth measured in any of its runs, each run having measured its own in its process
    after the run, at the artifacts' size; the ratios recomputed against it.  Until
    2026-12-07 each median run's own best-of-3 was the bound: on a loaded machine it
    collapsed (warm 4.3 GB/s, below the fresh copy's 10.3), and the ratio to it rose.  The
    sanity check: a run whose warm copy is below its copy into fresh pages measured a
    disturbed bound; ``copy_check`` counts them (report.py warns), and says whether even the
    best warm copy is below the best fresh one."""
    every = runs + cli
    warm = max(x["copy_warm_bytes_per_s"] for x in every)
    fresh = max(x["copy_fresh_bytes_per_s"] for x in every)
    check = {"runs": len(every), "warm_below_fresh": sum(
        x["copy_warm_bytes_per_s"] < x["copy_fresh_bytes_per_s"] for x in every),
        "best_warm_below_best_fresh": warm < fresh,
        "warm_runs": [x["copy_warm_bytes_per_s"] for x in every],
        "fresh_runs": [x["copy_fresh_bytes_per_s"] for x in every]}
    for x in (r, c):
        x["copy_warm_own_bytes_per_s"] = x["copy_warm_bytes_per_s"]  # (the median run's own)
        x["copy_fresh_own_bytes_per_s"] = x["copy_fresh_bytes_per_s"]
        x.update({"copy_warm_bytes_per_s": warm, "copy_fresh_bytes_per_s": fresh,
                  "ratio_to_copy_bound": x["bytes_per_s"] / warm,
                  "ratio_to_fresh_copy": x["bytes_per_s"] / fresh})
    r["copy_check"] = check


def _git(src: Path, *args: str) -> tuple[str | None, str, bool]:
    """``git -C SRC ARGS``'s output, or None and why it failed, and whether git ran and
    refused: then git's first line (its ``fatal: `` left out, "no reason given" where it
    said nothing); else that git could not be run (not on PATH), or did not finish."""
    try:
        res = subprocess.run(["git", "-C", str(src), *args], capture_output=True, text=True,
                             timeout=60)
    except subprocess.TimeoutExpired:
        return None, "git did not finish in 60 s", False
    except (OSError, subprocess.SubprocessError) as err:  # (no git on PATH)
        return None, f"git could not be run ({err})", False
    if res.returncode == 0:
        return res.stdout, "", False
    why = (res.stderr.strip().splitlines() or [""])[0]
    return None, why.removeprefix("fatal: ").removeprefix("error: ") or "no reason given", True


def _checkout(src: Path) -> tuple[str | None, bool | None, str | None]:
    """The commit of the checkout at ``src`` (``git rev-parse HEAD`` where ``src`` is a
    checkout's top level, not a folder in an enclosing one; else None), whether its tree
    has changes (``git status --porcelain``: tracked or untracked files not ignored; None
    without a commit, or where git status failed: unknown), and why a reading failed (None
    where nothing failed, or outside git: no ``.git`` and git saying so or not there).
    The reason names its cause as it was: git refusing the checkout (a "dubious ownership"
    of one another user owns, a damaged one), git not run (not on PATH: until 2026-12-07
    11:45 worded "git refused the checkout"), git not finishing, the folder gone."""
    if not src.is_dir():
        return None, None, f"{src}: the folder is gone"
    top, why, refused = _git(src, "rev-parse", "--show-toplevel")
    if top is None:
        outside = not (src / ".git").exists() and (
            "not a git repository" in why or why.startswith("git could not be run"))
        return None, None, (None if outside else f"{src}: git refused the checkout ({why})"
                            if refused else f"{src}: {why}")
    if Path(top.strip()).resolve() != src:  # (an enclosing repo's)
        return None, None, None
    head, why, _ = _git(src, "rev-parse", "HEAD")
    commit = (head or "").strip() or None
    if commit is None:
        return None, None, f"{src}: git read no commit ({why or 'no reason given'})"
    status, why, _ = _git(src, "status", "--porcelain")
    if status is None:
        return commit, None, f"{src}: git status failed ({why})"
    return commit, bool(status.strip()), None


def _warn(text: str) -> None:
    print(f"run.py: warning: {text}", file=sys.stderr, flush=True)


def provenance(src: Path | None = None) -> dict:
    """What the run measured: the commit of the nrtrewrite checkout the workers import
    (``src``, by default the folder of that package's folder) and whether its tree had
    changes (:func:`_checkout`), the source folder, and the versions of Python, numpy and
    construct (report.py shows them; until 2026-12-07 nothing recorded the commit, and
    ``report.py --commit`` named whatever it was given).  Read when the run starts, and
    again when it ends (:func:`provenance_at_end`).  A reading that failed is one warning
    on stderr: the run records no commit, or a commit whose tree is unknown (null)."""
    import platform

    import construct
    import nrtrewrite

    if src is None:
        src = Path(nrtrewrite.__file__).resolve().parent.parent
    commit, dirty, why = _checkout(src)
    if why and commit is None:
        _warn(f"{why}: the run records no commit")
    elif why:
        _warn(f"{why}: the run records whether the tree had changes as unknown")
    return {"commit": commit, "dirty": dirty, "source": str(src),
            "python": platform.python_version(), "numpy": np.__version__,
            "construct": construct.__version__}


def provenance_at_end(start: dict) -> dict:
    """``start`` (:func:`provenance` as the run started) with the checkout read again at
    the run's end, one rule for the tree (``dirty``): True where either reading found
    changes, or the commit is not the one the run started at (a tree edited or checked out
    during the run is not the commit the run names; until 2026-12-07 the tree was read at
    the start only); else None, unknown, where either reading could not tell (git status
    failed, or the checkout could not be read at the end: the folder gone, git gone, git
    refusing it; until 2026-12-07 11:45 the start's "clean" was kept, or the unread commit
    taken as a changed one, with two warnings); else False.  The commit stays the start's.
    A change or an unknown end is one warning on stderr."""
    if start["commit"] is None:
        return start
    commit, dirty, why = _checkout(Path(start["source"]))
    out = dict(start)
    short = start["commit"][:12]
    if start["dirty"]:
        return out  # (changes found at the start: nothing read at the end unsays them)
    if commit is not None and commit != start["commit"]:
        _warn(f"{start['source']}: the checkout's commit changed during the run ({short} -> "
              f"{commit[:12]}): recorded as {short} with uncommitted changes")
        out["dirty"] = True
    elif dirty:
        _warn(f"{start['source']}: the tree changed during the run: recorded as {short} "
              "with uncommitted changes")
        out["dirty"] = True
    elif why:
        _warn(f"at the run's end, {why}: whether the tree changed during the run is unknown: "
              f"recorded as {short}, whether with uncommitted changes unknown")
        out["dirty"] = None
    return out


def _rank_peak(r: dict) -> float:
    """A rank measurement's judged peak RSS: summed over its process tree (since
    2026-12-07), or in an older result its process's plus its largest child's."""
    return r["peak_rss_sum_mb"] if "peak_rss_sum_mb" in r else r["peak_rss_mb"]


def targets(res: dict) -> list[dict]:
    """Issue 8's targets judged on ``res``, each with its figure as shown beside the verdict:
    with the digits it takes at the edge for the shown figure to agree with the verdict
    (report.agreeing_text; until 2026-12-07 a figure rounded onto its edge read as a tie
    beside "does not hold"), "every core busy" with its rule and threshold."""
    out = []
    need = report.busy_needed(res["cores"])
    for r, c in zip(res["large"], res["large_cli"]):
        name = f"{r['model']} --rank {r['rank']}"
        out.append({"target": f"{name}: >= 10 % of the copy bound (the whole command, imports apart)",
                    "measured": f"{report.copy_share_text(c['ratio_to_copy_bound'])} % (the "
                                f"lowering alone {100 * r['ratio_to_copy_bound']:.1f} %)",
                    "holds": c["ratio_to_copy_bound"] >= report.COPY_BOUND_SHARE})
        out.append({"target": f"{name}: >= x100 the construct path (compiled structs)",
                    "measured": f"x{report.construct_text(r['ratio_to_construct_compiled'])} "
                                f"(uncompiled: x{r['ratio_to_construct']:.0f})",
                    "holds": r["ratio_to_construct_compiled"] >= report.CONSTRUCT_TIMES})
        peak = max(_rank_peak(r), _rank_peak(c))
        out.append({"target": f"{name}: peak RSS <= 2 x artifacts + 300 MB",
                    "measured": "{} MB <= {} MB".format(*report.at_most_texts(
                        peak, r["rss_target_mb"])),
                    "holds": peak <= r["rss_target_mb"]})
    for policy in ("default", "ring"):
        for key in ("message_size", "ranks"):
            e = res["scaling"][policy][key]["exponent_time_vs_records"]
            out.append({"target": f"linear in records over the {key} sweep, policy {policy} "
                                  "(1 +/- 0.15)",
                        "measured": report.exponent_text(e),
                        "holds": LINEAR[0] <= e <= LINEAR[1]})
    for key in ("all_ranks", "all_ranks_large"):
        if key not in res:
            continue
        a = res[key]
        name = f"all ranks ({a['pool']['model']})"
        out.append({"target": f"{name}: {report.BUSY_RULE}, byte-identical to serial",
                    "measured": f"{report.busy_text(a['pool']['cores_busy'], res['cores'])}, "
                                f"speedup x{a['speedup']:.2f}, "
                                f"{'byte-identical' if a['identical'] else 'NOT identical'}",
                    "holds": a["identical"] and a["pool"]["cores_busy"] >= need})
        peak = max(a["serial"]["peak_rss_sum_mb"], a["pool"]["peak_rss_sum_mb"])
        out.append({"target": f"{name}: peak RSS of all processes <= 2 x largest rank + 300 MB",
                    "measured": "{} MB <= {} MB".format(*report.at_most_texts(
                        peak, a["pool"]["rss_target_mb"])),
                    "holds": peak <= a["pool"]["rss_target_mb"]})
    if "all_ranks_large_sink" in res:
        k = res["all_ranks_large_sink"]
        name = f"all ranks ({k['model']}, lowered into a sink)"
        out.append({"target": f"{name}: {report.BUSY_RULE}, ranks as lowered serially",
                    "measured": f"{report.busy_text(k['cores_busy'], res['cores'])}, ranks "
                                + ", ".join(map(str, k["serial_checked"]))
                                + (" identical" if k["serial_identical"] else " NOT identical"),
                    "holds": k["serial_identical"] and k["cores_busy"] >= need})
        out.append({"target": f"{name}: peak RSS of all processes <= 2 x largest rank + 300 MB",
                    "measured": "{} MB <= {} MB".format(*report.at_most_texts(
                        k["peak_rss_sum_mb"], k["rss_target_mb"])),
                    "holds": k["peak_rss_sum_mb"] <= k["rss_target_mb"]})
    return out


def all_ranks(model: Path, cores: int) -> dict:
    """Every rank of ``model`` serially and with the pool, each in a fresh process; printed."""
    serial = _sub("all", str(model), "1")
    pool = _sub("all", str(model), str(cores))
    res = {"serial": serial, "pool": pool, "identical": serial["sha256"] == pool["sha256"],
           "speedup": serial["seconds"] / pool["seconds"]}
    _print_all(res, model, cores)
    return res


def _print_all(res: dict, model: Path, cores: int) -> None:
    """Both runs; the pool's cores busy and each peak RSS beside its target with the digits
    their verdicts take (:func:`targets`)."""
    pool = res["pool"]
    print(f"\nall 64 ranks of {model.name} ({pool['records']:,} records, "
          f"{pool['bytes'] / 1e6:,.0f} MB, written and fsynced):")
    for r in (res["serial"], pool):
        busy = (report.busy_figure(r["cores_busy"], cores) if r is pool
                else f"{r['cores_busy']:.2f}")
        d = report.at_most_digits(r["peak_rss_sum_mb"], r["rss_target_mb"])
        print(f"  -j {r['jobs']}: {r['seconds']:.2f} s, "
              f"{r['records_per_s'] / 1e6:.2f} M records/s, "
              f"{r['bytes_per_s'] / 1e6:.0f} MB/s, {busy} cores busy, "
              f"peak RSS of all its processes {r['peak_rss_sum_mb']:.{d}f} MB (PSS "
              f"{r['peak_pss_sum_mb']:.0f}; target {r['rss_target_mb']:.{d}f})" + _busy_note(r))
    print(f"  speedup x{res['speedup']:.2f}, byte-identical: {res['identical']}")


def _print_sink(k: dict, cores: int) -> None:
    """The sink's run, its judged figures as in :func:`_print_all`."""
    d = report.at_most_digits(k["peak_rss_sum_mb"], k["rss_target_mb"])
    print(f"\nall {k['ranks']} ranks of {k['model']}, lowered with the pool (-j {k['jobs']}) "
          f"into a sink, no files ({k['records']:,} records, {k['bytes'] / 1e6:,.0f} MB):")
    print(f"  {k['seconds']:.2f} s, {k['records_per_s'] / 1e6:.2f} M records/s, "
          f"{k['bytes_per_s'] / 1e6:.0f} MB/s, {report.busy_figure(k['cores_busy'], cores)} "
          f"cores busy, peak RSS of all its processes {k['peak_rss_sum_mb']:.{d}f} MB (PSS "
          f"{k['peak_pss_sum_mb']:.0f}; target {k['rss_target_mb']:.{d}f}); ranks "
          f"{k['serial_checked']} lowered again "
          f"serially: {'identical' if k['serial_identical'] else 'NOT identical'}"
          + _busy_note(k))


def _print_rank(r: dict, c: dict) -> None:
    """The rank's figures; those a target judges (the whole command's % of the copy bound,
    the construct ratio, the peak RSS pair) with the digits that agree with its verdict,
    as in :func:`targets` (until 2026-12-07 11:45 rounded onto the edge here)."""
    st = r["stages"]
    d = max(report.at_most_digits(x["peak_rss_sum_mb"], r["rss_target_mb"]) for x in (r, c))
    print(f"\n{r['model']} lower --rank {r['rank']}: {r['records']:,} records, "
          f"{r['bytes'] / 1e6:,.0f} MB")
    print(f"  the whole command: {c['seconds']:.2f} s (median of "
          + ", ".join(f"{x:.2f}" for x in c["seconds_runs"])
          + f" s; imports {c['import_s']:.2f} s before it), {c['records_per_s'] / 1e6:.2f} M "
          f"records/s, {c['bytes_per_s'] / 1e6:.0f} MB/s -> "
          f"{report.copy_share_text(c['ratio_to_copy_bound'])} % of the copy bound "
          f"({c['copy_warm_bytes_per_s'] / 1e9:.1f} GB/s warm; "
          f"{100 * c['ratio_to_fresh_copy']:.1f} % of {c['copy_fresh_bytes_per_s'] / 1e9:.1f} "
          f"GB/s into fresh pages); CPU {c['cpu_s']:.2f} s, {c['cores_busy']:.2f} cores; "
          f"peak RSS summed over its processes {c['peak_rss_sum_mb']:.{d}f} MB (PSS "
          f"{c['peak_pss_sum_mb']:.0f}; itself {c['peak_rss_self_mb']:.0f} + largest child "
          f"{c['peak_rss_children_mb']:.0f})" + _busy_note(c))
    print(f"  the lowering alone (compose, emit, serialize, files written): {r['lower_s']:.2f} s"
          " (median of " + ", ".join(f"{x:.2f}" for x in r["lower_s_runs"])
          + f" s), then fsync {st['fsync']:.2f} s" + _busy_note(r))
    print(f"  {r['records_per_s'] / 1e6:.2f} M records/s, {r['bytes_per_s'] / 1e6:.0f} MB/s "
          f"({r['bytes_per_s_with_fsync'] / 1e6:.0f} MB/s with the fsync); copy bound "
          f"{r['copy_warm_bytes_per_s'] / 1e9:.1f} GB/s warm -> "
          f"{100 * r['ratio_to_copy_bound']:.1f} % of the bound "
          f"({r['copy_fresh_bytes_per_s'] / 1e9:.1f} GB/s into fresh pages -> "
          f"{100 * r['ratio_to_fresh_copy']:.1f} %; SHA-256 {r['sha256_bytes_per_s'] / 1e9:.2f} "
          f"GB/s -> {100 * r['ratio_to_sha256']:.0f} %)")
    warning = report.copy_warning(r)
    if warning:
        print(f"  warning: {warning}")
    print(f"  construct path {r['construct_compiled_s_per_record'] * 1e6:.2f} us/record "
          f"compiled ({r['construct_s_per_record'] * 1e6:.1f} uncompiled) vs ours "
          f"{r['ours_s_per_record'] * 1e9:.0f} ns/record -> "
          f"x{report.construct_text(r['ratio_to_construct_compiled'])} "
          f"(x{r['ratio_to_construct']:.0f})")
    print(f"  CPU {r['lower_cpu_s']:.2f} s in the lowering's {r['lower_s']:.2f} s: "
          f"{r['lower_cores_busy']:.2f} of {os.cpu_count()} cores busy")
    print("  stages: " + ", ".join(f"{k} {v:.2f} s" for k, v in st.items())
          + f"; peak RSS summed over its processes {r['peak_rss_sum_mb']:.{d}f} MB (PSS "
          f"{r['peak_pss_sum_mb']:.0f}; itself {r['peak_rss_self_mb']:.0f} + compose process "
          f"{r['peak_rss_compose_mb']:.0f}; target {r['rss_target_mb']:.{d}f} MB)")
    ch = r["channels"]
    print(f"  channels in use: {report.ranges(ch['used'])} over {ch['entries']} SPAD entries; "
          "entries by channel count: " + "; ".join(
              f"{a} " + ", ".join(f"{n} ch x{v}" for n, v in c_.items())
              for a, c_ in ch["per_algorithm"].items()))


if __name__ == "__main__":
    main()
