"""fuzz/soak_models.py: random whole models, lowered and simulated (``make soak``)."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "fuzz"))

import soak_models  # noqa: E402

from nrtrewrite.neff.assembler import assemble_spec  # noqa: E402


@pytest.mark.parametrize("two_node", [False, True])
def test_every_drawn_model_is_a_valid_neff(two_node):
    """The assembler reads each result back through the reader (its validation: disjoint
    groups, var types a trigger may read and write, sizes): the generator never makes a
    model the reader refuses, so a refusal in the soak is lowering's."""
    for seed in range(150):
        spec, algo, _ = soak_models.random_model(random.Random(seed), two_node)
        assert assemble_spec(spec)
        assert algo is None or algo in soak_models.ALGOS


def test_the_same_seed_draws_the_same_model():
    a = soak_models.random_model(random.Random(7), True)
    b = soak_models.random_model(random.Random(7), True)
    assert json.dumps(a) == json.dumps(b)
    assert json.dumps(a) != json.dumps(soak_models.random_model(random.Random(8), True))


def test_a_short_soak_simulates_every_lowered_model(tmp_path, capsys):
    assert soak_models.main(["--count", "6", "--seed", "2", "--log",
                             str(tmp_path / "f.jsonl")]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("6 models: ") and first.endswith("0 failed")
    assert not (tmp_path / "f.jsonl").exists()


def test_a_failure_is_logged_with_what_reproduces_it(tmp_path, monkeypatch, capsys):
    import nrtrewrite.simulate as S

    def broken(*a, **k):
        raise RuntimeError("simulator bug")

    monkeypatch.setattr(S, "simulate_output", broken)
    log = tmp_path / "f.jsonl"
    assert soak_models.main(["--count", "8", "--seed", "2", "--log", str(log)]) == 1
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert rows and all("RuntimeError: simulator bug" in r["traceback"] for r in rows)
    r = rows[0]
    again = soak_models.random_model(random.Random(r["seed"]), r["two_node"])
    assert [again[0], again[1], again[2]] == [r["spec"], r["algo"], r["host_cc"]]
    assert "FAILED: seed" in capsys.readouterr().err
