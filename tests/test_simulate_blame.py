"""``simulate`` names the record that was changed (docs/SIMULATOR.md §2 "Which record a
disagreement names"): when two artifacts disagree, each is checked against what can be
derived without the other (the leg's elem_start, the trigger's ring and leader, where the
leg programs end), and the one that is wrong is named; where nothing tells, both records
are named in one line. Every case flips bytes at the offsets FORMATS.md's tables give and
expects the message to name the file, record and field flipped (review 53e)."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from nrtrewrite.emit import formats as F
from test_simulate import cli, coll_spec, lower_spec
from test_simulate_kick_leaf import copy, rehash
from test_simulate_unreached41 import _error, ar2_out, r2n_out  # noqa: F401 (fixtures)

ROOT = Path(__file__).resolve().parent.parent


def _flip(out: Path, rank: int, name: str, offset: int, mask: int = 1) -> int:
    """XOR byte ``offset`` of ``rank``'s ``name`` with ``mask``; re-hash (the change looks
    genuine); return the byte's old value."""
    p = out / f"rank-{rank:04d}" / name
    b = bytearray(p.read_bytes())
    old = b[offset]
    b[offset] ^= mask
    p.write_bytes(bytes(b))
    rehash(out)
    return old


def _u64(out: Path, rank: int, name: str, offset: int) -> int:
    return struct.unpack_from("<Q", (out / f"rank-{rank:04d}" / name).read_bytes(), offset)[0]


# ---------------------------------------------------------------- dma.bin vs sb2sb.bin
@pytest.mark.parametrize("offset,record,part", [(8, 0, "src"), (24, 1, "dst")])
def test_a_bds_buf_ptr_is_named_in_dma_bin_not_at_the_0xbf_words_start_addr(
        ar2_out, tmp_path, offset, record, part):
    """FORMATS §5: a BD is 16 bytes, buf_ptr the u64 at 8. ar2_out's rank 0 legs.bin record
    2 (send, elements [500, 750)) has BDs 0..3, per tile source 0 then destination 0 (§5):
    byte 8 is BD 0's buf_ptr (the M2S of the first tile, element 500), byte 24 BD 1's (its
    S2M). The 0xBF word of that first piece, sb2sb.bin record 0 (legs 0 and 1 move no data,
    §4), keeps its start_addr 500 x 2, which the leg's elem_start fixes: the BD is wrong
    (until 2026-12-07 the line blamed sb2sb.bin record 0's src.start_addr / dst.start_addr)."""
    out = copy(ar2_out, tmp_path)
    was = _u64(out, 0, "dma.bin", 16 * record + 8)
    _flip(out, 0, "dma.bin", offset)
    err = _error(out)
    head = (f"{out / 'rank-0000'}: field buf_ptr, rank 0, channel 0, artifact dma.bin, "
            f"record {record}: buf_ptr {was ^ 1:#x}: this BD of the send leg (legs.bin record "
            f"2) puts element 500, the first of sb2sb.bin record 0's piece ({part}), at ")
    assert err.startswith(head), err
    assert err.endswith("not where that element of the op's buffers lives"), err


# ---------------------------------------------------------------- net_src.bin vs net_dest.bin
# r2n_out: RING [0, 1, 64, 65] over two nodes, one channel; rank 1 transmits to 64, its
# successor across the network, 12 entries of 1024 bytes each with complete 1 (FORMATS §8.2:
# net_dest_addr is complete at 4, dev_addr at 8, size at 32, src_rank at 40; net_src_addr
# dev_addr at 8, size at 32, dst_rank at 48, dst_addr at 56)
@pytest.mark.parametrize("offset,field,mine", [(8, "dev_addr", "dst_addr"),
                                               (4, "complete", "complete")])
def test_a_receive_entrys_value_its_transmit_entry_disagrees_with_names_both(
        r2n_out, tmp_path, offset, field, mine):
    """Nothing read before the pairing fixes a receive entry's dev_addr or complete bit, nor
    its transmit entry's: the line names both records and fields (until 2026-12-07 it named
    only rank 1's net_src.bin record 0, which was not changed). A size is held to its
    sending leg (below)."""
    out = copy(r2n_out, tmp_path)
    rx = np.fromfile(out / "rank-0064" / "net_dest.bin", F.NET_DEST_ADDR_DTYPE)
    tx = np.fromfile(out / "rank-0001" / "net_src.bin", F.NET_SRC_ADDR_DTYPE)
    assert int(rx["src_rank"][0]) == 1 and int(tx["dst_rank"][0]) == 64
    was = int(rx[field][0])
    _flip(out, 64, "net_dest.bin", offset)
    show = (lambda v: f"{v:#x}") if field == "dev_addr" else str
    assert _error(out) == (
        f"{out / 'rank-0001'}: field {mine}, rank 1, channel 0, artifact net_src.bin, record 0: "
        f"{mine} {show(was)} here and {field} {show(was ^ 1)} in the paired receive entry "
        "(rank 64, net_dest.bin record 0) should be equal: one of the two records is wrong, "
        "and nothing else read tells which")


def test_a_ring_receive_entrys_src_rank_is_named_where_it_is(r2n_out, tmp_path):
    """src_rank 1 -> 0 (bit 0 of byte 40): rank 0 is of the group, but not rank 64's ring
    predecessor on channel 0 ([0, 1, 64, 65]): named at rank 64's net_dest.bin record 0 (until
    2026-12-07 rank 1's net_src.bin record 0 was blamed, for a dst_addr it paired wrongly)."""
    out = copy(r2n_out, tmp_path)
    _flip(out, 64, "net_dest.bin", 40)
    assert _error(out) == (
        f"{out / 'rank-0064'}: field src_rank, rank 64, channel 0, artifact net_dest.bin, "
        "record 0: src_rank should be 1, rank 64's ring predecessor on channel 0 (a RING op "
        "sends to its successor and receives from its predecessor), not 0")


def test_a_ring_transmit_entrys_dst_rank_is_named_where_it_is(r2n_out, tmp_path):
    """dst_rank 64 -> 65 (bit 0 of byte 48): of the group, not rank 1's successor."""
    out = copy(r2n_out, tmp_path)
    _flip(out, 1, "net_src.bin", 48)
    assert _error(out) == (
        f"{out / 'rank-0001'}: field dst_rank, rank 1, channel 0, artifact net_src.bin, "
        "record 0: dst_rank should be 64, rank 1's ring successor on channel 0 (a RING op "
        "sends to its successor and receives from its predecessor), not 65")


def test_a_peer_outside_the_trigger_is_named_where_it_is(tmp_path):
    """Groups [[0, 128], [1, 129]] on trn2:nodes=2, --algo ring: rank 0's receive entry 0
    from 128, src_rank bit 0 flipped to 129 (of the other trigger): named at rank 0's
    net_dest.bin record 0 (until 2026-12-07: `rank 128, ..., net_src.bin, record 0: dst_addr
    should be ..., the dev_addr of the paired receive entry (rank 0, net_dest.bin record
    1)`)."""
    spec = {"header": {"pkg_version": 2, "name": "x2", "lnc_size": 1},
            "subgraphs": [{"name": "sg00", "vars": [
                {"name": "a", "type": "input", "size": "4KiB"},
                {"name": "b", "type": "output", "size": "8KiB"}],
                "replica_groups": [[0, 128], [1, 129]],
                "engines": {"sp": [
                    {"all_reduce": {"opcode": 0xC8, "dtype": "bf16", "op": "add", "src": "a",
                                    "dst": "b", "bytes": "4KiB"}},
                    {"all_reduce": {"opcode": 0xC8, "dtype": "bf16", "op": "add", "src": "a",
                                    "dst": "b", "bytes": "4KiB", "group": 1}}]}}]}
    out = lower_spec(spec, tmp_path / "o", topology="trn2:nodes=2")
    assert int(np.fromfile(out / "rank-0000" / "net_dest.bin",
                           F.NET_DEST_ADDR_DTYPE)["src_rank"][0]) == 128
    _flip(out, 0, "net_dest.bin", 40)
    assert _error(out) == (
        f"{out / 'rank-0000'}: field src_rank, rank 0, channel 0, artifact net_dest.bin, "
        "record 0: src_rank 129 should be a rank of trigger 0's replica_group, [0, 128], whose "
        "op 0 the entry is of")


# ---------------------------------------------------------------- spad.bin vs rank manifest
@pytest.mark.parametrize("rank,offset,mask,why", [
    (0, 2, 1, "field reporter, rank 0, artifact spad.bin, record 0: reporter should be 1, not "
              "0: the reporter of trigger 0 is its leader, rank 0"),
    (1, 2, 1, "field reporter, rank 1, artifact spad.bin, record 0: reporter should be 0, not "
              "1: the reporter of trigger 0 is its leader, rank 0"),
    (0, 4, 2, "field channel_list, rank 0, artifact spad.bin, record 0: channel_list runs "
              "channels [0, 1], trigger 0's channels are [0] (manifest.json "
              "triggers[0].channels: a RING entry runs each channel of its trigger, FORMATS "
              "§1.1, §2)"),
])
def test_a_spad_bin_byte_is_named_in_spad_bin_not_as_the_manifests_disagreement(
        ar2_out, tmp_path, rank, offset, mask, why):
    """FORMATS §2: reporter is bit 0 of byte 2 (1 on the leader, rank 0 of [0, 1]),
    channel_list the u32 at 4 (ar2_out runs channel 0 alone). spad.bin is held to the leader
    rule and the trigger's channels before the rank manifest is compared with it (until
    2026-12-07: `the rank manifest's reporter should be false, what spad.bin says, not
    true`, though the manifest was intact)."""
    out = copy(ar2_out, tmp_path)
    _flip(out, rank, "spad.bin", offset, mask)
    assert _error(out) == f"{out / f'rank-{rank:04d}'}: {why}"


def test_an_edited_rank_manifest_is_still_named_as_the_manifests_disagreement(
        ar2_out, tmp_path):
    """The other side of the case above: spad.bin intact, the manifest's reporter edited."""
    import json
    out = copy(ar2_out, tmp_path)
    p = out / "rank-0000" / "manifest.json"
    man = json.loads(p.read_text())
    man["entries"][0]["reporter"] = False
    p.write_text(json.dumps(man))
    rehash(out)
    assert _error(out).endswith("field reporter, rank 0, artifact spad.bin, record 0: the rank "
                                "manifest's reporter should be true, what spad.bin says, not "
                                "false")


# ---------------------------------------------------------------- tpinc.bin
def test_a_last_sync_bit_cleared_is_named_at_its_record(tmp_path):
    """fixtures/mix8.neff, default lower: rank 0 has 9 entries of one channel each, 9
    last_sync groups (FORMATS §2.2). Clear the first group's last_sync (bit 0 of flags, the
    u16 at 6 of an 8-byte record): 8 groups for 9 leg programs; the record whose bit is
    missing is named, with the legs.bin record its run ends at, the sum of the repeats up to
    it less one (until 2026-12-07 the line named no record and no field)."""
    out = tmp_path / "o"
    assert cli("lower", ROOT / "fixtures" / "mix8.neff", "-o", out).exit_code == 0
    t = np.fromfile(out / "rank-0000" / "tpinc.bin", np.dtype(
        [("m2s", "<u2"), ("s2m", "<u2"), ("repeat", "<u2"), ("flags", "<u2")]))
    j = int(np.flatnonzero(t["flags"] & 1)[0])
    g = int(t["repeat"][:j + 1].sum()) - 1
    _flip(out, 0, "tpinc.bin", 8 * j + 6)
    assert _error(out) == (
        f"{out / 'rank-0000'}: field flags, rank 0, artifact tpinc.bin, record {j}: last_sync "
        f"should be 1, not 0: the leg program of entry 0 channel 0 ends at legs.bin record {g}, "
        "the run's last leg (8 last_sync groups for 9 (entry, channel) leg programs)")


# ---------------------------------------------------------------- legs.bin vs sb2sb.bin
def test_a_legs_elem_start_is_named_in_legs_bin_when_its_word_and_bd_agree(tmp_path):
    """A bf16 all-reduce of 1000 elements over 4 ranks, --algo mesh: rank 0's legs.bin record
    5 moves elements [500, 750) of a DRAM operand in one piece (sb2sb.bin record 1, the
    leg's sb2sb_first) from its first BD. FORMATS §3: elem_start is the u64 at 48 of a
    64-byte record; bit 0 flipped, 500 -> 501. The word's start_addr (500 x 2, §4) and the
    BD's address still agree on element 500: the leg is named (until 2026-12-07 the word was,
    `field src.start_addr, ..., sb2sb.bin, record 1: src.start_addr 0x3e8, the piece's first
    element 501 is at 0x3ea of its buffer`)."""
    from test_simulate import coll_spec
    out = lower_spec(coll_spec("all_reduce", "bf16", 4, 1000), tmp_path / "o", algo="mesh")
    legs = np.fromfile(out / "rank-0000" / "legs.bin", F.LEG_DTYPE)
    assert (int(legs["elem_start"][5]), int(legs["num_elements"][5])) == (500, 250)
    first, dma = int(legs["sb2sb_first"][5]), int(legs["dma_first"][5])
    word = (out / "rank-0000" / "sb2sb.bin").read_bytes()[64 * first:64 * first + 64]
    assert struct.unpack_from("<I", word, 16)[0] == 500 * 2
    _flip(out, 0, "legs.bin", 64 * 5 + 48)
    assert _error(out) == (
        f"{out / 'rank-0000'}: field elem_start, rank 0, channel 0, artifact legs.bin, record "
        f"5: elem_start should be 500, not 501: the leg's piece at sb2sb.bin record {first} "
        f"(src.start_addr 0x3e8) and the BD that moves it (dma.bin record {dma}) both put its "
        "first element at 500, not 501")


