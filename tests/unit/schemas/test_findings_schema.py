"""One findings model, one source for its schemas.

The committed ``suite/schemas/*.schema.json`` are generated from the pydantic models
(``python -m suite.schemas``): a model change without its schema fails here. Reports of
the linter and the audit validate against them, and every finding of the three tools
is (or, for the checker, fits) ``suite.findings.Finding``.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from suite import schemas
from suite.audit.report import AuditReport, Check
from suite.config.loader import ConfigRequest
from suite.config.preflight import lint
from suite.findings import Finding, Severity
from suite.paths import find_paths

DIR = Path(schemas.__file__).parent


@pytest.mark.parametrize("name", sorted(schemas.SCHEMAS))
def test_committed_schema_is_generated_from_its_model(name: str) -> None:
    committed = (DIR / name).read_text(encoding="utf-8")
    assert json.loads(committed) == schemas.schema(name), (
        f"suite/schemas/{name} differs from its model: run `python -m suite.schemas`")


def test_drift_is_detected(tmp_path: Path) -> None:
    schemas.write(tmp_path)
    name = "finding.schema.json"
    edited = json.loads((tmp_path / name).read_text())
    del edited["properties"]["hint"]  # a hand edit the model does not have
    assert edited != schemas.schema(name)


def _schema(name: str) -> dict[str, object]:
    loaded: dict[str, object] = json.loads((DIR / name).read_text(encoding="utf-8"))
    return loaded


def test_lint_report_is_findings_and_validates() -> None:
    report = lint(ConfigRequest(sets=["loadgen.min_duration_ms=600000000",
                                      "loadgen.no_such_key=1"]), find_paths())
    [unknown] = report.findings
    assert isinstance(unknown, Finding)
    assert (unknown.rule, unknown.severity, unknown.key) == (
        "LINT-UNKNOWN-KEY", Severity.ERROR, "loadgen.no_such_key")
    assert unknown.source and unknown.source.startswith("--set")
    jsonschema.validate(json.loads(report.model_dump_json()), _schema("lint-report.schema.json"))

    # a lowered minimum (a raised one is allowed: tests/unit/config/test_fixed_minimums.py)
    unit = lint(ConfigRequest(sets=["loadgen.min_duration_ms=60000"]), find_paths())
    [slip] = [f for f in unit.findings if f.rule == "LINT-FIXED"]
    assert slip.severity is Severity.WARNING and slip.key == "loadgen.min_duration_ms"
    document = json.loads(unit.model_dump_json())
    jsonschema.validate(document, _schema("lint-report.schema.json"))
    for finding in document["findings"]:
        jsonschema.validate(finding, _schema("finding.schema.json"))


def test_audit_checks_are_findings_and_validate() -> None:
    report = AuditReport(bundle="b.tar.gz", bundle_sha256="0" * 64)
    report.add(1, "signature and file list", True, ["12 files"], "signature valid")
    report.add(3, "accuracy of r1", False, ["accuracy.txt says 99.0, the log 97.1"], "97.100%")
    report.stopped_at = None
    failed = report.checks[1]
    assert isinstance(failed, Check) and isinstance(failed, Finding)
    assert (failed.rule, failed.severity, failed.found) == ("AUDIT-3", Severity.ERROR,
                                                            "97.100%")
    assert report.checks[0].severity is Severity.INFO
    document = json.loads(report.to_json())
    assert document["passed"] is False and document["stopped_at_step"] is None
    jsonschema.validate(document, _schema("audit-report.schema.json"))
    jsonschema.validate(document["checks"][1], _schema("finding.schema.json") | {
        "additionalProperties": True})  # a check is a finding with its step on top


def test_checker_finding_fits_the_one_model() -> None:
    """The checker re-exports ``suite.findings`` once its rewrite lands; until then its
    fields and severities must already be a subset, so the switch changes no output."""
    from suite.checker import findings as checker

    assert set(checker.Finding.model_fields) <= set(Finding.model_fields)
    assert {s.value for s in checker.Severity} == {s.value for s in Severity}
