"""The row builders' fast paths (params._put, copy_rows' increment packing) and the mesh
peers memo (compose/mesh.mesh_peers)."""

import numpy as np
import pytest

from nrtrewrite.compose import ir as IR
from nrtrewrite.compose import params as P
from nrtrewrite.compose.mesh import mesh_peers
from nrtrewrite.topology.model import load_topology


@pytest.mark.parametrize("n", [1, P._FEW_CELLS, P._FEW_CELLS + 1, 40])
def test_put_writes_the_same_cells_one_by_one_or_at_once(n):
    row = [q // IR.MAX_INC for q in range(n)]
    slot = [q % IR.MAX_INC for q in range(n)]
    rows = IR.empty(row[-1] + 1)
    P._put(rows, row, slot, inc_peer=[q % 7 for q in range(n)], inc_val=[1] * n)
    want = np.zeros((row[-1] + 1, IR.MAX_INC), np.int64)
    want[row, slot] = [q % 7 for q in range(n)]
    assert (rows["inc_peer"] == want).all() and rows["inc_val"].sum() == n


def test_copy_rows_packs_the_increments_of_signalled_destinations():
    n = 11
    op = P.EncCopyOpParams(s_addr=P.Addr(0, 0), s_offsets=[0] * n,
                           d_addrs=[P.Addr(1, 0)] * n, d_skip_copy=[False] * n,
                           d_ranks=list(range(n)), copy_sizes=[8] * n)
    rows = P.copy_rows(op, P.RowSpec(0, 16), 2, 0, lambda r: r + 1,
                       lambda r: 200 if r % 3 else None)
    assert list(rows["n_dst"]) == [8, 3] and list(rows["n_inc"]) == [5, 2]
    assert list(rows["inc_peer"][0][:5]) == [2, 3, 5, 6, 8]
    assert list(rows["inc_peer"][1][:2]) == [9, 11] and set(rows["inc_sem"][1][:2]) == {200}


def test_mesh_peers_are_memoised_per_topology_group_and_rank():
    topo = load_topology("trn2", world=tuple(range(16)), lnc_size=1)
    group = tuple(range(16))
    a = mesh_peers(topo, group, 3)
    assert mesh_peers(topo, group, 3) is a and mesh_peers(topo, group, 4) is not a
    assert a.peers[0] == 3 and a.index[3] == 0 and not a.net
    assert not a.handshake.flags.writeable  # shared by every entry: never written


def test_ir_concat_and_take_are_the_structured_operations():
    rng = np.random.default_rng(3)

    def rows(n):
        raw = rng.integers(0, 256, (n, IR.LEG_IR_DTYPE.itemsize), dtype=np.uint8)
        return raw.view(IR.LEG_IR_DTYPE).reshape(-1)

    parts = [rows(5), rows(0), rows(3)[::2], rows(1)]
    got = IR.concat(parts)
    assert got.dtype == IR.LEG_IR_DTYPE
    assert got.tobytes() == np.concatenate([p.copy() for p in parts]).tobytes()
    assert IR.concat([]).size == 0
    r = rows(9)
    idx = np.array([8, 0, 3, 3])
    assert IR.take(r, idx).tobytes() == r[idx].tobytes()
    mask = r["start"] % 2 == 0
    assert IR.take(r, mask).tobytes() == r[mask].tobytes()
    assert IR.take(r[::3], np.array([2, 0])).tobytes() == r[::3][[2, 0]].tobytes()
