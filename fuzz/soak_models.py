#!/usr/bin/env python3
"""Random whole models, lowered and simulated: the end-to-end soak.

Run with ``make soak`` (``SOAK_SECONDS``, default 300; ``SOAK_SEED``, default the clock's
seconds, so that each run draws other models: make echoes the command with its ``--seed``,
and ``make soak SOAK_SEED=S`` draws run ``S``'s models again), or directly (``--seed``
default 0: the same models every time)::

    python fuzz/soak_models.py --seconds 300 [--seed S] [--two-node] [--log FILE]
    python fuzz/soak_models.py --count 20 --seed 3          # a fixed number of models
    python fuzz/soak_models.py --replay 3000012 [--two-node]  # one model, as logged

Each model is an assembler spec (docs/ASSEMBLE.md) drawn from a seeded generator
(:func:`random_model`): one or two trn2 nodes, LNC 1 or 2, one replica group or two
disjoint ones, one to four all-reduce / all-gather / reduce-scatter triggers of random
dtype, ALU op, opcode (0xC8 or 0xC7) and element count, some reading a tmp-buf an
earlier trigger wrote; with it a random ``--algo`` override (or the policy) and
``--host-cc``.  A model lowers with the options drawn, whatever the shell's
``NRTREWRITE_ALGO`` (:func:`lower_drawn`; docs/SELECTION.md §8): what its FAILED and
``--replay`` lines print is what it was lowered with.  The oracle (:func:`run_one`):
assembling never fails; lowering succeeds or refuses with an
:class:`~nrtrewrite.errors.NrtRewriteError` (a forced engine the trigger does not allow:
counted by message); and a lowered output simulates with every trigger ``match``.  A
traceback or a verdict other than ``match`` is a failure: its seed, options
and spec go to the log (``--log``, default ``fuzz/soak-failures.jsonl`` beside this script;
one JSON object a line) and the exit status is 1.  The same ``--seed`` gives the same
models: model ``i`` of ``--seed S`` is the model seed ``S * 10**6 + i``, the log's
``seed``.  An OS error of the harness's own files (the model written, the output lowered:
a full disk, quota or file size limit, no permission, the device, :data:`HARNESS_ERRNOS`; the
log: any, its record never cut back, :func:`append_line`; a log there that is not a regular
file or a character device, a FIFO say, refused before any model runs,
:func:`refuse_unfit_log`) is not a finding: the run stops with
one line, ``soak_models.py: error: ...``, status 2, nothing logged, its files named in the
model's temporary folder, deleted by then (``<temporary>/out``), with how to run the model
again alone; so does the machine refusing a resource (memory, a process, a thread: a
``MemoryError``, an ``OSError`` ENOMEM or EAGAIN naming no file, the simulator's memory
guard, its refusal before a run only when the output declares no more than the model's own
floor: :func:`machine_refusal`) at any step, and an ``OSError`` while simulating on a short
list (:data:`MACHINE_ERRNOS`: memory, the device): the line names the model and its
``--replay``, so a soak on a loaded machine reports no false failure of the tool (until
2026-12-07 these were logged as failures).  Every other ``OSError`` (a file of the output
not there or not of its kind, a bad read, too many open files: a descriptor the tool leaked;
a full disk while simulating, which writes no file) is a failure of the tool, logged.
``--replay SEED`` runs that one model alone (with ``--two-node`` when the log's
``two_node`` is true), without that classification, and prints its verdict, a failure's
traceback or mismatches on stderr, a refusal's whole line; its status 0 (simulated, or
refused while lowering), 2 (not the tool's, as the harness shows: its own writes, the
memory guard's refusal before the run judged by the floors), 1 (a failure of the tool, the
guard's stop mid-run and a ``MemoryError`` included): :func:`replay`.

``--two-node`` draws mostly two-node worlds of up to 32 ranks and up to 4 M elements
(HIER, the net proxy), slower per model.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import random
import re
import resource
import shlex
import shutil
import stat
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import NoReturn

from fuzz_reader import seconds  # (the fuzzer's beside this script: a run's length, > 0)
# (at load, not in run_one: memory refused while they load was a bare traceback there)
# (modules, their functions looked up at each call: the tests replace them)
import nrtrewrite.bundle as bundle
import nrtrewrite.simulate as simulator
from nrtrewrite.errors import NrtRewriteError, OutputError, ResourceError, temporary_name
from nrtrewrite.neff.assembler import assemble_spec

#: Where failures are appended by default: beside this script, wherever it is run from.
DEFAULT_LOG = Path(__file__).resolve().parent / "soak-failures.jsonl"
#: Model ``i`` of ``--seed S`` is the model seed ``S * SEED_STRIDE + i``.
SEED_STRIDE = 10**6

ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp32r": 4, "fp8_e3": 1, "fp8_e4": 1,
                 "fp8_e5": 1, "int8": 1, "uint8": 1, "int16": 2, "int32": 4, "uint32": 4,
                 "int64": 8, "uint64": 8}
REDUCE_DTYPES = ["bf16", "fp16", "fp32r", "fp8_e3", "fp8_e4", "fp8_e5"]
#: ``--algo`` values drawn (None: the selection policy), docs/CLI.md "explain"
ALGOS = [None, None, None, "ring", "kangaring", "mesh", "rdh", "intra_rdh", "inter_rdh",
         "hier", "single_cycle_ring", "single_step_mesh", "^mesh", "^ring",
         "allreduce:mesh;allgather:ring", "allreduce:rdh;reducescatter:ring"]


def random_model(rng: random.Random, two_node: bool = False) -> tuple[dict, str | None, bool]:
    """``(spec, algo, host_cc)`` of one model (see the module's text)."""
    nodes = rng.choice([1, 2, 2, 2] if two_node else [1, 1, 1, 2])
    lnc = rng.choice([1, 2])
    if nodes == 1:
        world = list(range(rng.choice([2, 3, 4, 5, 8, 16, 24, 32])))
    else:  # as many ranks on each node (rank 64 is the second trn2 node's first at LNC 2)
        k = rng.choice([2, 4, 8, 16] if two_node else [1, 2, 3, 4, 8])
        world = list(range(k)) + [64 + i for i in range(k)]
    groups = [world]
    if rng.random() < 0.3 and len(world) >= 4:
        shuffled = world[:]
        rng.shuffle(shuffled)
        k = rng.randint(2, len(world) - 2)
        groups = [sorted(shuffled[:k]), sorted(shuffled[k:])]
    size_cap = 1 << rng.choice([12, 16, 20, 22] if two_node else [8, 12, 16, 18, 20])
    body, variables, prev_tmp = [], [], None
    for t in range(rng.randint(1, 3 if two_node else 4)):
        gi = rng.randrange(len(groups))
        n = len(groups[gi])
        op = rng.choice(["all_reduce", "all_gather", "reduce_scatter"])
        dtype = rng.choice(REDUCE_DTYPES if op != "all_gather" else list(ELEMENT_BYTES))
        count = rng.randint(1, max(1, size_cap // (n if op == "all_gather" else 1)))
        if op == "reduce_scatter":
            count = max(1, count // n) * n
        es = ELEMENT_BYTES[dtype]
        out_elems = count * n if op == "all_gather" else (
            count // n if op == "reduce_scatter" else count)
        src, dst = f"in{t}", f"out{t}"
        if prev_tmp and rng.random() < 0.5:  # read what the trigger before wrote
            src = prev_tmp
            for v in variables:
                if v["name"] == src:
                    v["size"] = max(v["size"], count * es)
        else:
            variables.append({"name": src, "type": "input", "size": max(1, count * es)})
        chain = rng.random() < 0.25
        variables.append({"name": dst, "type": "tmp-buf" if chain else "output",
                          "size": max(1, out_elems * es)})
        prev_tmp = dst if chain else None
        trig = {"dtype": dtype, "src": src, "dst": dst, "num_elements": count, "group": gi}
        if op != "all_gather":
            trig["op"] = rng.choice(["add", "max", "min"])
        if rng.random() < 0.3:
            trig["opcode"] = 0xC7 if op == "all_reduce" and rng.random() < 0.5 else 0xC8
        body.append({op: trig})
        if rng.random() < 0.3:
            body.append("nop")
    spec = {"header": {"pkg_version": 2, "name": "soak", "lnc_size": lnc},
            "subgraphs": [{"name": "sg00", "vars": variables, "replica_groups": groups,
                           "engines": {"sp": body}}]}
    return spec, rng.choice(ALGOS), rng.random() < 0.15


def run_one(seed: int, two_node: bool, work: Path, classify: bool = True) -> dict:
    """Assemble, lower and simulate model ``seed``: ``{"result": "simulated"}``,
    ``{"result": "refused", "why": ...}`` or a failure ``{"result": "failed", ...}``
    carrying what reproduces it.  An OS error of the harness's files (the model's folder or
    file, the lowered output's write: a full disk, no permission, :data:`HARNESS_ERRNOS`)
    is not the tool's: the run stops with its line, status 2 (:func:`refuse_harness`; until
    2026-12-06 writing the model logged it as a soak failure, and the output's write counted
    it as a refusal); so does the machine refusing a resource at any step
    (:func:`machine_line`) and an ``OSError`` while simulating of :data:`MACHINE_ERRNOS`
    (until 2026-12-07 logged as failures).  Any other ``OSError`` (a descriptor leak's
    EMFILE, a bad read's EINVAL, a file of the wrong kind in the output, a full disk while
    simulating, which writes no file) is a failure of the tool.  Files are named in the
    line from the model's temporary folder, deleted by then
    (``<temporary>/out/rank-0000/cce.bin``).  Without ``classify`` (``--replay``) nothing
    stops the run: what would have is the failure it is, its traceback kept, with
    ``"harness"``, the line, where the harness can show it is not the tool's (its own
    writes, the memory guard), for :func:`replay`."""
    spec, algo, host_cc = random_model(random.Random(seed), two_node)
    case = {"seed": seed, "two_node": two_node, "algo": algo, "host_cc": host_cc,
            "spec": spec}

    def stop(line: str, shown: bool = True) -> dict:
        """The harness's or machine's ``line``: the run's end (``classify``), or in a
        replay the failure being handled, whole, with ``line`` when ``shown``."""
        if classify:
            refuse_harness(line)
        return {"result": "failed", **case, "traceback": traceback.format_exc(),
                **({"harness": line} if shown else {})}

    try:
        d = Path(tempfile.mkdtemp(prefix="soak-", dir=work))
    except OSError as err:  # (the work folder's file system full, say: not the model's fault)
        refuse_temp_folder(err)
    step, plan = "assembling", None
    try:
        neff = d / "m.neff"
        data = assemble_spec(spec)
        try:
            neff.write_bytes(data)
        except OSError as err:
            if not harness_os_error(err):  # (EMFILE: a descriptor the tool leaked)
                raise
            return stop(f"model {seed}: {temporary_name(neff, d)}: cannot write the model: "
                        f"{err.strerror or err}" + again(seed, two_node))
        del data
        step = "lowering"
        try:
            plan = lower_drawn(neff, algo, host_cc)
        except NrtRewriteError as err:
            line = judged(err, seed, two_node, step, classify, folder=d)
            if line is not None:
                return stop(line)
            why = re.sub(r"^.*?trigger \d+: ", "", str(err))  # (the where: this temp file)
            return {"result": "refused", "why": re.sub(r"\d+", "#", why)[:160],
                    "line": err.named_within(d).line()}
        try:
            out = bundle.write_output(plan, d / "out", ranks=None, workers=1)
        except OutputError as err:
            cause = err.__context__  # (write_output's "cannot write": the OSError)
            if not isinstance(cause, OSError) or not harness_os_error(cause):
                raise
            return stop(f"model {seed}: {err.named_within(d).line()}" + again(seed, two_node))
        step = "simulating"
        try:
            res = simulator.simulate_output(out, seed=seed % 97)
        except (OSError, OutputError) as err:  # (a file of the output not read: "cannot read")
            cause = err if isinstance(err, OSError) else err.__context__
            if classify and isinstance(cause, OSError) and machine_os_error(cause):
                if isinstance(err, OutputError):
                    line = err.named_within(d).line()
                else:
                    name = err.filename and temporary_name(err.filename, d)
                    line = f"{err.strerror or err}" + (f" ({name})" if name else "")
                refuse_harness(f"model {seed}: simulating: {line}" + again(seed, two_node))
            raise
        bad = [(t.trigger, t.status, t.detail) for t in res.triggers if t.status != "match"]
        if res.ok and not bad:
            return {"result": "simulated"}
        return {"result": "failed", **case, "error": str(res.error), "bad": str(bad)[:4000]}
    except Exception as err:  # noqa: BLE001 - every other exception is what the soak looks for
        line = judged(err, seed, two_node, step, classify, plan, folder=d)
        return stop(line) if line is not None else {
            "result": "failed", **case, "traceback": traceback.format_exc()}
    finally:
        shutil.rmtree(d, ignore_errors=True)


#: The errnos of an ``OSError`` met while simulating the output just written that are the
#: machine's, not the tool's (the run stops, nothing logged): memory refused (ENOMEM), the
#: device failing (EIO); and EAGAIN naming no file (:func:`machine_os_error`).  Every other
#: one is a failure of the tool, logged: a file of the output not there or not of its kind
#: (ENOENT, ENOTDIR, EISDIR; a directory or FIFO where an artifact belongs is EINVAL, "not
#: a regular file"; a link loop ELOOP), a read the tool got wrong (EINVAL), too many open
#: files (EMFILE, ENFILE: every model runs in one process, so a descriptor the tool leaks
#: shows up so, many models later), no permission on a file lower wrote, a full disk or
#: quota (ENOSPC, EDQUOT: the simulator writes no file, so only the tool writing where it
#: should not fills one; until 2026-12-07 the machine's), (until 2026-12-07 every errno but
#: ENOENT, ENOTDIR and EISDIR was the machine's).
MACHINE_ERRNOS = frozenset({errno.ENOMEM, errno.EIO})
#: The errnos of an ``OSError`` writing the harness's own files (the model, the lowered
#: output) that are the harness's, not the tool's: :data:`MACHINE_ERRNOS`, a full disk, a
#: quota or a file size limit (ENOSPC, EDQUOT, EFBIG: ``ulimit -f``, until 2026-12-07 the
#: tool's) and no permission (EACCES, EPERM, EROFS) on the folders the harness chose.
HARNESS_ERRNOS = MACHINE_ERRNOS | {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EACCES,
                                   errno.EPERM, errno.EROFS}


def machine_os_error(err: OSError) -> bool:
    """Whether ``err``, met while simulating, is the machine's (:data:`MACHINE_ERRNOS`, or
    EAGAIN naming no file, as ``fork`` raises it)."""
    if err.errno == errno.EAGAIN:
        return err.filename is None
    return err.errno in MACHINE_ERRNOS


def harness_os_error(err: OSError) -> bool:
    """Whether ``err``, met writing the harness's files, is the harness's
    (:data:`HARNESS_ERRNOS`, or EAGAIN naming no file)."""
    return machine_os_error(err) or err.errno in HARNESS_ERRNOS


def machine_refusal(err: BaseException, plan=None, folder: Path | None = None,
                    shown_only: bool = False) -> str | None:
    """Why ``err`` is the machine refusing a resource, not a finding (None: it is not): a
    ``MemoryError`` anywhere in its chain, memory or a process refused (an ``OSError``
    ``ENOMEM`` or ``EAGAIN`` naming no file: ``fork``, ``mmap``), a thread that could not
    start, or the simulator's memory guard (:class:`~nrtrewrite.errors.ResourceError`,
    status 71) - what the CLI says with status 71 (docs/CLI.md "Errors"); with
    ``shown_only`` (``--replay``) only the guard's refusal before the run, judged by the
    floors (below), the one the harness can show is the machine's: its stop mid-run (``out
    of memory: simulate stopped ...``) is then a failure, as a ``MemoryError`` is (until
    2026-12-07 the replay called it not the tool's, status 2).  The guard's refusal before
    the run (``cannot be simulated on this machine``) weighs the floor the output's declared
    sizes give (the error's ``floor``) against the memory available: it is the machine's
    only when that floor is no more than the model's own
    (:func:`~nrtrewrite.simulate.memguard.floors_of_plan` of ``plan``, the lowered model,
    not its output), which the guard's one reading of the memory available did not fit
    either; an output declaring more than the model needs is the tool's (None), as is a
    refusal with no floor or no model to weigh it against (until 2026-12-07 judged by
    reading the memory available a second time, which another process may have changed
    since).  A file of the temporary ``folder`` (deleted by then) is named
    ``<temporary>/...``."""
    seen: set[int] = set()
    e: BaseException | None = err
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, ResourceError):
            if STATIC_REFUSAL in e.why and not declares_the_models_floor(e, plan):
                return None
            if shown_only and STATIC_REFUSAL not in e.why:  # (the mid-run stop)
                return None
            return (e.named_within(folder) if folder is not None else e).line()
        if not shown_only:  # (with it, memory refused is the tool's bug as likely: shown)
            if isinstance(e, MemoryError):
                return f"out of memory ({type(e).__name__}{': ' + str(e) if str(e) else ''})"
            if isinstance(e, OSError) and e.errno in (errno.EAGAIN, errno.ENOMEM) \
                    and e.filename is None:
                return f"could not start a process or map memory ({e.strerror or e})"
            if isinstance(e, RuntimeError) and "can't start new thread" in str(e):
                return "could not start a thread (can't start new thread)"
        e = e.__cause__ or e.__context__
    return None


#: The memory guard's refusal before a run (docs/SIMULATOR.md §3 "Memory")
STATIC_REFUSAL = "cannot be simulated on this machine"


def declares_the_models_floor(err, plan) -> bool:
    """Whether the floor the guard refused (``err.floor``, from the output's declared
    sizes) is no more than the largest floor of the lowered model ``plan`` (from its
    triggers): no memory is read again, so the answer is the same however the machine's
    memory moves.  The second check's floor (``Simulator.check_programs_fit``) counts the
    decoded programs besides (``Floor.programs``, what the process took since the first
    check): memory the machine holds for the run, no size the output declares, so left out
    of the comparison (until 2026-12-07 counted: that refusal was the tool's)."""
    from nrtrewrite.simulate.memguard import floors_of_plan, largest_floor

    declared = getattr(err, "floor", None)
    if declared is None or plan is None:
        return False
    own = largest_floor(floors_of_plan(plan))
    return own is not None and declared.total - declared.programs <= own.total


def machine_line(err: BaseException, seed: int, two_node: bool, step: str,
                 plan=None, folder: Path | None = None, shown_only: bool = False) -> str | None:
    """The harness's line when ``err`` is the machine's (:func:`machine_refusal`): a
    loaded machine's refusal is not logged as a failure of the tool; the model is named, to
    be run again alone.  None otherwise."""
    why = machine_refusal(err, plan, folder, shown_only)
    if why is None:
        return None
    return (f"model {seed}: {step}: the machine refused a resource: {why}"
            + again(seed, two_node))


def judged(err: BaseException, seed: int, two_node: bool, step: str, classify: bool,
           plan=None, folder: Path | None = None) -> str | None:
    """:func:`machine_line`, called from an ``except`` handler: a failure of the judgement
    itself (a model its floors cannot be weighed for) is the tool's, noted on ``err`` (its
    traceback then shows it), not an exception out of the handler (until 2026-12-07 it
    ended the run with a traceback)."""
    try:
        return machine_line(err, seed, two_node, step, plan, folder, not classify)
    except Exception as bad:  # noqa: BLE001 - the tool's: the failure is logged
        err.add_note(f"(soak_models.py: judging whether this was the machine's raised "
                     f"{type(bad).__name__}: {bad})")
        return None


def again(seed: int, two_node: bool) -> str:
    """`` (again alone: --replay SEED [--two-node])``: how to run model ``seed`` again."""
    return f" (again alone: --replay {seed}" + (" --two-node" if two_node else "") + ")"


def lower_drawn(neff: Path, algo: str | None, host_cc: bool):
    """Plan ``neff`` with the options drawn, the shell's ``NRTREWRITE_ALGO`` dropped
    meanwhile (restored after): with no ``--algo`` drawn, the policy, as the FAILED line's
    ``lower with the default options`` says (until 2026-12-06 ``load_and_plan(algo=None)``
    read the variable, so a model drawn with no override lowered with the shell's, which
    neither the line nor the log's ``"algo": null`` showed, and an invalid one made every
    such model a refusal, status 0)."""
    from nrtrewrite.cli.lower import load_and_plan
    from nrtrewrite.select import ALGO_ENV

    saved = os.environ.pop(ALGO_ENV, None)
    try:
        plan, _ = load_and_plan(str(neff), topology=None, algo=algo, host_cc=host_cc,
                                no_verify_hash=False)
    finally:
        if saved is not None:
            os.environ[ALGO_ENV] = saved
    return plan


def _positive_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: at least 1 model")
    return value


#: the ``--help`` description, the docstring's first paragraph as a string: ``python -OO``
#: strips docstrings, where argparse read it from (no description until 2026-12-06)
DESCRIPTION = "Random whole models, lowered and simulated: the end-to-end soak."


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=DESCRIPTION)
    ap.add_argument("--seconds", type=seconds, default=300.0,
                    help="stop after this long (default 300)")
    ap.add_argument("--count", type=_positive_count, default=None,
                    help="stop after this many models (instead of --seconds)")
    ap.add_argument("--seed", type=int, default=None,
                    help=f"model i is seed * {SEED_STRIDE:,} + i (default 0)")
    ap.add_argument("--replay", type=int, metavar="SEED", default=None,
                    help="run only the model of this model seed (a logged failure's seed)")
    ap.add_argument("--two-node", action="store_true", help="mostly two-node worlds")
    ap.add_argument("--log", type=Path, default=DEFAULT_LOG,
                    help="failures, one JSON object a line (appended; default "
                         "fuzz/soak-failures.jsonl beside this script)")
    return ap


def refuse_temp_folder(err: OSError) -> NoReturn:
    """No temporary folder can be made (:func:`nrtrewrite.bundle.temp_root` found none
    usable, or ``mkdtemp`` failed): the line ``simulate MODEL.neff`` prints
    (:func:`nrtrewrite.bundle.temp_folder_refusal`) as ``soak_models.py: error: ...``,
    status 2 (until 2026-12-06 a traceback)."""
    from nrtrewrite.bundle import temp_folder_refusal
    from nrtrewrite.errors import escape_line

    print(f"soak_models.py: error: {escape_line(temp_folder_refusal(err).line())}",
          file=sys.stderr)
    sys.exit(2)


def refuse_harness(line: str) -> NoReturn:
    """The harness's own error (its files: a full disk, no permission), not a finding of the
    tool under test: ``soak_models.py: error: LINE``, status 2, nothing logged."""
    from nrtrewrite.errors import escape_line

    print(f"soak_models.py: error: {escape_line(line)}", file=sys.stderr)
    sys.exit(2)


#: The prefix of the run's temporary folder (``mkdtemp``'s, then 8 characters).
SOAK_TEMP_PREFIX = "nrtrewrite-soak-"


@contextlib.contextmanager
def work_folder():
    """The run's temporary folder, made where ``simulate MODEL.neff`` makes its own
    (:func:`nrtrewrite.bundle.temp_root`), or :func:`refuse_temp_folder`; its ``flock``
    held while the run uses it (:func:`nrtrewrite.bundle.lock_folder`), then it is removed.
    The folders and the probe files ``temp_root`` makes that killed runs left there are
    removed first, as simulate removes its own
    (:func:`nrtrewrite.bundle.clean_stale_run_temps`: this user's, a minute old, the lock
    free; until 2026-12-07 no lock told a live run's folder, and none was removed)."""
    from nrtrewrite.bundle import clean_stale_run_temps, lock_folder, temp_root, unlock_folder

    try:
        root = temp_root()
        clean_stale_run_temps(root, SOAK_TEMP_PREFIX)
        tmp = tempfile.TemporaryDirectory(prefix=SOAK_TEMP_PREFIX, dir=root)
    except OSError as err:  # none usable, or one that fails (a race)
        refuse_temp_folder(err)
    lock = lock_folder(Path(tmp.name))
    try:
        with tmp as work:
            yield work
    finally:
        unlock_folder(lock)


def lower_options(algo: str | None, host_cc: bool) -> str:
    """The options a model was lowered with, as they are typed after ``nrtrewrite lower
    M.neff`` (``--algo 'allreduce:mesh;allgather:ring' --host-cc``, quoted for a shell), or
    ``the default options``: ``--algo`` only when one was drawn (None: the policy), not
    ``--algo None`` (until 2026-12-06), which ``lower`` refuses."""
    words = (["--algo", shlex.quote(algo)] if algo is not None else []) + (
        ["--host-cc"] if host_cc else [])
    return f"lower with {' '.join(words)}" if words else "lower with the default options"


def replay(seed: int, two_node: bool) -> int:
    """Run model ``seed`` alone: its verdict on stdout, a failure's details on stderr,
    nothing logged.  Without the run's classification (``run_one``'s ``classify``): a
    resource refused, an ``OSError`` while simulating or writing the model or the output,
    the memory guard's refusal are shown whole (a traceback; until 2026-12-07 the same one
    line as the run of many models, so a tool's ``MemoryError`` could not be seen, and an
    OS error writing the output stayed that line); a refusal while lowering is its whole
    line (until 2026-12-07 the run's count key, its digits ``#``, cut at 160 characters).
    The status: 0 simulated, or refused while lowering (as the soak expects of some
    models); 2 where the harness shows it is not the tool's (an ``OSError`` of
    :data:`HARNESS_ERRNOS` writing the model or the output, the memory guard refusing
    before the run a floor no more than the model's own), its line on stdout, ``not the
    tool's: model N: ...`` (writing the model too: until 2026-12-07 that line began with
    the model's file); 1 a failure of the tool, ``model N: FAILED (...)``, the guard's stop
    mid-run (``out of memory: simulate stopped ...``) included, as a ``MemoryError`` is
    (until 2026-12-07 status 2)."""
    with work_folder() as work:
        r = run_one(seed, two_node, Path(work), classify=False)
    if r["result"] == "simulated":
        print(f"model {seed}: simulated, every trigger matching")
        return 0
    if r["result"] == "refused":
        print(f"model {seed}: refused: {r['line']}")
        return 0
    if r.get("harness"):
        print(f"not the tool's: {r['harness'].removesuffix(again(seed, two_node))}")
        print(r["traceback"], file=sys.stderr, end="")
        return 2
    print(f"model {seed}: FAILED ({lower_options(r['algo'], r['host_cc'])})")
    print(r.get("traceback") or f"{r['error']}; not matching: {r['bad']}", file=sys.stderr)
    return 1


def append_line(log: Path, line: str) -> None:
    """Append ``line`` (and a newline) to ``log`` with one ``os.write`` of the whole line on
    a write-only ``O_APPEND`` descriptor (``O_WRONLY|O_APPEND|O_CREAT``): a log another
    soak appends to meanwhile keeps both records, and a write-only log (mode 0222) takes it.
    A file that does not end in a newline (a record an older run left half) gets one first,
    as a separate read-only look at its last byte says (none when the file cannot be read).
    A record larger than the file size limit allows (``ulimit -f``) is not begun: EFBIG,
    the log left as it was.  A write cut short (a full disk) is written on, so that the OS
    says why it stops (``No space left on device``); the half line it leaves is never cut
    back (until 2026-12-07 the file was truncated to its size before the write, which
    deleted a record another soak had appended since, and a log on ``/dev/full`` said
    ``Invalid argument``, the truncation's error), and the next record starts a line of its
    own.  ``O_NONBLOCK``: a FIFO made after the start (:func:`refuse_unfit_log`) with no
    reader is ENXIO, not a record lost or a wait forever."""
    data = (line + "\n").encode()
    if not ends_in_a_newline(log):
        data = b"\n" + data
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o644)
    try:
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and limit != resource.RLIM_INFINITY \
                and st.st_size + len(data) > limit:
            raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))
        done = 0
        while done < len(data):
            wrote = os.write(fd, data[done:])
            if wrote == 0:  # (no progress and no error: not seen on a file; never loop)
                raise OSError(errno.EIO, os.strerror(errno.EIO))
            done += wrote
    finally:
        os.close(fd)


