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


def shown(out: bytes) -> str:
    """A command's stdout or stderr as an ASCII terminal shows it: UTF-8 text (a UTF-8
    locale's stream) with each non-ASCII character escaped as Python's stream escapes it
    (``\\xe9``); the C locale's stream wrote that escape itself (docs/CLI.md "Paths in the
    output": the same text, then escaped where the stream's encoding lacks a character)."""
    return out.decode("utf-8").encode("ascii", "backslashreplace").decode("ascii")


def both_locales(args: list, cwd: Path, run=None) -> list:
    """``args`` run under UTF-8 then under the C locale: ``(status, stdout, stderr)`` each,
    shown as an ASCII terminal shows them (:func:`shown`)."""
    out = []
    for extra in (UTF8, NOT_UTF8):
        proc = (run or cli)(args, cwd, extra)
        out.append((proc.returncode, shown(proc.stdout), shown(proc.stderr)))
    return out


def test_assembles_line_names_the_output_as_utf8_text_whatever_the_locale(tmp_path):
    """Bug (review 47m): ``assemble -o aé.neff`` printed ``a\\udcc3\\udca9.neff: ...`` under
    the C locale."""
    shutil.copy(FIX / "ar2.yaml", tmp_path / "ma.yaml")
    utf8, c = both_locales(["assemble", "ma.yaml", "-o", "aé.neff"], tmp_path)
    size = (tmp_path / "aé.neff").stat().st_size
    assert utf8 == c == (0, f"a\\xe9.neff: {size} bytes, 1 trigger\n", "")


def test_lowers_title_and_its_refusal_name_the_paths_as_utf8_text_whatever_the_locale(
        tmp_path):
    """Bug (review 47m): ``lower bäd.neff -o zé``'s title was ``b\\udcc3\\udca4d.neff ->
    z\\udcc3\\udca9`` under the C locale, and its second run's refusal ``z\\udcc3\\udca9
    exists; pass --force to replace it``."""
    shutil.copy(FIX / "ar2.neff", tmp_path / "bäd.neff")
    titles, refusals = [], []
    for extra in (UTF8, NOT_UTF8):
        proc = cli(["lower", "bäd.neff", "-o", f"z{len(titles)}é"], tmp_path, extra)
        assert proc.returncode == 0, proc.stderr
        # (the title centred over the table: a longer escaped title has fewer spaces)
        titles.append(shown(proc.stdout).splitlines()[0].strip())
        proc = cli(["lower", "-q", "bäd.neff", "-o", "z0é"], tmp_path, extra)
        refusals.append((proc.returncode, shown(proc.stdout), shown(proc.stderr)))
    assert titles == ["b\\xe4d.neff -> z0\\xe9", "b\\xe4d.neff -> z1\\xe9"]
    assert refusals[0] == refusals[1] == (
        2, "", "nrtrewrite: error: z0\\xe9 exists; pass --force to replace it\n")


def test_simulates_title_and_its_model_refusal_name_the_paths_as_utf8_text_whatever_the_locale(
        tmp_path):
    """Bug (review 47m): ``simulate zé``'s title was ``simulate z\\udcc3\\udca9`` under the
    C locale; ``--model`` of another model quoted the output in the locale's text and the
    recorded input name as UTF-8, both forms in one line."""
    shutil.copy(FIX / "ar2.neff", tmp_path / "bäd.neff")
    shutil.copy(FIX / "c7c8.neff", tmp_path / "c7.neff")
    assert cli(["lower", "-q", "bäd.neff", "-o", "zé"], tmp_path, UTF8).returncode == 0
    heads = []
    for extra in (UTF8, NOT_UTF8):
        proc = cli(["simulate", "zé"], tmp_path, extra)
        assert proc.returncode == 0, proc.stderr
        heads.append(shown(proc.stdout).splitlines()[0].rstrip())
    assert heads == ["simulate z\\xe9 (seed 0)"] * 2
    utf8, c = both_locales(["simulate", "zé", "--model", "c7.neff"], tmp_path)
    assert utf8 == c
    status, out, err = c
    top = json.loads((tmp_path / "zé" / "manifest.json").read_bytes())["input"]
    assert status == 2 and out == ""
    # (another size than input.bytes: refused from it, not hashed, since 2026-12-07)
    assert (tmp_path / 'c7.neff').stat().st_size != top["bytes"]
    assert err == (f"nrtrewrite: error: c7.neff: field input.bytes: the model's size should "
                   f"be {top['bytes']} bytes, the size the input z\\xe9/manifest.json records "
                   f"({top['sha256'][:16]}..., "
                   # (the recorded name as JSON writes it; until 2026-12-06 Python's, 'bäd.neff')
                   f'"b\\u00e4d.neff"), not {(tmp_path / "c7.neff").stat().st_size} (refused '
                   'from its size, before any byte is hashed): '
                   "either the model is not the one z\\xe9 was lowered from or "
                   "z\\xe9/manifest.json was edited\n")


