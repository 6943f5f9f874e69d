"""Leftovers of the fortieth session's reviews (docs/CLI.md "Errors"): a streamed
``--json`` document's ``"error"`` reads as the internal error's line does; ``golden``'s
unpack error names its path escaped once; a KANGARING secondary moves no data to its own
primary (seed 000, docs/DESIGN.md "KANGARING")."""

from __future__ import annotations

import json

import pytest

from nrtrewrite.cli import _one_line, stopped_why
from test_atomic_output import FIX
from test_escape_once import BACKSLASH, NEWLINE, SHOWN, invoke

BS = "\\"
#: an internal error's tail (docs/CLI.md "Errors")
BUG = " (a bug in nrtrewrite; rerun with --traceback for the details and report it)"


# ------------------------------------------------------------------ 1. one "Type: message"

class _Outer:
    class Nested(Exception):
        """An exception class inside a class: named ``_Outer.Nested`` (its qualified name)."""


#: each exception and the ``Type: message`` written out by hand from CLI.md "Errors": a
#: message escaped once as a name (a backslash doubled, a line break as ``\n``); a
#: ``KeyError``'s key keeps the one escape of its ``repr`` quotes
CASES = [
    (KeyError(BACKSLASH), "KeyError: 'lit" + BS * 2 + "nb'"),
    (KeyError(NEWLINE), "KeyError: 'lit" + BS + "nb'"),
    (ValueError(f"bad var {BACKSLASH}"), f"ValueError: bad var {SHOWN[BACKSLASH]}"),
    (_Outer.Nested("x"), "_Outer.Nested: x"),
]


@pytest.mark.parametrize("exc, shown", CASES)
def test_a_stopped_documents_error_reads_as_the_internal_errors_line(exc, shown):
    assert stopped_why(exc) == shown
    assert _one_line(exc) == shown


def test_a_workers_exception_is_named_by_its_own_type_in_both():
    from nrtrewrite.ahead import RemoteError
    exc = RemoteError("Weird", f"w {NEWLINE}")
    assert stopped_why(exc) == _one_line(exc) == f"Weird: w {SHOWN[NEWLINE]}"


def _lowered(tmp_path):
    out = tmp_path / "out"
    assert invoke("lower", "-q", FIX / "ar2.neff", "-o", out).exit_code == 0
    return out


@pytest.mark.parametrize("name", [BACKSLASH, NEWLINE])
def test_a_keyerror_in_dump_json_reads_as_on_the_line(tmp_path, monkeypatch, name):
    """The same ``KeyError`` raised while ``dump --json`` streams its records: the document's
    ``"error"`` is the internal error's ``Type: message``, the key escaped once both times."""
    out = _lowered(tmp_path)
    monkeypatch.setattr("nrtrewrite.cli.dump.record_texts",
                        lambda *a, **k: (_ for _ in ()).throw(KeyError(name)))
    res = invoke("dump", "--json", "--cce", out / "rank-0000")
    assert res.exit_code == 70
    shown = {BACKSLASH: "KeyError: 'lit" + BS * 2 + "nb'", NEWLINE: "KeyError: 'lit" + BS + "nb'"}
    assert res.stderr.splitlines() == [f"nrtrewrite: internal error: {shown[name]}" + BUG]
    assert json.loads(res.stdout)["error"] == shown[name]


def test_a_keyerror_in_diff_json_reads_as_on_the_line(tmp_path, monkeypatch):
    a = _lowered(tmp_path)
    b = tmp_path / "b"
    assert invoke("lower", "-q", FIX / "ar2.neff", "-o", b, "--algo", "ring").exit_code == 0
    monkeypatch.setattr("nrtrewrite.cli.diff.record_line_texts",
                        lambda *a, **k: (_ for _ in ()).throw(KeyError(BACKSLASH)))
    res = invoke("diff", "--json", a, b)
    shown = "KeyError: 'lit" + BS * 2 + "nb'"
    assert res.exit_code == 70, res.stderr
    assert res.stderr.splitlines() == [f"nrtrewrite: internal error: {shown}" + BUG]
    assert json.loads(res.stdout)["error"] == shown


# ------------------------------------------------------------------ 2. golden.unpack's path

@pytest.mark.parametrize("name", [BACKSLASH, NEWLINE])
def test_golden_unpacks_refusal_names_its_path_escaped_once(tmp_path, name):
    """``golden.unpack`` refuses a member that is not a plain relative path, naming the
    golden's path as a name is shown (a backslash doubled, a line break as ``\\n``) and the
    member in ``repr``'s quotes: ``lit\\nb`` and ``lit`` + line break + ``b`` print apart."""
    import io
    import tarfile

    from nrtrewrite.golden import unpack

    folder = tmp_path / name
    folder.mkdir()
    tgz = folder / "g.tar.gz"
    with tarfile.open(tgz, "w:gz") as tar:
        info = tarfile.TarInfo("../x")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    with pytest.raises(ValueError) as err:
        unpack(tgz, tmp_path / "dest")
    assert str(err.value) == f"{tmp_path}/{SHOWN[name]}/g.tar.gz: unexpected member '../x'"


