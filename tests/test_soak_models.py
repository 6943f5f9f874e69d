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
    # (the model's file named in its temporary folder, deleted by then: until 2026-12-07
    # its path there, which names nothing once the line is read)
    # (and how to run it again, as the machine's lines say: until 2026-12-07 not)
    # (the model named first, as the output's line does: until 2026-12-07 its file first)
    assert capsys.readouterr() == ("", "soak_models.py: error: model 0: <temporary>/m.neff: "
                                   f"cannot write the model: {ENOSPC} "
                                   "(again alone: --replay 0)\n")
    assert not log.exists() and os.listdir(tmp) == []


def test_a_full_disk_writing_the_output_is_the_harness_error(tmp_path, monkeypatch, capsys):
    """Model 1 lowers and simulates (``--count 2``); its output's write fails as
    docs/CLI.md says ``lower`` reports it, ``OUT: cannot write the output: No space left on
    device``: the soak stops with that line, not a refusal counted."""
    import errno

    import nrtrewrite.bundle as B

    tmp = _soak_folder(tmp_path, monkeypatch)

    def full(plan, out, *args, **kwargs):
        raise OSError(errno.ENOSPC, ENOSPC, "cce.bin")

    monkeypatch.setattr(B, "_write_output", full)
    with pytest.raises(SystemExit) as exc:
        soak_models.main(["--count", "2"])  # (model 0 is refused, model 1 lowers)
    assert exc.value.code == 2
    assert capsys.readouterr() == ("", "soak_models.py: error: model 1: <temporary>/out: "
                                   f"cannot write the output: {ENOSPC} (cce.bin) "
                                   "(again alone: --replay 1)\n")
    assert os.listdir(tmp) == []


def test_a_log_that_cannot_be_written_names_the_failures_seed(tmp_path, monkeypatch, capsys):
    """A failure found and a log that cannot take it: the failure is not lost (its seed and
    how to run it again), status 2 (it was a traceback), the OS's reason: a log linked to
    /dev/full is ``No space left on device`` (until 2026-12-07 ``Invalid argument``, the
    error of truncating the device back)."""
    import nrtrewrite.simulate as S

    def broken(*a, **k):
        raise RuntimeError("simulator bug")

    monkeypatch.setattr(S, "simulate_output", broken)
    log = tmp_path / "l.jsonl"
    log.symlink_to("/dev/full")
    with pytest.raises(SystemExit) as exc:
        soak_models.main(["--count", "2", "--log", str(log)])  # model 0 is refused, 1 runs
    assert exc.value.code == 2
    assert capsys.readouterr().err == (
        f"soak_models.py: error: {log}: cannot log the failure of model 1 (again alone: "
        f"--replay 1): {ENOSPC}\n")


def _no_model_runs(monkeypatch):
    def run_one(*a, **k):
        raise AssertionError("a model ran")
    monkeypatch.setattr(soak_models, "run_one", run_one)


@pytest.mark.parametrize("kind", ["a FIFO", "a directory"])
def test_a_log_not_a_regular_file_is_refused_before_any_model_runs(tmp_path, monkeypatch,
                                                                   capsys, kind):
    """A FIFO with no reader took each record and lost it (until 2026-12-07, status 1 and
    nothing logged); a directory was found only at the first failure."""
    log = tmp_path / "l.jsonl"
    os.mkfifo(log) if kind == "a FIFO" else log.mkdir()
    _no_model_runs(monkeypatch)
    with pytest.raises(SystemExit) as exc:
        soak_models.main(["--count", "2", "--log", str(log)])
    assert exc.value.code == 2
    assert capsys.readouterr() == ("", f"soak_models.py: error: {log}: cannot log failures "
                                   f"there: not a regular file ({kind})\n")


