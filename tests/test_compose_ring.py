"""The ring composers against the seed's identities and an independent NCCL-rule simulation.

Expected values here come from seed 001 §4 (step counts), seed 000 §5.1-5.3 (leaf census)
and NCCL's runRing chunk rule quoted in REFERENCES.md - never from the composer itself.
"""

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from nrtrewrite.codes import DType, EncOpType
from nrtrewrite.compose.chunking import set_dynamic_chunk_size
from nrtrewrite.compose.leaves import Leaf
from nrtrewrite.compose.ring import (
    PHASE_ALL_GATHER, PHASE_REDUCE_SCATTER, channel_template, compose_channel,
)
from nrtrewrite.errors import LoweringError


def user_ranks(order, rank):
    i = order.index(rank)
    return tuple(order[(i + j) % len(order)] for j in range(len(order)))


SENDING = {Leaf.send, Leaf.recv_reduce_send, Leaf.recv_reduce_copy_send, Leaf.direct_copy_send,
           Leaf.direct_recv_send}
RECEIVING = {Leaf.recv_reduce_send, Leaf.recv_reduce_copy, Leaf.recv_reduce_copy_send,
             Leaf.direct_recv_send, Leaf.direct_recv}


@pytest.mark.parametrize("n", range(2, 17))
def test_allreduce_step_identity(n):
    rows = channel_template(EncOpType.ALLREDUCE, n)
    census = Counter(leaf for _s, _ph, leaf, _i, _h in rows)
    # 2(n-1) transfers per chunk group, each issued for CHUNK_H0 and CHUNK_H1: every rank
    # sends 2(n-1) x 2 half-chunks and receives as many (NCCL ring; seed 001 §4).
    assert sum(c for leaf, c in census.items() if leaf in SENDING) == 2 * (n - 1) * 2
    assert sum(c for leaf, c in census.items() if leaf in RECEIVING) == 2 * (n - 1) * 2
    # seed 001 §4 loop bounds: send; rank_n-2 recv_reduce_send; the final reduce step
    # (device path: recv_reduce_copy + direct_copy_send); rank_n-2 direct_recv_send;
    # direct_recv.  The seed sums the reduce-scatter leaf steps to rank_n-1, but its own
    # bounds give rank_n leaf steps of which rank_n-1 transfer (docs/DESIGN.md).
    assert census == Counter({Leaf.send: 2, Leaf.recv_reduce_send: 2 * (n - 2),
                              Leaf.recv_reduce_copy: 2, Leaf.direct_copy_send: 2,
                              Leaf.direct_recv_send: 2 * (n - 2), Leaf.direct_recv: 2})
    rs_steps = {s for s, ph, *_ in rows if ph == PHASE_REDUCE_SCATTER}
    ag_steps = {s for s, ph, *_ in rows if ph == PHASE_ALL_GATHER}
    assert len(rs_steps) == n and len(ag_steps) == n - 1
    # every step is two leaf calls per leaf kind, CHUNK_H0 then CHUNK_H1
    for s in rs_steps | ag_steps:
        by_leaf = {}
        for st_, _ph, lf, _i, h in rows:
            if st_ == s:
                by_leaf.setdefault(lf, []).append(h)
        assert all(hs == [0, 1] for hs in by_leaf.values())
    # the half-chunk pipeline order of the device-path final step (seed 001 §4)
    final = [(lf, h) for st_, _ph, lf, _i, h in rows if st_ == n - 1]
    assert final == [(Leaf.recv_reduce_copy, 0), (Leaf.direct_copy_send, 0),
                     (Leaf.recv_reduce_copy, 1), (Leaf.direct_copy_send, 1)]


@pytest.mark.parametrize("n", range(2, 17))
def test_host_cc_final_step(n):
    census = Counter(leaf for _s, _ph, leaf, _i, _h in channel_template(EncOpType.ALLREDUCE, n,
                                                                        host_cc=True))
    assert census[Leaf.recv_reduce_copy_send] == 2
    assert census[Leaf.recv_reduce_copy] == 0 and census[Leaf.direct_copy_send] == 0


@pytest.mark.parametrize("n", range(2, 17))
def test_allgather_is_copy_only(n):
    census = Counter(leaf for _s, _ph, leaf, _i, _h in channel_template(EncOpType.ALLGATHER, n))
    # seed 000 §5.2: zero recv_reduce_* leaves
    assert not any(lf in census for lf in (Leaf.recv_reduce_send, Leaf.recv_reduce_copy,
                                           Leaf.recv_reduce_copy_send))
    assert census[Leaf.send] == 2 and census[Leaf.direct_recv] == 2
    assert census[Leaf.direct_recv_send] == 2 * (n - 2)


