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


def processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes that mention ``text`` (a run's directory: its LoadGen
    child is started with a spec file inside it), read from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(cmdline.strip())
    return found
