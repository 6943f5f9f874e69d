"""The net-proxy FIFOs per basic block (docs/FORMATS.md §8 "Basic blocks", §8.1).

The runtime hands the proxy each basic block's FIFOs in a call of its own
(``neuronStartNetworkProxy(comm, stream, basic_block_id, net_ops_info_t[], n,
net_src_addr_t[], n, net_dest_addr_t[], n)``, called by libnrt's init_network_proxy per
block), asserts that the last entry of each address FIFO has mark EXEC_COMPLETE, and
indexes the call's ops array with ``net_op_idx``.  So a channel's FIFO files are one segment
per block with ops there, ``net_op_idx`` counting from 0 in each, each segment ending with
an EXEC_COMPLETE entry (size 0, rank field -1, net_op_idx the block's last op).  And
``variable_peer`` (net_ops_info +73) is 1 where the peer is resolved per op: MESH and RDH.

The model: bf16 all-reduces of 2048 elements over [0, 128] of trn2:nodes=2 at LNC 1 (one
rank on each node), one in subgraph sg00 (basic block 0), two in sg01 (block 1).  The
expected records are worked out from FORMATS' tables and the algorithms' shapes, read with
``struct`` at the tables' offsets (net_ops_info 96 bytes, net_src_addr 72, net_dest_addr 48),
never from the emitter's dtypes or output.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from nrtrewrite.neff.assembler import assemble_spec
from test_mutation import Out, failure_text

OPS, SRC, DEST = 96, 72, 48  # FORMATS §8.1, §8.2 record sizes
ELEMS = 2048
NBYTES = ELEMS * 2  # bf16


def _sg(name: str, n: int, group=(0, 128)) -> dict:
    """A subgraph of ``n`` bf16 all-reduces over ``group`` (one basic block)."""
    return {"name": name, "replica_groups": [list(group)],
            "vars": [{"name": "i", "type": "input", "size": NBYTES},
                     {"name": "o", "type": "output", "size": NBYTES}],
            "engines": {"sp": [{"all_reduce": {"dtype": "bf16", "op": "add", "src": "i",
                                               "dst": "o", "num_elements": ELEMS}}] * n}}


def _model(tmp: Path, algo: str, per_block: tuple[int, ...] = (1, 2)) -> Path:
    from click.testing import CliRunner
    from nrtrewrite.cli import main
    neff = tmp / "m.neff"
    neff.write_bytes(assemble_spec({"header": {"pkg_version": 2, "name": "m", "lnc_size": 1},
                                    "subgraphs": [_sg(f"sg{b:02d}", n)
                                                  for b, n in enumerate(per_block)]}))
    out = tmp / algo
    res = CliRunner().invoke(main, ["lower", str(neff), "--topology", "trn2:nodes=2",
                                    "--algo", algo, "-o", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture(scope="module")
def ring(tmp_path_factory) -> Path:
    return _model(tmp_path_factory.mktemp("blocks"), "ring")


@pytest.fixture(scope="module")
def mesh(tmp_path_factory) -> Path:
    return _model(tmp_path_factory.mktemp("blocks"), "mesh")


def _files(out: Path, rank: int) -> tuple[bytes, bytes, bytes]:
    d = out / f"rank-{rank:04d}"
    return tuple((d / n).read_bytes() for n in ("net_ops.bin", "net_src.bin", "net_dest.bin"))


def _ops(data: bytes) -> list[tuple]:
    """(basic_block_id @76, variable_peer @73, func_rel_op_idx @80, tx_entry_cnt @40,
    rx_entry_cnt @44) of every net_ops_info record."""
    assert len(data) % OPS == 0
    return [(struct.unpack_from("<I", data, i + 76)[0], data[i + 73],
             struct.unpack_from("<I", data, i + 80)[0],
             *struct.unpack_from("<II", data, i + 40)) for i in range(0, len(data), OPS)]


def _recs(data: bytes, size: int, rank_at: int) -> list[tuple]:
    """(net_op_idx @0, mark @36, size @32, rank field) of every FIFO record."""
    assert len(data) % size == 0
    return [(struct.unpack_from("<I", data, i)[0], struct.unpack_from("<I", data, i + 36)[0],
             struct.unpack_from("<I", data, i + 32)[0],
             struct.unpack_from("<i", data, i + rank_at)[0]) for i in range(0, len(data), size)]


def _closing(size: int, op_idx: int, mark: int, rank_at: int) -> bytes:
    """A terminator (mark 1) or EXEC_COMPLETE entry (mark 2) by hand: net_op_idx, size 0,
    the mark, the rank field -1, every other byte 0."""
    b = bytearray(size)
    struct.pack_into("<I", b, 0, op_idx)
    struct.pack_into("<I", b, 36, mark)
    struct.pack_into("<i", b, rank_at, -1)
    return bytes(b)


def test_two_blocks_ring_fifo_bytes(ring):
    """RING: one op per entry and channel, both FIFOs exist for every entry (the one peer is
    across the network both ways), 2 (n - 1) = 2 chunks x 2 halves = 4 entries each way,
    NBYTES in all (a 2-rank all-reduce sends the other half in the reduce-scatter and its
    own in the all-gather).  Block 0: op 0; block 1: ops 1 and 2 of the channel, net_op_idx
    0 and 1 in the block's segment.  Each segment ends with EXEC_COMPLETE (net_op_idx: the
    block's last op, 0 and 1).  variable_peer 0: the ring's peer is its fixed neighbour."""
    for rank, peer in ((0, 128), (128, 0)):
        ops, src, dest = _files(ring, rank)
        assert _ops(ops) == [(0, 0, 0, 4, 4), (1, 0, 1, 4, 4), (1, 0, 2, 4, 4)]
        for data, size, rank_at in ((src, SRC, 48), (dest, DEST, 40)):
            recs = _recs(data, size, rank_at)
            want = ([(0, 0, peer)] * 4 + [(0, 1, -1), (0, 2, -1)]           # block 0
                    + [(0, 0, peer)] * 4 + [(0, 1, -1)]                      # block 1, op 0
                    + [(1, 0, peer)] * 4 + [(1, 1, -1), (1, 2, -1)])         # op 1, the end
            assert [(k, m, r) for k, m, _s, r in recs] == want
            for seg in (recs[0:4], recs[6:10], recs[11:15]):
                assert sum(s for _k, _m, s, _r in seg) == NBYTES
            for i, (k, m, _s, _r) in enumerate(recs):
                if m:
                    assert data[i * size:(i + 1) * size] == _closing(size, k, m, rank_at)


def test_two_blocks_mesh_fifo_bytes(mesh):
    """MESH (FORMATS §8 "Ops", the 2-rank case of test_fifo_terminators): two ops per entry,
    the peer's half arriving (op a), then its reduced half (op a + 1); both sends in op a
    (tx_entry_cnt 2, 0; rx_entry_cnt 1, 1), each NBYTES / 2.  Block 0: ops 0-1; block 1:
    ops 2-5 of the channel, net_op_idx 0-3 in its segment.  variable_peer 1 on every op."""
    half = NBYTES // 2
    for rank, peer in ((0, 128), (128, 0)):
        ops, src, dest = _files(mesh, rank)
        assert _ops(ops) == [(0, 1, 0, 2, 1), (0, 1, 0, 0, 1), (1, 1, 1, 2, 1),
                             (1, 1, 1, 0, 1), (1, 1, 2, 2, 1), (1, 1, 2, 0, 1)]
        E, T = (lambda k: (k, 0, half, peer)), (lambda k, m=1: (k, m, 0, -1))
        assert _recs(src, SRC, 48) == [E(0), E(0), T(0), T(1), T(1, 2),
                                       E(0), E(0), T(0), T(1), E(2), E(2), T(2), T(3), T(3, 2)]
        assert _recs(dest, DEST, 40) == [E(0), T(0), E(1), T(1), T(1, 2),
                                         E(0), T(0), E(1), T(1), E(2), T(2), E(3), T(3),
                                         T(3, 2)]
        assert src[4 * SRC:5 * SRC] == _closing(SRC, 1, 2, 48)
        assert dest[13 * DEST:] == _closing(DEST, 3, 2, 40)


def _spoil_and_simulate(out: Path, tmp: Path, name: str, fn, drop: int = 0) -> str:
    m = Out(out, tmp / "mut")
    a = m.arr(0, name)
    m.put(0, name, fn(a))
    if drop:
        key = {"net_src.bin": "src", "net_dest.bin": "dest"}[name]
        m.edit_manifest(0, lambda man: man["fifo"][0][key].__setitem__(1, a.size - drop))
    m.fix_manifest_counts(0)
    return failure_text(m.simulate())


# rank 0's ring FIFOs (test above): block 0's records 0-3 entries, 4 its terminator, 5 its
# EXEC_COMPLETE entry; block 1's from record 6
WHERE = "rank-0000: field {f}, rank 0, channel 0, artifact {n}, record {r}: "


@pytest.mark.parametrize("name", ["net_src.bin", "net_dest.bin"])
def test_simulate_refuses_a_missing_exec_complete_entry(ring, tmp_path, name):
    """Block 0's EXEC_COMPLETE entry removed: block 1's first entry (net_op_idx 0) follows
    op 0's terminator, where the segment should have ended."""
    text = _spoil_and_simulate(ring, tmp_path, name,
                               lambda a: np.concatenate([a[:5], a[6:]]), drop=1)
    assert (WHERE.format(f="mark", n=name, r=5) + "mark 0, net_op_idx 0 after op 0's "
            "terminator (record 4) of block 0 (1 op(s) on the channel): block 0's segment "
            "should end here with its EXEC_COMPLETE (2) entry") in text, text


