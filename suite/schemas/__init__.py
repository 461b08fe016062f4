"""The JSON schemas of the suite's reports, generated from their pydantic models.

``python -m suite.schemas`` rewrites the committed ``*.schema.json`` files beside this
module; ``tests/unit/schemas/test_findings_schema.py`` fails when one differs from its model, so a
model change cannot ship without its schema (bump the model's schema_version with it).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

HERE = Path(__file__).resolve().parent
BASE_ID = "https://infersuite.dev/schemas"


def _check_report() -> type[BaseModel]:
    from suite.checker.findings import CheckReport

    return CheckReport


def _lint_report() -> type[BaseModel]:
    from suite.config.preflight import LintReport

    return LintReport


def _audit_report() -> type[BaseModel]:
    from suite.audit.report import AuditReport

    return AuditReport


def _finding() -> type[BaseModel]:
    from suite.findings import Finding

    return Finding


#: file name -> (the model, the title, what it describes)
SCHEMAS: dict[str, tuple[Callable[[], type[BaseModel]], str, str]] = {
    "finding.schema.json": (
        _finding, "one finding of suite check, suite lint or suite audit",
        "The one findings model: rule or check id, severity, message, hint, location "
        "(result, file, key, source) and evidence (expected, found, evidence)."),
    "check-report.schema.json": (
        _check_report, "suite check --json report",
        "One report per `suite check` invocation: every result found under the path, each "
        "with the findings of the rules it failed. Rule ids are listed by `suite rules`."),
    "lint-report.schema.json": (
        _lint_report, "suite lint --json report",
        "The pre-flight linter's findings on one run configuration, the effective settings "
        "with their sources, and the predicted query count and test length."),
    "audit-report.schema.json": (
        _audit_report, "suite audit --json report",
        "Every audit check of a signed bundle with its verdict and evidence; also the "
        "predicate of a signed audit attestation."),
}


def schema(name: str) -> dict[str, Any]:
    """The schema ``name`` as generated from its model now."""
    model, title, description = SCHEMAS[name]
    cls = model()
    generated = cls.model_json_schema(mode="serialization", by_alias=True)
    field = cls.model_fields.get("schema_version")
    version = field.default if field is not None else 1
    generated.pop("title", None)
    generated.pop("description", None)
    stem = name.removesuffix(".schema.json")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"{BASE_ID}/{stem}/v{version}.json", "title": title, "description": description,
            **generated}


def render(name: str) -> str:
    return json.dumps(schema(name), indent=2, sort_keys=False) + "\n"


def write(directory: Path = HERE) -> list[Path]:
    """Rewrite every committed schema from its model; returns the files written."""
    written = []
    for name in SCHEMAS:
        path = directory / name
        path.write_text(render(name), encoding="utf-8")
        written.append(path)
    return written
