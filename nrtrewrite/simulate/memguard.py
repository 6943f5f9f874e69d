"""The simulator's memory against the machine's (docs/SIMULATOR.md §3 "Memory").

The simulator holds every rank's data, and since 2026-12-07 a buffer of
``engine.MAPPED_BYTES`` or more gives each page back after its last access: a rank's input
goes once the last leg reading it has run, its output once it is checked.  A reduction's
output element is written only after every input it sums is read, so for each element the
group holds its inputs or its outputs, not both: :func:`held_floor`, group size x the larger
of a rank's input and output (an all-gather's inputs are read by every rank, so it holds both,
:func:`operand_floor`, the group's inputs and outputs, which is what every trigger was
weighed by until 2026-12-07).  Making the test data and checking the outputs hold more
(:func:`~nrtrewrite.simulate.testdata.reference_bytes`: a reduction's float64 accumulator
alone is 8 bytes an element, eight times an fp8 operand): a trigger's floor (:class:`Floor`)
is the larger of its held operands with what checking an output holds, and its inputs with
what making an input holds, about the run's peak memory (the scratch and gateway bytes in
flight, the legs' temporaries, the shadow state, the decoded programs and the interpreter
come on top).  A run whose floor is more than the memory the machine has available cannot
end: it would be stopped by the kernel's out-of-memory killer, after minutes, with nothing
but ``Killed``.  :func:`check_operands_fit` refuses it before anything is decoded (or
lowered); :class:`MemoryGuard` stops a run that fits the floor but not the machine, with a
line, while some memory is left.

"Available" is Linux's ``MemAvailable`` (free memory plus the page cache the kernel can drop),
or less when the process's memory cgroup (v1 or v2, or an ancestor) has a limit: that limit
less the cgroup's working set (its usage less its inactive page cache).  Where neither can be
read (not Linux) nothing is checked.
"""

from __future__ import annotations

import resource
import time
from dataclasses import dataclass, replace
from pathlib import Path

from nrtrewrite.errors import ResourceError, SimulationError
from nrtrewrite.simulate.testdata import reference_bytes
from nrtrewrite.simulate.triggers import trigger_label

MEMINFO = Path("/proc/meminfo")
STATM = Path("/proc/self/statm")
CGROUPS = Path("/proc/self/cgroup")
CGROUP_ROOT = Path("/sys/fs/cgroup")

#: :class:`MemoryGuard` stops a run when the available memory falls below this much (or a
#: quarter of what was available when it started, when that is less: a small machine still
#: simulates a small model).
RESERVE_BYTES = 512 << 20
#: Seconds between two readings of the available memory while a run goes on.
CHECK_INTERVAL = 0.1
#: :func:`held_floor` counts 1/IN_FLIGHT more for the operands' bytes in flight.
IN_FLIGHT = 8


def _meminfo(path: Path = MEMINFO) -> dict[str, int]:
    """``/proc/meminfo`` in bytes per key; empty when unreadable."""
    out = {}
    try:
        text = path.read_text()
    except OSError:
        return out
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[key] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    return out


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max" (v2: no limit) is None


def _inactive_file(stat: Path, key: str) -> int:
    try:
        for line in stat.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key and value.strip().isdigit():
                return int(value)
    except OSError:
        pass
    return 0


def _cgroup_dirs(cgroups: Path = CGROUPS, root: Path = CGROUP_ROOT):
    """(folder, limit file, usage file, stat file, inactive-file key) of the process's memory
    cgroup and each of its ancestors up to the mount's root, v2 and v1 alike."""
    try:
        lines = cgroups.read_text().splitlines()
    except OSError:
        return
    for line in lines:
        _hid, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "":  # v2, unified (possibly mounted at root/unified, hybrid)
            mounts = [(root, "memory.max", "memory.current", "inactive_file"),
                      (root / "unified", "memory.max", "memory.current", "inactive_file")]
        elif "memory" in controllers.split(","):
            mounts = [(root / "memory", "memory.limit_in_bytes", "memory.usage_in_bytes",
                       "total_inactive_file")]
        else:
            continue
        parts = [p for p in path.strip("/").split("/") if p and p != ".."]
        for base, limit, usage, key in mounts:
            for depth in range(len(parts), -1, -1):
                folder = base.joinpath(*parts[:depth])
                yield folder, folder / limit, folder / usage, folder / "memory.stat", key


