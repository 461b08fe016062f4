"""Typed, versioned results: what ``result.json`` holds.

``SCHEMA_VERSION`` history:

* 1: first version (performance from the detail log, accuracy, failures, provenance).
* 2: ``compliance`` (the verdict of a compliance test run, with its earlier attempts).
  Also in 2: ``division`` (``"closed"`` or ``"open"``) and ``division_reason``: a user-supplied
  model file that is not the card's reference model runs in the open division only;
  ``dataset`` (what ``dataset.json`` records: size, cache, preprocessing). Version 1
  files still load (as closed division, no dataset record).
  Also in 2 (optional, empty in older records): ``provenance``: for the weights, their
  precision and quantization and (an endpoint run) the engine, the value and where it
  came from: ``measured`` by the suite, ``reported by the engine``, ``stated by the
  submitter, not verified``, or ``not recorded`` (``Claim``).

Performance numbers here are copied from LoadGen's detail log (``logs``), never
computed by the harness.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from suite.logs import DetailLog
from suite.scenarios import SPECS, Scenario

SCHEMA_VERSION = 2


class _Frozen(BaseModel):
    # validators built at first use: a run imports models it never validates
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Status(StrEnum):
    """How a test or run ended."""

    VALID = "VALID"
    INVALID = "INVALID"
    FAILED = "FAILED"
    INTERRUPTED = "INTERRUPTED"


#: The exit code of a run that ended so (the CLI's, and ``result.json``'s ``exit_code``).
EXIT_CODES = {Status.VALID: 0, Status.INVALID: 2, Status.FAILED: 1, Status.INTERRUPTED: 130}
#: From the least to the most severe: a run's status is its worst test's.
SEVERITY = [Status.VALID, Status.INVALID, Status.FAILED, Status.INTERRUPTED]


def worst(statuses: list[Status]) -> Status:
    """The most severe of ``statuses`` (a run's status from its tests')."""
    return max(statuses, key=SEVERITY.index)


class PerformanceSummary(_Frozen):
    """Scenario metric and verdicts, as LoadGen logged them."""

    scenario: str
    metric_key: str
    metric_name: str
    metric_value: float | None
    unit: str
    result_validity: str | None
    min_duration_met: bool | None
    min_queries_met: bool | None
    perf_constraints_met: bool | None
    early_stopping_met: bool | None
    early_stopping_result: str | None
    invalid_reason: str | None
    num_errors: int
    errors: list[str]
    query_count: int | None
    latency_ns: dict[str, float]
    effective: dict[str, Any]
    loadgen_version: str | None
    #: LLM runs (``use_token_latencies``): TTFT/TPOT and tokens/s, from the detail log.
    tokens: dict[str, float] = {}

    @property
    def is_valid(self) -> bool:
        return self.result_validity == "VALID" and self.num_errors == 0


def summarize_performance(log: DetailLog, scenario: Scenario) -> PerformanceSummary:
    """Build the summary of a performance test from its parsed detail log."""
    spec = SPECS[scenario]
    raw = log.get(spec.metric_key)
    value: float | None = float(raw) if isinstance(raw, int | float) else None
    if value is not None and spec.unit == "ms":
        value = value / 1e6  # LoadGen logs latencies in ns
    latency = {
        key.removeprefix("result_").removesuffix("_latency_ns"): float(val)
        for key, val in log.values.items()
        if key.startswith("result_") and key.endswith("latency_ns") and isinstance(val, int | float)
    }
    effective = {k.removeprefix("effective_"): v for k, v in log.values.items()
                 if k.startswith("effective_")}
    num_errors = log.get("num_errors")
    return PerformanceSummary(
        scenario=scenario.value,
        metric_key=spec.metric_key,
        metric_name=spec.metric_name,
        metric_value=value,
        unit=spec.unit,
        result_validity=log.get("result_validity"),
        min_duration_met=log.get("result_min_duration_met"),
        min_queries_met=log.get("result_min_queries_met"),
        perf_constraints_met=log.get("result_perf_constraints_met"),
        early_stopping_met=log.get("early_stopping_met"),
        early_stopping_result=log.get("early_stopping_result"),
        invalid_reason=log.get("result_invalid_reason"),
        num_errors=int(num_errors) if isinstance(num_errors, int) else len(log.errors),
        errors=log.errors[:20],
        query_count=log.get("result_query_count"),
        latency_ns=latency,
        effective=effective,
        loadgen_version=log.get("loadgen_version"),
        tokens=token_metrics(log),
    )


#: LLM token metrics: result.json name -> detail-log key (LoadGen's ``results.cc`` names).
TOKEN_KEYS = {
    "ttft_p99_ns": "result_first_token_99.00_percentile_latency_ns",
    "ttft_mean_ns": "result_first_token_mean_latency_ns",
    "tpot_p99_ns": "result_time_per_output_token_99.00_percentile_ns",
    "tpot_mean_ns": "result_time_to_output_token_mean",
    "tokens_per_second": "result_tokens_per_second",
    "completed_tokens_per_second": "result_completed_tokens_per_second",
}


def token_metrics(log: DetailLog) -> dict[str, float]:
    """The token metrics the detail log holds (none for a run without token latencies)."""
    return {name: float(log.values[key]) for name, key in TOKEN_KEYS.items()
            if isinstance(log.values.get(key), int | float)}


class AccuracyResult(_Frozen):
    """Accuracy decoded from ``mlperf_log_accuracy.json`` against the round's target."""

    metric: str
    value: float
    target: float
    passed: bool
    good: int
    total: int
    log_sha256: str
    loadgen_errors: list[str]
    #: Further scores (LLM: ROUGE-1/2/L, tokens per sample and its bounds).
    details: dict[str, float] = {}


