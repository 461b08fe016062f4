"""The audit report: every check with pass/fail and evidence; JSON and a rich table.

Each ``Check`` is a ``suite.findings.Finding`` (rule ``AUDIT-<step>``, severity error
when it failed, info when it passed) with the audit's step, name and outcome on top.
The JSON schema is generated from ``AuditReport`` (``suite/schemas/``).

Schema versions: 1 the checks; 2 adds ``attempts``: for each packaged result, every
attempt its bundle records (``evidence/<result>/attempts.json``, written by ``suite
package``), so an auditor sees what was tried before the chosen result; 3 adds
``outcome`` and ``exit_code``: ``passed`` says only that every check passed, which an
unofficial bundle's accepted known errors also do (exit 2, not valid); ``outcome`` is
the one field to read.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field, field_validator

from suite.findings import Finding, Severity

AUDIT_SCHEMA_VERSION = 3
AUDIT_PREDICATE_TYPE = "https://infersuite.dev/attestation/audit/v1"


class Check(Finding):
    """One audit check: a finding with its step (1-6), its name and whether it passed;
    ``found`` (and, as in schema v1, ``result``) holds its outcome: a recomputed value,
    ``skipped``, ``refused`` or the result it is on."""

    step: int
    name: str
    passed: bool
    #: rule failures this check accepted because the bundle is UNOFFICIAL and declared
    #: exactly these (step 2): the bundle is not valid, and the verdict says so
    known_errors: int = 0


class Attempt(BaseModel):
    """One attempt of a packaged result, as its bundle recorded it."""

    # validators built at first use: a run imports models it never validates
    model_config = ConfigDict(extra="ignore", defer_build=True)

    run_id: str
    time: str
    status: str
    metric: str | None = None
    value: float | None = None
    unit: str | None = None
    submittable: bool = False
    config_digest: str | None = None
    #: the best attempt of its config-digest group
    best: bool = False
    #: the attempt packaged as the result
    chosen: bool = False


class ResultAttempts(BaseModel):
    """Every attempt behind one packaged result (``problem``: why none could be read)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    result: str
    chosen: str = ""
    attempts: list[Attempt] = Field(default_factory=list)
    #: run directories the packager could not read (they may have been attempts too)
    unreadable: list[str] = Field(default_factory=list)
    problem: str = ""


class AuditReport(BaseModel):
    """What ``suite audit --json`` prints and ``--sign`` attests."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    schema_version: int = AUDIT_SCHEMA_VERSION
    bundle: str
    bundle_sha256: str
    checks: list[Check] = Field(default_factory=list)
    reran: list[str] = Field(default_factory=list)
    stopped_at: int | None = Field(default=None, serialization_alias="stopped_at_step")
    #: the verified predicate marks the bundle UNOFFICIAL (test packaging)
    unofficial: bool = False
    #: per packaged result, the attempts its bundle records; None: not read (step 1
    #: failed, or the bundle file changed after the audit read it)
    attempts: list[ResultAttempts] | None = None

    @field_validator("bundle")
    @classmethod
    def _printable(cls, value: str) -> str:
        """A bundle path whose name is not UTF-8 (undecodable bytes arrive as surrogates)
        shown with ``\\xff`` escapes: the report must still be written as JSON."""
        return os.fsencode(value).decode("utf-8", "backslashreplace")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks) and (
            self.stopped_at is None)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def known_errors(self) -> int:
        """Rule failures the checks accepted as declared by an UNOFFICIAL bundle."""
        return sum(c.known_errors for c in self.checks)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def verdict(self) -> str:
        """The last line the CLI prints, in the JSON too."""
        return verdict_line(self)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def outcome(self) -> Literal["PASSED", "PASSED_WITH_KNOWN_ERRORS", "FAILED"]:
        """The verdict for a program: PASSED only for a clean pass (exit 0); an unofficial
        bundle whose known errors the checks accepted is not valid (exit 2)."""
        if not self.passed:
            return "FAILED"
        return "PASSED_WITH_KNOWN_ERRORS" if self.known_errors else "PASSED"

    @computed_field  # type: ignore[prop-decorator]
    @property
    def exit_code(self) -> int:
        """0 only for a clean pass: a failed check, or a pass that accepted an unofficial
        bundle's known errors (the bundle is not valid), is 2."""
        return 0 if self.outcome == "PASSED" else 2

    def add(self, step: int, name: str, passed: bool, evidence: list[str],
            result: str | None = None, known_errors: int = 0) -> Check:
        check = Check(rule=f"AUDIT-{step}", severity=Severity.INFO if passed else Severity.ERROR,
                      message=f"{name}: {result}" if result else name, step=step, name=name,
                      passed=passed, evidence=evidence, found=result, known_errors=known_errors,
                      result=result)  # ``result``: the audit's JSON key since v1
        self.checks.append(check)
        return check

    def to_dict(self) -> dict[str, Any]:
        self.read_attempts()
        return self.model_dump(mode="json", by_alias=True)

    def to_json(self) -> str:
        self.read_attempts()
        return self.model_dump_json(indent=2, by_alias=True)

    def read_attempts(self) -> None:
        """Fill ``attempts`` from the bundle, once, and only from verified bytes.

        The audit's extracted tree is gone by the time the report is printed, so this
        reads the bundle file again: only when step 1 verified it, and only if its bytes
        still hash to ``bundle_sha256`` (the bytes whose signature and file list step 1
        verified). A changed file leaves ``attempts`` None.
        """
        if self.attempts is not None or not self.checks or not self.checks[0].passed:
            return
        try:
            data = Path(self.bundle).read_bytes()
        except OSError:
            return
        if hashlib.sha256(data).hexdigest() != self.bundle_sha256:
            return
        try:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
                found = {m.name: tar.extractfile(m) for m in tar
                         if m.isreg() and m.name.startswith(EVIDENCE_PREFIX)
                         and m.name.endswith("/" + ATTEMPTS_FILE)}
                files = {name: handle.read() for name, handle in found.items()
                         if handle is not None}
        except (OSError, tarfile.TarError, EOFError):
            return  # step 1 read this archive: an unreadable one failed there
        self.attempts = attempts_from_files(files)


