"""Assemble a human-written spec (YAML or JSON) into a NEFF-like file.

The schema is documented, with a full example, in docs/ASSEMBLE.md.  In short::

    header: {pkg_version: 2, name: ar2, lnc_size: 1, ...}
    subgraphs:
      - name: sg00
        vars: [{name: grad_in, type: input, size: 1MiB}, ...]
        replica_groups: [[0, 1]]
        engines:
          sp:
            - nop: 2
            - all_reduce: {dtype: bf16, op: add, src: grad_in, dst: grad_out, bytes: 1MiB}
          pool: []

The assembler encodes; the reader judges.  Unless the spec says
``validate: false``, the assembled bytes are read back with
:func:`nrtrewrite.neff.reader.read_model_bytes`, so an assembled file is always a
valid input.  Escape hatches (``raw``, ``patch``, ``ext: false``, ``def_json``,
``neff_json``, ``extra_members``, ``omit_members``, ``raw_header``, ``trailing``)
build deliberately invalid files for tests.
"""

from __future__ import annotations

import bisect
import datetime
import itertools
import json
import math
import os
import re
import uuid as uuidlib
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

import construct as cs
import yaml

from nrtrewrite.codes import DTYPE_SIZE, VAR_TYPE_NAMES, AluOp, CType, DType, Opcode
from nrtrewrite.errors import (
    LimitError, NrtRewriteError, OutputError, ParseError, ValidationError, Where, cut_middle,
    did_you_mean, escape_controls, escape_path,
)
from nrtrewrite import jsonin
from nrtrewrite.jsonin import MAX_JSON_INT_DIGITS, non_finite_path
from nrtrewrite.neff.container import (
    END_OF_ARCHIVE, HEADER_FIELDS, HEADER_SIZE, MAX_MEMBER_BYTES, MAX_MEMBERS, MAX_TOTAL_BYTES,
    NEFF_HEADER, build_container, default_header, MAX_SPEC_FILE_BYTES, check_member_name,
    read_file_bytes, shown_member_name, tar_member_bytes,
)
from nrtrewrite.neff.fields import patch_field
from nrtrewrite.neff.instructions import (
    WORD_FIELDS, WORD_SIZE, WORD_STRUCTS, encode_word, opaque_word,
)
from nrtrewrite.neff.model import Model
from nrtrewrite.neff.reader import DEF_JSON, NEFF_JSON, NEFF_LIKE_VERSION, read_model_bytes
from nrtrewrite.sizes import MAX_SIZE_DIGITS
from nrtrewrite.topology.model import MAX_TOPOLOGY_RANKS

#: Spec dtype names: the DType member names in lower case (bf16, fp16, fp32, fp8_e4, int32...).
DTYPE_NAMES: dict[str, DType] = {d.name.lower(): d for d in DType}
#: Spec op names: add, max, min.
ALU_NAMES: dict[str, AluOp] = {a.name.lower(): a for a in AluOp}
#: Spec trigger kinds.
TRIGGER_KINDS: dict[str, CType] = {
    "all_reduce": CType.ALL_REDUCE,
    "all_gather": CType.ALL_GATHER,
    "reduce_scatter": CType.REDUCE_SCATTER,
}
#: The instructions of a stream: the one key of its mapping (``nop`` also alone).
INSTRUCTION_KINDS = ("nop", "opaque", "raw", "repeat", *TRIGGER_KINDS)
#: Opcode of the ``nop`` filler word (an opaque, non-pseudo opcode).
NOP_OPCODE = 0x00
DEFAULT_BUILD_VERSION = "nrtrewrite-assemble"

#: A size string (``64KiB``) and a rank range (``0..7``): ASCII digits only (``\d`` and
#: int() also read Arabic-Indic ``٤`` and full-width ``４``, which ASSEMBLE.md's sizes are not);
#: white space around them any Unicode space, as a size on the command line (``sizes.py``).
_SIZE_RE = re.compile(r"^\s*([0-9]+)\s*(B|KiB|MiB|GiB)?\s*$")
_SIZE_UNITS = {None: 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
_RANGE_RE = re.compile(r"^\s*([0-9]+)\s*\.\.\s*([0-9]+)\s*$")
_SYNC_KEYS = ("wait_mode", "wait_idx", "update_mode", "update_idx", "semaphore_value")
_HEADER_KEYS = ("pkg_version", "name", "neff_version_major", "neff_version_minor",
                "neff_build_version", "num_tpb", "uuid", "requested_tpb_count",
                "tpb_per_node", "feature_bits", "lnc_size")
_TOP_KEYS = ("header", "subgraphs", "validate", "raw_header", "trailing", "neff_json",
             "extra_members", "omit_members")
_SG_KEYS = ("name", "vars", "replica_groups", "engines", "def_json")
_VAR_KEYS = ("name", "type", "size", "partitions", "var_id")
_TRIGGER_KEYS = ("opcode", "dtype", "op", "group", "num_elements", "bytes", "src", "dst",
                 "stream_id", "channel_id", "sync", "ext_sync", "patch", "patch_ext", "ext")

#: Instruction words one stream member can hold (the reader's member size limit).
MAX_STREAM_WORDS = MAX_MEMBER_BYTES // WORD_SIZE


@dataclass(frozen=True)
class _Member:
    """A member of the archive being assembled: its exact size in bytes, the spec key that
    gives it (where a refusal of the archive names it), and its bytes or what makes them (a
    JSON member is written, a stream's words joined, once the archive is known to fit the
    reader's limits: :meth:`_Assembler.check_archive`)."""

    size: int
    path: str
    made: bytes | Callable[[], bytes]

    def data(self) -> bytes:
        return self.made if isinstance(self.made, bytes) else self.made()


class _Stream:
    """A stream's words as the spec gives them, not yet joined: its parts in order, each a
    word (64 bytes) or a :class:`_Repeated` run, and ``n``, the words in all.
    Counted as the spec is walked, joined once the archive is known to fit the reader's
    limits (:meth:`_Assembler.check_archive`): a repeat or a count holds its unit once, so
    the walk holds what the spec holds, not a word list as long as the stream (three streams
    of 25 M words held 825 MB before the archive was refused for MAX_TOTAL_BYTES)."""

    __slots__ = ("parts", "n")

    def __init__(self) -> None:
        self.parts: list[bytes | _Repeated] = []
        self.n = 0

    def add(self, part: list[bytes] | _Repeated) -> None:
        """Append ``part``: an instruction's words, or a run of them repeated."""
        if isinstance(part, list):
            self.parts.extend(part)
            self.n += len(part)
        else:
            self.parts.append(part)
            self.n += part.n

    def joined(self) -> bytes:
        out = []
        for part in self.parts:  # (a loop, not a comprehension: a frame a level, as the walk)
            out.append(part if isinstance(part, bytes) else part.joined())
        return b"".join(out)


@dataclass(frozen=True)
class _Repeated:
    """``unit`` (a word, or a repeat's body) ``count`` times: ``n`` words."""

    unit: bytes | _Stream
    count: int
    n: int

    def joined(self) -> bytes:
        return (self.unit if isinstance(self.unit, bytes) else self.unit.joined()) * self.count


@dataclass
class Assembled:
    """The result of assembling: the file bytes and, unless validation was off, the model."""

    data: bytes
    model: Model | None


class _SpecConstructor(yaml.constructor.SafeConstructor):
    """SafeConstructor that refuses duplicate mapping keys and merges ``<<`` keys itself: the
    constructor of both loaders of a spec, PyYAML's pure-Python one (:class:`_SafeLoader`)
    and libyaml's (:class:`_CSafeLoader`), so that each makes the same values of a text."""

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        """YAML 1.1 merge keys (yaml.org/type/merge.html): the pairs of the mappings ``<<``
        names go before the mapping's own, which override them; of a list of mappings
        (``<<: [*a, *b]``) the earlier one's key wins.  Done here rather than by PyYAML,
        whose precedence changed between releases (6.0.3: the earlier wins; 6.0.4: the later
        one for keys of more than one character, PyYAML issue 953), so that a spec is
        the same model, and the same bytes, with either.  Each key once (a chain of merges
        stays as long as its distinct keys)."""
        if not any(key.tag == _MERGE_TAG for key, _ in node.value):
            return
        active = self.__dict__.setdefault("merging", set())
        if id(node) in active:
            raise yaml.constructor.ConstructorError(
                None, None, "a mapping merges itself (a recursive YAML alias)", node.start_mark)
        active.add(id(node))
        pairs: dict = {}  # key -> (key node, value node), in the order the keys first come
        own: list = []
        for key_node, value_node in node.value:
            if key_node.tag != _MERGE_TAG:
                own.append((key_node, value_node))
                continue
            sources = value_node.value if isinstance(value_node, yaml.SequenceNode) \
                else [value_node]
            for src in sources:
                if not isinstance(src, yaml.MappingNode):
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping", node.start_mark,
                        f"expected a mapping or list of mappings for merging, but found "
                        f"{src.id}", src.start_mark)
                self.flatten_mapping(src)
                for pair in src.value:  # the earlier source's key wins
                    pairs.setdefault(self._hashable_key(node, pair[0]), pair)
        for pair in own:  # the mapping's own key wins, where the key first came
            pairs[self._hashable_key(node, pair[0])] = pair
        active.discard(id(node))
        node.value = list(pairs.values())

    def _hashable_key(self, node: yaml.MappingNode, key_node: yaml.Node) -> Any:
        key = self.construct_object(key_node)
        try:  # a list or mapping as a key (`? [a, b]`): PyYAML's own error, at the key
            hash(key)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark,
                "a list or a mapping as a mapping key (found unhashable key)",
                key_node.start_mark) from None
        return key


class _SafeLoader(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser,
                  yaml.composer.Composer, _SpecConstructor, yaml.resolver.Resolver):
    """PyYAML's pure-Python SafeLoader with the spec's constructor: it reads every spec the
    libyaml loader does not (:func:`_load_with_libyaml`), and words every refusal."""

    def __init__(self, stream):
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        _SpecConstructor.__init__(self)
        yaml.resolver.Resolver.__init__(self)

    def compose_node(self, parent, index):
        """PyYAML's, noting whether the text uses an alias (``aliased``: a list or mapping
        more than MAX_JSON_DEPTH deep is then one its aliases nest, as a YAML text cannot)."""
        if self.check_event(yaml.events.AliasEvent):
            self.aliased = True
        return super().compose_node(parent, index)


#: The tag of YAML 1.1's merge key ``<<`` (``{<<: *base, name: x}``).
_MERGE_TAG = "tag:yaml.org,2002:merge"


def _construct_mapping(loader: _SpecConstructor, node: yaml.MappingNode, deep: bool = False):
    """A mapping whose own keys are distinct.  A merge key (``<<: *base`` or ``<<: [*a,
    *b]``) is left to ``flatten_mapping`` (ours, :class:`_SpecConstructor`; called by
    ``construct_mapping``), as YAML 1.1 reads it: a key the mapping gives itself overrides
    a merged one, which is not a duplicate; ``<<`` given twice is, and so is a key twice in
    a mapping merged in place (``<<: {a: 1, a: 2}``, never constructed on its own)."""
    _check_keys(loader, node, deep)
    return loader.construct_mapping(node, deep=deep)


def _check_keys(loader: _SpecConstructor, node: yaml.MappingNode, deep: bool) -> None:
    """Refuse a key of ``node`` that is a list or a mapping, or given twice (before any merge
    key is flattened); each node once (a chain of merges, or a recursive one)."""
    checked = loader.__dict__.setdefault("keys_checked", set())
    if id(node) in checked:
        return
    checked.add(id(node))
    seen = set()
    merges = 0
    for key_node, value_node in node.value:
        if key_node.tag == _MERGE_TAG:
            merges += 1
            if merges > 1:
                raise yaml.constructor.ConstructorError(
                    None, None, "duplicate merge key '<<' (merge several mappings with one: "
                    "<<: [*a, *b])", key_node.start_mark)
            sources = (value_node.value if isinstance(value_node, yaml.SequenceNode)
                       else [value_node])
            for src in sources:
                if isinstance(src, yaml.MappingNode):
                    _check_keys(loader, src, deep)
            continue
        key = loader._hashable_key(node, key_node)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {_spec_value(key)}", key_node.start_mark)
        seen.add(key)


_SpecConstructor.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                                 _construct_mapping)

