"""``status.json``: the child's one record of how its test ended, written exactly once.

Whichever thread ends the test (the main thread when LoadGen returns, a stop or drain
fallback that exits without it, a setup failure) writes it; the others find it written.
A file that cannot be written (a full disk) leaves no half-written one, and the parent
learns why through the progress pipe.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from suite.harness.progress import LiveEstimator
    from suite.harness.sut.core import SystemUnderTest


class ChildStatus:
    """Writes ``status.json`` exactly once, whichever thread gets there first."""

    def __init__(self, path: Path, progress: TextIO) -> None:
        self.path = path
        self._progress = progress
        self._lock = threading.Lock()
        self._written = False
        self.backend: dict[str, Any] = {}
        #: What the backend counted during the run (the remote backend's requests per
        #: endpoint and client process), read when the status is written.
        self.backend_run: Callable[[], dict[str, Any]] | None = None
        #: The live estimate's warnings go into the record (set when LoadGen starts).
        self.live: LiveEstimator | None = None

    def write(self, status: str, code: int, sut: SystemUnderTest | None, **extra: Any) -> bool:
        with self._lock:
            if self._written:
                return False
            self._written = True
            backend = self.backend
            if self.backend_run is not None and (counted := self.backend_run()):
                backend = {**backend, "run": counted}
            record = {
                "status": status,
                "exit_code": code,
                "backend": backend,
                "failures": sut.failures.failures if sut else [],
                "failed_samples": sut.failures.failed_samples if sut else 0,
                "samples_completed": sut.completer.completed if sut else 0,
                "issue_calls": sut.issue_calls if sut else 0,
                "derived": sut.derived if sut else {},
                "batches": sut.batch_profile() if sut else {},
                # Early warnings seen during the run: evidence, not a verdict (LoadGen's
                # detail log decides VALID or INVALID).
                "warnings": self.live.warnings() if self.live else [],
                **extra,
            }
            tmp = self.path.with_suffix(".tmp")
            try:
                tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
                tmp.replace(self.path)
            except OSError as exc:
                # A full disk or a vanished directory: no half-written file stays, and the
                # parent learns why through the progress pipe (status.json cannot say).
                tmp.unlink(missing_ok=True)
                with contextlib.suppress(BrokenPipeError, OSError, ValueError):
                    self._progress.write(json.dumps({"status_error": _os_error(exc)}) + "\n")
                    self._progress.flush()
            return True


def _os_error(exc: OSError) -> str:
    where = f" {exc.filename}" if exc.filename else ""
    return f"cannot write{where}: [Errno {exc.errno}] {exc.strerror}"
