"""Which ``entry_post`` semaphore each trigger's entry handshake counts on.

The entry handshake (docs/DESIGN.md "Entry handshake", docs/FORMATS.md §3.4) makes a rank
wait, at the start of each of its entries, for one post from every same-node peer of the
entry: a peer posts when it starts the entry, that is after finishing every earlier entry.
The waits count posts (``wait_ge_and_dec``), so a post that arrives early - a peer that
shares a *later* trigger with the rank and no trigger in between has nothing holding it
back - would be counted for the earlier entry the rank is still waiting in, and the rank
would touch a peer that has not started.  Replica groups of one subgraph are disjoint, so
this takes groups of different subgraphs that overlap (a tensor-parallel and a
data-parallel group).

So each trigger counts on one of :data:`ENTRY_POST_SEMS` (its *slot*), chosen here, the
same on every rank, so that no post can be counted by a wait it is not for:

    for every trigger ``u``, every two ranks R, Q of ``u``'s group on one node, and every
    trigger ``t`` after the last trigger ``t0`` before ``u`` whose group holds both (every
    trigger before ``u`` if there is none), ``t0 < t < u``, in which R has a same-node
    peer: ``slot(t) != slot(u)``.

Why that is enough (the proof is in docs/DESIGN.md "Entry handshake"): Q can post for ``u``
only after finishing ``t0``, and Q finishing ``t0`` means every member of ``t0``'s group has
started it (each rank's result of an all-reduce, all-gather or reduce-scatter depends on
every member's input), so R has at least started ``t0``; R's waits in ``t0`` itself are
then harmless (every peer R waits for there has started ``t0``), and the only waits that
could count Q's early post for a peer that has not started are those of the triggers
between, which count on other semaphores.

Triggers are taken in program order (every rank runs its entries in that order) and each
gets the lowest slot the rule allows, so a model whose ranks always meet the same peers
(every single-subgraph model, any model whose groups do not overlap) uses slot 0, the
``entry_post`` semaphore 9, alone; a tensor-parallel and a data-parallel group alternating
use two.  The rule is checked conservatively: a rank counts as waiting in every trigger of
a group with another member on its node, and every same-node member as a poster.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from nrtrewrite.emit.address import SEM_ENTRY_POST
from nrtrewrite.errors import LimitError

#: The semaphores an entry handshake may count on: slot 0 is ``entry_post`` (9, in the
#: TOP_SP's range), slots 1..16 are 176..191, the ids after the 32 kangaring peer
#: semaphores (144..175) and before the mesh event window (192..255); docs/FORMATS.md §7.
ENTRY_POST_SEMS = (SEM_ENTRY_POST,) + tuple(range(176, 192))


def entry_post_slots(groups: Sequence[Sequence[int]], ranks_per_node: int,
                     where_of: Callable[[int], dict] | None = None) -> list[int]:
    """The slot (index into :data:`ENTRY_POST_SEMS`) of each trigger, given each trigger's
    replica group in program order and the topology's ranks per node (rank // ranks_per_node
    is its node).  ``where_of(i)``: where the i-th trigger is, for an error (default: the
    trigger named by its position).

    Raises :class:`LimitError` when a trigger would need more than ``len(ENTRY_POST_SEMS)``
    slots."""
    k = len(ENTRY_POST_SEMS)
    nodes: dict[int, _Node] = {}
    #: each distinct group (sorted ranks) and the last trigger it had (-1: none yet); two
    #: ranks last met in the latest trigger of a group holding both
    group_ranks: list[np.ndarray] = []
    group_last: list[int] = []
    gid_of: dict[tuple[int, ...], int] = {}
    parts_of: dict[tuple[int, ...], list[tuple[int, tuple[int, ...], np.ndarray]]] = {}
    interned: dict[tuple[int, ...], tuple[int, ...]] = {}
    slots: list[int] = []
    for u, group in enumerate(groups):
        key = tuple(group)
        parts = parts_of.get(key)
        if parts is None:
            ranks = np.unique(np.asarray(key, np.int64))
            gid_of[key] = len(group_ranks)
            group_ranks.append(ranks)
            group_last.append(-1)
            node = ranks // ranks_per_node
            parts = []
            for n in np.unique(node).tolist():
                members = ranks[node == n]
                if members.size > 1:
                    h = tuple(members.tolist())
                    parts.append((n, interned.setdefault(h, h), members))
            parts_of[key] = parts
        forbidden = 0  # bit s: slot s is forbidden
        for n, h, members in parts:
            state = nodes.get(n)
            if state is None:
                state = nodes[n] = _Node(ranks_per_node, k)
            if state.run_members is not h:  # a run of the same members forbids nothing
                state.flush()
                forbidden |= state.forbidden(h, members, group_ranks, group_last)
        slot = (~forbidden & (forbidden + 1)).bit_length() - 1  # the lowest allowed
        if slot >= k:
            from nrtrewrite.select import ranks_text  # (not at module level: import order)
            raise LimitError(
                f"the entry handshake needs more than the {k} entry_post semaphores "
                f"({ranks_text(ENTRY_POST_SEMS)}): ranks of this replica group on one node have waited on "
                f"every one of them in other groups' entries since they last met",
                **(where_of(u) if where_of is not None else {"trigger": u}))
        for n, h, members in parts:
            nodes[n].extend(h, members, u, slot)
        group_last[gid_of[key]] = u
        slots.append(slot)
    return slots


class _Node:
    """The rule's memory for one node: ``waited[a, s]``, the last trigger in which its
    local rank a waited on slot s (-1: never; allocated when first needed).  The triggers
    of a *run* - consecutive triggers of the node with the same members there, the common
    case - meet the rule at no cost (the members met at the run's previous trigger and
    waited nowhere since), so a run is only written into the table when another set of
    members comes.  Where two ranks last met is not kept per pair: it is the latest trigger
    of a group holding both, and a model has at most 12 distinct groups (NEC_MAX_COMM_N)."""

    def __init__(self, ranks_per_node: int, k: int):
        self.ranks_per_node, self.k = ranks_per_node, k
        self.waited: np.ndarray | None = None
        self.run_members: tuple[int, ...] | None = None
        self.run_local = np.zeros(0, np.int64)
        self.run_slots: dict[int, int] = {}  # slot -> the run's last trigger on it
        self.in_group: dict[tuple[int, ...], np.ndarray] = {}

    def forbidden(self, h: tuple[int, ...], members: np.ndarray,
                  group_ranks: list[np.ndarray], group_last: list[int]) -> int:
        """The slots the rule forbids ranks ``members`` (``h`` as a tuple) on a flushed
        node, as bits."""
        if self.waited is None:
            return 0  # nobody on this node has waited yet
        # in_group[i, g]: members[i] is in group g (the groups known so far: kept per set
        # of members, grown when new groups come)
        in_group = self.in_group.get(h)
        if in_group is None or in_group.shape[1] < len(group_ranks):
            in_group = self.in_group[h] = np.stack(
                [np.isin(members, ranks) for ranks in group_ranks], axis=1)
        # seen[i, g]: 1 + the last trigger of group g if members[i] is in it, else 0
        seen = in_group * (np.asarray(group_last, np.int64) + 1)
        # met[i, j]: the last trigger members i and j met in (-1: never); group by group,
        # so that the temporary is members^2, not members^2 x groups
        met = np.full((members.size, members.size), -1, np.int64)
        for col in seen.T:
            if col.any():
                np.maximum(met, np.minimum.outer(col, col) - 1, out=met)
        np.fill_diagonal(met, np.iinfo(np.int64).max)  # a rank and itself: no constraint
        since = met.min(axis=1)  # per member: its earliest last meeting with another
        bad = (self.waited[members % self.ranks_per_node] > since[:, None]).any(axis=0)
        return sum(1 << s for s in np.flatnonzero(bad).tolist())

    def extend(self, h: tuple[int, ...], members: np.ndarray, u: int, slot: int) -> None:
        """Trigger ``u`` on slot ``slot`` with ranks ``members`` (``h`` as a tuple) here."""
        if self.run_members is not h:
            self.run_members, self.run_slots = h, {}
            self.run_local = members % self.ranks_per_node
        self.run_slots[slot] = u

    def flush(self) -> None:
        if self.run_members is None:
            return
        if self.waited is None:
            self.waited = np.full((self.ranks_per_node, self.k), -1, np.int64)
        for slot, u in self.run_slots.items():
            self.waited[self.run_local, slot] = u
        self.run_members = None
