"""`nrtrewrite diff`: the defects a review of diff.py found (docs/RELIABILITY.md), each pinned
by what docs/CLI.md "diff" promises, the expected lines worked out by hand."""

from __future__ import annotations

from nrtrewrite import diff as D
from nrtrewrite.neff import container
from test_diff import lowered, pair  # noqa: F401 - the same fixtures: ar2 lowered, a copy pair


def test_the_neff_header_is_shown_by_the_readers_own_tables():
    """Which header fields are text and which hex is the reader's knowledge
    (``container.STRING_FIELDS`` / ``BYTES_FIELDS``); diff held a copy of it that could drift."""
    assert D.STRING_FIELDS is container.STRING_FIELDS
    assert D.BYTES_FIELDS is container.BYTES_FIELDS
    assert container._STRING_FIELDS is container.STRING_FIELDS  # (the earlier names work)
    assert container._BYTES_FIELDS is container.BYTES_FIELDS
    # NEFF-LIKE.md §1: name is text, uuid bytes, lnc_size a u32
    assert D._header_value("name", b"ab" + bytes(254)) == "ab"
    assert D._header_value("uuid", bytes(range(16))) == "000102030405060708090a0b0c0d0e0f"
    assert D._header_value("lnc_size", b"\x02\0\0\0") == 2
