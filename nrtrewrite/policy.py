"""The selection policy: ONE table of size windows, the precedence cascade, what this build
can lower, and the channel-count rule.

The runtime keeps per-(mesh sub-type, op) byte windows ``op_min_limit[op]`` /
``op_max_limit[op]`` and ``_sbuf`` variants for 2-D (SBUF) tensors in
``enc_alg_mesh_subtype`` (aws-neuron-sdk ``src/libnrt/include/nrt/nec.h``); the numbers it
uses are not public beyond the documented sweet ranges.  :data:`DEFAULT_WINDOWS` is our one
table for every size-gated engine, each row with its source; docs/SELECTION.md lists them.
A window is half-open: an engine is in window when ``op_min_limit <= bytes < op_max_limit``
(``None`` = no upper limit), where ``bytes`` is the message size as nccom-test reports it
(the all-reduce buffer, the all-gather output, the reduce-scatter input).
"""

from __future__ import annotations

import decimal

from dataclasses import dataclass, field

from nrtrewrite.codes import EncAlgType, EncOpType

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

INTRA = "intra"
INTER = "inter"

_SRC_INTRANODE = ("aws-neuron-sdk neuron-runtime/explore/intranode-collective-comm.rst, "
                  "Algorithm Summary: Mesh < 1MB, RDH 1-56MB, KangaRing > 56MB, Ring fallback")
_SRC_A2A = ("libnrt enc_post_operation: ALLTOALL asserts alg == ENC_ALG_MESH "
            "(\"alltoall cannot be supported without Mesh algorithm\"), seed 001 §3 QUIRK")
_SRC_INTER_DESIGN = ("design (docs/SELECTION.md): aws-neuron-sdk internode-collective-comm.rst "
                     "gives only the shape (Mesh small, RDH small-to-medium, Ring large); "
                     "the numbers are ours")


@dataclass(frozen=True)
class SizeWindow:
    """One row of the size-window table: when ``alg`` may run ``op`` at ``scope``."""

    scope: str  # INTRA (group inside one node) or INTER (group spans nodes)
    alg: EncAlgType
    op: EncOpType
    op_min_limit: int
    op_max_limit: int | None
    op_min_limit_sbuf: int
    op_max_limit_sbuf: int | None
    source: str

    def limits(self, sbuf: bool) -> tuple[int, int | None]:
        if sbuf:
            return self.op_min_limit_sbuf, self.op_max_limit_sbuf
        return self.op_min_limit, self.op_max_limit


def _rows(scope: str, alg: EncAlgType, ops, lo: int, hi: int | None, source: str,
          lo_sbuf: int | None = None, hi_sbuf: int | None | str = "same") -> list[SizeWindow]:
    return [SizeWindow(scope, alg, op, lo, hi, lo if lo_sbuf is None else lo_sbuf,
                       hi if hi_sbuf == "same" else hi_sbuf, source) for op in ops]


_AR_AG_RS = (EncOpType.ALLREDUCE, EncOpType.ALLGATHER, EncOpType.REDUCE_SCATTER)

#: The one size-window table.  SBUF columns equal the DRAM ones: no public source gives
#: different numbers for 2-D tensors; the columns exist so that a policy can set them.
DEFAULT_WINDOWS: tuple[SizeWindow, ...] = tuple(
    _rows(INTRA, EncAlgType.MESH, _AR_AG_RS, 0, 1 * MiB, _SRC_INTRANODE)
    + _rows(INTRA, EncAlgType.MESH, (EncOpType.ALLTOALL,), 0, None, _SRC_A2A)
    + _rows(INTRA, EncAlgType.INTRA_RDH, _AR_AG_RS, 1 * MiB, 56 * MiB, _SRC_INTRANODE)
    + _rows(INTRA, EncAlgType.KANGARING, _AR_AG_RS, 56 * MiB, None, _SRC_INTRANODE)
    + _rows(INTER, EncAlgType.MESH, _AR_AG_RS, 0, 64 * KiB, _SRC_INTER_DESIGN)
    + _rows(INTER, EncAlgType.MESH, (EncOpType.ALLTOALL,), 0, None, _SRC_A2A)
    + _rows(INTER, EncAlgType.SINGLE_CYCLE_RING, (EncOpType.ALLREDUCE,), 0, 4 * MiB,
            _SRC_INTER_DESIGN)
    + _rows(INTER, EncAlgType.INTER_RDH, _AR_AG_RS, 0, 64 * MiB, _SRC_INTER_DESIGN)
)

