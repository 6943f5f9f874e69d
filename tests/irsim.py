"""A symbolic executor of the leg IR, independent of the emitter and of the simulator.

Every element of every buffer holds ``(e, mask)``: the op-space element it stands for and the
set of group positions whose input it sums (a bitmask).  Inputs appear when a rank starts
its first entry of the trigger; a leg waits its semaphores (counters), reads each source
element (which must exist, be tagged with the leg's element and, for a reduce, come from
disjoint contributors), writes every destination (each address at most once per
trigger) and increments its semaphores; a rank's entries run in order, the channel programs
of an entry concurrently, picked at random.  When a rank finishes its last entry its output
must hold the collective's result.  Network destinations are delivered directly (the net
proxy's FIFOs are the simulator's business).
"""

from __future__ import annotations

import random

import numpy as np

from nrtrewrite.codes import EncOpType
from nrtrewrite.compose.leaves import Buf
from nrtrewrite.compose.views import standard_views
from nrtrewrite.lower import rank_entries


class SymbolicError(AssertionError):
    pass


def _rows(ir: np.ndarray) -> dict[int, list]:
    keep = ir["stop"] > ir["start"]
    if "keep" in ir.dtype.names:
        keep |= ir["keep"] != 0
    progs: dict[int, list] = {}
    for row in ir[keep]:
        progs.setdefault(int(row["channel"]), []).append(row)
    return progs


