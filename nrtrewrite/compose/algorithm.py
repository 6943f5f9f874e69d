"""The composer interface every algorithm family implements, and the registry.

An :class:`Algorithm` does two things:

* :meth:`Algorithm.prepare`, once per trigger (rank-independent): rings,
  chunking, the scratch / gateway bytes it needs, what the manifest shows;
* :meth:`Algorithm.entries`, per rank: the SPAD entries of that rank for the
  trigger, each an :class:`EntrySpec` holding its leg IR
  (:mod:`nrtrewrite.compose.ir`), its buffer views and its peer table.

:mod:`nrtrewrite.lower` drives both and hands every entry to the one emitter
(:func:`nrtrewrite.emit.legs.emit_entries`, consecutive entries at a time).  A new
algorithm is a new module that subclasses :class:`Algorithm`, registers itself with
:func:`register` and adds its line to :data:`MODULES` (imported when an engine is asked for).
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import numpy as np

from nrtrewrite.codes import EncAlgType
from nrtrewrite.emit.buffers import BufferView


@dataclass
class EntrySpec:
    """One SPAD entry of one rank: what to emit and how to tag it."""

    leg: str  # "flat", or a HIER leg name ("intra_redsct", "inter_allr", "intra_allg", ...)
    alg: EncAlgType  # the SPAD algo_type of this entry
    ir: np.ndarray  # LEG_IR_DTYPE rows, grouped by channel in program order
    views: list[BufferView]
    gw_view: int
    peers: list[int]  # ranks; peers[0] is the rank itself
    num_active_channels: int
    groups: int = 1  # chunk groups (pgta), recorded as unrolled_count
    algo_sub_type: int = 0
    trigger_next: bool = False
    sema_shift_offset: int | None = None  # mesh entries: the sema overlay of bytes 4..7
    sema_mask: int | None = None
    reduction_type: int = 0
    info: dict = field(default_factory=dict)  # shown by `schedule`


class Prepared:
    """What :meth:`Algorithm.prepare` decided for one trigger.

    ``manifest`` is what manifest.json's ``triggers`` shows of it (channels, chunk, ...).  An
    algorithm whose record is costly and needed only when the manifest is written (HIER:
    a record per group of every leg, tens of thousands in a large model) gives the cheap
    keys as ``manifest`` and the rest as ``later``, a function made of the plan that returns
    them; :attr:`manifest` calls it on first use (with ``-j 2`` in the process that encodes
    the manifest, while the ranks are lowered: docs/PERFORMANCE.md), :attr:`brief` never
    does (``lower``'s summary table)."""

    __slots__ = ("scratch_bytes", "gw_bytes", "_manifest", "_later", "data",
                 "private_scratch_bytes", "entries")

    def __init__(self, scratch_bytes: int, gw_bytes: int, manifest: dict, data: Any = None,
                 private_scratch_bytes: int = 0, entries: int = 1,
                 later: Callable[[], dict] | None = None) -> None:
        self.scratch_bytes = scratch_bytes  # per rank, RECV / channel-buffer slots
        self.gw_bytes = gw_bytes  # per rank, gateway staging (network sends)
        self._manifest = manifest
        self._later = later
        self.data = data  # the algorithm's own rank-independent plan
        #: per rank, scratch no other trigger reuses (placed after the shared scratch; its
        #: offset in the scratch region is TriggerPlan.private_offset)
        self.private_scratch_bytes = private_scratch_bytes
        #: SPAD entries each rank of the group gets for this trigger (HIER: one per leg)
        self.entries = entries

    @property
    def manifest(self) -> dict:
        """The whole record manifest.json shows (made complete on first use)."""
        if self._later is not None:
            later, self._later = self._later, None
            self._manifest.update(later())
        return self._manifest

    @property
    def brief(self) -> dict:
        """The record's cheap keys: ``channels`` and ``chunk`` at least (HIER: ``channels``
        empty and ``chunk`` its ``pgta``), whether or not the rest was made yet."""
        return self._manifest


class Algorithm(ABC):
    """Base class of the composer families."""

    alg: ClassVar[EncAlgType]

    @abstractmethod
    def prepare(self, ctx, trig, sel) -> Prepared:
        """Rank-independent decisions for ``trig`` (``ctx`` is the LoweringPlan in progress:
        model, topology, options; its memory map does not exist yet)."""

    @abstractmethod
    def entries(self, ctx, tp, rank: int) -> list[EntrySpec]:
        """The SPAD entries of ``rank`` for trigger plan ``tp`` (``ctx.memory`` is set)."""


#: EncAlgType -> the Algorithm that lowers it (filled as the algorithm modules are imported).
ALGORITHMS: dict[EncAlgType, Algorithm] = {}

#: EncAlgType -> the module of :mod:`nrtrewrite.compose` that registers it when imported.
#: :func:`get` imports only the one asked for: ``lower`` of a ring model does not import the
#: mesh, RDH, KangaRing, single-cycle and HIER composers (about 35 ms of its start; every one
#: until 2026-12-06).  A module imports the modules its legs run in (``hier`` imports
#: ``kangaring``, ``single_cycle`` and, through them, ``ring``), so a forked worker or the
#: compose-ahead process never imports a composer the plan's process has not.
MODULES: dict[EncAlgType, str] = {
    EncAlgType.RING: "ring",
    EncAlgType.MESH: "mesh", EncAlgType.SINGLE_STEP_MESH: "mesh",
    EncAlgType.INTRA_RDH: "rdh", EncAlgType.INTER_RDH: "rdh",
    EncAlgType.KANGARING: "kangaring",
    EncAlgType.SINGLE_CYCLE_RING: "single_cycle",
    EncAlgType.HIER: "hier",
}


def register(algorithm: Algorithm) -> Algorithm:
    ALGORITHMS[algorithm.alg] = algorithm
    return algorithm


def lowerable() -> frozenset[EncAlgType]:
    """The engines this build can lower (the selection policy's ``lowerable`` set)."""
    _load_all()
    return frozenset(ALGORITHMS)


def get(alg: EncAlgType) -> Algorithm:
    """The Algorithm that lowers ``alg``, its module imported on first use; ``KeyError`` for
    an engine this build does not lower."""
    if alg not in ALGORITHMS and alg in MODULES:
        importlib.import_module(f"{__package__}.{MODULES[alg]}")  # registers it
    return ALGORITHMS[alg]


def _load_all() -> None:
    """Import every algorithm module (each registers itself)."""
    for module in dict.fromkeys(MODULES.values()):
        importlib.import_module(f"{__package__}.{module}")
