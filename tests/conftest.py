"""Shared test fixtures (kept small): paths and a minimal valid spec to mutate."""

from __future__ import annotations

import copy
import io
import os
import re
import tarfile
from pathlib import Path

import pytest
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


def golden_set() -> dict[str, list[int] | None]:
    """The golden set as ``make golden`` makes it, read from where the Makefile reads it
    (its one source, README.md "Adding a fixture and its golden"): every fixture spec
    ``fixtures/<name>.yaml``, each with the ranks its golden keeps, the Makefile's
    ``GOLDEN_RANKS_<name> := --rank A --rank B ...`` (None: every rank).  Until 2026-12-06
    the set was written out in the Makefile, tests/test_lower.py (the ranks a second time),
    tests/test_golden_module.py and tests/test_simulate.py, and a new fixture got no golden
    and no test.  A ``GOLDEN_RANKS_`` line of another shape is an error here, not skipped."""
    ranks: dict[str, list[int]] = {}
    for line in (ROOT / "Makefile").read_text().splitlines():
        if line.startswith("GOLDEN_RANKS_"):
            m = re.fullmatch(r"GOLDEN_RANKS_(\S+) := ((?:--rank \d+ ?)+)", line.rstrip())
            assert m, f"Makefile: {line!r} is not GOLDEN_RANKS_<name> := --rank R ..."
            ranks[m[1]] = [int(r) for r in m[2].split()[1::2]]
    return {p.stem: ranks.get(p.stem) for p in sorted(FIXTURES.glob("*.yaml"))}


#: the golden set (:func:`golden_set`): fixture name -> ranks kept (None: every rank)
GOLDEN = golden_set()
#: the golden fixtures that keep every rank (small enough to lower and simulate whole)
GOLDEN_SMALL = [name for name, ranks in GOLDEN.items() if ranks is None]

# The tests assume the default selection: an NRTREWRITE_ALGO of the shell that runs them
# (an override `lower` reads, docs/SELECTION.md "Overrides") would change what the goldens
# and the expected algorithms are compared with.  Tests of the variable set it themselves.
os.environ.pop("NRTREWRITE_ALGO", None)

# No Hypothesis test has a deadline.  Hypothesis's default (200 ms, in force unless a CI
# variable such as CI=true is set) fails a test as "Unreliable test timings" when one example
# overran it and its rerun did not: one descheduling of a few tenths of a second on a loaded
# two-core machine does that (pytest stopped for 0.3 s at a time failed
# test_plan_halving_ends_on_the_super_block_and_doubling_covers_everything).  The profile in
# force is kept otherwise (the CI profile's derandomize and database).
#
# NRTREWRITE_HYPOTHESIS_PROFILE=thorough runs ten times the examples (README.md "Development"):
# every test without its own max_examples 1000 instead of 100, and the property tests'
# own counts times ten (:func:`examples`).  Another name is Hypothesis's error.
settings.register_profile("nrtrewrite", settings(settings.default, deadline=None))
settings.register_profile("thorough", settings(settings.get_profile("nrtrewrite"),
                                               max_examples=10 * settings.default.max_examples))
settings.load_profile(os.environ.get("NRTREWRITE_HYPOTHESIS_PROFILE") or "nrtrewrite")


def examples(n: int) -> int:
    """A property test's ``max_examples``: ``n`` under the default profile, scaled as the
    loaded profile scales Hypothesis's own default (``thorough``: ten times ``n``)."""
    scale = settings().max_examples / settings.get_profile("nrtrewrite").max_examples
    return max(1, round(n * scale))


_BASE_SPEC = {
    "header": {"pkg_version": 2, "name": "base", "lnc_size": 1},
    "subgraphs": [{
        "name": "sg00",
        "vars": [
            {"name": "in", "type": "input", "size": 4096},
            {"name": "out", "type": "output", "size": 32768},
            {"name": "tmp", "type": "tmp-buf", "size": 4096},
            {"name": "sb_in", "type": "state-buffer", "size": 2048, "partitions": 128},
            {"name": "sb_out", "type": "state-buffer", "size": 2048, "partitions": 128},
        ],
        "replica_groups": [[0, 1, 2, 3, 4, 5, 6, 7]],
        "engines": {
            "sp": [
                "nop",
                {"all_reduce": {"dtype": "bf16", "op": "add", "src": "in", "dst": "out",
                                "num_elements": 2048}},
                "nop",
            ],
            "pool": [],
        },
    }],
}