def test_dev_null_as_the_log_is_not_refused(monkeypatch, capsys):
    monkeypatch.setattr(soak_models, "run_one", lambda seed, two_node, work, classify=True: {
        "result": "failed", "seed": seed, "two_node": False, "algo": None, "host_cc": False,
        "traceback": "x"})
    assert soak_models.main(["--count", "1", "--log", "/dev/null"]) == 1
    assert "FAILED: seed 0 " in capsys.readouterr().err


# The machine refusing a resource (a fork, memory) while lowering, and an OS error while
# simulating that is the machine's (memory, a full disk, the device: docs/CLI.md), are
# not findings: one line naming the model and how to run it again, status 2, nothing
# logged (until 2026-12-07 each was logged as a failure, status 1).  Every other OS error
# while simulating is the tool's: logged, status 1.
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


def _only_model(monkeypatch, seed):
    """Every model drawn is model ``seed`` of one node (one that lowers and simulates)."""
    spec = soak_models.random_model(random.Random(seed), False)
    monkeypatch.setattr(soak_models, "random_model", lambda rng, two_node: spec)


def test_a_fork_refused_while_writing_the_output_is_the_machines(
        tmp_path, monkeypatch, capsys):
    """write_output lets ``EAGAIN`` naming no file through as it is (docs/CLI.md: the CLI
    says the system refused a process): model 0 of ``--two-node`` (model 1's spec) is named
    with ``--two-node`` in its replay."""
    import errno

    import nrtrewrite.bundle as B

    _soak_folder(tmp_path, monkeypatch)

    def refused(plan, out, *args, **kwargs):
        raise OSError(errno.EAGAIN, EAGAIN)

    monkeypatch.setattr(B, "_write_output", refused)
    _only_model(monkeypatch, 1)
    with pytest.raises(SystemExit) as exc:
        soak_models.main(["--count", "1", "--two-node"])
    assert exc.value.code == 2
    assert capsys.readouterr().err == (
        "soak_models.py: error: model 0: lowering: the machine refused a resource: could "
        f"not start a process or map memory ({EAGAIN}) (again alone: --replay 0 --two-node)\n")


