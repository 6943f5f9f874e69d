"""The op-param records and step recorders of seed 003 §2-3 (nrtrewrite/compose/params.py)."""

from __future__ import annotations

import numpy as np
import pytest

from nrtrewrite.codes import ReductionType
from nrtrewrite.compose import ir as IR
from nrtrewrite.compose.events import Event
from nrtrewrite.compose.params import (
    UINT32_MAX, Addr, EncCopyOpParams, NeighborGroups, RdhTransfer, RowSpec, TransactionInfo,
    can_use_cme_sdma, check_copy_params, copy_rows, prepare_reduce_params, reduce_rows,
    submit_rdh_cce_transfers, submit_rdh_copy_transfers, sync_rows,
)
from nrtrewrite.errors import LoweringError

EVENTS = {8: Event(8)}


def test_prepare_reduce_params_one_source_per_transaction_per_chunk():
    # three inputs, pages of 64 bytes, 150 bytes of bf16: chunks 64, 64, 22
    txns = [TransactionInfo(Addr(v, 100), nbr, 64) for v, nbr in ((0, 0), (3, 0), (4, 0))]
    out = TransactionInfo(Addr(1, 100), 0, 64)
    ops = prepare_reduce_params(EVENTS, 8, txns, out, 150, 2, lambda t: 2)
    assert [o.reduce_size for o in ops] == [64, 64, 22]
    for k, o in enumerate(ops):
        assert o.s_addrs == [Addr(0, 100 + 32 * k), Addr(3, 100 + 32 * k), Addr(4, 100 + 32 * k)]
        assert o.src_idx == [0, 0, 0]
        assert o.d_addrs == [Addr(1, 100 + 32 * k)] and o.dst_idx == [2]


def test_prepare_reduce_params_refusals():
    txn = TransactionInfo(Addr(0, 0), 0, 64)
    with pytest.raises(LoweringError, match="not a valid event"):
        prepare_reduce_params(EVENTS, 9, [txn], txn, 64, 2, lambda t: 0)
    with pytest.raises(LoweringError, match="no destination neighbour"):
        prepare_reduce_params(EVENTS, 8, [txn], txn, 64, 2, lambda t: -1)
    with pytest.raises(LoweringError, match="whole number"):
        prepare_reduce_params(EVENTS, 8, [txn], txn, 63, 2, lambda t: 0)
    with pytest.raises(LoweringError, match="without input transactions"):  # (looped before)
        prepare_reduce_params(EVENTS, 8, [], txn, 64, 2, lambda t: 0)


def _copy(**kw) -> EncCopyOpParams:
    base = dict(src_idx=0, s_addr=Addr(0, 0), s_offsets=[0, 8], d_addrs=[Addr(2, 0), Addr(2, 4)],
                d_skip_copy=[False, False], d_ranks=[5, 6], copy_sizes=[8, 8])
    base.update(kw)
    return EncCopyOpParams(**base)


@pytest.mark.parametrize("kw, why", [
    (dict(d_ranks=[5]), "length-locked"),
    (dict(copy_sizes=[8, 8, 8]), "length-locked"),
    (dict(s_offsets=[0]), "length-locked"),
    (dict(d_skip_copy=[False]), "length-locked"),
    (dict(copy_sizes=[8, UINT32_MAX]), "UINT32_MAX"),
])
def test_copy_params_checks_are_lowering_errors(kw, why):
    with pytest.raises(LoweringError, match=why):
        check_copy_params(_copy(**kw))


def test_copy_to_the_network_needs_a_registered_source():
    with pytest.raises(LoweringError, match="nccl_mhandle"):
        check_copy_params(_copy(), net_ranks=frozenset({6}))
    check_copy_params(_copy(nccl_mhandle=1), net_ranks=frozenset({6}))
    check_copy_params(_copy(d_skip_copy=[False, True]), net_ranks=frozenset({6}))


