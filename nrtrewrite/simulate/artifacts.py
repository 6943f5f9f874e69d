"""Reading an output folder (docs/FORMATS.md §1) for the simulator: manifests, checksums and
the record arrays of every rank.

Only the files of the folder are read: ``manifest.json``, ``rank-RRRR/manifest.json`` and the
``.bin`` files, decoded with the project format definitions of
:mod:`nrtrewrite.emit.formats`.  Nothing here knows how the folder was produced.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nrtrewrite import jsonin
from nrtrewrite.artifacts import looks_like_rank_folder, open_regular
from nrtrewrite.codes import EncAlgType
from nrtrewrite.emit import formats as F
from nrtrewrite.emit.formats import FORMAT_NAME, FORMAT_VERSION, rank_dir_name
from nrtrewrite.errors import (OutputError, SimulationError, Where, escape_controls,
                               escape_path, json_text)
from nrtrewrite.simulate.fields import MAX_CHANNEL, Field
from nrtrewrite.simulate.layout import Layout
from nrtrewrite.simulate.triggers import read_triggers


def _neff_size_refusal(size: int) -> str | None:
    """Why a rewritten NEFF of ``size`` bytes is not read, or None: more than
    :data:`~nrtrewrite.neff.container.MAX_FILE_BYTES`, the most the NEFF reader takes."""
    from nrtrewrite.neff.container import MAX_FILE_BYTES

    if size <= MAX_FILE_BYTES:
        return None
    return f"file of {size} bytes exceeds the limit of {MAX_FILE_BYTES} bytes (MAX_FILE_BYTES)"


def _sha256_file(path: Path, size: object = None, *, neff: bool = False) -> str | None:
    """The file's SHA-256, or None when ``size`` is given and is not the file's size (judged
    before any byte is hashed); a file that cannot be read (missing, not a regular file) is
    an :class:`OutputError` (the simulation cannot be done: status 2), naming it and the
    reason, as :func:`load_rank_files` and :func:`read_rewritten_neff` name it, and so is
    the rewritten NEFF (``neff``) over its size limit, refused as it refuses it."""
    h = hashlib.sha256()
    try:
        with open_regular(path) as fh:  # (a FIFO in its place would block a plain open)
            if neff and (why := _neff_size_refusal(os.fstat(fh.fileno()).st_size)):
                raise OutputError(why, file=str(path))
            if size is not None and os.fstat(fh.fileno()).st_size != size:
                return None
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except OSError as exc:
        raise OutputError(f"cannot read: {exc.strerror or exc}", file=str(path)) from None
    return h.hexdigest()


def check_readable(path: Path, *, neff: bool = False) -> None:
    """Refuse ``path`` as :func:`_sha256_file` (the checksum pass), :func:`load_rank_files`
    and :func:`read_rewritten_neff` refuse it when it is missing or not a regular file (and
    the rewritten NEFF, ``neff``, over its size limit), with their line, without reading
    it: the simulation looks so at every file it reads before any value of a manifest is
    checked, in the checksum pass's order (docs/SIMULATOR.md §1)."""
    try:
        with open_regular(path) as fh:  # (a FIFO in its place would block a plain open)
            if neff and (why := _neff_size_refusal(os.fstat(fh.fileno()).st_size)):
                raise OutputError(why, file=str(path))
    except OSError as exc:
        raise OutputError(f"cannot read: {exc.strerror or exc}", file=str(path)) from None


def _check_manifest_size(path: Path, size: int) -> None:
    """Refuse the manifest ``path`` of ``size`` bytes (an :class:`OutputError` naming it)
    when it is over :data:`~nrtrewrite.emit.formats.MAX_MANIFEST_BYTES`."""
    if (why := F.manifest_size_refusal(size)) is not None:
        raise OutputError(why, file=str(path))


def _read_manifest(path: Path) -> bytes:
    """The bytes of the manifest ``path``: a regular file (anything else is refused once
    open, a FIFO without waiting for a writer) of at most
    :data:`~nrtrewrite.emit.formats.MAX_MANIFEST_BYTES`, refused from its size before any
    byte of it is read (an :class:`OutputError`; the OS's errors are raised)."""
    with open_regular(path) as fh:
        st = os.fstat(fh.fileno())
        _check_manifest_size(path, st.st_size)
        data = fh.read(st.st_size + 1)  # (a byte more: one that grows meanwhile is refused)
    if len(data) > st.st_size:
        raise OutputError(f"changed while being read (it held {st.st_size} bytes, now more)",
                          file=str(path))
    return data


def _manifest_bytes(path: Path) -> bytes:
    """The bytes of the manifest ``path`` (:func:`_read_manifest`); an :class:`OutputError`
    (status 2: the simulation cannot be done) when it is missing or cannot be read."""
    try:
        return _read_manifest(path)
    except FileNotFoundError:
        raise OutputError(f"{path.name} is missing", file=str(path)) from None
    except OSError as exc:  # (a FIFO, a directory: "not a regular file")
        raise OutputError(f"cannot read: {exc.strerror or exc}", file=str(path)) from None


