"""Mesh events: the event-semaphore window and the event schedule shared by the mesh and RDH
composers (docs/FORMATS.md §2 and §7, docs/DESIGN.md "Mesh and RDH").

A mesh schedule is a list of *events* (``enc_mesh_event_type``, :class:`EncMeshEventType`),
each used at most once per schedule (``encd_init_mesh_event`` enforces it in the runtime),
at most ``ENC_MESH_MAX_NUM_EVENTS`` (64) of them.  Each event owns one semaphore per core,
in the *event window*: event ``t`` is semaphore ``sema_shift_offset + (t & sema_mask)`` with
``sema_shift_offset = 192`` and ``sema_mask = 0x3F`` (ours: the 64 ids at the top of the
core's 256, clear of the TOP_SP's 0..15 and of the 32 ring channels' 16..143).  A mesh
entry's SPAD overlay carries exactly these two numbers; RDH entries use the same ids.

An event counts arrivals: every leg that hands data (or a handshake) to a peer increments
the peer's event semaphore once; the leg that consumes them waits ``wait_ge_and_dec(sem,
count)``.  Across the network the net proxy makes the increment (FORMATS §8).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nrtrewrite.codes import ENC_MESH_MAX_NUM_EVENTS, EncMeshEventType
from nrtrewrite.errors import LoweringError

#: sema_shift_offset of every mesh entry: the first id of the event window.
EVENT_SEMA_SHIFT_OFFSET = 192
#: sema_mask: event types index the window modulo 64 (ENC_MESH_MAX_NUM_EVENTS).
EVENT_SEMA_MASK = ENC_MESH_MAX_NUM_EVENTS - 1
#: The channel a mesh (or RDH) entry's legs run on ("Mesh uses only a single channel").
MESH_CHANNEL = 0
#: Event value -> name, the ``phase_names`` of a mesh or RDH entry's info (shared by every
#: entry: never mutated).
PHASE_NAMES: dict[int, str] = {int(v): v.name for v in EncMeshEventType}


def event_sem(evt: EncMeshEventType | int) -> int:
    """The semaphore id of event ``evt``: sema_shift_offset + (evt & sema_mask)."""
    return EVENT_SEMA_SHIFT_OFFSET + (int(evt) & EVENT_SEMA_MASK)


@dataclass
class Event:
    """enc_mesh_event: one event of a schedule, seen from one rank."""

    evt_type: EncMeshEventType
    valid: bool = True
    src_grp: tuple[int, ...] = ()  # ranks that increment this rank's semaphore
    dst_grp: tuple[int, ...] = ()  # ranks whose semaphore this rank increments
    wait_val: int = 0  # wait_ge_and_dec value on this rank (= len(src_grp))
    what: str = ""

    def to_json(self) -> dict:
        return {"event": self.evt_type.name, "value": int(self.evt_type),
                "semaphore": event_sem(self.evt_type), "from": list(self.src_grp),
                "to": list(self.dst_grp), "wait_val": self.wait_val, "what": self.what}


@dataclass
class EventSchedule:
    """The events of one rank's entry, in schedule order."""

    events: dict[int, Event] = field(default_factory=dict)

    def add(self, evt: EncMeshEventType, *, src=(), dst=(), what: str = "") -> Event:
        if int(evt) in self.events:
            raise LoweringError(f"{evt.name} used twice in one mesh schedule (each event is used "
                                "once; encd_init_mesh_event)")
        if len(self.events) >= ENC_MESH_MAX_NUM_EVENTS:
            raise LoweringError(f"more than ENC_MESH_MAX_NUM_EVENTS ({ENC_MESH_MAX_NUM_EVENTS}) "
                                "events in one schedule")
        ev = Event(evt, True, tuple(src), tuple(dst), len(tuple(src)), what)
        self.events[int(evt)] = ev
        return ev

    def to_json(self) -> list[dict]:
        return [e.to_json() for e in self.events.values()]
