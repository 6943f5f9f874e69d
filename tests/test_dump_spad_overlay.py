"""spad.bin bytes 4..7 decoded by the entry's algo_type (docs/FORMATS.md §2): ``channel_list``
for the ring family, ``sema_shift_offset`` / ``sema_mask`` for the mesh family, in
``decode_record``, ``dump`` (table and --json) and ``diff``.  Records are hand-built bytes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from nrtrewrite import diff as D
from nrtrewrite.artifacts import decode_record
from nrtrewrite.cli import main
from nrtrewrite.emit import formats as F
from nrtrewrite.golden import lower_to

FIX = Path(__file__).resolve().parents[1] / "fixtures"

#: (bytes, algo_type, what bytes 4..7 decode to) - FORMATS §2's layout worked by hand
ENTRIES = [
    # MESH (2), MESH_TRN2 sub-type (2 << 4), not the leader: the overlay 192 / 0x3F
    ("01 22 02 00 c0 00 3f 00", 2, {"sema_shift_offset": 192, "sema_mask": 0x3F}),
    # INTRA_RDH (5) on the mesh object: the overlay
    ("01 25 03 00 c0 00 3f 00", 5, {"sema_shift_offset": 192, "sema_mask": 0x3F}),
    # SINGLE_STEP_MESH (6): the overlay
    ("01 06 02 00 c0 00 3f 00", 6, {"sema_shift_offset": 192, "sema_mask": 0x3F}),
    # RING (0), leader, channels 0..3
    ("01 00 03 00 0f 00 00 00", 0, {"channel_list": 0xF}),
    # SINGLE_CYCLE_RING (4), trigger_next, sends over the network, channels 4 and 5
    ("01 84 06 00 30 00 00 00", 4, {"channel_list": 0x30}),
    # INTER_RDH (7): a metaring engine, channel_list (channel 0)
    ("01 07 02 00 01 00 00 00", 7, {"channel_list": 1}),
    # KANGARING (3), channels 0..31
    ("01 03 02 00 ff ff ff ff", 3, {"channel_list": 0xFFFFFFFF}),
]
OVERLAY = ("sema_shift_offset", "sema_mask")


def _rec(hexbytes: str) -> np.void:
    return np.frombuffer(bytes.fromhex(hexbytes), F.SPAD_DTYPE)[0]


@pytest.mark.parametrize("hexbytes,algo,want", ENTRIES)
def test_bytes_4_to_7_are_named_by_the_algo_type(hexbytes, algo, want):
    d = decode_record("spad.bin", _rec(hexbytes))
    assert d["algo_type"] == algo
    for key, val in want.items():
        assert d[key] == val
    other = ("channel_list",) if "sema_mask" in want else OVERLAY
    assert not set(other) & set(d), d


@pytest.fixture
def spad_file(tmp_path) -> Path:
    rdir = tmp_path / "rank-0000"
    rdir.mkdir()
    path = rdir / "spad.bin"
    path.write_bytes(b"".join(bytes.fromhex(h) for h, _a, _w in ENTRIES[:1] + ENTRIES[3:4]))
    return path


def test_dump_json_names_the_fields_of_each_entry(spad_file):
    res = CliRunner().invoke(main, ["dump", str(spad_file), "--json"])
    assert res.exit_code == 0, res.output
    mesh, ring = json.loads(res.output)["ranks"][0]["files"]["spad.bin"]
    assert (mesh["sema_shift_offset"], mesh["sema_mask"]) == (192, 63)
    assert "channel_list" not in mesh
    assert ring["channel_list"] == 15
    assert not set(OVERLAY) & set(ring)


def test_dump_table_shows_a_dash_where_an_entry_has_no_such_field(spad_file):
    res = CliRunner().invoke(main, ["dump", str(spad_file)], env={"COLUMNS": "240"})
    assert res.exit_code == 0, res.output
    rows = [line for line in res.output.splitlines() if line.startswith("│")]
    cells = [[c.strip() for c in r.strip("│").split("│")] for r in rows]
    # columns: #, ..., channel_list, sema_shift_offset, sema_mask (the last three)
    assert cells[0][-3:] == ["-", "192", "63"]  # MESH: the overlay
    assert cells[1][-3:] == ["0xf", "-", "-"]  # RING: channels 0..3
    assert "0x3f00c0" not in res.output


def test_diff_of_a_mesh_entry_names_the_overlay_field(tmp_path):
    """fixtures/ar2.neff lowers to one INTRA_RDH entry per rank (bytes 4..7 the overlay):
    changing its sema_shift_offset is reported as that field, not as channel_list."""
    a = lower_to(FIX / "ar2.neff", tmp_path / "a", None)
    b = tmp_path / "b"
    shutil.copytree(a, b)
    path = b / "rank-0000" / "spad.bin"
    data = bytearray(path.read_bytes())
    assert data[1] & 0xF == 5 and data[4:8] == bytes.fromhex("c0003f00")
    data[4] = 0xC8  # sema_shift_offset 200
    path.write_bytes(bytes(data))
    diffs = [d for d in D.diff_outputs(a, b) if d.where.endswith("spad.bin")]
    assert [(d.record, d.field, d.a, d.b) for d in diffs] == [(0, "sema_shift_offset", 192, 200)]


def test_diff_of_an_entry_whose_algo_type_changed_names_both_readings(tmp_path):
    """INTRA_RDH -> RING at the same bytes 4..7: the fields of both decodings are named,
    the missing side as <absent>."""
    a = lower_to(FIX / "ar2.neff", tmp_path / "a", None)
    b = tmp_path / "b"
    shutil.copytree(a, b)
    path = b / "rank-0000" / "spad.bin"
    data = bytearray(path.read_bytes())
    data[1] &= 0xF0  # algo_type RING (sub-type kept)
    path.write_bytes(bytes(data))
    fields = {d.field: (d.a, d.b) for d in D.diff_outputs(a, b)
              if d.where == "rank-0000/spad.bin"}
    assert fields["sema_shift_offset"] == (192, D.ABSENT)
    assert fields["sema_mask"] == (63, D.ABSENT)
    assert fields["channel_list"] == (D.ABSENT, 0x3F00C0)


#: (bytes, the fields of bytes 0..2) - FORMATS §2: byte 0 cc_op [0]; byte 1 algo_type
#: [3:0], algo_sub_type [6:4], trigger_next [7]; byte 2 reporter [0], ring_wait_complete [1],
#: ring_send_complete [2].  Neighbouring bits set so a shift or mask off by one reads wrong.
FLAG_ENTRIES = [
    # alg 0xa8: TWO_STEP_POD_MESH (8), sub-type 2, trigger_next; flags 0x02: wait only;
    # header 0x03: a reserved bit beside cc_op (in the stored header, no part of cc_op)
    ("03 a8 02 00 c0 00 3f 00", {"cc_op": 1, "header": 3, "algo_type": 8,
                                 "algo_type_name": "TWO_STEP_POD_MESH", "algo_sub_type": 2,
                                 "trigger_next": 1, "reporter": 0, "ring_wait_complete": 1,
                                 "ring_send_complete": 0, "sema_shift_offset": 192,
                                 "sema_mask": 0x3F}),
    # alg 0x7a: BW_OPT_MESH (10), sub-type 7, no trigger_next; flags 0x05: reporter
    # and ring_send_complete
    ("01 7a 05 00 c0 00 3f 00", {"cc_op": 1, "algo_type": 10, "algo_type_name": "BW_OPT_MESH",
                                 "algo_sub_type": 7, "trigger_next": 0, "reporter": 1,
                                 "ring_wait_complete": 0, "ring_send_complete": 1,
                                 "sema_shift_offset": 192, "sema_mask": 0x3F}),
    # alg 0x09: LATENCY_OPT_MESH (9); flags 0x03: reporter and wait; overlay 0x1234 / 0xabcd
    ("01 09 03 00 34 12 cd ab", {"algo_type": 9, "algo_type_name": "LATENCY_OPT_MESH",
                                 "algo_sub_type": 0, "trigger_next": 0, "reporter": 1,
                                 "ring_wait_complete": 1, "ring_send_complete": 0,
                                 "sema_shift_offset": 0x1234, "sema_mask": 0xABCD}),
    # alg 0x0b: enc_alg_type's INVALID (11), never written (FORMATS §2): named, channel_list
    ("01 0b 01 00 34 12 cd ab", {"algo_type": 11, "algo_type_name": "INVALID",
                                 "reporter": 1, "channel_list": 0xABCD1234}),
    # alg 0x0c: an algo_type enc_alg_type does not name (12): channel_list, named in hex
    ("01 0c 04 00 34 12 cd ab", {"algo_type": 12, "algo_type_name": "0xc",
                                 "ring_send_complete": 1, "channel_list": 0xABCD1234}),
]


@pytest.mark.parametrize("hexbytes,want", FLAG_ENTRIES)
def test_the_bit_fields_of_bytes_0_to_2(hexbytes, want):
    d = decode_record("spad.bin", _rec(hexbytes))
    assert {k: d.get(k) for k in want} == want
    other = ("channel_list",) if "sema_mask" in want else OVERLAY
    assert not set(other) & set(d), d
