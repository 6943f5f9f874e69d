"""How many CPUs this process may use: the default of ``lower -j`` and of ``simulate``'s
lowering (docs/CLI.md).

``os.cpu_count()`` counts the machine's CPUs, not this process's: in a container given 2 of
a host's 64 CPUs (a cpuset, ``taskset``) or a quota of 2 CPUs (a cgroup ``cpu.max``, as
Docker's ``--cpus`` and Kubernetes' limits set), 64 workers would share 2 CPUs, each holding
a rank's artifacts in memory.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

#: Where cgroup file systems are mounted (Linux).
CGROUP_ROOT = Path("/sys/fs/cgroup")


def usable_cores() -> int:
    """CPUs this process may run on (its affinity mask), capped by its cgroup's CPU quota
    when one is set (rounded up: a quota of 1.5 CPUs keeps 2 busy part of the time); at
    least 1."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        n = os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    if quota is not None:
        n = min(n, max(1, math.ceil(quota)))
    return max(1, n)


def cgroup_cpu_quota(root: Path = CGROUP_ROOT, proc_cgroup: Path = Path("/proc/self/cgroup")
                     ) -> float | None:
    """The CPU quota of this process's cgroup in CPUs (cgroup v2 ``cpu.max``, or v1
    ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``), the smallest along its path up to the
    root; None when there is none or it cannot be read."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    quotas = []
    for line in lines:
        hier, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if not path.startswith("/"):
            continue
        if hier == "0" and controllers == "":  # v2: the unified hierarchy
            base, files = root, ("cpu.max",)
        elif "cpu" in controllers.split(","):  # v1: the cpu controller's hierarchy
            base = next((root / c for c in (controllers, "cpu", "cpu,cpuacct")
                         if (root / c).is_dir()), None)
            if base is None:
                continue
            files = ("cpu.cfs_quota_us", "cpu.cfs_period_us")
        else:
            continue
        d = base / path.lstrip("/")
        while True:  # the folder of the process's cgroup and its ancestors up to the root
            q = _quota_in(d, files)
            if q is not None:
                quotas.append(q)
            if d == base or base not in d.parents:
                break
            d = d.parent
    return min(quotas) if quotas else None


def _quota_in(folder: Path, files: tuple[str, ...]) -> float | None:
    try:
        if len(files) == 1:  # "max 100000" or "200000 100000"
            quota, _, period = (folder / files[0]).read_text().strip().partition(" ")
            if quota == "max":
                return None
            q, p = int(quota), int(period or 100000)
        else:
            q = int((folder / files[0]).read_text())
            p = int((folder / files[1]).read_text())
    except (OSError, ValueError):
        return None
    return q / p if q > 0 and p > 0 else None
