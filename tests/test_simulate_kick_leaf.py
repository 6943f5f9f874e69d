"""Tampers the simulator once took for a clean match, every one re-hashed so that the checksum
check passes: both TOPSP_KICK words of a 0xD9+0xDA pair and the kick's sync bytes (FORMATS
§9, the sync bytes against ``--model``), a leg's leaf from another algorithm's family or with
semaphores its leaf does not have (FORMATS §3, §3.2 - §3.4), ``elem_start`` past the
trigger's elements, the net-proxy credits (FORMATS §8.1) and the tp_inc_steps record in the
message.  Offsets are FORMATS.md's: a kick word is 64 bytes (opcode 0, length_dw 1, reserved
2..3, sync 4..11, spad_index 12..13, word 14..15, trigger 16..19, reserved 20..63); a leg
record is 64 bytes, ``leaf`` at 12, ``elem_start`` u64 at 48, ``num_elements`` u32 at 56; a
tp_inc_steps record 8 bytes, ``repeat`` u16 at 4; ``net_ops_info`` 96 bytes,
``initial_send_credits`` u32 at 52, ``ending_recv_credits`` at 56."""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
import warnings
from pathlib import Path

import numpy as np
import pytest

import chunkmodel as CM
import nrtrewrite.simulate.triggers as triggers_mod
from nrtrewrite.emit import formats as F
from nrtrewrite.neff.container import build_container, read_container
from nrtrewrite.simulate import simulate_output
from test_simulate import FIX, cli, coll_spec, lower_neff, lower_spec, two_node_spec

REC = WORD = 64
LEAF, ELEM_START, NUM_ELEMENTS = 12, 48, 56


# ---------------------------------------------------------------------------- helpers

def rehash(out: Path) -> None:
    """Record the sha256 of every file again, as ``lower`` would have (tamper looks genuine)."""
    top = json.loads((out / "manifest.json").read_text())

    def sha(p: Path) -> str:
        return hashlib.sha256(p.read_bytes()).hexdigest()
    for name in top["rank_manifests"]:
        mp = out / name / "manifest.json"
        man = json.loads(mp.read_text())
        for f, info in man["files"].items():
            info["sha256"] = sha(out / name / f)
            info["bytes"] = (out / name / f).stat().st_size
        mp.write_text(json.dumps(man, indent=1, sort_keys=True) + "\n")
        top["rank_manifests"][name] = sha(mp)
    top["output_neff"]["sha256"] = sha(out / top["output_neff"]["name"])
    (out / "manifest.json").write_text(json.dumps(top, indent=1, sort_keys=True) + "\n")


def copy(src: Path, tmp_path: Path, name: str = "t") -> Path:
    dst = tmp_path / name
    shutil.copytree(src, dst)
    return dst


def poke(path: Path, offset: int, data: bytes) -> bytes:
    b = bytearray(path.read_bytes())
    old = bytes(b[offset:offset + len(data)])
    b[offset:offset + len(data)] = data
    path.write_bytes(bytes(b))
    return old


def poke_neff(out: Path, member: str, offset: int, data: bytes) -> bytes:
    """Patch a member of the rewritten NEFF (the header's hash is recomputed)."""
    top = json.loads((out / "manifest.json").read_text())
    p = out / top["output_neff"]["name"]
    c = read_container(p.read_bytes())
    m = dict(c.members)
    s = bytearray(m[member])
    old = bytes(s[offset:offset + len(data)])
    s[offset:offset + len(data)] = data
    m[member] = bytes(s)
    p.write_bytes(build_container(c.header, m))
    return old


def refused(out: Path, *words: str, extra=()) -> str:
    """Simulated with its (re-hashed) checksums checked: a protocol error (exit 1), one line
    naming ``words``."""
    res = cli("simulate", out, "--json", *extra)
    assert res.exit_code == 1, res.output
    doc = json.loads(res.stdout)
    assert doc["ok"] is False and doc["error"] and "\n" not in doc["error"]
    for w in words:
        assert w in doc["error"], doc["error"]
    return doc["error"]


def legs(out: Path, rank: int) -> np.ndarray:
    return np.fromfile(out / f"rank-{rank:04d}" / "legs.bin", F.LEG_DTYPE)


def trigger0(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())["triggers"][0]


# ---------------------------------------------------------------------------- outputs

@pytest.fixture(scope="module")
def sbuf_out(tmp_path_factory) -> Path:
    """fixtures/sbuf.neff: SBUF triggers, each a 0xD9+0xDA pair, so two kick words."""
    return lower_neff(FIX / "sbuf.neff", tmp_path_factory.mktemp("sbuf") / "o")


@pytest.fixture(scope="module")
def ar2_out(tmp_path_factory) -> Path:
    """fixtures/ar2.neff as INTRA_RDH: mesh-overlay entries opening with mark_complete."""
    return lower_neff(FIX / "ar2.neff", tmp_path_factory.mktemp("ar2") / "o", algo="intra_rdh")


@pytest.fixture(scope="module")
def ring2n_out(tmp_path_factory) -> Path:
    """RING over ranks {0, 1} and {64, 65} on two nodes (LNC 2): net-proxy FIFOs."""
    return lower_spec(two_node_spec(num_elements=8192), tmp_path_factory.mktemp("r2n") / "o")


@pytest.fixture(scope="module")
def mesh_out(tmp_path_factory) -> Path:
    return lower_spec(coll_spec("all_reduce", "bf16", 8, 20000, lnc=2),
                      tmp_path_factory.mktemp("mesh") / "o", algo="mesh")


def test_untampered_outputs_simulate_clean(sbuf_out, ar2_out, ring2n_out, mesh_out):
    for out in (sbuf_out, ar2_out, ring2n_out, mesh_out):
        res = cli("simulate", out, "--json")
        assert res.exit_code == 0, res.output
    res = cli("simulate", ar2_out, "--json", "--model", FIX / "ar2.neff")
    assert res.exit_code == 0, res.output


# ---------------------------------------------------------------------------- F1: kick words

#: (field, first byte, a wrong value): every field of FORMATS §9 but the sync bytes
KICK_TAMPERS = [("opcode", 0, b"\x00"), ("length_dw", 1, b"\x08"), ("reserved", 2, b"\x01"),
                ("spad_index", 12, b"\x07\x00"), ("word", 14, None), ("trigger", 16, b"\x05"),
                ("reserved", 40, b"\xff")]


@pytest.mark.parametrize("w", [0, 1])
@pytest.mark.parametrize("field,at,value", KICK_TAMPERS)
def test_every_field_of_both_kick_words_is_checked(sbuf_out, tmp_path, w, field, at, value):
    t = trigger0(sbuf_out)
    assert "ap" in t["src"]  # a 0xD9+0xDA pair: words at index and index + 1
    member, idx = f"{t['subgraph']}/{t['engine']}.bin", t["index"] + w
    if value is None:  # word: 0 on the first, 1 on the second: give each the other's
        value = bytes([1 - w])
    out = copy(sbuf_out, tmp_path)
    old = poke_neff(out, member, idx * WORD + at, value)
    assert old != value
    rehash(out)
    refused(out, f"member {member}", f"instruction {idx}", f"offset {idx * WORD + at:#x}",
            f"field {field}", f"TOPSP_KICK word {w} of trigger 0 (its former "
            f"{'0xDA' if w else '0xD9'} word): {field} (byte")


def test_a_stream_cut_before_the_second_kick_word_is_refused(sbuf_out, tmp_path):
    """FORMATS §9: a former 0xD9+0xDA pair is two kick words, instructions ``index`` and
    ``index + 1`` of its stream. sbuf.yaml's trigger 0's stream cut after its first word
    (``index + 1`` whole 64-byte instructions) has no second: refused naming the member,
    the instruction and the trigger."""
    t = trigger0(sbuf_out)
    assert "ap" in t["src"]
    member, idx = f"{t['subgraph']}/{t['engine']}.bin", t["index"] + 1
    out = copy(sbuf_out, tmp_path)
    top = json.loads((out / "manifest.json").read_text())
    p = out / top["output_neff"]["name"]
    c = read_container(p.read_bytes())
    m = dict(c.members)
    assert len(m[member]) > idx * WORD
    m[member] = bytes(m[member][:idx * WORD])
    p.write_bytes(build_container(c.header, m))
    rehash(out)
    assert refused(out) == (f"{p}: member {member}, instruction {idx}, trigger 0: no instruction "
                            f"{idx} in {member} for TOPSP_KICK word 1 of trigger 0")


def test_a_trigger_whose_subgraph_the_neff_lacks_names_the_subgraph(ar2_out, tmp_path):
    """fixtures/ar2.yaml's one trigger is at sg00/sp instruction 2. Every manifest renaming
    sg00 to zz (re-hashed): the rewritten NEFF holds no zz, and the line says so, naming the
    kick word's place (it was ``no instruction 2 in zz/sp.bin for TOPSP_KICK word 0 of
    trigger 0``, which did not say the subgraph was missing)."""
    out = copy(ar2_out, tmp_path)
    for mp in [out / "manifest.json", *sorted(out.glob("rank-*/manifest.json"))]:
        text = mp.read_text()
        assert '"sg00"' in text
        mp.write_text(text.replace('"sg00"', '"zz"'))
    rehash(out)
    assert refused(out) == (f"{out / 'ar2.neff'}: trigger 0: the rewritten NEFF has no "
                            "subgraph zz, the trigger's: its TOPSP_KICK word should be "
                            "instruction 2 of zz/sp.bin")


def test_a_basic_block_id_of_a_subgraph_missing_from_the_index(ring2n_out):
    """FifoDecoder given a subgraph index without the trigger's subgraph (only through the
    API: the engine refuses such a trigger at its kick word first) names the missing
    subgraph; it said ``basic_block_id should be -1``, an index no output holds."""
    from nrtrewrite.errors import SimulationError
    from nrtrewrite.simulate.artifacts import load_rank_files
    from nrtrewrite.simulate.engine import Simulator
    from nrtrewrite.simulate.fifo import FifoDecoder
    from nrtrewrite.simulate.program import decode_rank

    sg = trigger0(ring2n_out)["subgraph"]
    sim = Simulator(ring2n_out, memory_check=False)
    sim.load_manifest()
    files = {r: load_rank_files(ring2n_out, sim.rank_manifests[r]) for r in sim.ranks}
    programs = {r: decode_rank(sim.layout, sim.triggers, files[r]) for r in sim.ranks}
    with pytest.raises(SimulationError) as exc:
        FifoDecoder(sim.layout, programs, files, {sg + "x": 0}).decode()
    assert exc.value.why == (f"subgraph {sg} (trigger 0's) is not in the rewritten NEFF's "
                             "subgraphs list, whose index basic_block_id holds")
    assert exc.value.where.field == "basic_block_id"
    assert exc.value.where.artifact == "net_ops.bin"


def test_the_testers_zeroed_second_kick_word(sbuf_out, tmp_path):
    t = trigger0(sbuf_out)
    member, idx = f"{t['subgraph']}/{t['engine']}.bin", t["index"] + 1
    out = copy(sbuf_out, tmp_path)
    poke_neff(out, member, idx * WORD, bytes(WORD))
    rehash(out)
    err = refused(out, f"instruction {idx}", "field opcode",
                  "opcode (byte 0) should be 0xa2, not 0x0")
    assert err.count("trigger 0:") == 1, err  # no "trigger 0: trigger 0:"


# ---------------------------------------------------------------------------- F2: sync bytes

def test_a_kick_spad_index_off_the_leaders_first_entry_says_both(ar2_out, tmp_path):
    """FORMATS §9: the kick's spad_index (u16 at 12) is the trigger's first SPAD entry on its
    leader. fixtures/ar2.yaml: one all-reduce over [[0, 1]] at sg00/sp instruction 2 (after
    ``nop: 2``), leader rank 0 (the group's smallest, FORMATS §2), its first entry 0 (no
    trigger before it). Set to 3, the message says what it should be, then what it is
    (CLI.md "Errors": ``should be 0, not 3``)."""
    out = copy(ar2_out, tmp_path)
    old = poke_neff(out, "sg00/sp.bin", 2 * WORD + 12, b"\x03\x00")
    assert old == b"\x00\x00"
    rehash(out)
    err = refused(out, "member sg00/sp.bin", "instruction 2", f"offset {2 * WORD + 12:#x}",
                  "field spad_index", "trigger 0")
    assert err.endswith("TOPSP_KICK word 0 of trigger 0: spad_index (bytes 12..13) should be 0, "
                        "not 3: the leader (rank 0) starts the trigger at that entry "
                        "(FORMATS §9)"), err


def test_kick_sync_bytes_are_checked_against_the_model(ar2_out, tmp_path):
    t = trigger0(ar2_out)
    member, idx = f"{t['subgraph']}/{t['engine']}.bin", t["index"]
    out = copy(ar2_out, tmp_path)
    old = poke_neff(out, member, idx * WORD + 4, bytes.fromhex("1405150701000000"))
    assert old == bytes(8)  # ar2.yaml's all-reduce carries no sync fields
    rehash(out)
    refused(out, f"member {member}", f"instruction {idx}", "field sync",
            "sync (bytes 4..11) should be 00 00 00 00 00 00 00 00 (the input model's sync bytes "
            "4..11), not 14 05 15 07 01 00 00 00",
            extra=("--model", FIX / "ar2.neff"))


def test_other_instructions_are_checked_against_the_model(ar2_out, tmp_path):
    t = trigger0(ar2_out)
    member = f"{t['subgraph']}/{t['engine']}.bin"
    other = 0 if t["index"] else 1  # an opaque instruction next to the trigger
    out = copy(ar2_out, tmp_path)
    poke_neff(out, member, other * WORD + 9, b"\x5a")
    rehash(out)
    refused(out, f"member {member}", f"offset {other * WORD + 9:#x}",
            f"byte {other * WORD + 9} (instruction {other}) differs from the input model's",
            extra=("--model", FIX / "ar2.neff"))


def test_a_json_member_that_differs_names_no_instruction(ar2_out, tmp_path):
    """A member that is no engine stream (def.json, neff.json) has no instructions: its
    differing byte is named without one (it was "byte 2 (instruction 0)")."""
    out = copy(ar2_out, tmp_path)
    old = poke_neff(out, "sg00/def.json", 2, b"\t")
    assert old != b"\t"
    rehash(out)
    err = refused(out, "member sg00/def.json", "offset 0x2",
                  "byte 2 differs from the input model's", extra=("--model", FIX / "ar2.neff"))
    assert "instruction" not in err, err


def test_members_in_another_order_are_named_so(ar2_out, tmp_path):
    out = copy(ar2_out, tmp_path)
    top = json.loads((out / "manifest.json").read_text())
    p = out / top["output_neff"]["name"]
    c = read_container(p.read_bytes())
    members = dict(reversed(list(c.members.items())))
    p.write_bytes(build_container(c.header, members))
    rehash(out)
    err = refused(out, "field members", "differ from the input model's (their order)",
                  extra=("--model", FIX / "ar2.neff"))
    assert "((" not in err, err


def test_model_must_be_the_outputs_input(ar2_out):
    res = cli("simulate", ar2_out, "--model", FIX / "sbuf.neff")
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    # (of another size than ar2.neff's: refused from it, since 2026-12-07)
    assert len(lines) == 1 and "field input.bytes" in lines[0] and "ar2.neff" in lines[0]
    res = cli("simulate", FIX / "ar2.neff", "--model", FIX / "ar2.neff")
    assert res.exit_code == 2 and "--model applies only" in res.output


# ---------------------------------------------------------------------------- F3: leaves

def _first_leg(out: Path, rank: int, leaf: int) -> int:
    return int(np.flatnonzero(legs(out, rank)["leaf"] == leaf)[0])


@pytest.mark.parametrize("case,rank,leaf,new,alg", [
    # send -> mesh_send and recv_reduce_send -> direct_reduce_send_kangaring in a RING entry
    # (same sdma_op, same semaphores: only the family says no)
    ("ring", 1, 1, 16, "RING"), ("ring", 1, 2, 10, "RING"),
    # mesh_reduce -> recv_reduce_copy and mesh_send -> rdh_copy in a MESH entry
    ("mesh", 3, 17, 3, "MESH"), ("mesh", 3, 16, 18, "MESH"),
])
def test_a_leaf_of_another_family_is_refused(ring2n_out, mesh_out, tmp_path, case, rank, leaf,
                                             new, alg):
    base = {"ring": ring2n_out, "mesh": mesh_out}[case]
    i = _first_leg(base, rank, leaf)
    out = copy(base, tmp_path)
    poke(out / f"rank-{rank:04d}" / "legs.bin", i * REC + LEAF, bytes([new]))
    rehash(out)
    refused(out, f"rank-{rank:04d}", "field leaf", f"rank {rank}", "artifact legs.bin",
            f"record {i}:", f"({new}) in a {alg} entry")


def test_post_recv_with_the_handshakes_semaphores_is_refused(ar2_out, tmp_path):
    """mark_complete -> post_recv (both mesh-overlay leaves without data): post_recv has no
    semaphores of its own (FORMATS §3.2), the handshake's entry_post increment is refused."""
    i = _first_leg(ar2_out, 1, 22)
    out = copy(ar2_out, tmp_path)
    poke(out / "rank-0001" / "legs.bin", i * REC + LEAF, bytes([21]))
    rehash(out)
    refused(out, "rank 1", "artifact sem.bin", "semaphore 9", "post_recv leg",
            f"legs.bin record {i}")


def test_mesh_sync_turned_post_recv_is_refused(mesh_out, tmp_path):
    i = _first_leg(mesh_out, 2, 20)
    out = copy(mesh_out, tmp_path)
    poke(out / "rank-0002" / "legs.bin", i * REC + LEAF, bytes([21]))
    rehash(out)
    refused(out, "rank 2", "artifact sem.bin", "post_recv leg", f"legs.bin record {i}")


# ---------------------------------------------------------------------------- F4: elem_start

def test_elem_start_bit_63_is_refused_before_any_arithmetic(ring2n_out, tmp_path):
    L = legs(ring2n_out, 1)
    i = int(np.flatnonzero(L["sdma_op"] != 0)[0])
    e0 = int(L["elem_start"][i])
    out = copy(ring2n_out, tmp_path)
    poke(out / "rank-0001" / "legs.bin", i * REC + ELEM_START + 7, b"\x80")
    rehash(out)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy overflow on the way
        res = simulate_output(out)
    assert not res.ok
    for w in ("field elem_start", "artifact legs.bin", f"record {i}:",
              f"elem_start {(1 << 63) + e0} with num_elements {int(L['num_elements'][i])} runs "
              "past the 8192 elements of trigger 0"):
        assert w in res.error, res.error


def test_num_elements_past_the_trigger_is_refused(ring2n_out, tmp_path):
    L = legs(ring2n_out, 1)
    i = int(np.flatnonzero(L["sdma_op"] != 0)[0])
    out = copy(ring2n_out, tmp_path)
    poke(out / "rank-0001" / "legs.bin", i * REC + NUM_ELEMENTS, struct.pack("<I", 8193))
    rehash(out)
    refused(out, "field num_elements", f"record {i}:",
            "num_elements should be at most 8192, the elements trigger 0 has, not 8193")


# ---------------------------------------------------------------------------- messages, credits

def test_tpinc_errors_name_the_record(ring2n_out, tmp_path):
    T = np.fromfile(ring2n_out / "rank-0001" / "tpinc.bin", F.TPINC_DTYPE)
    out = copy(ring2n_out, tmp_path)
    poke(out / "rank-0001" / "tpinc.bin", 0 * 8 + 4, struct.pack("<H", int(T["repeat"][0]) + 2))
    rehash(out)
    # the record changed is named, not its group's last (until 2026-12-07 `record {end}:
    # last_sync group 0 (records 0..{end}) expands to ...`)
    was = int(T["repeat"][0])
    refused(out, "artifact tpinc.bin", "record 0:", "field repeat",
            f"repeat should be {was}, not {was + 2}: legs.bin records 0..{was - 1} of entry 0 "
            "channel 0 have")


@pytest.mark.parametrize("field,at", [("initial_send_credits", 52), ("ending_recv_credits", 56)])
@pytest.mark.parametrize("value", [7, 9])
def test_credits_are_exactly_eight(ring2n_out, tmp_path, field, at, value):
    rank = next(r for r in (0, 1, 64, 65)
                if (ring2n_out / f"rank-{r:04d}" / "net_ops.bin").stat().st_size)
    out = copy(ring2n_out, tmp_path)
    old = poke(out / f"rank-{rank:04d}" / "net_ops.bin", at, struct.pack("<I", value))
    assert struct.unpack("<I", old)[0] == 8
    rehash(out)
    refused(out, f"rank {rank}", "artifact net_ops.bin", "record 0", f"field {field}",
            f"{field} should be 8, not {value}")


def test_a_model_with_trailing_zero_bytes_is_its_outputs_input(tmp_path):
    """NEFF-LIKE.md §1 allows zero bytes after the payload. The manifest's ``input`` recorded
    the header's header_size + data_size as ``bytes`` beside the SHA-256 of the whole file,
    so ``simulate OUT --model`` refused the very model OUT was lowered from."""
    model = tmp_path / "z.neff"
    data = (FIX / "ar2.neff").read_bytes() + bytes(5000)
    model.write_bytes(data)
    out = tmp_path / "out"
    assert cli("lower", "-q", model, "-o", out).exit_code == 0
    inp = json.loads((out / "manifest.json").read_text())["input"]
    assert inp == {"name": "z.neff", "sha256": hashlib.sha256(data).hexdigest(),
                   "bytes": len(data)}
    res = cli("simulate", out, "--json", "--model", model)
    assert res.exit_code == 0, res.output