def _load_json(path: Path, data: bytes | None = None, *, top_only: bool = False) -> dict:
    """A manifest as a JSON object (``data``: its bytes, already read); an
    :class:`OutputError` (status 2: the simulation cannot be done) when it is missing,
    cannot be read or is not one.  With ``top_only`` the objects inside it are read and
    checked but not kept (``jsonin.loads``'s ``top_only``: each is ``jsonin.INNER_OBJECT``)."""
    if data is None:
        data = _manifest_bytes(path)
    try:
        doc = jsonin.loads(data, strict_objects=False, top_only=top_only)
    except jsonin.JsonRule as exc:  # NaN, Infinity, 1e999
        raise OutputError(f"cannot read {path.name}: invalid JSON: {exc.why}",
                          file=str(path), field=exc.path) from None
    except RecursionError:
        raise OutputError(f"cannot read {path.name}: invalid JSON: nested too deeply",
                          file=str(path)) from None
    except ValueError as exc:  # UnicodeDecodeError, JSONDecodeError, 5000 digits
        raise OutputError(f"cannot read {path.name}: {exc}", file=str(path)) from None
    if not isinstance(doc, dict):
        raise OutputError("must be a JSON object", file=str(path))
    return doc


def output_neff_path(out: Path, top: dict) -> Path:
    """The rewritten NEFF in ``out`` that ``top`` (its manifest.json) names: a file name in
    the folder (FORMATS §1.1), never a path that reads a file elsewhere (OutputError)."""
    try:
        return out / F.name_on_disk(F.recorded_neff_name(top.get("output_neff")))
    except ValueError as exc:
        raise OutputError(f"field output_neff: {exc}", file=str(out / "manifest.json")) from None


def read_rewritten_neff(path: Path) -> bytes:
    """The bytes of the rewritten NEFF ``path``, read as an artifact is: a regular file
    (opened without blocking: a FIFO in its place is not waited on), its size judged
    against :data:`~nrtrewrite.neff.container.MAX_FILE_BYTES` before any byte is read.  One
    that cannot be read, missing or over that limit included, is an :class:`OutputError`
    naming it (status 2: the simulation cannot be done; until 2026-12-05 one over the limit
    was a protocol error, status 1, ``cannot read the rewritten NEFF: file of ...``)."""
    try:
        with open_regular(path) as fh:
            size = os.fstat(fh.fileno()).st_size
            if (why := _neff_size_refusal(size)) is not None:
                raise OutputError(why, file=str(path))
            data = fh.read(size + 1)  # (a byte more: one that grows meanwhile is refused)
    except OSError as exc:
        raise OutputError(f"cannot read: {exc.strerror or exc}", file=str(path)) from None
    if len(data) != size:
        raise OutputError(f"changed while being read (it held {size} bytes, now "
                          f"{len(data)})", file=str(path))
    return data


def _rank_dir(out: Path, rank: int) -> Path:
    """OUT's folder of ``rank``, one of the top manifest's ``ranks``; an :class:`OutputError`
    when it is gone (the simulation cannot be done, status 2, as for the top manifest)."""
    rdir = out / rank_dir_name(rank)
    if not rdir.is_dir():
        raise OutputError(f"{rdir.name} is missing (rank {rank} of manifest.json ranks)",
                          file=str(out))
    return rdir


class ManifestFormatError(OutputError):
    """A top-level manifest of another format or version (:func:`format_refusal`)."""


def format_refusal(doc: dict, man: Path, command: str = "simulate") -> ManifestFormatError | None:
    """Why ``doc``, the top-level manifest ``man``, is not one ``command`` reads (None: it
    is): another ``format`` or ``format_version`` than :data:`FORMAT_NAME` v
    :data:`FORMAT_VERSION`, one line, which says what to do when the version is an older
    nrtrewrite's (lower the model again) or a newer one's (``command`` it with that
    version, or lower the model again with this one)."""
    fmt, version = doc.get("format"), doc.get("format_version")
    if fmt == FORMAT_NAME and version == FORMAT_VERSION and not isinstance(version, bool):
        return None
    hint = ""
    if fmt == FORMAT_NAME and isinstance(version, int) and not isinstance(version, bool):
        if 1 <= version < FORMAT_VERSION:  # (no nrtrewrite wrote 0 or below: no hint)
            hint = "; an older nrtrewrite wrote it: lower the model again"
        elif version > FORMAT_VERSION:
            hint = (f"; a newer nrtrewrite wrote it: {command} it with that version, or lower "
                    "the model again with this one")
        hint += " (docs/FORMATS.md §1.1)" if hint else ""
    # (the values as JSON writes them: until 2026-12-06 Python's, 'something-else', None)
    return ManifestFormatError(f"not an {FORMAT_NAME} v{FORMAT_VERSION} manifest (format "
                               f"{json_text(fmt)}, version {json_text(version)}){hint}",
                               file=str(man))