#: YAML 1.1's value key, a plain ``=`` (yaml.org/type/value.html: a mapping's "default
#: value", which no spec field has), is the string "=" wherever it stands: as a key, as
#: PyYAML reads it (its flatten_mapping), and as a value or list item, as YAML 1.2 reads it
#: (PyYAML has no constructor for the tag there: "could not determine a constructor for the
#: tag 'tag:yaml.org,2002:value'", which our key checks also said of ``{=: 1}``).
_SpecConstructor.add_constructor("tag:yaml.org,2002:value",
                                 yaml.SafeLoader.construct_yaml_str)


def _construct_float(loader: _SpecConstructor, node: yaml.ScalarNode) -> float:
    """A YAML float, noting one that is not finite (``.inf``, ``-.inf``, ``.nan``,
    ``1.0e+999``): :func:`parse_spec_text` then names it by its key path.  A float tagged
    ``!!float`` must be one: PyYAML reads its text with float(), which raised ValueError
    (``!!float abc``; an internal error) or read other Unicode digits (``!!float "٤.5"``)."""
    _ascii_number(node, "a number")
    try:
        val = loader.construct_yaml_float(node)
    except (ValueError, IndexError):  # (IndexError: ``!!float ""``)
        raise _not_a(node, "a number") from None
    if not math.isfinite(val):
        loader.non_finite = True
    return val


_SpecConstructor.add_constructor("tag:yaml.org,2002:float", _construct_float)


def _construct_int(loader: _SpecConstructor, node: yaml.ScalarNode) -> int:
    """A YAML integer; one of more decimal digits than CPython converts
    (``jsonin.MAX_JSON_INT_DIGITS``, its default limit) is a spec error at its line, as in
    a JSON input (PyYAML let the interpreter's ValueError out: an internal error).  An
    integer tagged ``!!int`` must be one (``!!int abc`` was "an integer of 0 digits", ``!!int
    ""`` an IndexError, ``!!int "٤"`` 4: PyYAML reads its text with int())."""
    _ascii_number(node, "an integer")
    try:
        return loader.construct_yaml_int(node)
    except (ValueError, IndexError):  # (IndexError: ``!!int ""``)
        digits = sum(c.isdigit() for c in str(node.value))  # (ASCII, checked above)
        if digits > MAX_JSON_INT_DIGITS:  # (also a sexagesimal ``1...1:30``'s digits)
            raise yaml.constructor.ConstructorError(
                None, None, f"an integer of {digits} digits, more than {MAX_JSON_INT_DIGITS}",
                node.start_mark) from None
        raise _not_a(node, "an integer") from None  # (``!!int abc``, ``!!int 09``)


def _ascii_number(node: yaml.ScalarNode, what: str) -> None:
    """Refuse a number whose text is not ASCII: YAML's numbers are ASCII digits (its implicit
    patterns match no other), but int() and float() read any Unicode digit, so an explicit
    tag (``!!int "٤"``) took Arabic-Indic or full-width digits."""
    if isinstance(node, yaml.ScalarNode) and not node.value.isascii():
        raise _not_a(node, what, " (a YAML number is ASCII text)")


def _not_a(node: yaml.ScalarNode, what: str, why: str = "") -> yaml.constructor.ConstructorError:
    """``'TEXT' is not WHAT`` at ``node`` (a text of more than 24 characters cut to 12)."""
    shown = cut_middle(str(node.value), 24, 12, 0, "{head}...")
    return yaml.constructor.ConstructorError(
        None, None, f"{_spec_value(shown)} is not {what}{why}", node.start_mark)


_SpecConstructor.add_constructor("tag:yaml.org,2002:int", _construct_int)


def _checked(construct, what: str):
    """PyYAML's constructor ``construct`` of a tag whose text it does not check (``!!bool abc``
    was KeyError, ``!!timestamp abc`` AttributeError, and ``2001-02-30``, a date by its form
    without a tag, ValueError: internal errors): ``'TEXT' is not WHAT`` at the value, and
    when the text has the form YAML 1.1 reads as WHAT untagged, that it is read so."""
    def checked(loader: _SpecConstructor, node: yaml.Node):
        try:
            return construct(loader, node)
        except (ValueError, KeyError, AttributeError, OverflowError):
            implicit = loader.resolve(yaml.ScalarNode, node.value, (True, False)) == node.tag
            raise _not_a(node, what, f" (YAML 1.1 reads this form as {what}: quote it for a "
                                     "string)" if implicit else "") from None
    return checked


_SpecConstructor.add_constructor("tag:yaml.org,2002:bool",
                                 _checked(yaml.SafeLoader.construct_yaml_bool, "a boolean"))
_SpecConstructor.add_constructor("tag:yaml.org,2002:timestamp",
                                 _checked(yaml.SafeLoader.construct_yaml_timestamp, "a date"))


def _libyaml_parser() -> type | None:
    """PyYAML's C parser and composer (``yaml.CParser``, libyaml's), when PyYAML was built
    with it and its libyaml limits nesting (0.2.6 and later: ``exceeded maximum nesting
    depth`` past 1000 flow or block levels), or None.  Its composer recurses in C, a level a
    call, without Python's recursion limit: an older libyaml would compose a text of a
    million ``[`` until the C stack overflowed."""
    try:
        from yaml._yaml import CParser, get_version_string
        version = tuple(int(part) for part in get_version_string().split(".")[:3])
    except (ImportError, AttributeError, ValueError):  # (PyYAML built without libyaml)
        return None
    return CParser if version >= (0, 2, 6) else None


_CParser = _libyaml_parser()

if _CParser is not None:
    class _CSafeLoader(_CParser, _SpecConstructor, yaml.resolver.Resolver):
        """libyaml's parser and composer with the spec's constructor and PyYAML's resolver:
        the values of a text, as :class:`_SafeLoader` makes them, some times faster."""

        def __init__(self, stream):
            _CParser.__init__(self, stream)
            _SpecConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)
else:  # (no libyaml: every spec is read by the pure-Python loader)
    _CSafeLoader = None

#: The deepest a text read by libyaml may nest its lists and mappings; a deeper one is read
#: again by the pure-Python loader, whose recursion refuses one some 300 levels deep (``nested
#: too deeply``), so that both refuse the same texts.
_LIBYAML_MAX_DEPTH = 100

#: The text libyaml reads: YAML's printable characters (tabs, line feeds and carriage returns,
#: printable ASCII and the printable non-ASCII ones) but NEL, the line and paragraph
#: separators and the byte-order mark (line breaks and a mark libyaml places otherwise), without
#: ``!``, ``%``, ``>``, ``?`` and ``|`` (:data:`_LIBYAML_AVOIDS`).  Where its reader, scanner
#: or parser and PyYAML's make other values of one text, or libyaml takes a text PyYAML
#: refuses, the text has one of the characters left out, or a tab outside a quoted scalar and
#: a comment (:func:`_tabs_read_alike`): libyaml skips a byte-order mark at the start of any
#: line (PyYAML only at the start of the text) and takes a tab after ``a:``, before a comment
#: or inside a plain scalar; an empty node tagged ``!`` is ``''`` to it (null to PyYAML); it
#: takes a comment straight after a block scalar's ``|`` or ``>`` or a ``%YAML 1.1``
#: directive (``|#c``: PyYAML wants a space); and ``?`` does not end a plain scalar in a flow
#: collection (``{a ? b}``).  Every other text is read by the pure-Python loader alone (a
#: differential fuzz of both on printable ASCII found no other difference; one on texts with
#: non-ASCII characters, carriage returns and tabs none either).  Carriage returns are given
#: to libyaml as line feeds (``\r\n`` and a lone ``\r`` are one line break to both readers).
_LIBYAML_TEXT = re.compile("[\t\n\r\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe"
                           "\uff00-\ufffd\U00010000-\U0010ffff]*")
_LIBYAML_AVOIDS = re.compile(r"[!%>?|]")


def _load_with_libyaml(text: str, source: str = "<spec>") -> tuple[Any, bool, bool] | None:
    """``text``'s value read by libyaml (:class:`_CSafeLoader`), whether the text uses an
    alias, and whether it holds a number that is not finite; or None, and the pure-Python
    loader reads it: without libyaml, for a text of other characters than
    :data:`_LIBYAML_TEXT`'s or with one of :data:`_LIBYAML_AVOIDS`', a tab PyYAML would not
    take (:func:`_tabs_read_alike`), one nested more than :data:`_LIBYAML_MAX_DEPTH` deep, an
    empty one, and on any error, whose message the pure-Python loader then gives (libyaml
    words its errors and places its marks otherwise).  A 2 MB spec of 65,535
    ``extra_members`` lines took 22 s to read with the pure-Python loader alone; a spec of
    10,000 vars with a non-ASCII name, CR LF line ends or a tab in a comment 1.6 s, against
    0.45 s for the same spec in ASCII, until 2026-12-07.

    A text libyaml composes but the spec's constructor refuses (a duplicate key, a bad date,
    a merge of a scalar, ...) is a :class:`ParseError` naming ``source`` here, in the words
    and at the line and column the pure-Python loader gives, which composes the same nodes
    at the same marks (a differential fuzz) but an empty plain scalar's (``{a: , b: 1}``:
    libyaml places it a column or a line later): an error there is read again by the
    pure-Python loader.  Until 2026-12-07 every such text was read again (+30 % on 20,000
    lines, the same message)."""
    if (_CSafeLoader is None or not _LIBYAML_TEXT.fullmatch(text)
            or _LIBYAML_AVOIDS.search(text)):
        return None
    if "\r" in text:  # (PyYAML reads "\r\n" and a lone "\r" as "\n": the same lines, columns)
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    loader = None
    try:
        loader = _CSafeLoader(text)
        node = loader.get_single_node()
        if node is None:  # (an empty text: YAML's null)
            return None
        walked = _node_depth(node)
        if walked is None or ("\t" in text and not _tabs_read_alike(text, node)):
            return None
        loader.non_finite = False
        try:
            spec = loader.construct_document(node)
        except yaml.constructor.ConstructorError as err:
            mark = err.problem_mark
            if mark is None or (mark.line, mark.column) in _empty_scalar_marks(node):
                return None  # (libyaml's mark of an empty scalar is not PyYAML's: read again)
            raise _spec_parse_error(err, text, source) from None
        return spec, walked, loader.non_finite
    except ParseError:
        raise
    except Exception:  # (any other: the pure-Python loader reads the text again and says why)
        return None
    finally:
        if loader is not None:
            loader.dispose()


def _tabs_read_alike(text: str, root: yaml.Node) -> bool:
    """Whether each tab of ``text`` (composed by libyaml into ``root``) is inside a quoted
    scalar or a comment, where PyYAML takes a tab as libyaml does.  PyYAML's scanner refuses
    any other (``found character '\\t' that cannot start any token``): between tokens it
    skips only spaces, and a tab ends a plain scalar; libyaml takes one after ``a:``, inside a
    flow collection, before a comment and inside a plain scalar (``a\\tb`` is one).  A tab is
    in a comment where a ``#`` outside every scalar comes before it on its line (each scalar's
    text from its node's marks, which libyaml counts in characters)."""
    quoted: list[tuple[int, int]] = []  # (opening quote, past the closing one)
    scalars: list[tuple[int, int]] = []  # (start, end) of every scalar, an anchor before it
    for node in _scalar_nodes(root):
        start, end = node.start_mark.index, node.end_mark.index
        scalars.append((start, end))
        if node.style in ("'", '"'):  # (past an anchor: a tab after it is outside)
            quoted.append((text.index(node.style, start, end), end))
    quoted.sort()
    scalars.sort()
    quoted_starts = [start for start, _ in quoted]
    scalar_starts = [start for start, _ in scalars]

    def within(pos: int, spans, starts) -> bool:
        i = bisect.bisect_right(starts, pos) - 1
        return i >= 0 and pos < spans[i][1]

    line, comment, last = -1, None, 0  # the tab's line, where its comment starts, the tab
    for tab in re.finditer("\t", text):  # (each line's text looked at once: no tab rescans it)
        pos = tab.start()
        if within(pos, quoted, quoted_starts):
            continue
        if line < 0 or text.rfind("\n", last, pos) >= 0:  # a new line: its comment's "#"
            line = text.rfind("\n", 0, pos) + 1
            end = text.find("\n", pos)
            comment = next((at for at in _hashes(text, line, len(text) if end < 0 else end)
                            if not within(at, scalars, scalar_starts)), None)
        last = pos
        if comment is None or comment > pos:
            return False
    return True


