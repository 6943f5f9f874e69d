"""`make bench`: lowering speed, measured side by side (docs/PERFORMANCE.md).

Every figure is taken in the same run, and the ones that matter are ratios (this machine is
shared and noisy):

* records/s and artifact bytes/s of ``lower --rank R`` on a generated large model
  (1,000 collectives, sizes log-uniform 4 KiB..256 MiB, all-reduce / all-gather /
  reduce-scatter in bf16 and fp8) on 64 ranks (one node) and 128 ranks (two nodes);
* the ratio to the physical bound: artifact bytes/s over numpy's copy bandwidth for a
  buffer of the same size, measured in the same process;
* the ratio to the reference path: the same records built one at a time with the
  construct structs;
* peak RSS, time per stage (parse, select, compose, emit, serialize, write);
* all-rank lowering with the process pool vs serial (and byte identity);
* scaling exponents of time vs emitted records over message size x1..x64 and ranks 8..128.

Each measurement runs in a fresh subprocess (clean RSS).  Results go to stdout and to
benchmarks/out/last-run.json.
"""

from __future__ import annotations

import argparse
import hashlib
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

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from models import MIB, OUT, build, large_spec  # noqa: E402


# ----------------------------------------------------------------------------------------------
# worker: one measurement in this process

def measure_rank(model: str, rank: int, construct_sample: int) -> dict:
    from nrtrewrite.bundle import _write_file
    from nrtrewrite.emit import formats as F
    from nrtrewrite.lower import LowerOptions, lower_rank, plan_lowering
    from nrtrewrite.neff.reader import read_model

    t0 = time.perf_counter()
    data = Path(model).read_bytes()
    m = read_model(model)
    t1 = time.perf_counter()
    plan = plan_lowering(m, LowerOptions(), input_sha256=hashlib.sha256(data).hexdigest())
    t2 = time.perf_counter()
    out = lower_rank(plan, rank)
    t3 = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="nrtbench-"))
    try:
        for name, parts in out.files.items():
            _write_file(tmp / name, parts)
    finally:
        shutil.rmtree(tmp)
    t4 = time.perf_counter()
    nbytes = sum(p.nbytes for parts in out.files.values() for p in parts)
    records = sum(p.size for parts in out.files.values() for p in parts)
    lower_s = t3 - t2
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    # physical bound: numpy copy of a buffer of the same size, warm, in this process
    buf = np.ones(max(nbytes, 1) // 8 + 1, np.int64)
    dst = np.empty_like(buf)
    np.copyto(dst, buf)
    best = math.inf
    for _ in range(3):
        c0 = time.perf_counter()
        np.copyto(dst, buf)
        best = min(best, time.perf_counter() - c0)
    copy_bw = buf.nbytes / best
    del buf, dst
    # reference path: the same records, one at a time, through the construct structs
    ref = construct_rate(out, construct_sample)
    ours_per_record = lower_s / max(records, 1)
    return {
        "model": Path(model).name, "rank": rank, "records": records, "bytes": nbytes,
        "stages": {"parse": t1 - t0, "select+plan": t2 - t1, **out.timings, "write": t4 - t3},
        "lower_s": lower_s, "records_per_s": records / lower_s, "bytes_per_s": nbytes / lower_s,
        "copy_bytes_per_s": copy_bw, "ratio_to_copy_bound": (nbytes / lower_s) / copy_bw,
        "construct_s_per_record": ref, "ours_s_per_record": ours_per_record,
        "ratio_to_construct": ref / ours_per_record,
        "peak_rss_mb": rss_mb,
        "files": {k: sum(p.nbytes for p in v) for k, v in out.files.items()},
    }


def construct_rate(out, sample: int) -> float:
    """Seconds per record to build records one at a time with the construct structs.

    Uses the field values our numpy path computed (so it only measures building the bytes:
    a per-record path that also computed the fields would be slower still).  Checks that the
    bytes agree with ours."""
    from nrtrewrite.emit import formats as F

    total = sum(p.size for parts in out.files.values() for p in parts)
    n_done = 0
    spent = 0.0
    for name, parts in out.files.items():
        recs = [r for p in parts for r in p[:max(1, sample * p.size // max(total, 1))]]
        if not recs:
            continue
        struct = F.ARTIFACTS[name][1]
        values = [_as_construct(struct, r) for r in recs]
        c0 = time.perf_counter()
        built = [struct.build(v) for v in values]
        spent += time.perf_counter() - c0
        n_done += len(values)
        for b_, r in zip(built, recs):
            if b_ != r.tobytes():
                raise AssertionError(f"{name}: construct and numpy disagree")
    return spent / max(n_done, 1)


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
    from nrtrewrite.bundle import write_output
    from nrtrewrite.lower import LowerOptions, plan_lowering
    from nrtrewrite.neff.reader import read_model

    tmp = Path(tempfile.mkdtemp(prefix="nrtbench-all-"))
    try:
        plan = plan_lowering(read_model(model), LowerOptions())
        t0 = time.perf_counter()
        out = write_output(plan, tmp / "out", ranks=None, workers=jobs)
        dt = time.perf_counter() - t0
        nbytes = sum(f.stat().st_size for f in out.rglob("*.bin"))
        digest = hashlib.sha256()
        for f in sorted(out.rglob("*")):
            if f.is_file():
                digest.update(f.relative_to(out).as_posix().encode())
                digest.update(f.read_bytes())
        return {"model": Path(model).name, "jobs": jobs, "seconds": dt, "bytes": nbytes,
                "bytes_per_s": nbytes / dt, "sha256": digest.hexdigest(),
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    finally:
        shutil.rmtree(tmp)


# ----------------------------------------------------------------------------------------------
# driver

def _sub(*args: str) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--worker", *args], capture_output=True,
                          text=True, check=False)
    if proc.returncode:
        raise RuntimeError(proc.stderr[-2000:])
    return json.loads(proc.stdout)


def slope(xs, ys) -> float:
    lx, ly = np.log(np.asarray(xs, float)), np.log(np.asarray(ys, float))
    return float(np.polyfit(lx, ly, 1)[0])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", nargs="+")
    ap.add_argument("--quick", action="store_true", help="smaller models (smoke run)")
    ap.add_argument("--sample", type=int, default=20000)
    args = ap.parse_args()
    if args.worker:
        kind, *rest = args.worker
        if kind == "rank":
            res = measure_rank(rest[0], int(rest[1]), int(rest[2]))
        else:
            res = measure_all_ranks(rest[0], int(rest[1]))
        print(json.dumps(res))
        return

    count = 200 if args.quick else 1000
    results: dict = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "cores": os.cpu_count()}
    print(f"building models under {OUT} ...", flush=True)
    m64 = build("large64", large_spec(64, 1, count=count))
    m128 = build("large128", large_spec(128, 2, count=count))
    results["large"] = []
    for model, rank in ((m64, 0), (m128, 0)):
        r = _sub("rank", str(model), str(rank), str(args.sample))
        results["large"].append(r)
        _print_rank(r)

    # all ranks: process pool vs serial, byte-identical
    mall = build("all64", large_spec(64, 1, count=100 if not args.quick else 30, hi=16 * MIB))
    serial = _sub("all", str(mall), "1")
    pool = _sub("all", str(mall), str(os.cpu_count() or 2))
    results["all_ranks"] = {"serial": serial, "pool": pool,
                            "identical": serial["sha256"] == pool["sha256"],
                            "speedup": serial["seconds"] / pool["seconds"]}
    print(f"\nall 64 ranks of {mall.name}: serial {serial['seconds']:.1f} s, "
          f"pool x{pool['jobs']} {pool['seconds']:.1f} s (speedup "
          f"{results['all_ranks']['speedup']:.2f}), byte-identical: "
          f"{results['all_ranks']['identical']}")

    # scaling sweeps: time vs emitted records
    size_runs = []
    for mult in (1, 4, 16, 64):
        mod = build(f"size_x{mult}", large_spec(64, 1, count=4, lo=4 * MIB * mult,
                                                hi=4 * MIB * mult, seed=3))
        size_runs.append(_sub("rank", str(mod), "0", "0"))
    rank_runs = []
    for ranks in (8, 16, 32, 64, 128):
        nodes = 2 if ranks > 64 else 1
        mod = build(f"ranks_{ranks}", large_spec(ranks, nodes, count=8, lo=64 * MIB,
                                                 hi=64 * MIB, seed=4))
        rank_runs.append(_sub("rank", str(mod), "0", "0"))
    results["scaling"] = {
        "message_size": {"runs": [(r["records"], r["lower_s"]) for r in size_runs],
                         "exponent": slope([r["records"] for r in size_runs],
                                           [r["lower_s"] for r in size_runs])},
        "ranks": {"runs": [(r["records"], r["lower_s"]) for r in rank_runs],
                  "exponent": slope([r["records"] for r in rank_runs],
                                    [r["lower_s"] for r in rank_runs])},
    }
    print("\nscaling (time vs emitted records, log-log slope):")
    for k in ("message_size", "ranks"):
        print(f"  {k}: exponent {results['scaling'][k]['exponent']:.3f}  runs (records, s): "
              + ", ".join(f"({a}, {b:.2f})" for a, b in results["scaling"][k]["runs"]))
    OUT.mkdir(exist_ok=True)
    (OUT / "last-run.json").write_text(json.dumps(results, indent=1))
    print(f"\nwritten {OUT / 'last-run.json'}")


def _print_rank(r: dict) -> None:
    st = r["stages"]
    print(f"\n{r['model']} lower --rank {r['rank']}: {r['records']:,} records, "
          f"{r['bytes'] / 1e6:,.0f} MB in {r['lower_s']:.2f} s")
    print(f"  {r['records_per_s'] / 1e6:.2f} M records/s, {r['bytes_per_s'] / 1e6:.0f} MB/s; "
          f"copy bound {r['copy_bytes_per_s'] / 1e9:.1f} GB/s -> "
          f"{100 * r['ratio_to_copy_bound']:.1f} % of the bound")
    print(f"  construct path {r['construct_s_per_record'] * 1e6:.1f} us/record vs ours "
          f"{r['ours_s_per_record'] * 1e9:.0f} ns/record -> x{r['ratio_to_construct']:.0f}")
    print("  stages: " + ", ".join(f"{k} {v:.2f} s" for k, v in st.items())
          + f"; peak RSS {r['peak_rss_mb']:.0f} MB")


if __name__ == "__main__":
    main()