@pytest.mark.parametrize("name", ["net_src.bin", "net_dest.bin"])
def test_simulate_refuses_an_exec_complete_entry_made_a_terminator(ring, tmp_path, name):
    """Block 0's EXEC_COMPLETE entry with mark NET_OP_COMPLETE (1): a second terminator of
    op 0 where the segment ends."""
    def spoil(a):
        assert a["mark"][5] == 2
        a["mark"][5] = 1
        return a
    text = _spoil_and_simulate(ring, tmp_path, name, spoil)
    assert (WHERE.format(f="mark", n=name, r=5) + "mark 1, net_op_idx 0 after op 0's "
            "terminator (record 4) of block 0") in text, text


@pytest.mark.parametrize("name", ["net_src.bin", "net_dest.bin"])
def test_simulate_refuses_block_one_counted_on_the_whole_channel(ring, tmp_path, name):
    """Block 1's records with net_op_idx counted over the channel (ops 1 and 2, EXEC 2: what
    was written until 2026-12-07): named at block 1's first record, 6."""
    def spoil(a):
        a["net_op_idx"][6:] += 1
        return a
    text = _spoil_and_simulate(ring, tmp_path, name, spoil)
    assert (WHERE.format(f="net_op_idx", n=name, r=6) + "net_op_idx 1 is op 0 of block 1's "
            "index on the whole channel (op 1 of its net_ops.bin slice): it should be 0")\
        in text, text


