"""The last error texts that put a name, a path or a user's value in unescaped (docs/CLI.md
"Errors"), each now escaped once where the text enters: an internal error's message (and
the lines of a resource the system refused, a streamed document's ``"error"``), click's
refusal of extra arguments, a one-value option's repeated values, a key path's non-string key,
and the reasons of ``simulate``'s engine, fifo, layout and program decoders (unit level: a
subgraph or an engine named with a backslash cannot pass the tar reader).

Each test feeds the two names of test_escape_once, ``lit\\nb`` (a backslash, then ``n``)
and ``lit`` + line break + ``b``, and asserts the lines written out by hand: a name's
backslash shows as two, its line break as ``\\n``; a ``repr`` quote doubles the backslash
itself (and is only guarded afterwards)."""

from __future__ import annotations

import errno
import json
import shutil
import subprocess
import sys
import types

import pytest

import nrtrewrite.simulate.engine as engine_mod
import nrtrewrite.simulate.program as program_mod
from nrtrewrite.cli import _one_line, _resource_line, stopped_why
from nrtrewrite.errors import SimulationError
from nrtrewrite.jsonin import joined_key
from nrtrewrite.simulate.artifacts import load_rank_files
from nrtrewrite.simulate.engine import Simulator
from nrtrewrite.simulate.fifo import FifoDecoder
from nrtrewrite.simulate.program import decode_rank
from test_atomic_output import FIX, ROOT, env
from test_escape_once import BACKSLASH, NEWLINE, SHOWN, invoke

BS = "\\"
#: an internal error's tail (docs/CLI.md "Errors")
BUG = " (a bug in nrtrewrite; rerun with --traceback for the details and report it)"


def _lines(res) -> list[str]:
    return res.stderr.splitlines()


# ------------------------------------------------------------------ internal errors

def _raise_in_inspect(monkeypatch, exc: BaseException) -> None:
    monkeypatch.setattr("nrtrewrite.cli.inspect.read_model",
                        lambda *a, **kw: (_ for _ in ()).throw(exc))


def test_an_internal_errors_message_names_two_values_apart(monkeypatch):
    """The message of an exception nrtrewrite did not raise on purpose is text it did not
    write (a name, a path in it, raw): escaped once as a name.  Folded to one line with
    spaces and only guarded, ``lit`` + line break + ``b`` printed as ``lit b`` (as a name
    with a space), and an ESC as ``\\x1b`` (as a name holding a backslash and ``x1b``)."""
    seen = []
    for name in (BACKSLASH, NEWLINE):
        _raise_in_inspect(monkeypatch, ValueError(f"bad var {name}"))
        res = invoke("inspect", FIX / "ar2.neff")
        assert res.exit_code == 70
        assert _lines(res) == [f"nrtrewrite: internal error: ValueError: bad var {SHOWN[name]}"
                               + BUG]
        seen.append(res.stderr)
    assert seen[0] != seen[1]
    for text, shown in (("a\x1bb", "a" + BS + "x1bb"), ("a" + BS + "x1bb", "a" + BS * 2 + "x1bb"),
                        ("a b", "a b"), ("a\tb", "a" + BS + "tb")):
        assert _one_line(RuntimeError(text)) == f"RuntimeError: {shown}"


def test_an_internal_keyerror_shows_its_repr_quoted_key_once(monkeypatch):
    """A ``KeyError`` of a string is its key in ``repr``'s quotes, which escape it already:
    its backslash shows doubled once, not twice."""
    for name, shown in ((BACKSLASH, "'lit" + BS * 2 + "nb'"), (NEWLINE, "'lit" + BS + "nb'")):
        _raise_in_inspect(monkeypatch, KeyError(name))
        res = invoke("inspect", FIX / "ar2.neff")
        assert res.exit_code == 70
        assert _lines(res) == [f"nrtrewrite: internal error: KeyError: {shown}" + BUG]
    # (a key that is not a string: its message escaped as any other)
    assert _one_line(KeyError(("a" + BS, 1))) == "KeyError: ('a" + BS * 4 + "', 1)"


