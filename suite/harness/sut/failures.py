"""``FailureLog``: what went wrong during one LoadGen test, shared by the SUT's threads."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass
class FailureLog:
    """Failures seen during a test; the first decides how the run is reported."""

    failures: list[dict[str, Any]] = field(default_factory=list)
    failed_samples: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, kind: str, message: str, samples: int = 0, trace: str = "") -> None:
        with self._lock:
            self.failed_samples += samples
            if len(self.failures) < 20:  # keep the evidence, not a flood
                self.failures.append(
                    {"kind": kind, "message": message, "samples": samples, "traceback": trace}
                )

    def __bool__(self) -> bool:
        return bool(self.failures)
