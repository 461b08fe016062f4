"""Parse LoadGen's ``mlperf_log_detail.txt``: the only source of performance numbers.

Each line is ``:::MLLOG {json}``. The first value of a repeated key wins (as in the
official checker). Error and warning records are collected from ``metadata``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from suite.errors import InputTooLarge, SuiteError
from suite.paths import DETAIL_LOG_LIMIT, regular_file_problem

DETAIL_LOG = "mlperf_log_detail.txt"
SUMMARY_LOG = "mlperf_log_summary.txt"
ACCURACY_LOG = "mlperf_log_accuracy.json"
_PREFIX = ":::MLLOG "


@dataclass
class DetailLog:
    """Values and diagnostics from one detail log."""

    path: Path
    values: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    malformed_lines: int = 0

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


def parse_detail_log(path: Path) -> DetailLog:
    """Read a detail log; malformed lines are counted, never fatal."""
    if not path.is_file():
        raise SuiteError(f"LoadGen detail log {path} is missing",
                         hint="the test did not reach LoadGen's logging; see harness.log")
    if (problem := regular_file_problem(path, DETAIL_LOG_LIMIT)) is not None:
        raise InputTooLarge(f"LoadGen detail log {path} is {problem}",
                            hint="check the path: it should name LoadGen's detail log")
    log = DetailLog(path)
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if not line.startswith(_PREFIX):
                if line.strip():
                    log.malformed_lines += 1
                continue
            try:
                record = json.loads(line[len(_PREFIX):])
                key, value = record["key"], record.get("value")
            except (json.JSONDecodeError, KeyError, TypeError):
                log.malformed_lines += 1
                continue
            meta = record.get("metadata") or {}
            if meta.get("is_error"):
                log.errors.append(f"{key}: {value}")
            elif meta.get("is_warning"):
                log.warnings.append(f"{key}: {value}")
            log.values.setdefault(key, value)
    return log
