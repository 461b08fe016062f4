"""The run rules of a round, loaded from ``run_rules/<round>.toml``.

A ``RuleSet`` holds what the round fixes: seeds, per-scenario durations and query
counts, latency bounds, and per-benchmark accuracy targets. ``fixed_settings``
turns it into the first config layer of a run (see ``loader``).
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from suite.config.toml import decode_utf8, parse_toml
from suite.errors import ConfigError
from suite.paths import Paths
from suite.scenarios import Scenario

#: The round used when none is asked for: the newest we support.
DEFAULT_ROUND = "v6.1"
#: The tree's path templates every round's ``[submission.paths]`` must define.
PATH_TEMPLATES = {"result", "performance_log", "performance_summary", "accuracy_log",
                  "accuracy_result", "accuracy_json", "measurements", "compliance", "system",
                  "src"}


class _Strict(BaseModel):
    # validators built at first use: a run imports models it never validates
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Seeds(_Strict):
    qsl_rng_seed: int
    sample_index_rng_seed: int
    schedule_rng_seed: int


class ScenarioRules(_Strict):
    """Values a round fixes for one scenario (all optional: they layer)."""

    min_duration_ms: int | None = None
    min_query_count: int | None = None
    samples_per_query: int | None = None
    target_latency_percentile: float | None = None
    latency_bound_ms: int | None = None


class CheckerRules(_Strict):
    """What the submission checker enforces for one benchmark beyond LoadGen's settings.

    Scenario lists are keyed by the system JSON's ``system_type`` spelling.
    """

    offline_min_samples_per_query: int | None = None
    accuracy_upper_limit: float | None = None
    required_scenarios: dict[str, list[Scenario]] = {}
    optional_scenarios: dict[str, list[Scenario]] = {}


#: The scenario directory names a submission tree may use (the checker's spelling).
TREE_SCENARIOS = ("SingleStream", "MultiStream", "Server", "Offline", "Interactive")


class TokenBounds(_Strict):
    """LLM token-latency bounds of one scenario, in ns (p99 must be strictly below)."""

    ttft: int = Field(gt=0)
    tpot: int = Field(gt=0)


class ModelRules(_Strict):
    """What the submission checker enforces for one model of the round (``[models.<name>]``,
    the official ``MODEL_CONFIG`` facts). Scenario keys use the tree's spelling
    (``TREE_SCENARIOS``); system-type keys are ``datacenter``, ``edge``, ``datacenter,edge``."""

    dataset_size: int = Field(gt=0)
    accuracy_sample_count: int | None = None
    accuracy_sample_count_by_scenario: dict[str, int] = {}
    performance_sample_count: int = Field(gt=0)
    targets: dict[str, float]
    upper_limits: dict[str, float] = {}
    scenario_targets: dict[str, dict[str, float]] = {}
    offline_min_samples_per_query: int | None = None
    compliance_tests: list[str] = []
    llm: bool = False
    min_duration_exempt: bool = False
    delta_percent: dict[str, float] = {}
    min_queries: dict[str, int] = {}
    latency_bound_ns: dict[str, int] = {}
    token_latency_ns: dict[str, TokenBounds] = {}
    required_scenarios: dict[str, list[str]] = {}
    optional_scenarios: dict[str, list[str]] = {}
    one_of_scenarios: dict[str, list[list[str]]] = {}
    accuracy_extra_files: dict[str, list[str]] = {}
    #: ``RESULT_FIELD_BENCHMARK_OVERWRITE``: the detail-log key of a scenario's figure where
    #: the checker reads another than the scenario's own (whisper's Offline: tokens/s).
    result_fields: dict[str, str] = {}

    @field_validator("required_scenarios", "optional_scenarios")
    @classmethod
    def _known_scenarios(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        bad = sorted({s for names in value.values() for s in names} - set(TREE_SCENARIOS))
        if bad:
            raise ValueError(f"unknown scenario(s) {', '.join(bad)}")
        return value

    def accuracy_count(self, scenario: str | None) -> int:
        """The sample count the accuracy log must report (A-4)."""
        if scenario is not None and scenario in self.accuracy_sample_count_by_scenario:
            return self.accuracy_sample_count_by_scenario[scenario]
        return self.accuracy_sample_count or self.dataset_size

    def targets_for(self, scenario: str | None) -> dict[str, float]:
        if scenario is not None and scenario in self.scenario_targets:
            return self.scenario_targets[scenario]
        return self.targets

    def delta_for(self, model: str, metric: str) -> float:
        """TEST01 fallback: the allowed |1 - baseline/compliance| x 100."""
        if metric in self.delta_percent:
            return self.delta_percent[metric]
        return 0.1 if "99.9" in model else 1.0


class EndpointsRules(_Strict):
    """Results in the endpoint benchmarker's format (``mlcommons/endpoints``) instead of
    LoadGen logs: which models may use it and how its artifacts are judged
    (``ENDPOINTS_ALLOWED_MODELS``, ``ENDPOINTS_COMPLIANCE_MAPPING``, ``TEST09_LOW/HIGH``,
    ``RESULT_FIELD_BENCHMARK_OVERWRITE``). Read by ``suite/checker/endpoints_format.py``."""

    models: list[str]
    #: compliance test -> the audit name: ``<result>/audit/audit_<name>.json``
    audits: dict[str, str]
    #: TEST09: the performance run's mean output tokens, inclusive range
    test09_mean_output_tokens: tuple[float, float]
    #: model -> scenario (as the checker spells it) -> the LoadGen key of the figure
    result_overrides: dict[str, dict[str, str]] = {}


class SubmissionRules(_Strict):
    """The round's submission-tree constants (``[submission]``): what ``suite check``
    and ``suite package`` read. Names follow the checker's ``constants.py``."""

    test_duration_ms: int
    max_accuracy_log_bytes: int
    truncate_keep_chars: int
    divisions: list[str]
    availabilities: list[str]
    system_types: list[str]
    hash_pattern: str
    compliance_pass_marker: str
    system_required_fields: list[str]
    system_meaningful_fields: list[str]
    network_fields: list[str]
    measurements_fields: list[str]
    accuracy_patterns: dict[str, str]
    compliance_files: dict[str, list[str]]
    paths: dict[str, str]
    #: A benchmark directory name the checker maps to a model (``model_mapping``).
    model_aliases: dict[str, str] = {}
    #: Per test, the lines its verification file must hold; each entry lists the
    #: accepted spellings of one line. A test not listed needs ``compliance_pass_marker``.
    compliance_pass_lines: dict[str, list[list[str]]] = {}
    #: TEST01's non-deterministic fallback: the exact file set of ``TEST01/accuracy/``.
    test01_fallback_files: list[str] = []
    #: A power result (``performance/power/`` exists): the files each dir must hold.
    power_files: dict[str, list[str]] = {}
    #: The endpoint benchmarker's format, where the round's checker accepts it.
    endpoints: EndpointsRules | None = None

    @field_validator("paths")
    @classmethod
    def _every_template(cls, value: dict[str, str]) -> dict[str, str]:
        missing = sorted(PATH_TEMPLATES - set(value))
        if missing:
            raise ValueError(f"missing path templates: {', '.join(missing)}")
        return value