def ends_in_a_newline(log: Path) -> bool:
    """Whether ``log`` is empty, not there, not readable (a write-only log: not looked at)
    or ends in a newline: a read-only look at its last byte."""
    try:
        fd = os.open(log, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return True
    try:
        size = os.fstat(fd).st_size
        return size == 0 or os.pread(fd, 1, size - 1) in (b"\n", b"")
    except OSError:
        return True
    finally:
        os.close(fd)


def refuse_unfit_log(log: Path) -> None:
    """Before any model runs: a log that is there but neither a regular file nor a
    character device (``/dev/null`` to drop the records, ``/dev/full``) is the harness's
    error, named (a FIFO took a record and lost it with no reader, until 2026-12-07; a
    directory was found only at the first failure); so is one that cannot be looked at
    (a link loop, a file where a folder of its path belongs)."""
    try:
        mode = os.stat(log).st_mode
    except FileNotFoundError:
        return  # (made at the first failure)
    except OSError as err:
        refuse_harness(f"{log}: cannot log failures there: {err.strerror or err}")
    if stat.S_ISREG(mode) or stat.S_ISCHR(mode):
        return
    kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "a block device"
            if stat.S_ISBLK(mode) else "not a file")
    refuse_harness(f"{log}: cannot log failures there: not a regular file ({kind})")


