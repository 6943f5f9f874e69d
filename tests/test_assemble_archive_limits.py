"""assemble writes no archive the reader refuses as a whole: at most MAX_MEMBERS members, a tar
of at most MAX_TOTAL_BYTES, each refused from the members' count and sizes before the archive
is built (docs/ASSEMBLE.md "Escape hatches"); and extra_members cost linear time."""

from __future__ import annotations

import datetime
import gzip
import io
import tarfile

import pytest

import nrtrewrite.neff.assembler as asm
from nrtrewrite.errors import LimitError, ValidationError
from nrtrewrite.neff import container
from nrtrewrite.neff.assembler import assemble_spec
from nrtrewrite.neff.container import Limits, read_container
from test_neff_assembler import _refused_cheaply  # (one bound, one place)


class _Counted(str):
    """A member name counting how often names are compared for (in)equality with it."""

    compared = 0
    __hash__ = str.__hash__

    def __eq__(self, other):
        _Counted.compared += 1
        return str.__eq__(self, other)

    def __ne__(self, other):
        _Counted.compared += 1
        return str.__ne__(self, other)


def test_extra_members_are_placed_without_comparing_each_with_every_member_before_it(
        base_spec):
    """Each extra member rebuilt the member list, its name compared with every member
    there: 3,000 extra members cost about 3,000^2 / 2 = 4.5 million comparisons (65,540 did
    not finish in 300 s).  Placed by their names' hashes they cost none but a name met again;
    the bound, twice the members, leaves room for a few per member."""
    n = 3000
    base_spec.update(validate=False, extra_members=[{"name": _Counted(f"x/{i}")}
                                                    for i in range(n)])
    _Counted.compared = 0
    members = read_container(assemble_spec(base_spec)).members
    assert _Counted.compared <= 2 * n
    assert list(members)[4:] == [f"x/{i}" for i in range(n)]


def test_a_replaced_member_moves_to_the_end_and_an_omitted_one_comes_back_last(base_spec):
    """ASSEMBLE.md: extra members are added "at the end of the archive ...; a member of the
    same name is replaced (and moves to the end)"; omit_members drops generated members.
    Generated: neff.json, sg00/def.json, sg00/sp.bin, sg00/pool.bin; pool.bin omitted; then
    a, b, neff.json (replacing the generated one: to the end), a again (replacing the first
    a: to the end, with its new bytes), and sg00/pool.bin (omitted, so new: last)."""
    base_spec.update(validate=False, omit_members=["sg00/pool.bin"], extra_members=[
        {"name": "a", "text": "1"}, {"name": "b", "text": "b"}, {"name": "neff.json",
                                                                 "text": "{}"},
        {"name": "a", "text": "2"}, {"name": "sg00/pool.bin", "hex": "00" * 64}])
    members = read_container(assemble_spec(base_spec)).members
    assert list(members) == ["sg00/def.json", "sg00/sp.bin", "b", "neff.json", "a",
                             "sg00/pool.bin"]
    assert (members["a"], members["b"], members["neff.json"], members["sg00/pool.bin"]) == (
        b"2", b"b", b"{}", bytes(64))


# -- MAX_MEMBERS: the members the reader reads ------------------------------------------------

def _too_many(field: str, member: str, limit: int) -> str:
    """ASSEMBLE.md's refusal of the member one past ``limit`` members."""
    return (f"<spec>: field {field}: member {member}: it would be member {limit + 1} of the "
            f"archive, more than the {limit} members the reader reads (MAX_MEMBERS)")


def test_more_than_max_members_through_extra_members_are_refused_before_the_archive(
        base_spec):
    """The base spec makes 4 members (neff.json, sg00/def.json, sg00/sp.bin, sg00/pool.bin);
    65,532 extra members make 65,536 (MAX_MEMBERS, the real limit) and one more is member
    65,537: refused at extra_members[65532], with validate: false too (the reader, which
    refuses such a file, is not asked)."""
    base_spec.update(validate=False, extra_members=[{"name": f"x/{i}"} for i in range(65533)])
    with pytest.raises(ValidationError) as exc:
        assemble_spec(base_spec)
    assert str(exc.value) == _too_many("extra_members[65532]", "x/65532", 65536)


