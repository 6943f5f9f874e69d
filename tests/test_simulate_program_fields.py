"""The simulator's decoding of a rank's program (nrtrewrite/simulate/program.py) at the edges of
its fields: each test changes the bytes of a lowered output at one boundary that
docs/FORMATS.md fixes and runs ``simulate --ignore-checksums`` (refused: exit 1, naming the
file, the record and the field), or builds a right output at the boundary (accepted), or
(where a leg's runs overlap, SIMULATOR.md §3) reads which legs the decoded program runs tile
by tile.  Byte offsets and values are FORMATS.md's, not read from the code: ``spad.bin``
8-byte entries (§2: byte 0 bit 0 cc_op and [7:1] reserved, byte 1 algo_type [3:0] /
algo_sub_type [6:4] / trigger_next [7], byte 2 the flags, bytes 4..7 channel_list or the
mesh overlay sema_shift_offset (u16 at 4) and sema_mask (u16 at 6)); ``legs.bin`` 64-byte
records (§3); ``dma.bin``, ``cce.bin``, ``sem.bin`` 16-byte records (§5 - §7); ``tpinc.bin``
8-byte records (§2.2); ``sb2sb.bin`` 64-byte words (§4).  Written for the eleventh mutation
round (docs/RELIABILITY.md §6): each refusal test fails with one of its mutations of
program.py, and so do the tests of the three that survived it (channels above 15, a view
moving between pieces, a one-byte overlap)."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from test_simulate import cli
from test_simulate_tamper_fields import _lower

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SPAD, REC, BD, WORD, TP = 8, 64, 16, 64, 8
#: the global enc_alg_type ordinals of seed 000 §1.3 (FORMATS §2 algo_type)
ALG_RING, ALG_MESH, ALG_SCR = 0, 2, 4


def _spad_byte1(algo_type: int, algo_sub_type: int = 0, trigger_next: int = 0) -> int:
    """Byte 1 of a spad_ctrl_entry from seed 000 §4.3's packer: the header word is
    ``(trigger_next << 15) | (algo_sub_type << 12) | (algo_type << 8) | 1`` (little-endian,
    byte 0 the cc_op bit), so byte 1 is algo_type in [3:0], algo_sub_type in [6:4] and
    trigger_next in [7] (FORMATS §2)."""
    word = (trigger_next << 15) | (algo_sub_type << 12) | (algo_type << 8) | 1
    return (word >> 8) & 0xFF


@pytest.fixture(scope="module")
def ring_out(tmp_path_factory) -> Path:
    """c7c8: 4 ranks, RING entries (algo_type 0) on channel 0."""
    return _lower(FIXTURES / "c7c8.neff", tmp_path_factory.mktemp("ring") / "o", "ring")


@pytest.fixture(scope="module")
def mesh_out(tmp_path_factory) -> Path:
    """c7c8: 4 ranks, MESH entries (algo_type 2, the overlay c0 00 3f 00)."""
    return _lower(FIXTURES / "c7c8.neff", tmp_path_factory.mktemp("mesh") / "o", "mesh")


@pytest.fixture(scope="module")
def scr_out(tmp_path_factory) -> Path:
    """c7c8 with its all-reduces as SINGLE_CYCLE_RING (algo_type 4, channels 0 and 1): their
    ``direct_recv`` legs carry no data and count the elements they consume (FORMATS §3)."""
    return _lower(FIXTURES / "c7c8.neff", tmp_path_factory.mktemp("scr") / "o",
                  "allreduce:single_cycle_ring")


def _copy(src: Path, tmp_path: Path, name: str = "t") -> Path:
    dst = tmp_path / name
    shutil.copytree(src, dst)
    return dst


def _file(out: Path, rank: int, name: str) -> Path:
    return out / f"rank-{rank:04d}" / name


def _get(out: Path, rank: int, name: str, offset: int, fmt: str) -> int:
    return struct.unpack_from(fmt, _file(out, rank, name).read_bytes(), offset)[0]


def _set(out: Path, rank: int, name: str, offset: int, fmt: str, value: int) -> None:
    p = _file(out, rank, name)
    b = bytearray(p.read_bytes())
    struct.pack_into(fmt, b, offset, value)
    p.write_bytes(bytes(b))


def _rank_manifest(out: Path, rank: int, fn) -> None:
    p = _file(out, rank, "manifest.json")
    man = json.loads(p.read_text())
    fn(man)
    p.write_text(json.dumps(man, indent=1, sort_keys=True) + "\n")


def _refused(out: Path, *words: str) -> str:
    res = cli("simulate", out, "--ignore-checksums", "--json")
    assert res.exit_code == 1, res.output
    doc = json.loads(res.stdout)
    assert doc["ok"] is False
    text = " ".join([doc["error"] or ""] + [t["detail"] or "" for t in doc["triggers"]])
    for w in words:
        assert w in text, text
    return text


def _accepted(out: Path) -> None:
    res = cli("simulate", out, "--ignore-checksums", "--json")
    assert res.exit_code == 0, res.output


def test_the_untouched_outputs_pass(ring_out, mesh_out, scr_out, mesh4100):
    for out in (ring_out, mesh_out, scr_out, mesh4100):
        res = cli("simulate", out, "--json")
        assert res.exit_code == 0, res.output


# ---------------------------------------------------------------------------- spad.bin (§2)

def test_an_entry_whose_cc_op_bit_is_0_is_refused(ring_out, tmp_path):
    """Byte 0 is cc_op (bit 0, always 1) and reserved bits [7:1]: 0x00 is refused, not only
    a reserved bit set."""
    out = _copy(ring_out, tmp_path)
    assert _get(out, 2, "spad.bin", SPAD + 0, "<B") == 1
    _set(out, 2, "spad.bin", SPAD + 0, "<B", 0)
    _refused(out, "rank-0002", "spad.bin", "record 1", "cc_op")


@pytest.mark.parametrize("sub", [1, 4])
def test_a_ring_entry_with_an_algo_sub_type_is_refused(ring_out, tmp_path, sub):
    """algo_sub_type (byte 1 bits [6:4]) is 0 outside mesh entries; 4 sets bit 6, the top bit
    of the field. The rank manifest says the same value, so only the rule refuses it."""
    out = _copy(ring_out, tmp_path)
    # RING, sub-type 0 (not a mesh entry), no trigger_next (c7c8's triggers are one entry each)
    assert _get(out, 1, "spad.bin", 1, "<B") == _spad_byte1(ALG_RING) == 0x00
    _set(out, 1, "spad.bin", 1, "<B", sub << 4)
    _rank_manifest(out, 1, lambda m: m["entries"][0].update(algo_sub_type=sub))
    _refused(out, "rank-0001", "spad.bin", "record 0", "algo_sub_type must be 0")


@pytest.mark.parametrize("sub, name", [(4, "MESH_INVALID"), (7, "no enc_alg_mesh_type")])
def test_a_mesh_entry_with_algo_sub_type_4_is_refused(mesh_out, tmp_path, sub, name):
    """A mesh entry's algo_sub_type is 0..3 (MESH_INVALID = 4 is never written, FORMATS §2;
    5..7 name no enc_alg_mesh_type); the rank manifest says the same. The overlay is right
    (c0 00 3f 00), so the field named is algo_sub_type, not channel_list (until 2026-12-06
    one combined check blamed the overlay: `field channel_list ... algo_sub_type 4 does not
    name a window of the 256 semaphores`)."""
    out = _copy(mesh_out, tmp_path)
    byte1 = _get(out, 1, "spad.bin", 1, "<B")
    assert byte1 & 0xF == ALG_MESH
    assert (_get(out, 1, "spad.bin", 4, "<H"), _get(out, 1, "spad.bin", 6, "<H")) == (192, 0x3F)
    _set(out, 1, "spad.bin", 1, "<B", (byte1 & 0x8F) | (sub << 4))
    _rank_manifest(out, 1, lambda m: m["entries"][0].update(algo_sub_type=sub))
    text = _refused(out, "field algo_sub_type, rank 1, artifact spad.bin, record 0",
                    f"algo_sub_type {sub} ({name}) is not a mesh type")
    assert "channel_list" not in text and "window" not in text, text


def test_a_mesh_window_past_semaphore_255_is_refused(mesh_out, tmp_path):
    """The window sema_shift_offset .. sema_shift_offset + sema_mask must lie in the 256
    semaphores: 193 + 0x3F = 256 is one past (192 + 0x3F = 255 is every mesh entry's)."""
    out = _copy(mesh_out, tmp_path)
    assert (_get(out, 1, "spad.bin", 4, "<H"), _get(out, 1, "spad.bin", 6, "<H")) == (192, 0x3F)
    _set(out, 1, "spad.bin", 4, "<H", 193)
    _rank_manifest(out, 1, lambda m: m["entries"][0].update(sema_shift_offset=193))
    _refused(out, "rank-0001", "field channel_list, rank 1, artifact spad.bin, record 0",
             "sema_shift_offset 193 / sema_mask 0x3f does not name a window")


def test_an_entry_without_ring_wait_complete_is_refused(ring_out, tmp_path):
    """Byte 2 bit 1 ring_wait_complete is the entry's completion rule (FORMATS §2, §2.1):
    cleared, with the rank manifest saying false too, the entry is refused."""
    out = _copy(ring_out, tmp_path)
    flags = _get(out, 1, "spad.bin", 2, "<B")
    assert flags & 0x02
    _set(out, 1, "spad.bin", 2, "<B", flags & ~0x02)
    _rank_manifest(out, 1, lambda m: m["entries"][0].update(ring_wait_complete=False))
    _refused(out, "rank-0001", "spad.bin", "record 0", "ring_wait_complete is 0")


@pytest.mark.parametrize("rank", [0, 1])
def test_the_reporter_is_the_leader_alone(ring_out, tmp_path, rank):
    """Byte 2 bit 0 reporter is 1 on the group's leader, its smallest rank (0 here), 0
    elsewhere (FORMATS §2): the leader's cleared, or rank 1's set, the rank manifest saying
    the same, is refused."""
    out = _copy(ring_out, tmp_path)
    flags = _get(out, rank, "spad.bin", 2, "<B")
    assert flags & 1 == (rank == 0)
    _set(out, rank, "spad.bin", 2, "<B", flags ^ 1)
    _rank_manifest(out, rank, lambda m: m["entries"][0].update(reporter=rank != 0))
    _refused(out, f"rank-{rank:04d}", "spad.bin", "record 0",
             f"reporter should be {int(rank == 0)}, not {int(rank != 0)}: the reporter of "
             "trigger 0 is its leader, rank 0")


def test_ring_send_complete_on_an_entry_that_does_not_send_is_refused(ring_out, tmp_path):
    """Byte 2 bit 2 ring_send_complete is 1 when the rank sends over the network in the
    entry (FORMATS §2): c7c8's 4 ranks on one node send nothing over it, so rank 1's bit set,
    the rank manifest saying the same, is refused, the value it should have first."""
    out = _copy(ring_out, tmp_path)
    flags = _get(out, 1, "spad.bin", 2, "<B")
    assert flags & 4 == 0
    _set(out, 1, "spad.bin", 2, "<B", flags | 4)
    _rank_manifest(out, 1, lambda m: m["entries"][0].update(ring_send_complete=True))
    _refused(out, "rank-0001", "spad.bin", "record 0", "field ring_send_complete",
             "ring_send_complete should be 0, not 1: the entry does not send over the network")


def test_trigger_next_into_another_triggers_entry_is_refused(ring_out, tmp_path):
    """trigger_next (byte 1 bit 7) chains an entry to the next entry of the same collective
    (a HIER chain, FORMATS §2): c7c8's entry 0 (trigger 0) chained to entry 1 (trigger 1),
    the rank manifest saying so, is refused."""
    out = _copy(ring_out, tmp_path)
    # entry 0 as lowered: a RING entry, not chained (a flat trigger is one entry)
    assert _get(out, 1, "spad.bin", 1, "<B") == _spad_byte1(ALG_RING) == 0x00
    _set(out, 1, "spad.bin", 1, "<B", _spad_byte1(ALG_RING, trigger_next=1))
    _rank_manifest(out, 1, lambda m: m["entries"][0].update(trigger_next=True))
    _refused(out, "rank-0001", "spad.bin", "record 0",
             "trigger_next chains into an entry of another trigger")


def test_trigger_next_on_the_last_entry_is_refused(ring_out, tmp_path):
    """The last of c7c8's 5 entries (trigger 4) has no next entry to chain to."""
    out = _copy(ring_out, tmp_path)
    assert _file(out, 1, "spad.bin").stat().st_size == 5 * SPAD
    _set(out, 1, "spad.bin", 4 * SPAD + 1, "<B", 0x80)
    _rank_manifest(out, 1, lambda m: m["entries"][4].update(trigger_next=True))
    _refused(out, "rank-0001", "spad.bin", "record 4", "the last entry has trigger_next set")


def test_two_unchained_entries_of_one_trigger_are_refused(ring_out, tmp_path):
    """A trigger's entries on a rank are one chain (FORMATS §2.1): entry 1 named trigger 0 in
    the rank manifest, with entry 0 not chaining to it, is a second chain for trigger 0 (and
    refused as such, before trigger 1's missing entry)."""
    out = _copy(ring_out, tmp_path)
    _rank_manifest(out, 1, lambda m: m["entries"][1].update(trigger=0))
    _refused(out, "rank-0001", "spad.bin", "record 1", "a second entry chain for trigger 0")


@pytest.fixture(scope="module")
def hier_out(tmp_path_factory) -> Path:
    """A bf16 all-reduce of 65536 elements over {0, 1} and {64, 65} (LNC 2, two trn2 nodes)
    lowered HIER: each rank's three entries intra_redsct (RING), inter_allr
    (SINGLE_CYCLE_RING), intra_allg (RING), the first two with trigger_next (FORMATS §2)."""
    from test_simulate import coll_spec, lower_spec
    spec = coll_spec("all_reduce", "bf16", [0, 1, 64, 65], 65536, lnc=2, name="hierchain")
    return lower_spec(spec, tmp_path_factory.mktemp("hier") / "o",
                      topology="trn2:nodes=2", algo="hier")


@pytest.mark.parametrize("entry, algo_type", [(0, ALG_RING), (1, ALG_SCR)])
def test_a_hier_leg_without_trigger_next_is_named_at_its_entry(hier_out, tmp_path, entry,
                                                               algo_type):
    """Byte 1 bit 7 trigger_next cleared on HIER entry 0 (intra_redsct) or 1 (inter_allr) of
    rank 1, the rank manifest saying false too: the next entry is the chain's next leg, of the
    same trigger, so the fault is this entry's missing trigger_next (record ``entry``,
    ``field trigger_next``), not a second chain at the next record (until 2026-12-06:
    `record 1: a second entry chain for trigger 0 (first at entry 0)`, no field)."""
    out = _copy(hier_out, tmp_path)
    legs = [e["leg"] for e in json.loads(_file(out, 1, "manifest.json").read_text())["entries"]]
    assert legs == ["intra_redsct", "inter_allr", "intra_allg"]
    off = entry * SPAD + 1
    assert _get(out, 1, "spad.bin", off, "<B") == _spad_byte1(algo_type, trigger_next=1)
    _set(out, 1, "spad.bin", off, "<B", _spad_byte1(algo_type))
    _rank_manifest(out, 1, lambda m: m["entries"][entry].update(trigger_next=False))
    text = _refused(out, f"field trigger_next, rank 1, artifact spad.bin, record {entry}",
                    f"the next entry, {entry + 1}, belongs to the same trigger (0, leg "
                    f"{legs[entry + 1]} of its HIER chain) but trigger_next is 0")
    assert "second entry chain" not in text, text


def test_entries_out_of_trigger_order_are_refused(ring_out, tmp_path):
    """Entries are in trigger order (FORMATS §2): the rank manifest's entries 0 and 1 naming
    triggers 1 and 0 is refused as such."""
    out = _copy(ring_out, tmp_path)
    _rank_manifest(out, 1, lambda m: (m["entries"][0].update(trigger=1),
                                      m["entries"][1].update(trigger=0)))
    _refused(out, "rank-0001", "spad.bin", "entries are not in trigger order ([1, 0, 2, 3, 4])")


# ---------------------------------------------------------------------------- legs.bin (§3)
SPAD_INDEX, CHANNEL, SDMA_OP, STEP, LEAF, HALF, REDUCTION_TYPE, NEIGH = 4, 6, 7, 8, 12, 13, 14, 15
N_TILES, DMA_FIRST, DMA_COUNT, CCE_COUNT, SEM_FIRST, SEM_COUNT = 22, 24, 28, 36, 40, 44
ELEM_START, NUM_ELEMENTS = 48, 56


def _legs(out: Path, rank: int) -> list[dict]:
    b = _file(out, rank, "legs.bin").read_bytes()
    return [dict(spad_index=struct.unpack_from("<H", b, i + SPAD_INDEX)[0], channel=b[i + CHANNEL],
                 sdma_op=b[i + SDMA_OP], step=struct.unpack_from("<I", b, i + STEP)[0],
                 leaf=b[i + LEAF], half=b[i + HALF], reduction_type=b[i + REDUCTION_TYPE],
                 neigh=b[i + NEIGH], n_tiles=struct.unpack_from("<H", b, i + N_TILES)[0],
                 sem_first=struct.unpack_from("<I", b, i + SEM_FIRST)[0],
                 sem_count=struct.unpack_from("<H", b, i + SEM_COUNT)[0],
                 elem_start=struct.unpack_from("<Q", b, i + ELEM_START)[0],
                 num_elements=struct.unpack_from("<I", b, i + NUM_ELEMENTS)[0])
            for i in range(0, len(b), REC)]


def test_a_spad_index_one_past_the_entries_is_refused(ring_out, tmp_path):
    """spad_index (u16 at 4) names an entry of spad.bin: the last leg's set to 5, the number
    of c7c8's entries, is refused as such."""
    out = _copy(ring_out, tmp_path)
    last = len(_legs(out, 1)) - 1
    assert _legs(out, 1)[last]["spad_index"] == 4
    _set(out, 1, "legs.bin", last * REC + SPAD_INDEX, "<H", 5)
    _refused(out, "rank-0001", "legs.bin", f"record {last}", "spad_index should be below 5, the "
             "entries spad.bin has, not 5")


def test_channel_32_is_refused(ring_out, tmp_path):
    """channel (u8 at 6) is 0..31: the last leg's set to 32 is refused as such."""
    out = _copy(ring_out, tmp_path)
    last = len(_legs(out, 1)) - 1
    _set(out, 1, "legs.bin", last * REC + CHANNEL, "<B", 32)
    _refused(out, "rank-0001", "legs.bin", f"record {last}", "channel is not in 0..31")


def test_a_step_below_its_position_is_refused(ring_out, tmp_path):
    """step (u32 at 8) is the leg's position in its channel program, 0, 1, ...: the second
    leg's step set to 0 (two legs numbered 0) is refused, not only a step too high."""
    out = _copy(ring_out, tmp_path)
    legs = _legs(out, 1)
    assert [g["step"] for g in legs[:2]] == [0, 1] and legs[1]["spad_index"] == 0
    _set(out, 1, "legs.bin", 1 * REC + STEP, "<I", 0)
    _refused(out, "rank-0001", "legs.bin", "record 1", "step should be 1, program order's, not 0")


def _two_triggers_on_32_channel_ids(out: Path, monkeypatch, engine: str) -> Path:
    """Two all-reduces lowered with the channel rule's count lifted to 32 for a RING (a HIER
    leg's RING too): ``lower`` gives no trigger more than 16 channel ids (docs/SELECTION.md
    §7: 16 across nodes, 4 in a node; a HIER trigger's legs at most 4 + 2 + 4), FORMATS
    §3 and NEC_MAX_CHANNELS allow 32."""
    from nrtrewrite import select
    from nrtrewrite.codes import EncAlgType

    from test_simulate import coll_spec, lower_spec

    rule = select.choose_channels

    def lifted(topo, req, alg, policy=select.DEFAULT_POLICY):
        if alg == EncAlgType.RING and len(req.group) > 1:
            return 32, "lifted for the test"
        return rule(topo, req, alg, policy)

    if engine == "ring":  # one node, 2 ranks: 8192 bf16 = 64 elements per rank per channel
        spec = coll_spec("all_reduce", "bf16", 2, 8192, name="ch32")
        opts = {}
    else:  # 2 ranks on each of two nodes (LNC 2): {0, 1} and {64, 65}
        spec = coll_spec("all_reduce", "bf16", [0, 1, 64, 65], 65536, lnc=2, name="hier32")
        opts = {"topology": "trn2:nodes=2", "algo": "hier,ring"}
    sp = spec["subgraphs"][0]["engines"]["sp"]
    sp.append(dict(sp[-1]))
    with monkeypatch.context() as m:
        m.setattr(select, "choose_channels", lifted)
        return lower_spec(spec, out, **opts)


@pytest.mark.parametrize("engine", ["ring", "hier"])
def test_channels_above_15_keep_entry_then_channel_order(tmp_path, monkeypatch, engine):
    """legs.bin is ordered by entry, then channel (FORMATS §3, channel 0..31): entry 0's
    channel 16 sorts before entry 1's channel 0, and the two are two channel programs (a
    key of 16 channels an entry would make them one). Lowered with 32 channels a RING:
    two flat all-reduces over 2 ranks, each on channels 0..31 (channel_list 0xFFFFFFFF);
    two HIER all-reduces over 2 x 2 ranks, each using all 32 ids of its budget (leg 0,
    intra_redsct, its third: 32 // 3 = 10 ids, 0..9; each later leg on the ids after the
    earlier legs', the last, intra_allg, on up to 31). Both are right outputs."""
    out = _two_triggers_on_32_channel_ids(tmp_path / "o", monkeypatch, engine)
    for rank in (0, 1):
        legs = _legs(out, rank)
        programs = [(g["spad_index"], g["channel"]) for g in legs if g["step"] == 0]
        entries = json.loads(_file(out, rank, "manifest.json").read_text())["entries"]
        if engine == "ring":
            assert programs == [(e, c) for e in (0, 1) for c in range(32)]
            assert [_get(out, rank, "spad.bin", e * SPAD + 4, "<I") for e in (0, 1)] == \
                [0xFFFFFFFF] * 2
        else:
            assert [e["leg"] for e in entries] == ["intra_redsct", "inter_allr",
                                                   "intra_allg"] * 2
            ids = [e["channels"] for e in entries]
            assert ids[0] == ids[3] == list(range(10))
            assert ids[0] + ids[1] + ids[2] == list(range(32)) and ids[3:] == ids[:3]
            assert programs == [(e, c) for e in range(6) for c in ids[e]]
    _accepted(out)


# c7c8's trigger 0: an all-reduce of a_in, 262144 bytes of bf16 = 131072 elements
T0_ELEMENTS = 131072


def _direct_recv(out: Path, rank: int) -> int:
    """The first ``direct_recv`` (leaf 7, sdma_op 0) of entry 0 (trigger 0)."""
    i, leg = next((i, g) for i, g in enumerate(_legs(out, rank)) if g["leaf"] == 7)
    assert leg["spad_index"] == 0 and leg["sdma_op"] == 0 and leg["num_elements"] > 0
    return i


def test_a_count_one_past_the_element_space_is_refused(scr_out, tmp_path):
    """A leg's elements lie in the collective's element space: a SINGLE_CYCLE_RING
    direct_recv counting 131073 elements of trigger 0's 131072 is refused."""
    out = _copy(scr_out, tmp_path)
    i = _direct_recv(out, 1)
    _set(out, 1, "legs.bin", i * REC + ELEM_START, "<Q", 0)
    _set(out, 1, "legs.bin", i * REC + NUM_ELEMENTS, "<I", T0_ELEMENTS + 1)
    _refused(out, "rank-0001", "legs.bin", f"record {i}",
             f"num_elements should be at most {T0_ELEMENTS}, the elements trigger 0 has, not "
             f"{T0_ELEMENTS + 1}")


def test_elements_ending_one_past_the_element_space_are_refused(scr_out, tmp_path):
    """elem_start + num_elements = 131073, one past trigger 0's element space."""
    out = _copy(scr_out, tmp_path)
    i = _direct_recv(out, 1)
    n = _legs(out, 1)[i]["num_elements"]
    _set(out, 1, "legs.bin", i * REC + ELEM_START, "<Q", T0_ELEMENTS - n + 1)
    _refused(out, "rank-0001", "legs.bin", f"record {i}", f"elem_start {T0_ELEMENTS - n + 1} "
             f"with num_elements {n} runs past the {T0_ELEMENTS} elements of trigger 0")


def test_513_entries_of_one_subgraph_are_refused(tmp_path, monkeypatch):
    """A subgraph's entries fit its 4096-byte CTRL SPAD: 512 of 8 bytes (FORMATS §2). An
    output of 513 all-reduces in one subgraph over 2 ranks, lowered with the writer's limit
    lifted (the lowering refuses it otherwise), is refused by the simulator as such."""
    from nrtrewrite import limits, serialize
    from nrtrewrite.emit import formats as F

    from test_simulate import lower_spec

    body = {"dtype": "bf16", "op": "add", "src": "x_in", "dst": "x_out", "num_elements": 64}
    spec = {"header": {"pkg_version": 2, "name": "spad513", "lnc_size": 1},
            "subgraphs": [{"name": "sg00",
                           "vars": [{"name": "x_in", "type": "input", "size": 128},
                                    {"name": "x_out", "type": "output", "size": 128}],
                           "replica_groups": [[0, 1]],
                           "engines": {"sp": ["nop"] + [{"all_reduce": body}] * 513}}]}
    with monkeypatch.context() as m:
        m.setattr(limits, "SPAD_ENTRIES", 1024)
        m.setattr(serialize.F, "SPAD_BYTES", 2 * F.SPAD_BYTES)
        out = lower_spec(spec, tmp_path / "o")
    assert F.SPAD_BYTES == 4096
    assert _file(out, 1, "spad.bin").stat().st_size == 513 * SPAD
    _refused(out, "rank-0000", "spad.bin", "513 entries of subgraph sg00 overflow its "
             "4096-byte CTRL SPAD")


def test_a_channel_program_not_ending_with_mark_end_is_refused(mesh_out, tmp_path):
    """Within a channel of an entry the last leg is mark_end (15, FORMATS §3): the last leg
    of entry 0 made a mesh_sync (20, a leaf of MESH entries without data, like mark_end) is
    refused as such, before its semaphores are looked at."""
    out = _copy(mesh_out, tmp_path)
    legs = _legs(out, 1)
    i = max(k for k, g in enumerate(legs) if g["spad_index"] == 0)
    assert legs[i]["leaf"] == 15 and legs[i + 1]["spad_index"] == 1
    _set(out, 1, "legs.bin", i * REC + LEAF, "<B", 20)
    _refused(out, "rank-0001", "legs.bin", f"record {i}",
             "the last leg of an (entry, channel) is not mark_end")


def test_mark_end_before_the_end_of_its_channel_program_is_refused(ring_out, tmp_path):
    """mark_end (15) is the last leg of a channel program and only the last: the first leg
    of entry 0 (a mark_complete, 22, also a leg without data) made a mark_end is refused."""
    out = _copy(ring_out, tmp_path)
    assert _legs(out, 1)[0]["leaf"] == 22
    _set(out, 1, "legs.bin", LEAF, "<B", 15)
    _refused(out, "rank-0001", "legs.bin", "record 0",
             "mark_end before the end of its channel program")


def test_half_2_is_refused_on_a_single_cycle_ring_leg(scr_out, tmp_path):
    """half (u8 at 13) is enc_half_chunk_index, 0 CHUNK_H0 or 1 CHUNK_H1: 2 on a
    SINGLE_CYCLE_RING data leg (whose half no chunk layout check covers) is refused."""
    out = _copy(scr_out, tmp_path)
    i = next(i for i, g in enumerate(_legs(out, 1)) if g["sdma_op"] and g["spad_index"] == 0)
    _set(out, 1, "legs.bin", i * REC + HALF, "<B", 2)
    _refused(out, "rank-0001", "legs.bin", f"record {i}", "half is not CHUNK_H0/H1")


def _first_leaf(out: Path, rank: int, leaf: int) -> int:
    return next(i for i, g in enumerate(_legs(out, rank)) if g["leaf"] == leaf)


def test_a_mesh_sync_leg_with_a_copy_sdma_op_is_refused(mesh_out, tmp_path):
    """mesh_sync (20) has no data: sdma_op 0 (FORMATS §3.2); 2 (CME) is refused as such
    (only a KANGARING direct_recv, 7, is a copy where the ring's is a sync leg)."""
    out = _copy(mesh_out, tmp_path)
    i = _first_leaf(out, 1, 20)
    _set(out, 1, "legs.bin", i * REC + SDMA_OP, "<B", 2)
    _refused(out, "rank-0001", "legs.bin", f"record {i}", "sdma_op for leaf mesh_sync should "
             "be 0, not 2")


def test_a_ring_send_whose_neigh_is_local_says_what_it_should_be(ring_out, tmp_path):
    """neigh (u8 at 15) is 1 NEXT on a leg whose destination or increment is another rank's
    (FORMATS §3): a RING ``send`` (leaf 1) writes its successor. Set to 0 LOCAL, refused
    saying the value it should hold, then the one it holds (CLI.md "Errors")."""
    out = _copy(ring_out, tmp_path)
    i = _first_leaf(out, 1, 1)
    assert _legs(out, 1)[i]["neigh"] == 1
    _set(out, 1, "legs.bin", i * REC + NEIGH, "<B", 0)
    _refused(out, "rank-0001", "artifact legs.bin", f"record {i}", "field neigh",
             f"record {i}: neigh for leaf send should be 1, not 0")


def test_a_mesh_send_whose_neigh_is_local_says_what_it_should_be(mesh_out, tmp_path):
    """The same rule off the ring: a ``mesh_send`` (leaf 16) increments each destination
    rank's event semaphore (FORMATS §3.2), another rank's, so neigh 1; 0 is refused naming
    the leaf, the rule's reason and both values."""
    out = _copy(mesh_out, tmp_path)
    i = _first_leaf(out, 1, 16)
    assert _legs(out, 1)[i]["neigh"] == 1
    _set(out, 1, "legs.bin", i * REC + NEIGH, "<B", 0)
    _refused(out, "rank-0001", "artifact legs.bin", f"record {i}", "field neigh",
             f"record {i}: neigh for a mesh_send leg that reaches another rank should be 1 "
             "(NEXT), not 0")


def test_a_last_piece_incrementing_another_semaphore_says_what_it_should_be(ring_out,
                                                                           tmp_path):
    """FORMATS §4: the last 0xBF word of a data leg has update_idx (u8 at 7) its channel's
    dma_compl_sema, 16 + 4c + 3: 19 on channel 0. The first RING ``send`` (leaf 1) of rank 1
    on channel 0: its last word's update_idx set to 18 (the channel's post_sema) is refused
    naming the word and the field, with both values."""
    out = _copy(ring_out, tmp_path)
    i = next(i for i, g in enumerate(_legs(out, 1)) if g["leaf"] == 1 and g["channel"] == 0)
    first = _get(out, 1, "legs.bin", i * REC + 16, "<I")  # sb2sb_first
    count = _get(out, 1, "legs.bin", i * REC + 20, "<H")  # sb2sb_count
    word = first + count - 1
    assert _get(out, 1, "sb2sb.bin", word * WORD + 6, "<B") == 21  # update_mode inc
    assert _get(out, 1, "sb2sb.bin", word * WORD + 7, "<B") == 19
    _set(out, 1, "sb2sb.bin", word * WORD + 7, "<B", 18)
    _refused(out, "rank-0001", "artifact sb2sb.bin", f"record {word}", "field update_idx",
             f"record {word}: update_idx should be 19, not 18 (piece {count - 1} of a send leg: "
             "the first piece carries the leg's (first) wait, the last its dma_compl_sema "
             "increment)")


def test_reduction_type_3_is_refused(mesh_out, tmp_path):
    """reduction_type (u8 at 14) of a reduce leg is a reduction_type_t, 0..2: 3 on a
    mesh_reduce (whose value the entry's algorithm does not fix) is refused as such."""
    out = _copy(mesh_out, tmp_path)
    i = _first_leaf(out, 1, 17)
    assert _legs(out, 1)[i]["reduction_type"] in (0, 2)
    _set(out, 1, "legs.bin", i * REC + REDUCTION_TYPE, "<B", 3)
    _refused(out, "rank-0001", "legs.bin", f"record {i}", "reduction_type is not a "
             "reduction_type_t")


def test_neigh_3_is_refused_on_a_mesh_leg(mesh_out, tmp_path):
    """neigh (u8 at 15) is 0 LOCAL, 1 NEXT or 2 PREV (only these are written): 3 on a
    mesh_send is refused as such."""
    out = _copy(mesh_out, tmp_path)
    i = _first_leaf(out, 1, 16)
    _set(out, 1, "legs.bin", i * REC + NEIGH, "<B", 3)
    _refused(out, "rank-0001", "legs.bin", f"record {i}", "neigh is not LOCAL, NEXT or PREV")


def test_a_data_leg_with_0_tiles_is_refused(ring_out, tmp_path):
    """n_tiles (u16 at 22) of a data leg is ceil(num_elements / t), at least 1: 0 is refused
    as such (before its BDs are counted into tiles)."""
    out = _copy(ring_out, tmp_path)
    assert _legs(out, 1)[2]["sdma_op"] == 2 and _legs(out, 1)[2]["n_tiles"] >= 1
    _set(out, 1, "legs.bin", 2 * REC + N_TILES, "<H", 0)
    _refused(out, "rank-0001", "legs.bin", "record 2", "a data leg with no tiles")


def test_a_mark_end_with_an_elem_start_is_refused(ring_out, tmp_path):
    """mark_end carries no elements: elem_start (u64 at 48) 5 with num_elements 0 is
    refused too."""
    out = _copy(ring_out, tmp_path)
    i = _first_leaf(out, 1, 15)
    _set(out, 1, "legs.bin", i * REC + ELEM_START, "<Q", 5)
    _refused(out, "rank-0001", "legs.bin", f"record {i}", "mark_end carries elements")


def test_a_record_no_leg_references_is_refused(ring_out, tmp_path):
    """The legs' sem_first / sem_count ranges end at sem.bin's last record (FORMATS §3): a
    copy of the last record appended (the rank manifest's counts following) is refused."""
    import hashlib

    out = _copy(ring_out, tmp_path)
    p = _file(out, 1, "sem.bin")
    data = p.read_bytes()
    data += data[-BD:]
    p.write_bytes(data)
    n = len(data) // BD
    _rank_manifest(out, 1, lambda m: m["files"]["sem.bin"].update(
        records=n, bytes=len(data), sha256=hashlib.sha256(data).hexdigest()))
    _refused(out, "rank-0001", "legs.bin", f"the legs reference {n - 1} records of sem.bin, "
             f"the file holds {n}")


# ---------------------------------------------------------------------------- dma.bin (§5)
LEN_FIRST, LEN_LAST = 1 << 26, 1 << 27


def _bds(out: Path, rank: int) -> list[tuple[int, int, int]]:
    b = _file(out, rank, "dma.bin").read_bytes()
    return [struct.unpack_from("<IIQ", b, i) for i in range(0, len(b), BD)]


def test_a_reserved_len_ctrl_bit_is_refused(ring_out, tmp_path):
    """len_ctrl bits [31:28] are reserved, 0: bit 28 set is refused."""
    out = _copy(ring_out, tmp_path)
    _set(out, 1, "dma.bin", 0, "<I", _bds(out, 1)[0][0] | 1 << 28)
    _refused(out, "rank-0001", "dma.bin", "record 0", "reserved bits (or META) set in len_ctrl")


def test_the_len_ctrl_meta_bit_is_refused(ring_out, tmp_path):
    """FORMATS.md §5: len_ctrl bit 23 (META) is 0 in a data BD: bit 23 set is refused."""
    out = _copy(ring_out, tmp_path)
    _set(out, 1, "dma.bin", 0, "<I", _bds(out, 1)[0][0] | 1 << 23)
    _refused(out, "rank-0001", "dma.bin", "record 0", "reserved bits (or META) set in len_ctrl")


def test_a_reserved_meta_ctrl_bit_is_refused(ring_out, tmp_path):
    """meta_ctrl bits [7:5] are reserved (sdma_op [3:0], dir [4], stream [12:8]): bit 5
    set is refused."""
    out = _copy(ring_out, tmp_path)
    _set(out, 1, "dma.bin", 4, "<I", _bds(out, 1)[0][1] | 1 << 5)
    _refused(out, "rank-0001", "dma.bin", "record 0", "reserved bits set in meta_ctrl")


def _dma_range(out: Path, rank: int, leg: int) -> tuple[int, int]:
    b = _file(out, rank, "legs.bin").read_bytes()
    return struct.unpack_from("<II", b, leg * REC + DMA_FIRST)


def test_a_leg_whose_first_bd_lacks_first_is_refused(ring_out, tmp_path):
    """A leg's first BD opens its first tile (FIRST, len_ctrl bit 26): cleared on the
    first BD of legs.bin record 2 (a send), it is refused as such."""
    out = _copy(ring_out, tmp_path)
    first, _count = _dma_range(out, 1, 2)
    ln = _bds(out, 1)[first][0]
    assert ln & LEN_FIRST
    _set(out, 1, "dma.bin", first * BD, "<I", ln & ~LEN_FIRST)
    _refused(out, "rank-0001", "dma.bin", f"record {first}",
             "the first BD of a leg does not have FIRST")


def test_a_tile_not_closed_by_last_before_the_next_first_is_refused(ring_out, tmp_path):
    """Inside a leg, FIRST and LAST delimit the tiles: a BD with LAST is followed by a BD
    with FIRST, and only then. The LAST of the first tile of a recv_reduce_send (16384 bf16
    elements, 8 tiles of trn2's 2048-element CCE cap) cleared, its next BD still FIRST, is
    refused at that BD's LAST: the next BD's stream (source 0) comes before its own, so a tile
    ends there (FORMATS §5; until 2026-12-07 named as FIRST)."""
    out = _copy(ring_out, tmp_path)
    assert _legs(out, 1)[4]["leaf"] == 2 and _legs(out, 1)[4]["n_tiles"] == 8
    first, count = _dma_range(out, 1, 4)
    bds = _bds(out, 1)[first:first + count]
    k = next(k for k, (ln, _m, _p) in enumerate(bds) if ln & LEN_LAST)
    assert k < count - 1 and bds[k + 1][0] & LEN_FIRST
    _set(out, 1, "dma.bin", (first + k) * BD, "<I", bds[k][0] & ~LEN_LAST)
    _refused(out, "rank-0001", "dma.bin", "field LAST", f"record {first + k}:",
             "LAST should be 1, not 0: a tile ends here")


# ---------------------------------------------------------------------------- cce.bin (§6)
def _cce(out: Path, rank: int, i: int) -> tuple[int, int, int, int]:
    return struct.unpack_from("<IIII", _file(out, rank, "cce.bin").read_bytes(), i * BD)


@pytest.mark.parametrize("word, bit, says", [
    (1, 20, "reserved bits set in W1"),  # W1: op [2:0], last [7], dtypes [19:8], valid [25]
    (2, 24, "reserved bits set in W2"),  # W2: length [23:0]
    (3, 6, "reserved bits set in W3"),  # W3: num_sources [5:0], reduction_type [9:8]
    (3, 7, "reserved bits set in W3"),
])
def test_a_reserved_cce_bit_next_to_a_field_is_refused(ring_out, tmp_path, word, bit, says):
    """The bit just above a CCE descriptor field is reserved, 0 (FORMATS §6)."""
    out = _copy(ring_out, tmp_path)
    w = _cce(out, 1, 0)
    assert w == (0x00800000, 0x020B6600, 0x1000, 0x2)  # bf16 ADD, source 0 of 2, 4096 bytes
    _set(out, 1, "cce.bin", 4 * word, "<I", w[word] | 1 << bit)
    _refused(out, "rank-0001", "cce.bin", "record 0", says)


# ---------------------------------------------------------------------------- sem.bin (§7)
def _sems(out: Path, rank: int) -> list[tuple[int, int, int]]:
    b = _file(out, rank, "sem.bin").read_bytes()
    return [struct.unpack_from("<IIQ", b, i) for i in range(0, len(b), BD)]


def _sem_of(out: Path, rank: int, leg: int, ctrl: int) -> int:
    """The sem.bin record of legs.bin record ``leg`` whose ctrl word is ``ctrl``."""
    g = _legs(out, rank)[leg]
    sems = _sems(out, rank)
    return next(k for k in range(g["sem_first"], g["sem_first"] + g["sem_count"])
                if sems[k][0] == ctrl)


# ctrl words (FORMATS §7: subop [7:0], role [15:8], remote [16]): 0x315 +1 on the leg's own
# dma_compl_sema (role 3), 0x10015 +1 on the successor's recv_sema (role 0, remote), 0x14 a
# wait on its own recv_sema, 0xff14 a wait outside the channel block (role 0xFF)
INC_COMPL, INC_NEXT_RECV, WAIT_RECV, WAIT_OTHER = 0x315, 0x10015, 0x14, 0xFF14


def test_a_reserved_semaphore_ctrl_bit_is_refused(ring_out, tmp_path):
    """ctrl bits [23:17] are reserved, 0: bit 17, next to remote, set is refused."""
    out = _copy(ring_out, tmp_path)
    k = _sem_of(out, 1, 2, INC_COMPL)
    _set(out, 1, "sem.bin", k * BD, "<I", INC_COMPL | 1 << 17)
    _refused(out, "rank-0001", "sem.bin", f"record {k}",
             "reserved bits set in the semaphore BD ctrl word")


def test_a_role_other_than_the_address_says_is_refused(ring_out, tmp_path):
    """role is (id - 16) % 4 for ids 16..143: a wait on recv_sema (role 0) saying role 1
    (send_sema) is refused."""
    out = _copy(ring_out, tmp_path)
    leg = _first_leaf(out, 1, 2)  # recv_reduce_send: waits recv_sema
    k = _sem_of(out, 1, leg, WAIT_RECV)
    _set(out, 1, "sem.bin", k * BD, "<I", WAIT_RECV | 1 << 8)
    _refused(out, "rank-0001", "sem.bin", f"record {k}", "role should be 0, the role of "
             "semaphore 16 (channel 0 recv_sema), its address, not 1")


def test_a_role_outside_the_channel_block_is_0xff(ring_out, tmp_path):
    """role is 0xFF for every id outside 16..143: the entry handshake's wait on entry_post
    (9) saying role 0 is refused."""
    out = _copy(ring_out, tmp_path)
    k = _sem_of(out, 1, 1, WAIT_OTHER)  # legs.bin record 1: mark_complete
    _set(out, 1, "sem.bin", k * BD, "<I", WAIT_RECV)
    _refused(out, "rank-0001", "sem.bin", f"record {k}", "role 0 for semaphore 9, outside the "
             "ring channel block (role 0xFF)")


def test_a_ring_leg_on_post_sema_is_refused(ring_out, tmp_path):
    """post_sema (role 2) is unused by RING legs: a send's own dma_compl_sema increment
    (id 19, address ...184c: id x 4) moved to post_sema (id 18, ...1848, role 2) is refused
    as such."""
    out = _copy(ring_out, tmp_path)
    k = _sem_of(out, 1, 2, INC_COMPL)
    ctrl, value, addr = _sems(out, 1)[k]
    assert addr & 0xFFFF == 0x184C
    _set(out, 1, "sem.bin", k * BD, "<I", 0x215)
    _set(out, 1, "sem.bin", k * BD + 8, "<Q", addr - 4)
    _refused(out, "rank-0001", "sem.bin", f"record {k}", "post_sema is not used by ring legs")


def test_a_routed_increment_without_the_remote_bit_is_refused(ring_out, tmp_path):
    """remote (ctrl bit 16) is 1 when the address targets another core: cleared on the send's
    increment of its successor's recv_sema, it is refused."""
    out = _copy(ring_out, tmp_path)
    k = _sem_of(out, 1, 2, INC_NEXT_RECV)
    _set(out, 1, "sem.bin", k * BD, "<I", INC_NEXT_RECV & ~(1 << 16))
    _refused(out, "rank-0001", "sem.bin", f"record {k}", "remote bit should be 1, not 0: the "
             "semaphore is on rank 2")


def test_a_semaphore_wait_of_value_0_is_refused(ring_out, tmp_path):
    """A wait's value is its threshold and what it subtracts: 0 (a wait that waits for
    nothing), on the handshake's entry_post wait, is refused as such."""
    out = _copy(ring_out, tmp_path)
    k = _sem_of(out, 1, 1, WAIT_OTHER)
    _set(out, 1, "sem.bin", k * BD + 4, "<I", 0)
    _refused(out, "rank-0001", "sem.bin", f"record {k}", "a semaphore BD with value 0")


def _swap_sems(out: Path, rank: int, a: int, b: int) -> None:
    p = _file(out, rank, "sem.bin")
    data = bytearray(p.read_bytes())
    data[a * BD:(a + 1) * BD], data[b * BD:(b + 1) * BD] = \
        data[b * BD:(b + 1) * BD], data[a * BD:(a + 1) * BD]
    p.write_bytes(bytes(data))


def test_a_wait_after_an_increment_of_its_leg_is_refused(ring_out, tmp_path):
    """A leg's semaphore BDs are its waits, then its increments (FORMATS §7): a
    recv_reduce_send's wait on recv_sema moved after its first increment is refused (the
    legs' waits all run before their increments either way, so nothing else tells)."""
    out = _copy(ring_out, tmp_path)
    leg = _first_leaf(out, 1, 2)
    g = _legs(out, 1)[leg]
    k = g["sem_first"]
    assert _sems(out, 1)[k][0] == WAIT_RECV and _sems(out, 1)[k + 1][0] & 0xFF == 0x15
    _swap_sems(out, 1, k, k + 1)
    _refused(out, "rank-0001", "sem.bin", f"record {k + 1}",
             "a wait after an increment (FORMATS §7: the wait first, then the increments)")


def test_a_ring_wait_on_recv_sema_for_2_is_refused(ring_out, tmp_path):
    """A ring leaf that consumes its predecessor's data waits recv_sema >= 1 (FORMATS §7):
    >= 2 is refused as not the protocol's."""
    out = _copy(ring_out, tmp_path)
    leg = _first_leaf(out, 1, 2)
    k = _sem_of(out, 1, leg, WAIT_RECV)
    _set(out, 1, "sem.bin", k * BD + 4, "<I", 2)
    _refused(out, "rank-0001", "sem.bin", "wait of semaphore 16 (channel 0 recv_sema) of rank 1 "
             "by 2 is not part of the protocol")


def test_a_ring_leg_signalling_its_own_recv_sema_is_refused(ring_out, tmp_path):
    """A sending ring leaf increments its successor's recv_sema, routed: the send's
    increment readdressed to its own core's recv_sema (remote bit cleared, the address of
    the same id on its own core: its dma_compl_sema increment's, id 19, less 3 x 4) is
    refused as not the protocol's."""
    out = _copy(ring_out, tmp_path)
    k = _sem_of(out, 1, 2, INC_NEXT_RECV)
    own = _sems(out, 1)[_sem_of(out, 1, 2, INC_COMPL)][2]
    _set(out, 1, "sem.bin", k * BD, "<I", INC_NEXT_RECV & ~(1 << 16))
    _set(out, 1, "sem.bin", k * BD + 8, "<Q", own - 12)
    _refused(out, "rank-0001", "sem.bin", "increment of semaphore 16 (channel 0 recv_sema) of "
             "rank 1 by 1 is not part of the protocol")


# FORMATS §10: semaphore `id` of TOP_SP `sp` in window `w` is at EVT_SEM + (sp << 30) + w + 4 id
# (no routing bits on one device); c7c8's ranks 0..3 are logical cores 0..3 of device 0
EVT_SEM, INC_WINDOW, DEC_WINDOW = 0x82_8000_0000, 0x1800, 0x1C00


def _error_line(out: Path) -> str:
    res = cli("simulate", out, "--ignore-checksums", "--json")
    assert res.exit_code == 1, res.output
    return json.loads(res.stdout)["error"]


def _ring_send_bds(out: Path) -> tuple[int, int]:
    """Rank 1's two first legs after the entry handshake's two mark_complete (FORMATS §3.4)
    are the sends of CHUNK_H0 and CHUNK_H1 (leaf 1, step 2 and 3 of entry 0, channel 0),
    each with two BDs (FORMATS §7: no wait, +1 on its own dma_compl_sema, +1 on the
    successor's recv_sema): returns the sem.bin records of record 2's dma_compl increment and
    record 3's successor increment."""
    legs = _legs(out, 1)
    assert [(g["leaf"], g["spad_index"], g["channel"], g["step"], g["sem_count"])
            for g in legs[:4]] == [(22, 0, 0, 0, 3), (22, 0, 0, 1, 2), (1, 0, 0, 2, 2),
                                   (1, 0, 0, 3, 2)]
    return _sem_of(out, 1, 2, INC_COMPL), _sem_of(out, 1, 3, INC_NEXT_RECV)


def test_a_ring_send_signalling_another_rank_names_its_increments_address(ring_out, tmp_path):
    """Rank 1's send (legs.bin record 2) increments rank 2's recv_sema (id 16): rank 2 is its
    successor on channel 0 (order [0, 1, 2, 3]). Its increment's address moved to rank 0's
    (TOP_SP 0) recv_sema, nothing else changed: legs.bin's neigh is still NEXT, right, and
    what is wrong is sem.bin's addr, so that is the field, artifact and record the line names
    (SIMULATOR.md §8; until 2026-12-06 `field neigh, ... artifact legs.bin, record 2`). A wrong
    neigh keeps its own line: test_a_ring_send_whose_neigh_is_local_says_what_it_should_be."""
    out = _copy(ring_out, tmp_path)
    k = _sem_of(out, 1, 2, INC_NEXT_RECV)
    assert _sems(out, 1)[k] == (INC_NEXT_RECV, 1, EVT_SEM + (2 << 30) + INC_WINDOW + 4 * 16)
    _set(out, 1, "sem.bin", k * BD + 8, "<Q", EVT_SEM + (0 << 30) + INC_WINDOW + 4 * 16)
    assert _error_line(out) == (
        f"{out / 'rank-0001'}: field addr, rank 1, artifact sem.bin, record {k}: send leg "
        "(legs.bin record 2) should signal rank 2, the ring successor of channel 0, not 0")


@pytest.mark.parametrize("ctrl, value, addr_id, field_, says", [
    # the wait for 2: only the value is not the protocol's (recv_sema >= 1)
    (WAIT_RECV, 2, 16, "value", "wait of semaphore 16 (channel 0 recv_sema) of rank 1 by 2"),
    # the own dma_compl_sema increment by 3: the value (by 1)
    (INC_COMPL, 3, 19, "value", "increment of semaphore 19 (channel 0 dma_compl_sema) of "
     "rank 1 by 3"),
    # the wait on send_sema (id 17, role 1) for 1: no value makes it the leaf's, its address
    (0x114, 1, 17, "addr", "wait of semaphore 17 (channel 0 send_sema) of rank 1 by 1"),
], ids=["wait_value", "inc_value", "wait_addr"])
def test_a_ring_bd_not_the_protocols_names_its_value_or_its_address(ring_out, tmp_path, ctrl,
                                                                    value, addr_id, field_,
                                                                    says):
    """Rank 1's first recv_reduce_send (legs.bin record 4) has three BDs (FORMATS §7): its
    wait recv_sema >= 1, +1 on its own dma_compl_sema, +1 on the successor's recv_sema. A BD
    the leaf has but for its value names the field value (until 2026-12-06 `field addr`), one
    it has by no value names addr."""
    out = _copy(ring_out, tmp_path)
    assert _legs(out, 1)[4]["leaf"] == 2
    own = ctrl & 0xFF == 0x15
    k = _sem_of(out, 1, 4, INC_COMPL if own else WAIT_RECV)
    window = INC_WINDOW if own else DEC_WINDOW
    _set(out, 1, "sem.bin", k * BD, "<I", ctrl)
    _set(out, 1, "sem.bin", k * BD + 4, "<I", value)
    _set(out, 1, "sem.bin", k * BD + 8, "<Q", EVT_SEM + (1 << 30) + window + 4 * addr_id)
    assert _error_line(out) == (
        f"{out / 'rank-0001'}: field {field_}, rank 1, artifact sem.bin, record {k}: {says} is "
        "not part of the protocol for a recv_reduce_send leg (legs.bin record 4; FORMATS §3.2 "
        "- §3.4, §7)")


def test_ring_sends_with_bds_swapped_between_them_name_the_bd(ring_out, tmp_path):
    """The H0 send's dma_compl increment and the H1 send's successor increment swapped in
    sem.bin, legs.bin untouched: each send still has its two BDs (sem_count right), the H0
    send two successor increments and no dma_compl one. The line names the first BD of the
    kind it has too many of, sem.bin's, by its address (until 2026-12-06 `field sem_count,
    ... artifact legs.bin, record 2`), and its words are in SIMULATOR.md §2."""
    out = _copy(ring_out, tmp_path)
    a, b = _ring_send_bds(out)
    _swap_sems(out, 1, a, b)
    line = _error_line(out)
    assert line == (
        f"{out / 'rank-0001'}: field addr, rank 1, artifact sem.bin, record {a}: send leg "
        "(legs.bin record 2: entry 0, channel 0, step 2) should have 1 x an increment of its "
        "own dma_compl_sema by 1, not 0; this BD is one of its 2 x an increment of the "
        "successor's recv_sema or its own send_sema by 1, where it should have 1")
    doc = " ".join((Path(__file__).parents[1] / "docs" / "SIMULATOR.md").read_text().split())
    assert line.split(": ", 2)[2] in doc


def test_a_ring_sends_successor_increment_turned_into_a_second_own_one_is_named_there(
        ring_out, tmp_path):
    """Rank 1's send (legs.bin record 2) has two BDs, FORMATS §7's order: +1 on its own
    dma_compl_sema, then +1 on the successor's recv_sema. The second overwritten with a copy
    of the first (review 57i b37): the leg has two dma_compl increments and no successor
    one. The line names the second, where §7 puts the successor's increment, and says the
    successor's increment is missing (until 2026-12-07 it named the first, untouched, BD
    and said only `should have 1 x an increment of its own dma_compl_sema by 1, not 2`)."""
    out = _copy(ring_out, tmp_path)
    k = _sem_of(out, 1, 2, INC_COMPL)
    assert _legs(out, 1)[2]["sem_first"] == k and _sems(out, 1)[k + 1][0] == INC_NEXT_RECV
    p = _file(out, 1, "sem.bin")
    data = bytearray(p.read_bytes())
    data[(k + 1) * BD:(k + 2) * BD] = data[k * BD:(k + 1) * BD]
    p.write_bytes(bytes(data))
    assert _error_line(out) == (
        f"{out / 'rank-0001'}: field addr, rank 1, artifact sem.bin, record {k + 1}: send leg "
        "(legs.bin record 2: entry 0, channel 0, step 2) should have 1 x an increment of the "
        "successor's recv_sema or its own send_sema by 1, not 0; this BD is one of its 2 x an "
        "increment of its own dma_compl_sema by 1, where it should have 1")


def test_a_ring_leg_with_a_bd_of_the_next_leg_names_its_sem_count(ring_out, tmp_path):
    """The other way round: legs.bin record 2 (the H0 send) given 3 BDs and record 3 (the H1
    send) 1, its sem_first one later, sem.bin untouched (the ranges still tile the file,
    FORMATS §3): the H0 send now has two dma_compl increments among 3 BDs, where the
    protocol gives it 2 - its sem_count is what is wrong, and the line still names it."""
    out = _copy(ring_out, tmp_path)
    a, _ = _ring_send_bds(out)
    assert _legs(out, 1)[3]["sem_first"] == a + 2
    _set(out, 1, "legs.bin", 2 * REC + SEM_COUNT, "<H", 3)
    _set(out, 1, "legs.bin", 3 * REC + SEM_FIRST, "<I", a + 3)
    _set(out, 1, "legs.bin", 3 * REC + SEM_COUNT, "<H", 1)
    assert _error_line(out) == (
        f"{out / 'rank-0001'}: field sem_count, rank 1, artifact legs.bin, record 2: send leg "
        "(entry 0, channel 0, step 2) should have 1 x an increment of its own dma_compl_sema "
        "by 1, not 2")


# ---------------------------------------------------------------------------- tpinc.bin (§2.2)
def _tp(out: Path, rank: int) -> list[tuple[int, int, int, int]]:
    b = _file(out, rank, "tpinc.bin").read_bytes()
    return [struct.unpack_from("<HHHH", b, i) for i in range(0, len(b), TP)]


def test_a_tp_inc_record_of_repeat_0_is_refused(ring_out, tmp_path):
    """repeat (u16 at 4) is 1..65535: a record of repeat 0 in front of the first (it expands
    to no leg, so the counts still agree; the rank manifest's counts following) is refused."""
    import hashlib

    out = _copy(ring_out, tmp_path)
    p = _file(out, 1, "tpinc.bin")
    data = struct.pack("<HHHH", 5, 5, 0, 0) + p.read_bytes()
    p.write_bytes(data)
    _rank_manifest(out, 1, lambda m: m["files"]["tpinc.bin"].update(
        records=len(data) // TP, bytes=len(data), sha256=hashlib.sha256(data).hexdigest()))
    _refused(out, "rank-0001", "tpinc.bin", "record 0", "field repeat",
             "repeat should be 1 to 65535, not 0")


def test_a_tp_inc_file_whose_last_record_lacks_last_sync_is_refused(ring_out, tmp_path):
    """Each (entry, channel) group ends with a record whose last_sync (flags bit 0) is set,
    the last group too: cleared on the file's last record, it is refused."""
    out = _copy(ring_out, tmp_path)
    last = len(_tp(out, 1)) - 1
    assert _tp(out, 1)[last][3] == 1
    _set(out, 1, "tpinc.bin", last * TP + 6, "<H", 0)
    _refused(out, "rank-0001", "tpinc.bin", f"record {last}",
             "the last record does not have last_sync")


def test_a_reserved_tp_inc_flag_is_refused(ring_out, tmp_path):
    """flags bits other than 0 are 0: bit 1 set is refused."""
    out = _copy(ring_out, tmp_path)
    _set(out, 1, "tpinc.bin", 6, "<H", _tp(out, 1)[0][3] | 2)
    _refused(out, "rank-0001", "tpinc.bin", "record 0", "reserved flag bits set")


# ---------------------------------------------------------------------------- sb2sb.bin (§4)
@pytest.mark.parametrize("offset, fmt, value, says", [
    (32, "<B", 1, "lnc_size_fmt is not 0 (LNC1)"),
    (33, "<B", 2, "num_active_channels should be 1, the entry's channels, not 2"),
    (20 + 4, "<h", 1, "src.step_elem is not (1, 256, 0)"),  # src.step_elem[2]
    # dst.num_elem[2]: 16384 = 256 x 64 elements, one piece (256, 64, 1)
    (48 + 10 + 4, "<H", 2, "dst.num_elem should be [256, 64, 1] for piece 0 of 16384 "
     "elements, not [256, 64, 2]"),
])
def test_a_0xbf_field_off_its_value_is_refused(ring_out, tmp_path, offset, fmt, value, says):
    """Word 0 of rank 1 (a send of 16384 bf16 elements, LNC1, one channel): one piece of
    256 x 64 elements. lnc_size_fmt, num_active_channels and the third dimension of
    step_elem (0) and num_elem (1) (the fields fixed at 0 and the dtypes: the next test)."""
    out = _copy(ring_out, tmp_path)
    w = _file(out, 1, "sb2sb.bin").read_bytes()[:WORD]
    assert (w[0], w[12], w[13], w[32], w[33]) == (0xBF, 6, 6, 0, 1)
    assert struct.unpack_from("<3h3H", w, 20) == (1, 256, 0, 256, 64, 1)
    _set(out, 1, "sb2sb.bin", offset, fmt, value)
    _refused(out, "rank-0001", "sb2sb.bin", "record 0", says)


_Z14 = " ".join(["00"] * 14)


@pytest.mark.parametrize("edits, says", [
    # FORMATS §4: debug_cmd u8 at 2, debug_hint u8 at 3, in_dtype u8 at 12, out_dtype u8 at
    # 13 (= in_dtype), reserved0 u8[2] at 14, reserved1 u8[14] at 34; BF16 is 0x6
    ({2: 1}, "field debug_cmd, rank 1, artifact sb2sb.bin, record 0: debug_cmd should be 0, "
     "not 0x1"),
    ({3: 1}, "field debug_hint, rank 1, artifact sb2sb.bin, record 0: debug_hint should be 0, "
     "not 0x1"),
    ({12: 7}, "field in_dtype, rank 1, artifact sb2sb.bin, record 0: in/out dtype 0x7/0x6, "
     "the trigger moves 0x6"),
    ({13: 7}, "field out_dtype, rank 1, artifact sb2sb.bin, record 0: in/out dtype 0x6/0x7, "
     "the trigger moves 0x6"),
    ({15: 1}, "field reserved0, rank 1, artifact sb2sb.bin, record 0: reserved0 should be "
     "00 00, not 00 01"),
    ({14: 0x80}, "field reserved0, rank 1, artifact sb2sb.bin, record 0: reserved0 should be "
     "00 00, not 80 00"),
    ({40: 1}, f"field reserved1, rank 1, artifact sb2sb.bin, record 0: reserved1 should be "
     f"{_Z14}, not 00 00 00 00 00 00 01 00 00 00 00 00 00 00"),
    ({47: 2}, f"field reserved1, rank 1, artifact sb2sb.bin, record 0: reserved1 should be "
     f"{_Z14}, not 00 00 00 00 00 00 00 00 00 00 00 00 00 02"),
    # several: the first by offset
    ({47: 1, 15: 1, 3: 1}, "field debug_hint, rank 1, artifact sb2sb.bin, record 0: "
     "debug_hint should be 0, not 0x1"),
    ({40: 1, 14: 1}, "field reserved0, rank 1, artifact sb2sb.bin, record 0: reserved0 should "
     "be 00 00, not 01 00"),
    ({13: 7, 12: 10}, "field in_dtype, rank 1, artifact sb2sb.bin, record 0: in/out dtype "
     "0xa/0x7, the trigger moves 0x6"),
])
def test_a_0xbf_field_fixed_at_zero_or_a_dtype_off_is_named_with_its_value(ring_out, tmp_path,
                                                                           edits, says):
    """Word 0 of rank 1 (a send of bf16 elements): a byte of a field FORMATS §4 fixes at 0
    is refused naming that field and its value, the first such field by offset when several
    are set; a wrong out_dtype is named out_dtype (it was named in_dtype, a wrong debug_hint
    debug_cmd, and reserved0 / reserved1 ``reserved``, a field §4 does not have, without a
    value)."""
    out = _copy(ring_out, tmp_path)
    w = _file(out, 1, "sb2sb.bin").read_bytes()[:WORD]
    assert (w[2], w[3], w[12], w[13]) == (0, 0, 6, 6) and not any(w[14:16] + w[34:48])
    for offset, value in edits.items():
        _set(out, 1, "sb2sb.bin", offset, "<B", value)
    _refused(out, says)


def test_a_destination_shorter_than_its_source_is_refused(ring_out, tmp_path):
    """A tile's destination streams carry what its sources carry (FORMATS §3.1: the result
    is written to every destination): a send's one tile, its S2M BD 2 bytes shorter than
    its M2S BD, is refused at the S2M BD, whose bytes are not the leg's num_elements x 2
    (until 2026-12-07 at the tile's first BD, the M2S one)."""
    out = _copy(ring_out, tmp_path)
    first, count = _dma_range(out, 1, 2)
    bds = _bds(out, 1)[first:first + count]
    assert count == 2 and [(m >> 4) & 1 for _ln, m, _p in bds] == [0, 1]  # M2S, S2M
    assert bds[0][0] & 0xFFFF == bds[1][0] & 0xFFFF == 32768  # 16384 bf16 elements
    _set(out, 1, "dma.bin", (first + 1) * BD, "<I", bds[1][0] - 2)
    _refused(out, "rank-0001", "dma.bin", f"record {first + 1}:", "field length",
             "length should be 32768, not 32766")


def _tpinc_runs(out: Path, rank: int) -> list[list[int]]:
    """tpinc.bin expanded to one [m2s, s2m, last_sync] per leg (FORMATS §2.2)."""
    runs = []
    for m2s, s2m, rep, flags in _tp(out, rank):
        runs += [[m2s, s2m, 0] for _ in range(rep)]
        runs[-1][2] = flags & 1
    return runs


def _write_tpinc(out: Path, rank: int, runs: list[list[int]]) -> None:
    """tpinc.bin from per-leg [m2s, s2m, last_sync]: maximal runs of equal counts (at most
    65535), each (entry, channel) group closed by its last_sync record (FORMATS §2.2)."""
    recs: list[list[int]] = []
    for m2s, s2m, last in runs:
        if recs and recs[-1][:2] == [m2s, s2m] and not recs[-1][3] and recs[-1][2] < 65535:
            recs[-1][2] += 1
            recs[-1][3] = last
        else:
            recs.append([m2s, s2m, 1, last])
    _file(out, rank, "tpinc.bin").write_bytes(b"".join(struct.pack("<HHHH", *r) for r in recs))


def _insert_bd(out: Path, rank: int, after: int, bd: bytes) -> None:
    """Insert ``bd`` into dma.bin after record ``after``, in the same leg: the leg's
    dma_count, the later legs' dma_first (FORMATS §3), the leg's M2S / S2M count in
    tpinc.bin (§2.2: maximal runs, each (entry, channel) group closed by last_sync) and the
    rank manifest's counts follow."""
    import hashlib

    p = _file(out, rank, "dma.bin")
    data = p.read_bytes()
    p.write_bytes(data[:(after + 1) * BD] + bd + data[(after + 1) * BD:])
    lp = _file(out, rank, "legs.bin")
    legs = bytearray(lp.read_bytes())
    n = len(legs) // REC
    firsts = [struct.unpack_from("<I", legs, g * REC + DMA_FIRST)[0] for g in range(n)]
    g = max(k for k in range(n) if firsts[k] <= after and
            struct.unpack_from("<I", legs, k * REC + DMA_COUNT)[0])
    struct.pack_into("<I", legs, g * REC + DMA_COUNT,
                     struct.unpack_from("<I", legs, g * REC + DMA_COUNT)[0] + 1)
    for k in range(g + 1, n):
        struct.pack_into("<I", legs, k * REC + DMA_FIRST, firsts[k] + 1)
    lp.write_bytes(bytes(legs))
    runs = _tpinc_runs(out, rank)
    runs[g][(struct.unpack_from("<I", bd, 4)[0] >> 4) & 1] += 1
    _write_tpinc(out, rank, runs)

    def recount(m):
        for name in ("dma.bin", "legs.bin", "tpinc.bin"):
            d = _file(out, rank, name).read_bytes()
            size = {"dma.bin": BD, "legs.bin": REC, "tpinc.bin": TP}[name]
            m["files"][name].update(records=len(d) // size, bytes=len(d),
                                    sha256=hashlib.sha256(d).hexdigest())
    _rank_manifest(out, rank, recount)


def test_a_copy_leg_with_two_sources_is_refused(ring_out, tmp_path):
    """A CME copy (sdma_op 2) reads one source stream: a send's M2S BD repeated as source 1
    (meta_ctrl stream bits [12:8] = 1), the tile and the tp_inc_steps following, is refused
    (a copy has nothing to do with a second source)."""
    out = _copy(ring_out, tmp_path)
    first, count = _dma_range(out, 1, 2)
    ln, meta, ptr = _bds(out, 1)[first]
    assert count == 2 and meta == 2 and ln & LEN_FIRST  # CME, M2S, stream 0
    _insert_bd(out, 1, first, struct.pack("<IIQ", ln & ~LEN_FIRST, meta | 1 << 8, ptr))
    _refused(out, "rank-0001", "legs.bin", "record 2", "a copy leg (CME) with 2 source streams")


def test_a_source_stream_split_into_two_bds_is_accepted(ring_out, tmp_path):
    """A stream has one BD per contiguous run (FORMATS §5), and may have more: a send's M2S
    BD split into two of 16384 bytes (the first keeping FIRST), the counts following the
    same way as above, is still a right output."""
    out = _copy(ring_out, tmp_path)
    first, _count = _dma_range(out, 1, 2)
    ln, meta, ptr = _bds(out, 1)[first]
    assert ln & 0xFFFF == 32768
    _set(out, 1, "dma.bin", first * BD, "<I", (ln & ~0xFFFF) | 16384)
    _insert_bd(out, 1, first, struct.pack("<IIQ", (ln & ~0xFFFF & ~LEN_FIRST) | 16384, meta,
                                          ptr + 16384))
    _accepted(out)


def test_a_source_after_a_destination_in_a_tile_is_refused(ring_out, tmp_path):
    """Inside a tile the M2S BDs (dir, meta_ctrl bit 4, 0) come first, by stream, then the
    S2M BDs (dir 1): a send's one tile written as its S2M BD (now FIRST) then its M2S BD
    (now LAST) with stream 16 (the 5-bit stream field's upper half: ordering by
    dir x 16 + stream would put the two side by side) is refused as out of order."""
    out = _copy(ring_out, tmp_path)
    first, count = _dma_range(out, 1, 2)
    (l0, m0, p0), (l1, m1, p1) = _bds(out, 1)[first:first + 2]
    assert count == 2 and (m0, m1) == (2, 0x12) and l0 & LEN_FIRST and l1 & LEN_LAST
    flags = LEN_FIRST | LEN_LAST
    p = _file(out, 1, "dma.bin")
    data = bytearray(p.read_bytes())
    data[first * BD:(first + 2) * BD] = (struct.pack("<IIQ", (l1 & ~flags) | LEN_FIRST, m1, p1)
                                         + struct.pack("<IIQ", (l0 & ~flags) | LEN_LAST,
                                                       m0 | 16 << 8, p0))
    p.write_bytes(bytes(data))
    _refused(out, "rank-0001", "dma.bin", f"record {first + 1}", "BDs of a tile are not ordered "
             "M2S sources 0, 1, ... then S2M destinations 0, 1, ...")


def _rewrite_leg(out: Path, rank: int, leg: int, bds: list[bytes], cces: list[bytes],
                 n_tiles: int) -> None:
    """Give legs.bin record ``leg`` these BDs, CCE descriptors and n_tiles: the legs'
    dma / cce ranges (FORMATS §3), the leg's tp_inc_steps counts (§2.2) and the rank
    manifest's counts follow."""
    import hashlib

    lp = _file(out, rank, "legs.bin")
    legs = bytearray(lp.read_bytes())
    for name, at, new in (("dma.bin", DMA_FIRST, bds), ("cce.bin", 32, cces)):
        first, count = struct.unpack_from("<II", legs, leg * REC + at)
        p = _file(out, rank, name)
        data = p.read_bytes()
        p.write_bytes(data[:first * BD] + b"".join(new) + data[(first + count) * BD:])
        struct.pack_into("<I", legs, leg * REC + at + 4, len(new))
        for k in range(leg + 1, len(legs) // REC):
            f = struct.unpack_from("<I", legs, k * REC + at)[0]
            struct.pack_into("<I", legs, k * REC + at, f + len(new) - count)
    struct.pack_into("<H", legs, leg * REC + N_TILES, n_tiles)
    lp.write_bytes(bytes(legs))
    runs = _tpinc_runs(out, rank)
    runs[leg][:2] = [sum(1 for b in bds if not struct.unpack_from("<I", b, 4)[0] & 0x10),
                     sum(1 for b in bds if struct.unpack_from("<I", b, 4)[0] & 0x10)]
    _write_tpinc(out, rank, runs)

    def recount(m):
        for name, size in (("dma.bin", BD), ("cce.bin", BD), ("legs.bin", REC), ("tpinc.bin", TP)):
            d = _file(out, rank, name).read_bytes()
            m["files"][name].update(records=len(d) // size, bytes=len(d),
                                    sha256=hashlib.sha256(d).hexdigest())
    _rank_manifest(out, rank, recount)


@pytest.fixture(scope="module")
def mesh2050(tmp_path_factory) -> Path:
    """A MESH all-reduce of 2050 bf16 over 2 ranks on trn2: rank 1's mesh_reduce (legs.bin
    record 5) reduces 1025 elements in two tiles, 1024 (2048 bytes: tiles are 32-byte
    aligned) and 1."""
    import meshcase

    out = tmp_path_factory.mktemp("m2050") / "o"
    meshcase.lower(meshcase.spec([[0, 1]], [("all_reduce", "bf16", "add", 2050)]), out,
                   algo="mesh")
    return out


@pytest.fixture(scope="module")
def one_tile_1025(mesh2050, tmp_path_factory) -> Path:
    """mesh2050 with rank 1's two reduce tiles merged into one tile of 1025 elements, 2050
    bytes (under trn2's 2048-element CCE cap, so a right output): each stream one BD,
    W2 = 0x802. Before the merge (docs/DESIGN.md "Mesh and RDH", MESH over 2 ranks): record
    5 follows the two mark_complete, the two mesh_sync of the mesh handshake and the one
    scatter mesh_send (block 0 to rank 0); its tiles (FORMATS §3 n_tiles: (2050 & ~0x1F) / 2
    = 1024 elements, then 1) have 2 sources (its IN block, rank 0's slot) and 1
    destination, 3 BDs each (FORMATS §5): 2048, 2048, 2048, then 2, 2, 2 bytes."""
    out = _copy(mesh2050, tmp_path_factory.mktemp("cap"))
    g = _legs(out, 1)[5]
    t = (2050 & ~0x1F) // 2
    assert (g["leaf"], g["num_elements"], g["n_tiles"]) == (17, 1025, -(-1025 // t))
    assert g["n_tiles"] == 2
    first, count = _dma_range(out, 1, 5)
    bds = _bds(out, 1)[first:first + count]
    per_tile = 2 + 1
    assert count == 2 * per_tile == 6
    assert [b[0] & 0xFFFF for b in bds] == [t * 2] * per_tile + [(1025 - t) * 2] * per_tile
    flags = LEN_FIRST | LEN_LAST
    merged = [struct.pack("<IIQ", (ln & ~0xFFFF & ~flags) | 0x802 | f, meta, ptr)
              for (ln, meta, ptr), f in zip(bds[:3], (LEN_FIRST, 0, LEN_LAST))]
    cces = [struct.pack("<IIII", w0, w1, 0x802, w3) for w0, w1, _w2, w3 in
            (_cce(out, 1, 0), _cce(out, 1, 1))]
    want = [(0x00800000, 0x020B6600), (0x01800000, 0x020B6680)]  # bf16 ADD, sources 0 and 1
    assert [struct.unpack("<IIII", c)[:2] for c in cces] == want
    _rewrite_leg(out, 1, 5, merged, cces, 1)
    return out


def test_a_tile_of_1025_elements_is_right_on_trn2(one_tile_1025):
    _accepted(one_tile_1025)


def test_a_tile_of_1025_elements_is_one_past_trn1s_cce_cap(one_tile_1025, tmp_path):
    """The same output said to be lowered for trn1 (hw_generation 2, cce_max_elements 1024,
    FORMATS §6): its W2 of 1025 elements is refused; rank 0's tiles of 1024 are not.  (Its
    options.topology names a topology file whose platform is called trn1, its trn2 shape
    kept: since 2026-12-05 a preset's, null being trn2, is held to the preset's platform.)"""
    out = _copy(one_tile_1025, tmp_path)
    p = out / "manifest.json"
    man = json.loads(p.read_text())
    man["topology"].update(platform="trn1", hw_generation=2, cce_max_elements=1024)
    man["options"]["topology"] = "trn1-like.json"
    p.write_text(json.dumps(man, indent=1, sort_keys=True) + "\n")
    _refused(out, "rank-0001", "cce.bin", "record 0", "W2 length 2050 bytes = 1025 elements of "
             "2 bytes, more than the 1024 elements per CCE descriptor of platform trn1")


def test_a_ring_leg_reading_its_successors_input_is_refused(ring_out, tmp_path):
    """Ring legs read their own core: a send's M2S BD readdressed to the same bytes of rank
    2 (logical core 2 of the same device: + (2 - 1) << 36, FORMATS §10) is refused as such."""
    out = _copy(ring_out, tmp_path)
    first, _count = _dma_range(out, 1, 2)
    ln, meta, ptr = _bds(out, 1)[first]
    assert meta == 2 and ptr >> 36 == 1  # M2S of rank 1 (logical core 1)
    _set(out, 1, "dma.bin", first * BD + 8, "<Q", ptr + (1 << 36))
    _refused(out, "rank-0001", f"field buf_ptr, rank 1, artifact dma.bin, record {first}: send "
             "leg (legs.bin record 2) reads rank 2 (ring legs read their own core)")


@pytest.mark.parametrize("name, offset, fmt, says", [
    ("legs.bin", 46, "<H", "reserved u16 at offset 46 is not zero"),
    ("spad.bin", 3, "<B", "reserved byte 3 is not zero"),
])
def test_a_reserved_field_of_1_is_refused(ring_out, tmp_path, name, offset, fmt, says):
    out = _copy(ring_out, tmp_path)
    _set(out, 1, name, offset, fmt, 1)
    _refused(out, "rank-0001", name, "record 0", says)


def test_a_leg_of_three_waits_is_refused(mesh_out, tmp_path):
    """A leg waits on at most two semaphores (FORMATS §3.1, §7): rank 1's first
    mark_complete (its dma_compl_sema increment, then three entry_post posts to its peers)
    rewritten as three waits on its own entry_post (9, the DEC-window address of its
    handshake's wait) then the increment is refused as such."""
    out = _copy(mesh_out, tmp_path)
    g = _legs(out, 1)[0]
    k = g["sem_first"]
    sems = _sems(out, 1)
    assert g["leaf"] == 22 and g["sem_count"] == 4
    assert [c for c, _v, _a in sems[k:k + 4]] == [INC_COMPL] + [0x1FF15] * 3
    wait9 = next(a for c, _v, a in sems if c == WAIT_OTHER)
    p = _file(out, 1, "sem.bin")
    data = bytearray(p.read_bytes())
    data[k * BD:(k + 4) * BD] = (struct.pack("<IIQ", WAIT_OTHER, 1, wait9) * 3
                                 + struct.pack("<IIQ", *sems[k]))
    p.write_bytes(bytes(data))
    _refused(out, "rank-0001", "legs.bin", "record 0", "mark_complete leg waits on 3 "
             "semaphores (at most two)")


def test_entry_go_raised_by_fewer_than_the_other_channels_is_refused(tmp_path):
    """entry_go (8) is raised by (the entry's channels - 1) (FORMATS §3.4): the hybrid ring
    (16 ranks at LNC 2, one per device at core 1) runs on 4 channels, forced
    (docs/SELECTION.md "Channels"), so its first channel's increment is 3; 2 is refused (a
    count the run alone would see only as a channel left waiting)."""
    from test_simulate import coll_spec, lower_spec

    out = lower_spec(coll_spec("all_reduce", "bf16", list(range(1, 64, 4)), 4096, lnc=2),
                     tmp_path / "o")
    assert json.loads(_file(out, 1, "manifest.json").read_text())["entries"][0]["channels"] \
        == [0, 1, 2, 3]
    go = [k for k, (c, v, _a) in enumerate(_sems(out, 1)) if c == 0xFF15 and v == 3]
    assert len(go) == 1
    _set(out, 1, "sem.bin", go[0] * BD + 4, "<I", 2)
    _refused(out, "rank-0001", "sem.bin", f"record {go[0]}", "increment of semaphore 8 by 2: the "
             "entry has 4 channels, so it releases 3")


def test_a_reduce_tile_of_a_half_element_is_refused(mesh2050, tmp_path):
    """A CCE source stream is a whole number of in_dtype elements: mesh2050's reduce tiles
    of 2048 + 2 bytes re-cut as 2047 + 3 (every stream's BDs and each W2 following, so
    lengths still agree) are refused as such."""
    out = _copy(mesh2050, tmp_path)
    first, count = _dma_range(out, 1, 5)
    bds = _bds(out, 1)[first:first + count]
    assert [b[0] & 0xFFFF for b in bds] == [0x800] * 3 + [2] * 3
    cut = [struct.pack("<IIQ", (ln & ~0xFFFF) | n, meta, ptr + shift)
           for (ln, meta, ptr), n, shift in zip(bds, [0x7FF] * 3 + [3] * 3, [0] * 3 + [-1] * 3)]
    cces = [struct.pack("<IIII", w0, w1, n, w3) for (w0, w1, _w2, w3), n in
            zip((_cce(out, 1, k) for k in range(4)), (0x7FF, 0x7FF, 3, 3))]
    _rewrite_leg(out, 1, 5, cut, cces, 2)
    _refused(out, "rank-0001", "cce.bin", "record 0", "a source stream is not a whole number "
             "of in_dtype elements")


def test_mark_end_waiting_for_one_leg_fewer_is_refused(ring_out, tmp_path):
    """mark_end waits dma_compl_sema >= the number of other legs of its channel in the entry
    (FORMATS §7): entry 0 of rank 1 has 18 legs before its mark_end; a wait for 17 is
    refused as such. The 18: c7c8's trigger 0, a bf16 all-reduce of 256 KiB (131072
    elements) over n = 4 ranks on one channel, chunks of 131072 / 4 = 32768 elements (64 KiB,
    under DESIGN.md "Chunking"'s 512 KiB cap), so one chunk group; seed 001 §4's loop, every
    step two legs (CHUNK_H0, CHUNK_H1): send (1 step), recv_reduce_send (n - 2), the device
    path's recv_reduce_copy + direct_copy_send (2 legs a half), direct_recv_send (n - 2),
    direct_recv (1): 2 + 2 (n - 2) + 4 + 2 (n - 2) + 2 = 16; and the entry handshake's two
    mark_complete (FORMATS §3.4: one channel)."""
    out = _copy(ring_out, tmp_path)
    legs = _legs(out, 1)
    n, chunk = 4, 131072 // 4
    assert chunk * 2 <= 512 * 1024 and 131072 // (n * chunk) == 1  # pgta 1
    others = 2 + (2 + 2 * (n - 2) + 4 + 2 * (n - 2) + 2)
    i = _first_leaf(out, 1, 15)
    assert i == others == 18 and all(g["spad_index"] == 0 for g in legs[:19])
    k = _sem_of(out, 1, i, 0x314)  # its wait on its own dma_compl_sema (role 3)
    assert _sems(out, 1)[k][1] == others
    _set(out, 1, "sem.bin", k * BD + 4, "<I", 17)
    # only that BD's value is wrong: the line names it (until 2026-12-06 `field sem_count,
    # ... artifact legs.bin, record 18`)
    assert _error_line(out) == (
        f"{out / 'rank-0001'}: field value, rank 1, artifact sem.bin, record {k}: mark_end leg "
        f"(legs.bin record {i}) should wait dma_compl_sema >= 18, the channel's other legs, "
        "not 17")
    doc = " ".join((Path(__file__).parents[1] / "docs" / "SIMULATOR.md").read_text().split())
    assert f"record {k}: mark_end leg (legs.bin record {i}) should wait" in doc


def _reorder_legs(out: Path, rank: int, order: list[int]) -> None:
    """Put rank ``rank``'s legs.bin records in ``order`` (a permutation inside one entry
    and channel), each with its records of dma.bin, cce.bin, sem.bin and sb2sb.bin: the
    steps and the *_first ranges (FORMATS §3) and tpinc.bin (§2.2) follow; no count
    changes but tpinc.bin's in the rank manifest."""
    import hashlib

    lp = _file(out, rank, "legs.bin")
    legs = lp.read_bytes()
    recs = [bytearray(legs[i * REC:(i + 1) * REC]) for i in order]
    tp = []
    for m2s, s2m, rep, flags in _tp(out, rank):
        tp += [[m2s, s2m, 0] for _ in range(rep)]
        tp[-1][2] = flags & 1
    for name, at, cfmt, size in (("dma.bin", DMA_FIRST, "<I", BD), ("cce.bin", 32, "<I", BD),
                                 ("sem.bin", SEM_FIRST, "<H", BD), ("sb2sb.bin", 16, "<H", WORD)):
        data = _file(out, rank, name).read_bytes()
        new, pos = b"", 0
        for r in recs:
            first = struct.unpack_from("<I", r, at)[0]
            count = struct.unpack_from(cfmt, r, at + 4)[0]
            new += data[first * size:(first + count) * size]
            struct.pack_into("<I", r, at, pos)
            pos += count
        _file(out, rank, name).write_bytes(new)
    for k, r in enumerate(recs):
        if k and struct.unpack_from("<HB", r, SPAD_INDEX) == struct.unpack_from(
                "<HB", recs[k - 1], SPAD_INDEX):
            struct.pack_into("<I", r, STEP, struct.unpack_from("<I", recs[k - 1], STEP)[0] + 1)
        else:
            struct.pack_into("<I", r, STEP, 0)
    lp.write_bytes(b"".join(recs))
    counts = [tp[i][:2] for i in order]
    last = [t[2] for t in tp]
    out_recs: list[list[int]] = []
    for (m2s, s2m), ls in zip(counts, last):
        if out_recs and out_recs[-1][:2] == [m2s, s2m] and not out_recs[-1][3] \
                and out_recs[-1][2] < 65535:
            out_recs[-1][2] += 1
            out_recs[-1][3] = ls
        else:
            out_recs.append([m2s, s2m, 1, ls])
    data = b"".join(struct.pack("<HHHH", *r) for r in out_recs)
    _file(out, rank, "tpinc.bin").write_bytes(data)
    _rank_manifest(out, rank, lambda m: m["files"]["tpinc.bin"].update(
        records=len(data) // TP, bytes=len(data), sha256=hashlib.sha256(data).hexdigest()))


def test_a_mark_complete_after_another_leaf_is_refused(ring_out, tmp_path):
    """mark_complete legs open their channel program (FORMATS §3.4): rank 1's second
    mark_complete (legs.bin record 1) moved after the send that follows it (record 2), each
    with its semaphore BDs, steps and tp_inc_steps following, is refused as such."""
    out = _copy(ring_out, tmp_path)
    assert [g["leaf"] for g in _legs(out, 1)[:3]] == [22, 22, 1]
    n = len(_legs(out, 1))
    _reorder_legs(out, 1, [0, 2, 1] + list(range(3, n)))
    assert [g["leaf"] for g in _legs(out, 1)[:3]] == [22, 1, 22]
    _refused(out, "rank-0001", "legs.bin", "record 2", "mark_complete after a leg of another "
             "leaf: the entry handshake opens its channel program")


def test_legs_reordered_in_place_are_still_right(ring_out, tmp_path):
    """_reorder_legs with the identity order and with the two mark_complete legs of entry 0
    swapped (both open the channel program; each keeps its own semaphore BDs) leaves a right
    output: the helper the test above uses moves nothing else."""
    out = _copy(ring_out, tmp_path)
    n = len(_legs(out, 1))
    _reorder_legs(out, 1, list(range(n)))
    for name in ("legs.bin", "dma.bin", "sem.bin", "tpinc.bin", "sb2sb.bin", "cce.bin"):
        assert _file(out, 1, name).read_bytes() == _file(ring_out, 1, name).read_bytes(), name
    _reorder_legs(out, 1, [1, 0] + list(range(2, n)))
    _accepted(out)


# ------------------------------------------------------- 0xBF start_addr of mesh views (§4)
DST_START = 48


def test_a_mesh_view_starting_before_its_region_is_refused(mesh_out, tmp_path):
    """A mesh_send's dst.start_addr in a peer's channel-buffer slot is the element's offset
    from the slot's first element (FORMATS §4): rank 1's send of block 3 (elements 98304..,
    sb2sb.bin word 2, start_addr 0) said to be measured from element 0 (start_addr
    98304 x 2, an origin every trigger allows) puts the view's first byte 192 KiB before
    the slot, before the scratch region: refused as such. c7c8's trigger 0 (131072 bf16,
    4 ranks) as MESH (docs/DESIGN.md "Mesh and RDH"): rank 1's legs 0..3 the two
    mark_complete and two mesh_sync (no 0xBF word: no data), then the scatter, block j to
    peer j in group order (0, 2, 3: records 4, 5, 6), block 3 from 3 x 131072 / 4; each
    send of 32768 elements is one 0xBF piece (FORMATS §4: 0 of 65536, q = 128, r = 0), so
    record 6's word is 2."""
    out = _copy(mesh_out, tmp_path)
    g = _legs(out, 1)[6]
    block = 131072 // 4
    assert (g["leaf"], g["elem_start"]) == (16, 3 * block)
    assert _get(out, 1, "legs.bin", 6 * REC + 16, "<I") == 2  # sb2sb_first
    assert (block // 65536, (block // 256) % 256, block % 256) == (0, 128, 0)
    assert _get(out, 1, "sb2sb.bin", 2 * WORD + DST_START, "<I") == 0
    _set(out, 1, "sb2sb.bin", 2 * WORD + DST_START, "<I", 98304 * 2)
    _refused(out, "rank-0001", "sb2sb.bin", "record 2", "dst.start_addr 0x30000 of the piece at "
             "element 98304", "its view would start before the region")


def test_a_mesh_view_starting_at_a_negative_element_is_refused(mesh_out, tmp_path):
    """A view starts at an element of the op, never before element 0, even when the
    manifest's mesh blocks (FORMATS §1.1, which the simulator takes the allowed view
    origins from) name one: a block [-16, 0] added and rank 1's send of block 0 (word 0,
    start_addr 0) given start_addr 32, a view starting 16 bf16 elements before element 0
    (and still inside scratch), is refused."""
    out = _copy(mesh_out, tmp_path)
    g = _legs(out, 1)[4]
    assert (g["leaf"], g["elem_start"]) == (16, 0)  # block 0 to rank 0, as the test above
    assert _get(out, 1, "legs.bin", 4 * REC + 16, "<I") == 0  # sb2sb_first: word 0
    p = out / "manifest.json"
    man = json.loads(p.read_text())
    man["triggers"][0]["mesh"]["blocks"].append([-16, 0])
    p.write_text(json.dumps(man, indent=1, sort_keys=True) + "\n")
    _set(out, 1, "sb2sb.bin", 0 * WORD + DST_START, "<I", 32)
    _refused(out, "rank-0001", "sb2sb.bin", "record 0",
             "its view should start at the start of a block of the trigger, not at "
             "element -16")


@pytest.fixture(scope="module")
def mesh4100(tmp_path_factory) -> Path:
    """A MESH all-reduce of 4100 bf16 over ranks 0..3 on trn2: blocks of 1025 elements
    (2050 bytes), each rank's scratch three channel-buffer slots of one block, one per
    peer in rank order. Its legs have 1025 elements: 2 tiles, 1024 elements (2048 bytes:
    tiles are 32-byte aligned, FORMATS §3 n_tiles) and 1; 2 pieces, 256 x 4 and 1 x 1
    (FORMATS §4: q = 4, r = 1)."""
    import meshcase

    out = tmp_path_factory.mktemp("m4100") / "o"
    meshcase.lower(meshcase.spec([[0, 1, 2, 3]], [("all_reduce", "bf16", "add", 4100)]), out,
                   algo="mesh")
    return out


def _region(out: Path, name: str) -> int:
    """The byte offset of a region of the layout (FORMATS §10, the manifest's memory)."""
    regions = json.loads((out / "manifest.json").read_text())["memory"]["regions"]
    return next(r["offset"] for r in regions if r["name"] == name)


def _soc(rank: int, offset: int) -> int:
    """The SoC address of a DRAM byte of a trn2 logical core of one device (FORMATS §10:
    ``(lc << 36) + 0x1_0000_0000 + offset``; ranks 0..3 at LNC 1 are cores 0..3)."""
    return (rank << 36) + 0x1_0000_0000 + offset


def test_a_mesh_view_moving_to_another_block_between_pieces_is_refused(mesh4100, tmp_path):
    """Every piece of a leg's stream is in the leg's one view (FORMATS §4: start_addr
    (e - origin) x dsize from the view's first byte, origin a block start). Rank 1's
    mesh_send of block 2 (legs.bin record 5, elements 2050..3075) writes rank 2's slot 1
    (scratch + 2050): piece 1 (sb2sb.bin word 3, element 3074, start_addr (3074 - 2050) x 2
    = 0x800) is its tile 1, whose S2M BD (dma.bin record 7) writes scratch + 0x1002. That
    BD moved one block on (scratch + 0x1804, slot 2's last element, still in scratch) and
    start_addr 0x1002 = (3074 - 1025) x 2 keep the view's first byte piece 0's (scratch +
    0x802), but make its first element block 1's, 1025: refused, not left to the run."""
    out = _copy(mesh4100, tmp_path)
    g = _legs(out, 1)[5]
    assert (g["leaf"], g["elem_start"], g["num_elements"]) == (16, 2050, 1025)
    scratch = _region(out, "scratch")
    assert _get(out, 1, "dma.bin", 7 * BD + 8, "<Q") == _soc(2, scratch + 0x1002)
    assert _get(out, 1, "sb2sb.bin", 3 * WORD + DST_START, "<I") == 0x800
    _set(out, 1, "dma.bin", 7 * BD + 8, "<Q", _soc(2, scratch + 0x1002 + 2050))
    _set(out, 1, "sb2sb.bin", 3 * WORD + DST_START, "<I", 0x1002)
    base = 0x1_0000_0000 + scratch
    _refused(out, "rank-0001", "sb2sb.bin", "record 3",
             f"dst.start_addr 0x1002 of the piece at element 3074 ({base + 0x1804:#x} in "
             f"\"scratch\"): its view starts at element 1025 ({base + 0x802:#x}), the leg's "
             f"previous piece's at element 2050 ({base + 0x802:#x})")


# ------------------------------------------------ overlapping runs: tile by tile (SIMULATOR.md §3)

@pytest.mark.parametrize("rank, at, sequential", [
    (1, 0x1003, True), (1, 0x1004, False),  # after its source run [0x802, 0x1004)
    (1, 0x801, True), (1, 0x800, False),  # before its source run
    (2, 0x1003, True), (2, 0x1004, False),  # after destination 1's run [0x802, 0x1004)
], ids=["src-then-dst-1-byte", "src-then-dst-touching", "dst-then-src-1-byte",
        "dst-then-src-touching", "dst-then-dst-1-byte", "dst-then-dst-touching"])
def test_a_one_byte_overlap_runs_a_leg_tile_by_tile(mesh4100, tmp_path, rank, at, sequential):
    """A leg whose destination runs overlap its source runs (or each other) is run tile by
    tile (SIMULATOR.md §3), from one overlapping byte on. Rank 1's mesh_send of its reduced
    block 1 (legs.bin record 8) reads bytes [0x802, 0x1004) of its output (elements 1025..
    2050) and writes them to ranks 0, 2 and 3 (destinations 0, 1, 2). Destination 2's BD
    of tile 1 (dma.bin record 29: 2 bytes, element 2049 at 0x1002) readdressed to ``at`` of
    rank ``rank``'s output overlaps the source run or destination 1's by one byte
    (sequential) or touches it (not); the static checks take all six. Record 8's BDs
    (FORMATS §5, by tile, sources then destinations; mesh4100's legs of 2 tiles) start
    after the three scatter sends' (records 4..6: 1 source + 1 destination a tile, 4 each)
    and the mesh_reduce's (record 7: IN and 3 slots, one destination, 5 a tile): 12 + 10 =
    22; it has 2 x (1 + 3) = 8, tile 1 from 26 (source 0), its destination 2 at 26 + 3."""
    from nrtrewrite.simulate import Simulator

    out = _copy(mesh4100, tmp_path)
    g = _legs(out, 1)[8]
    assert (g["leaf"], g["elem_start"], g["num_elements"]) == (16, 1025, 1025)
    out0 = _region(out, "o0")
    tiles, peers = 2, 3
    first = 3 * tiles * (1 + 1) + tiles * (1 + peers + 1)
    assert _dma_range(out, 1, 8) == (first, tiles * (1 + peers)) == (22, 8)
    assert (first + 1 + peers, first + 1 + peers + 1 + 2) == (26, 29)
    assert [_bds(out, 1)[i] for i in (26, 29)] == [
        (LEN_FIRST | 2, 0x002, _soc(1, out0 + 0x1002)),  # M2S, source 0
        (LEN_LAST | 2, 0x212, _soc(3, out0 + 0x1002))]  # S2M, destination 2
    _set(out, 1, "dma.bin", 29 * BD + 8, "<Q", _soc(rank, out0 + at))
    sim = Simulator(out)
    res = sim.prepare()
    assert res.error is None, res.error
    assert [int(x) for x in sim.programs[1].l_seq.nonzero()[0]] == ([8] if sequential else [])


def test_runs_on_ranks_past_1023_are_not_grouped_with_the_next_legs():
    """The overlap check compares the runs of one leg in one region of one rank (SIMULATOR.md
    §3). Leg 0 writes bytes [0, 8) of region 0 on rank 1024 and leg 1 reads bytes [0, 8) of
    region 0 on rank 0 and writes [100, 108): neither leg overlaps itself, so neither runs
    tile by tile. (A key leg * 2^20 + rank * 1024 + region put leg 0 on rank 1024 in leg 1's
    group on rank 0, and made leg 1 sequential.)"""
    import numpy as np

    from nrtrewrite.simulate.program import RankDecoder

    d = RankDecoder.__new__(RankDecoder)
    d.n_legs = 2

    def col(*v):
        return np.array(v, np.int64)
    d.runs = {"leg": col(0, 0, 1, 1), "dir": col(0, 1, 0, 1), "rank": col(1024, 1024, 0, 0),
              "reg": col(0, 0, 0, 0), "off": col(200, 0, 0, 100), "len": col(8, 8, 8, 8)}
    assert d.check_overlaps().tolist() == [False, False]
    d.runs["off"] = col(200, 0, 0, 4)  # leg 1's destination now overlaps its source
    assert d.check_overlaps().tolist() == [False, True]


# ------------------------------------------------ a ring's consumed elements (SIMULATOR.md §3)

#: leaves that wait for the ring predecessor's data, and leaves that signal the successor
#: (FORMATS.md §3.1: recv_* and direct_recv* consume; send, recv_reduce_send,
#: recv_reduce_copy_send, direct_copy_send, direct_recv_send send)
CONSUMING_LEAVES, SENDING_LEAVES = {2, 3, 4, 6, 7}, {1, 2, 4, 5, 6}


def _predecessor(out: Path, trigger: int, channel: int, rank: int) -> int:
    """The rank before ``rank`` in the trigger's ring order of ``channel`` (the top manifest)."""
    top = json.loads((out / "manifest.json").read_text())
    t = next(t for t in top["triggers"] if t["trigger"] == trigger)
    order = next(c["order"] for c in t["channels"] if c["channel"] == channel)
    return order[order.index(rank) - 1]


def _sent_by_predecessor(out: Path, rank: int, i: int) -> tuple[int, int, int]:
    """(predecessor, elem_start, num_elements) of the predecessor's sending leg that leg ``i``
    of ``rank`` consumes: its k-th sending leg of the same entry and channel when leg ``i`` is
    the k-th consuming one."""
    legs = _legs(out, rank)
    g = legs[i]
    same = [j for j, h in enumerate(legs) if (h["spad_index"], h["channel"])
            == (g["spad_index"], g["channel"]) and h["leaf"] in CONSUMING_LEAVES]
    k = same.index(i)
    p = _predecessor(out, 0, g["channel"], rank)
    sent = [h for h in _legs(out, p) if (h["spad_index"], h["channel"])
            == (g["spad_index"], g["channel"]) and h["leaf"] in SENDING_LEAVES]
    return p, sent[k]["elem_start"], sent[k]["num_elements"]


@pytest.mark.parametrize("which", ["ring", "scr"])
def test_a_direct_recv_consumes_what_its_predecessor_sent(ring_out, scr_out, tmp_path, which):
    """A ``direct_recv`` moves no data; its num_elements is what it consumes (FORMATS §3):
    the elements of the ring predecessor's matching send.  One element fewer (still inside
    its half-chunk and the element space) is refused, naming both ranges."""
    out = _copy(ring_out if which == "ring" else scr_out, tmp_path)
    i = _direct_recv(out, 1)
    g = _legs(out, 1)[i]
    p, a, n = _sent_by_predecessor(out, 1, i)
    assert (g["elem_start"], g["num_elements"]) == (a, n) and n > 1  # the untouched output
    _set(out, 1, "legs.bin", i * REC + NUM_ELEMENTS, "<I", n - 1)
    _refused(out, "rank-0001", "legs.bin", f"record {i}", "num_elements",
             f"takes elements [{a}, {a + n - 1})", f"ring predecessor, rank {p}",
             f"sent [{a}, {a + n})")


def test_a_single_cycle_direct_recv_counting_the_whole_space_is_refused(scr_out, tmp_path):
    """The seeds' example of a count only the pairing tells wrong: a SINGLE_CYCLE_RING
    ``direct_recv`` from element 0 counting all 131072 elements of trigger 0 (inside the
    element space) where its predecessor sent one chunk."""
    out = _copy(scr_out, tmp_path)
    i = _direct_recv(out, 1)
    p, a, n = _sent_by_predecessor(out, 1, i)
    assert n < T0_ELEMENTS
    _set(out, 1, "legs.bin", i * REC + ELEM_START, "<Q", 0)
    _set(out, 1, "legs.bin", i * REC + NUM_ELEMENTS, "<I", T0_ELEMENTS)
    # the field named: elem_start when the starts differ, else num_elements
    _refused(out, "rank-0001", "legs.bin", f"record {i}",
             "field elem_start" if a else "field num_elements",
             f"takes elements [0, {T0_ELEMENTS})", f"sent [{a}, {a + n})")


def test_a_direct_recv_starting_one_element_late_is_refused(scr_out, tmp_path):
    """The same check on the first element alone: a SINGLE_CYCLE_RING ``direct_recv`` of the
    predecessor's count starting one element late, [a + 1, a + n + 1), inside the element
    space (a SINGLE_CYCLE_RING leg has no half-chunk rule), is refused, naming elem_start."""
    out = _copy(scr_out, tmp_path)
    i = _direct_recv(out, 1)
    p, a, n = _sent_by_predecessor(out, 1, i)
    assert a + n + 1 <= T0_ELEMENTS
    _set(out, 1, "legs.bin", i * REC + ELEM_START, "<Q", a + 1)
    _refused(out, "rank-0001", "legs.bin", f"record {i}", "field elem_start",
             f"takes elements [{a + 1}, {a + n + 1})", f"rank {p}", f"sent [{a}, {a + n})")


def test_a_sending_leg_short_of_its_successors_consuming_legs_is_refused(scr_out, tmp_path):
    """Every piece sent is consumed once (SIMULATOR.md §2 "Ring pairing"): a rank has as many
    consuming legs on a channel as its ring predecessor has sending legs.  The last
    ``direct_recv_send`` of rank 1 on channel 1 made a ``direct_copy`` (same sdma_op, neither
    consumes nor sends) leaves every earlier pair equal and one fewer send: refused by its
    successor's counts, the last consuming leg named, until 2026-12-07.  Since then (fixer
    57a) the leaf is named on rank 1 itself, before the pairing: on the CCW channel of c7c8's
    four-rank single-cycle ring (arcs [ceil(3/2), floor(3/2)] = [2, 1], so the CCW arc is 1
    long) a leg whose chunk's root is more than 1 hop ahead is the result coming back, and
    the last direct_recv_send of a channel is not the farthest rank's (that is the
    direct_recv at n - 1 - 1 = 2 hops behind the root), so DESIGN "Single-cycle ring" calls
    direct_recv_send there."""
    out = _copy(scr_out, tmp_path)

    def mine(rank, leaves):
        return [j for j, h in enumerate(_legs(out, rank))
                if (h["spad_index"], h["channel"]) == (0, 1) and h["leaf"] in leaves]

    i = max(j for j, h in enumerate(_legs(out, 1))
            if (h["spad_index"], h["channel"], h["leaf"]) == (0, 1, 6))
    succ = next(s for s in range(4) if _predecessor(out, 0, 1, s) == 1)
    cons, sent = mine(succ, CONSUMING_LEAVES), mine(1, SENDING_LEAVES)
    assert len(cons) == len(sent) and i == sent[-1]  # the untouched output pairs them all
    _set(out, 1, "legs.bin", i * REC + LEAF, "<B", 8)
    _refused(out, "rank-0001", "legs.bin", f"record {i}", "field leaf", "channel 1",
             "leaf should be direct_recv_send (the result coming back), not direct_copy",
             "on the CCW channel", "(arcs [2, 1])")


def test_leaf_9_direct_pull_is_refused_as_an_unknown_leaf(ring_out, tmp_path):
    """FORMATS §3: leaf code 9 is reserved for the seed's direct_pull, which our composers
    never emit; a leg that names it is refused (u8 at 12)."""
    out = _copy(ring_out, tmp_path)
    first = next(i for i, leg in enumerate(_legs(out, 1)) if leg["leaf"] == 1)  # a send
    _set(out, 1, "legs.bin", first * REC + LEAF, "<B", 9)
    _refused(out, "rank-0001", "legs.bin", f"record {first}", "unknown leaf 9")


# c7c8's ring output, rank 1: five SPAD entries (8 bytes each, FORMATS §2: byte 1 the cc_op
# alg byte, algo_type its low nibble), entry 0 trigger 0's RING (algo_type 0) entry, leg "flat".
def _entry0(**values):
    return lambda out: _rank_manifest(out, 1, lambda m: m["entries"][0].update(values))


SPAD_FAULTS = [
    (lambda out: _rank_manifest(out, 1, lambda m: m["entries"].pop()),
     "rank 1, artifact spad.bin: the rank manifest lists 4 entries, spad.bin holds 5"),
    (_entry0(trigger=9), "rank 1, artifact spad.bin, record 0: the rank manifest entry names "
     "trigger 9, which OUT/manifest.json does not list"),
    # algo_type 15: no enc_alg_type (seed 000 §1.3 names 0..10)
    (lambda out: _set(out, 1, "spad.bin", 1, "<B", 0x0F), "field algo_type, rank 1, artifact "
     "spad.bin, record 0: algo_type 15 (0xf) is not an entry the simulator executes"),
    # KANGARING (3) in both spad.bin and the rank manifest: a ring-family entry, not the RING
    # trigger 0 was lowered as
    (lambda out: (_set(out, 1, "spad.bin", 1, "<B", 3), _entry0(algo_type=3)(out)),
     "field algo_type, rank 1, artifact spad.bin, record 0: algo_type should be RING, not "
     "KANGARING: trigger 0 was lowered as RING"),
    (_entry0(leg="x"), "field leg, rank 1, artifact spad.bin: trigger 0's entries run legs "
     '["x"], its manifest lists ["flat"]'),
]


@pytest.mark.parametrize("spoil, says", SPAD_FAULTS,
                         ids=["entries-fewer", "trigger-unlisted", "algo-type-15",
                              "algo-type-not-lowered", "leg-not-the-triggers"])
def test_a_spad_entry_its_rank_manifest_or_the_triggers_contradict_is_refused(ring_out, tmp_path,
                                                                             spoil, says):
    """FORMATS §1.2 / §2: a rank manifest lists spad.bin's entries, one each, each naming a
    trigger of OUT/manifest.json, the algo_type that trigger was lowered as and the leg it
    runs; a contradiction is a protocol error naming the rank, spad.bin and the entry."""
    out = _copy(ring_out, tmp_path)
    assert _file(out, 1, "spad.bin").stat().st_size == 5 * 8
    assert _get(out, 1, "spad.bin", 1, "<B") & 0xF == ALG_RING
    spoil(out)
    assert f"{out / 'rank-0001'}: {says}" in _refused(out)


def test_a_mesh_entry_on_a_platform_without_mesh_is_refused(mesh_out, tmp_path):
    """FORMATS §1.1 ``topology.mesh_sub_type``: null for a platform without mesh; c7c8's MESH
    trigger under such a topology is refused at its own leg, which lower never writes there
    (docs/SELECTION.md §3; the output said to be lowered on a topology file: a preset's
    records the preset's mesh_sub_type, refused first, tests/test_platform_manifest.py).
    Until 2026-12-06 the entries were refused first, at rank 0's first entry (algo_type 2):
    ``a mesh-family entry (MESH) on a platform without mesh``, now the backstop."""
    out = _copy(mesh_out, tmp_path)
    top = json.loads((out / "manifest.json").read_text())
    assert top["topology"]["mesh_sub_type"] == "MESH_TRN2"
    top["topology"]["mesh_sub_type"] = None
    top["options"]["topology"] = "trn2-like.json"
    (out / "manifest.json").write_text(json.dumps(top))
    assert (f"{out / 'manifest.json'}: field triggers[0]: legs[0].sub_type \"MESH_TRN2\": a "
            "mesh-family leg (MESH) on a platform without mesh (topology.mesh_sub_type "
            "null), which lower never writes") in _refused(out)


def test_n_tiles_other_than_the_tiles_its_bds_form_is_refused(ring_out, tmp_path):
    """FORMATS §3: ``n_tiles`` (u16 at byte 22 of a 64-byte leg record) counts the leg's
    tiles, which its BDs delimit with FIRST / LAST (§5). Rank 1's leg 2 is one tile (its
    send, sdma_op 2 at byte 7); saying 2 is refused naming the record and the field. One
    tile: the send moves a half chunk of c7c8's trigger 0, 131072 / 4 / 2 = 16384 bf16 =
    32 KiB, and a copy's tile holds min(32 KiB, 64 KiB) & ~0x1F bytes, all of it (§3)."""
    out = _copy(ring_out, tmp_path)
    half_bytes = 131072 // 4 // 2 * 2
    tile = min(half_bytes, 65536) & ~0x1F
    assert _get(out, 1, "legs.bin", 2 * 64 + 7, "<B") == 2
    assert _get(out, 1, "legs.bin", 2 * 64 + 56, "<I") * 2 == half_bytes
    assert _get(out, 1, "legs.bin", 2 * 64 + 22, "<H") == -(-half_bytes // tile) == 1
    _set(out, 1, "legs.bin", 2 * 64 + 22, "<H", 2)
    assert ("field n_tiles, rank 1, artifact legs.bin, record 2: n_tiles should be 1, the "
            "tiles its BDs form, not 2") in _refused(out)


@pytest.fixture(scope="module")
def kanga_out(tmp_path_factory) -> Path:
    """A KANGARING all-reduce of 4096 bf16 over ranks 0..15 (two whole trn2 devices)."""
    import meshcase

    out = tmp_path_factory.mktemp("kanga") / "o"
    meshcase.lower(meshcase.spec([list(range(16))], [("all_reduce", "bf16", "add", 4096)]),
                   out, algo="kangaring")
    return out


@pytest.mark.parametrize("case, a, b, leg, leaf, bd", [
    # RING: rank 0's sem.bin records 0 and 3, the first mark_complete's dma_compl increment
    # and a BD of the second (legs.bin records 0 and 1, sem_first 0 and 2, 2 BDs each)
    ("ring", 0, 3, 1, "mark_complete", 3),
    # SINGLE_CYCLE_RING: records 9 and 11 (bytes 144:160 and 176:192); legs.bin record 3, the
    # send of step 3, holds records 8..10, its own dma_compl increment first
    ("scr", 9, 11, 3, "send", 8),
    # MESH: records 6 and 10, the first BDs of legs.bin records 2 and 3 (mesh_sync, sem_first
    # 6 and 10): record 10 is now record 6's dma_compl increment, record 3's first of two
    ("mesh", 6, 10, 3, "mesh_sync", 10),
    # HIER inter_allr (SINGLE_CYCLE_RING, entry 1): legs.bin records 8 and 9 (sends, sem_first
    # 15 and 17, each a dma_compl increment then a send_sema one): records 16 and 17 swapped
    # leave record 8 two dma_compl increments, 15 and 16
    ("hier", 16, 17, 8, "send", 15),
    # KANGARING: legs.bin records 3 and 4 (sem_first 10 and 15, 5 BDs each, the dma_compl
    # increment first): records 12 and 15 swapped leave record 3 two, 10 and 12
    ("kanga", 12, 15, 3, "direct_reduce_send_kangaring", 10),
])
def test_a_non_ring_leg_with_bds_swapped_names_the_bd(ring_out, scr_out, mesh_out, hier_out,
                                                      kanga_out, tmp_path, case, a, b, leg,
                                                      leaf, bd):
    """Two BDs of two legs swapped in sem.bin, legs.bin untouched (each leg keeps its BD
    count, the rank its dma_compl increments): the line names the first dma_compl increment
    of the first leg with two, sem.bin's `addr` (until 2026-12-06 `field sem_count, ...
    artifact legs.bin` of the first leg with one too many or too few, review 50p), saying
    the kind and its counts once (until 2026-12-06 it went on `this BD is one of its 2 x an
    increment of its own dma_compl_sema by 1, where it should have 1`)."""
    out = _copy({"ring": ring_out, "scr": scr_out, "mesh": mesh_out, "hier": hier_out,
                 "kanga": kanga_out}[case], tmp_path)
    g = _legs(out, 0)
    assert g[leg]["sem_first"] <= bd < g[leg]["sem_first"] + g[leg]["sem_count"]
    _swap_sems(out, 0, a, b)
    line = _error_line(out)
    assert line.startswith(f"{out / 'rank-0000'}: field addr, rank 0, artifact sem.bin, "
                           f"record {bd}: {leaf} leg (legs.bin record {leg}: entry "
                           f"{1 if case == 'hier' else 0}, ")
    assert line.endswith(
        "should have 1 x an increment of its own dma_compl_sema by 1, not 2; this BD is one "
        "of them")
    assert line.count("dma_compl_sema") == 1 and line.count("should have") == 1


def test_simulator_md_quotes_the_non_ring_swap_line(mesh_out, tmp_path):
    """SIMULATOR.md §2 quotes the MESH case's line (records from legs.bin's sem_first)."""
    out = _copy(mesh_out, tmp_path)
    _swap_sems(out, 0, 6, 10)
    doc = " ".join((Path(__file__).parents[1] / "docs" / "SIMULATOR.md").read_text().split())
    assert _error_line(out).split(": ", 1)[1] in doc


# ------------------------------------------------- a leg's event wait against its 0xBF word
def _event_leg(out: Path, rank: int, leaf: int) -> tuple[int, int, int, int, int]:
    """(legs.bin record, its trigger, its first sem.bin record (the first wait, FORMATS
    §7), the 0xBF word of its first piece, the word's wait_idx) of rank ``rank``'s first
    ``leaf`` leg whose first piece waits an event semaphore (FORMATS §4: wait_mode 20 at 4,
    wait_idx at 5; §7: ids 192..255 the event window)."""
    for i, g in enumerate(_legs(out, rank)):
        if g["leaf"] != leaf:
            continue
        word = _get(out, rank, "legs.bin", i * REC + 16, "<I")
        if _get(out, rank, "sb2sb.bin", word * WORD + 4, "<B") == 20 \
                and _get(out, rank, "sb2sb.bin", word * WORD + 5, "<B") >= 192:
            return (i, _get(out, rank, "legs.bin", i * REC, "<I"), g["sem_first"], word,
                    _get(out, rank, "sb2sb.bin", word * WORD + 5, "<B"))
    raise AssertionError("no such leg")


def _incs_of(out: Path, trigger: int, rank: int, sid: int) -> int:
    """What the legs of ``trigger`` on c7c8's four ranks add to semaphore ``sid`` of rank
    ``rank`` (FORMATS §7: inc, subop 21, at the INC window of §10's address), by hand."""
    addr = EVT_SEM + (rank << 30) + INC_WINDOW + 4 * sid
    total = 0
    for q in range(4):
        sems = _sems(out, q)
        for i, g in enumerate(_legs(out, q)):
            if _get(out, q, "legs.bin", i * REC, "<I") != trigger:
                continue
            for ctrl, value, a in sems[g["sem_first"]:g["sem_first"] + g["sem_count"]]:
                if ctrl & 0xFF == 21 and a == addr:
                    total += value
    return total


def test_a_mesh_legs_event_wait_value_changed_in_sem_bin_is_named_there(mesh_out, tmp_path):
    """Rank 0's first mesh_reduce (17) waits its event (the reduce's EVT_REDUCE_COPY) for
    every same-device peer's block: sem.bin's wait value lowered by one, its 0xBF word
    untouched (review 57i b24). The word and sem.bin disagree; the increments of the event
    the trigger's legs make on the four ranks (counted here from sem.bin by hand) are the
    word's value: sem.bin is named, with the word's value (until 2026-12-07 the word was,
    `semaphore_value should be <the changed value>, not <its own>`)."""
    out = _copy(mesh_out, tmp_path)
    g, trig, bd, word, sid = _event_leg(out, 0, 17)
    want = _get(out, 0, "sb2sb.bin", word * WORD + 8, "<I")
    assert _sems(out, 0)[bd][0] & 0xFF == 20 and _sems(out, 0)[bd][1] == want
    assert _sems(out, 0)[bd][2] == EVT_SEM + DEC_WINDOW + 4 * sid
    incs = _incs_of(out, trig, 0, sid)
    _set(out, 0, "sem.bin", bd * BD + 4, "<I", want - 1)
    assert _error_line(out) == (
        f"{out / 'rank-0000'}: field value, rank 0, artifact sem.bin, record {bd}: wait value "
        f"should be {want}, the one the leg's 0xBF word (sb2sb.bin record {word}) carries, not "
        f"{want - 1}: semaphore {sid} of rank 0 gets {incs} from the legs of trigger {trig}'s "
        f"entry on all its ranks, and its waits here take {incs - 1} (mesh_reduce leg, "
        f"legs.bin record {g})")


def test_a_mesh_legs_event_wait_moved_to_another_event_in_sem_bin_is_named_there(
        mesh_out, tmp_path):
    """The same wait moved to the next event semaphore (its address + 4, FORMATS §10; review
    57i b50 on RDH): its own event is then waited for by none of its legs, the next one
    more than its increments: sem.bin's addr is named (until 2026-12-07 the word's
    wait_idx, untouched, `wait_idx should be <sid + 1>, not <sid>`)."""
    out = _copy(mesh_out, tmp_path)
    g, trig, bd, word, sid = _event_leg(out, 0, 17)
    value = _sems(out, 0)[bd][1]
    inc0, inc1 = _incs_of(out, trig, 0, sid), _incs_of(out, trig, 0, sid + 1)
    _set(out, 0, "sem.bin", bd * BD + 8, "<Q", EVT_SEM + DEC_WINDOW + 4 * (sid + 1))
    line = _error_line(out)
    assert line.startswith(
        f"{out / 'rank-0000'}: field addr, rank 0, artifact sem.bin, record {bd}: wait of "
        f"semaphore {sid + 1} by {value} should be of semaphore {sid} by {value}, the one the "
        f"leg's 0xBF word (sb2sb.bin record {word}) carries: semaphore {sid} of rank 0 gets "
        f"{inc0} from the legs of trigger {trig}'s entry on all its ranks, and its waits here "
        f"take {inc0 - value}; semaphore {sid + 1} of rank 0 gets {inc1} "), line
    assert line.endswith(f"(mesh_reduce leg, legs.bin record {g})"), line


def test_a_mesh_legs_event_wait_off_in_both_records_names_both(mesh_out, tmp_path):
    """sem.bin's wait value lowered by one and the word's by two: the two disagree, and
    neither is what the trigger's legs add to the event (counted by hand): both records
    are named, at the word (SIMULATOR.md §2: where nothing read bears either out)."""
    out = _copy(mesh_out, tmp_path)
    g, trig, bd, word, sid = _event_leg(out, 0, 17)
    want = _get(out, 0, "sb2sb.bin", word * WORD + 8, "<I")
    assert want >= 3
    incs = _incs_of(out, trig, 0, sid)
    _set(out, 0, "sem.bin", bd * BD + 4, "<I", want - 1)
    _set(out, 0, "sb2sb.bin", word * WORD + 8, "<I", want - 2)
    assert _error_line(out) == (
        f"{out / 'rank-0000'}: field semaphore_value, rank 0, artifact sb2sb.bin, record "
        f"{word}: the 0xBF word waits semaphore {sid} >= {want - 2}, the leg's first wait "
        f"(sem.bin record {bd}) semaphore {sid} >= {want - 1}, and neither keeps rank 0's "
        f"waits at what the legs of trigger {trig}'s entry on all its ranks add ({incs} to "
        f"semaphore {sid}) (mesh_reduce leg, legs.bin record {g})")


@pytest.mark.parametrize("off", [8, 16, 100])
def test_a_mesh_legs_event_word_moved_off_the_events_is_named(mesh_out, tmp_path, off):
    """The first mesh_reduce's 0xBF word's wait_idx (offset 5, FORMATS §4) moved to a
    semaphore below the event window (ids 192..255, §7): a mesh leg's word only ever waits
    an event (§4's MESH row, 192 + t), so the word is the wrong record, named with
    sem.bin's event (review 57o: since 2026-12-07's balance check it fell to `one of the
    two records is wrong`)."""
    out = _copy(mesh_out, tmp_path)
    g, trig, bd, word, sid = _event_leg(out, 0, 17)
    assert sid >= 192
    _set(out, 0, "sb2sb.bin", word * WORD + 5, "<B", off)
    line = _error_line(out)
    assert line.startswith(
        f"{out / 'rank-0000'}: field wait_idx, rank 0, artifact sb2sb.bin, record {word}: "
        f"wait_idx should be {sid}, not {off} "), line


def _first_recv_reduce_copy_send(out: Path) -> tuple[int, int, dict]:
    """(rank, legs.bin record, the record) of the first recv_reduce_copy_send leg (leaf 4)
    of ``out``, the ranks in order."""
    for r in range(4):
        legs = [i for i, g in enumerate(_legs(out, r)) if g["leaf"] == 4]
        if legs:
            return r, legs[0], _legs(out, r)[legs[0]]
    raise AssertionError(f"{out}: no recv_reduce_copy_send leg")


def test_a_single_cycle_legs_two_waits_swapped_are_named_in_sem_bin(scr_out, tmp_path):
    """A SINGLE_CYCLE_RING recv_reduce_copy_send (4) waits its channel's recv_sema (16 + 4c),
    then its post_sema (18 + 4c) (FORMATS §3.3, §7). The two sem.bin records swapped (review
    57i b43): the first is named (until 2026-12-07 the 0xBF word's wait_idx, untouched,
    `wait_idx should be 18, not 16`)."""
    out = _copy(scr_out, tmp_path)
    r, leg, g = _first_recv_reduce_copy_send(out)
    k = g["sem_first"]
    c = g["channel"]
    sems = _sems(out, r)
    assert (sems[k][0] & 0xFF, sems[k + 1][0] & 0xFF) == (20, 20)
    assert sems[k][2] == EVT_SEM + (r << 30) + DEC_WINDOW + 4 * (16 + 4 * c)
    assert sems[k + 1][2] == EVT_SEM + (r << 30) + DEC_WINDOW + 4 * (18 + 4 * c)
    _swap_sems(out, r, k, k + 1)
    assert _error_line(out) == (
        f"{out / f'rank-{r:04d}'}: field addr, rank {r}, artifact sem.bin, record {k}: wait "
        f"of semaphore {18 + 4 * c} (channel {c} post_sema) first: a SINGLE_CYCLE_RING "
        f"recv_reduce_copy_send leg (legs.bin record {leg}) waits its recv_sema, then its "
        f"post_sema (FORMATS §7), and its next wait (sem.bin record {k + 1}) is on semaphore "
        f"{16 + 4 * c} (channel {c} recv_sema)")


def test_a_single_cycle_legs_increment_made_a_copy_of_its_first_wait_is_named(
        scr_out, tmp_path):
    """The same leg's third BD, its dma_compl_sema increment (FORMATS §7: the waits, recv_sema
    then post_sema, then the dma_compl_sema increment, then the successor's), overwritten by a
    copy of its recv_sema wait (review 57o): the leg waits recv, post, recv, and the third
    wait, standing where the increment belongs, is named (since 2026-12-07's order check the
    untouched post_sema wait was named `first`)."""
    out = _copy(scr_out, tmp_path)
    r, leg, g = _first_recv_reduce_copy_send(out)
    k = g["sem_first"]
    c = g["channel"]
    sems = _sems(out, r)
    assert [s[0] & 0xFF for s in sems[k:k + 3]] == [20, 20, 21]
    assert sems[k][2] == EVT_SEM + (r << 30) + DEC_WINDOW + 4 * (16 + 4 * c)
    p = _file(out, r, "sem.bin")
    data = bytearray(p.read_bytes())
    data[(k + 2) * BD:(k + 3) * BD] = data[k * BD:(k + 1) * BD]
    p.write_bytes(bytes(data))
    assert _error_line(out) == (
        f"{out / f'rank-{r:04d}'}: field ctrl.subop, rank {r}, artifact sem.bin, record "
        f"{k + 2}: a third wait, of semaphore {16 + 4 * c} (channel {c} recv_sema): a "
        f"SINGLE_CYCLE_RING recv_reduce_copy_send leg (legs.bin record {leg}) waits its "
        f"recv_sema, then its post_sema, and then increments (FORMATS §7)")


def test_a_single_cycle_legs_first_wait_value_changed_in_sem_bin_is_named_there(
        scr_out, tmp_path):
    """A SINGLE_CYCLE_RING recv_reduce_copy_send's first wait (recv_sema, FORMATS §7) by 1
    made 2 in sem.bin, its 0xBF word untouched: FORMATS §4's SINGLE_CYCLE_RING row fixes the
    word's semaphore_value at 1, so the word is right and the sem.bin record is named
    (review 57o: the untouched word was, `semaphore_value should be 2, not 1`)."""
    out = _copy(scr_out, tmp_path)
    r, leg, g = _first_recv_reduce_copy_send(out)
    k = g["sem_first"]
    word = _get(out, r, "legs.bin", leg * REC + 16, "<I")
    assert _sems(out, r)[k][0] & 0xFF == 20 and _sems(out, r)[k][1] == 1
    assert _get(out, r, "sb2sb.bin", word * WORD + 8, "<I") == 1
    _set(out, r, "sem.bin", k * BD + 4, "<I", 2)
    assert _error_line(out) == (
        f"{out / f'rank-{r:04d}'}: field value, rank {r}, artifact sem.bin, record {k}: wait "
        f"value should be 1, not 2: a SINGLE_CYCLE_RING recv_reduce_copy_send leg's waits are "
        f"by 1, as its 0xBF word (sb2sb.bin record {word}) carries (FORMATS §4, §7; legs.bin "
        f"record {leg})")


def _single_cycle_wait(out: Path, leaf: int, nth: int, role: int) -> tuple[int, int, int, int]:
    """(rank, legs.bin record, sem.bin record, channel) of the first SINGLE_CYCLE_RING
    ``leaf`` leg (its entry's spad.bin algo_type 4, FORMATS §2: byte 1 [3:0]) whose ``nth``
    semaphore BD is a wait (FORMATS §7: subop 20, its waits first) on its own channel's
    semaphore of ``role`` (16 + 4c + role: 0 recv_sema, 2 post_sema), found from legs.bin's
    sem_first and sem.bin's address (§10: the DEC window) by hand."""
    for r in sorted(int(p.name[5:]) for p in out.glob("rank-*")):
        sems = _sems(out, r)
        for i, g in enumerate(_legs(out, r)):
            if g["leaf"] != leaf or g["sem_count"] <= nth \
                    or _get(out, r, "spad.bin", g["spad_index"] * SPAD + 1, "<B") & 0xF != ALG_SCR:
                continue
            k = g["sem_first"] + nth
            ctrl, value, addr = sems[k]
            sid = 16 + 4 * g["channel"] + role
            if ctrl & 0xFF == 20 and addr == EVT_SEM + (r << 30) + DEC_WINDOW + 4 * sid:
                assert value == 1
                return r, i, k, g["channel"]
    raise AssertionError("no such leg")


@pytest.mark.parametrize("case, leaf, nth, role, value", [
    ("flat", 4, 1, 2, 2),  # recv_reduce_copy_send's second wait, its post_sema (no word)
    ("flat", 4, 1, 2, 3),
    ("flat", 7, 0, 0, 2),  # direct_recv's one wait, its recv_sema (no data: no 0xBF word)
    ("hier", 7, 0, 0, 2),
    ("hier", 7, 0, 0, 5),
])
def test_a_single_cycle_legs_wait_no_word_repeats_changed_is_named_in_sem_bin(
        scr_out, hier_out, tmp_path, case, leaf, nth, role, value):
    """A SINGLE_CYCLE_RING leg's every wait is by 1 (FORMATS §4's row, §7: each takes the +1
    one increment adds, the channel predecessor's on recv_sema, the pair's other channel's on
    post_sema), not only the first one its 0xBF word repeats: the root's
    recv_reduce_copy_send's post_sema wait, and a direct_recv's recv_sema wait (a leg
    without data has no word), made another value are named at sem.bin's value (fixer 58c,
    the fifty-seventh "Left": until then the run deadlocked, `work remains but nothing can
    run`; a value of 0 was named already: `a semaphore BD with value 0`). Alike on a HIER
    inter_allr SINGLE_CYCLE_RING leg (hier_out's entry 1; its group of two ranks has no
    recv_reduce_copy_send, n = 2: docs/DESIGN.md "Single-cycle ring", so that case is the
    flat one's alone)."""
    out = _copy(scr_out if case == "flat" else hier_out, tmp_path)
    r, g, k, c = _single_cycle_wait(out, leaf, nth, role)
    _set(out, r, "sem.bin", k * BD + 4, "<I", value)
    name = {4: "recv_reduce_copy_send", 7: "direct_recv"}[leaf]
    assert _error_line(out) == (
        f"{out / f'rank-{r:04d}'}: field value, rank {r}, artifact sem.bin, record {k}: wait "
        f"value should be 1, not {value}: a SINGLE_CYCLE_RING {name} leg's waits are by 1, "
        f"what one increment adds to its {('recv_sema', '', 'post_sema')[role]} (FORMATS §4, "
        f"§7; legs.bin record {g})")


@pytest.fixture(scope="module")
def mesh2dev_out(tmp_path_factory) -> Path:
    """A bf16 all-reduce over ranks 0, 1, 4, 5 of one trn2 node, LNC 2 (4 ranks a device:
    0, 1 on device 0, 4, 5 on device 1), forced to MESH: rank 0 has one peer on its device
    and two beyond it."""
    from test_simulate import coll_spec, lower_spec
    return lower_spec(coll_spec("all_reduce", "bf16", [0, 1, 4, 5], 8192, lnc=2),
                      tmp_path_factory.mktemp("mesh2dev") / "o", algo="mesh",
                      topology="trn2")


@pytest.mark.parametrize("leaf, device, beyond", [
    # the mesh_reduce (17): EVT_REDUCE_COPY (8) from rank 1, EVT_REDUCE_COPY_2 (9) from 4, 5
    (17, (200, 1), (201, 2)),
    # the handshake mesh_sync (20): EVT_LOCAL_HNDSHK (2) from rank 1, EVT_GLOBAL_HNDSHK (1)
    # from the node's peers on the other device, 4 and 5
    (20, (194, 1), (193, 2)),
])
def test_a_mesh_legs_two_event_waits_swapped_are_named_in_sem_bin(
        mesh2dev_out, tmp_path, leaf, device, beyond):
    """A MESH leg that waits two events waits the same-device one first, then the other
    devices' (FORMATS §7's MESH rows; §4: the 0xBF word repeats the first, "the device's
    event when there is one"). Rank 0's two waits (ids 192 + t, §7, by the peers that
    send them, worked out above) swapped in sem.bin: the first is named at its addr (fixer
    58c, the fifty-seventh "Left": until then the mesh_reduce's untouched word was named,
    `wait_idx should be 201, not 200`, and the mesh_sync's swap, which has no word, passed
    as a match)."""
    out = _copy(mesh2dev_out, tmp_path)
    sems = _sems(out, 0)
    for g, leg in enumerate(_legs(out, 0)):
        k = leg["sem_first"]
        if leg["leaf"] == leaf and [s[0] & 0xFF for s in sems[k:k + 2]] == [20, 20]:
            break
    else:
        raise AssertionError("no such leg")
    for bd, (sid, value) in zip((k, k + 1), (device, beyond)):
        assert sems[bd][1:] == (value, EVT_SEM + DEC_WINDOW + 4 * sid)
    _swap_sems(out, 0, k, k + 1)
    evt = {200: "EVT_REDUCE_COPY", 201: "EVT_REDUCE_COPY_2", 194: "EVT_LOCAL_HNDSHK",
           193: "EVT_GLOBAL_HNDSHK"}
    name = {17: "mesh_reduce", 20: "mesh_sync"}[leaf]
    assert _error_line(out) == (
        f"{out / 'rank-0000'}: field addr, rank 0, artifact sem.bin, record {k}: wait of "
        f"semaphore {beyond[0]} ({evt[beyond[0]]}) first: a MESH {name} leg (legs.bin record "
        f"{g}) waits the same-device event first, then the other devices' or nodes' (FORMATS "
        f"§4, §7), and its next wait (sem.bin record {k + 1}) is on semaphore {device[0]} "
        f"({evt[device[0]]})")


@pytest.fixture(scope="module")
def rdh_out(tmp_path_factory) -> Path:
    """c7c8: 4 ranks, INTRA_RDH entries (``--algo rdh``)."""
    return _lower(FIXTURES / "c7c8.neff", tmp_path_factory.mktemp("rdh") / "o", "rdh")


@pytest.mark.parametrize("off", [8, 16, 100, 191])
def test_an_rdh_legs_event_word_moved_off_the_events_is_named(rdh_out, tmp_path, off):
    """The RDH twin of the mesh test above (the fifty-seventh "Left": the rule had a mesh
    test only): rank 0's first rdh_reduce (19) consumes recursive-halving step 0's data, so
    its 0xBF word waits EVT_RH_STEP_0, 192 + 23 = 215 (FORMATS §4's INTRA_RDH row, §7's
    event window). Its wait_idx (offset 5) moved below the window (191 the id just under
    it): an RDH leg's word only ever waits an event, so the word is named, with sem.bin's
    event."""
    out = _copy(rdh_out, tmp_path)
    g, trig, bd, word, sid = _event_leg(out, 0, 19)
    assert sid == 192 + 23
    assert _sems(out, 0)[bd][2] == EVT_SEM + DEC_WINDOW + 4 * sid
    _set(out, 0, "sb2sb.bin", word * WORD + 5, "<B", off)
    assert _error_line(out) == (
        f"{out / 'rank-0000'}: field wait_idx, rank 0, artifact sb2sb.bin, record {word}: "
        f"wait_idx should be {sid}, not {off} (piece 0 of a rdh_reduce leg: the first piece "
        f"carries the leg's (first) wait, the last its dma_compl_sema increment)")


#: FORMATS §7's SINGLE_CYCLE_RING BD kinds, in its order, as the line words them
_SCR_KIND = {"wr": "a wait recv_sema >= 1", "wp": "a wait post_sema >= 1",
             "ic": "an increment of its own dma_compl_sema by 1",
             "in": "an increment of the next's recv_sema or its own send_sema by 1",
             "ip": "an increment of its post_sema of the pair's other channel by 1"}


def _scr_bd_kinds(out: Path, r: int, leg: dict) -> list[str]:
    """The kinds of a SINGLE_CYCLE_RING leg's BDs, by hand from sem.bin (FORMATS §7: subop
    20 wait at the DEC window, 21 inc at the INC window; §10: rank r's window at r << 30;
    ids 16 + 4c + role, role 0 recv_sema, 1 send_sema, 2 post_sema, 3 dma_compl_sema)."""
    out_kinds = []
    for ctrl, value, addr in _sems(out, r)[leg["sem_first"]:leg["sem_first"] + leg["sem_count"]]:
        assert value == 1
        rank, off = addr - EVT_SEM >> 30, (addr - EVT_SEM) & ((1 << 30) - 1)
        wait = ctrl & 0xFF == 20
        sid = (off - (DEC_WINDOW if wait else INC_WINDOW)) // 4
        role = (sid - 16) % 4
        if wait:
            assert rank == r and sid - role == 16 + 4 * leg["channel"]
            out_kinds.append({0: "wr", 2: "wp"}[role])
        elif rank != r:
            assert role == 0
            out_kinds.append("in")
        else:
            out_kinds.append({3: "ic", 1: "in", 2: "ip"}[role])
    return out_kinds


@pytest.mark.parametrize("leaf, kinds, a, b", [
    # the root's CW recv_reduce_copy_send: waits recv_sema, post_sema; +dma_compl, +next's
    # recv_sema, +post_sema of the CCW channel (DESIGN "Single-cycle ring")
    (4, ["wr", "wp", "ic", "in", "ip"], 0, 3),
    (4, ["wr", "wp", "ic", "in", "ip"], 0, 1),
    (4, ["wr", "wp", "ic", "in", "ip"], 1, 0),
    (4, ["wr", "wp", "ic", "in", "ip"], 2, 3),
    (4, ["wr", "wp", "ic", "in", "ip"], 3, 2),
    (4, ["wr", "wp", "ic", "in", "ip"], 4, 2),
    # a direct_recv off the root: waits recv_sema, +dma_compl
    (7, ["wr", "ic"], 0, 1),
    (7, ["wr", "ic"], 1, 0),
    # the root's CCW direct_copy_send: waits post_sema, +dma_compl, +next's recv_sema
    (5, ["wp", "ic", "in"], 0, 1),
    (5, ["wp", "ic", "in"], 2, 1),
])
def test_a_single_cycle_bd_overwritten_by_a_copy_of_another_of_its_legs_is_named(
        scr_out, tmp_path, leaf, kinds, a, b):
    """A SINGLE_CYCLE_RING leg's BD a overwritten by a copy of its BD b (sem_count
    unchanged): the leg has b's kind twice and lacks a's; FORMATS §7's order (waits,
    recv_sema then post_sema; +dma_compl_sema; +the next's recv_sema; +its post_sema) puts
    a's kind at a only, so sem.bin record a is named at addr, with the kind it lacks, as a
    RING leg's is (fixer 58c, the fifty-seventh "Left": until then legs.bin sem_count, the
    0xBF word's wait_mode / wait_idx or a BD after it was named)."""
    out = _copy(scr_out, tmp_path)
    for r in range(4):
        found = [(i, g) for i, g in enumerate(_legs(out, r)) if g["leaf"] == leaf
                 and _get(out, r, "spad.bin", g["spad_index"] * SPAD + 1, "<B") & 0xF == ALG_SCR
                 and g["sem_count"] == len(kinds)]
        if found:
            break
    i, g = found[0]
    assert _scr_bd_kinds(out, r, g) == kinds
    k = g["sem_first"]
    p = _file(out, r, "sem.bin")
    data = bytearray(p.read_bytes())
    data[(k + a) * BD:(k + a + 1) * BD] = data[(k + b) * BD:(k + b + 1) * BD]
    p.write_bytes(bytes(data))
    name = {4: "recv_reduce_copy_send", 7: "direct_recv", 5: "direct_copy_send"}[leaf]
    assert _error_line(out) == (
        f"{out / f'rank-{r:04d}'}: field addr, rank {r}, artifact sem.bin, record {k + a}: a "
        f"copy of sem.bin record {k + b} ({_SCR_KIND[kinds[b]]}): a SINGLE_CYCLE_RING {name} "
        f"leg (legs.bin record {i}) has each of its BDs once, in FORMATS §7's order, and lacks "
        f"{_SCR_KIND[kinds[a]]} here")


def _single_cycle_inc(out: Path, role: int, remote: bool) -> tuple[int, int, int, int, int]:
    """(rank, legs.bin record, sem.bin record, target rank, semaphore id) of the first
    SINGLE_CYCLE_RING ring-leaf leg (its entry's spad.bin algo_type 4, FORMATS §2; leaves 1 -
    9, §3) with an increment (subop 21, §7) by 1 of a ring block semaphore of ``role`` (16 +
    4c + role) on another rank (``remote``) or its own, read by hand from sem.bin's address
    (§10: EVT_SEM + (rank << 30) + the INC window + 4 x id)."""
    for r in sorted(int(p.name[5:]) for p in out.glob("rank-*")):
        sems = _sems(out, r)
        for i, g in enumerate(_legs(out, r)):
            if not 1 <= g["leaf"] <= 9 \
                    or _get(out, r, "spad.bin", g["spad_index"] * SPAD + 1, "<B") & 0xF != ALG_SCR:
                continue
            for k in range(g["sem_first"], g["sem_first"] + g["sem_count"]):
                ctrl, value, addr = sems[k]
                rel = addr - EVT_SEM - INC_WINDOW
                t, sid = rel >> 30, (rel & ((1 << 30) - 1)) // 4
                if ctrl & 0xFF == 21 and 16 <= sid < 144 and (sid - 16) % 4 == role \
                        and (t != r) == remote and rel & ((1 << 30) - 1) < 0x400:
                    assert value == 1
                    return r, i, k, t, sid
    raise AssertionError("no such leg")


@pytest.mark.parametrize("case, role, remote", [
    ("flat", 0, True),   # the channel's next's recv_sema (a leaf that sends)
    ("flat", 2, False),  # its own post_sema of the pair's other channel (the root)
    ("hier", 2, False),
])
def test_a_single_cycle_legs_increment_by_2_is_named_at_its_value(
        scr_out, hier_out, tmp_path, case, role, remote):
    """A SINGLE_CYCLE_RING ring leg's increments are each by 1 (FORMATS §3.3: +1 on the
    partner channel's post_sema, the ring's +1 on the next's recv_sema; §7): one made 2 is
    named at sem.bin's value, as a RING leg's is (review 58n: the run failed elsewhere, a
    race on the next rank or `semaphore ... left at 1`). Alike on a HIER inter_allr
    SINGLE_CYCLE_RING leg (hier_out's entry 1; across nodes its sends increment its own
    send_sema, already held to 1, so that case is its post_sema increment)."""
    out = _copy(scr_out if case == "flat" else hier_out, tmp_path)
    r, g, k, t, sid = _single_cycle_inc(out, role, remote)
    _set(out, r, "sem.bin", k * BD + 4, "<I", 2)
    name = {1: "send", 2: "recv_reduce_send", 3: "recv_reduce_copy", 4: "recv_reduce_copy_send",
            5: "direct_copy_send", 6: "direct_recv_send", 7: "direct_recv",
            8: "direct_copy"}[_legs(out, r)[g]["leaf"]]
    assert _error_line(out) == (
        f"{out / f'rank-{r:04d}'}: field value, rank {r}, artifact sem.bin, record {k}: "
        f"increment of semaphore {sid} (channel {(sid - 16) // 4} "
        f"{('recv_sema', '', 'post_sema')[role]}) of rank {t} by 2 is not part of the protocol "
        f"for a {name} leg (legs.bin record {g}; FORMATS §3.2 - §3.4, §7)")


def _inc_target(bd: tuple[int, int, int]) -> tuple[int, int]:
    """(rank, semaphore id) an increment BD (subop 21, FORMATS §7) addresses, by hand from
    its address (§10: EVT_SEM + (rank << 30) + the INC window + 4 x id)."""
    ctrl, _value, addr = bd
    assert ctrl & 0xFF == 21
    rel = addr - EVT_SEM - INC_WINDOW
    return rel >> 30, (rel & ((1 << 30) - 1)) // 4


@pytest.mark.parametrize("case, leaf, kinds, a, b", [
    # the root's CW recv_reduce_copy_send: +dma_compl, +next's recv_sema, +its post_sema of
    # the CCW channel, after its two waits (DESIGN "Single-cycle ring", FORMATS §7)
    ("flat", 4, ["wr", "wp", "ic", "in", "ip"], 2, 3),
    ("flat", 4, ["wr", "wp", "ic", "in", "ip"], 3, 4),
    ("flat", 4, ["wr", "wp", "ic", "in", "ip"], 2, 4),
    # a send: +dma_compl, +next's recv_sema
    ("flat", 1, ["ic", "in"], 0, 1),
    # the HIER inter_allr leg's (a group of two) root recv_reduce_copy: waits recv_sema,
    # +dma_compl, +its post_sema of the CCW channel
    ("hier", 3, ["wr", "ic", "ip"], 1, 2),
])
def test_a_single_cycle_legs_two_increments_swapped_are_named_at_the_first(
        scr_out, hier_out, tmp_path, case, leaf, kinds, a, b):
    """A SINGLE_CYCLE_RING ring leg increments its own dma_compl_sema, then the channel's
    next's recv_sema (a leaf that sends), then its own post_sema of the pair's other channel
    (FORMATS §7's row). Two of a leg's increments swapped in sem.bin: the first out of place,
    record a (it now holds b's, which FORMATS §7 puts after a + 1's), is named at its addr
    (fixer 59b, the fifty-eighth "Left": until then the swap passed as a match, 108 of 108
    such swaps on c7c8's ranks 0, 1 and 72 + 24 on two-node outputs)."""
    out = _copy(scr_out if case == "flat" else hier_out, tmp_path)
    for r in sorted(int(p.name[5:]) for p in out.glob("rank-*")):
        found = [(i, g) for i, g in enumerate(_legs(out, r)) if g["leaf"] == leaf
                 and _get(out, r, "spad.bin", g["spad_index"] * SPAD + 1, "<B") & 0xF == ALG_SCR
                 and g["sem_count"] == len(kinds)]
        if found:
            break
    i, g = found[0]
    assert _scr_bd_kinds(out, r, g) == kinds
    k = g["sem_first"]
    sems = _sems(out, r)
    # after the swap record a holds b's BD, and record a + 1 its own (or a's, when b is a + 1)
    (ta, sa) = _inc_target(sems[k + b])
    (tn, sn) = _inc_target(sems[k + a if a + 1 == b else k + a + 1])
    _swap_sems(out, r, k + a, k + b)

    def sem(t, sid):
        return (f"semaphore {sid} (channel {(sid - 16) // 4} "
                f"{('recv_sema', 'send_sema', 'post_sema', 'dma_compl_sema')[(sid - 16) % 4]}) "
                f"of rank {t}")
    name = {1: "send", 3: "recv_reduce_copy", 4: "recv_reduce_copy_send"}[leaf]
    assert _error_line(out) == (
        f"{out / f'rank-{r:04d}'}: field addr, rank {r}, artifact sem.bin, record {k + a}: "
        f"increment of {sem(ta, sa)} before the one of {sem(tn, sn)} (sem.bin record "
        f"{k + a + 1}): a SINGLE_CYCLE_RING {name} leg (legs.bin record {i}) increments its own "
        f"dma_compl_sema, then the next's recv_sema or its own send_sema, then its post_sema of "
        f"the pair's other channel (FORMATS §7)")


@pytest.mark.parametrize("case, leaf", [("flat", 1), ("flat", 2), ("hier", 1)])
def test_a_ring_legs_two_increments_swapped_are_named_at_the_first(
        ring_out, hier_out, tmp_path, case, leaf):
    """A RING leg that sends increments its own dma_compl_sema, then the successor's recv_sema
    (FORMATS §7: "2. inc 1 on its own channel's dma_compl_sema ... 3. its other increments";
    the RING row). The two swapped in sem.bin, on a flat RING entry (c7c8 --algo ring) or a
    HIER leg's intra-node RING leg: the first, now the successor's recv_sema, is named at its
    addr (fixer 59p, review 59n: the swap passed as a match, 32 of 32 flat, 11 of 11 HIER)."""
    out = _copy(ring_out if case == "flat" else hier_out, tmp_path)
    for r in sorted(int(p.name[5:]) for p in out.glob("rank-*")):
        found = [(i, g) for i, g in enumerate(_legs(out, r)) if g["leaf"] == leaf
                 and g["sem_count"] >= 2
                 and _get(out, r, "spad.bin", g["spad_index"] * SPAD + 1, "<B") & 0xF == ALG_RING]
        if found:
            break
    i, g = found[0]
    k = g["sem_first"] + g["sem_count"] - 2
    sems = _sems(out, r)
    # by hand from the BDs (FORMATS §7, §10): the leg's last two are +1 on its own channel's
    # dma_compl_sema (16 + 4c + 3 of rank r), then +1 on the successor's recv_sema (16 + 4c of
    # another rank of the same node here)
    c = g["channel"]
    assert _inc_target(sems[k]) == (r, 16 + 4 * c + 3)
    succ, sid = _inc_target(sems[k + 1])
    assert succ != r and sid == 16 + 4 * c
    _swap_sems(out, r, k, k + 1)
    name = {1: "send", 2: "recv_reduce_send"}[leaf]
    assert _error_line(out) == (
        f"{out / f'rank-{r:04d}'}: field addr, rank {r}, artifact sem.bin, record {k}: "
        f"increment of semaphore {sid} (channel {c} recv_sema) of rank {succ} before the one "
        f"of semaphore {16 + 4 * c + 3} (channel {c} dma_compl_sema) of rank {r} (sem.bin "
        f"record {k + 1}): a RING {name} leg (legs.bin record {i}) increments its own "
        f"dma_compl_sema, then the successor's recv_sema or its own send_sema (FORMATS §7)")


def test_a_kangaring_legs_two_increments_swapped_are_named_at_the_first(kanga_out, tmp_path):
    """A KANGARING data leg increments its own dma_compl_sema, then the next primary's
    recv_sema (a leaf that sends), then 144 + c of each secondary (FORMATS §7's row). Rank
    0's first such leg with the first two swapped: the first, now the next primary's
    recv_sema, is named at its addr (fixer 59p: the swap passed as a match, 6 of 6 on rank
    0)."""
    out = _copy(kanga_out, tmp_path)
    r = 0
    found = [(i, g) for i, g in enumerate(_legs(out, r)) if g["leaf"] in (1, 2, 10)
             and g["sem_count"] >= 3]
    i, g = found[0]
    c = g["channel"]
    sems = _sems(out, r)
    k = next(j for j in range(g["sem_first"], g["sem_first"] + g["sem_count"])
             if sems[j][0] & 0xFF == 21)
    # by hand (FORMATS §7, §10): +1 on its own dma_compl_sema, then +1 on another rank's
    # recv_sema of the channel, then +1 on 144 + c of a secondary
    assert _inc_target(sems[k]) == (r, 16 + 4 * c + 3)
    nxt, sid = _inc_target(sems[k + 1])
    assert nxt != r and sid == 16 + 4 * c
    sec, psid = _inc_target(sems[k + 2])
    assert sec != r and psid == 144 + c
    _swap_sems(out, r, k, k + 1)
    name = {1: "send", 2: "recv_reduce_send", 10: "direct_reduce_send_kangaring"}[g["leaf"]]
    assert _error_line(out) == (
        f"{out / f'rank-{r:04d}'}: field addr, rank {r}, artifact sem.bin, record {k}: "
        f"increment of semaphore {sid} (channel {c} recv_sema) of rank {nxt} before the one "
        f"of semaphore {16 + 4 * c + 3} (channel {c} dma_compl_sema) of rank {r} (sem.bin "
        f"record {k + 1}): a KANGARING {name} leg (legs.bin record {i}) increments its own "
        f"dma_compl_sema, then the next primary's recv_sema, then 144 + c of each secondary "
        f"(FORMATS §7)")


@pytest.mark.parametrize("case, leaf", [("flat", 2), ("hier", 3)])
def test_a_single_cycle_legs_first_wait_moved_to_another_channel_is_named_at_its_addr(
        scr_out, hier_out, tmp_path, case, leaf):
    """A SINGLE_CYCLE_RING leg with data first waits its own channel's recv_sema (16 + 4c,
    FORMATS §3.3, §7), which its 0xBF word's wait_idx repeats (§4's row). Its sem.bin wait
    moved 16 bytes on, to semaphore 20 + 4c (channel c + 1's recv_sema), the word untouched:
    the word agrees with the leg's own channel, so the sem.bin record's addr is named
    (review 58n: the untouched word was, `wait_idx should be 20, not 16`). The flat case a
    recv_reduce_send (2), the HIER inter_allr leg's (a group of two) its root's
    recv_reduce_copy (3)."""
    out = _copy(scr_out if case == "flat" else hier_out, tmp_path)
    r, g, k, c = _single_cycle_wait(out, leaf, 0, 0)
    word = _get(out, r, "legs.bin", g * REC + 16, "<I")
    assert _get(out, r, "sb2sb.bin", word * WORD + 5, "<B") == 16 + 4 * c
    ctrl, value, addr = _sems(out, r)[k]
    _set(out, r, "sem.bin", k * BD + 8, "<Q", addr + 16)
    name = {2: "recv_reduce_send", 3: "recv_reduce_copy"}[leaf]
    assert _error_line(out) == (
        f"{out / f'rank-{r:04d}'}: field addr, rank {r}, artifact sem.bin, record {k}: wait of "
        f"semaphore {20 + 4 * c} (channel {c + 1} recv_sema): a SINGLE_CYCLE_RING {name} leg "
        f"of channel {c} first waits its own channel's semaphore {16 + 4 * c} (channel {c} "
        f"recv_sema), as its 0xBF word (sb2sb.bin record {word}) carries (FORMATS §4, §7; "
        f"legs.bin record {g})")


@pytest.mark.parametrize("case, leaf, field", [
    ("flat", 2, "semaphore_value"), ("hier", 3, "semaphore_value"),
    ("flat", 2, "wait_idx"), ("hier", 3, "wait_idx"),
])
def test_a_single_cycle_legs_first_wait_changed_alike_in_sem_bin_and_its_word_is_named_at_the_word(
        scr_out, hier_out, tmp_path, case, leaf, field):
    """A SINGLE_CYCLE_RING leg's first wait, on its own channel's recv_sema (16 + 4c) by 1
    (FORMATS §4's row, §7), changed alike in sem.bin and in its 0xBF word (offset 5
    wait_idx, offset 8 semaphore_value): the two agree with each other, not with the row, so
    the wiring tells and the word is named with both, as a mesh leg's two changed records
    are (fixer 59b, the fifty-eighth "Left": until then the run deadlocked). The value made
    2 in both; the wait moved to channel c + 1's recv_sema (20 + 4c: sem.bin's address 16
    bytes on, the word's wait_idx 4 on)."""
    out = _copy(scr_out if case == "flat" else hier_out, tmp_path)
    r, g, k, c = _single_cycle_wait(out, leaf, 0, 0)
    word = _get(out, r, "legs.bin", g * REC + 16, "<I")
    assert _get(out, r, "sb2sb.bin", word * WORD + 5, "<B") == 16 + 4 * c
    assert _get(out, r, "sb2sb.bin", word * WORD + 8, "<I") == 1
    ctrl, value, addr = _sems(out, r)[k]
    name = {2: "recv_reduce_send", 3: "recv_reduce_copy"}[leaf]
    where = f"{out / f'rank-{r:04d}'}: field {field}, rank {r}, artifact sb2sb.bin, record {word}"
    if field == "semaphore_value":
        _set(out, r, "sem.bin", k * BD + 4, "<I", 2)
        _set(out, r, "sb2sb.bin", word * WORD + 8, "<I", 2)
        assert _error_line(out) == (
            f"{where}: semaphore_value should be 1, not 2: a SINGLE_CYCLE_RING {name} leg's "
            f"waits are by 1 (FORMATS §4, §7; legs.bin record {g}), and its first wait "
            f"(sem.bin record {k}) is by 2 too")
    else:
        _set(out, r, "sem.bin", k * BD + 8, "<Q", addr + 16)
        _set(out, r, "sb2sb.bin", word * WORD + 5, "<B", 20 + 4 * c)
        assert _error_line(out) == (
            f"{where}: wait_idx should be {16 + 4 * c}, not {20 + 4 * c}: a SINGLE_CYCLE_RING "
            f"{name} leg of channel {c} first waits its own channel's semaphore {16 + 4 * c} "
            f"(channel {c} recv_sema) (FORMATS §4, §7; legs.bin record {g}), and its first "
            f"wait (sem.bin record {k}) is on semaphore {20 + 4 * c} (channel {c + 1} "
            f"recv_sema) too")


def test_a_single_cycle_legs_first_wait_swapped_with_its_increment_names_the_increment(
        scr_out, tmp_path):
    """A SINGLE_CYCLE_RING recv_reduce_copy_send (4) has its two waits (recv_sema, post_sema)
    then its increments, the first on its own dma_compl_sema (19 + 4c) (FORMATS §7). Its
    first wait and that increment swapped: the increment, now at the leg's first BD where a
    wait belongs, is named (review 58n: `a wait after an increment` named the leg's second
    wait, untouched)."""
    out = _copy(scr_out, tmp_path)
    r, g, k, c = _single_cycle_wait(out, 4, 0, 0)
    sems = _sems(out, r)
    assert [s[0] & 0xFF for s in sems[k:k + 3]] == [20, 20, 21]
    assert sems[k + 2][2] == EVT_SEM + (r << 30) + INC_WINDOW + 4 * (19 + 4 * c)
    _swap_sems(out, r, k, k + 2)
    assert _error_line(out) == (
        f"{out / f'rank-{r:04d}'}: field ctrl.subop, rank {r}, artifact sem.bin, record {k}: an "
        f"increment, of semaphore {19 + 4 * c} (channel {c} dma_compl_sema) of rank {r}, before "
        f"its leg's wait at sem.bin record {k + 2} (legs.bin record {g}; FORMATS §7: the waits "
        f"first, then the increments)")


@pytest.mark.parametrize("leaf", [17, 20])
def test_a_mesh_legs_first_wait_swapped_with_its_increment_names_the_increment(
        mesh2dev_out, tmp_path, leaf):
    """Rank 0's mesh_reduce (17) and mesh_sync (20) of mesh2dev_out wait two events, then
    increment their own channel's dma_compl_sema (19 + 4c) first (FORMATS §7). The first wait
    and that increment swapped: the increment, now at the leg's first BD, is named (review
    58n: `a wait after an increment` named the second wait, untouched)."""
    out = _copy(mesh2dev_out, tmp_path)
    sems = _sems(out, 0)
    for g, leg in enumerate(_legs(out, 0)):
        k = leg["sem_first"]
        if leg["leaf"] == leaf and [s[0] & 0xFF for s in sems[k:k + 3]] == [20, 20, 21]:
            break
    else:
        raise AssertionError("no such leg")
    c = leg["channel"]
    assert sems[k + 2][2] == EVT_SEM + INC_WINDOW + 4 * (19 + 4 * c)
    _swap_sems(out, 0, k, k + 2)
    assert _error_line(out) == (
        f"{out / 'rank-0000'}: field ctrl.subop, rank 0, artifact sem.bin, record {k}: an "
        f"increment, of semaphore {19 + 4 * c} (channel {c} dma_compl_sema) of rank 0, before "
        f"its leg's wait at sem.bin record {k + 2} (legs.bin record {g}; FORMATS §7: the waits "
        f"first, then the increments)")


def test_a_single_cycle_legs_first_wait_copied_over_a_later_increment_names_the_copy(
        scr_out, tmp_path):
    """The same recv_reduce_copy_send (waits recv_sema, post_sema; increments dma_compl_sema,
    the next's recv_sema or its own send_sema, post_sema: FORMATS §7) with its first wait
    copied over its fourth BD: the leg waits, waits, increments, waits; the copy (a BD that
    repeats another of its leg), the lone wait after an increment, is named, not the
    untouched dma_compl_sema increment before it (what counting the leg's waits would
    name)."""
    out = _copy(scr_out, tmp_path)
    r, g, k, c = _single_cycle_wait(out, 4, 0, 0)
    sems = _sems(out, r)
    assert _legs(out, r)[g]["sem_count"] == 5
    assert [s[0] & 0xFF for s in sems[k:k + 5]] == [20, 20, 21, 21, 21]
    p = _file(out, r, "sem.bin")
    data = bytearray(p.read_bytes())
    data[(k + 3) * BD:(k + 4) * BD] = data[k * BD:(k + 1) * BD]
    p.write_bytes(bytes(data))
    assert _error_line(out) == (
        f"{out / f'rank-{r:04d}'}: field ctrl.subop, rank {r}, artifact sem.bin, record "
        f"{k + 3}: a wait after an increment (FORMATS §7: the wait first, then the increments)")
