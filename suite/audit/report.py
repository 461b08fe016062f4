"""The audit report: every check with pass/fail and evidence; JSON and a rich table."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

AUDIT_SCHEMA_VERSION = 1
AUDIT_PREDICATE_TYPE = "https://infersuite.dev/attestation/audit/v1"


@dataclass
class Check:
    step: int
    name: str
    passed: bool
    evidence: list[str] = field(default_factory=list)
    result: str | None = None


@dataclass
class AuditReport:
    bundle: str
    bundle_sha256: str
    checks: list[Check] = field(default_factory=list)
    reran: list[str] = field(default_factory=list)
    stopped_at: int | None = None
    #: the verified predicate marks the bundle UNOFFICIAL (test packaging)
    unofficial: bool = False

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks) and (
            self.stopped_at is None)

    def add(self, step: int, name: str, passed: bool, evidence: list[str],
            result: str | None = None) -> Check:
        check = Check(step, name, passed, evidence, result)
        self.checks.append(check)
        return check

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": AUDIT_SCHEMA_VERSION, "bundle": self.bundle,
                "bundle_sha256": self.bundle_sha256, "passed": self.passed,
                "stopped_at_step": self.stopped_at, "reran": self.reran,
                "unofficial": self.unofficial,
                "checks": [asdict(c) for c in self.checks]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def verdict_line(report: AuditReport) -> str:
    """The final line: the verdict, and UNOFFICIAL whenever the bundle says so."""
    verdict = "PASSED" if report.passed else (
        f"FAILED (stopped at step {report.stopped_at})" if report.stopped_at else "FAILED")
    label = "UNOFFICIAL bundle: " if report.unofficial else ""
    return (f"{label}audit {verdict}: {sum(c.passed for c in report.checks)}/"
            f"{len(report.checks)} checks passed")


def render(report: AuditReport) -> Any:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"audit of {report.bundle}")
    for column in ("step", "check", "result", "verdict", "evidence"):
        table.add_column(column, overflow="fold")
    for check in report.checks:
        table.add_row(str(check.step), Text(check.name), Text(check.result or "-"),
                      Text("PASS" if check.passed else "FAIL",
                           style="green" if check.passed else "red"),
                      Text("\n".join(check.evidence[:6])))
    return table
