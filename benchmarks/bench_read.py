"""Reading speed and memory of large or many-member payloads (docs/PERFORMANCE.md,
"Reading a large or many-member payload").

    python benchmarks/bench_read.py [--only w128,g160000,...] [--out DIR] [--keep]

Writes NEFF-like files under benchmarks/out/read/ with Python's own tarfile and gzip, as an
outside tool following NEFF-LIKE.md would (no nrtrewrite code writes them):

* ``wN``: a valid three-member model plus an N MiB member of random bytes (gzip level 1);
* ``gK``: the model's tar.gz followed by K empty gzip members;
* ``zN``: the model plus one member of N MiB of zeros (gzip level 9: a few MB on disk).

N is at most 4095 (the reader's 4 GiB tar stream, :data:`READ_LIMIT`), K at most
:data:`MAX_GZIP_MEMBERS`; an empty ``--only`` is refused, as is any name that is not one.

Each file is then read in a fresh subprocess - ``gunzip_limited`` alone and the whole
``read_container`` (with ``max_member_bytes`` raised to 4 GiB so that ``z3584`` is read,
not refused) - and the wall time and the peak RSS of that process (VmHWM) are printed.  Not a
timed test: nothing is asserted.

A run holds ``--out``'s lock (``flock``, exclusive: the run writes its inputs there and
removes the new ones at its end) until it ends, the lock benchmarks/bench_diff.py holds on
its own ``--out``: another run of either script given the same ``--out`` meanwhile is
refused, one line, status 2, before it writes anything (``--out OUT: in use by another
bench_diff.py or bench_read.py run ...``; until 2026-12-07 this script took no lock, so it
read, and at its end removed, what a bench_diff.py run was moving into the folder), and so
is a ``--out`` on a file system that refuses ``flock`` (``--out OUT: its file system takes
no locks ...``).  Each input is written to a temporary sibling,
``.NAME.bench-read-tmp-PID-HEX``, renamed into place once whole; the run that holds the lock
first removes those killed runs left (and ``NAME.tmp`` of runs from before 2026-12-07, an
hour unchanged).  An input already in ``--out`` is measured again only when its header's
size and MD5 match its payload (a file cut short by a kill, or a copy, is written anew).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import random
import re
import secrets
import stat
import struct
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "out" / "read"
DEFAULT = ("w32", "w128", "g40000", "g160000", "z3584")

sys.path.insert(0, str(HERE))
from outdir import (checked_out, entries, hold_out, raise_lost_stop,  # noqa: E402
                    remove_new, stop_cleanly, write_new)


def _c7(n: int = 1024) -> bytes:
    """A 0xC7 word: all-reduce, ADD, BF16, group 0, var 0 -> var 1 (NEFF-LIKE.md §3)."""
    w = struct.pack("<BBH8sBBHIIQQQ", 0xC7, 16, 0, bytes(range(1, 9)), 4, 6, 0, 0, 1, 0, 0, n)
    return w.ljust(64, b"\0")


def _members() -> list[tuple[str, bytes]]:
    defn = {"var": [{"var_id": 0, "name": "in", "type": "input", "size": 8192},
                    {"var_id": 1, "name": "out", "type": "output", "size": 8192}],
            "replica_groups": [[0, 1, 2, 3]], "engines": ["sp"]}
    return [("neff.json", json.dumps({"neff_like_version": 1, "subgraphs": ["sg00"]}).encode()),
            ("sg00/def.json", json.dumps(defn).encode()), ("sg00/sp.bin", _c7())]


class _Source(io.RawIOBase):
    """``size`` bytes of zeros or of seeded random bytes, produced as they are read."""

    def __init__(self, size: int, zeros: bool):
        self.left, self.zeros, self.rng = size, zeros, random.Random(0)

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = min(len(b), self.left)
        b[:n] = bytes(n) if self.zeros else self.rng.randbytes(n)
        self.left -= n
        return n


def _tar_gz(extra: tuple[str, int, bool] | None, level: int) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=level, mtime=0) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.USTAR_FORMAT) as tf:
            for name, data in _members():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
            if extra:
                name, size, zeros = extra
                info = tarfile.TarInfo(name)
                info.size = size
                tf.addfile(info, io.BufferedReader(_Source(size, zeros), 1 << 20))
    return buf.getvalue()


def _neff(payload: bytes) -> bytes:
    """The 1024-byte header (pkg_version 2: MD5 of the payload) and the payload."""
    return _header(len(payload), hashlib.md5(payload).digest()) + payload


def _header(size: int, md5: bytes) -> bytes:
    """The header :func:`_neff` writes before a payload of ``size`` bytes whose MD5 is
    ``md5`` (NEFF-LIKE.md §1: ``data_size`` and the hash)."""
    h = struct.pack("<QQQQQ", 2, 1024, size, 1, 0) + bytes(128) + struct.pack("<I", 1)
    h += md5 + bytes(16) + bytes(16) + bytes(256)
    h += struct.pack("<I", 1) + bytes(64) + struct.pack("<QI", 0, 1) + bytes(468)
    assert len(h) == 1024
    return h


def is_whole(path: Path) -> bool:
    """Whether the file ``path`` is whole as :func:`_neff` writes a model: its header the one
    of the bytes after it, their count (``data_size``) and MD5 (a file cut short by a kill,
    or a copy with a hole, is not; nor one that cannot be read).  Reads it through once, a
    MiB at a time."""
    md5, size = hashlib.md5(), 0
    try:
        with open(path, "rb") as fh:
            head = fh.read(1024)
            while chunk := fh.read(1 << 20):
                md5.update(chunk)
                size += len(chunk)
    except OSError:
        return False
    return head == _header(size, md5.digest())


#: The decompressed tar stream ``read_container`` reads at most (``container.MAX_TOTAL_BYTES``,
#: which the measurement keeps; it raises only the member limit, to 4 GiB, for ``z3584``):
#: a ``wN`` or ``zN`` whose tar stream is larger cannot be read, so it is refused before
#: anything is written (until 2026-12-07 ``w8192`` and above ended in tarfile's ``ValueError:
#: overflow in number field`` and ``w4096`` was written whole, 4 GiB, before the reading
#: failed): N is at most 4095 (:func:`largest_mib`).
READ_LIMIT = 4 << 30
#: The most empty gzip members of ``gK``: a 20 MB file that gunzips in a few seconds (the
#: default's largest is ``g160000``); more only makes the run long, and the file is built in
#: memory.
MAX_GZIP_MEMBERS = 1_000_000
#: USTAR's blocks: a member is a 512-byte header and its data padded to 512 bytes; the
#: archive ends with two zero blocks and is padded to a record of 20 blocks (tarfile's).
_BLOCK, _RECORD = 512, 20 * 512


def tar_stream_bytes(sizes: list[int]) -> int:
    """The bytes of the tar stream of the model's three members and members of ``sizes``
    (as :func:`_tar_gz` writes it with tarfile, USTAR)."""
    def padded(n: int, unit: int) -> int:
        return -(-n // unit) * unit
    members = [len(data) for _, data in _members()] + list(sizes)
    return padded(sum(_BLOCK + padded(n, _BLOCK) for n in members) + 2 * _BLOCK, _RECORD)


def largest_mib(count: int, limit: int) -> int:
    """The largest N whose ``count`` members of N MiB fit a tar stream of ``limit`` bytes
    (0 when none does)."""
    lo, hi = 0, limit >> 20
    while lo < hi:  # (the stream grows with N)
        mid = (lo + hi + 1) // 2
        if tar_stream_bytes([mid << 20] * count) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return lo


def parse_input(name: str) -> tuple[str, int]:
    """``(kind, N)`` of an input's name (``wN``, ``gK`` or ``zN``); ValueError naming what
    is wrong: an unknown name, a ``wN`` or ``zN`` the reader cannot read (:data:`READ_LIMIT`),
    a ``gK`` over :data:`MAX_GZIP_MEMBERS`."""
    kind, digits = name[:1], name[1:]
    if kind not in ("w", "g", "z") or not (digits.isascii() and digits.isdigit()):
        raise ValueError(f"unknown input {name!r}: wN, gK or zN (e.g. w32)")
    n = int(digits)
    if kind == "g" and n > MAX_GZIP_MEMBERS:
        raise ValueError(f"input {name!r}: {n:,} empty gzip members, more than the "
                         f"{MAX_GZIP_MEMBERS:,} this script writes")
    if kind != "g" and tar_stream_bytes([n << 20]) > READ_LIMIT:
        raise ValueError(f"input {name!r}: a member of {n:,} MiB is more than read_container "
                         f"reads (a tar stream of at most 4 GiB): N at most "
                         f"{largest_mib(1, READ_LIMIT)}")
    return kind, n


def make(name: str, out: Path = OUT) -> Path:
    """The input ``OUT/NAME.neff``: the one there where it is whole (:func:`is_whole`), else
    written anew (a note on stderr where one was there; until 2026-12-07 any file of the
    name was measured)."""
    path = out / f"{name}.neff"
    if path.is_file() and not path.is_symlink():
        if is_whole(path):
            return path
        print(f"bench_read.py: {path}: not whole (its header's size or MD5 is not its "
              "payload's); written anew", file=sys.stderr)
    elif path.exists():
        return path  # (not a file of ours: measured as it is, which fails, as before)
    kind, n = parse_input(name)
    if kind == "w":
        payload = _tar_gz(("weights.bin", n << 20, False), 1)
    elif kind == "g":
        payload = _tar_gz(None, 9) + gzip.compress(b"", mtime=0) * n
    else:
        payload = _tar_gz(("zeros.bin", n << 20, True), 9)
    out.mkdir(exist_ok=True)
    write_whole(path, _neff(payload))
    return path


#: An input being written into ``--out``: ``.NAME.bench-read-tmp-PID-HEX`` beside its place,
#: renamed to NAME once whole (:func:`write_whole`); one a killed run left is removed by the
#: next run that holds ``--out``'s lock (:func:`remove_partial`), so no live run's.
_PARTIAL = re.compile(r"\.[wgz][0-9]+\.neff\.bench-read-tmp-[0-9]+-[0-9a-f]{8}", re.ASCII)

#: The same before 2026-12-07: ``NAME.tmp`` (``outdir.write_new``'s), written by runs that
#: took no lock: removed only an hour unchanged (no write of an input takes that long).
_OLD_PARTIAL = re.compile(r"[wgz][0-9]+\.tmp", re.ASCII)
OLD_STALE_AFTER_S = 3600


def write_whole(path: Path, data: bytes) -> None:
    """``data`` into ``path`` through a temporary sibling (:data:`_PARTIAL`), renamed over
    ``path`` once whole; whatever stops the write (an error, a stop) removes the sibling,
    and one a SIGKILL leaves is removed by the next run (until 2026-12-07 ``NAME.tmp`` in
    ``--out``, which a killed run left for good, counted by later runs as there before)."""
    tmp = path.parent / f".{path.name}.bench-read-tmp-{os.getpid()}-{secrets.token_hex(4)}"
    write_new(path, data, tmp)


def remove_partial(out: Path) -> list[Path]:
    """Remove what killed runs left half written in ``out``: the temporary siblings of
    :data:`_PARTIAL`'s shape (called with ``--out``'s lock held, so no live run's), and
    those of the shape before 2026-12-07 an hour unchanged; regular files only, this
    user's, nothing else looked at.  Returns what was removed."""
    removed = []
    try:
        names = sorted(os.listdir(out))
    except OSError:
        return removed
    now = time.time()
    for name in names:
        old = _OLD_PARTIAL.fullmatch(name) is not None
        if not (old or _PARTIAL.fullmatch(name)):
            continue
        try:
            st = os.lstat(out / name)
            if (not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid()
                    or (old and now - st.st_mtime <= OLD_STALE_AFTER_S)):
                continue
            os.unlink(out / name)
            removed.append(out / name)
        except OSError:
            pass
    return removed


