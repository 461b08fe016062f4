"""The pre-flight linter: what is wrong with a run's configuration before LoadGen starts.

``lint(request, paths)`` never raises for config problems; it returns findings:

* ``LINT-UNKNOWN-KEY`` (error): a key no layer may set, with the closest valid name;
* ``LINT-CONFIG`` (error): any other reason the config does not resolve;
* ``LINT-UNIT`` (warning): a value that looks like the wrong unit (ns or s in an
  ``_ms`` key, ns in a ``_us`` key);
* ``LINT-IGNORED`` (warning): an override LoadGen ignores in this scenario;
* ``LINT-FIXED`` (warning): an override of a value the round fixes (a minimum lowered):
  the run will not be submittable, said up front; ``--quick``'s own values are not
  overrides (its non-submittable reason says so once);
* ``LINT-WORKERS`` (warning): more SUT or preprocessing workers than ``WORKERS_PER_CORE``
  per CPU core, which only contend (``suite tune`` finds the count that serves best);
* ``LINT-DURATION`` (error; a warning when forced): a performance test predicted to
  last longer than ``MAX_PREDICTED_S`` (7 days).
* ``LINT-OFFLINE-MIN`` (warning): a submittable Offline query predicted to hold fewer
  samples than the submission checker requires of the benchmark (yolo: LoadGen's minimum
  is 100, the checker's 1525).

It also predicts the query count and run length from the effective settings. Each
finding is a ``suite.findings.Finding`` located by its ``key`` and ``source`` (layer).
"""

from __future__ import annotations

import difflib
import math
import os
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from suite.config.layers import KEYS_HINT, KnownKeys, flatten, parse_set, read_toml
from suite.config.loader import ConfigRequest, load_config
from suite.config.model import RunConfig
from suite.config.rules import RuleSet
from suite.errors import SuiteError
from suite.findings import Finding, Severity
from suite.paths import Paths
from suite.scenarios import Scenario

#: The longest performance test the pre-flight accepts unforced: 7 days. The round's
#: minimum is 10 minutes and a run of hours is plausible (a slow system, a huge
#: min_query_count); a week is not a benchmark anyone waits for, so beyond it the
#: prediction comes from a slip (a rate in the wrong unit, digits too many) and the run
#: would otherwise hold the machine until someone kills it.
MAX_PREDICTED_S = 7 * 86_400.0

#: Keys that only one kind of scenario reads (harness/settings.py writes them per scenario).
_ONLY_IN: dict[str, tuple[Scenario, ...]] = {
    "loadgen.target_qps": (Scenario.SERVER,),
    "loadgen.latency_bound_ms": (Scenario.SERVER,),
    "sut.max_wait_us": (Scenario.SERVER,),
    "loadgen.expected_qps": (Scenario.OFFLINE,),
    "loadgen.samples_per_query": (Scenario.MULTI_STREAM,),
    "loadgen.expected_latency_ms": (Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM),
    "loadgen.target_latency_percentile": (Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM,
                                          Scenario.SERVER),
}
#: (key, lowest suspicious value, what it probably is, divisor back to the key's unit)
_UNIT_SLIPS: list[tuple[str, float, str, float]] = [
    ("loadgen.latency_bound_ms", 100_000, "nanoseconds", 1e6),
    ("loadgen.expected_latency_ms", 100_000, "nanoseconds", 1e6),
    ("loadgen.min_duration_ms", 1e9, "nanoseconds", 1e6),
    ("loadgen.max_duration_ms", 1e9, "nanoseconds", 1e6),
    ("sut.max_wait_us", 1e6, "nanoseconds", 1e3),
]


LINT_SCHEMA_VERSION = 1


#: More SUT workers than this per CPU core draws LINT-WORKERS.
WORKERS_PER_CORE = 8


def _finding(rule: str, severity: str, key: str, source: str, message: str,
             hint: str = "") -> Finding:
    """A linter finding: located by the config key and the layer that set it."""
    return Finding(rule=rule, severity=Severity(severity), key=key or None,
                   source=source or None, message=message, hint=hint)


