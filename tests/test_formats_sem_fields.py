"""FORMATS.md §4 (the 0xBF word's wait) and §7 (sem.bin's role byte) as the docs state them,
with values worked out from the semaphore layout (id 16 + 4c + role for ring channel c, the
event window at 192 + t), not read off the emitter."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nrtrewrite.codes import EncMeshEventType as E
from nrtrewrite.emit import formats as F
from nrtrewrite.emit.legs import sem_role
from test_simulate import coll_spec, lower_spec


def test_sem_role_byte_of_every_kind_of_semaphore():
    # channel c's block: recv 0, send 1, post 2, compl 3; anything else 0xFF
    assert sem_role(np.array([16, 17, 18, 19])).tolist() == [0, 1, 2, 3]
    assert sem_role(np.array([16 + 4 * 5 + 2])).tolist() == [2]  # post_sema of channel 5
    assert sem_role(np.array([16 + 4 * 31 + 3])).tolist() == [3]  # the last channel's compl
    assert sem_role(np.array([0, 8, 9, 15, 144, 144 + 47, 192, 200, 255])).tolist() == [0xFF] * 9


def _waiting_words(rdir: Path) -> list[tuple[int, int, int]]:
    """(leaf, wait_idx, semaphore_value) of each data leg's first word that waits."""
    words = np.fromfile(rdir / "sb2sb.bin", F.SB2SB_DTYPE)
    legs = np.fromfile(rdir / "legs.bin", F.LEG_DTYPE)
    out = []
    for leg in legs[legs["sb2sb_count"] > 0]:
        w = words[int(leg["sb2sb_first"])]
        if int(w["wait_mode"]):
            assert int(w["wait_mode"]) == 20
            out.append((int(leg["leaf"]), int(w["wait_idx"]), int(w["semaphore_value"])))
    return out


def test_ring_words_wait_on_recv_sema_1(tmp_path):
    out = lower_spec(coll_spec("all_reduce", "bf16", 4, 4096), tmp_path / "o")
    got = _waiting_words(out / "rank-0000")
    assert got and {(idx - 16) % 4 for _l, idx, _v in got} == {0}  # recv_sema of a channel
    assert all(16 <= idx < 144 and v == 1 for _l, idx, v in got)


def test_cross_node_mesh_reduce_waits_on_its_far_event(tmp_path):
    """A 2-rank MESH all-reduce across two nodes: the one peer is on another node, so the
    reduce's only wait is EVT_REDUCE_COPY_2 (9): id 192 + 9 = 201, one arrival."""
    spec = coll_spec("all_reduce", "bf16", [0, 64], 32768, lnc=2)
    out = lower_spec(spec, tmp_path / "o", algo="mesh", topology="trn2:nodes=2")
    mesh_reduce = 17
    for rank in (0, 64):
        got = _waiting_words(out / f"rank-{rank:04d}")
        assert (mesh_reduce, 192 + int(E.EVT_REDUCE_COPY_2), 1) in got
        assert all(idx >= 192 for _l, idx, _v in got)  # mesh words wait on events only