#: Where ``suite package`` writes each result's attempts (``suite.reports.ledger``'s record).
EVIDENCE_PREFIX = "evidence/"
ATTEMPTS_FILE = "attempts.json"


def attempts_from_files(files: dict[str, bytes]) -> list[ResultAttempts]:
    """The attempts records among a tree's files (name relative to the tree -> bytes);
    a record that cannot be read is listed with its problem, never dropped."""
    out = []
    for name, data in sorted(files.items()):
        result = name.removeprefix(EVIDENCE_PREFIX).removesuffix("/" + ATTEMPTS_FILE)
        try:
            record = json.loads(data.decode("utf-8"))
            attempts = [Attempt.model_validate({
                **row, **_metric(row.get("metric"))}) for row in record["attempts"]]
            unreadable = [f"{u['run']}: {u['why']}" for u in record.get("unreadable", [])]
            out.append(ResultAttempts(result=result, chosen=str(record.get("chosen", "")),
                                      attempts=attempts, unreadable=unreadable))
        except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            out.append(ResultAttempts(result=result, problem=f"{name} is unreadable: {exc}"))
    return out


def _metric(metric: Any) -> dict[str, Any]:
    if not isinstance(metric, dict):
        return {"metric": None}
    return {"metric": metric.get("name"), "value": metric.get("value"),
            "unit": metric.get("unit")}


def verdict_line(report: AuditReport) -> str:
    """The final line: the verdict, and UNOFFICIAL whenever the bundle says so. A pass
    that accepted an unofficial bundle's declared rule failures says how many."""
    verdict = "PASSED" if report.passed else (
        f"FAILED (stopped at step {report.stopped_at})" if report.stopped_at else "FAILED")
    if report.passed and report.known_errors:
        verdict = (f"PASSED with {report.known_errors} known error(s) of an unofficial "
                   "bundle (declared when it was packaged, found again by the re-check; "
                   "the bundle is not valid)")
    label = "UNOFFICIAL bundle: " if report.unofficial else ""
    return (f"{label}audit {verdict}: {sum(c.passed for c in report.checks)}/"
            f"{len(report.checks)} checks passed")


def render(report: AuditReport) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"audit of {report.bundle}")
    for column in ("step", "check", "result", "verdict", "evidence"):
        table.add_column(column, overflow="fold")
    for check in report.checks:
        table.add_row(str(check.step), Text(check.name), Text(check.found or "-"),
                      Text(_mark(check), style="green" if check.passed and
                           not check.known_errors else "yellow" if check.passed else "red"),
                      Text("\n".join(check.evidence[:6])))
    report.read_attempts()
    if report.attempts is None:
        return table
    return Group(table, render_attempts(report.attempts))


def _mark(check: Check) -> str:
    if not check.passed:
        return "FAIL"
    return f"PASS with {check.known_errors} known error(s)" if check.known_errors else "PASS"


def render_attempts(records: list[ResultAttempts]) -> Any:
    """One section per packaged result: every attempt, the chosen one and each config
    group's best marked."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title="attempts behind each result (recorded by suite package)")
    for column in ("result", "run", "time", "status", "metric", "submittable",
                   "config digest", "chosen", "best"):
        table.add_column(column, overflow="fold")
    if not records:
        table.add_row(Text("the bundle records no attempts (packaged before suite package "
                           "recorded them)"), *[""] * 8)
    for record in records:
        if record.problem:
            table.add_row(Text(record.result), Text(record.problem, style="red"), *[""] * 7)
        for row in record.attempts:
            value = "-" if row.value is None else (
                f"{row.value:,.2f}" if abs(row.value) >= 1 else f"{row.value:.4g}")
            value += f" {row.unit}" if row.value is not None and row.unit else ""
            table.add_row(Text(record.result), Text(row.run_id), row.time, row.status,
                          Text(value if row.metric in (None, row.unit) else
                               f"{row.metric}: {value}"),
                          "yes" if row.submittable else "no", (row.config_digest or "-")[:12],
                          "CHOSEN" if row.chosen else "", "*" if row.best else "")
        for line in record.unreadable:
            table.add_row(Text(record.result), Text(f"unreadable run {line}",
                                                    style="yellow"), *[""] * 7)
        table.add_section()
    return table