@pytest.mark.parametrize("mask,addr", [(0x80, 0x100002000), (0x20, 0x100008000)])
def test_a_bd_moved_out_of_its_scratch_view_is_named_in_dma_bin_not_at_the_legs_elem_start(
        tmp_path, mask, addr):
    """A bf16 all-reduce of 8 KiB (4096 elements) over 4 ranks, --algo mesh, input i 8 KiB
    and output o 32 KiB (o at 0x2000 past i, scratch at 0xa000): rank 0's legs.bin record 4
    is the mesh_send of elements [1024, 2048), its first piece sb2sb.bin record 0; its
    source word measures from element 0 of i (src.start_addr 1024 x 2), its destination is
    a scratch view (dst.start_addr 0). FORMATS §5: a BD is 16 bytes, buf_ptr the u64 at 8;
    BD 1 is the piece's S2M. Bit 15 of its buf_ptr (byte 16 + 8 + 1, mask 0x80) moves it
    from scratch + 0 (0xa000) onto element 0 of o (0x2000), where the word's 0 then reads
    as element 0. The source word still bears out elem_start 1024, so the BD is named
    (until 2026-12-07: `field elem_start, ..., legs.bin, record 4: elem_start should be 0,
    not 1024`, a record nobody changed; review 53t). Bit 13 (mask 0x20) moves it to 0x8000,
    element 0x6000 / 2 of o, which no word names: the BD too (until 2026-12-07 `field
    dst.start_addr, ..., sb2sb.bin, record 0: dst.start_addr 0x0, the piece's first element
    1024 is at 0x800 of its buffer`, a word nobody changed)."""
    spec = {
        "header": {"pkg_version": 2, "name": "m4", "lnc_size": 1},
        "subgraphs": [{
            "name": "sg00",
            "vars": [{"name": "i", "type": "input", "size": "8KiB"},
                     {"name": "o", "type": "output", "size": "32KiB"}],
            "replica_groups": [[0, 1, 2, 3]],
            "engines": {"sp": [{"all_reduce": {"dtype": "bf16", "op": "add", "group": 0,
                                               "src": "i", "dst": "o", "bytes": "8KiB"}}]},
        }],
    }
    out = lower_spec(spec, tmp_path / "o", algo="mesh")
    legs = np.fromfile(out / "rank-0000" / "legs.bin", F.LEG_DTYPE)
    assert (int(legs["elem_start"][4]), int(legs["num_elements"][4])) == (1024, 1024)
    assert (int(legs["sb2sb_first"][4]), int(legs["dma_first"][4])) == (0, 0)
    word = (out / "rank-0000" / "sb2sb.bin").read_bytes()[:64]
    assert struct.unpack_from("<I", word, 16)[0] == 1024 * 2  # src.start_addr (§4)
    was = _u64(out, 0, "dma.bin", 16 * 1 + 8)
    _flip(out, 0, "dma.bin", 16 * 1 + 8 + 1, mask)
    err = _error(out)
    head = (f"{out / 'rank-0000'}: field buf_ptr, rank 0, channel 0, artifact dma.bin, record "
            f"1: buf_ptr {was ^ (mask << 8):#x}: this BD of the mesh_send leg (legs.bin record "
            "4) puts element 1024, the first of sb2sb.bin record 0's piece (dst), at "
            f"{addr:#x} in \"o\", not where that element of the op's buffers lives")
    assert err == head


def test_a_func_rel_op_idx_moving_an_op_to_another_entry_is_named_in_net_ops_bin(tmp_path):
    """Group [64, 0, 32, 65, 1, 33] on trn1:nodes=3 (32 ranks a node: 64 and 65 share a
    node), all-reduce, all-gather, reduce-scatter, --algo 'hier;inter_allr:ring'. Rank 64's
    entries: trigger 0's intra_redsct (0), inter_allr (1), intra_allg (2), trigger 1's
    inter_allg (3), intra_allg (4), ...; on channel 0 only entry 3 crosses nodes, so
    net_ops.bin record 0 (FORMATS §8.1: 96 bytes, func_rel_op_idx the u32 at 80) is trigger
    1's op, and its transmit entries send to rank 0, rank 64's successor on the inter ring.
    Bit 0 of func_rel_op_idx flipped (1 -> 0) puts the op in entry 0, whose ring successor is
    65: the line names net_ops.bin's field, not the intact dst_rank (until 2026-12-07
    `field dst_rank, ..., net_src.bin, record 0: dst_rank should be 65, rank 64's ring
    successor on channel 0 ..., not 0`; review 53t)."""
    body = {"dtype": "bf16", "group": 0, "src": "i", "dst": "o"}
    spec = {
        "header": {"pkg_version": 2, "name": "t1n3rev", "lnc_size": 1},
        "subgraphs": [{
            "name": "sg00",
            "vars": [{"name": "i", "type": "input", "size": "48KiB"},
                     {"name": "o", "type": "output", "size": "288KiB"}],
            "replica_groups": [[64, 0, 32, 65, 1, 33]],
            "engines": {"sp": [
                {"all_reduce": {**body, "op": "add", "bytes": "48KiB"}},
                {"all_gather": {**body, "bytes": "8KiB"}},
                {"reduce_scatter": {**body, "op": "add", "bytes": "48KiB"}}]},
        }],
    }
    out = lower_spec(spec, tmp_path / "o", topology="trn1:nodes=3",
                     algo="hier;inter_allr:ring")
    assert _flip(out, 64, "net_ops.bin", 80) == 1
    tx = np.fromfile(out / "rank-0064" / "net_src.bin", F.NET_SRC_ADDR_DTYPE)
    n = int(np.flatnonzero(tx["mark"] == 1)[0])  # op 0's entries, before its terminator
    assert set(tx["dst_rank"][:n].tolist()) == {0}
    assert _error(out) == (
        f"{out / 'rank-0064'}: field func_rel_op_idx, rank 64, channel 0, artifact "
        "net_ops.bin, record 0: func_rel_op_idx 0 puts op 0 in entry 0 (trigger 0, leg "
        f"intra_redsct), which the dst_rank 0 of its net_src.bin records 0-{n - 1} does not "
        "fit, and entry 3 (trigger 1, leg inter_allg) it fits: func_rel_op_idx or dst_rank is "
        "wrong, and nothing else read tells which")


# ---------------------------------------------------------------- the sending leg's bytes
# r2n_out (above): rank 1's transmit entry 0 is the whole transfer (complete 1, the first) of
# the first leg that hands data to the proxy, its send of half a chunk: 4096 / 4 ranks / 2
# halves = 512 bf16 elements, 1024 bytes (FORMATS §8 "Entries": a ring leg's half-chunk in
# the gateway view is one contiguous run, one entry). FORMATS §8.2: size is the u32 at 32 of
# both net_src_addr and net_dest_addr.
@pytest.mark.parametrize("rank,name,peer", [(64, "net_dest.bin", 1), (1, "net_src.bin", 64)])
def test_a_pairs_size_is_named_on_the_side_its_sending_leg_does_not_bear_out(
        r2n_out, tmp_path, rank, name, peer):
    """Bit 0 of size flipped on one side, 1024 -> 1025: the leg's num_elements x 2 bytes
    (legs.bin record 2 of rank 1, after the entry handshake's two mark_complete legs, FORMATS
    §3.4) tells which side holds the change, and it alone is named (until 2026-12-07 both,
    `size 1024 here and size 1025 in the paired receive entry ... nothing else read tells
    which`, and before that the transmit entry whichever was changed)."""
    out = copy(r2n_out, tmp_path)
    legs = np.fromfile(out / "rank-0001" / "legs.bin", F.LEG_DTYPE)
    assert (int(legs["leaf"][2]), int(legs["num_elements"][2])) == (1, 512)  # send
    _flip(out, rank, name, 32)
    leg = "rank 1's send leg (legs.bin record 2), num_elements 512 x 2 = 1024 bytes"
    head = (f"{out / f'rank-{rank:04d}'}: field size, rank {rank}, channel 0, artifact {name}, "
            "record 0: size should be 1024, not 1025: ")
    assert _error(out) == head + (
        f"the paired transmit entry (rank 1, net_src.bin record 0) carries the whole transfer "
        f"of {leg}" if rank == 64 else
        f"this entry is the whole transfer of {leg}, as the paired receive entry (rank 64, "
        "net_dest.bin record 0) says")


# ---------------------------------------------------------------- tpinc.bin repeat
# ar2_out (test_simulate_unreached41): rank 0's legs are mark_complete x 2 (no BDs), send x 2
# (2 tiles of one source and one destination: 2 M2S / 2 S2M), recv_reduce_copy (2 tiles x 2
# sources, 1 destination: 4 / 2), direct_copy_send (2 / 2), recv_reduce_copy, direct_copy_send,
# direct_recv x 2 and mark_end (no BDs): one (entry, channel) program, so FORMATS §2.2's runs
# are (0, 0) x 2, (2, 2) x 2, (4, 2), (2, 2), (4, 2), (2, 2), (0, 0) x 3, records 0..6 of 8
# bytes, repeat the u16 at 4.
@pytest.mark.parametrize("record,repeat,legs,counts", [
    (0, 2, "0..1", "0 M2S / 0 S2M"), (1, 2, "2..3", "2 M2S / 2 S2M"),
    (6, 3, "8..10", "0 M2S / 0 S2M")])
def test_a_tpinc_repeat_is_named_at_its_record_not_the_groups_last(
        ar2_out, tmp_path, record, repeat, legs, counts):
    """Bit 0 of a record's repeat flipped: the group expands to one leg more or less; the
    record that differs from FORMATS §2.2's one encoding of the legs' BD counts is named, not
    the group's last record (until 2026-12-07 `record 6: last_sync group 0 (records 0..6)
    expands to 12 legs, entry 0 channel 0 has 11` for records 0 and 1)."""
    out = copy(ar2_out, tmp_path)
    assert _flip(out, 0, "tpinc.bin", 8 * record + 4) == repeat
    assert _error(out) == (
        f"{out / 'rank-0000'}: field repeat, rank 0, channel 0, artifact tpinc.bin, record "
        f"{record}: repeat should be {repeat}, not {repeat ^ 1}: legs.bin records {legs} of "
        f"entry 0 channel 0 have {counts} BDs each, and the records before this one encode the "
        "legs before them (FORMATS §2.2: maximal runs, one encoding)")


def test_a_tpinc_repeat_lowered_to_0_is_named_as_the_other_repeats(ar2_out, tmp_path):
    """Record 2 above, the run (4, 2) x 1 (legs.bin record 4, recv_reduce_copy), its repeat
    bit 0 flipped, 1 -> 0 (FORMATS §2.2: repeat is 1..65535): named with the value it should
    have and why, as any other repeat (until 2026-12-07 `record 2: repeat 0`, no value, no
    reason)."""
    out = copy(ar2_out, tmp_path)
    assert _flip(out, 0, "tpinc.bin", 8 * 2 + 4) == 1
    assert _error(out) == (
        f"{out / 'rank-0000'}: field repeat, rank 0, channel 0, artifact tpinc.bin, record 2: "
        "repeat should be 1, not 0: legs.bin records 4..4 of entry 0 channel 0 have 4 M2S / "
        "2 S2M BDs each, and the records before this one encode the legs before them "
        "(FORMATS §2.2: maximal runs, one encoding)")


# ---------------------------------------------------------------- legs.bin *_count
# FORMATS §3: 64-byte records, sb2sb_count the u16 at 20, dma_first / dma_count the u32s at
# 24 / 28, sem_first / sem_count at 40 / 44. ar2_out's rank 0 record 2 is the send of
# elements [500, 750): one 0xBF piece (250 elements, under 256: FORMATS §4) and 4 BDs (2
# tiles x source + destination); records 0, 1 (mark_complete) have neither, so record 3's
# sb2sb_first is 1 and its dma_first 4.
@pytest.mark.parametrize("offset,field,was,first", [
    (64 * 2 + 20, "sb2sb_count", 1, "sb2sb_first 1"),
    (64 * 2 + 28, "dma_count", 4, "dma_first 4")])
def test_a_legs_count_is_named_at_its_record_not_the_next_legs_first(
        ar2_out, tmp_path, offset, field, was, first):
    """A count's bit 0 flipped breaks only the link after its leg; the next leg's first is
    borne out by the legs after it, so the count is named (until 2026-12-07 `field
    dma_first, ..., record 3: dma_first should be 5, not 4`, a record nobody changed)."""
    out = copy(ar2_out, tmp_path)
    assert _flip(out, 0, "legs.bin", offset) == was
    files = {"sb2sb_count": "sb2sb.bin", "dma_count": "dma.bin"}
    assert _error(out) == (
        f"{out / 'rank-0000'}: field {field}, rank 0, artifact legs.bin, record 2: {field} "
        f"should be {was}, not {was ^ 1}: the legs' records of {files[field]} do not follow "
        f"each other, and the next leg's {first} (legs.bin record 3) is borne out by the legs "
        "after it and the file's end")


def test_the_last_legs_count_is_named_at_its_record(ar2_out, tmp_path):
    """The last leg (record 10, mark_end)'s sem_count bit 0 flipped: its range no longer
    ends at sem.bin's last record (16-byte records, FORMATS §7); the line names record 10's
    sem_count (until 2026-12-07 `field sem_count, ..., artifact legs.bin: the legs reference
    ...`, no record)."""
    out = copy(ar2_out, tmp_path)
    n = (out / "rank-0000" / "sem.bin").stat().st_size // 16
    first, count = struct.unpack_from("<IH", (out / "rank-0000" / "legs.bin").read_bytes(),
                                      64 * 10 + 40)
    assert first + count == n
    _flip(out, 0, "legs.bin", 64 * 10 + 44)
    assert _error(out) == (
        f"{out / 'rank-0000'}: field sem_count, rank 0, artifact legs.bin, record 10: the legs "
        f"reference {first + (count ^ 1)} records of sem.bin, the file holds {n}: the last "
        f"leg's range, sem_first {first} + sem_count {count ^ 1}, ends there")


# ---------------------------------------------------------------- dma.bin len_ctrl
# FORMATS §5: 16-byte BDs, len_ctrl the u32 at 0: length [15:0], FIRST bit 26 and LAST bit 27
# (byte 3's 0x04 and 0x08). ar2_out's rank 0 record 2 (send) has BDs 0..3: per tile source 0
# then destination 0; a half of 250 bf16 elements is 500 bytes, tiles of 480 and 20 bytes
# (FORMATS §3 n_tiles). Record 3 (the second send) has BDs 4..7, alike.
@pytest.mark.parametrize("bd,leg,was,side", [(1, 2, 480, "destination 0"),
                                             (3, 2, 20, "destination 0"),
                                             (6, 3, 20, "source 0")])
def test_a_bd_length_is_named_at_its_bd_not_the_tiles_first(
        ar2_out, tmp_path, bd, leg, was, side):
    """Bit 0 of a BD's length flipped: that stream carries one byte more than the leg's
    num_elements x 2 = 500, every other stream 500: the BD is named at its length (until
    2026-12-07 BDs 1 and 3 were named at the tile's first BD, `destination streams of 481..481
    bytes for sources of 480 bytes`, and BD 6, its 21 bytes past its buffer's end, at its
    buf_ptr)."""
    out = copy(ar2_out, tmp_path)
    _flip(out, 0, "dma.bin", 16 * bd)
    assert _error(out) == (
        f"{out / 'rank-0000'}: field length, rank 0, artifact dma.bin, record {bd}: length "
        f"should be {was}, not {was + 1}: the tile's other streams carry {was} bytes, and over "
        f"the leg's tiles every other stream carries 500 bytes, the leg's num_elements 250 x 2 "
        f"(legs.bin record {leg}), but {side} carries 501")


def test_a_bd_length_among_several_runs_of_a_stream_is_named_at_its_bd(tmp_path):
    """A bf16 all-reduce of 256 elements over ranks 0, 1 (RING), src and dst SBUF access
    patterns of one partition, rows of 16 elements (32 bytes) every 32 (dims [[1, 16], [32,
    16]]). Rank 0's legs.bin record 2 sends block 1's first half, elements [128, 192): 64
    elements, one tile (128 bytes, under 64 KiB: FORMATS §3 n_tiles), its source 4 runs of
    a row each, BDs 0..3 of 32 bytes (FORMATS §5: one BD per row of dim 0), then its
    destination. BD 1's length bit 0 flipped, 32 -> 33: the stream carries 129 bytes, and
    BD 1 alone is no whole row; 32 would make it one: it is named (until 2026-12-07 the
    tile's first BD, record 0)."""
    from test_sbuf_overlap import ap, sbuf_spec
    rows = ((1, 16), (32, 16))
    out = lower_spec(sbuf_spec("all_reduce", ap(dims=rows), ap("u", dims=rows), ranks=2),
                     tmp_path / "o")
    _flip(out, 0, "dma.bin", 16 * 1)
    assert _error(out) == (
        f"{out / 'rank-0000'}: field length, rank 0, artifact dma.bin, record 1: length should "
        "be 32, not 33: the 4 BDs of source 0 of the tile (dma.bin records 0..3) carry 129 "
        "bytes, not 128: the tile's other streams carry 128 bytes, and over the leg's tiles "
        "every other stream carries 128 bytes, the leg's num_elements 64 x 2 (legs.bin record "
        "2), but source 0 carries 129; its other BDs are whole rows of 32 bytes (the most "
        "common length of the stream's runs over the leg) or the two pieces of a row cut at a "
        "tile's end, and "
        "32 bytes would make this one so")


ORDER = " (FORMATS §5: a tile's M2S sources 0, 1, ..., then its S2M destinations)"


@pytest.mark.parametrize("bd,mask,field,why", [
    (0, 0x08, "LAST", "LAST should be 0, not 1: no tile ends here: the next BD's stream is "
     "this BD's or comes after it, and the next BD has no FIRST"),
    (1, 0x08, "LAST", "LAST should be 1, not 0: a tile ends here: the next BD's stream comes "
     "before this BD's, and the next BD has FIRST"),
    (1, 0x04, "FIRST", "FIRST should be 0, not 1: no tile starts here: this BD's stream is "
     "the previous BD's or comes after it, and the previous BD has no LAST"),
    (2, 0x04, "FIRST", "FIRST should be 1, not 0: a tile starts here: this BD's stream comes "
     "before the previous BD's, and the previous BD has LAST")])
def test_a_first_or_last_bit_is_named_at_its_bd(ar2_out, tmp_path, bd, mask, field, why):
    """A FIRST or LAST bit flipped inside a leg: a tile's streams run sources 0, 1, ..., then
    destinations, and a tile has both (FORMATS §5), so a tile ends exactly where the stream
    (dir, stream) falls from one BD to the next; the bit that breaks that is named at its BD
    (until 2026-12-07 the earlier BD of the two, as FIRST, `FIRST/LAST do not delimit
    tiles`)."""
    out = copy(ar2_out, tmp_path)
    _flip(out, 0, "dma.bin", 16 * bd + 3, mask)
    assert _error(out) == (f"{out / 'rank-0000'}: field {field}, rank 0, artifact dma.bin, "
                           f"record {bd}: {why}{ORDER}")


# ---------------------------------------------------------------- legs.bin order
def test_a_legs_channel_raised_is_named_at_its_record_not_the_next(ar2_out, tmp_path):
    """FORMATS §3: legs are ordered by (entry, channel); channel is the u8 at 6 of a 64-byte
    record. ar2_out's rank 0 has one entry on channel 0 (11 legs): record 5's channel bit 0
    set (0 -> 1) puts it before record 6 (channel 0), and records 4 and 6 are in order
    without it: record 5 is named, at channel (until 2026-12-07 `field spad_index, ...,
    record 6: legs are not ordered by (entry, channel): record 6 comes after entry 0 channel
    1`, a record nobody changed)."""
    out = copy(ar2_out, tmp_path)
    assert _flip(out, 0, "legs.bin", 64 * 5 + 6) == 0
    assert _error(out) == (
        f"{out / 'rank-0000'}: field channel, rank 0, artifact legs.bin, record 5: legs are not "
        "ordered by (entry, channel): record 5 (entry 0 channel 1) comes before record 6 "
        "(entry 0 channel 0), and records 4 and 6 are in order without it")


# ---------------------------------------------------------------- SBUF pieces vs elem_start
def test_an_sbuf_legs_elem_start_is_named_where_its_word_and_bd_agree(tmp_path):
    """A bf16 MESH all-gather over ranks 0..3, src an SBUF access pattern of 32 elements (one
    partition), dst 4 partitions of 32: member b's block is elements [32 b, 32 b + 32) of the
    collective (FORMATS §3: elem_start counts the collective's element space), so rank 1's
    mesh_send legs (leaf 16, FORMATS §3.2) start at 32, and their SBUF source is element 0 of
    the rank's src (element 32 - 32 x 1) and their destinations element 32 of each peer's dst.
    elem_start's bit 0 flipped, 32 -> 33 (the u64 at 48): the 0xBF word and the BD still agree
    on the place, which holds element 32, not 33, so the leg is named (until 2026-12-07 an SBUF
    piece was held to its BD only, and this simulated as a match)."""
    from test_sbuf_overlap import ap, sbuf_spec
    spec = sbuf_spec("all_gather", ap(dims=((1, 32),)), ap("u", parts=4, dims=((1, 32),)))
    out = lower_spec(spec, tmp_path / "o", algo="mesh")
    legs = np.fromfile(out / "rank-0001" / "legs.bin", F.LEG_DTYPE)
    sends = np.flatnonzero((legs["leaf"] == 16) & (legs["elem_start"] == 32))
    assert sends.size, legs[["leaf", "elem_start"]]
    rec = int(sends[0])
    _flip(out, 1, "legs.bin", 64 * rec + 48)
    err = _error(out)
    assert err.startswith(f"{out / 'rank-0001'}: field elem_start, rank 1, channel 0, artifact "
                          f"legs.bin, record {rec}: elem_start should be 32, not 33: the leg's "
                          "piece at sb2sb.bin record "), err
    assert err.endswith("both put its first element at the place of element 32 of the op's "
                        "SBUF operand, not of 33"), err


def test_the_sbuf_fixtures_mesh_elem_start_flip_is_named(tmp_path):
    """fixtures/sbuf.neff under --algo mesh (review 54b): trigger 2 is a bf16 all-gather of
    16 partitions x 64 = 1024 elements a rank over ranks 0..7 (fixtures/sbuf.yaml), so rank
    4's block is elements [4096, 5120) and its mesh_send legs of that entry start at 4096;
    elem_start 4096 ^ 4 = 4100 is named at its record with 4096 (until 2026-12-07 a
    match)."""
    from test_simulate import lower_neff
    out = lower_neff(ROOT / "fixtures" / "sbuf.neff", tmp_path / "o", algo="mesh")
    legs = np.fromfile(out / "rank-0004" / "legs.bin", F.LEG_DTYPE)
    sp = np.fromfile(out / "rank-0004" / "spad.bin", F.SPAD_DTYPE)
    assert sp.size == 4
    sends = np.flatnonzero((legs["leaf"] == 16) & (legs["spad_index"] == 2))
    assert sends.size and set(legs["elem_start"][sends].tolist()) == {4096}
    rec = int(sends[-1])
    _flip(out, 4, "legs.bin", 64 * rec + 48, 4)
    err = _error(out)
    assert err.startswith(f"{out / 'rank-0004'}: field elem_start, rank 4, channel 0, artifact "
                          f"legs.bin, record {rec}: elem_start should be 4096, not 4100: "), err
    assert err.endswith("of element 4096 of the op's SBUF operand, not of 4100"), err


def test_a_flat_ring_sbuf_legs_elem_start_is_named_before_its_half(tmp_path):
    """A bf16 RING all-reduce over ranks 0..3, src an SBUF access pattern of 2 partitions x
    4 x 16 elements (i0 stride 2, i1 stride 64: element e at partition e // 64, byte
    2 (2 (e % 16) + 64 ((e // 16) % 4))), 128 elements: chunks of 32, halves of 16 (FORMATS
    §3). A rank 0 leg of elements [64, 80), chunk 2's half 0, has elem_start's bit 4 flipped,
    64 -> 80: its SBUF piece's 0xBF word and BD still put its first element at element 64's
    place (partition 1, byte 0), so elem_start is named with 64 (until 2026-12-07 the line
    named the half the moved elem_start reads, 'half should be 1, not 0'; review 54p)."""
    from test_sbuf_overlap import ap, sbuf_spec
    spec = sbuf_spec("all_reduce", ap(parts=2, dims=((2, 16), (64, 4))),
                     ap(var="u", start=6, parts=[1, 2], dims=((3, 16), (100, 4))))
    out = lower_spec(spec, tmp_path / "o", algo="ring")
    legs = np.fromfile(out / "rank-0000" / "legs.bin", F.LEG_DTYPE)
    hits = np.flatnonzero((legs["elem_start"] == 64) & (legs["sb2sb_count"] > 0)
                          & (legs["num_elements"] == 16) & (legs["half"] == 0))
    assert hits.size, legs[["leaf", "elem_start", "half", "sb2sb_count"]]
    rec = int(hits[0])
    _flip(out, 0, "legs.bin", 64 * rec + 48, 16)
    err = _error(out)
    assert err.startswith(f"{out / 'rank-0000'}: field elem_start, rank 0, channel 0, artifact "
                          f"legs.bin, record {rec}: elem_start should be 64, not 80: the leg's "
                          "piece at sb2sb.bin record "), err
    assert err.endswith("both put its first element at 64, not 80"), err