class LintReport(BaseModel):
    """What ``suite lint --json`` prints (``suite/schemas/lint-report.schema.json``)."""

    # validators built at first use: a run imports models it never validates
    model_config = ConfigDict(extra="forbid", defer_build=True)

    schema_version: int = LINT_SCHEMA_VERSION
    findings: list[Finding] = Field(default_factory=list)
    #: key -> (effective value, the layer it came from)
    effective: dict[str, tuple[Any, str]] = Field(default_factory=dict)
    predicted_queries: int | None = None
    predicted_seconds: float | None = None

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.ERROR]


def _user_layers(request: ConfigRequest) -> list[tuple[str, dict[str, Any]]]:
    layers: list[tuple[str, dict[str, Any]]] = []
    if request.config_file is not None:
        try:
            data = read_toml(request.config_file)
        except SuiteError:
            return layers  # load_config reports it as LINT-CONFIG
        for section in ("benchmarks", "scenarios"):
            tables = data.pop(section, None)
            if not isinstance(tables, dict):
                continue  # load_config reports a value where a table belongs
            for sub in tables.values():
                if isinstance(sub, dict):
                    sub.pop("quick", None)
                    layers.append((str(request.config_file), flatten(sub)))
        if not isinstance(data.get("quick", {}), dict):
            data.pop("quick")  # load_config reports it
        layers.append((str(request.config_file), flatten(data)))
    for item in request.sets:
        try:
            layers.append(parse_set(item))
        except SuiteError:
            continue
    return layers


def lint(request: ConfigRequest, paths: Paths, *, force: bool = False) -> LintReport:
    """The findings on ``request``; ``force`` (or ``request.force``) turns the refusal
    of an implausibly long test (``LINT-DURATION``) into a warning."""
    return lint_and_resolve(request, paths, force=force)[0]


def lint_and_resolve(request: ConfigRequest, paths: Paths, *, force: bool = False
                     ) -> tuple[LintReport, tuple[RunConfig, RuleSet] | None]:
    """``lint``'s report, and the config and rules it resolved (None when they do not
    resolve): a run uses them instead of resolving the same request a second time."""
    report = LintReport()
    keys = KnownKeys(request.backend)
    for source, values in _user_layers(request):
        for key in values:
            if not _known(key, keys):
                close = difflib.get_close_matches(key, sorted(_all_keys(keys)), n=1,
                                                  cutoff=0.6)
                report.findings.append(_finding(
                    "LINT-UNKNOWN-KEY", "error", key, source, f"unknown key '{key}'",
                    f"did you mean '{close[0]}'?" if close else KEYS_HINT))
    if report.errors:
        return report, None
    try:
        config, rules = load_config(request, paths)
    except SuiteError as exc:
        report.findings.append(_finding("LINT-CONFIG", "error", "", "config", exc.message,
                                           exc.hint))
        return report, None
    _inspect(config, report, force or request.force)
    return report, (config, rules)


def _known(key: str, keys: KnownKeys) -> bool:
    try:
        return key in keys
    except SuiteError:  # an unknown or broken --backend: load_config reports it
        return key in KnownKeys("null")


def _all_keys(keys: KnownKeys) -> set[str]:
    try:
        return keys.all()
    except SuiteError:
        return KnownKeys("null").all()


def _user_set(config: RunConfig, key: str) -> bool:
    source = config.provenance.get(key, "default")
    return not (source == "default" or source.startswith(("run_rules/", "scenarios/")))