def read_top_manifest(out: Path, *, only: tuple[str, ...] | None = None,
                      command: str = "simulate") -> dict:
    """OUT/manifest.json, with its format tag checked (a :class:`ManifestFormatError`
    otherwise, :func:`format_refusal`, worded for ``command``; another OutputError when it
    cannot be read or is no JSON object).  With
    ``only`` (top-level keys), the whole text is read and checked as without it, but of the
    objects in it only the top-level one is built: its members ``format``,
    ``format_version`` and those of ``only`` are exact (where one is or holds an object the
    manifest is read again whole, so a refusal is worded as without ``only``), the others
    may be ``jsonin.INNER_OBJECT`` (``dump``'s note on rank folders gone: ``ranks`` of a
    34 MB HIER manifest in 0.9 s and 111 MB in all, where building it took 2.1 s and 253 MB;
    docs/CLI.md "dump")."""
    if not out.is_dir():
        raise OutputError(f"{escape_path(out)} is not an output folder")
    man = out / "manifest.json"
    if not man.exists() and not man.is_symlink():  # (a dangling link: _load_json says so)
        raise OutputError("not an nrtrewrite output folder (no manifest.json)", file=str(out))
    if only is None:
        doc = _load_json(man)
    else:
        data = _manifest_bytes(man)
        doc = _load_json(man, data, top_only=True)
        if any(_holds_inner_object(doc.get(k)) for k in ("format", "format_version", *only)):
            doc = _load_json(man, data)
    if doc.get("format") != FORMAT_NAME and looks_like_rank_folder(out):
        raise OutputError("not an nrtrewrite output folder (a rank folder; give the whole "
                          "output folder, its parent)", file=str(out))
    if (refusal := format_refusal(doc, man, command)) is not None:
        raise refusal
    return doc


def _holds_inner_object(value) -> bool:
    """Whether ``value`` (read with ``top_only``) is, or is a list holding, an object not
    kept."""
    stack = [value]  # (a loop: a list may be nested as deep as the decoder reads)
    while stack:
        v = stack.pop()
        if v is jsonin.INNER_OBJECT:
            return True
        if isinstance(v, list):
            stack.extend(v)
    return False


def manifest_ranks(out: Path, top: dict) -> list[int]:
    """The ``ranks`` of ``top`` (OUT/manifest.json, FORMATS §1.1): the ranks with a folder in
    the output, each an integer 0 or more, each once (an OutputError naming the item
    otherwise)."""
    field = Field(top, "", str(out / "manifest.json"))["ranks"]
    ranks = field.ints(0)
    if len(set(ranks)) != len(ranks):
        seen: set[int] = set()
        k = next(i for i, r in enumerate(ranks) if r in seen or seen.add(r))
        raise OutputError(f"rank {ranks[k]} is listed twice", file=field.file,
                          field=f"ranks[{k}]")
    return ranks


def manifest_checksums(out: Path, top: dict) -> tuple[list[int], Path, str, dict[str, str]]:
    """What ``top`` (OUT/manifest.json) records for the checksums (FORMATS §1.1), each of
    its type, in this order: ``ranks`` (:func:`manifest_ranks`), ``output_neff`` an object
    whose ``name`` is a file name in the folder (:func:`output_neff_path`) and whose
    ``sha256`` is a string, ``rank_manifests`` an object of strings; an
    :class:`OutputError` naming the first faulty key otherwise.  Returns the ranks, the
    rewritten NEFF's path, its sha256 and ``rank_manifests``.  The checksum pass and the
    simulation (with ``--ignore-checksums`` too, comparing none) read them here, before
    any other key, so a key deleted or of another type is refused with the same line
    either way, also where two of them are (until 2026-12-06 without the option ``OUT:
    manifest.json has no ranks / rank_manifests``, no key path, and with it a
    ``rank_manifests`` of any type, or none, simulated as a match; and the checksum pass
    read ``ranks`` last, the simulation first but after the memory map, topology, ``world``
    and triggers, so ``ranks`` and ``rank_manifests`` both faulty named ``rank_manifests``
    without the option and ``ranks`` with it)."""
    ranks = manifest_ranks(out, top)
    doc = Field(top, "", str(out / "manifest.json"))
    neff = doc["output_neff"]
    neff["name"].str()
    path = output_neff_path(out, top)
    sums = doc["rank_manifests"]
    return (ranks, path, neff["sha256"].str(),
            {name: sums[name].str() for name in sums.dict()})


def read_top_values(out: Path, top: dict) -> tuple[tuple, Layout, list[dict]]:
    """Every value of ``top`` (OUT/manifest.json) the simulation takes, each of its type (an
    :class:`OutputError` naming the first faulty key), in the order docs/SIMULATOR.md §1
    gives: the checksums' keys (:func:`manifest_checksums`, its tuple returned), then the
    memory map, topology and ``world`` (:meth:`Layout.typed`) and the triggers
    (:func:`read_triggers`); and the ranks of every replica group among ``ranks`` (an
    OutputError otherwise: a folder lowered with ``--rank`` cannot be simulated).  The
    checksum pass and the simulation read it here, before any rank folder, so an output with
    a faulty key and a rank folder gone is refused naming the key either way (until
    2026-12-06 the checksum pass named the folder, ``--ignore-checksums`` the key)."""
    fname = str(out / "manifest.json")
    sums = manifest_checksums(out, top)
    layout = Layout.typed(top, file=fname)
    typed_triggers = read_triggers(top, file=fname)
    ranks = sums[0]
    need = sorted({r for t in typed_triggers for r in t["group"]})
    missing = [r for r in need if r not in ranks]
    if missing:  # cannot be simulated (exit 2), on any machine: before the memory check
        raise OutputError(f"the output holds {len(ranks)} rank folder(s); simulating "
                          f"needs every rank of every replica group (rank {missing[0]} "
                          "is missing: lower without --rank)", file=fname)
    return sums, layout, typed_triggers


