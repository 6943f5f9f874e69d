"""`nrtrewrite diff`: the defects a review of diff.py found (docs/RELIABILITY.md), each pinned
by what docs/CLI.md "diff" promises, the expected lines worked out by hand."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner

from nrtrewrite import diff as D
from nrtrewrite.cli import main
from nrtrewrite.neff import container
from test_diff import _one_line_error, lowered, pair  # noqa: F401 - ar2 lowered, a copy pair


def _neff(folder) -> str:
    return json.loads((folder / "manifest.json").read_text())["output_neff"]["name"]


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


def test_a_neff_over_the_readers_file_size_limit_is_refused_from_its_size(pair):
    """The reader refuses a file over 5 GiB (``MAX_FILE_BYTES``) from its size; diff's NEFF
    walk skipped that check, so B's NEFF grown to 8 GiB of zeros was scanned (22 s) and
    reported as an ordinary size and sha256 difference, and in A it was no error."""
    a, b = pair
    name = _neff(a)
    big = (5 << 30) + 1  # sparse: the zero bytes after the payload the reader would scan
    os.truncate(b / name, big)
    why = f"{b / name}: file of {big} bytes exceeds the limit of 5368709120 bytes"
    res = CliRunner().invoke(main, ["diff", str(a), str(b)])
    assert (res.exit_code, res.stdout) == (1, f"{name} damaged in B: {why}\n1 difference(s)\n")
    assert _one_line_error(CliRunner().invoke(main, ["diff", str(b), str(a)])) == \
        f"nrtrewrite: error: {why}"
