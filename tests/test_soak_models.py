"""fuzz/soak_models.py: random whole models, lowered and simulated (``make soak``)."""

from __future__ import annotations

import json
import os
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


# An OS error of the harness's own files (a full disk, no permission) is the harness's: one
# line, status 2, nothing logged, not a finding of the tool (until 2026-12-06 writing the
# model logged it as a soak failure, status 1, and the lowered output's write counted it as
# a refusal, status 0).
ENOSPC = "No space left on device"


def _soak_folder(tmp_path, monkeypatch) -> Path:
    """Where the run's temporary folder is made (emptied by the run, checked after)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp


def test_a_full_disk_writing_the_model_is_the_harness_error(tmp_path, monkeypatch, capsys):
    import errno

    tmp = _soak_folder(tmp_path, monkeypatch)
    write_bytes = Path.write_bytes

    def full(self, data):
        if self.name == "m.neff":  # the model's file, in the model's folder
            raise OSError(errno.ENOSPC, ENOSPC)
        return write_bytes(self, data)

    monkeypatch.setattr(Path, "write_bytes", full)
    log = tmp_path / "f.jsonl"
    with pytest.raises(SystemExit) as exc:
        soak_models.main(["--count", "1", "--log", str(log)])
    assert exc.value.code == 2
    out = capsys.readouterr()
    head, _, tail = out.err.partition(f"{tmp}/nrtrewrite-soak-")
    assert (out.out, head) == ("", "soak_models.py: error: ")
    # (the run's folder, then the model's, each with mkdtemp's random name)
    run_name, model_folder, rest = tail.split("/", 2)
    assert model_folder.startswith("soak-")
    assert rest == f"m.neff: cannot write model 0: {ENOSPC}\n"  # (model 0 of --seed 0)
    assert not log.exists() and os.listdir(tmp) == []


def test_a_full_disk_writing_the_output_is_the_harness_error(tmp_path, monkeypatch, capsys):
    """Model 1 lowers and simulates (``--replay 1``); its output's write fails as
    docs/CLI.md says ``lower`` reports it, ``OUT: cannot write the output: No space left on
    device``: the soak stops with that line, not a refusal counted."""
    import errno

    import nrtrewrite.bundle as B

    tmp = _soak_folder(tmp_path, monkeypatch)

    def full(plan, out, *args, **kwargs):
        raise OSError(errno.ENOSPC, ENOSPC, "cce.bin")

    monkeypatch.setattr(B, "_write_output", full)
    with pytest.raises(SystemExit) as exc:
        soak_models.main(["--replay", "1"])
    assert exc.value.code == 2
    out = capsys.readouterr()
    head, _, tail = out.err.partition(f"{tmp}/nrtrewrite-soak-")
    assert (out.out, head) == ("", "soak_models.py: error: model 1: ")
    run_name, model_folder, rest = tail.split("/", 2)
    assert model_folder.startswith("soak-")
    assert rest == f"out: cannot write the output: {ENOSPC} (cce.bin)\n"
    assert os.listdir(tmp) == []


def test_a_log_that_cannot_be_written_names_the_failures_seed(tmp_path, monkeypatch, capsys):
    """A failure found and a log that cannot take it: the failure is not lost (its seed and
    how to run it again), status 2 (it was a traceback)."""
    import nrtrewrite.simulate as S

    def broken(*a, **k):
        raise RuntimeError("simulator bug")

    monkeypatch.setattr(S, "simulate_output", broken)
    log = tmp_path / "logs"
    log.mkdir()  # (a folder: cannot be opened to append to)
    with pytest.raises(SystemExit) as exc:
        soak_models.main(["--count", "2", "--log", str(log)])  # model 0 is refused, 1 runs
    assert exc.value.code == 2
    assert capsys.readouterr().err == (
        f"soak_models.py: error: {log}: cannot log the failure of model 1 (again alone: "
        "--replay 1): Is a directory\n")


# The machine refusing a resource (a fork, memory) while lowering, and an OS error while
# simulating, are the machine's, not findings: one line naming the model and how to run it
# again, status 2, nothing logged (until 2026-12-07 each was logged as a failure, status 1).
EAGAIN = "Resource temporarily unavailable"


@pytest.mark.parametrize("raised, why", [
    (OSError(11, EAGAIN), f"could not start a process or map memory ({EAGAIN})"),
    (OSError(12, "Cannot allocate memory"),
     "could not start a process or map memory (Cannot allocate memory)"),
    (MemoryError(), "out of memory (MemoryError)"),
])
def test_a_resource_refused_while_lowering_is_the_machines(tmp_path, monkeypatch, capsys,
                                                           raised, why):
    """Model 0 of ``--seed 0`` (its lowering faked to be refused a fork or memory: errno 11
    EAGAIN, 12 ENOMEM, naming no file, as ``fork`` raises them)."""
    tmp = _soak_folder(tmp_path, monkeypatch)

    def refused(*args, **kwargs):
        raise raised

    monkeypatch.setattr(soak_models, "lower_drawn", refused)
    log = tmp_path / "f.jsonl"
    with pytest.raises(SystemExit) as exc:
        soak_models.main(["--count", "3", "--log", str(log)])
    assert exc.value.code == 2
    assert capsys.readouterr() == ("", (
        f"soak_models.py: error: model 0: lowering: the machine refused a resource: {why} "
        "(again alone: --replay 0)\n"))
    assert not log.exists() and os.listdir(tmp) == []


def test_a_fork_refused_while_writing_the_output_is_the_machines(
        tmp_path, monkeypatch, capsys):
    """write_output lets ``EAGAIN`` naming no file through as it is (docs/CLI.md: the CLI
    says the system refused a process): model 1 (``--replay 1``, ``--two-node``) is named
    with ``--two-node`` in its replay."""
    import errno

    import nrtrewrite.bundle as B

    _soak_folder(tmp_path, monkeypatch)

    def refused(plan, out, *args, **kwargs):
        raise OSError(errno.EAGAIN, EAGAIN)

    monkeypatch.setattr(B, "_write_output", refused)
    spec = soak_models.random_model(__import__("random").Random(1), False)
    monkeypatch.setattr(soak_models, "random_model", lambda rng, two_node: spec)
    with pytest.raises(SystemExit) as exc:
        soak_models.main(["--replay", "1", "--two-node"])
    assert exc.value.code == 2
    assert capsys.readouterr().err == (
        "soak_models.py: error: model 1: lowering: the machine refused a resource: could "
        f"not start a process or map memory ({EAGAIN}) (again alone: --replay 1 --two-node)\n")


def test_an_os_error_reading_the_output_while_simulating_is_the_machines(
        tmp_path, monkeypatch, capsys):
    """Model 1 lowers (``--replay 1``); reading its output while simulating fails with EIO
    (every read of an artifact faked to): the simulator's ``OUT/...: cannot read:
    Input/output error`` (docs/CLI.md "simulate", status 2 there) is the machine's."""
    import errno

    import nrtrewrite.simulate.artifacts as A

    tmp = _soak_folder(tmp_path, monkeypatch)

    def eio(path):
        raise OSError(errno.EIO, "Input/output error", str(path))

    monkeypatch.setattr(A, "open_regular", eio)
    log = tmp_path / "f.jsonl"
    with pytest.raises(SystemExit) as exc:
        soak_models.main(["--replay", "1", "--log", str(log)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    head, _, tail = err.partition(f"{tmp}/nrtrewrite-soak-")
    assert head == "soak_models.py: error: model 1: simulating: "
    assert tail.endswith(": cannot read: Input/output error (again alone: --replay 1)\n")
    assert "/out/" in tail and not log.exists() and os.listdir(tmp) == []


@pytest.mark.parametrize("raised", [OSError(5, "Input/output error"),
                                    OSError(24, "Too many open files")])
def test_an_os_error_raised_while_simulating_is_the_machines(tmp_path, monkeypatch, capsys,
                                                             raised):
    import nrtrewrite.simulate as S

    def broken(*a, **k):
        raise raised

    monkeypatch.setattr(S, "simulate_output", broken)
    with pytest.raises(SystemExit) as exc:
        soak_models.main(["--replay", "1"])
    assert exc.value.code == 2
    assert capsys.readouterr().err == (
        f"soak_models.py: error: model 1: simulating: {raised.strerror} "
        "(again alone: --replay 1)\n")


@pytest.mark.parametrize("raised", [FileNotFoundError(2, "No such file or directory", "x"),
                                    IsADirectoryError(21, "Is a directory", "x"),
                                    RuntimeError("simulator bug")])
def test_a_missing_output_file_or_a_bug_while_simulating_stays_a_failure(
        tmp_path, monkeypatch, raised):
    """A file of the output just written that is not there, or not of its kind, is the
    tool's (lower wrote no such file, or simulate looks for another), so is a traceback:
    logged, status 1 (model 0 of ``--seed 0`` is refused, model 1 simulates)."""
    import nrtrewrite.simulate as S

    def broken(*a, **k):
        raise raised

    monkeypatch.setattr(S, "simulate_output", broken)
    log = tmp_path / "f.jsonl"
    assert soak_models.main(["--count", "2", "--log", str(log)]) == 1
    row, = [json.loads(line) for line in log.read_text().splitlines()]
    assert row["seed"] == 1 and type(raised).__name__ in row["traceback"]
