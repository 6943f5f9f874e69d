"""fuzz/soak_models.py's options: one logged model replayed alone (``--replay``), the log
beside the script wherever it is run from, counts and times that are not ones refused."""

from __future__ import annotations

import json
import subprocess
import sys
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
    assert out == f"model {row['seed']}: FAILED (--algo {row['algo']}, --host-cc " \
                  f"{row['host_cc']})\n"
    assert "RuntimeError: simulator bug" in err
    assert len(log.read_text().splitlines()) == 1  # a replay logs nothing


def test_replay_of_a_passing_model(tmp_path, capsys):
    # model 2000001 (the second of --seed 2): its verdict as run_one gives it
    r = soak_models.run_one(2_000_001, False, tmp_path)
    assert r["result"] in ("simulated", "refused")
    assert soak_models.main(["--replay", "2000001"]) == 0
    expected = ("model 2000001: simulated, every trigger matching" if r["result"] == "simulated"
                else f"model 2000001: refused: {r['why']}")
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