def main(argv: list[str] | None = None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    if args.replay is not None:
        if args.count is not None or args.seed is not None:
            ap.error("--replay runs one model: not with --count or --seed")
        return replay(args.replay, args.two_node)
    seed = args.seed or 0
    end = time.monotonic() + args.seconds
    counts = {"simulated": 0, "refused": 0, "failed": 0}
    refusals: dict[str, int] = {}
    i = 0

    def more() -> bool:  # --count, when given, instead of --seconds
        return i < args.count if args.count is not None else time.monotonic() < end

    refuse_unfit_log(args.log)
    with work_folder() as work:
        while more():
            r = run_one(seed * SEED_STRIDE + i, args.two_node, Path(work))
            i += 1
            counts[r["result"]] += 1
            if r["result"] == "refused":
                refusals[r["why"]] = refusals.get(r["why"], 0) + 1
            elif r["result"] == "failed":
                try:
                    args.log.parent.mkdir(parents=True, exist_ok=True)
                    append_line(args.log, json.dumps(r))
                except OSError as err:  # the harness's: the failure is not lost, its seed named
                    refuse_harness(f"{args.log}: cannot log the failure of model {r['seed']} "
                                   f"(again alone: --replay {r['seed']}"
                                   + (" --two-node" if args.two_node else "")
                                   + f"): {err.strerror or err}")
                print(f"FAILED: seed {r['seed']} ({lower_options(r['algo'], r['host_cc'])}): "
                      f"see {args.log}; "
                      f"again alone: --replay {r['seed']}"
                      + (" --two-node" if args.two_node else ""), file=sys.stderr)
    print(f"{i} models: {counts['simulated']} simulated, every trigger matching; "
          f"{counts['refused']} refused; {counts['failed']} failed")
    for why, n in sorted(refusals.items(), key=lambda x: -x[1])[:10]:
        print(f"  {n:6d} x {why}")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
