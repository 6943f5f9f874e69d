"""``nrtrewrite inspect`` / ``assemble`` through click's CliRunner: output, and every bad
input as exit code 2 with exactly one stderr line that names where and why."""

from __future__ import annotations

import gzip
import io
import json
import shutil
import struct
from pathlib import Path
import subprocess
import sys
import tarfile

import pytest
from click.testing import CliRunner

from nrtrewrite.cli import main
from nrtrewrite.neff.assembler import assemble_spec
from nrtrewrite.neff.container import build_container, default_header, wrap_payload

from conftest import sp, unvalidated_spec, ustar_tar


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


# ---------------------------------------------------------------------------
# good input

def test_inspect_table(fixtures_dir):
    res = run("inspect", fixtures_dir / "c7c8.neff")
    assert res.exit_code == 0 and res.stderr == ""
    out = res.stdout
    for text in ("pkg_version 1", "sha256", "hash verified", "c7c8", "sg00: vars",
                 "sg01: replica groups", "instructions per engine", "pseudo-trigger",
                 "other-pseudo", "triggers (5)", "0xc7", "0xc8", "ALL_GATHER", "REDUCE_SCATTER",
                 "FP8_E4", "a_in+0", "d+98304", "w1:5 u2:6 v1"):
        assert text in out, text


def test_inspect_table_sbuf_and_ranks(fixtures_dir):
    out = run("inspect", fixtures_dir / "sbuf.neff").stdout
    assert "sb_a+1536 p32:48[1,64]" in out and "0 ch1" not in out and "1 ch1" in out
    out = run("inspect", fixtures_dir / "two_node128.neff").stdout
    assert "128 ranks: 0-127" in out


def test_inspect_json_keys(fixtures_dir):
    res = run("inspect", "--json", fixtures_dir / "sbuf.neff")
    doc = json.loads(res.stdout)
    assert list(doc) == ["format", "file", "hash_verified", "header", "members", "world",
                         "subgraphs", "triggers", "kicks", "warnings"]
    assert list(doc["header"]) == [
        "pkg_version", "header_size", "data_size", "neff_version_major", "neff_version_minor",
        "neff_build_version", "num_tpb", "hash", "hash_algorithm", "uuid", "name",
        "requested_tpb_count", "tpb_per_node", "feature_bits", "lnc_size"]
    t = doc["triggers"][2]
    assert list(t) == [
        "ordinal", "subgraph", "engine", "index", "num_words", "opcode", "opcode_name", "ctype",
        "op", "dtype", "dtype_size", "alu_op", "replica_group_id", "group_size", "stream_id",
        "channel_id", "src", "dst", "num_elements", "in_elements", "out_elements", "in_bytes",
        "out_bytes", "sync", "ext_sync"]
    assert t["src"] == {"var_id": 0, "var": "sb_a", "ap": {
        "start": 1536, "partition_start": 32, "partition_count": 16,
        "dims": [[1, 64], [0, 1], [0, 1]]}}
    assert (t["num_elements"], t["out_elements"], t["in_bytes"], t["out_bytes"]) == \
        (1024, 8192, 2048, 16384)
    sg = doc["subgraphs"][0]
    assert list(sg) == ["name", "engines", "vars", "replica_groups", "streams"]
    assert sg["streams"][0] == {
        "engine": "sp", "member": "sg00/sp.bin", "bytes": 64 * 10, "instructions": 10,
        "classes": {"pseudo-trigger": 8, "other-pseudo": 0, "regular": 2},
        "opcodes": {"0x00": 2, "0xd9": 4, "0xda": 4}}
    # stable: the same bytes twice
    assert run("inspect", "--json", fixtures_dir / "sbuf.neff").stdout == res.stdout


def test_no_verify_hash_warns(fixtures_dir, tmp_path):
    data = bytearray((fixtures_dir / "ar2.neff").read_bytes())
    data[180] ^= 1
    path = tmp_path / "h.neff"
    path.write_bytes(bytes(data))
    bad = run("inspect", path)
    assert bad.exit_code == 2 and "MD5 hash mismatch" in bad.stderr
    res = run("inspect", "--json", "--no-verify-hash", path)
    assert res.exit_code == 0
    assert res.stderr == f"nrtrewrite: warning: {path}: field hash: payload hash not verified\n"
    assert json.loads(res.stdout)["hash_verified"] is False


def test_assemble_command(tmp_path, fixtures_dir):
    out = tmp_path / "x.neff"
    res = run("assemble", fixtures_dir / "ar2.yaml", "-o", out)
    assert res.exit_code == 0 and res.stdout == f"{out}: 1439 bytes, 1 trigger\n"
    assert out.read_bytes() == (fixtures_dir / "ar2.neff").read_bytes()
    spec = tmp_path / "bad.yaml"
    spec.write_text("header: {pkg_version: 2}\nsubgraphs: []\n")
    res = run("assemble", spec, "-o", tmp_path / "y.neff")
    assert res.exit_code == 2
    assert res.stderr == (f"nrtrewrite: error: {spec}: field subgraphs: needs a non-empty list "
                          "of subgraphs, not an empty list\n")
    assert not (tmp_path / "y.neff").exists()