def run_trigger(plan, ordinal: int, *, seed: int = 0, max_steps: int = 10_000_000) -> dict:
    """Execute trigger ``ordinal`` of ``plan`` on every rank of its group; returns stats.

    Raises :class:`SymbolicError` on a read of a missing or wrong value, a double count, a
    double write, a deadlock, a semaphore left non-zero or a wrong output."""
    tp = next(t for t in plan.triggers if t.trigger.ordinal == ordinal)
    trig = tp.trigger
    group = list(tp.group)
    pos = {r: i for i, r in enumerate(group)}
    everyone = (1 << len(group)) - 1
    rng = random.Random(seed)
    entries = {r: [spec for t, spec in rank_entries(plan, r) if t is tp] for r in group}
    views = {r: standard_views(plan.memory, trig, pos[r]) for r in group}
    n = trig.num_elements
    # each rank's memory, address -> (element, contributor mask); a dict per rank, so that
    # a leg looks its ranks' up once and each element by its address alone (a (rank,
    # address) key per element took most of the run's time)
    mem: dict[int, dict[int, tuple[int, int]]] = {}
    sems: dict[tuple[int, int], int] = {}
    state = {r: {"entry": -1, "progs": {}, "pc": {}} for r in group}
    done: set[int] = set()
    stats = {"legs": 0, "entries": {r: len(entries[r]) for r in group}}

    def in_elements(r):
        if trig.op == EncOpType.ALLGATHER:
            return range(pos[r] * n, (pos[r] + 1) * n)
        return range(n)

    def out_expect(r):
        if trig.op == EncOpType.ALLREDUCE:
            return [(e, e, everyone) for e in range(n)]
        if trig.op == EncOpType.ALLGATHER:
            return [(e, e, 1 << (e // n)) for e in range(n * len(group))]
        c = n // len(group)
        return [(e, e, everyone) for e in range(pos[r] * c, (pos[r] + 1) * c)]

    def start_entry(r, k):
        st = state[r]
        st["entry"] = k
        if k == 0:
            elements = in_elements(r)
            addrs = views[r][Buf.IN].address(np.arange(elements.start, elements.stop)).tolist()
            bit = 1 << pos[r]
            mem.setdefault(r, {}).update((a, (e, bit)) for e, a in zip(elements, addrs))
        if k >= len(entries[r]):
            finish(r)
            return
        spec = entries[r][k]
        st["progs"] = _rows(spec.ir)
        st["pc"] = {c: 0 for c in st["progs"]}
        st["spec"] = spec
        if not st["progs"]:
            start_entry(r, k + 1)

    def finish(r):
        expect = out_expect(r)
        elements = np.array([e for e, _t, _m in expect], dtype=np.int64)
        addrs = views[r][Buf.OUT].address(elements).tolist()
        rmem = mem.setdefault(r, {})
        for (e, tag, mask), a in zip(expect, addrs):
            got = rmem.get(a)
            if got != (tag, mask):
                raise SymbolicError(f"rank {r}: output element {e} is {got}, expected "
                                    f"{(tag, mask)}")
        done.add(r)

    written: dict[int, set[int]] = {}  # each rank's addresses written by a leg

    def run_leg(r, row, spec):
        peers, vs = spec.peers, spec.views
        for i in range(int(row["n_wait"])):
            key = (r, int(row["wait_sem"][i]))
            sems[key] = sems.get(key, 0) - int(row["wait_val"][i])
        a, b = int(row["start"]), int(row["stop"])
        ns, nd = int(row["n_src"]), int(row["n_dst"])
        if nd:
            es = np.arange(a, b)
            src_addr = [vs[int(row["src_view"][i])].address(es).tolist() for i in range(ns)]
            dst_addr = [vs[int(row["dst_view"][j])].address(es).tolist() for j in range(nd)]
            src_owner = [peers[int(row["src_peer"][i])] for i in range(ns)]
            dst_owner = [peers[int(row["dst_peer"][j])] for j in range(nd)]
            unreduced = ns > 1 and not row["reduce"]
            # per source: its index, owner rank, memory lookup and addresses; per
            # destination: its owner, written set, memory and addresses
            srcs = [(i, owner, mem.setdefault(owner, {}).get, src_addr[i])
                    for i, owner in enumerate(src_owner)]
            dsts = [(owner, written.setdefault(owner, set()), mem.setdefault(owner, {}),
                     dst_addr[j]) for j, owner in enumerate(dst_owner)]
            for k, e in enumerate(range(a, b)):
                mask = 0
                for i, owner, get, addrs in srcs:
                    val = get(addrs[k])
                    if val is None:
                        raise SymbolicError(f"rank {r} leg {dict_row(row)} reads element {e} of "
                                            f"rank {owner} view {int(row['src_view'][i])} before "
                                            "it was written")
                    if val[0] != e:
                        raise SymbolicError(f"rank {r} reads element {val[0]} where element {e} "
                                            f"belongs ({dict_row(row)})")
                    if mask & val[1]:
                        raise SymbolicError(f"rank {r} counts contributors {mask & val[1]:#x} "
                                            f"twice in element {e} ({dict_row(row)})")
                    if unreduced:
                        raise SymbolicError("several sources without a reduce")
                    mask |= val[1]
                for owner, wrote, dmem, addrs in dsts:
                    addr = addrs[k]
                    if addr in wrote:
                        raise SymbolicError(f"rank {r} writes element {e} of rank {owner} a "
                                            f"second time ({dict_row(row)})")
                    wrote.add(addr)
                    dmem[addr] = (e, mask)
        for i in range(int(row["n_inc"])):
            key = (peers[int(row["inc_peer"][i])], int(row["inc_sem"][i]))
            sems[key] = sems.get(key, 0) + int(row["inc_val"][i])
        stats["legs"] += 1

    for r in group:
        start_entry(r, 0)
    steps = 0
    while len(done) < len(group):
        progress = False
        order = [(r, c) for r in group if r not in done for c in state[r]["progs"]]
        rng.shuffle(order)
        for r, c in order:
            st = state[r]
            burst = rng.randint(1, 4)
            while burst and r not in done and c in st["progs"]:
                prog = st["progs"][c]
                pc = st["pc"][c]
                if pc >= len(prog):
                    break
                row = prog[pc]
                if not all(sems.get((r, int(row["wait_sem"][i])), 0) >= int(row["wait_val"][i])
                           for i in range(int(row["n_wait"]))):
                    break
                run_leg(r, row, st["spec"])
                st["pc"][c] += 1
                progress = True
                burst -= 1
                steps += 1
                if all(st["pc"][ch] >= len(p) for ch, p in st["progs"].items()):
                    start_entry(r, st["entry"] + 1)
                    break
        if not progress:
            stuck = []
            for r in group:
                st = state[r]
                if r in done:
                    continue
                for c, prog in st["progs"].items():
                    pc = st["pc"][c]
                    if pc < len(prog):
                        row = prog[pc]
                        waits = [(int(row["wait_sem"][i]),
                                  sems.get((r, int(row["wait_sem"][i])), 0))
                                 for i in range(int(row["n_wait"]))]
                        stuck.append(f"rank {r} entry {st['entry']} ch {c} pc {pc} "
                                     f"{dict_row(row)} sems {waits}")
            raise SymbolicError("deadlock: " + "; ".join(stuck[:6]))
        if steps > max_steps:
            raise SymbolicError("too many steps")
    left = {k: v for k, v in sems.items() if v}
    if left:
        raise SymbolicError(f"semaphores left non-zero: {dict(list(left.items())[:8])}")
    return stats


def dict_row(row) -> dict:
    return {"leaf": int(row["leaf"]), "ch": int(row["channel"]), "step": int(row["step"]),
            "half": int(row["half"]), "range": (int(row["start"]), int(row["stop"])),
            "src": [(int(row["src_view"][i]), int(row["src_peer"][i]))
                    for i in range(int(row["n_src"]))],
            "dst": [(int(row["dst_view"][j]), int(row["dst_peer"][j]))
                    for j in range(int(row["n_dst"]))]}


# ---------------------------------------------------------------------------
# small models

def collective_spec(ops: list[dict], ranks, *, lnc: int = 2, nbytes: int = 1 << 20,
                    groups=None) -> dict:
    """An assembler spec running ``ops`` on sp, op ``k`` from var ``in{k}`` into ``out{k}``
    (``nbytes`` each; separate vars, so no trigger writes a buffer an earlier one produced)."""
    import copy
    group = list(range(ranks)) if isinstance(ranks, int) else list(ranks)
    ops = copy.deepcopy(ops)
    vars_ = []
    for k, op in enumerate(ops):
        body = next(iter(op.values()))
        body["src"], body["dst"] = f"in{k}", f"out{k}"
        vars_ += [{"name": f"in{k}", "type": "input", "size": nbytes},
                  {"name": f"out{k}", "type": "output", "size": nbytes}]
    return {"header": {"pkg_version": 2, "name": "irsim", "lnc_size": lnc},
            "subgraphs": [{"name": "sg00", "vars": vars_,
                           "replica_groups": groups or [group],
                           "engines": {"sp": ops, "pool": []}}]}


def ar(n: int, op: str = "add", dtype: str = "bf16") -> dict:
    return {"all_reduce": {"dtype": dtype, "op": op, "src": "in", "dst": "out",
                           "num_elements": n}}


def ag(n: int, dtype: str = "bf16") -> dict:
    return {"all_gather": {"dtype": dtype, "src": "in", "dst": "out", "num_elements": n}}


def rs(n: int, op: str = "add", dtype: str = "bf16") -> dict:
    return {"reduce_scatter": {"dtype": dtype, "op": op, "src": "in", "dst": "out",
                               "num_elements": n}}


def plan_ops(ops: list[dict], ranks, *, lnc: int = 2, algo: str | None = None,
             topology: str | None = None, host_cc: bool = False, **kw):
    """Assemble, read and plan a small model."""
    from nrtrewrite.lower import LowerOptions, plan_lowering
    from nrtrewrite.neff.assembler import assemble_spec
    from nrtrewrite.neff.reader import read_model_bytes

    model = read_model_bytes(assemble_spec(collective_spec(ops, ranks, lnc=lnc, **kw)))
    return plan_lowering(model, LowerOptions(algo=algo, topology=topology, host_cc=host_cc))


def run_all(plan, seed: int = 0) -> list[dict]:
    return [run_trigger(plan, t.trigger.ordinal, seed=seed) for t in plan.triggers]


SMALL_TWO_NODE_TOPOLOGY = {
    "format": "nrtrewrite-topology/1", "name": "trn2-4dev", "platform": "trn2",
    "devices_per_node": 4, "torus": [2, 2], "routing_ids": [0, 1, 2, 3]}
