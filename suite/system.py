"""Describe the machine a run happened on: written as ``system.json`` in every run.

Versions are read from package metadata, so describing the system imports no
framework.
"""

from __future__ import annotations

import os
import platform
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

_PACKAGES = ("mlcommons-loadgen", "numpy", "onnxruntime", "torch", "tensorrt", "scikit-learn",
             "pydantic", "infersuite")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _os_name() -> str:
    """``platform.platform()``'s text, without the ``uname -p`` process it starts for the
    processor field it does not print (5-10 ms of every run)."""
    if not hasattr(os, "uname"):
        return platform.platform()
    name = os.uname()
    lib, libver = platform.libc_ver()
    return "-".join((name.sysname, name.release, name.machine)) + \
        (f"-with-{lib}{libver}" if lib else "")


def _memory_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None


def collect() -> dict[str, Any]:
    """CPU, cores, memory, OS, Python and library versions."""
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            continue
    affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    return {
        "hostname": platform.node(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(affinity) if affinity is not None else os.cpu_count(),
        "memory_bytes": _memory_bytes(),
        "os": _os_name(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "packages": versions,
    }