def test_goldens_lines_name_the_paths_as_utf8_text_whatever_the_locale(tmp_path):
    """Bug (review 47m): ``python -m nrtrewrite.golden bäd.neff gé.tar.gz`` printed
    ``g\\udcc3\\udca9.tar.gz: written`` under the C locale, and its ``_fail`` lines quoted
    the paths in the locale's text."""
    shutil.copy(FIX / "ar2.neff", tmp_path / "bäd.neff")
    utf8, c = both_locales(["bäd.neff", "gé.tar.gz"], tmp_path, golden)
    # (the second run finds the archive the first wrote, the same bytes: review 51d)
    assert (utf8, c) == ((0, "g\\xe9.tar.gz: written\n", ""),
                         (0, "g\\xe9.tar.gz: unchanged\n", ""))
    utf8, c = both_locales(["bäd.neff", "bäd.neff"], tmp_path, golden)
    assert utf8 == c == (2, "", "nrtrewrite.golden: error: b\\xe4d.neff: the output is the "
                         "model b\\xe4d.neff itself; nrtrewrite never replaces its input: "
                         "choose another output path\n")


def test_diffs_lines_and_refusals_name_the_paths_as_utf8_text_whatever_the_locale(tmp_path):
    """Bug (review 47m): ``diff``'s refusal of a damaged file of A began with the path in
    the locale's text (``o\\udcc3\\udca9/rank-0000/dma.bin: ...`` under the C locale)."""
    shutil.copy(FIX / "ar2.neff", tmp_path / "bäd.neff")
    assert cli(["lower", "-q", "bäd.neff", "-o", "oé"], tmp_path, UTF8).returncode == 0
    shutil.copytree(tmp_path / "oé", tmp_path / "dé")
    with open(tmp_path / "dé" / "rank-0000" / "dma.bin", "ab") as fh:
        fh.write(b"x")  # not a whole number of 16-byte records
    shutil.copytree(tmp_path / "oé", tmp_path / "nü")
    with open(tmp_path / "nü" / "bäd.neff", "ab") as fh:
        fh.write(b"x")  # a byte after the payload
    size = (tmp_path / "dé" / "rank-0000" / "dma.bin").stat().st_size
    utf8, c = both_locales(["diff", "dé", "oé"], tmp_path)
    assert utf8 == c == (2, "", f"nrtrewrite: error: d\\xe9/rank-0000/dma.bin: {size} bytes "
                         "is not a whole number of 16-byte records\n")
    utf8, c = both_locales(["diff", "oé", "nü"], tmp_path)
    assert utf8 == c
    assert c[0] == 1 and c[1].startswith("b\\xe4d.neff damaged in B: n\\xfc/b\\xe4d.neff: ")


def test_dumps_rank_folder_is_utf8_text_whatever_the_locale(tmp_path):
    """Bug (review 47m): ``dump --sem ré`` (a rank folder) titled its table
    ``r\\udcc3\\udca9/sem.bin`` and gave ``"rank_dir": "r\\udcc3\\udca9"`` under the C
    locale."""
    shutil.copy(FIX / "ar2.neff", tmp_path / "m.neff")
    assert cli(["lower", "-q", "m.neff", "-o", "o"], tmp_path, UTF8).returncode == 0
    shutil.copytree(tmp_path / "o" / "rank-0000", tmp_path / "ré")
    records = (tmp_path / "ré" / "sem.bin").stat().st_size // 16  # (16-byte records)
    got = []
    for extra in (UTF8, NOT_UTF8):
        proc = cli(["dump", "--sem", "ré"], tmp_path, extra)
        assert proc.returncode == 0, proc.stderr
        title = shown(proc.stdout).splitlines()[0].strip()  # (centred over the table)
        proc = cli(["dump", "--sem", "--json", "ré"], tmp_path, extra)
        assert proc.returncode == 0, proc.stderr
        got.append((title, [r["rank_dir"] for r in json.loads(proc.stdout)["ranks"]]))
    assert got == [(f"r\\xe9/sem.bin ({records} records)", ["ré"])] * 2


