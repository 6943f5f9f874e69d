"""docs/FORMATS.md §3: the ``*_first`` / ``*_count`` pairs of ``legs.bin`` cut sb2sb.bin,
dma.bin, cce.bin and sem.bin into consecutive ranges in leg order that cover each file
exactly.  Read from the bytes with the offsets of the §3 table (not the project's dtypes)."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from nrtrewrite.cli import main
from test_atomic_output import FIX

#: (file, offset of X_first, offset of X_count, width of X_count, record bytes): FORMATS §3-§7
RANGES = (("sb2sb.bin", 16, 20, 2, 64), ("dma.bin", 24, 28, 4, 16), ("cce.bin", 32, 36, 4, 16),
          ("sem.bin", 40, 44, 2, 16))


def _field(legs: np.ndarray, off: int, width: int) -> np.ndarray:
    raw = np.ascontiguousarray(legs[:, off:off + width])
    return raw.view("<u2" if width == 2 else "<u4").ravel().astype(np.int64)


@pytest.mark.parametrize("model, ranks", [("mix8", ["0", "5"]), ("c7c8", ["0"]),
                                          ("two_node128", ["0", "64"])])
def test_leg_ranges_are_consecutive_and_cover_each_file(tmp_path, model, ranks):
    out = tmp_path / "out"
    args = ["lower", "-q", str(FIX / f"{model}.neff"), "-o", str(out)]
    for r in ranks:
        args += ["--rank", r]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    for r in ranks:
        d = out / f"rank-{int(r):04d}"
        legs = np.fromfile(d / "legs.bin", np.uint8).reshape(-1, 64)
        assert legs.shape[0] > 0
        for name, first_off, count_off, width, size in RANGES:
            first, count = _field(legs, first_off, 4), _field(legs, count_off, width)
            assert first[0] == 0, (d, name)
            assert np.array_equal(first[1:], first[:-1] + count[:-1]), (d, name)
            assert first[-1] + count[-1] == (d / name).stat().st_size // size, (d, name)