def available_bytes(meminfo: Path = MEMINFO, cgroups: Path = CGROUPS,
                    root: Path = CGROUP_ROOT) -> tuple[int, str] | None:
    """(bytes the process can still take, where that figure comes from), or None when the
    machine does not say (no ``/proc/meminfo``)."""
    info = _meminfo(meminfo)
    if "MemAvailable" not in info:
        return None
    best, source = info["MemAvailable"], "MemAvailable"
    total = info.get("MemTotal", best)
    for folder, limit_f, usage_f, stat_f, key in _cgroup_dirs(cgroups, root):
        limit = _read_int(limit_f)
        if limit is None or limit >= total:  # no limit there (v1 writes a huge number)
            continue
        usage = _read_int(usage_f) or 0
        free = max(0, limit - max(0, usage - _inactive_file(stat_f, key)))
        if free < best:
            best, source = free, f"the memory cgroup limit of {folder}"
    return best, source


def gib(n: int, digits: int = 1) -> str:
    """Bytes as an error line shows them (``digits`` decimals of the largest unit)."""
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.{digits}f} {unit}"
    return f"{n} bytes"


def gib_apart(a: int, b: int) -> tuple[str, str]:
    """:func:`gib` of two byte counts that differ, with as many decimals (up to 3) as show
    them apart, else the exact bytes: a refusal's ``holds 5.1 GiB ... more than the 5.1 GiB
    of memory available`` read as a contradiction (until 2026-12-07, review 59m)."""
    if a == b:
        return gib(a), gib(b)
    for digits in (1, 2, 3):
        shown = gib(a, digits), gib(b, digits)
        if shown[0] != shown[1]:
            return shown
    return f"{a} bytes", f"{b} bytes"


def operand_floor(group_size: int, src: tuple[int, int] | None,
                  dst: tuple[int, int] | None, same_var: bool) -> int:
    """What a trigger's DRAM operands take, every rank of its group at once.  ``src`` and
    ``dst`` are a DRAM operand's ``(byte offset in its var, bytes)``, None for an SBUF
    operand (a source pattern may read a byte twice; the state buffer is small: it counts
    nothing).  Each rank holds its input's and its output's bytes; in one var, the bytes
    of both spans together, once (in place, the output being the input or its first part,
    the input's; two spans apart in one tmp-buf var, both)."""
    if same_var and src is not None and dst is not None:
        (a, n), (b, m) = src, dst
        per_rank = n + m - max(0, min(a + n, b + m) - max(a, b))  # the union of the spans
    else:
        per_rank = sum(span[1] for span in (src, dst) if span is not None)
    return group_size * per_rank


def held_floor(op_kind: str, group_size: int, src: tuple[int, int] | None,
               dst: tuple[int, int] | None, same_var: bool) -> int:
    """What a trigger's DRAM operands hold at once, every rank of its group, now that a
    page goes back after its last access (docs/SIMULATOR.md §3 "Memory"); ``src``, ``dst``
    and ``same_var`` as :func:`operand_floor`'s.  A reduction (all-reduce, reduce-scatter):
    an output element is written once every input element it sums has been read (by then
    the last time), so each rank holds, element by element, its input's or its output's
    bytes, at most the larger of the two spans (a reduce-scatter's input, an all-reduce's
    either).  An all-gather: its inputs are read by every rank while the outputs are made,
    so its :func:`operand_floor`.  Either with an eighth more (:data:`IN_FLIGHT`): the
    operands' bytes on their way, the scratch and gateway bytes written and not yet read and
    the legs' temporaries, which the element-by-element count leaves out (measured:
    ``node64`` with the default options held 0.8 % more than the bare figure besides its
    decoded programs, docs/SIMULATOR.md §3 "Memory")."""
    return held_parts(op_kind, group_size, src, dst, same_var)["held"]