@pytest.fixture(scope="module")
def latin1(tmp_path_factory) -> dict:
    """A Latin-1 locale made without root (localedef into a folder, LOCPATH), where a path's
    UTF-8 bytes decode to other text (``é`` as ``Ã©``) and :func:`errors.path_text` of text
    already converted would corrupt it (review 47n: the C locale cannot show that)."""
    loc = tmp_path_factory.mktemp("loc")
    subprocess.run(["localedef", "-i", "de_DE", "-f", "ISO-8859-1",
                    str(loc / "de_DE.ISO-8859-1")], capture_output=True, timeout=120)
    env = {"LOCPATH": str(loc), "LC_ALL": "de_DE.ISO-8859-1", "LANG": "de_DE.ISO-8859-1",
           "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    probe = subprocess.run([sys.executable, "-c", "import sys; print(sys.getfilesystemencoding())"],
                           capture_output=True, text=True, env=dict(os.environ, **env))
    if probe.stdout.strip().lower().replace("_", "-") not in ("iso8859-1", "iso-8859-1", "latin-1"):
        pytest.skip("no Latin-1 locale here (localedef)")
    return env


def test_lines_quoting_paths_read_the_same_under_a_latin1_locale(tmp_path, latin1):
    """docs/CLI.md "Paths in the output": the same text under a UTF-8 and a Latin-1 locale
    (each stream in its own encoding): assemble's refusal of its spec as output (it quoted the
    spec in the locale's text beside the UTF-8 head), simulate's extra rank folder (a name
    read from the disk), and simulate's --model refusal, which quotes the manifest's input
    name, UTF-8 text already: converted again it would read ``b\\udce4d.neff``."""
    shutil.copy(FIX / "ar2.yaml", tmp_path / "mé.yaml")
    shutil.copy(FIX / "ar2.neff", tmp_path / "bäd.neff")
    shutil.copy(FIX / "c7c8.neff", tmp_path / "c7.neff")
    assert cli(["lower", "-q", "bäd.neff", "-o", "oé"], tmp_path, UTF8).returncode == 0
    shutil.copytree(tmp_path / "oé", tmp_path / "ox")
    (tmp_path / "ox" / "rank-é").mkdir()
    got = {}
    for tag, extra, enc in (("utf8", UTF8, "utf-8"), ("latin1", latin1, "latin-1")):
        lines = []
        for args in (["assemble", "mé.yaml", "-o", "mé.yaml"], ["simulate", "ox"],
                     ["simulate", "oé", "--model", "c7.neff"]):
            proc = cli(args, tmp_path, extra)
            assert proc.returncode == 2, (tag, args, proc.stderr)
            lines.append(proc.stderr.decode(enc).strip())
        got[tag] = lines
    assert got["latin1"] == got["utf8"]
    spec, extra_rank, model = got["utf8"]
    assert spec.startswith("nrtrewrite: error: mé.yaml: the output is the spec mé.yaml itself")
    assert "(rank-é)" in extra_rank
    # (the recorded name as the manifest's JSON writes it; until 2026-12-06 Python's, 'bäd.neff')
    assert '"b\\u00e4d.neff"' in model and "oé/manifest.json" in model


#: (arguments, the usage error's message) of every command's path argument click checks
#: (docs/CLI.md "Errors": `Invalid value for 'MODEL': File 'X' is a directory.`), the path
#: as UTF-8 text ("Paths in the output"); in a folder holding `dé/` and the file `fé`
CLICK_PATHS = [
    (["lower", "nö.neff"], "Invalid value for 'MODEL': File 'nö.neff' does not exist."),
    (["lower", "dé"], "Invalid value for 'MODEL': File 'dé' is a directory."),
    (["schedule", "nö.neff", "--rank", "0"],
     "Invalid value for 'MODEL': File 'nö.neff' does not exist."),
    (["explain", "nö.neff"], "Invalid value for 'MODEL': File 'nö.neff' does not exist."),
    (["dump", "--spad", "nö"], "Invalid value for 'PATH': Path 'nö' does not exist."),
    (["diff", "fé", "dé"], "Invalid value for 'A': 'fé' is a file, not an output folder"),
    (["diff", "dé", "nö"], "Invalid value for 'B': Directory 'nö' does not exist."),
    (["simulate", "nö"], "Invalid value for 'MODEL.neff|OUT': Path 'nö' does not exist."),
    (["simulate", "dé", "--model", "nö.neff"],
     "Invalid value for '--model': File 'nö.neff' does not exist."),
]