class BenchmarkRules(_Strict):
    """What a round fixes for one benchmark."""

    loadgen_model: str
    checker_model: str
    dataset_size: int = Field(gt=0)
    performance_sample_count: int = Field(gt=0)
    accuracy_metric: str
    reference_accuracy: float
    accuracy_target: float
    compliance_tests: list[str] = []
    scenarios: dict[Scenario, ScenarioRules] = {}
    #: The checker's ``min-queries`` per scenario (enforced for Offline only).
    checker_min_queries: dict[Scenario, int] = {}
    # a factory, not an instance: an instance built the model's validator at import
    checker: CheckerRules = Field(default_factory=CheckerRules)
    #: Equal-issue mode: mlperf.conf's ``sample_concatenate_permutation = 1`` (3d-unet,
    #: whisper, the LLMs, rgat). LoadGen then pads a performance run to whole permutations
    #: of the loaded samples (``harness.settings`` writes the line).
    equal_issue: bool = False
    #: mlperf.conf's ``use_token_latencies = 1`` for a benchmark whose checker row is no
    #: LLM (whisper); an LLM row (``llm = true``) has it with its TTFT/TPOT bounds.
    token_latencies: bool = False


class RuleSet(_Strict):
    """The rules of one round, as pinned in ``run_rules/<round>.toml``."""

    round: str
    loadgen_version: str
    seeds: Seeds
    scenario_defaults: dict[Scenario, ScenarioRules]
    benchmarks: dict[str, BenchmarkRules]
    submission: SubmissionRules | None = None
    #: Every model the round's checker knows, by official name (``suite check``).
    models: dict[str, ModelRules] = {}
    source: Path = Path()

    def benchmark(self, name: str) -> BenchmarkRules:
        """The rules for ``name``, or a ``ConfigError`` that suggests the closest name."""
        try:
            return self.benchmarks[name]
        except KeyError:
            raise ConfigError(
                f"unknown benchmark '{name}' (round {self.round} knows "
                f"{', '.join(sorted(self.benchmarks))})",
                hint=_did_you_mean(name, self.benchmarks),
            ) from None

    def resolve(self, benchmark: str, scenario: Scenario) -> RunRules:
        """The rules for one run's benchmark and scenario, resolved once (``load_config``
        puts them on the ``RunConfig``; every later stage reads them from there)."""
        bench = self.benchmark(benchmark)
        row = self.models.get(bench.checker_model)
        llm = row is not None and row.llm
        bounds = None
        if llm and scenario is Scenario.SERVER:
            assert row is not None
            kind = "Interactive" if bench.loadgen_model.endswith("-interactive") else "Server"
            bounds = row.token_latency_ns.get(kind)
            if bounds is None:
                raise ConfigError(f"{self.source}: [models.\"{bench.checker_model}\"] has no "
                                  f"token_latency_ns.{kind}",
                                  hint="an LLM benchmark's Server run needs its TTFT/TPOT bounds")
        return RunRules(round=self.round, source=self.source, seeds=self.seeds,
                        benchmark_name=benchmark, scenario=scenario, benchmark=bench,
                        fixed_settings=self._fixed(bench, scenario), llm=llm,
                        token_bounds=bounds, model=row)

    def fixed_settings(self, benchmark: str, scenario: Scenario) -> dict[str, Any]:
        """The ``loadgen.*`` values this round fixes for a benchmark and scenario."""
        return self._fixed(self.benchmark(benchmark), scenario)

    def _fixed(self, rules: BenchmarkRules, scenario: Scenario) -> dict[str, Any]:
        merged: dict[str, Any] = {"performance_sample_count": rules.performance_sample_count}
        for layer in (self.scenario_defaults.get(scenario), rules.scenarios.get(scenario)):
            if layer is not None:
                merged.update(layer.model_dump(exclude_none=True))
        return {f"loadgen.{key}": value for key, value in merged.items()}


