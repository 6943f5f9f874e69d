"""The one error family of nrtrewrite.

Every error a user can provoke is an :class:`NrtRewriteError`.  It carries
*where* (file, member, stream, instruction index, byte offset, field, rank,
trigger) and *why*; ``str(err)`` is the one line the CLI prints.  Library code
never prints and never calls ``sys.exit``; the CLI turns these into one line on
stderr and a non-zero exit (``--traceback`` shows the rest).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Iterator

#: Control characters (C0, DEL, C1) as an error line shows them: escaped as Python writes
#: them in a string (``\n``, ``\r``, ``\t``, ``\x1b``), so that a line break or a terminal
#: escape in a name (a tar member, a subgraph, a JSON key, a path) cannot make the one line
#: two, nor move the cursor.
_CONTROL_ESCAPES = {c: f"\\u{c:04x}" if c >= 0x2000 else repr(chr(c))[1:-1]
                    for c in (*range(0x20), *range(0x7F, 0xA0),
                              # line and paragraph separators (a terminal may break the line
                              # there) and the bidirectional controls (they reorder what
                              # follows on screen: "Trojan Source")
                              0x2028, 0x2029, 0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F),
                              *range(0x2066, 0x206A))}
#: ... and, for a name, its backslash doubled: ``lit\nb`` (a backslash, then ``n``) and
#: ``lit`` + line break + ``b`` print differently.
_NAME_ESCAPES = {**_CONTROL_ESCAPES, ord("\\"): "\\\\"}


def escape_controls(text: Any) -> str:
    """A user-given name (a path, a tar member, a subgraph, a JSON key) as one printed line
    shows it, escaped exactly once: its backslashes doubled and its control characters
    escaped (:data:`_CONTROL_ESCAPES`), so that two different names never print alike.
    Not idempotent: apply it once, where the raw name is put into text (a location part
    when the line is made, a table cell, a path in a reason), never to a whole line."""
    return str(text).translate(_NAME_ESCAPES)  # (a Path as its str)


def escape_line(text: str) -> str:
    """``text`` with its control characters escaped and its backslashes left as they are:
    the last guard on a whole line that leaves the process (an error line, a warning, a
    reason), whose names were escaped where they were put in (:func:`escape_controls`, or
    quoted with ``repr`` or JSON, which double a backslash themselves).  Idempotent."""
    return text.translate(_CONTROL_ESCAPES)


#: Order in which location parts are printed.
_WHERE_KEYS = ("file", "member", "subgraph", "stream", "index", "offset", "field",
               "trigger", "rank", "channel", "artifact", "record")
#: Location parts that are names as a user or a model gave them (escaped when printed).
_NAME_KEYS = frozenset({"file", "member", "subgraph", "stream", "artifact"})


def path_text(path: Any) -> Any:
    """A path as the manifests, the ``--json`` documents and the error lines give it, the
    same text whatever the locale (docs/CLI.md "Paths in the output"): its bytes on disk
    read as UTF-8, a byte that is not UTF-8 kept as Python's escape for it (the lone
    surrogate ``\\udcff`` for ``\\xff``, as under a UTF-8 locale).  Python decodes a path
    with the locale's encoding: under ``LC_ALL=C`` without UTF-8 mode ``\\u00e9.json`` is
    ``\\udcc3\\udca9.json``, under ``LC_ALL=de_DE.ISO-8859-1`` ``\\u00c3\\u00a9.json``.
    Text the locale's encoding cannot hold is no path the file system gave: as it is (and
    None: None, a document's path not known)."""
    if path is None:
        return None
    text = os.fspath(path)
    try:
        raw = os.fsencode(text)
    except UnicodeEncodeError:
        return text
    return raw.decode("utf-8", "surrogateescape")


def escape_path(path: Any) -> str:
    """A path put into a printed line (a reason, a warning, a title, a ``written`` line):
    :func:`path_text` (its bytes as UTF-8 text whatever the locale, docs/CLI.md "Paths in
    the output"), then escaped once (:func:`escape_controls`), so one path prints one way
    in every locale.  Anything else (not a ``str``, ``bytes`` or ``os.PathLike``): only
    escaped."""
    if isinstance(path, (str, bytes, os.PathLike)):
        path = path_text(path)
    return escape_controls(path)