def test_an_io_error_reading_the_output_while_simulating_is_the_machines(
        tmp_path, monkeypatch, capsys):
    """Model 1 lowers (``--count 2``: model 0 is refused); reading its output while
    simulating fails with EIO (every read of an artifact faked to): the simulator's
    ``OUT/...: cannot read: Input/output error`` (docs/CLI.md "simulate", status 2 there)
    is the machine's; the file is named in the model's temporary folder, deleted by then
    (until 2026-12-07 its path there)."""
    import errno

    import nrtrewrite.simulate.artifacts as A

    tmp = _soak_folder(tmp_path, monkeypatch)

    def eio(path):
        raise OSError(errno.EIO, "Input/output error", str(path))

    monkeypatch.setattr(A, "open_regular", eio)
    log = tmp_path / "f.jsonl"
    with pytest.raises(SystemExit) as exc:
        soak_models.main(["--count", "2", "--log", str(log)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    head, _, tail = err.partition("<temporary>/out/")
    assert head == "soak_models.py: error: model 1: simulating: "
    assert tail.endswith(": cannot read: Input/output error (again alone: --replay 1)\n")
    assert str(tmp) not in err and not log.exists() and os.listdir(tmp) == []


@pytest.mark.parametrize("code", ["EIO", "ENOMEM"])
def test_a_machine_os_error_raised_while_simulating_is_the_machines(
        tmp_path, monkeypatch, capsys, code):
    """The allow-list (docs/CLI.md): memory, the device."""
    import errno

    import nrtrewrite.simulate as S

    number = getattr(errno, code)

    def broken(*a, **k):
        raise OSError(number, os.strerror(number))

    monkeypatch.setattr(S, "simulate_output", broken)
    with pytest.raises(SystemExit) as exc:
        soak_models.main(["--count", "2"])
    assert exc.value.code == 2
    assert capsys.readouterr().err == (
        f"soak_models.py: error: model 1: simulating: {os.strerror(number)} "
        "(again alone: --replay 1)\n")


def _logged_failure(log):
    row, = [json.loads(line) for line in log.read_text().splitlines()]
    assert row["seed"] == 1  # (model 0 of --seed 0 is refused, model 1 simulates)
    return row["traceback"]


@pytest.mark.parametrize("code", ["EMFILE", "ENFILE", "EINVAL", "EACCES", "EBADF"])
def test_an_os_error_of_the_tool_raised_while_simulating_is_a_failure(
        tmp_path, monkeypatch, capsys, code):
    """Not on the allow-list: too many open files (a descriptor the tool leaks, in the one
    process every model runs in), a bad argument, no permission on a file lower wrote, a
    bad descriptor: logged, status 1 (until 2026-12-07 every errno but ENOENT, ENOTDIR and
    EISDIR was the machine's, status 2, nothing logged)."""
    number, logged = _simulate_raising_is_logged(tmp_path, monkeypatch, code)
    assert f"Error: [Errno {number}] {os.strerror(number)}\n" in logged


def _simulate_raising_is_logged(tmp_path, monkeypatch, code: str) -> tuple[int, str]:
    """A two-model soak whose simulate raises ``OSError(errno.<code>)`` fails (status 1):
    the errno's number and the failure logged."""
    import errno

    import nrtrewrite.simulate as S

    number = getattr(errno, code)

    def broken(*a, **k):
        raise OSError(number, os.strerror(number))

    monkeypatch.setattr(S, "simulate_output", broken)
    log = tmp_path / "f.jsonl"
    assert soak_models.main(["--count", "2", "--log", str(log)]) == 1
    return number, _logged_failure(log)


def test_a_bad_read_while_simulating_is_a_failure(tmp_path, monkeypatch):
    """A real ``pread`` at a negative offset (the simulator's bug: EINVAL) while simulating
    model 1's output: the tool's, logged."""
    import errno

    import nrtrewrite.simulate as S

    def buggy(out, *a, **k):
        fd = os.open(out / "manifest.json", os.O_RDONLY)
        try:
            os.pread(fd, 10, -1)
        finally:
            os.close(fd)

    monkeypatch.setattr(S, "simulate_output", buggy)
    log = tmp_path / "f.jsonl"
    assert soak_models.main(["--count", "2", "--log", str(log)]) == 1
    assert f"OSError: [Errno {errno.EINVAL}] {os.strerror(errno.EINVAL)}" in \
        _logged_failure(log)


@pytest.mark.parametrize("kind", ["missing", "dir", "fifo", "link"])
def test_a_file_of_the_wrong_kind_in_the_output_stays_a_failure(
        tmp_path, monkeypatch, capsys, kind):
    """``lower``'s output with its first artifact (``rank-0000/cce.bin``) not there, or a
    real directory, FIFO or link to itself in its place: the real simulator reads it
    (``not a regular file``, EINVAL, for a directory or a FIFO; ELOOP for the link; until
    2026-12-07 only a faked ``IsADirectoryError``, which it never raises, was tested, and
    these were the machine's, status 2, nothing logged): the tool's, logged, status 1."""
    import errno

    import nrtrewrite.bundle as B

    real = B.write_output

    def buggy(plan, out, *args, **kwargs):
        res = real(plan, out, *args, **kwargs)
        f = out / "rank-0000" / "cce.bin"
        f.unlink()
        if kind == "dir":
            f.mkdir()
        elif kind == "fifo":
            os.mkfifo(f)
        elif kind == "link":
            os.symlink(f.name, f)
        return res

    monkeypatch.setattr(B, "write_output", buggy)
    log = tmp_path / "f.jsonl"
    assert soak_models.main(["--count", "2", "--log", str(log)]) == 1
    why = {"missing": f"cannot read: {os.strerror(errno.ENOENT)}",
           "dir": "cannot read: not a regular file",
           "fifo": "cannot read: not a regular file",
           "link": f"cannot read: {os.strerror(errno.ELOOP)}"}[kind]
    assert why in _logged_failure(log)
    assert "FAILED: seed 1 " in capsys.readouterr().err


def _memory_guard(monkeypatch, available, output_floor):
    """The machine has ``available`` bytes; the output's floor (the simulator's, from its
    declared sizes) is ``output_floor``, the model's own small (model 1: a few KiB)."""
    import nrtrewrite.simulate.engine as E
    import nrtrewrite.simulate.memguard as M

    monkeypatch.setattr(M, "available_bytes", lambda *a: (available, "MemAvailable"))
    monkeypatch.setattr(E, "floors_of_specs", lambda *a: [
        M.Floor(0, "allreduce", 2, output_floor)])


def test_the_memory_guard_refusing_a_model_that_fits_is_a_failure(tmp_path, monkeypatch):
    """The static guard weighs the output's declared sizes: an output declaring 2 TiB for
    a model of a few KiB, on a machine with 1 TiB available, is the tool's, logged."""
    _memory_guard(monkeypatch, 1 << 40, 2 << 40)
    log = tmp_path / "f.jsonl"
    assert soak_models.main(["--count", "2", "--log", str(log)]) == 1
    assert "cannot be simulated on this machine: allreduce holds 2048.0 GiB" in \
        _logged_failure(log)


def test_the_memory_guard_refusing_a_model_too_large_is_the_machines(
        tmp_path, monkeypatch, capsys):
    """A machine with 100 bytes available: model 1 itself does not fit, the machine's."""
    _memory_guard(monkeypatch, 100, 200)
    log = tmp_path / "f.jsonl"
    with pytest.raises(SystemExit) as exc:
        soak_models.main(["--count", "2", "--log", str(log)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    # (the output named in the model's temporary folder, deleted by then)
    assert err.startswith("soak_models.py: error: model 1: simulating: the machine refused "
                          "a resource: <temporary>/out: trigger 0: cannot be simulated on "
                          "this machine: "
                          "allreduce holds 200 bytes")
    assert err.endswith(" (again alone: --replay 1)\n") and not log.exists()


def test_replay_shows_a_tools_memory_error_whole(tmp_path, monkeypatch, capsys):
    """A tool's bug allocating an absurd buffer while lowering (r1): the run of many
    models cannot tell it from the machine's (status 2); ``--replay`` runs without that
    classification and shows its traceback, status 1 (until 2026-12-07 the same one line:
    a dead end)."""
    real = soak_models.lower_drawn

    def buggy(*args, **kwargs):
        real(*args, **kwargs)
        raise MemoryError("bytearray of 2**62")

    monkeypatch.setattr(soak_models, "lower_drawn", buggy)
    assert soak_models.main(["--replay", "1"]) == 1
    out, err = capsys.readouterr()
    assert out.startswith("model 1: FAILED (")
    assert err.startswith("Traceback (most recent call last):")
    assert "MemoryError: bytearray of 2**62" in err


def test_replay_shows_an_os_error_while_simulating_whole(tmp_path, monkeypatch, capsys):
    import errno

    import nrtrewrite.simulate as S

    def broken(*a, **k):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(S, "simulate_output", broken)
    assert soak_models.main(["--replay", "1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):")
    assert f"OSError: [Errno {errno.EIO}] {os.strerror(errno.EIO)}" in err


def test_replay_shows_a_refusal_whole(capsys):
    """Model 0 of ``--seed 0`` is refused while lowering: its replay prints the whole line,
    digits and all, its file named in the model's temporary folder (until 2026-12-07 the
    run's count key: digits ``#``, cut at 160 characters, the file dropped)."""
    assert soak_models.main(["--replay", "0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("model 0: refused: <temporary>/m.neff")
    assert "#" not in out and len(out) > 160


def test_replay_shows_the_memory_guards_refusal_whole(tmp_path, monkeypatch, capsys):
    """The static guard's refusal, the machine's (model 1 does not fit 100 bytes, the
    output declaring no more than the model's own floor), is shown whole in ``--replay``,
    its traceback on stderr, and not labelled a failure: status 2, ``not the tool's``
    (docs/CLI.md; until 2026-12-07 ``FAILED``, status 1)."""
    _memory_guard(monkeypatch, 100, 200)
    assert soak_models.main(["--replay", "1"]) == 2
    out, err = capsys.readouterr()
    assert out.startswith("not the tool's: model 1: simulating: the machine refused a "
                          "resource: <temporary>/out: trigger 0: cannot be simulated")
    assert "again alone" not in out and "FAILED" not in out
    assert err.startswith("Traceback (most recent call last):")
    assert "ResourceError: " in err and "trigger 0: cannot be simulated on this machine: " \
        "allreduce holds 200 bytes at once" in err


def test_too_many_open_files_writing_the_output_is_a_failure(tmp_path, monkeypatch, capsys):
    """EMFILE writing model 1's output (r6: a descriptor the tool leaked, models earlier, in
    the one process every model runs in) is not a full disk or a permission: a failure of
    the tool, logged, status 1 (until 2026-12-07 the harness's line, status 2)."""
    import errno

    import nrtrewrite.bundle as B

    def leaked(plan, out, *args, **kwargs):
        raise OSError(errno.EMFILE, os.strerror(errno.EMFILE), "cce.bin")

    monkeypatch.setattr(B, "_write_output", leaked)
    log = tmp_path / "f.jsonl"
    assert soak_models.main(["--count", "2", "--log", str(log)]) == 1
    assert (f"cannot write the output: {os.strerror(errno.EMFILE)} (cce.bin)"
            in _logged_failure(log))
    assert "FAILED: seed 1 " in capsys.readouterr().err


# Review 52n.  (1) The guard's refusal judged by the floors alone: the output's declared
# floor (the error's) against the lowered model's own (floors_of_plan), no second reading
# of the memory available, which a loaded machine changes in between (r3flap.py).
def _guard_weighing(monkeypatch, factor, available_then, available_after):
    """The output's floors the model's own times ``factor``; the guard reads
    ``available_then(worst)`` bytes available, every later reading ``available_after``."""
    import nrtrewrite.simulate.engine as E
    import nrtrewrite.simulate.memguard as M

    plans = []
    real_lower = soak_models.lower_drawn

    def lower(*a):
        plans.append(real_lower(*a))
        return plans[-1]

    def floors_of_specs(*a):
        return [M.Floor(f.trigger, f.label, f.ranks, f.bytes * factor, f.inputs,
                        f.making, f.checking * factor, held=f.operands * factor)
                for f in M.floors_of_plan(plans[-1])]

    real_check = M.check_operands_fit

    def check(floors, **kw):
        worst = M.largest_floor(M.floors_of_plan(plans[-1])).total
        return real_check(floors, available=lambda: (available_then(worst), "MemAvailable"),
                          **kw)

    monkeypatch.setattr(soak_models, "lower_drawn", lower)
    monkeypatch.setattr(E, "floors_of_specs", floors_of_specs)
    monkeypatch.setattr(E, "check_operands_fit", check)
    monkeypatch.setattr(M, "available_bytes", lambda *a: (available_after, "MemAvailable"))


def test_the_guard_refusing_the_models_own_floor_is_the_machines_however_memory_moves(
        tmp_path, monkeypatch, capsys):
    """The output declares the model's own floor, one byte short at the guard's reading;
    memory freed since (another process): still the machine's, status 2, nothing logged
    (until 2026-12-07 a second reading found it fitting: logged as the tool's)."""
    _guard_weighing(monkeypatch, 1, lambda worst: worst - 1, 1 << 50)
    log = tmp_path / "f.jsonl"
    with pytest.raises(SystemExit) as exc:
        soak_models.main(["--count", "2", "--log", str(log)])
    assert exc.value.code == 2 and not log.exists()
    assert "model 1: simulating: the machine refused a resource: <temporary>/out: trigger " \
        in capsys.readouterr().err


def test_an_output_declaring_more_than_the_models_floor_is_the_tools_however_memory_moves(
        tmp_path, monkeypatch, capsys):
    """The output declares 4 times the model's floor, refused with twice the model's floor
    available; memory taken since (1 byte left): still the tool's, logged, status 1 (until
    2026-12-07 the second reading hid it as the machine's)."""
    _guard_weighing(monkeypatch, 4, lambda worst: 2 * worst, 1)
    log = tmp_path / "f.jsonl"
    assert soak_models.main(["--count", "2", "--log", str(log)]) == 1
    assert "cannot be simulated on this machine" in _logged_failure(log)


def test_a_failure_judging_the_guards_refusal_is_a_logged_failure(tmp_path, monkeypatch,
                                                                  capsys):
    """The model's floors cannot be weighed (floors_of_plan raising, a bug of the tool):
    the refusal is logged as the tool's, the judging error noted in its traceback (until
    2026-12-07 it escaped the except handler: the run ended with a traceback)."""
    import nrtrewrite.simulate.memguard as M

    _memory_guard(monkeypatch, 100, 200)

    def broken(plan):
        raise ValueError("no floors")

    monkeypatch.setattr(M, "floors_of_plan", broken)
    log = tmp_path / "f.jsonl"
    assert soak_models.main(["--count", "2", "--log", str(log)]) == 1
    tb = _logged_failure(log)
    assert "cannot be simulated on this machine" in tb
    assert "judging whether this was the machine's raised ValueError: no floors" in tb


# Review 59m (1).  The second check's refusal (the programs weighed, Simulator.
# check_programs_fit): its floor counts the decoded programs, which are the machine's memory,
# not the model's floor; the model's own floor with them refused is the machine's
# (soak_e2e.py; until 2026-12-07 the floor with the programs was compared with the model's,
# more than it by the programs: logged as the tool's).
def test_the_second_checks_refusal_of_the_models_own_floor_is_the_machines(
        tmp_path, monkeypatch, capsys):
    """The machine has exactly the output's floor (no more than the model's) at the first
    check; the decoding takes 1 MiB (resident) and leaves 1 byte less than the floor with
    it: refused by the second check, the machine's, status 2, nothing logged."""
    import nrtrewrite.simulate.engine as E
    import nrtrewrite.simulate.memguard as M

    declared = []  # the output's floors, as the simulator weighs them
    real_floors = E.floors_of_specs

    def floors_of_specs(*a):
        declared.append(real_floors(*a))
        return declared[-1]

    readings = []  # resident readings: one before the programs, one after them

    def resident():
        readings.append(0 if len(readings) % 2 == 0 else 1 << 20)
        return readings[-1]

    def available(*a):
        floor = M.largest_floor(declared[-1]).total
        decoded = readings and len(readings) % 2 == 0  # (both readings taken: second check)
        return (floor - 1 if decoded else floor, "MemAvailable")

    monkeypatch.setattr(E, "floors_of_specs", floors_of_specs)
    monkeypatch.setattr(E, "resident_bytes", resident)
    monkeypatch.setattr(M, "available_bytes", available)
    log = tmp_path / "f.jsonl"
    with pytest.raises(SystemExit) as exc:
        soak_models.main(["--count", "2", "--log", str(log)])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and not log.exists(), err
    assert "model 1: simulating: the machine refused a resource: <temporary>/out: trigger " \
        in err
    assert "1.0 MiB of decoded programs" in err


# (2) The simulator writes no file: a full disk or quota while simulating is the tool
# writing where it should not, logged (r1simspc.py; until 2026-12-07 the machine's).
@pytest.mark.parametrize("code", ["ENOSPC", "EDQUOT"])
def test_a_full_disk_while_simulating_is_a_failure(tmp_path, monkeypatch, capsys, code):
    number, logged = _simulate_raising_is_logged(tmp_path, monkeypatch, code)
    assert f"OSError: [Errno {number}] {os.strerror(number)}" in logged


# (3) --replay shows an OS error writing the output whole, not labelled the tool's.
@pytest.mark.parametrize("code", ["ENOSPC", "EIO", "EACCES", "EPERM", "EROFS", "EDQUOT"])
def test_replay_shows_an_os_error_writing_the_output_whole(tmp_path, monkeypatch, capsys,
                                                           code):
    """r2replay.py: status 2 (the harness's: not ``FAILED``), the line on stdout, the
    traceback on stderr (until 2026-12-07 the run's one line, no traceback)."""
    import errno

    import nrtrewrite.bundle as B

    number = getattr(errno, code)

    def refused(path, data, sync=True):
        raise OSError(number, os.strerror(number))

    monkeypatch.setattr(B, "_write_file", refused)
    assert soak_models.main(["--replay", "1"]) == 2
    out, err = capsys.readouterr()
    assert out == ("not the tool's: model 1: <temporary>/out: cannot write the output: "
                   f"{os.strerror(number)}\n")
    assert err.startswith("Traceback (most recent call last):")
    assert err.endswith(": cannot write the output: " f"{os.strerror(number)}\n")


# (5) A file size limit (``ulimit -f``) writing the harness's files is the harness's.
def test_a_file_size_limit_writing_the_output_is_the_harness_error(tmp_path, monkeypatch,
                                                                   capsys):
    import errno

    import nrtrewrite.bundle as B

    def limited(plan, out, *args, **kwargs):
        raise OSError(errno.EFBIG, os.strerror(errno.EFBIG), "cce.bin")

    monkeypatch.setattr(B, "_write_output", limited)
    log = tmp_path / "f.jsonl"
    with pytest.raises(SystemExit) as exc:
        soak_models.main(["--count", "2", "--log", str(log)])
    assert exc.value.code == 2 and not log.exists()
    assert capsys.readouterr().err == (
        "soak_models.py: error: model 1: <temporary>/out: cannot write the output: "
        f"{os.strerror(errno.EFBIG)} (cce.bin) (again alone: --replay 1)\n")


# (4) A record is appended whole or not at all (a file size limit in a child process).
APPEND_CHILD = r'''
import resource, sys
sys.path.insert(0, sys.argv[1])
import soak_models
log = sys.argv[2]
soak_models.run_one = lambda seed, two_node, work, classify=True: {
    "result": "failed", "seed": seed, "two_node": False, "algo": None, "host_cc": False,
    "traceback": "x" * 5000}
size = len(open(log, "rb").read())
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 1000, resource.RLIM_INFINITY))
sys.exit(soak_models.main(["--count", "1", "--log", log]))
'''


def test_a_record_that_cannot_be_appended_leaves_the_log_as_it_was(tmp_path):
    import subprocess

    log = tmp_path / "f.jsonl"
    before = b'{"seed": 7}\n'
    log.write_bytes(before)
    child = subprocess.run([sys.executable, "-c", APPEND_CHILD, str(ROOT / "fuzz"), str(log)],
                           capture_output=True, text=True, env={**os.environ,
                                                                "PYTHONPATH": str(ROOT)})
    assert child.returncode == 2, child.stderr
    assert child.stderr == (f"soak_models.py: error: {log}: cannot log the failure of model 0 "
                            f"(again alone: --replay 0): {os.strerror(27)}\n")  # EFBIG
    assert log.read_bytes() == before  # (until 2026-12-07 1,000 bytes of a half line)


def test_a_record_after_a_half_line_starts_a_line_of_its_own(tmp_path, monkeypatch):
    log = tmp_path / "f.jsonl"
    log.write_bytes(b'{"seed": 7, "trace')  # (an older run's half record)
    soak_models.append_line(log, '{"seed": 8}')
    assert log.read_bytes() == b'{"seed": 7, "trace\n{"seed": 8}\n'


# (8) A temporary folder whose name holds a control character is not leaked (escaped in
# the line, it was not replaced by <temporary>: until 2026-12-07).
def test_a_temporary_folder_with_a_control_character_is_not_named(tmp_path, monkeypatch,
                                                                  capsys):
    import tempfile

    tmp = tmp_path / "t\x01b"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    _memory_guard(monkeypatch, 100, 200)
    with pytest.raises(SystemExit) as exc:
        soak_models.main(["--count", "2"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "refused a resource: <temporary>/out: trigger 0: " in err
    assert "t\\x01b" not in err and "nrtrewrite-soak-" not in err


# (52r) The log is never cut back: a record another soak appended meanwhile stays.
def test_a_failed_append_keeps_a_record_appended_meanwhile(tmp_path, monkeypatch):
    """race.py: between this append's look at the log and its failing write (a full disk)
    another soak appends its record; until 2026-12-07 the log was truncated back to its size
    before, deleting that record."""
    import errno

    log = tmp_path / "f.jsonl"
    log.write_bytes(b'{"seed": 0}\n')
    write = os.write

    def full(fd, data):
        with open(log, "ab") as other:  # (another soak's record, whole)
            other.write(b'{"seed": 2}\n')
        raise OSError(errno.ENOSPC, ENOSPC)

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError) as err:
        soak_models.append_line(log, '{"seed": 1}')
    monkeypatch.setattr(os, "write", write)
    assert err.value.strerror == ENOSPC
    assert log.read_bytes() == b'{"seed": 0}\n{"seed": 2}\n'


def test_a_write_only_log_takes_a_record(tmp_path, monkeypatch):
    """A log that can be written but not read (mode 0222; refused reading as root cannot
    show, so the refusal is the OS's, raised for any open asking to read it): the record
    appended, the look at its last byte skipped (until 2026-12-07 opened O_RDWR: EACCES)."""
    import errno

    log = tmp_path / "f.jsonl"
    log.write_bytes(b'{"seed": 0}\n')
    real_open = os.open

    def write_only(path, flags, *args, **kwargs):
        if str(path) == str(log) and flags & os.O_ACCMODE != os.O_WRONLY:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", write_only)
    soak_models.append_line(log, '{"seed": 1}')
    monkeypatch.setattr(os, "open", real_open)
    assert log.read_bytes() == b'{"seed": 0}\n{"seed": 1}\n'


# (52r) --replay: the memory guard's stop mid-run is a failure (status 1), as a MemoryError.
def test_replay_calls_the_guards_stop_mid_run_a_failure(monkeypatch, capsys):
    """rp2.py: until 2026-12-07 ``not the tool's``, status 2."""
    import nrtrewrite.simulate.memguard as M
    from nrtrewrite.errors import ResourceError

    def check(self, file=None, trigger=None):
        raise ResourceError("out of memory: simulate stopped before the system ran out of "
                            "memory, with 0.1 GiB left available", file=file, trigger=trigger)

    monkeypatch.setattr(M.MemoryGuard, "check", check)
    assert soak_models.main(["--replay", "1"]) == 1
    out, err = capsys.readouterr()
    assert out.startswith("model 1: FAILED (lower with ") and out.count("\n") == 1
    assert "out of memory: simulate stopped before" in err


# (52r) --replay of a model that cannot be written: `not the tool's: model 1: ...`, as
# docs/CLI.md says (until 2026-12-07 the line began with <temporary>/m.neff).
def test_replay_of_a_model_that_cannot_be_written_names_the_model_first(monkeypatch, capsys):
    import errno

    write_bytes = Path.write_bytes

    def full(self, data):
        if self.name == "m.neff":
            raise OSError(errno.ENOSPC, ENOSPC, str(self))
        return write_bytes(self, data)

    monkeypatch.setattr(Path, "write_bytes", full)
    assert soak_models.main(["--replay", "1"]) == 2
    out, err = capsys.readouterr()
    assert out == ("not the tool's: model 1: <temporary>/m.neff: cannot write the model: "
                   f"{ENOSPC}\n")
    assert err.startswith("Traceback (most recent call last):")