class RunRules(_Strict):
    """The round's rules for one run's benchmark and scenario (``RuleSet.resolve``)."""

    round: str
    source: Path
    seeds: Seeds
    benchmark_name: str
    scenario: Scenario
    benchmark: BenchmarkRules
    #: The ``loadgen.*`` values the round fixes for this benchmark and scenario.
    fixed_settings: dict[str, Any]
    #: Whether the round's checker row marks the benchmark as an LLM (token latencies).
    llm: bool = False
    #: The Server (or Interactive) TTFT/TPOT bounds of an LLM benchmark's Server run.
    token_bounds: TokenBounds | None = None
    #: The round's checker row for the benchmark's model (its accuracy targets and upper
    #: limits), where the round has one.
    model: ModelRules | None = None


def _did_you_mean(name: str, choices: Any) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.5)
    return f"did you mean '{close[0]}'?" if close else f"choose one of: {', '.join(choices)}"


def available_rounds(paths: Paths) -> list[str]:
    """The rounds that have a rules file, sorted."""
    return sorted(p.stem for p in paths.run_rules.glob("*.toml"))


@functools.lru_cache(maxsize=8)
def parsed_rules_file(path: str, mtime_ns: int) -> Mapping[str, Any]:
    """A rules file's TOML, parsed once per version of the file (~15 ms each): a run's
    linter reads every round's benchmark names, then the run's own round's rules. Shared,
    so read-only: a caller copies what it changes."""
    return parse_toml(decode_utf8(Path(path).read_bytes(), path), path)


def load_rules(paths: Paths, round_name: str = DEFAULT_ROUND) -> RuleSet:
    """Load and validate ``run_rules/<round_name>.toml``.

    Example::

        rules = load_rules(find_paths(), "v6.1")
        rules.benchmark("resnet50").accuracy_target  # 75.6954
    """
    path = paths.run_rules / f"{round_name}.toml"
    if not path.is_file():
        rounds = available_rounds(paths)
        raise ConfigError(
            f"unknown round '{round_name}': no file {path}",
            hint=_did_you_mean(round_name, rounds),
        )
    try:
        data = parsed_rules_file(str(path), path.stat().st_mtime_ns)
        return RuleSet.model_validate({**data, "source": path})
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(part) for part in first["loc"])
        raise ConfigError(
            f"{path}: {key}: {first['msg']}", hint="fix the rules file; it is data we ship"
        ) from None