def _inspect(config: RunConfig, report: LintReport, forced: bool = False) -> None:
    values = {f"loadgen.{k}": v for k, v in config.loadgen.model_dump().items()}
    values |= {f"sut.{k}": v for k, v in config.sut.model_dump().items()}
    report.effective = {k: (v, config.provenance.get(k, "default")) for k, v in values.items()}
    for key, low, unit, div in _UNIT_SLIPS:
        if _user_set(config, key) and values[key] >= low:
            report.findings.append(_finding(
                "LINT-UNIT", "warning", key, config.provenance[key],
                f"{key} = {_short(values[key])} looks like {unit}",
                f"the unit is in the name: did you mean {_float(values[key]) / div:g}?"))
    for key, scenarios in _ONLY_IN.items():
        if _user_set(config, key) and config.scenario not in scenarios:
            report.findings.append(_finding(
                "LINT-IGNORED", "warning", key, config.provenance[key],
                f"LoadGen ignores {key} in {config.scenario.loadgen_name}",
                f"it applies to {', '.join(s.loadgen_name for s in scenarios)} only"))
    # Only the overrides of the user's making: --quick's own values (a scenario file's
    # [quick] table) and a raised minimum are no override (``loader._allowed``).
    for key, reason in config.overridden_rules.items():
        source = config.provenance.get(key, "")
        report.findings.append(_finding(
            "LINT-FIXED", "warning", key, source, f"not submittable: {reason}",
            _fixed_hint(key, source)))
    if config.sut.worker_model == "processes" and config.scenario is not Scenario.SERVER:
        report.findings.append(_finding(  # it would fail at setup, after a run directory
            "LINT-CONFIG", "error", "sut.worker_model",
            config.provenance.get("sut.worker_model", ""),
            f"sut.worker_model = 'processes' is implemented for Server only, not "
            f"{config.scenario.value}", "leave it unset (threads) for this scenario"))
    cores = os.cpu_count() or 1
    for key, count, hint in (
            ("sut.workers", config.sut.workers, "`suite tune` finds the best count"),
            ("data.preprocess_workers", config.data.preprocess_workers,
             "0 starts one process per core")):
        if count > WORKERS_PER_CORE * cores:
            report.findings.append(_finding(
                "LINT-WORKERS", "warning", key, config.provenance.get(key, ""),
                f"{key} = {count} on {cores} CPU core(s): more than {WORKERS_PER_CORE} per "
                "core only contend for them", f"use at most {WORKERS_PER_CORE * cores}; {hint}"))
    report.predicted_queries, report.predicted_seconds = predict(config)
    _check_offline_minimum(config, report)
    _check_length(config, report, forced)


def _check_offline_minimum(config: RunConfig, report: LintReport) -> None:
    """Warn where a submittable Offline query is predicted below the checker's minimum
    samples per query (``[benchmarks.<name>.checker] offline_min_samples_per_query``)."""
    if config.scenario is not Scenario.OFFLINE or not config.submittable or config.rules is None:
        return
    need = config.rules.benchmark.checker.offline_min_samples_per_query
    lg = config.loadgen
    samples = max(_float(lg.min_query_count),
                  _floor(1.1 * _float(lg.min_duration_ms) / 1000 * lg.expected_qps))
    if need is None or samples >= need:
        return
    report.findings.append(_finding(
        "LINT-OFFLINE-MIN", "warning", "loadgen.expected_qps",
        config.provenance.get("loadgen.expected_qps", "default"),
        f"the Offline query is predicted to hold {samples:,.0f} samples, fewer than the "
        f"{need:,} the submission checker requires of {config.rules.benchmark.checker_model}",
        f"set loadgen.min_query_count={need} (a raised minimum stays submittable), or "
        "loadgen.expected_qps to this system's rate if it is faster"))


def _fixed_hint(key: str, source: str) -> str:
    where = f"drop {source}" if source.startswith("--") else f"remove it from {source}"
    minimum = key.split(".", 1)[1].startswith("min_")
    return f"{where} for a submittable run" + (
        " (the round's value is a minimum: a higher one is allowed)" if minimum else "")


