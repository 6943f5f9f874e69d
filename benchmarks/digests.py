"""What the rank manifests' digest costs, against the alternatives a team decision could pick
(docs/PERFORMANCE.md "What closing issue 8 would take"): every hashlib digest, zlib's
checksums, and - when they are installed, which the project does not need - xxhash and
blake3, each over the same buffer as numpy's warm copy in this process.

    .venv/bin/python benchmarks/digests.py [--mib 64] [--reps 5]
    .venv/bin/pip install xxhash blake3   # only to measure those two: no dependency of ours

Prints GB/s (10^9 bytes a second, the best of ``--reps``), the share of the copy rate, and
how long each would take over ``large64`` rank 0's 507 MB of artifacts.
"""

from __future__ import annotations

import argparse
import hashlib
import time
import zlib

import numpy as np

#: ``large64 --rank 0``'s artifact bytes (docs/PERFORMANCE.md "Latest run")
LARGE64_RANK_BYTES = 507e6


def _best(fn, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def candidates(buf: bytes) -> dict:
    """name -> a function digesting ``buf`` once (the optional ones only when importable)."""
    out = {name: (lambda n=name: hashlib.new(n, buf).digest())
           for name in ("sha256", "sha1", "md5", "sha512", "blake2b", "blake2s", "sha3_256")}
    out["zlib.crc32 (not a digest)"] = lambda: zlib.crc32(buf)
    out["zlib.adler32 (not a digest)"] = lambda: zlib.adler32(buf)
    try:
        import xxhash
    except ImportError:
        pass
    else:
        out["xxhash.xxh3_128 (not cryptographic)"] = lambda: xxhash.xxh3_128(buf).digest()
    try:
        import blake3
    except ImportError:
        pass
    else:
        out["blake3"] = lambda: blake3.blake3(buf).digest()
        out["blake3, 2 threads"] = lambda: blake3.blake3(buf, max_threads=2).digest()
    return out


#: the ``--help`` description, the docstring's first paragraph as a string: ``python -OO``
#: strips docstrings, where argparse read it from (no description until 2026-12-06)
DESCRIPTION = ("What the rank manifests' digest costs, against the alternatives a team decision "
               "could pick (docs/PERFORMANCE.md \"What closing issue 8 would take\"): every "
               "hashlib digest, zlib's checksums, and - when they are installed, which the project "
               "does not need - xxhash and blake3, each over the same buffer as numpy's warm copy "
               "in this process.")


def main() -> None:
    ap = argparse.ArgumentParser(description=DESCRIPTION)
    ap.add_argument("--mib", type=int, default=64, help="buffer size (MiB)")
    ap.add_argument("--reps", type=int, default=5, help="runs of each; the best counts")
    args = ap.parse_args()
    for opt in ("mib", "reps"):
        if getattr(args, opt) < 1:
            ap.error(f"--{opt} must be at least 1")
    arr = np.random.default_rng(0).integers(0, 256, args.mib << 20, dtype=np.uint8)
    buf = arr.tobytes()
    dst = np.empty_like(arr)
    np.copyto(dst, arr)  # warm: the destination's pages faulted in once
    copy = len(buf) / _best(lambda: np.copyto(dst, arr), args.reps)
    print(f"{args.mib} MiB, best of {args.reps}; numpy warm copy {copy / 1e9:.2f} GB/s")
    print(f"{'digest':38} {'GB/s':>6} {'of copy':>8} {'large64 rank 0':>15}")
    for name, fn in candidates(buf).items():
        rate = len(buf) / _best(fn, args.reps)
        print(f"{name:38} {rate / 1e9:6.2f} {rate / copy:8.1%} "
              f"{LARGE64_RANK_BYTES / rate:13.3f} s")


if __name__ == "__main__":
    main()