def test_simulate_refuses_a_last_exec_complete_entry_missing(ring, tmp_path):
    """The file's last record (block 1's EXEC_COMPLETE entry) dropped."""
    text = _spoil_and_simulate(ring, tmp_path, "net_dest.bin", lambda a: a[:-1], drop=1)
    assert (WHERE.format(f="mark", n="net_dest.bin", r=15) + "the FIFO ends without block "
            "1's EXEC_COMPLETE entry") in text, text


def test_simulate_refuses_an_exec_complete_entry_with_a_wrong_op(ring, tmp_path):
    """Block 1's EXEC_COMPLETE entry (record 16) naming op 0, not the block's last, 1."""
    def spoil(a):
        a["net_op_idx"][16] = 0
        return a
    text = _spoil_and_simulate(ring, tmp_path, "net_src.bin", spoil)
    assert (WHERE.format(f="net_op_idx", n="net_src.bin", r=16) + "EXEC_COMPLETE net_op_idx "
            "should be 1, block 1's last op") in text, text


@pytest.mark.parametrize("name, byte, field", [
    ("net_src.bin", 8, "dev_addr (bytes 8..15)"),
    ("net_src.bin", 56, "dst_addr (bytes 56..63)"),
    ("net_dest.bin", 4, "complete (bytes 4..7)"),
    ("net_dest.bin", 44, "reserved_44 (bytes 44..47)")])