def test_an_older_outputs_payload_size_still_names_its_model(tmp_path):
    """An nrtrewrite before 2026-12-01 recorded ``input.bytes`` as the payload's end (the
    header's header_size + data_size: ar2.neff's own length here, it has no trailing bytes)
    for a model with zero bytes after its payload; ``simulate --model`` takes that model (its
    sha256 is the recorded one).  A model of neither size is refused from its size in one
    line naming ``input.bytes`` and both sizes, before any byte is hashed (so not knowing
    whether its sha256 is the recorded one: the line says the model or the manifest is not
    the lowering's; here it is the manifest, edited).  Bytes past the payload's end that are
    not zero are refused at the first one, naming ``input.bytes`` and its offset."""
    model = tmp_path / "z.neff"
    data = (FIX / "ar2.neff").read_bytes() + bytes(5000)
    model.write_bytes(data)
    out = tmp_path / "out"
    assert cli("lower", "-q", model, "-o", out).exit_code == 0
    man = out / "manifest.json"
    top = json.loads(man.read_text())
    top["input"]["bytes"] = len((FIX / "ar2.neff").read_bytes())  # as the older tool wrote
    man.write_text(json.dumps(top, indent=2))
    res = cli("simulate", out, "--json", "--model", model)
    assert res.exit_code == 0, res.output
    top["input"]["bytes"] = len(data) - 1
    man.write_text(json.dumps(top, indent=2))
    res = cli("simulate", out, "--model", model)
    assert res.exit_code == 2
    lines = res.output.strip().splitlines()
    # (neither input.bytes nor the payload's end: refused from the size before any byte is
    # hashed, since 2026-12-07; until then hashed whole first, then ``the model's sha256 is
    # the one ... but not its size``)
    assert len(lines) == 1 and lines[0].startswith(
        f"nrtrewrite: error: {model}: field input.bytes: the model's size should be "
        f"{len(data) - 1} bytes, the size the input {out}/manifest.json records "), res.output
    assert lines[0].endswith(
        f"), not {len(data)} (refused from its size, before any byte is hashed): either the "
        f"model is not the one {out} was lowered from or {out}/manifest.json was edited"
    ), res.output
    top["input"]["bytes"] = None
    man.write_text(json.dumps(top, indent=2))
    res = cli("simulate", out, "--model", model)
    # (a null is a value of another type: since 2026-12-06 refused as such, as every typed key)
    assert res.exit_code == 2 and res.output.endswith(
        "manifest.json: field input.bytes: must be an integer, not null\n"), res.output
    # the payload's end beside bytes after it that are not zero: no lowering recorded that
    # (only zero bytes may follow the payload, NEFF-LIKE.md §1), so no older output's either
    bad = tmp_path / "nz.neff"
    nz = (FIX / "ar2.neff").read_bytes() + b"\x01" * 16
    bad.write_bytes(nz)
    top["input"].update(sha256=hashlib.sha256(nz).hexdigest(),
                        bytes=len((FIX / "ar2.neff").read_bytes()))
    man.write_text(json.dumps(top, indent=2))
    res = cli("simulate", out, "--model", bad)
    # (the first of them, at ar2.neff's length: since review 52l refused there, before the
    # rest is hashed)
    assert res.exit_code == 2 and res.output.startswith(
        f"nrtrewrite: error: {bad}: field input.bytes: the model's byte at offset "
        f"{len((FIX / 'ar2.neff').read_bytes())}, past the payload's end its header puts at "
        ), res.output
    assert "should be zero (only zero bytes may follow the payload), not 0x01 " in res.output


def _bad_hash_model(tmp_path: Path) -> Path:
    """ar2.neff with the first byte of its header hash flipped."""
    from nrtrewrite.neff.container import HEADER_FIELDS
    data = bytearray((FIX / "ar2.neff").read_bytes())
    off, _size = HEADER_FIELDS["hash"]
    data[off] ^= 0xFF
    model = tmp_path / "h.neff"
    model.write_bytes(bytes(data))
    return model


def test_simulate_a_model_with_a_bad_header_hash_with_no_verify_hash(tmp_path):
    """CLI.md "simulate": given MODEL.neff, it is lowered with `--no-verify-hash` "as for
    `lower`": a model whose header hash is wrong simulates (exit 0, the warning once on
    stderr); without the option it is refused (exit 2)."""
    model = _bad_hash_model(tmp_path)
    res = cli("simulate", model, "--no-verify-hash")
    assert res.exit_code == 0, res.output
    assert res.stderr == (f"nrtrewrite: warning: {model}: header hash not verified "
                          "(--no-verify-hash)\n")
    res = cli("simulate", model)
    assert res.exit_code == 2 and "hash" in res.stderr


def test_an_output_of_a_model_with_a_bad_header_hash_can_be_checked_against_it(tmp_path):
    """``lower --no-verify-hash`` lowers a model whose header hash is wrong; ``simulate OUT
    --model M`` read M with the hash check and refused it, with no way to skip it
    (``--no-verify-hash`` was refused with OUT). Now it may be given with ``--model``: M is
    still bound to OUT by the manifest's sha256."""
    model = _bad_hash_model(tmp_path)
    out = tmp_path / "out"
    assert cli("lower", "-q", "--no-verify-hash", model, "-o", out).exit_code == 0
    res = cli("simulate", out, "--model", model)
    assert res.exit_code == 2 and "hash" in res.stderr
    res = cli("simulate", out, "--model", model, "--no-verify-hash")
    assert res.exit_code == 0, res.output
    assert res.stderr == (f"nrtrewrite: warning: {model}: header hash not verified "
                          "(--no-verify-hash)\n")
    res = cli("simulate", out, "--no-verify-hash")
    assert res.exit_code == 2 and "applies only when a MODEL.neff is given" in res.stderr


# ------------------------------------------- mutation audit round 6: triggers against the model

def _retrigger(out: Path, k: int, fn) -> None:
    top = json.loads((out / "manifest.json").read_text())
    fn(top["triggers"][k])
    (out / "manifest.json").write_text(json.dumps(top, indent=1, sort_keys=True) + "\n")


@pytest.mark.parametrize("member_kind", ["stream", "json"])
def test_a_member_longer_than_the_models_is_refused_with_the_model(ar2_out, tmp_path,
                                                                   member_kind):
    """FORMATS §9: with ``--model`` every member of the rewritten NEFF but the kick words is
    the input's byte for byte. ar2's ``sg00/sp.bin`` (an instruction stream) with one 64-byte
    instruction of zeros appended, or its ``sg00/def.json`` with a space appended, is
    refused naming the member and both lengths (the stream ended the run with an internal
    error, exit 70: a TypeError formatting the instruction of a difference it had not
    located)."""
    out = copy(ar2_out, tmp_path)
    top = json.loads((out / "manifest.json").read_text())
    p = out / top["output_neff"]["name"]
    c = read_container(p.read_bytes())
    m = dict(c.members)
    member, extra = (("sg00/sp.bin", bytes(64)) if member_kind == "stream"
                     else ("sg00/def.json", b" "))
    size = len(m[member])
    m[member] = bytes(m[member]) + extra
    p.write_bytes(build_container(c.header, m))
    rehash(out)
    assert refused(out, extra=("--model", FIX / "ar2.neff")) == (
        f"{p}: member {member}: the member should be {size} bytes, the input model's, not "
        f"{size + len(extra)}: only the trigger words are rewritten (FORMATS §9)")


def test_a_src_access_pattern_other_than_the_models_is_refused_with_the_model(
        sbuf_out, tmp_path):
    """SIMULATOR §1: with ``--model`` the manifest's triggers must be the model's, operands
    included (FORMATS §1.1 ``src``: ``var_id``, ``offset``, ``ap``). sbuf.yaml's trigger 1
    reads 8 rows of 64 elements (dims [[1, 64], [128, 8]]); its third dim counts 1, so giving
    it another step names the same elements and the run still matches, but it is not the
    model's access pattern. A simulator that compared only ``var_id`` and ``offset`` passed
    (and one that compared the model's whole operand with those two refused the clean output)."""
    res = cli("simulate", sbuf_out, "--json", "--model", FIX / "sbuf.neff")
    assert res.exit_code == 0, res.output
    out = copy(sbuf_out, tmp_path)
    t = json.loads((out / "manifest.json").read_text())["triggers"][1]
    assert t["src"]["ap"]["dims"][2][1] == 1
    _retrigger(out, 1, lambda t: t["src"]["ap"]["dims"][2].__setitem__(0, 5))
    rehash(out)
    refused(out, "field triggers[1]: the manifest's src should be ",
            "the model's trigger 1's, not",
            extra=("--model", FIX / "sbuf.neff"))


@pytest.mark.parametrize("key", ["index", "engine"])
def test_a_trigger_instruction_other_than_the_models_is_named(ar2_out, tmp_path, key):
    """SIMULATOR §1: with ``--model`` the manifest's triggers must be the model's
    (instruction: engine and index); a manifest naming another instruction is refused as that,
    the field named (not only through the kick word it then fails to find)."""
    out = copy(ar2_out, tmp_path)
    new = {"index": lambda t: t["index"] + 1, "engine": lambda t: t["engine"] + "x"}[key]
    _retrigger(out, 0, lambda t: t.__setitem__(key, new(t)))
    rehash(out)
    refused(out, f"field triggers[0]: the manifest's {key} should be ",
            "the model's trigger 0's, not",
            extra=("--model", FIX / "ar2.neff"))


@pytest.mark.parametrize("k, key, value, says", [
    (0, "dtype", "FP16", 'dtype should be "BF16", the model\'s trigger 0\'s, not "FP16"'),
    (0, "alu_op", "MAX", 'alu_op should be "ADD", the model\'s trigger 0\'s, not "MAX"'),
    (2, "subgraph", "sg01", 'subgraph should be "sg00", the model\'s trigger 2\'s, not "sg01"'),
    (2, "src", {"var_id": 6, "offset": 0},
     'src should be {"offset": 64, "var_id": 6}, the model\'s trigger 2\'s, not {"offset": 0, '
     '"var_id": 6}'),
])
def test_a_trigger_other_than_the_models_is_worded_as_the_manifest_writes_it(
        mix8_ring_out, tmp_path, k, key, value, says):
    """SIMULATOR §1: with ``--model`` the manifest's triggers must be the model's; a mismatch
    gives both values as the manifest's JSON writes them (FORMATS §1.1: ``dtype`` and
    ``alu_op`` by name, an operand an object). mix8.yaml's
    trigger 0 is a bf16 ADD all-reduce, trigger 2 an fp16 all-gather of var 6
    (``ag_small_in``, the seventh var of sg00) at byte offset 64. The message gave Python's
    reprs (``<DType.FP16: 7>``, ``'ADD'``, ``None``, ``{'var_id': 6, ...}``). The line names
    the trigger as the other trigger checks do, ``field triggers[k]`` (it said ``field
    dtype, trigger 0``), and the model's trigger by its ordinal. (An all-gather's ``alu_op``
    other than null, ``alu_op = "ADD", the model's trigger 2 has null`` here until
    2026-12-05, is refused before, as FORMATS §1.1 does not allow it:
    :func:`test_an_all_gathers_alu_op_other_than_null_is_refused`.)"""
    out = copy(mix8_ring_out, tmp_path)
    _retrigger(out, k, lambda t: t.__setitem__(key, value))
    rehash(out)
    assert refused(out, extra=("--model", FIX / "mix8.neff")) == (
        f"{out / 'manifest.json'}: field triggers[{k}]: the manifest's {says}")


def test_a_trigger_other_than_the_models_is_named_where_the_manifest_lists_it(
        mix8_ring_out, tmp_path):
    """The key path is the manifest's (``triggers[i]``, the list's order), the model's
    trigger its ordinal: mix8's triggers 0 and 1 listed the other way round (the simulator
    takes them by ordinal), trigger 0 with dtype FP16, is ``triggers[1]`` of the manifest and
    trigger 0 (a bf16 all-reduce) of the model."""
    out = copy(mix8_ring_out, tmp_path)
    top = json.loads((out / "manifest.json").read_text())
    first, second = top["triggers"][:2]
    assert (first["trigger"], second["trigger"], first["dtype"]) == (0, 1, "BF16")
    top["triggers"][:2] = [second, dict(first, dtype="FP16")]
    (out / "manifest.json").write_text(json.dumps(top, indent=1, sort_keys=True) + "\n")
    rehash(out)
    assert refused(out, extra=("--model", FIX / "mix8.neff")) == (
        f"{out / 'manifest.json'}: field triggers[1]: the manifest's dtype should be \"BF16\", "
        "the model's trigger 0's, not \"FP16\"")


def test_a_long_value_of_a_trigger_other_than_the_models_keeps_its_start_and_end():
    """A value of a model mismatch past 300 characters (a replica group of many ranks) is
    cut in the middle, so the model's value still shows after it: the JSON of ranks 0..199
    is 10 one-digit, 90 two-digit and 100 three-digit numbers (490 characters), 199
    separators of two and two brackets, 890 characters."""
    from nrtrewrite.errors import json_text
    text = json_text(list(range(200)))
    assert text.startswith("[0, 1, 2, 3, ") and text.endswith(", 198, 199]")
    assert "(890 characters in all)" in text and len(text) < 320


def _rank0_bds(out: Path) -> tuple[Path, np.ndarray, np.ndarray]:
    """Rank 0's dma.bin (its path, its records writable) and each BD's address inside its
    core's window (FORMATS §10: the low 36 bits; SBUF from 0x8_0000_0000 = 1 << 35)."""
    path = out / "rank-0000" / "dma.bin"
    bds = np.frombuffer(bytearray(path.read_bytes()), F.ARTIFACTS["dma.bin"][0])
    return path, bds, (bds["buf_ptr"] & np.uint64((1 << 36) - 1)).astype(np.int64)


