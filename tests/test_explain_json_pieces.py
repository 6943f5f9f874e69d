"""``explain --json`` written a trigger record at a time (fixer 57l, review 57j: the document
whole took about 7 times its size in memory): the bytes of ``json.dumps(doc, indent=2)`` and
a newline, as before (docs/CLI.md "explain --json").
"""

from __future__ import annotations

import errno
import io
import json

import pytest

from nrtrewrite.cli.explain import _json_pieces

from test_simulate import FIX, cli


def _doc(triggers):
    # the keys in explain's order, values of every JSON kind, non-ASCII text and a string
    # with a newline (escaped by json.dumps, so no line of it is indented)
    return {"model": "m\u00e9/\u6743.neff",
            "topology": {"name": "trn2", "nodes": 2, "links": [[0, 1, 2], []]},
            "override": None, "override_source": None, "rank": 3,
            "policy": {"lowerable": ["RING"], "precedence": []},
            "model_refusal": "a\nb \"q\"", "refused_not_shown": [],
            "triggers": triggers, "skipped_triggers": [1, 2]}


@pytest.mark.parametrize("triggers", [
    [],
    [{"trigger": 0, "group": [0, 1], "lowered": {"algorithm": "RING", "legs": []},
      "x": 1.5, "ok": True, "none": None}],
    [{"trigger": k, "candidates": [{"legal": k % 2 == 0, "reason": "r\u00e9"}], "mesh": {}}
     for k in range(3)],
])
def test_pieces_join_to_json_dumps_indent_2(triggers):
    doc = _doc(triggers)
    pieces = list(_json_pieces(doc, "triggers"))
    assert "".join(pieces) == json.dumps(doc, indent=2) + "\n"
    # one piece per trigger record (plus the head, keys and the closing), not one document
    assert sum(p.lstrip(",").startswith(("[\n    {", "\n    {")) for p in pieces) \
        == len(triggers)


