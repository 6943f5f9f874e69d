"""The in-memory model of a NEFF-like file: small dataclasses, values equal to the spec.

The reader (:mod:`nrtrewrite.neff.reader`) builds these; every later stage
(select, topology, compose, emit, simulate) reads them and nothing else of the
input.  Field names follow NEFF-LIKE.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nrtrewrite.codes import (
    AluOp, CType, DType, DTYPE_SIZE, EncOpType, Opcode, VarType,
)
from nrtrewrite.errors import Warning_


@dataclass(frozen=True)
class NeffHeader:
    """The 1024-byte header (NEFF-LIKE.md §1), every field."""

    pkg_version: int
    header_size: int
    data_size: int
    neff_version_major: int
    neff_version_minor: int
    neff_build_version: str
    num_tpb: int
    hash: bytes  # 32 bytes
    uuid: bytes  # 16 bytes
    name: str
    requested_tpb_count: int
    tpb_per_node: bytes  # 64 bytes
    feature_bits: int
    lnc_size: int


@dataclass(frozen=True)
class Var:
    """One def.json variable.  ``size`` is bytes (per partition for state buffers)."""

    var_id: int
    name: str
    type: VarType
    size: int
    partitions: int | None = None  # state-buffer only, 1..128


@dataclass(frozen=True)
class AccessPattern:
    """An SBUF access pattern (NEFF-LIKE.md §2, 0xD9/0xDA).

    Element (p, i0, i1, i2) lives at byte
    ``start + (i0*step0 + i1*step1 + i2*step2) * dtype_size`` of partition
    ``partition_start + p``.  ``dims`` is ((step0, num0), (step1, num1), (step2, num2)),
    innermost first.
    """

    start: int
    partition_start: int
    partition_count: int
    dims: tuple[tuple[int, int], tuple[int, int], tuple[int, int]]

    @property
    def num_elements(self) -> int:
        n = self.partition_count
        for _step, num in self.dims:
            n *= num
        return n


@dataclass(frozen=True)
class Operand:
    """A trigger's src or dst: a var plus either a byte offset or an SBUF access pattern."""

    var_id: int
    offset: int = 0  # bytes into the var (0xC7/0xC8)
    ap: AccessPattern | None = None  # SBUF access pattern (0xD9/0xDA)

    @property
    def is_sbuf(self) -> bool:
        return self.ap is not None

    def to_json(self) -> dict:
        """The operand as the output manifest records it (docs/FORMATS.md §1.1)."""
        d = {"var_id": self.var_id, "offset": self.offset}
        if self.ap is not None:
            d["ap"] = {"start": self.ap.start, "partition_start": self.ap.partition_start,
                       "partition_count": self.ap.partition_count,
                       "dims": [list(dim) for dim in self.ap.dims]}
        return d


@dataclass(frozen=True)
class SyncFields:
    """Bytes 4..11 of an instruction word; a rewrite keeps them."""

    wait_mode: int = 0
    wait_idx: int = 0
    update_mode: int = 0
    update_idx: int = 0
    semaphore_value: int = 0


@dataclass(frozen=True)
class Trigger:
    """One decoded collective trigger (0xC7, 0xC8, or the 0xD9+0xDA pair).

    ``index`` is the instruction index of the (first) word in its stream;
    ``num_words`` is 1, or 2 for 0xD9+0xDA.  ``ordinal`` numbers triggers of the
    whole model in file order (subgraph, stream order of def.json engines,
    instruction index) and is the trigger id used everywhere downstream.
    """

    ordinal: int
    subgraph: str
    engine: str
    index: int
    opcode: Opcode
    ctype: CType
    op: EncOpType
    dtype: DType
    alu_op: AluOp | None  # None for ALL_GATHER
    replica_group_id: int
    replica_group: tuple[int, ...]
    stream_id: int  # 0 for 0xC7 (no stream field)
    channel_id: int  # 0xDA channel_id; 0 otherwise
    src: Operand
    dst: Operand
    num_elements: int
    sync: SyncFields
    num_words: int = 1
    #: Sync fields (bytes 4..11) of the 0xDA word of a 0xD9+0xDA pair; None otherwise.
    #: ``sync`` is always the first word's.
    ext_sync: SyncFields | None = None

    @property
    def group_size(self) -> int:
        return len(self.replica_group)

    @property
    def dtype_size(self) -> int:
        return DTYPE_SIZE[self.dtype]

    @property
    def in_elements(self) -> int:
        return self.num_elements

    @property
    def out_elements(self) -> int:
        if self.ctype == CType.ALL_GATHER:
            return self.num_elements * self.group_size
        if self.ctype == CType.REDUCE_SCATTER:
            return self.num_elements // self.group_size
        return self.num_elements

    @property
    def in_bytes(self) -> int:
        return self.in_elements * self.dtype_size

    @property
    def out_bytes(self) -> int:
        return self.out_elements * self.dtype_size

    @property
    def uses_sbuf(self) -> bool:
        return self.src.is_sbuf or self.dst.is_sbuf


@dataclass
class Subgraph:
    """One ``sgNN`` folder: def.json plus its engine streams (raw bytes, 64 per word)."""

    name: str
    vars: dict[int, Var]
    replica_groups: list[tuple[int, ...]]
    engines: list[str]
    streams: dict[str, bytes]
    definition: dict = field(default_factory=dict)  # def.json as read (kept for write-back)


@dataclass
class Model:
    """A whole NEFF-like file."""

    path: str
    header: NeffHeader
    subgraphs: list[Subgraph]
    triggers: list[Trigger]
    members: dict[str, bytes]  # every tar member, by name, in archive order
    neff_json: dict = field(default_factory=dict)
    #: Non-fatal notes from reading (e.g. hash not verified); the CLI shows them.
    warnings: list[Warning_] = field(default_factory=list)
    #: False when the file was read with ``verify_hash=False``.
    hash_verified: bool = True

    @property
    def world(self) -> tuple[int, ...]:
        """The union of every replica group of every subgraph, sorted."""
        ranks: set[int] = set()
        for sg in self.subgraphs:
            for grp in sg.replica_groups:
                ranks.update(grp)
        return tuple(sorted(ranks))

    @property
    def lnc_size(self) -> int:
        """The header's lnc_size: 1 or 2 (the reader refuses anything else)."""
        return self.header.lnc_size

    def subgraph(self, name: str) -> Subgraph:
        for sg in self.subgraphs:
            if sg.name == name:
                return sg
        raise KeyError(name)
