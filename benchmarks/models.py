"""Generated benchmark models (never committed: built on demand under benchmarks/out/)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from nrtrewrite.neff.assembler import assemble_spec

OUT = Path(__file__).resolve().parent / "out"
MIB = 1 << 20
#: Collectives per subgraph: the 4 KiB TOP_SP CTRL SPAD holds 512 entries per subgraph, and a
#: HIER collective (several ranks on each of several nodes) takes up to 3 of them.
PER_SUBGRAPH = 160


def large_spec(ranks: int, count: int = 1000, seed: int = 1,
               lo: int = 4096, hi: int = 256 * MIB, size_scale: float = 1.0) -> dict:
    """``count`` collectives, sizes log-uniform in [lo, hi] (the collective's message size:
    the all-gather output, the reduce-scatter input), a mix of all-reduce (50 %), all-gather
    (25 %) and reduce-scatter (25 %) in bf16 and fp8_e4, over ``ranks`` ranks.  The nodes
    are the default topology's (trn2 at the model's ``lnc_size`` 2: 64 ranks a node), so
    128 ranks are two nodes."""
    rng = np.random.default_rng(seed)
    sizes = np.exp(rng.uniform(math.log(lo), math.log(hi), count)) * size_scale
    kinds = rng.choice(["all_reduce", "all_gather", "reduce_scatter"], count, p=[.5, .25, .25])
    dtypes = rng.choice(["bf16", "fp8_e4"], count)
    cap = int(hi * size_scale) + 4096
    subgraphs = []
    for sg in range(math.ceil(count / PER_SUBGRAPH)):
        body = []
        for i in range(sg * PER_SUBGRAPH, min(count, (sg + 1) * PER_SUBGRAPH)):
            dsz = 2 if dtypes[i] == "bf16" else 1
            elems = max(ranks, int(sizes[i]) // dsz // ranks * ranks)
            if kinds[i] == "all_gather":
                elems = max(1, elems // ranks)
            t = {"dtype": str(dtypes[i]), "src": "x_in", "dst": "x_out", "num_elements": elems}
            if kinds[i] != "all_gather":
                t["op"] = "add"
            body.append({str(kinds[i]): t})
        subgraphs.append({
            "name": f"sg{sg:02d}",
            "vars": [{"name": "x_in", "type": "input", "size": cap},
                     {"name": "x_out", "type": "output", "size": cap}],
            "replica_groups": [f"0..{ranks - 1}"],
            "engines": {"sp": body},
        })
    return {"header": {"pkg_version": 2, "name": f"large{ranks}", "lnc_size": 2},
            "subgraphs": subgraphs}


#: The collectives of a scaling-sweep model: (kind, dtype).
SWEEP_MIX = (("all_reduce", "bf16"), ("all_gather", "bf16"), ("reduce_scatter", "bf16"),
             ("all_reduce", "fp8_e4"))


def sweep_spec(ranks: int, size: int) -> dict:
    """One collective of each kind in SWEEP_MIX, each with a message of ``size`` bytes (the
    all-gather output, the reduce-scatter input)."""
    body = []
    for kind, dtype in SWEEP_MIX:
        dsz = 2 if dtype == "bf16" else 1
        elems = max(ranks, size // dsz // ranks * ranks)
        if kind == "all_gather":
            elems //= ranks
        t = {"dtype": dtype, "src": "x_in", "dst": "x_out", "num_elements": elems}
        if kind != "all_gather":
            t["op"] = "add"
        body.append({kind: t})
    return {"header": {"pkg_version": 2, "name": f"sweep{ranks}", "lnc_size": 2},
            "subgraphs": [{"name": "sg00",
                           "vars": [{"name": "x_in", "type": "input", "size": size + 4096},
                                    {"name": "x_out", "type": "output", "size": size + 4096}],
                           "replica_groups": [f"0..{ranks - 1}"],
                           "engines": {"sp": body}}]}


def build(name: str, spec: dict, out: Path | None = None) -> Path:
    out = out or OUT
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.neff"
    path.write_bytes(assemble_spec(spec, source=name))
    return path