def check_input_model(out: str | Path, model: str | Path,
                      verify_hash: bool = False) -> tuple[str, bytes | None]:
    """The sha256 of ``model``, refused (a one-line OutputError) unless its bytes are the
    input the output folder was lowered from: their sha256 and size are ``manifest.json``'s
    ``input`` (FORMATS §1.1).  The model is read in blocks, only hashed (memory of one block,
    not the model's: :func:`input_model_bytes` reads it whole once the checksum pass is
    done), and refused as :func:`~nrtrewrite.neff.container.read_file_bytes` refuses it; one
    whose size (``os.fstat`` of the opened file) is not ``input.bytes``, nor a size a
    lowering of it recorded, is refused from that size before any byte is hashed (a size of
    0, a /proc file's, is judged from the bytes read: refused once more than ``input.bytes``
    were read), and one of the size an older lowering recorded (its payload's end) at the
    first byte past that end that is not zero.
    With ``verify_hash`` the header's hash field is held to the payload's digest in the same
    pass, refused as the reader refuses it (the one refusal the reader can still give a
    model with the sha256 it was lowered from, when that was with ``--no-verify-hash``), so
    that it too comes before the checksum pass (docs/SIMULATOR.md §1).  Returns the sha256
    and that digest (None when not computed), for the parse of the same bytes not to hash
    the payload again (:func:`input_model_bytes` holds them to the sha256)."""
    from nrtrewrite.neff.container import (
        HEADER_FIELDS, HEADER_SIZE, PKG_VERSION_MD5, PKG_VERSION_SHA256, check_header_hash,
        parse_header, read_file_blocks,
    )

    out = Path(out)
    top = read_top_manifest(out)
    # every value the simulation takes first, in SIMULATOR.md §1's order, then ``input``
    # (read with --model alone), each of its type: the first faulty key is named alike with
    # and without --ignore-checksums, and an ``input`` of another type is named as such, not
    # as another model's (until 2026-12-06 ``... is not the input OUT/manifest.json records
    # (null, null bytes, null)``, blaming the model, and with the option before ``ranks``)
    read_top_values(out, top)
    doc = Field(top, "", str(out / "manifest.json"))["input"]
    want_sha, want_bytes = doc["sha256"].str(), doc["bytes"].int(0)
    name = top["input"].get("name")  # (informative, of any type: shown as JSON writes it)
    records = f"the input {escape_path(out)}/manifest.json records"
    # (a size or trailing byte that is not the input's: the model or the manifest may be
    # the one at fault, an edited input.bytes beside the genuine model as well)
    either = (f"either the model is not the one {escape_path(out)} was lowered from or "
              f"{escape_path(out)}/manifest.json was edited")
    recorded = (f"{want_bytes} bytes, the size {records} ({want_sha[:16]}..., "
                f"{json_text(name)})")
    # the header's header_size and data_size (the payload's end), and the end of the last
    # byte that is not zero: what a lowering before 2026-12-01 recorded (below)
    hs, ds = (HEADER_FIELDS[k][0] for k in ("header_size", "data_size"))

    def payload_end(head: bytes) -> int:
        return sum(int.from_bytes(head[o:o + 8], "little") for o in (hs, ds))

    def recorded_size(n: int, head: bytes) -> bool:
        # ``input.bytes``, or the payload's end an older lowering recorded for a model with
        # (zero) bytes after it
        return n == want_bytes or (n > want_bytes and len(head) == HEADER_SIZE
                                   and payload_end(head) == want_bytes)

    def size_refusal(n: int) -> OutputError:
        # (review 51: a 5 GiB model of another size was hashed whole first, 26 s; until
        # review 52l the line blamed the model, also for an edited input.bytes)
        return OutputError(f"the model's size should be {recorded}, not {n} (refused from "
                           f"its size, before any byte is hashed): {either}", file=str(model),
                           field="input.bytes")

    def unsized_refusal() -> OutputError:
        # (review 52t: a /proc file, whose size fstat says is 0, was read and hashed up to
        # the reader's 5 GiB limit, 29 s for /proc/self/pagemap)
        return OutputError(f"the model's size should be {recorded}, not more than "
                           f"{want_bytes} (its size as the opened file reports it is 0: "
                           "refused once more bytes than that were read, before the rest is "
                           f"hashed): {either}", file=str(model), field="input.bytes")

    disk: list[int] = []  # the opened file's size, before any byte is read
    h, size, head, used = hashlib.sha256(), 0, b"", 0
    payload, end = None, 0  # the header's digest of the payload [HEADER_SIZE, end), if asked
    for block in read_file_blocks(str(model), sized=disk.append):
        # (a size of 0 is not judged: a /proc file has bytes though fstat says 0, judged
        # from the bytes read below; an empty file has no block)
        if not size and disk[0] and not recorded_size(disk[0], block[:HEADER_SIZE]):
            raise size_refusal(disk[0])
        if not disk[0] and size + len(block) > want_bytes:
            # a size of 0 (a /proc file's) reads no more than input.bytes and a block: the
            # older payload's end (zero bytes after it) is taken only from a file's size
            raise unsized_refusal()
        if len(head) < HEADER_SIZE:
            head += block[:HEADER_SIZE - len(head)]
            if verify_hash and len(head) == HEADER_SIZE:
                pkg = int.from_bytes(head[:8], "little")
                if pkg in (PKG_VERSION_SHA256, PKG_VERSION_MD5):
                    payload = hashlib.sha256() if pkg == PKG_VERSION_SHA256 else hashlib.md5()
                    end = payload_end(head)
        if (size + len(block) > want_bytes and len(head) == HEADER_SIZE
                and payload_end(head) == want_bytes):
            # past the payload's end an older lowering recorded: only zero bytes can follow
            # it (NEFF-LIKE.md §1), so the first that is not decides, before the rest is
            # hashed (until review 52l the file was hashed whole first)
            start = max(0, want_bytes - size)
            if (kept := len(block.rstrip(b"\0"))) and size + kept > want_bytes:  # (which?)
                first = size + len(block) - len(block[start:].lstrip(b"\0"))
                raise OutputError(
                    f"the model's byte at offset {first}, past the payload's end its header "
                    f"puts at {recorded}, should be zero (only zero bytes may follow the "
                    f"payload), not 0x{block[first - size]:02x} (refused there, before the "
                    f"rest is hashed): {either}", file=str(model), field="input.bytes")
        h.update(block)
        if payload is not None and size + len(block) > HEADER_SIZE and size < end:
            payload.update(memoryview(block)[max(0, HEADER_SIZE - size):end - size])
        if kept := len(block.rstrip(b"\0")):
            used = size + kept
        size += len(block)
    if not size and not recorded_size(0, head):  # (an empty file: no block)
        raise size_refusal(0)
    sha, digest = h.hexdigest(), None
    if sha == want_sha and payload is not None and end <= size:
        # (the model the output was lowered from: its header passed the reader then, but
        # for its hash when that lowering had --no-verify-hash)
        header = parse_header(head, Where(file=str(model)))
        digest = payload.digest() + (bytes(16) if header.pkg_version == PKG_VERSION_MD5
                                     else b"")
        check_header_hash(header, digest, Where(file=str(model)))
    if sha == want_sha and size != want_bytes:
        # the same bytes (their sha256), another size: an nrtrewrite before 2026-12-01
        # recorded the payload's end (header_size + data_size, NEFF-LIKE.md §1) of a model
        # with zero bytes after its payload; any other size is not what a lowering recorded
        if want_bytes == payload_end(head) and used <= want_bytes:
            return sha, digest
        raise OutputError(f"the model's sha256 is the one {escape_path(out)}/manifest.json "
                          f"records for its input, but not its size: {size} bytes, not "
                          f"{want_bytes} (not a size a lowering of it records: lower the model "
                          "again)", file=str(Path(out) / "manifest.json"), field="input.bytes")
    if sha != want_sha or size != want_bytes:
        # (the name as JSON writes it; until 2026-12-06 Python's: 'ar2.neff'; until review
        # 52t the line blamed the model, ``: --model must name the model this output was
        # lowered from``, also for an edited input.sha256)
        raise OutputError(f"sha256 {sha[:16]}... ({size} bytes) is not {records} "
                          f"({want_sha[:16]}..., {want_bytes} bytes, {json_text(name)}): "
                          f"{either}", file=str(model), field="input.sha256")
    return sha, digest