#: enc_post_operation's precedence cascade (public libnrt notes, "Algorithm Taxonomy"
#: §2.1 / "Overview" §2.1): every gate runs, the first legal one in this order wins.
DEFAULT_PRECEDENCE: tuple[EncAlgType, ...] = (
    EncAlgType.HIER, EncAlgType.INTRA_RDH, EncAlgType.MESH, EncAlgType.KANGARING,
    EncAlgType.SINGLE_CYCLE_RING, EncAlgType.INTER_RDH, EncAlgType.RING,
)


@dataclass(frozen=True)
class Policy:
    """Everything :func:`nrtrewrite.select.select` decides with, in one value."""

    #: Engines this build can lower.  Grows as issues land (MESH, INTRA_RDH, ...).
    lowerable: frozenset[EncAlgType] = frozenset({
        EncAlgType.RING, EncAlgType.MESH, EncAlgType.SINGLE_STEP_MESH, EncAlgType.INTRA_RDH,
        EncAlgType.INTER_RDH, EncAlgType.KANGARING, EncAlgType.SINGLE_CYCLE_RING,
        EncAlgType.HIER})
    #: Engines this build can lower as a leg of a HIER collective (compose/hier.py
    #: LEG_ENGINES); a leg whose policy engine is not here is lowered with the first engine
    #: of its slot's legal set that is (docs/SELECTION.md §6).
    hier_leg_lowerable: frozenset[EncAlgType] = frozenset({
        EncAlgType.RING, EncAlgType.KANGARING, EncAlgType.SINGLE_CYCLE_RING})
    #: (engine, op) pairs a lowerable engine still cannot lower (the mesh composers do not
    #: compose all-to-all, which no trigger of a NEFF-like model carries).
    not_lowerable_ops: frozenset[tuple[EncAlgType, EncOpType]] = frozenset({
        (EncAlgType.MESH, EncOpType.ALLTOALL)})
    windows: tuple[SizeWindow, ...] = DEFAULT_WINDOWS
    precedence: tuple[EncAlgType, ...] = DEFAULT_PRECEDENCE
    #: Channel rule (docs/SELECTION.md "Channels"): one channel per this many message bytes,
    #: rounded down to a power of two, at least 1.
    bytes_per_channel: int = 256 * KiB
    #: Hard cap, NEC_MAX_CHANNELS.
    max_channels: int = 32
    #: Cap for rings inside one node: the number of distinct directed device cycles
    #: (4 on the 4x4 torus; more channels would only repeat a ring).
    max_channels_intra: int = 4
    #: Cap for rings spanning nodes: one channel per device of a node, so each channel
    #: leaves the node from a different device (and its EFA interface).
    max_channels_inter: int = 16
    #: Each channel must carry at least this many elements per rank (two even 32-element
    #: half-chunks, seed 001 §2 GOTCHA).
    min_elements_per_rank_channel: int = 64
    #: INTER mesh: at most this many nodes (ingress congestion grows with N; design).
    inter_mesh_max_nodes: int = 16
    #: INTER_RDH: node count a power of two of at least this (libnrt gate "rank_n pow-2 > 7").
    inter_rdh_min_nodes: int = 8
    _index: dict = field(default=None, init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        """Refuse, naming the field and what it holds last (docs/SELECTION.md §9), every value
        ``select`` cannot work with: until 2026-12-06 only the two fields the channel rule
        divides by were checked, and a string in ``precedence`` or ``lowerable``, a ``None``
        count or limit raised an AttributeError or TypeError in ``select``, a float cap gave a
        float channel count, and a duplicate window row, a row of an unknown scope or with
        its limits swapped was silently never used."""
        # (the channel rule divides by both: a 0 raised ZeroDivisionError in select until
        # 2026-12-06; the caps below 1 are named in the reason instead, docs/SELECTION.md §7)
        for name in ("bytes_per_channel", "min_elements_per_rank_channel"):
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                raise ValueError(f"Policy.{name} must be a positive integer, not {value!r}")
        # the caps (one below 1 leaves the one channel a collective runs, §7) and the node
        # bounds (a multi-node group has 2 nodes or more: below 2 they bound nothing more)
        for name in ("max_channels", "max_channels_intra", "max_channels_inter",
                     "inter_mesh_max_nodes", "inter_rdh_min_nodes"):
            value = getattr(self, name)
            if not _is_int(value):
                raise ValueError(f"Policy.{name} must be an integer, not {value!r}")
        for name in ("lowerable", "hier_leg_lowerable"):
            object.__setattr__(self, name, frozenset(_engines(name, getattr(self, name))))
        object.__setattr__(self, "not_lowerable_ops", frozenset(_op_pairs(self.not_lowerable_ops)))
        precedence = _engines("precedence", self.precedence, ordered=True)
        if not precedence:
            raise ValueError("Policy.precedence must name at least one engine, not ()")
        for i, alg in enumerate(precedence):
            if alg in precedence[:i]:
                raise ValueError(f"Policy.precedence[{i}] must be an engine no earlier item "
                                 f"names, not {alg.name} (precedence[{precedence.index(alg)}])")
        object.__setattr__(self, "precedence", precedence)
        windows = _sequence("windows", self.windows, "a tuple of SizeWindow rows")
        index: dict[tuple[str, EncAlgType, EncOpType], SizeWindow] = {}
        at: dict[tuple[str, EncAlgType, EncOpType], int] = {}
        for i, row in enumerate(windows):
            _check_row(i, row)
            key = (row.scope, row.alg, row.op)
            if key in at:
                raise ValueError(f"Policy.windows[{i}] must be a (scope, alg, op) no earlier row "
                                 f"has, not ({row.scope!r}, {row.alg.name}, {row.op.name}) "
                                 f"(windows[{at[key]}])")
            at[key] = i
            index[key] = row
        object.__setattr__(self, "windows", windows)
        object.__setattr__(self, "_index", index)

    def window(self, scope: str, alg: EncAlgType, op: EncOpType) -> SizeWindow | None:
        """The table row for (scope, alg, op), or None when ``alg`` is not size-gated."""
        return self._index.get((scope, alg, op))

    def in_window(self, scope: str, alg: EncAlgType, op: EncOpType, nbytes: int,
                  sbuf: bool = False) -> tuple[bool, str]:
        """Is ``nbytes`` inside the window of (scope, alg, op)?  (bool, reason)."""
        row = self.window(scope, alg, op)
        if row is None:
            return True, "no size window"
        lo, hi = row.limits(sbuf)
        suffix = "_sbuf" if sbuf else ""
        if nbytes < lo:
            return False, (f"{fmt_bytes(nbytes)} below op_min_limit{suffix}[{op.name}] "
                           f"{fmt_bytes(lo)}")
        if hi is not None and nbytes >= hi:
            return False, (f"{fmt_bytes(nbytes)} not below op_max_limit{suffix}[{op.name}] "
                           f"{fmt_bytes(hi)}")
        top = "inf" if hi is None else fmt_bytes(hi)
        return True, f"{fmt_bytes(nbytes)} in [{fmt_bytes(lo)}, {top}){' (sbuf)' if sbuf else ''}"

    def is_lowerable(self, alg: EncAlgType, op: EncOpType | None = None) -> bool:
        return alg in self.lowerable and (op is None or (alg, op) not in self.not_lowerable_ops)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _shown(value) -> str:
    """A value as a refusal shows it: an enum member by its class and name
    (``EncAlgType.INVALID``), a pair of them as a pair, anything else as its repr."""
    if isinstance(value, (EncAlgType, EncOpType)):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, tuple):
        return "(" + ", ".join(_shown(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return repr(value)


def _sequence(name: str, value, what: str) -> tuple:
    """``value`` as a tuple: a tuple or a list (anything else, a string first, refused)."""
    if not isinstance(value, (tuple, list)):
        raise ValueError(f"Policy.{name} must be {what}, not {value!r}")
    return tuple(value)


def _is_engine(value) -> bool:
    return isinstance(value, EncAlgType) and value != EncAlgType.INVALID


def _engines(name: str, value, ordered: bool = False) -> tuple:
    """The engines of ``Policy.<name>``: a tuple or list (``ordered``: each item named by its
    index), else a set, frozenset, tuple or list (the first offending value in repr order),
    of EncAlgType members other than INVALID (an int, a name, INVALID: refused)."""
    if ordered:
        items = _sequence(name, value, "a tuple of EncAlgType engines")
        for i, alg in enumerate(items):
            if not _is_engine(alg):
                raise ValueError(f"Policy.{name}[{i}] must be an EncAlgType engine (not "
                                 f"INVALID), not {_shown(alg)}")
        return items
    if not isinstance(value, (set, frozenset, tuple, list)):
        raise ValueError(f"Policy.{name} must be a frozenset of EncAlgType engines, not "
                         f"{value!r}")
    bad = sorted(_shown(a) for a in value if not _is_engine(a))
    if bad:
        raise ValueError(f"Policy.{name} must hold EncAlgType engines (not INVALID) only, "
                         f"not {bad[0]}")
    return tuple(value)


def _op_pairs(value) -> tuple:
    """``Policy.not_lowerable_ops``: a set of (EncAlgType engine, EncOpType) pairs."""
    if not isinstance(value, (set, frozenset, tuple, list)):
        raise ValueError(f"Policy.not_lowerable_ops must be a frozenset of (EncAlgType, "
                         f"EncOpType) pairs, not {value!r}")
    bad = sorted(_shown(p) for p in value
                 if not (isinstance(p, tuple) and len(p) == 2 and _is_engine(p[0])
                         and isinstance(p[1], EncOpType)))
    if bad:
        raise ValueError(f"Policy.not_lowerable_ops must hold (EncAlgType, EncOpType) pairs "
                         f"only, not {bad[0]}")
    return tuple(value)


def _check_row(i: int, row) -> None:
    """Row ``i`` of ``Policy.windows``: a SizeWindow of a known scope, an engine, an op, and
    limits that are byte counts, each minimum at most its maximum (equal: an empty window,
    the engine never inside it)."""
    where = f"Policy.windows[{i}]"
    if not isinstance(row, SizeWindow):
        raise ValueError(f"{where} must be a SizeWindow, not {row!r}")
    if row.scope not in (INTRA, INTER):
        raise ValueError(f"{where}.scope must be {INTRA!r} or {INTER!r}, not {row.scope!r}")
    if not _is_engine(row.alg):
        raise ValueError(f"{where}.alg must be an EncAlgType engine (not INVALID), not "
                         f"{_shown(row.alg)}")
    if not isinstance(row.op, EncOpType):
        raise ValueError(f"{where}.op must be an EncOpType, not {_shown(row.op)}")
    for suffix in ("", "_sbuf"):
        lo, hi = getattr(row, "op_min_limit" + suffix), getattr(row, "op_max_limit" + suffix)
        if not _is_int(lo) or lo < 0:
            raise ValueError(f"{where}.op_min_limit{suffix} must be a non-negative integer, "
                             f"not {lo!r}")
        if hi is not None and (not _is_int(hi) or hi < 0):
            raise ValueError(f"{where}.op_max_limit{suffix} must be a non-negative integer or "
                             f"None (no upper limit), not {hi!r}")
        if hi is not None and lo > hi:
            raise ValueError(f"{where}.op_min_limit{suffix} must be at most op_max_limit"
                             f"{suffix} {hi}, not {lo}")


DEFAULT_POLICY = Policy()


def fmt_bytes(n: int) -> str:
    """64 MiB, 1.5 KiB, 100 B ...; a size the four digits round is followed by its bytes,
    ``8 MiB (8388610 B)``, so that a limit's edge is never hidden (``8 MiB, more than 8 MiB``)."""
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= size:
            whole, rest = divmod(n, size)
            if not rest:
                return f"{whole} {unit}"
            # exact decimal arithmetic: a float's 53 bits turned 2^53 + 1 bytes into a whole
            # "8388608 GiB" and 10^35 bytes into digits of its own (found by a tester)
            with decimal.localcontext() as ctx:
                ctx.prec = len(str(n)) + 8
                val = decimal.Decimal(n) / size
                num = f"{val:.4g}"
                if val >= 10000 or "e" in num.lower():  # never an exponent
                    num = f"{val:.0f}"
                elif "." in num:  # (Decimal keeps the zeros float drops: 8.000)
                    num = num.rstrip("0").rstrip(".")
                exact = decimal.Decimal(num) * size == n
            text = f"{num} {unit}"
            return text if exact else f"{text} ({n} B)"
    return f"{n} B"
