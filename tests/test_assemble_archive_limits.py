"""assemble writes no archive the reader refuses as a whole: at most MAX_MEMBERS members, a tar
of at most MAX_TOTAL_BYTES, each refused from the members' count and sizes before the archive
is built (docs/ASSEMBLE.md "Escape hatches"); and extra_members cost linear time."""

from __future__ import annotations

from nrtrewrite.neff.assembler import assemble_spec
from nrtrewrite.neff.container import read_container


class _Counted(str):
    """A member name counting how often names are compared for (in)equality with it."""

    compared = 0
    __hash__ = str.__hash__

    def __eq__(self, other):
        _Counted.compared += 1
        return str.__eq__(self, other)

    def __ne__(self, other):
        _Counted.compared += 1
        return str.__ne__(self, other)


def test_extra_members_are_placed_without_comparing_each_with_every_member_before_it(
        base_spec):
    """Each extra member rebuilt the member list, its name compared with every member
    there: 3,000 extra members cost about 3,000^2 / 2 = 4.5 million comparisons (65,540 did
    not finish in 300 s).  Placed by their names' hashes they cost none but a name met again;
    the bound, twice the members, leaves room for a few per member."""
    n = 3000
    base_spec.update(validate=False, extra_members=[{"name": _Counted(f"x/{i}")}
                                                    for i in range(n)])
    _Counted.compared = 0
    members = read_container(assemble_spec(base_spec)).members
    assert _Counted.compared <= 2 * n
    assert list(members)[4:] == [f"x/{i}" for i in range(n)]


def test_a_replaced_member_moves_to_the_end_and_an_omitted_one_comes_back_last(base_spec):
    """ASSEMBLE.md: extra members are added "at the end of the archive ...; a member of the
    same name is replaced (and moves to the end)"; omit_members drops generated members.
    Generated: neff.json, sg00/def.json, sg00/sp.bin, sg00/pool.bin; pool.bin omitted; then
    a, b, neff.json (replacing the generated one: to the end), a again (replacing the first
    a: to the end, with its new bytes), and sg00/pool.bin (omitted, so new: last)."""
    base_spec.update(validate=False, omit_members=["sg00/pool.bin"], extra_members=[
        {"name": "a", "text": "1"}, {"name": "b", "text": "b"}, {"name": "neff.json",
                                                                 "text": "{}"},
        {"name": "a", "text": "2"}, {"name": "sg00/pool.bin", "hex": "00" * 64}])
    members = read_container(assemble_spec(base_spec)).members
    assert list(members) == ["sg00/def.json", "sg00/sp.bin", "b", "neff.json", "a",
                             "sg00/pool.bin"]
    assert (members["a"], members["b"], members["neff.json"], members["sg00/pool.bin"]) == (
        b"2", b"b", b"{}", bytes(64))