_WORKER = r"""
import sys, time
from nrtrewrite.neff.container import HEADER_SIZE, Limits, gunzip_limited, read_container
from nrtrewrite.neff.container import read_file_bytes
what, path = sys.argv[1], sys.argv[2]
data = read_file_bytes(path)
t = time.perf_counter()
if what == "gunzip":
    n = len(gunzip_limited(memoryview(data)[HEADER_SIZE:], 5 << 30))
else:
    c = read_container(data, verify_hash=False, limits=Limits(max_member_bytes=4 << 30))
    n = sum(map(len, c.members.values()))
dt = time.perf_counter() - t
# VmHWM, not ru_maxrss: the latter keeps the forked parent's pages across the exec
rss = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024
print(f"{n} {dt:.3f} {rss:.0f}")
"""


def measure(what: str, path: Path) -> tuple[int, float, float]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, "-c", _WORKER, what, str(path)], env=env,
                         capture_output=True, text=True, check=True)
    n, dt, rss = res.stdout.split()
    return int(n), float(dt), float(rss)


#: the ``--help`` description, the docstring's first paragraph as a string: ``python -OO``
#: strips docstrings, where argparse read it from (no description until 2026-12-06)
DESCRIPTION = ('Reading speed and memory of large or many-member payloads (docs/PERFORMANCE.md, '
               '"Reading a large or many-member payload").')


