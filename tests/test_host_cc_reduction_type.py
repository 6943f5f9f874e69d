"""Seed 001 §4: the ring all-reduce's host-CC final step is ``recv_reduce_copy_send(CHUNK_H0,
cce, 1, ...)``, whose third argument is the ``reduction_type_t`` (seed 000 §3.1, SEED-NOTES
"op vs shape"): RING_2R2W = 1, in legs.bin byte 14 and in the CCE descriptors' W3 bits
[9:8] (docs/FORMATS.md §3, §6); every other ring reduce leaf passes RING_2R1W = 0.  Read
from the bytes at FORMATS.md's offsets, and the simulator refuses the old value."""

from __future__ import annotations

import numpy as np
import pytest

from test_atomic_output import FIX
from test_mutation import Out, failure_text
from test_simulate import cli

RECV_REDUCE_COPY_SEND = 4  # FORMATS.md §3 leaf codes
RECV_REDUCE_SEND, RECV_REDUCE_COPY = 2, 3


def _legs(rank_dir):
    raw = np.fromfile(rank_dir / "legs.bin", np.uint8).reshape(-1, 64)
    u32 = lambda off: np.ascontiguousarray(raw[:, off:off + 4]).view("<u4").ravel()
    return {"sdma_op": raw[:, 7], "leaf": raw[:, 12], "reduction_type": raw[:, 14],
            "cce_first": u32(32), "cce_count": u32(36)}


@pytest.fixture(scope="module")
def host_cc(tmp_path_factory):
    out = tmp_path_factory.mktemp("hc") / "out"
    res = cli("lower", "-q", FIX / "c7c8.neff", "--algo", "ring", "--host-cc", "-o", out)
    assert res.exit_code == 0, res.output
    return out


@pytest.mark.parametrize("rank", [0, 1, 3])
def test_host_cc_final_step_is_ring_2r2w_in_legs_and_cce(host_cc, rank):
    d = host_cc / f"rank-{rank:04d}"
    legs = _legs(d)
    w3 = np.fromfile(d / "cce.bin", np.uint8).reshape(-1, 16)[:, 12:16].copy().view("<u4").ravel()
    red = legs["sdma_op"] == 4
    final = red & (legs["leaf"] == RECV_REDUCE_COPY_SEND)
    assert final.any() and (legs["reduction_type"][final] == 1).all()
    others = red & ~final
    assert set(legs["leaf"][others].tolist()) <= {RECV_REDUCE_SEND, RECV_REDUCE_COPY}
    assert others.any() and (legs["reduction_type"][others] == 0).all()
    for i in np.flatnonzero(red):
        a, n = int(legs["cce_first"][i]), int(legs["cce_count"][i])
        assert n and set(((w3[a:a + n] >> 8) & 3).tolist()) == {int(legs["reduction_type"][i])}


def test_host_cc_output_simulates_and_the_old_value_is_refused(host_cc, tmp_path):
    res = cli("simulate", host_cc)
    assert res.exit_code == 0, res.output
    mut = Out(host_cc, tmp_path / "mut")
    i = int(np.flatnonzero(mut.arr(1, "legs.bin")["leaf"] == RECV_REDUCE_COPY_SEND)[0])
    mut.edit(1, "legs.bin", lambda a: a["reduction_type"].__setitem__(i, 0))
    assert "reduction_type" in failure_text(mut.simulate())
