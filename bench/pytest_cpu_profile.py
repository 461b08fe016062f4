"""A pytest plugin that records each test's CPU seconds: the xdist worker's whole process
tree (its live descendants' own times and what each has reaped, from ``/proc``), so the
CLI runs, LoadGen children and engines a test starts count towards it. One JSON line per
test in ``$CPU_PROFILE_DIR/cpu_<worker>.jsonl`` (default ``/tmp/cpuprof``)::

    PYTHONPATH=bench python -m pytest -n 2 -p pytest_cpu_profile

``make test`` is CPU-bound on a 2-core machine, so its wall time follows the suite's CPU
seconds, which this attributes to tests (``bench/PERFORMANCE.md``, stop 46). A process
that dies unreaped by the tree (an orphan) is missed.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Generator
from pathlib import Path
from typing import IO, Any

import pytest

_TICK = os.sysconf("SC_CLK_TCK")
_out: IO[str] | None = None


def tree_cpu(root: int) -> float:
    """CPU seconds of ``root`` and its live descendants, with what each has reaped."""
    parent_of: dict[int, int] = {}
    cpu: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2:].split()
        parent_of[int(entry)] = int(fields[1])
        cpu[int(entry)] = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    children: dict[int, list[int]] = {}
    for pid, parent in parent_of.items():
        children.setdefault(parent, []).append(pid)
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += cpu.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total / _TICK


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Generator[None, None, None]:
    global _out
    if _out is None:
        folder = Path(os.environ.get("CPU_PROFILE_DIR", "/tmp/cpuprof"))
        folder.mkdir(parents=True, exist_ok=True)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        _out = (folder / f"cpu_{worker}.jsonl").open("a", encoding="utf-8")
    cpu, began = tree_cpu(os.getpid()), time.monotonic()
    yield
    _out.write(json.dumps({"id": item.nodeid, "cpu": tree_cpu(os.getpid()) - cpu,
                           "wall": time.monotonic() - began, "end": time.time()}) + "\n")
    _out.flush()
