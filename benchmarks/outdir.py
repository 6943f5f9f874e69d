"""The scratch folder of a benchmark script: what ``--out`` names may hold other files."""

from __future__ import annotations

import shutil
from pathlib import Path


def entries(out: Path) -> set[Path] | None:
    """What ``out`` holds before a run (None: it does not exist yet)."""
    return set(out.iterdir()) if out.is_dir() else None


def remove_new(out: Path, before: set[Path] | None) -> None:
    """Remove what this run wrote into ``out``: the folder itself when it made it, else only
    the entries that were not there before (:func:`entries`)."""
    if before is None:
        shutil.rmtree(out, ignore_errors=True)
        return
    for p in set(out.iterdir()) - before:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