def input_model_bytes(model: str | Path, sha: str) -> bytes:
    """The bytes of ``model``, whose sha256 :func:`check_input_model` found to be ``sha``
    (held to the output's ``input``); refused (a one-line OutputError) if they are no longer
    those bytes (the file changed in between)."""
    from nrtrewrite.neff.container import read_file_bytes

    data = read_file_bytes(str(model))
    if (now := hashlib.sha256(data).hexdigest()) != sha:
        raise OutputError(f"changed while being checked: its sha256 is now {now[:16]}..., "
                          f"not {sha[:16]}... ({len(data)} bytes now)", file=str(model),
                          field="input.sha256")
    return data


def check_rank_manifests_there(out: Path, ranks: list[int]) -> None:
    """Refuse (an :class:`OutputError`, :func:`read_rank_manifest`'s line) the first rank of
    ``ranks``, in ascending order, whose folder or manifest is gone or whose manifest is not
    a regular file: looked at before any checksum, the rewritten NEFF or any rank manifest
    is read, by the checksum pass and the simulation alike (docs/SIMULATOR.md §1)."""
    for r in sorted(ranks):
        if not (mpath := _rank_dir(out, r) / "manifest.json").is_file():
            _manifest_bytes(mpath)  # (missing, or not a regular file: its refusal)