@dataclass(frozen=True)
class Where:
    """A location inside an input or output; every part optional."""

    file: str | None = None
    member: str | None = None
    subgraph: str | None = None
    stream: str | None = None
    index: int | None = None  # instruction index within the stream
    offset: int | None = None  # byte offset
    field: str | None = None
    trigger: int | None = None
    rank: int | None = None
    channel: int | None = None
    artifact: str | None = None
    record: int | None = None

    def merged(self, **kw: Any) -> "Where":
        return replace(self, **{k: v for k, v in kw.items() if v is not None})

    def __str__(self) -> str:
        """The location as an error line shows it: each name (file, member, subgraph,
        stream, artifact) escaped once (:func:`escape_controls`), the file's path as UTF-8
        text whatever the locale (:func:`path_text`); ``field``, a key path whose odd keys
        are JSON strings already (``jsonin.joined_key``), only guarded."""
        head = escape_path(str(self.file)) if self.file is not None else ""
        parts = []
        for key in _WHERE_KEYS[1:]:
            val = getattr(self, key)
            if val is None:
                continue
            if key == "offset":
                parts.append(f"offset 0x{val:x}")
            elif key == "index":
                parts.append(f"instruction {val}")
            elif key in _NAME_KEYS:
                parts.append(f"{key} {escape_controls(str(val))}")
            else:
                parts.append(f"{key} {val}")
        tail = ", ".join(parts)
        return escape_line(f"{head}: {tail}" if head and tail else head or tail)