def test_the_system_refusing_a_resource_names_the_library_apart():
    """The loader's reason names the library that could not be mapped (its path: the
    installation's folder), escaped once; a process refused names its reason so too."""
    lines = []
    for name in (BACKSLASH, NEWLINE):
        err = ImportError(f"/opt/{name}/libopenblas.so: failed to map segment from shared "
                          "object")
        line = _resource_line(err, "nrtrewrite lower")
        assert line == ("nrtrewrite: error: out of memory: 'nrtrewrite lower' could not load its "
                        f"modules (ImportError: /opt/{SHOWN[name]}/libopenblas.so: failed to map "
                        "segment from shared object): the memory or address-space limit "
                        "(ulimit -v) is too small")
        lines.append(line)
        line = _resource_line(OSError(errno.EAGAIN, None), "nrtrewrite simulate")
        assert line is not None and "could not start a process or map memory (" in line
    assert lines[0] != lines[1]


def test_a_stopped_documents_error_escapes_the_message_once():
    """``"error"`` of a streamed ``--json`` document stopped by something else than an
    error of nrtrewrite: ``Type: message``, the message escaped once (then written as
    JSON); a stop's own words unchanged."""
    assert stopped_why(ValueError(f"x {BACKSLASH}")) == f"ValueError: x {SHOWN[BACKSLASH]}"
    assert stopped_why(ValueError(f"x {NEWLINE}")) == f"ValueError: x {SHOWN[NEWLINE]}"
    assert stopped_why(KeyboardInterrupt()) == "KeyboardInterrupt"


def _ascii_run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120,
                          env=dict(env(PYTHONIOENCODING="ascii"), PYTHONPATH=str(ROOT)))


def test_an_internal_error_on_an_ascii_stderr_is_one_ascii_line():
    """``PYTHONIOENCODING=ascii``: the message's line break and its 权 (U+6743) escaped, one
    line of ASCII; a real backslash then ``u6743`` stays apart, doubled."""
    for text, shown in (("权\nb", b"\\u6743\\nb"), ("\\u6743\\nb", b"\\\\u6743\\\\nb")):
        code = ("import sys, nrtrewrite.cli.inspect as i\n"
                f"def boom(*a, **k): raise ValueError({text!r})\n"
                "i.read_model = boom\n"
                "from nrtrewrite.cli import main\n"
                f"main(['inspect', {str(FIX / 'ar2.neff')!r}], prog_name='nrtrewrite')\n")
        proc = _ascii_run(code)
        assert proc.returncode == 70, proc.stderr
        assert proc.stderr == (b"nrtrewrite: internal error: ValueError: " + shown
                               + BUG.encode() + b"\n")


# ------------------------------------------------------------------ click's refusals

def test_extra_arguments_are_named_apart():
    """click joined extra arguments raw with spaces: an ESC and a typed ``\\x1b`` printed
    alike, and so did the one argument ``a b`` and the two ``a`` ``b``."""
    lines = []
    for name in (BACKSLASH, NEWLINE):
        res = invoke("inspect", FIX / "ar2.neff", name)
        assert res.exit_code == 2
        assert _lines(res) == [f"nrtrewrite inspect: error: Got unexpected extra argument "
                               f"('{SHOWN[name]}') (see 'nrtrewrite inspect --help')"]
        lines.append(res.stderr)
    assert lines[0] != lines[1]
    res = invoke("lower", FIX / "ar2.neff", "a b")
    assert _lines(res) == ["nrtrewrite lower: error: Got unexpected extra argument ('a b') "
                           "(see 'nrtrewrite lower --help')"]
    res = invoke("lower", FIX / "ar2.neff", "a", "b")
    assert _lines(res) == ["nrtrewrite lower: error: Got unexpected extra arguments ('a', 'b') "
                           "(see 'nrtrewrite lower --help')"]


def test_extra_arguments_on_an_ascii_stderr_are_one_ascii_line(tmp_path):
    for arg, shown in (("权\nb", b"'\\u6743\\nb'"), ("\\u6743\\nb", b"'\\\\u6743\\\\nb'")):
        proc = subprocess.run([sys.executable, "-m", "nrtrewrite", "inspect",
                               str(FIX / "ar2.neff"), arg], capture_output=True, timeout=120,
                              cwd=tmp_path, env=dict(env(PYTHONIOENCODING="ascii"),
                                                     PYTHONPATH=str(ROOT)))
        assert proc.returncode == 2
        assert proc.stderr == (b"nrtrewrite inspect: error: Got unexpected extra argument ("
                               + shown + b") (see 'nrtrewrite inspect --help')\n")


