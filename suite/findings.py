"""The one findings model: what ``suite check`` (rules on a tree), ``suite lint`` (the
pre-flight on a config) and ``suite audit`` (checks on a bundle) report.

A ``Finding`` is a rule or check id, a severity, a message, a hint, where it is (a
result, a file, a config key and the layer that set it) and the evidence behind it
(``expected`` and ``found`` where the rule compares two values, free ``evidence``
lines otherwise). Each tool fills the location fields that mean something to it and
leaves the others ``None``.

The JSON schemas under ``suite/schemas/`` are generated from these pydantic models
(``python -m suite.schemas``); ``tests/unit/schemas/test_findings_schema.py`` fails when a committed
schema differs from the models.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class Severity(StrEnum):
    """``error`` fails the result (or the run, or the audit) it is on; ``warning`` and
    ``info`` never fail."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class Finding(BaseModel):
    """One failed (or noteworthy) rule or check, where it is, and why."""

    # validators built at first use: a run imports models it never validates
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    rule: str = Field(description="rule or check id: PERF-DURATION, LINT-UNIT, AUDIT-3, ...")
    severity: Severity
    message: str
    hint: str = Field(default="", description="what to do about it; empty when nothing")
    # -- location: the fields that mean something to the tool that found it
    result: str | None = Field(default=None, description="the result (or run) it is on")
    file: str | None = Field(default=None, description="the file, relative to the tree")
    key: str | None = Field(default=None, description="the config key (lint)")
    source: str | None = Field(default=None,
                               description="the config layer that set the key (lint)")
    # -- evidence
    expected: str | None = None
    found: str | None = None
    evidence: list[str] = Field(default_factory=list,
                                description="the records the verdict was derived from")

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR
