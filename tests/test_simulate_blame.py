"""``simulate`` names the record that was changed (docs/SIMULATOR.md §2 "Which record a
disagreement names"): when two artifacts disagree, each is checked against what can be
derived without the other (the leg's elem_start, the trigger's ring and leader, where the
leg programs end), and the one that is wrong is named; where nothing tells, both records
are named in one line. Every case flips bytes at the offsets FORMATS.md's tables give and
expects the message to name the file, record and field flipped (review 53e)."""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from nrtrewrite.emit import formats as F
from test_simulate import cli, lower_spec
from test_simulate_kick_leaf import copy, rehash
from test_simulate_unreached41 import _error, ar2_out  # noqa: F401 (a fixture)

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


def test_an_edited_rank_manifest_is_still_named_as_the_manifests_disagreement(ar2_out,
                                                                               tmp_path):
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
