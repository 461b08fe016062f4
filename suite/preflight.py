"""The pre-flight linter: what is wrong with a run's configuration before LoadGen starts.

``lint(request, paths)`` never raises for config problems; it returns findings:

* ``LINT-UNKNOWN-KEY`` (error): a key no layer may set, with the closest valid name;
* ``LINT-CONFIG`` (error): any other reason the config does not resolve;
* ``LINT-UNIT`` (warning): a value that looks like the wrong unit (ns or s in an
  ``_ms`` key, ns in a ``_us`` key);
* ``LINT-IGNORED`` (warning): an override LoadGen ignores in this scenario;
* ``LINT-FIXED`` (warning): an override of a value the round fixes: the run will not
  be submittable, said up front.

It also predicts the query count and run length from the effective settings.
"""

from __future__ import annotations

import difflib
import math
import tomllib
from dataclasses import dataclass, field
from typing import Any

from .config import ConfigRequest, RunConfig, _parse_set, flatten, known_keys, load_config
from .errors import SuiteError
from .paths import Paths
from .scenarios import Scenario

#: Keys that only one kind of scenario reads (settings.py writes them per scenario).
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


@dataclass(frozen=True)
class LintFinding:
    rule: str
    severity: str
    key: str
    source: str
    message: str
    hint: str = ""


@dataclass
class LintReport:
    findings: list[LintFinding] = field(default_factory=list)
    effective: dict[str, tuple[Any, str]] = field(default_factory=dict)
    predicted_queries: int | None = None
    predicted_seconds: float | None = None

    @property
    def errors(self) -> list[LintFinding]:
        return [f for f in self.findings if f.severity == "error"]


def _user_layers(request: ConfigRequest) -> list[tuple[str, dict[str, Any]]]:
    layers: list[tuple[str, dict[str, Any]]] = []
    if request.config_file is not None:
        try:
            data = tomllib.loads(request.config_file.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError):
            return layers  # load_config reports it as LINT-CONFIG
        for section in ("benchmarks", "scenarios"):
            for sub in (data.pop(section, None) or {}).values():
                if isinstance(sub, dict):
                    sub.pop("quick", None)
                    layers.append((str(request.config_file), flatten(sub)))
        layers.append((str(request.config_file), flatten(data)))
    for item in request.sets:
        try:
            layers.append(_parse_set(item))
        except SuiteError:
            continue
    return layers


def lint(request: ConfigRequest, paths: Paths) -> LintReport:
    report = LintReport()
    try:
        keys = known_keys(request.backend)
    except SuiteError:
        keys = known_keys("null")
    for source, values in _user_layers(request):
        for key in values:
            if key not in keys:
                close = difflib.get_close_matches(key, sorted(keys), n=1, cutoff=0.6)
                report.findings.append(LintFinding(
                    "LINT-UNKNOWN-KEY", "error", key, source, f"unknown key '{key}'",
                    f"did you mean '{close[0]}'?" if close else "see the README's config keys"))
    if report.errors:
        return report
    try:
        config, _ = load_config(request, paths)
    except SuiteError as exc:
        report.findings.append(LintFinding("LINT-CONFIG", "error", "", "config", exc.message,
                                           exc.hint))
        return report
    _inspect(config, report)
    return report


def _user_set(config: RunConfig, key: str) -> bool:
    source = config.provenance.get(key, "default")
    return not (source == "default" or source.startswith(("run_rules/", "scenarios/")))


def _inspect(config: RunConfig, report: LintReport) -> None:
    values = {f"loadgen.{k}": v for k, v in config.loadgen.model_dump().items()}
    values |= {f"sut.{k}": v for k, v in config.sut.model_dump().items()}
    report.effective = {k: (v, config.provenance.get(k, "default")) for k, v in values.items()}
    for key, low, unit, div in _UNIT_SLIPS:
        if _user_set(config, key) and values[key] >= low:
            report.findings.append(LintFinding(
                "LINT-UNIT", "warning", key, config.provenance[key],
                f"{key} = {values[key]} looks like {unit}",
                f"the unit is in the name: did you mean {values[key] / div:g}?"))
    for key, scenarios in _ONLY_IN.items():
        if _user_set(config, key) and config.scenario not in scenarios:
            report.findings.append(LintFinding(
                "LINT-IGNORED", "warning", key, config.provenance[key],
                f"LoadGen ignores {key} in {config.scenario.loadgen_name}",
                f"it applies to {', '.join(s.loadgen_name for s in scenarios)} only"))
    for key, reason in config.overridden_rules.items():
        report.findings.append(LintFinding(
            "LINT-FIXED", "warning", key, config.provenance.get(key, ""),
            f"not submittable: {reason}", "remove the override for a submittable run"))
    report.predicted_queries, report.predicted_seconds = predict(config)


def predict(config: RunConfig) -> tuple[int, float]:
    """LoadGen's query count and run length for these settings (an estimate)."""
    lg = config.loadgen
    duration_s = lg.min_duration_ms / 1000
    if config.scenario is Scenario.OFFLINE:
        samples = max(math.ceil(1.1 * duration_s * lg.expected_qps), lg.min_query_count)
        return 1, samples / lg.expected_qps
    if config.scenario is Scenario.SERVER:
        queries = max(math.ceil(duration_s * lg.target_qps), lg.min_query_count)
        return queries, queries / lg.target_qps
    latency_s = lg.expected_latency_ms / 1000
    queries = max(math.ceil(duration_s / latency_s), lg.min_query_count)
    return queries, max(duration_s, lg.min_query_count * latency_s)
