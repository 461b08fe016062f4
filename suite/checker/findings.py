"""``suite check``'s rule registry and report; its findings are the one ``Finding``
model every tool shares (``suite.findings``).

Every rule has a stable id (``PERF-DURATION``, ``SYS-TYPE``, ...). A rule marked
``strict_only`` is one the official checker does not enforce although the written rules
ask for it; ``--compat-official`` skips those so that the official verdicts can be
reproduced. The report's JSON shape is published as
``suite/schemas/check-report.schema.json`` (bump ``REPORT_SCHEMA_VERSION`` with it).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from suite.findings import Finding as Finding
from suite.findings import Severity as Severity

# 2: findings are suite.findings.Finding (adds key, source and evidence).
REPORT_SCHEMA_VERSION = 2


class RuleId(StrEnum):
    """Every rule id, as a constant: a mistyped id is a mypy error, not a runtime
    ``KeyError`` that a rule's guard would blame on the file."""

    TREE_LAYOUT = "TREE-LAYOUT"
    TREE_SRC = "TREE-SRC"
    TREE_SCENARIOS = "TREE-SCENARIOS"
    SYS_JSON = "SYS-JSON"
    SYS_FIELDS = "SYS-FIELDS"
    SYS_STATUS = "SYS-STATUS"
    SYS_TYPE = "SYS-TYPE"
    SYS_DIVISION = "SYS-DIVISION"
    SYS_SUBMITTER = "SYS-SUBMITTER"
    SYS_COUNTS = "SYS-COUNTS"
    SYS_NETWORK = "SYS-NETWORK"
    MEAS_JSON = "MEAS-JSON"
    MEAS_FILES = "MEAS-FILES"
    PERF_LOG = "PERF-LOG"
    PERF_SUMMARY = "PERF-SUMMARY"
    PERF_SCENARIO = "PERF-SCENARIO"
    PERF_SEEDS = "PERF-SEEDS"
    PERF_SAMPLE_COUNT = "PERF-SAMPLE-COUNT"
    PERF_DURATION = "PERF-DURATION"
    PERF_MIN_QUERIES = "PERF-MIN-QUERIES"
    PERF_OFFLINE_SPQ = "PERF-OFFLINE-SPQ"
    PERF_EARLY_STOPPING = "PERF-EARLY-STOPPING"
    PERF_LATENCY = "PERF-LATENCY"
    PERF_LATENCY_MEASURED = "PERF-LATENCY-MEASURED"
    PERF_VALIDITY = "PERF-VALIDITY"
    PERF_ERRORS = "PERF-ERRORS"
    PERF_TOKEN_LATENCIES = "PERF-TOKEN-LATENCIES"
    PERF_TOKEN_BOUNDS = "PERF-TOKEN-BOUNDS"
    TREE_MODEL = "TREE-MODEL"
    ACC_EXTRA_FILES = "ACC-EXTRA-FILES"
    POWER_FILES = "POWER-FILES"
    POWER_LOGS = "POWER-LOGS"
    ACC_LOG = "ACC-LOG"
    ACC_TARGET = "ACC-TARGET"
    ACC_HASH = "ACC-HASH"
    ACC_TRUNCATED = "ACC-TRUNCATED"
    ACC_DATASET = "ACC-DATASET"
    ACC_ERRORS = "ACC-ERRORS"
    COMP_DIR = "COMP-DIR"
    COMP_PASS = "COMP-PASS"
    CHECK_INTERNAL = "CHECK-INTERNAL"
    RUN_STATUS = "RUN-STATUS"
    EP_ARTIFACTS = "EP-ARTIFACTS"
    EP_MODEL = "EP-MODEL"
    RUN_STAND_IN = "RUN-STAND-IN"


@dataclass(frozen=True)
class Rule:
    """One rule: its id, default severity, what it checks, and where it comes from."""

    id: RuleId
    severity: Severity
    title: str
    source: str
    strict_only: bool = False


def _r(rule_id: str, title: str, source: str, *, strict_only: bool = False,
       severity: Severity = Severity.ERROR) -> Rule:
    return Rule(RuleId(rule_id), severity, title, source, strict_only)


