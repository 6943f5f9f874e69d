"""Hostile models through `lower` (docs/RELIABILITY.md): every one is refused with one line
on stderr, exit status 2, no traceback, nothing written, quickly.

The reader's rules are tested one by one in test_neff_container.py, test_neff_reader.py and
test_cli_inspect.py (through `inspect`); this file runs the hostile inputs through the
whole `lower` pipeline, and adds what those do not cover: lies in the header and the tar,
non-regular input files, lowering-time limits."""

from __future__ import annotations

import copy
import gzip
import io
import json
import os
import subprocess
import sys
import tarfile
import tracemalloc
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import sp, unvalidated_spec
from nrtrewrite.cli import main
from nrtrewrite.neff.assembler import assemble_spec
from nrtrewrite.neff.container import (
    HEADER_SIZE, MAX_FILE_BYTES, MAX_MEMBER_BYTES, default_header, payload_digest, wrap_payload,
)

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"


def spec(mutate=None) -> bytes:
    return assemble_spec(unvalidated_spec(mutate))


def ar(**kw):
    body = {"dtype": "bf16", "op": "add", "src": "in", "dst": "out", "num_elements": 64}
    body.update(kw)
    return {"all_reduce": body}


def defj(**kw):
    return lambda s: s["subgraphs"][0].__setitem__("def_json", kw)