@pytest.mark.parametrize("n", range(2, 17))
def test_reduce_scatter_is_phase_one(n):
    rows = channel_template(EncOpType.REDUCE_SCATTER, n)
    assert {ph for _s, ph, *_ in rows} == {PHASE_REDUCE_SCATTER}
    assert len({s for s, *_ in rows}) == n  # send, rank_n-2 recv_reduce_send, final reduce
    assert sum(1 for r in rows if r[2] in SENDING) == (n - 1) * 2  # n-1 transfers x 2 halves
    assert rows[-1][2] == Leaf.recv_reduce_copy


@pytest.mark.parametrize("op", [EncOpType.BROADCAST, EncOpType.REDUCE, EncOpType.ALLTOALL])
def test_ring_refuses(op):
    with pytest.raises(LoweringError, match="not supported operation"):
        channel_template(op, 4)


def nccl_allreduce_chunks(n, ring_ix):
    """NCCL runRing's chunk per step for the rank at ring index ring_ix (REFERENCES.md)."""
    def mod(x):
        return x % n

    rs = [mod(ring_ix - 1)] + [mod(ring_ix - j) for j in range(2, n)] + [ring_ix]
    ag = [mod(ring_ix - j) for j in range(1, n - 1)] + [mod(ring_ix + 1)]
    return rs, ag


@pytest.mark.parametrize("n", range(2, 17))
def test_chunk_positions_follow_nccl(n):
    order = tuple(range(100, 100 + n))  # ranks ids != ring index on purpose
    plan = set_dynamic_chunk_size(EncOpType.ALLREDUCE, 64 * n, n, DType.BF16, 1)
    for ix, rank in enumerate(order):
        steps = compose_channel(EncOpType.ALLREDUCE, plan, 0, user_ranks(order, rank),
                                {r: i for i, r in enumerate(order)}).steps
        ks = {}
        for s in steps:
            ks.setdefault((int(s["phase"]), int(s["step"])), set()).add(order.index(int(s["k"])))
        rs, ag = nccl_allreduce_chunks(n, ix)
        got_rs = [ks[(PHASE_REDUCE_SCATTER, s)] for s in range(n - 1 + 1) if
                  (PHASE_REDUCE_SCATTER, s) in ks]
        assert [next(iter(x)) for x in got_rs] == rs
        got_ag = [next(iter(ks[(PHASE_ALL_GATHER, s)])) for s in range(n, 2 * n - 1)
                  if (PHASE_ALL_GATHER, s) in ks]
        assert got_ag == ag


def symbolic_run(op, n, plan, order):
    """Execute the composed leaves on sets of contributions (independent chunk-level model).

    Each message is a set of ranks whose inputs it holds for one (group, position, half).
    """
    gi = {r: i for i, r in enumerate(order)}
    progs = {r: list(compose_channel(op, plan, 0, user_ranks(order, r), gi).steps) for r in order}
    inbox = {r: [] for r in order}  # FIFO of messages from the predecessor
    recv = {r: {} for r in order}  # RECV slot contents: key -> set
    out = {r: {} for r in order}
    pc = {r: 0 for r in order}
    nxt = {r: order[(order.index(r) + 1) % n] for r in order}

    def key(s):
        return (int(s["group"]), int(s["pos"]), int(s["half"]))

    progress = True
    while progress:
        progress = False
        for r in order:
            if pc[r] >= len(progs[r]):
                continue
            s = progs[r][pc[r]]
            leaf = Leaf(int(s["leaf"]))
            k = key(s)
            waits = leaf in (Leaf.recv_reduce_send, Leaf.recv_reduce_copy,
                             Leaf.recv_reduce_copy_send, Leaf.direct_recv_send, Leaf.direct_recv)
            if waits:
                if not inbox[r]:
                    continue
                kind, mk, payload = inbox[r].pop(0)
                assert mk == k, (r, leaf, mk, k)
                (recv if kind == "recv" else out)[r][k] = payload
            if leaf == Leaf.send:
                dest = "out" if op == EncOpType.ALLGATHER else "recv"
                inbox[nxt[r]].append((dest, k, frozenset({r})))
            elif leaf == Leaf.recv_reduce_send:
                inbox[nxt[r]].append(("recv", k, recv[r][k] | {r}))
            elif leaf == Leaf.recv_reduce_copy:
                out[r][k] = recv[r][k] | {r}
            elif leaf == Leaf.direct_copy_send:
                inbox[nxt[r]].append(("out", k, out[r][k]))
            elif leaf == Leaf.direct_recv_send:
                inbox[nxt[r]].append(("out", k, out[r][k]))
            elif leaf == Leaf.direct_copy:
                out[r][k] = frozenset({r})
            pc[r] += 1
            progress = True
    assert all(pc[r] == len(progs[r]) for r in order), "deadlock"
    assert not any(inbox.values()), "unconsumed messages"
    return out


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 13, 16])
@pytest.mark.parametrize("op", [EncOpType.ALLREDUCE, EncOpType.ALLGATHER,
                                EncOpType.REDUCE_SCATTER])