def test_an_exec_complete_entrys_stray_byte_is_named_at_its_field(ring, tmp_path, name,
                                                                  byte, field):
    """Review 58p: a byte of block 0's EXEC_COMPLETE entry (record 5) other than net_op_idx,
    mark and the rank field set was named at a field ``terminator``, which net_src_addr and
    net_dest_addr do not have; FORMATS §8.2's offsets name it."""
    def spoil(a):
        a.view(np.uint8).reshape(a.size, -1)[5, byte] = 1
        return a
    text = _spoil_and_simulate(ring, tmp_path, name, spoil)
    short = field.split(" ")[0]
    assert (WHERE.format(f=short, n=name, r=5) + "EXEC_COMPLETE entry has non-zero bytes "
            f"besides net_op_idx, mark and the rank field: {field} should be 0") in text, text


def test_the_variable_peer_line_takes_an_before_a_vowel():
    """Review 58p: 'a INTER_RDH op's peer'."""
    from nrtrewrite.simulate.fifo import _article
    assert [_article(w) for w in ("INTER_RDH", "INTRA_RDH", "MESH", "RING")] == [
        "an INTER_RDH", "an INTRA_RDH", "a MESH", "a RING"]


@pytest.mark.parametrize("algo, record, want", [("ring", 1, 0), ("mesh", 3, 1)])
def test_simulate_refuses_variable_peer_against_the_pattern(ring, mesh, tmp_path, algo,
                                                            record, want):
    """FORMATS §8.1: variable_peer 1 for MESH (and RDH) ops, 0 for the ring family's."""
    out = ring if algo == "ring" else mesh
    m = Out(out, tmp_path / "mut")
    m.edit(0, "net_ops.bin", lambda o: o["variable_peer"].__setitem__(record, 1 - want))
    m.fix_manifest_counts(0)
    text = failure_text(m.simulate())
    assert (WHERE.format(f="variable_peer", n="net_ops.bin", r=record)
            + f"variable_peer should be {want}, not {1 - want}") in text, text


def test_the_outputs_simulate(ring, mesh):
    from click.testing import CliRunner
    from nrtrewrite.cli import main
    for out in (ring, mesh):
        res = CliRunner().invoke(main, ["simulate", str(out), "--json"])
        assert res.exit_code == 0, res.output
        assert json.loads(res.output)["error"] is None