def test_copy_rows_group_destinations_by_range_and_skip():
    op = EncCopyOpParams(src_idx=0, s_addr=Addr(0, 0), s_offsets=[0, 0, 0, 20],
                         d_addrs=[Addr(1, 0), Addr(1, 0), Addr(1, 0), Addr(2, 10)],
                         d_skip_copy=[False, True, False, False], d_ranks=[1, 2, 3, 4],
                         copy_sizes=[20, 20, 20, 8])
    rows = copy_rows(op, RowSpec(channel=0, leaf=16, waits=((200, 2),)), 2, 0,
                     lambda r: r, lambda r: 201)
    assert rows.size == 2
    assert (rows[0]["start"], rows[0]["stop"], rows[0]["n_dst"]) == (0, 10, 2)
    assert list(rows[0]["dst_peer"][:2]) == [1, 3] and list(rows[0]["inc_peer"][:2]) == [1, 3]
    assert rows[0]["n_wait"] == 1 and rows[0]["wait_val"][0] == 2 and rows[1]["n_wait"] == 0
    assert (rows[1]["start"], rows[1]["stop"], rows[1]["dst_view"][0]) == (10, 14, 2)
    bad = EncCopyOpParams(src_idx=0, s_addr=Addr(0, 0), s_offsets=[0], d_addrs=[Addr(1, 5)],
                          d_skip_copy=[False], d_ranks=[1], copy_sizes=[4])
    with pytest.raises(LoweringError, match="one element range"):
        copy_rows(bad, RowSpec(0, 16), 2, 0, lambda r: r, lambda r: None)


def test_rdh_cce_resolves_sources_in_grp_and_destinations_in_grp_plus_one():
    ng = NeighborGroups(((10, 11), (10, 12), (10, 13)))
    t = RdhTransfer(idx=0, src_devs=[10, 11], src_addrs=[Addr(0, 4), Addr(3, 4)],
                    dst_devs=[12], dst_addrs=[Addr(5, 4)], size=16)
    cursor = [0]
    (op,) = submit_rdh_cce_transfers([t], ng, 0, cursor)
    assert op.src_idx == [0, 1] and op.dst_idx == [1] and op.reduce_size == 16
    assert cursor == [1]
    # the same destination is not in group grp: indexing both in one group is the bug
    with pytest.raises(LoweringError, match="not in neighbour group 1"):
        submit_rdh_cce_transfers([t], ng, 1, cursor)
    with pytest.raises(LoweringError, match="src_devs"):
        submit_rdh_cce_transfers([RdhTransfer(src_devs=[10], src_addrs=[], dst_devs=[12],
                                              dst_addrs=[Addr(0, 0)], size=2)], ng, 0, cursor)


def test_can_use_cme_sdma_only_for_one_to_one_vectors():
    one = RdhTransfer(src_devs=[0], src_addrs=[Addr(0, 0)], dst_devs=[1], dst_addrs=[Addr(1, 0)],
                      size=4)
    fan = RdhTransfer(src_devs=[0], src_addrs=[Addr(0, 0)], dst_devs=[1, 2],
                      dst_addrs=[Addr(1, 0), Addr(1, 0)], size=4)
    red = RdhTransfer(src_devs=[0, 0], src_addrs=[Addr(0, 0), Addr(2, 0)], dst_devs=[0],
                      dst_addrs=[Addr(1, 0)], size=4)
    assert can_use_cme_sdma([one, one]) and not can_use_cme_sdma([one, fan])
    assert not can_use_cme_sdma([red])
    ng = NeighborGroups(((0, 1, 2),))
    (cp,) = submit_rdh_copy_transfers([fan], ng, 0, [0])
    assert cp.d_ranks == [1, 2] and cp.copy_sizes == [4, 4] and cp.d_skip_copy == [False, False]
    with pytest.raises(LoweringError, match="one source"):
        submit_rdh_copy_transfers([red], ng, 0, [0])