def test_subprocess_entry_point(fixtures_dir, tmp_path):
    bad = tmp_path / "short.neff"
    bad.write_bytes(b"\0" * 10)
    proc = subprocess.run([sys.executable, "-c", "from nrtrewrite.cli import main; main()",
                           "inspect", str(bad)], capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr == (f"nrtrewrite: error: {bad}: file too short: 10 bytes, the header "
                           "alone needs 1024\n")


@pytest.mark.skipif(shutil.which("tar") is None, reason="needs a tar command")
def test_inspect_an_archive_made_by_tar(tmp_path):
    """A payload made by ``tar czf`` of the model's folders: its directory entries
    (``sg00/``, type '5') are accepted and are not members."""
    from nrtrewrite.neff.reader import read_model_bytes
    model = read_model_bytes(spec())
    src = tmp_path / "src"
    for name, data in model.members.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes(data)
    subprocess.run(["tar", "czf", str(tmp_path / "m.tgz"), "sg00", "neff.json"], cwd=src,
                   check=True)
    with tarfile.open(tmp_path / "m.tgz") as tf:
        assert [(i.name, i.type) for i in tf.getmembers()][0] == ("sg00", tarfile.DIRTYPE)
    path = tmp_path / "m.neff"
    path.write_bytes(wrap_payload(default_header(), (tmp_path / "m.tgz").read_bytes()))
    res = run("inspect", "--json", path)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert sorted(m["name"] for m in doc["members"]) == sorted(model.members)
    assert len(doc["triggers"]) == 1 and not any(m["extra"] for m in doc["members"])


def _gnu_tar_of(src: Path, tgz: Path, how: str) -> None:
    """``src``'s neff.json and subgraph folders as a gzipped tar: by GNU tar
    ``--format=how``, or by Python's tarfile in its GNU format (``how`` "tarfile")."""
    names = ["neff.json"] + sorted(p.name for p in src.iterdir() if p.is_dir())
    if how == "tarfile":
        with tarfile.open(tgz, "w:gz", format=tarfile.GNU_FORMAT) as tf:
            for name in names:
                tf.add(src / name, arcname=name)
        return
    subprocess.run(["tar", f"--format={how}", "-czf", str(tgz), *names], cwd=src, check=True)


@pytest.mark.parametrize("how", ["gnu", "oldgnu", "tarfile"])
def test_inspect_and_lower_a_gnu_tar_of_long_names(tmp_path, how):
    """A member name over the 100 bytes of a tar header's name field (a subgraph name of 120
    characters: ``NAME/def.json`` is 129 bytes) is a GNU long name ('L'): its data the name
    and one NUL, as GNU tar (--format=gnu and oldgnu) and tarfile write it, is read."""
    if how != "tarfile" and "GNU tar" not in subprocess.run(
            ["tar", "--version"], capture_output=True, text=True).stdout:
        pytest.skip("needs GNU tar")
    from nrtrewrite.neff.reader import read_model_bytes
    long_sg = "s" * 120
    model = read_model_bytes(spec(lambda s: s["subgraphs"][0].update(name=long_sg)))
    src = tmp_path / "src"
    for name, data in model.members.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_bytes(data)
    _gnu_tar_of(src, tmp_path / "m.tgz", how)
    with tarfile.open(tmp_path / "m.tgz") as tf:  # (a long name is written as one)
        assert f"{long_sg}/def.json" in tf.getnames()
    raw = gzip.decompress((tmp_path / "m.tgz").read_bytes())
    assert raw.count(b"././@LongLink") >= 2  # (def.json and sp.bin, each an 'L' header)
    path = tmp_path / "m.neff"
    path.write_bytes(wrap_payload(default_header(), (tmp_path / "m.tgz").read_bytes()))
    res = run("inspect", "--json", path)
    assert res.exit_code == 0, res.output
    assert sorted(m["name"] for m in json.loads(res.stdout)["members"]) == sorted(
        ["neff.json", f"{long_sg}/def.json", f"{long_sg}/sp.bin", f"{long_sg}/pool.bin"])
    res = run("lower", path, "-o", tmp_path / "out")
    assert res.exit_code == 0, res.output


# ---------------------------------------------------------------------------
# bad input, through the CLI

def spec(mutate=None, **top) -> bytes:
    return assemble_spec(unvalidated_spec(mutate, **top))


def ar(**kw):
    return lambda s: sp(s)[1]["all_reduce"].update(kw)


def put(kind, body):
    return lambda s: sp(s).__setitem__(1, {kind: body})


def defj(**kw):
    return lambda s: s["subgraphs"][0].__setitem__("def_json", kw)


SBUF = {"dtype": "bf16", "op": "add",
        "src": {"var": "sb_in", "partitions": 128, "dims": [[1, 8]]},
        "dst": {"var": "sb_out", "partitions": 128, "dims": [[1, 8]]}}
GOOD = spec()
MEMBERS = [("neff.json", b"{}"), ("sg00/def.json", b"{}")]
V = [{"var_id": 0, "name": "in", "type": "input", "size": 4096}]


def flip(data: bytes, pos: int) -> bytes:
    out = bytearray(data)
    out[pos] ^= 0xFF
    return bytes(out)


def tar_with(*entries) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for name, kind, data in entries:
            info = tarfile.TarInfo(name)
            info.type = kind
            if kind == tarfile.REGTYPE:
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
            else:
                info.linkname = "neff.json"
                tf.addfile(info)
    return wrap_payload(default_header(), gzip.compress(buf.getvalue(), mtime=0))


def tar_patched(members, patch: dict[int, int], cut: int | None = None) -> bytes:
    """The ustar tar Python's tarfile writes of ``members`` (name, data), its byte at each
    tar offset of ``patch`` set, cut to its first ``cut`` bytes if given."""
    raw = ustar_tar(members)
    for at, value in patch.items():
        raw[at] = value
    return wrap_payload(default_header(), gzip.compress(bytes(raw[:cut]), mtime=0))


def pax_tar(records: bytes) -> bytes:
    """A tar of one member neff.json (``{}``) after a pax extended header (at tar offset
    0x0) whose data is ``records``, built block by block."""
    ext = tarfile.TarInfo("././@PaxHeader")
    ext.type, ext.size = tarfile.XHDTYPE, len(records)
    member = tarfile.TarInfo("neff.json")
    member.size = 2
    raw = (ext.tobuf(tarfile.USTAR_FORMAT) + records + bytes(-len(records) % 512)
           + member.tobuf(tarfile.USTAR_FORMAT) + b"{}" + bytes(510 + 1024))
    return wrap_payload(default_header(), gzip.compress(raw, mtime=0))


def def_json_text(edit) -> str:
    """The base spec's sg00/def.json, edited, as JSON text with \\u escapes."""
    from nrtrewrite.neff.container import read_container
    doc = json.loads(read_container(GOOD).members["sg00/def.json"])
    edit(doc)
    return json.dumps(doc)


REG = tarfile.REGTYPE
DA_WORD = (struct.pack("<BBHBBBBI", 0xDA, 16, 0, 0, 0, 0, 0, 0) + bytes(52)).hex()
MEGA = default_header()

CASES = [
    # container
    ("short", b"\0" * 100, [], "file too short: 100 bytes"),
    ("header_size", GOOD[:8] + (1000).to_bytes(8, "little") + GOOD[16:], [],
     "field header_size: header_size must be 1024, not 1000"),
    ("data_size_past_end", GOOD[:-1], [], "field data_size: data_size"),
    ("hash_v1", flip(spec(lambda s: s["header"].update(pkg_version=1)), 200), [],
     "field hash: SHA-256 hash mismatch"),
    ("hash_v2", flip(GOOD, 180), [], "field hash: MD5 hash mismatch"),
    ("trailing", GOOD + b"\0\0\x07", [], f"offset 0x{len(GOOD) + 2:x}: non-zero byte after"),
    ("corrupt_gzip", wrap_payload(MEGA, b"\x1f\x8b\x08\x00" + b"\xff" * 40), [],
     "field payload: corrupt gzip stream"),
    ("corrupt_tar", wrap_payload(MEGA, gzip.compress(b"\x01" * 2048, mtime=0)), [],
     "field payload: corrupt tar archive"),
    ("member_padding", tar_patched([("neff.json", b"{}")], {0x202: 0x20}), [],
     "member neff.json: non-zero byte 0x20 at tar offset 0x202, in the zero padding after "
     "this member's 2 bytes of data"),
    ("pax_junk", pax_tar(b"15 comment=abc\njunk"), [],
     "member neff.json: pax extended header at tar offset 0x0: record at byte 15 of its 19 "
     "bytes of records (after the last record) does not start with a decimal length and a "
     "space: it starts b'junk'"),
    ("lone_zero_block", tar_patched([("neff.json", b"{}")], {}, cut=0x600), [],
     "field payload: corrupt tar archive: it ends at tar offset 0x600, 512 zero bytes after "
     "its last member, without the end-of-archive marker (two 512-byte zero blocks"),
    ("dot_slash", tar_with(("./neff.json", REG, b"{}")), [],
     "member ./neff.json: member path has an empty or '.' component (a tar made of a "
     "folder's '.' names its members './NAME'; make it of the folder's entries instead: tar -C "
     "DIR -czf m.tgz neff.json sg00 ...)"),
    ("absolute", tar_with(("/abs", REG, b"")), [], "member /abs: absolute member path"),
    ("dotdot", tar_with(("a/../../b", REG, b"")), [], "member a/../../b: member path contains"),
    ("symlink", tar_with(("l", tarfile.SYMTYPE, b"")), [], "member l: symbolic link member"),
    ("hardlink", tar_with(("l", tarfile.LNKTYPE, b"")), [], "member l: hard link member"),
    ("device", tar_with(("d", tarfile.CHRTYPE, b"")), [], "member d: character device member"),
    ("duplicate", tar_with(("a", REG, b"1"), ("a", REG, b"2")), [],
     "member a: duplicate member name"),
    ("member_limit", GOOD, ["--max-member-bytes", "100"],
     "member sg00/def.json: member size"),
    ("total_limit", GOOD, ["--max-total-bytes", "3000"],
     "field payload: decompressed payload exceeds the limit of 3000 bytes"),
    ("gzip_bomb", wrap_payload(MEGA, gzip.compress(bytes(4 << 20), mtime=0)),
     ["--max-total-bytes", str(1 << 20)], "exceeds the limit of 1048576 bytes"),
    ("header_reserved", spec(raw_header={"reserved": "00" * 100 + "01"}), [],
     "offset 0x290, field reserved: header: reserved bytes must be zero"),
    ("lnc_size_0", spec(lambda s: s["header"].update(lnc_size=0)), [],
     "offset 0x228, field lnc_size: lnc_size must be 1 or 2 "
     "(the logical NeuronCore size), not 0"),
    ("lnc_size_3", spec(lambda s: s["header"].update(lnc_size=3)), [],
     "offset 0x228, field lnc_size: lnc_size must be 1 or 2 "
     "(the logical NeuronCore size), not 3"),
    # members
    ("no_neff_json", build_container(MEGA, MEMBERS[1:]), [],
     "member neff.json: member missing from the archive"),
    ("no_def_json", spec(omit_members=["sg00/def.json"]), [],
     "member sg00/def.json, subgraph sg00: member missing"),
    ("no_stream", spec(omit_members=["sg00/pool.bin"]), [],
     "stream pool: engine stream missing"),
    ("stream_len", spec(extra_members=[{"name": "sg00/pool.bin", "hex": "00" * 63}]), [],
     "stream pool: stream length 63 is not a multiple of 64"),
    # instruction words
    ("length_dw", spec(ar(patch={"length_dw": 17})), [],
     "instruction 1, offset 0x41, field length_dw: length_dw must be 16, not 17"),
    ("ctype", spec(ar(patch={"ctype": 7})), [], "field ctype: unknown CType code 0x7"),
    ("dtype", spec(ar(patch={"dtype": 0x33})), [], "field dtype: unknown DType code 0x33"),
    ("alu", spec(ar(patch={"alu_op": 0x0A})), [], "field alu_op: unknown AluOp code 0xa"),
    ("instr_reserved", spec(ar(patch={"reserved_2": 0x100})), [],
     "offset 0x43, field reserved_2: reserved bytes must be zero (byte 3 of the record is 0x01)"),
    ("operand_reserved", spec(ar(patch={"reserved_28": "000001"})), [],
     "offset 0x5e, field reserved_28: reserved bytes"),
    ("d9_end", spec(lambda s: (put("all_reduce", dict(SBUF, ext=False))(s), sp(s).pop())), [],
     "0xD9 PSEUDO_TRIGGER_COLLECTIVE2 at the end of the stream"),
    ("d9_other", spec(put("all_reduce", dict(SBUF, ext=False))), [],
     "followed by opcode 0x00; 0xDA must follow"),
    ("stray_da", spec(lambda s: sp(s).append({"raw": DA_WORD})), [],
     "instruction 3, offset 0xc0, field opcode: 0xDA PSEUDO_EXTENSION without a 0xD9"),
    # trigger rules
    ("missing_var", spec(ar(src=77)), [], "field src_var_id: src var_id 77 is not in"),
    ("wrong_type", spec(ar(dst="in")), [], "field dst_var_id: dst var 0 ('in') is input"),
    ("outside_var", spec(ar(num_elements=2049)), [],
     "offset 0x70, field num_elements: src bytes [0, 4098) fall outside var 0 ('in') of 4096 "
     "bytes"),
    ("offset_outside", spec(ar(num_elements=8, src={"var": "in", "offset": 4090})), [],
     "offset 0x60, field src_offset: src bytes [4090, 4106) fall outside var 0 ('in')"),
    ("sbuf_start_outside", spec(put("all_reduce", dict(
        SBUF, src={"var": "sb_in", "start": 2**32 - 1, "partitions": 128, "dims": [[1, 8]]}))),
     [], "offset 0x54, field src_start: src access pattern addresses bytes [4294967295, "),
    ("sbuf_dims_outside", spec(put("all_reduce", dict(
        SBUF, src={"var": "sb_in", "start": 2040, "partitions": 128, "dims": [[1, 8]]}))),
     [], "offset 0x54, field src_start: src access pattern addresses bytes [2040, 2056)"),
    ("sbuf_partitions", spec(put("all_reduce", dict(
        SBUF, src={"var": "sb_in", "partitions": [1, 128], "dims": [[1, 8]]}))), [],
     "field src_partition_start: src partitions [1, 129) fall outside"),
    ("num_zero", spec(ar(num_elements=0)), [], "field num_elements: num_elements must be > 0"),
    ("num_vs_ap", spec(put("all_reduce", dict(SBUF, num_elements=1023))), [],
     "field num_elements: num_elements 1023 != src access pattern elements"),
    ("rs_divisible", spec(put("reduce_scatter", {"dtype": "bf16", "op": "add", "src": "in",
                                                 "dst": "out", "num_elements": 1001})), [],
     "REDUCE_SCATTER num_elements 1001 is not divisible by the group size 8"),
    ("group_range", spec(ar(group=4)), [], "field replica_group_id: replica group 4 does not"),
    ("num_2_64", spec(ar(num_elements=2**64 - 1)), [],
     "field num_elements: src bytes [0, 36893488147419103230) fall outside"),
    ("ag_alu", spec(put("all_gather", {"dtype": "bf16", "src": "in", "dst": "out",
                                       "num_elements": 8, "patch": {"alu_op": 9}})), [],
     "alu_op must be 0 for ALL_GATHER"),
    # def.json
    ("dup_rank", spec(defj(replica_groups=[[0, 1, 0]])), [],
     "field replica_groups[0][2]: rank 0 appears twice"),
    ("overlap", spec(defj(replica_groups=[[0, 1], [2, 1]])), [],
     "field replica_groups[1][1]: rank 1 is also in replica group 0"),
    ("13_groups", spec(defj(replica_groups=[[r] for r in range(13)])), [],
     "field replica_groups: 13 replica groups, at most 12 (NEC_MAX_COMM_N)"),
    ("dup_var_id", spec(defj(var=V + V)), [], "field var[1].var_id: duplicate var_id 0"),
    ("var_type", spec(defj(var=[dict(V[0], type="dram")])), [],
     'field var[0].type: unknown var type "dram"'),
    ("var_size", spec(defj(var=[dict(V[0], size=0)])), [],
     "field var[0].size: size must be a positive integer, not 0"),
    ("partitions", spec(defj(var=[dict(V[0], type="state-buffer", partitions=200)])), [],
     "field var[0].partitions: 200 is outside 1..128"),
    ("surrogate_var_name", spec(extra_members=[{"name": "sg00/def.json", "text": def_json_text(
        lambda d: d["var"][0].update(name="\ud800"))}]), [],
     "member sg00/def.json, subgraph sg00, field var[0].name: var name is not Unicode text: "
     "lone surrogate U+D800"),
]


@pytest.mark.parametrize("data,extra,why", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_one_line(tmp_path, data, extra, why):
    path = tmp_path / "bad.neff"
    path.write_bytes(data)
    before = path.read_bytes()
    res = run("inspect", *extra, path)
    assert res.exit_code == 2
    assert res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert "Traceback" not in res.stderr
    assert lines[0].startswith(f"nrtrewrite: error: {path}")
    assert why in lines[0]
    assert path.read_bytes() == before


def test_inspect_of_a_folder_or_a_device_is_one_line(tmp_path):
    """``inspect`` reads its argument itself (a folder, a fifo, ``/dev/null``: refused before
    any byte is read); a folder was a traceback (``os.fdopen`` of a directory's descriptor
    raises ``IsADirectoryError`` naming the descriptor's number, which the OS-error line
    then took for a path)."""
    for path, why in ((tmp_path, "cannot read: a directory"),
                      (Path("/dev/null"), "cannot read: not a regular file")):
        res = run("inspect", path)
        assert (res.exit_code, res.stdout) == (2, "")
        assert res.stderr == f"nrtrewrite: error: {path}: {why}\n"


def test_an_os_error_naming_a_descriptor_is_not_taken_for_a_path():
    from nrtrewrite.cli import _os_error_line
    line, code = _os_error_line(IsADirectoryError(21, "Is a directory", 3))
    assert "internal error" in line and code == 70


@pytest.mark.parametrize("args, says", [
    (["lower", str(Path(__file__).parent)],
     "nrtrewrite lower: error: Invalid value for 'MODEL'"),
    (["lower"], "nrtrewrite lower: error: Missing argument 'MODEL'"),
    (["lowr", "x"], "nrtrewrite: error: No such command 'lowr'"),
    # one wording whatever click's version (8.2 - 8.3 wrote "No such option: --bogus")
    (["inspect", "--bogus", "x"], "nrtrewrite inspect: error: No such option '--bogus'. "
                                  "(see 'nrtrewrite inspect --help')"),
    (["inspect", "-z", "x"], "nrtrewrite inspect: error: No such option '-z'. "
                             "(see 'nrtrewrite inspect --help')"),
    (["inspect", "--jsn", "x"], "nrtrewrite inspect: error: No such option '--jsn'. Did you "
                                "mean '--json'? (see 'nrtrewrite inspect --help')"),
    # difflib's close matches (ratio >= 0.6): --rank 10/11, --ranks 10/12, --lnc 6/10
    (["explain", "--rnk", "0"], "nrtrewrite explain: error: No such option '--rnk'. (Did you "
                                "mean one of: '--lnc', '--rank', '--ranks'?) "
                                "(see 'nrtrewrite explain --help')"),
    # click's parser raises these without the command's context; named by the command too
    # (they were "nrtrewrite: error: ... (see 'nrtrewrite --help')" until 2026-12-04)
    (["lower", "x", "-o"], "nrtrewrite lower: error: Option '-o' requires an argument. "
                           "(see 'nrtrewrite lower --help')"),
    (["diff", "a", "b", "--ignore"], "nrtrewrite diff: error: Option '--ignore' requires an "
                                     "argument. (see 'nrtrewrite diff --help')"),
    (["inspect", "--json=1", "x"], "nrtrewrite inspect: error: Option '--json' does not take "
                                   "a value. (see 'nrtrewrite inspect --help')"),
])
def test_usage_errors_are_one_line(args, says):
    res = CliRunner().invoke(main, args, prog_name="nrtrewrite")
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(says), res.stderr
    assert "Traceback" not in res.output


def test_an_unknown_option_reads_the_same_in_the_json_document():
    res = CliRunner().invoke(main, ["explain", "--json", "--rnk", "0"], prog_name="nrtrewrite")
    assert res.exit_code == 2
    assert json.loads(res.stdout)["error"] == ("No such option '--rnk'. (Did you mean one "
                                               "of: '--lnc', '--rank', '--ranks'?)")


def test_bare_command_still_shows_the_help():
    res = CliRunner().invoke(main, [], prog_name="nrtrewrite")
    assert res.exit_code == 2 and "Usage: nrtrewrite" in res.stderr and "Commands:" in res.stderr


def test_a_command_imports_only_its_own_module():
    """The group imports a command's module when the command is asked for: `diff` never
    imports the simulator or the lowering (startup of every CLI call)."""
    import subprocess
    import sys
    code = ("import sys\n"
            "from click.testing import CliRunner\n"
            "from nrtrewrite.cli import main\n"
            "res = CliRunner().invoke(main, ['diff', '--help'])\n"
            "assert res.exit_code == 0, res.output\n"
            "print(sorted(m for m in sys.modules if m.startswith('nrtrewrite.')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "nrtrewrite.cli.diff" in out
    for heavy in ("nrtrewrite.simulate", "nrtrewrite.lower", "nrtrewrite.cli.lower"):
        assert f"'{heavy}'" not in out
    res = subprocess.run([sys.executable, "-m", "nrtrewrite.cli", "--help"],
                         capture_output=True, text=True, check=True).stdout
    for name in ("assemble", "diff", "dump", "explain", "inspect", "lower", "schedule",
                 "simulate"):
        assert f"  {name} " in res


def test_python_dash_m_runs_the_command(tmp_path):
    """``python -m nrtrewrite`` is the ``nrtrewrite`` command: same help, same one-line
    error and exit status."""
    import subprocess
    import sys

    help_ = subprocess.run([sys.executable, "-m", "nrtrewrite", "--help"],
                           capture_output=True, text=True)
    assert help_.returncode == 0 and help_.stdout.startswith("Usage: nrtrewrite ")
    bad = subprocess.run([sys.executable, "-m", "nrtrewrite", "inspect",
                          str(tmp_path / "missing.neff")], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.startswith("nrtrewrite: error: ") and bad.stderr.count("\n") == 1
    assert "missing.neff" in bad.stderr


def _trigger_rows(out: str) -> dict[str, list[str]]:
    """The rows of the `triggers` table by ordinal."""
    text = out.split("triggers (", 1)[1]
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in text.splitlines()
            if line.startswith("│")]
    return {r[0]: r for r in rows}


def test_inspect_trigger_rows_of_the_sbuf_fixture(fixtures_dir):
    """docs/CLI.md "inspect": one row per trigger with its stream (`chN` for 0xD9+0xDA), src
    and dst (`var+start pFIRST:END[step,num]...`), bytes in/out per rank and the sync fields
    (`wMODE:IDX uMODE:IDX vVALUE`, `-` when all zero; `/ ext ...` for the 0xDA word).
    fixtures/sbuf.yaml: trigger 1 is on stream 1, channel 1; trigger 2 an all-gather of 1024
    bf16 elements over 8 ranks (2048 bytes in, 16384 out) from 16 partitions at 32, with
    sync {wait_mode 1, wait_idx 3, semaphore_value 2} and ext_sync {update_mode 1,
    update_idx 4, semaphore_value 1}; the others have no sync fields."""
    rows = _trigger_rows(run("inspect", fixtures_dir / "sbuf.neff").stdout)
    assert rows["0"][10:12] == ["8", "0 ch0"] and rows["1"][11] == "1 ch1"
    assert rows["2"][12:] == ["sb_a+1536 p32:48[1,64]", "sb_c+0 p0:128[1,64]", "1024",
                              "2048/16384", "w1:3 u0:0 v2 / ext w0:0 u1:4 v1"]
    assert rows["3"][15:] == ["16384/2048", "-"] and rows["0"][16] == "-"


def test_inspect_shows_every_access_pattern_dimension(fixtures_dir, tmp_path):
    """docs/CLI.md "inspect": an SBUF operand is `var+start pFIRST:END[step,num]...`; only
    the unused dimensions ([0,1]) are left out, so a step-0 (repeat) dimension [0,2] shows."""
    import yaml
    spec = yaml.safe_load((fixtures_dir / "sbuf.yaml").read_text())
    ag = spec["subgraphs"][0]["engines"]["sp"][4]["all_gather"]
    ag["src"]["dims"] = [[1, 32], [0, 2]]
    neff = tmp_path / "sb.neff"
    neff.write_bytes(assemble_spec(spec))
    rows = _trigger_rows(run("inspect", neff).stdout)
    assert rows["2"][12] == "sb_a+1536 p32:48[1,32][0,2]"


def test_inspect_header_shows_tpb_per_node_up_to_its_last_entry(fixtures_dir, tmp_path):
    """docs/CLI.md "inspect": the header table shows the decoded fields; `tpb_per_node` (64
    raw bytes, `inspect --json`) is listed up to its last non-zero entry, the zero padding
    after it left out."""
    import yaml
    spec = yaml.safe_load((fixtures_dir / "ar2.yaml").read_text())
    spec["header"]["tpb_per_node"] = [2, 0, 3]
    neff = tmp_path / "t.neff"
    neff.write_bytes(assemble_spec(spec))
    assert json.loads(run("inspect", "--json", neff).stdout)["header"]["tpb_per_node"] == \
        [2, 0, 3] + [0] * 61
    line, = [ln for ln in run("inspect", neff).stdout.splitlines() if "tpb_per_node" in ln]
    assert line.split("│")[2].strip() == "2,0,3"


def test_inspect_marks_only_the_extra_members(fixtures_dir, tmp_path):
    """docs/CLI.md "inspect --json" `members`: `extra` is true for a member that is neither
    `neff.json` nor a listed subgraph's `def.json` / engine stream (ASSEMBLE.md
    `extra_members`: passed through); the members table notes those alone."""
    import yaml
    spec = yaml.safe_load((fixtures_dir / "ar2.yaml").read_text())
    spec["extra_members"] = [{"name": "notes/readme.txt", "text": "hello"}]
    neff = tmp_path / "x.neff"
    neff.write_bytes(assemble_spec(spec))
    doc = json.loads(run("inspect", "--json", neff).stdout)
    assert [m["name"] for m in doc["members"] if m["extra"]] == ["notes/readme.txt"]
    assert {"neff.json", "sg00/def.json", "sg00/sp.bin"} <= {m["name"] for m in doc["members"]}
    noted = [ln.split("│")[1].strip() for ln in run("inspect", neff).stdout.splitlines()
             if "extra (passed through)" in ln]
    assert noted == ["notes/readme.txt"]


def test_inspect_replica_group_table_and_unverified_hash(fixtures_dir, tmp_path):
    """docs/CLI.md "inspect": per subgraph its replica groups (group, size, ranks as runs);
    fixtures/groups.yaml has four groups of 4 ranks, 0-3 ... 12-15.  With --no-verify-hash
    (`hash_verified: false`) the header line does not call the hash verified."""
    out = run("inspect", fixtures_dir / "groups.neff").stdout
    text = out.split("replica groups", 1)[1].split("instructions per engine", 1)[0]
    rows = [[c.strip() for c in ln.split("│")[1:-1]] for ln in text.splitlines()
            if ln.startswith("│")]
    assert rows == [["0", "4", "0-3"], ["1", "4", "4-7"], ["2", "4", "8-11"],
                    ["3", "4", "12-15"]]
    assert "hash verified" in out.splitlines()[0]
    first = run("inspect", "--no-verify-hash", fixtures_dir / "groups.neff").stdout
    assert "hash verified" not in first.splitlines()[0]


def test_inspect_instruction_counts_per_class(fixtures_dir):
    """docs/CLI.md "inspect": instruction counts per engine, total words and by opcode class
    (`pseudo-trigger`, `other-pseudo`, `regular`), then per opcode.  fixtures/sbuf.yaml's sp
    stream: 4 two-word 0xD9+0xDA triggers (8 pseudo-trigger words) and 2 nops (regular)."""
    out = run("inspect", fixtures_dir / "sbuf.neff").stdout
    text = out.split("instructions per engine", 1)[1].split("triggers (", 1)[0]
    rows = {r[0]: r for r in ([c.strip() for c in ln.split("│")[1:-1]]
                              for ln in text.splitlines() if ln.startswith("│"))}
    assert rows["sp"] == ["sp", "10", "8", "0", "2", "0x00×2 0xd9×4 0xda×4"]


@pytest.mark.parametrize("given, limit", [("2KiB", 2048), ("3000", 3000), ("1.5k", 1536),
                                          ("2kB", 2000)])
def test_the_limits_take_byte_counts_with_units(fixtures_dir, given, limit):
    """(Found by an exploratory tester: ``--max-total-bytes 1KiB`` was click's ``'1KiB' is
    not a valid integer range``.)"""
    res = CliRunner().invoke(main, ["inspect", str(fixtures_dir / "ar2.neff"),
                                    "--max-total-bytes", given])
    assert res.exit_code == 2
    assert res.stderr.strip().endswith(f"decompressed payload exceeds the limit of {limit} bytes")


@pytest.mark.parametrize("given", ["-5", "abc", "1.25B", "1KiBB"])
def test_a_limit_that_is_no_byte_count_is_a_usage_error(fixtures_dir, given):
    res = CliRunner().invoke(main, ["inspect", str(fixtures_dir / "ar2.neff"),
                                    "--max-member-bytes", given], prog_name="nrtrewrite")
    assert res.exit_code == 2
    assert res.stderr == (f"nrtrewrite inspect: error: Invalid value for '--max-member-bytes': "
                          f"{given!r} is not a byte count (e.g. 4096, 512KiB, 64MiB, 1GB) "
                          "(see 'nrtrewrite inspect --help')\n")


@pytest.mark.parametrize("value", ["４", "-5", "1.7", "0x100", "1e3"])
def test_a_bad_max_bytes_is_a_usage_error_as_documented(fixtures_dir, value):
    """docs/CLI.md: inspect --max-*-bytes refuses a bad size as a usage error (it said a
    field error, which is explain's --bytes form: an exploratory tester)."""
    res = CliRunner().invoke(main, ["inspect", str(fixtures_dir / "ar2.neff"),
                                    "--max-member-bytes", value], prog_name="nrtrewrite")
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr.splitlines() == [
        f"nrtrewrite inspect: error: Invalid value for '--max-member-bytes': {value!r} is not a "
        "byte count (e.g. 4096, 512KiB, 64MiB, 1GB) (see 'nrtrewrite inspect --help')"]


def test_json_given_a_value_still_gets_the_error_document():
    """``--json=1`` asks for JSON (click refuses the value): the one error document on stdout,
    as for every usage error found before the command runs."""
    res = CliRunner().invoke(main, ["inspect", "--json=1", "x"], prog_name="nrtrewrite")
    assert res.exit_code == 2
    doc = json.loads(res.stdout)
    assert doc["error"] == "Option '--json' does not take a value."


def test_inspect_decodes_the_kick_words_of_a_lowered_neff(fixtures_dir, tmp_path):
    """docs/FORMATS.md §9: each trigger word of the input becomes a TOPSP_KICK word (0xA2)
    at its index, holding the trigger's ordinal, ``word`` (1 for the second of a former
    0xD9 + 0xDA pair), ``spad_index`` (the trigger's first entry in a rank's spad.bin) and
    the replaced word's sync.  inspect listed ``0xa2x8`` and decoded none of it (review
    58i).  sbuf.neff: four 0xD9 + 0xDA triggers; the expected words come from the input's
    triggers (index, num_words, sync, ext_sync) and the rank manifest's ``entries``."""
    out = tmp_path / "out"
    res = run("lower", fixtures_dir / "sbuf.neff", "-o", out, "--rank", "0")
    assert res.exit_code == 0, res.output
    trig = json.loads(run("inspect", "--json", fixtures_dir / "sbuf.neff").stdout)["triggers"]
    entries = json.loads((out / "rank-0000" / "manifest.json").read_text())["entries"]
    first = {}
    for i, e in enumerate(entries):
        first.setdefault(e["trigger"], i)
    want = [{"subgraph": t["subgraph"], "engine": t["engine"], "index": t["index"] + w,
             "trigger": t["ordinal"], "word": w, "spad_index": first[t["ordinal"]],
             "sync": (t["sync"], t["ext_sync"])[w]}
            for t in trig for w in range(t["num_words"])]
    assert len(want) == 8 and {k["word"] for k in want} == {0, 1}
    doc = json.loads(run("inspect", "--json", out / "sbuf.neff").stdout)
    assert doc["kicks"] == want
    assert json.loads(run("inspect", "--json", fixtures_dir / "sbuf.neff").stdout)["kicks"] == []
    text = run("inspect", out / "sbuf.neff").stdout
    assert "kick words (8)" in text
    rows = [[c.strip() for c in line.strip("│").split("│")] for line in
            text[text.index("kick words (8)"):].splitlines() if line.startswith("│")]
    # trigger 2's words keep its sync (w1:3 u0:0 v2) and its 0xDA's (w0:0 u1:4 v1)
    assert rows[4:6] == [["sg00", "sp", "6", "2", "0", "2", "w1:3 u0:0 v2"],
                         ["sg00", "sp", "7", "2", "1", "2", "w0:0 u1:4 v1"]]
