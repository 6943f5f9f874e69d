"""`nrtrewrite diff --strict`, the CI gate (docs/CLI.md "diff"; review 55h): without it a
manifest's layout and a checksum that differs where the file it covers compares identical
are notes, exit 0; with it every such note is a difference, and a manifest holding the same
JSON in other bytes is one, `WHERE sha256 (the same JSON in other bytes): 'A' != 'B'`.
Also the note beside rewritten NEFFs whose members all hold the same bytes while their
payloads differ (FORMATS §9: another deflate).  The expected lines are written from CLI.md
and hashlib, not from diff's output."""

from __future__ import annotations

import gzip
import hashlib
import json

from click.testing import CliRunner

from nrtrewrite.cli import main
from test_diff import lowered, pair  # noqa: F401 - ar2 lowered (ranks 0 and 1), a copy pair


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _invoke(*args):
    return CliRunner().invoke(main, ["diff", *map(str, args)])


def _write(path, doc) -> bytes:
    """``doc`` as ``lower`` writes a rank manifest (FORMATS §1.2); its bytes."""
    data = (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()
    path.write_bytes(data)
    return data


LAYOUT = "sha256 (the same JSON in other bytes)"


def test_a_top_manifest_in_another_layout_is_a_note_and_a_difference_with_strict(pair):
    """Review 55h F1a: B's top manifest re-serialized on one line (the same JSON) was
    ``identical``, exit 0, with no note at all."""
    a, b = pair
    old = (a / "manifest.json").read_bytes()
    new = json.dumps(json.loads(old)).encode()
    (b / "manifest.json").write_bytes(new)
    line = f"manifest.json {LAYOUT}: '{_sha(old)}' != '{_sha(new)}'"
    res = _invoke(a, b)
    assert (res.exit_code, res.stdout) == (0, "identical\n")
    assert res.stderr == (f"nrtrewrite: note: {line} (its layout alone: no difference; "
                          "--strict makes it one)\n")
    res = _invoke(a, b, "--strict")
    assert (res.exit_code, res.stdout, res.stderr) == (1, f"{line}\n1 difference(s)\n", "")
    expected = {"where": "manifest.json", "record": None, "field": LAYOUT, "path": ["sha256"],
                "a": _sha(old), "b": _sha(new), "a_present": True, "b_present": True}
    doc = json.loads(_invoke(a, b, "--json").stdout)
    assert (doc["count"], doc["identical"], doc["layouts"]) == (0, True, [expected])
    res = _invoke(a, b, "--json", "--strict")
    doc = json.loads(res.stdout)
    assert res.exit_code == 1 and "layouts" not in doc
    assert (doc["count"], doc["identical"]) == (1, False)
    assert doc["differences"] == [{"index": 0, **expected}]


def test_strict_makes_a_stale_artifact_checksum_a_difference(pair):
    """Review 55h F1b: a rank manifest recording a wrong ``files["cce.bin"].sha256`` (the
    top manifest's checksum of it updated), cce.bin the same bytes: a note alone, exit 0;
    with --strict that key's line is the one difference."""
    a, b = pair
    man = json.loads((b / "rank-0000" / "manifest.json").read_text())
    old = man["files"]["cce.bin"]["sha256"]
    assert old == _sha((a / "rank-0000" / "cce.bin").read_bytes())
    man["files"]["cce.bin"]["sha256"] = "0" * 64
    data = _write(b / "rank-0000" / "manifest.json", man)
    top = json.loads((b / "manifest.json").read_text())
    top["rank_manifests"]["rank-0000"] = _sha(data)
    _write(b / "manifest.json", top)
    line = f'rank-0000/manifest.json files["cce.bin"].sha256: "{old}" != "{"0" * 64}"'
    assert _invoke(a, b).exit_code == 0
    res = _invoke(a, b, "--strict")
    assert (res.exit_code, res.stdout, res.stderr) == (1, f"{line}\n1 difference(s)\n", "")
    doc = json.loads(_invoke(a, b, "--strict", "--json").stdout)
    assert "checksums" not in doc and (doc["count"], doc["identical"]) == (1, False)
    assert [(d["index"], d["path"], d["a"], d["b"]) for d in doc["differences"]] == [
        (0, ["files", "cce.bin", "sha256"], old, "0" * 64)]


def test_strict_makes_a_rank_manifest_in_another_layout_one_difference(pair):
    """Review 55h F1c: a rank manifest in another layout is identical whether the top
    manifest's checksum of it is updated or not (a note, or nothing); with --strict it is
    one difference, its file's line, either way (the checksum, explained by it, is none)."""
    a, b = pair
    old = (a / "rank-0001" / "manifest.json").read_bytes()
    new = (json.dumps(json.loads(old), indent=3) + "\n").encode()
    (b / "rank-0001" / "manifest.json").write_bytes(new)
    want = (1, f"rank-0001/manifest.json {LAYOUT}: '{_sha(old)}' != '{_sha(new)}'\n"
               "1 difference(s)\n", "")
    assert _invoke(a, b).exit_code == 0  # the checksum stale
    res = _invoke(a, b, "--strict")
    assert (res.exit_code, res.stdout, res.stderr) == want
    top = json.loads((b / "manifest.json").read_text())
    top["rank_manifests"]["rank-0001"] = _sha(new)
    _write(b / "manifest.json", top)
    assert _invoke(a, b).exit_code == 0  # the checksum updated: its note
    res = _invoke(a, b, "--strict")
    assert (res.exit_code, res.stdout, res.stderr) == want


def test_strict_of_identical_outputs_and_of_other_versions_ignored_is_identical(pair):
    """--strict adds nothing where the files hold the same bytes; with CLI.md's recipe
    across versions (``--ignore tool_version``) the top manifests' bytes differ by the
    ignored value alone: identical, with the versions note (an --ignore'd value is no
    layout)."""
    a, b = pair
    res = _invoke(a, b, "--strict")
    assert (res.exit_code, res.stdout, res.stderr) == (0, "identical\n", "")
    top = json.loads((b / "manifest.json").read_text())
    ours = top["tool_version"]
    top["tool_version"] = "99.0"
    _write(b / "manifest.json", top)
    res = _invoke(a, b, "--strict", "--ignore", "tool_version")
    assert (res.exit_code, res.stdout) == (0, "identical\n")
    assert res.stderr == (
        f"nrtrewrite: note: the outputs' versions differ: {a}/manifest.json has "
        f"format_version 2, tool_version \"{ours}\"; {b}/manifest.json has format_version "
        "2, tool_version \"99.0\"; differences may come from the versions alone\n")
    res = _invoke(a, b, "--strict")
    assert res.exit_code == 1
    assert res.stdout == f'manifest.json tool_version: "{ours}" != "99.0"\n1 difference(s)\n'


def _neff_of(folder):
    return folder / json.loads((folder / "manifest.json").read_text())["output_neff"]["name"]


NOTE = ("every member holds the same bytes, the payload's differ: the same members "
        "compressed otherwise (another deflate implementation or version, docs/FORMATS.md "
        "§9), or another tar layout of them")


def test_a_neff_of_the_same_members_compressed_otherwise_is_a_difference_with_a_note(pair):
    """Review 55h F2: a golden made where Python links another deflate showed only
    ``header.data_size`` and ``header.hash`` lines, with no hint that every member holds
    the same bytes.  Level 1 instead of 9 (the header's data_size and MD5 hash follow, NEFF-LIKE.md
    §1): those two lines, still a difference (exit 1, also with --strict), and the note."""
    from nrtrewrite.neff.container import HEADER_SIZE, read_container, wrap_payload
    a, b = pair
    na, nb = _neff_of(a), _neff_of(b)
    data = na.read_bytes()
    c = read_container(data, verify_hash=False)
    size = int.from_bytes(data[16:24], "little")  # data_size (NEFF-LIKE.md §1)
    tar = gzip.decompress(data[HEADER_SIZE:HEADER_SIZE + size])
    other = wrap_payload(c.header, gzip.compress(tar, compresslevel=1, mtime=0))
    nb.write_bytes(other)
    osize = int.from_bytes(other[16:24], "little")
    assert osize != size
    lines = (f"{na.name} header.data_size: {size} != {osize}\n"
             f"{na.name} header.hash: '{data[172:204].hex()}' != '{other[172:204].hex()}'\n"
             "2 difference(s)\n")
    for extra in ((), ("--strict",)):
        res = _invoke(a, b, *extra)
        assert (res.exit_code, res.stdout) == (1, lines)
        assert res.stderr == f"nrtrewrite: note: {na.name}: {NOTE}\n"
    doc = json.loads(_invoke(a, b, "--json").stdout)
    assert (doc["count"], doc["recompressed"]) == (2, [na.name])
    # a member of other bytes (a JSON member's layout, which compares identical): no
    # recompressed note, its layout's note alone (below)
    from nrtrewrite.neff.container import build_tar
    members = [(k, bytes(v)) for k, v in c.members.items()]
    k = next(i for i, (name, _) in enumerate(members) if name.endswith(".json"))
    members[k] = (members[k][0], members[k][1] + b" ")
    nb.write_bytes(wrap_payload(c.header, gzip.compress(build_tar(members), mtime=0)))
    res = _invoke(a, b)
    old, new = bytes(c.members[members[k][0]]), members[k][1]
    assert res.exit_code == 1 and res.stderr == (
        f"nrtrewrite: note: {na.name}:{members[k][0]} {LAYOUT}: '{_sha(old)}' != "
        f"'{_sha(new)}' (its layout alone: no difference; --strict makes it one)\n")


def test_a_top_manifest_layout_is_judged_beside_a_stale_neff_checksum(pair):
    """Review 55r F1: B's top manifest in another layout with a stale ``output_neff.sha256``
    (the NEFF the same bytes) gave the checksum's note alone, and with --strict 1
    difference; CLI.md's rules give both notes, and with --strict 2 differences: the layout
    line where the manifest's differences come, the checksum's once the NEFF is compared.
    The same with an --ignore'd key whose values are equal."""
    a, b = pair
    old = (a / "manifest.json").read_bytes()
    top = json.loads(old)
    neff = top["output_neff"]["name"]
    was = top["output_neff"]["sha256"]
    assert was == _sha((a / neff).read_bytes())
    top["output_neff"]["sha256"] = "1" * 64
    new = (json.dumps(top, indent=2, sort_keys=True) + "\n").encode()
    (b / "manifest.json").write_bytes(new)
    layout = f"manifest.json {LAYOUT}: '{_sha(old)}' != '{_sha(new)}'"
    stale = f'manifest.json output_neff.sha256: "{was}" != "{"1" * 64}"'
    for extra in ((), ("--ignore", "input.name")):
        res = _invoke(a, b, *extra)
        assert (res.exit_code, res.stdout) == (0, "identical\n")
        assert res.stderr == (
            f"nrtrewrite: note: {layout} (its layout alone: no difference; --strict makes "
            f"it one)\nnrtrewrite: note: {stale} (a checksum of {neff}, which compares "
            "identical: no difference)\n")
        res = _invoke(a, b, "--strict", *extra)
        assert (res.exit_code, res.stdout, res.stderr) == (
            1, f"{layout}\n{stale}\n2 difference(s)\n", "")


def test_top_and_rank_manifests_in_other_layouts_with_the_checksum_updated(pair):
    """Review 55r F1 (``top_and_rank_reindent_upd``): rank-0000's manifest in another
    layout, the top manifest's checksum of it updated and the top manifest in another
    layout too: the top's layout note and the checksum's note (the rank manifest compares
    identical as JSON; its own layout prints nothing by default); with --strict the two
    layout lines, top first, and no checksum line (the rank manifest is not identical)."""
    a, b = pair
    rold = (a / "rank-0000" / "manifest.json").read_bytes()
    rnew = (json.dumps(json.loads(rold), indent=4) + "\n").encode()
    (b / "rank-0000" / "manifest.json").write_bytes(rnew)
    old = (a / "manifest.json").read_bytes()
    top = json.loads(old)
    assert top["rank_manifests"]["rank-0000"] == _sha(rold)
    top["rank_manifests"]["rank-0000"] = _sha(rnew)
    new = (json.dumps(top, indent=2, sort_keys=True) + "\n").encode()
    (b / "manifest.json").write_bytes(new)
    layout = f"manifest.json {LAYOUT}: '{_sha(old)}' != '{_sha(new)}'"
    rank_layout = f"rank-0000/manifest.json {LAYOUT}: '{_sha(rold)}' != '{_sha(rnew)}'"
    res = _invoke(a, b)
    assert (res.exit_code, res.stdout) == (0, "identical\n")
    assert res.stderr == (
        f"nrtrewrite: note: {layout} (its layout alone: no difference; --strict makes it "
        f"one)\nnrtrewrite: note: manifest.json rank_manifests.rank-0000: \"{_sha(rold)}\" "
        f"!= \"{_sha(rnew)}\" (a checksum of rank-0000/manifest.json, which compares "
        "identical: no difference)\n")
    res = _invoke(a, b, "--strict")
    assert (res.exit_code, res.stdout, res.stderr) == (
        1, f"{layout}\n{rank_layout}\n2 difference(s)\n", "")


def test_strict_sees_a_rank_manifest_layout_beside_a_stale_artifact_checksum(pair):
    """Review 55r F1 (read in ``_rank_manifest_diff``): a rank manifest in another layout
    whose ``files["cce.bin"].sha256`` is also stale (cce.bin the same bytes) was only that
    key's line with --strict; CLI.md gives its layout line too, where its differences come,
    then the key's once cce.bin is compared.  Without --strict: the key's note alone."""
    a, b = pair
    rold = (a / "rank-0000" / "manifest.json").read_bytes()
    man = json.loads(rold)
    was = man["files"]["cce.bin"]["sha256"]
    assert was == _sha((a / "rank-0000" / "cce.bin").read_bytes())
    man["files"]["cce.bin"]["sha256"] = "0" * 64
    rnew = (json.dumps(man, indent=4) + "\n").encode()
    (b / "rank-0000" / "manifest.json").write_bytes(rnew)
    key = f'rank-0000/manifest.json files["cce.bin"].sha256: "{was}" != "{"0" * 64}"'
    res = _invoke(a, b)
    assert (res.exit_code, res.stdout) == (0, "identical\n")
    assert res.stderr == (f"nrtrewrite: note: {key} (a checksum of rank-0000/cce.bin, which "
                          "compares identical: no difference)\n")
    res = _invoke(a, b, "--strict")
    assert (res.exit_code, res.stdout, res.stderr) == (
        1, f"rank-0000/manifest.json {LAYOUT}: '{_sha(rold)}' != '{_sha(rnew)}'\n{key}\n"
           "2 difference(s)\n", "")
    # the same layout (lower's) with the stale key: that key's line alone
    _write(b / "rank-0000" / "manifest.json", man)
    res = _invoke(a, b, "--strict")
    assert (res.exit_code, res.stdout, res.stderr) == (1, f"{key}\n1 difference(s)\n", "")


def _rebuilt(neff, change) -> tuple[str, bytes, bytes, bytes]:
    """NEFF ``neff`` written again with its first JSON member's bytes ``change``d (gzip level
    9, mtime 0, as the test above rebuilds one): that member's name, its old and new bytes,
    and the NEFF's old bytes."""
    from nrtrewrite.neff.container import build_tar, read_container, wrap_payload
    data = neff.read_bytes()
    c = read_container(data, verify_hash=False)
    members = [(k, bytes(v)) for k, v in c.members.items()]
    k = next(i for i, (name, _) in enumerate(members) if name.endswith(".json"))
    name, old = members[k]
    members[k] = (name, change(old))
    neff.write_bytes(wrap_payload(c.header, gzip.compress(build_tar(members), mtime=0)))
    return name, old, members[k][1], data


def test_a_neff_json_member_in_another_layout_is_a_note_and_a_difference_with_strict(pair):
    """Review 55h (the fifty-fifth session's "Left"): a JSON member of B's NEFF rewritten in
    another layout (its keys in reverse order, indent 3: the same JSON) showed the header's
    ``data_size`` and ``hash`` lines and no line naming the member.  As the top manifest's
    layout (CLI.md "diff"): a note naming the member by default (with --json in
    ``layouts``), one difference more with --strict, ``NEFF:MEMBER sha256 (the same JSON in
    other bytes): 'A' != 'B'`` after the header's lines."""
    a, b = pair
    na, nb = _neff_of(a), _neff_of(b)
    member, old, new, data = _rebuilt(nb, lambda x: json.dumps(
        dict(reversed(list(json.loads(x).items()))), indent=3).encode())
    assert json.loads(old) == json.loads(new) and old != new
    other = nb.read_bytes()
    # (the premise: of the header, only data_size, bytes 16..24, and hash, 172..204, differ)
    assert data[:16] + data[24:172] + data[204:1024] == other[:16] + other[24:172] + other[204:1024]
    size_a, size_b = (int.from_bytes(x[16:24], "little") for x in (data, other))
    header = [f"{na.name} header.data_size: {size_a} != {size_b}\n"] if size_a != size_b else []
    header.append(f"{na.name} header.hash: '{data[172:204].hex()}' != '{other[172:204].hex()}'\n")
    n, header = len(header), "".join(header)
    line = f"{na.name}:{member} {LAYOUT}: '{_sha(old)}' != '{_sha(new)}'"
    res = _invoke(a, b)
    assert (res.exit_code, res.stdout) == (1, f"{header}{n} difference(s)\n")
    assert res.stderr == (f"nrtrewrite: note: {line} (its layout alone: no difference; "
                          "--strict makes it one)\n")
    res = _invoke(a, b, "--strict")
    assert (res.exit_code, res.stdout, res.stderr) == (
        1, f"{header}{line}\n{n + 1} difference(s)\n", "")
    expected = {"where": f"{na.name}:{member}", "record": None, "field": LAYOUT,
                "path": ["sha256"], "a": _sha(old), "b": _sha(new), "a_present": True,
                "b_present": True}
    doc = json.loads(_invoke(a, b, "--json").stdout)
    assert (doc["count"], doc["layouts"]) == (n, [expected])
    doc = json.loads(_invoke(a, b, "--json", "--strict").stdout)
    assert "layouts" not in doc and doc["count"] == n + 1
    assert doc["differences"][n] == {"index": n, **expected}


def test_a_neff_json_member_of_another_value_has_no_layout_line(pair):
    """A JSON member whose value differs too (a key added, in another layout): its key's
    line alone, as a top manifest whose values differ (the value accounts for the bytes)."""
    a, b = pair
    na, nb = _neff_of(a), _neff_of(b)
    member, old, new, _ = _rebuilt(nb, lambda x: json.dumps(
        {**json.loads(x), "zz_extra": 1}, indent=3).encode())
    for extra in ((), ("--strict",)):
        res = _invoke(a, b, *extra)
        assert res.exit_code == 1 and res.stderr == ""
        assert f"{na.name}:{member} zz_extra: <absent> != 1\n" in res.stdout
        assert LAYOUT not in res.stdout


def _layout_of(tmp_path, ta: str, tb: str, n: int) -> bool:
    from nrtrewrite.diff import same_layout
    (tmp_path / "a.json").write_text(ta)
    (tmp_path / "b.json").write_text(tb)
    return same_layout(tmp_path / "a.json", tmp_path / "b.json", n)


def _one_line(values: list[str]) -> str:
    """A one-line manifest (no line break at all): 4,000 triggers of strings holding escaped
    quotes, then ``rank_manifests`` of the given checksum ``values``."""
    trig = ", ".join(f'{{"trigger": {t}, "name": "sg\\"{t}\\\\", "chunk": {{"pgta": 1.5}}}}'
                     for t in range(4000))
    ranks = ", ".join(f'"rank-{r:04d}": "{v}"' for r, v in enumerate(values))
    return f'{{"triggers": [{trig}], "rank_manifests": {{{ranks}}}, "tail": "z"}}'


def test_same_layout_tells_the_values_from_the_layout_token_by_token(tmp_path):
    """``diff.same_layout`` (the layout beside differing checksum keys, CLI.md "diff"): the
    texts' tokens line up one for one and differ in the ``n`` values' tokens alone.  Each
    expected answer worked out by hand from that rule."""
    v = ["a" * 64, "b" * 64, "c" * 64]
    cases = [
        ('{"a": "x", "b": 1}', '{"a": "y", "b": 1}', 1, True),  # one value
        ('{"a": "x", "b": 1}', '{"a": "y", "b": 1}', 0, False),  # more values than held
        ('{"a": "x", "b": 1}', '{"a": "y", "b": 1}', 2, False),  # fewer
        ('{"a": "x", "b": 1}', '{"a": "x", "b": 1}', 0, True),  # the same bytes
        ('{"a": "x", "b": 1}', '{"b": 1, "a": "y"}', 1, False),  # another key order
        ('{"a": "x", "b": 1.0}', '{"a": "y", "b": 1.00}', 1, False),  # a number spelt otherwise
        ('{"a": "x", "b": 1}', '{"a": "y","b": 1}', 1, False),  # a space fewer
        ('{"a": "x", "b": 1}', '{"a": "y", "b": 1} ', 1, False),  # a token more at the end
        ('{"a": "x", "b": 1}\n', '{"a": "y",\n "b": 1}\n', 1, False),  # a line break
        # after an escaped quote, inside a string: the string is one token
        ('{"h": "ab\\"cd", "z": 2}', '{"h": "ab\\"ce", "z": 2}', 1, True),
        # a string holding what reads as keys, then an escaped backslash before its quote
        ('{"k": "a, \\"b\\": 1", "x": "q\\\\", "z": "c"}',
         '{"k": "a, \\"b\\": 1", "x": "q\\\\", "z": "d"}', 1, True),
        ('{"k": "a, \\"b\\": 1", "z": "c"}', '{"k": "a, \\"b\\":  1", "z": "d"}', 1, False),
        ('[12345, 6]', '[12346, 6]', 1, True),  # inside a number
        ('[1, 2]', '[1,  2]', 0, False),  # a whitespace run
        # one line: two checksums far apart; and a space more before the tail
        (_one_line(v), _one_line([v[0], "0" * 64, "1" * 64]), 2, True),
        (_one_line(v), _one_line([v[0], "0" * 64, "1" * 64]), 1, False),
        (_one_line(v), _one_line([v[0], "0" * 64, "1" * 64]).replace('"tail"', ' "tail"'),
         2, False),
        (_one_line(v),
         _one_line(["0" * 64, v[1], v[2]]).replace('"pgta": 1.5}}]', '"pgta": 15e-1}}]'),
         1, False),
    ]
    for ta, tb, n, want in cases:
        assert _layout_of(tmp_path, ta, tb, n) is want, (ta[:60], tb[:60], n)


def test_same_layout_reads_a_few_tokens_per_difference_not_the_line(tmp_path, monkeypatch):
    """The fifty-fifth session's "Left": a one-line 9 MiB manifest took 2 s, its whole line
    split into tokens at each difference.  The tokens read now are those from a token start
    just before each difference to the pair that differs: on a one-line manifest of 4,000
    triggers (about 300 KB, some 60,000 tokens) with two checksums changed, at most a few
    per difference (counted, not timed)."""
    from nrtrewrite import diff as D

    class Counting:
        def __init__(self, rx):
            self.rx, self.n = rx, 0

        def match(self, *args):
            m = self.rx.match(*args)
            self.n += m is not None
            return m

        def findall(self, *args):
            out = self.rx.findall(*args)
            self.n += len(out)
            return out

    tokens = Counting(D._JSON_TOKEN)
    monkeypatch.setattr(D, "_JSON_TOKEN", tokens)
    v = ["a" * 64, "b" * 64, "c" * 64]
    assert _layout_of(tmp_path, _one_line(v), _one_line([v[0], "0" * 64, "1" * 64]), 2)
    assert 2 <= tokens.n <= 2 * 4, tokens.n  # (each pair counted twice: A's and B's)


def _key_twice(old: bytes, how: str) -> bytes:
    """``old`` (a JSON object's bytes) with a key given twice, the first value kept by no
    parser that keeps the last: ``top`` its first key again, the same value, before it;
    ``other`` that key again with another value (``[VALUE]``) before it; ``nested`` a new
    key ``zz`` whose object holds ``k`` twice; ``nested-once`` ``zz`` with ``k`` once (what
    ``nested`` parses to when the last value is kept)."""
    key, value = next(iter(json.loads(old).items()))
    head = {"top": f'{{"{key}": {json.dumps(value)},',
            "other": f'{{"{key}": {json.dumps([value])},',
            "nested": '{"zz": {"k": 1, "k": 1},',
            "nested-once": '{"zz": {"k": 1},'}[how]
    return head.encode() + old[1:]


def test_a_neff_json_member_holding_a_key_twice_is_compared_by_its_bytes(pair):
    """Review V1 (high): a NEFF JSON member holding a key twice (``{"v": 7, "v": 1, ...}``
    against ``{"v": 1, ...}``) was read keeping the last value, so it was "the same JSON in
    other bytes", a note, and only the header's two lines counted.  CLI.md "diff": a member
    that holds a key twice (on either side, whatever its values, at any level) is compared
    by its bytes: ``NEFF:MEMBER bytes: LEN-A != LEN-B`` and its differing bytes' count and
    first offset (worked out here from the bytes), no note, with or without --strict."""
    a, b = pair
    na, nb = _neff_of(a), _neff_of(b)
    clean = na.read_bytes()
    for change_a, change_b in [(None, "top"), (None, "other"), ("top", None),
                               ("nested-once", "nested"), ("nested", "nested-once")]:
        na.write_bytes(clean)
        nb.write_bytes(clean)
        member, ma, mb = None, None, None
        for neff, how in ((na, change_a), (nb, change_b)):
            name, old, new, _ = _rebuilt(neff, lambda x, how=how: _key_twice(x, how)
                                         if how else x)
            member = name
            ma = new if neff is na else ma
            mb = new if neff is nb else mb
        da, db = na.read_bytes(), nb.read_bytes()
        # (the premise: of the headers, only data_size, bytes 16..24, and hash, 172..204)
        assert da[:16] + da[24:172] + da[204:1024] == db[:16] + db[24:172] + db[204:1024]
        size_a, size_b = (int.from_bytes(x[16:24], "little") for x in (da, db))
        lines = [f"{na.name} header.data_size: {size_a} != {size_b}"] if size_a != size_b else []
        lines.append(f"{na.name} header.hash: '{da[172:204].hex()}' != '{db[172:204].hex()}'")
        assert len(ma) != len(mb)
        lines.append(f"{na.name}:{member} bytes: {len(ma)} != {len(mb)}")
        differ = [(i, x, y) for i, (x, y) in enumerate(zip(ma, mb)) if x != y]
        first, x, y = differ[0]
        lines.append(f"{na.name}:{member} {len(differ)} differing bytes, the first at offset "
                     f"0x{first:x}: {x} != {y}")
        expected = "".join(line + "\n" for line in lines) + f"{len(lines)} difference(s)\n"
        for extra in ((), ("--strict",)):
            res = _invoke(a, b, *extra)
            assert (res.exit_code, res.stdout, res.stderr) == (1, expected, ""), (
                change_a, change_b, extra)
        doc = json.loads(_invoke(a, b, "--json").stdout)
        assert "layouts" not in doc and doc["count"] == len(lines), (change_a, change_b)