# ---------------------------------------------------------------- flat RING leaf vs step loop
@pytest.mark.parametrize("op,want,first,hops", [
    # all-gather, 1024 elements a rank over 8: step 0 sends the rank's own block [0, 1024)
    # (member 0 hops ahead), H0 [0, 512) then H1 [512, 1024): the second send is changed;
    # of send and direct_copy (LOCAL) only send has the record's neigh NEXT (FORMATS §3)
    ("all_gather", "send", (512, 1024), 0),
    # all-reduce of 1024 over 8 (chunks of 128, halves of 64): step 0 sends the chunk of the
    # member n - 1 = 7 hops ahead on channel 0's ring 0 -> 1 -> ... -> 7, [896, 1024): H0
    ("all_reduce", "send", (896, 960), 7),
])
def test_a_flat_ring_leaf_the_step_loop_does_not_call_is_named(tmp_path, op, want, first, hops):
    """Seed 001 §4's step loop fixes which leaf moves which chunk (an all-reduce's step 0 is
    send; the all-gather's first step is send plus direct_copy, docs/DESIGN.md "Buffers and
    data flow"). A send changed into direct_copy_send (leaf 1 ^ 4 = 5, byte 12: FORMATS §3)
    has the same data flow, semaphores, sdma_op and neigh, and its ring_step is the send's;
    until 2026-12-07 it simulated as a match (review 54b)."""
    out = lower_spec(coll_spec(op, "bf16", 8, 1024), tmp_path / "o")
    legs = np.fromfile(out / "rank-0000" / "legs.bin", F.LEG_DTYPE)
    rec = int(np.flatnonzero((legs["leaf"] == 1) & (legs["elem_start"] == first[0]))[0])
    assert legs["num_elements"][rec] == first[1] - first[0]
    _flip(out, 0, "legs.bin", 64 * rec + 12, 4)
    verb = "all-gather" if op == "all_gather" else "all-reduce"
    assert _error(out) == (
        f"{out / 'rank-0000'}: field leaf, rank 0, channel 0, artifact legs.bin, record {rec}: "
        f"leaf should be {want}, not direct_copy_send: elements [{first[0]}, {first[1]}) are "
        f"of the chunk of the member {hops} hops ahead on the channel's ring of 8, which the "
        f"{verb}'s step loop moves at step 0 with {want} (seed 001 §4, docs/DESIGN.md "
        "\"Buffers and data flow\", FORMATS §3)")