def _empty_scalar_marks(root: yaml.Node) -> set[tuple[int, int]]:
    """The (line, column) libyaml gives each empty plain scalar under ``root`` (``a:``,
    ``{a: , b: 1}``), which PyYAML places elsewhere."""
    return {(node.start_mark.line, node.start_mark.column) for node in _scalar_nodes(root)
            if not node.value and not node.style}


def _scalar_nodes(root: yaml.Node):
    """Each scalar node under ``root``, once (an alias's node is met again), without
    recursion."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            yield node
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        else:
            stack.extend(kid for pair in node.value for kid in pair)


def _hashes(text: str, start: int, end: int):
    """The places of ``#`` in ``text[start:end]``, in order."""
    at = text.find("#", start, end)
    while at >= 0:
        yield at
        at = text.find("#", at + 1, end)


def _node_depth(root: yaml.Node) -> bool | None:
    """Whether the text composed into ``root`` uses an alias (a node met a second time), or
    None when its lists and mappings nest more than :data:`_LIBYAML_MAX_DEPTH` deep, counted
    where each node first stands in the text (an alias nests no text); each node walked
    once, without recursion."""
    seen: set[int] = set()
    aliased = False
    stack: list[tuple[yaml.Node, int]] = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        if id(node) in seen:
            aliased = True
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            continue
        if depth >= _LIBYAML_MAX_DEPTH:
            return None
        if isinstance(node, yaml.SequenceNode):
            kids = node.value
        else:
            kids = [kid for pair in node.value for kid in pair]
        stack.extend((kid, depth + 1) for kid in reversed(kids))
    return aliased


#: The most values (each scalar, list and mapping counted once per place it stands) a spec may
#: expand to once its YAML aliases are resolved: an alias repeats what its anchor names, so a
#: chain of them multiplies it (eight lists of ten aliases each: 10^8 values, from 500 bytes
#: of text, took 14 GB and 86 s before the member's size limit refused it; found by an
#: exploratory tester).  A spec without aliases has about as many values as its text has
#: lines: 2^22 is some 40 MB of YAML.  A spec read as JSON is not counted: it has no aliases,
#: so its values are bounded by its text (MAX_SPEC_FILE_BYTES).
MAX_SPEC_VALUES = 1 << 22


def _alias_walk(doc) -> tuple[dict[int, int], tuple[str, Any] | None]:
    """Walk the lists and mappings of ``doc`` (a spec, or a value of one), each distinct one
    once, so that a chain of YAML aliases costs its length, not its expansion, and without
    recursion.  Returns each one's expanded size (id -> values: itself, each of its mapping
    keys and each value below it, counted where it stands; a recursive alias counts one value
    where it closes its cycle) and the first recursive alias in document order: the key path
    where it closes its cycle (``a[1].b``, as :mod:`nrtrewrite.jsonin` names one) and the list
    or mapping it names, or None."""
    sizes: dict[int, int] = {}  # id -> expanded values, once counted
    # the walk's path, root first: id -> (list or mapping, its key in the one before); a
    # recursive alias closes a cycle at one of them
    pending: dict[int, tuple[Any, Any]] = {}
    cycle: tuple[str, Any] | None = None
    stack: list[tuple[Any, Any, bool]] = [(doc, None, False)]
    while stack:
        node, key, children_counted = stack.pop()
        if children_counted:
            del pending[id(node)]
            kids = list(node.values()) if isinstance(node, dict) else node
            keys = len(node) if isinstance(node, dict) else 0
            # (a scalar, or a list or mapping still pending, counts one)
            sizes[id(node)] = 1 + keys + sum(sizes.get(id(kid), 1) for kid in kids)
        elif id(node) in pending:
            if cycle is None:
                cycle = (_trail_path([*pending.values(), (node, key)]), node)
        elif id(node) not in sizes:
            pending[id(node)] = (node, key)
            stack.append((node, key, True))
            pairs = node.items() if isinstance(node, dict) else enumerate(node)
            stack.extend(reversed([(kid, k, False) for k, kid in pairs
                                   if isinstance(kid, (dict, list))]))  # popped in order
    return sizes, cycle


def _trail_path(trail: list[tuple[Any, Any]]) -> str:
    """The key path (``a[1].b``, :func:`_step`) of the last of ``trail``'s (value, its key
    in the one before) pairs, from the first, the walk's root."""
    path = ""
    for (parent, _), (_, key) in zip(trail, trail[1:]):
        path = _step(path, parent, key)
    return path


def _step(path: str, parent: Any, key: Any) -> str:
    """Key path ``path`` of ``parent`` (a list or a mapping) with its item ``key`` after it:
    ``path[2]``, ``path.key``, ``path["a.b"]`` (:func:`jsonin.joined_key`: a key that is not
    a plain name is quoted, so that the path names one value)."""
    return (f"{path}[{key}]" if isinstance(parent, (list, tuple))  # (a tuple: a list, as json)
            else jsonin.joined_key(path, key))


def _expanded_too_large(doc) -> str | None:
    """The key path in ``doc`` where its values, expanded (each alias counted where it
    stands), pass :data:`MAX_SPEC_VALUES` (``""``: the document as a whole), or None; counted
    by :func:`_alias_walk` (a recursive alias is refused where it is used)."""
    sizes, _ = _alias_walk(doc)

    def size(node) -> int:
        return sizes.get(id(node), 1) if isinstance(node, (dict, list)) else 1

    if size(doc) <= MAX_SPEC_VALUES:
        return None
    path, node = "", doc
    while True:  # down the largest child while it alone passes the limit
        key, kid = max(node.items() if isinstance(node, dict) else enumerate(node),
                       key=lambda item: size(item[1]))
        if size(kid) <= MAX_SPEC_VALUES:
            return path
        path = _step(path, node, key)
        node = kid


def load_spec(path: str | os.PathLike) -> dict:
    """Load a YAML (or JSON) spec file as a dict; duplicate keys are an error.  Only a
    regular file is read (a FIFO would block, a device never end), of at most
    :data:`MAX_SPEC_FILE_BYTES` (:class:`LimitError` from its size, before reading)."""
    path = os.fspath(path)
    try:
        data = read_file_bytes(path, MAX_SPEC_FILE_BYTES, "MAX_SPEC_FILE_BYTES")
    except LimitError as err:
        # ("file of N bytes exceeds the limit of M bytes (MAX_SPEC_FILE_BYTES)", or one that
        # grew while read)
        raise LimitError(f"spec {err.reason}", Where(file=path),
                         left_out=err.left_out) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ParseError(f"spec is not UTF-8 ({err.reason})", Where(file=path)) from None
    return parse_spec_text(text, source=path)


def parse_spec_text(text: str, *, source: str = "<spec>") -> dict:
    """Parse spec text (YAML 1.1, JSON being accepted as YAML; text starting with ``{`` that
    is valid JSON is read as JSON, so that one indented with tabs is not refused as YAML; a
    byte-order mark before it is left out, as YAML leaves it out).  A number that is not finite
    (``.inf``, ``.nan``, ``1.0e+999``) is refused wherever it is, naming its key path: no
    field has a meaning for it, and in a ``def_json`` or ``neff_json`` it could not be
    written as JSON."""
    bare = text[1:] if text.startswith("\ufeff") else text
    if bare.lstrip()[:1] == "{":  # JSON (indented with tabs, which YAML refuses), or flow YAML
        try:
            spec = jsonin.loads(bare)
        except jsonin.JsonRule as rule:
            if rule.non_finite is not None:  # (YAML 1.1 would read 1e999 and NaN, and every
                # exponent number of the text with them, as strings): as the YAML path says it
                raise ValidationError(f"{_spec_value(rule.non_finite)} is not a finite number "
                                      "(NaN and infinities are refused)",
                                      Where(file=source, field=rule.path)) from None
            spec = None  # a duplicate key, a long integer: YAML's error has a line and column
        except (ValueError, RecursionError):
            spec = None  # not JSON (flow YAML), or JSON the YAML reader refuses
        if spec is not None:
            if not isinstance(spec, dict):  # (cannot be: the text starts with "{")
                raise ValidationError(f"a spec must be a mapping, not {_found(spec)}",
                                      Where(file=source))
            spec = _TextSpec(spec)
            return spec
    loaded = _load_with_libyaml(text, source)
    if loaded is not None:
        spec, aliased, non_finite = loaded
    else:
        spec, aliased, non_finite = _load_with_python(text, source)
    if isinstance(spec, (dict, list)) and (where := _expanded_too_large(spec)) is not None:
        raise ValidationError(f"the spec expands to more than {MAX_SPEC_VALUES} values once "
                              "its YAML aliases are resolved (each alias repeats what its "
                              "anchor names)", Where(file=source, field=where or None))
    if non_finite and (found := non_finite_path(spec)) is not None:
        path, val = found
        raise ValidationError(f"{_spec_value(val)} is not a finite number (NaN and infinities "
                              "are refused)",
                              Where(file=source, field=path or None))
    if not isinstance(spec, dict):  # (an empty text is YAML's null)
        raise ValidationError(f"a spec must be a mapping, not {_found(spec)}",
                              Where(file=source))
    return _AliasedSpec(spec) if aliased else _TextSpec(spec)


def _load_with_python(text: str, source: str) -> tuple[Any, bool, bool]:
    """``text``'s value read by PyYAML's pure-Python loader (:class:`_SafeLoader`), whether
    the text uses an alias, and whether it holds a number that is not finite; a text it
    refuses is a :class:`ParseError` naming the line and column."""
    loader = None
    try:
        loader = _SafeLoader(text)  # (its reader refuses a NUL or other control character here)
        loader.non_finite = False
        loader.aliased = False
        spec = loader.get_single_data()
    except yaml.YAMLError as err:
        raise _spec_parse_error(err, text, source) from None
    except RecursionError:  # (PyYAML composes and constructs recursively)
        raise ParseError("invalid spec: nested too deeply", Where(file=source)) from None
    finally:
        if loader is not None:
            loader.dispose()
    return spec, loader.aliased, loader.non_finite


def _spec_parse_error(err: yaml.YAMLError, text: str, source: str) -> ParseError:
    """``invalid spec: WHY (line L column C)`` of a YAML reader's, scanner's, parser's,
    composer's or constructor's error ``err`` of ``text``."""
    mark = getattr(err, "problem_mark", None)
    loc = f" (line {mark.line + 1} column {mark.column + 1})" if mark else ""
    if isinstance(err, yaml.reader.ReaderError):  # (a position, not a mark)
        before = text[:err.position]
        loc = (f" (line {before.count(chr(10)) + 1} column "
               f"{err.position - before.rfind(chr(10))})")
    why = getattr(err, "problem", None) or str(err).splitlines()[0]
    if why == "found unconstructable recursive node":  # (PyYAML's words; at the anchor)
        # a mapping (ours is built whole, a list first empty) that contains itself
        # through mappings alone (`&m {a: {b: *m}}`)
        why = "a mapping contains itself (a recursive YAML alias)"
    return ParseError(f"invalid spec: {why}{loc}", Where(file=source))


class _TextSpec(dict):
    """A spec read from text without a YAML alias (JSON, or YAML using none): each of its
    values stands once in the text, so a JSON member of it written without indentation is
    about as long as the text (of at most MAX_SPEC_FILE_BYTES), and its bytes are counted
    from that writing (:func:`_json_size_unshared`, json's C writer; a spec given as Python
    values may share a value any number of times: counted by :func:`_json_size`'s walk)."""


class _AliasedSpec(dict):
    """A spec read from YAML text that uses an alias: its text nests less than
    :data:`MAX_JSON_DEPTH` (its reader stops near 490 levels), so a JSON member of it nested
    deeper is one its aliases nest, wherever their anchors stand (in the member, or outside
    it, where the walk of the member meets a list or mapping for the first time)."""


def assemble_file(spec_path: str | os.PathLike, out_path: str | os.PathLike | None = None,
                  **placing) -> Assembled:
    """Assemble ``spec_path``; if ``out_path`` is given, write the file atomically there
    (``placing``: ``write_bytes_atomic``'s ``placing`` and ``on_placed``)."""
    spec_path = os.fspath(spec_path)
    if out_path is not None and same_file(spec_path, out_path):
        raise OutputError(f"the output is the spec {escape_path(spec_path)} itself; "
                          "nrtrewrite never "
                          "replaces its input: choose another output path",
                          Where(file=os.fspath(out_path)))
    spec = load_spec(spec_path)
    name = os.path.splitext(os.path.basename(spec_path))[0]
    result = assemble(spec, source=spec_path, default_name=name)
    if out_path is not None:
        from nrtrewrite.neff.writer import write_bytes_atomic

        write_bytes_atomic(out_path, result.data, **placing)
    return result