def test_members_at_a_patched_limit_are_written_and_read_back_one_more_refused(
        base_spec, monkeypatch):
    """With MAX_MEMBERS patched to 6: the 4 generated members and 2 extra ones are written and
    a reader allowing 6 members reads them; an extra member replacing one (neff.json) adds
    none; a third new one is refused, naming it.  Generated members past the limit are
    refused at the spec key making the first one past it (MAX_MEMBERS 3: sg00/pool.bin, of
    engines.pool), and omitting one of them makes them fit."""
    monkeypatch.setattr(asm, "MAX_MEMBERS", 6)
    extra = [{"name": "a"}, {"name": "neff.json", "text": "{}"}, {"name": "b"}]
    base_spec.update(validate=False, extra_members=extra)
    data = assemble_spec(base_spec)
    assert list(read_container(data, limits=Limits(max_members=6)).members) == [
        "sg00/def.json", "sg00/sp.bin", "sg00/pool.bin", "a", "neff.json", "b"]
    extra.insert(2, {"name": "c", "hex": "00"})
    with pytest.raises(ValidationError) as exc:
        assemble_spec(base_spec)
    assert str(exc.value) == _too_many("extra_members[3]", "b", 6)

    monkeypatch.setattr(asm, "MAX_MEMBERS", 3)
    base_spec["extra_members"] = []
    with pytest.raises(ValidationError) as exc:
        assemble_spec(base_spec)
    assert str(exc.value) == _too_many("subgraphs[0].engines.pool", "sg00/pool.bin", 3)
    base_spec["omit_members"] = ["sg00/sp.bin"]
    assert list(read_container(assemble_spec(base_spec), limits=Limits(max_members=3)).members
                ) == ["neff.json", "sg00/def.json", "sg00/pool.bin"]


_LONE = '"\\ud800" is a lone surrogate, which UTF-8 cannot hold'


@pytest.mark.parametrize("item, why", [
    ({"name": "c", "text": ["x"]}, "field extra_members[2].text: must be a string, not a list "
                                   "of 1 item"),
    ({"name": "c", "text": "a\ud800"}, f"field extra_members[2].text: not Unicode text ({_LONE})"),
    ({"name": "c", "hex": "zz"}, "field extra_members[2].hex: not a hex string: 'zz'"),
    ({"name": "c.json", "json": {"d": datetime.date(2001, 12, 14)}},
     "field extra_members[2].json.d: a date (2001-12-14), which JSON cannot hold (YAML 1.1 "
     "reads this form as a date: quote it for a string)"),
    # its JSON: '{', '  "a": "', 5000 x's and '"', '}', each line with its newline: 5014 bytes
    ({"name": "c.json", "json": {"a": "x" * 5000}},
     "field extra_members[2].json: member c.json: its JSON would be 5014 bytes, more than the "
     "5000 bytes a member may hold (MAX_MEMBER_BYTES, the reader's limit)"),
    ({"name": "c", "text": "fine"}, None),
], ids=["text-list", "text-surrogate", "hex", "json-date", "json-size", "fine"])
def test_an_item_past_max_members_is_refused_for_its_own_value_first(
        base_spec, monkeypatch, item, why):
    """With MAX_MEMBERS patched to 6 the base spec's 4 members and two extra ones fit, and the
    third extra one is member 7.  A fault in that item's own value (a text that is no string
    or not Unicode text, hex that is none, a JSON value JSON cannot hold) or a JSON member
    past MAX_MEMBER_BYTES (patched to 5000, above the generated ones) is named, as an
    item's fault is named before a stream's word limit and the tar's MAX_TOTAL_BYTES
    (ASSEMBLE.md: the item's own checks, then the archive's); it was reported as the member
    count.  A good value is refused for the count."""
    monkeypatch.setattr(asm, "MAX_MEMBERS", 6)
    monkeypatch.setattr(asm, "MAX_JSON_MEMBER_BYTES", 5000)
    base_spec.update(validate=False, extra_members=[{"name": "a"}, {"name": "b"}, item])
    with pytest.raises(ValidationError) as exc:
        assemble_spec(base_spec)
    assert str(exc.value) == (f"<spec>: {why}" if why else
                              _too_many("extra_members[2]", item["name"], 6))


# -- MAX_TOTAL_BYTES: the decompressed payload the reader reads -------------------------------

