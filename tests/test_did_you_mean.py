"""docs/CLI.md "Errors": an unknown name is refused with the names allowed and, when one of
them is close (``difflib.get_close_matches``: a ratio 2 x M / T of at least 0.6, M the
characters matched, T the two names' lengths together), that one first, in one form for
every such refusal: ``unknown key "node" (did you mean "nodes"? allowed: ...)``.  Nothing is
added when none is close.  Until 2026-12-06 none of them suggested a name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from nrtrewrite.cli import main
from nrtrewrite.errors import MAX_SUGGEST_CHARS, ValidationError, did_you_mean, json_text
from nrtrewrite.neff.assembler import assemble_spec, parse_spec_text
from nrtrewrite.select import parse_algo_override, parse_op_name
from nrtrewrite.topology import load_topology

ROOT = Path(__file__).resolve().parent.parent


def error_line(*args: str) -> str:
    res = CliRunner().invoke(main, list(args), env={}, prog_name="nrtrewrite")
    assert res.exit_code == 2, (res.exit_code, res.output)
    line, = res.stderr.splitlines()
    return line


def test_the_helper_gives_one_form_or_the_list_alone():
    # "node" / "nodes": 4 matched of 4 + 5, 0.89
    assert did_you_mean("node", ["format", "nodes"], "allowed: format, nodes", json_text) == (
        ' (did you mean "nodes"? allowed: format, nodes)')
    # "xyzzy" matches no letter of "ring" nor "mesh"
    assert did_you_mean("xyzzy", ["ring", "mesh"], "known: mesh, ring") == " (known: mesh, ring)"
    assert did_you_mean("rign", ["ring", "mesh"]) == " (did you mean 'ring'?)"
    assert did_you_mean("xyzzy", ["ring"]) == ""
    # a name not a string (a YAML key 3), or too long to be a typo, gets the list only
    assert did_you_mean(3, ["3x"], "l") == " (l)"
    assert did_you_mean("ring" * MAX_SUGGEST_CHARS, ["ring"], "l") == " (l)"


@pytest.mark.parametrize("doc, why", [
    ({"platform": "trn3"},
     'field platform: unknown platform "trn3" (did you mean "trn2"? one of trn1, trn2; leave '
     'it out for a custom one, or name it beside every platform field; missing: lnc_sizes, '
     'devices_per_node, device, links, device_cycles, routing_ids, kangaring, mesh, '
     'mesh_sub_type, hw_generation)'),
    ({"platform": "trn2", "mesh_sub_type": "MESH_TRN"},
     'field mesh_sub_type: unknown mesh_sub_type "MESH_TRN" (did you mean "MESH_TRN2"? one of '
     'FULL_MESH, GROUPED_MESH, MESH_TRN2, MESH_SWITCH)'),
    ({"platform": "trn2", "device": {"dis": 2}},
     'field device: unknown key "dis" (did you mean "dies"? allowed: dies, sengines_per_die, '
     'tpbs_per_sengine, c2c_ports)'),
])
def test_a_topology_files_unknown_name(tmp_path, doc, why):
    """"trn3" is as close to "trn1" as to "trn2" (3 of 4 + 4, 0.75): difflib takes the
    greater name of a tie, "trn2"."""
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValidationError) as exc:
        load_topology(str(path), world=(0, 1), lnc_size=2)
    assert str(exc.value) == f"{path}: {why}"


def test_a_mistyped_ignored_key_is_suggested_as_itself(tmp_path):
    """A one-letter typo of a key our outputs write (ignored: TOPOLOGY.md §2) was steered to
    an allowed key that changes the topology (``ranks_per_nod`` -> ``devices_per_node``)."""
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"platform": "trn2", "ranks_per_nod": 1}))
    with pytest.raises(ValidationError) as exc:
        load_topology(str(path), world=(0, 1), lnc_size=2)
    assert 'unknown key "ranks_per_nod" (did you mean "ranks_per_node"? allowed: ' in str(
        exc.value)


@pytest.mark.parametrize("spec, why", [
    ("trn3", "topology 'trn3' is neither a preset (did you mean 'trn2'? trn1, trn2, "
             "trn1:nodes=N, trn2:nodes=N) nor a readable file (no such file)"),
    # the options kept
    ("trn3:nodes=2", "topology 'trn3:nodes=2' is neither a preset (did you mean "
                     "'trn2:nodes=2'? trn1, trn2, trn1:nodes=N, trn2:nodes=N) nor a readable "
                     "file (no such file)"),
    # the name compared alone (the options made any name close: foo:nodes=2 -> trn2:nodes=2),
    # and options that are no preset's not carried into the suggestion
    ("foo:nodes=2", "topology 'foo:nodes=2' is neither a preset (trn1, trn2, trn1:nodes=N, "
                    "trn2:nodes=N) nor a readable file (no such file)"),
    ("trn3:", "topology 'trn3:' is neither a preset (did you mean 'trn2'? trn1, trn2, "
              "trn1:nodes=N, trn2:nodes=N) nor a readable file (no such file)"),
    ("trn3:nodes=2:x", "topology 'trn3:nodes=2:x' is neither a preset (did you mean 'trn2'? "
                       "trn1, trn2, trn1:nodes=N, trn2:nodes=N) nor a readable file (no such "
                       "file)"),
    # a path (a dot or a slash in its name) is no mistyped preset
    ("tr\\n2", "topology 'tr\\\\n2' is neither a preset (trn1, trn2, trn1:nodes=N, "
               "trn2:nodes=N) nor a readable file (no such file)"),
    ("trn2.json", "topology 'trn2.json' is neither a preset (trn1, trn2, trn1:nodes=N, "
                  "trn2:nodes=N) nor a readable file (no such file)"),
    ("trn2:node=2", "bad topology option 'node=2' in 'trn2:node=2' (did you mean 'nodes=2'? "
                    "presets take nodes=N, e.g. trn2:nodes=2)"),
    # the key compared: "cores" / "nodes", 3 of 5 + 5, 0.6, is close; "gpus" is not
    ("trn2:cores=4", "bad topology option 'cores=4' in 'trn2:cores=4' (did you mean 'nodes=4'? "
                     "presets take nodes=N, e.g. trn2:nodes=2)"),
    ("trn2:gpus=4", "bad topology option 'gpus=4' in 'trn2:gpus=4' (presets take nodes=N, "
                    "e.g. trn2:nodes=2)"),
    ("trn2:nodes=0", "bad topology option 'nodes=0' in 'trn2:nodes=0' (presets take nodes=N, "
                     "e.g. trn2:nodes=2)"),
    # in another case: the name equal but for case suggested first
    ("TRN2", "topology 'TRN2' is neither a preset (did you mean 'trn2'? trn1, trn2, "
             "trn1:nodes=N, trn2:nodes=N) nor a readable file (no such file)"),
    ("Trn1:nodes=2", "topology 'Trn1:nodes=2' is neither a preset (did you mean "
                     "'trn1:nodes=2'? trn1, trn2, trn1:nodes=N, trn2:nodes=N) nor a readable "
                     "file (no such file)"),
    ("trn2:NODES=2", "bad topology option 'NODES=2' in 'trn2:NODES=2' (did you mean "
                     "'nodes=2'? presets take nodes=N, e.g. trn2:nodes=2)"),
])
def test_a_topology_option_s_unknown_name(tmp_path, monkeypatch, spec, why):
    monkeypatch.chdir(tmp_path)
    assert error_line("explain", "--op", "allreduce", "--bytes", "1MiB", "--ranks", "8",
                      "--topology", spec) == f"nrtrewrite: error: field topology: {why}"


def test_algo_and_op_names():
    with pytest.raises(ValidationError) as exc:
        parse_algo_override("rign")
    assert "unknown algorithm 'rign' (did you mean 'ring'? known: bw_opt_mesh, " in str(exc.value)
    with pytest.raises(ValidationError) as exc:
        parse_algo_override("xyzzy")
    assert "unknown algorithm 'xyzzy' (known: bw_opt_mesh, " in str(exc.value)
    # a clause's target: the collectives and the HIER legs, its alg_ prefix dropped
    with pytest.raises(ValidationError) as exc:
        parse_algo_override("alg_inter_alr:ring")
    assert str(exc.value) == (
        "field --algo: --algo 'alg_inter_alr:ring': 'alg_inter_alr' is neither a collective "
        "nor a HIER leg (did you mean 'inter_allr'? collectives: allreduce, allgather, "
        "reduce_scatter, alltoall, broadcast, reduce; HIER legs: intra_allg, intra_redsct, "
        "inter_allr, inter_allg, inter_redsct)")
    with pytest.raises(ValidationError) as exc:
        parse_op_name("all-gathr", field="--op")
    assert str(exc.value) == (
        "field --op: unknown collective 'all-gathr' (did you mean 'all_gather'? allreduce, "
        "allgather, reduce_scatter, alltoall, broadcast, reduce)")
    assert error_line("explain", "--op", "allreduce", "--bytes", "1MiB", "--ranks", "8",
                      "--dtype", "fp8e4").startswith(
        "nrtrewrite: error: field --dtype: unknown dtype 'fp8e4' (did you mean 'fp8_e4'? uint64, ")


_TARGETS = ("collectives: allreduce, allgather, reduce_scatter, alltoall, broadcast, reduce; "
            "HIER legs: intra_allg, intra_redsct, inter_allr, inter_allg, inter_redsct")


@pytest.mark.parametrize("text, head, close", [
    # a leg's typo: 'inter_allr' (10 of 10 + 11 matched, 0.95)
    ("inter_allrr:ring", "inter_allrr", "inter_allr"),
    ("alg_inter_allrr:^ring", "alg_inter_allrr", "inter_allr"),
    ("intra_redsc:mesh", "intra_redsc", "intra_redsct"),
    # a collective's typo: 'allreduce' (9 of 9 + 10, 0.95), a collective the list now names
    ("allreducee:ring", "allreducee", "allreduce"),
    ("All-Reducee:mesh,ring", "All-Reducee", "all_reduce"),
    # none close: the two lists alone
    ("xyzzy:ring", "xyzzy", None),
])
def test_an_algo_clause_target_lists_both_kinds_it_may_suggest(text, head, close):
    """Bug: an --algo clause's unknown target listed only the HIER legs while its suggestion
    came from the collectives too: ``'allreducee:ring'`` suggested 'allreduce' beside a list
    of legs.  The list names both kinds now (the collectives as ``--op`` lists them), for
    every form of the clause (``alg_`` prefix, ``^``, a list, any case, ``-``)."""
    hint = f"did you mean {close!r}? " if close else ""
    with pytest.raises(ValidationError) as exc:
        parse_algo_override(text)
    assert str(exc.value) == (f"field --algo: --algo {text!r}: {head!r} is neither a "
                              f"collective nor a HIER leg ({hint}{_TARGETS})")


@pytest.mark.parametrize("replace, why", [
    (("  name: ar2", "  nme: ar2"),
     "field header: unknown key 'nme' (did you mean 'name'? allowed: pkg_version, name, "),
    (("dtype: bf16", "dtype: bf61"),
     "field subgraphs[0].engines.sp[1].all_reduce.dtype: unknown dtype 'bf61' (did you mean "
     "'bf16'? one of uint64, "),
    (("op: add", "op: ad"),
     "field subgraphs[0].engines.sp[1].all_reduce.op: unknown op 'ad' (did you mean 'add'? "
     "one of add, max, min)"),
    (("- all_reduce:", "- all_reduc:"),
     "field subgraphs[0].engines.sp[1]: unknown instruction 'all_reduc' (did you mean "
     "'all_reduce'? one of nop, opaque, raw, repeat, all_reduce, all_gather, reduce_scatter)"),
])
def test_an_assemble_specs_unknown_name(replace, why):
    text = (ROOT / "fixtures" / "ar2.yaml").read_text()
    assert replace[0] in text
    with pytest.raises(ValidationError) as exc:
        assemble_spec(parse_spec_text(text.replace(replace[0], replace[1], 1)))
    assert str(exc.value).startswith(f"<spec>: {why}")


def test_a_models_unknown_var_type():
    """The reader's (a model's def.json), here of an assembled spec read back."""
    text = (ROOT / "fixtures" / "ar2.yaml").read_text().replace("type: input", "type: inpt", 1)
    with pytest.raises(ValidationError) as exc:
        assemble_spec(parse_spec_text(text))
    assert str(exc.value).endswith(
        'field var[0].type: unknown var type "inpt" (did you mean "input"? one of input, '
        'output, tmp-buf, state-buffer)')


def test_diff_ignore_suggests_the_key_path():
    res = CliRunner().invoke(main, ["diff", "--ignore", "inpt.name", str(ROOT / "fixtures"),
                                    str(ROOT / "fixtures")], env={}, prog_name="nrtrewrite")
    assert res.exit_code == 2
    assert ("'inpt.name' is not a key path of the top-level manifest.json that may be ignored "
            "(did you mean 'input.name'? its keys: tool_version, ") in res.stderr


@pytest.mark.parametrize("path, says", [
    # the first key compared alone: a shared rest made any first key close
    ("x.name", "may be ignored (its keys: "),
    ("q.options.algo", "may be ignored (its keys: "),
    # a key ignored whole only is no suggestion with a rest (it would be refused in turn)
    ("wrld.x", "may be ignored (its keys: "),
    ("wrld", "may be ignored (did you mean 'world'? its keys: "),
    ("topolgy.nodes", "may be ignored (did you mean 'topology.nodes'? its keys: "),
])
def test_diff_ignore_suggests_by_the_first_key_alone(path, says):
    res = CliRunner().invoke(main, ["diff", "--ignore", path, str(ROOT / "fixtures"),
                                    str(ROOT / "fixtures")], env={}, prog_name="nrtrewrite")
    assert res.exit_code == 2 and says in res.stderr


# -- a name that differs only in case (2026-12-06) -------------------------------------------

def test_a_name_differing_only_in_case_is_suggested_first():
    """difflib compares characters as they are: "NODES" / "nodes" match no character (ratio
    0), so until 2026-12-06 nothing was suggested; the name equal but for case now comes
    first, also where difflib prefers another ("RING" / "RINGS": 4 of 4 + 5, 0.89)."""
    assert did_you_mean("NODES", ["format", "nodes"], "allowed: format, nodes", json_text) == (
        ' (did you mean "nodes"? allowed: format, nodes)')
    assert did_you_mean("RING", ["RINGS", "ring"]) == " (did you mean 'ring'?)"
    # of two names equal but for case, difflib's closer: "NoDES" / "NODES" match N, D, E, S
    # (8 / 10), "NoDES" / "nodes" only o (2 / 10)
    assert did_you_mean("NoDES", ["nodes", "NODES"]) == " (did you mean 'NODES'?)"
    # only the names given: one the caller left out is never suggested, whatever its case
    assert did_you_mean("WORLD", ["input", "options"], "l") == " (l)"


@pytest.mark.parametrize("doc, why", [
    ({"platform": "trn2", "NODES": 2}, 'unknown key "NODES" (did you mean "nodes"? allowed: '),
    ({"platform": "trn2", "device": {"DIES": 2}},
     'field device: unknown key "DIES" (did you mean "dies"? allowed: '),
    ({"platform": "trn2", "mesh_sub_type": "mesh_trn2"},
     'field mesh_sub_type: unknown mesh_sub_type "mesh_trn2" (did you mean "MESH_TRN2"? '),
    ({"platform": "TRN2"}, 'field platform: unknown platform "TRN2" (did you mean "trn2"? '),
])
def test_a_topology_files_name_in_another_case(tmp_path, doc, why):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValidationError) as exc:
        load_topology(str(path), world=(0, 1), lnc_size=2)
    assert str(exc.value).startswith(f"{path}: {why}")


def test_other_names_in_another_case():
    """An assemble spec's dtype, a dump file name; and names accepted elsewhere but not
    there stay unsuggested: a bare ``OPAQUE`` (an instruction only as a mapping's key: the
    one bare instruction is nop), ``diff --ignore WORLD.x`` (world is ignored whole only)."""
    from nrtrewrite.artifacts import open_records
    from nrtrewrite.errors import OutputError
    text = (ROOT / "fixtures" / "ar2.yaml").read_text()
    with pytest.raises(ValidationError) as exc:
        assemble_spec(parse_spec_text(text.replace("dtype: bf16", "dtype: BF16", 1)))
    assert "unknown dtype 'BF16' (did you mean 'bf16'? one of " in str(exc.value)
    with pytest.raises(OutputError) as exc:
        open_records("/nonexistent/CCE.BIN")
    assert "not an artifact file nrtrewrite writes (did you mean cce.bin? " in str(exc.value)
    with pytest.raises(ValidationError) as exc:
        assemble_spec(parse_spec_text(text.replace("- nop\n", "- OPAQUE\n", 1)))
    assert "or 'nop', not 'OPAQUE'" in str(exc.value) and "did you mean" not in str(exc.value)
    with pytest.raises(ValidationError) as exc:
        assemble_spec(parse_spec_text(text.replace("- nop\n", "- NOP\n", 1)))
    assert str(exc.value).endswith("or 'nop', not 'NOP' (did you mean 'nop'?)")
    for path, says in (("WORLD.x", "may be ignored (its keys: "),
                       ("WORLD", "may be ignored (did you mean 'world'? its keys: "),
                       ("INPUT.name", "may be ignored (did you mean 'input.name'? its keys: ")):
        res = CliRunner().invoke(main, ["diff", "--ignore", path, str(ROOT / "fixtures"),
                                        str(ROOT / "fixtures")], env={}, prog_name="nrtrewrite")
        assert res.exit_code == 2 and says in res.stderr, (path, res.stderr)