# ------------------------------------------------------------------ 4. KANGARING secondaries

#: FORMATS §3 leaf codes, §7 semaphore subops and ids, §10 addresses (by hand)
MARK_END, PEER_POST, PEER_WAIT, MARK_COMPLETE = 15, 11, 12, 22
SUBOP_INC, SUBOP_WAIT = 21, 20
LOCAL_MASK = (1 << 47) - 1
CAYMAN_ID_VALID, CAYMAN_SHIFT = 1 << 54, 48
CORE_SHIFT = 36  # a logical core's memory window starts at lc << 36
EVT_SEM_BASE, TOPSP_SHIFT, INC_WINDOW = 0x82_8000_0000, 30, 0x1800


def _places(top: dict) -> tuple[dict, dict]:
    """rank -> (node, device, logical core), and (node, routing id) -> device, from the
    manifest's ``topology.ranks`` (FORMATS §1.1)."""
    ranks = top["topology"]["ranks"]
    place = {r["rank"]: (r["node"], r["device"], r["logical_core"]) for r in ranks}
    routed = {(r["node"], r["routing_id"]): r["device"] for r in ranks}
    return place, routed


def _data_target(addr: int, home: tuple, routed: dict) -> tuple:
    """(node, device, logical core) a ``dma.bin`` ``buf_ptr`` of a rank at ``home`` names
    (FORMATS §10: another device of the node when CAYMAN_ID_VALID, its routing id in
    CAYMAN_ID; the core by its window)."""
    node, device, _ = home
    if addr & CAYMAN_ID_VALID:
        device = routed[(node, (addr >> CAYMAN_SHIFT) & 0x3F)]
    return node, device, (addr & LOCAL_MASK) >> CORE_SHIFT


def _sem_target(addr: int, home: tuple, routed: dict) -> tuple[tuple, int, int]:
    """((node, device, TOP_SP), window, semaphore id) of a ``sem.bin`` ``addr`` (FORMATS §10:
    ``0x8280000000 + ((sp & 7) << 30) + ((sp > 7) << 47) + w + 4 * id``)."""
    node, device, _ = home
    if addr & CAYMAN_ID_VALID:
        device = routed[(node, (addr >> CAYMAN_SHIFT) & 0x3F)]
    local = addr & ((1 << 47) - 1)
    off = local - EVT_SEM_BASE
    sp = ((off >> TOPSP_SHIFT) & 7) + (8 if addr & (1 << 47) else 0)
    low = off & ((1 << TOPSP_SHIFT) - 1)
    return (node, device, sp), low & 0x1C00, (low & 0x3FF) >> 2


def _secondary_checks(out) -> int:
    """For every channel of every KANGARING trigger and every secondary of its units: the
    secondary's legs on that channel (docs/DESIGN.md "Kangaring", FORMATS §3.3, §3.4): the
    entry handshake (``mark_complete``), ``peer_post``, ``peer_wait``, ``mark_end``, none of
    them moving data (``sdma_op`` 0, no BD, no 0xBF word, no CCE descriptor), the only
    increment away from its own core its ``peer_post``'s +1 on its unit's primary's peer
    semaphore ``144 + c`` (besides the handshake's ``entry_post``).  Returns how many
    secondaries were checked."""
    from nrtrewrite.simulate.artifacts import load_rank, read_top_manifest

    top = read_top_manifest(out)
    place, routed = _places(top)
    checked = 0
    for t in top["triggers"]:
        assert t["algorithm"] == "KANGARING"
        for item in t["kangaring"]:
            c = item["channel"]
            for unit in item["units"]:
                primary, *secondaries = unit
                for s in secondaries:
                    rf = load_rank(out, s)
                    legs = rf.arrays["legs.bin"]
                    dma, sems = rf.arrays["dma.bin"], rf.arrays["sem.bin"]
                    mine = legs[(legs["channel"] == c) & (legs["trigger"] == t["trigger"])]
                    assert mine.size, (s, c)
                    leaves = [lf for lf in mine["leaf"].tolist() if lf != MARK_COMPLETE]
                    assert leaves == [PEER_POST, PEER_WAIT, MARK_END], (s, c, leaves)
                    # no data at all: so none to its primary (or anyone)
                    targets = set()
                    for g in mine:
                        first, n = int(g["dma_first"]), int(g["dma_count"])
                        for bd in dma[first:first + n]:
                            targets.add(_data_target(int(bd["buf_ptr"]), place[s], routed))
                    assert targets == set(), (s, c, primary, targets)
                    assert set(mine["sdma_op"].tolist()) == {0}
                    assert mine["sb2sb_count"].sum() == mine["cce_count"].sum() == 0
                    # its increments away from its own core: the primary's peer semaphore
                    post = mine[mine["leaf"] == PEER_POST][0]
                    first, n = int(post["sem_first"]), int(post["sem_count"])
                    away = []
                    for rec in sems[first:first + n]:
                        if rec["ctrl"] & 0xFF != SUBOP_INC:
                            continue
                        core, window, sid = _sem_target(int(rec["addr"]), place[s], routed)
                        assert window == INC_WINDOW
                        if core != place[s]:
                            away.append((core, sid, int(rec["value"])))
                    assert away == [(place[primary], 144 + c, 1)], (s, c, away)
                    checked += 1
    return checked