def test_reduce_rows_chain_wide_reduces_through_the_destination():
    from nrtrewrite.compose.params import EncReduceOpParams
    n = 2 * IR.MAX_SRC + 3  # 19 sources: 8, then 7 + acc, then 4 + acc
    op = EncReduceOpParams(s_addrs=[Addr(v, 7) for v in range(n)], src_idx=[0] * n,
                           d_addrs=[Addr(99, 7)], dst_idx=[0], reduce_size=10)
    ng = NeighborGroups(((3,),))
    rows = reduce_rows([op], RowSpec(0, 17, waits=((210, 5),)), 2, ng, 0, 0, lambda r: 0)
    assert rows.size == 3
    assert list(rows["n_src"]) == [8, 8, 5]
    assert list(rows["src_view"][1][:2]) == [99, 8] and list(rows["src_view"][2][:2]) == [99, 15]
    assert all(rows["start"] == 7) and all(rows["stop"] == 12) and all(rows["reduce"] == 1)
    assert rows[0]["n_wait"] == 1 and not rows[1]["n_wait"]
    assert set(rows["reduction_type"]) == {int(ReductionType.KANGARING_NR1W)}
    two = EncReduceOpParams(s_addrs=[Addr(0, 0), Addr(1, 0)], src_idx=[0, 0],
                            d_addrs=[Addr(2, 0)], dst_idx=[0], reduce_size=4)
    r2 = reduce_rows([two], RowSpec(0, 17), 2, ng, 0, 0, lambda r: 0)
    assert r2["reduction_type"][0] == int(ReductionType.RING_2R1W)  # the 2-reader/1-writer step


def test_sync_rows_split_increments_and_wait_last():
    incs = [(p, 200) for p in range(1, 20)]
    rows = sync_rows(RowSpec(0, 20), incs, [(200, 19), (201, 0)])
    assert rows.size == 4 and all(rows["keep"] == 1)
    assert list(rows["n_inc"]) == [8, 8, 3, 0]
    assert rows[-1]["n_wait"] == 1 and rows[-1]["wait_val"][0] == 19
    assert np.all(rows["stop"] == rows["start"])


def test_prepare_reduce_params_refuses_a_page_that_is_neither_whole_nor_the_rest():
    """Seed 003 §3 ``prepare_reduce_params``: ``assert(dma_sz == remaining || dma_sz ==
    txn.input_dma_size)`` (enc_primitive.cc:0x2202/0x2212).  Pages of 64 and 48 bytes, 100
    bytes: the first record reduces 48 bytes (the last transaction's page); at offset 48 the
    64-byte table has 64 - 48 = 16 bytes left in its page, neither a page nor the remaining
    52.  A 63-byte page of 2-byte elements: the second record would start at byte 63, inside
    an element (ours: "a page boundary splits an element")."""
    txns = [TransactionInfo(Addr(0, 0), 0, 64), TransactionInfo(Addr(3, 0), 0, 48)]
    with pytest.raises(LoweringError, match="neither the remaining 52 bytes"):
        prepare_reduce_params(EVENTS, 8, txns, txns[0], 100, 2, lambda t: 0)
    odd = TransactionInfo(Addr(0, 0), 0, 63)
    with pytest.raises(LoweringError, match="splits an element"):
        prepare_reduce_params(EVENTS, 8, [odd], odd, 126, 2, lambda t: 0)