def test_a_one_value_option_names_two_given_values_apart(tmp_path, monkeypatch):
    """An option that takes one value (``cls=OneValue``, as ``lower -o``) given twice with
    different values: each value escaped once; the same value twice is that value."""
    monkeypatch.chdir(tmp_path)
    res = invoke("lower", FIX / "ar2.neff", "-o", BACKSLASH, "-o", NEWLINE)
    assert res.exit_code == 2
    assert _lines(res) == [
        "nrtrewrite lower: error: Invalid value for '-o' / '--output': given twice "
        f"({SHOWN[BACKSLASH]}, {SHOWN[NEWLINE]}); --output takes one value "
        "(see 'nrtrewrite lower --help')"]
    assert list(tmp_path.iterdir()) == []
    res = invoke("lower", FIX / "ar2.neff", "-o", NEWLINE, "-o", NEWLINE, "-q")
    assert res.exit_code == 0, res.stderr
    assert [p.name for p in tmp_path.iterdir()] == [NEWLINE]


# ------------------------------------------------------------------ a non-string key

class _Key:
    """A mapping key that is no JSON scalar, whose ``str()`` is what it is given."""

    def __init__(self, text: str):
        self.text = text

    def __str__(self) -> str:
        return self.text

    def __hash__(self) -> int:
        return hash(self.text)


def test_a_key_path_shows_a_non_string_key_escaped_once():
    """``joined_key``'s ``str()`` of a key that is no string nor JSON scalar was only
    guarded: a key whose text holds a line break and one holding a backslash then ``n``
    gave one path.  ``bytes`` (a YAML ``!!binary``) is its ``repr``, escaped by it; a
    string key stays JSON-quoted, a scalar as JSON writes it."""
    assert joined_key("a", _Key(BACKSLASH)) == f"a[{SHOWN[BACKSLASH]}]"
    assert joined_key("a", _Key(NEWLINE)) == f"a[{SHOWN[NEWLINE]}]"
    assert joined_key("a", _Key("x\x1b[2J")) == "a[x" + BS + "x1b[2J]"
    assert joined_key("a", b"x\ny") == "a[b'x" + BS + "ny']"
    assert joined_key("a", b"x\\ny") == "a[b'x" + BS * 2 + "ny']"
    assert joined_key("a", NEWLINE) == 'a["lit' + BS + 'nb"]'
    assert joined_key("a", BACKSLASH) == 'a["lit' + BS * 2 + 'nb"]'
    assert joined_key("a", 1.5) == "a[1.5]" and joined_key("", None) == "null"


# ------------------------------------------------------------------ simulate's decoders

@pytest.fixture(scope="module")
def ar2_out(tmp_path_factory):
    out = tmp_path_factory.mktemp("ar2") / "o"
    res = invoke("lower", "-q", FIX / "ar2.neff", "-o", out)
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture(scope="module")
def ring_out(tmp_path_factory):
    """Two nodes (ranks 0, 1 and 64, 65): the rings cross the network, whose net ops carry
    a basic_block_id (FORMATS §8.1)."""
    from test_simulate import lower_spec, two_node_spec
    return lower_spec(two_node_spec(num_elements=8192), tmp_path_factory.mktemp("m2") / "o")


def _loaded(out) -> Simulator:
    sim = Simulator(out, memory_check=False)
    sim.load_manifest()
    return sim


def _rename(sim: Simulator, subgraph: str, engine: str | None = None) -> None:
    for t in sim.triggers.values():
        t.subgraph = subgraph
        if engine is not None:
            t.engine = engine


@pytest.mark.parametrize("name", [BACKSLASH, NEWLINE])
def test_layouts_missing_var_names_its_subgraph_once(ar2_out, name):
    sim = _loaded(ar2_out)
    with pytest.raises(SimulationError) as exc:
        sim.layout.var_region(name, 99)
    assert exc.value.line() == (f"{ar2_out}/manifest.json: var 99 of {SHOWN[name]} is not in "
                                "the memory map")


@pytest.mark.parametrize("name", [BACKSLASH, NEWLINE])
def test_programs_spad_overflow_names_its_subgraph_once(ar2_out, monkeypatch, name):
    """The entries of one subgraph past its CTRL SPAD (here made 7 bytes: one 8-byte entry
    overflows it)."""
    sim = _loaded(ar2_out)
    files = load_rank_files(ar2_out, sim.rank_manifests[0])
    _rename(sim, name)
    for entry in files.entries:  # (the rank manifest names the entry's subgraph too)
        entry["subgraph"] = name
    monkeypatch.setattr(program_mod.F, "SPAD_BYTES", 7)
    with pytest.raises(SimulationError) as exc:
        decode_rank(sim.layout, sim.triggers, files)
    assert exc.value.why == f"1 entries of subgraph {SHOWN[name]} overflow its 7-byte CTRL SPAD"


