"""The ring all-reduce stages a chunk position's partial and, later, its final at the same
bytes of its one gateway view (docs/FORMATS.md §8 "Reusing a gateway view", docs/DESIGN.md
"Completion and reuse").  The expected records are worked out by hand from the ring
template of seed 001 §4 and the memory layout of FORMATS §10, not read off the emitter."""

from __future__ import annotations

import json
import re

import meshcase
import numpy as np
from click.testing import CliRunner

from nrtrewrite.cli import main
from nrtrewrite.emit import formats as F
from nrtrewrite.simulate import simulate_output

DRAM = 0x1_0000_0000  # dram_base: logical core 0's window (FORMATS §10)


def test_the_ring_all_reduce_stages_partial_and_final_of_a_position_in_one_view(tmp_path):
    """Ranks [0, 64, 128] of trn2:nodes=3 at LNC 2 (one a node), a bf16 all-reduce of 2048
    elements, --algo ring, one channel, one chunk group.  Layout (4096-byte aligned): i at 0,
    o at 4096, scratch at 8192, gw at 12288.  Positions of 683 -> 684 elements (the tail chunk
    rounded up to even): [0, 684), [684, 1368), [1368, 2048), each cut into halves of 342
    elements (the last: 342 and 338).  Rank 0's ring is 0 -> 64 -> 128 (na = [0, 64, 128]):
    step 0 `send` of na[2] (position 2), step 1 `recv_reduce_send` of na[1] (position 1),
    both partials into rank 64's scratch; step 2 `direct_copy_send` of na[0] (position 0)
    and step 3 `direct_recv_send` of na[2] (position 2), finals into rank 64's OUT.  So
    position 2 is staged twice at the same gateway bytes: n - 2 = 1 position, two halves.
    The rewrite is safe because the final of position 2 exists only after rank 64 has
    consumed the partial the proxy copied; the simulator's race check holds the proxy's read
    of the first staging before the second write, so the run matching pins the order."""
    out = tmp_path / "out"
    meshcase.lower(meshcase.spec([[0, 64, 128]], [("all_reduce", "bf16", "add", 2048)],
                                 lnc=2), out, algo="ring", topology="trn2:nodes=3")
    rdir = out / "rank-0000"
    man = json.loads((rdir / "manifest.json").read_text())
    assert [f["channel"] for f in man["fifo"]] == [0]
    src = np.fromfile(rdir / "net_src.bin", F.NET_SRC_ADDR_DTYPE)
    gw, scratch, o = DRAM + 12288, DRAM + 8192, DRAM + 4096
    halves = [(1368, 342), (1710, 338), (684, 342), (1026, 342), (0, 342), (342, 342),
              (1368, 342), (1710, 338)]  # (first element, elements), in FIFO order
    dst_base = [scratch] * 4 + [o] * 4
    assert src["mark"].tolist() == [0] * 8 + [1, 2]  # (the block's EXEC_COMPLETE entry last)
    assert src["dev_addr"][:8].tolist() == [gw + 2 * e for e, _ in halves]
    assert src["size"][:8].tolist() == [2 * n for _, n in halves]
    assert src["dst_addr"][:8].tolist() == [b + 2 * e for b, (e, _) in zip(dst_base, halves)]
    assert src["dst_rank"].tolist() == [64] * 8 + [-1, -1]
    # the partial (records 0, 1) and the final (6, 7) of position 2: one staging each half
    assert src["dev_addr"][0] == src["dev_addr"][6] and src["dev_addr"][1] == src["dev_addr"][7]
    sim = simulate_output(out, seed=0)
    assert sim.error is None and [t.status for t in sim.triggers] == ["match"]


def test_simulate_refuses_a_second_row_staged_in_the_first_row_s_view(tmp_path):
    """The mutation the rule guards against (FORMATS §8 "Reusing a gateway view", DESIGN
    "Completion and reuse": MESH stages each row of its broadcast, at most 8 destinations a
    row, in its own whole-op gateway copy).  A bf16 all-gather of 16 elements a rank over
    ranks [0, 64, ..., 576] of trn2:nodes=10 at LNC 2, --algo mesh (an inter-node mesh takes
    one rank a node, so 10 nodes is the fewest that give a rank 9 network destinations: two
    rows).  Layout (FORMATS §10, 4096-byte aligned): i at 0 (32 bytes), o at 4096 (320),
    scratch at 8192 (empty), gw at 8192; the op's bytes are the output's, 320, so gateway
    view k is at dram_base + 8192 + 320 k.  Rank 0's legs: its own block IN -> OUT (dma.bin
    BDs 0, 1), the row of ranks 64..512 (BD 2 reads IN, BDs 3..10 write view 0 once per
    destination), the row of rank 576 (BD 11 reads IN, BD 12 writes view 1); net_src.bin
    records 0..7 read view 0, record 8 view 1.  Pointing BD 12 and record 8 at view 0 makes
    the second row overwrite bytes the proxy may not have read for records 0..7: nothing
    orders the row's write after those reads, and simulate must say so, naming the leg and
    the proxy transfer."""
    out = tmp_path / "out"
    ranks = [64 * i for i in range(10)]
    meshcase.lower(meshcase.spec([ranks], [("all_gather", "bf16", "add", 16)], lnc=2), out,
                   algo="mesh", topology="trn2:nodes=10")
    rdir = out / "rank-0000"
    view0, view1 = DRAM + 8192, DRAM + 8192 + 320
    dma = np.fromfile(rdir / "dma.bin", F.ARTIFACTS["dma.bin"][0])
    src = np.fromfile(rdir / "net_src.bin", F.NET_SRC_ADDR_DTYPE)
    assert dma["buf_ptr"].tolist() == ([DRAM, DRAM + 4096, DRAM] + [view0] * 8
                                       + [DRAM, view1])
    assert src["dev_addr"].tolist() == [view0] * 8 + [view1, 0, 0]  # (terminator, EXEC_COMPLETE)
    assert src["dst_rank"].tolist() == ranks[1:] + [-1, -1]
    assert src["complete"].tolist() == [1] * 9 + [0, 0]  # one proxy leg per destination
    res = CliRunner().invoke(main, ["simulate", str(out)])
    assert res.exit_code == 0, res.output
    dma["buf_ptr"][12] = view0
    dma.tofile(rdir / "dma.bin")
    src["dev_addr"][8] = view0
    src.tofile(rdir / "net_src.bin")
    for seed in range(3):
        res = CliRunner().invoke(main, ["simulate", str(out), "--ignore-checksums",
                                        "--seed", str(seed)])
        assert res.exit_code == 1, res.output
        last = res.output.strip().splitlines()[-1]
        m = re.fullmatch(
            r'protocol error: trigger 0, rank 0: leg mesh_send \(rank 0, entry 0, channel 0, '
            r'step 2\) writes bytes \[0x0, 0x20\) of rank 0 gw "gw" \(address 0x100002000\) '
            r'that net proxy transfer \(rank 0 -> (\d+), channel 0, net_src\.bin record '
            r'(\d)\) reads with no happens-before ordering \(the read may see either value\)',
            last)
        assert m, last
        record = int(m.group(2))
        assert record < 8 and int(m.group(1)) == ranks[1 + record]