def test_symbolic_ring_is_a_correct_collective(n, op):
    order = tuple(reversed(range(n)))
    plan = set_dynamic_chunk_size(op, 96 * n, n, DType.BF16, 1)
    out = symbolic_run(op, n, plan, order)
    everyone = frozenset(order)
    for r in order:
        if op == EncOpType.ALLREDUCE:
            # every rank holds the full reduction of every (group, position, half)
            assert len(out[r]) == 2 * n * plan.groups
            assert all(v == everyone for v in out[r].values())
        elif op == EncOpType.REDUCE_SCATTER:
            # only its own block, fully reduced
            assert set(k[1] for k in out[r]) == {order.index(r)}
            assert all(v == everyone for v in out[r].values())
        else:
            # block b holds exactly group member b's input
            assert len(out[r]) == 2 * n * plan.groups
            assert all(v == frozenset({order[k[1]]}) for k, v in out[r].items())


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 32), count=st.integers(1, 3_000_000),
       op=st.sampled_from([EncOpType.ALLREDUCE, EncOpType.ALLGATHER, EncOpType.REDUCE_SCATTER]),
       dtype=st.sampled_from([DType.BF16, DType.FP8_E4, DType.FP32R]), channels=st.integers(1, 32))
def test_chunk_layout_covers_exactly(n, count, op, dtype, channels):
    """Every element of every block is covered exactly once by (group, channel, pos, half)."""
    num = count * n if op == EncOpType.REDUCE_SCATTER else count
    plan = set_dynamic_chunk_size(op, num, n, dtype, channels)
    assert plan.chunk % 32 == 0 and plan.tail_chunk % 2 == 0 and plan.tail_chunk <= plan.chunk
    g, ch, pos, half = np.meshgrid(np.arange(plan.groups), np.arange(plan.channels),
                                   np.arange(n), np.arange(2), indexing="ij")
    start, stop = plan.half_ranges(g.ravel(), ch.ravel(), pos.ravel(), half.ravel())
    total = plan.span * (n if plan.blocks else 1)
    keep = stop > start
    s, e = np.sort(start[keep]), np.sort(stop[keep])
    assert s[0] == 0 and e[-1] == total
    assert np.array_equal(s[1:], e[:-1])  # contiguous, no overlap, no hole


# The chunk plan against docs/DESIGN.md "Chunking" (test_chunk_layout_covers_exactly above
# checks coverage of whatever span the plan names, so a wrong span, block flag, position
# order or chunk size would still pass it).  The model below is written from the doc.

DESIGN_DSIZE = {DType.BF16: 2, DType.FP8_E4: 1, DType.FP32R: 4}  # FP32R sizes as fp32


