"""Fields the simulator once let through (with --ignore-checksums): the 0xBF ``start_addr`` of
mesh and RDH legs (docs/SIMULATOR.md §7), ``num_elements`` of a leg without data and ``half``
of a RING leg (docs/FORMATS.md §3).  Byte offsets are FORMATS.md's: a 0xBF word is 64 bytes,
``src.start_addr`` at 16 and ``dst.start_addr`` at 48 (u32); a leg record is 64 bytes,
``leaf`` at 12, ``half`` at 13, ``num_elements`` at 56 (u32)."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import meshcase
import numpy as np
import pytest

from nrtrewrite.simulate import engine

from test_simulate import cli, flip_writes_of

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
WORD = REC = 64
SRC_START, DST_START = 16, 48
LEAF, HALF, NUM_ELEMENTS = 12, 13, 56


def _lower(model: Path, out: Path, algo: str) -> Path:
    res = cli("lower", model, "-o", out, "--algo", algo, "--quiet")
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture(scope="module")
def mesh_out(tmp_path_factory) -> Path:
    return _lower(FIXTURES / "c7c8.neff", tmp_path_factory.mktemp("mesh") / "o", "mesh")


@pytest.fixture(scope="module")
def ring_out(tmp_path_factory) -> Path:
    return _lower(FIXTURES / "c7c8.neff", tmp_path_factory.mktemp("ring") / "o", "ring")


@pytest.fixture(scope="module")
def rdh5_out(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rdh5") / "o"
    meshcase.lower(meshcase.spec([list(range(5))], [("all_reduce", "bf16", "add", 5000)]), out,
                   algo="intra_rdh")
    return out


@pytest.fixture(scope="module")
def rdh8n_out(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rdh8n") / "o"
    meshcase.lower(meshcase.spec([[128 * k for k in range(8)]],
                                 [("all_reduce", "bf16", "add", 6000)]), out, algo="inter_rdh")
    return out


def _rdh8n_rank0_legs(n: int = 6000, levels: int = 3) -> list[tuple[str, int, int]]:
    """Rank 0's entry of rdh8n as (leaf, elem_start, num_elements), worked out from
    docs/DESIGN.md "Mesh and RDH" and FORMATS §3.2 / §8, independently of the composer.

    8 ranks, one a node: a power of two (no fold), L = 3 levels, super-blocks of n / 8, and
    no start handshake (it cannot cross the network, DESIGN "Completion and reuse"). Rank 0 is
    core index 0, so it keeps the low half at every halving step. Recursive halving step s
    exchanges with c ^ 2^(L-1-s): it sends the high half of what it holds (step 0 an
    ``rdh_copy`` of its input; later steps' sends are fused into the previous step's reduce),
    posts the receive of the partner's copy of its low half (``post_recv``), then reduces:
    the half that goes on, written straight into the next partner's slot, and the half it
    keeps (two ``rdh_reduce``), the last step only the block it keeps. Recursive doubling
    level k exchanges the 2^k super-blocks held with c ^ 2^k: an ``rdh_copy`` of its own
    ones, then a ``post_recv`` of the partner's, super-blocks [2^k, 2^(k+1)). The last
    level's wait is a ``mesh_sync`` (FORMATS §7), then ``mark_end``."""
    sb = n // 2 ** levels
    legs: list[tuple[str, int, int]] = []
    held = n
    for s in range(levels):
        half = held // 2
        if s == 0:
            legs.append(("rdh_copy", half, half))
        legs.append(("post_recv", 0, half))
        if s < levels - 1:
            legs.append(("rdh_reduce", half // 2, half // 2))  # on to the next partner
        legs.append(("rdh_reduce", 0, half if s == levels - 1 else half // 2))
        held = half
    for k in range(levels):
        legs.append(("rdh_copy", 0, sb * 2 ** k))
        legs.append(("post_recv", sb * 2 ** k, sb * 2 ** k))
    return legs + [("mesh_sync", 0, 0), ("mark_end", 0, 0)]


RDH8N_POSTS = [i for i, leg in enumerate(_rdh8n_rank0_legs()) if leg[0] == "post_recv"]
#: FORMATS §3 byte 12's leaf codes of the legs the model names
RDH_LEAF = {"rdh_copy": 18, "rdh_reduce": 19, "mesh_sync": 20, "post_recv": 21, "mark_end": 15}


@pytest.fixture(scope="module")
def ssm8_out(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ssm8") / "o"
    meshcase.lower(meshcase.spec([list(range(8))], [("all_reduce", "bf16", "add", 8192)]), out,
                   algo="single_step_mesh")
    return out


def _copy(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "t"
    shutil.copytree(src, dst)
    return dst


def _patch(path: Path, offset: int, fmt: str, fn) -> None:
    b = bytearray(path.read_bytes())
    (v,) = struct.unpack_from(fmt, b, offset)
    struct.pack_into(fmt, b, offset, fn(v))
    path.write_bytes(bytes(b))


def _fails(out: Path, *words: str) -> str:
    res = cli("simulate", out, "--ignore-checksums", "--json")
    assert res.exit_code == 1, res.output
    doc = json.loads(res.stdout)
    assert doc["ok"] is False
    text = " ".join([doc["error"] or ""] + [t["detail"] or "" for t in doc["triggers"]])
    for w in words:
        assert w in text, text
    return text


def test_untampered_outputs_pass(mesh_out, ring_out, rdh5_out, rdh8n_out, ssm8_out):
    for out in (mesh_out, ring_out, rdh5_out, rdh8n_out, ssm8_out):
        res = cli("simulate", out, "--json")
        assert res.exit_code == 0, res.output


def test_the_testers_mesh_start_addr_bytes(mesh_out, tmp_path):
    out = _copy(mesh_out, tmp_path)
    p = out / "rank-0001" / "sb2sb.bin"
    b = bytearray(p.read_bytes())
    b[3 * WORD + DST_START] = 0x40
    b[3 * WORD + SRC_START] = 0x40
    p.write_bytes(bytes(b))
    _fails(out, "rank-0001", "sb2sb.bin", "record 3", "start_addr")


@pytest.mark.parametrize("part", [SRC_START, DST_START])
@pytest.mark.parametrize("case", ["mesh", "rdh5", "rdh8n"])
def test_start_addr_plus_two_on_every_word_is_caught(case, part, mesh_out, rdh5_out, rdh8n_out,
                                                    tmp_path):
    base, rank = {"mesh": (mesh_out, 1), "rdh5": (rdh5_out, 4),
                  "rdh8n": (rdh8n_out, 128)}[case]
    name = f"rank-{rank:04d}"
    words = (base / name / "sb2sb.bin").stat().st_size // WORD
    assert words > 0
    for w in sorted({0, words // 3, words // 2, words - 1}):
        out = tmp_path / f"w{w}"
        shutil.copytree(base, out)
        _patch(out / name / "sb2sb.bin", w * WORD + part, "<I", lambda v: v + 2)
        _fails(out, name, "sb2sb.bin", f"record {w}",
               "src.start_addr" if part == SRC_START else "dst.start_addr")
        shutil.rmtree(out)


def test_start_addr_byte_flip_on_inter_rdh_is_caught(rdh8n_out, tmp_path):
    name = "rank-0256"
    words = (rdh8n_out / name / "sb2sb.bin").stat().st_size // WORD
    for w in (0, words - 1):
        for byte in range(3):
            out = tmp_path / f"w{w}b{byte}"
            shutil.copytree(rdh8n_out, out)
            p = out / name / "sb2sb.bin"
            b = bytearray(p.read_bytes())
            b[w * WORD + DST_START + byte] ^= 0x40
            p.write_bytes(bytes(b))
            _fails(out, name, "sb2sb.bin", "dst.start_addr")
            shutil.rmtree(out)


def _legs(out: Path, rank: int) -> bytes:
    return (out / f"rank-{rank:04d}" / "legs.bin").read_bytes()


def _poke_legs(out: Path, rank: int, offset: int, value: int) -> None:
    """Set one byte of a rank's legs.bin."""
    p = out / f"rank-{rank:04d}" / "legs.bin"
    b = bytearray(p.read_bytes())
    b[offset] = value
    p.write_bytes(bytes(b))


def test_num_elements_on_a_mesh_sync_leg(mesh_out, tmp_path):
    """Record 14 of rank 1 is a mesh_sync: c7c8's entry 0 (an all-reduce over 4 ranks as
    MESH, docs/DESIGN.md "Mesh and RDH") is records 0..10 (two mark_complete, two mesh_sync,
    3 scatter mesh_send, mesh_reduce, the fan-out mesh_send, the closing mesh_sync,
    mark_end), so record 14 is entry 1's fourth, its mesh handshake's wait."""
    legs = _legs(mesh_out, 1)
    entry0 = 2 + 2 + 3 + 1 + 1 + 1 + 1
    assert legs[entry0 * REC + LEAF] == 22 and legs[(entry0 + 3) * REC + LEAF] == 20
    assert entry0 + 3 == 14
    out = _copy(mesh_out, tmp_path)
    _poke_legs(out, 1, 14 * REC + NUM_ELEMENTS, 0x05)
    _fails(out, "rank-0001", "legs.bin", "record 14", "num_elements")


@pytest.mark.parametrize("leaf", [20, 22])  # mesh_sync, mark_complete
def test_num_elements_on_every_kind_of_sync_leg(mesh_out, tmp_path, leaf):
    legs = _legs(mesh_out, 2)
    recs = [i for i in range(len(legs) // REC) if legs[i * REC + LEAF] == leaf]
    assert recs
    out = _copy(mesh_out, tmp_path)
    _patch(out / "rank-0002" / "legs.bin", recs[-1] * REC + NUM_ELEMENTS, "<I", lambda v: 7)
    _fails(out, "rank-0002", "legs.bin", f"record {recs[-1]}", "num_elements")


def test_half_flipped_on_a_ring_recv_reduce_send(ring_out, tmp_path):
    """Record 75 of rank 1 is a recv_reduce_send of CHUNK_H1. c7c8's five triggers over 4
    ranks as RING, one channel and one chunk group each (their chunks, a quarter of 256,
    128, 64 and 64 KiB, under DESIGN.md "Chunking"'s 512 KiB), each entry the handshake's
    two mark_complete (FORMATS §3.4), seed 001 §4's legs two a step, and mark_end: an
    all-reduce 2 + 16 + 1 (send, 2 x recv_reduce_send, 2 x (recv_reduce_copy,
    direct_copy_send), 2 x direct_recv_send, direct_recv, each H0 and H1); the all-gather 2
    + 10 + 1 (send, direct_copy of its own block, 2 x direct_recv_send, direct_recv). So
    entry 4 (the reduce-scatter: send, 2 x recv_reduce_send, recv_reduce_copy) starts at
    19 + 19 + 13 + 19 = 70: its mark_complete at 70, 71, its send at 72, 73, its first
    recv_reduce_send at 74 (H0), 75 (H1)."""
    legs = _legs(ring_out, 1)
    ar, ag = 2 + 16 + 1, 2 + 10 + 1
    rs0 = ar + ar + ag + ar
    assert legs[rs0 * REC + LEAF] == 22 and legs[(rs0 - 1) * REC + LEAF] == 15
    rrs_h1 = rs0 + 2 + 2 + 1
    assert rrs_h1 == 75
    assert legs[75 * REC + LEAF] == 2 and legs[75 * REC + HALF] == 1  # recv_reduce_send, H1
    out = _copy(ring_out, tmp_path)
    _poke_legs(out, 1, 75 * REC + HALF, 0)
    _fails(out, "rank-0001", "legs.bin", "record 75", "half")


def test_half_flipped_on_every_ring_leaf(ring_out, tmp_path):
    legs = _legs(ring_out, 3)
    seen = {}
    for i in range(len(legs) // REC):
        lf = legs[i * REC + LEAF]
        if 1 <= lf <= 8:
            seen.setdefault((lf, legs[i * REC + HALF]), i)
    assert len(seen) >= 6
    for (lf, h), i in sorted(seen.items()):
        out = tmp_path / f"l{lf}h{h}"
        shutil.copytree(ring_out, out)
        _patch(out / "rank-0003" / "legs.bin", i * REC + HALF, "<B", lambda v: 1 - v)
        _fails(out, "rank-0003", "legs.bin", f"record {i}", "half")
        shutil.rmtree(out)


N_SHIFTED = 4 * 1028  # a tail tile of 4 elements: as many as the group has members


@pytest.mark.parametrize("alu", ["max", "min"])
def test_a_shifted_source_of_a_max_or_min_reduce_is_caught(tmp_path, alu):
    """MAX and MIN are idempotent and pick one value per element, so uniform random data
    showed a source read one element off only where the misplaced value was the extreme:
    the mutation tester's shifted MESH reduce-scatter source (buf_ptr + one element) matched
    at seed 0. The test data now give every member the extreme on every n-th element
    (docs/SIMULATOR.md §4, simulate/testdata.py): the shortest source read of the reduce
    legs, a tail tile of as many elements as the group has members, shifted by one element,
    is a mismatch at each of six seeds (it matched at seed 1 with uniform data). dma.bin (FORMATS §5): a 16-byte BD, buf_ptr at 8 (u64), the
    M2S/S2M bit 4 of the u32 at 4, the stream at bits 12..8; legs.bin (§3): sdma_op at 7,
    dma_first at 24, dma_count at 28."""
    out = tmp_path / "o"
    meshcase.lower(meshcase.spec([list(range(4))], [("reduce_scatter", "fp16", alu, N_SHIFTED)]),
                   out, algo="mesh")
    legs = (out / "rank-0003" / "legs.bin").read_bytes()
    dma = bytearray((out / "rank-0003" / "dma.bin").read_bytes())
    sources = []  # (length, BD index) of every source-1 read of a reduce leg
    for off in range(0, len(legs), REC):
        if legs[off + 7] != 4:  # not a CCE reduce leg
            continue
        first, count = struct.unpack_from("<II", legs, off + 24)
        for i in range(first, first + count):
            word, flags = struct.unpack_from("<II", dma, i * 16)
            if not flags & 0x10 and (flags >> 8) & 0x1F == 1:  # M2S of source 1
                sources.append(((word & 0xFFFF) or 65536, i))
    _length, i = min(sources)  # the shortest: few elements, where random data hid it
    ptr, = struct.unpack_from("<Q", dma, i * 16 + 8)
    struct.pack_into("<Q", dma, i * 16 + 8, ptr + 2)  # one fp16 element on
    (out / "rank-0003" / "dma.bin").write_bytes(bytes(dma))
    for seed in range(6):
        res = cli("simulate", out, "--ignore-checksums", "--json", "--seed", seed)
        assert res.exit_code == 1, (seed, res.output)
        doc = json.loads(res.stdout)
        assert doc["triggers"][0]["status"] == "mismatch", doc



def test_a_mismatch_names_the_leg_that_wrote_the_first_wrong_element(tmp_path, monkeypatch):
    """A mismatch names the output element and the leg that last wrote it, by its
    ``legs.bin`` record, so the wrong bytes can be found with ``dump``. A fault is injected
    into the one CCE reduce leg of rank 3 of a MESH reduce-scatter over 4 ranks (found from
    the bytes, FORMATS §3: ``sdma_op`` 4 at 7, ``num_elements`` at 56): the low byte of the
    last element it writes is flipped. That leg writes rank 3's whole output (1024 fp16
    elements), so the only wrong element is its last, element 1023, last written by it.
    (A misplaced source in the bytes is caught before any data moves, by the static checks
    of the 0xBF words against the BDs; an injected fault reaches the comparison.)"""
    out = tmp_path / "o"
    meshcase.lower(meshcase.spec([list(range(4))], [("reduce_scatter", "fp16", "add", 4096)]),
                   out, algo="mesh")
    legs = (out / "rank-0003" / "legs.bin").read_bytes()
    record, = [off // REC for off in range(0, len(legs), REC) if legs[off + 7] == 4]
    assert struct.unpack_from("<I", legs, record * REC + NUM_ELEMENTS) == (1024,)
    # (its data move writes the low byte of its last fp16 element with the low bit flipped)
    flip_writes_of(monkeypatch, lambda leg: (leg.rank, leg.record) == (3, record))
    res = engine.simulate_output(out)
    assert res.error is None, res.error
    verdict, = res.triggers
    assert verdict.status == "mismatch" and verdict.mismatched_elements == 1
    assert verdict.first_mismatch["rank"] == 3 and verdict.first_mismatch["element"] == 1023
    by = verdict.first_mismatch["written_by"]
    assert by.startswith("leg mesh_reduce (rank 3, entry 0, ")
    assert by.endswith(f", rank-0003/legs.bin record {record}")
    assert "first element 1023: " in verdict.detail and f"last written by {by}" in verdict.detail


@pytest.mark.parametrize("model, algo, sems", [
    ("mix8", "ring", {9}),  # entry_post: +1 per post, the wait counts the posts (§3.4)
    ("mix8", "ring", {8}),  # entry_go: raised by (channels - 1), each channel waits 1 (§3.4)
    ("mix8", "mesh", set(range(192, 256))),  # events: +1 per arrival (§7)
])
def test_a_balanced_scaling_of_a_handshake_or_event_value_is_caught(tmp_path, model, algo, sems):
    """Every wait and increment of these semaphores doubled on every rank: the run balances
    (each wait scales with its increments), so only the static check of the values FORMATS
    fixes catches it (found by an adversarial tester)."""
    import numpy as np

    from nrtrewrite.emit import formats as F
    from nrtrewrite.simulate.engine import Simulator

    out = _lower(FIXTURES / f"{model}.neff", tmp_path / "o", algo)
    sim = Simulator(out)
    assert sim.prepare().error is None
    changed = 0
    for r, prog in sim.programs.items():
        pick = np.isin(prog.s_sid, sorted(sems))  # sem.bin records, in file order
        path = out / f"rank-{r:04d}" / "sem.bin"
        rec = np.fromfile(path, F.SEM_DTYPE)
        rec["value"][pick] *= 2
        path.write_bytes(rec.tobytes())
        changed += int(pick.sum())
    assert changed
    res = cli("simulate", out, "--ignore-checksums", "--json")
    assert res.exit_code == 1, res.output
    assert "sem.bin" in json.loads(res.stdout)["error"] and "field value" in res.stdout


# -- fields a fifth exploratory tester changed with the rank manifest kept in step (as a bug of
# `lower` would write them), which simulate took: spad.bin byte 1 [6:4] algo_sub_type, bytes
# 4..7 the mesh overlay sema_shift_offset (u16) / sema_mask (u16); legs.bin byte 7 sdma_op,
# 12 leaf, 56 num_elements (FORMATS §2, §3)

SPAD = 8


def _spad_and_manifest(out: Path, rank: int, entry: int, offset: int, fmt: str, value: int,
                       key: str) -> None:
    """Set one field of a rank's spad.bin entry and the rank manifest's copy of it."""
    _patch(out / f"rank-{rank:04d}" / "spad.bin", entry * SPAD + offset, fmt,
           lambda v: value if fmt != "<B" else (v & ~0x70) | (value << 4))
    man = out / f"rank-{rank:04d}" / "manifest.json"
    doc = json.loads(man.read_text())
    doc["entries"][entry][key] = value
    man.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


@pytest.mark.parametrize("offset, value, key", [
    (4, 128, "sema_shift_offset"),   # the firmware would signal 128 + t; the legs wait on 192 + t
    (6, 0x07, "sema_mask"),          # event 8 (reduce copy) would land on event 0's semaphore
])
@pytest.mark.parametrize("case", ["mesh", "rdh5"])
def test_the_mesh_overlay_is_the_legs_event_window(case, offset, value, key, mesh_out, rdh5_out,
                                                   tmp_path):
    base, rank = {"mesh": (mesh_out, 1), "rdh5": (rdh5_out, 2)}[case]
    out = _copy(base, tmp_path)
    _spad_and_manifest(out, rank, 0, offset, "<H", value, key)
    _fails(out, f"rank-{rank:04d}", "spad.bin", "record 0", f"field {key}",
           "the event window the legs use is 192 / 0x3f")


@pytest.mark.parametrize("value", [0, 1, 3])
def test_an_intra_node_mesh_entry_has_the_platforms_sub_type(value, mesh_out, tmp_path):
    """trn2's mesh_sub_type is MESH_TRN2 (2); the manifest records it (topology.mesh_sub_type)."""
    top = json.loads((mesh_out / "manifest.json").read_text())
    assert top["topology"]["mesh_sub_type"] == "MESH_TRN2"
    out = _copy(mesh_out, tmp_path)
    _spad_and_manifest(out, 1, 0, 1, "<B", value, "algo_sub_type")
    _fails(out, "rank-0001", "spad.bin", "field algo_sub_type",
           f"algo_sub_type {value}", "needs 2 (MESH_TRN2): intra-node")


def test_a_cross_node_mesh_entry_is_full_mesh(tmp_path):
    base = tmp_path / "o"
    meshcase.lower(meshcase.spec([[128 * k for k in range(4)]],
                                 [("all_reduce", "bf16", "add", 4000)]), base, algo="mesh")
    res = cli("simulate", base, "--json")
    assert res.exit_code == 0, res.output
    out = tmp_path / "t"
    shutil.copytree(base, out)
    _spad_and_manifest(out, 128, 0, 1, "<B", 2, "algo_sub_type")
    _fails(out, "rank-0128", "algo_sub_type 2 (MESH_TRN2)", "needs 0 (FULL_MESH): its group "
           "spans 4 nodes")


def test_a_manifest_without_mesh_sub_type_still_simulates(mesh_out, tmp_path):
    """Outputs written before topology.mesh_sub_type was recorded: their intra-node sub-types
    are not checked (FORMATS §1.1), everything else is."""
    out = _copy(mesh_out, tmp_path)
    man = out / "manifest.json"
    top = json.loads(man.read_text())
    del top["topology"]["mesh_sub_type"]
    man.write_text(json.dumps(top, indent=1, sort_keys=True) + "\n")
    res = cli("simulate", out, "--ignore-checksums", "--json")
    assert res.exit_code == 0, res.output
    top["topology"]["mesh_sub_type"] = "MESH_INVALID"
    man.write_text(json.dumps(top, indent=1, sort_keys=True) + "\n")
    _fails(out, "field topology.mesh_sub_type", "topology.mesh_sub_type is \"MESH_INVALID\": one of FULL_MESH, "
           "GROUPED_MESH, MESH_TRN2, MESH_SWITCH, or null (no mesh)")


def test_a_kangaring_direct_recv_copies(tmp_path):
    """FORMATS §3.3: a KANGARING ``direct_recv`` copies the last chunk to the secondaries
    (sdma_op 2); a ``peer_post`` (11, sdma_op 0) relabelled ``direct_recv`` (7) passed."""
    base = tmp_path / "o"
    meshcase.lower(meshcase.spec([list(range(8))], [("all_reduce", "bf16", "add", 8192)],
                                 lnc=2), base, algo="kangaring")
    for rank in range(8):
        legs = _legs(base, rank)
        hits = [i for i in range(len(legs) // REC) if legs[i * REC + LEAF] == 11]
        if hits:
            break
    assert hits, "no peer_post leg"
    out = tmp_path / "t"
    shutil.copytree(base, out)
    _poke_legs(out, rank, hits[0] * REC + LEAF, 7)
    _fails(out, f"rank-{rank:04d}", "legs.bin", f"record {hits[0]}", "field sdma_op",
           "sdma_op for leaf direct_recv should be 2, not 0")


@pytest.mark.parametrize("value", [1, 0])
def test_post_recv_legs_count_what_their_entry_receives(value, rdh8n_out, tmp_path):
    """FORMATS §3: a ``post_recv``'s num_elements are the elements it receives; posting is per
    entry (§8.2), so its entry's post_recv legs together count its receive entries' bytes,
    and each carries the element range of the transfer it receives (§8 "Entries"): one leg's
    count changed is named at that leg, against its transfer (since 2026-12-07; before, the
    entry's sum was named, 'the post_recv legs of entry 0 ... should count')."""
    legs = _legs(rdh8n_out, 0)
    rec = next(i for i in range(len(legs) // REC) if legs[i * REC + LEAF] == 21)
    (num,) = struct.unpack_from("<I", legs, rec * REC + NUM_ELEMENTS)
    (start,) = struct.unpack_from("<Q", legs, rec * REC + 48)
    assert num > 1
    out = _copy(rdh8n_out, tmp_path)
    _patch(out / "rank-0000" / "legs.bin", rec * REC + NUM_ELEMENTS, "<I", lambda v: value)
    _fails(out, "rank-0000", "legs.bin", "field num_elements", f"record {rec}: post_recv of "
           f"elements [{start}, {start + value}) receives the transfer of ",
           f"of elements [{start}, {start + num})",
           "a post_recv carries the element range of the transfer it receives")


def test_destination_streams_of_a_tile_writing_one_place_must_agree(tmp_path):
    """A MESH all-reduce over 4 nodes, one rank on each: a mesh_send writes its bytes into
    its gateway view once per network destination, so a tile has S2M BDs of destinations
    0, 1, 2 with one buf_ptr (FORMATS.md §5: 16-byte BDs, word 1 bit 4 dir, bits 12:8
    stream; buf_ptr the u64 at 8; §8 "Entries").  Destination 0's BD moved by one byte wrote
    shifted bytes that destinations 1 and 2 wrote over: simulated as a match, though the DMA
    gives a tile's streams no order."""
    out = tmp_path / "o"
    meshcase.lower(meshcase.spec([[0, 128, 256, 384]], [("all_reduce", "bf16", "add", 32768)]),
                   out, algo="mesh", topology="trn2:nodes=4")
    assert cli("simulate", out).exit_code == 0
    dma = out / "rank-0384" / "dma.bin"
    raw = dma.read_bytes()
    bds = [struct.unpack_from("<IIQ", raw, 16 * i) for i in range(len(raw) // 16)]
    s2m = [(i, (w1 >> 8) & 0x1F, ptr) for i, (_w0, w1, ptr) in enumerate(bds) if w1 >> 4 & 1]
    k = next(n for n, (i, stream, ptr) in enumerate(s2m[:-1])
             if stream == 0 and s2m[n + 1][1:] == (1, ptr) and s2m[n + 1][0] == i + 1)
    t = _copy(out, tmp_path)
    _patch(t / "rank-0384" / "dma.bin", 16 * s2m[k][0] + 8, "<Q", lambda v: v + 1)
    _fails(t, "through destination streams 0 and 1 with different values")


# ---------------------------------------------------------------------------------------------
# legs.bin ring_step (offset 60, u32) and elem_start (offset 48, u64) of legs without elements,
# post_recv legs against the transfer they receive, and net_ops_info inc_recv_handshake /
# inc_recv_complete (offsets 24 and 32, u64) against the legs that wait for the op's data:
# each once passed the simulator (docs/SIMULATOR.md §7 listed them as not checked).
ELEM_START, RING_STEP = 48, 60
OP = 96
INC_RECV_HANDSHAKE, INC_RECV_COMPLETE = 24, 32


def _ring_steps(out: Path, rank: int) -> list[int]:
    legs = _legs(out, rank)
    return [struct.unpack_from("<I", legs, i * REC + RING_STEP)[0]
            for i in range(len(legs) // REC)]


@pytest.fixture(scope="module")
def ring2_out(tmp_path_factory) -> Path:
    """A RING all-reduce of 600,000 bf16 over ranks 0 and 1: one channel, chunks of 262,144
    elements (512 KiB), so two chunk groups (seed 001 §2: 2 x 262,144 elements a group), the
    second re-clamped to a tail chunk of 37,856."""
    out = tmp_path_factory.mktemp("ring2") / "o"
    meshcase.lower(meshcase.spec([[0, 1]], [("all_reduce", "bf16", "add", 600000)]), out,
                   algo="ring")
    return out


def test_a_flat_ring_counts_the_seeds_steps_over_its_chunk_groups(ring2_out):
    """Seed 001 §4 over 2 ranks: per chunk group, send (H0, H1) is step 0, the final reduce
    recv_reduce_copy + direct_copy_send (H0, then H1) step 1, direct_recv (H0, H1) step 2: 3
    steps a group, so the second group's are 3, 4, 5 (FORMATS §3); the entry handshake's two
    mark_complete legs and mark_end are 0."""
    leaves = [_legs(ring2_out, 0)[i * REC + LEAF] for i in range(19)]
    assert leaves == [22, 22] + [1, 1, 3, 5, 3, 5, 7, 7] * 2 + [15]
    assert _ring_steps(ring2_out, 0) == [0, 0] + [0, 0, 1, 1, 1, 1, 2, 2] \
        + [3, 3, 4, 4, 4, 4, 5, 5] + [0]
    assert cli("simulate", ring2_out).exit_code == 0


@pytest.mark.parametrize("record, value, words", [
    # the second chunk group's send numbered as the first group's step 0
    (10, 0, ["ring_step should be 3, the ring schedule's, not 0", "send of elements [562144, "
             "581072) is step 0 of chunk group 1 (3 steps a group on this channel)"]),
    (4, 2, ["ring_step should be 1, the ring schedule's, not 2", "recv_reduce_copy of elements "
            "[0, 131072) is step 1 of chunk group 0"]),
    (16, 4, ["ring_step should be 5, the ring schedule's, not 4", "direct_recv"]),
    (18, 6, ["ring_step 6 on a mark_end leg"]),
    (1, 1, ["ring_step 1 on a mark_complete leg"]),
])
def test_a_wrong_ring_step_of_a_flat_ring_is_caught(ring2_out, tmp_path, record, value, words):
    out = _copy(ring2_out, tmp_path)
    _patch(out / "rank-0000" / "legs.bin", record * REC + RING_STEP, "<I", lambda v: value)
    _fails(out, "rank-0000", "field ring_step", "channel 0", "legs.bin", f"record {record}",
           *words)


def test_two_ring_steps_swapped_on_one_rank_are_caught(ring2_out, tmp_path):
    """The send (step 0) and direct_recv (step 2) of the first chunk group of rank 1 trade
    their ring_step: every count balances, the run is unchanged."""
    out = _copy(ring2_out, tmp_path)
    p = out / "rank-0001" / "legs.bin"
    _patch(p, 2 * REC + RING_STEP, "<I", lambda v: 2)
    _patch(p, 8 * REC + RING_STEP, "<I", lambda v: 0)
    _fails(out, "rank-0001", "field ring_step", "record 2",
           "ring_step should be 0, the ring schedule's, not 2")


def test_ring_step_plus_one_on_every_ring_leaf_of_every_op(ring_out, tmp_path):
    """c7c8 lowered as RING: all-reduces, an all-gather and a reduce-scatter over ranks 0..3;
    the first leg of each (leaf, trigger) of rank 2 with its ring_step one higher."""
    legs = _legs(ring_out, 2)
    first = {}
    for i in range(len(legs) // REC):
        lf = legs[i * REC + LEAF]
        if 1 <= lf <= 8:
            first.setdefault((lf, struct.unpack_from("<I", legs, i * REC)[0]), i)
    assert {lf for lf, _t in first} >= {1, 2, 3, 5, 6, 7, 8}
    for (lf, t), i in sorted(first.items()):
        out = tmp_path / f"l{lf}t{t}"
        shutil.copytree(ring_out, out)
        _patch(out / "rank-0002" / "legs.bin", i * REC + RING_STEP, "<I", lambda v: v + 1)
        _fails(out, "rank-0002", "field ring_step", f"record {i}", "the ring schedule's, not")
        shutil.rmtree(out)


@pytest.mark.parametrize("which, edits, words", [
    # rdh_reduce step 5 numbered as the post_recv before it (4)
    ("rdh8n", {5: 4}, ["record 5", "ring_step 4 after ring_step 4 (legs.bin record 4) in an "
                       "entry of INTER_RDH"]),
    # rdh_copy step 9 numbered below the rdh_reduce before it (8)
    ("rdh8n", {9: 2}, ["record 9", "ring_step 2 after ring_step 8 (legs.bin record 8) in an "
                       "entry of INTER_RDH"]),
    # two mesh_send legs (steps 3 and 4) trading their ring_step
    ("mesh", {5: 4, 6: 3}, ["record 6", "ring_step 3 after ring_step 4 (legs.bin record 5) in "
                            "an entry of MESH"]),
    # the second rdh_copy (step 8) numbered as the first (7)
    ("rdh5", {10: 7}, ["record 10", "ring_step 7 after ring_step 7 (legs.bin record 9) in an "
                       "entry of INTRA_RDH"]),
    # the mesh_reduce (step 3) numbered below the mesh_send before it (2)
    ("ssm8", {5: 1}, ["record 5", "ring_step 1 after ring_step 2 (legs.bin record 4) in an "
                      "entry of SINGLE_STEP_MESH"]),
    # a mesh_send's step 3 raised to 11 (bit 3): above the next leg's 4, but step 3 fits
    # between its neighbours' 2 and 4 and no step fits record 6's place between 11 and 5:
    # record 5 is named (until 2026-12-07 record 6, `ring_step 4 after ring_step 11`)
    ("mesh", {5: 11}, ["record 5:", "ring_step 11 before ring_step 4 (legs.bin record 6) in an "
                       "entry of MESH", "a step between its neighbours' would fit here"]),
])
def test_a_mesh_or_rdh_ring_step_out_of_order_is_caught(rdh8n_out, mesh_out, rdh5_out, ssm8_out,
                                                        tmp_path, which, edits, words):
    """FORMATS §3 ``ring_step``: mesh and RDH number each composed leg its own step, in
    order, after the entry's two mark_complete legs (step 0). Rank 0's INTER_RDH entry over
    8 nodes (6000 elements) runs 16 legs before its mark_end, steps 0 .. 15; its MESH entry
    of c7c8's trigger 0 mesh_sync 0, mesh_sync 1, mesh_send 2, 3, 4, mesh_reduce 5,
    mesh_send 6, mesh_sync 7; its INTRA_RDH entry over 5 ranks (5000 elements) the
    handshake's mesh_sync 0, 1, then five rdh_reduce legs 2 .. 6 and three rdh_copy legs
    7 .. 9; its SINGLE_STEP_MESH entry over 8 ranks (8192 elements) the handshake's
    mesh_sync 0, 1, one mesh_send 2 of its input to the 7 peers (8 destinations a leg),
    one mesh_reduce 3 of the 8 inputs (8 sources a leg), and EVT_SYNC's mesh_sync 4, 5. A
    step repeated, going back, or two swapped passed (the field is informative: nothing
    reads it); each is refused at the leg that breaks the order, whichever of the four
    engines (docs/SIMULATOR.md §2) composed the entry."""
    base = {"rdh8n": rdh8n_out, "mesh": mesh_out, "rdh5": rdh5_out, "ssm8": ssm8_out}[which]
    steps, leaves = _ring_steps(base, 0), _legs(base, 0)[LEAF::REC]
    if which == "rdh8n":
        assert steps == list(range(16)) + [0]
    elif which == "mesh":
        assert steps[:11] == [0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 0]
    elif which == "rdh5":  # mark_complete 22, mesh_sync 20, rdh_reduce 19, rdh_copy 18,
        # mark_end 15 (FORMATS §3)
        assert list(leaves) == [22, 22, 20, 20] + [19] * 5 + [18] * 3 + [15]
        assert steps == [0, 0] + list(range(10)) + [0]
    else:  # mesh_send 16, mesh_reduce 17
        assert list(leaves) == [22, 22, 20, 20, 16, 17, 20, 20, 15]
        assert steps == [0, 0] + list(range(6)) + [0]
    out = _copy(base, tmp_path)
    for record, value in edits.items():
        _patch(out / "rank-0000" / "legs.bin", record * REC + RING_STEP, "<I",
               lambda v, value=value: value)
    _fails(out, "rank-0000", "field ring_step", "channel 0", "legs.bin", *words,
           "each composed leg has its own step, in order (FORMATS §3)")


def test_a_mesh_or_rdh_ring_step_may_skip_steps(rdh8n_out, tmp_path):
    """The composer counts a row of an empty element range that emits no leg (docs/SIMULATOR.md
    §7), so the steps of an entry's legs may skip numbers: rank 0's last INTER_RDH leg
    (mesh_sync, step 15) numbered 40 still simulates as a match."""
    out = _copy(rdh8n_out, tmp_path)
    _patch(out / "rank-0000" / "legs.bin", 15 * REC + RING_STEP, "<I", lambda v: 40)
    res = cli("simulate", out, "--ignore-checksums", "--json")
    assert res.exit_code == 0, res.output


def _kangaring_out(tmp_path: Path) -> Path:
    base = tmp_path / "k"
    meshcase.lower(meshcase.spec([list(range(8))], [("all_reduce", "bf16", "add", 8192)],
                                 lnc=2), base, algo="kangaring")
    return base


@pytest.mark.parametrize("leaf", [20, 22, 11, 12])  # mesh_sync, mark_complete, peer_post/wait
def test_elem_start_of_a_leg_without_elements_is_0(leaf, mesh_out, tmp_path):
    """FORMATS §3: a leg without elements (num_elements 0) starts at element 0; elem_start 7
    on one was only range-checked."""
    base = mesh_out if leaf in (20, 22) else _kangaring_out(tmp_path)
    for rank in range(8):
        legs = _legs(base, rank)
        recs = [i for i in range(len(legs) // REC) if legs[i * REC + LEAF] == leaf]
        if recs:
            break
    assert recs
    out = tmp_path / "t"
    shutil.copytree(base, out)
    _patch(out / f"rank-{rank:04d}" / "legs.bin", recs[-1] * REC + ELEM_START, "<Q",
           lambda v: 7)
    name = {20: "mesh_sync", 22: "mark_complete", 11: "peer_post", 12: "peer_wait"}[leaf]
    _fails(out, f"rank-{rank:04d}", f"record {recs[-1]}", "field elem_start",
           f"elem_start 7 on a {name} leg without elements (must be 0)")


def test_a_post_recv_carries_the_elements_of_the_transfer_it_receives(rdh8n_out, tmp_path):
    """INTER_RDH over 8 nodes, 6000 elements: rank 0's post_recv legs (records 1, 4, 7, 10,
    12, 14) receive [0, 3000), [0, 1500), [0, 750), [750, 1500), [1500, 3000), [3000, 6000)
    (recursive halving, then doubling: each the range the partner's rdh_copy sends, FORMATS
    §8 "Entries"; the whole entry as ``_rdh8n_rank0_legs`` works it out).  Record 10 moved to
    [0, 750) kept every count and the run."""
    legs = _legs(rdh8n_out, 0)
    model = _rdh8n_rank0_legs()
    assert len(legs) // REC == len(model)
    got = [(legs[i * REC + LEAF], struct.unpack_from("<Q", legs, i * REC + ELEM_START)[0],
            struct.unpack_from("<I", legs, i * REC + NUM_ELEMENTS)[0])
           for i in range(len(model))]
    assert got == [(RDH_LEAF[leaf], start, num) for leaf, start, num in model]
    posts = [i for i in range(len(legs) // REC) if legs[i * REC + LEAF] == 21]
    assert posts == RDH8N_POSTS == [1, 4, 7, 10, 12, 14]
    ranges = [struct.unpack_from("<Q", legs, i * REC + ELEM_START)[0] for i in posts]
    assert ranges == [model[i][1] for i in RDH8N_POSTS] == [0, 0, 0, 750, 1500, 3000]
    out = _copy(rdh8n_out, tmp_path)
    _patch(out / "rank-0000" / "legs.bin", 10 * REC + ELEM_START, "<Q", lambda v: 0)
    _fails(out, "rank-0000", "legs.bin", "record 10", "field elem_start",
           "post_recv of elements [0, 750) receives the transfer of rank",
           "rdh_copy of elements [750, 1500)")


def test_each_post_recv_receives_one_transfer(rdh8n_out, tmp_path):
    """Rank 0's post_recv legs of 1500 and 750 elements (records 4 and 7) made 2250 and 0:
    the entry still counts its receive entries' bytes (the check before), but neither
    carries the transfer it receives any more (FORMATS §3.2, §8 "Entries"); the first
    named is record 7's, which receives rank 128's recursive-halving send of [0, 750)."""
    out = _copy(rdh8n_out, tmp_path)
    p = out / "rank-0000" / "legs.bin"
    _patch(p, 4 * REC + NUM_ELEMENTS, "<I", lambda v: 2250)
    _patch(p, 7 * REC + NUM_ELEMENTS, "<I", lambda v: 0)
    _fails(out, "rank-0000", "legs.bin", "record 7", "field num_elements",
           "post_recv of elements [0, 0) receives the transfer of rank 128's rdh_reduce of "
           "elements [0, 750)")


def test_a_receive_without_its_post_recv_leg_is_caught(tmp_path):
    """A MESH reduce-scatter over ranks 0 and 128 (two nodes): rank 0 receives its block from
    rank 128 through the net proxy, posted by one post_recv leg (record 1).  Relabelled a
    mesh_sync without elements (leaf 20, elem_start and num_elements 0), the entry's check
    of its post_recv legs' count had nothing to count, and the run, which posts receives per
    entry, matched.  With no post_recv leg left to name, the error names the receive entry
    that has none: rank 0's net_dest.bin holds rank 128's one transfer of rank 0's block
    (2000 bf16 elements, 4000 contiguous bytes: one entry, record 0) and its terminator
    (record 1); the entry's legs are records 0..3 (mesh_send, the relabelled leg,
    mesh_reduce, mark_end)."""
    out = tmp_path / "o"
    meshcase.lower(meshcase.spec([[0, 128]], [("reduce_scatter", "bf16", "add", 4000)]), out,
                   algo="mesh", topology="trn2:nodes=2")
    assert _legs(out, 0)[1 * REC + LEAF] == 21
    p = out / "rank-0000" / "legs.bin"
    _patch(p, 1 * REC + LEAF, "<B", lambda v: 20)
    _patch(p, 1 * REC + ELEM_START, "<Q", lambda v: 0)
    _patch(p, 1 * REC + NUM_ELEMENTS, "<I", lambda v: 0)
    _fails(out, "rank-0000: rank 0, channel 0, artifact net_dest.bin, record 0: receive entry "
           "from rank 128 has no post_recv leg: entry 0 (legs.bin records [0, 4)) has 0 "
           "post_recv leg(s) on channel 0, its ops receive 1 transfer(s) there")



@pytest.mark.parametrize("relabel, into", [(1, 4), (7, 4), (14, 12)])
def test_a_receive_left_without_a_post_recv_by_a_shorter_entry_is_named(relabel, into,
                                                                        rdh8n_out, tmp_path):
    """INTER_RDH over 8 nodes: rank 0's entry 0 (legs.bin records 0..16, mark_end last) has
    6 post_recv legs (records 1, 4, 7, 10, 12, 14, ``_rdh8n_rank0_legs``: halving step s
    posts at 1 + 3s, one rdh_copy first and two rdh_reduce a step after it; doubling level k
    at 10 + 2k, after its rdh_copy) for 6 receive transfers, one a net op:
    recursive halving from ranks 512, 256, 128, then doubling from 128, 256, 512, each one
    receive entry and the op's terminator, so net_dest.bin records 0, 2, 4, 6, 8, 10 (FORMATS
    §8.2 "Terminator").  One post_recv relabelled a mesh_sync without elements, its elements
    moved onto another (the entry's post_recv bytes still its receive entries'): 5 legs post
    the first 5 transfers in order (FORMATS §3.2, §8 "Entries"), so the sixth, rank 512's
    (record 10), has none, and the error named it, not the entry's last post_recv leg."""
    legs = _legs(rdh8n_out, 0)
    entry = len(_rdh8n_rank0_legs())  # 17 records, mark_end last
    assert [i for i in range(entry) if legs[i * REC + LEAF] == 21] == RDH8N_POSTS
    assert relabel in RDH8N_POSTS and into in RDH8N_POSTS
    # each receive transfer one net_dest entry (its bytes contiguous) and its op's
    # terminator: the sixth's entry is record 2 x 5
    sixth = 2 * (len(RDH8N_POSTS) - 1)
    (moved,) = struct.unpack_from("<I", legs, relabel * REC + NUM_ELEMENTS)
    out = _copy(rdh8n_out, tmp_path)
    p = out / "rank-0000" / "legs.bin"
    _patch(p, relabel * REC + LEAF, "<B", lambda v: 20)
    _patch(p, relabel * REC + ELEM_START, "<Q", lambda v: 0)
    _patch(p, relabel * REC + NUM_ELEMENTS, "<I", lambda v: 0)
    _patch(p, into * REC + NUM_ELEMENTS, "<I", lambda v: v + moved)
    _fails(out, f"rank-0000: rank 0, channel 0, artifact net_dest.bin, record {sixth}: receive "
           f"entry from rank 512 has no post_recv leg: entry 0 (legs.bin records [0, {entry})) "
           f"has {len(RDH8N_POSTS) - 1} post_recv leg(s) on channel 0, its ops receive "
           f"{len(RDH8N_POSTS)} transfer(s) there")


def _swap_ops(p: Path, a: int, b: int) -> None:
    raw = bytearray(p.read_bytes())
    for off in (INC_RECV_HANDSHAKE, INC_RECV_COMPLETE):
        x = raw[a * OP + off:a * OP + off + 8]
        raw[a * OP + off:a * OP + off + 8] = raw[b * OP + off:b * OP + off + 8]
        raw[b * OP + off:b * OP + off + 8] = x
    p.write_bytes(bytes(raw))


def test_a_mesh_ops_receive_semaphores_swapped_on_one_rank_are_caught(tmp_path):
    """A MESH all-reduce over ranks 0 and 128 (two nodes): rank 0 has two ops (FORMATS §8.2's
    example), op 0 receives its scatter block on EVT_REDUCE_COPY_2 (9: semaphore 192 + 9 =
    201), which its mesh_reduce waits, op 1 the gathered block on EVT_INTER_GRP_BRDCST_2
    (11: 203), which its closing mesh_sync waits.  Swapped on rank 0 alone, the proxy's FIFO
    order still delivered everything in time: a match."""
    out = tmp_path / "o"
    meshcase.lower(meshcase.spec([[0, 128]], [("all_reduce", "bf16", "add", 4000)]), out,
                   algo="mesh", topology="trn2:nodes=2")
    assert cli("simulate", out).exit_code == 0
    p = out / "rank-0000" / "net_ops.bin"
    sems = [(struct.unpack_from("<Q", p.read_bytes(), k * OP + INC_RECV_COMPLETE)[0] & 0x3FF)
            // 4 for k in range(2)]
    assert sems == [201, 203]  # (the INC window's low bits: 4 bytes a semaphore)
    _swap_ops(p, 0, 1)
    _fails(out, "rank-0000", "channel 0", "net_ops.bin", "record 0", "field inc_recv_complete",
           "op 0's receives land on semaphore 203 (inc_recv_complete), but the first leg to "
           "read bytes they land on, mesh_reduce (legs.bin record 2), waits semaphore 201")


def test_rdh_ops_receive_semaphores_swapped_on_one_rank_are_caught(rdh8n_out, tmp_path):
    """INTER_RDH over 8 nodes: rank 0's op 2 receives recursive halving step 2's slot on
    EVT_RH_STEP_0 + 2 (23 + 2: semaphore 192 + 25 = 217), which its rdh_reduce (record 8)
    waits before it reads the slot; op 3 recursive doubling step 0's block on EVT_RD_STEP_0
    (34: 226).  Swapped on rank 0 alone the run matched (ops 0 and 5, 1 and 4 too; the other
    swaps race)."""
    out = _copy(rdh8n_out, tmp_path)
    assert cli("simulate", out, "--ignore-checksums").exit_code == 0
    _swap_ops(out / "rank-0000" / "net_ops.bin", 2, 3)
    _fails(out, "rank-0000", "net_ops.bin", "record 2", "field inc_recv_complete",
           "op 2's receives land on semaphore 226 (inc_recv_complete), but the first leg to "
           "read bytes they land on, rdh_reduce (legs.bin record 8), waits semaphore 217")


@pytest.mark.parametrize("sem, name", [(203, "semaphore 203"),
                                       (17, "semaphore 17 (channel 0 send_sema)")])
def test_a_mesh_op_without_receives_names_the_channels_recv_sema(tmp_path, monkeypatch, sem,
                                                                  name):
    """FORMATS §8.1: an op without receive entries names this rank's ``recv_sema`` of the
    channel, whatever the algorithm.  ``lower`` writes no such mesh op (a mesh exchange
    goes both ways), so this leaves one direction of a MESH all-gather over ranks 0 and 128
    (two nodes) out of the composer: rank 128 does not broadcast its block to rank 0, and
    rank 0 posts no receive and waits for none.  Rank 0's entry then only transmits: one op
    (tx_entry_cnt 1, rx_entry_cnt 0) whose inc_recv_* name semaphore 16 (16 + 4 x channel 0
    + recv_sema's role 0), INC-window address 0x82_8000_0000 + 0x1800 + 4 x 16 on TOP_SP 0
    (FORMATS §10); the run finds only rank 0's missing block, a mismatch.  Moved to an event
    (203 = 192 + 11) or to send_sema (17), the run was the same."""
    from nrtrewrite.compose import mesh as M
    from nrtrewrite.compose.leaves import Leaf

    composed = M.MeshAlgorithm.composed

    def one_way(self, topo, plan, rank):
        c, ir, edges = composed(self, topo, plan, rank)
        ir = ir.copy()
        if rank == 128:  # its broadcast to rank 0 (peer index 0 is the rank itself)
            used = np.arange(ir["dst_peer"].shape[1]) < ir["n_dst"][:, None]
            ir = ir[~((ir["leaf"] == int(Leaf.mesh_send))
                      & (used & (ir["dst_peer"] != 0)).any(axis=1))]
        else:  # rank 0: nothing to receive, nothing to wait for
            ir = ir[~np.isin(ir["leaf"], [int(Leaf.post_recv), int(Leaf.mesh_sync)])]
        ir["step"] = np.arange(ir.size)
        return c, ir, edges

    monkeypatch.setattr(M.MeshAlgorithm, "composed", one_way)
    out = tmp_path / "o"
    meshcase.lower(meshcase.spec([[0, 128]], [("all_gather", "bf16", "add", 4000)]), out,
                   algo="mesh", topology="trn2:nodes=2")
    p = out / "rank-0000" / "net_ops.bin"
    raw = p.read_bytes()
    assert len(raw) == OP
    assert struct.unpack_from("<II", raw, 40) == (1, 0)  # tx_entry_cnt, rx_entry_cnt
    inc = 0x82_8000_0000 + 0x1800 + 4 * 16
    assert struct.unpack_from("<QQ", raw, INC_RECV_HANDSHAKE) == (inc, inc)
    res = cli("simulate", out, "--json")
    doc = json.loads(res.stdout)
    assert res.exit_code == 1 and doc["error"] is None, res.output
    assert [t["status"] for t in doc["triggers"]] == ["mismatch"]
    assert doc["triggers"][0]["detail"].startswith("rank 0: 8000 byte(s) of the output were not")
    for off in (INC_RECV_HANDSHAKE, INC_RECV_COMPLETE):
        _patch(p, off, "<Q", lambda v: v + 4 * (sem - 16))
    _fails(out, "rank-0000: field inc_recv_complete, rank 0, channel 0, artifact net_ops.bin, "
           f"record 0: op 0 has no receive entries and names {name} (inc_recv_complete); an "
           "op without receives names this rank's semaphore 16 (channel 0 recv_sema), as a "
           "ring op does (FORMATS §8.1)")
