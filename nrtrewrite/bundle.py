"""Write back: the output folder (docs/FORMATS.md §1), atomically.

The folder is built in a temporary sibling (``.<name>.tmp-<pid>-<rand>``),
every file and directory is fsynced, and the folder is then renamed into place:
the output appears complete or not at all.  An existing output is replaced only
with ``force``, by an atomic exchange (``renameat2(RENAME_EXCHANGE)``) when the
kernel offers it.  Nothing is written outside the output's parent folder, and
the input is only ever read.

Ranks are lowered one at a time (or by a fork-based process pool with
``workers > 1``) and each rank's files are written as soon as they are built, so
memory holds one rank's artifacts per worker, never the whole world's.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import hashlib
import json
import multiprocessing
import os
import secrets
import shutil
import struct
from collections.abc import Callable, Iterable
from pathlib import Path

from nrtrewrite import __version__
from nrtrewrite.errors import OutputError
from nrtrewrite.lower import LoweringPlan, lower_rank, manifest_triggers
from nrtrewrite.neff.writer import rewrite_streams

FORMAT_NAME = "nrtrewrite-lowered"
FORMAT_VERSION = 1
#: The non-pseudo word a trigger becomes (docs/FORMATS.md §9).
TOPSP_KICK_OPCODE = 0xA2
RENAME_EXCHANGE = 2


def rank_dir_name(rank: int) -> str:
    return f"rank-{rank:04d}"


def default_output(model_path: str | os.PathLike) -> Path:
    p = Path(model_path)
    return p.with_name(p.stem + ".lowered")


def _json_bytes(obj) -> bytes:
    return (json.dumps(obj, indent=1, sort_keys=True) + "\n").encode()


def _write_file(path: Path, data) -> None:
    """Write bytes, or a list of numpy record arrays one after the other, and fsync."""
    with open(path, "wb") as fh:
        if isinstance(data, (bytes, bytearray)):
            fh.write(data)
        else:
            for part in data:
                fh.write(part.data if part.flags.c_contiguous else part.tobytes())
        fh.flush()
        os.fsync(fh.fileno())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def kick_word(sync: bytes, spad_index: int, word: int, trigger: int) -> bytes:
    """The TOPSP_KICK word replacing a trigger word (bytes 4..11 kept)."""
    head = struct.pack("<BBH", TOPSP_KICK_OPCODE, 16, 0)
    body = struct.pack("<HHI", spad_index, word, trigger)
    return head + sync + body + bytes(64 - 4 - 8 - len(body))


def rewritten_neff(plan: LoweringPlan, leader_spad_index: dict[int, int]) -> bytes:
    """The input NEFF with every trigger replaced by TOPSP_KICK words."""
    model = plan.model
    new_streams: dict[tuple[str, str], bytes] = {}
    for sg in model.subgraphs:
        for engine in sg.engines:
            trigs = [t for t in model.triggers if t.subgraph == sg.name and t.engine == engine]
            if not trigs:
                continue
            stream = bytearray(sg.streams[engine])
            for t in trigs:
                for w in range(t.num_words):
                    off = (t.index + w) * 64
                    sync = bytes(stream[off + 4:off + 12])
                    stream[off:off + 64] = kick_word(sync, leader_spad_index.get(t.ordinal, 0), w,
                                                     t.ordinal)
            new_streams[(sg.name, engine)] = bytes(stream)
    return rewrite_streams(model, new_streams)


# --- process pool plumbing (fork: the plan is inherited, never pickled) --------------------
_POOL_PLAN: LoweringPlan | None = None
_POOL_DIR: Path | None = None


def _lower_and_write(rank: int) -> tuple[int, bytes]:
    assert _POOL_PLAN is not None and _POOL_DIR is not None
    return _write_rank(_POOL_PLAN, _POOL_DIR, rank)


def _write_rank(plan: LoweringPlan, tmp: Path, rank: int) -> tuple[int, bytes]:
    out = lower_rank(plan, rank)
    rdir = tmp / rank_dir_name(rank)
    rdir.mkdir()
    for name, parts in out.files.items():
        _write_file(rdir / name, parts)
    man = _json_bytes(out.manifest)
    _write_file(rdir / "manifest.json", man)
    _fsync_dir(rdir)
    return rank, man


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths; False when the kernel or libc cannot."""
    libc_name = ctypes.util.find_library("c")
    if not libc_name:
        return False
    libc = ctypes.CDLL(libc_name, use_errno=True)
    fn = getattr(libc, "renameat2", None)
    if fn is None:
        return False
    AT_FDCWD = -100
    rc = fn(AT_FDCWD, os.fsencode(str(a)), AT_FDCWD, os.fsencode(str(b)), RENAME_EXCHANGE)
    if rc != 0:
        err = ctypes.get_errno()
        if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
            return False
        raise OSError(err, os.strerror(err), str(b))
    return True