def verify_checksums(out: str | Path) -> None:
    """Check every sha256 the manifests record; raise a one-line OutputError on the first miss.

    Top level: ``output_neff`` and ``rank_manifests`` (the sha256 of each rank's
    ``manifest.json``); per rank: every file's ``sha256`` and ``bytes``.  Every artifact
    file of FORMATS §1 must be listed.  A fault ``--ignore-checksums`` does not get past
    (a rank folder of ``ranks`` gone, a manifest, an artifact or the rewritten NEFF
    missing or not a regular file) is refused as the simulation without the checksums
    refuses it, without the hint to use that option.
    """
    out = Path(out)
    top = read_top_manifest(out)
    hint = "; the output was modified after it was written (--ignore-checksums to simulate anyway)"
    # (every value of the top manifest typed before any is compared or a rank folder is
    # looked at, in the simulation's order: read_top_values)
    (ranks, npath, neff_sha, mans), _, _ = read_top_values(out, top)
    # a rank folder or rank manifest gone is refused as read_rank_manifest refuses it,
    # whatever the option, before any checksum (whose hint the option would not get past)
    # and before the rewritten NEFF is read, as the simulation reads them (until 2026-12-06
    # the NEFF's checksum, or the NEFF gone, was named first without the option, the rank
    # folder with it)
    check_rank_manifests_there(out, ranks)
    if _sha256_file(npath, neff=True) != neff_sha:
        raise OutputError(f"{escape_controls(top['output_neff']['name'])}: sha256 does not "
                          f"match manifest.json{hint}",
                          file=str(out))
    expected = {rank_dir_name(r) for r in ranks}
    if set(mans) != expected:
        raise OutputError("rank_manifests does not list exactly the rank folders of ranks"
                          + hint, file=str(out))
    present = {p.name for p in out.glob("rank-*") if p.is_dir()}
    if extra := sorted(present - expected):  # (the simulation reads only the ranks')
        raise OutputError(f"rank folders differ from manifest.json ranks "
                          f"({escape_path(extra[0])}){hint}",
                          file=str(out))
    # rank by rank, in ascending order as the simulation reads them (read_rank_files): its
    # manifest, its ``files`` rows, each artifact (sorted by name) there and a regular file
    for name in (rank_dir_name(r) for r in sorted(ranks)):
        rdir = out / name
        mpath = rdir / "manifest.json"
        data = _manifest_bytes(mpath)  # (its size judged before it is read and hashed)
        if hashlib.sha256(data).hexdigest() != mans[name]:
            raise OutputError(f"{name}/manifest.json: sha256 does not match manifest.json"
                              f" rank_manifests{hint}", file=str(out))
        files = Field(_load_json(mpath, data), "", str(mpath))["files"]
        rows = artifact_rows(files)  # (typed as the simulation types them)
        # only the artifact files: a name such as ../../x would have a file outside the
        # output read and hashed
        if other := sorted(f for f in files.dict() if f not in F.ARTIFACTS):
            raise OutputError(f"{name}/manifest.json lists {json_text(other[0])}, which is not an "
                              f"artifact file (FORMATS §1.2){hint}", file=str(out))
        for fname, (_records, size, sha) in sorted(rows.items()):
            # the size first (judged before any byte is hashed), named as the key it is,
            # ``bytes`` (until 2026-12-07 ``sha256 does not match``, whichever was wrong)
            if (got := _sha256_file(rdir / fname, size)) is None:
                key = jsonin.joined_key(jsonin.joined_key("files", fname), "bytes")
                raise OutputError(f"{name}/{fname}: its size, {os.stat(rdir / fname).st_size} "
                                  f"bytes, does not match {name}/manifest.json {key} "
                                  f"({size}){hint}", file=str(out))
            if got != sha:
                raise OutputError(f"{name}/{fname}: sha256 does not match {name}/manifest.json"
                                  f"{hint}", file=str(out))


def artifact_rows(files: Field) -> dict[str, tuple[int, int, str]]:
    """Each artifact's row of a rank manifest's ``files`` (FORMATS §1.2), typed: its
    ``records`` and ``bytes`` integers 0 or more, its ``sha256`` a string (an
    :class:`OutputError` naming the key otherwise: ``field files["cce.bin"]: missing``).
    Read alike with and without ``--ignore-checksums`` (until 2026-12-06 the checksum pass
    said ``rank-0000/manifest.json has no 'files'``, ``... does not list cce.bin``, and a
    ``bytes`` or ``sha256`` of another type ``sha256 does not match``, with the hint to use
    the option)."""
    rows = {}
    for name in F.ARTIFACTS:
        row = files[name]
        rows[name] = (row["records"].int(0), row["bytes"].int(0), row["sha256"].str())
    return rows


#: algo_type values whose entries overlay channel_list with sema_shift_offset / sema_mask
#: (FORMATS §2); their rank manifest entries carry the two halves (FORMATS §1.2).
MESH_FAMILY = frozenset({int(EncAlgType.MESH), int(EncAlgType.SINGLE_STEP_MESH),
                         int(EncAlgType.INTRA_RDH)})
#: The four flags of a rank manifest entry, JSON booleans (FORMATS §1.2).
ENTRY_FLAGS = ("trigger_next", "reporter", "ring_wait_complete", "ring_send_complete")
#: The sema overlay of a mesh-family entry (FORMATS §1.2).
SEMA_OVERLAY = ("sema_shift_offset", "sema_mask")


