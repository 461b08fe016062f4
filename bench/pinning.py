"""CPU pinning for the endpoint benches, and the evidence that it held.

On a 2-core machine the server (vLLM, or the synthetic endpoint) gets CPU 0 and every
client CPU 1, so neither steals the other's core. Pinning is done with ``taskset -c``
on the command (every process and thread it starts inherits the mask), and checked from
``/proc``: ``tree_affinity`` reads ``Cpus_allowed_list`` of every thread of a process and
of all its descendants; ``Watched`` samples a running client's tree the same way, so the
record shows the masks its processes really had, not the ones asked for. ``tree_cpu_s``
sums the CPU seconds of a live process tree (the server's CPU over one client's run).
"""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path
from typing import Any

SERVER_CPU, CLIENT_CPU = 0, 1
_TICKS = os.sysconf("SC_CLK_TCK")


def pinned(cpu: int) -> list[str]:
    """The prefix that runs a command on ``cpu`` only."""
    return ["taskset", "-c", str(cpu)]


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(parent, []).append(int(entry.name))
    return tree


def descendants(pid: int) -> list[int]:
    """``pid`` and every live process below it."""
    tree, out, todo = _children(), [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        todo.extend(tree.get(current, []))
    return out


def _allowed(path: Path) -> str | None:
    try:
        for line in path.read_text().splitlines():
            if line.startswith("Cpus_allowed_list:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def tree_affinity(pid: int) -> dict[str, Any]:
    """Every thread of ``pid``'s tree: how many, and the CPU lists they may run on."""
    masks: dict[str, int] = {}
    processes = threads = 0
    for proc in descendants(pid):
        processes += 1
        try:
            tasks = list(Path(f"/proc/{proc}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            mask = _allowed(task / "status")
            if mask is not None:
                threads += 1
                masks[mask] = masks.get(mask, 0) + 1
    return {"processes": processes, "threads": threads, "cpus_allowed": masks}


def tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid``'s live tree (exited children not counted)."""
    total = 0
    for proc in descendants(pid):
        try:
            fields = Path(f"/proc/{proc}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return total / _TICKS


def merge(into: dict[str, Any], seen: dict[str, Any]) -> None:
    """Fold one ``tree_affinity`` sample into ``into`` (the largest counts, every mask)."""
    into["processes"] = max(into.get("processes", 0), seen["processes"])
    into["threads"] = max(into.get("threads", 0), seen["threads"])
    masks = into.setdefault("cpus_allowed", {})
    for mask, count in seen["cpus_allowed"].items():
        masks[mask] = max(masks.get(mask, 0), count)


class Watched:
    """Runs a command, sampling its tree's CPU masks every ``every`` seconds until it
    ends; ``affinity`` is what was seen (``merge`` of the samples)."""

    def __init__(self, command: list[str], *, cwd: Path, env: dict[str, str] | None = None,
                 every: float = 0.5) -> None:
        self.command, self.cwd, self.env, self.every = command, cwd, env, every
        self.affinity: dict[str, Any] = {}

    def run(self, timeout: float = 900.0) -> subprocess.CompletedProcess[str]:
        proc = subprocess.Popen(self.command, cwd=self.cwd, env=self.env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        stop = threading.Event()

        def sample() -> None:
            # not at once: taskset itself runs unpinned until it sets the mask and execs
            while not stop.wait(self.every):
                merge(self.affinity, tree_affinity(proc.pid))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        finally:
            stop.set()
            sampler.join()
        return subprocess.CompletedProcess(self.command, proc.returncode, out, err)


def only_on(affinity: dict[str, Any], cpu: int) -> bool:
    """Whether every thread seen may run on ``cpu`` only."""
    return bool(affinity.get("cpus_allowed")) and set(affinity["cpus_allowed"]) == {str(cpu)}