def write_output(plan: LoweringPlan, out_dir: str | os.PathLike, *, ranks: Iterable[int] | None,
                 force: bool = False, workers: int = 1,
                 progress: Callable[[int, int], None] | None = None) -> Path:
    """Lower ``ranks`` (default: the whole world) and write the output folder atomically."""
    out = Path(out_dir)
    if out.exists() and not force:
        raise OutputError(f"{out} exists; pass --force to replace it")
    if out.exists() and not out.is_dir():
        raise OutputError(f"{out} exists and is not a folder")
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise OutputError(f"the output's parent folder {parent} does not exist")
    rank_list = sorted(plan.world if ranks is None else ranks)
    for r in rank_list:
        if r not in plan.world:
            raise OutputError(f"rank {r} is not in the model's world "
                              f"({plan.world[0]}..{plan.world[-1]})", rank=r)
    tmp = parent / f".{out.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    tmp.mkdir()
    try:
        rank_manifests: dict[str, str] = {}
        done = 0
        if workers > 1 and len(rank_list) > 1:
            global _POOL_PLAN, _POOL_DIR
            _POOL_PLAN, _POOL_DIR = plan, tmp
            try:
                ctx = multiprocessing.get_context("fork")
                with ctx.Pool(processes=workers) as pool:
                    for rank, man in pool.imap(_lower_and_write, rank_list, chunksize=1):
                        rank_manifests[rank_dir_name(rank)] = hashlib.sha256(man).hexdigest()
                        done += 1
                        if progress:
                            progress(done, len(rank_list))
            finally:
                _POOL_PLAN = _POOL_DIR = None
        else:
            for rank in rank_list:
                rank_, man = _write_rank(plan, tmp, rank)
                rank_manifests[rank_dir_name(rank_)] = hashlib.sha256(man).hexdigest()
                done += 1
                if progress:
                    progress(done, len(rank_list))
        neff_name = Path(plan.model.path).name or "model.neff"
        neff_bytes = rewritten_neff(plan, _leader_spad_index(plan))
        _write_file(tmp / neff_name, neff_bytes)
        manifest = build_manifest(plan, rank_list, rank_manifests, neff_name,
                                  hashlib.sha256(neff_bytes).hexdigest())
        _write_file(tmp / "manifest.json", _json_bytes(manifest))
        _fsync_dir(tmp)
        if out.exists():
            if not _exchange(tmp, out):
                old = parent / f".{out.name}.old-{os.getpid()}-{secrets.token_hex(4)}"
                os.rename(out, old)
                os.rename(tmp, out)
                tmp = old
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            os.rename(tmp, out)
        _fsync_dir(parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _leader_spad_index(plan: LoweringPlan) -> dict[int, int]:
    """Trigger ordinal -> its first SPAD entry index on its group's leader."""
    counts: dict[int, int] = {}
    out: dict[int, int] = {}
    for tp in plan.triggers:
        out[tp.trigger.ordinal] = counts.get(tp.leader, 0)
        for r in tp.group:
            counts[r] = counts.get(r, 0) + 1
    return out


def build_manifest(plan: LoweringPlan, ranks: list[int], rank_manifests: dict[str, str],
                   neff_name: str, neff_sha: str) -> dict:
    topo = plan.topology
    return {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "tool_version": __version__,
        "input": {"name": Path(plan.model.path).name, "sha256": plan.input_sha256,
                  "bytes": plan.model.header.data_size + plan.model.header.header_size},
        "output_neff": {"name": neff_name, "sha256": neff_sha},
        "options": plan.options.to_json(),
        "topology": {"name": topo.name, "lnc_size": topo.lnc_size, "nodes": topo.nodes,
                     "ranks": [vars(topo.info(r)) for r in plan.world]},
        "memory": plan.memory.to_json(),
        "world": list(plan.world),
        "ranks": ranks,
        "triggers": manifest_triggers(plan),
        "rank_manifests": rank_manifests,
    }
