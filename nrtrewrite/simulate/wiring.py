"""Whether a completed run proves that every interleaving completes (docs/SIMULATOR.md §6).

The run executes one interleaving.  It proves the semaphore wiring deadlock-free for every
interleaving when the wiring is *persistent*: no step of one actor can disable a step another
actor is ready to take.  The actors (a rank's channel queue within one entry, a net proxy)
are sequential and deterministic, and everything that enables a step grows monotonically
(semaphore tokens until consumed, entry starts, a receiver's posting, drained FIFOs) except a
semaphore's count, which only its waits lower.  Steps of different actors commute (counts add
and subtract; data moves do not enable anything), so with persistence the system is
confluent (Keller 1975; Newman's lemma over the finite set of steps): every maximal run
executes the same steps, and one run that completes shows that none can stop short, i.e.
deadlock.

Persistence fails only where two actors can both be ready to wait on the same semaphore and
one's decrement leaves too little for the other.  Waits are always on the rank's own
semaphores (FORMATS §7), and a rank's entries run one after the other, so a semaphore is
persistent when, for every entry, at most one actor waits on it (its channel queues of that
entry, and a proxy, which lives across entries, counting as one each), or when

* only channel queues of the rank's own entries wait on it, and in every entry in which
  several of them do, each waits on it exactly once and it is increased there by one
  increment of exactly the sum they wait for (the entry handshake's ``entry_go``: the leader
  channel releases the other channels at once, FORMATS §3.4); and
* every increment of it comes from a leg of the rank itself, and in every entry the
  increments add up to what the entry's waits take, so that every entry starts with the
  count at 0 (all of an entry's legs end before the next entry starts).

Then the one increment makes every waiter ready at once with exactly enough for all.
:func:`unproven` returns None when every waited-on semaphore is persistent, else the first
that is not proven, and why.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from nrtrewrite.simulate.program import sem_name


def _sem_rows(prog) -> tuple[np.ndarray, ...]:
    """Per semaphore record of a rank's legs: (entry, channel, wait, rank, sem, value).  The
    legs' records tile sem.bin in leg order (the decoder checks it)."""
    n = prog.legs
    leg_entry = np.full(n, -1, np.int64)
    for ent in prog.entries:
        for first, count in ent.queues.values():
            leg_entry[first:first + count] = ent.index
    leg = np.repeat(np.arange(n, dtype=np.int64), prog.l_sem_count[:n].astype(np.int64))
    return (leg_entry[leg], prog.l_channel[:n].astype(np.int64)[leg],
            prog.s_wait.astype(bool), prog.s_rank.astype(np.int64),
            prog.s_sid.astype(np.int64), prog.s_val.astype(np.int64))


def _key(tr: np.ndarray, ts: np.ndarray) -> np.ndarray:
    return tr * 256 + ts  # (rank, semaphore): waits are on the rank's own semaphores


def unproven(programs: dict, transfers: dict) -> str | None:
    """None if the wiring of ``programs`` (rank -> RankProgram) and ``transfers`` ((rank,
    channel) -> the proxy's Transfer list) is persistent (module docstring), else why not.
    The records are gone through a rank at a time: only the waits' keys are kept for all
    ranks, and every column only for the semaphores several channels of an entry wait on
    (until 2026-12-06 six int64 columns of every record of every rank, at once: over
    hundreds of ranks the run's peak, at its very end)."""
    ranks = sorted(programs)
    if not ranks:
        return None
    n_e = n_c = 0
    for r in ranks:  # the largest entry and channel of any record: the keys' radixes
        e, c, *_rest = _sem_rows(programs[r])
        n_e, n_c = max(n_e, int(e.max(initial=0))), max(n_c, int(c.max(initial=0)))
    n_e, n_c = n_e + 2, n_c + 1
    proxies: dict = defaultdict(set)  # key -> (rank, channel) of the proxies waiting on it
    p_incs: dict = defaultdict(int)  # key -> increments by a proxy
    for (r, ch), lst in transfers.items():
        for t in lst:
            if t.first and not t.terminator:
                proxies[_key(*t.handshake)].add((r, ch))
            if t.complete and not t.terminator and t.notify is not None:
                p_incs[_key(*t.notify)] += 1
    waited_keys, wait_pairs = [], []
    for r in ranks:
        e, c, w, tr, ts, _val = _sem_rows(programs[r])
        key = _key(tr[w], ts[w])
        waited_keys.append(np.unique(key))
        wait_pairs.append(np.unique((key * n_e + e[w] + 1) * n_c + c[w]))
    waited = set(np.unique(np.concatenate(waited_keys)).tolist())
    for k in sorted(proxies):
        if k in waited or len(proxies[k]) > 1:
            return (f"{_name(k)} is waited on by the net proxy and by another actor (a proxy "
                    "of another channel or a leg), which can both be ready at once")
    # the (semaphore, entry) pairs several channels wait on: only those need more
    wpairs = np.unique(np.concatenate(wait_pairs))  # distinct (semaphore, entry, channel) waits
    by_pair = wpairs // n_c
    multi = np.unique(by_pair[1:][by_pair[1:] == by_pair[:-1]])
    if not multi.size:
        return None
    mkeys = np.unique(multi // n_e)
    cols = []
    for r in ranks:
        e, _c, w, tr, ts, val = _sem_rows(programs[r])
        key = _key(tr, ts)
        sel = np.isin(key, mkeys)
        cols.append((key[sel], key[sel] * n_e + e[sel] + 1, w[sel], val[sel],
                     np.full(int(sel.sum()), r, np.int64)))
    key, ke, w, val, src = (np.concatenate([x[k] for x in cols]) for k in range(5))
    for k in mkeys.tolist():
        if p_incs.get(k) or np.any(src[(key == k) & ~w] != k // 256):
            who = "a net proxy" if p_incs.get(k) else "another rank"
            return (f"{_name(k)} is waited on by several channels of one entry and increased "
                    f"by {who}: their waits may compete for its tokens")
    # per (semaphore, entry): what its waits take and its increments give
    u, inv = np.unique(ke, return_inverse=True)
    need = np.bincount(inv[w], val[w], u.size).astype(np.int64)
    got = np.bincount(inv[~w], val[~w], u.size).astype(np.int64)
    bad = np.flatnonzero(need != got)
    if bad.size:
        x = int(u[bad[0]])
        return (f"{_name(x // n_e)}: entry {x % n_e - 1} increases it by {int(got[bad[0]])} "
                f"and its waits take {int(need[bad[0]])}, so a later entry whose channels "
                "share its tokens may not start at 0")
    waits_n = np.bincount(inv[w], minlength=u.size)
    incs_n = np.bincount(inv[~w], minlength=u.size)
    chans_n = np.bincount(np.searchsorted(u, by_pair[np.isin(by_pair, u)]), minlength=u.size)
    for i in np.flatnonzero(np.isin(u, multi)).tolist():
        x = int(u[i])
        name, entry = _name(x // n_e), x % n_e - 1
        if waits_n[i] != chans_n[i]:
            return f"{name}: a channel of entry {entry} waits on it more than once"
        if incs_n[i] != 1:
            return (f"{name} is waited on by {int(chans_n[i])} channels in entry {entry} and "
                    f"increased there in {int(incs_n[i])} steps: one channel can take what "
                    "another is ready for")
    return None


def _name(k: int) -> str:
    return f"{sem_name(k % 256)} of rank {k // 256}"


__all__ = ["unproven"]