def counted(n, noun: str) -> str:
    """``1 rank``, ``2 ranks``, ``0 rows``: ``n`` and ``noun``, plural unless ``n`` is 1."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


#: Characters of an error's reason shown whole (:func:`capped_why`: its error line, a
#: ``--json`` document, ``simulate``'s detail); a longer one (a value quoted in full: a list
#: of a million numbers where an integer belongs) shows its start and its end.  The error
#: holds it whole (:data:`MAX_HELD_WHY_CHARS`).
MAX_WHY_CHARS = 1000


#: A backslash escape as JSON, Python's ``repr`` and :func:`escape_controls` write one:
#: ``\uXXXX``, ``\xNN``, ``\UXXXXXXXX``, else the backslash and the one character after it
#: (``\\``, ``\"``, ``\n``).
_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|U[0-9a-fA-F]{8}|.)", re.DOTALL)
#: The longest of them (``\UXXXXXXXX``).
_MAX_ESCAPE_CHARS = 10


def _unescaped(text: str, j: int) -> bool:
    """The backslash at ``j`` starts an escape: an even run of backslashes before it."""
    run = 0
    while j - run > 0 and text[j - run - 1] == "\\":
        run += 1
    return run % 2 == 0


def _escape_around(text: str, cut: int) -> tuple[int, int] | None:
    """The [start, end) of the escape of ``text`` that a cut before index ``cut`` would
    split, if any: one that starts before ``cut`` at a backslash not itself escaped (after
    an even run of backslashes) and ends after it."""
    for j in range(cut - 1, max(cut - _MAX_ESCAPE_CHARS, 0) - 1, -1):
        if text[j] != "\\":
            continue
        if not _unescaped(text, j):  # (the second of an escaped backslash: look further back)
            continue
        escape = _ESCAPE.match(text, j)
        end = escape.end() if escape else j + 1  # (a backslash that ends the text)
        return (j, end) if end > cut else None
    return None


#: A surrogate's ``\\u`` escape (JSON's of a character past U+FFFF is two: ``\\ud83d\\ude00``).
_HIGH_SURROGATE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}")
_LOW_SURROGATE = re.compile(r"\\u[dD][c-fC-F][0-9a-fA-F]{2}")


def _splits_pair(text: str, cut: int) -> bool:
    """A cut before ``cut`` (at an escape's edge) parts a surrogate pair's two escapes: a
    high one (``\\ud800`` .. ``\\udbff``) ends at ``cut``, a low one (``\\udc00`` ..
    ``\\udfff``) starts there."""
    return (cut >= 6 and _HIGH_SURROGATE.fullmatch(text, cut - 6, cut) is not None
            and _unescaped(text, cut - 6) and _LOW_SURROGATE.match(text, cut) is not None)


def cut_middle(text: str, limit: int, head: int, tail: int,
               form: str = "{head} ... ({n} characters in all) ... {tail}",
               chars: int | None = None) -> str:
    """``text`` if it has at most ``limit`` characters, else its first ``head`` and last
    ``tail`` characters (none for 0) and its length ``n`` (``chars`` when given: the length
    of the text ``text`` shows, a reason escaped for a stream or held cut,
    :data:`MAX_HELD_WHY_CHARS`) put in ``form``: by default
    around ``... (N characters in all) ...``; a message that has long shown a cut value its
    own way (``'123456789012...'``, ``ab...yz (N characters)``) gives that form.  A cut
    never splits a backslash escape (``\\u00e8``, ``\\x1b``, ``\\\\``, ``\\"``: text
    escaped as JSON or ``repr`` writes it, or by :func:`escape_controls`): the head ends
    before it, the tail starts after it, a few characters fewer (until 2026-12-06 a head
    could end on half of one, ``"aaa\\ ... (402 characters in all) ...``).  Nor does it
    part the two escapes of a surrogate pair (one character past U+FFFF, as JSON escapes
    it: ``\\ud83d\\ude00``): a head that would end on the high one ends before it, a
    tail that would start on the low one starts after it (until 2026-12-06 ``json_text`` of
    a long string of emoji ended its head on a ``\\ud83d`` whose ``\\ude00`` was cut).  A
    lone surrogate's escape, half of no pair, is kept as any other."""
    if len(text) <= limit:
        return text
    n = len(text) if chars is None else chars
    start = len(text) - tail if tail else len(text)
    if (split := _escape_around(text, head)) is not None:
        head = split[0]
    if _splits_pair(text, head):
        head -= 6
    if tail and (split := _escape_around(text, start)) is not None:
        start = split[1]
    if tail and _splits_pair(text, start):
        start += 6
    return form.format(head=text[:head], tail=text[start:], n=n)


def json_text(value: Any) -> str:
    """``value`` in a message as JSON writes it (``"BF16"``, ``true``, ``null``, ``[0, 1]``,
    a mapping's keys sorted), not as Python does (``'BF16'``, ``True``, ``None``): the
    value of a JSON file (a manifest, a topology file); past 300 characters its start and
    end (a replica group of thousands of ranks).  JSON's ASCII escapes are kept (judged
    twice, RELIABILITY.md §6: a look-alike or invisible character printed raw reads as the
    name it is refused for, ``"n\\u043edes"`` beside ``"nodes"``, and a value cut before its
    escaping grows past the line's cap), so a recorded name reads ``"mod\\u00e8le.neff"``."""
    return cut_middle(json.dumps(value, sort_keys=True), 300, 200, 80)


#: The longest unknown name :func:`did_you_mean` compares with the known ones (a longer one,
#: a value quoted whole, is no typo of a short name: nothing is suggested).
MAX_SUGGEST_CHARS = 100


def did_you_mean(word: Any, names: Iterable[str], listed: str = "",
                 quote: Callable[[str], str] = repr) -> str:
    """The parenthesis after an unknown name, one form for every such refusal (docs/CLI.md
    "Errors"): `` (did you mean "nodes"? allowed: ...)``, the closest of ``names`` to
    ``word`` (``difflib.get_close_matches``, its default cutoff 0.6) shown by ``quote``, as
    the message quotes ``word`` (``repr`` for a command-line value, :func:`json_text` for a
    JSON file's), then ``listed``, the names as the message lists them.  No name close (or
    ``word`` not a string, or longer than :data:`MAX_SUGGEST_CHARS`): `` (listed)``, or
    nothing when ``listed`` is empty.  Its leading space included.

    A name equal to ``word`` but for case (``str.casefold``: ``"NODES"`` is ``"nodes"``) is
    suggested first, whatever difflib's ratio (``"NODES"`` / ``"nodes"``: 0.0, so until
    2026-12-06 nothing was suggested); of several such names, the closest by difflib, else
    the first.  Only ``names`` are looked at: a name the caller left out (one that does not
    fit there) is never suggested, whatever its case."""
    close: list[str] = []
    if isinstance(word, str) and 0 < len(word) <= MAX_SUGGEST_CHARS:
        import difflib  # (only on an error: not at every command's start)
        names = list(names)
        folded = word.casefold()
        same = [n for n in names if isinstance(n, str) and n.casefold() == folded]
        close = difflib.get_close_matches(word, same or names, n=1, cutoff=0.0 if same else 0.6)
    body = " ".join(p for p in (f"did you mean {quote(close[0])}?" if close else "", listed)
                    if p)
    return f" ({body})" if body else ""


def capped_why(reason: str, chars: int | None = None) -> str:
    """A reason as it is shown (an error line's ``<why>``; ``simulate``'s ``detail``, in its
    ``--json`` and, escaped for stdout, in its table; docs/CLI.md "Errors"): past
    :data:`MAX_WHY_CHARS` characters its first 700 and last 200 around ``... (N characters
    in all) ...``, ``N`` being ``chars`` (the whole reason's length, for one held cut or
    escaped for a stream) or its own."""
    return cut_middle(reason, MAX_WHY_CHARS, MAX_WHY_CHARS - 300, 200, chars=chars)


#: Characters of a reason an error holds whole: far above what is shown of it
#: (:data:`MAX_WHY_CHARS`), so that the reason is cut once, where it is shown, and a reason
#: quoted in another's is quoted whole; a longer one (a value of megabytes quoted whole) is
#: held as its first 60,000 and last 30,000 characters around the cut's mark, and its
#: whole length (:attr:`NrtRewriteError.reason_chars`), so that an error holds no
#: unbounded text and what is shown of it is the same.
MAX_HELD_WHY_CHARS = 100_000
_HELD_HEAD, _HELD_TAIL = 60_000, 30_000


#: Characters of an error line printed whole; a longer one (a location, a path or an
#: argument of 100,000 characters) keeps its start and end (:data:`MAX_WHY_CHARS` caps the
#: reason alone).  The same cap holds for a warning or note line and for the ``"error"`` of
#: a ``--json`` document (:func:`cut_line`; docs/CLI.md "Errors").
MAX_LINE_CHARS = 2000


#: In a line too long to print whole, each run of this many characters or more without a
#: space (a path, a value) keeps its start and end, so that the words between - the reason -
#: survive: `OUT: cannot write the output: File name too long (PATH)` with a path of 4,000
#: characters lost its reason in the cut of the whole line.
MAX_TOKEN_CHARS = 400


def cut_line(text: str) -> str:
    """``text`` capped as an error line is (docs/CLI.md "Errors"): past
    :data:`MAX_LINE_CHARS` characters, each run of more than :data:`MAX_TOKEN_CHARS`
    without a space keeps its first 200 and last 150, then the whole its first 1,500 and
    last 400 (:func:`cut_middle`: never inside an escape).  The error line on stderr
    (``cli._capped_line``, after what stderr cannot hold is escaped), a warning or note
    line, and a ``--json`` document's ``"error"`` (since 2026-12-06; until then only its
    reason was capped, at :data:`MAX_WHY_CHARS`, and a warning not at all)."""
    if len(text) > MAX_LINE_CHARS:
        text = re.sub(r"\S{%d,}" % (MAX_TOKEN_CHARS + 1), _cut_token, text)
    return cut_middle(text, MAX_LINE_CHARS, MAX_LINE_CHARS - 500, 400)


#: the mark of a cut (:func:`cut_middle`'s default form) right after or before a run
_MARK_AFTER = re.compile(r" \.\.\. \(\d+ characters in all\) \.\.\. ")
_MARK_BEFORE = re.compile(r" \.\.\. \(\d+ characters in all\) \.\.\. \Z")


def _cut_token(m: re.Match) -> str:
    """A run of :func:`cut_line` cut, unless it is the head or tail of a text cut already
    (a reason past :data:`MAX_WHY_CHARS`, capped where the line is made: the run touches the
    cut's mark): that text is cut once, its ``N`` counting it whole (docs/CLI.md "Errors";
    until 2026-12-07 ``lower -o`` of 5,000 characters cut the path the reason quotes twice,
    the second mark counting a piece of the first cut, ``(656 characters in all)``)."""
    run = m.group(0)
    if _MARK_AFTER.match(m.string, m.end()) or _MARK_BEFORE.search(m.string, 0, m.start()):
        return run
    return cut_middle(run, MAX_TOKEN_CHARS, 200, 150)


#: How ``simulate MODEL.neff`` names its temporary folder in its lines, title and document
#: (:meth:`NrtRewriteError.named_within`): stable from run to run, and no path of the user's.
TEMPORARY_FOLDER = "<temporary>"


def path_inside(path: str | os.PathLike, folder: str | os.PathLike) -> str | None:
    """``path`` relative to ``folder`` where it lies inside it, or None where it does not
    (the folder itself, outside it, another drive): :func:`temporary_name`, and ``bundle``'s
    naming of a file of its temporary sibling by its place in the output."""
    try:
        rel = os.path.relpath(path, folder)
    except ValueError:  # (another drive)
        return None
    if rel in (os.curdir, os.pardir) or rel.startswith(os.pardir + os.sep):
        return None
    return rel


def temporary_name(path: str | os.PathLike, folder: str | os.PathLike) -> str | None:
    """``path`` named from inside ``folder`` under :data:`TEMPORARY_FOLDER`
    (``<temporary>/ar2.lowered/rank-0000``), or None where it is not inside it (the folder
    itself, outside it, another drive)."""
    rel = path_inside(path, folder)
    return None if rel is None else f"{TEMPORARY_FOLDER}/{rel}"


def raised_from(err: BaseException) -> Iterator[BaseException]:
    """``err``, then the exceptions it was raised from or during (its ``__cause__``, else
    its ``__context__``, and theirs), innermost last, each once (a cycle ends the walk): the
    chain the CLI's classification reads (``cli._chain``) and a pool worker sends back with
    its exception (``ahead._failure``)."""
    seen: set[int] = set()
    cur: BaseException | None = err
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        cur = cur.__cause__ or cur.__context__


class NrtRewriteError(Exception):
    """Base of every error nrtrewrite raises on purpose."""

    exit_code = 2

    def __init__(self, why: str, where: Where | None = None, *, left_out: int = 0,
                 **where_kw: Any):
        """``why``: the reason, whole; ``left_out``: how many characters of it are not in
        ``why`` (a reason that quotes another error's :attr:`reason` held cut passes that
        error's :attr:`left_out`, so that its count is the whole's)."""
        # (a reason quotes its names escaped or with repr; the location escapes its own:
        # Where.__str__; so the reason is only guarded, never escaped a second time), and
        # held whole (up to MAX_HELD_WHY_CHARS): it is cut where it is shown, its escapes
        # counted (why, line(); until 2026-12-07 it was cut here, and simulate's detail
        # cell, given the cut reason, looked for the cut's mark in it to count it once)
        self._hold(why, left_out)
        self.where = (where or Where()).merged(**where_kw)
        super().__init__(self.line())

    def _hold(self, why: str, left_out: int = 0) -> None:
        """Hold the reason ``why``, escaped and cut as :meth:`__init__` says."""
        why = escape_line(why)
        #: the whole reason's length, escaped (of which :attr:`reason` may hold a part)
        self.reason_chars = len(why) + left_out
        #: the reason, escaped, whole up to :data:`MAX_HELD_WHY_CHARS` characters
        self.reason = why if len(why) <= MAX_HELD_WHY_CHARS else cut_middle(
            why, MAX_HELD_WHY_CHARS, _HELD_HEAD, _HELD_TAIL, chars=self.reason_chars)

    @property
    def left_out(self) -> int:
        """The whole reason's length less :attr:`reason`'s (0 unless it is past
        :data:`MAX_HELD_WHY_CHARS`; the mark held in place of its middle counted as held):
        what a reason quoting :attr:`reason` passes as its own ``left_out``."""
        return self.reason_chars - len(self.reason)

    @property
    def why(self) -> str:
        """The reason as the error line shows it (:func:`capped_why`, docs/CLI.md "Errors":
        past 1,000 characters its first 700 and last 200, the whole's count between)."""
        return capped_why(self.reason, self.reason_chars)

    def line(self) -> str:
        loc = str(self.where)
        return f"{loc}: {self.why}" if loc else self.why

    def at(self, **where_kw: Any) -> "NrtRewriteError":
        """Return the same error with more location filled in (outer context)."""
        merged = Where(**{k: where_kw.get(k) for k in where_kw if k in Where.__dataclass_fields__})
        # outer context fills only what the inner error did not set
        fill = {k: v for k, v in merged.__dict__.items()
                if v is not None and getattr(self.where, k) is None}
        self.where = replace(self.where, **fill)
        self.args = (self.line(),)
        return self

    def elsewhere(self, where: Where) -> "NrtRewriteError":
        """A new error of the same class and reason at ``where``: the reason held is this
        error's own object, neither escaped again nor copied (``explain`` keeps one refusal
        per trigger of a request refused once, ``cli.explain._plan_model``: until
        2026-12-07 each was rebuilt from the reason, whose escaping copied it, so 12,000
        triggers refused with a reason of 95,000 characters held 1.1 GB)."""
        new = type(self).__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.where = where
        new.args = (new.line(),)
        return new

    def reworded(self, why: str) -> "NrtRewriteError":
        """A new error of the same class, place and attributes with the reason ``why``,
        escaped and held as the constructor holds one (:data:`MAX_HELD_WHY_CHARS`)."""
        new = self.elsewhere(self.where)
        new._hold(why)
        new.args = (new.line(),)
        return new

    def named_within(self, folder: str | os.PathLike) -> "NrtRewriteError":
        """The same error, its file named from inside ``folder`` when it lies there, under
        :data:`TEMPORARY_FOLDER`: ``simulate MODEL.neff``'s temporary folder, whose random
        name would make two runs' lines differ (``<temporary>/ar2.lowered/rank-0000: ...``,
        docs/CLI.md "simulate"; the mark, since review 49l, so that the name is not taken
        for ``lower``'s own ``ar2.lowered`` beside the model)."""
        name = None if self.where.file is None else temporary_name(self.where.file, folder)
        if name is not None:
            self.where = replace(self.where, file=name)
        # a path inside it that the reason quotes, escaped as it was put in (``lower``'s
        # ``cannot write the output: No space left on device (PATH)``; until 2026-12-07
        # with the folder's random name)
        inside = escape_path(os.path.join(folder, ""))
        if inside in self.reason:
            count = self.reason.count(inside)
            self.reason = self.reason.replace(inside, f"{TEMPORARY_FOLDER}/")
            self.reason_chars -= count * (len(inside) - len(TEMPORARY_FOLDER) - 1)
        self.args = (self.line(),)
        return self

    def named_as(self, folder: str | os.PathLike, given: str) -> "NrtRewriteError":
        """The same error, its file named from ``given`` where it is ``folder`` or lies in it:
        ``simulate OUT``'s folder as given (``./o/rank-0000: ...``, not pathlib's
        ``o/rank-0000``; docs/CLI.md "Paths in the output", as ``lower``'s lines; until
        2026-12-07 pathlib's form)."""
        file = self.where.file
        if file is None:
            return self
        if os.fspath(file) == os.fspath(folder):
            name = given
        else:
            rel = path_inside(file, folder)
            if rel is None:
                return self
            name = os.path.join(given, rel)
        self.where = replace(self.where, file=name)
        self.args = (self.line(),)
        return self

    def __str__(self) -> str:
        return self.line()

    def __reduce__(self):
        """Pickled as its class, its ``args`` and its attributes, rebuilt without calling
        ``__init__`` (:func:`_unpickled`): the copy is the same error, ``args`` included.
        Until 2026-12-07 the default (``cls(*args)``, then the attributes) made the line
        the reason of a new error, whose ``args[0]`` was that line cut as a reason is, past
        1,000 characters (``str()`` the same: it reads the attributes); and a class whose
        ``__init__`` needs more than a reason (the assembler's ``_NotUnicode(why, found)``)
        did not come back from a ``lower -j 2`` worker as itself (an internal error, status
        70)."""
        return _unpickled, (type(self), self.args), self.__dict__.copy()


def _unpickled(cls: type, args: tuple) -> NrtRewriteError:
    """An :class:`NrtRewriteError` of class ``cls`` and ``args``, its attributes to be set
    by pickle (:meth:`NrtRewriteError.__reduce__`)."""
    return cls.__new__(cls, *args)  # (BaseException.__new__ sets args; no __init__ runs)


class ParseError(NrtRewriteError):
    """The input bytes do not follow NEFF-LIKE.md."""


class ValidationError(NrtRewriteError):
    """The input parses but breaks a rule (def.json, trigger fields, ...)."""


class LimitError(NrtRewriteError):
    """A hard limit (decompression, SPAD size, semaphores, channels) was exceeded."""


class ResourceError(NrtRewriteError):
    """The machine lacks what the command needs (memory): status 71, as when the system
    refuses memory (``EX_OSERR``; docs/CLI.md "Errors")."""

    exit_code = 71


class SelectionError(NrtRewriteError):
    """No legal algorithm, or an override refused by a predicate."""


class LoweringError(NrtRewriteError):
    """The collective cannot be lowered (dtype, op, topology)."""


class OutputError(NrtRewriteError):
    """Writing or reading an output folder failed (exists, tampered, ...)."""


class SimulationError(NrtRewriteError):
    """The simulator found a protocol error (deadlock, race, bad address, ...)."""


@dataclass
class Warning_:
    """A non-fatal note for the CLI to show (library code never prints)."""

    message: str
    where: Where = field(default_factory=Where)