def same_file(a: str, b: str | os.PathLike) -> bool:
    """Whether ``a`` and ``b`` name one existing file (by device and inode: a hard link, a
    symbolic link or another spelling of the path too)."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def assemble_spec(spec: dict, *, source: str = "<spec>") -> bytes:
    """Assemble a spec dict to file bytes (read back unless ``validate: false``)."""
    return assemble(spec, source=source).data


def assemble(spec: dict, *, source: str = "<spec>", default_name: str = "") -> Assembled:
    """Assemble a spec dict; see docs/ASSEMBLE.md."""
    return _Assembler(source, aliased=isinstance(spec, _AliasedSpec),
                      unshared=isinstance(spec, _TextSpec)).run(spec, default_name)


# ---------------------------------------------------------------------------

class _Assembler:
    def __init__(self, source: str, aliased: bool = False, unshared: bool = False):
        self.source = source
        #: the spec was read from YAML text that uses an alias (:class:`_AliasedSpec`)
        self.aliased = aliased
        #: the spec was read from text without an alias (:class:`_TextSpec`)
        self.unshared = unshared
        #: ranks the spec's "first..last" ranges have expanded to so far, all groups of all
        #: subgraphs together (at most MAX_TOPOLOGY_RANKS: each costs about 150 bytes)
        self.range_ranks = 0
        #: the instruction lists being walked (a repeat body inside itself is refused)
        self.walking: set[int] = set()

    # -- helpers ------------------------------------------------------------
    def err(self, path: str, why: str, left_out: int = 0) -> ValidationError:
        return ValidationError(why, Where(file=self.source, field=path or None),
                               left_out=left_out)

    def json_member(self, obj: Any, member: str, path: str, field=None) -> _Member:
        """``obj`` as a JSON member, its size counted now (:func:`_json_member_size`) and its
        bytes written once the archive is known to fit (:meth:`check_archive`,
        :func:`_json_bytes`), or a spec error at ``path``; a
        recursive YAML alias (:meth:`acyclic`), a lone surrogate, a value JSON cannot hold
        (a YAML date, ``!!set`` or ``!!binary``; NaN from the API) and a mapping key that is
        not a string (``{1: a}``, which json.dumps writes as ``"1"``: checked first, by a walk
        of the lists and mappings, whatever ``validate`` says) at its own field:
        ``field(key path in obj)`` (default: the key path after ``path``), ``not Unicode text
        (...)`` as :meth:`utf8` says it.  The cycle is looked for only once
        :func:`_json_size` has met one.  A member whose JSON would be more than
        :data:`MAX_JSON_MEMBER_BYTES` (the reader's ``MAX_MEMBER_BYTES``) is refused at
        ``path``, naming ``member``, before any of it is written."""
        try:
            if isinstance(obj, (dict, list)) and _key_not_string(obj):
                raise _NotJson("a key that is not a string")  # (named below)
            size = _json_member_size(obj, self.aliased, self.unshared)
        except _Circular as err:
            self.acyclic(obj, path, field)  # raises, at the key path
            # (cannot be: the walk finds every cycle)
            raise self.err(path, err.reason, err.left_out) from None
        except _NotJson as err:
            found = _not_json(obj)
            if found is None:  # (cannot be: json.dumps refuses only what the walk finds)
                raise self.err(path, err.reason, err.left_out) from None
            sub, val, is_key = found
            raise self.err(field(sub) if field else _joined(path, sub),
                           _not_json_why(val, is_key)) from None
        except _NotUnicode as err:
            sub, text, is_key = err.found
            why = f"not Unicode text ({_not_unicode(text)})"
            raise self.err(field(sub) if field else _joined(path, sub),
                           f"key {_spec_value(text)} is {why}" if is_key else why) from None
        except _TooLarge as err:
            raise self.err(path, f"member {escape_controls(shown_member_name(member))}: its "
                                 f"JSON would be {err.size} bytes, more than the "
                                 f"{MAX_JSON_MEMBER_BYTES} bytes a member may hold "
                                 "(MAX_MEMBER_BYTES, the reader's limit)") from None
        except ValidationError as err:
            raise self.err(path, err.reason, err.left_out) from None
        return _Member(size, path, partial(self.written_json, obj, path))

    def written_json(self, obj: Any, path: str) -> bytes:
        """The bytes of a JSON member :meth:`json_member` has counted and checked."""
        try:
            return _json_bytes(obj)
        except ValidationError as err:  # (cannot be: the count met what json.dumps refuses)
            raise self.err(path, err.reason, err.left_out) from None

    def acyclic(self, obj: Any, path: str, field=None) -> None:
        """Refuse a list or mapping in ``obj`` that contains itself (a recursive YAML alias,
        ``{a: &d [1, {b: *d}]}``), which JSON cannot hold, at the key path where the alias
        closes its cycle: ``field(key path in obj)`` (default: the key path after ``path``).
        Each distinct list or mapping is walked once (:func:`_alias_walk`)."""
        _, cycle = _alias_walk(obj)
        if cycle is not None:
            sub, node = cycle
            raise self.err(field(sub) if field else _joined(path, sub),
                           f"{_spec_value(node)} contains itself (a recursive YAML alias), "
                           "which JSON cannot hold")

    def utf8(self, text: str, path: str) -> bytes:
        """``text`` in UTF-8, or a spec error at ``path`` when it holds a lone surrogate (YAML's
        ``"\\ud800"``, or a file name's undecodable byte), which UTF-8 cannot hold."""
        if (why := _not_unicode(text)) is not None:
            raise self.err(path, f"not Unicode text ({why})")
        return text.encode("utf-8")

    def member_name(self, member: str, path: str) -> None:
        """Refuse ``member``, a member name made of a spec value (``NAME/def.json`` of a
        subgraph name, ``NAME/ENGINE.bin`` of an engine name), that the tar writer would
        refuse (:func:`check_member_name`: empty, absolute, ``..``, an empty or ``.``
        component, a backslash or control character, too long), at ``path``, the key giving
        the value, naming the member: ``field subgraphs[0].name: member ../x/def.json:
        member path contains '..'``."""
        if (why := check_member_name(member)) is not None:
            raise self.err(path, f"member {escape_controls(shown_member_name(member))}: {why}")

    def keys(self, obj: Any, allowed: tuple[str, ...], path: str) -> dict:
        """``obj``, a mapping of the spec's keys ``allowed`` (an unknown key refused, null
        or not), without the keys given null: ASSEMBLE.md, a key given null is as if it were
        missing, so it takes its default, and a required one is refused as missing."""
        if not isinstance(obj, dict):
            raise self.err(path, f"must be a mapping, not {_found(obj)}")
        extra = [k for k in obj if k not in allowed]
        if extra:
            raise self.err(path, f"unknown key {_spec_value(extra[0])}"
                                 f"{_did_you_mean(extra[0], allowed, 'allowed: ')}")
        if any(val is None for val in obj.values()):
            return {key: val for key, val in obj.items() if val is not None}
        return obj

    def required(self, obj: dict, key: str, path: str, give: str) -> Any:
        """``obj[key]``, or a refusal at ``path.key`` that it is missing (or null: see
        :meth:`keys`), saying what to give: ``size is missing: give ...``."""
        if key not in obj:
            raise self.err(f"{path}.{key}", f"{key} is missing: give {give}")
        return obj[key]

    def integer(self, val: Any, path: str, lo: int = 0, hi: int | None = None,
                size: bool = False) -> int:
        if size and isinstance(val, str):
            m = _SIZE_RE.match(val)
            if not m:
                raise self.err(path, f"bad size {_spec_value(_shown(val))} (an integer in ASCII "
                                     "digits, optionally with B, KiB, MiB or GiB)")
            if (digits := len(m.group(1))) > MAX_SIZE_DIGITS:  # (int() refuses 4301 or more)
                raise self.err(path, f"size {_spec_value(_shown(val))} has {digits} digits, more "
                                     f"than {MAX_SIZE_DIGITS}")
            val = int(m.group(1)) * _SIZE_UNITS[m.group(2)]
        if type(val) is not int:
            raise self.err(path, f"must be an integer, not {_found(val)}")
        if val < lo or (hi is not None and val > hi):
            raise self.err(path, f"{_spec_value(val)} is outside "
                                 f"{lo}..{hi if hi is not None else 'inf'}")
        return val

    def hexbytes(self, val: Any, path: str, size: int | None = None,
                 pad: bool = False) -> bytes:
        if not isinstance(val, str):
            raise self.err(path, f"must be a hex string, not {_found(val)}")
        try:
            raw = bytes.fromhex("".join(val.split()))
        except ValueError:
            raise self.err(path, f"not a hex string: {_spec_value(val)}") from None
        if size is not None:
            if len(raw) > size or (not pad and len(raw) != size):
                raise self.err(path, f"needs {'at most ' if pad else ''}{size} bytes, "
                                     f"not {len(raw)}")
            raw = raw.ljust(size, b"\0")
        return raw

    # -- top level ----------------------------------------------------------
    def run(self, spec: dict, default_name: str) -> Assembled:
        spec = self.keys(spec, _TOP_KEYS, "")
        header = self.header(spec.get("header", {}), default_name)
        sgs = spec.get("subgraphs")
        if not isinstance(sgs, list) or not sgs:
            raise self.err("subgraphs", "needs a non-empty list of subgraphs"
                                        + _instead(spec, "subgraphs"))
        members: list[tuple[str, _Member]] = []
        names: list[str] = []
        named: set[str] = set()  # (names, by hash: each was compared with every one before
        # it, 16,000 subgraphs 18 s with validate: false, now 11 s)
        sg_members: list[tuple[str, _Member]] = []
        made_by: dict[str, int] = {}  # member name -> the subgraph that made it
        for i, sg in enumerate(sgs):
            name, items = self.subgraph(sg, f"subgraphs[{i}]", i)
            if name in named:
                raise self.err(f"subgraphs[{i}].name", f"subgraph {_spec_value(name)} defined "
                                                       "twice")
            names.append(name)
            named.add(name)
            for member, _ in items:
                # (distinct subgraph names make distinct def.json members: only two streams
                # meet, of engine 'b/x' in subgraph 'a' and engine 'x' in subgraph 'a/b')
                if member in made_by:
                    raise self.err(f"subgraphs[{i}].engines",
                                   f"member {escape_controls(shown_member_name(member))}: "
                                   "duplicate member name "
                                   f"(subgraphs[{made_by[member]}].engines makes it too)")
                made_by[member] = i
            sg_members.extend(items)
        neff_json = spec.get("neff_json")
        if neff_json is None:
            neff_json = {"neff_like_version": NEFF_LIKE_VERSION, "subgraphs": names}
        members.append((NEFF_JSON, self.json_member(neff_json, NEFF_JSON, "neff_json")))
        members.extend(sg_members)
        archive = self.member_hatches(spec, members)
        self.check_archive(archive)
        try:
            # (each member made as the tar reaches it, and dropped once compressed)
            data = build_container(header, ((name, m.data()) for name, m in archive.items()))
        except NrtRewriteError as err:
            raise err.at(file=self.source)
        data = self.raw_header(spec.get("raw_header"), data)
        if spec.get("trailing") is not None:
            data += self.hexbytes(spec["trailing"], "trailing")
        validate = spec.get("validate", True)
        if not isinstance(validate, bool):
            raise self.err("validate", f"must be true or false, not {_found(validate)}")
        model = read_model_bytes(data, path=f"{self.source} (assembled)") if validate else None
        return Assembled(data=data, model=model)

    def header(self, h: Any, default_name: str):
        h = self.keys(h, _HEADER_KEYS, "header")
        p = "header."
        lnc = self.integer(h.get("lnc_size", 1), p + "lnc_size", 0, 0xFFFFFFFF)
        fields: dict[str, Any] = {
            "pkg_version": self.integer(h.get("pkg_version", 2), p + "pkg_version", 1, 2),
            "neff_version_major": self.integer(h.get("neff_version_major", 1),
                                               p + "neff_version_major", 0, 2**64 - 1),
            "neff_version_minor": self.integer(h.get("neff_version_minor", 0),
                                               p + "neff_version_minor", 0, 2**64 - 1),
            "num_tpb": self.integer(h.get("num_tpb", max(lnc, 1)), p + "num_tpb", 0, 2**32 - 1),
            "requested_tpb_count": self.integer(h.get("requested_tpb_count", max(lnc, 1)),
                                                p + "requested_tpb_count", 0, 2**32 - 1),
            "feature_bits": self.integer(h.get("feature_bits", 0), p + "feature_bits", 0,
                                         2**64 - 1),
            "lnc_size": lnc,
        }
        for key, default, size in (("name", default_name, 256),
                                   ("neff_build_version", DEFAULT_BUILD_VERSION, 128)):
            val = h.get(key, default)
            if not isinstance(val, str):
                raise self.err(p + key, f"must be a string, not {_found(val)}")
            if key not in h and _not_unicode(val) is not None:  # (from a file's name)
                raise self.err(p + key, f"the default, the spec file's name without extension "
                                        f"({_spec_value(val)}), is not Unicode text (it holds "
                                        f"a lone surrogate, which UTF-8 cannot hold): give "
                                        f"header.{key}")
            if len(self.utf8(val, p + key)) > size:
                raise self.err(p + key, f"longer than {size} bytes")
            fields[key] = val
        uuid_val = h.get("uuid")
        if uuid_val is None:
            fields["uuid"] = bytes(16)
        else:
            try:
                if not str(uuid_val).isascii():  # (UUID's int() reads '٤' and '４' as 4)
                    raise ValueError
                fields["uuid"] = uuidlib.UUID(str(uuid_val)).bytes
            except ValueError:
                raise self.err(p + "uuid", f"not a UUID: {_spec_value(uuid_val)}") from None
        tpn = h.get("tpb_per_node")
        if tpn is None:
            fields["tpb_per_node"] = bytes(64)
        elif isinstance(tpn, list):
            if len(tpn) > 64:
                raise self.err(p + "tpb_per_node", f"at most 64 entries, not {len(tpn)}")
            fields["tpb_per_node"] = bytes(
                self.integer(v, f"{p}tpb_per_node[{k}]", 0, 255) for k, v in enumerate(tpn)
            ).ljust(64, b"\0")
        else:
            fields["tpb_per_node"] = self.hexbytes(tpn, p + "tpb_per_node", 64, pad=True)
        return default_header(**fields)

    def raw_header(self, raw: Any, data: bytes) -> bytes:
        if raw is None:
            return data
        raw = self.keys(raw, tuple(HEADER_FIELDS), "raw_header")
        head = data[:HEADER_SIZE]
        for name, val in raw.items():
            off, size = HEADER_FIELDS[name]
            path = f"raw_header.{name}"
            if isinstance(val, str):
                value: int | bytes = self.hexbytes(val, path, size, pad=True)
            else:
                value = self.integer(val, path, 0, 2 ** (8 * size) - 1)
            head = patch_field(head, NEFF_HEADER, name, value)
        return head + data[HEADER_SIZE:]

    def member_hatches(self, spec: dict, members: list[tuple[str, _Member]]
                       ) -> dict[str, _Member]:
        """The archive's members by name, in archive order: ``members`` (the generated ones)
        without ``omit_members``, then ``extra_members``, one of a name there replacing it
        and moving to the end.  More than :data:`MAX_MEMBERS` members are refused at the
        first past it (:meth:`too_many`), an extra member once its own value is checked (a
        fault in it named first) and before a JSON member is written."""
        omit = spec.get("omit_members", [])
        if not isinstance(omit, list):
            raise self.err("omit_members", f"must be a list of member names, not {_found(omit)}")
        # (by name, in archive order: an extra member of a name there is popped and set again,
        # so it moves to the end; each member is looked up by its name's hash, not compared
        # with every member before it: 65,540 extra members took more than 300 s)
        archive = dict(members)
        for k, name in enumerate(omit):
            if not isinstance(name, str):
                raise self.err(f"omit_members[{k}]", f"must be a member name, not "
                                                     f"{_found(name)}")
            if name not in archive:
                raise self.err(f"omit_members[{k}]", f"no member {_spec_value(name)} to omit")
        for name in omit:  # (a name given twice is dropped once)
            archive.pop(name, None)
        if len(archive) > MAX_MEMBERS:  # (subgraphs and engines enough to make them)
            name = list(archive)[MAX_MEMBERS]
            raise self.too_many(archive[name].path, name)
        extra = spec.get("extra_members", [])
        if not isinstance(extra, list):
            raise self.err("extra_members", f"must be a list, not {_found(extra)}")
        for k, item in enumerate(extra):
            path = f"extra_members[{k}]"
            item = self.keys(item, ("name", "text", "hex", "json"), path)
            given = [key for key in ("text", "hex", "json") if key in item]
            if len(given) > 1:
                raise self.err(f"{path}.{given[1]}", f"give one of text, hex and json, not "
                                                     f"{' and '.join(given)}")
            name = self.required(item, "name", path, "the member's path in the archive")
            if not isinstance(name, str):
                raise self.err(path + ".name", f"must be a string, not {_found(name)}")
            self.utf8(name, path + ".name")
            if (why := check_member_name(name)) is not None:  # (the tar writer's refusal)
                raise self.err(path + ".name", why)
            if "text" in item:
                if not isinstance(item["text"], str):  # (str() of a !!set, !!binary, list...)
                    raise self.err(path + ".text", f"must be a string, not "
                                                   f"{_found(item['text'])}")
                text = self.utf8(item["text"], path + ".text")
                member = _Member(len(text), path + ".text", text)
            elif "hex" in item:
                raw = self.hexbytes(item["hex"], path + ".hex")
                member = _Member(len(raw), path + ".hex", raw)
            elif "json" in item:
                member = self.json_member(item["json"], name, path + ".json")
            else:
                member = _Member(0, path, b"")
            # (counted once its own value is checked, as a stream's words and the tar are:
            # a fault in it, or a JSON member past MAX_MEMBER_BYTES, is named first)
            if name not in archive and len(archive) == MAX_MEMBERS:
                raise self.too_many(path, name)
            archive.pop(name, None)
            archive[name] = member
        return archive

    def too_many(self, path: str, name: str) -> ValidationError:
        """The refusal of member ``name`` (given at ``path``): one past :data:`MAX_MEMBERS`."""
        return self.err(path, f"member {escape_controls(shown_member_name(name))}: it would be "
                              f"member {MAX_MEMBERS + 1} of the archive, more than the "
                              f"{MAX_MEMBERS} members the reader reads (MAX_MEMBERS)")

    def check_archive(self, archive: dict[str, _Member]) -> None:
        """Refuse an archive whose tar would be more than :data:`MAX_TOTAL_BYTES`, the reader's
        limit of a decompressed payload, counted from the members' names and sizes as
        :func:`~nrtrewrite.neff.container.build_tar` lays them out (header blocks, data padded
        to 512 bytes, the end-of-archive marker; its record padding stops within the limit),
        before any member's bytes are made (a JSON member is only counted, a stream's words
        not joined).  Named at the member that takes it past the limit."""
        total, over = END_OF_ARCHIVE, None
        for name, member in archive.items():
            total += tar_member_bytes(name, member.size)
            if over is None and total > MAX_TOTAL_BYTES:
                over = name
        if over is not None:
            raise self.err(archive[over].path,
                           f"member {escape_controls(shown_member_name(over))}: the archive's "
                           f"tar would be {total} bytes, more than the {MAX_TOTAL_BYTES} bytes "
                           "the reader allows a decompressed payload (MAX_TOTAL_BYTES); it "
                           "passes the limit at this member")

    # -- subgraphs ----------------------------------------------------------
    def subgraph(self, sg: Any, path: str, position: int
                 ) -> tuple[str, list[tuple[str, _Member]]]:
        sg = self.keys(sg, _SG_KEYS, path)
        name = sg.get("name", f"sg{position:02d}")
        if not isinstance(name, str) or not name:
            raise self.err(path + ".name", f"must be a non-empty string, not {_found(name)}")
        self.utf8(name, path + ".name")  # (not at neff_json, which lists it)
        self.member_name(f"{name}/{DEF_JSON}", path + ".name")
        var_list, by_name = self.variables(sg.get("vars", []), path + ".vars")
        groups = self.groups(sg.get("replica_groups"), path + ".replica_groups")
        engines = sg.get("engines")
        if not isinstance(engines, dict) or not engines:
            raise self.err(path + ".engines", "needs a mapping of engine name -> instructions"
                                              + _instead(sg, "engines"))
        streams: list[tuple[str, _Member]] = []
        for engine, body in engines.items():
            if not isinstance(engine, str):
                raise self.err(path + ".engines", f"engine name {_spec_value(engine)} is not a "
                                                  "string")
            if (why := _not_unicode(engine)) is not None:  # (before a path names it)
                raise self.err(path + ".engines", f"engine name {_spec_value(engine)} is not "
                                                  f"Unicode text ({why})")
            self.member_name(f"{name}/{engine}.bin", path + ".engines")  # (as above)
            at = jsonin.joined_key(path + ".engines", engine)  # (engines["a.b"]: quoted)
            try:
                words = self.instructions(_or(body, []), at, by_name)
            except RecursionError:  # repeats in repeats, from a chain of YAML aliases
                raise self.err(at, "repeat bodies nested too deeply "
                               "(a chain of YAML aliases)") from None
            # (counted, joined once the archive is known to fit: check_archive)
            streams.append((engine, _Member(words.n * WORD_SIZE, at, words.joined)))
        definition: dict[str, Any] = {"var": var_list, "replica_groups": groups,
                                      "engines": [e for e, _ in streams]}
        override = sg.get("def_json")
        if override is not None:
            if not isinstance(override, dict):
                raise self.err(path + ".def_json", f"must be a mapping, not {_found(override)}")
            definition.update(override)

        def field(sub: str) -> str:  # a key path of def.json -> the spec's
            # its first step: a plain name (var), or a quoted key (["a.b"]: jsonin.joined_key)
            top: Any = re.match(r"[^.\[]*", sub).group()
            if sub.startswith('["'):
                top = json.JSONDecoder().raw_decode(sub, 1)[0]
            if not sub or (override and top in override):  # (a key at the top: def_json's)
                return _joined(path + ".def_json", sub)
            return _joined(path, "vars" + sub[3:] if top == "var" else sub)

        member = f"{name}/{DEF_JSON}"
        items = [(member, self.json_member(definition, member, path, field))]
        items.extend((f"{name}/{engine}.bin", data) for engine, data in streams)
        return name, items

    def variables(self, items: Any, path: str) -> tuple[list[dict], dict[str, dict]]:
        if not isinstance(items, list):
            raise self.err(path, f"must be a list, not {_found(items)}")
        out: list[dict] = []
        by_name: dict[str, dict] = {}
        next_id = 0
        for k, item in enumerate(items):
            p = f"{path}[{k}]"
            item = self.keys(item, _VAR_KEYS, p)
            name = item.get("name")
            if not isinstance(name, str) or not name:
                raise self.err(p + ".name", "needs a non-empty name" + _instead(item, "name"))
            self.utf8(name, p + ".name")  # (not at the subgraph, whose def.json holds it)
            if name in by_name:
                raise self.err(p + ".name", f"var name {_spec_value(name)} used twice")
            if "var_id" not in item and next_id > 2**32 - 1:
                raise self.err(p, f"its default var_id follows the highest var_id before it "
                                  f"({next_id - 1}): {next_id} is outside 0..{2**32 - 1}; give "
                                  "var_id")
            var_id = self.integer(item.get("var_id", next_id), p + ".var_id", 0, 2**32 - 1)
            next_id = max(next_id, var_id + 1)
            vtype = self.required(item, "type", p, f"one of {', '.join(VAR_TYPE_NAMES)}")
            if isinstance(vtype, str):  # (any other value the reader judges)
                self.utf8(vtype, p + ".type")
            nbytes = self.required(item, "size", p, "the var's size in bytes")
            var = {"var_id": var_id, "name": name, "type": vtype,
                   "size": self.integer(nbytes, p + ".size", 0, size=True)}
            if "partitions" in item:
                var["partitions"] = item["partitions"]
            out.append(var)
            by_name[name] = var
        return out, by_name

    def groups(self, groups: Any, path: str) -> list:
        if not isinstance(groups, list):  # (None: the key is missing, or null)
            raise self.err(path, "needs a list of replica groups"
                                 + (f", not {_found(groups)}" if groups is not None else ""))
        self.acyclic(groups, path)  # (here: def.json holds a copy of the list, not the list)
        out = []
        for g, grp in enumerate(groups):
            if isinstance(grp, str):
                m = _RANGE_RE.match(grp)
                if m and (digits := max(map(len, m.groups()))) > MAX_JSON_INT_DIGITS:
                    raise self.err(f"{path}[{g}]", f"rank range {_spec_value(_shown(grp))}: a "
                                   f"rank of {digits} digits, more than {MAX_JSON_INT_DIGITS} "
                                   "(as a YAML integer of the spec)")
                if not m or int(m.group(2)) < int(m.group(1)):
                    raise self.err(f"{path}[{g}]", f"bad rank range {_spec_value(_shown(grp))} "
                                   "(use 'first..last' in ASCII digits)")
                first, last = int(m.group(1)), int(m.group(2))
                if self.range_ranks + last - first + 1 > MAX_TOPOLOGY_RANKS:
                    # expanded, a range costs about 150 bytes a rank: '0..2147483647' would
                    # exhaust memory, and so would many ranges; no topology has more ranks
                    raise self.err(f"{path}[{g}]", f"the range {_spec_value(grp)} holds "
                                   f"{last - first + 1} ranks, {self.range_ranks} before it in "
                                   "the spec's ranges; "
                                   f"the ranges hold at most {MAX_TOPOLOGY_RANKS} ranks in all "
                                   "(MAX_TOPOLOGY_RANKS, the most ranks a topology has); list "
                                   "the ranks for larger groups")
                self.range_ranks += last - first + 1
                out.append(list(range(first, last + 1)))
            elif isinstance(grp, list):
                out.append(grp)
            else:
                raise self.err(f"{path}[{g}]", f"a group is a list of ranks or 'first..last', "
                                               f"not {_found(grp)}")
        return out

    # -- instructions -------------------------------------------------------
    def instructions(self, body: Any, path: str, by_name: dict[str, dict]) -> _Stream:
        """The words of the instruction list ``body``, counted, not joined (:class:`_Stream`)."""
        if not isinstance(body, list):
            raise self.err(path, f"must be a list of instructions, not {_found(body)}")
        if id(body) in self.walking:  # `sp: &x [{repeat: {count: 1, body: *x}}]`
            raise self.err(path, "a repeat body contains itself (a recursive YAML alias)")
        self.walking.add(id(body))
        words = _Stream()
        for k, item in enumerate(body):
            words.add(self.instruction(item, f"{path}[{k}]", by_name))
            self.fits(words.n, f"{path}[{k}]")
        self.walking.discard(id(body))
        return words

    def fits(self, n_words: int, path: str) -> int:
        """``n_words`` if a stream of that many words fits one tar member
        (``MAX_MEMBER_BYTES``, as the reader will require); checked before a count
        multiplies anything, so a huge count is an error at once, not a MemoryError."""
        if n_words > MAX_STREAM_WORDS:
            raise self.err(path, f"{n_words} instruction words: a stream holds at most "
                                 f"{MAX_STREAM_WORDS} ({MAX_MEMBER_BYTES} bytes, the member "
                                 "size limit)")
        return n_words

    def repeated(self, unit: bytes | _Stream, count: int, path: str) -> _Repeated:
        """``unit`` (one word, or a repeat's body) ``count`` times, counted, not built."""
        n = 1 if isinstance(unit, bytes) else unit.n
        return _Repeated(unit, count, self.fits(n * count, path))

    def instruction(self, item: Any, path: str, by_name: dict[str, dict]
                    ) -> list[bytes] | _Repeated:
        if item == "nop":
            return [opaque_word(NOP_OPCODE)]
        if not isinstance(item, dict) or len(item) != 1:
            # (a bare name mistyped: the one bare instruction, nop, when it is close)
            hint = did_you_mean(item, ("nop",), quote=_spec_value)
            raise self.err(path, f"an instruction is a one-key mapping "
                                 f"({', '.join(INSTRUCTION_KINDS)}) or 'nop', not {_found(item)}"
                                 f"{hint}")
        (kind, body), = item.items()
        p = f"{path}.{kind}"
        if kind == "nop":
            return self.repeated(opaque_word(NOP_OPCODE), self.integer(body, p, 0), p)
        if kind == "opaque":
            body = self.keys(body, ("opcode", "count", "sync", "operands"), p)
            opcode = self.integer(self.required(body, "opcode", p, "the word's opcode, 0..255"),
                                  p + ".opcode", 0, 255)
            count = self.integer(body.get("count", 1), p + ".count", 0)
            sync = self.sync(body.get("sync"), p + ".sync")
            operands = self.hexbytes(body.get("operands", ""), p + ".operands", 52, pad=True)
            return self.repeated(opaque_word(opcode, sync=sync, operands=operands), count,
                                 p + ".count")
        if kind == "raw":
            items = body if isinstance(body, list) else [body]
            return [self.hexbytes(w, f"{p}[{j}]", WORD_SIZE) for j, w in enumerate(items)]
        if kind == "repeat":
            body = self.keys(body, ("count", "body"), p)
            count = self.integer(self.required(body, "count", p, "how many times to repeat "
                                               "the body"), p + ".count", 0)
            return self.repeated(self.instructions(body.get("body", []), p + ".body", by_name),
                                 count, p + ".count")
        if kind in TRIGGER_KINDS:
            return self.trigger(TRIGGER_KINDS[kind], body, p, by_name)
        raise self.err(path, f"unknown instruction {_spec_value(kind)}"
                             f"{_did_you_mean(kind, INSTRUCTION_KINDS, 'one of ')}")

    def sync(self, sync: Any, path: str) -> bytes:
        if sync is None:
            return bytes(8)
        sync = self.keys(sync, _SYNC_KEYS, path)
        vals = [self.integer(sync.get(k, 0), f"{path}.{k}", 0, 255) for k in _SYNC_KEYS[:4]]
        sem = self.integer(sync.get("semaphore_value", 0), path + ".semaphore_value", 0,
                           2**32 - 1)
        return bytes(vals) + sem.to_bytes(4, "little")

    def var_id(self, ref: Any, path: str, by_name: dict[str, dict]) -> int:
        if type(ref) is int:
            return self.integer(ref, path, 0, 2**32 - 1)  # escape hatch: a raw var id
        if ref is None:
            raise self.err(path, f"{path.rsplit('.', 1)[-1]} is missing: give a var name")
        if not isinstance(ref, str):
            raise self.err(path, f"must be a var name or a var_id, not {_found(ref)}")
        if ref not in by_name:
            raise self.err(path, f"no var named {_spec_value(ref)} in this subgraph")
        return by_name[ref]["var_id"]

    def dram(self, ref: Any, path: str, by_name: dict[str, dict]) -> tuple[int, int]:
        if isinstance(ref, dict):
            ref = self.keys(ref, ("var", "offset"), path)
            return (self.var_id(ref.get("var"), path + ".var", by_name),
                    self.integer(ref.get("offset", 0), path + ".offset", 0, 2**64 - 1, size=True))
        return self.var_id(ref, path, by_name), 0

    def sbuf(self, ref: Any, path: str, by_name: dict[str, dict], prefix: str) -> dict:
        ref = self.keys(ref, ("var", "start", "partitions", "dims"), path)
        parts = ref.get("partitions")
        at = path + ".partitions"
        if type(parts) is int:
            (pstart, pcount), (start_at, count_at) = (0, parts), (at, at)
        elif isinstance(parts, list) and len(parts) == 2:
            (pstart, pcount), (start_at, count_at) = parts, (at + "[0]", at + "[1]")
        else:
            raise self.err(path + ".partitions", "needs a count or [start, count]"
                                                 + _instead(ref, "partitions"))
        dims = ref.get("dims")
        if not isinstance(dims, list) or not 1 <= len(dims) <= 3:
            raise self.err(path + ".dims", "needs 1 to 3 [step, num] pairs, innermost first"
                                           + _instead(ref, "dims"))
        out_dims = []
        for j, d in enumerate(dims + [[0, 1]] * (3 - len(dims))):
            if not isinstance(d, list) or len(d) != 2:
                raise self.err(f"{path}.dims[{j}]", f"a dimension is [step, num], not "
                                                    f"{_found(d)}")
            out_dims.append({"step": self.integer(d[0], f"{path}.dims[{j}][0]", -2**31, 2**31 - 1),
                             "num": self.integer(d[1], f"{path}.dims[{j}][1]", 0, 2**32 - 1)})
        return {
            f"{prefix}_var_id": self.var_id(ref.get("var"), path + ".var", by_name),
            f"{prefix}_start": self.integer(ref.get("start", 0), path + ".start", 0, 2**32 - 1),
            f"{prefix}_partition_start": self.integer(pstart, start_at, 0, 0xFFFF),
            f"{prefix}_partition_count": self.integer(pcount, count_at, 0, 0xFFFF),
            f"{prefix}_dims": out_dims,
        }

    def trigger(self, ctype: CType, body: Any, path: str, by_name: dict[str, dict]
                ) -> list[bytes]:
        body = self.keys(body, _TRIGGER_KEYS, path)
        dname = self.required(body, "dtype", path, f"one of {', '.join(DTYPE_NAMES)}")
        if not isinstance(dname, str) or dname not in DTYPE_NAMES:
            raise self.err(path + ".dtype", f"unknown dtype {_spec_value(dname)}"
                                            f"{_did_you_mean(dname, DTYPE_NAMES, 'one of ')}")
        dtype = DTYPE_NAMES[dname]
        if ctype == CType.ALL_GATHER:
            if "op" in body:
                raise self.err(path + ".op", "all_gather takes no op")
            alu = None
        else:
            op = self.required(body, "op", path, f"one of {', '.join(ALU_NAMES)}")
            if not isinstance(op, str) or op not in ALU_NAMES:
                raise self.err(path + ".op", f"unknown op {_spec_value(op)}"
                                             f"{_did_you_mean(op, ALU_NAMES, 'one of ')}")
            alu = ALU_NAMES[op]
        sbuf_like = any(isinstance(body.get(k), dict) and body[k].get("partitions") is not None
                        for k in ("src", "dst"))  # (a key given null is missing: keys())
        opcode = self.integer(body.get("opcode", 0xD9 if sbuf_like else 0xC8),
                              path + ".opcode", 0, 255)
        if opcode not in (0xC7, 0xC8, 0xD9):
            raise self.err(path + ".opcode", f"opcode must be 0xC7, 0xC8 or 0xD9 (a "
                                             f"collective's pseudo trigger), not 0x{opcode:02X}")
        if opcode == 0xC7 and ctype != CType.ALL_REDUCE:
            raise self.err(path + ".opcode", "0xC7 carries only all_reduce")
        group = self.integer(body.get("group", 0), path + ".group", 0, 0xFFFF)
        stream_id = self.integer(body.get("stream_id", 0), path + ".stream_id", 0, 0xFFFF)
        channel_id = self.integer(body.get("channel_id", 0), path + ".channel_id", 0, 0xFFFF)
        if opcode == 0xC7 and stream_id:
            raise self.err(path + ".stream_id", "0xC7 has no stream_id field")
        if opcode != 0xD9 and channel_id:
            raise self.err(path + ".channel_id", "only 0xD9+0xDA has a channel_id")
        for key in ("ext_sync", "patch_ext", "ext"):
            if opcode != 0xD9 and key in body:
                raise self.err(f"{path}.{key}", f"only 0xD9+0xDA has a 0xDA word ({key} is for "
                                                "it)")
        fields: dict[str, Any] = {"alu_op": alu, "dtype": dtype}
        sync = self.sync(body.get("sync"), path + ".sync")
        fields.update(_sync_fields(sync))
        ext_fields: dict[str, Any] = {}
        if opcode == 0xD9:
            for k in ("src", "dst"):
                if not isinstance(body.get(k), dict):
                    raise self.err(f"{path}.{k}", "0xD9 needs an SBUF access pattern "
                                                  "{var, start, partitions, dims}"
                                                  + _instead(body, k))
            fields.update(self.sbuf(body["src"], path + ".src", by_name, "src"))
            fields["ctype"] = ctype
            ext_fields.update(self.sbuf(body["dst"], path + ".dst", by_name, "dst"))
            ext_fields.update(replica_group_id=group, channel_id=channel_id, stream_id=stream_id)
            ext_fields.update(_sync_fields(self.sync(body.get("ext_sync"), path + ".ext_sync")))
            src_elems = fields["src_partition_count"]
            for d in fields["src_dims"]:
                src_elems *= d["num"]
        else:
            fields["src_var_id"], fields["src_offset"] = self.dram(body.get("src"), path + ".src",
                                                                   by_name)
            fields["dst_var_id"], fields["dst_offset"] = self.dram(body.get("dst"), path + ".dst",
                                                                   by_name)
            fields["replica_group_id"] = group
            if opcode == 0xC8:
                fields["ctype"] = ctype
                fields["stream_id"] = stream_id
            src_elems = None
        fields["num_elements"] = self.count(body, path, dtype, src_elems)
        words = [self.encode(opcode, fields, body.get("patch"), path + ".patch")]
        if opcode == 0xD9:
            ext = body.get("ext", True)
            if not isinstance(ext, bool):
                raise self.err(path + ".ext", f"must be true or false, not {_found(ext)}")
            for key in ("ext_sync", "patch_ext", "channel_id", "stream_id", "group"):
                if not ext and key in body:  # (the 0xDA word holds it: it would be lost)
                    raise self.err(f"{path}.{key}", f"ext: false leaves out the 0xDA word, "
                                                    f"which {key} is for")
            if ext:
                words.append(self.encode(Opcode.PSEUDO_EXTENSION, ext_fields,
                                         body.get("patch_ext"), path + ".patch_ext"))
        return words

    def count(self, body: dict, path: str, dtype: DType, default: int | None) -> int:
        if "num_elements" in body and "bytes" in body:
            raise self.err(path, "give num_elements or bytes, not both")
        if "num_elements" in body:
            return self.integer(body["num_elements"], path + ".num_elements", 0, 2**64 - 1,
                                size=True)
        if "bytes" in body:
            nbytes = self.integer(body["bytes"], path + ".bytes", 0, size=True)
            if nbytes % DTYPE_SIZE[dtype]:
                raise self.err(path + ".bytes", f"{nbytes} bytes is not a whole number of "
                                                f"{dtype.name} elements")
            return self.integer(nbytes // DTYPE_SIZE[dtype], path + ".bytes", 0, 2**64 - 1)
        if default is not None:  # a 0xD9's src pattern's element count
            if default > 2**64 - 1:
                raise self.err(path + ".src", f"the pattern's {default} elements (partitions "
                                              "times each dimension's num), num_elements by "
                                              f"default, are more than {2**64 - 1} (u64): give "
                                              "num_elements")
            return default
        raise self.err(path, "needs num_elements or bytes")

    def encode(self, opcode: int, fields: dict, patch: Any, path: str) -> bytes:
        try:
            word = encode_word(opcode, fields)
        except cs.ConstructError as err:
            raise self.err(path.rsplit(".", 1)[0],
                           f"cannot encode: {str(err).splitlines()[-1]}") from None
        if patch is None:
            return word
        patch = self.keys(patch, tuple(WORD_FIELDS[opcode]), path)
        for name, val in patch.items():
            off, size = WORD_FIELDS[opcode][name]
            if isinstance(val, str):
                value: int | bytes = self.hexbytes(val, f"{path}.{name}", size, pad=True)
            else:
                value = self.integer(val, f"{path}.{name}", -(2 ** (8 * size - 1)),
                                     2 ** (8 * size) - 1)
            word = patch_field(word, WORD_STRUCTS[opcode], name, value)
        return word


def _joined(path: str, sub: str) -> str:
    """Key path ``sub`` (``a.b``, ``[2].c``) inside the value at key path ``path``."""
    if not sub or not path:
        return path or sub
    return path + (sub if sub.startswith("[") else f".{sub}")


def _or(val: Any, default: Any) -> Any:
    """``val``, or ``default`` when it is null (not when it is empty or false: ``sp: 0`` is
    refused by the type check, not read as no value): an engine's instructions, a value of
    the ``engines`` mapping, which :meth:`_Assembler.keys` does not filter (``sp: null``: an
    empty stream).  A key of a mapping ``keys`` returned is read with ``get(key, default)``:
    ``keys`` dropped it where it was given null."""
    return default if val is None else val


def _did_you_mean(val: Any, names, label: str) -> str:
    """:func:`errors.did_you_mean` for a spec's unknown name ``val``: the closest of
    ``names`` quoted as the spec writes it, then ``label`` and ``names``: `` (did you mean
    "nodes"? allowed: ...)``."""
    names = list(names)
    return did_you_mean(val, names, label + ", ".join(names), _spec_value)


def _spec_value(val: Any) -> str:
    """``val`` in a message as the spec (YAML or JSON) writes it: a scalar as its text
    (``null``, ``true``, ``false``, ``12``, ``1.5``, ``1.0e+20``, ``.nan``, ``-.inf``; a string
    quoted, :func:`_quoted`), a date by its kind and ISO text (``a date (2001-12-14)``: the
    spec may have meant the string), anything else by its kind (``a list``, ``a mapping``,
    ``binary data (!!binary)``, ``a set (!!set)``).  Python's words (``None``, ``True``,
    ``datetime.date(2001, 12, 14)``, ``b'\\x01'``) are not the spec's."""
    if val is None:
        return "null"
    if isinstance(val, bool):
        return "true" if val else "false"
    if isinstance(val, int):
        try:
            return int.__repr__(val)  # (not an IntEnum's name)
        except ValueError:  # (more digits than the interpreter converts: from the API)
            return f"an integer of more than {MAX_JSON_INT_DIGITS} digits"
    if isinstance(val, float):
        if not math.isfinite(val):
            return ".nan" if math.isnan(val) else ("-.inf" if val < 0 else ".inf")
        text = float.__repr__(val)  # YAML 1.1's floats have a point: 1.0e+20, not 1e+20
        return text.replace("e", ".0e") if "e" in text and "." not in text else text
    if isinstance(val, str):
        return _quoted(val)
    if isinstance(val, datetime.date):  # (and a datetime)
        return f"a date ({val.isoformat()})"
    kinds = ((bytes, "binary data (!!binary)"), ((set, frozenset), "a set (!!set)"),
             ((list, tuple), "a list"), (dict, "a mapping"))
    return next((kind for typ, kind in kinds if isinstance(val, typ)),
                f"{'an' if type(val).__name__[:1].lower() in 'aeiou' else 'a'} "
                f"{type(val).__name__}")


def _found(val: Any) -> str:
    """``val`` as a refusal of its type says what it found: :func:`_spec_value`, with a list's
    items or a mapping's keys counted (``an empty list``, ``a list of 3 items``, ``a mapping
    of 2 keys``: a rule may be about their number)."""
    if isinstance(val, (list, tuple, dict)):
        n, kind, what = len(val), "list" if isinstance(val, (list, tuple)) else "mapping", \
            "item" if isinstance(val, (list, tuple)) else "key"
        return f"an empty {kind}" if not n else f"a {kind} of {n} {what}{'s' if n > 1 else ''}"
    return _spec_value(val)


def _instead(obj: dict, key: str) -> str:
    """``, not X``, what key ``key`` of the mapping ``obj`` holds (:func:`_found`), for a
    refusal of its type; empty when the key is missing (the refusal says what it needs)."""
    return f", not {_found(obj[key])}" if key in obj else ""


def _quoted(text: str) -> str:
    """``text`` quoted as YAML writes it: in single quotes (``'bf17'``), or, when it holds a
    single quote or a character that is not printable (a line break, a lone surrogate), in
    double quotes with JSON's escapes, which YAML reads too (``"it's"``, ``"a\\nb"``,
    ``"\\ud800"``)."""
    if text.isprintable() and "'" not in text:
        return f"'{text}'"
    return "".join(c if c.isprintable() else json.dumps(c)[1:-1]  # (ASCII escapes)
                   for c in json.dumps(text, ensure_ascii=False))


def _not_unicode(text: str) -> str | None:
    """Why ``text`` cannot be written as UTF-8 (``'"\\ud800" is a lone surrogate, which UTF-8
    cannot hold'``), or None when it can."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        return (f"{_spec_value(err.object[err.start])} is a lone surrogate, which UTF-8 cannot "
                "hold")
    return None


def _shown(text: str) -> str:
    """``text`` stripped, cut to its first 12 characters and ``...`` when longer than 24 (a
    string of thousands of digits, in a one-line error)."""
    return cut_middle(text.strip(), 24, 12, 0, "{head}...")


def _sync_fields(sync: bytes) -> dict[str, int]:
    return {"wait_mode": sync[0], "wait_idx": sync[1], "update_mode": sync[2],
            "update_idx": sync[3], "semaphore_value": int.from_bytes(sync[4:8], "little")}


#: The scalars JSON holds.  Its keys are strings only: json.dumps writes a number, true, false
#: or null key as a string, so ``{1: a, "1": b}`` wrote the key "1" twice; such a key is
#: refused (:func:`_key_not_string`).
_JSON_SCALARS = (str, int, float, bool, type(None))


def _not_json(doc: Any) -> tuple[str, Any, bool] | None:
    """The first value of ``doc`` (in document order; a mapping's keys before its values)
    that JSON cannot hold: anything but a string, number, boolean, null, list or mapping
    (a YAML date, ``!!set``, ``!!binary``), a number that is not finite, or a key that is
    not a string.  Returns its key path (for a key: of the mapping),
    the value and whether it is a key, or None.  Each list or mapping once (YAML aliases)."""
    seen: set[int] = set()
    stack: list[tuple[str, Any]] = [("", doc)]
    while stack:
        path, val = stack.pop()
        if isinstance(val, (dict, list, tuple)):
            if id(val) in seen:
                continue
            seen.add(id(val))
            if isinstance(val, dict):
                for key in val:
                    if not isinstance(key, str):
                        return path, key, True
                kids = [(jsonin.joined_key(path, k), v) for k, v in val.items()]
            else:
                kids = [(f"{path}[{i}]", v) for i, v in enumerate(val)]
            stack.extend(reversed(kids))  # popped in document order
        elif not isinstance(val, _JSON_SCALARS) or _non_finite(val):
            return path, val, False
    return None


def _non_finite(val: Any) -> bool:
    return isinstance(val, float) and not math.isfinite(val)


def _not_json_why(val: Any, is_key: bool) -> str:
    """Why ``val`` (a key if ``is_key``), found by :func:`_not_json`, is refused."""
    if _non_finite(val):  # (as parse_spec_text says of one in a spec's text)
        return (f"{'key ' if is_key else ''}{_spec_value(val)} is not a finite number (NaN and "
                "infinities are refused)")
    if is_key:  # (json.dumps wrote a number, boolean or null key as a string)
        kinds = ((type(None), "null"), (bool, "a boolean"), (int, "an integer"),
                 (float, "a number"), (datetime.date, "a date"))
        kind = next((kind for typ, kind in kinds if isinstance(val, typ)), None)
        if kind is None:  # (binary data: no text to quote)
            return f"a key that is {_spec_value(val)}, JSON keys are strings"
        text = val.isoformat() if isinstance(val, datetime.date) else _spec_value(val)
        return f"key {text} is {kind}, JSON keys are strings: quote it"
    hint = ""
    if isinstance(val, datetime.date):  # (and a datetime)
        hint = " (YAML 1.1 reads this form as a date: quote it for a string)"
    return f"{_spec_value(val)}, which JSON cannot hold{hint}"


def _key_not_string(doc: Any) -> bool:
    """Whether a mapping in ``doc`` has a key that is not a string, which json.dumps would
    write as one (a number, boolean or null: ``{1: a, "1": b}`` wrote the key "1" twice) or
    refuse (a date, binary data).  Only the lists and mappings are walked, each once (YAML
    aliases): :func:`_not_json` then names the key, in document order."""
    seen: set[int] = set()
    stack: list[Any] = [doc]
    while stack:
        val = stack.pop()
        if id(val) in seen:
            continue
        seen.add(id(val))
        if isinstance(val, dict):
            if not all(isinstance(key, str) for key in val):
                return True
            val = val.values()
        stack.extend(kid for kid in val if isinstance(kid, (dict, list, tuple)))
    return False


class _NotUnicode(ValidationError):
    """A JSON member's text holds a lone surrogate (YAML's ``"\\ud800"``): ``found``, the
    first one's key path (of the mapping, for a key), the string and whether it is a key."""

    def __init__(self, why: str, found: tuple[str, str, bool]):
        super().__init__(why)
        self.found = found


class _NotJson(ValidationError):
    """A JSON member holds a value JSON cannot hold (json.dumps refused it):
    :func:`_not_json` finds it."""


class _Circular(ValidationError):
    """A JSON member holds a list or mapping that contains itself (json.dumps refused it)."""


#: The deepest a JSON member may nest lists and mappings (the member's own object is level 1).
#: json's decoder, which the NEFF reader reads a member with (neff/reader.py: ``invalid JSON:
#: nested too deeply``), recurses once a level and stops short of the interpreter's recursion
#: limit (1,000) by the frames under it: it passes half of it from any stack it is called from
#: (as jsonin's walk of a text too deep for it assumes), so a member no deeper is read back.
#: A YAML spec's text nests less than that (its reader stops near 490 levels); a chain of
#: aliases or a spec read as JSON (near 970) nests deeper.
MAX_JSON_DEPTH = 500

_TOO_DEEP_ALIASES = "nested too deeply (a chain of YAML aliases nesting lists or mappings)"


#: The most bytes a JSON member may be written as: the reader's limit of one member's data
#: (``MAX_MEMBER_BYTES``), which a member past it would not be read back by.  Counted before
#: any JSON is written (:func:`_json_size`).
MAX_JSON_MEMBER_BYTES = MAX_MEMBER_BYTES


class _TooLarge(ValidationError):
    """A JSON member would be written as more than :data:`MAX_JSON_MEMBER_BYTES` bytes."""

    def __init__(self, size: int):
        super().__init__(f"cannot be written as JSON: {size} bytes")
        self.size = size


def _scalar_size(val: Any) -> tuple[int, bool]:
    """The UTF-8 bytes json.dumps (``ensure_ascii=False``, ``allow_nan=False``) writes ``val``
    as, a value that is not a list or mapping, and whether they hold a lone surrogate (which
    UTF-8 cannot hold: counted as ``surrogatepass`` writes it); raises :class:`_NotJson` as
    json.dumps refuses it (a date, a set, bytes; NaN; an integer of more than 4300 digits)."""
    kind = type(val)
    try:
        if kind is str:
            text = _encode_json_str(val)
        elif val is None or val is True:
            return 4, False
        elif val is False:
            return 5, False
        elif kind is int:
            return len(int.__repr__(val)), False
        elif kind is float:
            if not math.isfinite(val):
                raise ValueError(f"Out of range float values are not JSON compliant: {val!r}")
            return len(float.__repr__(val)), False
        else:  # (another kind: json's own words, and a subclass written as json writes it)
            text = json.dumps(val, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise _NotJson(f"cannot be written as JSON: {err}") from None
    try:
        return len(text.encode("utf-8")), False
    except UnicodeEncodeError:
        return len(text.encode("utf-8", "surrogatepass")), True


#: json's writer of a string (quoted, with its escapes; ``ensure_ascii=False``).
_encode_json_str = json.encoder.encode_basestring
#: Integers within this of 0 are written at once (a longer one, counted once, by its id).
_SMALL_INT = 1 << 64


def _json_size(doc: Any, aliased: bool = False) -> int:
    """The bytes ``doc`` is written as by :func:`_json_bytes` (json.dumps with a 2-space
    indent, and a newline), counted without writing it; or the first refusal json.dumps, then
    the reader, would meet writing it in its order (a mapping's keys before its values):
    :class:`_NotJson` for a value JSON cannot hold, :class:`_Circular` for a list or mapping
    that contains itself, a ValidationError when it nests more than :data:`MAX_JSON_DEPTH`
    deep (through a list or mapping met before, as a chain of YAML aliases nests, or when
    ``aliased``, a spec of YAML aliases, whose text cannot nest so deep; else more than
    MAX_JSON_DEPTH lists or mappings deep: a spec read as JSON, a dict); then
    :class:`_NotUnicode` for the first string (in document order, a mapping's keys before
    its values) that is not Unicode text.  Without recursion, each distinct list or mapping
    walked once, then known by its depth and size (a chain of N aliases costs N, not its
    expansion, however many bytes that is).

    The text of a list or mapping written ``L`` levels in is its text at level 0 with ``2L``
    more spaces after each of its newlines: so each is known by its bytes at level 0 and its
    newlines.  Non-empty, ``n`` items: ``[``, for each item a newline, 2 spaces and the item
    at level 1, commas between them, a newline and ``]`` (a mapping's keys each with ``": "``
    before its value); empty: ``[]``."""
    if not isinstance(doc, (dict, list, tuple)):
        size, bad = _scalar_size(doc)
        if bad:
            raise _NotUnicode("cannot be written as JSON: not Unicode text", ("", doc, False))
        return size + 1
    known: dict[int, tuple[int, int, int]] = {}  # id -> (levels, bytes at level 0, newlines)
    big: dict[int, tuple[int, bool]] = {}  # id -> _scalar_size of a long string or integer
    walking = {id(doc)}  # the lists and mappings open on the walk's path
    surrogate: tuple[str, Any, bool] | None = None  # the first: (key path, text, a key?)
    # the path: [list or mapping, its (key, value) pairs left, levels so far, bytes at level 0
    # of its items so far (each at level 1, with its key and ": "), their newlines, its key]
    path: list[list] = []

    def opened(node: Any, key: Any) -> list:
        nonlocal surrogate
        keys = 0
        if isinstance(node, dict):
            for k in node:  # (json_member refused a key that is not a string)
                if type(k) is str and len(k) < 64 and k.isascii():  # (most: at once)
                    keys += len(_encode_json_str(k)) + 2
                    continue
                if not isinstance(k, str):
                    raise _NotJson("cannot be written as JSON: a key that is not a string")
                size, bad = _scalar_size(k) if type(k) is not str \
                    else big.get(id(k)) or big.setdefault(id(k), _scalar_size(k))
                keys += size + 2
                if bad and surrogate is None:
                    surrogate = (_trail(key) if path else "", k, True)
            pairs = iter(node.items())
        else:
            pairs = enumerate(node)
        return [node, pairs, 1, keys, 0, key]

    def _trail(key: Any) -> str:  # the key path of the walk's path's last's item ``key``
        return _step(_trail_path([(f[0], f[5]) for f in path]), path[-1][0], key)

    path.append(opened(doc, None))
    while path:
        top = path[-1]
        for key, kid in top[1]:
            kind = type(kid)
            if kind is str and len(kid) < 64 and kid.isascii():  # (most values: at once)
                top[3] += len(_encode_json_str(kid))
                continue
            if kind is int and -_SMALL_INT < kid < _SMALL_INT:
                top[3] += len(int.__repr__(kid))
                continue
            if not isinstance(kid, (dict, list, tuple)):
                # (a long string or integer, which an alias may repeat, counted once)
                got = big.get(id(kid)) or big.setdefault(id(kid), _scalar_size(kid)) \
                    if kind is str or kind is int else _scalar_size(kid)
                top[3] += got[0]
                if got[1] and surrogate is None:
                    surrogate = (_trail(key), kid, False)
                continue
            seen = known.get(id(kid))
            if seen is not None:  # (walked whole before: no refusal in it but its depth)
                if len(path) + seen[0] > MAX_JSON_DEPTH:
                    raise ValidationError(f"cannot be written as JSON: {_TOO_DEEP_ALIASES}")
                top[2] = max(top[2], seen[0] + 1)
                top[3] += seen[1] + 2 * seen[2]
                top[4] += seen[2]
                continue
            if id(kid) in walking:
                raise _Circular("cannot be written as JSON: a list or mapping contains itself "
                                "(a recursive YAML alias)")
            if len(path) == MAX_JSON_DEPTH:
                raise ValidationError("cannot be written as JSON: " + (
                    _TOO_DEEP_ALIASES if aliased else
                    f"nested too deeply (more than {MAX_JSON_DEPTH} lists or mappings deep)"))
            walking.add(id(kid))
            path.append(opened(kid, key))
            break
        else:  # walked whole
            path.pop()
            node, n = top[0], len(top[0])
            walking.discard(id(node))
            done = (top[2], 2 + 4 * n + top[3], n + 1 + top[4]) if n else (1, 2, 0)
            known[id(node)] = done
            if path:
                up = path[-1]
                up[2] = max(up[2], done[0] + 1)
                up[3] += done[1] + 2 * done[2]
                up[4] += done[2]
    if surrogate is not None:
        raise _NotUnicode("cannot be written as JSON: not Unicode text", surrogate)
    return known[id(doc)][1] + 1


def _json_size_unshared(doc: Any) -> int | None:
    """The bytes :func:`_json_size` counts for ``doc``, a value that shares no list, mapping
    or string (one of a spec read from text without an alias, :class:`_TextSpec`), counted
    from json's C writer, without indentation (about as long as the spec's text), then
    walking the lists and mappings level by level for the newlines and indentation the
    indent adds (a non-empty one of ``n`` items at level ``L``, the member's own at 0: ``n``
    newlines each before ``2(L + 1)`` spaces, one before its closing bracket and ``2L``);
    its scalars are looked at by C code only.  None wherever :func:`_json_size` may refuse
    (json's writer raises: a value JSON cannot hold, NaN, a long integer, a cycle; text that
    is not UTF-8; more than :data:`MAX_JSON_DEPTH` levels): that walk then says why, in its
    order."""
    try:
        text = json.dumps(doc, ensure_ascii=False, allow_nan=False, separators=(",", ": "))
        size = len(text) if text.isascii() else len(text.encode("utf-8"))
    except (TypeError, ValueError, RecursionError, UnicodeEncodeError):
        return None
    del text
    level, depth = [doc], 0
    while level and isinstance(doc, _JSON_CONTAINERS):
        depth += 1
        if depth > MAX_JSON_DEPTH:
            return None
        below = []
        for node in level:
            if node:
                size += len(node) * (2 * depth + 1) + 2 * depth - 1
                items = node.values() if isinstance(node, dict) else node
                below.extend(itertools.compress(
                    items, map(isinstance, items, itertools.repeat(_JSON_CONTAINERS))))
        level = below
    return size + 1


#: What json's writer writes as a list or a mapping.
_JSON_CONTAINERS = (dict, list, tuple)


def _json_member_size(obj: Any, aliased: bool = False, unshared: bool = False) -> int:
    """The bytes :func:`_json_bytes` writes ``obj`` as, counted without writing it.

    Raises (:func:`_json_size`, in json.dumps's order):
    :class:`_NotJson` for a value JSON cannot hold (a date, a set, bytes, NaN),
    :class:`_Circular` for a list or mapping that contains itself (a recursive YAML alias:
    ``_Assembler.acyclic`` then finds its key path), ValidationError for one nested more than
    :data:`MAX_JSON_DEPTH` deep (for the reader: reader.py's ``nested too deeply``); then
    :class:`_NotUnicode` for text that is not UTF-8 (a lone surrogate), and :class:`_TooLarge`
    for a member of more than :data:`MAX_JSON_MEMBER_BYTES` bytes (the reader's
    ``MAX_MEMBER_BYTES``).

    json.dumps with an indent writes in pure Python, each token yielded up through every
    level it is nested in (a chain of 1,500 aliases took 35 s to refuse: each chain it could
    write was written first; a member of 1.7 GB of aliases took 132 s and 6.5 GB), so
    :func:`_json_bytes` writes only a value this has passed: at most MAX_JSON_DEPTH deep and
    MAX_JSON_MEMBER_BYTES long.  ``unshared`` (a spec read from text without an alias): counted
    by :func:`_json_size_unshared` first (json's C writer: 1,000,000 values in about half the
    walk's time), by the walk where that gives None.
    """
    size = _json_size_unshared(obj) if unshared else None
    if size is None:
        size = _json_size(obj, aliased)
    if size > MAX_JSON_MEMBER_BYTES:
        raise _TooLarge(size)
    return size


def _json_bytes(obj: Any) -> bytes:
    """Deterministic JSON member bytes (2-space indent, key order kept, trailing newline) of
    a value :func:`_json_member_size` has counted (and so checked)."""
    try:
        text = json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    except ValueError as err:  # (cannot be: the count refuses what json.dumps refuses)
        if str(err) == "Circular reference detected":  # (json's words)
            raise _Circular("cannot be written as JSON: a list or mapping contains itself (a "
                            "recursive YAML alias)") from None
        raise _NotJson(f"cannot be written as JSON: {err}") from None
    except RecursionError:  # (called from a deep stack: the walk lets MAX_JSON_DEPTH through)
        raise ValidationError(f"cannot be written as JSON: {_TOO_DEEP_ALIASES}") from None
    except TypeError as err:  # (cannot be, as ValueError)
        raise _NotJson(f"cannot be written as JSON: {err}") from None
    return text.encode("utf-8")


__all__ = ["Assembled", "assemble", "assemble_file", "assemble_spec", "load_spec", "same_file",
           "parse_spec_text", "DTYPE_NAMES", "ALU_NAMES", "TRIGGER_KINDS", "NOP_OPCODE"]
