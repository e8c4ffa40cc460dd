"""Config of how the gateway is laid out in processes and listeners: `workers` and `authz`.

Kept apart from config.py, as the caches' keys are (config_cache.py, config_redis.py), so that module
stays one screenful. `workers` is read by the CLI (gateway/supervisor.py runs them); `authz` by
gateway/server.py, which opens its listener, and gateway/authz.py, which answers on it.

`workers: null` (the default) means one worker per core this process may use: the CPUs it is pinned to
(os.sched_getaffinity), and no more than its cgroup's CPU quota allows (a container limited to 2 CPUs on
a 64-core node gets 2 workers, not 64; each worker loads its own model).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from gateway.address import Address
from gateway.schema import Bad, check


@dataclass(frozen=True)
class AuthzConfig:
    # The nginx auth_request / Envoy ext_authz endpoint, a listener of its own (gateway/authz.py); null: off
    listen: Address | None = None
    # Envoy's http_service.path_prefix: stripped from the check request's path to give the original one
    path_prefix: str = ""

    def __post_init__(self) -> None:
        p = self.path_prefix
        check(not p or (p.startswith("/") and not p.endswith("/")), "path_prefix",
              "must be empty or start with / and not end with /", p)  # fmt: skip


def check_workers(workers: int | None) -> None:
    if workers is not None and not 1 <= workers <= 1024:
        raise Bad("workers", f"must be between 1 and 1024, or null for one per core, got {workers!r}")


def worker_count(workers: int | None, cgroup: Path = Path("/sys/fs/cgroup")) -> int:
    """`workers`, or when it is null the cores this process may run on (affinity, then cgroup quota)."""
    if workers is not None:
        return workers
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        cores = os.cpu_count() or 1
    quota = cgroup_cpus(cgroup)
    return max(1, min(cores, quota) if quota is not None else cores)


def cgroup_cpus(root: Path) -> int | None:
    """The CPU quota of this process's cgroup, rounded up to whole CPUs; None when there is none.
    cgroup v2: `cpu.max` ("max 100000" or "200000 100000"); v1: cpu.cfs_quota_us / cpu.cfs_period_us."""
    try:
        quota, _, period = (root / "cpu.max").read_text().strip().partition(" ")
        if quota == "max":
            return None
        return math.ceil(int(quota) / int(period))
    except (OSError, ValueError):
        pass
    try:
        quota_us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return math.ceil(quota_us / period_us) if quota_us > 0 and period_us > 0 else None
