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
        # (the channel rule divides by both: a 0 raised ZeroDivisionError in select until
        # 2026-12-06; the caps below 1 are named in the reason instead, docs/SELECTION.md §7)
        for name in ("bytes_per_channel", "min_elements_per_rank_channel"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Policy.{name} must be a positive integer, not {value!r}")
        index: dict[tuple[str, EncAlgType, EncOpType], SizeWindow] = {}
        for row in self.windows:
            index[(row.scope, row.alg, row.op)] = row
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