def _table(out: Path, name: str) -> dict[str, list[str]]:
    """The cells of ``name``'s rich table of rank 0, piped (CliRunner is no terminal), by
    header."""
    from click.testing import CliRunner
    from nrtrewrite.cli import main
    res = CliRunner().invoke(main, ["dump", str(out / "rank-0000" / name), "--limit", "0"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert "…" not in res.output and max(map(len, lines)) <= 240  # no header cut (CLI.md)
    head = next(i for i, line in enumerate(lines) if line.startswith("┃"))
    keys = [h.strip() for h in lines[head].split("┃")[1:-1]]
    rows = [[c.strip() for c in line.split("│")[1:-1]]
            for line in lines[head + 2:] if line.startswith("│")]
    return {k: [r[j] for r in rows] for j, k in enumerate(keys)}


@pytest.mark.parametrize("algo, blocks, vp", [
    ("ring", [0, 1, 1], "0"),                 # op 0 in block 0; ops 1, 2 in block 1
    ("mesh", [0, 0, 1, 1, 1, 1], "1"),        # ops 0-1 in block 0; ops 2-5 in block 1
])
def test_the_net_ops_table_shows_each_ops_basic_block(ring, mesh, algo, blocks, vp):
    """Fixer 58x: net_op_idx counts from 0 in each block's segment, so the text view of
    net_ops.bin shows basic_block_id (and variable_peer, FORMATS §8.1: 1 for MESH, 0 for
    RING), else a FIFO record's net_op_idx 0 names no row.  The block ids are the
    subgraphs' (sg00: one all-reduce, sg01: two; RING one op each, MESH two), worked out in
    the docstrings above; the FIFO record after block 0's EXEC_COMPLETE entry has
    net_op_idx 0 of block 1: net_ops row len(block 0's ops)."""
    out = {"ring": ring, "mesh": mesh}[algo]
    ops = _table(out, "net_ops.bin")
    assert ops["#"] == [str(i) for i in range(len(blocks))]
    assert ops["basic_block_id"] == [str(b) for b in blocks]
    assert ops["variable_peer"] == [vp] * len(blocks)
    src = _table(out, "net_src.bin")
    after = src["mark_name"].index("EXEC_COMPLETE") + 1
    assert src["net_op_idx"][after] == "0"
    row = ops["basic_block_id"].index("1")  # block 1's first op
    assert row == blocks.count(0)


# ---------------------------------------------------------------------------------------
# Review 59j: segments of blocks of differing shape, a block without entries in a file


def _three_node_model(tmp: Path) -> Path:
    """Three subgraphs over trn2:nodes=3 at LNC 2 (64 ranks a node), --algo ring:

    * sg00 (block 0): a bf16 all-reduce of 12288 bytes, then an all-gather of 6144, over
      [0, 64, 128];
    * sg01 (block 1): a bf16 all-reduce of 24576 bytes over [0, 1, 64, 65, 128, 129];
    * sg02 (block 2): a reduce-scatter of 12288 bytes, then an all-reduce of 6144, over
      [0, 64, 128].

    Rank 0 on channel 0 (its ring successor 64, across the network, predecessor 128): a
    ring all-reduce over n = 3 takes 2 (n - 1) = 4 steps, an all-gather or reduce-scatter
    n - 1 = 2, each step one chunk of 2 halves: tx_entry_cnt 8, 4 (block 0) and 4, 8
    (block 2).  In block 1 its successor is rank 1, on its node: no transmit entries, so
    net_src.bin has no segment for block 1 (FORMATS §8 "Basic blocks"), and its 2 (6 - 1)
    x 2 = 20 receives come from 129.  net_src.bin: block 0's segment 8 entries, a
    terminator, 4 entries, a terminator, its EXEC_COMPLETE entry (records 0-14), block
    2's the same shape backward, 4 + 1 + 8 + 1 + 1 (records 15-29)."""
    def sg(name, group, vars_, ops):
        return {"name": name, "replica_groups": [group],
                "vars": [{"name": v, "type": t, "size": s} for v, t, s in vars_],
                "engines": {"sp": ops}}
    ar = (lambda s, d, b: {"all_reduce": {"dtype": "bf16", "op": "add", "group": 0,
                                          "src": s, "dst": d, "bytes": b}})
    small = [0, 64, 128]
    spec = {"header": {"pkg_version": 2, "name": "n3", "lnc_size": 2}, "subgraphs": [
        sg("sg00", small, [("i0", "input", 12288), ("o0", "output", 12288),
                           ("i1", "input", 6144), ("o1", "output", 18432)],
           [ar("i0", "o0", 12288),
            {"all_gather": {"dtype": "bf16", "group": 0, "src": "i1", "dst": "o1",
                            "bytes": 6144}}]),
        sg("sg01", [0, 1, 64, 65, 128, 129],
           [("i0", "input", 24576), ("o0", "output", 24576)],
           [ar("i0", "o0", 24576)]),
        sg("sg02", small, [("i0", "input", 12288), ("o0", "output", 4096),
                           ("i1", "input", 6144), ("o1", "output", 6144)],
           [{"reduce_scatter": {"dtype": "bf16", "op": "add", "group": 0, "src": "i0",
                                "dst": "o0", "bytes": 12288}},
            ar("i1", "o1", 6144)])]}
    from click.testing import CliRunner
    from nrtrewrite.cli import main
    neff = tmp / "n3.neff"
    neff.write_bytes(assemble_spec(spec))
    out = tmp / "n3ring"
    res = CliRunner().invoke(main, ["lower", str(neff), "--topology", "trn2:nodes=3",
                                    "--algo", "ring", "-o", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture(scope="module")
def n3ring(tmp_path_factory) -> Path:
    return _three_node_model(tmp_path_factory.mktemp("n3"))


def test_three_node_ring_layout(n3ring):
    """The premise of the tests below, from the docstring's arithmetic: rank 0's channel-0
    ops (block, tx_entry_cnt, rx_entry_cnt) and net_src.bin's marks."""
    ops, src, _dest = _files(n3ring, 0)
    assert [(b, tx, rx) for b, _vp, _t, tx, rx in _ops(ops)] == [
        (0, 8, 8), (0, 4, 4), (1, 0, 20), (2, 4, 4), (2, 8, 8)]
    marks = [m for _k, m, _s, _r in _recs(src, SRC, 48)]
    assert marks == [0] * 8 + [1] + [0] * 4 + [1, 2] + [0] * 4 + [1] + [0] * 8 + [1, 2]


def test_a_swap_of_two_segments_of_differing_shape_is_named_at_the_segment(
        n3ring, tmp_path):
    """Review 59j B: net_src.bin's two segments (records 0-14, block 0's, and 15-29, block
    2's) swapped.  The op counts in net_ops.bin agree with the FIFO's segments in the other
    order: block 2's ops count 4, 8 entries, what the first segment now closes after.  The
    segment is named at its first record, not op 0's untouched tx_entry_cnt."""
    text = _spoil_and_simulate(n3ring, tmp_path, "net_src.bin",
                               lambda a: np.concatenate([a[15:30], a[0:15]]))
    assert (WHERE.format(f="mark", n="net_src.bin", r=0) + "block 0's segment (records "
            "0-14) has the shape of block 2's: its ops close after 4, 8 entries, what block "
            "2's ops count (tx_entry_cnt), not block 0's 8, 4") in text, text
    assert "net_ops.bin" not in text, text


@pytest.mark.parametrize("name", ["net_src.bin", "net_dest.bin"])
def test_a_swap_of_segments_one_op_apart_is_named_at_the_segment(ring, tmp_path, name):
    """The same in the two-block RING model above: block 0's segment (records 0-5: 4
    entries, a terminator, EXEC_COMPLETE) and block 1's (6-16: 4 + 1 + 4 + 1 + 1) swapped;
    block 0 then closes its one op and meets op 1's entries, where block 1's shape (4, 4)
    fits the segment that runs to record 10."""
    text = _spoil_and_simulate(ring, tmp_path, name,
                               lambda a: np.concatenate([a[6:17], a[0:6]]))
    assert (WHERE.format(f="mark", n=name, r=0) + "block 0's segment (records 0-10) has the "
            "shape of block 1's: its ops close after 4, 4 entries") in text, text


@pytest.fixture(scope="module")
def ring3(tmp_path_factory) -> Path:
    """The RING model with three blocks: one all-reduce in sg00 (block 0), one in sg01
    (block 1), two in sg02 (block 2).  Each RING op of the two ranks sends 4 entries (as in
    the model above), so net_src.bin is block 0's 4 entries, terminator, EXEC_COMPLETE
    (records 0-5), block 1's the same (6-11), block 2's 4 + 1 + 4 + 1 + 1 (12-22): blocks 0
    and 1 have one shape, (4), and blocks 0 and 1 together block 2's, (4, 4)."""
    return _model(tmp_path_factory.mktemp("blocks"), "ring", (1, 1, 2))


def test_an_edited_count_is_named_though_another_block_has_the_segments_shape(
        ring3, tmp_path):
    """Review 59q F1: op 0's tx_entry_cnt (net_ops.bin record 0, +40) 4 -> 5.  Block 0's
    segment closes after 4 entries, block 1's shape; but the FIFO is not the blocks'
    segments in another order (no segment of 5 entries), so the edited count is named, not
    the untouched segment."""
    m = Out(ring3, tmp_path / "mut")
    data = bytearray((ring3 / "rank-0000" / "net_ops.bin").read_bytes())
    assert [o[3] for o in _ops(bytes(data))] == [4, 4, 4, 4]  # one channel, 4 entries an op
    struct.pack_into("<I", data, 40, 5)
    (m.path / "rank-0000" / "net_ops.bin").write_bytes(bytes(data))
    m.fix_manifest_counts(0)
    text = failure_text(m.simulate())
    assert (WHERE.format(f="tx_entry_cnt", n="net_ops.bin", r=0) + "tx_entry_cnt of op 0 "
            "should be 4, the entries before its terminator in net_src.bin, not 5") in text, text
    assert "has the shape of" not in text, text


def test_a_lost_exec_complete_entry_joining_segments_into_another_blocks_shape(
        ring3, tmp_path):
    """Review 59q F2: block 0's EXEC_COMPLETE entry (record 5) dropped: blocks 0's and 1's
    segments run together as one of ops closing after 4, 4 entries, block 2's shape; but
    the FIFO is then two segments for three blocks, no swap, so record 5, where block 0's
    segment should end, is named as before."""
    def spoil(a):
        assert list(a["mark"][4:7]) == [1, 2, 0] and list(a["mark"][10:12]) == [1, 2]
        return np.concatenate([a[:5], a[6:]])
    text = _spoil_and_simulate(ring3, tmp_path, "net_src.bin", spoil, drop=1)
    assert (WHERE.format(f="mark", n="net_src.bin", r=5) + "mark 0, net_op_idx 0 after op 0's "
            "terminator (record 4) of block 0 (1 op(s) on the channel): block 0's segment "
            "should end here with its EXEC_COMPLETE (2) entry") in text, text


def test_an_exec_complete_entry_for_a_block_without_entries_says_so(n3ring, tmp_path):
    """Review 59j C: an EXEC_COMPLETE-only segment for block 1 (net_op_idx 0, its one op)
    inserted at record 15, between block 0's segment and block 2's: block 1 has no
    net_src.bin entries (tx_entry_cnt 0), so it gets no segment (FORMATS §8 "Basic blocks",
    third bullet), and the line says so rather than only naming block 2."""
    def spoil(a):
        ec = a[14:15].copy()  # block 0's EXEC_COMPLETE entry ...
        ec["net_op_idx"] = 0  # ... of block 1's one op
        return np.concatenate([a[:15], ec, a[15:]])
    text = _spoil_and_simulate(n3ring, tmp_path, "net_src.bin", spoil, drop=-1)
    assert (WHERE.format(f="mark", n="net_src.bin", r=15) + "an EXEC_COMPLETE entry closes "
            "block 2's segment, which holds no terminator") in text, text
    assert ("block 1, whose segment would stand here, has no net_src.bin entries on the "
            "channel (tx_entry_cnt 0 on its 1 op), so it gets no segment") in text, text


@pytest.mark.parametrize("at, blk, op, op_all", [(3, 0, 1, 1), (12, 1, 3, 5)])
def test_an_exec_complete_entry_before_the_last_terminator_is_named(mesh, tmp_path, at, blk,
                                                                    op, op_all):
    """Review 59j A: in the MESH model's net_src.bin (test_two_blocks_mesh_fifo_bytes: block
    0 E E T(0) T(1) EC(1), block 1 from record 5, T(3) at 12, EC(3) at 13), the last op of
    a block transmits nothing, so its terminator stands alone before the EXEC_COMPLETE
    entry.  The two swapped: the EXEC_COMPLETE entry, at ``at``, ends the block while op
    ``op`` (of the block; ``op_all`` of the channel's slice) is open, and is named, not the
    terminator read as the next block's."""
    def spoil(a):
        assert list(a["mark"][at:at + 2]) == [1, 2]
        a[at:at + 2] = a[[at + 1, at]]
        return a
    text = _spoil_and_simulate(mesh, tmp_path, "net_src.bin", spoil)
    assert (WHERE.format(f="mark", n="net_src.bin", r=at) + f"an EXEC_COMPLETE entry ends "
            f"block {blk}'s segment while op {op} of the block (op {op_all} of its net_ops.bin "
            f"slice) is not closed: it stands before op {op}'s terminator (record {at + 1})")\
        in text, text


def test_dump_shows_each_fifo_records_block(n3ring, tmp_path):
    """Review 59j D: rank 0's net_src.bin has no segment for block 1 (no transmit entries
    there), so its second segment is block 2's; dump's ``block`` column and ``--json`` key
    say so.  From the docstring of _three_node_model: net_src.bin 15 records of block 0,
    15 of block 2; net_dest.bin 8 + 1 + 4 + 1 + 1 = 15 of block 0, 20 + 1 + 1 = 22 of block
    1, 15 of block 2.  Where the file does not split at its ops (the two segments swapped),
    every record's block is null (``-``), as its channel is."""
    from click.testing import CliRunner
    from nrtrewrite.cli import main
    want = {"net_src.bin": [0] * 15 + [2] * 15,
            "net_dest.bin": [0] * 15 + [1] * 22 + [2] * 15}
    res = CliRunner().invoke(main, ["dump", "--fifo", str(n3ring), "--rank", "0", "--json"])
    assert res.exit_code == 0, res.output
    files = json.loads(res.output)["ranks"][0]["files"]
    for name, blocks in want.items():
        assert [r["block"] for r in files[name]] == blocks
        assert list(files[name][0])[-2:] == ["channel", "block"]
        table = _table(n3ring, name)
        assert list(table)[:3] == ["#", "channel", "block"]
        assert table["block"] == [str(b) for b in blocks]
    m = Out(n3ring, tmp_path / "mut")
    a = m.arr(0, "net_src.bin")
    m.put(0, "net_src.bin", np.concatenate([a[15:30], a[0:15]]))
    m.fix_manifest_counts(0)
    table = _table(m.path, "net_src.bin")
    assert table["block"] == ["-"] * 30 and table["channel"] == ["-"] * 30


def test_a_lone_terminators_index_skipping_its_op_is_named_at_the_terminator(mesh, tmp_path):
    """Review 59q F3: in the MESH model's net_src.bin, block 1 (from record 5) is op 0's 2
    entries and terminator (5-7), op 1's terminator alone (8: op 1 transmits nothing), op
    2's 2 entries and terminator (9-11), op 3's terminator (12), EXEC_COMPLETE (13).  Record
    8's net_op_idx 1 -> 2: op 1 is due and has no entries, so a terminator alone is its; the
    edited index is named, not op 2's untouched tx_entry_cnt (net_ops.bin record 4)."""
    def spoil(a):
        assert list(a["mark"][5:14]) == [0, 0, 1, 1, 0, 0, 1, 1, 2]
        assert list(a["net_op_idx"][5:13]) == [0, 0, 0, 1, 2, 2, 2, 3]
        a["net_op_idx"][8] = 2
        return a
    text = _spoil_and_simulate(mesh, tmp_path, "net_src.bin", spoil)
    assert (WHERE.format(f="net_op_idx", n="net_src.bin", r=8) + "terminator net_op_idx "
            "should be 1, not 2: op 1 of block 1 is due") in text, text
    assert "net_ops.bin, record" not in text, text


@pytest.fixture(scope="module")
def ring_two_groups(tmp_path_factory) -> Path:
    """The RING model's two blocks with other peers: trn2:nodes=3, one all-reduce over
    [0, 128] in sg00 (block 0), two over [0, 256] in sg01 (block 1).  Rank 0's net_src.bin:
    block 0's 4 entries to 128, terminator, EXEC_COMPLETE (records 0-5); block 1's 4 entries
    to 256, terminator, 4 more, terminator, EXEC_COMPLETE (6-16)."""
    from click.testing import CliRunner
    from nrtrewrite.cli import main
    tmp = tmp_path_factory.mktemp("groups")
    neff = tmp / "m.neff"
    neff.write_bytes(assemble_spec({"header": {"pkg_version": 2, "name": "m", "lnc_size": 1},
                                    "subgraphs": [_sg("sg00", 1, [0, 128]),
                                                  _sg("sg01", 2, [0, 256])]}))
    out = tmp / "ring"
    res = CliRunner().invoke(main, ["lower", str(neff), "--topology", "trn2:nodes=3",
                                    "--algo", "ring", "--rank", "0", "--rank", "128",
                                    "--rank", "256", "-o", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    return out


def test_a_moved_segment_whose_first_op_fits_is_named_at_the_segment(
        ring_two_groups, tmp_path):
    """Review 59q F5: the two segments swapped.  Block 0's one op counts 4 entries, which
    the moved segment's first op has, so the op was read as block 0's, and its peer, 256,
    not in block 0's group, named op 0's untouched func_rel_op_idx.  The FIFO is the two
    blocks' segments in the other order (4, 4 then 4): named at the segment."""
    def spoil(a):
        assert list(a["mark"]) == [0] * 4 + [1, 2] + [0] * 4 + [1] + [0] * 4 + [1, 2]
        assert list(a["dst_rank"][:4]) == [128] * 4 and list(a["dst_rank"][6:10]) == [256] * 4
        return np.concatenate([a[6:17], a[0:6]])
    text = _spoil_and_simulate(ring_two_groups, tmp_path, "net_src.bin", spoil)
    assert (WHERE.format(f="mark", n="net_src.bin", r=0) + "block 0's segment (records 0-10) "
            "has the shape of block 1's: its ops close after 4, 4 entries, what block 1's ops "
            "count (tx_entry_cnt), not block 0's 4") in text, text
    assert "net_ops.bin" not in text, text