def test_an_sbuf_address_one_partition_past_its_var_is_refused(sbuf_out, tmp_path):
    """FORMATS §10: SBUF partition p of a var is at ``(lc << 36) + 0x8_0000_0000 + p *
    sbuf_partition_stride + offset``; sbuf.yaml's vars have 128 partitions (0..127), so a BD
    moved from partition 127 one stride up names partition 128, in no region. A simulator that
    let the partition equal the count took the address (into storage past the var's)."""
    out = copy(sbuf_out, tmp_path)
    stride = json.loads((out / "manifest.json").read_text())["memory"]["sbuf_partition_stride"]
    path, bds, w = _rank0_bds(out)
    (cand,) = np.nonzero((w >= 1 << 35) & ((w - (1 << 35)) // stride == 127))
    i = int(cand[0])
    bds["buf_ptr"][i] += np.uint64(stride)
    path.write_bytes(bds.tobytes())
    rehash(out)
    refused(out, "record", "maps to no region of the memory map")


def test_an_sbuf_bd_one_byte_past_its_var_in_the_partition_is_refused(sbuf_out, tmp_path):
    """FORMATS §10 / SIMULATOR §3: a transfer lies inside its region; in SBUF that is the
    var's bytes ``[offset, offset + size)`` of the partition. A BD that ends exactly at the
    end of its var in its partition, moved up one byte, runs one byte past it. A simulator
    whose end check was off by one byte took the address."""
    out = copy(sbuf_out, tmp_path)
    mem = json.loads((out / "manifest.json").read_text())["memory"]
    stride = mem["sbuf_partition_stride"]
    ends = {r["offset"] + r["size"] for r in mem["regions"] if r["kind"] == "sbuf"}
    path, bds, w = _rank0_bds(out)
    q = (w - (1 << 35)) % stride + (bds["len_ctrl"] & 0xFFFF).astype(np.int64)
    i = int(np.flatnonzero((w >= 1 << 35) & np.isin(q, sorted(ends)))[0])
    bds["buf_ptr"][i] += np.uint64(1)
    path.write_bytes(bds.tobytes())
    rehash(out)
    refused(out, "record", "runs past the end of its region")


def test_an_access_pattern_of_more_elements_than_the_op_is_refused(sbuf_out, tmp_path):
    """FORMATS §1.1 ``src.ap``: ``partition_count`` x the three dims' counts are the operand's
    elements, the op's ``num_elements``. sbuf.yaml's trigger 0 reads 128 partitions x 768;
    its third dim counting 2 instead of 1 describes twice that. A simulator that only refused
    patterns of fewer elements read the first half and passed."""
    out = copy(sbuf_out, tmp_path)
    t = trigger0(out)
    assert t["src"]["ap"]["dims"][2][1] == 1
    _retrigger(out, 0, lambda t: t["src"]["ap"]["dims"][2].__setitem__(1, 2))
    rehash(out)
    refused(out, "src access pattern covers", "the op needs")


def test_an_access_pattern_of_fewer_partitions_than_the_op_is_refused_naming_its_key(
        sbuf_out, tmp_path):
    """FORMATS §1.1 ``src.ap``: ``partition_count`` x the dims' counts are the op's elements.
    sbuf.yaml's trigger 0 reads 128 partitions x 768 = 98304; its ``partition_count`` made 64
    covers 64 x 768 = 49152.  The refusal names the key, ``triggers[0].src.ap``, and both
    counts."""
    out = copy(sbuf_out, tmp_path)
    t = trigger0(out)
    assert (t["src"]["ap"]["partition_count"], t["src"]["ap"]["dims"]) == (
        128, [[1, 768], [0, 1], [0, 1]])
    _retrigger(out, 0, lambda t: t["src"]["ap"].__setitem__("partition_count", 64))
    rehash(out)
    assert refused(out) == (f"{out / 'manifest.json'}: field triggers[0].src.ap: src access "
                            "pattern covers 49152 elements, the op needs 98304")


# ------------------------------- mutation audit round 7: the trigger manifest's own checks

@pytest.fixture(scope="module")
def ag33_out(tmp_path_factory) -> Path:
    """bf16 all-gather of 33 elements a rank over ranks 0 and 1, RING. docs/DESIGN.md
    "Chunking": each 33-element block is one chunk group (one channel: 33 // 64 = 0 gives at
    least 1), the chunk 33 rounded up to 32 = 64, the tail group's chunk re-clamped to 33
    rounded up to 2 = 34: halves of 17, H0 [0, 17) and H1 [17, 33) clamped to the block's 33
    elements (block 1: [33, 50), [50, 66))."""
    return lower_spec(coll_spec("all_gather", "bf16", 2, 33), tmp_path_factory.mktemp("ag") / "o")


def test_an_operand_one_element_longer_than_its_var_is_refused(ring2n_out, tmp_path):
    """FORMATS §1.1: a linear operand is ``num_elements`` x dtype size bytes from ``offset``
    of its var. ring2n's all-reduce reads 8192 bf16 from offset 0 of ``x_in``, a var of
    16384 bytes; a manifest saying 8193 elements makes that 16386 bytes, one element past
    the var. A simulator whose fit check allowed one element more took it and crashed
    (an internal error, exit 70) running it."""
    out = copy(ring2n_out, tmp_path)
    size = next(r["size"] for r in json.loads((out / "manifest.json").read_text())["memory"]
                ["regions"] if r["name"] == "x_in")
    assert size == 8192 * 2 and trigger0(out)["src"]["offset"] == 0
    _retrigger(out, 0, lambda t: t.__setitem__("num_elements", 8193))
    rehash(out)
    refused(out, "field triggers[0].src.offset: src operand (8193 elements at offset 0) does not "
            "fit var \"x_in\"")


@pytest.mark.parametrize("case", ["ap-on-a-dram-var", "past-its-var"])
def test_an_operand_refused_where_it_is_placed_names_the_manifest(
        sbuf_out, ring2n_out, tmp_path, case):
    """An operand's placement is the top manifest's (FORMATS §1.1 ``src``, ``memory``): an
    access pattern (NEFF-LIKE.md §2: SBUF operands only) on a DRAM var, and a linear operand
    one element past its var (ring2n's 8192 bf16 of a 16384-byte ``x_in``, made 8193), are
    refused naming OUT/manifest.json, the operand and the trigger (they named no file). The
    DRAM var is one added to sbuf.yaml's map (var 99, 1 MiB at 1 MiB, past its scratch)."""
    if case == "ap-on-a-dram-var":
        out = copy(sbuf_out, tmp_path)
        top = json.loads((out / "manifest.json").read_text())
        top["memory"]["regions"].append({"kind": "dram", "name": "x_dram", "offset": 1 << 20,
                                         "size": 1 << 20, "partitions": 1, "subgraph": "sg00",
                                         "var_id": 99})
        assert top["triggers"][1]["src"]["ap"] is not None
        top["triggers"][1]["src"]["var_id"] = 99
        (out / "manifest.json").write_text(json.dumps(top, indent=1, sort_keys=True) + "\n")
        says = ("field triggers[1].src.ap: src operand has an access pattern but var \"x_dram\" "
                "is not a state buffer")
    else:
        out = copy(ring2n_out, tmp_path)
        _retrigger(out, 0, lambda t: t.__setitem__("num_elements", 8193))
        says = ("field triggers[0].src.offset: src operand (8193 elements at offset 0) does "
                "not fit var \"x_in\"")
    rehash(out)
    assert refused(out) == f"{out / 'manifest.json'}: {says}"


def test_an_operand_refusal_names_the_key_path_where_the_manifest_lists_the_trigger(
        mix8_ring_out, tmp_path):
    """An operand that does not fit its var is named by the key path of the value at fault,
    ``triggers[i].dst.offset`` (the list's position, as every other refusal of a trigger's
    values names it; it said ``field dst, trigger 0``). mix8.yaml's trigger 0 all-reduces
    4 MiB of bf16, 2097152 elements, into ``ar_bf16_out`` (4 MiB = 4194304 bytes); listed
    second, after trigger 1, with its dst at offset 2 it ends at 2 + 4194304 bytes, past
    the var."""
    out = copy(mix8_ring_out, tmp_path)
    top = json.loads((out / "manifest.json").read_text())
    first, second = top["triggers"][:2]
    assert (first["trigger"], second["trigger"], first["dst"]["offset"]) == (0, 1, 0)
    first["dst"]["offset"] = 2
    top["triggers"][:2] = [second, first]
    (out / "manifest.json").write_text(json.dumps(top, indent=1, sort_keys=True) + "\n")
    rehash(out)
    assert refused(out) == (
        f"{out / 'manifest.json'}: field triggers[1].dst.offset: dst operand (2097152 elements "
        "at offset 2) does not fit var \"ar_bf16_out\"")


def test_an_sbuf_operand_without_an_access_pattern_is_refused_naming_its_ap(
        sbuf_out, tmp_path):
    """FORMATS §1.1: an SBUF operand has an ``ap`` (its place in the var's partitions).
    sbuf.yaml's trigger 0 reads ``sb_a``, a state buffer; without ``ap`` it was refused as
    ``field src, trigger 0: src operand (98304 elements at offset 0) does not fit var
    'sb_a'``, as though it were too long. It names the missing ``ap``."""
    out = copy(sbuf_out, tmp_path)
    assert trigger0(out)["src"]["ap"] is not None
    _retrigger(out, 0, lambda t: t["src"].pop("ap"))
    rehash(out)
    assert refused(out) == (
        f"{out / 'manifest.json'}: field triggers[0].src.ap: src operand has no access "
        "pattern but var \"sb_a\" is a state buffer (an SBUF operand's place is its ap: "
        "FORMATS §1.1)")


def test_an_access_pattern_whose_last_element_starts_at_the_partitions_end_is_refused(
        sbuf_out, tmp_path):
    """FORMATS §1.1 ``ap`` / NEFF-LIKE.md §2: element (i0, i1, i2) of partition p lies at
    byte ``start + (i0 s0 + i1 s1 + i2 s2) x dtype size`` of the partition. sbuf.yaml's
    trigger 0 reads 768 bf16 a partition with step 1 from a 2 KiB (2048-byte) var: with
    ``start`` 514 its last element starts at 514 + 767 x 2 = 2048, the first byte past the
    var in the partition. A simulator that checked only where the last element starts, not
    where it ends, took it and crashed running it."""
    out = copy(sbuf_out, tmp_path)
    assert trigger0(out)["src"]["ap"]["dims"][0] == [1, 768]
    _retrigger(out, 0, lambda t: t["src"]["ap"].__setitem__("start", 514))
    rehash(out)
    refused(out, "field triggers[0].src.ap: src access pattern runs outside var \"sb_a\"")


def test_an_access_pattern_reaching_partition_128_of_a_128_partition_var_is_refused(
        sbuf_out, tmp_path):
    """NEFF-LIKE.md §2: an access pattern covers partitions ``partition_start`` ..
    ``partition_start + partition_count - 1``. sbuf.yaml's trigger 0 reads all 128 partitions
    (0..127) of ``sb_a``; starting at partition 1 it names 1..128, and a 128-partition var has
    no partition 128. A simulator that let the partition equal the count took it and crashed
    running it."""
    out = copy(sbuf_out, tmp_path)
    assert trigger0(out)["src"]["ap"]["partition_count"] == 128
    _retrigger(out, 0, lambda t: t["src"]["ap"].__setitem__("partition_start", 1))
    rehash(out)
    refused(out, "field triggers[0].src.ap: src access pattern runs outside var \"sb_a\"")


# sbuf.yaml's trigger 0: a bf16 all-reduce of 128 partitions x 768 elements (dims [[1, 768],
# [0, 1], [0, 1]], start 0) from sb_a into sb_b, each var 2048 bytes x 128 partitions.
HUGE_PATTERNS = [
    # 2^55 elements a partition with step 1 (2^62 in all): the extent is 2^55 x 2 bytes
    ({"num_elements": 128 << 55, "src": [1, 1 << 55], "dst": [1, 1 << 55]},
     "field triggers[0].src.ap: src access pattern runs outside var \"sb_a\": bytes [0, "
     "72057594037927936) of partitions [0, 128), the var has 2048 bytes x 128 partitions"),
    # ... with step 0: one element's bytes [0, 2), read (the src may) and written (the dst
    # may not) 2^55 times a partition
    ({"num_elements": 128 << 55, "src": [0, 1 << 55], "dst": [0, 1 << 55]},
     "field triggers[0].dst.ap.dims: dst access pattern writes 36028797018963968 elements a "
     "partition into the 1 element places of its extent (bytes [0, 2)): two of them would "
     "write the same bytes"),
    # partitions -1 .. 126 (the element offsets of partition -1 wrapped to the var's end)
    ({"src_partition_start": -1},
     "field triggers[0].src.ap: src access pattern runs outside var \"sb_a\": bytes [0, 1536) "
     "of "
     "partitions [-1, 127), the var has 2048 bytes x 128 partitions"),
    # -128 partitions x -768: the op's 98304 elements, but no pattern has a negative count
    # (and the extent from the dims holds for counts of 1 or more only)
    ({"src_partition_count": -128, "src": [1, -768]},
     "field triggers[0].src.ap.partition_count: src access pattern has partition_count -128 "
     "and dims nums -768, 1, 1: each must be 1 or more (NEFF-LIKE.md §2)"),
    # partition_count as it was (128), the innermost num 0: the dims are at fault
    ({"src_dims0": [1, 0]},
     "field triggers[0].src.ap.dims: src access pattern has partition_count 128 and dims nums "
     "0, 1, 1: each must be 1 or more (NEFF-LIKE.md §2)"),
]


@pytest.mark.parametrize("change, error", HUGE_PATTERNS,
                         ids=["2^62", "2^62-step-0", "partition-minus-1", "negative-counts",
                              "num-0"])
def test_an_access_pattern_outside_its_var_is_refused_before_anything_is_allocated(
        sbuf_out, tmp_path, change, error):
    """NEFF-LIKE.md §2: an access pattern's extent follows from its dims; a pattern of 2^62
    elements (a manifest can say so: FORMATS §1.1 integers are 64-bit) reached
    ``np.arange(2^62)`` before its extent was compared with its var: an internal error
    (exit 70; 2^47 elements: out of memory, exit 71). It is a protocol error naming the
    operand, found from the dims alone, for both operands before either is built (the dst's
    elements bound the src's)."""
    out = copy(sbuf_out, tmp_path)
    assert trigger0(out)["src"]["ap"]["dims"] == [[1, 768], [0, 1], [0, 1]]

    def edit(t):
        if "num_elements" in change:
            t["num_elements"] = change["num_elements"]
            for which in ("src", "dst"):
                t[which]["ap"]["dims"][0] = change[which]
        if "src_partition_start" in change:
            t["src"]["ap"]["partition_start"] = change["src_partition_start"]
        if "src_partition_count" in change:
            t["src"]["ap"]["partition_count"] = change["src_partition_count"]
            t["src"]["ap"]["dims"][0] = change["src"]
        if "src_dims0" in change:
            t["src"]["ap"]["dims"][0] = change["src_dims0"]
    _retrigger(out, 0, edit)
    rehash(out)
    assert refused(out) == f"{out / 'manifest.json'}: {error}"


# sbuf.yaml's trigger 0 again: dst patterns of its 768 bf16 elements a partition that fit
# sb_b (1024 element places a partition) and do not outnumber their extent's places, yet
# write two elements to the same bytes (element (i0, i1, i2) at start + (i0 s0 + i1 s1 +
# i2 s2) x 2; e = i0 + n0 (i1 + n1 i2)); the first element that meets an earlier one, by hand.
SELF_OVERLAPS = [
    # rows of 128 elements 126 apart: extent 127 + 252 + 400 + 1 = 780 places; element 128
    # (i1 = 1) lands on element 126's place 126: bytes [252, 254)
    ({"dims": [[1, 128], [126, 3], [400, 2]]}, 126, 128, (252, 254)),
    # a step-0 dim under rows of 128 elements 2 apart: extent 254 + 600 + 1 = 855 places;
    # elements 0 and 1 (i0 = 0, 1) both at place 0
    ({"dims": [[0, 2], [2, 128], [300, 3]]}, 0, 1, (0, 2)),
    # the rows run backwards from start 254 (place -127 is byte 0): row 0 holds places
    # 0 .. -127, row 1 (elements 128 ..) places 126 .. -1, and element 254 (i0 = 126,
    # i1 = 1) is the first on a place of row 0, element 0's: bytes [254, 256)
    ({"dims": [[-1, 128], [126, 3], [400, 2]], "start": 254}, 0, 254, (254, 256)),
]


@pytest.mark.parametrize("change, a, b, span", SELF_OVERLAPS,
                         ids=["interleaved-rows", "step-0", "negative-step"])
def test_a_dst_pattern_that_writes_two_elements_to_one_place_is_refused_statically(
        sbuf_out, tmp_path, change, a, b, span):
    """docs/DESIGN.md "Buffers and data flow": ``lower`` refuses a dst that writes two of its
    elements to the same bytes (apoverlap.dst_alias), so no output of ``lower`` has one.
    One that does not outnumber its extent's places was left to the run: a 4-rank
    all-reduce lowered with that check bypassed reported only a mismatch of whichever
    element was written last ("494 element(s) differ, first element 2 ... last written by
    leg mesh_reduce"), and here, where the BDs still write the old pattern, a write
    outside the output.  It is refused before anything is placed, naming the trigger, the
    field and the two elements."""
    out = copy(sbuf_out, tmp_path)
    assert trigger0(out)["dst"]["ap"]["dims"] == [[1, 768], [0, 1], [0, 1]]
    _retrigger(out, 0, lambda t: t["dst"]["ap"].update(change))
    rehash(out)
    assert refused(out) == (
        f"{out / 'manifest.json'}: field triggers[0].dst.ap.dims: dst access pattern writes "
        "elements "
        f"{a} and {b} to the same "
        f"bytes [{span[0]}, {span[1]}) of partition 0: the result would depend on the order "
        "of the writes (docs/DESIGN.md \"Buffers and data flow\")")


def _brute_collision(dims) -> tuple[int, int] | None:
    """The first element of one partition on the place of an earlier one, by enumerating."""
    (s0, n0), (s1, n1), (s2, n2) = dims
    seen: dict[int, int] = {}
    for e in range(n0 * n1 * n2):
        q = (e % n0) * s0 + (e // n0 % n1) * s1 + (e // (n0 * n1)) * s2
        if q in seen:
            return seen[q], e
        seen[q] = e
    return None


def test_colliding_elements_agrees_with_enumerating_them():
    """simulate.triggers.colliding_elements finds two elements at one place without
    enumerating them; against enumeration over 20,000 random small patterns (steps -12..12,
    nums 1..7): a pair exactly when enumeration finds one, and both elements of the pair
    at the place it names."""
    from nrtrewrite.simulate.triggers import colliding_elements
    rng = np.random.default_rng(20261204)
    for _ in range(20000):
        dims = [(int(s), int(n)) for s, n in zip(rng.integers(-12, 13, 3),
                                                 rng.integers(1, 8, 3))]
        got, want = colliding_elements(dims), _brute_collision(dims)
        assert (got is None) == (want is None), (dims, got, want)
        if got is not None:
            a, b, q = got
            (s0, n0), (s1, n1), (s2, n2) = dims
            for e in (a, b):
                assert (e % n0) * s0 + (e // n0 % n1) * s1 + (e // (n0 * n1)) * s2 == q
            assert 0 <= a < b < n0 * n1 * n2


def test_colliding_elements_of_a_huge_pattern_take_no_enumeration():
    """3 x 2^40 elements a partition: rows of 2^20, 2^20 - 1 apart, collide at once (element
    2^20, the second row's first, on place 2^20 - 1, the first row's last); 2^20 + 1 apart
    they never do (each row starts past the previous one's end)."""
    from nrtrewrite.simulate.triggers import colliding_elements
    m = 1 << 20
    assert colliding_elements([(1, m), (m - 1, m), (1 << 41, 3)]) == (m - 1, m, m - 1)
    assert colliding_elements([(1, m), (m + 1, m), (1 << 41, 3)]) is None


def test_a_reduce_scatter_of_a_count_its_group_does_not_divide_is_refused(sbuf_out, tmp_path):
    """NEFF-LIKE.md: a reduce-scatter's output is N / group size (N must divide). sbuf.yaml's
    trigger 3 reduce-scatters 8192 elements over 8 ranks; a manifest saying 8196 (1024.5 a
    rank) is refused as such. A simulator that refused only an N below the group size took
    it there (and refused it later, for the size of its access pattern)."""
    out = copy(sbuf_out, tmp_path)
    t = json.loads((out / "manifest.json").read_text())["triggers"][3]
    assert (t["op"], t["num_elements"], len(t["replica_group"])) == ("REDUCE_SCATTER", 8192, 8)
    _retrigger(out, 3, lambda t: t.__setitem__("num_elements", 8196))
    rehash(out)
    refused(out, "field triggers[3]",
            "REDUCE_SCATTER num_elements is not a multiple of the group size")


def test_a_leader_other_than_the_groups_smallest_rank_is_refused(ring2n_out, tmp_path):
    """FORMATS §2 ``reporter``: the leader of a trigger's replica group is its smallest rank
    id, the manifest's ``leader``. ring2n's group is 0, 1, 64, 65; a manifest naming rank 65
    (a member, but not the smallest) is refused as such. A simulator that only asked for a
    member took it there (and refused rank 0's reporter bit later)."""
    out = copy(ring2n_out, tmp_path)
    assert trigger0(out)["replica_group"] == [0, 1, 64, 65] and trigger0(out)["leader"] == 0
    _retrigger(out, 0, lambda t: t.__setitem__("leader", 65))
    rehash(out)
    refused(out, "field triggers[0]", "leader 65 is not the smallest rank of the group")


@pytest.mark.parametrize("key, value, says", [
    ("op", "ALLTOALL", 'op "ALLTOALL" is not simulated (only ALLREDUCE, ALLGATHER, '
     "REDUCE_SCATTER)"),
    ("dtype", "BF15", 'dtype "BF15" is not a dtype'),
    ("alu_op", "XOR", 'ALLREDUCE alu_op should be ADD, MAX or MIN, not "XOR"'),
    ("alu_op", None, "ALLREDUCE alu_op should be ADD, MAX or MIN, not null"),
    ("replica_group", [], "replica_group is empty"),
    ("replica_group", [0, 1, 0], "replica_group lists rank 0 twice"),
    ("num_elements", 0, "num_elements should be 1 or more, not 0"),
    ("num_elements", -8, "num_elements should be 1 or more, not -8"),
    ("chunk.chunk_size_n", 0, "chunk.chunk_size_n should be 1 or more, not 0"),
    ("chunk.pgta", 0, "chunk.pgta should be 1 or more, not 0"),
    ("chunk.channels", -1, "chunk.channels should be 1 or more, not -1"),
])
def test_a_trigger_value_the_formats_do_not_allow_is_refused_saying_which(
        ar2_out, tmp_path, key, value, says):
    """FORMATS §1.1 ``triggers``: ``op`` one of ALLREDUCE, ALLGATHER, REDUCE_SCATTER,
    ``alu_op`` ADD, MAX or MIN (null only for an all-gather), a replica group of distinct
    ranks, 1 or more elements, a ``chunk`` of 1 or more elements a chunk, chunk groups
    (``pgta``) and channels. ar2's one trigger is an all-reduce over ranks 0 and 1; each
    value is refused naming the trigger and what is wrong with it, a value as JSON writes it
    (the group and the count were "bad replica_group / num_elements", the ALU "ALLREDUCE
    with alu_op 'XOR'", then until 2026-12-05 ``alu_op None``, Python's; a chunk of 0 passed
    here, where the mesh-family legs do not use it, and on a ring was blamed on its legs'
    ``half``, whose chunk layout it unmade)."""
    out = copy(ar2_out, tmp_path)
    assert (trigger0(out)["op"], trigger0(out)["replica_group"]) == ("ALLREDUCE", [0, 1])
    *outer, last = key.split(".")
    _retrigger(out, 0, lambda t: (t[outer[0]] if outer else t).__setitem__(last, value))
    rehash(out)
    assert refused(out) == f"{out / 'manifest.json'}: field triggers[0]: {says}"


@pytest.fixture(scope="module")
def allgather_out(tmp_path_factory) -> Path:
    """fixtures/int32_allgather.neff: one int32 all-gather over ranks 0 .. 7 (a RING)."""
    return lower_neff(FIX / "int32_allgather.neff", tmp_path_factory.mktemp("ag") / "o")


@pytest.mark.parametrize("alu", ["ADD", "MIN"])
def test_an_all_gathers_alu_op_other_than_null_is_refused(allgather_out, tmp_path, alu):
    """FORMATS §1.1 ``alu_op``: null for an all-gather (NEFF-LIKE.md: the 0xC8 word's alu_op
    is 0 for ALL_GATHER; a copy reduces nothing), as an all-reduce's null is refused. The
    all-gather saying ADD or MIN simulated as a match (its legs are copies and read no ALU
    op); it is refused naming the trigger and the value as JSON writes it."""
    out = copy(allgather_out, tmp_path)
    assert (trigger0(out)["op"], trigger0(out)["alu_op"]) == ("ALLGATHER", None)
    _retrigger(out, 0, lambda t: t.__setitem__("alu_op", alu))
    rehash(out)
    want = (f"{out / 'manifest.json'}: field triggers[0]: ALLGATHER alu_op should be null, not "
            f'"{alu}" (an all-gather reduces nothing: FORMATS §1.1)')
    assert refused(out) == want
    assert refused(out, extra=("--model", FIX / "int32_allgather.neff")) == want


def test_a_trigger_listed_twice_is_refused(sbuf_out, tmp_path):
    """FORMATS §1.1: ``trigger`` is the trigger's ordinal, one per trigger; sbuf.yaml's
    trigger 1 also saying 0 is refused naming the second item."""
    out = copy(sbuf_out, tmp_path)
    _retrigger(out, 1, lambda t: t.__setitem__("trigger", 0))
    rehash(out)
    assert refused(out) == f"{out / 'manifest.json'}: field triggers[1]: trigger 0 listed twice"


@pytest.fixture(scope="module")
def single_cycle_out(tmp_path_factory) -> Path:
    """A bf16 all-reduce over ranks 0 .. 3 as SINGLE_CYCLE_RING: channels 0 (CW) and 1 (CCW)."""
    return lower_spec(coll_spec("all_reduce", "bf16", 4, 4096, lnc=2),
                      tmp_path_factory.mktemp("scr") / "o", algo="single_cycle_ring")


@pytest.mark.parametrize("algo, c, order, says", [
    ("RING", 0, [], "channels[0].order lacks rank 0 of the replica_group (a RING trigger's "
     "ring order holds each rank once)"),
    ("RING", 0, [0, 1, 64], "channels[0].order lacks rank 65 of the replica_group (a RING "
     "trigger's ring order holds each rank once)"),
    ("RING", 0, [0, 1, 64, 65, 1], "channels[0].order lists rank 1 twice"),
    ("RING", 0, [0, 1, 64, 66], "channels[0].order names rank 66, not in the replica_group"),
    ("SINGLE_CYCLE_RING", 1, [0, 3, 2], "channels[1].order lacks rank 1 of the replica_group "
     "(a SINGLE_CYCLE_RING trigger's ring order holds each rank once)"),
])
def test_a_ring_order_that_is_not_a_ring_of_the_group_is_refused_naming_it(
        ring2n_out, single_cycle_out, tmp_path, algo, c, order, says):
    """FORMATS §1.1 ``channels[].order``: a RING trigger's ring order, a SINGLE_CYCLE_RING
    one's (a CCW channel's reversed), a ring of the replica group, each rank once: the ring
    successors the legs signal are read from it. ring2n's group is 0, 1, 64, 65 (channel 0
    of trigger 0), the single-cycle one's 0 .. 3 (channel 1 the CCW ring); an order empty,
    short of a rank, with one twice or with a stranger is refused naming the trigger and
    the key (it was blamed on legs.bin: ``send signals rank 1, the ring successor of
    channel 0 is -1``)."""
    out = copy(ring2n_out if algo == "RING" else single_cycle_out, tmp_path)
    t = trigger0(out)
    assert t["algorithm"] == algo and t["channels"][c]["channel"] == c
    assert t["replica_group"] == ([0, 1, 64, 65] if algo == "RING" else [0, 1, 2, 3])
    _retrigger(out, 0, lambda t: t["channels"][c].__setitem__("order", order))
    rehash(out)
    assert refused(out) == f"{out / 'manifest.json'}: field triggers[0]: {says}"


@pytest.fixture(scope="module")
def hier_out(tmp_path_factory) -> Path:
    """A bf16 all-reduce of 32 KiB (16384 elements) over ranks 0 .. 127 (two nodes, LNC 2)
    as the default policy lowers it: HIER, legs intra_redsct (RING over each node's 64
    ranks), inter_allr (SINGLE_CYCLE_RING over pairs {r, r + 64}), intra_allg (RING)."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 128, 16384, lnc=2),
                     tmp_path_factory.mktemp("hier") / "o", algo=None)
    t = trigger0(out)
    assert t["algorithm"] == "HIER"
    assert [(leg["name"], leg["algorithm"]) for leg in t["hier"]["legs"]] == [
        ("intra_redsct", "RING"), ("inter_allr", "SINGLE_CYCLE_RING"), ("intra_allg", "RING")]
    return out


def _hier_ar_chunks(n: int, local_n: int, node_n: int, intra_rings: int, dsize: int = 2,
                    chunk_bytes: int = CM.CHUNK_BYTES) -> dict:
    """The chunks of a HIER all-reduce's leg plans worked out by ``tests/chunkmodel.py``
    (docs/DESIGN.md "HIER", "Chunking", SELECTION.md §7): the message cut by ``even_split``
    into ``local_n`` slices; the intra legs (RING) cut each slice as a block by the widest
    one's layout, on the channel rule's count for the whole message inside a node, capped
    by the node group's ``intra_rings`` distinct rings (TOPOLOGY.md §3: a whole trn2 node
    has the four directed device cycles; a group on one or two devices one cycle and its
    reverse, 2); ``inter_allr``
    (SINGLE_CYCLE_RING) all-reduces each slice interleaved over its ``node_n`` ranks, on
    ``max(1, n / 2)`` pairs of the rule's n for the widest slice across nodes (its group has
    one ring over two nodes, the node chain and its reverse over more); the trigger's
    ``pgta`` is the most of its legs' plans'."""
    slices = CM.even_split(n, local_n)
    widest = max(slices)
    ch_intra = CM.channel_rule(n * dsize, n, local_n, inter=False, rings=intra_rings)
    ch_inter = CM.channel_rule(widest * dsize, widest, node_n, inter=True,
                               rings=1 if node_n == 2 else 2)
    intra = CM.chunk_plan(widest, ch_intra, dsize, chunk_bytes=chunk_bytes)
    inter = [CM.chunk_plan(sl, max(1, ch_inter // 2), dsize, rank_n=node_n,
                           chunk_bytes=chunk_bytes) for sl in slices]
    return {"slices": slices, "intra": intra, "inter": inter,
            "pgta": max([intra["pgta"]] + [c["pgta"] for c in inter])}


@pytest.fixture(scope="module")
def mix8_ring_out(tmp_path_factory) -> Path:
    """fixtures/mix8.neff with every trigger a RING."""
    return lower_neff(FIX / "mix8.neff", tmp_path_factory.mktemp("mix8") / "o", algo="ring")


def _rehier(out: Path, fn) -> dict:
    """Edit trigger 0's ``hier.legs`` with ``fn`` and re-hash; the legs as they were."""
    legs = trigger0(out)["hier"]["legs"]
    _retrigger(out, 0, lambda t: fn(t["hier"]["legs"]))
    rehash(out)
    return legs


@pytest.mark.parametrize("leg, key, value, says", [
    (0, "chunk_size_n", 0, "chunk_size_n should be 1 or more, not 0"),
    (1, "channels", -5, "channels should be 1 or more, not -5"),
    (2, "pgta", 0, "pgta should be 1 or more, not 0"),
    (0, "tail_chunk", -1, "tail_chunk should be an even number from 2 to chunk_size_n 256, not "
                          "-1"),
    (0, "tail_chunk", 258, "tail_chunk should be an even number from 2 to chunk_size_n 256, not "
                           "258"),
    (2, "tail_chunk", 255, "tail_chunk should be an even number from 2 to chunk_size_n 256, not "
                           "255"),
])
def test_a_hier_leg_plans_chunk_value_out_of_range_is_refused_naming_it(hier_out, tmp_path, leg,
                                                                        key, value, says):
    """FORMATS §1.1: a HIER leg plan's ``chunk`` is a trigger's (``as above``): chunk size,
    chunk groups and channels 1 or more, ``tail_chunk`` the last chunk group's chunk, even,
    2 .. ``chunk_size_n``. The RING legs cut 16384 elements into 64 blocks of 256, one chunk
    of 256 per block (one channel, one chunk group: tail 256). Each value out of range is
    refused naming the trigger and the plan's key (they simulated as a match, or were blamed
    on net_ops.bin)."""
    out = copy(hier_out, tmp_path)
    legs = _rehier(out, lambda legs: legs[leg]["plans"][0]["chunk"].__setitem__(key, value))
    if leg in (0, 2):
        want = _hier_ar_chunks(16384, 64, 2, intra_rings=4)["intra"]
        assert legs[leg]["plans"][0]["chunk"] == want == {"chunk_size_n": 256, "tail_chunk": 256,
                                                          "pgta": 1, "channels": 1}
    assert refused(out) == (f"{out / 'manifest.json'}: field triggers[0]: "
                            f"hier.legs[{leg}].plans[0].chunk.{says}")


@pytest.mark.parametrize("edit, says", [
    (lambda chunk: chunk.__setitem__("channels", "x"), 'channels: must be an integer, not "x"'),
    (lambda chunk: chunk.pop("tail_chunk"), "tail_chunk: missing"),
])
def test_a_hier_leg_plans_chunk_of_the_wrong_type_is_status_2_naming_it(hier_out, tmp_path,
                                                                        edit, says):
    """Every key of a HIER leg plan's ``chunk`` is read with its type, as a trigger's own
    chunk is: a string, or a key missing, is exit 2 naming the key path (``"x"`` for
    ``channels`` was blamed on net_ops.bin; ``tail_chunk`` was not read at all)."""
    out = copy(hier_out, tmp_path)
    _rehier(out, lambda legs: edit(legs[1]["plans"][0]["chunk"]))
    res = cli("simulate", out)
    assert res.exit_code == 2, res.output
    assert (f"{out / 'manifest.json'}: field triggers[0].hier.legs[1].plans[0].chunk.{says}"
            in res.output)


@pytest.mark.parametrize("leg, c, order, says", [
    (0, 0, [0, 1, 2], "lacks position 3 (rank 3) of its group of 64 (a RING leg's ring order "
     "holds each position once)"),
    (2, 0, list(range(64)) + [5], "lists position 5 twice"),
    (1, 1, [1, 1], "lists position 1 twice"),
    (1, 0, [1], "lacks position 0 (rank 0) of its group of 2 (a SINGLE_CYCLE_RING leg's ring "
     "order holds each position once)"),
])
def test_a_hier_legs_ring_order_that_is_not_a_ring_of_its_group_is_refused(hier_out, tmp_path,
                                                                           leg, c, order, says):
    """FORMATS §1.1: a HIER leg plan's ``channels[c].order`` is the ring order in positions of
    the group; a RING or SINGLE_CYCLE_RING leg's rings, as a flat trigger's, hold each
    position once. The intra legs' groups are ranks 0 .. 63 and 64 .. 127, inter_allr's
    pairs {r, r + 64} (group 0: ranks 0 and 64, on channels 1 and 2). An order short of a
    position, or with one twice, is refused naming the key (it was blamed on legs.bin)."""
    out = copy(hier_out, tmp_path)
    legs = _rehier(out, lambda legs: legs[leg]["plans"][0]["channels"][c].__setitem__(
        "order", order))
    assert legs[leg]["groups"][0] == {"group": list(range(64)) if leg != 1 else [0, 64],
                                      "plan": 0}
    assert refused(out) == (f"{out / 'manifest.json'}: field triggers[0]: "
                            f"hier.legs[{leg}].plans[0].channels[{c}].order {says}")


@pytest.fixture(scope="module")
def ag100_out(tmp_path_factory) -> Path:
    """A bf16 all-gather of 100 elements a rank over ranks 0 and 1, RING, with chunks of 64
    bytes (32 elements) so that it has several chunk groups: one channel (100 // 64 = 1),
    the chunk min(32, 100 rounded up to 32) = 32, ceil(100 / 32) = 4 chunk groups, the last
    holding 100 - 3 x 32 = 4 elements (tail_chunk 4)."""
    import functools
    import nrtrewrite.compose.ring as R
    from nrtrewrite.compose.chunking import set_dynamic_chunk_size
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(R, "set_dynamic_chunk_size",
                   functools.partial(set_dynamic_chunk_size, chunk_bytes=64))
        out = lower_spec(coll_spec("all_gather", "bf16", 2, 100),
                         tmp_path_factory.mktemp("ag100") / "o")
    assert trigger0(out)["chunk"] == {"channels": 1, "chunk_size_n": 32, "pgta": 4,
                                      "tail_chunk": 4}
    return out


@pytest.fixture(scope="module")
def kangaring_out(tmp_path_factory) -> Path:
    """A bf16 all-reduce of 4096 elements over ranks 0 .. 15 (LNC 1) as KANGARING."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 16, 4096),
                     tmp_path_factory.mktemp("kr") / "o", algo="kangaring")
    assert trigger0(out)["algorithm"] == "KANGARING"
    return out


@pytest.mark.parametrize("which, value", [
    ("ring2n", 2049), ("ag100", 33), ("ag100", 31), ("scr", 1025), ("kangaring", 257),
    ("hier", 257)])
def test_an_odd_chunk_size_n_of_a_chunk_layout_is_refused_naming_it(
        request, tmp_path, which, value):
    """Seed 001 §2: ``set_chunk_size_n`` asserts an even chunk, cut into two equal halves,
    CHUNK_H0 and CHUNK_H1 (``lower`` writes a multiple of 32); FORMATS §1.1 ``chunk``. An
    odd ``chunk_size_n`` of a RING, SINGLE_CYCLE_RING or KANGARING trigger, or of a HIER leg
    plan, is refused naming the key. With one chunk group (ring2n, the single-cycle and
    KANGARING all-reduces, the HIER leg) nothing reads it and it simulated as a match; with
    ag100's four groups of 32 a chunk of 33 or 31 moved the chunk groups and halves and was
    blamed on a leg's ``half`` (``half 0 but elements [32, 48) are not inside one
    half-chunk``)."""
    fixture = {"ring2n": "ring2n_out", "ag100": "ag100_out", "scr": "single_cycle_out",
               "kangaring": "kangaring_out", "hier": "hier_out"}[which]
    out = copy(request.getfixturevalue(fixture), tmp_path)
    if which == "hier":
        _rehier(out, lambda legs: legs[0]["plans"][0]["chunk"].__setitem__("chunk_size_n",
                                                                           value))
        key = "hier.legs[0].plans[0].chunk"
    else:
        _retrigger(out, 0, lambda t: t["chunk"].__setitem__("chunk_size_n", value))
        rehash(out)
        key = "chunk"
    assert refused(out) == (f"{out / 'manifest.json'}: field triggers[0]: {key}.chunk_size_n "
                            f"should be even, not {value} (a chunk is cut into two equal halves, "
                            "CHUNK_H0 and CHUNK_H1: seed 001 §2)")


@pytest.mark.parametrize("value", [-1, 0, 1, 4098, 4097])
def test_a_ring_tail_chunk_outside_its_range_is_refused_naming_it(ring2n_out, tmp_path, value):
    """FORMATS §1.1: ``chunk.tail_chunk`` is the chunk of the last chunk group, even, 2 ..
    ``chunk_size_n`` (seed 001 §2's re-clamped tail). ring2n all-reduces 8192 elements over 4
    ranks on one channel: one chunk group of 4 chunks of 2048. A tail below 2, above the
    chunk or odd is refused naming the key (it was blamed on a leg's ``half``)."""
    out = copy(ring2n_out, tmp_path)
    assert trigger0(out)["chunk"] == {"chunk_size_n": 2048, "tail_chunk": 2048, "pgta": 1,
                                      "channels": 1}
    _retrigger(out, 0, lambda t: t["chunk"].__setitem__("tail_chunk", value))
    rehash(out)
    assert refused(out) == (f"{out / 'manifest.json'}: field triggers[0]: chunk.tail_chunk "
                            f"should be an even number from 2 to chunk_size_n 2048, not {value}")


@pytest.mark.parametrize("which, edit, says", [
    ("mix8", lambda chans: chans.pop(1), "channels should list the 2 channels chunk.channels 2 "
     "asks for, not 1 (a RING trigger lists one per chunk channel)"),
    ("mix8", lambda chans: chans[1].__setitem__("channel", 0),
     "channels[1].channel 0 is channels[0]'s too (a trigger lists each channel once)"),
    ("scr", lambda chans: chans.pop(1), "channels should list the 2 channels chunk.channels 1 "
     "asks for, not 1 (a SINGLE_CYCLE_RING trigger lists a CW and a CCW channel for each pair "
     "chunk.channels counts)"),
    ("scr", lambda chans: chans.append(dict(chans[0])),
     "channels[2].channel 0 is channels[0]'s too (a trigger lists each channel once)"),
])
def test_a_ring_triggers_channels_missing_or_repeated_are_refused(mix8_ring_out, single_cycle_out,
                                                                  tmp_path, which, edit, says):
    """FORMATS §1.1: a RING trigger's ``channels`` lists the channels its chunk layout divides
    the data over (``chunk.channels`` of them), a SINGLE_CYCLE_RING one's a CW and a CCW
    channel per pair (twice ``chunk.channels``), each channel once. mix8's trigger 0 runs on
    channels 0 and 1 (2 chunk channels), the single-cycle all-reduce on pair (0, 1). A
    missing item was blamed on legs.bin (``the ring successor of channel 1 is -1``), a
    channel listed twice was collapsed, the last order kept; both are refused naming it."""
    out = copy(mix8_ring_out if which == "mix8" else single_cycle_out, tmp_path)
    t = trigger0(out)
    assert [c["channel"] for c in t["channels"]] == [0, 1]
    assert t["chunk"]["channels"] == (2 if which == "mix8" else 1)
    _retrigger(out, 0, lambda t: edit(t["channels"]))
    rehash(out)
    assert refused(out) == f"{out / 'manifest.json'}: field triggers[0]: {says}"


def test_a_one_rank_single_cycle_ring_lists_one_channel_and_passes(tmp_path):
    """A one-rank group's SINGLE_CYCLE_RING pair is one channel, CW and CCW alike (FORMATS
    §1.1): its one ``channels`` item for ``chunk.channels`` 1 is not refused."""
    out = lower_spec(coll_spec("all_reduce", "bf16", 1, 4096, lnc=2), tmp_path / "o",
                     algo="single_cycle_ring")
    t = trigger0(out)
    assert (t["algorithm"], t["chunk"]["channels"], len(t["channels"])) == (
        "SINGLE_CYCLE_RING", 1, 1)
    res = cli("simulate", out, "--json")
    assert res.exit_code == 0, res.output


def test_a_ring_order_rotated_to_another_start_is_not_refused(ring2n_out, tmp_path):
    """The check takes a ring of the group in any rotation: ring2n's channel 0 order
    written from rank 64 on (the same ring) still simulates as a match."""
    out = copy(ring2n_out, tmp_path)
    order = trigger0(out)["channels"][0]["order"]
    assert sorted(order) == [0, 1, 64, 65]
    _retrigger(out, 0, lambda t: t["channels"][0].__setitem__(
        "order", order[order.index(64):] + order[:order.index(64)]))
    rehash(out)
    res = cli("simulate", out, "--json")
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("which", ["src", "dst", "sbuf src"])
def test_an_operand_var_the_memory_map_lacks_is_refused_naming_the_operand(
        ar2_out, sbuf_out, tmp_path, which):
    """FORMATS §1.1: an operand's ``var_id`` is a var of the trigger's subgraph, placed by
    ``memory.regions``; ar2's vars are 0 .. 3, sbuf.yaml's too, so var 99 names none.
    Refused naming the manifest, the trigger and the operand, as an operand that does not
    fit its var is (a DRAM operand's named the manifest only, an SBUF one's, sbuf.yaml's
    trigger 1 src, no file)."""
    out = copy(sbuf_out if which == "sbuf src" else ar2_out, tmp_path)
    k, which = (1, "src") if which == "sbuf src" else (0, which)
    _retrigger(out, k, lambda t: t[which].__setitem__("var_id", 99))
    rehash(out)
    assert refused(out) == (f"{out / 'manifest.json'}: field triggers[{k}].{which}.var_id: var "
                            "99 of sg00 is not in the memory map")


@pytest.mark.parametrize("change, listed", [("drop", [0, 1, 2]), ("add", [0, 1, 2, 3, 4])])
def test_a_manifest_listing_other_triggers_than_the_model_is_refused_with_it(
        sbuf_out, tmp_path, change, listed):
    """SIMULATOR §1: with ``--model`` the manifest's triggers are the model's; sbuf.yaml has
    triggers 0 .. 3, a manifest without the last or with a copy of it as trigger 4 is
    refused naming ``triggers`` and both lists."""
    out = copy(sbuf_out, tmp_path)
    top = json.loads((out / "manifest.json").read_text())
    assert [t["trigger"] for t in top["triggers"]] == [0, 1, 2, 3]
    if change == "drop":
        top["triggers"].pop()
    else:
        top["triggers"].append(dict(top["triggers"][-1], trigger=4))
    (out / "manifest.json").write_text(json.dumps(top, indent=1, sort_keys=True) + "\n")
    rehash(out)
    assert refused(out, extra=("--model", FIX / "sbuf.neff")) == (
        f"{out / 'manifest.json'}: field triggers: the manifest should list triggers [0, 1, 2, "
        f"3], the model's, not {listed}")


def test_a_ring_leg_running_past_its_block_is_refused_for_its_count(ag33_out, tmp_path):
    """SIMULATOR §2: a flat RING leg's ``half`` is the half-chunk holding its elements, ranges
    clamped to the block (docs/DESIGN.md "Chunking"). Rank 0's send of block 0's H1 is
    [17, 33); one element more, [17, 34), ends inside the 34-element tail chunk's H1 as the
    unclamped layout would have it, but runs into block 1 (rank 1's), so it lies in no one
    half-chunk: TriggerSpec.half_of says -1 (a simulator that clamped the half to the chunk
    only took its half 1). The flipped field is num_elements, and the leg's source stream of
    16 x 2 bytes (FORMATS §3) bears it out: named there (until 2026-12-07 the line named
    ``half``, a field nobody changed, and this test expected it: a data leg's half and
    ring_step errors now wait for the checks that hold its elements to its BDs)."""
    L = legs(ag33_out, 0)
    i = int(np.flatnonzero((L["elem_start"] == 17) & (L["half"] == 1))[0])
    assert int(L["num_elements"][i]) == 16
    spec = triggers_mod.load_triggers(json.loads((ag33_out / "manifest.json").read_text()))
    (t,) = spec.values()
    assert t.half_of(np.array([17, 17, 0]), np.array([16, 17, 17])).tolist() == [1, -1, 0]
    out = copy(ag33_out, tmp_path)
    poke(out / "rank-0000" / "legs.bin", i * REC + NUM_ELEMENTS, struct.pack("<I", 17))
    rehash(out)
    refused(out, "artifact legs.bin", f"record {i}:", "field num_elements",
            "num_elements x 2 bytes should be the 32 bytes each source stream carries, not "
            "17 x 2")


@pytest.mark.parametrize("chunk_size_n", [34, 4096, 16])
def test_one_chunk_group_is_cut_by_tail_chunk_whatever_chunk_size_n_says(ag33_out, tmp_path,
                                                                         chunk_size_n):
    """FORMATS §1.1 ``chunk`` / seed 001 §2: the block is cut into ``pgta`` chunk groups and
    the last uses ``tail_chunk``. With ``pgta`` 1 the one group is the last: every element
    of the block is in it, cut into chunks of 34 (halves of 17), and ``chunk_size_n`` (the
    chunk of the groups before the last) plays no part, so a manifest saying 34 or 4096
    instead of 64 simulates the same (no lowering writes such a manifest; the seed's ``pgta =
    ceil(33 / chunk_size_n)`` is 1 for each, and the tail is the chunk's). A simulator that
    let the elements past ``chunk_size_n`` open a group ``pgta`` (which does not exist) cut
    them into 16-element chunks for a ``chunk_size_n`` of 16 and refused rank 0's H1 leg
    [17, 33); since 2026-12-05 a ``chunk_size_n`` below the tail is refused at the manifest
    (the seed's re-clamped tail is at most the chunk, FORMATS §1.1), and so is a ``pgta``
    other than the seed's (test_a_ring_pgta_other_than_its_chunk_groups_is_refused)."""
    out = copy(ag33_out, tmp_path)
    assert trigger0(out)["chunk"] == {"channels": 1, "chunk_size_n": 64, "pgta": 1,
                                      "tail_chunk": 34}
    _retrigger(out, 0, lambda t: t["chunk"].__setitem__("chunk_size_n", chunk_size_n))
    rehash(out)
    if chunk_size_n < 34:
        assert refused(out) == (f"{out / 'manifest.json'}: field triggers[0]: chunk.tail_chunk "
                                "should be an even number from 2 to chunk_size_n 16, not 34")
        return
    res = cli("simulate", out, "--json")
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("which, k, edit, says", [
    ("ag100", 0, {"pgta": 2}, "chunk.pgta should be 4, not 2: a RING all-gather's block of 100 "
     "elements takes ceil(100 / 32) chunk groups of chunk.channels 1 x chunk_size_n 32"),
    ("ag100", 0, {"pgta": 5}, "chunk.pgta should be 4, not 5: a RING all-gather's block of 100 "
     "elements takes ceil(100 / 32) chunk groups of chunk.channels 1 x chunk_size_n 32"),
    ("ag100", 0, {"pgta": 1, "tail_chunk": 32}, "chunk.pgta should be 4, not 1: a RING "
     "all-gather's block of 100 elements takes ceil(100 / 32) chunk groups of chunk.channels 1 "
     "x chunk_size_n 32"),
    ("mix8", 0, {"pgta": 2}, "chunk.pgta should be 1, not 2: a RING all-reduce's 2097152 elements "
     "take ceil(2097152 / 2097152) chunk groups of 8 ranks x chunk.channels 2 x chunk_size_n "
     "131072"),
    ("mix8", 4, {"pgta": 3}, "chunk.pgta should be 1, not 3: a RING reduce-scatter's block of "
     "65536 elements takes ceil(65536 / 65536) chunk groups of chunk.channels 2 x chunk_size_n "
     "32768"),
])
def test_a_ring_pgta_other_than_its_chunk_groups_is_refused(ag100_out, mix8_ring_out, tmp_path,
                                                            which, k, edit, says):
    """Seed 001 §2: a ring's elements are cut into ``pgta`` chunk groups of ``group size x
    channels x chunk_size_n`` (an all-reduce's message) or ``channels x chunk_size_n`` (each
    member's block of an all-gather or reduce-scatter), ceil(span / group) of them; the
    simulator reads each RING leg's half and ring step from that layout. ag100: blocks of
    100 in groups of 32, 4 groups. mix8 as RING: trigger 0 all-reduces 4 MiB of bf16
    (2097152 elements) over 8 ranks on 2 channels with chunks of 131072 (512 KiB / 2 bytes
    x 2 x 8 = all of it, 1 group); trigger 4 reduce-scatters 1 MiB of bf16 (524288
    elements, blocks of 65536) on 2 channels with chunks of 32768 (1 group). A ``pgta``
    other than that is refused naming the key: a short one put elements in no group (the
    simulator cut them into the last group's chunks and blamed rank 0's leg of [32, 48) for
    its half), one too many moved the tail chunk off the last group (blamed on the half of
    [98, 100)) or, with the tail the chunk, simulated as a match (mix8)."""
    out = copy(ag100_out if which == "ag100" else mix8_ring_out, tmp_path)
    _retrigger(out, k, lambda t: t["chunk"].update(edit))
    rehash(out)
    assert refused(out) == f"{out / 'manifest.json'}: field triggers[{k}]: {says} (seed 001 §2)"


def _lower_small_chunks(spec: dict, out: Path, algo, chunk_bytes: int = 64) -> Path:
    """``spec`` lowered with chunks of at most ``chunk_bytes`` bytes (the ring's, and every
    leg layout's: compose/segments.py), so that a small collective has several chunk groups
    and a re-clamped tail."""
    import functools
    import nrtrewrite.compose.ring as R
    import nrtrewrite.compose.segments as S
    from nrtrewrite.compose.chunking import set_dynamic_chunk_size
    small = functools.partial(set_dynamic_chunk_size, chunk_bytes=chunk_bytes)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(R, "set_dynamic_chunk_size", small)
        mp.setattr(S, "set_dynamic_chunk_size", small)
        return lower_spec(spec, out, algo=algo)


#: Two nodes of 8 ranks at LNC 2 (ranks 0 .. 7 and 64 .. 71 of two trn2 nodes): a HIER group
HIER16 = list(range(8)) + list(range(64, 72))


@pytest.fixture(scope="module")
def kr900_out(tmp_path_factory) -> Path:
    """A bf16 all-reduce of 900 elements over ranks 0 .. 15 as KANGARING, chunks of 64 bytes:
    one channel (ceil(900 / 16) = 57 elements a position, under 64), the chunk 57 rounded up
    to 32 = 64, capped at 32; chunk groups of 16 x 1 x 32 = 512 elements, ceil(900 / 512) = 2
    of them, the last holding 900 - 512 = 388, ceil(388 / 16) = 25 a position, 26 even."""
    out = _lower_small_chunks(coll_spec("all_reduce", "bf16", 16, 900),
                              tmp_path_factory.mktemp("kr900") / "o", "kangaring")
    # ranks 0 .. 15 at LNC 1 are devices 0 and 1: one cycle and its reverse, 2 rings
    want = CM.chunk_plan(900, CM.channel_rule(1800, 900, 16, inter=False, rings=2), 2,
                         rank_n=16, chunk_bytes=64)
    assert trigger0(out)["chunk"] == want == {"channels": 1, "chunk_size_n": 32, "pgta": 2,
                                              "tail_chunk": 26}
    return out


@pytest.fixture(scope="module")
def krag_out(tmp_path_factory) -> Path:
    """A bf16 all-gather of 100 elements a rank over ranks 0 .. 15 as KANGARING, chunks of 64
    bytes: blocks of 100 in groups of 1 x 32, ceil(100 / 32) = 4, the last holding 4."""
    out = _lower_small_chunks(coll_spec("all_gather", "bf16", 16, 100),
                              tmp_path_factory.mktemp("krag") / "o", "kangaring")
    assert trigger0(out)["chunk"] == {"channels": 1, "chunk_size_n": 32, "pgta": 4,
                                      "tail_chunk": 4}
    return out


@pytest.fixture(scope="module")
def scr1000_out(tmp_path_factory) -> Path:
    """A bf16 all-reduce of 1000 elements over ranks 0 .. 3 as SINGLE_CYCLE_RING, chunks of 64
    bytes: one channel pair, chunk groups of 4 x 1 x 32 = 128 elements, ceil(1000 / 128) = 8
    of them, the last holding 1000 - 7 x 128 = 104, ceil(104 / 4) = 26 a position."""
    out = _lower_small_chunks(coll_spec("all_reduce", "bf16", 4, 1000, lnc=2),
                              tmp_path_factory.mktemp("scr1000") / "o", "single_cycle_ring")
    assert trigger0(out)["chunk"] == {"channels": 1, "chunk_size_n": 32, "pgta": 8,
                                      "tail_chunk": 26}
    return out


@pytest.fixture(scope="module")
def hier16_out(tmp_path_factory) -> Path:
    """A bf16 all-reduce of 1000 elements over HIER16 as the default policy lowers it: HIER,
    intra_redsct (RING over each node's 8 ranks), inter_allr (SINGLE_CYCLE_RING over pairs
    {j, 64 + j}), intra_allg (RING). docs/DESIGN.md "HIER": the message in 8 slices, the
    even share ceil(1000 / 8) = 125 over 32, so slices of 128 (125 rounded up to 32), 7 of
    them (896 elements) and the last 104."""
    out = lower_spec(coll_spec("all_reduce", "bf16", HIER16, 1000, lnc=2),
                     tmp_path_factory.mktemp("hier16") / "o", algo=None)
    t = trigger0(out)
    assert [(leg["name"], leg["algorithm"]) for leg in t["hier"]["legs"]] == [
        ("intra_redsct", "RING"), ("inter_allr", "SINGLE_CYCLE_RING"), ("intra_allg", "RING")]
    return out


@pytest.mark.parametrize("which, k, edit, says", [
    ("ag100", 0, {"tail_chunk": 32}, "chunk.tail_chunk should be 4, not 32: the last chunk "
     "group of a RING all-gather's block of 100 elements holds 4, ceil(4 / 1) a chunk position "
     "(chunk.channels 1)"),
    ("ag100", 0, {"tail_chunk": 2}, "chunk.tail_chunk should be 4, not 2: the last chunk group "
     "of a RING all-gather's block of 100 elements holds 4, ceil(4 / 1) a chunk position "
     "(chunk.channels 1)"),
    ("ag33", 0, {"tail_chunk": 36}, "chunk.tail_chunk should be 34, not 36: the last chunk "
     "group of a RING all-gather's block of 33 elements holds 33, ceil(33 / 1) a chunk position "
     "(chunk.channels 1)"),
    ("ring2n", 0, {"tail_chunk": 1024}, "chunk.tail_chunk should be 2048, not 1024: the last "
     "chunk group of a RING all-reduce's 8192 elements holds 8192, ceil(8192 / 4) a chunk "
     "position (4 ranks x chunk.channels 1)"),
    ("mix8", 4, {"tail_chunk": 32766}, "chunk.tail_chunk should be 32768, not 32766: the last "
     "chunk group of a RING reduce-scatter's block of 65536 elements holds 65536, ceil(65536 / "
     "2) a chunk position (chunk.channels 2)"),
    ("kr900", 0, {"tail_chunk": 32}, "chunk.tail_chunk should be 26, not 32: the last chunk "
     "group of a KANGARING all-reduce's 900 elements holds 388, ceil(388 / 16) a chunk position "
     "(16 ranks x chunk.channels 1)"),
    ("scr1000", 0, {"tail_chunk": 24}, "chunk.tail_chunk should be 26, not 24: the last chunk "
     "group of a SINGLE_CYCLE_RING all-reduce's 1000 elements holds 104, ceil(104 / 4) a chunk "
     "position (4 ranks x chunk.channels 1)"),
])
def test_a_tail_chunk_other_than_the_seeds_reclamp_is_refused(request, tmp_path, which, k,
                                                              edit, says):
    """Seed 001 §2: the last chunk group's chunk is re-clamped (``reclamp_tail``), docs/
    DESIGN.md "Chunking": the elements left for it over its chunk positions (group size x
    channels for an all-reduce, channels for a block), rounded up to even. ag100: blocks of
    100 in 4 groups of 32, the last holding 100 - 96 = 4 (tail 4). ag33: one group holding
    the block's 33 (34). ring2n: 8192 over 4 ranks, one channel, one group (8192 / 4 =
    2048). mix8's trigger 4: blocks of 65536 on 2 channels (32768). kr900 and scr1000 as
    their fixtures say (26 each). A tail in range (even, 2 .. chunk_size_n) but not that was
    blamed on a RING leg's ``half`` and simulated as a match on the other engines; it is
    refused naming the key."""
    fixture = {"ag100": "ag100_out", "ag33": "ag33_out", "ring2n": "ring2n_out",
               "mix8": "mix8_ring_out", "kr900": "kr900_out", "scr1000": "scr1000_out"}[which]
    out = copy(request.getfixturevalue(fixture), tmp_path)
    _retrigger(out, k, lambda t: t["chunk"].update(edit))
    rehash(out)
    assert refused(out) == (f"{out / 'manifest.json'}: field triggers[{k}]: {says} rounded "
                            "up to an even 2 or more (seed 001 §2's re-clamped tail)")


@pytest.mark.parametrize("which, edit, says", [
    ("scr", {"pgta": 2}, "chunk.pgta should be 1, not 2: a SINGLE_CYCLE_RING all-reduce's 4096 "
     "elements take ceil(4096 / 4096) chunk groups of 4 ranks x chunk.channels 1 x "
     "chunk_size_n 1024"),
    ("scr1000", {"pgta": 7}, "chunk.pgta should be 8, not 7: a SINGLE_CYCLE_RING all-reduce's "
     "1000 elements take ceil(1000 / 128) chunk groups of 4 ranks x chunk.channels 1 x "
     "chunk_size_n 32"),
    ("kangaring", {"pgta": 3}, "chunk.pgta should be 1, not 3: a KANGARING all-reduce's 4096 "
     "elements take ceil(4096 / 4096) chunk groups of 16 ranks x chunk.channels 1 x "
     "chunk_size_n 256"),
    ("kr900", {"pgta": 1, "tail_chunk": 32}, "chunk.pgta should be 2, not 1: a KANGARING "
     "all-reduce's 900 elements take ceil(900 / 512) chunk groups of 16 ranks x chunk.channels "
     "1 x chunk_size_n 32"),
    ("krag", {"pgta": 5}, "chunk.pgta should be 4, not 5: a KANGARING all-gather's block of 100 "
     "elements takes ceil(100 / 32) chunk groups of chunk.channels 1 x chunk_size_n 32"),
])
def test_a_pgta_of_a_single_cycle_or_kangaring_trigger_other_than_its_layouts_is_refused(
        request, tmp_path, which, edit, says):
    """docs/DESIGN.md "Leg layouts": a flat KANGARING or SINGLE_CYCLE_RING trigger chunks as
    the ring would (its ``chunk.channels`` a SINGLE_CYCLE_RING trigger's channel pairs), so
    its ``pgta`` is seed 001 §2's ceil(span / group) as a RING trigger's. single_cycle_out:
    4096 elements over 4 ranks in chunks of 1024 (one group); kangaring_out: 4096 over 16 in
    chunks of 256 (one); the others as their fixtures say. A ``pgta`` other than that was
    compared only with the net ops' ``unrolled_count``, which these one-node outputs do not
    have, and simulated as a match; it is refused naming the key."""
    fixture = {"scr": "single_cycle_out", "scr1000": "scr1000_out",
               "kangaring": "kangaring_out", "kr900": "kr900_out", "krag": "krag_out"}[which]
    out = copy(request.getfixturevalue(fixture), tmp_path)
    _retrigger(out, 0, lambda t: t["chunk"].update(edit))
    rehash(out)
    assert refused(out) == (f"{out / 'manifest.json'}: field triggers[0]: {says} (seed 001 "
                            "§2)")


@pytest.mark.parametrize("leg, plan, edit, says", [
    (0, 0, {"pgta": 2}, "hier.legs[0].plans[0].chunk.pgta should be 1, not 2: a RING intra_redsct "
     "leg's widest slice of the all-reduce, 128 elements, takes ceil(128 / 128) chunk groups "
     "of chunk.channels 1 x chunk_size_n 128 (seed 001 §2)"),
    (1, 1, {"tail_chunk": 64}, "hier.legs[1].plans[1].chunk.tail_chunk should be 52, not 64: "
     "the last chunk group of slice 7 of the all-reduce, 104 elements, all-reduced by "
     "hier.legs[1].groups[7] (the ranks of local index 7), holds 104, ceil(104 / 2) a chunk "
     "position (2 ranks x chunk.channels 1) rounded up to an even 2 or more (seed 001 §2's "
     "re-clamped tail)"),
    (1, 0, {"tail_chunk": 52}, "hier.legs[1].plans[0].chunk.tail_chunk should be 64, not 52: "
     "the last chunk group of slice 0 of the all-reduce, 128 elements, all-reduced by "
     "hier.legs[1].groups[0] (the ranks of local index 0), holds 128, ceil(128 / 2) a chunk "
     "position (2 ranks x chunk.channels 1) rounded up to an even 2 or more (seed 001 §2's "
     "re-clamped tail)"),
    (1, 0, {"pgta": 2}, "hier.legs[1].plans[0].chunk.pgta should be 1, not 2: slice 0 of the "
     "all-reduce, 128 elements, all-reduced by hier.legs[1].groups[0] (the ranks of local "
     "index 0), takes ceil(128 / 128) chunk groups of 2 ranks x chunk.channels 1 x "
     "chunk_size_n 64 (seed 001 §2)"),
    (2, 0, {"tail_chunk": 126}, "hier.legs[2].plans[0].chunk.tail_chunk should be 128, not 126: "
     "the last chunk group of a RING intra_allg leg's widest slice of the all-reduce, 128 "
     "elements, holds 128, ceil(128 / 1) a chunk position (chunk.channels 1) rounded up to an "
     "even 2 or more (seed 001 §2's re-clamped tail)"),
    (None, None, {"pgta": 2}, "chunk.pgta should be 1, the most chunk groups of its legs' "
     "plans, not 2 (a HIER trigger's, FORMATS §1.1)"),
])
def test_a_hier_leg_plans_chunk_layout_other_than_its_groups_is_refused(hier16_out, tmp_path,
                                                                        leg, plan, edit, says):
    """docs/DESIGN.md "HIER" and "Leg layouts", FORMATS §1.1: a HIER all-reduce's intra legs
    cut each local rank's slice as a block, every slice by the widest one's layout (128
    elements here); its inter_allr leg all-reduces the slice of its ranks' local index,
    interleaved over its 2 ranks: slices 0 .. 6 of 128 in one group of 2 x 1 x 64 (tail
    128 / 2 = 64), slice 7 of 104 in one group (tail 104 / 2 = 52), its own plan; the
    trigger's ``chunk.pgta`` is its legs' plans' most chunk groups, 1. A value other than
    that was compared only with the net ops' ``unrolled_count`` (the inter leg's: its
    ``tail_chunk`` never, the intra legs' nothing) and simulated as a match; it is refused
    naming the key path."""
    out = copy(hier16_out, tmp_path)
    t = trigger0(out)
    inter = t["hier"]["legs"][1]
    want = _hier_ar_chunks(1000, 8, 2, intra_rings=2)
    assert want["slices"] == [128] * 7 + [104]
    assert [g["plan"] for g in inter["groups"]] == [0] * 7 + [1]
    assert inter["groups"][7]["group"] == [7, 71]
    assert [p["chunk"] for p in inter["plans"]] == [want["inter"][0], want["inter"][7]] == [
        {"channels": 1, "chunk_size_n": 64, "pgta": 1, "tail_chunk": 64},
        {"channels": 1, "chunk_size_n": 64, "pgta": 1, "tail_chunk": 52}]
    assert t["hier"]["legs"][0]["plans"][0]["chunk"] == want["intra"] == {
        "channels": 1, "chunk_size_n": 128, "pgta": 1, "tail_chunk": 128}
    assert t["chunk"] == {"pgta": want["pgta"]} == {"pgta": 1}
    if leg is None:
        _retrigger(out, 0, lambda t: t["chunk"].update(edit))
        rehash(out)
    else:
        _rehier(out, lambda legs: legs[leg]["plans"][plan]["chunk"].update(edit))
    assert refused(out) == f"{out / 'manifest.json'}: field triggers[0]: {says}"


#: each engine's own sections, well typed (FORMATS §1.1), the values no matter: a trigger
#: that has a hier section as well is refused for that before its values are looked at
OWN_SECTIONS = {
    "MESH": {"mesh": {"blocks": []}},
    "KANGARING": {"kangaring": [{"channel": 0, "logical_path": [0], "units": [[0]],
                                 "duplicate": False}]},
    "SINGLE_CYCLE_RING": {"buffers": [], "single_cycle": {"pairs": [], "arcs": [0, 0],
                                                          "steps_per_group": 0}}}


@pytest.mark.parametrize("algorithm, says", [
    ("KANGARING", "triggers[0].kangaring: missing"),
    ("SINGLE_CYCLE_RING", "triggers[0].buffers: missing"),
    ("MESH", "triggers[0]: the trigger has no mesh section, which its algorithm \"MESH\" "
     "needs (MESH and SINGLE_STEP_MESH triggers have a mesh section: FORMATS §1.1)"),
])
def test_a_hier_trigger_relabelled_without_its_own_sections_is_refused_by_type(
        hier16_out, tmp_path, algorithm, says):
    """docs/CLI.md: every type of a manifest is checked before any value. hier16_out's
    trigger relabelled KANGARING or SINGLE_CYCLE_RING lacks the section such a trigger
    always has (FORMATS §1.1), as a MESH one lacks ``mesh``: status 2, naming the key
    (until 2026-12-05 evening the KANGARING and SINGLE_CYCLE_RING ones were refused for
    their hier section, status 1, their own sections unread)."""
    out = copy(hier16_out, tmp_path)
    _retrigger(out, 0, lambda t: t.__setitem__("algorithm", algorithm))
    rehash(out)
    res = cli("simulate", out)
    assert res.exit_code == 2, res.output
    assert res.stderr == f"nrtrewrite: error: {out / 'manifest.json'}: field {says}\n"


@pytest.mark.parametrize("algorithm", ["RING", "KANGARING", "MESH", "SINGLE_CYCLE_RING"])
def test_a_hier_section_on_a_trigger_of_another_algorithm_is_refused(hier16_out, tmp_path,
                                                                     algorithm):
    """FORMATS §1.1: only a HIER trigger has a ``hier`` section, and its ``chunk`` holds
    ``pgta`` alone. hier16_out's trigger saying it was lowered as RING or KANGARING was read
    with that chunk and its chunk checks asked for the ``tail_chunk`` it lacks (KeyError,
    exit 70); as MESH it simulated as a match. It is refused naming the trigger. (Each is
    given its own engine sections, well typed: a trigger without them is refused before any
    value is checked, status 2, as the test above shows.)"""
    out = copy(hier16_out, tmp_path)

    def relabel(t):
        t["algorithm"] = algorithm
        t.update(OWN_SECTIONS.get(algorithm, {}))
    _retrigger(out, 0, relabel)
    rehash(out)
    assert refused(out) == (f"{out / 'manifest.json'}: field triggers[0]: the trigger "
                            f"has a hier section, which its algorithm \"{algorithm}\" has no use "
                            "for (only a HIER trigger's legs are in hier: FORMATS §1.1)")


def _drop_hier(t: dict) -> None:
    del t["hier"]  # (a flat trigger's chunk: FORMATS §1.1's four keys, a RING chunk of 1000)
    t["chunk"].update(chunk_size_n=256, tail_chunk=2, channels=1)


@pytest.mark.parametrize("edit, was", [
    (lambda t: t.__setitem__("hier", None), "exit 2, field triggers[0].chunk.chunk_size_n: "
     "missing"),
    (_drop_hier, "exit 1, blamed on spad.bin: algo_type RING but trigger 0 was lowered as HIER"),
], ids=["null", "deleted"])
def test_a_hier_trigger_without_its_hier_section_is_refused_naming_it(hier16_out, tmp_path,
                                                                      edit, was):
    """FORMATS §1.1: HIER triggers add ``hier`` (their legs), their ``chunk`` ``pgta`` alone.
    hier16_out's trigger with ``hier`` null, or deleted and a flat trigger's chunk written in,
    was refused as something else (``was``). It is refused before its chunk is read, naming
    the trigger and the missing section, exit 2 (a key missing), with or without the
    checksums."""
    out = copy(hier16_out, tmp_path)
    _retrigger(out, 0, edit)
    line = (f"{out / 'manifest.json'}: field triggers[0]: the trigger has no hier section, "
            "which its algorithm \"HIER\" needs (a HIER trigger's legs are in hier: FORMATS "
            "§1.1)")
    res = cli("simulate", out, "--json", "--ignore-checksums")
    assert res.exit_code == 2, res.output
    assert json.loads(res.stdout)["error"] == line
    rehash(out)
    res = cli("simulate", out, "--json")
    assert res.exit_code == 2 and json.loads(res.stdout)["error"] == line, res.output


@pytest.fixture(scope="module")
def kanga16_out(tmp_path_factory) -> Path:
    """A bf16 all-reduce of 1000 elements over ranks 0..15 at LNC 2 as KANGARING: units of
    two, a primary and one secondary (docs/DESIGN.md "Kangaring")."""
    return lower_spec(coll_spec("all_reduce", "bf16", 16, 1000, lnc=2),
                      tmp_path_factory.mktemp("k16") / "o", algo="kangaring")


#: FORMATS §1.1 ``channels`` of a mesh or RDH trigger, and a HIER trigger's
MESH_CHANNELS = '[{"channel": 0, "order": []}]'
EIGHT = list(range(8))


@pytest.mark.parametrize("which, channels, says", [
    ("mesh", [{"channel": 0, "order": EIGHT}, {"channel": 7, "order": []}],
     f"should be {MESH_CHANNELS}, not "
     '[{"channel": 0, "order": [0, 1, 2, 3, 4, 5, 6, 7]}, {"channel": 7, "order": []}] '
     "(MESH triggers have no ring: one item, FORMATS §1.1)"),
    ("mesh", [{"channel": 3, "order": []}], f"should be {MESH_CHANNELS}, not "
     '[{"channel": 3, "order": []}] (MESH triggers have no ring: one item, FORMATS §1.1)'),
    ("rdh", [], f"should be {MESH_CHANNELS}, not [] (INTRA_RDH triggers have no ring: one "
     "item, FORMATS §1.1)"),
    ("hier", [{"channel": 0, "order": HIER16}],
     'should be [], not [{"channel": 0, "order": [0, 1, 2, 3, 4, 5, 6, 7, 64, 65, 66, 67, 68, '
     "69, 70, 71]}] (HIER triggers list none, their rings being their legs' plans', FORMATS "
     "§1.1)"),
], ids=["mesh-ring-and-channel-7", "mesh-channel-3", "rdh-empty", "hier-ring"])
def test_a_ringless_triggers_channels_other_than_formats_are_refused(
        mesh_out, ar2_out, hier16_out, tmp_path, which, channels, says):
    """FORMATS §1.1 ``channels``: mesh and RDH have no ring, one item ``{"channel": 0,
    "order": []}``; a HIER trigger has ``channels`` empty. mesh_out (MESH over 0..7),
    ar2_out (INTRA_RDH) and hier16_out given other channels simulated as a match (only the
    types and the 0..31 range were read). Each is refused naming ``channels`` and both
    values."""
    out = copy({"mesh": mesh_out, "rdh": ar2_out, "hier": hier16_out}[which], tmp_path)
    _retrigger(out, 0, lambda t: t.__setitem__("channels", channels))
    rehash(out)
    assert refused(out) == f"{out / 'manifest.json'}: field triggers[0]: channels {says}"


KANGA_WHY = "a KANGARING trigger's order is the cycle of its primaries"


@pytest.mark.parametrize("order, says", [
    ([0, 1, 4, 5, 8, 9, 12, 99], "channels[0].order names rank 99, not in the replica_group"),
    ([0, 0, 4, 5, 8, 9, 12, 13], f"channels[0].order lists rank 0 twice ({KANGA_WHY}, each "
     "once: FORMATS §1.1)"),
    ([], f"channels[0].order is empty ({KANGA_WHY}, 1 or more: FORMATS §1.1)"),
], ids=["stranger", "twice", "empty"])
def test_a_kangaring_order_not_of_distinct_group_ranks_is_refused(kanga16_out, tmp_path,
                                                                  order, says):
    """FORMATS §1.1: a KANGARING trigger's ``channels[].order`` is the cycle of its
    primaries, ranks of the replica group. kanga16_out's one channel, order
    [0, 1, 4, 5, 8, 9, 12, 13] (the primaries of units [0, 2], [1, 3], [4, 6], ...),
    given a stranger, a rank twice or no rank simulated as a match; each is refused."""
    out = copy(kanga16_out, tmp_path)
    assert trigger0(out)["channels"] == [{"channel": 0, "order": [0, 1, 4, 5, 8, 9, 12, 13]}]
    _retrigger(out, 0, lambda t: t["channels"][0].__setitem__("order", order))
    rehash(out)
    assert refused(out) == f"{out / 'manifest.json'}: field triggers[0]: {says}"


def test_ringless_and_kangaring_channels_as_lowered_simulate_clean(mesh_out, ar2_out,
                                                                   hier16_out, kanga16_out):
    for out, channels in ((mesh_out, [{"channel": 0, "order": []}]),
                          (ar2_out, [{"channel": 0, "order": []}]), (hier16_out, [])):
        assert trigger0(out)["channels"] == channels
    for out in (mesh_out, ar2_out, hier16_out, kanga16_out):
        assert cli("simulate", out, "--json").exit_code == 0


ALGORITHMS_TEXT = ("RING, KANGARING, SINGLE_CYCLE_RING, MESH, SINGLE_STEP_MESH, INTRA_RDH, "
                   "INTER_RDH, HIER")


@pytest.mark.parametrize("which, key, value, says", [
    # an algorithm no entry runs was blamed on spad.bin: `algo_type INTRA_RDH but trigger 0
    # was lowered as KANGAROO`
    ("ar2", "algorithm", "KANGAROO",
     f'algorithm "KANGAROO" is not simulated (only {ALGORITHMS_TEXT})'),
    ("ring2n", "algorithm", "TWO_STEP_POD_MESH",
     f'algorithm "TWO_STEP_POD_MESH" is not simulated (only {ALGORITHMS_TEXT})'),
    # an engine section of another algorithm (FORMATS §1.1) simulated as a match, a mesh
    # section's blocks on the RDH trigger widening the views its legs may start at
    ("ar2", "mesh", {"blocks": [[0, 1]]}, 'the trigger has a mesh section, which its algorithm '
     '"INTRA_RDH" has no use for (only MESH and SINGLE_STEP_MESH triggers have one: FORMATS '
     "§1.1)"),
    ("ring2n", "rdh", {"super_blocks": [[0, 8192]]}, 'the trigger has an rdh section, which its '
     'algorithm "RING" has no use for (only INTRA_RDH and INTER_RDH triggers have one: FORMATS '
     "§1.1)"),
    ("ring2n", "single_cycle", {"pairs": [[0, 1]]}, 'the trigger has a single_cycle section, '
     'which its algorithm "RING" has no use for (only SINGLE_CYCLE_RING triggers have one: '
     "FORMATS §1.1)"),
    ("ar2", "kangaring", [], 'the trigger has a kangaring section, which its algorithm '
     '"INTRA_RDH" has no use for (only KANGARING triggers have one: FORMATS §1.1)'),
])
def test_an_unknown_algorithm_or_another_engines_section_is_refused(
        ar2_out, ring2n_out, tmp_path, which, key, value, says):
    """FORMATS §1.1 ``algorithm``: what was lowered, one of the engines the simulator runs;
    mesh triggers add ``mesh``, RDH triggers ``rdh``, KANGARING ``kangaring``,
    SINGLE_CYCLE_RING ``single_cycle`` (HIER ``hier``: the test above). ar2_out's trigger is
    INTRA_RDH with an ``rdh`` section, ring2n_out's a RING with none; each is refused naming
    the trigger and the value or section."""
    out = copy(ar2_out if which == "ar2" else ring2n_out, tmp_path)
    t = trigger0(out)
    assert t["algorithm"] == ("INTRA_RDH" if which == "ar2" else "RING")
    assert ("rdh" in t) == (which == "ar2") and not {"mesh", "kangaring", "single_cycle"} & set(t)
    _retrigger(out, 0, lambda t: t.__setitem__(key, value))
    rehash(out)
    assert refused(out) == f"{out / 'manifest.json'}: field triggers[0]: {says}"


@pytest.mark.parametrize("leg", [0, 1])
def test_an_empty_hier_leg_group_is_refused_naming_it(hier16_out, tmp_path, leg):
    """FORMATS §1.1: a HIER leg's ``groups[g].group`` lists the group's ranks. hier16_out's
    intra_redsct group 0 (ranks 0 .. 7) or inter_allr group 0 (ranks 0 and 64) made empty,
    its plans without channels (so no ring order names a position outside it): the chunk
    layout check cut the intra leg's slices by the group's size, 0 (ZeroDivisionError, exit
    70), and took the inter group's first rank (IndexError); before that check the intra
    case was blamed on legs.bin and the inter case simulated as a match. It is refused
    naming the key."""
    out = copy(hier16_out, tmp_path)

    def empty(legs):
        legs[leg]["groups"][0]["group"] = []
        for plan in legs[leg]["plans"]:
            plan["channels"] = []
    _rehier(out, empty)
    assert refused(out) == (f"{out / 'manifest.json'}: field triggers[0]: hier.legs[{leg}]."
                            "groups[0].group is empty (a leg's group lists its ranks, 1 or "
                            "more)")


def _entry_channels_refusal(out: Path, record: int, bits: list[int], i: int, k: int, g: int,
                            want: list[int], algorithm: str) -> str:
    """The line rank 0's spad.bin entry ``record`` is refused with when it runs channels
    ``bits`` and its group's plan of HIER leg ``i`` lists ``want``."""
    return (f"{out / 'rank-0000'}: field channel_list, rank 0, artifact spad.bin, record "
            f"{record}: channel_list runs channels {bits}, the channels of "
            f"hier.legs[{i}].plans[{k}], the plan of rank 0's group hier.legs[{i}].groups[{g}], "
            f"are {want} (manifest.json triggers[0].hier.legs[{i}].plans[{k}].channels: a "
            f"{algorithm} entry runs each channel of its group's plan, FORMATS §1.1, §2)")


@pytest.fixture(scope="module")
def hier16_kangaring_out(tmp_path_factory) -> Path:
    """hier16_out's model with both intra legs forced to KANGARING (inter_allr stays
    SINGLE_CYCLE_RING)."""
    out = lower_spec(coll_spec("all_reduce", "bf16", HIER16, 1000, lnc=2),
                     tmp_path_factory.mktemp("hier16k") / "o",
                     algo="intra_redsct:kangaring;intra_allg:kangaring")
    assert [leg["algorithm"] for leg in trigger0(out)["hier"]["legs"]] == [
        "KANGARING", "SINGLE_CYCLE_RING", "KANGARING"]
    return out


#: hier16_out's channel ids by hand: each leg's plans have chunk.channels 1 (asserted below),
#: so intra_redsct runs one RING channel, inter_allr one SINGLE_CYCLE_RING pair (a CW and a
#: CCW channel, FORMATS §1.1), intra_allg one RING channel, and a HIER trigger's legs use
#: disjoint ids, each leg's after those of the legs before it, from 0 (docs/DESIGN.md "HIER"):
#: 0; 1, 2; 3.
HIER16_LEG_CHANNELS = [[0], [1, 2], [3]]


def _past_the_leg_ranges(monkeypatch, out: Path, i: int) -> None:
    """A plan's channels moved off its leg's range (``hier.legs[i].channel_base`` and
    ``channel_ids``, read since 2026-12-05) are refused first, at the manifest, naming the
    leg's ``channel_ids`` or the plan whose ids do not run from its ``channel_base``
    (tests/test_simulate_hier_channel_range.py); with that check taken out the edit reaches
    the entries' check the test was written for."""
    err = refused(out)
    assert err.startswith(f"{out / 'manifest.json'}: field triggers[0]: hier.legs[{i}]."), err
    assert f"hier.legs[{i}].channel_ids " in err or "].channels should run ids " in err, err
    monkeypatch.setattr(triggers_mod, "_check_leg_channel_ranges", lambda *a: None)


def _leg_channel_ids(legs: list[dict]) -> list[list[int]]:
    """Each leg's plan 0's channel ids, once every plan is asserted to have chunk.channels 1."""
    assert all(plan["chunk"]["channels"] == 1 for leg in legs for plan in leg["plans"])
    return [sorted(c["channel"] for c in leg["plans"][0]["channels"]) for leg in legs]


@pytest.mark.parametrize("i, record, shift", [(1, 1, 20), (0, 0, 31), (2, 2, 4)])
def test_a_hier_leg_plans_channels_other_than_its_entries_are_refused_before_the_legs(
        hier16_out, tmp_path, monkeypatch, i, record, shift):
    """FORMATS §1.1: a HIER leg plan's ``channels`` are the channels its groups run, and on a
    RING or SINGLE_CYCLE_RING leg every rank of the group is on each ring, so each rank's
    entry for the leg (spad.bin record i: one entry per leg, in order, FORMATS §3.3) runs
    exactly its group's plan's channel ids. Rank 0 is in group 0 of every leg (node 0's
    ranks; local index 0), whose plan is plan 0. inter_allr's plans moved to channels 21,
    22 simulated as a match, intra_redsct's channel 0 -> 31 was blamed on legs.bin (`the
    ring successor of channel 0 is -1`), intra_allg's 3 -> 0 (intra_redsct's id) likewise;
    each is refused at spad.bin naming the plan, the group and both lists (intra_allg's 3
    -> 7 here: 3 -> 0, an earlier leg's id, is refused before, as legs sharing a channel id,
    tests/test_simulate_hier_checks.py). inter_allr's ``single_cycle.pairs`` move with its
    channels, as they name them (else refused before, tests/test_simulate_single_cycle.py)."""
    out = copy(hier16_out, tmp_path)
    legs = trigger0(out)["hier"]["legs"]
    assert _leg_channel_ids(legs) == HIER16_LEG_CHANNELS
    assert all(0 in leg["groups"][0]["group"] and leg["groups"][0]["plan"] == 0
               for leg in legs)

    def move(legs):
        for plan in legs[i]["plans"]:
            for c in plan["channels"]:
                c["channel"] += shift
            if "single_cycle" in plan:  # (its pairs name the channels: FORMATS §1.1)
                plan["single_cycle"]["pairs"] = [[cw + shift, ccw + shift]
                                                 for cw, ccw in plan["single_cycle"]["pairs"]]
    _rehier(out, move)
    _past_the_leg_ranges(monkeypatch, out, i)
    runs = HIER16_LEG_CHANNELS[i]
    want = [c + shift for c in runs]
    algorithm = ["RING", "SINGLE_CYCLE_RING", "RING"][i]
    assert refused(out) == _entry_channels_refusal(out, record, runs, i, 0, 0, want, algorithm)


@pytest.mark.parametrize("k, c", [(0, 1), (1, 1), (0, 0)])
def test_a_hier_leg_plan_listing_a_channel_twice_is_refused_naming_it(
        hier16_out, tmp_path, k, c):
    """FORMATS §1.1: a plan's ``channels`` are the channels its groups run, each once.
    hier16_out's inter_allr plans (0: slices 0 .. 6, 1: slice 7) list channels 1 and 2
    (HIER16_LEG_CHANNELS); with item c set to the other item's id the plan was read as a
    map by channel, one ring order kept, and simulated as a match (entries still run 1 and
    2). It is refused before the plan's ring orders are read, naming the second item."""
    out = copy(hier16_out, tmp_path)
    legs = trigger0(out)["hier"]["legs"]
    assert _leg_channel_ids(legs)[1] == [1, 2] and len(legs[1]["plans"]) == 2
    assert all([x["channel"] for x in plan["channels"]] == [1, 2] for plan in legs[1]["plans"])
    other = 1 - c
    _rehier(out, lambda legs: legs[1]["plans"][k]["channels"][c].__setitem__(
        "channel", legs[1]["plans"][k]["channels"][other]["channel"]))
    ch = [1, 2][other]
    assert refused(out) == (f"{out / 'manifest.json'}: field triggers[0]: hier.legs[1]."
                            f"plans[{k}].channels[1].channel {ch} is channels[0]'s too (a "
                            "plan lists each channel its groups run once: FORMATS §1.1)")


@pytest.mark.parametrize("i, channel", [(0, 9), (2, 7)])
def test_a_kangaring_hier_leg_plans_channel_other_than_its_entries_is_refused(
        hier16_kangaring_out, tmp_path, monkeypatch, i, channel):
    """FORMATS §1.1, §3.3 and docs/TOPOLOGY.md §4: on each channel of a KANGARING leg every
    rank of the group is its unit's primary or a secondary (the units cover the group), and
    a secondary runs its peer_post / peer_wait legs there, so every rank's entry runs each
    channel of its group's plan, as on a ring. The channel ids are hier16_out's (0; 1, 2; 3).
    intra_redsct's plan channel 0 -> 9, or intra_allg's 3 -> 0, simulated as a match (no
    KANGARING leg reads a ring order's channel); each is refused at spad.bin. The plan's
    ``kangaring`` item moves with it (that section names its channel too, read since
    2026-12-05), and intra_allg's goes to 7 (0 is intra_redsct's: legs sharing an id are
    refused before, tests/test_simulate_hier_checks.py)."""
    out = copy(hier16_kangaring_out, tmp_path)
    legs = trigger0(out)["hier"]["legs"]
    assert _leg_channel_ids(legs) == HIER16_LEG_CHANNELS
    assert len(legs[i]["plans"]) == 1 and legs[i]["groups"][0]["group"][0] == 0

    def move(legs):
        plan = legs[i]["plans"][0]
        plan["channels"][0]["channel"] = plan["kangaring"][0]["channel"] = channel
    _rehier(out, move)
    _past_the_leg_ranges(monkeypatch, out, i)
    assert refused(out) == _entry_channels_refusal(out, i, HIER16_LEG_CHANNELS[i], i, 0, 0,
                                                   [channel], "KANGARING")


def test_a_kangaring_triggers_channel_its_entries_do_not_run_is_refused(
        kangaring_out, tmp_path):
    """As a RING trigger's (FORMATS §1.1, §2): every rank of a flat KANGARING group is on
    each channel, a primary or a secondary of a unit (docs/TOPOLOGY.md §4, FORMATS §3.3), so
    its entry runs the trigger's channels; kangaring_out's one channel (chunk.channels 1),
    channel 0, listed as 5 simulated as a match. Refused at rank 0's spad.bin entry 0 (its
    ``kangaring`` item moved too: that section names the channel as well, read since
    2026-12-05)."""
    out = copy(kangaring_out, tmp_path)
    assert [c["channel"] for c in trigger0(out)["channels"]] == [0]

    def move(t):
        t["channels"][0]["channel"] = t["kangaring"][0]["channel"] = 5
    _retrigger(out, 0, move)
    rehash(out)
    assert refused(out) == (
        f"{out / 'rank-0000'}: field channel_list, rank 0, artifact spad.bin, record 0: "
        "channel_list runs channels [0], trigger 0's channels are [5] (manifest.json "
        "triggers[0].channels: a KANGARING entry runs each channel of its trigger, FORMATS "
        "§1.1, §2)")


#: hier16_out's slices by hand (docs/DESIGN.md "HIER"): 1000 elements over 8 local ranks, the
#: even share ceil(1000 / 8) = 125 over 32, so slices of 128, the last 1000 - 7 x 128 = 104
HIER16_SLICES = "[[0, 128], [128, 256], [256, 384], [384, 512], [512, 640], [640, 768], " \
    "[768, 896], [896, 1000]]"


@pytest.mark.parametrize("slices", [
    [[0, 500], [500, 1000]],  # two slices (one per node, not per local index)
    [[0, 125], [125, 250], [250, 375], [375, 500], [500, 625], [625, 750], [750, 875],
     [875, 1000]],  # the even share without the 32-element alignment
    [[0, 128], [128, 256], [256, 384], [384, 512], [512, 640], [640, 768], [768, 896],
     [896, 999]],  # one element short
], ids=["per-node", "unaligned", "short"])
def test_hier_slices_other_than_designs_are_refused_naming_both(hier16_out, tmp_path, slices):
    """FORMATS §1.1: a HIER all-reduce's ``hier.slices`` are [start, stop) of each local
    index's slice, docs/DESIGN.md "HIER"'s even_split of the message (hier16_out: eight of
    128, the last 104). The simulator recomputed them and never read the manifest's, so a
    hand-edited value simulated as a match; it is refused naming the key and both values."""
    out = copy(hier16_out, tmp_path)
    assert json.dumps(trigger0(out)["hier"]["slices"]) == HIER16_SLICES
    _retrigger(out, 0, lambda t: t["hier"].__setitem__("slices", slices))
    rehash(out)
    assert refused(out) == (
        f"{out / 'manifest.json'}: field triggers[0]: hier.slices should be {HIER16_SLICES}, not "
        f"{json.dumps(slices)}: an all-reduce's 1000 elements in 8 slices, one per local index "
        '(the ranks of an intra_redsct group), cut by even_split (docs/DESIGN.md "HIER")')


def test_hier_slices_of_an_all_gather_are_refused(tmp_path):
    """FORMATS §1.1: ``slices`` are an all-reduce's; a HIER all-gather's are ``[]`` (its legs
    cut each position's block, not slices of a message). One made ``[[0, 50], [50, 100]]``
    was never read; it is refused."""
    out = lower_spec(coll_spec("all_gather", "bf16", HIER16, 100, lnc=2), tmp_path / "o",
                     algo=None)
    t = trigger0(out)
    assert (t["algorithm"], t["hier"]["slices"]) == ("HIER", [])
    _retrigger(out, 0, lambda t: t["hier"].__setitem__("slices", [[0, 50], [50, 100]]))
    rehash(out)
    assert refused(out) == (
        f"{out / 'manifest.json'}: field triggers[0]: hier.slices should be [], not [[0, 50], "
        "[50, 100]]: only an all-reduce's message is cut into slices (FORMATS §1.1)")


@pytest.mark.parametrize("key, value", [("tail_chunk", 2), ("pgta", 2)])
def test_a_hier_leg_plan_no_group_runs_is_refused(hier16_out, tmp_path, key, value):
    """FORMATS §1.1: a leg's ``plans`` are its groups' distinct plans, each group naming its
    own by index. hier16_out's intra_redsct leg has one plan, run by both node groups; a
    second plan no group names was checked only for its values' ranges: with a tail_chunk
    of 2 (the layout's is 128) it simulated as a match, with pgta 2 it was blamed on the
    trigger's ``chunk.pgta`` 1 (the most of any plan's, unused ones included). It is
    refused naming the plan."""
    out = copy(hier16_out, tmp_path)

    def add_plan(legs):
        assert [g["plan"] for g in legs[0]["groups"]] == [0, 0] and len(legs[0]["plans"]) == 1
        extra = json.loads(json.dumps(legs[0]["plans"][0]))
        extra["chunk"][key] = value
        legs[0]["plans"].append(extra)
    _rehier(out, add_plan)
    assert refused(out) == (f"{out / 'manifest.json'}: field triggers[0]: hier.legs[0].plans[1] "
                            "is no group's plan (a leg's plans are its groups' distinct plans: "
                            "FORMATS §1.1)")


def test_a_hier_leg_plan_listed_twice_is_refused(hier16_out, tmp_path):
    """FORMATS §1.1: a leg's ``plans`` are its groups' distinct plans, each once.
    hier16_out's intra_redsct leg has one plan, run by both node groups; a copy of it
    appended and named by the second group simulated as a match. It is refused naming both
    plans."""
    out = copy(hier16_out, tmp_path)

    def repeat_plan(legs):
        assert [g["plan"] for g in legs[0]["groups"]] == [0, 0] and len(legs[0]["plans"]) == 1
        legs[0]["plans"].append(json.loads(json.dumps(legs[0]["plans"][0])))
        legs[0]["groups"][1]["plan"] = 1
    _rehier(out, repeat_plan)
    assert refused(out) == (f"{out / 'manifest.json'}: field triggers[0]: hier.legs[0].plans[1] "
                            "repeats plans[0] (a leg's plans are its groups' distinct plans, "
                            "each once: FORMATS §1.1)")


@pytest.mark.parametrize("buffer, says", [
    ({"offset": 4000, "region": "gw", "role": "gw2"},
     "hier.legs[1].buffers[5].offset 4000 is outside the gw region's 4000 bytes"),
    ({"offset": 8000, "region": "scratch", "role": "recv2"},
     "hier.legs[1].buffers[5].offset 8000 is outside the scratch region's 8000 bytes"),
    ({"offset": -2, "region": "scratch", "role": "recv2"},
     "hier.legs[1].buffers[5].offset -2 is outside the scratch region's 8000 bytes"),
], ids=["gw-end", "scratch-end", "negative"])
def test_a_hier_leg_buffer_outside_its_region_is_refused(hier16_out, tmp_path, buffer, says):
    """FORMATS §1.1: a leg's ``buffers`` lie inside their regions (scratch or gw, ``offset``
    in bytes). hier16_out: 1000 bf16 elements, a space of 2000 bytes; its single-cycle inter
    leg gives scratch four spaces (8000 bytes) and the gateway two (4000). A buffer appended
    to that leg (its gw, gw2, in, recv and recv2, so index 5) at a region's end, or before
    its start, simulated as a match until 2026-12-05. It is refused naming the key and the
    region's size (on a leg that is not single-cycle a gw2 or recv2 is refused first, as an
    older nrtrewrite's: ``test_a_single_cycle_view_on_another_hier_leg_says_...``)."""
    out = copy(hier16_out, tmp_path)
    assert sorted(b["role"] for b in trigger0(out)["hier"]["legs"][1]["buffers"]) == [
        "gw", "gw2", "in", "recv", "recv2"]
    _rehier(out, lambda legs: legs[1]["buffers"].append(buffer))
    assert refused(out) == (f"{out / 'manifest.json'}: field triggers[0]: {says} (a buffer "
                            "lies inside its region: FORMATS §1.1)")


def test_a_buffer_in_a_region_other_than_scratch_or_gw_is_refused(scr1000_out, tmp_path):
    """FORMATS §1.1: a buffer's ``region`` is scratch or gw. A single-cycle trigger's
    ``buffers`` entry (its second views) moved to ``sbuf`` was read as an anchor in no
    region; it is refused naming the key."""
    out = copy(scr1000_out, tmp_path)
    _retrigger(out, 0, lambda t: t["buffers"][0].__setitem__("region", "sbuf"))
    rehash(out)
    assert refused(out) == (f"{out / 'manifest.json'}: field triggers[0]: buffers[0].region "
                            'should be scratch or gw, not "sbuf" (FORMATS §1.1)')


BUFFER_WHY = "(a buffer lies inside its region: FORMATS §1.1)"


@pytest.mark.parametrize("edit, says", [
    # 3999 + 2 > 4000: the element at the offset is cut by the region's end
    (lambda top: top["triggers"][0]["buffers"][0].__setitem__("offset", 3999),
     "buffers[0].offset 3999 leaves 1 byte of the scratch region's 4000 bytes, less than a "
     f"BF16 element (2 bytes) {BUFFER_WHY}"),
    (lambda top: top["memory"].__setitem__("regions", [
        r for r in top["memory"]["regions"] if r["kind"] != "scratch"]),
     f'buffers[0].region "scratch": the memory map has no scratch region {BUFFER_WHY}'),
], ids=["last-byte", "no-scratch"])
def test_a_single_cycle_buffer_whose_element_does_not_fit_its_region_is_refused(
        scr1000_out, tmp_path, edit, says):
    """FORMATS §1.1: element e of a buffer is at offset + e x dtype size inside its region.
    scr1000_out: 1000 bf16 elements, a space of 2000 bytes, scratch two spaces (4000 bytes,
    docs/DESIGN.md: RECV at 0, the second receive view at one space), its ``buffers`` one
    ``recv2`` at 2000. At 3999 its first element's second byte is past the region: the check
    passed it (offset < 4000) and it was refused later, at sb2sb.bin; a memory map without
    the scratch region was called one "which is empty". Each is refused naming the key."""
    out = copy(scr1000_out, tmp_path)
    top = json.loads((out / "manifest.json").read_text())
    assert top["triggers"][0]["buffers"] == [{"offset": 2000, "region": "scratch",
                                              "role": "recv2"}]
    assert [r["size"] for r in top["memory"]["regions"] if r["kind"] == "scratch"] == [4000]
    edit(top)
    (out / "manifest.json").write_text(json.dumps(top, indent=1, sort_keys=True) + "\n")
    rehash(out)
    assert refused(out) == f"{out / 'manifest.json'}: field triggers[0]: {says}"


@pytest.mark.parametrize("which, algorithm", [("ring2n", "RING"), ("hier16", "HIER")])
def test_trigger_buffers_on_a_trigger_other_than_single_cycle_ring_are_refused(
        ring2n_out, hier16_out, tmp_path, which, algorithm):
    """FORMATS §1.1: a trigger's ``buffers`` lists a flat trigger's extra views
    (SINGLE_CYCLE_RING's second receive and staging views); a trigger without such views
    has no ``buffers`` key. A RING or HIER trigger given a ``recv2`` at scratch 0 (inside
    its region) simulated as a match; it is refused naming the key and the algorithm."""
    out = copy(ring2n_out if which == "ring2n" else hier16_out, tmp_path)
    assert "buffers" not in trigger0(out)
    _retrigger(out, 0, lambda t: t.__setitem__(
        "buffers", [{"offset": 0, "region": "scratch", "role": "recv2"}]))
    rehash(out)
    assert refused(out) == (f"{out / 'manifest.json'}: field triggers[0]: buffers lists 1 "
                            f"buffer on a {algorithm} trigger (only a SINGLE_CYCLE_RING trigger "
                            "has buffers, its second views: FORMATS §1.1)")


GW_WHY = ("every HIER leg lists gw at offset 0 of the gw region, the gateway view every entry "
          "names: FORMATS §1.1")


#: what a RING or KANGARING HIER leg listing a single-cycle leg's second view is told: an
#: nrtrewrite before 2026-12-05 wrote such legs (FORMATS §1.1), so lower the model again
OLDER_HIER = ("(only a single-cycle leg lists recv2 and gw2: FORMATS §1.1); an nrtrewrite "
              "before 2026-12-05 listed them on every HIER leg: lower the model again")


def refused_as_older(out: Path) -> str:
    """Simulated: refused before the run (status 2, the simulation cannot be done), one
    line."""
    res = cli("simulate", out)
    assert res.exit_code == 2, res.output
    assert res.stdout == "" and res.stderr.count("\n") == 1, res.output
    assert res.stderr.startswith("nrtrewrite: error: "), res.stderr
    return res.stderr[len("nrtrewrite: error: "):].rstrip("\n")


@pytest.mark.parametrize("edit, says", [
    (lambda legs: legs[0]["buffers"].append({"offset": 2000, "region": "gw", "role": "gw2"}),
     f'hier.legs[0].buffers[3].role "gw2" is on a RING leg {OLDER_HIER}'),
    (lambda legs: legs[2]["buffers"].append({"offset": 6000, "region": "scratch",
                                             "role": "recv2"}),
     f'hier.legs[2].buffers[1].role "recv2" is on a RING leg {OLDER_HIER}'),
], ids=["ring-gw2", "ring-recv2"])
def test_a_single_cycle_view_on_another_hier_leg_says_lower_the_model_again(
        hier16_out, tmp_path, edit, says):
    """FORMATS §1.1: only a single-cycle HIER leg lists ``recv2`` and ``gw2``. hier16_out's
    RING legs 0 and 2 given one inside its region (gw at 2000, scratch at 6000 = three
    spaces of 2000 bytes) simulated as a match until 2026-12-05 (the roles were not read);
    as an nrtrewrite before 2026-12-05 listed both on every leg, the refusal says to lower
    the model again, status 2."""
    out = copy(hier16_out, tmp_path)
    _rehier(out, edit)
    assert refused_as_older(out) == f"{out / 'manifest.json'}: field triggers[0]: {says}"


@pytest.mark.parametrize("op, legs", [
    ("all_reduce", ("intra_redsct", "inter_allr", "intra_allg")),
    ("reduce_scatter", ("intra_redsct", "inter_redsct")),
])
def test_an_output_with_the_hier_buffers_written_before_2026_12_05_is_lowered_again(
        tmp_path, op, legs):
    """Until 0ee9775 (2026-12-05) ``lower`` listed ``gw2`` at gw one space and ``recv2`` at
    scratch three spaces (docs/DESIGN.md "HIER") on every HIER leg, in outputs of format
    version 2 whose artifacts are today's bytes; on a trigger without a single-cycle leg
    both lay past their regions' ends: gw holds one space (1000 bf16 elements, 2000 bytes),
    scratch three (an all-reduce's RECV, MID and the inter leg's RECV) or, for a
    reduce-scatter, likewise. Such an output (here rebuilt from today's by adding the two
    entries to each leg) was refused as a protocol error (status 1: `... buffers[1].offset
    2000 is outside the gw region's 2000 bytes ...`); it is told to lower the model again,
    at its first leg, status 2."""
    algo = "inter_allr:ring" if op == "all_reduce" else "inter_redsct:ring"
    out = lower_spec(coll_spec(op, "bf16", HIER16, 1000 if op == "all_reduce" else 1024,
                               lnc=2), tmp_path / "o", algo=algo)
    t = trigger0(out)
    assert tuple(leg["name"] for leg in t["hier"]["legs"]) == legs
    assert {leg["algorithm"] for leg in t["hier"]["legs"]} == {"RING"}
    space = (1000 if op == "all_reduce" else 1024) * 2
    regions = {r["kind"]: r["size"] for r in json.loads(
        (out / "manifest.json").read_text())["memory"]["regions"] if r["kind"] in ("gw", "scratch")}
    assert regions["gw"] == space

    def older(legs):
        for leg in legs:
            leg["buffers"][1:1] = [{"offset": space, "region": "gw", "role": "gw2"}]
            leg["buffers"].append({"offset": 3 * space, "region": "scratch", "role": "recv2"})
    _rehier(out, older)
    assert refused_as_older(out) == (f"{out / 'manifest.json'}: field triggers[0]: "
                                     f'hier.legs[0].buffers[1].role "gw2" is on a RING leg '
                                     f"{OLDER_HIER}")


@pytest.mark.parametrize("edit, says", [
    (lambda legs: legs[2].__setitem__("buffers", []),
     f"hier.legs[2].buffers should list 1 gw buffer, not 0 ({GW_WHY})"),
    (lambda legs: legs[2]["buffers"][0].__setitem__("offset", 8),
     'hier.legs[2].buffers[0] (role gw) should be {"offset": 0, "region": "gw"}, not '
     f'{{"offset": 8, "region": "gw"}} ({GW_WHY})'),
    (lambda legs: legs[1]["buffers"].append({"offset": 0, "region": "gw", "role": "gw"}),
     f"hier.legs[1].buffers should list 1 gw buffer, not 2 ({GW_WHY})"),
], ids=["no-gw", "gw-at-8", "gw-twice"])
def test_hier_leg_buffers_other_than_formats_roles_are_refused(hier16_out, tmp_path, edit,
                                                               says):
    """FORMATS §1.1: every HIER leg lists ``gw`` at 0 (the gateway view every entry names),
    only a single-cycle leg ``recv2`` and ``gw2``. hier16_out: 1000 bf16 elements (a space of
    2000 bytes), gw 4000 bytes, scratch 8000; its RING legs 0 and 2 given a second view
    inside the region (gw at 2000, scratch at 6000 = three spaces), its last leg without its
    gw buffer or with it at 8, or the single-cycle leg with a second gw, simulated as a match
    (the roles were not read). Each is refused naming the key."""
    out = copy(hier16_out, tmp_path)
    legs = trigger0(out)["hier"]["legs"]
    assert legs[2]["buffers"] == [{"offset": 0, "region": "gw", "role": "gw"}]
    assert sorted(b["role"] for b in legs[0]["buffers"]) == ["gw", "out", "recv"]
    _rehier(out, edit)
    assert refused(out) == f"{out / 'manifest.json'}: field triggers[0]: {says}"


#: docs/DESIGN.md "HIER": the legs of a HIER all-reduce, in order
HIER_AR_WHY = ("a HIER ALLREDUCE runs the legs intra_redsct, inter_allr, intra_allg, in that "
               "order (docs/DESIGN.md \"HIER\")")


@pytest.mark.parametrize("edit, says", [
    (lambda legs: legs[0].__setitem__("name", "intra_x"),
     'hier.legs[0].name should be intra_redsct, not "intra_x"'),
    (lambda legs: legs.insert(1, legs.pop(2)), "hier.legs[1].name should be inter_allr, not "
                                               '"intra_allg"'),
    (lambda legs: legs.pop(), "hier.legs should list 3 legs, not 2"),
    (lambda legs: legs.append({**json.loads(json.dumps(legs[2])), "name": "extra"}),
     "hier.legs should list 3 legs, not 4"),
], ids=["renamed", "swapped", "dropped", "extra"])
def test_hier_legs_other_than_designs_are_refused_naming_the_leg(hier16_out, tmp_path, edit,
                                                                 says):
    """docs/DESIGN.md "HIER": a HIER all-reduce runs intra_redsct, inter_allr and intra_allg,
    in that order. hier16_out's first leg renamed ``intra_x`` (the audit's F2) was blamed on
    the rank entries' ``algo_type`` (``algo_type RING but trigger 0 was lowered as HIER with
    leg intra_redsct HIER``: the entries name the leg the manifest no longer lists); the
    manifest's legs are refused naming the key, also in another order, one short or one too
    many (a copy of intra_allg appended as ``extra``: the three legs DESIGN.md gives are
    there, in order, and a fourth)."""
    out = copy(hier16_out, tmp_path)
    _rehier(out, edit)
    assert refused(out) == (f"{out / 'manifest.json'}: field triggers[0]: {says}: "
                            f"{HIER_AR_WHY}")


@pytest.mark.parametrize("leg, algorithm", [(0, "KANGAROO"), (2, "HIER")])
def test_a_hier_leg_algorithm_the_simulator_does_not_run_is_refused_naming_it(
        hier16_out, tmp_path, leg, algorithm):
    """FORMATS §1.1: a HIER leg's ``algorithm`` is its engine, a flat one. hier16_out's
    intra_redsct (leg 0) saying KANGAROO, or intra_allg (leg 2) HIER, was blamed on rank 0's
    spad.bin (``algo_type RING but trigger 0 was lowered as HIER with leg intra_redsct
    KANGAROO``); it is refused naming the key and the value."""
    out = copy(hier16_out, tmp_path)
    _rehier(out, lambda legs: legs[leg].__setitem__("algorithm", algorithm))
    assert refused(out) == (f"{out / 'manifest.json'}: field triggers[0]: hier.legs[{leg}]"
                            f".algorithm \"{algorithm}\" is not simulated as a leg (only RING, "
                            "KANGARING, SINGLE_CYCLE_RING, MESH, SINGLE_STEP_MESH, INTRA_RDH, "
                            "INTER_RDH)")


def _regroup(g: int, group):
    """hier.legs edit: inter_allr's (leg 1) group ``g`` made ``group``, or dropped (None)."""
    def edit(legs):
        if group is None:
            del legs[1]["groups"][g]
        else:
            legs[1]["groups"][g]["group"] = group
    return edit


@pytest.mark.parametrize("edit, says", [
    (_regroup(0, [0, 200]), "names rank 200, not in the replica_group"),
    (_regroup(1, [0, 65]), "lists rank 0 twice"),
    (_regroup(0, None), "lacks rank 0 of the replica_group (a HIER leg's groups hold each rank "
     "once)"),
    # (a group that lost a rank shares its plan with larger groups: until 2026-12-05 it was
    # blamed on that plan, `leg "inter_allr": plan 0's ring order [0, 1] names positions
    # outside group [1]`, the groups checked after their plans)
    (_regroup(1, [1]), "lacks rank 65 of the replica_group (a HIER leg's groups hold each rank "
     "once)"),
], ids=["stranger", "twice", "missing", "shrunk"])
def test_hier_leg_groups_other_than_the_replica_group_once_are_refused(hier16_out, tmp_path,
                                                                       edit, says):
    """docs/DESIGN.md "HIER": a leg's groups are the replica group's ranks, each in one group
    (intra legs: each node's; inter legs: each local index's). hier16_out's inter_allr
    groups are [j, 64 + j] for j = 0 .. 7, all but the last on plan 0. A group naming rank
    200 (outside HIER16), one giving rank 0 again in place of 1, or group 0 dropped were
    not checked (rank 0's inter entry read its leg from no group); they are refused naming
    the leg's groups."""
    out = copy(hier16_out, tmp_path)
    legs = _rehier(out, edit)
    assert [g["group"] for g in legs[1]["groups"][:2]] == [[0, 64], [1, 65]]
    assert refused(out) == (f"{out / 'manifest.json'}: field triggers[0]: hier.legs[1].groups "
                            f"{says}")


def test_a_hier_groups_plan_index_or_a_plan_position_outside_its_group_is_named_by_key(
        hier16_out, tmp_path):
    """FORMATS §1.1: a HIER group names its plan by its index in the leg's ``plans``, and a
    plan's ring orders list positions of each group that runs it. hier16_out's inter_allr
    (leg 1) has 2 plans (groups 0 .. 6 on plan 0, group 7 on plan 1), each group two ranks
    [j, 64 + j], plan 0's rings over positions 0 and 1. Group 0 naming plan 5, or group 0
    cut to [0] with rank 64 moved to group 1 (every rank still once) so that plan 0's ring
    names position 1 outside it, is refused naming the key paths (the messages named the
    leg and values only: `leg "inter_allr": group [0, 64] names plan 5, the leg has 2`,
    `leg "inter_allr": plan 0's ring order [0, 1] names positions outside group [0]`)."""
    out = copy(hier16_out, tmp_path)
    legs = _rehier(out, lambda legs: legs[1]["groups"][0].__setitem__("plan", 5))
    assert [g["plan"] for g in legs[1]["groups"]] == [0] * 7 + [1] and len(legs[1]["plans"]) == 2
    assert refused(out) == (f"{out / 'manifest.json'}: field triggers[0]: hier.legs[1].groups[0]"
                            ".plan 5 is not an index of hier.legs[1].plans, which lists 2 plans "
                            "(a group names its plan by its index there: FORMATS §1.1)")

    def move(legs):
        legs[1]["groups"][0]["group"] = [0]
        legs[1]["groups"][1]["group"] = [64, 1, 65]
    out = copy(hier16_out, tmp_path, "t2")
    legs = _rehier(out, move)
    assert legs[1]["groups"][0]["group"] == [0, 64] and legs[1]["groups"][1]["group"] == [1, 65]
    order = legs[1]["plans"][0]["channels"][0]["order"]
    assert sorted(order) == [0, 1]
    assert refused(out) == (f"{out / 'manifest.json'}: field triggers[0]: hier.legs[1].plans[0]"
                            f".channels[0].order {json.dumps(order)} names position 1, outside "
                            "hier.legs[1].groups[0].group of 1 rank (a plan's ring order lists "
                            "positions of each group that runs it: FORMATS §1.1)")


def _swap(leg: int, a: tuple[int, int], b: tuple[int, int]):
    """hier.legs edit: leg ``leg``'s rank at (group, position) ``a`` and ``b`` swapped."""
    def edit(legs):
        ga, gb = legs[leg]["groups"][a[0]]["group"], legs[leg]["groups"][b[0]]["group"]
        ga[a[1]], gb[b[1]] = gb[b[1]], ga[a[1]]
    return edit


def _relist(leg: int):
    """hier.legs edit: leg ``leg``'s groups listed in reverse order."""
    return lambda legs: legs[leg]["groups"].reverse()


NODE0, NODE1 = list(range(8)), list(range(64, 72))
INTRA_WHY = ("in the replica_group, in rank order (position j its j-th local rank: "
             "docs/DESIGN.md \"HIER\")")
INTER_WHY = "in node order (position i node i: docs/DESIGN.md \"HIER\")"


@pytest.mark.parametrize("edit, says", [
    (_swap(0, (0, 1), (1, 1)), f"hier.legs[0].groups[0].group should be {NODE0}, not [0, 65, 2, "
     f"3, 4, 5, 6, 7]: an intra leg's group 0 is the ranks of node 0 {INTRA_WHY}"),
    (_swap(1, (0, 1), (1, 1)), "hier.legs[1].groups[0].group should be [0, 64], not [0, 65]: an "
     "inter leg's group 0 is the ranks of local index 0, each node's rank at position 0 of its "
     f"intra group, {INTER_WHY}"),
    (_swap(0, (1, 0), (1, 1)), f"hier.legs[0].groups[1].group should be {NODE1}, not [65, 64, "
     f"66, 67, 68, 69, 70, 71]: an intra leg's group 1 is the ranks of node 1 {INTRA_WHY}"),
    (_swap(1, (3, 0), (3, 1)), "hier.legs[1].groups[3].group should be [3, 67], not [67, 3]: an "
     "inter leg's group 3 is the ranks of local index 3, each node's rank at position 3 of its "
     f"intra group, {INTER_WHY}"),
    (_relist(2), f"hier.legs[2].groups[0].group should be {NODE0}, not {NODE1}: an intra leg's "
     f"group 0 is the ranks of node 0 {INTRA_WHY}"),
], ids=["moved", "regrouped", "reordered", "reversed", "relisted"])
def test_hier_leg_groups_other_than_designs_are_refused_naming_both(
        hier16_out, tmp_path, edit, says):
    """docs/DESIGN.md "HIER", FORMATS §1.1: an intra leg's group g is the g-th node's ranks of
    the replica group (position j the j-th local rank), an inter leg's group j the j-th local
    rank of each node (position i node i); HIER16's nodes are 0 (ranks 0 .. 7) and 1 (64 ..
    71). Each leg still holding every rank once: rank 1 and 65 swapped between the
    intra_redsct groups, or between inter_allr's groups 0 and 1, or 64 and 65 swapped inside
    node 1's group, were blamed on a rank's legs (a ring successor, a chunk's elements);
    inter_allr's group 3 reversed to [67, 3], or intra_allg's groups listed node 1 first,
    simulated as a match. Each is refused naming the group and both values."""
    out = copy(hier16_out, tmp_path)
    legs = _rehier(out, edit)
    assert [g["group"] for g in legs[0]["groups"]] == [NODE0, NODE1]
    assert [g["group"] for g in legs[1]["groups"]] == [[j, 64 + j] for j in range(8)]
    assert refused(out) == f"{out / 'manifest.json'}: field triggers[0]: {says}"


def _retop(out: Path, fn) -> None:
    """Edit the output manifest's top level with ``fn`` and re-hash."""
    top = json.loads((out / "manifest.json").read_text())
    fn(top)
    (out / "manifest.json").write_text(json.dumps(top, indent=1, sort_keys=True) + "\n")
    rehash(out)


def test_hier_groups_are_held_to_the_topology_tables_nodes(tmp_path):
    """The simulator takes each rank's node from the manifest's ``topology.ranks`` (FORMATS
    §1.1). A HIER all-gather over HIER16 whose table puts rank 71 on node 0 (device 5, a core
    of its own) has 9 ranks on node 0 and 7 on node 1: 7 local indexes, the fewest, so
    inter_allg's groups [j, 64 + j] for j = 0 .. 6 are DESIGN's and its eighth, [7, 71], is
    one too many; it was refused counting them until 2026-12-05 evening, and is refused
    before that now, by docs/TOPOLOGY.md §1: trn2 at LNC 2 has 64 ranks a node, so rank 71
    is on node 71 // 64 = 1 (the world's 16th row). A table without rank 71 (nor 71 in the
    world) is refused naming the rank, as the rank folders' check names it (not an internal
    error)."""
    base = lower_spec(coll_spec("all_gather", "bf16", HIER16, 100, lnc=2), tmp_path / "o",
                      algo=None)
    legs = trigger0(base)["hier"]["legs"]
    assert legs[0]["name"] == "inter_allg"
    assert [g["group"] for g in legs[0]["groups"]] == [[j, 64 + j] for j in range(8)]

    def move(top):
        (row,) = [r for r in top["topology"]["ranks"] if r["rank"] == 71]
        row.update(node=0, device=5, routing_id=5)

    def drop(top):
        top["topology"]["ranks"] = [r for r in top["topology"]["ranks"] if r["rank"] != 71]
        top["world"].remove(71)

    out = copy(base, tmp_path, "moved")
    _retop(out, move)
    assert refused(out) == (f"{out / 'manifest.json'}: field topology.ranks[15].node: rank 71: "
                            "node should be 1, 71 // 64 (16 devices of 4 ranks a node), not 0 "
                            "(docs/TOPOLOGY.md §1: rank = node x ranks_per_node + device x "
                            "ranks_per_device + logical_core; trn2 at lnc_size 2, the platform "
                            "of options.topology null (the default, trn2))")
    out = copy(base, tmp_path, "dropped")
    _retop(out, drop)
    assert refused(out) == (f"{out / 'manifest.json'}: field topology: rank 71 is not in the "
                            "topology table")


#: A HIER group on nodes 1 and 3 of four (LNC 2: 64 ranks a node), local ranks 0 .. 7 on
#: each, listed shuffled
NODES13 = [193, 65, 192, 64, 66, 195, 67, 194, 70, 199, 68, 196, 71, 198, 69, 197]
#: Two local ranks on each of four nodes, shuffled
NODES4 = [129, 0, 193, 64, 1, 128, 65, 192]


@pytest.mark.parametrize("group, op, n, algo", [
    (NODES13, "all_reduce", 1000, "hier"),
    (NODES13, "all_reduce", 1000, "hier;intra_allg:kangaring;inter_allr:single_cycle_ring"),
    (NODES13, "all_gather", 100, "hier;inter_allg:ring"),
    (NODES13, "reduce_scatter", 1600, "hier;intra_redsct:kangaring"),
    (NODES4, "all_reduce", 1000, "hier;inter_allr:ring"),
    (NODES4, "all_gather", 100, "hier"),
    (NODES4, "reduce_scatter", 800, "hier"),
])
def test_hier_groups_as_lowered_simulate_as_a_match_with_the_model(
        tmp_path, group, op, n, algo):
    """Shuffled replica groups on nodes 1 and 3, or over four nodes, with leg overrides: the
    groups ``lower`` writes are the ones the simulator holds them to, and each simulates as a
    match against its model."""
    out = lower_spec(coll_spec(op, "bf16", group, n, lnc=2), tmp_path / "o", algo=algo)
    t = trigger0(out)
    assert t["algorithm"] == "HIER"
    res = cli("simulate", out, "--model", tmp_path / "o.neff", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["triggers"][0]["status"] == "match"


def test_hier_groups_on_nodes_1_and_3_name_the_node(tmp_path):
    """NODES13's intra groups are node 1's ranks 64 .. 71 and node 3's 192 .. 199, in rank
    order whatever the replica group's order, its inter groups [64 + j, 192 + j]; node 3's
    group reversed is refused naming node 3."""
    out = lower_spec(coll_spec("all_reduce", "bf16", NODES13, 1000, lnc=2), tmp_path / "o",
                     algo="hier")
    legs = _rehier(out, lambda legs: legs[0]["groups"][1]["group"].reverse())
    node3 = list(range(192, 200))
    assert [g["group"] for g in legs[0]["groups"]] == [list(range(64, 72)), node3]
    assert [g["group"] for g in legs[1]["groups"]] == [[64 + j, 192 + j] for j in range(8)]
    assert refused(out) == (f"{out / 'manifest.json'}: field triggers[0]: "
                            f"hier.legs[0].groups[1].group should be {node3}, not {node3[::-1]}: "
                            f"an intra leg's group 1 is the ranks of node 3 {INTRA_WHY}")


@pytest.mark.parametrize("op, n, algo", [
    ("all_reduce", 1000, None), ("all_gather", 100, None), ("reduce_scatter", 1600, None),
    ("all_reduce", 100, None), ("all_reduce", 1000, "hier;intra_redsct:kangaring"),
])
def test_hier_chunk_layouts_of_several_chunk_groups_simulate_clean(tmp_path, op, n, algo):
    """The layouts :func:`check_chunk_groups` holds a HIER trigger's leg plans to are the
    ones ``lower`` writes, also with several chunk groups and re-clamped tails (chunks of 64
    bytes, 32 bf16 elements) and with slices of sizes differing by one (100 elements over 8
    local ranks: the even share 13 is not over 32, so 4 slices of 13 and 4 of 12): each
    simulates as a match. For the all-reduce of 1000 by hand: the intra legs' widest slice
    128 in ceil(128 / 32) = 4 groups; inter_allr's slice 7 of 104 in ceil(104 / (2 x 32)) = 2
    groups, the last holding 40, 20 a position; the trigger's ``pgta`` the most, 4."""
    out = _lower_small_chunks(coll_spec(op, "bf16", HIER16, n, lnc=2), tmp_path / "o", algo)
    t = trigger0(out)
    assert t["algorithm"] == "HIER"
    if (op, n, algo) == ("all_reduce", 1000, None):
        legs = t["hier"]["legs"]
        want = _hier_ar_chunks(1000, 8, 2, intra_rings=2, chunk_bytes=64)
        assert t["chunk"] == {"pgta": want["pgta"]} == {"pgta": 4}
        assert legs[0]["plans"][0]["chunk"] == want["intra"]
        assert want["intra"]["pgta"] == 4
        assert legs[1]["plans"][legs[1]["groups"][7]["plan"]]["chunk"] == want["inter"][7] == {
            "channels": 1, "chunk_size_n": 32, "pgta": 2, "tail_chunk": 20}
    if n == 100 and op == "all_reduce":
        sizes = CM.even_split(100, 8)
        bounds = [sum(sizes[:j]) for j in range(9)]
        assert t["hier"]["slices"] == [[a, b] for a, b in zip(bounds, bounds[1:])] == [
            [0, 13], [13, 26], [26, 39], [39, 52], [52, 64], [64, 76], [76, 88], [88, 100]]
    res = cli("simulate", out, "--json")
    assert res.exit_code == 0, res.output


def test_flat_chunk_layouts_of_several_chunk_groups_simulate_clean(kr900_out, krag_out,
                                                                   scr1000_out):
    """KANGARING and SINGLE_CYCLE_RING triggers with several chunk groups and a re-clamped
    tail (their fixtures) are not refused by the layout check."""
    for out in (kr900_out, krag_out, scr1000_out):
        res = cli("simulate", out, "--json")
        assert res.exit_code == 0, res.output


@pytest.mark.parametrize("elem_start", ["own", "end"])
def test_a_direct_recv_of_no_elements_is_refused_for_its_count(ring2n_out, tmp_path,
                                                               elem_start):
    """FORMATS §3: a direct_recv's ``num_elements`` are the elements of the chunk half it
    consumes (an empty half has no leg; the legs without elements are others). ring2n
    all-reduces 8192 elements over 4 ranks in one group of chunks of 2048: rank 0's last
    direct_recv consumes H1 of a chunk, 1024 elements. Made 0, at its own start it was
    blamed on the pairing with the predecessor's send, at the end of the element space
    (8192: the chunk group past the last, where a ring leaf with elements never starts) on
    its ``half``; both are refused for the count."""
    out = copy(ring2n_out, tmp_path)
    L = legs(out, 0)
    rec = int(np.flatnonzero(L["leaf"] == 7)[-1])
    assert (int(L["num_elements"][rec]), int(L["half"][rec])) == (1024, 1)
    raw = bytearray((out / "rank-0000" / "legs.bin").read_bytes())
    struct.pack_into("<I", raw, rec * REC + NUM_ELEMENTS, 0)
    if elem_start == "end":
        struct.pack_into("<Q", raw, rec * REC + ELEM_START, 8192)
    (out / "rank-0000" / "legs.bin").write_bytes(bytes(raw))
    rehash(out)
    assert refused(out) == (f"{out / 'rank-0000'}: field num_elements, rank 0, artifact "
                            f"legs.bin, record {rec}: a direct_recv leg of 0 elements (it "
                            "consumes the elements of a chunk half, 1 or more: FORMATS §3)")


#: NEFF-LIKE.md §1's header fields the rewrite keeps, at their offsets, and a new first byte
HEADER_KEPT = [("neff_version_major", 24), ("neff_version_minor", 32),
               ("neff_build_version", 40), ("num_tpb", 168), ("uuid", 204), ("name", 220),
               ("requested_tpb_count", 476), ("tpb_per_node", 480), ("feature_bits", 544)]


@pytest.mark.parametrize("field, at", HEADER_KEPT)
def test_the_rewritten_header_is_checked_against_the_model(ar2_out, tmp_path, field, at):
    """(Found by an exploratory tester: a changed uuid, name, num_tpb ... simulated clean.)
    FORMATS §9: only data_size and hash are recomputed."""
    out = copy(ar2_out, tmp_path)
    neff = out / json.loads((out / "manifest.json").read_text())["output_neff"]["name"]
    old = neff.read_bytes()[at]
    poke(neff, at, bytes([old ^ 0x41 if field in ("name", "neff_build_version") else old ^ 1]))
    rehash(out)
    cli_ok = cli("simulate", out)  # without the model there is nothing to compare with
    assert cli_ok.exit_code == 0, cli_ok.output
    error = refused(out, f"offset {at:#x}", f"field {field}", f"header field {field} should be ",
                    "only data_size and hash are recomputed (FORMATS §9)",
                    extra=("--model", FIX / "ar2.neff"))
    assert error.startswith(str(neff))


def test_a_rewritten_neff_with_bytes_after_its_payload_is_refused(ar2_out, tmp_path):
    """FORMATS §9: exactly 1024 + data_size bytes (found by an exploratory tester)."""
    out = copy(ar2_out, tmp_path)
    neff = out / json.loads((out / "manifest.json").read_text())["output_neff"]["name"]
    size = neff.stat().st_size
    data_size = int.from_bytes(neff.read_bytes()[16:24], "little")  # header offset 16, u64
    assert size == 1024 + data_size
    neff.write_bytes(neff.read_bytes() + bytes(100))
    rehash(out)
    refused(out, f"offset {size:#x}", "the file should be its header and payload, 1024 + "
            f"data_size {data_size} bytes, not {size + 100} (FORMATS §9)")


def test_a_trigger_over_one_rank_is_labelled_one_rank(tmp_path):
    out = lower_spec(coll_spec("all_reduce", "bf16", [3], 64), tmp_path / "o")
    res = cli("simulate", out)
    assert res.exit_code == 0, res.output
    assert "ALLREDUCE ADD BF16 x64 over 1 rank " in res.stdout and "1 ranks" not in res.stdout


# ------------------------------- mutation audit round 8: the group and plan a refusal names

def test_a_hier_leg_plan_run_by_another_group_than_rank_0s_is_named_with_that_group(
        hier16_out, tmp_path, monkeypatch):
    """FORMATS §1.1: each group of a HIER leg names its plan by index. hier16_out's
    inter_allr leg (SINGLE_CYCLE_RING over pairs {j, 64 + j}, groups by local index j) has
    two plans: plan 0 run by groups 0 .. 6 (slices of 128 elements), plan 1 by group 7 (the
    last slice, 104). Plan 1's channels 1, 2 moved to 21, 22: the first rank whose entry runs
    other channels than its group's plan is rank 7 (group 7, spad.bin record 1: its second
    leg). The refusal names plan 1 and group 7 - not plan 0 or group 0, which only rank 0's
    group was tested with."""
    out = copy(hier16_out, tmp_path)
    legs = trigger0(out)["hier"]["legs"]
    assert _leg_channel_ids(legs)[1] == [1, 2] and len(legs[1]["plans"]) == 2
    assert [g["plan"] for g in legs[1]["groups"]] == [0] * 7 + [1]
    assert [g["group"] for g in legs[1]["groups"]][7] == [7, 71]

    def move(legs):  # (its single_cycle pair moves along: FORMATS §1.1, read since 2026-12-05)
        plan = legs[1]["plans"][1]
        for c in plan["channels"]:
            c["channel"] += 20
        assert plan["single_cycle"]["pairs"] == [[1, 2]]
        plan["single_cycle"]["pairs"] = [[21, 22]]
    _rehier(out, move)
    _past_the_leg_ranges(monkeypatch, out, 1)
    assert refused(out) == (
        f"{out / 'rank-0007'}: field channel_list, rank 7, artifact spad.bin, record 1: "
        "channel_list runs channels [1, 2], the channels of hier.legs[1].plans[1], the plan "
        "of rank 7's group hier.legs[1].groups[7], are [21, 22] (manifest.json "
        "triggers[0].hier.legs[1].plans[1].channels: a SINGLE_CYCLE_RING entry runs each "
        "channel of its group's plan, FORMATS §1.1, §2)")


@pytest.fixture(scope="module")
def inter_rdh_out(tmp_path_factory) -> Path:
    """A bf16 all-reduce of 1000 elements over one rank of each of 8 trn2 nodes (0, 128, ...,
    896), INTER_RDH forced (enc_can_post_inter_rdh_operation: 8 nodes, a power of two)."""
    return lower_spec(coll_spec("all_reduce", "bf16", [128 * i for i in range(8)], 1000),
                      tmp_path_factory.mktemp("irdh") / "o", algo="inter_rdh",
                      topology="trn2:nodes=8")


@pytest.fixture(scope="module")
def single_step_mesh_out(tmp_path_factory) -> Path:
    """A bf16 all-reduce of 1000 elements over ranks 0 .. 7 at LNC 2, SINGLE_STEP_MESH."""
    return lower_spec(coll_spec("all_reduce", "bf16", 8, 1000, lnc=2),
                      tmp_path_factory.mktemp("ssm") / "o", algo="single_step_mesh")


@pytest.mark.parametrize("which, algorithm, section", [
    ("inter_rdh", "INTER_RDH", "rdh"), ("single_step_mesh", "SINGLE_STEP_MESH", "mesh")])
def test_the_second_algorithm_of_an_engine_section_is_simulated_and_ringless(
        inter_rdh_out, single_step_mesh_out, tmp_path, which, algorithm, section):
    """FORMATS §1.1: RDH triggers (INTRA_RDH and INTER_RDH) add ``rdh``, mesh triggers (MESH
    and SINGLE_STEP_MESH) ``mesh``, and both have no ring: ``channels`` one item,
    ``{"channel": 0, "order": []}``. The round-7 tests used INTRA_RDH and MESH only; an
    INTER_RDH and a SINGLE_STEP_MESH output as lowered simulate clean (neither algorithm nor
    section refused), and their ``channels`` moved to channel 1 is refused naming both values
    (mutation audit round 8)."""
    out = inter_rdh_out if which == "inter_rdh" else single_step_mesh_out
    t = trigger0(out)
    assert (t["algorithm"], t["channels"]) == (algorithm, [{"channel": 0, "order": []}])
    assert section in t
    res = cli("simulate", out, "--json")
    assert res.exit_code == 0, res.output
    out = copy(out, tmp_path)
    _retrigger(out, 0, lambda t: t.__setitem__("channels", [{"channel": 1, "order": []}]))
    rehash(out)
    assert refused(out) == (f"{out / 'manifest.json'}: field triggers[0]: channels should be "
                            '[{"channel": 0, "order": []}], not '
                            f'[{{"channel": 1, "order": []}}] ({algorithm} triggers have no '
                            "ring: one item, FORMATS §1.1)")


@pytest.mark.parametrize("plan", [2, -1])
def test_a_hier_groups_plan_index_just_outside_the_plans_is_refused(hier16_out, tmp_path, plan):
    """FORMATS §1.1: a group's ``plan`` is an index of the leg's ``plans``: 0 or 1 for
    hier16_out's inter_allr (2 plans). Each end of the range: 2 (one past the last) and -1
    (Python's last item: read as plan 1) are refused naming the key (mutation audit round
    8)."""
    out = copy(hier16_out, tmp_path)
    _rehier(out, lambda legs: legs[1]["groups"][0].__setitem__("plan", plan))
    assert refused(out) == (f"{out / 'manifest.json'}: field triggers[0]: hier.legs[1].groups[0]"
                            f".plan {plan} is not an index of hier.legs[1].plans, which lists 2 "
                            "plans (a group names its plan by its index there: FORMATS §1.1)")


def test_a_plan_position_outside_a_group_that_is_not_its_first_is_named_by_that_group(
        hier16_out, tmp_path):
    """As above, for group 7 (plan 1, the last slice): group 7 cut to [7], rank 71 given a
    group 8 of its own on plan 1 (every rank still once), so plan 1's ring names position 1
    outside group 7. The refusal names plans[1] and groups[7] (mutation audit round 8: not
    the plan's index as the group's)."""
    def move(legs):
        legs[1]["groups"][7]["group"] = [7]
        legs[1]["groups"].append({"group": [71], "plan": 1})
    out = copy(hier16_out, tmp_path)
    legs = _rehier(out, move)
    assert [(g["group"], g["plan"]) for g in legs[1]["groups"][6:]] == [([6, 70], 0),
                                                                       ([7, 71], 1)]
    order = legs[1]["plans"][1]["channels"][0]["order"]
    assert sorted(order) == [0, 1]
    assert refused(out) == (f"{out / 'manifest.json'}: field triggers[0]: hier.legs[1].plans[1]"
                            f".channels[0].order {json.dumps(order)} names position 1, outside "
                            "hier.legs[1].groups[7].group of 1 rank (a plan's ring order lists "
                            "positions of each group that runs it: FORMATS §1.1)")


@pytest.fixture(scope="module")
def kanga4ch_out(tmp_path_factory) -> Path:
    """kanga16_out's group and units with 2^20 elements: four KANGARING channels."""
    return lower_spec(coll_spec("all_reduce", "bf16", 16, 1 << 20, lnc=2),
                      tmp_path_factory.mktemp("k4ch") / "o", algo="kangaring")


@pytest.mark.parametrize("order, says", [
    ([7, 6, 11, 10, 15, 14, 3, 99], "names rank 99, not in the replica_group"),
    ([7, 7, 11, 10, 15, 14, 3, 2], f"lists rank 7 twice ({KANGA_WHY}, each once: FORMATS "
     "§1.1)"),
    ([], f"is empty ({KANGA_WHY}, 1 or more: FORMATS §1.1)"),
], ids=["stranger", "twice", "empty"])
def test_a_kangaring_order_of_a_later_channel_is_refused_naming_its_item(
        kanga4ch_out, tmp_path, order, says):
    """As for kanga16_out's one channel, on the last of four: ``channels[3].order`` (channel
    3, [7, 6, 11, 10, 15, 14, 3, 2]) given a stranger, a rank twice or no rank is refused
    naming ``channels[3].order`` (mutation audit round 8: the refusals were tested on item 0
    alone)."""
    out = copy(kanga4ch_out, tmp_path)
    channels = trigger0(out)["channels"]
    assert [c["channel"] for c in channels] == [0, 1, 2, 3]
    assert channels[3]["order"] == [7, 6, 11, 10, 15, 14, 3, 2]
    _retrigger(out, 0, lambda t: t["channels"][3].__setitem__("order", order))
    rehash(out)
    assert refused(out) == f"{out / 'manifest.json'}: field triggers[0]: channels[3].order {says}"


def test_a_buffer_in_an_empty_region_is_refused_saying_the_region_is_empty(scr1000_out,
                                                                           tmp_path):
    """FORMATS §1.1: a buffer lies inside its region. scr1000_out's ``recv2`` at scratch 2000
    with the memory map's scratch region made 0 bytes long: refused naming the key and that
    the region is empty (mutation audit round 8: the message for an empty region was not
    tested; it would have said "the scratch region's 0 bytes")."""
    out = copy(scr1000_out, tmp_path)
    top = json.loads((out / "manifest.json").read_text())
    scratch = [r for r in top["memory"]["regions"] if r["kind"] == "scratch"]
    assert len(scratch) == 1 and top["triggers"][0]["buffers"][0]["offset"] == 2000
    scratch[0]["size"] = 0
    (out / "manifest.json").write_text(json.dumps(top, indent=1, sort_keys=True) + "\n")
    rehash(out)
    assert refused(out) == (f"{out / 'manifest.json'}: field triggers[0]: buffers[0].offset "
                            "2000 is outside the memory map's scratch region, which is empty "
                            f"{BUFFER_WHY}")


@pytest.mark.parametrize("offset", [3998, 3999])
def test_a_buffer_whose_element_ends_at_its_regions_end_is_inside_it(
        scr1000_out, tmp_path, offset):
    """FORMATS §1.1: element e of a buffer is at offset + e x dtype size inside its region.
    scr1000_out's scratch is 4000 bytes (two spaces of 2000: 1000 bf16 elements), its
    ``buffers`` one ``recv2``; moved to 3998 its first element is whole, bytes 3998 and 3999,
    and the region check passes it (the output is then refused for the offset itself,
    not one space: docs/DESIGN.md "Single-cycle ring"); at 3999 the element's second byte is
    past the region,
    refused (mutation audit round 8: each side of the boundary; until 2026-12-05 this was
    a second ``recv2`` on a HIER leg, refused now for its role twice and its offset)."""
    out = copy(scr1000_out, tmp_path)
    top = json.loads((out / "manifest.json").read_text())
    assert top["triggers"][0]["buffers"] == [{"offset": 2000, "region": "scratch",
                                              "role": "recv2"}]
    top["triggers"][0]["buffers"][0]["offset"] = offset
    (out / "manifest.json").write_text(json.dumps(top, indent=1, sort_keys=True) + "\n")
    rehash(out)
    if offset == 3998:
        assert refused(out).startswith(f"{out / 'manifest.json'}: field triggers[0]: "
                                       "buffers[0].offset (role recv2) should be 2000, one "
                                       "space of scratch, not 3998 (")
        return
    assert refused(out) == (f"{out / 'manifest.json'}: field triggers[0]: buffers[0].offset "
                            "3999 leaves 1 byte of the scratch region's 4000 bytes, less than "
                            f"a BF16 element (2 bytes) {BUFFER_WHY}")


def test_a_hier_leg_plan_listing_a_channel_its_entries_do_not_run_is_refused(hier16_out,
                                                                              tmp_path,
                                                                              monkeypatch):
    """FORMATS §1.1: a plan's ``channels`` are the channels its groups run, every one (on a
    ring leg every rank is on each ring). hier16_out's intra_redsct plan 0 (a RING leg, both
    node groups) listing a second channel, 5 (no other leg's), besides 0 (its ring order
    that of channel 0): rank 0's entry runs [0], a subset of the plan's [0, 5], and is
    refused naming both lists (mutation audit round 8: only lists that differ both ways
    were tested; until 2026-12-05 this was the single-cycle inter_allr plan 1, whose
    ``single_cycle.pairs`` no odd channel list can match now)."""
    out = copy(hier16_out, tmp_path)
    legs = trigger0(out)["hier"]["legs"]
    assert legs[0]["algorithm"] == "RING" and len(legs[0]["plans"]) == 1
    assert [c["channel"] for c in legs[0]["plans"][0]["channels"]] == [0]

    def add(legs):
        order = legs[0]["plans"][0]["channels"][0]["order"]
        legs[0]["plans"][0]["channels"].append({"channel": 5, "order": order})
        # (a RING leg's plan lists one channel per chunk channel, read since 2026-12-05: the
        # widest slice, 128, as 2 chunk channels of 64 in one chunk group, tail 128 / 2)
        assert legs[0]["plans"][0]["chunk"] == {"channels": 1, "chunk_size_n": 128,
                                                "pgta": 1, "tail_chunk": 128}
        legs[0]["plans"][0]["chunk"].update(channels=2, chunk_size_n=64, tail_chunk=64)
    _rehier(out, add)
    _past_the_leg_ranges(monkeypatch, out, 0)
    assert refused(out) == (
        f"{out / 'rank-0000'}: field channel_list, rank 0, artifact spad.bin, record 0: "
        "channel_list runs channels [0], the channels of hier.legs[0].plans[0], the plan "
        "of rank 0's group hier.legs[0].groups[0], are [0, 5] (manifest.json "
        "triggers[0].hier.legs[0].plans[0].channels: a RING entry runs each "
        "channel of its group's plan, FORMATS §1.1, §2)")


def test_a_hier_leg_plan_that_differs_only_in_a_ring_order_is_no_repeat(hier16_out, tmp_path):
    """FORMATS §1.1: a leg's plans are distinct - in their ring orders or their chunks.
    hier16_out's intra_redsct plan 0 (run by both node groups) copied with channel 0's ring
    order reversed and named by group 1 (ranks 64 .. 71) is a plan of its own, not a repeat
    of plan 0: the legs are held to it, and rank 64's (position 0) send to rank 65 is
    refused, its successor on the reversed ring being position 7, rank 71 (mutation audit
    round 8: a plan key without the ring orders called it a repeat)."""
    out = copy(hier16_out, tmp_path)

    def edit(legs):
        plan = json.loads(json.dumps(legs[0]["plans"][0]))
        assert plan["channels"][0]["order"] == list(range(8))
        plan["channels"][0]["order"] = list(range(8))[::-1]
        legs[0]["plans"].append(plan)
        legs[0]["groups"][1]["plan"] = 1
    legs = _rehier(out, edit)
    assert legs[0]["groups"][1] == {"group": list(range(64, 72)), "plan": 0}
    error = refused(out)
    # its legs.bin neigh (NEXT) is right: the line names the increment's sem.bin address
    # (until 2026-12-06 `field neigh, rank 64, artifact legs.bin`)
    assert error.startswith(f"{out / 'rank-0064'}: field addr, rank 64, artifact sem.bin, ")
    assert error.endswith("should signal rank 71, the ring successor of channel 0, not 65")


def test_an_older_hier_output_whose_exclusion_then_missed_its_legs_says_lower_again(tmp_path):
    """Before 3a1763b (2026-12-01) an exclusion such as ``--algo '^ring'`` did not reach the
    HIER legs, so such an output has RING legs under ``options.algo`` "^ring", and, as every
    HIER output before 2026-12-05, ``gw2`` and ``recv2`` on every leg. It is told to lower
    the model again (status 2, the buffers' line above), not refused as a protocol error
    for its override (status 1): the options are held after the buffers (found by the
    session's review of older outputs)."""
    out = lower_spec(coll_spec("all_reduce", "bf16", HIER16, 1000, lnc=2), tmp_path / "o",
                     algo="inter_allr:ring")
    assert {leg["algorithm"] for leg in trigger0(out)["hier"]["legs"]} == {"RING"}
    space = 1000 * 2

    def older(legs):
        for leg in legs:
            leg["buffers"][1:1] = [{"offset": space, "region": "gw", "role": "gw2"}]
            leg["buffers"].append({"offset": 3 * space, "region": "scratch", "role": "recv2"})
    _rehier(out, older)
    man = out / "manifest.json"
    top = json.loads(man.read_text())
    top["options"]["algo"] = "^ring"
    man.write_text(json.dumps(top))
    rehash(out)
    assert refused_as_older(out) == (f"{man}: field triggers[0]: hier.legs[0].buffers[1].role "
                                     f'"gw2" is on a RING leg {OLDER_HIER}')
