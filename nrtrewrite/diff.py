"""Field-level comparison of two output folders (``nrtrewrite diff``; golden files in CI).

Every artifact is compared record by record on its decoded fields
(:func:`nrtrewrite.artifacts.decode_record`), the manifests key by key, and the
rewritten NEFF word by word, so a difference names rank, file, record and field.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from nrtrewrite.artifacts import (
    RANK_DIR_NAME, decode_record, is_our_output, load_records, read_json,
)
from nrtrewrite.emit import formats as F
from nrtrewrite.emit.formats import FORMAT_NAME
from nrtrewrite.errors import OutputError


@dataclass(frozen=True)
class Difference:
    where: str  # "rank-0003/spad.bin" or "manifest.json" ...
    record: int | None
    field: str
    a: object
    b: object

    def line(self) -> str:
        rec = f"[{self.record}]" if self.record is not None else ""
        return f"{self.where}{rec} {self.field}: {_fmt(self.a)} != {_fmt(self.b)}"

    def to_json(self) -> dict:
        return {"where": self.where, "record": self.record, "field": self.field,
                "a": self.a, "b": self.b}


def _fmt(v) -> str:
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 255:
        return f"0x{v:x}"
    return repr(v) if isinstance(v, str) else str(v)


def _json_diff(where: str, a, b, path: str = "") -> Iterator[Difference]:
    if a == b:  # deep equality, in C: an equal subtree has nothing to report
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            sub = f"{path}.{k}" if path else str(k)
            if k not in a or k not in b:
                yield Difference(where, None, sub, a.get(k, "<absent>"), b.get(k, "<absent>"))
            else:
                yield from _json_diff(where, a[k], b[k], sub)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            yield Difference(where, None, f"{path} (length)", len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            yield from _json_diff(where, x, y, f"{path}[{i}]")
    elif a != b:
        yield Difference(where, None, path, a, b)


#: Bytes compared at a time: two output folders of any size are compared in this much memory
#: (plus the decoded differing records), not whole files (a 128-rank HIER rank: 650 MB).
CHUNK_BYTES = 16 << 20


def _same_bytes(fa: Path, fb: Path) -> bool:
    """Whether two files hold the same bytes, read :data:`CHUNK_BYTES` at a time (False if
    either cannot be read: the caller's reading then names the file and the error)."""
    try:
        if not (fa.is_file() and fb.is_file()):  # a FIFO would block the open
            return False
        if fa.stat().st_size != fb.stat().st_size:
            return False
        with open(fa, "rb") as ha, open(fb, "rb") as hb:
            while True:
                x = ha.read(CHUNK_BYTES)
                if x != hb.read(CHUNK_BYTES):
                    return False
                if not x:
                    return True
    except OSError:
        return False


def _records_diff(where: str, name: str, a: np.ndarray, b: np.ndarray) -> Iterator[Difference]:
    if a.size != b.size:
        yield Difference(where, None, "records", int(a.size), int(b.size))
    n = min(a.size, b.size)
    if n == 0:
        return
    # fast path: find differing records on raw bytes, a block at a time, decode only those
    step = max(1, CHUNK_BYTES // a.dtype.itemsize)
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        ra = np.asarray(a[lo:hi]).view(np.uint8).reshape(hi - lo, -1)
        rb = np.asarray(b[lo:hi]).view(np.uint8).reshape(hi - lo, -1)
        for i in (np.nonzero((ra != rb).any(axis=1))[0] + lo).tolist():
            da, db = decode_record(name, a[i]), decode_record(name, b[i])
            # the fields of both records (a spad entry's bytes 4..7 are named by its algo_type)
            found = False
            for key in list(da) + [k for k in db if k not in da]:
                va, vb = da.get(key, "<absent>"), db.get(key, "<absent>")
                if va != vb:
                    found = True
                    yield Difference(where, i, key, va, vb)
            if not found:  # (every byte is in a named field: a backstop, never silent)
                yield Difference(where, i, "raw", ra[i - lo].tobytes().hex(),
                                 rb[i - lo].tobytes().hex())


def _neff_diff(a: Path, b: Path) -> Iterator[Difference]:
    if _same_bytes(a, b):
        return
    try:
        da, db = a.read_bytes(), b.read_bytes()
    except OSError as exc:
        raise OutputError(f"{exc.filename}: cannot read ({exc.strerror or exc})") from None
    if len(da) != len(db):
        yield Difference(a.name, None, "bytes", len(da), len(db))
    n = min(len(da), len(db))
    first = next((i for i in range(n) if da[i] != db[i]), None)
    if first is not None:
        yield Difference(a.name, None, f"first differing byte at offset 0x{first:x}",
                         da[first], db[first])


def _check_ours(p: Path) -> None:
    """Refuse ``p`` unless it is an nrtrewrite output folder (a rank folder is not: diff
    compares whole outputs, docs/CLI.md)."""
    if not (p / "manifest.json").is_file():
        raise OutputError(f"{p}: not an nrtrewrite output folder (no manifest.json)")
    if not is_our_output(p):
        if (p / "spad.bin").exists() or RANK_DIR_NAME.fullmatch(p.name):
            why = "a rank folder; diff compares whole output folders"
        else:
            why = f"its manifest.json is not of format {FORMAT_NAME!r}"
        raise OutputError(f"{p}: not an nrtrewrite output folder ({why})")


def _top_manifest(p: Path) -> dict:
    doc = read_json(p / "manifest.json")
    if not isinstance(doc, dict):  # (a manifest over 1 MiB is recognised by its head only)
        raise OutputError("must be a JSON object", file=str(p / "manifest.json"))
    return doc


def _neff_name(doc: dict, p: Path) -> str | None:
    """The rewritten NEFF's file name the manifest records (None: it records none)."""
    neff = doc.get("output_neff")
    if neff is None:
        return None
    name = neff.get("name") if isinstance(neff, dict) else None
    if not (isinstance(name, str) and name not in ("", ".", "..") and "/" not in name
            and "\0" not in name):
        raise OutputError("must be an object whose 'name' is a file name in the folder",
                          file=str(p / "manifest.json"), field="output_neff")
    return name


def diff_outputs(a: str | Path, b: str | Path) -> list[Difference]:
    """Every difference between output folders ``a`` and ``b``."""
    a, b = Path(a), Path(b)
    for p in (a, b):
        _check_ours(p)
    diffs: list[Difference] = []
    ma = _top_manifest(a)
    if _same_bytes(a / "manifest.json", b / "manifest.json"):
        mb = ma  # nothing to compare (a HIER plan's manifest: tens of MB of JSON)
    else:
        mb = _top_manifest(b)
        diffs += _json_diff("manifest.json", ma, mb)
    na, nb = _neff_name(ma, a), _neff_name(mb, b)
    ranks_a = {d.name for d in a.glob("rank-*") if d.is_dir()}
    ranks_b = {d.name for d in b.glob("rank-*") if d.is_dir()}
    for r in sorted(ranks_a ^ ranks_b):
        diffs.append(Difference(r, None, "folder", r in ranks_a, r in ranks_b))
    for r in sorted(ranks_a & ranks_b):
        ra, rb = a / r, b / r
        if not _same_bytes(ra / "manifest.json", rb / "manifest.json"):
            diffs += _json_diff(f"{r}/manifest.json", read_json(ra / "manifest.json"),
                                read_json(rb / "manifest.json"))
        for name in F.ARTIFACTS:
            fa, fb = ra / name, rb / name
            if fa.exists() != fb.exists():
                diffs.append(Difference(f"{r}/{name}", None, "file", fa.exists(), fb.exists()))
                continue
            if not fa.exists():
                continue
            if _same_bytes(fa, fb):
                continue
            diffs += _records_diff(f"{r}/{name}", name, load_records(fa, name, mapped=True),
                                  load_records(fb, name, mapped=True))
    fa, fb = (a / na if na else None), (b / nb if nb else None)
    has_a, has_b = bool(fa and fa.exists()), bool(fb and fb.exists())
    if has_a != has_b:  # one NEFF missing: a difference, not a silently skipped comparison
        diffs.append(Difference(na or nb, None, "file", has_a, has_b))
    elif has_a:
        for f in (fa, fb):
            if not f.is_file():
                raise OutputError(f"{f}: not a regular file")
        diffs += _neff_diff(fa, fb)
    return diffs
