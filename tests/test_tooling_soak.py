"""fuzz/soak_models.py's options: one logged model replayed alone (``--replay``), the log
beside the script wherever it is run from, counts and times that are not ones refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "fuzz" / "soak_models.py"
sys.path.insert(0, str(ROOT / "fuzz"))

import soak_models  # noqa: E402


def test_the_default_log_is_beside_the_script():
    """Before, ``fuzz/soak-failures.jsonl`` relative to the current folder: run from
    elsewhere, the soak made ./fuzz/ there."""
    assert soak_models.parser().parse_args([]).log == ROOT / "fuzz" / "soak-failures.jsonl"


def test_replay_runs_the_logged_model_alone(tmp_path, monkeypatch, capsys):
    """A failure of ``--seed 2`` is logged with its model seed; ``--replay`` of that seed
    runs that model only (not the ones before it) and says why it failed."""
    import nrtrewrite.simulate as S

    real, simulated = S.simulate_output, []

    def broken_for_the_third(out, seed):
        simulated.append(seed)
        if len(simulated) == 3:
            raise RuntimeError("simulator bug")
        return real(out, seed=seed)

    monkeypatch.setattr(S, "simulate_output", broken_for_the_third)
    log = tmp_path / "f.jsonl"
    assert soak_models.main(["--count", "8", "--seed", "2", "--log", str(log)]) == 1
    [row] = [json.loads(line) for line in log.read_text().splitlines()]
    assert row["seed"] // 10**6 == 2 and row["two_node"] is False
    err = capsys.readouterr().err
    assert f"again alone: --replay {row['seed']}" in err

    def broken(out, seed):
        simulated.append(seed)
        raise RuntimeError("simulator bug")

    monkeypatch.setattr(S, "simulate_output", broken)
    simulated.clear()
    assert soak_models.main(["--replay", str(row["seed"]), "--log", str(log)]) == 1
    assert simulated == [row["seed"] % 97]  # one model simulated: the logged one
    out, err = capsys.readouterr()
    assert (row["algo"], row["host_cc"]) == (None, False)  # (the policy, as drawn)
    assert out == f"model {row['seed']}: FAILED (lower with the default options)\n"
    assert "RuntimeError: simulator bug" in err
    assert len(log.read_text().splitlines()) == 1  # a replay logs nothing


def test_replay_of_a_passing_model(tmp_path, capsys):
    # model 2000001 (the second of --seed 2): its verdict as run_one gives it
    r = soak_models.run_one(2_000_001, False, tmp_path)
    assert r["result"] in ("simulated", "refused")
    assert soak_models.main(["--replay", "2000001"]) == 0
    expected = ("model 2000001: simulated, every trigger matching" if r["result"] == "simulated"
                else f"model 2000001: refused: {r['line']}")
    assert capsys.readouterr().out == expected + "\n"


@pytest.mark.parametrize("args, says", [
    (["--count", "-1"], "argument --count: '-1': at least 1 model"),
    (["--count", "0"], "argument --count: '0': at least 1 model"),
    (["--seconds", "nan"], "argument --seconds: 'nan': a number of seconds greater than 0"),
    (["--seconds", "-1"], "argument --seconds: '-1': a number of seconds greater than 0"),
    (["--replay", "5", "--count", "2"], "--replay runs one model: not with --count or --seed"),
])
def test_bad_arguments_are_refused(tmp_path, args, says):
    res = subprocess.run([sys.executable, str(SCRIPT), *args, "--log", str(tmp_path / "f")],
                         capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.splitlines()[-1] == f"soak_models.py: error: {says}"
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------
# make soak's seed and status, the FAILED line's options (review 51d)

ONE_MODEL = {"header": {"pkg_version": 2, "name": "soak", "lnc_size": 1},
             "subgraphs": [{"name": "sg00",
                            "vars": [{"name": "in0", "type": "input", "size": 8},
                                     {"name": "out0", "type": "output", "size": 8}],
                            "replica_groups": [[0, 1]],
                            "engines": {"sp": [{"all_reduce": {
                                "dtype": "bf16", "src": "in0", "dst": "out0",
                                "num_elements": 4, "group": 0, "op": "add"}}]}}]}


@pytest.mark.parametrize("algo, host_cc, options", [
    (None, False, "lower with the default options"),
    (None, True, "lower with --host-cc"),
    ("ring", False, "lower with --algo ring"),
    ("allreduce:mesh;allgather:ring", True,
     "lower with --algo 'allreduce:mesh;allgather:ring' --host-cc"),
])
def test_a_failure_names_the_options_as_lower_takes_them(tmp_path, monkeypatch, capsys,
                                                         algo, host_cc, options):
    """Before, ``FAILED: seed S (--algo None)`` for the policy (``lower`` refuses ``--algo
    None``), no ``--host-cc``, and ``--replay`` said ``--host-cc False``."""
    import nrtrewrite.simulate as S

    def broken(out, seed):
        raise RuntimeError("simulator bug")

    monkeypatch.setattr(S, "simulate_output", broken)
    monkeypatch.setattr(soak_models, "random_model", lambda rng, two_node: (
        json.loads(json.dumps(ONE_MODEL)), algo, host_cc))
    log = tmp_path / "f.jsonl"
    assert soak_models.main(["--count", "1", "--seed", "5", "--log", str(log)]) == 1
    assert capsys.readouterr().err == (f"FAILED: seed 5000000 ({options}): see {log}; "
                                       "again alone: --replay 5000000\n")
    assert soak_models.main(["--replay", "5000000"]) == 1
    assert capsys.readouterr().out == f"model 5000000: FAILED ({options})\n"


def _make(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=60, env={**os.environ, **env})


def test_make_soak_passes_soak_seed_and_by_default_the_clocks_seconds():
    """Before, the recipe passed no ``--seed``: every ``make soak`` drew the models of seed
    0 again.  ``-n`` prints the recipe without running it."""
    res = _make("-n", "soak", "SOAK_SEED=7", "SOAK_SECONDS=20", f"PY={sys.executable}")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1] == (f"{sys.executable} fuzz/soak_models.py --seconds 20 "
                                           "--seed 7")
    before = int(time.time())
    res = _make("-n", "soak", f"PY={sys.executable}")
    after = int(time.time())
    words = res.stdout.splitlines()[-1].split()
    assert words[-2] == "--seed" and before <= int(words[-1]) <= after


def test_make_soak_exits_with_the_status_make_help_says(tmp_path):
    """Before, ``make help`` said the soak exits 1 on failures: make exits 2 for a recipe
    that failed (the script's 1).  A stand-in python fails as a failing soak does."""
    py = tmp_path / "python"
    py.write_text('#!/bin/sh\ncase "$1" in -c) exit 0;; *) echo "FAILED: seed 1"; exit 1;; '
                  'esac\n')
    py.chmod(0o755)
    res = _make("soak", f"PY={py}", "SOAK_SEED=1")
    assert res.returncode == 2 and "FAILED: seed 1" in res.stdout
    text = " ".join(_make("help").stdout.split("soak:", 1)[1].split("clean:")[0].split())
    assert "make exits 2 (the script's status 1" in text
    assert "SOAK_SEED" in text and "exit 1" not in text


@pytest.mark.parametrize("shell_algo", ["hier", "ring", "bogus"])
def test_a_model_drawn_with_no_algo_lowers_with_the_policy_whatever_the_shell_says(
        tmp_path, monkeypatch, capsys, shell_algo):
    """Before, ``load_and_plan(algo=None)`` read the shell's ``NRTREWRITE_ALGO``: under
    ``hier`` this one-node model was refused (HIER needs a group spanning nodes), under
    ``bogus`` every such model was a "refusal", status 0, and under ``ring`` it lowered as
    RING, while the FAILED line said ``lower with the default options`` and the log
    ``"algo": null`` (review 51m).  The soak lowers with what it prints: the manifest's
    ``options.algo`` is null (docs/FORMATS.md: the override that applied, else null), and
    the variable is the shell's again after."""
    import nrtrewrite.bundle as B

    monkeypatch.setenv("NRTREWRITE_ALGO", shell_algo)
    monkeypatch.setattr(soak_models, "random_model", lambda rng, two_node: (
        json.loads(json.dumps(ONE_MODEL)), None, False))
    real, written = B.write_output, []

    def keep_options(plan, out, **kw):
        written.append(plan.options.algo)
        return real(plan, out, **kw)

    monkeypatch.setattr(B, "write_output", keep_options)
    assert soak_models.run_one(5, False, tmp_path) == {"result": "simulated"}
    assert written == [None]
    assert os.environ["NRTREWRITE_ALGO"] == shell_algo
    assert soak_models.main(["--replay", "5"]) == 0
    assert capsys.readouterr().out == "model 5: simulated, every trigger matching\n"
