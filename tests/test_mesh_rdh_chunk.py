"""docs/FORMATS.md §1.1 ``chunk`` of a mesh or RDH trigger: the whole op, ``chunk_size_n``
the larger of its input and output element counts (docs/SELECTION.md's ``op_bytes`` in
elements), ``pgta`` 1, one channel, ``tail_chunk`` 0."""

from __future__ import annotations

import json
from pathlib import Path

from test_simulate import lower_neff

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def test_a_mesh_or_rdh_chunk_is_the_larger_of_input_and_output(tmp_path):
    """fixtures/mix8.yaml over 8 ranks, the default policy (mesh at most 1 MiB, RDH above):
    trigger 0 an RDH all-reduce of 2,097,152 bf16, 2 an all-gather of 96 fp16 a rank by
    mesh (768 out), 4 an RDH reduce-scatter of 524,288 (its input), 8 an all-gather of 4096
    fp8 by mesh (32,768 out)."""
    out = lower_neff(FIX / "mix8.neff", tmp_path / "o", algo=None)
    triggers = json.loads((out / "manifest.json").read_text())["triggers"]
    want = {0: ("INTRA_RDH", 2_097_152), 2: ("MESH", 96 * 8), 4: ("INTRA_RDH", 524_288),
            8: ("MESH", 4096 * 8)}
    for k, (algorithm, n) in want.items():
        t = triggers[k]
        assert t["algorithm"] == algorithm
        assert t["chunk"] == {"chunk_size_n": n, "pgta": 1, "channels": 1, "tail_chunk": 0}, k