@pytest.mark.parametrize("args,why", CLICK_PATHS)
def test_clicks_path_refusals_name_the_path_as_utf8_text_under_a_latin1_locale(tmp_path,
                                                                               latin1, args,
                                                                               why):
    """Bug (left by session 47): click's own refusal of a path argument (`Path 'X' does not
    exist.`) quoted the locale's text of the path, `'nÃ¶'` under a Latin-1 locale, in the
    line and in `--json`'s `error`, where every other message gives its bytes read as UTF-8.
    The same text under a UTF-8 and a Latin-1 locale, each stream in its own encoding."""
    (tmp_path / "dé").mkdir()
    (tmp_path / "fé").write_bytes(b"x")
    command = args[0]
    line = f"nrtrewrite {command}: error: {why} (see 'nrtrewrite {command} --help')"
    for tag, extra, enc in (("utf8", UTF8, "utf-8"), ("latin1", latin1, "latin-1")):
        proc = cli(args, tmp_path, extra)
        assert (proc.returncode, proc.stdout, proc.stderr.decode(enc)) == (2, b"", line + "\n")
        if command != "lower":  # (lower has no --json)
            proc = cli(args + ["--json"], tmp_path, extra)
            assert proc.returncode == 2 and proc.stderr.decode(enc) == line + "\n", tag
            assert json.loads(proc.stdout)["error"] == why, tag


def test_clicks_path_refusal_keeps_a_byte_that_is_not_utf8_as_its_escape(tmp_path, latin1):
    """docs/CLI.md "Paths in the output": a byte that is not UTF-8 is Python's escape for it
    (`\\udcff`), as in every other message, under both locales (click showed U+FFFD under
    UTF-8, `ÿ` under Latin-1)."""
    name = os.fsdecode(b"n\xff")  # (this process's locale: UTF-8, surrogateescape)
    for tag, extra, enc in (("utf8", UTF8, "utf-8"), ("latin1", latin1, "latin-1")):
        proc = cli(["simulate", name, "--json"], tmp_path, extra)
        assert proc.returncode == 2, tag
        assert json.loads(proc.stdout)["error"] == (
            "Invalid value for 'MODEL.neff|OUT': Path 'n\\udcff' does not exist."), tag
        assert proc.stderr.decode(enc).startswith(
            "nrtrewrite simulate: error: Invalid value for 'MODEL.neff|OUT': Path "
            "'n\\udcff' does not exist."), tag


def test_diffs_extraction_recipe_names_no_escaped_file(tmp_path):
    """Bug (review 51r): under the C locale the recipe for a golden archive named ``gé``
    read ``tar xzf 'g\\xe9.tar.gz'``, a command naming no file.  Under UTF-8 it names the
    file; where stderr's encoding cannot write the name it says ``ARCHIVE`` and why."""
    shutil.copy(FIX / "golden" / "ar2.tar.gz", tmp_path / "gé.tar.gz")
    (tmp_path / "o").mkdir()
    utf8, c = both_locales(["diff", "gé.tar.gz", "o"], tmp_path)
    head = "nrtrewrite diff: error: Invalid value for 'A': '{}' is a file, not an output folder: "
    tail = ' -C "$D", then diff "$D" (docs/CLI.md "diff")'
    # (shown: the UTF-8 run's é as an ASCII terminal shows it, \\xe9; its stream wrote é)
    assert utf8 == (2, "", head.format("g\\xe9.tar.gz")
                    + "extract a golden archive first, D=$(mktemp -d) && "
                    + "tar xzf 'g\\xe9.tar.gz'"
                    + tail + " (see 'nrtrewrite diff --help')\n")
    assert c == (2, "", head.format("g\\xe9.tar.gz")
                 + "extract a golden archive first, D=$(mktemp -d) && tar xzf ARCHIVE"
                 + tail
                 + "; ARCHIVE is this file, whose name this locale's encoding cannot write "
                 "(see 'nrtrewrite diff --help')\n")