def _kanga(tmp_path, op, dtype, ranks, n, lnc=1):
    from test_simulate import coll_spec, lower_spec
    return lower_spec(coll_spec(op, dtype, ranks, n, lnc=lnc), tmp_path / f"{op}-{lnc}",
                      algo="kangaring")


@pytest.mark.parametrize("op, dtype, ranks, n, lnc, per_channel", [
    # trn2 LNC 1, 16 ranks: 4 units of 4 a channel (TOPOLOGY §4): 12 secondaries a channel
    ("all_reduce", "bf16", 16, 4096, 1, 12),
    # LNC 2, 8 ranks: 4 units of 2 a channel (primary member c % 2): 4 secondaries a channel
    ("all_reduce", "bf16", 8, 1_100_000, 2, 4),
    ("all_gather", "fp32", 8, 65536, 2, 4),
    ("reduce_scatter", "fp16", 8, 8 * 65536, 2, 4),
])
def test_a_kangaring_secondary_moves_no_data_to_its_primary(tmp_path, op, dtype, ranks, n, lnc,
                                                            per_channel):
    """docs/DESIGN.md "Kangaring": primaries move and reduce, secondaries idle; a secondary
    runs two sync legs, ``peer_post`` (+1 on its primary's ``mine``) and ``peer_wait``.  So
    on a channel where a rank is a secondary, none of its legs writes (or reads) data on
    any rank, its primary included, and its only signal away is the post to that primary.
    Every secondary of every channel is checked: ``per_channel`` times the trigger's
    channels (their count is the selection's, docs/SELECTION.md §7, tested there)."""
    import json

    out = _kanga(tmp_path, op, dtype, ranks, n, lnc)
    channels = len(json.loads((out / "manifest.json").read_text())["triggers"][0]["kangaring"])
    assert _secondary_checks(out) == per_channel * channels


# ------------------------------------------------------------------ 2. the reader's raw names

def test_the_readers_folder_and_engine_names_print_once(tmp_path):
    """``neff/reader.py`` puts a listed subgraph's folder and its engines' names into the
    reason raw.  The reader refuses a name with a backslash or a C0 control first
    (``check_member_name``), so what reaches the reason has none, and escaping it there
    would change nothing: a C1 control, U+2028 or a bidirectional control is escaped by the
    line's last guard (``errors.escape_line``) exactly as ``escape_controls`` would, once,
    on stderr and in ``inspect --json``'s ``"error"``."""
    from nrtrewrite.neff.container import build_container, read_container

    src = read_container((FIX / "ar2.neff").read_bytes(), path="ar2.neff")
    members = dict(src.members)
    neff = json.loads(members["neff.json"])
    old = neff["subgraphs"][0]
    sg, eng = "sg\u2028x", "pe\x85"
    definition = json.loads(members[f"{old}/def.json"])
    engines = [eng if e == "pe" else e for e in definition["engines"]]
    assert eng in engines
    renamed = {}
    for name, data in members.items():
        if name.startswith(old + "/"):
            rest = name[len(old) + 1:]
            name = f"{sg}/{eng}.bin" if rest == "pe.bin" else f"{sg}/{rest}"
        renamed[name] = data
    renamed["neff.json"] = json.dumps(dict(neff, subgraphs=[sg])).encode()
    renamed[f"{sg}/def.json"] = json.dumps(dict(definition, engines=engines)).encode()
    renamed[f"{sg}/zz.bin"] = bytes(64)
    model = tmp_path / "m.neff"
    model.write_bytes(build_container(src.header, renamed))
    shown_sg, shown_eng = "sg" + BS + "u2028x", "pe" + BS + "x85"
    listed = ", ".join(shown_eng if e == eng else e for e in engines)
    why = (f"member {shown_sg}/zz.bin, subgraph {shown_sg}: named like the stream of engine "
           f"'zz', which {shown_sg}/def.json does not list (engines: {listed}): a trigger in "
           "it would be left unlowered")
    res = invoke("inspect", model)
    assert res.exit_code == 2
    assert res.stderr.splitlines() == [f"nrtrewrite: error: {model}: {why}"]
    res = invoke("inspect", "--json", model)
    assert json.loads(res.stdout)["error"] == f"{model}: {why}"