def dead_pid() -> int:
    """A PID no process has, now or while the test runs: the kernel's ``pid_max`` (Linux
    hands out PIDs below it; 2**22, PID_MAX_LIMIT, where it cannot be read).  A child just
    reaped would do only until the kernel hands its PID to another process."""
    try:
        pid = int(Path("/proc/sys/kernel/pid_max").read_text())
    except (OSError, ValueError):
        pid = 1 << 22
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    return pid


@pytest.fixture
def fixtures_dir() -> Path:
    """The committed fixtures folder."""
    return FIXTURES


@pytest.fixture
def base_spec() -> dict:
    """A fresh copy of a minimal valid spec: 8 ranks, one bf16 all-reduce at sp[1]."""
    return copy.deepcopy(_BASE_SPEC)


def unvalidated_spec(mutate=None, **top) -> dict:
    """A fresh copy of the minimal spec with assembler validation off (tests of bad input),
    ``top`` keys set and ``mutate(spec)`` applied."""
    s = copy.deepcopy(_BASE_SPEC)
    s["validate"] = False
    s.update(top)
    if mutate:
        mutate(s)
    return s


def sp(s: dict) -> list:
    """The sp engine's instruction list of the spec's first subgraph."""
    return s["subgraphs"][0]["engines"]["sp"]


def hier_in_two_subgraphs(s: dict, trig: dict) -> None:
    """Spec mutator: two subgraphs of two ``trig`` each on group 0,1,64,65 at lnc 2 (two
    nodes of trn2, 64 ranks a node: 2 x 2 ranks, so the default policy picks HIER)."""
    s["header"]["lnc_size"] = 2
    s["subgraphs"][0]["replica_groups"] = [[0, 1, 64, 65]]
    sp(s)[:] = [trig] * 2
    sg1 = copy.deepcopy(s["subgraphs"][0])
    sg1["name"] = "sg01"
    s["subgraphs"].append(sg1)


def groups_sharing_rank_1(s: dict, trig: dict) -> None:
    """Spec mutator: group 0,1 with three ``trig`` in sg00, group 1,2 with two in sg01:
    rank 1 is in both (5 SPAD entries), ranks 0 and 2 in one each."""
    s["subgraphs"][0]["replica_groups"] = [[0, 1]]
    sp(s)[:] = [trig] * 3
    sg1 = copy.deepcopy(s["subgraphs"][0])
    sg1["name"] = "sg01"
    sg1["replica_groups"] = [[1, 2]]
    sg1["engines"]["sp"] = [trig] * 2
    s["subgraphs"].append(sg1)


#: the words of :func:`refuse_in_place_single_step_mesh`'s refusal after the rank count
STAND_IN_REFUSAL = "refused by a test's stand-in for an engine's prepare refusal"


def refuse_in_place_single_step_mesh(monkeypatch) -> None:
    """Make SINGLE_STEP_MESH's prepare refuse a trigger in place over more than 8 ranks
    (``SINGLE_STEP_MESH in place over N ranks: `` + :data:`STAND_IN_REFUSAL`), as ``lower``
    did until 2026-12-06: the tests of where an engine's prepare refusal is reported (one
    line at the trigger's instruction, the triggers ``explain`` or ``schedule`` do not show)
    need one, and this one, which they used, lowers now (docs/DESIGN.md "Mesh and RDH")."""
    from nrtrewrite.apoverlap import operands_may_share
    from nrtrewrite.compose.mesh import SingleStepMeshAlgorithm
    from nrtrewrite.errors import LoweringError
    prepare = SingleStepMeshAlgorithm.prepare

    def refusing(self, ctx, trig, sel):
        n = len(trig.replica_group)
        if n > 8 and operands_may_share(trig):
            raise LoweringError(f"SINGLE_STEP_MESH in place over {n} ranks: {STAND_IN_REFUSAL}")
        return prepare(self, ctx, trig, sel)
    monkeypatch.setattr(SingleStepMeshAlgorithm, "prepare", refusing)


def ustar_tar(members) -> bytearray:
    """The tar Python's tarfile writes of ``members`` ((name, data) pairs; ustar headers,
    zero padding, the two end blocks, padded to 10240 bytes), to be patched by a test."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return bytearray(buf.getvalue())
