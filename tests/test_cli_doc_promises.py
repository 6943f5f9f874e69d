"""What docs/CLI.md, docs/TOPOLOGY.md and docs/SELECTION.md promise about options that belong
to another mode, odd paths and odd values, as a reader of the docs found them broken
(2026-12-02): each case is one line on stderr and status 2, or the documented warning."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from nrtrewrite.cli import main
from nrtrewrite.errors import ValidationError
from nrtrewrite.topology.model import load_topology
from test_atomic_output import FIX

ROOT = Path(__file__).resolve().parents[1]


def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _one_line(res, code: int = 2) -> str:
    assert res.exit_code == code, (res.exit_code, res.output)
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    return lines[0]


MODEL_LESS = ["--op", "allreduce", "--bytes", "1MiB", "--ranks", "8"]


@pytest.mark.parametrize("dtype", ["nope", "fp16", "bf16"])
def test_explain_of_a_model_refuses_a_given_dtype(dtype):
    # --dtype is model-less; it has a default, so only a given one is refused (bf16 too)
    line = _one_line(_run("explain", FIX / "ar2.neff", "--dtype", dtype))
    assert "--dtype" in line and "without a MODEL" in line
    assert _run("explain", FIX / "ar2.neff").exit_code == 0


@pytest.mark.parametrize("extra", [["--trigger", "3"], ["--all"], ["--no-verify-hash"]])
def test_model_less_explain_refuses_the_options_of_a_model(extra):
    line = _one_line(_run("explain", *MODEL_LESS, *extra))
    assert f"{extra[0]} chooses among a MODEL's triggers" in line


@pytest.mark.parametrize("group", ["0-3,", ",0", "0,,4", "0, ,4"])
def test_a_group_with_an_empty_item_is_refused(group):
    line = _one_line(_run("explain", "--op", "allreduce", "--bytes", "1MiB", "--group", group))
    assert "field --group: empty item in the rank list" in line


def test_a_topology_file_for_another_lnc_names_the_lnc_option(tmp_path):
    topo = tmp_path / "t.json"
    topo.write_text(json.dumps({"platform": "trn2", "lnc_size": 1}))
    line = _one_line(_run("explain", *MODEL_LESS, "--topology", topo, "--lnc", "2"))
    assert line.endswith("field lnc_size: the topology file's lnc_size should be 2 (--lnc is 2), "
                         "not 1")


def test_either_preset_takes_a_node_count():
    topo = load_topology("trn1:nodes=2", world=tuple(range(8)), lnc_size=1)
    assert (topo.name, topo.nodes, topo.platform.name) == ("trn1:nodes=2", 2, "trn1")
    res = _run("explain", *MODEL_LESS, "--topology", "trn1:nodes=2")
    assert res.exit_code == 0 and "topology trn1:nodes=2 (2 node(s)" in res.stdout


@pytest.mark.parametrize("spec, why", [("trn2:", "bad topology option ''"),
                                       ("trn2:nodes=2,", "bad topology option ''"),
                                       ("trn2:nodes=01", "bad topology option 'nodes=01'"),
                                       ("trn2:nodes=1,nodes=2", "repeated topology option"),
                                       ("trn1:nodes=0", "bad topology option 'nodes=0'")])
def test_a_preset_option_written_oddly_is_refused(spec, why):
    with pytest.raises(ValidationError, match=why):
        load_topology(spec, world=tuple(range(8)), lnc_size=1)


@pytest.fixture(scope="module")
def two_outputs(tmp_path_factory):
    base = tmp_path_factory.mktemp("diff")
    for name in ("a", "b"):
        assert _run("lower", FIX / "ar2.neff", "-o", base / name, "-q").exit_code == 0
    return base / "a", base / "b"


@pytest.mark.parametrize("path, kind", [("tool_version.x", "a string"), ("world.0", "a list"),
                                        ("ranks.x", "a list"), ("triggers.0", "a list")])
def test_diff_ignore_of_a_key_inside_a_non_object_is_a_usage_error(two_outputs, path, kind):
    line = _one_line(_run("diff", *two_outputs, "--ignore", path))
    assert f"{path.split('.')[0]} is {kind} in the manifest" in line


def test_diff_ignore_of_a_path_in_neither_manifest_warns(two_outputs):
    res = _run("diff", *two_outputs, "--ignore", "input.nmae", "--ignore", "input.name")
    assert res.exit_code == 0 and res.stdout.strip() == "identical"
    assert res.stderr.splitlines() == ["nrtrewrite: warning: --ignore input.nmae: neither "
                                       "manifest.json has this key path, so it ignores nothing"]
    # the --json document is unchanged by it (the warning is on stderr)
    res = _run("diff", *two_outputs, "--ignore", "input.nmae", "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["identical"] is True


def test_diff_ignore_of_a_key_inside_a_nested_string_ignores_nothing(two_outputs, tmp_path):
    """CLI.md: a path that names a value in neither manifest ignores nothing, also one that
    runs through a value that is no object below the first key (``topology.name`` is a
    string, so ``topology.name.x`` is no key path of either): B's ``topology.name`` made
    "zz" is still its difference, and the warning says the path ignores nothing."""
    a, b0 = two_outputs
    b = tmp_path / "b"
    shutil.copytree(b0, b)
    top = json.loads((b / "manifest.json").read_text())
    assert top["topology"]["name"] == "trn2"
    top["topology"]["name"] = "zz"
    (b / "manifest.json").write_text(json.dumps(top))
    res = _run("diff", a, b, "--ignore", "topology.name.x")
    assert res.exit_code == 1
    assert res.stdout.splitlines() == ['manifest.json topology.name: "trn2" != "zz"',
                                       "1 difference(s)"]
    assert res.stderr.splitlines() == ["nrtrewrite: warning: --ignore topology.name.x: neither "
                                       "manifest.json has this key path, so it ignores nothing"]


def test_an_empty_path_is_a_usage_error_naming_the_argument(tmp_path):
    line = _one_line(_run("inspect", ""))
    assert "inspect: error: Invalid value for 'MODEL.neff': an empty path" in line
    line = _one_line(_run("assemble", "", "-o", tmp_path / "x.neff"))
    assert "Invalid value for 'SPEC': an empty path" in line
    assert not (tmp_path / "x.neff").exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
@pytest.mark.parametrize("selector", [[], ["--sem"]])
def test_dump_of_a_fifo_says_what_it_is(tmp_path, selector):
    fifo = tmp_path / "sem.bin"
    os.mkfifo(fifo)
    line = _one_line(_run("dump", *selector, fifo))
    assert line == (f"nrtrewrite: error: {fifo}: not a regular file nor a folder (dump reads "
                    "an artifact file, a rank folder or an output folder)")


def _templates(tree):
    """Each string expression of a module's source as a message template: an f-string's
    fields as ``{}``, a ``+`` of strings joined (``"must be a string" + _instead(...)``
    keeps its ``, not`` in ``_instead``'s own f-string, and ``"..." + (f", not {x}" if ...)``
    is two templates); docstrings left out."""
    import ast

    def text(node, used):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            used.add(id(node))
            return node.value
        if isinstance(node, ast.JoinedStr):
            used.update(id(n) for n in ast.walk(node)
                        if isinstance(n, (ast.JoinedStr, ast.Constant)))
            return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = text(node.left, used), text(node.right, used)
            if left is not None or right is not None:
                used.add(id(node))
                return (left or "{}") + (right or "{}")
        return None

    skip = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr)}
    for node in ast.walk(tree):  # (outer nodes first: a part of a template is not one)
        if id(node) not in skip and (t := text(node, skip)) is not None:
            yield node.lineno, t


def test_no_message_says_what_it_found_with_got():
    """CLI.md "Errors": a message says what it found after ``not`` (``must be an integer,
    not 'x'``), never ``..., got 'x'`` (the NEFF reader's, ``assemble``'s and the simulator's
    wrong-element line said so until 2026-12-06, the rest ``, not``: one form to grep for)
    nor ``X 'x', expected A`` (``(expected A)``, ``; expected A``: the simulator's checks of
    the artifacts and the kick words, the NEFF reader's ``neff_like_version`` and the
    topology's ``format`` said so until 2026-12-06).  Checked on the source, every string
    of every module (adjacent literals are one string to the parser, so a ``"..., "``
    ``f"got {x}"`` split over two lines is seen whole); ``"expected"`` alone (a key of
    ``--json``'s ``first_mismatch``) and PyYAML's own ``expected a mapping ..., but found``
    that ``assemble`` repeats are no such template."""
    import ast
    import re
    from pathlib import Path

    import nrtrewrite
    root = Path(nrtrewrite.__file__).parent
    got, nots = [], set()
    for path in sorted(root.rglob("*.py")):
        for line, t in _templates(ast.parse(path.read_text())):
            if re.search(r",\s*got\b", t) or re.search(r"[,;(]\s*expected\b", t):
                got.append(f"{path.relative_to(root)}:{line}: {t!r}")
            if re.search(r", not \{\}", t):
                nots.add(path.relative_to(root).as_posix())
    assert not got, "\n".join(got)
    # the form is there, in the modules that used the other ones (not a vacuous scan)
    assert {"neff/assembler.py", "neff/reader.py", "neff/container.py", "neff/fields.py",
            "simulate/engine.py", "simulate/fifo.py", "simulate/program.py",
            "simulate/triggers.py", "topology/model.py", "ahead.py"} <= nots, sorted(nots)


#: What a message said before it said what it should be (CLI.md "Errors", until
#: 2026-12-06): ``header_size is 64, must be 1024``, ``terminator size 5, must be 0``, the
#: expected value after ``not`` (``buffers lists 2 recv2 buffers, not 1``, ``buffers[1]
#: (role recv2) is in gw, not scratch``, ``peers[1].neigh is PEER_X, not PEER_LOCAL``), and
#: ``X V, the W is A`` (``sema_shift_offset 3, the entry's is 2``, ``data_type_sz 4,
#: sdma_data_type_size[BF16] is 2``, ``num_elem [1, 1, 1], piece 0 of 5 elements is (5, 1,
#: 1)``).  A ``must``/``should`` before the value is the form (``should run ids [1, 2],
#: not [1, 3]``), and a limit or a relation (``channel 3 needs semaphore 40, a core has
#: 32``, ``[0, 8), the var has 4 bytes``) is no found value.  Nor (until 2026-12-06 too)
#: ``X V is not W`` (``hier.legs[2].channel_base 0 is not 3``, ``legs[1].algorithm "RING"
#: is not "SINGLE_CYCLE_RING"``, ``alu_op "XOR" is not ADD, MAX or MIN``, ``num_elements 0
#: is not 1 or more``) - a description after ``is not`` (``rank 5 is not in the topology
#: table``, ``'x' is not an integer``) compares nothing - and the FIFO's, the programs',
#: the rank manifest's and the stale read's ``X V but W has A``, ``X V, W says A``, ``X V,
#: at most A``, ``X V in channel C's FIFO``, ``X V, trigger T is in subgraph S``, ``its view
#: would start at element V, not the start of a block``, ``the rank manifest says N records,
#: the file holds M`` and ``last written in trigger 1 ..., not in trigger 2``; nor (until
#: 2026-12-06 too) the programs' other ``X V but W has A`` (``spad_index 5 but spad.bin has 5
#: entries``, ``sdma_op 4 but its leg 2 has sdma_op 2``, ``W1 in_dtype 0x7 but the trigger's
#: data is 0x6``, ``remote bit 0 but the semaphore is on rank 2``), ``X V where W says A``
#: (``ring_step 0 where the ring schedule says 3``, ``step 0 where program order says 1``),
#: ``spad.bin says K = A, the rank manifest V``, the FIFO's ``the post_recv legs ... count N
#: bytes (E elements), its receive entries M`` and ``ring_send_complete is 1 but the entry
#: ...``, the manifest's ``algorithm "MESH" but the trigger has no mesh section`` and the
#: topology's ``topology file is for lnc_size 1 but --lnc is 2``.
FOUND_FIRST = (r"(^|\bis |\bsize |\} )\{\}, (must|should) be\b",
               r"(?<!should )(?<!must )\b(is|is in|lists|run ids) \{\}( bytes)?, not\b",
               r"\{\}, (the |sdma_|piece )[^:;]*?\b(is|has) (\(|\{\})",
               r"([\w\]}] |0x)\{\}(\{\})?( \([^()]*\))? is not (\{\}|-?\d|null\b|one of\b|ADD\b|0x|"
               r"scratch\b|recv2\b|logical_core\b|even\b|an even number\b)",
               r"\{\} but the paired receive entry\b|, \{\} says \{\}|\{\}, at most \{\}",
               r"\{\} in channel \{\}'s FIFO|\{\}, trigger \{\} is in subgraph\b|"
               r"\{\} in op \{\}'s entries",
               r"\bat element \{\}, not the start\b|\bsays \{\} records, the file holds\b|"
               r"\blast written in trigger \{\} by \{\}, not in\b",
               r"\{\}( bytes)? but (the|its|spad\.bin|trigger|entry|elements|each)\b|"
               r"\{\} where (the|program order)\b|\bdtype \{\}, FORMATS\b",
               r"\bsays \{\} = \{\}, the rank manifest\b|"
               r"\bcount \{\} bytes \(\{\} elements\), its\b|"
               r"\balgorithm (\{\}|\"HIER\") but the trigger has\b|\bis for lnc_size \{\} but\b")


def _found_first(root):
    import ast
    import re

    hits = []
    for path in sorted(root.rglob("*.py")):
        for line, t in _templates(ast.parse(path.read_text())):
            if any(re.search(p, t) for p in FOUND_FIRST):
                hits.append(f"{path.relative_to(root).as_posix()}:{line}: {t!r}")
    return hits


def test_no_message_says_what_it_found_first():
    """CLI.md "Errors": ``X must be A, not Y`` / ``X should be A, not Y``, what the input
    holds last: never ``X is Y, must be A``, ``X lists Y, not A`` nor ``X Y, the W is A``
    (:data:`FOUND_FIRST`; the NEFF reader's ``header_size``, ``length_dw`` and ``lnc_size``,
    ``simulate``'s FIFO fields and its manifest checks said so until 2026-12-06)."""
    from pathlib import Path

    import nrtrewrite
    assert _found_first(Path(nrtrewrite.__file__).parent) == []


def test_found_first_scan_finds_the_old_shapes(tmp_path):
    """The scan is not vacuous: the shapes the messages had until 2026-12-06, each as its
    module wrote it, are found, and their rewordings are not."""
    old = {
        "neff/container.py": 'raise E(f"header_size is {h}, must be {H}")',
        "neff/reader.py": 'raise E(f"length_dw is {w[1]}, must be {L}")',
        "simulate/fifo.py": ('a = f"{fld} is {int(v)}, must be 0"\n'
                             'b = f"terminator size {int(s)}, must be 0"\n'
                             'c = f"terminator {fld} {int(r)}, must be -1"\n'
                             'd = f"{int(v):#x}, must be 0"\n'
                             'e = f"sema_shift_offset {v}, the entry\'s is {w}"\n'
                             'f = f"data_type_sz {v}, sdma_data_type_size[{d}] is {w}"\n'
                             'g = f"dst_addr {a:#x} but the paired receive entry (rank {r}) '
                             'has dev_addr {b:#x}"\n'
                             'h = f"basic_block_id {v}, trigger {t} is in subgraph {s}"\n'
                             'i = f"enc_channel {v} in channel {ch}\'s FIFO"\n'
                             'j = f"op {k} has {n} entries before its terminator, {cnt} says '
                             '{m}"\n'
                             'k = f"net_op_idx {v} in op {k}\'s entries"\n'
                             'l = (f"the post_recv legs of entry {e} on channel {c} count "\n'
                             '     f"{n} bytes ({int(s)} elements), its receive entries {g}")\n'
                             'm = (f"ring_send_complete is {int(v)} but the entry "\n'
                             '     f"{\'sends\' if s else \'does not send\'} over the network")\n'
                             'n = (f"op {k}: {fld} {int(v)} but the transmit FIFO has no "\n'
                             '     "entries")\n'),
        "simulate/program.py": ('a = f"{p}.num_elem {v}, piece {k} of {e} elements is '
                                '({a}, {b}, 1)"\n'
                                'b = f"W3 num_sources {v}, at most {M} (FORMATS.md section 6)"\n'
                                'c = f"its view would start at element {o}, not the start of a '
                                'block of the trigger"\n'
                                'd = f"spad_index {spi[i]} but spad.bin has {ne} entries"\n'
                                'e = f"step {step[i]} where program order says {w[i]} (legs)"\n'
                                'f = f"ring_step {g[b]} where the ring schedule says {w[b]}: x"\n'
                                'g = f"sdma_op {mc[i] & 0xF} but its leg {l[i]} has sdma_op {s}"\n'
                                'h = f"n_tiles {n[b]} but its BDs form {p[b]} tiles"\n'
                                'i = f"W1 in_dtype {d[i]:#x} but the trigger\'s data is {t:#x}"\n'
                                'j = f"num_elements {c[i]} but trigger {t[i]} has {s} elements"\n'
                                'k = f"channel_list {w[b]:#x} but the entry has legs on {g:#x}"\n'
                                'l = f"spad.bin says {key} = {val!r}, the rank manifest {m!r}"\n'
                                'm = f"remote bit {r[i]} but the semaphore is on rank {t[i]}"\n'
                                'n = f"reporter is {int(r)} but the reporter of trigger {t}"\n'
                                'o = f"num_elements {n} x {d} bytes but each source stream"\n'
                                'p = f"half {h[i]} but elements [{a}, {b}) " + w\n'
                                'q = f"W1 accumulate dtype {a[i]:#x}, FORMATS §6 accumulates in "\n'),
        "simulate/layout.py": ('a = f"rank {r}: tpb {t} is not logical_core {c} x lnc_size {l} '
                               '= {w}, the first TPB"\n'
                               'b = f"topology.{key} {json_kind(g)} is not {json_kind(w)}, '
                               '{p}\'s"\n'),
        "simulate/artifacts.py": 'a = f"the rank manifest says {n} records, the file holds {m}"',
        "simulate/engine.py": ('a = f"{me} {verb} {where}, last written in trigger {t} by {o}, '
                               'not in trigger {u}"'),
        "neff/assembler.py": ('a = f"opcode 0x{o:02X} is not 0xC7, 0xC8 or 0xD9 (a collective\'s '
                              'pseudo trigger)"'),
        "simulate/triggers.py": ('a = f"legs lists {counted(n, \'leg\')}, not {w} ({why})"\n'
                                 'b = f"buffers[{b}] (role {r}) is in {g}, not {w} ({why})"\n'
                                 'c = f"{key}[{b}] (role gw) is {g}, not {w} ({why})"\n'
                                 'd = f"hier.legs[{i}].plans[{j}].channels run ids {g}, '
                                 'not {w}"\n'
                                 'e = f"hier.legs[{i}].channel_base {base} is not {start}: '
                                 '{after}"\n'
                                 'f = f"legs[{i}].{key} {json_kind(h)} is not {json_kind(w)}'
                                 '{src} ({R})"\n'
                                 'g = f"{op} alu_op {json_kind(a)} is not {\', \'.join(m)} or '
                                 '{l}"\n'
                                 'h = f"num_elements {n} is not 1 or more"\n'
                                 'i = f"{at}kangaring[{k}].units[{u}] {shown(r)}{also} is not '
                                 '{shown(w)}, the unit"\n'
                                 'j = f"buffers[{b}].offset {o} (role {r}) is not {s}, one space '
                                 'of {g}"\n'
                                 'k = t.bad(f"algorithm {json_kind(a)} but the trigger has "\n'
                                 '          f"no {k} section")\n'
                                 'l = t.bad("algorithm \\"HIER\\" but the trigger has no hier "\n'
                                 '          "section")\n'
                                 'm = E(f"algorithm {json_kind(a)} but the trigger has {x} {k} '
                                 'section")\n'),
        "topology/model.py": ('raise E(f"topology file is for lnc_size {f} but {of} {n}", '
                              'field="lnc_size")'),
        "compose/kangaring.py": ('raise E(f"peers[{i}].neigh is {n}, not PEER_RMTV2 or '
                                 'PEER_LOCAL")'),
        "neff/instructions.py": 'raise E(f"instruction word is {len(w)} bytes, not {S}")',
    }
    new = ('a = f"header_size must be {H}, not {h}"\n'
           'b = f"{fld} should be 0, not {int(v)}"\n'
           'c = f"sema_shift_offset should be {w}, the entry\'s, not {v}"\n'
           'd = f"hier.legs[{i}].plans[{j}].channels should run ids {w}, not {g}"\n'
           'e = f"buffers should list {counted(w, \'buffer\')}, not {g}"\n'
           'f = f"out of semaphores: channel {c} needs semaphore {s}, a core has {n}"\n'
           'g = f"bytes [{a}, {b}) of partitions [{c}, {d}), the var has {n} bytes"\n'
           'h = f"hier.legs[{i}].channel_base should be {start}, not {base}: {after}"\n'
           'i = f"num_elements should be 1 or more, not {n}"\n'
           'j = f"rank {r} is not in the topology table"\n'
           'k = f"{shown} is not {what}{why}"\n'
           'l = f"dst_addr should be {b:#x}, the dev_addr of the paired receive entry (rank '
           '{r}), not {a:#x}"\n'
           'm = f"W3 num_sources should be at most {M}, not {v}"\n'
           'n = f"{k} is not CCE-reducible"\n'
           'o = f"the file should hold {n} records, the rank manifest\'s count, not {m}"\n'
           'p = f"spad_index should be below {ne}, the entries spad.bin has, not {s}"\n'
           'q = f"ring_step should be {w}, the ring schedule\'s, not {g}: {lf} of elements"\n'
           'r = f"remote bit should be {int(w)}, not {r}: the semaphore is on rank {t}"\n'
           's = f"the rank manifest\'s {key} should be {v!r}, what spad.bin says, not {m!r}"\n'
           't = (f"the post_recv legs of entry {e} should count {g} bytes, what its receive "\n'
           '     f"entries carry, not {n} bytes ({s} elements)")\n'
           'u = f"ring_send_complete should be {w}, not {v}: the entry sends over the network"\n'
           'v = f"the trigger has no {k} section, which its algorithm {a} needs"\n'
           'w = f"the trigger has {x} {k} section, which its algorithm {a} has no use for"\n'
           'x = f"the topology file\'s lnc_size should be {n} ({of} {n}), not {f}"\n'
           'y = f"{leaf} writes rank {r} but signals rank {s}"\n'
           'z = (f"num_elements x {d} bytes should be the {b} bytes each source stream carries, "\n'
           '     f"not {n} x {d}")\n')
    for rel, text in old.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text + "\n")
    (tmp_path / "new.py").write_text(new)
    hits = _found_first(tmp_path)
    assert sorted({h.split(":")[0] for h in hits}) == sorted(old), hits
    assert len(hits) == 54 and not any(h.startswith("new.py") for h in hits), hits


def test_the_json_forms_cli_md_states(tmp_path):
    """docs/CLI.md's statements about the ``--json`` documents' forms, written from the code
    (review 49f: true but unstated): the indentation of each command's document, ``explain``'s
    ``topology.source`` of the default topology, an RDH rank's ``core`` an index where
    ``folded`` and ``folded_into`` are ranks, ``simulate``'s ``detail`` empty on a match, and
    ``diff``'s header values in hex where ``inspect`` gives a uuid in 8-4-4-4-12."""
    explain = _run("explain", FIX / "ar2.neff", "--json").stdout
    assert explain.startswith('{\n  "model"') and explain.endswith("}\n")
    assert json.loads(explain)["topology"]["source"] == "default (trn2)"
    inspect = _run("inspect", FIX / "ar2.neff", "--json").stdout
    assert inspect.startswith('{\n  "format"')
    uuid = json.loads(inspect)["header"]["uuid"]
    assert len(uuid) == 36 and uuid.count("-") == 4
    out = tmp_path / "o"
    assert _run("lower", "-q", FIX / "ar2.neff", "-o", out).exit_code == 0
    sim = _run("simulate", out, "--json").stdout
    assert sim.startswith('{\n "format"')
    assert json.loads(sim)["triggers"][0]["detail"] == ""
    sched = _run("schedule", FIX / "ar2.neff", "--rank", "0", "--json").stdout
    assert sched.startswith('{\n "rank"')
    # group 10..15 folds 11 into 10 and 13 into 12 (ranks); the core ranks 10, 12, 14, 15 are
    # cores 0..3 (docs/CLI.md "explain": group 10..15's rank 15 is core 3)
    rdh = json.loads(_run("explain", "--op", "allreduce", "--bytes", "4MiB", "--group", "10-15",
                          "--lnc", "1", "--rank", "15", "--json").stdout)["triggers"][0]["rdh"]
    assert rdh["folded"] == [[11, 10], [13, 12]] and rdh["rank"]["core"] == 3
    # diff: B's uuid with the low bit of its first byte flipped: 32 hex digits, no dashes
    b = tmp_path / "b"
    shutil.copytree(out, b)
    from nrtrewrite.neff.container import HEADER_FIELDS
    neff = b / "ar2.neff"
    data = bytearray(neff.read_bytes())
    data[HEADER_FIELDS["uuid"][0]] ^= 1
    neff.write_bytes(bytes(data))
    diff = _run("diff", out, b, "--json").stdout
    d, = json.loads(diff)["differences"]
    hexa = uuid.replace("-", "")  # (the 16 bytes in order, as inspect's form groups them)
    hexb = f"{int(hexa[:2], 16) ^ 1:02x}" + hexa[2:]
    assert (d["field"], d["a"], d["b"]) == ("header.uuid", hexa, hexb)
    assert diff.startswith('{\n "differences": [\n  {"index": 0, ')


def _fenced_python(doc: str, heading: str) -> str:
    """The first ```python block after ``heading`` in docs/``doc``."""
    text = (ROOT / "docs" / doc).read_text().split(f"\n{heading}\n", 1)[1]
    return text.split("```python\n", 1)[1].split("\n```", 1)[0]


def test_selection_md_api_snippet_runs_as_written(monkeypatch):
    """docs/SELECTION.md §9: before, the snippet used ``trigger``, ``topo`` and
    ``EncAlgType`` without making or importing them (a NameError).  It runs from the
    repository's root, in a namespace of its own."""
    monkeypatch.chdir(ROOT)
    namespace: dict = {}
    exec(compile(_fenced_python("SELECTION.md", "## 9. API"), "SELECTION.md §9", "exec"),
         namespace)
    assert namespace["sel"].override is not None  # (it ran to its end: the ^mesh selection)


def _ci_recipe() -> str:
    """docs/CLI.md "diff"'s CI recipe: the ```sh block that compares a golden."""
    text = (ROOT / "docs" / "CLI.md").read_text()
    block = next(b for b in text.split("```sh\n")[1:] if "fixtures/golden/" in b.split("```")[0])
    return block.split("```")[0]


def test_the_ci_recipe_runs_again_as_written_and_gates_with_strict(tmp_path):
    """Review 55h: CLI.md's golden recipe could not be run twice (fixed /tmp paths: `lower`
    refused the existing -o, `exists; pass --force`, and `tar xzf` over an older
    extraction kept its stale files), and used `diff` without `--strict`, under which a
    manifest in another layout or a stale checksum is only a note.  Run twice as written
    (``nrtrewrite`` this checkout's), each run exits 0 saying ``identical``."""
    import subprocess
    import sys
    recipe = _ci_recipe()
    assert "diff --strict" in recipe
    shim = tmp_path / "bin" / "nrtrewrite"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m nrtrewrite "$@"\n')
    shim.chmod(0o755)
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}",
           "TMPDIR": str(tmp_path / "tmp"), "PYTHONPATH": str(ROOT)}
    for _ in range(2):
        proc = subprocess.run(["bash", "-e", "-c", recipe], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert proc.stdout.endswith("identical\n"), proc.stdout[-500:]
        # review 55r: each run's `mktemp -d` folder was left behind
        assert list((tmp_path / "tmp").iterdir()) == []


def test_diff_help_gives_its_exit_statuses_and_names_a_the_reference():
    """Review 55h: ``diff --help`` said neither what its exit statuses mean (CLI.md: 0
    identical, 1 different, 2 an error) nor that A is the reference."""
    res = _run("diff", "--help")
    assert res.exit_code == 0
    text = " ".join(res.stdout.split())
    assert "Exit status: 0 identical, 1 the outputs differ, 2 an error" in text
    assert "A is the reference" in text
    assert "--strict" in text


def test_diff_help_and_readme_say_what_is_a_note_without_strict_as_cli_md():
    """Review 55r: ``diff --help`` and the README's row said that without --strict "a
    manifest's layout" is a note; CLI.md: the top manifest's is, a rank manifest's is
    nothing."""
    res = _run("diff", "--help")
    assert res.exit_code == 0
    text = " ".join(res.stdout.split())
    assert ("Without --strict the top manifest's layout, a NEFF JSON member's and a checksum "
            "that differs where the file it covers compares identical are notes on stderr, "
            "and a rank manifest's layout is nothing: no difference") in text
    row = next(line for line in (ROOT / "README.md").read_text().splitlines()
               if line.startswith("| `nrtrewrite diff "))
    assert ("without it the layout of the top manifest or of a NEFF JSON member and a stale "
            "checksum are notes, a rank manifest's layout nothing |") in row


def test_diff_help_gives_strict_its_ignore_exception_as_cli_md():
    """Fixer 58d (the fifty-seventh "Left"): ``diff --help``'s ``--strict`` said "every file
    holds the same bytes" without the exception CLI.md gives it: the top manifest's values
    ``--ignore`` leaves out (``--strict --ignore tool_version``, CI across versions)."""
    cli_md = " ".join((ROOT / "docs" / "CLI.md").read_text().split())
    assert ("holds the same bytes (but for the top manifest's values `--ignore` leaves out)"
            in cli_md)
    res = _run("diff", "--help")
    assert res.exit_code == 0
    text = " ".join(res.stdout.split())
    assert ("Differ unless every file holds the same bytes (CI), but for the top manifest's "
            "values --ignore leaves out") in text