def _too_big(field: str, member: str, size: int, limit: int) -> str:
    """ASSEMBLE.md's refusal of an archive whose tar would be ``size`` bytes, past ``limit``,
    passing it at ``member``."""
    return (f"<spec>: field {field}: member {member}: the archive's tar would be {size} bytes, "
            f"more than the {limit} bytes the reader allows a decompressed payload "
            "(MAX_TOTAL_BYTES); it passes the limit at this member")


def _tar_of(data: bytes) -> bytes:
    """The decompressed tar of a NEFF-like file (its 1024-byte header, then gzip)."""
    return gzip.decompress(data[1024:])


def _ends(tar: bytes) -> list[tuple[str, int]]:
    """Each member's name and where its data's last 512-byte block ends, read by the standard
    library's tarfile (not the assembler's count)."""
    with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
        return [(info.name, info.offset_data + -(-info.size // 512) * 512)
                for info in tf.getmembers()]


_SPEC_KEYS = {"neff.json": "neff_json", "sg00/def.json": "subgraphs[0]",
              "sg00/sp.bin": "subgraphs[0].engines.sp",
              "sg00/pool.bin": "subgraphs[0].engines.pool", "t.txt": "extra_members[0].text",
              "e": "extra_members[1]", "j.json": "extra_members[2].json",
              "h.bin": "extra_members[3].hex", "n" * 150: "extra_members[4].text"}


def _total_spec(base_spec: dict) -> dict:
    base_spec.update(validate=False, extra_members=[
        {"name": "t.txt", "text": "t" * 1000}, {"name": "e"},
        {"name": "j.json", "json": {"a": ["b"] * 300}}, {"name": "h.bin", "hex": "ab" * 513},
        {"name": "n" * 150, "text": "long name: a pax header before it"}])
    return base_spec


@pytest.mark.parametrize("member", list(_SPEC_KEYS), ids=lambda name: name[:20])
def test_a_tar_past_a_patched_total_limit_is_refused_at_the_member_that_passes_it(
        base_spec, monkeypatch, member):
    """The tar the spec makes, read by tarfile: the members up to ``member`` and the two zero
    blocks that end a tar (1024 bytes) fit a limit one byte less than they take only without
    ``member``: with MAX_TOTAL_BYTES patched to that, the archive is refused at the spec key
    giving ``member`` (a stream, a def.json, an extra member of text, hex, JSON, none, a name
    of 150 bytes written with a pax header), saying the whole tar's size."""
    spec = _total_spec(base_spec)
    tar = _tar_of(assemble_spec(spec))
    ends = dict(_ends(tar))
    whole = max(ends.values()) + 1024
    limit = ends[member] + 1024 - 1
    monkeypatch.setattr(asm, "MAX_TOTAL_BYTES", limit)
    monkeypatch.setattr(container, "MAX_TOTAL_BYTES", limit)
    with pytest.raises(ValidationError) as exc:
        assemble_spec(spec)
    assert str(exc.value) == _too_big(_SPEC_KEYS[member], member, whole, limit)


def test_a_tar_of_exactly_a_patched_total_limit_is_written_and_read_back(
        base_spec, monkeypatch):
    """With MAX_TOTAL_BYTES patched to the tar's size (tarfile's: the last member's data's end
    and the two zero blocks), the file is written, its tar exactly that long (the record
    padding stops at the limit), and a reader allowing that many bytes reads every member;
    one byte less and the assembler refuses it, as the reader refuses the file it wrote
    before (validate: false)."""
    spec = _total_spec(base_spec)
    unpatched = assemble_spec(spec)
    tar = _tar_of(unpatched)
    size = max(end for _, end in _ends(tar)) + 1024
    assert len(tar) > size  # (the record padding, to 10240 bytes)
    monkeypatch.setattr(asm, "MAX_TOTAL_BYTES", size)
    monkeypatch.setattr(container, "MAX_TOTAL_BYTES", size)
    data = assemble_spec(spec)
    assert _tar_of(data) == tar[:size]
    assert read_container(data, limits=Limits(max_total_bytes=size)).members == \
        read_container(unpatched).members
    with pytest.raises(LimitError):
        read_container(unpatched, limits=Limits(max_total_bytes=size - 1))
    monkeypatch.setattr(asm, "MAX_TOTAL_BYTES", size - 1)
    monkeypatch.setattr(container, "MAX_TOTAL_BYTES", size - 1)
    with pytest.raises(ValidationError) as exc:
        assemble_spec(spec)
    assert str(exc.value) == _too_big("extra_members[4].text", "n" * 150, size, size - 1)


def test_json_members_each_under_max_member_bytes_past_max_total_bytes_are_not_written(
        base_spec, monkeypatch):
    """Three JSON members of 1000 rows of the same list of 1000 strings of 1500 x's (shared
    values: a few KiB of memory), each under the reader's 2 GiB member limit, make a tar past
    its 4 GiB (MAX_TOTAL_BYTES, the real limit): refused at the third, the one that passes it,
    without writing any (json's indented writer bounded to 1 MiB, memory under 16 MiB).
    Worked line by line: ``[`` and a newline; each row ``  [`` and a newline, each string 4
    spaces, its 1502 bytes and a newline, a comma after each but the last, and ``  ]`` and a
    newline; a comma after each row but the last; ``]`` and a newline: 1,508,008,003 bytes a
    member, each after a 512-byte header and padded to 512 bytes, after the base spec's
    members (their tar's end read by tarfile), then the 1024 bytes that end a tar."""
    base = max(end for _, end in _ends(_tar_of(assemble_spec(base_spec))))
    row = ["x" * 1500] * 1000
    value = [row] * 1000
    size = 2 + 1000 * (4 + 1000 * (4 + 1502 + 1) + 999 + 4) + 999 + 2
    assert size == 1_508_008_003 and size < 2 << 30
    base_spec.update(validate=False, extra_members=[
        {"name": name, "json": value} for name in ("a.json", "b.json", "c.json")])
    whole = base + 3 * (512 + -(-size // 512) * 512) + 1024
    assert whole > 4 << 30
    err = _refused_cheaply(monkeypatch, base_spec)
    assert str(err) == _too_big("extra_members[2].json", "c.json", whole, 4 << 30)


def test_streams_past_max_total_bytes_are_refused_before_their_words_are_built(
        base_spec, monkeypatch):
    """Three streams of 25,000,000 words (1,600,000,000 bytes each, under the reader's 2 GiB
    member limit: a count, a repeat of counts and a repeat of opaque words) make a tar past
    its 4 GiB (MAX_TOTAL_BYTES, the real limit): refused at the third, the one that passes
    it, with the words counted from the spec, not built (memory under 16 MiB; each word list
    was built first: 825 MB for the three).  The tar's size is worked out from the same spec
    with one word a stream, read by tarfile: its members up to sg00/def.json, then each
    stream's 512-byte header and data (a multiple of 512 bytes), and the 1024 bytes that end
    a tar."""
    def engines(big: bool) -> dict:
        return {"a": [{"nop": 25_000_000 if big else 1}],
                "b": [{"repeat": {"count": 5000 if big else 1,
                                  "body": [{"nop": 5000 if big else 1}]}}],
                "c": [{"repeat": {"count": 25 if big else 1, "body": [
                    {"opaque": {"opcode": 0x41, "count": 1_000_000 if big else 1}}]}}]}

    base_spec["validate"] = False
    base_spec["subgraphs"][0]["engines"] = engines(False)
    ends = dict(_ends(_tar_of(assemble_spec(base_spec))))
    assert list(ends)[:2] == ["neff.json", "sg00/def.json"]
    stream = 25_000_000 * 64
    assert stream % 512 == 0 and stream < 2 << 30
    whole = ends["sg00/def.json"] + 3 * (512 + stream) + 1024
    assert whole > 4 << 30 and whole - stream - 512 <= 4 << 30
    base_spec["subgraphs"][0]["engines"] = engines(True)
    err = _refused_cheaply(monkeypatch, base_spec)
    assert str(err) == _too_big("subgraphs[0].engines.c", "sg00/c.bin", whole, 4 << 30)


def test_the_cli_refuses_an_archive_past_the_limits_in_one_line_and_writes_nothing(
        tmp_path, monkeypatch):
    """``assemble SPEC -o M.neff`` with ``validate: false``: a generated member past
    MAX_MEMBERS (patched to 2: neff.json and sg00/def.json, then sg00/sp.bin) and a tar past
    MAX_TOTAL_BYTES (patched to 4 blocks: neff.json's header and data block and the end
    marker's two fit, sg00/def.json does not) are each one line naming the spec and the
    limit, exit status 2, and no M.neff nor anything else is left."""
    from click.testing import CliRunner

    from nrtrewrite.cli import main

    spec = tmp_path / "s.yaml"
    spec.write_text("validate: false\nsubgraphs: [{name: sg00, vars: [], replica_groups: "
                    "[[0, 1]], engines: {sp: [nop]}}]\n")
    out = tmp_path / "m.neff"
    for name, limit, why in (
            ("MAX_MEMBERS", 2, _too_many("subgraphs[0].engines.sp", "sg00/sp.bin", 2)),
            ("MAX_TOTAL_BYTES", 4 * 512, None)):
        monkeypatch.setattr(asm, name, limit)
        res = CliRunner().invoke(main, ["assemble", str(spec), "-o", str(out)],
                                 prog_name="nrtrewrite")
        monkeypatch.undo()
        assert res.exit_code == 2, res.output
        lines = res.stderr.splitlines()
        assert len(lines) == 1
        if why is None:
            assert lines[0].startswith(f"nrtrewrite: error: {spec}: field subgraphs[0]: member "
                                       "sg00/def.json: the archive's tar would be ")
            assert lines[0].endswith(" bytes, more than the 2048 bytes the reader allows a "
                                     "decompressed payload (MAX_TOTAL_BYTES); it passes the "
                                     "limit at this member")
        else:
            assert lines[0] == "nrtrewrite: error: " + why.replace("<spec>", str(spec))
        assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


def test_subgraph_names_are_checked_without_comparing_each_with_every_one_before_it(
        base_spec):
    """A subgraph's name was looked up in the list of the names before it: 2,000 subgraphs
    cost 2,000 * 1,999 / 2 = 1,999,000 comparisons (16,000 took 18 s, now 11 s).  By their
    hashes none; a name given twice is still refused."""
    n = 2000
    sg = dict(base_spec["subgraphs"][0], engines={"sp": ["nop"]})
    base_spec.update(validate=False, subgraphs=[dict(sg, name=_Counted(f"s{i}"))
                                                for i in range(n)])
    _Counted.compared = 0
    members = read_container(assemble_spec(base_spec)).members
    assert _Counted.compared <= 2 * n
    assert len(members) == 1 + 2 * n
    base_spec["subgraphs"].append(dict(sg, name="s7"))
    with pytest.raises(ValidationError) as exc:
        assemble_spec(base_spec)
    assert str(exc.value) == f"<spec>: field subgraphs[{n}].name: subgraph 's7' defined twice"


def test_members_are_made_and_compressed_one_at_a_time(base_spec):
    """Four streams of 250,000 nop words (16,000,000 bytes each, ``validate: false``): the
    tar is laid out and compressed a member at a time, so the peak traced memory stays under
    two members (32 MB; every member and the whole tar were held at once until 2026-12-07,
    over 128 MB).  The bytes are those of one deflate of the whole tar (zlib's stream does
    not depend on how its input is cut): gzip's header (RFC 1952: 1f 8b, deflate, no flags,
    mtime 0, XFL 2, OS 3), the raw deflate at level 9, the CRC-32 and the size, and each
    member, read by tarfile, is 250,000 copies of one word of opcode 0x00."""
    import struct
    import tracemalloc
    import zlib

    base_spec["validate"] = False
    base_spec["subgraphs"][0]["engines"] = {f"e{k}": [{"nop": 250_000}] for k in range(4)}
    tracemalloc.start()
    try:
        data = assemble_spec(base_spec)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * 16_000_000, peak
    payload = data[1024:]
    tar = gzip.decompress(payload)
    z = zlib.compressobj(9, zlib.DEFLATED, -15)
    assert payload == (bytes([0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 2, 3]) + z.compress(tar)
                       + z.flush() + struct.pack("<II", zlib.crc32(tar), len(tar)))
    with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
        for k in range(4):
            body = tf.extractfile(f"sg00/e{k}.bin").read()
            assert len(body) == 16_000_000 and body[0] == 0x00
            assert body == body[:64] * 250_000
