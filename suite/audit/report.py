"""The audit report: every check with pass/fail and evidence; JSON and a rich table.

Each ``Check`` is a ``suite.findings.Finding`` (rule ``AUDIT-<step>``, severity error
when it failed, info when it passed) with the audit's step, name and outcome on top.
The JSON schema is generated from ``AuditReport`` (``suite/schemas/``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, computed_field

from ..findings import Finding, Severity

AUDIT_SCHEMA_VERSION = 1
AUDIT_PREDICATE_TYPE = "https://infersuite.dev/attestation/audit/v1"


class Check(Finding):
    """One audit check: a finding with its step (1-6), its name and whether it passed;
    ``found`` (and, as in schema v1, ``result``) holds its outcome: a recomputed value,
    ``skipped``, ``refused`` or the result it is on."""

    step: int
    name: str
    passed: bool


class AuditReport(BaseModel):
    """What ``suite audit --json`` prints and ``--sign`` attests."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = AUDIT_SCHEMA_VERSION
    bundle: str
    bundle_sha256: str
    checks: list[Check] = Field(default_factory=list)
    reran: list[str] = Field(default_factory=list)
    stopped_at: int | None = Field(default=None, serialization_alias="stopped_at_step")
    #: the verified predicate marks the bundle UNOFFICIAL (test packaging)
    unofficial: bool = False

    @computed_field  # type: ignore[prop-decorator]
    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks) and (
            self.stopped_at is None)

    def add(self, step: int, name: str, passed: bool, evidence: list[str],
            result: str | None = None) -> Check:
        check = Check(rule=f"AUDIT-{step}", severity=Severity.INFO if passed else Severity.ERROR,
                      message=f"{name}: {result}" if result else name, step=step, name=name,
                      passed=passed, evidence=evidence, found=result,
                      result=result)  # ``result``: the audit's JSON key since v1
        self.checks.append(check)
        return check

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)

    def to_json(self) -> str:
        return self.model_dump_json(indent=2, by_alias=True)


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
        table.add_row(str(check.step), Text(check.name), Text(check.found or "-"),
                      Text("PASS" if check.passed else "FAIL",
                           style="green" if check.passed else "red"),
                      Text("\n".join(check.evidence[:6])))
    return table