def read_entry(f: Field) -> dict:
    """One item of a rank manifest's ``entries`` (FORMATS §1.2) as plain values, each of its
    type (an :class:`OutputError` naming the key otherwise): ``trigger``, ``algo_type``,
    ``algo_sub_type`` and ``channel_list`` integers, ``channels`` a list of channels, the four
    flags ``true`` / ``false`` (not 0 / 1), ``leg`` and ``subgraph`` strings, and
    ``sema_shift_offset`` / ``sema_mask`` integers, required when the entry's own
    ``algo_type`` is of the mesh family.  What the values say (against ``spad.bin``, the
    triggers) is the decoder's to check."""
    entry = {"trigger": f["trigger"].int(), "leg": f["leg"].str(),
             "subgraph": f["subgraph"].str(), "channels": f["channels"].ints(0, MAX_CHANNEL)}
    for key in ("algo_type", "algo_sub_type", "channel_list"):
        entry[key] = f[key].int()
    for key in ENTRY_FLAGS:
        entry[key] = f[key].bool()
    for key in SEMA_OVERLAY:
        if entry["algo_type"] in MESH_FAMILY or f.has(key):
            entry[key] = f[key].int()
    return entry


@dataclass
class RankFiles:
    """The decoded files of one rank folder, and the values its manifest lists, typed
    (:attr:`entries` as :func:`read_entry` reads them; :attr:`fifo` (channel, ((first,
    count) of ``net_ops.bin``, of ``net_src.bin``, of ``net_dest.bin``)) per item)."""

    rank: int
    path: Path
    manifest: dict
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    entries: list[dict] = field(default_factory=list)
    fifo: list[tuple[int, tuple[tuple[int, int], ...]]] = field(default_factory=list)
    said: int | None = None  # the manifest's ``rank``
    records: dict[str, int] = field(default_factory=dict)  # each artifact's ``files[name].records``

    def raw(self, name: str) -> np.ndarray:
        """The records of ``name`` as a (records, itemsize) uint8 array (reserved-byte checks)."""
        arr = self.arrays[name]
        return arr.view(np.uint8).reshape(arr.size, arr.dtype.itemsize)


def fifo_slices(doc: Field) -> list[tuple[int, tuple[tuple[int, int], ...]]]:
    """A rank manifest's ``fifo`` (FORMATS §1.2), each item typed (an :class:`OutputError`
    naming the key otherwise): (channel, ((first, count) of ``net_ops.bin``, of
    ``net_src.bin``, of ``net_dest.bin``)); what the slices say is the decoder's to check."""
    return [(item["channel"].int(0, MAX_CHANNEL),
             tuple(tuple(item[k].ints(length=2)) for k in ("ops", "src", "dest")))
            for item in doc["fifo"].items()]


#: The FIFO files a ``fifo`` slice's (first, count) pairs index, in the slice's order.
FIFO_FILES = ("net_ops.bin", "net_src.bin", "net_dest.bin")


def check_fifo_slices(fifo: list[tuple[int, tuple[tuple[int, int], ...]]],
                      records: dict[str, int], rank: int | None = None) -> None:
    """A :class:`SimulationError` unless the ``fifo`` slices (:func:`fifo_slices`) tile the
    FIFO files of ``records`` (name -> records the file holds) as FORMATS §1.2 says: channels
    ascending, each with a ``net_ops.bin`` record, each file's slices following the previous
    channel's from record 0 (so in range, none overlapping) and together covering it.  The
    check ``simulate`` makes, and what ``dump --fifo`` requires before it shows a channel."""
    nxt = dict.fromkeys(FIFO_FILES, 0)
    last_ch = -1
    for ch, sl in fifo:
        if ch <= last_ch:
            raise SimulationError("fifo slices are not in ascending channel order", rank=rank,
                                  channel=ch)
        last_ch = ch
        if sl[0][1] == 0:  # a channel with network traffic has an op (FORMATS §1.2, §8)
            raise SimulationError("a fifo slice for a channel without net_ops records: the "
                                  "rank manifest lists channels with network traffic only",
                                  rank=rank, channel=ch)
        for (first, count), name, k in zip(sl, FIFO_FILES, ("ops", "src", "dest")):
            if first != nxt[name] or count < 0:
                raise SimulationError(f"fifo {k} slice [{first}, {count}] does not follow the "
                                      "previous channel's (files are channel-major)", rank=rank,
                                      channel=ch)
            nxt[name] += count
    for name in FIFO_FILES:
        if nxt[name] != records[name]:
            raise SimulationError(f"the fifo slices cover {nxt[name]} records of {name}, the "
                                  f"file holds {records[name]}", rank=rank, artifact=name)


def read_rank_fifo(rdir: Path) -> list[tuple[int, tuple[tuple[int, int], ...]]]:
    """The ``fifo`` slices of rank folder ``rdir``'s manifest (:func:`fifo_slices`); an
    :class:`OutputError` when it is missing, cannot be read, is not JSON or its ``fifo`` is
    not of its form (``dump`` shows each FIFO record's channel from them)."""
    path = rdir / "manifest.json"
    return fifo_slices(Field(_load_json(path), "", str(path)))