def design_chunk_plan(op, num, n, dtype, max_channels, chunk_bytes=512 * 1024):
    """(span, blocks, channels, chunk, groups, tail_chunk) as docs/DESIGN.md states them."""
    def up(a, m):
        return -(-a // m) * m

    blocks = op in (EncOpType.ALLGATHER, EncOpType.REDUCE_SCATTER)
    span = num // n if op == EncOpType.REDUCE_SCATTER else num  # a block: count elements
    per_position = span if blocks else -(-span // n)
    channels = max(1, min(max_channels, per_position // 64))  # >= 64 elements per position
    budget = max(32, chunk_bytes // DESIGN_DSIZE[dtype] // 32 * 32)
    chunk = min(budget, up(-(-per_position // channels), 32))
    positions = channels * (1 if blocks else n)  # chunk positions of one group
    groups = max(1, -(-span // (positions * chunk)))
    remained = span - (groups - 1) * positions * chunk
    tail = min(chunk, up(max(1, -(-remained // positions)), 2))
    return span, blocks, channels, chunk, groups, tail


def design_half_range(plan_t, n, g, ch, pos, half):
    """[start, stop) of (group, channel, position, half), docs/DESIGN.md "Chunking"."""
    span, blocks, channels, chunk, groups, tail = plan_t
    cs = tail if g == groups - 1 else chunk
    if blocks:  # block pos, groups of ch_n chunks
        s = min(g * channels * chunk + ch * cs + half * (cs // 2), span)
        return pos * span + s, pos * span + min(s + cs // 2, span)
    s = min(g * n * channels * chunk + (n * ch + pos) * cs + half * (cs // 2), span)
    return s, min(s + cs // 2, span)


def plan_tuple(plan):
    return plan.span, plan.blocks, plan.channels, plan.chunk, plan.groups, plan.tail_chunk


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 32), count=st.integers(1, 3_000_000),
       op=st.sampled_from([EncOpType.ALLREDUCE, EncOpType.ALLGATHER, EncOpType.REDUCE_SCATTER]),
       dtype=st.sampled_from([DType.BF16, DType.FP8_E4, DType.FP32R]), channels=st.integers(1, 32))
def test_chunk_plan_follows_design(n, count, op, dtype, channels):
    """Span, block flag, channels, chunk, groups, tail chunk and every half's range as
    docs/DESIGN.md "Chunking" gives them (an independent model, not the plan's own sums)."""
    num = count * n if op == EncOpType.REDUCE_SCATTER else count
    plan = set_dynamic_chunk_size(op, num, n, dtype, channels)
    want = design_chunk_plan(op, num, n, dtype, channels)
    assert plan_tuple(plan) == want
    assert want[0] == count  # ALLREDUCE: the message; a block of count otherwise
    g, ch, pos, half = (a.ravel() for a in np.meshgrid(
        np.arange(want[4]), np.arange(want[2]), np.arange(n), np.arange(2), indexing="ij"))
    start, stop = plan.half_ranges(g, ch, pos, half)
    pick = np.unique(np.r_[np.arange(min(64, g.size)), np.arange(max(0, g.size - 64), g.size),
                           np.linspace(0, g.size - 1, 64).astype(np.int64)])
    for i in pick:  # the first and last groups in full, a sample in between
        assert (start[i], stop[i]) == design_half_range(want, n, g[i], ch[i], pos[i], half[i])


# (op, N, rank_n, max channels, chunk bytes) -> (span, blocks, channels, chunk, groups,
# tail), then (g, ch, pos, half) -> [start, stop): worked out by hand from docs/DESIGN.md.
HAND_PLANS = [
    # per position ceil(1000/4) = 250 -> 2 channels (250 // 64 = 3), chunk up32(125) = 128,
    # one group of 4*2*128 = 1024 >= 1000; tail ceil(1000/8) = 125 -> 126
    ((EncOpType.ALLREDUCE, 1000, 4, 2, 512 * 1024), (1000, False, 2, 128, 1, 126),
     {(0, 0, 0, 0): (0, 63), (0, 0, 3, 1): (441, 504), (0, 1, 0, 0): (504, 567),
      (0, 1, 3, 1): (945, 1000)}),
    # 256-byte budget: chunk 128 bf16; groups of 2*2*128 = 512: 2 groups, tail
    # ceil(488/4) = 122
    ((EncOpType.ALLREDUCE, 1000, 2, 2, 256), (1000, False, 2, 128, 2, 122),
     {(0, 0, 1, 1): (192, 256), (0, 1, 1, 1): (448, 512), (1, 0, 0, 0): (512, 573),
      (1, 1, 0, 0): (756, 817), (1, 1, 1, 1): (939, 1000)}),
    # reduce-scatter of 1200 over 4: blocks of count 300; 2 channels, chunk up32(150) = 160,
    # one group; tail 150: block b, channel c at b*300 + c*150
    ((EncOpType.REDUCE_SCATTER, 1200, 4, 2, 512 * 1024), (300, True, 2, 160, 1, 150),
     {(0, 0, 0, 0): (0, 75), (0, 1, 0, 1): (225, 300), (0, 0, 3, 0): (900, 975),
      (0, 1, 3, 1): (1125, 1200)}),
    # all-gather of 450 per rank over 3, one channel (max 1), 256-byte budget: chunk 128,
    # groups of 128: 4, tail 450 - 384 = 66
    ((EncOpType.ALLGATHER, 450, 3, 1, 256), (450, True, 1, 128, 4, 66),
     {(0, 0, 0, 0): (0, 64), (1, 0, 1, 1): (450 + 192, 450 + 256),
      (3, 0, 2, 0): (900 + 384, 900 + 417), (3, 0, 2, 1): (900 + 417, 1350)}),
]


@pytest.mark.parametrize("args, want, ranges", HAND_PLANS)
def test_chunk_plan_hand_examples(args, want, ranges):
    op, num, n, chans, chunk_bytes = args
    plan = set_dynamic_chunk_size(op, num, n, DType.BF16, chans, chunk_bytes=chunk_bytes)
    assert plan_tuple(plan) == want
    for (g, ch, pos, half), rng in ranges.items():
        start, stop = plan.half_ranges(g, ch, pos, half)
        assert (int(start), int(stop)) == rng, (g, ch, pos, half)
