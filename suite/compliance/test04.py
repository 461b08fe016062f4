"""TEST04: the SUT does not cache results.

LoadGen issues one sample (index ``performance_issue_same_index``) again and again; a
SUT that answers a repeated sample from a cache gets much faster. The test's score
must stay below the reference run's score x (1 + tolerance).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from suite.compliance.base import ComplianceTest, Verdict, performance_verdict
from suite.results import RunResult


class Test04:
    """See the module docstring."""

    name = "TEST04"
    needs_accuracy_reference = False

    def __init__(self, table: dict[str, Any], all_tables: dict[str, Any]) -> None:
        self.table = table
        self.small = all_tables.get("small_latency_ns", {})

    def audit_lines(self, loadgen_model: str) -> list[str]:
        return [f"*.*.{key} = {value}" for key, value in self.table["audit"].items()]

    def verify(self, reference: RunResult, compliance: RunResult, run_dir: Path,
               response_dtype: Any, labels: Any) -> list[Verdict]:
        return [self.performance(reference, compliance)]

    def performance(self, reference: RunResult, compliance: RunResult) -> Verdict:
        return performance_verdict(reference, compliance, self.table["performance_tolerance"],
                                   self.table["small_latency_tolerance"], self.small,
                                   two_sided=False)


_check: type[ComplianceTest] = Test04