def _check_length(config: RunConfig, report: LintReport, forced: bool) -> None:
    """Refuse a predicted test longer than ``MAX_PREDICTED_S`` unless forced."""
    seconds = report.predicted_seconds or 0.0
    if config.loadgen.max_duration_ms:  # LoadGen stops the test there, whatever else
        seconds = min(seconds, config.loadgen.max_duration_ms / 1000)
    if seconds <= MAX_PREDICTED_S:
        return
    key = _length_key(config)
    report.findings.append(_finding(
        "LINT-DURATION", "warning" if forced else "error", key,
        config.provenance.get(key, "default"),
        f"a performance test is predicted to last {_human(seconds)} (from {key} = "
        f"{_short(getattr(config.loadgen, key.split('.', 1)[1]))}), more than the "
        f"{_human(MAX_PREDICTED_S)} the pre-flight accepts" + (" (forced)" if forced else ""),
        "" if forced else f"check the unit and the digits of {key}; cap the test with "
        "loadgen.max_duration_ms, or force it (ConfigRequest.force, --force)"))


def _length_key(config: RunConfig) -> str:
    """The key behind a long prediction, for the message: the duration itself, else the
    rate (or latency) when the user set it, else the query count."""
    if _float(config.loadgen.min_duration_ms) / 1000 > MAX_PREDICTED_S:
        return "loadgen.min_duration_ms"
    rate_key = {Scenario.OFFLINE: "loadgen.expected_qps",
                Scenario.SERVER: "loadgen.target_qps"}.get(config.scenario,
                                                           "loadgen.expected_latency_ms")
    if _user_set(config, "loadgen.min_query_count") and not _user_set(config, rate_key):
        return "loadgen.min_query_count"
    return rate_key


def _short(value: float) -> str:
    """A value as the message shows it: a 300-digit integer as 1e+300."""
    if isinstance(value, int) and abs(value) >= 10**15:
        digits = str(abs(value))
        return f"{'-' if value < 0 else ''}{digits[0]}.{digits[1:3]}e+{len(digits) - 1}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _human(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "longer than any clock counts"
    if seconds >= 365 * 86_400:
        return f"{seconds / (365 * 86_400):,.3g} years"
    if seconds >= 86_400:
        return f"{seconds / 86_400:,.3g} days"
    return f"{seconds:,.0f} s"


def predict(config: RunConfig) -> tuple[int, float]:
    """LoadGen's query count and run length for these settings (an estimate).

    Config floats are finite and rates bounded (``model.MAX_QPS``); integer keys have
    no upper bound, so the arithmetic is done in floats that may reach inf, never in
    a ``math.ceil`` of inf.
    """
    lg = config.loadgen
    duration_s = _float(lg.min_duration_ms) / 1000
    if config.scenario is Scenario.OFFLINE:
        samples = _whole(max(1.1 * duration_s * lg.expected_qps, _float(lg.min_query_count)))
        return 1, samples / lg.expected_qps
    if config.scenario is Scenario.SERVER:
        queries = _whole(max(duration_s * lg.target_qps, _float(lg.min_query_count)))
        return _count(queries), queries / lg.target_qps
    latency_s = lg.expected_latency_ms / 1000
    least = _float(lg.min_query_count)
    if (config.scenario is Scenario.SINGLE_STREAM and config.rules is not None
            and config.rules.benchmark.equal_issue):
        # LoadGen's equal-issue SingleStream (test_settings_internal.cc): at least twice the
        # duration's queries, then up to a whole permutation of the performance samples more
        whole = max(1, lg.performance_sample_count)
        least = max(least, _floor(2 * duration_s / latency_s))
        least = least + whole - least % whole if math.isfinite(least) else least
    queries = _whole(max(duration_s / latency_s, least))
    return _count(queries), max(duration_s, least * latency_s)


def _float(value: int) -> float:
    """An int as a float, inf beyond float's range (a config int has no upper bound)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


def _floor(value: float) -> float:
    """``math.floor`` in floats: inf stays inf."""
    return float(math.floor(value)) if math.isfinite(value) else value


def _whole(value: float) -> float:
    """``math.ceil`` in floats: inf stays inf (``math.ceil(inf)`` raises)."""
    return float(math.ceil(value)) if math.isfinite(value) else value


def _count(value: float) -> int:
    """A query count as an int, saturating at 2**63 - 1 (LoadGen's counters are 64-bit)."""
    return int(value) if value < 2**63 else 2**63 - 1