def main() -> None:
    ap = argparse.ArgumentParser(description=DESCRIPTION)
    ap.add_argument("--only", help="comma-separated inputs (default: %s)" % ",".join(DEFAULT))
    ap.add_argument("--out", type=Path, help="where the inputs are written (default "
                    "benchmarks/out/read/; its parent folder must exist); locked while the "
                    "run lasts: another bench_read.py or bench_diff.py run given the same "
                    "--out is refused, and so is a folder whose file system takes no locks")
    ap.add_argument("--keep", action="store_true", help="keep the inputs afterwards (without it, "
                    "only what this run wrote into --out is removed; whatever --keep says, a "
                    "run first removes the temporary files killed runs left there: "
                    ".NAME.bench-read-tmp-PID-HEX, and an input's NAME.tmp (w1.tmp, g2.tmp: "
                    "the shape of runs before 2026-12-07) an hour unchanged)")
    args = ap.parse_args()
    if args.only is not None and not args.only.strip():  # (until 2026-12-07 the default set,
        ap.error("--only: no input named (leave --only out for the default set)")  # z3584's
    names = args.only.split(",") if args.only is not None else list(DEFAULT)  # 3.6 GB too)
    for name in names:  # every name checked before anything is written
        try:
            parse_input(name)
        except ValueError as err:
            ap.error(f"--only: {err}")
    out = checked_out(ap, args.out, OUT)
    stop_cleanly()  # SIGTERM and SIGHUP too remove what this run wrote, as Ctrl-C does

    made, held = hold_out("bench_read.py", out)  # (--out this run's alone until it ends)
    remove_partial(out)  # (a killed run's: not counted as there before)
    before = None if made else entries(out)  # never removed
    try:
        print(f"{'input':>9} {'file MB':>8} | {'gunzip s':>8} {'MB':>6} | {'read s':>7} "
              f"{'MB':>6} {'members MB':>10}")
        for name in names:
            raise_lost_stop()  # (a stop Python dropped in a finalizer: outdir.stop_cleanly)
            path = make(name, out)
            size = path.stat().st_size / 1e6
            _, g_dt, g_rss = measure("gunzip", path)
            n, r_dt, r_rss = measure("read", path)
            print(f"{name:>9} {size:8.1f} | {g_dt:8.2f} {g_rss:6.0f} | {r_dt:7.2f} {r_rss:6.0f} "
                  f"{n / 1e6:10.1f}", flush=True)
        raise_lost_stop()
    finally:
        if not args.keep:
            remove_new(out, before)
        os.close(held)


if __name__ == "__main__":
    main()
