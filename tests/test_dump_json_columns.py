"""``dump --json`` writes its records column by column (``artifacts.decode_columns`` and one
format string per key set, ``cli/dump.record_texts``): every record's text must be exactly
what the record-at-a-time reference gives, ``json.dumps(decode_record(name, rec), indent=1)``
nested five containers deep, for any bytes, so that the document stays
``json.dumps(document, indent=1)`` (tests/test_dump.py) at any speed."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nrtrewrite.artifacts import SPAD_OVERLAY_ALGOS, decode_record, load_records
from nrtrewrite.cli.dump import record_texts
from nrtrewrite.emit import formats as F

NAMES = sorted(F.ARTIFACTS)


def reference(name: str, arr: np.ndarray) -> list[str]:
    return [json.dumps(decode_record(name, rec), indent=1).replace("\n", "\n" + " " * 5)
            for rec in arr]


def records(name: str, raw: bytes) -> np.ndarray:
    dtype = F.ARTIFACTS[name][0]
    n = len(raw) // dtype.itemsize
    return np.frombuffer(raw[:n * dtype.itemsize], dtype).copy()


@pytest.mark.parametrize("name", NAMES)
def test_random_records_read_as_the_reference_reads_them(name):
    """Every bit pattern: unknown enum codes (``0x..`` names), a dma length of 0 (65536),
    negative signed fields, both spad key sets interleaved."""
    rng = np.random.default_rng(len(name))
    arr = records(name, rng.bytes(F.ARTIFACTS[name][0].itemsize * 3000))
    if name == "spad.bin":  # every algo_type value, ring family and overlay mixed
        arr["alg"] = rng.integers(0, 256, arr.size)
        assert (np.isin(arr["alg"] & 0xF, list(SPAD_OVERLAY_ALGOS))).any()
    if name == "dma.bin":
        arr["len_ctrl"][::7] &= ~np.uint32(0xFFFF)
    assert record_texts(name, arr) == reference(name, arr)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.sampled_from(NAMES), st.binary(min_size=0, max_size=400))
def test_any_bytes_read_as_the_reference_reads_them(name, raw):
    arr = records(name, raw)
    assert record_texts(name, arr) == reference(name, arr)


@pytest.mark.parametrize("name", ["spad.bin", "legs.bin", "dma.bin", "sem.bin", "sb2sb.bin"])
def test_a_hand_made_record_reads_as_formats_md_says(name):
    """One record per file built from docs/FORMATS.md's bit layout, its text checked key by
    key against values worked out by hand (not through decode_record)."""
    dtype = F.ARTIFACTS[name][0]
    arr = np.zeros(1, dtype)
    if name == "spad.bin":  # MESH (2) in algo_type [3:0], sub type 1 in [6:4], overlay
        arr["header"], arr["alg"], arr["flags"] = 1, 0x12, 0b101
        arr["channel_list"] = (0x3F << 16) | 0xC0
        want = {"cc_op": 1, "algo_type": 2, "algo_type_name": "MESH", "algo_sub_type": 1,
                "trigger_next": 0, "reporter": 1, "ring_wait_complete": 0,
                "ring_send_complete": 1, "sema_shift_offset": 0xC0, "sema_mask": 0x3F}
        assert "channel_list" not in json.loads(record_texts(name, arr)[0])
    elif name == "legs.bin":
        arr["leaf"], arr["neigh"] = 2, 99  # FORMATS.md §3: leaf 2 recv_reduce_send
        want = {"leaf": 2, "leaf_name": "recv_reduce_send", "neigh": 99, "neigh_name": "0x63"}
    elif name == "dma.bin":  # length 0 is 65536; FIRST bit 26, gen [25:24]; S2M bit 4
        arr["len_ctrl"] = (1 << 26) | (2 << 24)
        arr["meta_ctrl"] = (1 << 4) | (7 << 8) | 3
        arr["buf_ptr"] = 2**64 - 1
        want = {"length": 65536, "gen": 2, "first": 1, "last": 0, "sdma_op": 3, "dir": "S2M",
                "stream": 7, "buf_ptr": 2**64 - 1}
    elif name == "sem.bin":  # subop [7:0] INC 21, role [15:8], remote bit 16
        arr["ctrl"] = 21 | (5 << 8) | (1 << 16)
        want = {"subop": 21, "subop_name": "INC", "role": 5, "remote": 1}
    else:  # a TENSOR3D: signed steps, three of each
        arr["src"]["step_elem"] = [[-1, 2, -32768]]
        arr["dst"]["num_elem"] = [[1, 65535, 0]]
        want = {"src.step_elem": [-1, 2, -32768], "dst.num_elem": [1, 65535, 0]}
    got = json.loads(record_texts(name, arr)[0])
    assert {k: got[k] for k in want} == want


@pytest.mark.parametrize("model, args", [
    ("mix8", []),  # MESH and INTRA_RDH entries: the spad overlay
    ("c7c8", ["--algo", "ring"]),  # RING: channel_list
    ("two_node128", ["--rank", "0"]),  # HIER across nodes: the net-proxy FIFOs
])
def test_every_file_lower_writes_reads_as_the_reference(tmp_path, model, args):
    from click.testing import CliRunner

    from conftest import FIXTURES
    from nrtrewrite.cli import main
    out = tmp_path / "o"
    res = CliRunner().invoke(main, ["lower", str(FIXTURES / f"{model}.neff"), "-o", str(out),
                                    "--quiet", *args])
    assert res.exit_code == 0, res.output
    names = set()
    for f in sorted(out.glob("rank-*/*.bin")):
        arr = load_records(f)
        assert record_texts(f.name, arr) == reference(f.name, arr), f
        if arr.size:
            names.add(f.name)
    assert names >= {"spad.bin", "tpinc.bin", "legs.bin", "dma.bin", "cce.bin", "sem.bin",
                     "sb2sb.bin"}
    assert model != "two_node128" or names >= {"net_ops.bin", "net_src.bin", "net_dest.bin"}