#: Every rule, by id. ``source`` names the official check (submission.md §3.3) or
#: the written rule it comes from.
RULES: dict[RuleId, Rule] = {rule.id: rule for rule in [
    _r("TREE-LAYOUT", "the tree holds only the expected divisions, dirs and files",
       "legacy checker check_results_dir", severity=Severity.WARNING),
    _r("TREE-SRC", "<division>/<submitter>/src exists", "M-2 directory_exist_check"),
    _r("TREE-SCENARIOS", "closed/network: every required scenario of the benchmark is present, "
       "none outside required and optional", "L3 check_scenarios"),
    _r("SYS-JSON", "systems/<system>.json exists and is a JSON object", "L2"),
    _r("SYS-FIELDS", "every required system field is present, the meaningful ones non-empty",
       "required_fields_check"),
    _r("SYS-STATUS", "status is available, preview or rdi", "availability_check"),
    _r("SYS-TYPE", "system_type is datacenter, edge or both", "system_type_check"),
    _r("SYS-DIVISION", "system JSON division equals the directory division", "division_check"),
    _r("SYS-SUBMITTER", "system JSON submitter equals the directory submitter",
       "submitter_check"),
    _r("SYS-COUNTS", "number_of_nodes and accelerators_per_node are integers",
       "results.py add_result (crashes the official checker)"),
    _r("SYS-NETWORK", "is_network matches the division; network fields present when set",
       "network_check"),
    _r("MEAS-JSON", "measurements.json exists with its 5 fields non-empty",
       "MeasurementsCheck missing_check, required_fields_check"),
    _r("MEAS-FILES", "user.conf and README.md exist and are non-empty", "required_files_check"),
    _r("PERF-LOG", "the performance detail log exists and is well-formed", "P-1"),
    _r("PERF-SUMMARY", "the performance summary log exists and says VALID",
       "Submission rules (the official checker ignores the summary)", strict_only=True),
    _r("PERF-SCENARIO", "the logged scenario equals the directory scenario", "P-12"),
    _r("PERF-SEEDS", "qsl, sample index and schedule seeds are the round's", "P-6 seeds_check"),
    _r("PERF-SAMPLE-COUNT", "performance_sample_count >= the benchmark's",
       "P-5 performance_sample_count_check"),
    _r("PERF-DURATION", "effective_min_duration_ms >= TEST_DURATION_MS", "P-9 min_duration_check"),
    _r("PERF-MIN-QUERIES", "non-early-stopping scenarios: min_query_count >= min-queries",
       "P-8 min_query_count_check"),
    _r("PERF-OFFLINE-SPQ", "closed Offline: samples per query >= the benchmark's minimum",
       "P-8 OFFLINE_MIN_SPQ_SINCE_V4"),
    _r("PERF-EARLY-STOPPING", "SingleStream, MultiStream, Server: early_stopping_met",
       "P-7 latency_check"),
    _r("PERF-LATENCY", "Server: effective_target_latency_ns <= the latency bound",
       "P-7 latency_check"),
    _r("PERF-LATENCY-MEASURED", "Server: measured p99 latency <= the latency bound",
       "Submission rules (the official checker bounds only the target)", strict_only=True),
    _r("PERF-VALIDITY", "LoadGen's result_validity is VALID",
       "Submission rules (the official checker ignores result_validity)", strict_only=True),
    _r("PERF-ERRORS", "no LoadGen error records in the performance log (the uncommitted-"
       "build error is waived by --submission-exceptions)",
       "P-3 (compat: checked only with --submission-exceptions, as the official checker)"),
    _r("PERF-TOKEN-LATENCIES", "LLMs: requested_use_token_latencies is true in every scenario",
       "P-11 llm_check"),
    _r("PERF-TOKEN-BOUNDS", "LLMs, Server and Interactive: TTFT and TPOT p99 below the "
       "directory scenario's bounds (compat: the logged scenario's, i.e. Server's)",
       "P-11 llm_check; inference_rules.adoc LLM latency constraints"),
    _r("TREE-MODEL", "the benchmark directory is a model of the round, directly, through "
       "the round's aliases or (open) the submitter's model_mapping.json",
       "Config.get_mlperf_model; loader model_mapping.json"),
    _r("ACC-EXTRA-FILES", "stable-diffusion-xl/wan: the sample outputs the round lists",
       "A-5 extra_files_check"),
    _r("POWER-FILES", "a power result: performance/power, run_1 and ranging hold the listed "
       "files", "W-1 PowerCheck required_files_check"),
    _r("POWER-LOGS", "a power result: the ranging log is well-formed and of the same scenario; "
       "the run logs power_begin/power_end; client/server JSON parse",
       "W-2 (structure only; values are not judged)"),
    _r("ACC-LOG", "the accuracy detail log exists and is well-formed", "A-1 / F5"),
    _r("ACC-TARGET", "accuracy.txt metric >= target (and <= upper limit); closed/network",
       "A-1 accuracy_result_check"),
    _r("ACC-HASH", "accuracy.txt carries hash=<sha256 of the full accuracy log>",
       "A-1 hash line"),
    _r("ACC-TRUNCATED", "accuracy/mlperf_log_accuracy.json exists and is <= 10 KiB",
       "A-2 accuracy_json_check"),
    _r("ACC-DATASET", "the accuracy run covers the whole dataset", "A-4 dataset_check"),
    _r("ACC-ERRORS", "no LoadGen error records in the accuracy log", "A-3 loadgen_errors_check"),
    _r("COMP-DIR", "closed/network: every required compliance test dir with its files",
       "C-1 dir_exists_check"),
    _r("COMP-PASS", "compliance verification files say TEST PASS", "C-3, C-4"),
    _r("RUN-STATUS", "a run directory: the run's own record (result.json, else STATUS) "
       "says it completed; a FAILED or INTERRUPTED run's LoadGen logs are not evidence "
       "(the samples answered empty at the failure count as completed there)",
       "infersuite: a failed run is never a result"),
    _r("EP-ARTIFACTS", "an endpoint-format result: config.yaml, performance/result_summary."
       "json and accuracy/accuracy_results.json exist, parse, and carry the keys the checks "
       "read (the result's figure among them)",
       "loader load_endpoints_logs; EndpointsParser; get_performance_metric_check"),
    _r("EP-MODEL", "an endpoint-format result is of a model the round allows in that format",
       "endpoints_model_check (ENDPOINTS_ALLOWED_MODELS)"),
    _r("RUN-STAND-IN", "a run directory: not a --stand-in run (a task card's stand-in "
       "model and dataset): such a run is unofficial, never a closed or open result",
       "infersuite: a stand-in is not the reference model or dataset"),
    _r("CHECK-INTERNAL", "suite check itself failed while evaluating a rule (a bug in the "
       "checker, not a verdict on the file); the traceback is in the finding",
       "infersuite: a missing verdict is a failure"),
]}