def read_rank_files(out: Path, rank: int) -> RankFiles:
    """One rank's manifest read, every artifact's ``files`` row typed (FORMATS §1.2; an
    :class:`OutputError` naming the key, its ``records`` kept) and every artifact, sorted by
    name, there and a regular file (:func:`check_readable`): what the checksum pass reads of
    a rank, in its order, so that the first fault is named alike with and without
    ``--ignore-checksums`` (:func:`read_rank_values` types the other keys afterwards, once
    every rank's files are; until 2026-12-07 the simulation typed every key of every rank
    manifest before it looked at any artifact, so rank 1's ``cce.bin`` gone beside rank 2's
    faulty key named the file without the option, the key with it)."""
    rdir = _rank_dir(out, rank)
    man = _load_json(rdir / "manifest.json")
    doc = Field(man, "", str(rdir / "manifest.json"))
    # (each row typed, also when the checksums are not checked)
    records = {name: row[0] for name, row in artifact_rows(doc["files"]).items()}
    for name in sorted(F.ARTIFACTS):
        check_readable(rdir / name)
    return RankFiles(rank=rank, path=rdir, manifest=man, records=records)


def read_output_files(out: Path, ranks: list[int], neff: Path) -> dict[int, RankFiles]:
    """What the checksum pass reads of the rank folders, in its order, refused as it refuses
    it whatever ``--ignore-checksums``: every rank folder and manifest there
    (:func:`check_rank_manifests_there`), the rewritten NEFF ``neff`` there
    (:func:`check_readable`), then rank by rank, ascending, :func:`read_rank_files`."""
    check_rank_manifests_there(out, ranks)
    check_readable(neff, neff=True)
    return {r: read_rank_files(out, r) for r in sorted(ranks)}


def check_output_files(out: str | Path) -> None:
    """:func:`read_output_files` of the output folder ``out`` (its top manifest's ``ranks``
    and ``output_neff``): ``simulate OUT --model --ignore-checksums`` looks so at the rank
    folders before the model is parsed, as the checksum pass does without the option, so
    that a file gone is named before the reader's refusal either way (docs/SIMULATOR.md §1;
    until 2026-12-07 the option named the reader's refusal)."""
    out = Path(out)
    (ranks, neff, *_), _, _ = read_top_values(out, read_top_manifest(out))
    read_output_files(out, ranks, neff)


def read_rank_values(rf: RankFiles) -> RankFiles:
    """The other values of the rank manifest :func:`read_rank_files` read, each of its type
    (an :class:`OutputError` naming the key), nothing else checked: ``rank``, ``entries``,
    ``fifo`` (:func:`load_rank_files` checks what they say and decodes the files); ``rf``
    filled in."""
    doc = Field(rf.manifest, "", str(rf.path / "manifest.json"))
    rf.said = doc["rank"].int(0)
    rf.entries = [read_entry(f) for f in doc["entries"].items()]
    rf.fifo = fifo_slices(doc)
    return rf


def read_rank_manifest(out: Path, rank: int) -> RankFiles:
    """The values of one rank's manifest, each of its type (FORMATS §1.2; an
    :class:`OutputError` naming the key), its artifacts there: :func:`read_rank_files`,
    then :func:`read_rank_values`."""
    return read_rank_values(read_rank_files(out, rank))


def load_rank_files(out: Path, rf: RankFiles) -> RankFiles:
    """Read and decode every artifact file of the rank :func:`read_rank_manifest` read
    (record sizes checked, and the counts its manifest lists); ``rf`` filled in."""
    rank, rdir = rf.rank, rf.path
    if rf.said != rank:
        raise SimulationError(f"{rdir.name}/manifest.json says rank {rf.said!r}",
                              file=str(out), rank=rank)
    for name, (dtype, _struct) in F.ARTIFACTS.items():
        fpath = rdir / name
        try:
            # a regular file (a FIFO in its place would block), its size judged before it is
            # read: against the records the rank manifest lists
            with open_regular(fpath) as fh:
                size = os.fstat(fh.fileno()).st_size
                if size % dtype.itemsize:
                    raise SimulationError(
                        f"{size} bytes is not a whole number of {dtype.itemsize}-byte records",
                        file=str(out), rank=rank, artifact=name)
                if rf.records[name] != size // dtype.itemsize:
                    raise SimulationError(
                        f"the file should hold {rf.records[name]} records, the rank manifest's "
                        f"count, not {size // dtype.itemsize}", file=str(out), rank=rank,
                        artifact=name)
                data = fh.read(size + 1)  # (a byte more: one that grows meanwhile is refused)
        except OSError as exc:  # not a protocol error: the simulation cannot be done
            raise OutputError(f"cannot read: {exc.strerror or exc}", file=str(fpath)) from None
        if len(data) != size:
            raise OutputError(f"changed while being read (it held {size} bytes, now "
                              f"{len(data)})", file=str(fpath))
        rf.arrays[name] = np.frombuffer(data, dtype=dtype)
    return rf


def load_rank(out: Path, rank: int) -> RankFiles:
    """Read and decode every artifact file of one rank (record sizes checked); the values
    of its manifest typed first (FORMATS §1.2; an :class:`OutputError` naming the key)."""
    return load_rank_files(out, read_rank_manifest(out, rank))