def test_a_chained_reduce_signals_after_its_last_row_only():
    """``reduce_rows`` (DESIGN.md "Mesh and RDH": more than 8 sources chain through the
    destination): the destination holds the whole reduce only after the chain's last row, so
    the destination's signal is an increment of that row alone.  10 sources: row 0 reduces
    8, row 1 the destination and the last 2 (3 sources); one increment, on row 1."""
    from nrtrewrite.compose.params import EncReduceOpParams
    op = EncReduceOpParams(s_addrs=[Addr(v, 0) for v in range(10)], src_idx=[0] * 10,
                           d_addrs=[Addr(99, 0)], dst_idx=[0], reduce_size=8)
    ng = NeighborGroups(((3,),))
    rows = reduce_rows([op], RowSpec(0, 17), 2, ng, 0, 0, lambda r: 0, lambda r: 200)
    assert list(rows["n_src"]) == [8, 3]
    assert list(rows["n_inc"]) == [0, 1] and rows[1]["inc_sem"][0] == 200


@pytest.mark.parametrize("what", ["offset", "size", "reduce"])
def test_record_sizes_and_offsets_must_be_whole_elements(what):
    """The leg IR moves whole elements (compose/params.py ``copy_rows``, ``reduce_rows``;
    ``check_copy_params``: no negative source offset): a 3-byte copy size of 2-byte elements,
    a -2-byte source offset and a 5-byte reduce are refused."""
    if what == "reduce":
        from nrtrewrite.compose.params import EncReduceOpParams
        op = EncReduceOpParams(s_addrs=[Addr(0, 0), Addr(1, 0)], src_idx=[0, 0],
                               d_addrs=[Addr(2, 0)], dst_idx=[0], reduce_size=5)
        with pytest.raises(LoweringError, match="reduce_size 5"):
            reduce_rows([op], RowSpec(0, 17), 2, NeighborGroups(((3,),)), 0, 0, lambda r: 0)
        return
    kw = dict(copy_sizes=[8, 3]) if what == "size" else dict(s_offsets=[0, -2])
    with pytest.raises(LoweringError, match="whole number of elements|negative source offset"):
        copy_rows(_copy(**kw), RowSpec(0, 16), 2, 0, lambda r: r, lambda r: None)


def test_a_reduce_destination_at_another_element_is_refused():
    """``reduce_rows``: the leg IR reduces one element range, so every source and destination
    of a record is at the same element; a destination at element 3 of sources at 0 is
    refused (it would silently land at element 0)."""
    from nrtrewrite.compose.params import EncReduceOpParams
    op = EncReduceOpParams(s_addrs=[Addr(0, 0), Addr(1, 0)], src_idx=[0, 0],
                           d_addrs=[Addr(2, 3)], dst_idx=[0], reduce_size=4)
    with pytest.raises(LoweringError, match="same element"):
        reduce_rows([op], RowSpec(0, 17), 2, NeighborGroups(((3,),)), 0, 0, lambda r: 0)


def test_a_zero_byte_destination_copies_nothing_and_is_neither_numbered_nor_signalled():
    """A destination of ``copy_sizes`` 0 moves no element: it gets no row (DESIGN.md: an empty
    range emits no leg; FORMATS.md §8.2: never a 0-byte entry), so its rank is not numbered as
    a peer and gets no increment (a mesh scatter of fewer elements than ranks has such empty
    blocks; a row for one shifted every later leg's ``ring_step``).  Destinations of ranks 1,
    2, 3: rank 2's is 0 bytes; ranks 1 and 3 copy 4 bf16 elements from elements 0 and 2."""
    op = EncCopyOpParams(src_idx=0, s_addr=Addr(0, 0), s_offsets=[0, 4, 4],
                         d_addrs=[Addr(1, 0), Addr(1, 2), Addr(1, 2)],
                         d_skip_copy=[False, False, False], d_ranks=[1, 2, 3],
                         copy_sizes=[8, 0, 8])
    numbered, signalled = [], []
    rows = copy_rows(op, RowSpec(channel=0, leaf=16), 2, 0,
                     lambda r: numbered.append(r) or r, lambda r: signalled.append(r) or 201)
    assert numbered == [1, 3] and signalled == [1, 3]
    assert [(int(r["start"]), int(r["stop"]), int(r["dst_peer"][0])) for r in rows] == [
        (0, 4, 1), (2, 6, 3)]