@pytest.mark.parametrize("name", [BACKSLASH, NEWLINE])
def test_fifos_basic_block_id_names_its_subgraph_once(ring_out, name):
    sim = _loaded(ring_out)
    files = {r: load_rank_files(ring_out, sim.rank_manifests[r]) for r in sim.ranks}
    programs = {r: decode_rank(sim.layout, sim.triggers, files[r]) for r in sim.ranks}
    _rename(sim, name)  # (after decoding: the programs' entries hold these triggers)
    with pytest.raises(SimulationError) as exc:
        FifoDecoder(sim.layout, programs, files, {name: 1}).decode()
    assert exc.value.why == (f"basic_block_id should be 1, the index of subgraph {SHOWN[name]} "
                             "(trigger 0's), not 0")


def _fake_neff(monkeypatch, triggers: list) -> None:
    """The rewritten NEFF as read: ``triggers`` still in it, no subgraph."""
    import nrtrewrite.neff.reader as reader_mod
    monkeypatch.setattr(engine_mod, "read_rewritten_neff", lambda path: b"")
    monkeypatch.setattr(reader_mod, "read_model_bytes",
                        lambda data, path=None: types.SimpleNamespace(triggers=triggers,
                                                                      subgraphs=[]))


@pytest.mark.parametrize("sg, eng", [(BACKSLASH, NEWLINE), (NEWLINE, BACKSLASH)])
def test_engines_leftover_trigger_names_its_subgraph_and_engine_once(ar2_out, monkeypatch,
                                                                     sg, eng):
    sim = _loaded(ar2_out)
    _fake_neff(monkeypatch, [types.SimpleNamespace(subgraph=sg, engine=eng, index=5)])
    with pytest.raises(SimulationError) as exc:
        sim._subgraph_index()
    assert exc.value.line() == (f"{ar2_out}/ar2.neff: the rewritten NEFF still holds a "
                                f"collective trigger ({SHOWN[sg]} {SHOWN[eng]} instruction 5)")


@pytest.mark.parametrize("sg, eng", [(BACKSLASH, NEWLINE), (NEWLINE, BACKSLASH)])
def test_engines_missing_kick_word_names_its_member_once(ar2_out, monkeypatch, sg, eng):
    """A trigger whose subgraph is not in the rewritten NEFF: the subgraph and the member,
    in the reason, each escaped once (until 2026-12-06 the line named the member as its
    location and said ``no instruction N in MEMBER``)."""
    sim = _loaded(ar2_out)
    _rename(sim, sg, eng)
    _fake_neff(monkeypatch, [])
    t = sim.triggers[0]
    with pytest.raises(SimulationError) as exc:
        sim._subgraph_index()
    member = f"{SHOWN[sg]}/{SHOWN[eng]}.bin"
    assert exc.value.line() == (f"{ar2_out}/ar2.neff: trigger 0: the rewritten NEFF has no "
                                f"subgraph {SHOWN[sg]}, the trigger's: its TOPSP_KICK word "
                                f"should be instruction {t.index} of {member}")


# ------------------------------------------------------------------ a rank manifest's leg

@pytest.fixture(scope="module")
def hier_out(tmp_path_factory):
    """two_node128 over two nodes: HIER, its entries named by their leg (FORMATS §1.2)."""
    out = tmp_path_factory.mktemp("hier") / "o"
    res = invoke("lower", "-q", FIX / "two_node128.neff", "--topology",
                 FIX / "topologies" / "trn2-2node.json", "-o", out)
    assert res.exit_code == 0, res.output
    return out


def _with_leg(src, dst, leg: str):
    shutil.copytree(src, dst)
    p = dst / "rank-0000" / "manifest.json"
    man = json.loads(p.read_text())
    assert man["entries"][0]["leg"] == "intra_redsct"  # (the fixture's first leg)
    man["entries"][0]["leg"] = leg
    p.write_text(json.dumps(man, indent=1, sort_keys=True) + "\n")
    return dst


