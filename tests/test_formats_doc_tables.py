"""docs/FORMATS.md read as a stranger reads it: its tables are whole, and the enum rows a
decoder needs list every value the code can write."""

from __future__ import annotations

import re
from pathlib import Path

from nrtrewrite.codes import EncAlgMeshType

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md"))


def _broken_tables(text: str) -> list[int]:
    """Line numbers of table rows that start a table without a header: a row (a line that
    starts with ``|``) after a non-row line must be a header, followed by a ``|---`` line;
    prose between two rows cuts a table in two and the second half renders as text."""
    lines = text.splitlines()
    bad = []
    for i, line in enumerate(lines):
        if not line.startswith("|") or (i and lines[i - 1].startswith("|")):
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if not re.match(r"^\|\s*:?-{3,}", nxt):
            bad.append(i + 1)
    return bad


def test_a_table_cut_in_two_is_found():
    text = "| a | b |\n|---|---|\n| 1 | x |\n\nprose\n| 2 | y |\n"
    assert _broken_tables(text) == [6]
    assert _broken_tables("| a |\n|---:|\n| 1 |\n") == []


def test_every_docs_table_has_its_header():
    for path in DOCS:
        assert _broken_tables(path.read_text()) == [], path.name


def test_spad_algo_sub_type_row_lists_every_mesh_type_written():
    # seed 000 §1.3 enc_alg_mesh_type: FULL_MESH 0, GROUPED_MESH 1, MESH_TRN2 2,
    # MESH_SWITCH 3 (a topology's mesh_sub_type, docs/TOPOLOGY.md), MESH_INVALID 4
    text = (ROOT / "docs" / "FORMATS.md").read_text()
    row = next(line for line in text.splitlines()
               if re.match(r"\|\s*1\s*\|\s*u8\s*\|\s*\[6:4\]\s*\|\s*algo_sub_type\s*\|", line))
    listed = {name: int(code) for name, code in re.findall(r"\b([A-Z][A-Z0-9_]*)=(\d)", row)}
    assert listed == {"FULL_MESH": 0, "GROUPED_MESH": 1, "MESH_TRN2": 2, "MESH_SWITCH": 3,
                      "MESH_INVALID": 4}
    assert listed == {m.name: int(m) for m in EncAlgMeshType}
