"""benchmarks/digests.py: the digests a team decision on the manifests could pick, measured
beside numpy's copy (docs/PERFORMANCE.md "What closing issue 8 would take")."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "benchmarks" / "digests.py"
sys.path.insert(0, str(ROOT / "benchmarks"))

import digests  # noqa: E402


def test_each_candidate_digests_the_buffer_it_was_given():
    """FIPS 180-2's test vector for "abc" (SHA-256), and every hashlib one as hashlib
    itself computes it: the candidates time the buffer, not another."""
    fns = digests.candidates(b"abc")
    assert fns["sha256"]().hex() == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    for name in ("sha1", "md5", "sha512", "blake2b", "blake2s", "sha3_256"):
        assert fns[name]() == hashlib.new(name, b"abc").digest()
    assert fns["zlib.crc32 (not a digest)"]() == 0x352441C2  # CRC-32 of "abc"


def test_the_tool_prints_a_row_per_candidate():
    proc = subprocess.run([sys.executable, str(TOOL), "--mib", "1", "--reps", "1"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = [ln for ln in proc.stdout.splitlines()
            if re.match(r"\S.* +\d+\.\d\d +\d+\.\d%  +\d+\.\d{3} s$", ln)]
    assert [r.split()[0] for r in rows][:2] == ["sha256", "sha1"]
    assert len(rows) == len(digests.candidates(b""))


@pytest.mark.parametrize("args, says", [(["--mib", "0"], "--mib must be at least 1"),
                                        (["--mib", "-1"], "--mib must be at least 1"),
                                        (["--reps", "0"], "--reps must be at least 1")])
def test_sizes_and_repetitions_below_one_are_refused(args, says):
    proc = subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines()[-1] == f"digests.py: error: {says}"
