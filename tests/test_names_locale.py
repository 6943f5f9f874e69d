"""File names in the manifests are the same text whatever the locale (docs/FORMATS.md §1.1):
the name's bytes on disk read as UTF-8, and looked up again through them.

A process whose file-system encoding is not UTF-8 is made without extra locales: the C
locale with locale coercion and UTF-8 mode off (PEP 538, PEP 540) decodes file names as
ASCII with surrogate escapes, as a Latin-1 or EUC-JP locale decodes them to other text."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nrtrewrite.emit.formats import name_on_disk, name_text

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "fixtures"
NAME = "ünï 权重.neff"
# the C locale without coercion: file names decode as ASCII + surrogateescape
NOT_UTF8 = {"LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
UTF8 = {"LC_ALL": "C.UTF-8", "LANG": "C.UTF-8", "PYTHONUTF8": "1"}


def cli(args: list, cwd: Path, extra: dict) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("PYTHONIOENCODING", None)
    env.update(extra)
    return subprocess.run([sys.executable, "-m", "nrtrewrite.cli.__main__",
                           *[os.fsencode(a) if isinstance(a, (str, bytes)) else str(a)
                             for a in args]],
                          capture_output=True, cwd=cwd, env=env, timeout=120)


def test_name_text_reads_the_bytes_as_utf8():
    raw = NAME.encode("utf-8")
    as_ascii = raw.decode("ascii", "surrogateescape")  # how a non-UTF-8 locale spells it
    assert os.fsencode(as_ascii) == raw  # (this interpreter's encoding round-trips it)
    assert name_text(NAME) == NAME
    assert name_on_disk(NAME) == NAME
    with pytest.raises(UnicodeDecodeError):
        name_text(os.fsdecode(b"\xff\xfe.neff"))
    # a name recorded with lone surrogates (outputs of before) stands for its bytes
    assert os.fsencode(name_on_disk("\udcff\udcfe.neff")) == b"\xff\xfe.neff"


def test_the_manifest_names_do_not_depend_on_the_locale(tmp_path):
    shutil.copy(FIX / "ar2.neff", tmp_path / NAME)
    outs = {}
    for tag, extra in (("utf8", UTF8), ("c", NOT_UTF8)):
        proc = cli(["lower", "-q", NAME, "-o", f"out-{tag}"], tmp_path, extra)
        assert proc.returncode == 0, proc.stderr
        top = json.loads((tmp_path / f"out-{tag}" / "manifest.json").read_bytes())
        assert top["input"]["name"] == NAME
        assert top["output_neff"]["name"] == NAME
        assert (tmp_path / f"out-{tag}" / NAME).is_file()
        outs[tag] = tmp_path / f"out-{tag}"
    # the two outputs are the same bytes, and each is read back in the other locale
    proc = cli(["diff", "out-utf8", "out-c"], tmp_path, NOT_UTF8)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for tag, extra in (("utf8", NOT_UTF8), ("c", UTF8)):
        proc = cli(["simulate", f"out-{tag}", "--model", NAME], tmp_path, extra)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    # and --force, which reads the NEFF's name back to know the output holds nothing else
    proc = cli(["lower", "-q", NAME, "-o", "out-utf8", "--force"], tmp_path, NOT_UTF8)
    assert proc.returncode == 0, proc.stderr


def test_a_model_name_that_is_not_utf8_is_refused_in_one_line(tmp_path):
    raw = b"\xff\xfe.neff"
    shutil.copy(FIX / "ar2.neff", os.fsdecode(os.fsencode(tmp_path) + b"/" + raw))
    proc = cli(["lower", "-q", raw, "-o", "out"], tmp_path, UTF8)
    assert proc.returncode == 2
    err = proc.stderr.decode()
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "the model's file name b'\\xff\\xfe.neff' is not UTF-8" in err, err
    assert sorted(os.listdir(tmp_path)) == [os.fsdecode(raw)]  # nothing written


TOPO = "topo é.json"


def test_options_topology_is_the_paths_utf8_text_whatever_the_locale(tmp_path):
    """Bug (review 47c): ``options.topology`` and ``explain --json``'s ``topology.source``
    were the path as the locale decoded it: ``"topo \\udcc3\\udca9.json"`` under the C
    locale, ``"topo \\u00e9.json"`` under UTF-8; the two outputs differed there."""
    shutil.copy(FIX / "topologies" / "trn2-2node.json", tmp_path / TOPO)
    shutil.copy(FIX / "ar2.neff", tmp_path / "ar2.neff")
    for tag, extra in (("utf8", UTF8), ("c", NOT_UTF8)):
        proc = cli(["lower", "-q", "ar2.neff", "--topology", TOPO, "-o", f"out-{tag}"],
                   tmp_path, extra)
        assert proc.returncode == 0, proc.stderr
        top = json.loads((tmp_path / f"out-{tag}" / "manifest.json").read_bytes())
        assert top["options"]["topology"] == TOPO
        proc = cli(["explain", "--json", "ar2.neff", "--topology", TOPO], tmp_path, extra)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["topology"]["source"] == TOPO
    names = sorted(p.relative_to(tmp_path / "out-c").as_posix()
                   for p in (tmp_path / "out-c").rglob("*"))
    assert names == sorted(p.relative_to(tmp_path / "out-utf8").as_posix()
                           for p in (tmp_path / "out-utf8").rglob("*"))
    for rel in names:
        a, b = tmp_path / "out-utf8" / rel, tmp_path / "out-c" / rel
        if a.is_file():
            assert a.read_bytes() == b.read_bytes(), rel


def test_a_topology_files_stem_is_its_bytes_read_as_utf8(tmp_path):
    """Bug (review 47c): a file without ``name`` whose stem is not ASCII was accepted under
    UTF-8 and refused under the C locale (``stem "tn\\udcc3\\udca9" is not UTF-8 text``).
    The stem's bytes as UTF-8 name it in either; a stem whose bytes are not UTF-8 stays
    refused, in both, by the same line."""
    doc = json.loads((FIX / "topologies" / "trn2-2node.json").read_bytes())
    doc.pop("name")
    (tmp_path / "tné.json").write_text(json.dumps(doc))
    bad = os.fsencode(tmp_path) + b"/q\xff.json"
    with open(bad, "w") as fh:
        fh.write(json.dumps(doc))
    shutil.copy(FIX / "ar2.neff", tmp_path / "ar2.neff")
    for tag, extra in (("utf8", UTF8), ("c", NOT_UTF8)):
        proc = cli(["lower", "-q", "ar2.neff", "--topology", "tné.json", "-o", f"o-{tag}"],
                   tmp_path, extra)
        assert proc.returncode == 0, proc.stderr
        top = json.loads((tmp_path / f"o-{tag}" / "manifest.json").read_bytes())
        assert top["topology"]["name"] == "tné"
        proc = cli(["lower", "-q", "ar2.neff", "--topology", b"q\xff.json", "-o", f"x-{tag}"],
                   tmp_path, extra)
        err = proc.stderr.decode("ascii", "backslashreplace")
        assert proc.returncode == 2 and err.count("\n") == 1, err
        assert err == ("nrtrewrite: error: q\\udcff.json: field name: the file gives no name "
                       "and its file name's stem \"q\\udcff\" is not UTF-8 text: give "
                       "\"name\"\n"), err
        assert not (tmp_path / f"x-{tag}").exists()


def test_json_paths_are_utf8_text_whatever_the_locale(tmp_path):
    """Bug (review 47c): ``--json`` documents gave a non-ASCII path as the locale decoded it
    (lone surrogates under the C locale): ``inspect``'s ``file`` and ``error``,
    ``explain``'s ``model``, ``simulate OUT``'s ``output``, ``diff``'s ``where``.  Now its
    bytes as UTF-8 text in every locale (docs/CLI.md "Paths in the output")."""
    shutil.copy(FIX / "ar2.neff", tmp_path / NAME)
    (tmp_path / "bäd.neff").write_bytes(b"junk")
    assert cli(["lower", "-q", NAME, "-o", "oü"], tmp_path, UTF8).returncode == 0
    shutil.copytree(tmp_path / "oü", tmp_path / "other")
    with open(tmp_path / "other" / NAME, "ab") as fh:
        fh.write(b"x")  # a byte after the payload: the NEFF differs
    docs = {}
    for tag, extra in (("utf8", UTF8), ("c", NOT_UTF8)):
        got = {}
        for key, args in (("file", ["inspect", "--json", NAME]),
                          ("model", ["explain", "--json", NAME]),
                          ("output", ["simulate", "--json", "oü"])):
            proc = cli(args, tmp_path, extra)
            assert proc.returncode == 0, proc.stderr
            got[key] = json.loads(proc.stdout)[key]
        proc = cli(["inspect", "--json", "bäd.neff"], tmp_path, extra)
        assert proc.returncode == 2
        bad = json.loads(proc.stdout)
        got["bad"] = (bad["file"], bad["error"])
        proc = cli(["diff", "--json", "oü", "other"], tmp_path, extra)
        assert proc.returncode == 1, proc.stderr
        got["where"] = [d["where"] for d in json.loads(proc.stdout)["differences"]]
        docs[tag] = got
    assert docs["c"] == docs["utf8"] == {
        "file": NAME, "model": NAME, "output": "oü", "where": [NAME],
        "bad": ("bäd.neff", "bäd.neff: file too short: 4 bytes, the header alone needs 1024")}



def test_diffs_where_of_a_neff_member_is_utf8_text_whatever_the_locale(tmp_path):
    """Bug (review 47j): ``diff --json`` applied path_text to ``where`` whole, a NEFF's name
    on disk joined to a member's name, the archive's text already: under the C locale
    fsencode of the two failed and the NEFF's name kept the locale's surrogates (under a
    Latin-1 one the member's ``é`` became ``\\udce9``).  Each name read from the disk is
    converted alone, where it is read."""
    for v in ("a", "b"):
        spec = (FIX / "ar2.yaml").read_text() + (
            f'extra_members:\n  - {{name: "notes/é.txt", text: "{v}"}}\n')
        (tmp_path / f"{v}.yaml").write_text(spec, encoding="utf-8")
        (tmp_path / v).mkdir()
        assert cli(["assemble", f"{v}.yaml", "-o", f"{v}/bäd.neff"], tmp_path,
                   UTF8).returncode == 0
        assert cli(["lower", "-q", f"{v}/bäd.neff", "-o", f"o{v}"], tmp_path,
                   UTF8).returncode == 0
    for extra in (UTF8, NOT_UTF8):
        proc = cli(["diff", "--json", "oa", "ob"], tmp_path, extra)
        assert proc.returncode == 1, proc.stderr
        wheres = {d["where"] for d in json.loads(proc.stdout)["differences"]}
        assert "bäd.neff:notes/é.txt" in wheres, (extra, wheres)


def test_a_bad_preset_option_is_named_as_utf8_text_whatever_the_locale(tmp_path):
    """Bug (review 47j): a preset's bad option was quoted as the locale decoded it
    (``'n\\udcc3\\udcb6des=2'`` under the C locale); now the same line in every locale."""
    shutil.copy(FIX / "ar2.neff", tmp_path / "m.neff")
    lines = []
    for extra in (UTF8, NOT_UTF8):
        proc = cli(["explain", "--json", "m.neff", "--topology", "trn2:nödes=2"], tmp_path,
                   extra)
        assert proc.returncode == 2
        lines.append(json.loads(proc.stdout)["error"])
    assert lines[0] == lines[1] and "bad topology option 'nödes=2' in 'trn2:nödes=2'" in lines[0]

def test_a_reason_names_a_missing_path_as_utf8_text_whatever_the_locale(tmp_path):
    """A missing ``--topology`` file and a missing output parent, named in the reason, were
    the locale's text (``topology 'n\\udcc3\\udcb6.json'`` under the C locale)."""
    shutil.copy(FIX / "ar2.neff", tmp_path / "ar2.neff")
    lines = {}
    for tag, extra in (("utf8", UTF8), ("c", NOT_UTF8)):
        proc = cli(["explain", "--json", "ar2.neff", "--topology", "nö.json"], tmp_path, extra)
        assert proc.returncode == 2
        why = json.loads(proc.stdout)["error"]
        proc = cli(["lower", "-q", "ar2.neff", "-o", "nöpe/x"], tmp_path, extra)
        assert proc.returncode == 2
        lines[tag] = (why, proc.stderr)
    assert lines["c"][0] == lines["utf8"][0]
    assert lines["c"][0].startswith("ar2.neff: field topology: topology 'nö.json' is neither a "
                                    "preset")
    # (stderr in the stream's encoding: UTF-8, or ASCII with what it lacks escaped)
    line = "nrtrewrite: error: nöpe/x: the output's parent folder nöpe does not exist\n"
    assert lines["utf8"][1] == line.encode("utf-8")
    assert lines["c"][1] == line.encode("ascii", "backslashreplace")


def golden(args: list, cwd: Path, extra: dict) -> subprocess.CompletedProcess:
    """``python -m nrtrewrite.golden ARGS`` in ``cwd`` with ``extra`` in the environment."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return subprocess.run([sys.executable, "-m", "nrtrewrite.golden", *args],
                          capture_output=True, cwd=cwd, env=env, timeout=120)


def test_a_golden_archive_does_not_depend_on_the_locale(tmp_path):
    """Bug (review 47c): ``golden.pack`` gave tarfile the member names as the locale
    decoded them: under the C locale the rewritten NEFF's member of a non-ASCII model got a
    ``hdrcharset=BINARY`` pax record (docs/FORMATS.md §9: only for a name that is not
    UTF-8), so the archive differed; and ``golden.unpack`` of the archive under the C locale
    stopped half-way with a ``UnicodeEncodeError``."""
    import gzip
    shutil.copy(FIX / "ar2.neff", tmp_path / NAME)
    for tag, extra in (("u", UTF8), ("c", NOT_UTF8)):
        proc = golden([NAME, f"{tag}.tar.gz"], tmp_path, extra)
        assert proc.returncode == 0, proc.stderr
    data = (tmp_path / "u.tar.gz").read_bytes()
    assert (tmp_path / "c.tar.gz").read_bytes() == data
    tar = gzip.decompress(data)
    assert b"hdrcharset" not in tar
    record = b"path=" + NAME.encode("utf-8") + b"\n"  # a pax record: "LEN path=NAME\n"
    assert f"{len(record) + 3} ".encode() + record in tar  # (LEN has two digits)
    code = ("import sys; from pathlib import Path; from nrtrewrite.golden import unpack; "
            "unpack(sys.argv[1], Path(sys.argv[2]))")
    env = dict(os.environ, PYTHONPATH=str(ROOT), **NOT_UTF8)
    proc = subprocess.run([sys.executable, "-c", code, "u.tar.gz", "back"], cwd=tmp_path,
                          env=env, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    back = tmp_path / "back"
    top = json.loads((back / "manifest.json").read_bytes())
    assert top["output_neff"]["name"] == NAME
    neff = (back / NAME).read_bytes()
    assert hashlib.sha256(neff).hexdigest() == top["output_neff"]["sha256"]
