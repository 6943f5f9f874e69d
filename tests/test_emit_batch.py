"""emit_entries: consecutive SPAD entries emitted in one pass give exactly the records of the
same entries emitted one at a time, and an error in a batch names the entry that has it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nrtrewrite.compose import ir as IR
from nrtrewrite.compose.leaves import Leaf
from nrtrewrite.emit import formats as F
from nrtrewrite.emit.legs import RankBuilder, emit_entries
from nrtrewrite.errors import NrtRewriteError
from nrtrewrite.lower import (
    LowerOptions, _emit_batch, context_indices, emit_items, plan_lowering, rank_entries,
)
from nrtrewrite.neff.assembler import assemble_spec
from nrtrewrite.neff.reader import read_model

FIX = Path(__file__).resolve().parent.parent / "fixtures"


def _plan(name: str):
    return plan_lowering(read_model(FIX / f"{name}.neff"), LowerOptions())


def _items(plan, rank: int):
    return emit_items(plan, rank_entries(plan, rank), rank)


def _emit(items, sizes: list[int]):
    """Emit ``items`` in consecutive batches of ``sizes``: (file bytes, summaries, tp_inc)."""
    assert sum(sizes) == len(items)
    b = RankBuilder(0)
    summaries, k = [], 0
    for size in sizes:
        summaries += emit_entries(b, items[k:k + size])
        k += size
    parts = b.finish()
    b.close()  # the writer thread (hashing) has finished
    files = {name: b"".join(p.tobytes() for p in arrs) for name, arrs in parts.items()}
    tpinc = {key: part.tobytes() for key, part in b.tpinc_by_entry.items()}
    return files, summaries, tpinc


@pytest.mark.parametrize("name,rank", [
    ("mix8", 0), ("mix8", 5),  # several dtypes, reduce and copy entries, mesh events
    ("two_node128", 0), ("two_node128", 97),  # HIER: network legs, FIFOs, chained entries
    ("node64", 3), ("c7c8", 1),
    ("sbuf", 0),  # SBUF access patterns: such a batch is emitted entry by entry
])
def test_a_batch_emits_what_its_entries_emit_one_by_one(name, rank):
    items = _items(_plan(name), rank)
    assert len(items) >= 2
    one = _emit(items, [1] * len(items))
    assert one[0]["legs.bin"]
    uneven = [2, 1, 3] * len(items)
    cut, left = [], len(items)
    for s in uneven:
        if left == 0:
            break
        cut.append(min(s, left))
        left -= cut[-1]
    for sizes in ([len(items)], cut):
        got = _emit(items, sizes)
        assert got[1] == one[1]
        assert got[2] == one[2]
        for file in F.ARTIFACTS:
            assert got[0][file] == one[0][file], file


def test_mix8_batch_mixes_dtypes_and_reductions():
    """The batch test above covers entries of different dtypes and CCE ops in one pass."""
    items = _items(_plan("mix8"), 0)
    assert len({c.dtype for c, _ in items}) > 1
    assert len({c.cce_op for c, _ in items}) > 1


@pytest.mark.parametrize("algo", ["ring", "mesh"])
def test_a_batch_with_copies_in_dtypes_the_cce_cannot_reduce(tmp_path, algo):
    """Copy-only entries (all-gathers in INT32 and FP32: a copy takes any dtype) between
    reduces of two different (dtype, op): the batch builds CCE patterns only for the
    entries that reduce (it raised ``INT32 is not CCE-reducible``), and emits what its
    entries emit one by one."""
    def trig(op, dtype, src, dst, nbytes, alu=None):
        body = {"dtype": dtype, "src": src, "dst": dst, "bytes": nbytes}
        if alu:
            body["op"] = alu
        return {op: body}

    spec = {
        "header": {"pkg_version": 2, "name": "mixed", "lnc_size": 1},
        "subgraphs": [{
            "name": "sg00",
            "vars": [{"name": "a_in", "type": "input", "size": 65536},
                     {"name": "a_out", "type": "output", "size": 65536},
                     {"name": "i_in", "type": "input", "size": 4096},
                     {"name": "i_out", "type": "output", "size": 32768},
                     {"name": "f_in", "type": "input", "size": 4096},
                     {"name": "f_out", "type": "output", "size": 32768},
                     {"name": "h_in", "type": "input", "size": 16384},
                     {"name": "h_out", "type": "output", "size": 16384}],
            "replica_groups": [list(range(8))],
            "engines": {"sp": [trig("all_reduce", "bf16", "a_in", "a_out", 65536, "add"),
                               trig("all_gather", "int32", "i_in", "i_out", 4096),
                               trig("all_reduce", "fp16", "h_in", "h_out", 16384, "max"),
                               trig("all_gather", "fp32", "f_in", "f_out", 4096)]},
        }],
    }
    neff = tmp_path / "mixed.neff"
    neff.write_bytes(assemble_spec(spec))
    plan = plan_lowering(read_model(neff), LowerOptions(algo=algo))
    for rank in (0, 5):
        items = _items(plan, rank)
        assert [c.dtype.name for c, _ in items] == ["BF16", "INT32", "FP16", "FP32"]
        one = _emit(items, [1] * len(items))
        batch = _emit(items, [len(items)])
        assert batch[1] == one[1] and batch[2] == one[2]
        for file in F.ARTIFACTS:
            assert batch[0][file] == one[0][file], file
        assert one[0]["cce.bin"]


def test_entries_of_different_hardware_generations_tile_each_at_its_own_cap():
    """One lowering has one platform, but a batch of entries of two generations (v2: 1024
    CCE elements per descriptor, v3: 2048) still emits what its entries emit one by one."""
    import dataclasses
    items = _items(_plan("mix8"), 0)[:4]
    assert {c.hw_generation for c, _ in items} == {3}
    items = [(dataclasses.replace(c, hw_generation=2 if k % 2 else 3), ir)
             for k, (c, ir) in enumerate(items)]
    one = _emit(items, [1] * len(items))
    batch = _emit(items, [len(items)])
    assert batch[1] == one[1] and batch[2] == one[2]
    for file in F.ARTIFACTS:
        assert batch[0][file] == one[0][file], file


def test_a_batch_error_names_the_entry_that_has_it():
    plan = _plan("mix8")
    batch = rank_entries(plan, 0)
    assert len(batch) >= 3
    bad_tp, bad_spec = batch[1]
    ir = bad_spec.ir.copy()  # LEG_IR_DTYPE is packed: a plain copy keeps every byte
    row = int(np.flatnonzero(ir["n_src"] > 0)[0])
    # a view this entry lacks, though the batch's joined view table has one at that place
    ir["src_view"][row, 0] = len(bad_spec.views)
    bad_spec.ir = ir
    err = _batch_error(plan, batch)
    assert err.where.trigger == bad_tp.trigger.ordinal
    assert "src view or peer that the entry lacks" in str(err)
    assert batch[0][0].trigger.ordinal != bad_tp.trigger.ordinal


def _batch_error(plan, batch) -> NrtRewriteError:
    """The error of emitting ``batch`` (rank 0's entries) as the lowering does."""
    lnc_fmt, sg = context_indices(plan)
    b = RankBuilder(0)
    with pytest.raises(NrtRewriteError) as err:
        _emit_batch(b, plan, batch, 0, 0, lnc_fmt, sg)
    b.close()
    return err.value


@pytest.mark.parametrize("field", ["n_dst", "net_src_peer"])
def test_a_kept_leg_without_elements_must_not_move_data(field):
    """``keep`` keeps a leg without elements for its semaphores only; with a destination or a
    network receive it would be a 0-byte transfer (FORMATS §8: never a 0-byte FIFO entry)."""
    plan = _plan("two_node128")
    items = _items(plan, 0)
    ctx, ir = items[0]
    ir = ir.copy()
    row = int(np.flatnonzero((ir["n_dst"] > 0) & (ir["stop"] > ir["start"]))[0])
    ir["stop"][row] = ir["start"][row]
    ir["keep"][row] = 1
    if field == "net_src_peer":
        ir["n_dst"][row] = 0
        ir["net_src_peer"][row] = 1
    b = RankBuilder(0)
    with pytest.raises(NrtRewriteError, match="a leg without elements must not move data"):
        emit_entries(b, [(ctx, ir)])
    b.close()


def _increments(ir):
    return ir["n_inc"] > 0


def _receives(ir):
    return ir["net_src_peer"] >= 0


def _bad_inc_peer(ir, row, spec):
    ir["inc_peer"][row, 0] = len(spec.peers)


def _bad_net_src_peer(ir, row, spec):
    ir["net_src_peer"][row] = len(spec.peers)


def _bad_net_view(ir, row, spec):
    ir["net_view"][row] = len(spec.views)


RECEIVE = "network receive from a peer or into a view that the entry lacks"


@pytest.mark.parametrize("name, legs, spoil, says", [
    ("mix8", _increments, _bad_inc_peer, "increments a semaphore on a peer that the entry lacks"),
    ("two_node128", _receives, _bad_net_src_peer, RECEIVE),
    ("two_node128", _receives, _bad_net_view, RECEIVE),
])
def test_every_reference_of_a_leg_is_checked_against_its_own_entry(name, legs, spoil, says):
    """An increment's peer and a network receive's peer and view index the entry's own
    tables; in a batch, one past the end would name the next entry's peer or view (the
    batch's tables are joined), so the emitter refuses it and names the entry, as it does a
    source or destination (above)."""
    plan = _plan(name)
    batch = rank_entries(plan, 0)
    # an entry with such a leg, and one after it in the batch
    bad_tp, bad_spec = next((tp, spec) for tp, spec in batch[:-1] if legs(spec.ir).any())
    ir = bad_spec.ir.copy()
    spoil(ir, int(np.flatnonzero(legs(ir))[0]), bad_spec)
    bad_spec.ir = ir
    err = _batch_error(plan, batch)
    assert err.where.trigger == bad_tp.trigger.ordinal
    assert says in str(err)


def test_a_gateway_view_the_entry_lacks_is_refused():
    """A leg's network destinations are staged in its gateway view (its own, or the entry's):
    one past the entry's views is refused too."""
    plan = _plan("two_node128")
    items = _items(plan, 0)
    ctx, ir = next((c, ir) for c, ir in items if (ir["n_dst"] > 0).any()
                   and any(c.peer_tables.net[1:]))
    ir = ir.copy()
    ir["gw_view"] = len(ctx.views)  # every leg's: those with network destinations use it
    b = RankBuilder(0)
    with pytest.raises(NrtRewriteError, match="gateway view that the entry lacks"):
        emit_entries(b, [(ctx, ir)])
    b.close()


@pytest.mark.parametrize("run, records", [
    (65534, [65534]), (65535, [65535]), (65536, [65535, 1]), (2 * 65535, [65535, 65535]),
    (2 * 65535 + 1, [65535, 65535, 1]),
])
def test_a_run_of_equal_legs_is_split_at_repeat_65535(run, records):
    """FORMATS.md §2.2: a tp_inc_steps record's ``repeat`` is a u16 of 1..65535 and a run of
    more equal legs is split there, and only there: a run of exactly 65,535 legs is one
    record (not a full one and a ``repeat`` 0 one).  No model reaches such a run through the
    CLI in reasonable time, so the IR is built: ``run`` copies of one single-tile copy leg
    (one source, one destination: 1 M2S and 1 S2M BD each, FORMATS.md §3) on ar2's rank 0
    entry, one channel.  In front of them the entry handshake's ``mark_complete`` legs and
    behind them the channel's ``mark_end``, all without BDs (0 / 0)."""
    plan = _plan("ar2")
    ctx, ir = _items(plan, 0)[0]
    copy = (ir["n_src"] == 1) & (ir["n_dst"] == 1) & (ir["reduce"] == 0)
    one = IR.take(ir, np.flatnonzero(copy)[:1])
    one["stop"] = one["start"] + 32  # 32 elements: one tile
    one["n_wait"] = 0
    one["n_inc"] = 0
    b = RankBuilder(0)
    emit_entries(b, [(ctx, IR.take(one, np.zeros(run, np.int64)))])
    legs = np.concatenate(b.finish()["legs.bin"])
    b.close()
    handshake = int(np.count_nonzero(legs["leaf"] == int(Leaf.mark_complete)))
    assert legs.size == handshake + run + 1
    (tp,) = b.tpinc_by_entry.values()
    want = ([(0, 0, handshake, 0)] if handshake else []) + [(1, 1, n, 0) for n in records]
    want.append((0, 0, 1, F.TPINC_LAST_SYNC))
    assert list(zip(*(tp[f].tolist() for f in ("m2s", "s2m", "repeat", "flags")))) == want


@pytest.mark.parametrize("name,rank", [("mix8", 0), ("mix8", 5)])
def test_a_batch_of_blocks_of_one_leg_emits_what_its_entries_emit_one_by_one(monkeypatch, name,
                                                                           rank):
    """A batch of reducing entries of different (dtype, CCE op) reads each leg's CCE words
    from that entry's own patterns; cut into blocks of one leg (so that every tile of a
    block reduces the same number of sources), the bytes are still those of the entries
    emitted one at a time with whole blocks."""
    import nrtrewrite.emit.legs as legs

    items = _items(_plan(name), rank)
    one = _emit(items, [1] * len(items))
    monkeypatch.setattr(legs, "EMIT_FIRST_BLOCK", 1)
    monkeypatch.setattr(legs, "EMIT_BLOCK", 1)
    got = _emit(items, [len(items)])
    assert got[1] == one[1] and got[2] == one[2]
    for file in F.ARTIFACTS:
        assert got[0][file] == one[0][file], file
