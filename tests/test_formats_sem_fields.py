"""FORMATS.md §4 (the 0xBF word's wait and lnc_size_fmt byte), §7 (sem.bin's role byte) and
§3 (legs.bin's ring_step) as the docs state them, with values worked out from the seeds and
the semaphore layout (id 16 + 4c + role for ring channel c, the event window at 192 + t),
not read off the emitter."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

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


def test_sb2sb_lnc_size_fmt_byte_is_0_for_lnc1_and_1_for_lnc2(tmp_path):
    """FORMATS.md §4, byte 32 of every 64-byte 0xBF word: lnc_size_fmt, 0 = LNC1, 1 = LNC2
    (read as raw bytes: the simulator checks this field with the emitter's own table)."""
    for lnc, want in ((1, 0), (2, 1)):
        out = lower_spec(coll_spec("all_reduce", "bf16", 4, 4096, lnc=lnc), tmp_path / f"o{lnc}")
        raw = np.fromfile(out / "rank-0000" / "sb2sb.bin", np.uint8)
        assert raw.size and raw.size % 64 == 0
        assert set(raw.reshape(-1, 64)[:, 32].tolist()) == {want}


def test_legs_ring_step_counts_on_across_chunk_groups(tmp_path):
    """FORMATS.md §3 legs.bin ``ring_step``: the step within the chunk group + the group x
    the channel's steps per group.  A ring all-reduce over n ranks has 2n - 1 steps per
    chunk group (seed 001 §4: send, (n-2) x recv_reduce_send, recv_reduce_copy_send, then
    (n-2) x direct_recv_send, direct_recv), and G chunk groups of n x ch_n x chunk elements
    (seed 001 §2; chunk: docs/DESIGN.md's 512 KiB budget, 262,144 bf16 elements), so every
    channel's data legs number their steps 0 .. G(2n - 1) - 1, in order, each at least once."""
    n, chunk = 4, (512 << 10) // 2
    num = 3 * n * chunk + 1000  # more than one group of 2 channels
    out = lower_spec(coll_spec("all_reduce", "bf16", n, num), tmp_path / "o")
    rdir = out / "rank-0000"
    legs = np.fromfile(rdir / "legs.bin", F.LEG_DTYPE)
    channels = sorted(set(legs["channel"].tolist()))
    groups = -(-num // (n * len(channels) * chunk))
    assert len(channels) == 2 and groups == 2
    for ch in channels:
        steps = legs[(legs["channel"] == ch) & (legs["num_elements"] > 0)]["ring_step"]
        assert sorted(set(steps.tolist())) == list(range(groups * (2 * n - 1)))
        assert np.all(np.diff(steps.astype(np.int64)) >= 0)


@pytest.mark.parametrize("ranks, evt", [([0, 1], E.EVT_REDUCE_COPY),
                                        ([0, 1, 2], E.EVT_INTRA_GRP_BRDCST)])
def test_single_step_mesh_reduce_waits_on_the_event_of_its_group_size(tmp_path, ranks, evt):
    """FORMATS.md §7 events table, SINGLE_STEP_MESH: the inputs arrive on
    EVT_INTRA_GRP_BRDCST (7) from the peers on this device, "two ranks: EVT_REDUCE_COPY (8)"
    (the runtime's ``t0``).  Ranks 0..2 at LNC 1 share device 0: the reduce waits for
    ``n - 1`` arrivals on 192 + 8 = 200 (two ranks) or 192 + 7 = 199 (three)."""
    spec = coll_spec("all_reduce", "bf16", ranks, 4096)
    out = lower_spec(spec, tmp_path / "o", algo="single_step_mesh", ranks=[0])
    got = _waiting_words(out / "rank-0000")
    assert (17, 192 + int(evt), len(ranks) - 1) in got


def test_send_sema_is_posted_and_taken_once_per_network_destination(tmp_path):
    """FORMATS §8.1 "Who increments `send_sema`" and its example: a bf16 all-gather of 2048
    elements a rank over [64*i for i in range(10)] of trn2:nodes=10 at LNC 2, --algo mesh.
    Rank 0 has 9 network destinations, at most 8 a mesh row (DESIGN "Completion and reuse"):
    one mesh_send leg to ranks 64..512, one to 576.  send_sema of channel 0 is id 16 + 4*0 + 1
    = 17, its INC-window address 0x8280000000 + 0x1800 + 4*17 = 0x8280001844 on TOP_SP 0
    (FORMATS §10).  The first leg increments it 8 times, the second once: 9 posts, and the
    proxy takes one per destination's run, the 9 runs ending with complete = 1 (one entry
    each: 2048 elements fit one run), then the terminator and the basic block's
    EXEC_COMPLETE entry (FORMATS §8 "Basic blocks").  The spec is pinned to the
    example: its all-gather counts 2048 elements of each rank's input (NEFF-LIKE.md:
    `num_elements` counts a rank's input; all-gather out = N x group size), 4096 bytes of
    bf16 in, 10 x 4096 out, as FORMATS' paragraph says."""
    spec = coll_spec("all_gather", "bf16", [64 * i for i in range(10)], 2048, lnc=2)
    doc = (Path(__file__).parent.parent / "docs" / "FORMATS.md").read_text()
    para = doc[doc.index("**Who increments `send_sema` (our reading).**"):]
    para = " ".join(para[:para.index("\n\n")].split())
    assert ("a bf16 all-gather of 2048 elements a rank over `[64*i for i in range(10)]` of "
            "`trn2:nodes=10` at LNC 2 with `--algo mesh`") in para
    sg, = spec["subgraphs"]
    assert spec["header"]["lnc_size"] == 2
    assert sg["replica_groups"] == [[0, 64, 128, 192, 256, 320, 384, 448, 512, 576]]
    body = sg["engines"]["sp"][1]["all_gather"]
    assert (body["dtype"], body["num_elements"]) == ("bf16", 2048)
    sizes = {v["name"]: (v["type"], v["size"]) for v in sg["vars"]}
    assert sizes == {"x_in": ("input", 2048 * 2), "x_out": ("output", 10 * 2048 * 2)}
    assert (body["src"], body["dst"]) == ("x_in", "x_out")
    out = lower_spec(spec, tmp_path / "o", algo="mesh", topology="trn2:nodes=10")
    rdir = out / "rank-0000"
    send_inc = 0x8280001844
    ops = np.fromfile(rdir / "net_ops.bin", F.ARTIFACTS["net_ops.bin"][0])
    assert ops["inc_send_handshake"].tolist() == [send_inc]
    sems = np.fromfile(rdir / "sem.bin", F.ARTIFACTS["sem.bin"][0])
    legs = np.fromfile(rdir / "legs.bin", F.LEG_DTYPE)
    posts = []
    for leg in legs:
        first, n = int(leg["sem_first"]), int(leg["sem_count"])
        mine = sems[first:first + n]
        posts.append(int(mine["value"][mine["addr"] == send_inc].sum()))
    assert sorted(p for p in posts if p) == [1, 8]
    src = np.fromfile(rdir / "net_src.bin", F.NET_SRC_ADDR_DTYPE)
    assert src["complete"].tolist() == [1] * 9 + [0, 0]
    assert sum(posts) == int((src["complete"][src["mark"] == 0] == 1).sum()) == 9
    assert "once per network destination of a device leg, not once per device leg" in para
    assert "[1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0], 9 proxy legs" in para
    # seed 003 (its NOTE on node_next.src_addr_fifo, its opening): the direction's support
    assert 'a leaf "posts a send credit"' in para and '"credits against the network' in para