@pytest.mark.parametrize("first,xor,was,want,hops,step", [
    # all-reduce of 1024 over 8 (chunks of 128, halves of 64) on channel 0's ring 0 -> 1 ->
    # ... -> 7: the all-gather phase receives and sends on the chunk of the member 5 hops
    # ahead, [640, 768), at step 2n - 1 - 5 = 10 (direct_recv_send, leaf 6); 6 ^ 7 = 1, send,
    # a leaf of the first phase, whose step for that chunk would be n - 1 - 5 = 2
    ((640, 704), 7, "send", "direct_recv_send", 5, 10),
    # ... and the first phase's step 0 sends the chunk of the member 7 hops ahead, [896, 1024)
    # (send, leaf 1); 1 ^ 7 = 6, direct_recv_send, whose step there would be 2n - 1 - 7 = 8
    ((896, 960), 7, "direct_recv_send", "send", 7, 0),
    # the rank's own chunk [0, 128) is reduced last, at step n - 1 = 7, by recv_reduce_copy
    # then direct_copy_send (leaf 5; sdma_op 2, a copy, neigh NEXT, FORMATS §3): 5 ^ 4 = 1,
    # send, is named with the one of the two whose sdma_op and neigh the record keeps
    ((0, 64), 4, "send", "direct_copy_send", 0, 7),
])
def test_a_flat_ring_leaf_swapped_across_the_phases_is_named_with_the_step_loops_leaf(
        tmp_path, first, xor, was, want, hops, step):
    """Seed 001 §4's all-reduce step loop: over n ranks, step n - 1 - i moves the chunk of the
    member i hops ahead in the reduce-scatter phase, step 2n - 1 - i in the all-gather phase.
    A leaf swapped into the other phase with the same sdma_op and neigh keeps a ring_step that
    is the step loop's for its chunk in its old phase, so the leaf is what disagrees (until
    2026-12-07 the line named ring_step with the new leaf's step, 'ring_step should be 2 ...',
    and a rank's own final chunk named both of its leaves, 'recv_reduce_copy or
    direct_copy_send'; review 54p)."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 8, 1024), tmp_path / "o")
    legs = np.fromfile(out / "rank-0000" / "legs.bin", F.LEG_DTYPE)
    code = {"send": 1, "direct_copy_send": 5, "direct_recv_send": 6}  # FORMATS §3 leaf
    rec = int(np.flatnonzero((legs["leaf"] == code[want])
                             & (legs["elem_start"] == first[0]))[0])
    assert legs["num_elements"][rec] == first[1] - first[0]
    _flip(out, 0, "legs.bin", 64 * rec + 12, xor)
    assert _error(out) == (
        f"{out / 'rank-0000'}: field leaf, rank 0, channel 0, artifact legs.bin, record {rec}: "
        f"leaf should be {want}, not {was}: elements [{first[0]}, {first[1]}) are of the chunk "
        f"of the member {hops} hops ahead on the channel's ring of 8, which the all-reduce's "
        f"step loop moves at step {step} with {want} (seed 001 §4, docs/DESIGN.md \"Buffers "
        "and data flow\", FORMATS §3)")


# ---------------------------------------------------------------- a receive entry's size
def test_an_inter_rdh_receive_size_is_named_at_its_entry_not_the_post_recv_legs(tmp_path):
    """A bf16 INTER_RDH all-reduce of 1024 elements over ranks 0, 128, ..., 896 (one a node,
    trn2:nodes=8). Recursive halving (docs/DESIGN.md "RDH"): at step 0 core rank 0 exchanges
    with 0 ^ 4, rank 512, keeps [0, 512) and receives the partner's copy of it, 512 x 2 = 1024
    bytes, its first receive entry (net_dest.bin record 0; size the u32 at 32, FORMATS §8.2).
    Size bit 3 flipped, 1024 -> 1032: the transmit entry it pairs with and the post_recv legs
    both say 1024, so the receive entry is named (until 2026-12-07 the post_recv legs were,
    'the post_recv legs ... should count 3592 bytes')."""
    out = lower_spec(coll_spec("all_reduce", "bf16", [128 * i for i in range(8)], 1024),
                     tmp_path / "o", algo="inter_rdh", topology="trn2:nodes=8")
    dest = (out / "rank-0000" / "net_dest.bin").read_bytes()
    assert struct.unpack_from("<I", dest, 32)[0] == 1024
    assert struct.unpack_from("<i", dest, 40)[0] == 512
    _flip(out, 0, "net_dest.bin", 32, 8)
    err = _error(out)
    assert err.startswith(
        f"{out / 'rank-0000'}: field size, rank 0, channel 0, artifact net_dest.bin, record 0: "
        "size should be 1024, not 1032: the paired transmit entry (rank 512, net_src.bin "
        "record "), err


def test_a_post_recvs_count_is_named_at_its_leg_not_the_first_post_recv(tmp_path):
    """The same INTER_RDH all-reduce: rank 0's post_recv legs (leaf 21) each carry the
    element range of the transfer they receive (FORMATS §3, §8 "Entries"). One of them, of
    128 elements, has num_elements bit 8 flipped (128 -> 384, byte 57 of its record): it is
    named at its record, against its transfer (until 2026-12-07 the entry's first post_recv
    leg was, with the entry's sum)."""
    out = lower_spec(coll_spec("all_reduce", "bf16", [128 * i for i in range(8)], 1024),
                     tmp_path / "o", algo="inter_rdh", topology="trn2:nodes=8")
    legs = np.fromfile(out / "rank-0000" / "legs.bin", F.LEG_DTYPE)
    posts = np.flatnonzero((legs["leaf"] == 21) & (legs["num_elements"] == 128))
    assert posts.size
    rec = int(posts[0])
    e0 = int(legs["elem_start"][rec])
    _flip(out, 0, "legs.bin", 64 * rec + 57)
    err = _error(out)
    assert err.startswith(
        f"{out / 'rank-0000'}: field num_elements, rank 0, channel 0, artifact legs.bin, "
        f"record {rec}: post_recv of elements [{e0}, {e0 + 384}) receives the transfer of "), err
    assert err.endswith("a post_recv carries the element range of the transfer it receives "
                        "(FORMATS §8 \"Entries\")"), err


# ---------------------------------------------------------------- a channel program split
def test_a_mark_end_moved_off_a_one_leg_program_is_named_not_the_leg(tmp_path):
    """Review 54p: a one-rank all-reduce of one element lowers to one channel program on
    channel 0, a copy leg (record 0, step 0) and its mark_end (record 1, step 1) (FORMATS §3).
    The mark_end's channel bit 0 flipped (byte 64 + 6), 0 -> 1: from legs.bin alone either
    record may have moved, and the data leg was named ('channel should be 1, not 0' at record
    0, whose value, followed, met spad.bin's channel_list). The entry's channel_list, 0x1
    (FORMATS §2: its one channel, 0), tells: record 1 is named, its channel should be 0."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 1, 1), tmp_path / "o", algo="ring")
    legs = np.fromfile(out / "rank-0000" / "legs.bin", F.LEG_DTYPE)
    assert [(int(x["channel"]), int(x["step"])) for x in legs] == [(0, 0), (0, 1)]
    _flip(out, 0, "legs.bin", 64 + 6)
    assert _error(out) == (
        f"{out / 'rank-0000'}: field channel, rank 0, artifact legs.bin, record 1: channel "
        "should be 0, not 1: record 1 alone makes a channel program (entry 0 channel 1) of "
        "only mark_end, and its step 1 runs on from record 0's (entry 0 channel 0, step 0): "
        "legs are ordered by (entry, channel), each channel program ends with mark_end "
        "(FORMATS §3)")


def test_a_channel_that_splits_a_program_is_named_at_its_record(tmp_path):
    """A HIER reduce-scatter over ranks 0, 1, 64, 65 (trn2:nodes=2, LNC 2): two entries a rank
    (intra_redsct, inter_redsct, FORMATS §3.3 HIER: each leg its own channel range). Rank 0's
    first leg of entry 1 has its channel's bit 0 flipped (byte 6), 1 -> 0: alone, it makes
    a program of entry 1 on channel 0 without mark_end (FORMATS §3: every channel program ends
    with one), and its step 0 runs on into the next record's, step 1 on channel 1. Its channel
    is named (until 2026-12-07 the next record's step was: 'step should be 0, program
    order's, not 1')."""
    out = lower_spec(coll_spec("reduce_scatter", "bf16", [0, 1, 64, 65], 384, lnc=2),
                     tmp_path / "o", algo="hier", topology="trn2:nodes=2")
    legs = np.fromfile(out / "rank-0000" / "legs.bin", F.LEG_DTYPE)
    rec = int(np.flatnonzero(legs["spad_index"] == 1)[0])
    assert legs["channel"][rec] == 1 and legs["channel"][rec + 1] == 1
    assert legs["step"][rec] == 0 and legs["step"][rec + 1] == 1
    _flip(out, 0, "legs.bin", 64 * rec + 6)
    assert _error(out) == (
        f"{out / 'rank-0000'}: field channel, rank 0, artifact legs.bin, record {rec}: channel "
        f"should be 1, not 0: record {rec} alone makes a channel program (entry 1 channel 0) "
        f"without mark_end, and its step 0 runs on into record {rec + 1}'s (entry 1 channel 1, "
        "step 1): legs are ordered by (entry, channel), each channel program ends with "
        "mark_end (FORMATS §3)")


# ---------------------------------------------------------------- a transmit size past gw
def test_a_transmit_size_running_past_its_region_is_named_at_its_size(tmp_path):
    """A bf16 HIER all-reduce of 768 elements over ranks 0, 1, 64, 65 (trn2:nodes=2, LNC 2):
    inter_allr is a two-rank ring over a local index's slice, 768 / 2 = 384 elements, so a
    block of 192 and a half-chunk of 96 (FORMATS §8 "Entries": a ring leg's half-chunk in the
    gateway view is one transmit entry, the whole transfer of its send leg), 96 x 2 = 192
    bytes. Rank 65's transmit entry ending at the gw region's end (FORMATS §10: the rank's
    window offset plus the region's offset and size) has its size (the u32 at 32, §8.2)
    raised to 193: its sending leg's bytes name the size, as they do for an entry with room
    after it (until 2026-12-07 `field dev_addr, ...: dev_addr ... (193 bytes) runs past the
    end of its region`)."""
    out = lower_spec(coll_spec("all_reduce", "bf16", [0, 1, 64, 65], 768, lnc=2),
                     tmp_path / "o", algo="hier", topology="trn2:nodes=2")
    mem = json.loads((out / "manifest.json").read_text())["memory"]
    gw = next(r for r in mem["regions"] if r["kind"] == "gw")
    gw_end = mem["dram_base"] + gw["offset"] + gw["size"]
    tx = np.fromfile(out / "rank-0065" / "net_src.bin", F.NET_SRC_ADDR_DTYPE)
    ends = (tx["dev_addr"].astype(np.int64) + tx["size"]) % mem["core_window"]
    rec = int(np.flatnonzero((ends == gw_end) & (tx["mark"] == 0))[0])
    assert int(tx["size"][rec]) == 192 and int(tx["dst_rank"][rec]) == 1
    raw = bytearray((out / "rank-0065" / "net_src.bin").read_bytes())
    struct.pack_into("<I", raw, 72 * rec + 32, 193)
    (out / "rank-0065" / "net_src.bin").write_bytes(bytes(raw))
    rehash(out)
    err = _error(out)
    assert err.startswith(
        f"{out / 'rank-0065'}: field size, rank 65, channel 2, artifact net_src.bin, record "
        f"{rec}: size should be 192, not 193: this entry is the whole transfer of rank 65's "
        "direct_copy_send leg (legs.bin record "), err
    assert err.endswith(f"num_elements 96 x 2 = 192 bytes, as the paired receive entry (rank 1, "
                        f"net_dest.bin record {rec}) says"), err


def test_a_channel_raised_on_a_programs_mark_end_is_named_at_its_record(ar2_out, tmp_path):
    """ar2_out's rank 0 runs one channel program, legs.bin records 0..10 (entry 0, channel 0),
    mark_end last (record 10, step 10: FORMATS §3, step the leg's position in its program).
    Its channel bit 0 flipped (byte 6), 0 -> 1: the program left on channel 0 lacks mark_end
    and record 10 alone makes one on channel 1 whose step runs on from record 9's. Its
    channel is named (review 54l saw the step named on a mesh's, 'step should be 0, program
    order's, not 14', before fixer 54m's 8c00cc4)."""
    out = copy(ar2_out, tmp_path)
    legs = np.fromfile(out / "rank-0000" / "legs.bin", F.LEG_DTYPE)
    assert int(legs["leaf"][10]) == 15 and int(legs["step"][10]) == 10
    assert _flip(out, 0, "legs.bin", 64 * 10 + 6) == 0
    assert _error(out) == (
        f"{out / 'rank-0000'}: field channel, rank 0, artifact legs.bin, record 10: channel "
        "should be 0, not 1: record 10 alone makes a channel program (entry 0 channel 1) of "
        "only mark_end, and its step 10 runs on from record 9's (entry 0 channel 0, step 9): "
        "legs are ordered by (entry, channel), each channel program ends with mark_end "
        "(FORMATS §3)")


# ---------------------------------------------------------------- flat RING: what the leaf fixes
def _set_u64(out: Path, rank: int, name: str, offset: int, value: int) -> int:
    """Set the u64 at ``offset`` of ``rank``'s ``name``; re-hash; return the old value."""
    p = out / f"rank-{rank:04d}" / name
    b = bytearray(p.read_bytes())
    old = struct.unpack_from("<Q", b, offset)[0]
    struct.pack_into("<Q", b, offset, value)
    p.write_bytes(bytes(b))
    rehash(out)
    return old


def test_a_flat_ring_data_legs_elem_start_moved_into_the_other_half_is_named_at_elem_start(
        ar2_out, tmp_path):
    """ar2_out's rank 0 legs.bin record 2 sends H0 of block 1, elements [500, 750) (halves of
    250: FORMATS §3); its elem_start (u64 at 48) set to 750, H1's first element. The leg's
    piece, sb2sb.bin record 0 (legs 0 and 1 move no data), keeps src.start_addr 500 x 2 =
    0x3e8 (§4), and its first BD (dma.bin record 0) element 500: the two agree, so the changed
    field is elem_start (until 2026-12-07 the line named half, 'half should be 1, not 0:
    elements [750, 1000) are half 1 of their chunk', a field nobody changed; a test expected
    it of a changed num_elements: test_a_ring_leg_running_past_its_block_is_refused_for_its_
    count)."""
    out = copy(ar2_out, tmp_path)
    assert _set_u64(out, 0, "legs.bin", 64 * 2 + 48, 750) == 500
    assert _error(out) == (
        f"{out / 'rank-0000'}: field elem_start, rank 0, channel 0, artifact legs.bin, record "
        "2: elem_start should be 500, not 750: the leg's piece at sb2sb.bin record 0 "
        "(src.start_addr 0x3e8) and the BD that moves it (dma.bin record 0) both put its "
        "first element at 500, not 750")


def test_a_flat_ring_direct_recvs_elem_start_moved_into_the_other_half_is_named_at_elem_start(
        ar2_out, tmp_path):
    """ar2_out's rank 0 legs.bin record 8 is the first direct_recv, H0 of block 1, elements
    [500, 750) (no data: FORMATS §3), which rank 1, its ring predecessor, sends as the
    direct_copy_send of its own block's H0 (seed 001 §4 over 2 ranks). Its elem_start set
    to 250 (block 0's H1): the ring pairing names elem_start with what the predecessor sent
    (until 2026-12-07 the line named half, 'half should be 1, not 0')."""
    out = copy(ar2_out, tmp_path)
    assert _set_u64(out, 0, "legs.bin", 64 * 8 + 48, 250) == 500
    err = _error(out)
    assert err.startswith(f"{out / 'rank-0000'}: field elem_start, trigger 0, rank 0, "
                          "artifact legs.bin, record 8: consuming leg "), err
    assert "(direct_recv) takes elements [250, 500), but sending leg " in err, err
    assert err.endswith("of its ring predecessor, rank 1 (its legs.bin record 5, "
                        "direct_copy_send), sent [500, 750)"), err


@pytest.fixture(scope="module")
def ar8_out(tmp_path_factory) -> Path:
    """A bf16 all-reduce of 1024 elements over ranks 0..7, RING: one channel, ring 0 -> 1 ->
    ... -> 7, one chunk group of chunks of 128, halves of 64 (FORMATS §3). Seed 001 §4's
    loop on rank 0: step n - 1 - i moves the chunk of the member i hops ahead in the
    reduce-scatter phase, step 2n - 1 - i in the all-gather phase."""
    return lower_spec(coll_spec("all_reduce", "bf16", 8, 1024),
                      tmp_path_factory.mktemp("ar8") / "o")


LEAF_CODE = {"send": 1, "recv_reduce_send": 2, "recv_reduce_copy": 3,
             "recv_reduce_copy_send": 4, "direct_copy_send": 5, "direct_recv_send": 6}


@pytest.mark.parametrize("leaf,start,to,hops,step,sdma,neigh", [
    # step 1 (i = 6) receives, reduces and sends on member 6's chunk [768, 896): H0. As
    # recv_reduce_copy (2 ^ 1 = 3: sdma_op 4 alike, neigh LOCAL 0 where the record keeps NEXT
    # 1) it was named at neigh
    ("recv_reduce_send", 768, "recv_reduce_copy", 6, 1, 4, 1),
    # step 0 (i = 7) sends member 7's chunk [896, 1024): H0. As recv_reduce_send (1 ^ 3 = 2,
    # a reduce: sdma_op 4, where the record keeps 2, a copy) it was named at sdma_op
    ("send", 896, "recv_reduce_send", 7, 0, 2, 1),
    # step 2n - 1 - 5 = 10 receives and sends on member 5's chunk [640, 768) in the
    # all-gather phase; recv_reduce_send (6 ^ 4 = 2) is what the first phase calls on that
    # chunk (at step 2): the record's ring_step 10 says the phase
    ("direct_recv_send", 640, "recv_reduce_send", 5, 10, 2, 1),
    # step n - 1 = 7 reduces the rank's own chunk [0, 128) with recv_reduce_copy and sends it
    # with direct_copy_send, both called there: H0's recv_reduce_copy made direct_copy_send
    # (3 ^ 6 = 5), and H1's direct_copy_send made recv_reduce_copy, disagree with their new
    # leaf in both sdma_op and neigh, the other leaf's: named at sdma_op, 'sdma_op for leaf
    # direct_copy_send should be 2, not 4', until 2026-12-07 (review 55t)
    ("recv_reduce_copy", 0, "direct_copy_send", 0, 7, 4, 0),
    ("direct_copy_send", 64, "recv_reduce_copy", 0, 7, 2, 1),
])
def test_a_flat_ring_leaf_swapped_for_one_of_another_sdma_op_or_neigh_is_named_at_leaf(
        ar8_out, tmp_path, leaf, start, to, hops, step, sdma, neigh):
    """FORMATS §3: leaf is the byte at 12, sdma_op at 7, neigh at 15. A leaf changed into one
    whose sdma_op or neigh differ from the record's made those fields disagree with it, and
    the line named the field checked first (sdma_op or neigh) with the new leaf's value,
    though the leaf is what changed: the step loop (seed 001 §4) fixes the leaf from the
    chunk the elem_start names, and the one it calls there with the record's sdma_op and
    neigh is named (SIMULATOR §2)."""
    out = copy(ar8_out, tmp_path)
    legs = np.fromfile(out / "rank-0000" / "legs.bin", F.LEG_DTYPE)
    rec = int(np.flatnonzero((legs["leaf"] == LEAF_CODE[leaf])
                             & (legs["elem_start"] == start))[0])
    assert (int(legs["num_elements"][rec]), int(legs["ring_step"][rec])) == (64, step)
    assert (int(legs["sdma_op"][rec]), int(legs["neigh"][rec])) == (sdma, neigh)
    _flip(out, 0, "legs.bin", 64 * rec + 12, LEAF_CODE[leaf] ^ LEAF_CODE[to])
    assert _error(out) == (
        f"{out / 'rank-0000'}: field leaf, rank 0, channel 0, artifact legs.bin, record {rec}: "
        f"leaf should be {leaf}, not {to}: elements [{start}, {start + 64}) are of the chunk "
        f"of the member {hops} hops ahead on the channel's ring of 8, which the all-reduce's "
        f"step loop moves at step {step} with {leaf}, the leaf of the record's sdma_op {sdma} "
        f"and neigh {neigh} (seed 001 §4, docs/DESIGN.md \"Buffers and data flow\", FORMATS "
        "§3)")


def test_a_host_cc_final_reduce_swapped_for_recv_reduce_send_is_named_at_leaf(tmp_path):
    """A bf16 all-reduce of 4096 elements over ranks 0..3 with --host-cc: chunks of 1024,
    halves of 512; rank 0's own chunk [0, 1024) is reduced last, at step n - 1 = 3, by
    recv_reduce_copy_send (seed 001 §4, reduction_type RING_2R2W 1: seed 000 §5.4). As
    recv_reduce_send (4 ^ 6 = 2: sdma_op and neigh alike, reduction_type RING_2R1W 0) it
    was named at reduction_type, 'reduction_type 1 in a RING reduce leg'."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 4, 4096), tmp_path / "o", host_cc=True)
    legs = np.fromfile(out / "rank-0000" / "legs.bin", F.LEG_DTYPE)
    rec = int(np.flatnonzero((legs["leaf"] == 4) & (legs["elem_start"] == 0))[0])
    assert (int(legs["reduction_type"][rec]), int(legs["ring_step"][rec])) == (1, 3)
    _flip(out, 0, "legs.bin", 64 * rec + 12, 6)
    assert _error(out) == (
        f"{out / 'rank-0000'}: field leaf, rank 0, channel 0, artifact legs.bin, record {rec}: "
        "leaf should be recv_reduce_copy_send, not recv_reduce_send: elements [0, 512) are of "
        "the chunk of the member 0 hops ahead on the channel's ring of 4, which the "
        "all-reduce's step loop moves at step 3 with recv_reduce_copy_send, the leaf of the "
        "record's sdma_op 4 and neigh 1 (seed 001 §4, docs/DESIGN.md \"Buffers and data "
        "flow\", FORMATS §3)")


@pytest.mark.parametrize("start,to", [(896, 8), (0, 15)])
def test_a_flat_ring_step_moved_to_the_other_phases_is_named_at_ring_step(
        ar8_out, tmp_path, start, to):
    """The send of member 7's chunk [896, 960) is step 0; its ring_step (u32 at 60) bit 3
    set makes 8, the step the all-gather phase gives that chunk (2n - 1 - 7), and the rank's
    own direct_copy_send of [0, 64) at step 7 made 15 likewise (2n - 1 - 0). The leaf's
    semaphores bear it out (a send, a direct_copy_send waits on no recv_sema, the all-gather
    phase's direct_recv_send there would: FORMATS §7), so ring_step is named, not the leaf
    (until 2026-12-07: 'leaf should be direct_recv_send, not send')."""
    out = copy(ar8_out, tmp_path)
    legs = np.fromfile(out / "rank-0000" / "legs.bin", F.LEG_DTYPE)
    rec = int(np.flatnonzero(np.isin(legs["leaf"], (1, 5)) & (legs["elem_start"] == start))[0])
    was = int(legs["ring_step"][rec])
    _flip(out, 0, "legs.bin", 64 * rec + 60, was ^ to)
    lf = "send" if start else "direct_copy_send"
    assert _error(out) == (
        f"{out / 'rank-0000'}: field ring_step, rank 0, channel 0, artifact legs.bin, record "
        f"{rec}: ring_step should be {was}, the ring schedule's, not {to}: {lf} of elements "
        f"[{start}, {start + 64}) is step {was} of chunk group 0 (seed 001 §4, FORMATS §3)")


@pytest.mark.parametrize("rec,leg,to,step,want", [
    # send of member 7's chunk [6144, 12288) H1 at step n - 1 - 7 = 0, made direct_recv_send
    (3, (1, 1, 6144, 0), 6, 0, "send"),
    # direct_recv_send of member 7's chunk [0, 6144) H0 at step 2n - 1 - 7 = 8, made send
    (20, (6, 0, 0, 8), 1, 8, "direct_recv_send"),
])
def test_an_sbuf_ring_leaf_swapped_across_the_phases_is_named_at_leaf(
        tmp_path, rec, leg, to, step, want):
    """fixtures/sbuf.neff lowered as RING (8 ranks, chunks of 12288, halves of 6144): on
    rank 1 (member 0 is 7 hops ahead on the ring 0 -> 1 -> ... -> 7) a leaf swapped between
    send and direct_recv_send (same sdma_op and neigh) on an SBUF operand was named at
    sem_count ('send leg ... should have 0 x a wait recv_sema >= 1, not 1'), checked before
    the leaf error held for check_sb2sb: the leg's semaphores disagree with the new leaf, so
    the leaf is named as on a DRAM operand (review 55t)."""
    from test_simulate import lower_neff
    out = lower_neff(ROOT / "fixtures" / "sbuf.neff", tmp_path / "o", algo="ring")
    legs = np.fromfile(out / "rank-0001" / "legs.bin", F.LEG_DTYPE)
    assert tuple(int(legs[f][rec]) for f in ("leaf", "half", "elem_start", "ring_step")) \
        == leg
    _flip(out, 1, "legs.bin", 64 * rec + 12, leg[0] ^ to)
    got = {1: "send", 6: "direct_recv_send"}[to]
    assert _error(out) == (
        f"{out / 'rank-0001'}: field leaf, rank 1, channel 0, artifact legs.bin, record {rec}: "
        f"leaf should be {want}, not {got}: elements [{leg[2]}, {leg[2] + 6144}) are of the "
        "chunk of the member 7 hops ahead on the channel's ring of 8, which the all-reduce's "
        f"step loop moves at step {step} with {want} (seed 001 §4, docs/DESIGN.md \"Buffers "
        "and data flow\", FORMATS §3)")


# ---------------------------------------------------------------- a HIER leg's RING and
# KANGARING legs: half and ring_step over the leg's layout (review 55t's "Left")
@pytest.fixture(scope="module")
def hier_legs_out(tmp_path_factory) -> Path:
    """A bf16 HIER all-reduce of 4001 elements and all-gather of 300 over 32 ranks at LNC 2,
    two nodes of 16 (a node of four trn2 devices), ``intra_redsct`` and ``intra_allg`` forced
    to KANGARING (the all-gather's ``inter_allg`` runs RING). Rank 0's ``intra_redsct`` group
    is ranks 0 - 15 (position p = rank p), its slices [256 p, 256 (p + 1)) (docs/DESIGN.md
    "HIER": 4001 by even_split in 16 slices of 256, the last 161), one chunk of 256 a slice
    (halves of 128) on channel 0, the cycle of 8 units [0, 2], [1, 3], [4, 6], [5, 7],
    [12, 14], [13, 15], [8, 10], [9, 11]. Its ``inter_allg`` group is [0, 16], position i
    owning the block of 300 elements of its rank ([4800, 5100) for rank 16), one chunk of
    300 (halves of 150) on channel 0, ring [0, 16]."""
    from irsim import SMALL_TWO_NODE_TOPOLOGY, ar, ag, collective_spec
    root = tmp_path_factory.mktemp("hier_legs")
    topo = root / "topo.json"
    topo.write_text(json.dumps(SMALL_TWO_NODE_TOPOLOGY))
    out = lower_spec(collective_spec([ar(4001), ag(300)], 32), root / "o",
                     algo="intra_redsct:kangaring;intra_allg:kangaring", topology=str(topo))
    t = json.loads((out / "manifest.json").read_text())["triggers"]
    legs = {x["name"]: x for x in t[0]["hier"]["legs"] + t[1]["hier"]["legs"]}
    assert t[0]["hier"]["slices"][12] == [3072, 3328]
    plan = legs["intra_redsct"]["plans"][0]
    assert legs["intra_redsct"]["algorithm"] == "KANGARING"
    assert plan["chunk"] == {"channels": 1, "chunk_size_n": 256, "pgta": 1, "tail_chunk": 256}
    assert plan["channels"] == [{"channel": 0, "order": [0, 1, 4, 5, 12, 13, 8, 9]}]
    assert plan["kangaring"][0]["units"][4] == [12, 14]
    plan = legs["inter_allg"]["plans"][0]
    assert legs["inter_allg"]["algorithm"] == "RING"
    assert legs["inter_allg"]["groups"][0] == {"group": [0, 16], "plan": 0}
    assert plan["chunk"] == {"channels": 1, "chunk_size_n": 320, "pgta": 1, "tail_chunk": 300}
    assert plan["channels"] == [{"channel": 0, "order": [0, 1]}]
    return out


def _hier_leg(out: Path, rank: int, leg: str, leaf: int, start: int) -> int:
    """The legs.bin record of ``rank``'s entry of HIER leg ``leg`` of ``leaf`` from element
    ``start``."""
    entries = json.loads((out / f"rank-{rank:04d}" / "manifest.json").read_text())["entries"]
    L = np.fromfile(out / f"rank-{rank:04d}" / "legs.bin", F.LEG_DTYPE)
    mine = np.array([entries[int(e)]["leg"] == leg for e in L["spad_index"]], bool)
    return int(np.flatnonzero(mine & (L["leaf"] == leaf) & (L["elem_start"] == start))[0])


def test_a_hier_ring_legs_half_is_the_half_chunk_of_its_segment(hier_legs_out, tmp_path):
    """Rank 0's ``inter_allg`` direct_recv (leaf 7) of rank 16's block H0 [4800, 4950) (one
    chunk of 300: H0 its first 150) with its half said 1: a HIER RING leg's half was
    range-checked only until 2026-12-07 (review 55t's Left) and simulated as a match."""
    from test_simulate_single_cycle import _set_leg_field
    out = copy(hier_legs_out, tmp_path)
    rec = _hier_leg(out, 0, "inter_allg", 7, 4800)
    _set_leg_field(out, 0, rec, 13, "<B", 1, (0, 7, 0, 1, 4800, 150))
    assert _error(out) == (
        f"{out / 'rank-0000'}: field half, rank 0, artifact legs.bin, record {rec}: half "
        "should be 0, not 1: elements [4800, 4950) are half 0 of their chunk (a HIER "
        "inter_allg leg cuts each of its positions' segments as a ring block, 1 x 320 "
        "elements a chunk group: docs/DESIGN.md \"Leg layouts\")")


def test_a_hier_ring_legs_ring_step_is_the_rings_over_its_group(hier_legs_out, tmp_path):
    """The same direct_recv: rank 16 is 1 hop ahead on the ring [0, 16], so seed 001 §4's
    all-gather step (n - i) mod n = (2 - 1) mod 2 = 1, 2 steps a group (the send of the own
    block at 0); its ring_step said 0 simulated as a match until 2026-12-07 (review 55t's
    Left)."""
    from test_simulate_single_cycle import _set_leg_field
    out = copy(hier_legs_out, tmp_path)
    rec = _hier_leg(out, 0, "inter_allg", 7, 4800)
    _set_leg_field(out, 0, rec, 60, "<I", 0, (0, 7, 0, 1, 4800, 150))
    assert _error(out) == (
        f"{out / 'rank-0000'}: field ring_step, rank 0, channel 0, artifact legs.bin, record "
        f"{rec}: ring_step should be 1, the ring schedule's, not 0: direct_recv of elements "
        "[4800, 4950) moves the chunk of the member 1 hop ahead on the channel's ring of 2 of "
        "the HIER inter_allg leg: step 1 of chunk group 0 (2 steps a group on this channel) "
        "(seed 001 §4's step template over the leg's group and layout: docs/DESIGN.md \"Leg "
        "layouts\", \"HIER\"; FORMATS §3)")


def test_a_hier_kangaring_legs_half_is_the_half_chunk_of_its_slice(hier_legs_out, tmp_path):
    """Rank 0's ``intra_redsct`` recv_reduce_send (leaf 2) of rank 12's slice H1 [3200,
    3328) (slice 12 = [3072, 3328), one chunk of 256: H1 from 3072 + 128) with its half said
    0: range-checked only until 2026-12-07 (review 55t's Left)."""
    from test_simulate_single_cycle import _set_leg_field
    out = copy(hier_legs_out, tmp_path)
    rec = _hier_leg(out, 0, "intra_redsct", 2, 3200)
    _set_leg_field(out, 0, rec, 13, "<B", 0, (0, 2, 1, 3, 3200, 128))
    assert _error(out) == (
        f"{out / 'rank-0000'}: field half, rank 0, artifact legs.bin, record {rec}: half "
        "should be 1, not 0: elements [3200, 3328) are half 1 of their chunk (a HIER "
        "intra_redsct leg cuts each of its positions' segments as a ring block, 1 x 256 "
        "elements a chunk group: docs/DESIGN.md \"Leg layouts\")")


def test_a_hier_kangaring_legs_ring_step_is_the_ring_template_over_its_units(
        hier_legs_out, tmp_path):
    """The same leg: rank 12's unit [12, 14] is 4 hops ahead of rank 0's [0, 2] on the cycle
    of 8 units, so the reduce-scatter step u - 1 - i = 8 - 1 - 4 = 3, 8 steps a group
    (docs/DESIGN.md "Kangaring"); its ring_step said 4 simulated as a match until
    2026-12-07 (review 55t's Left)."""
    from test_simulate_single_cycle import _set_leg_field
    out = copy(hier_legs_out, tmp_path)
    rec = _hier_leg(out, 0, "intra_redsct", 2, 3200)
    _set_leg_field(out, 0, rec, 60, "<I", 4, (0, 2, 1, 3, 3200, 128))
    assert _error(out) == (
        f"{out / 'rank-0000'}: field ring_step, rank 0, channel 0, artifact legs.bin, record "
        f"{rec}: ring_step should be 3, the kangaring schedule's, not 4: recv_reduce_send of "
        "elements [3200, 3328) moves the chunk of a member of the unit 4 hops ahead on the "
        "channel's cycle of 8 units of the HIER intra_redsct leg: step 3 of chunk group 0 (8 "
        "steps a group on this channel) (docs/DESIGN.md \"Kangaring\": the ring's step "
        "template over the units, seed 001 §4; FORMATS §3)")


def test_a_kangaring_sync_legs_ring_step_is_0(hier_legs_out, tmp_path):
    """Rank 2, the secondary of unit [0, 2], posts its primary (``peer_post``, leaf 11) on
    ``intra_redsct``'s channel 0: a sync leg, schedule's group 0 and step 0, so ring_step
    0 x S + 0 = 0 (FORMATS §3's G x S + s); said 1, it simulated as a match until
    2026-12-07 (review 55t's Left)."""
    from test_simulate_single_cycle import _set_leg_field
    out = copy(hier_legs_out, tmp_path)
    rec = _hier_leg(out, 2, "intra_redsct", 11, 0)
    _set_leg_field(out, 2, rec, 60, "<I", 1, (0, 11, 0, 0, 0, 0))
    assert _error(out) == (
        f"{out / 'rank-0002'}: field ring_step, rank 2, channel 0, artifact legs.bin, record "
        f"{rec}: ring_step should be 0, not 1: a peer_post leg is a kangaring sync leg, step 0 "
        "of chunk group 0 (FORMATS §3, §3.3)")


# ---------------------------------------------------------------- FIFO op order (§8.2)
# FORMATS §8.2: net_src_addr / net_dest_addr records are 72 / 48 bytes, net_op_idx the i32
# at 0 and mark the u32 at 36 (0 NET_TRANSFER, 1 NET_OP_COMPLETE); an op's entries and its
# terminator carry its index. reused_output_spec over [0, 1, 64, 65] (two nodes, RING): three
# entries, so rank 1 transmits to 64 (across the network) in three ops of channel 0, and
# rank 64 receives from 1 in three ops.
@pytest.fixture(scope="module")
def r2n3_out(tmp_path_factory) -> Path:
    from test_simulate import reused_output_spec
    return lower_spec(reused_output_spec([0, 1, 64, 65]), tmp_path_factory.mktemp("r2n3") / "o")


def _fifo(out: Path, rank: int, name: str) -> tuple[int, np.ndarray, np.ndarray]:
    """(record size, net_op_idx, mark) of every record of ``name`` (FORMATS §8.2 offsets)."""
    size = 72 if name == "net_src.bin" else 48
    b = (out / f"rank-{rank:04d}" / name).read_bytes()
    recs = [b[i:i + size] for i in range(0, len(b), size)]
    return (size, np.array([struct.unpack_from("<i", r, 0)[0] for r in recs]),
            np.array([struct.unpack_from("<I", r, 36)[0] for r in recs]))


def test_a_deleted_terminator_is_named_at_the_entry_of_the_next_op_inside_it(
        r2n3_out, tmp_path):
    """Rank 1's op 0 terminator deleted from net_src.bin, the rank manifest's fifo slice and
    record count shortened to match (review 57i b16): op 0's entries now run on into op 1's.
    The rule broken is at op 1's first entry, which sits inside op 0: it is named (until
    2026-12-07 the line named op 1's terminator, untouched, `terminator net_op_idx should be
    0`)."""
    out = copy(r2n3_out, tmp_path)
    size, idx, mark = _fifo(out, 1, "net_src.bin")
    t0 = int(np.flatnonzero(mark == 1)[0])  # op 0's terminator; its entries 0..t0-1
    assert (idx[:t0 + 1] == 0).all() and idx[t0 + 1] == 1
    p = out / "rank-0001" / "net_src.bin"
    b = p.read_bytes()
    p.write_bytes(b[:t0 * size] + b[(t0 + 1) * size:])
    mp = out / "rank-0001" / "manifest.json"
    man = json.loads(mp.read_text())
    assert [s["src"] for s in man["fifo"]] == [[0, idx.size]]
    man["fifo"][0]["src"] = [0, idx.size - 1]
    man["files"]["net_src.bin"]["records"] = idx.size - 1
    mp.write_text(json.dumps(man, indent=1, sort_keys=True) + "\n")
    rehash(out)
    assert _error(out) == (
        f"{out / 'rank-0001'}: field net_op_idx, rank 1, channel 0, artifact net_src.bin, "
        f"record {t0}: net_op_idx 1 inside op 0: the {t0} entries before it carry 0, and no "
        "terminator closes op 0 before this entry of op 1 (FORMATS §8.2: each op's entries "
        f"end with its NET_OP_COMPLETE terminator); op 0's tx_entry_cnt is {t0}")


def test_an_entry_moved_before_its_ops_terminator_is_named_not_the_ops_count(
        r2n3_out, tmp_path):
    """Rank 64's op 0 terminator swapped with op 1's first receive entry in net_dest.bin
    (review 57i b46): that entry (net_op_idx 1) now sits inside op 0, between op 0's entries
    and its terminator, all 0: it is named (until 2026-12-07 the line named net_ops.bin's
    rx_entry_cnt of op 0, untouched, `should be 13, ..., not 12`)."""
    out = copy(r2n3_out, tmp_path)
    size, idx, mark = _fifo(out, 64, "net_dest.bin")
    t0 = int(np.flatnonzero(mark == 1)[0])
    assert (idx[:t0 + 1] == 0).all() and idx[t0 + 1] == 1 and mark[t0 + 1] == 0
    p = out / "rank-0064" / "net_dest.bin"
    b = bytearray(p.read_bytes())
    b[t0 * size:(t0 + 2) * size] = b[(t0 + 1) * size:(t0 + 2) * size] + b[t0 * size:
                                                                          (t0 + 1) * size]
    p.write_bytes(bytes(b))
    rehash(out)
    assert _error(out) == (
        f"{out / 'rank-0064'}: field net_op_idx, rank 64, channel 0, artifact net_dest.bin, "
        f"record {t0}: net_op_idx 1 inside op 0: the op's other {t0} entries and its "
        f"terminator (record {t0 + 1}) carry 0 (FORMATS §8.2: an op's entries carry its index)")


# ---------------------------------------------------------------- event wait vs 0xBF word
def _mesh2n(tmp_path: Path) -> tuple[Path, int, int, int, int, int]:
    """A bf16 all-reduce over ranks 0 and 64 (two trn2 nodes, MESH): (output, rank 0's
    mesh_reduce legs.bin record, its first sem.bin record, its 0xBF word, the event it
    waits, by how much). The mesh_reduce (leaf 17, FORMATS §3.2) waits the event its peer's
    block arrives on across the network, which the net proxy increments (net_ops.bin
    inc_recv_complete, FORMATS §8.1), no leg."""
    out = lower_spec(coll_spec("all_reduce", "bf16", [0, 64], 8192, lnc=2), tmp_path / "o",
                     topology="trn2:nodes=2", algo="mesh")
    legs = np.fromfile(out / "rank-0000" / "legs.bin", F.LEG_DTYPE)
    g = int(np.flatnonzero(legs["leaf"] == 17)[0])
    bd, word = int(legs["sem_first"][g]), int(legs["sb2sb_first"][g])
    w = (out / "rank-0000" / "sb2sb.bin").read_bytes()[word * 64:(word + 1) * 64]
    assert w[4] == 20  # wait_mode: the leg's first piece carries its wait (FORMATS §4)
    sid, value = w[5], struct.unpack_from("<I", w, 8)[0]
    sem = (out / "rank-0000" / "sem.bin").read_bytes()[bd * 16:(bd + 1) * 16]
    assert sem[0] == 20 and struct.unpack_from("<I", sem, 4)[0] == value
    ops = np.fromfile(out / "rank-0000" / "net_ops.bin", F.NET_OPS_INFO_DTYPE)
    assert ((ops["inc_recv_complete"].astype(np.int64) & 0x3FF) == 4 * sid).any()
    return out, g, bd, word, sid, value


def _patch(out: Path, name: str, offset: int, fmt: str, value: int) -> None:
    p = out / "rank-0000" / name
    b = bytearray(p.read_bytes())
    struct.pack_into(fmt, b, offset, value)
    p.write_bytes(bytes(b))


def test_an_event_wait_the_network_lands_on_names_both_records(tmp_path):
    """Rank 0's mesh_reduce (_mesh2n) waits an event the network lands on. sem.bin's wait
    value raised by one, the 0xBF word untouched, and rank 0's net_dest.bin unreadable (its
    last terminator's mark, u32 at 36, made 0 NET_TRANSFER: FORMATS §8.2): the proxy's
    increments cannot be counted, no leg's tell which record is right, so both are named,
    at the word (until 2026-12-07 the word was, with sem.bin's value as the right one; since
    fixer 59b a readable FIFO tells: the test below)."""
    out, g, bd, word, sid, value = _mesh2n(tmp_path)
    _patch(out, "sem.bin", bd * 16 + 4, "<I", value + 1)
    size, _idx, mark = _fifo(out, 0, "net_dest.bin")
    _patch(out, "net_dest.bin", int(np.flatnonzero(mark == 1)[-1]) * size + 36, "<I", 0)
    rehash(out)
    assert _error(out) == (
        f"{out / 'rank-0000'}: field semaphore_value, rank 0, artifact sb2sb.bin, record "
        f"{word}: the 0xBF word waits semaphore {sid} >= {value}, the leg's first wait (sem.bin "
        f"record {bd}) semaphore {sid} >= {value + 1}: one of the two records is wrong, and "
        f"nothing else read tells which (mesh_reduce leg, legs.bin record {g})")


@pytest.mark.parametrize("edit", ["sem value", "word value", "sem event", "word event"])
def test_an_event_wait_the_network_lands_on_is_named_where_it_was_edited(tmp_path, edit):
    """Rank 0's mesh_reduce (_mesh2n) waits an event the network lands on: the net proxy
    adds +1 to it after each receive entry with complete = 1 of an op whose inc_recv_complete
    names it (FORMATS §8.2), so with the legs' increments the event's waits take what is
    added (FORMATS §7 "Events"). One record of the wait changed (its value raised by one, or
    its event moved to the next, 192 + t + 1, in sem.bin's address or the word's wait_idx):
    the record changed is named (fixer 59b, the fifty-eighth "Left": until then both were,
    `nothing else read tells which`)."""
    out, g, bd, word, sid, value = _mesh2n(tmp_path)
    src = ("the legs of trigger 0's entry on all its ranks and the net proxy's receives "
           "(FORMATS §8.2)")
    piece = "(piece 0 of a mesh_reduce leg: the first piece carries the leg's (first) wait, the " \
        "last its dma_compl_sema increment)"
    if edit == "sem value":
        _patch(out, "sem.bin", bd * 16 + 4, "<I", value + 1)
        want = (f"field value, rank 0, artifact sem.bin, record {bd}: wait value should be "
                f"{value}, the one the leg's 0xBF word (sb2sb.bin record {word}) carries, not "
                f"{value + 1}: semaphore {sid} of rank 0 gets {value} from {src}, and its waits "
                f"here take {value + 1} (mesh_reduce leg, legs.bin record {g})")
    elif edit == "word value":
        _patch(out, "sb2sb.bin", word * 64 + 8, "<I", value + 1)
        want = (f"field semaphore_value, rank 0, artifact sb2sb.bin, record {word}: "
                f"semaphore_value should be {value}, not {value + 1} {piece}")
    elif edit == "sem event":
        addr = struct.unpack_from("<Q", (out / "rank-0000" / "sem.bin").read_bytes(),
                                  bd * 16 + 8)[0]
        _patch(out, "sem.bin", bd * 16 + 8, "<Q", addr + 4)
        want = (f"field addr, rank 0, artifact sem.bin, record {bd}: wait of semaphore {sid + 1} "
                f"by {value} should be of semaphore {sid} by {value}, the one the leg's 0xBF word "
                f"(sb2sb.bin record {word}) carries: semaphore {sid} of rank 0 gets {value} from "
                f"{src}, and its waits here take 0; semaphore {sid + 1} of rank 0 gets 0 from "
                f"{src}, and its waits here take {value} (mesh_reduce leg, legs.bin record {g})")
    else:
        _patch(out, "sb2sb.bin", word * 64 + 5, "<B", sid + 1)
        want = (f"field wait_idx, rank 0, artifact sb2sb.bin, record {word}: wait_idx should be "
                f"{sid}, not {sid + 1} {piece}")
    rehash(out)
    assert _error(out) == f"{out / 'rank-0000'}: {want}"


def test_an_event_wait_moved_alike_in_sem_bin_and_its_word_is_named_at_the_word(tmp_path):
    """Rank 0's mesh_reduce (_mesh2n) waits EVT_REDUCE_COPY_2 (192 + 9), the event its
    peer's block lands on across the network (FORMATS §7: the other devices' or nodes' one;
    §8.1: the op's inc_recv_complete names it). Its sem.bin wait and the 0xBF word's wait_idx
    both moved to the next event, 192 + 10 (EVT_REDUCE_WRITE, a label no semaphore traffic
    goes to, FORMATS §7): the word is named, with both records (fixer 59p, review 59n: the
    untouched op's inc_recv_complete was named, 23 of 23)."""
    out, g, bd, word, sid, value = _mesh2n(tmp_path)
    assert sid == 192 + 9
    ops = np.fromfile(out / "rank-0000" / "net_ops.bin", F.NET_OPS_INFO_DTYPE)
    (k,) = np.flatnonzero((ops["inc_recv_complete"].astype(np.int64) & 0x3FF) == 4 * sid)
    addr = struct.unpack_from("<Q", (out / "rank-0000" / "sem.bin").read_bytes(), bd * 16 + 8)[0]
    _patch(out, "sem.bin", bd * 16 + 8, "<Q", addr + 4)
    _patch(out, "sb2sb.bin", word * 64 + 5, "<B", sid + 1)
    rehash(out)
    assert _error(out) == (
        f"{out / 'rank-0000'}: field wait_idx, rank 0, artifact sb2sb.bin, record {word}: "
        f"wait_idx should be {sid}, not {sid + 1}: semaphore {sid} of rank 0 gets {value} from "
        f"the legs of trigger 0's entry on all its ranks and the net proxy's receives (op {k}, "
        f"net_ops.bin record {k}: its inc_recv_complete; FORMATS §8.2), and its waits here "
        f"take 0; semaphore {sid + 1} gets 0, and its waits here take {value} (mesh_reduce "
        f"leg, legs.bin record {g}), and the leg's first wait (sem.bin record {bd}) is on "
        f"semaphore {sid + 1} too")


def test_an_ops_receive_semaphore_moved_is_still_named_at_the_op(tmp_path):
    """The mirror of the test above: the op's inc_recv_complete and inc_recv_handshake both
    moved to 192 + 10 (EVT_REDUCE_WRITE), where FORMATS §7 lets no traffic land, the leg and
    its word untouched: the op is named, as before fixer 59p (the semaphore counts alone are
    alike in both cases)."""
    out, g, bd, word, sid, value = _mesh2n(tmp_path)
    ops = np.fromfile(out / "rank-0000" / "net_ops.bin", F.NET_OPS_INFO_DTYPE)
    (k,) = np.flatnonzero((ops["inc_recv_complete"].astype(np.int64) & 0x3FF) == 4 * sid)
    size = F.NET_OPS_INFO_DTYPE.itemsize
    for fld in ("inc_recv_complete", "inc_recv_handshake"):
        _patch(out, "net_ops.bin", k * size + F.NET_OPS_INFO_DTYPE.fields[fld][1], "<Q",
               int(ops[fld][k]) + 4)
    rehash(out)
    assert _error(out) == (
        f"{out / 'rank-0000'}: field inc_recv_complete, rank 0, channel 0, artifact "
        f"net_ops.bin, record {k}: op {k}'s receives land on semaphore {sid + 1} "
        f"(inc_recv_complete), but the first leg to read bytes they land on, mesh_reduce "
        f"(legs.bin record {g}), waits semaphore {sid}: an op names the event its receives "
        f"land on, the one the legs that take its data wait for (FORMATS §8.1)")


def test_a_transmit_entrys_complete_cleared_is_named_at_the_record(tmp_path):
    """Rank 0 of _mesh2n hands its block to rank 64 across the network: each send_sema
    increment of its legs (sem.bin: subop 21, remote bit 0, id 16 + 4 x 0 + 1 = 17, FORMATS
    §7) hands the proxy one transfer, each a run of transmit entries ending with complete = 1
    (FORMATS §8.2). Its first transmit entry's complete made 0: the FIFO now ends one run
    fewer than the legs hand, and the receive entry it pairs with (rank 64's first from rank
    0, net_dest.bin) still has complete 1: the transmit entry is named at its complete
    (fixer 59p, review 59n: the count was named at net_src.bin without a record)."""
    out, *_ = _mesh2n(tmp_path)
    sem = (out / "rank-0000" / "sem.bin").read_bytes()
    sends = sum(1 for i in range(0, len(sem), 16)
                if struct.unpack_from("<I", sem, i)[0] & 0x100FF == 21
                and struct.unpack_from("<Q", sem, i + 8)[0] & 0x3FF == 4 * 17)
    src = (out / "rank-0000" / "net_src.bin").read_bytes()
    recs = [struct.unpack_from("<Ii", src, i) + struct.unpack_from("<I", src, i + 36)
            + struct.unpack_from("<i", src, i + 48) for i in range(0, len(src), 72)]
    _idx, complete, mark, dst = recs[0]
    assert (complete, mark, dst) == (1, 0, 64)
    runs = sum(1 for r in recs if r[2] == 0 and r[1] == 1)
    assert runs == sends
    dest = (out / "rank-0064" / "net_dest.bin").read_bytes()
    pair = next(i // 48 for i in range(0, len(dest), 48)
                if struct.unpack_from("<I", dest, i + 36)[0] == 0
                and struct.unpack_from("<i", dest, i + 40)[0] == 0)
    assert struct.unpack_from("<i", dest, pair * 48 + 4)[0] == 1
    _patch(out, "net_src.bin", 4, "<i", 0)
    rehash(out)
    assert _error(out) == (
        f"{out / 'rank-0000'}: field complete, trigger 0, rank 0, channel 0, artifact "
        f"net_src.bin, record 0: complete should be 1, not 0: the legs of entry 0 hand {sends} "
        f"transfer(s) to the net proxy (send_sema increments), the transmit FIFO carries "
        f"{sends - 1}, and the receive entry it pairs with (rank 64, net_dest.bin record "
        f"{pair}) has complete 1 (FORMATS §8.2)")


def test_a_hier_kangaring_leaf_swapped_within_the_family_is_named_at_leaf(
        hier_legs_out, tmp_path):
    """Rank 0's ``intra_redsct`` recv_reduce_send (leaf 2) of rank 12's slice H1 [3200, 3328)
    made direct_reduce_send_kangaring (leaf 10: the same sdma_op 4, neigh 1 and
    reduction_type): rank 12's unit [12, 14] is 4 hops ahead of rank 0's on the cycle of 8
    units, and the reduce-scatter's step template (seed 001 §4 over the units,
    docs/DESIGN.md "Kangaring") calls direct_reduce_send_kangaring only at u - 1 = 7 hops,
    recv_reduce_send at 1 .. 6, at step u - 1 - i = 3.  Simulated as a match until
    2026-12-07 (left to the run; fixer 57a)."""
    from test_simulate_single_cycle import _set_leg_field
    out = copy(hier_legs_out, tmp_path)
    rec = _hier_leg(out, 0, "intra_redsct", 2, 3200)
    _set_leg_field(out, 0, rec, 12, "<B", 10, (0, 2, 1, 3, 3200, 128))
    assert _error(out) == (
        f"{out / 'rank-0000'}: field leaf, rank 0, channel 0, artifact legs.bin, record "
        f"{rec}: leaf should be recv_reduce_send (step 3), not direct_reduce_send_kangaring: "
        "elements [3200, 3328) are of the chunk of a member of the unit 4 hops ahead on the "
        "channel's cycle of 8 units of the HIER intra_redsct leg, where the reduce-scatter's "
        "step template calls recv_reduce_send (ring_step 3: step 3 of chunk group 0, 8 steps "
        "a group on this channel) (docs/DESIGN.md \"Kangaring\": the ring's step template "
        "over the units, seed 001 §4; FORMATS §3)")


@pytest.mark.parametrize("new, found", [(5, "direct_copy_send"), (6, "direct_recv_send")])
def test_a_hier_ring_leaf_swapped_within_the_family_is_named_at_leaf(
        hier_legs_out, tmp_path, new, found):
    """Rank 0's ``inter_allg`` send (leaf 1: sdma_op 2, neigh 1) of its own block's H0 [0,
    150) made direct_copy_send (leaf 5) or direct_recv_send (leaf 6), the same sdma_op and
    neigh: on the ring [0, 16] an all-gather's step 0 moves the rank's own block (i = 0),
    sending it (send, neigh NEXT) and copying it into OUT (direct_copy, neigh LOCAL: the leg
    is not in place), seed 001 §4's template; ring_step 0 of 2 a group.  Simulated as a match
    until 2026-12-07 (left to the run), direct_recv_send named at sem_count, the ring
    protocol's wait of a consuming leaf (fixer 57a)."""
    from test_simulate_single_cycle import _set_leg_field
    out = copy(hier_legs_out, tmp_path)
    rec = _hier_leg(out, 0, "inter_allg", 1, 0)
    _set_leg_field(out, 0, rec, 12, "<B", new, (0, 1, 0, 0, 0, 150))
    assert _error(out) == (
        f"{out / 'rank-0000'}: field leaf, rank 0, channel 0, artifact legs.bin, record "
        f"{rec}: leaf should be send (step 0), not {found}: elements [0, 150) are of "
        "the chunk of the member 0 hops ahead on the channel's ring of 2 of the HIER "
        "inter_allg leg, where the all-gather's step template calls send or direct_copy "
        "(ring_step 0: step 0 of chunk group 0, 2 steps a group on this channel) (seed 001 "
        "§4's step template over the leg's group and layout: docs/DESIGN.md \"Leg layouts\", "
        "\"HIER\"; FORMATS §3)")


def test_a_flat_kangaring_leaf_swapped_within_the_family_is_named_at_leaf(tmp_path):
    """A bf16 all-reduce of 40960 elements over 16 ranks forced to KANGARING: one chunk group
    of 16 chunks of 2560 (halves of 1280), the cycle of units [0, 4, 5, 1], [2, 6, 7, 3],
    [8, 12, 13, 9], [10, 14, 15, 11] by primaries [0, 2, 8, 10].  Rank 0's leg of position
    10's H0 [25600, 26880): rank 10's unit is 3 = u - 1 hops ahead, where the all-reduce's
    template (seed 001 §4 over the 4 units, docs/DESIGN.md "Kangaring") calls
    direct_reduce_send_kangaring at step u - 1 - i = 0 and, in the all-gather phase,
    direct_recv_send at 2u - 1 - i = 4; 2u - 1 = 7 steps a group.  Made recv_reduce_send
    (same sdma_op, neigh and reduction_type) it simulated as a match until 2026-12-07
    (fixer 57a)."""
    from test_simulate_single_cycle import _leg_at, _set_leg_field
    from test_simulate_kick_leaf import trigger0
    out = lower_spec(coll_spec("all_reduce", "bf16", 16, 40960), tmp_path / "o",
                     algo="kangaring")
    t = trigger0(out)
    assert t["chunk"] == {"channels": 1, "chunk_size_n": 2560, "pgta": 1, "tail_chunk": 2560}
    assert t["channels"] == [{"channel": 0, "order": [0, 2, 8, 10]}]
    assert t["kangaring"][0]["units"][3] == [10, 14, 15, 11]
    rec = _leg_at(out, 0, 0, 10, 25600)
    _set_leg_field(out, 0, rec, 12, "<B", 2, (0, 10, 0, 0, 25600, 1280))
    assert _error(out) == (
        f"{out / 'rank-0000'}: field leaf, rank 0, channel 0, artifact legs.bin, record "
        f"{rec}: leaf should be direct_reduce_send_kangaring (step 0), not recv_reduce_send: "
        "elements [25600, 26880) are of the chunk of a member of the unit 3 hops ahead on the "
        "channel's cycle of 4 units, where the all-reduce's step template calls "
        "direct_reduce_send_kangaring or direct_recv_send (ring_step 0: step 0 of chunk group "
        "0, 7 steps a group on this channel) (docs/DESIGN.md \"Kangaring\": the ring's step "
        "template over the units, seed 001 §4; FORMATS §3)")


@pytest.mark.parametrize("new", [2, 10], ids=["recv_reduce_send", "direct_reduce_send_kangaring"])
def test_an_own_unit_kangaring_reduce_swapped_for_another_reduce_is_named_the_reduce(
        tmp_path, new):
    """The model above: rank 0's leg of its own position 0's H0 [0, 1280) at the final reduce
    step: its unit is 0 hops ahead, where the all-reduce's template calls recv_reduce_copy
    and direct_copy_send, both at step u - 1 - 0 = 3 (docs/DESIGN.md "Kangaring").  The
    recv_reduce_copy (a reduce: CCE sdma_op 4 and a reduction_type, FORMATS §3; neigh 1, it
    writes the unit's OUT) made either other reducing leaf is named recv_reduce_copy: the
    direct_copy_send of the same step is a copy (OUT -> OUT@next, no CCE, no reduction),
    which its sdma_op and reduction_type contradict.  Until 2026-12-07 (review 57p) the two
    were told apart by the ring's neigh of each leaf (recv_reduce_copy LOCAL) and
    direct_copy_send was named."""
    from test_simulate_single_cycle import _leg_at, _set_leg_field
    out = lower_spec(coll_spec("all_reduce", "bf16", 16, 40960), tmp_path / "o",
                     algo="kangaring")
    rec = _leg_at(out, 0, 0, 3, 0)
    L = np.fromfile(out / "rank-0000" / "legs.bin", F.LEG_DTYPE)
    assert (int(L["sdma_op"][rec]), int(L["neigh"][rec])) == (4, 1)
    assert int(L["reduction_type"][rec]) != 0xFF
    _set_leg_field(out, 0, rec, 12, "<B", new, (0, 3, 0, 3, 0, 1280))
    name = {2: "recv_reduce_send", 10: "direct_reduce_send_kangaring"}[new]
    assert _error(out) == (
        f"{out / 'rank-0000'}: field leaf, rank 0, channel 0, artifact legs.bin, record "
        f"{rec}: leaf should be recv_reduce_copy (step 3), not {name}: elements [0, 1280) are "
        "of the chunk of a member of the unit 0 hops ahead on the channel's cycle of 4 units, "
        "where the all-reduce's step template calls recv_reduce_copy or direct_copy_send "
        "(ring_step 3: step 3 of chunk group 0, 7 steps a group on this channel) "
        "(docs/DESIGN.md \"Kangaring\": the ring's step template over the units, seed 001 §4; "
        "FORMATS §3)")


def test_a_kangaring_leaf_fitting_no_leaf_of_its_step_is_named_with_the_one_that_fits(
        tmp_path):
    """_blame_kangaring_leaf's fallback (closing reading 57w: no test then). The model of
    the flat KANGARING tests above: rank 0's direct_reduce_send_kangaring (leaf 10) of
    position 10's H0 [25600, 26880), unit 3 hops ahead, where the all-reduce's template
    calls direct_reduce_send_kangaring at step u - 1 - i = 0 and direct_recv_send at
    2u - 1 - i = 4 (docs/DESIGN.md "Kangaring"). Made recv_reduce_send (leaf 2, called
    nowhere at 3 hops) with its ring_step (u32 at 60, FORMATS §3) 4: the step's leaf,
    direct_recv_send, is a copy (CME, no reduction_type) the record's CCE sdma_op and
    reduction_type contradict, so the blame falls back to the template's leaves that fit:
    direct_reduce_send_kangaring of step 0 alone (before 57w every leaf the template calls
    there, direct_recv_send too)."""
    from test_simulate_single_cycle import _leg_at, _set_leg_field
    out = lower_spec(coll_spec("all_reduce", "bf16", 16, 40960), tmp_path / "o",
                     algo="kangaring")
    rec = _leg_at(out, 0, 0, 10, 25600)
    L = np.fromfile(out / "rank-0000" / "legs.bin", F.LEG_DTYPE)
    assert (int(L["sdma_op"][rec]), int(L["neigh"][rec])) == (4, 1)  # CCE, NEXT
    assert int(L["reduction_type"][rec]) != 0xFF
    _set_leg_field(out, 0, rec, 12, "<B", 2, (0, 10, 0, 0, 25600, 1280))
    _set_leg_field(out, 0, rec, 60, "<I", 4, (0, 2, 0, 0, 25600, 1280))
    assert _error(out) == (
        f"{out / 'rank-0000'}: field leaf, rank 0, channel 0, artifact legs.bin, record "
        f"{rec}: leaf should be direct_reduce_send_kangaring (step 0), not recv_reduce_send: "
        "elements [25600, 26880) are of the chunk of a member of the unit 3 hops ahead on the "
        "channel's cycle of 4 units, where the all-reduce's step template calls "
        "direct_reduce_send_kangaring or direct_recv_send (ring_step 4: step 4 of chunk group "
        "0, 7 steps a group on this channel) (docs/DESIGN.md \"Kangaring\": the ring's step "
        "template over the units, seed 001 §4; FORMATS §3)")
