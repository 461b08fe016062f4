"""Streaming LLM endpoints on loopback for the ``openai`` backend's tests.

``synthetic(...)`` starts ``suite.serve.synthetic_llm`` (aiohttp's real web server) in
its own process and yields its URL; the process is stopped (and reaped) afterwards.
It stands in for a server's timing and protocol, never for an engine's accuracy.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@contextmanager
def synthetic(*args: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """The synthetic endpoint with ``args`` (its CLI options); (URL, process)."""
    proc = subprocess.Popen([sys.executable, "-m", "suite.serve.synthetic_llm", "--port", "0",
                             *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http://"):
            raise RuntimeError(f"the synthetic endpoint did not start (printed {url!r})")
        yield url, proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


def children_of(pid: int) -> list[int]:
    """Live processes whose parent is ``pid`` (from /proc: no psutil needed)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry.name))
    return found
