"""SBUF operands (0xD9+0xDA access patterns) that overlap other than dst = src element for
element, or a dst pattern that writes two elements to the same bytes: refused when planning
(``lower.operand_refusal``, field ``dst`` of the 0xDA word), shown by ``explain``; in-place
and disjoint patterns lower and simulate bit for bit.

Element e of a pattern with dims [[s0, n0], [s1, n1], [s2, n2]] is at byte
``start + (e % n0 * s0 + e // n0 % n1 * s1 + e // (n0*n1) % n2 * s2) * 2`` (bf16) of
partition ``partition_start + e // (n0*n1*n2)``; the expected messages below are worked
out from that by hand (in the comments).
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from nrtrewrite.cli import main
from nrtrewrite.codes import EncOpType
from nrtrewrite.lower import operand_refusal
from nrtrewrite.neff.assembler import assemble_spec
from nrtrewrite.neff.model import AccessPattern, Operand
from nrtrewrite.neff.reader import read_model

from test_simulate import assert_clean, lower_spec

FIX = Path(__file__).resolve().parents[1] / "fixtures"
IN_PLACE = "only dst = src element for element is in place"
ALL_GATHER = "an all-gather cannot be in place"
WRITE_ORDER = "the result would depend on the order of the writes"


def sbuf_spec(coll: str, src: dict, dst: dict, ranks: int = 4) -> dict:
    """One bf16 collective over ``ranks`` with SBUF operands in the state-buffer vars ``t``
    (var 0) and ``u`` (var 1), 4 KiB x 8 partitions each; the trigger is the stream's first
    instruction, so its 0xDA word is instruction 1."""
    body = {"dtype": "bf16", "src": src, "dst": dst}
    if coll != "all_gather":
        body["op"] = "add"
    return {"header": {"name": "sbuf_overlap", "lnc_size": 1},
            "subgraphs": [{"vars": [{"name": "t", "type": "state-buffer", "size": 4096,
                                     "partitions": 8},
                                    {"name": "u", "type": "state-buffer", "size": 4096,
                                     "partitions": 8}],
                           "replica_groups": [list(range(ranks))],
                           "engines": {"sp": [{coll: body}]}}]}


def ap(var="t", start=0, parts=1, dims=((1, 64),)) -> dict:
    return {"var": var, "start": start, "partitions": parts, "dims": [list(d) for d in dims]}


REFUSED = [
    # dst one element (2 bytes) after src: dst element 0 at bytes [2, 4) = src element 1
    ("shifted", "all_reduce", ap(parts=4), ap(start=2, parts=4),
     "dst access pattern element 0 (partition 0, bytes [2, 4)) overlaps src element 1 "
     f"(bytes [2, 4)) of state-buffer var 0: {IN_PLACE}"),
    # src partitions 0..3, dst 2..5: in partition 2, dst element 0 (bytes [0, 2)) is where
    # src element 2 * 64 + 0 = 128 is
    ("partial_partitions", "all_reduce", ap(parts=[0, 4]), ap(parts=[2, 4]),
     "dst access pattern element 0 (partition 2, bytes [0, 2)) overlaps src element 128 "
     f"(bytes [0, 2)) of state-buffer var 0: {IN_PLACE}"),
    # dst slots e % 4 + 2 * (e // 4) = 0 1 2 3 2 3 4 5: element 4 writes slot 2 (bytes
    # [4, 6)) of partition 3 after element 2 (another var: the check holds in any var)
    ("interleaved_strides", "all_reduce", ap(dims=((1, 8),)),
     ap(var="u", parts=[3, 1], dims=((1, 4), (2, 2))),
     f"dst access pattern writes elements 2 and 4 to the same bytes [4, 6) of partition 3: "
     f"{WRITE_ORDER}"),
    # step 0 over 2: element 16 (i0 0, i1 1) writes slot 0 again, bytes [64, 66)
    ("step0_dst", "all_reduce", ap(parts=2, dims=((1, 32),)),
     ap(var="u", start=64, parts=[3, 2], dims=((1, 16), (0, 2))),
     f"dst access pattern writes elements 0 and 16 to the same bytes [64, 66) of partition 3: "
     f"{WRITE_ORDER}"),
    # all-gather of 64 elements over 4 ranks into 256 from byte 0: dst element 0 is src 0
    ("all_gather_into_input", "all_gather", ap(), ap(dims=((1, 256),)),
     "dst access pattern element 0 (partition 0, bytes [0, 2)) overlaps src element 0 "
     f"(bytes [0, 2)) of state-buffer var 0: {ALL_GATHER}"),
    # src is rank 2's slot of the output (NCCL's in-place all-gather): dst element 128 at
    # bytes [256, 258) is src element 0
    ("all_gather_own_slot", "all_gather", ap(start=256), ap(dims=((1, 256),)),
     "dst access pattern element 128 (partition 0, bytes [256, 258)) overlaps src element 0 "
     f"(bytes [256, 258)) of state-buffer var 0: {ALL_GATHER}"),
    # the same 128 bytes backwards: dst element 0 at bytes [126, 128) is src element 63
    ("reversed", "all_reduce", ap(), ap(start=126, dims=((-1, 64),)),
     "dst access pattern element 0 (partition 0, bytes [126, 128)) overlaps src element 63 "
     f"(bytes [126, 128)) of state-buffer var 0: {IN_PLACE}"),
    # half an element on: dst element 0 at bytes [1, 3) straddles src elements 0 and 1
    ("half_element", "all_reduce", ap(), ap(start=1),
     "dst access pattern element 0 (partition 0, bytes [1, 3)) overlaps src element 0 "
     f"(bytes [0, 2)) of state-buffer var 0: {IN_PLACE}"),
    # a reduce-scatter into the second block of its input: dst element 0 (partition 1)
    # is src element 64
    ("reduce_scatter_other_block", "reduce_scatter", ap(parts=4), ap(parts=[1, 1]),
     "dst access pattern element 0 (partition 1, bytes [0, 2)) overlaps src element 64 "
     f"(bytes [0, 2)) of state-buffer var 0: {IN_PLACE}"),
    # dst elements 0..63 are src 0..63 in place, but dst element 64 is in partition 1 at
    # bytes [0, 2), src element 64 in partition 0 at bytes [128, 130)
    ("partly_in_place", "all_reduce", ap(dims=((1, 128),)), ap(parts=2),
     "dst access pattern element 0 (partition 0, bytes [0, 2)) is src element 0 of "
     "state-buffer var 0 in place but element 64 (partition 1, bytes [0, 2)) is not (src "
     f"element 64: partition 0, bytes [128, 130)): {IN_PLACE}"),
    # dst = the first 64 src elements, but the src reads its slots 4 times: src element 64
    # (i0 0, i1 1) is at dst element 0's bytes too
    ("src_rereads_dst_bytes", "reduce_scatter", ap(dims=((1, 64), (0, 4))), ap(),
     "dst access pattern element 0 (partition 0, bytes [0, 2)) overlaps src element 64 "
     f"(bytes [0, 2)) of state-buffer var 0: {IN_PLACE}"),
    # src one row of 128 in partition 1, dst rows of 64 at byte 128 of partitions 0 and 1:
    # the shared partition 1 is in place (dst elements 64..127 at bytes [128, 256) are src
    # elements 64..127, the last of them included), but dst element 0 is in partition 0
    ("in_place_in_the_later_partition_only", "all_reduce", ap(parts=[1, 1], dims=((1, 128),)),
     ap(start=128, parts=[0, 2]),
     "dst access pattern element 64 (partition 1, bytes [128, 130)) is src element 64 of "
     "state-buffer var 0 in place but element 0 (partition 0, bytes [128, 130)) is not (src "
     f"element 0: partition 1, bytes [0, 2)): {IN_PLACE}"),
    # src rows of 32 in partitions 0 and 1, dst one row of 64 in partition 0: dst elements
    # 0..31 are src elements 0..31 in place, but dst element 32 (partition 0, bytes [64, 66))
    # is not where src element 32 is (partition 1, its first element: bytes [0, 2))
    ("in_place_then_past_the_src_partition", "all_reduce", ap(parts=2, dims=((1, 32),)), ap(),
     "dst access pattern element 0 (partition 0, bytes [0, 2)) is src element 0 of "
     "state-buffer var 0 in place but element 32 (partition 0, bytes [64, 66)) is not (src "
     f"element 32: partition 1, bytes [0, 2)): {IN_PLACE}"),
]


@pytest.mark.parametrize("coll, src, dst, why", [r[1:] for r in REFUSED],
                         ids=[r[0] for r in REFUSED])
def test_overlapping_sbuf_operands_are_refused(tmp_path, coll, src, dst, why):
    """Refused when planning: one line naming the 0xDA word (instruction 1) and its field
    dst_dims (bytes 32..55 of the word: offset 64 + 32 in the member), and what overlaps; no output; ``explain`` shows INVALID for the same reason."""
    neff = tmp_path / "m.neff"
    neff.write_bytes(assemble_spec(sbuf_spec(coll, src, dst)))
    res = CliRunner().invoke(main, ["lower", "-q", str(neff), "-o", str(tmp_path / "out")])
    assert res.exit_code == 2, res.output
    line = res.output.strip()
    assert "\n" not in line, line
    assert ("member sg00/sp.bin, subgraph sg00, stream sp, instruction 1, offset 0x60, "
            "field dst_dims, trigger 0: " + why) in line, line
    assert not (tmp_path / "out").exists()
    res = CliRunner().invoke(main, ["explain", str(neff), "--json"])
    assert res.exit_code == 0, res.output
    (rec,) = json.loads(res.output)["triggers"]
    assert rec["lowered"]["algorithm"] == "INVALID"
    assert rec["lowered"]["fallback_reason"] == why


ALLOWED = [
    # all-reduce in place, 2-D: src pattern = dst pattern
    ("all_reduce_in_place", "all_reduce", ap(parts=4, dims=((1, 32), (64, 4))),
     ap(parts=4, dims=((1, 32), (64, 4)))),
    # the same elements written as 2 rows of 32: slot e % 32 + 32 * (e // 32) = e
    ("all_reduce_in_place_reshaped", "all_reduce", ap(parts=4),
     ap(parts=4, dims=((1, 32), (32, 2)))),
    # reduce-scatter of 256 over 4 ranks: dst = src elements 0..63
    ("reduce_scatter_in_place", "reduce_scatter", ap(dims=((1, 256),)), ap()),
    # src 4 partitions x 64, dst = partition 0 = src elements 0..63
    ("reduce_scatter_in_place_partitions", "reduce_scatter", ap(parts=4), ap()),
    ("disjoint_partitions", "all_reduce", ap(parts=[0, 4]), ap(parts=[4, 4])),
    # same partitions, src bytes [0, 128), dst [128, 256)
    ("disjoint_bytes", "all_reduce", ap(parts=4), ap(start=128, parts=4)),
    # same partitions and extents, interleaved: src even slots, dst odd ones
    ("interleaved_disjoint", "all_reduce", ap(parts=4, dims=((2, 64),)),
     ap(start=2, parts=4, dims=((2, 64),))),
    # a src that reads each of its 32 slots twice (step 0), dst elsewhere in the var
    ("src_reads_twice", "all_reduce", ap(dims=((1, 32), (0, 2))), ap(start=1024)),
    # reduce-scatter in place whose src reads slots 64..127 twice (elements 64..127 and
    # 128..191), none of them dst's 0..63
    ("reduce_scatter_in_place_src_rereads", "reduce_scatter",
     ap(dims=((1, 64), (64, 2), (64, 2))), ap()),
    # all-gather of src bytes [0, 128) into dst bytes [128, 640) of the same var
    ("all_gather_disjoint", "all_gather", ap(), ap(start=128, dims=((1, 256),))),
]


@pytest.mark.parametrize("coll, src, dst", [r[1:] for r in ALLOWED], ids=[r[0] for r in ALLOWED])
@pytest.mark.parametrize("algo", [None, "ring"])
def test_in_place_and_disjoint_sbuf_operands_match(tmp_path, coll, src, dst, algo):
    """Accepted, lowered (the policy's choice, MESH here, and the ring) and simulated: bit
    for bit, no race."""
    assert_clean(lower_spec(sbuf_spec(coll, src, dst), tmp_path / "out", algo=algo))


@pytest.mark.parametrize("name", sorted(p.stem for p in FIX.glob("*.neff")))
def test_fixture_operands_are_accepted(name):
    model = read_model(str(FIX / f"{name}.neff"))
    assert [operand_refusal(t) for t in model.triggers] == [None] * len(model.triggers)


def test_a_huge_aliasing_dst_is_refused_without_enumerating(tmp_path, monkeypatch):
    """2**32 - 1 elements per partition, step 0: refused from the first two.  Its extent is
    one slot, so 1 + 1 elements are enumerated (pigeonhole): apoverlap's enumerators are
    asked for those two and nothing else (a spy refuses more than 2**16 at once before the
    enumerator runs).  The operands are checked twice since 2026-12-07: by the default
    selection's BD gate, which leaves a trigger lower's own checks refuse to them
    (select._lower_refuses), then by lower's."""
    from nrtrewrite import apoverlap

    asked = []

    def spied(real, count_of):
        def spy(ap, *args):
            n = count_of(*args)
            asked.append((real.__name__, n))
            assert n <= 1 << 16, f"{real.__name__} asked to enumerate {n} elements"
            return real(ap, *args)
        return spy

    monkeypatch.setattr(apoverlap, "slots", spied(apoverlap.slots, lambda first, n: n))
    monkeypatch.setattr(apoverlap, "slots_at", spied(apoverlap.slots_at, lambda k: k.size))
    huge = ((1, 1), (0, 2**32 - 1))
    neff = tmp_path / "m.neff"
    neff.write_bytes(assemble_spec(sbuf_spec("all_reduce", ap(dims=huge), ap(var="u", dims=huge))))
    res = CliRunner().invoke(main, ["lower", "-q", str(neff), "-o", str(tmp_path / "out")])
    assert asked == [("slots", 2)] * 2
    assert res.exit_code == 2, res.output
    assert ("instruction 1, offset 0x60, field dst_dims, trigger 0: dst access pattern writes "
            "elements 0 and 1 "
            f"to the same bytes [0, 2) of partition 0: {WRITE_ORDER}") in res.output


def test_a_src_reading_its_bytes_a_billion_times_is_counted_not_enumerated():
    """The src's slots are counted per slot of its extent: 2**30 reads of 64 slots cost 64."""
    trig = _trigger(EncOpType.REDUCE_SCATTER,
                    AccessPattern(0, 0, 1, ((1, 64), (0, 2**30), (0, 1))),
                    AccessPattern(128, 0, 1, ((1, 64), (0, 1), (0, 1))), 2, same_var=True)
    assert operand_refusal(trig) is None  # dst bytes [128, 256), src [0, 128)
    trig.dst = Operand(0, ap=AccessPattern(64, 0, 1, ((1, 64), (0, 1), (0, 1))))
    # dst element 0 at bytes [64, 66) = slot 32, first read by src element 32
    assert operand_refusal(trig) == (
        "dst access pattern element 0 (partition 0, bytes [64, 66)) overlaps src element 32 "
        f"(bytes [64, 66)) of state-buffer var 0: {IN_PLACE}")


# ---------------------------------------------------------------------------
# against a brute-force reading of the rule, on small random patterns

def _trigger(op, src: AccessPattern, dst: AccessPattern, dsize: int, same_var: bool):
    return SimpleNamespace(op=op, dtype_size=dsize, src=Operand(0, ap=src),
                           dst=Operand(0 if same_var else 1, ap=dst))


def _elements(a: AccessPattern, dsize: int) -> list[tuple[int, int]]:
    """(partition, first byte) of every element, in element order."""
    (s0, n0), (s1, n1), (s2, n2) = a.dims
    out = []
    for p in range(a.partition_count):
        for i2 in range(n2):
            for i1 in range(n1):
                for i0 in range(n0):
                    out.append((a.partition_start + p, a.start + (i0 * s0 + i1 * s1 + i2 * s2)
                                * dsize))
    return out


def _oracle(op, src: AccessPattern, dst: AccessPattern, dsize: int, same_var: bool) -> str:
    """'alias', 'overlap' or 'ok', straight from the rule."""
    d = _elements(dst, dsize)
    if len(set(d)) < len(d):
        return "alias"
    if not same_var:
        return "ok"
    s = _elements(src, dsize)
    pairs = [(e, j) for e, (pd, bd) in enumerate(d) for j, (ps, bs) in enumerate(s)
             if pd == ps and abs(bd - bs) < dsize]
    if not pairs:
        return "ok"
    if op == EncOpType.ALLGATHER:
        return "overlap"
    if all(e == j and d[e] == s[j] for e, j in pairs) and all(d[e] == s[e] for e in range(len(d))):
        return "ok"
    return "overlap"


def _random_ap(rng: random.Random, dsize: int) -> AccessPattern:
    if rng.random() < 0.5:  # rows: step 1, then steps past the row (no slot twice)
        n0, n1 = rng.choice([1, 2, 3, 5]), rng.choice([1, 2, 3])
        dims = ((1, n0), (rng.choice([n0, n0 + 1, n0 + 3]), n1), (0, 1))
    else:
        dims = tuple((rng.choice([-2, -1, 0, 1, 1, 2, 3, 4]), rng.choice([1, 2, 3, 4, 5]))
                     for _ in range(3))
    lo = sum(min(0, s * (n - 1)) for s, n in dims)
    start = -lo * dsize + rng.choice([0, 0, 0, 1, 2, 4, 8, 16, 2 * dsize, 3])
    return AccessPattern(start, rng.randrange(4), rng.choice([1, 2, 4]), dims)


def _check_message(why: str, op, src: AccessPattern, dst: AccessPattern, dsize: int):
    """The elements a message names do what it says."""
    d, s = _elements(dst, dsize), _elements(src, dsize)
    if m := re.fullmatch(r"dst access pattern writes elements (\d+) and (\d+) to the same "
                         r"bytes \[(\d+), (\d+)\) of partition (\d+): .*", why):
        a, b, x, y, p = map(int, m.groups())
        assert a < b and d[a] == d[b] == (p, x) and y == x + dsize, why
        assert len(set(d[:b])) == b, why  # b is the first element to write twice
    elif m := re.fullmatch(r"dst access pattern element (\d+) \(partition (\d+), bytes \[(\d+), "
                           r"(\d+)\)\) overlaps src element (\d+) \(bytes \[(\d+), (\d+)\)\) "
                           r"of state-buffer var 0: (.*)", why):
        e, p, x, _y, j, u, _v = map(int, m.groups()[:7])
        assert d[e] == (p, x) and s[j] == (p, u) and abs(x - u) < dsize, why
        assert op == EncOpType.ALLGATHER or j != e or x != u, why
    else:
        m = re.fullmatch(r"dst access pattern element (\d+) \(partition (\d+), bytes \[(\d+), "
                         r"\d+\)\) is src element \1 of state-buffer var 0 in place but element "
                         r"(\d+) \(partition (\d+), bytes \[(\d+), \d+\)\) is not \(src element "
                         r"\4: partition (\d+), bytes \[(\d+), \d+\)\): .*", why)
        assert m, why
        e, p, x, f, pf, xf, ps, xs = map(int, m.groups())
        assert d[e] == s[e] == (p, x) and d[f] == (pf, xf) and s[f] == (ps, xs) != d[f], why


def test_random_patterns_against_the_rule():
    rng = random.Random(20261201)
    seen = {"alias": 0, "overlap": 0, "ok": 0}
    n = 0
    while n < 4000:
        dsize = rng.choice([1, 2, 4])
        src, dst = _random_ap(rng, dsize), _random_ap(rng, dsize)
        if rng.random() < 0.3:  # make in-place shapes common
            dst = AccessPattern(src.start, src.partition_start,
                                rng.choice([1, src.partition_count]), src.dims)
        n_in, n_out = src.num_elements, dst.num_elements
        if n_out > n_in:
            op = EncOpType.ALLGATHER
        elif n_out < n_in:
            op = EncOpType.REDUCE_SCATTER
        else:
            op = rng.choice([EncOpType.ALLREDUCE, EncOpType.ALLREDUCE, EncOpType.ALLGATHER])
        same_var = rng.random() < 0.85
        want = _oracle(op, src, dst, dsize, same_var)
        why = operand_refusal(_trigger(op, src, dst, dsize, same_var))
        got = "ok" if why is None else ("alias" if "writes elements" in why else "overlap")
        assert got == want, (op, src, dst, dsize, same_var, why)
        if why is not None:
            _check_message(why, op, src, dst, dsize)
        seen[want] += 1
        n += 1
    assert min(seen.values()) > 300, seen


@pytest.mark.parametrize("src_dims, dst_dims", [
    (((1, 64), (64, 2), (0, 1)), ((1, 128), (0, 1), (0, 1))),  # two rows of 64 = one of 128
    (((1, 8), (8, 4), (32, 4)), ((1, 128), (0, 1), (0, 1))),  # three levels of the same row
    (((2, 4), (8, 4), (0, 1)), ((2, 16), (0, 1), (0, 1))),  # strided: 2 x 4 spans 8
    (((1, 32), (0, 1), (32, 4)), ((1, 128), (0, 1), (0, 1))),  # a num-1 dim between
])
def test_equivalent_dims_in_place_are_recognised_without_enumerating(monkeypatch, src_dims,
                                                                     dst_dims):
    """The same element -> slot map written with other dims (rows merged: a dim stepping
    over exactly the span of the one inside it) is in place: found from the dims alone, as
    for identical patterns (a 32 MiB partition compared element by element took 1.8 GB)."""
    import nrtrewrite.apoverlap as A

    def enumerate_nothing(*a, **k):
        raise AssertionError("enumerated")

    monkeypatch.setattr(A, "_Overlap", enumerate_nothing)
    monkeypatch.setattr(A, "dst_alias", enumerate_nothing)
    src = AccessPattern(start=6, partition_start=0, partition_count=2, dims=src_dims)
    dst = AccessPattern(start=6, partition_start=0, partition_count=2, dims=dst_dims)
    trig = SimpleNamespace(src=Operand(var_id=0, ap=src), dst=Operand(var_id=0, ap=dst),
                           op=EncOpType.ALLREDUCE, dtype_size=2)
    assert A.canonical(src) == A.canonical(dst)
    assert operand_refusal(trig) is None
    # the same dims 4 bytes on (two slots: one element of the strided pattern, two of the
    # others) overlap other elements: not in place, and enumerated
    monkeypatch.undo()
    shifted = AccessPattern(start=10, partition_start=0, partition_count=2, dims=dst_dims)
    trig.dst = Operand(var_id=0, ap=shifted)
    assert IN_PLACE in operand_refusal(trig)


def _may_share(src: Operand, dst: Operand, in_bytes: int = 0, out_bytes: int = 0) -> bool:
    from nrtrewrite.apoverlap import operands_may_share
    return operands_may_share(SimpleNamespace(src=src, dst=dst, dtype_size=2,
                                              in_bytes=in_bytes, out_bytes=out_bytes))


def _row(start: int, part: int, parts: int = 1) -> AccessPattern:
    """64 bf16 elements in a row: bytes [start, start + 128) of partitions part.."""
    return AccessPattern(start, part, parts, ((1, 64), (0, 1), (0, 1)))


def test_operands_may_share_at_their_edges():
    """Byte ranges [a, b) and partition ranges [p, p + n): ranges that only touch share
    nothing, one byte or one partition in common is shared (worked by hand)."""
    # DRAM, 128 bytes each: src [0, 128) and dst [128, 256) touch, either way round
    assert not _may_share(Operand(0, 0), Operand(0, 128), 128, 128)
    assert not _may_share(Operand(0, 128), Operand(0, 0), 128, 128)
    assert _may_share(Operand(0, 127), Operand(0, 0), 128, 128)  # byte 127 in both
    assert _may_share(Operand(0, 0), Operand(0, 127), 128, 128)
    assert not _may_share(Operand(0, 0), Operand(1, 0), 128, 128)  # another var
    # SBUF rows of 128 bytes: [0, 128) and [128, 256) in partition 0 touch, either way round
    assert not _may_share(Operand(0, ap=_row(0, 0)), Operand(0, ap=_row(128, 0)))
    assert not _may_share(Operand(0, ap=_row(128, 0)), Operand(0, ap=_row(0, 0)))
    assert _may_share(Operand(0, ap=_row(126, 0)), Operand(0, ap=_row(0, 0)))  # bytes 126, 127
    # partitions 0..3 and 4..7 (same bytes) touch; 0..3 and 3..6 share partition 3
    assert not _may_share(Operand(0, ap=_row(0, 0, 4)), Operand(0, ap=_row(0, 4, 4)))
    assert not _may_share(Operand(0, ap=_row(0, 4, 4)), Operand(0, ap=_row(0, 0, 4)))
    assert _may_share(Operand(0, ap=_row(0, 0, 4)), Operand(0, ap=_row(0, 3, 4)))
    assert not _may_share(Operand(0, ap=_row(0, 0)), Operand(1, ap=_row(0, 0)))


@pytest.mark.parametrize("src, dst", [
    (_row(0, 0), _row(128, 0)),  # bytes [0, 128) and [128, 256): touching
    (_row(128, 0), _row(0, 0)),
    (_row(0, 0, 4), _row(0, 4, 4)),  # partitions 0..3 and 4..7: touching
    (_row(0, 4, 4), _row(0, 0, 4)),
])
def test_operands_that_only_touch_are_accepted_without_enumerating(monkeypatch, src, dst):
    """apoverlap's docstring: nothing is enumerated when the partition ranges or the byte
    extents do not meet."""
    import nrtrewrite.apoverlap as A

    def enumerate_nothing(*a, **k):
        raise AssertionError("enumerated")

    monkeypatch.setattr(A, "_Overlap", enumerate_nothing)
    trig = SimpleNamespace(src=Operand(var_id=0, ap=src), dst=Operand(var_id=0, ap=dst),
                           op=EncOpType.ALLREDUCE, dtype_size=2)
    assert operand_refusal(trig) is None


def test_a_dst_wider_than_a_partition_of_the_window_is_refused_for_its_var(tmp_path):
    """apoverlap (module docstring): a pattern whose extent passes what one partition of the
    SBUF window holds (2^32 / 128 = 33554432 bytes) is not checked for aliasing: its var
    cannot be laid out, and lower refuses the model for that, explain with the same line.
    Here the dst writes elements 0 and 1 to the same bytes (a step 0 over 2), across
    31 * 2^20 elements of 2 bytes, in vars t and u of 64 MiB per partition: 128 MiB
    (134217728 bytes) per partition."""
    spec = sbuf_spec("all_reduce", ap(), ap(var="u", dims=((0, 2), (1 << 20, 32))))
    for var in spec["subgraphs"][0]["vars"]:
        var["size"] = 64 << 20
    neff = tmp_path / "wide.neff"
    neff.write_bytes(assemble_spec(spec))
    want = (f"nrtrewrite: error: {neff}: the model's state-buffer vars need 134217728 bytes per "
            "partition; 128 partitions of them do not fit the 4294967296-byte SBUF window a "
            "32-bit TENSOR3D start_addr addresses (33554432 bytes per partition)\n")
    for args in (["lower", "-q", str(neff), "-o", str(tmp_path / "out")], ["explain", str(neff)]):
        res = CliRunner().invoke(main, args, env={}, prog_name="nrtrewrite")
        assert (res.exit_code, res.output) == (2, want)
    assert not (tmp_path / "out").exists()