def test_a_rank_manifests_leg_name_is_shown_once(hier_out, tmp_path):
    """The rank manifest's ``leg`` of an entry, a string any tamperer writes, was put raw
    into the algo_type refusal (a leg no HIER trigger has: the trigger's own algorithm,
    HIER, is no SPAD engine): ``x\\ny`` and ``x`` + line break + ``y`` printed alike."""
    lines = []
    for k, name in enumerate((BACKSLASH, NEWLINE)):
        out = _with_leg(hier_out, tmp_path / f"o{k}", name)
        res = invoke("simulate", out, "--ignore-checksums")
        assert res.exit_code == 1, res.output
        want = (f"protocol error: {out}/rank-0000: field algo_type, rank 0, artifact spad.bin, "
                f"record 0: algo_type should be HIER, not RING: trigger 0 was lowered as HIER "
                f"with leg "
                f"{SHOWN[name]} HIER")
        assert want in res.stdout.splitlines(), res.stdout
        lines.append(want)
    assert lines[0] != lines[1]


def test_a_rank_manifests_leg_name_on_an_ascii_stdout_is_one_ascii_line(hier_out, tmp_path):
    for k, (leg, shown) in enumerate((("权\nb", b"\\u6743\\nb"),
                                      ("\\u6743\\nb", b"\\\\u6743\\\\nb"))):
        out = _with_leg(hier_out, tmp_path / f"o{k}", leg)
        proc = subprocess.run([sys.executable, "-m", "nrtrewrite", "simulate", str(out),
                               "--ignore-checksums"], capture_output=True, timeout=300,
                              env=dict(env(PYTHONIOENCODING="ascii"), PYTHONPATH=str(ROOT)))
        assert proc.returncode == 1, proc.stderr
        want = (b"record 0: algo_type should be HIER, not RING: trigger 0 was lowered as HIER "
                b"with leg "
                + shown
                + b" HIER")
        assert [ln for ln in proc.stdout.splitlines() if ln.endswith(want)], proc.stdout
        assert proc.stdout.isascii()


# ------------------------------------------------------------------ lower's gone entries

def _neff_removed_meanwhile(monkeypatch) -> None:
    """The rewritten NEFF removed from lower's temporary folder before its last check (as
    another process could: docs/CLI.md)."""
    import nrtrewrite.bundle as bundle_mod
    real = bundle_mod._check_complete

    def check(tmp, out, names):
        (tmp / names[-1]).unlink()
        return real(tmp, out, names)
    monkeypatch.setattr(bundle_mod, "_check_complete", check)


def test_lowers_gone_entries_name_the_model_named_neff_once(tmp_path, monkeypatch):
    """The entries lower finds gone include the rewritten NEFF, named after the model: it
    was listed raw."""
    monkeypatch.chdir(tmp_path)
    _neff_removed_meanwhile(monkeypatch)
    lines = []
    for name in (BACKSLASH, NEWLINE):
        shutil.copy(FIX / "ar2.neff", tmp_path / f"{name}.neff")
        res = invoke("lower", "-q", f"{name}.neff", "-o", "o")
        assert res.exit_code == 2, res.output
        assert _lines(res)[-1].endswith(f"are gone ({SHOWN[name]}.neff): another process "
                                        "removed them; nothing was written to o"), res.stderr
        lines.append(_lines(res)[-1])
    assert lines[0] != lines[1]


def test_lowers_gone_entries_on_an_ascii_stderr_are_one_ascii_line(tmp_path):
    for k, (name, shown) in enumerate((("权\nb", b"\\u6743\\nb"),
                                       ("\\u6743\\nb", b"\\\\u6743\\\\nb"))):
        shutil.copy(FIX / "ar2.neff", tmp_path / f"{name}.neff")
        code = ("import nrtrewrite.bundle as b\n"
                "real = b._check_complete\n"
                "def check(tmp, out, names):\n"
                "    (tmp / names[-1]).unlink()\n"
                "    return real(tmp, out, names)\n"
                "b._check_complete = check\n"
                "from nrtrewrite.cli import main\n"
                f"main(['lower', '-q', {name + '.neff'!r}, '-o', 'o{k}'], "
                "prog_name='nrtrewrite')\n")
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=300,
                              cwd=tmp_path,
                              env=dict(env(PYTHONIOENCODING="ascii"), PYTHONPATH=str(ROOT)))
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count(b"\n") == 1 and proc.stderr.isascii(), proc.stderr
        assert proc.stderr.endswith(b"are gone (" + shown + b".neff): another process removed "
                                    b"them; nothing was written to o" + str(k).encode() + b"\n")