@pytest.mark.parametrize("args", [
    ["ar2.neff"], ["groups.neff", "--rank", "5"], ["groups.neff", "--rank", "5", "--trigger", "0"],
    ["mix8.neff", "--algo", "ring"],
])
def test_explain_json_is_json_dumps_indent_2_of_its_document(args):
    res = cli("explain", FIX / args[0], *args[1:], "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)  # (dict keeps the keys' order)
    assert list(doc)[-2:] == ["triggers", "skipped_triggers"]
    assert res.stdout == json.dumps(doc, indent=2) + "\n"


@pytest.mark.parametrize("k", [1, 3])
def test_an_error_while_the_pieces_are_made_is_the_error_document_alone(k, monkeypatch):
    """Review 57s: the pieces were written as they were made, so a MemoryError from the
    k-th trigger record's ``json.dumps`` (a big record; the command's out-of-memory line,
    exit 71) came after a cut document: stdout no JSON.  Every piece is made before the
    first is written: stdout is the error document alone (CLI.md "Errors": on an error
    stdout is still one document)."""
    import types
    import nrtrewrite.cli.explain as ex
    real, seen = json.dumps, []

    def dumps(obj, *a, **kw):
        if isinstance(obj, dict) and "trigger" in obj and "lowered" in obj:  # a record
            seen.append(obj)
            if len(seen) == k:
                raise MemoryError
        return real(obj, *a, **kw)

    fake = types.SimpleNamespace(**{n: getattr(json, n) for n in dir(json)
                                    if not n.startswith("__")})
    fake.dumps = dumps
    monkeypatch.setattr(ex, "json", fake)
    res = cli("explain", "--json", FIX / "mix8.neff")
    assert len(seen) == k and res.exit_code == 71, (len(seen), res.output)
    doc = json.loads(res.stdout)  # one document, nothing before it
    assert doc["triggers"] == [] and "memory" in doc["error"], doc


def test_pieces_of_an_empty_document_are_json_dumps_of_it():
    """``json.dumps({}, indent=2)`` is ``{}`` (Python's rule: an empty object has no lines);
    the pieces gave ``{`` and ``}`` on two lines (the closing reading of the fifty-seventh
    session; explain never writes one)."""
    assert "".join(_json_pieces({}, "triggers")) == "{}\n"
    assert "".join(_json_pieces({"triggers": []}, "triggers")) == '{\n  "triggers": []\n}\n'


class _Record(dict):
    """A trigger record that a weak reference can follow (a dict cannot be)."""

    __slots__ = ("__weakref__",)


def _records_watched(monkeypatch, alive_at_each: list):
    """``explain_selection`` returning records whose lives are followed: ``alive_at_each``
    gets, as each record is made, how many of the records made before it are alive."""
    import weakref

    import nrtrewrite.cli.explain as ex
    real, made = ex.explain_selection, []

    def explain_selection(*a, **kw):
        alive_at_each.append(sum(r() is not None for r in made))
        rec = _Record(real(*a, **kw))
        made.append(weakref.ref(rec))
        return rec
    monkeypatch.setattr(ex, "explain_selection", explain_selection)


@pytest.mark.parametrize("in_memory", [1 << 30, 1])
def test_explain_json_holds_one_trigger_record_at_a_time(in_memory, monkeypatch):
    """The fifty-seventh session's "Left": ``explain --json`` held every trigger record and
    its text until the document was written (167 MB for a 50 MB document).  A record's text
    is made as the record is, and the record dropped: none made before is alive when the
    next is made.  The texts go to an unnamed temporary file past ``SPOOL_IN_MEMORY`` bytes
    (1: from the first record): either way the bytes of ``json.dumps(doc, indent=2)``."""
    import nrtrewrite.cli.explain as ex
    monkeypatch.setattr(ex, "SPOOL_IN_MEMORY", in_memory)
    alive: list[int] = []
    _records_watched(monkeypatch, alive)
    res = cli("explain", "--json", FIX / "mix8.neff")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert res.stdout == json.dumps(doc, indent=2) + "\n"
    assert len(doc["triggers"]) == len(alive) > 2
    assert alive == [0] * len(alive)


class FullAfter(io.RawIOBase):
    """An unnamed file of 5,000 bytes' room: a write past it writes what fits, then raises
    ENOSPC (as FileIO over a full disk); a read gives at most ``read_at_most`` bytes (one
    read(2) may give fewer than asked)."""

    def __init__(self, read_at_most: int = 1 << 62):
        self.data = bytearray()
        self.pos = 0
        self.read_at_most = read_at_most

    def writable(self):
        return True

    def readable(self):
        return True

    def seekable(self):
        return True

    def write(self, b):
        room = 5000 - len(self.data)
        if room <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.data += bytes(b)[:room]
        return min(room, len(b))

    def seek(self, pos, whence=0):
        self.pos = pos
        return pos

    def readinto(self, b):
        n = min(len(b), self.read_at_most, len(self.data) - self.pos)
        b[:n] = self.data[self.pos:self.pos + n]
        self.pos += n
        return n


def test_explain_json_goes_on_in_memory_where_no_temporary_file_can_be_written(monkeypatch):
    """No temporary folder (``temp_root`` raising), or the file failing part way through (a
    full disk after 5,000 bytes): the texts stay in memory, the document is whole."""
    import errno

    import nrtrewrite.cli.explain as ex
    monkeypatch.setattr(ex, "SPOOL_IN_MEMORY", 1)
    res = cli("explain", "--json", FIX / "mix8.neff")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    whole = json.dumps(doc, indent=2) + "\n"
    assert len(whole) > 10_000  # (so that the disk below fills part way through)

    def no_folder():
        raise FileNotFoundError(errno.ENOENT, "none of the folders tried can be written")
    monkeypatch.setattr(ex, "temp_root", no_folder)
    res = cli("explain", "--json", FIX / "mix8.neff")
    assert (res.exit_code, res.stdout) == (0, whole)

    import tempfile

    files = []

    def temporary_file(*a, **kw):
        files.append(FullAfter())
        return files[-1]
    monkeypatch.undo()
    monkeypatch.setattr(ex, "SPOOL_IN_MEMORY", 1)
    monkeypatch.setattr(tempfile, "TemporaryFile", temporary_file)
    res = cli("explain", "--json", FIX / "mix8.neff")
    assert (res.exit_code, res.stdout) == (0, whole)
    assert len(files) == 1 and len(files[0].data) == 5000 and files[0].closed


def test_a_full_disk_after_a_short_read_back_still_gives_the_whole_document(monkeypatch):
    """Review 58m: the texts written before a full disk were read back with one ``read``,
    one read(2) of an unbuffered file, which may return fewer bytes (Linux: at most
    0x7ffff000 a call, so a spool past 2 GiB): the rest was dropped, a cut document with
    exit 0.  A file whose reads give at most 1,000 bytes and whose disk is full after
    5,000: the document is whole, ``json.dumps(doc, indent=2)``."""
    import tempfile

    import nrtrewrite.cli.explain as ex
    res = cli("explain", "--json", FIX / "mix8.neff")
    assert res.exit_code == 0, res.output
    whole = json.dumps(json.loads(res.stdout), indent=2) + "\n"

    files = []

    def temporary_file(*a, **kw):
        files.append(FullAfter(read_at_most=1000))
        return files[-1]
    monkeypatch.setattr(ex, "SPOOL_IN_MEMORY", 1)
    monkeypatch.setattr(tempfile, "TemporaryFile", temporary_file)
    res = cli("explain", "--json", FIX / "mix8.neff")
    assert (res.exit_code, res.stdout) == (0, whole)
    assert len(files) == 1 and len(files[0].data) == 5000 and files[0].closed


@pytest.mark.parametrize("k", [1, 3])
def test_an_error_after_records_went_to_the_temporary_file_is_the_error_document_alone(
        k, monkeypatch):
    """The rule of :func:`test_an_error_while_the_pieces_are_made_is_the_error_document_alone`
    where the records made before went to the temporary file (``SPOOL_IN_MEMORY`` 1)."""
    import nrtrewrite.cli.explain as ex
    monkeypatch.setattr(ex, "SPOOL_IN_MEMORY", 1)
    test_an_error_while_the_pieces_are_made_is_the_error_document_alone(k, monkeypatch)


def test_an_empty_record_spool_is_an_empty_list():
    """Every trigger skipped by ``--rank``: ``"triggers": []``, as ``json.dumps`` gives an
    empty list, not ``[`` and ``]`` on two lines."""
    from nrtrewrite.cli.explain import _RecordSpool

    doc = {"model": "m", "triggers": _RecordSpool(), "skipped_triggers": [0, 1]}
    assert "".join(_json_pieces(doc, "triggers")) == json.dumps(
        {"model": "m", "triggers": [], "skipped_triggers": [0, 1]}, indent=2) + "\n"


class _FailingReads(FullAfter):
    """A temporary file with room for all, whose third read raises EIO (``eio``) or whose
    reads end after 2,000 bytes (an early end)."""

    def __init__(self, eio: bool):
        super().__init__()
        self.eio, self.reads = eio, 0

    def write(self, b):
        self.data += bytes(b)
        return len(b)

    def readinto(self, b):
        self.reads += 1
        if self.eio and self.reads == 3:
            raise OSError(errno.EIO, "Input/output error")
        if not self.eio and self.pos >= 2000:
            return 0
        return super().readinto(b[:1000])


@pytest.mark.parametrize("eio", [True, False])
def test_a_temporary_file_that_cannot_be_read_back_is_the_error_document_alone(
        eio, monkeypatch):
    """Closing reading 58w: the records' temporary file was copied to stdout after the
    document's head, so a read failing part way (an I/O error) left a cut document before
    the error document, reported as a bug (exit 70).  The file is read through before the
    first byte: stdout is the error document alone, status 71 (the machine's, CLI.md
    "Errors"), naming the file's read."""
    import tempfile

    import nrtrewrite.cli.explain as ex
    monkeypatch.setattr(ex, "SPOOL_IN_MEMORY", 1)
    monkeypatch.setattr(tempfile, "TemporaryFile", lambda *a, **kw: _FailingReads(eio))
    res = cli("explain", "--json", FIX / "mix8.neff")
    assert res.exit_code == 71, res.output
    doc = json.loads(res.stdout)  # one document, nothing before it
    want = ("could not be read back (Input/output error)" if eio
            else "gave back 2000 of the")
    assert doc["triggers"] == [] and want in doc["error"], doc
