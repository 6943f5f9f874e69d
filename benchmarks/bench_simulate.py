"""Simulator speed: a 64-rank (one trn2 node, LNC 2) bf16 all-reduce of 16 MiB per rank.

    python benchmarks/bench_simulate.py [--mib 16] [--ranks 64] [--seed 0] [--keep]

Builds the model under benchmarks/out/, lowers it with the ring forced (``--algo ring``, so
the figure does not move with the selection policy; ``--algo`` picks another) into
benchmarks/out/sim<ranks>x<mib>.lowered, then
runs ``nrtrewrite simulate`` on that folder in a fresh subprocess and reports wall time,
peak RSS and the simulator's own counters.  Not a timed test (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from models import MIB, OUT, build  # noqa: E402
from outdir import raise_lost_stop, stop_cleanly  # noqa: E402


def spec(ranks: int, mib: int) -> dict:
    return {
        "header": {"pkg_version": 2, "name": f"sim{ranks}x{mib}", "lnc_size": 2},
        "subgraphs": [{
            "name": "sg00",
            "vars": [{"name": "g_in", "type": "input", "size": mib * MIB},
                     {"name": "g_out", "type": "output", "size": mib * MIB}],
            "replica_groups": [f"0..{ranks - 1}"],
            "engines": {"sp": [{"all_reduce": {"dtype": "bf16", "op": "add", "src": "g_in",
                                               "dst": "g_out", "bytes": mib * MIB}}]},
        }],
    }


#: the ``--help`` description, the docstring's first paragraph as a string: ``python -OO``
#: strips docstrings, where argparse read it from (no description until 2026-12-06)
DESCRIPTION = ("Simulator speed: a 64-rank (one trn2 node, LNC 2) bf16 all-reduce of 16 MiB per "
               "rank.")


def main() -> None:
    ap = argparse.ArgumentParser(description=DESCRIPTION)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--mib", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--algo", default="ring", help="algorithm override for lower (default ring)")
    ap.add_argument("--keep", action="store_true", help="keep the lowered folder")
    args = ap.parse_args()
    for opt in ("ranks", "mib"):
        if getattr(args, opt) < 1:
            ap.error(f"--{opt} must be at least 1")
    if not 0 <= args.seed < 1 << 32:  # (as simulate --seed)
        ap.error("--seed must be 0 to 4294967295")
    from nrtrewrite.errors import NrtRewriteError

    name = f"sim{args.ranks}x{args.mib}"
    try:
        neff = build(name, spec(args.ranks, args.mib))
    except NrtRewriteError as err:
        print(f"bench_simulate.py: error: {err.line()}", file=sys.stderr)
        sys.exit(2)
    out = OUT / f"{name}.lowered"
    stop_cleanly()  # SIGTERM and SIGHUP too remove the lowered folder, as Ctrl-C does
    try:
        status = lower_and_simulate(args, neff, out)
        raise_lost_stop()  # (a stop Python dropped in a finalizer: outdir.stop_cleanly)
        sys.exit(status)
    finally:
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)


def lower_and_simulate(args: argparse.Namespace, neff: Path, out: Path) -> int:
    """Lower ``neff`` into ``out``, simulate it and print the figures; the exit status (a
    failed lowering or simulation has said why in its own line)."""
    nrt = [sys.executable, "-m", "nrtrewrite.cli.__main__"]
    t0 = time.perf_counter()
    lowered = subprocess.run(nrt + ["lower", "-q", "--force", "--algo", args.algo, str(neff),
                                    "-o", str(out)])
    if lowered.returncode:  # (its error line is out: --algo bogus, a model it refuses)
        return lowered.returncode
    t_lower = time.perf_counter() - t0
    raise_lost_stop()
    cmd = ["/usr/bin/time", "-f", "%e %M"] + nrt + ["simulate", str(out), "--json", "--seed",
                                                   str(args.seed)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    *said, timing = proc.stderr.strip().splitlines() or [""]
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        doc = {}
    if doc.get("ok") is None:  # the simulation could not be done: its own lines say why
        sys.stderr.write("".join(line + "\n" for line in said))
        return proc.returncode or 2
    elapsed, rss_kb = timing.split()
    st = doc["stats"]
    print(f"model      {neff.name}: {args.ranks} ranks, bf16 all-reduce of {args.mib} MiB per rank")
    algo = json.loads((out / "manifest.json").read_text())["triggers"][0]["algorithm"]
    print(f"lower      {t_lower:.1f} s (--algo {args.algo}: {algo})")
    print(f"command    nrtrewrite simulate {out} --seed {args.seed}")
    print(f"verdict    {'ok' if doc['ok'] else 'FAILED: ' + str(doc['error'])}")
    print(f"simulate   {float(elapsed):.1f} s wall ({wall:.1f} s incl. interpreter start), "
          f"peak RSS {int(rss_kb) / 1024:.0f} MiB")
    print(f"           load {st['load_seconds']:.1f} s, run {st['run_seconds']:.1f} s; "
          f"{st['legs_run']} legs, {st['bytes_moved'] / MIB:.0f} MiB moved "
          f"({st['bytes_moved'] / MIB / max(st['run_seconds'], 1e-9):.0f} MiB/s)")
    return 0 if doc["ok"] else 1


if __name__ == "__main__":
    main()