class TestResult(_Frozen):
    """One LoadGen test (one child process)."""

    __test__ = False  # not a pytest class

    mode: str
    directory: str
    status: Status
    exit_code: int
    failures: list[dict[str, Any]] = []
    failed_samples: int = 0
    message: str = ""
    performance: PerformanceSummary | None = None
    accuracy: AccuracyResult | None = None
    #: ``BackendInfo`` as loaded (status.json ``backend``), plus ``run`` where the backend
    #: counts its run: the remote backend's requests, samples and errors per endpoint and
    #: the client processes that sent them. Absent for other backends and older records.
    backend: dict[str, Any] = {}


#: Where a claim about a run came from (``Claim.source``).
MEASURED = "measured"
REPORTED_BY_ENGINE = "reported by the engine"
STATED_BY_SUBMITTER = "stated by the submitter, not verified"
NOT_RECORDED = "not recorded"
ClaimSource = Literal["measured", "reported by the engine",
                      "stated by the submitter, not verified", "not recorded"]


class Claim(_Frozen):
    """One thing a run says about what it measured, and where that came from: the suite
    measured it (hashed the weights it loaded, ran the precision it computed in), the
    engine reported it (``/v1/models``, ``/version``), or the submitter stated it (an
    option the suite cannot check against a remote engine)."""

    value: str
    source: ClaimSource


class ComplianceResult(_Frozen):
    """A compliance test's verdict against its reference run."""

    test: str
    reference_run: str
    passed: bool
    verdicts: dict[str, str]
    evidence: dict[str, list[str]]
    attempt: int
    previous_attempts: list[str]
    #: sha256 of each evidence file, by path relative to the run directory, taken when the
    #: verdict was written: ``suite package`` copies a file only if it still hashes so.
    #: Empty in records older than the field.
    digests: dict[str, str] = {}


class RunResult(_Frozen):
    """A whole run (one or two tests), as written to ``result.json``."""

    schema_version: int = SCHEMA_VERSION
    run_id: str
    run_dir: str
    created_utc: str
    benchmark: str
    scenario: str
    mode: str
    backend: str
    round: str
    model_sha256: str
    #: "read" (hashed for this run) or "remembered" (``suite.models.model_digests``: the
    #: same file state hashed before); "" in records older than the field.
    model_sha256_source: str = ""
    division: Literal["closed", "open"] = "closed"
    division_reason: str = ""
    dataset: dict[str, Any] = {}
    #: ``weights``, ``precision``, ``quantization`` and, for an endpoint run,
    #: ``engine`` and ``weights_location``: each value with its source (``Claim``)
    provenance: dict[str, Claim] = {}
    submittable: bool
    non_submittable_reasons: list[str]
    status: Status
    exit_code: int
    tests: list[TestResult]
    compliance: ComplianceResult | None = None

    def dump(self, path: Path) -> None:
        """Write atomically (never a half-written result.json)."""
        tmp = path.with_suffix(".tmp")
        try:
            tmp.write_text(self.model_dump_json(indent=2) + "\n", encoding="utf-8")
            tmp.replace(path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)  # a full disk leaves no half-written file behind
            if exc.filename is None:  # a failed write names no file; say which
                exc.filename = str(path)
            raise

    @classmethod
    def load(cls, path: Path) -> RunResult:
        from suite.paths import RECORD_FILE_LIMIT, regular_file_problem

        if (problem := regular_file_problem(path, RECORD_FILE_LIMIT)) is not None:
            raise ValueError(f"{path}: {problem}, so not a result.json")
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        version = data.get("schema_version")
        if version == 1:  # the v2 fields have defaults: closed division, no dataset record
            data["schema_version"] = SCHEMA_VERSION
        elif version != SCHEMA_VERSION:
            raise ValueError(f"{path}: schema_version {version}, this suite reads {SCHEMA_VERSION}")
        return cls.model_validate(data)