class ResultReport(BaseModel):
    """One ``<division>/<submitter>/results/<system>/<benchmark>/<scenario>`` (or run dir)."""

    # validators built at first use: a run imports models it never validates
    model_config = ConfigDict(extra="forbid", defer_build=True)

    id: str
    division: str | None
    submitter: str | None
    system: str | None
    benchmark: str
    scenario: str
    metric: str | None = None
    value: float | None = None
    accuracy: float | None = None
    #: the round's name of ``accuracy`` (the checker's first target: acc, ROUGE1, mAP...)
    accuracy_metric: str | None = None
    accuracy_target: float | None = None
    valid: bool = True
    findings: list[Finding] = []


class Summary(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    results: int
    valid_results: int
    errors: int
    warnings: int


class CheckReport(BaseModel):
    """What ``suite check --json`` prints."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    schema_version: int = REPORT_SCHEMA_VERSION
    tool: str
    round: str
    path: str
    kind: str
    compat_official: bool
    passed: bool = True
    rules_evaluated: list[str] = []
    summary: Summary = Summary(results=0, valid_results=0, errors=0, warnings=0)
    results: list[ResultReport] = []
    findings: list[Finding] = []

    def finalize(self) -> CheckReport:
        """Compute validity per result, the summary and the overall verdict."""
        every = list(self.findings)
        for result in self.results:
            result.valid = not any(f.severity is Severity.ERROR for f in result.findings)
            every += result.findings
        errors = sum(f.severity is Severity.ERROR for f in every)
        self.summary = Summary(
            results=len(self.results),
            valid_results=sum(r.valid for r in self.results),
            errors=errors,
            warnings=sum(f.severity is Severity.WARNING for f in every),
        )
        self.passed = errors == 0 and bool(self.results)
        self.rules_evaluated = sorted(set(self.rules_evaluated))
        return self