def tar_of(*entries) -> bytes:
    """A gzip'd tar of (TarInfo, data or None) entries, wrapped in a valid header."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for info, data in entries:
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    return wrap_payload(default_header(), gzip.compress(buf.getvalue(), mtime=0))


def info(name, kind=tarfile.REGTYPE, size=0, **kw) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.size = size
    for k, v in kw.items():
        setattr(ti, k, v)
    return ti


GOOD = spec()
PAYLOAD = GOOD[HEADER_SIZE:]


def header_with(data: bytes, **fields) -> bytes:
    out = bytearray(data)
    for name, val in fields.items():
        off = {"data_size": 16}[name]
        out[off:off + 8] = val.to_bytes(8, "little")
    return bytes(out)


def data_size_too_small(rehash: bool) -> bytes:
    short = len(PAYLOAD) - 100
    out = bytearray(header_with(GOOD, data_size=short))
    if rehash:
        out[172:204] = payload_digest(2, PAYLOAD[:short])
    return bytes(out)


def gzip_bomb_members(n: int, each: int) -> bytes:
    one = gzip.compress(bytes(each), compresslevel=9, mtime=0)
    return wrap_payload(default_header(), one * n)


def good_tar_patched(patch) -> bytes:
    """GOOD with its tar bytes patched (``patch(raw)`` on a bytearray of the tar, which the
    assembler writes: neff.json's 62 bytes of data at tar offset 0x200, sg00/def.json's
    header at 0x400, sg00/pool.bin's (no data) at 0xe00, the end blocks from 0x1000 and
    zeros to 10240 bytes)."""
    raw = bytearray(gzip.decompress(PAYLOAD))
    patch(raw)
    return wrap_payload(default_header(), gzip.compress(bytes(raw), mtime=0))


def pax_before_neff_json(records: bytes) -> bytes:
    """GOOD's tar with a pax extended header whose data is ``records`` put before its first
    member (neff.json, whose header block is at tar offset 0x0)."""
    ext = tarfile.TarInfo("././@PaxHeader")
    ext.type, ext.size = tarfile.XHDTYPE, len(records)
    return good_tar_patched(lambda raw: raw.__setitem__(
        slice(0, 0), ext.tobuf(tarfile.USTAR_FORMAT) + records + bytes(-len(records) % 512)))


def two_subgraph_groups(s):
    sg0 = s["subgraphs"][0]
    sg0["replica_groups"] = [[r] for r in range(7)]
    sg0["engines"]["sp"] = ["nop"]
    sg1 = copy.deepcopy(sg0)
    sg1["name"] = "sg01"
    sg1["replica_groups"] = [[r] for r in range(7, 14)]
    s["subgraphs"].append(sg1)


def sbuf_ar(src, dst, n):
    return ar(src=src, dst=dst, num_elements=n)


CASES = [
    # the tar
    ("symlink_member", tar_of((info("neff.json"), b""), (info("sg00/sp.bin", tarfile.SYMTYPE,
                                                               linkname="/etc/passwd"), None)),
     [], "member sg00/sp.bin: symbolic link member is not allowed"),
    ("hardlink_member", tar_of((info("x", tarfile.LNKTYPE, linkname="neff.json"), None)), [],
     "member x: hard link member is not allowed"),
    ("device_member", tar_of((info("dev", tarfile.CHRTYPE, devmajor=1, devminor=5), None)), [],
     "member dev: character device member is not allowed"),
    ("absolute_member", tar_of((info("/tmp/evil"), b"")), [],
     "member /tmp/evil: absolute member path"),
    ("dotdot_member", tar_of((info("sg00/../../evil"), b"")), [],
     "member sg00/../../evil: member path contains '..'"),
    ("dot_slash_member", tar_of((info("./", tarfile.DIRTYPE), None),
                                (info("./neff.json", size=2), b"{}")), [],
     "member .: member path has an empty or '.' component (a tar made of a folder's '.' names "
     "its members './NAME'; make it of the folder's entries instead: tar -C DIR -czf m.tgz "
     "neff.json sg00 ...)"),
    ("duplicate_member", tar_of((info("neff.json", size=1), b"a"),
                                (info("neff.json", size=1), b"b")), [],
     "member neff.json: duplicate member name"),
    ("huge_declared_member", tar_of((info("neff.json", size=MAX_MEMBER_BYTES + 1), None)), [],
     f"member neff.json: member size {MAX_MEMBER_BYTES + 1} exceeds the limit of "
     f"{MAX_MEMBER_BYTES} bytes"),
    ("declared_past_end", tar_of((info("neff.json", size=1 << 20), None)), [],
     "member neff.json: tar archive truncated inside this member"),
    ("padding_not_zero", good_tar_patched(lambda raw: raw.__setitem__(0x200 + 62, 0x41)), [],
     "member neff.json: non-zero byte 0x41 at tar offset 0x23e, in the zero padding after "
     "this member's 62 bytes of data"),
    # the record is 18 bytes, its length says 17: tarfile (3.11) reads the path 'neff.jso'
    ("pax_record_length_short", pax_before_neff_json(b"17 path=neff.json\n"), [],
     "member neff.jso: pax extended header at tar offset 0x0: record at byte 0 of its 18 "
     "bytes of records does not end in a newline where its length 17 says: byte 16 of the "
     "record is 0x6e"),
    ("no_end_of_archive", good_tar_patched(lambda raw: raw.__delitem__(slice(0x1000, None))),
     [], "field payload: corrupt tar archive: it ends at tar offset 0x1000, 0 zero bytes after "
     "its last member, without the end-of-archive marker"),
    # the header
    ("data_size_too_big", header_with(GOOD, data_size=len(PAYLOAD) + 1), [],
     f"field data_size: data_size {len(PAYLOAD) + 1} runs past the end of the file"),
    ("data_size_2_64", header_with(GOOD, data_size=2**64 - 1), [],
     f"field data_size: data_size {2**64 - 1} runs past the end"),
    ("data_size_too_small", data_size_too_small(False), [],
     "non-zero byte after the payload (100 trailing bytes)"),
    ("data_size_too_small_rehashed", data_size_too_small(True), [],
     "non-zero byte after the payload"),
    ("data_size_too_small_nohash", data_size_too_small(False), ["--no-verify-hash"],
     "non-zero byte after the payload"),
    ("lnc_size_7", spec(lambda s: s["header"].update(lnc_size=7)), [],
     "bad.neff: offset 0x228, field lnc_size: lnc_size must be 1 or 2 "
     "(the logical NeuronCore size), not 7"),
    # members
    ("unlisted_engine_stream", spec(lambda s: s.update(extra_members=[
        {"name": "sg00/dve.bin", "hex": "c7" + "00" * 63}])), [],
     "member sg00/dve.bin, subgraph sg00: named like the stream of engine 'dve', which "
     "sg00/def.json does not list"),
    ("unlisted_subgraph", spec(lambda s: s.update(extra_members=[
        {"name": "sg01/sp.bin", "hex": "c7" + "00" * 63}])), [],
     "member sg01/sp.bin: in the folder of subgraph 'sg01', which neff.json does not list"),
    # (a folder of any name holding a def.json is a subgraph's: listed ones may have any
    # name; ASSEMBLE.md "Members")
    ("unlisted_subgraph_of_another_name", spec(lambda s: s.update(extra_members=[
        {"name": "aux/sp.bin", "hex": "c7" + "00" * 63},
        {"name": "aux/def.json", "hex": b"{}".hex()}])), [],
     "member aux/sp.bin: in the folder of subgraph 'aux', which neff.json does not list "
     "(subgraphs: sg00)"),
    # def.json
    ("duplicate_rank", spec(defj(replica_groups=[[0, 1, 2, 1]])), [],
     "field replica_groups[0][3]: rank 1 appears twice in the group"),
    ("13_groups", spec(defj(replica_groups=[[r] for r in range(13)])), [],
     "field replica_groups: 13 replica groups, at most 12 (NEC_MAX_COMM_N)"),
    ("13_groups_over_subgraphs", spec(two_subgraph_groups), [],
     "more than 12 distinct replica groups over all subgraphs (NEC_MAX_COMM_N)"),
    # trigger words
    ("num_elements_2_64", spec(lambda s: sp(s)[1]["all_reduce"].update(num_elements=2**64 - 1)),
     [], "field num_elements: src bytes [0, 36893488147419103230) fall outside var 0"),
    ("offset_2_64", spec(lambda s: sp(s)[1]["all_reduce"].update(
        dst={"var": "out", "offset": 2**64 - 2}, num_elements=1)), [],
     f"field dst_offset: dst bytes [{2**64 - 2}, {2**64}) fall outside var 1"),
    ("ap_num_zero", spec(lambda s: sp(s).__setitem__(1, sbuf_ar(
        {"var": "sb_in", "partitions": 128, "dims": [[1, 8], [8, 0]]},
        {"var": "sb_out", "partitions": 128, "dims": [[1, 8]]}, 1024))), [],
     "field src_dims: src free dimension has num 0 (unused dimensions have num 1)"),
    ("ap_negative_out_of_var", spec(lambda s: sp(s).__setitem__(1, sbuf_ar(
        {"var": "sb_in", "start": 6, "partitions": 128, "dims": [[-1, 8]]},
        {"var": "sb_out", "partitions": 128, "dims": [[1, 8]]}, 1024))), [],
     "field src_start: src access pattern addresses bytes [-8, 8) of each partition"),
    # lowering-time limits
    ("rank_2_31", spec(defj(replica_groups=[[0, 2**31 - 1]])), [],
     "to hold rank 2147483647, more than 1048576 (MAX_TOPOLOGY_RANKS)"),
    ("var_2_62", spec(lambda s: s["subgraphs"][0]["vars"][2].update(size=2**62)), [],
     f"the model's DRAM vars need {2**62 + 4096 + 32768} bytes per core, more than"),
    ("scratch_over_window", spec(lambda s: (
        s["subgraphs"][0]["vars"][0].update(size=(12 << 30) + 4096),
        s["subgraphs"][0]["vars"][1].update(size=12 << 30),
        sp(s).__setitem__(1, ar(num_elements=1 << 31)))), [],
     # vars in + out + tmp = 24 GiB + 8 KiB, the scratch of a 2^31-element bf16 message 4 GiB
     f"bad.neff: the model's DRAM vars, scratch and gateway need {(28 << 30) + 8192} bytes per "
     f"core (vars {(24 << 30) + 8192}, scratch {1 << 32}, gateway 0), more than the "
     "30064771072 bytes"),
    ("sbuf_2_62", spec(lambda s: s["subgraphs"][0]["vars"][3].update(size=2**62)), [],
     "do not fit the 4294967296-byte SBUF window"),
    ("spad_513", spec(lambda s: sp(s).__setitem__(slice(None), [ar()] * 513)), [],
     "trigger 512: 513 collectives on replica group 0..7 need 513 SPAD entries"),
    ("t3d_start_addr", spec(lambda s: (s["subgraphs"][0]["vars"][2].update(size=5 << 30),
                                       sp(s).__setitem__(1, ar(src="tmp", dst="tmp",
                                                               num_elements=5 << 29)))), [],
     "field num_elements, trigger 0: the collective's buffers span 5368709120 bytes"),
    ("descriptors", spec(lambda s: (s["subgraphs"][0]["vars"][2].update(size=4 << 30),
                                    sp(s).__setitem__(slice(None), [ar(
                                        src="tmp", dst="tmp", num_elements=2 << 30)] * 300))),
     [], "(MAX_RANK_DESCRIPTORS)"),
    ("fp32_reduce", spec(lambda s: sp(s)[1]["all_reduce"].update(dtype="fp32",
                                                                 num_elements=64)),
     [], "ALLREDUCE in FP32 cannot be lowered"),
    # options
    ("rank_outside_world", GOOD, ["--rank", "8"], "rank 8 is not in the model's world (ranks 0..7)"),
    ("topology_too_small", spec(defj(replica_groups=[list(range(0, 256, 4))])),
     ["--topology", "trn2:nodes=1"], "rank 128 does not fit topology trn2:nodes=1"),
]


@pytest.mark.parametrize("data,extra,why", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_model_through_lower(tmp_path, data, extra, why):
    path = tmp_path / "bad.neff"
    path.write_bytes(data)
    out = tmp_path / "out"
    tracemalloc.start()
    try:
        res = CliRunner().invoke(main, ["lower", "-q", str(path), "-o", str(out), *extra])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # refused before any big allocation: each case peaks under 7 MiB, what the hostile ones
    # describe (a 2^62-byte var, a topology of 2^31 ranks, a 2 GiB member) takes gigabytes
    assert peak < 16 << 20, peak
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert res.exit_code == 2, res.output
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nrtrewrite: error: "), res.stderr
    assert "Traceback" not in res.stderr and why in lines[0], lines[0]
    assert path.read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.neff"]  # nothing written


def test_topology_file_lacking_model_ranks(tmp_path):
    topo = tmp_path / "small.json"
    topo.write_text(json.dumps({"format": "nrtrewrite-topology/1", "platform": "trn2",
                                "nodes": 1}))
    res = CliRunner().invoke(main, ["lower", "-q", str(FIX / "two_node128.neff"),
                                    "--topology", str(topo), "-o", str(tmp_path / "out")])
    assert res.exit_code == 2
    assert res.stderr.count("\n") == 1
    assert "rank 64 does not fit topology" in res.stderr and "ranks 0..63" in res.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("cmd", [["schedule", "--rank", "99"], ["explain", "--rank", "99"],
                                 ["lower", "--rank", "99"]])
def test_rank_outside_the_world(cmd, tmp_path):
    res = CliRunner().invoke(main, [cmd[0], str(FIX / "mix8.neff"), *cmd[1:],
                                    *(["-o", str(tmp_path / "o")] if cmd[0] == "lower" else [])])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.output
    # the whole line: where (the file, the option) and why (the world's ranks)
    assert res.stderr == (f"nrtrewrite: error: {FIX / 'mix8.neff'}: field --rank: rank 99 is "
                          "not in the model's world (ranks 0..7)\n")


def test_gzip_bomb_of_many_members(tmp_path):
    """A payload of 300 concatenated gzip members of 1 MiB of zeros each (a ~300:1 bomb):
    decompression stops at the limit, memory never holds more than limit + one chunk."""
    data = gzip_bomb_members(300, 1 << 20)
    assert len(data) < 400 << 10
    path = tmp_path / "bomb.neff"
    path.write_bytes(data)
    res = CliRunner().invoke(main, ["inspect", "--max-total-bytes", str(16 << 20), str(path)])
    assert res.exit_code == 2
    assert res.stderr.strip().endswith("field payload: decompressed payload exceeds the limit "
                                       f"of {16 << 20} bytes")


def _cli_subprocess(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "nrtrewrite.cli.__main__", *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT, timeout=timeout)


def test_non_regular_inputs_never_block(tmp_path):
    """A fifo would block open/read forever and /dev/zero never ends: both are refused
    before any byte is read."""
    fifo = tmp_path / "model.neff"
    os.mkfifo(fifo)
    for cmd in ("inspect", "lower"):
        proc = _cli_subprocess(cmd, fifo, timeout=30)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert proc.stderr == f"nrtrewrite: error: {fifo}: cannot read: not a regular file\n"
    if os.path.exists("/dev/zero"):
        proc = _cli_subprocess("inspect", "/dev/zero", timeout=30)
        assert proc.stderr == "nrtrewrite: error: /dev/zero: cannot read: not a regular file\n"


def test_oversized_file_refused_from_its_size(tmp_path, monkeypatch):
    big = tmp_path / "big.neff"
    with open(big, "wb") as fh:  # sparse: no disk used
        fh.truncate(MAX_FILE_BYTES + 1)
    real_fdopen = os.fdopen

    class Unread:  # the file as opened, but reading any of it fails the test
        def __init__(self, f):
            self.f = f

        def read(self, *a):
            raise AssertionError("the file was read: it must be refused from its size")

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    monkeypatch.setattr(os, "fdopen", lambda *a, **k: Unread(real_fdopen(*a, **k)))
    res = CliRunner().invoke(main, ["inspect", str(big)])
    monkeypatch.undo()
    assert res.exit_code == 2, res.output
    assert res.stderr == (f"nrtrewrite: error: {big}: file of {MAX_FILE_BYTES + 1} bytes "
                          f"exceeds the limit of {MAX_FILE_BYTES} bytes (MAX_FILE_BYTES)\n")