def held_parts(op_kind: str, group_size: int, src: tuple[int, int] | None,
               dst: tuple[int, int] | None, same_var: bool) -> dict[str, int]:
    """:class:`Floor`'s ``held`` (:func:`held_floor`) and ``flight`` (its eighth in flight,
    :data:`IN_FLIGHT`), from one :func:`held_bare`."""
    bare = held_bare(op_kind, group_size, src, dst, same_var)
    return {"held": bare + bare // IN_FLIGHT, "flight": bare // IN_FLIGHT}


def held_bare(op_kind: str, group_size: int, src: tuple[int, int] | None,
              dst: tuple[int, int] | None, same_var: bool) -> int:
    """:func:`held_floor` without the eighth in flight: the operand bytes themselves."""
    if op_kind == "ALLGATHER":
        return operand_floor(group_size, src, dst, same_var)
    return group_size * max((span[1] for span in (src, dst) if span is not None), default=0)


@dataclass(frozen=True)
class Floor:
    """A trigger's floor: its :func:`operand_floor` (``bytes``), its inputs' part of it
    (``inputs``) and what its test data and reference hold besides, while an input is made
    (``making``) and while an output is checked (``checking``,
    :func:`~nrtrewrite.simulate.testdata.reference_bytes`); ``held``, its operands held at
    once (:func:`held_floor`; None: ``bytes``, every operand byte at once), of which
    ``flight`` the eighth more for the bytes in flight (:data:`IN_FLIGHT`); ``programs``, the
    decoded programs' bytes, once they are resident (0 before: :func:`check_operands_fit`'s
    second check, after ``Simulator.load``, weighs them)."""

    trigger: int
    label: str
    ranks: int
    bytes: int
    inputs: int = 0
    making: int = 0
    checking: int = 0
    held: int | None = None
    flight: int = 0
    programs: int = 0

    @property
    def operands(self) -> int:
        """The operand bytes held at once (:func:`held_floor`)."""
        return self.bytes if self.held is None else self.held

    @property
    def total(self) -> int:
        """The most the trigger holds at once: its held operands while an output is
        checked, or its inputs while the last input is made, with the decoded programs."""
        return max(self.operands + self.checking, self.inputs + self.making) + self.programs

    def parts(self) -> str:
        """What :attr:`total` counts, at its moment, as the refusal words it: while an
        output is checked, the operands held (less the bytes in flight), those in flight and
        the test data and reference; while the inputs are made (the larger moment), the
        inputs and their making; either with the decoded programs, once weighed."""
        programs = f", {gib(self.programs)} of decoded programs" if self.programs else ""
        if self.operands + self.checking >= self.inputs + self.making:
            flight = f", {gib(self.flight)} more in flight" if self.flight else ""
            return (f"while an output is checked ({gib(self.operands - self.flight)} of input "
                    f"and output{flight}, {gib(self.checking)} of test data and reference"
                    f"{programs})")
        return (f"while its inputs are made ({gib(self.inputs)} of input, "
                f"{gib(self.making)} of test data and reference{programs})")


def largest_floor(floors) -> Floor | None:
    """The :class:`Floor` with the most bytes in all (the first of equal ones); None for none."""
    return max(floors, key=lambda f: f.total, default=None)


def floors_of_plan(plan) -> list[Floor]:
    """Per trigger of a :class:`~nrtrewrite.lower.LoweringPlan`, its operand floor."""
    out = []
    for tp in plan.triggers:
        t = tp.trigger
        label = trigger_label(t.op.name, t.alu_op.name if t.alu_op is not None else None,
                              t.dtype.name, t.num_elements, len(tp.group))
        src = None if t.src.is_sbuf else (t.src.offset, t.in_bytes)
        dst = None if t.dst.is_sbuf else (t.dst.offset, t.out_bytes)
        n = len(tp.group)
        ref = reference_bytes(t.op.name, t.alu_op.name if t.alu_op is not None else None,
                              t.dtype, t.num_elements, n)
        same = t.src.var_id == t.dst.var_id
        out.append(Floor(t.ordinal, label, n, operand_floor(n, src, dst, same),
                         operand_floor(n, src, None, False), *ref,
                         **held_parts(t.op.name, n, src, dst, same)))
    return out


def floors_of_specs(specs, layout) -> list[Floor]:
    """Per trigger of an output's manifest (:class:`~nrtrewrite.simulate.triggers.TriggerSpec`,
    its vars placed by ``layout``), its floor.  An operand that does not lie in a DRAM var
    of the memory map counts nothing here: SBUF, a var the map lacks, a span past its var's
    end (the run itself names the last two); nor do the test data and reference when the
    output cannot lie in its var (a var the map lacks, more bytes than the var holds: the
    element count is then no size the run reaches)."""
    out = []
    for t in sorted(specs.values(), key=lambda s: s.ordinal):
        ds = t.dsize
        spans = []
        dst_fits = False  # the output lies in its var (set by the dst operand alone)
        for which, (opnd, count) in enumerate(((t.src, t.in_count), (t.dst, t.out_count))):
            try:
                region = layout.var_region(t.subgraph, int(opnd["var_id"]))
                span = (int(opnd["offset"]), count * ds)
            except (SimulationError, KeyError, TypeError, ValueError):  # the run's own error
                spans.append(None)
                continue
            fits = region.kind == "dram" and 0 <= span[0] and sum(span) <= region.size
            spans.append(span if fits else None)
            if which == 1:  # the dst (an SBUF one writes each byte once at most)
                dst_fits = fits if region.kind == "dram" else span[1] <= region.storage
        same = t.src.get("var_id") == t.dst.get("var_id")
        n = len(t.group)
        ref = reference_bytes(t.op, t.alu, t.dtype, t.n, n) if dst_fits else (0, 0)
        out.append(Floor(t.ordinal, t.label(), n,
                         operand_floor(n, spans[0], spans[1], same),
                         operand_floor(n, spans[0], None, False), *ref,
                         **held_parts(t.op, n, spans[0], spans[1], same)))
    return out


def check_operands_fit(floors, *, file: str, available=None, programs: int = 0) -> None:
    """Raise :class:`ResourceError` when the largest floor (:attr:`Floor.total`) is more
    than the memory available (``available()``, default :func:`available_bytes`); the
    error's ``floor`` is that :class:`Floor`.  ``programs``: the bytes the process took
    since the first check (the decoded programs, :func:`resident_bytes` after
    ``Simulator.load`` less before it), already out of the memory available: the second
    check counts them on both sides, in the floor and in the memory it had, so the line
    says what the run holds at once with them (docs/SIMULATOR.md §3 "Memory")."""
    worst = largest_floor(floors)
    got = (available or available_bytes)()
    if worst is None or got is None:
        return
    avail, source = got
    programs = max(0, programs)
    if programs:
        worst = replace(worst, programs=programs)
        avail += programs
        source = f"{source}; {gib(programs)} of it now holds the decoded programs"
    if worst.total > avail:
        held, had = gib_apart(worst.total, avail)
        err = ResourceError(
            f"cannot be simulated on this machine: {worst.label} holds {held} at "
            f"once {worst.parts()}, more than the {had} of memory available "
            f"({source}); simulate it on a machine with more memory, or pass "
            "--no-memory-check to try anyway",
            file=file, trigger=worst.trigger)
        # (the floor weighed, exact, with the decoded programs when the second check's:
        # the soak compares it less its programs with the model's own floor)
        err.floor = worst
        raise err


def resident_bytes(statm: Path = STATM) -> int | None:
    """This process's resident set size now (``/proc/self/statm``), or None when the machine
    does not say (not Linux)."""
    try:
        fields = statm.read_text().split()
        return int(fields[1]) * resource.getpagesize()
    except (OSError, IndexError, ValueError):
        return None


def peak_rss_bytes() -> int:
    """This process's peak resident set size."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class MemoryGuard:
    """Stops a run (:class:`ResourceError`) once the memory available falls below a reserve,
    before the system's out-of-memory killer stops it without a word.  :meth:`check` reads
    the figure at most every :data:`CHECK_INTERVAL` seconds (it costs a clock read otherwise);
    ``enabled`` False (or a machine that does not say) checks nothing."""

    def __init__(self, enabled: bool = True, *, available=None,
                 interval: float | None = None, clock=time.monotonic):
        self.available = available or available_bytes
        self.interval = CHECK_INTERVAL if interval is None else interval
        self.clock = clock
        first = self.available() if enabled else None
        self.enabled = first is not None
        self.reserve = min(RESERVE_BYTES, first[0] // 4) if first is not None else 0
        self.next = 0.0

    def check(self, file: str | None = None, trigger: int | None = None) -> None:
        """Raise :class:`ResourceError` (at ``file``, ``trigger``) when the memory available
        has fallen below the reserve."""
        if not self.enabled:
            return
        now = self.clock()
        if now < self.next:
            return
        self.next = now + self.interval
        got = self.available()
        if got is None or got[0] >= self.reserve:
            return
        avail, source = got
        raise ResourceError(
            f"out of memory: simulate stopped before the system ran out of memory, with "
            f"{gib(avail)} left available ({source}; this process's peak resident size "
            f"{gib(peak_rss_bytes())}): the run needs more memory than this machine has "
            "(docs/SIMULATOR.md §3 'Memory'; --no-memory-check runs on until the system stops "
            "it)", file=file, trigger=trigger)


__all__ = ["available_bytes", "operand_floor", "held_floor", "held_bare", "held_parts",
           "floors_of_plan",
           "floors_of_specs",
           "check_operands_fit", "resident_bytes", "MemoryGuard", "Floor", "largest_floor",
           "RESERVE_BYTES"]
