"""``suite check``: the run-rules validator for run directories and submission trees.

Layout: ``findings`` (rule registry, report model), ``context`` (per-result state and
defensive readers), ``performance`` / ``accuracy`` / ``system_rules`` (the rules),
``walk`` (finding results under a path), ``render`` (the rich report).
"""

from __future__ import annotations

from suite.checker.findings import RULES, CheckReport, Finding, Severity
from suite.checker.walk import NotCheckable, check_path

__all__ = ["RULES", "CheckReport", "Finding", "NotCheckable", "Severity", "check_path"]
