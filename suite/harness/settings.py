"""Turn a ``RunConfig`` and the round's ``RuleSet`` into LoadGen's conf files.

Two files are written into each test directory, next to the logs they produce, and
LoadGen reads exactly these (see ``loadgen.build_test_settings``):

* ``mlperf.conf``: the values the round fixes for this benchmark and scenario;
* ``user.conf``: the tunables, plus any override of a fixed value (marked as such).

LoadGen reads its embedded ``mlperf.conf`` first (``loadgen.build_test_settings``), so the
official per-model switches apply by the LoadGen model name; our ``mlperf.conf`` repeats
the ones the round's rules carry (equal-issue mode, token latencies), so the run's record
states them and a rules row cannot drift from what LoadGen does unnoticed.

Seeds are "conf only" keys that LoadGen ignores in any file but its embedded
``mlperf.conf``; they are recorded in ``mlperf.conf`` and set on ``TestSettings``
directly. ``settings.json`` holds the same values in typed form.

Where Offline's ``loadgen.expected_qps`` is only the scenario file's guess
(``expected_qps_is_a_guess``), the child rewrites its ``user.conf`` line at warm-up with
a rate it measured (``offline_rate``), so LoadGen still reads exactly these files.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

from suite.config.model import RunConfig
from suite.config.rules import RunRules
from suite.llm.conf import token_conf_lines
from suite.scenarios import Mode, Scenario


@dataclass(frozen=True)
class ConfLine:
    """One ``model.Scenario.key = value`` line and the config key it comes from."""

    key: str
    value: int | float
    source_key: str


@dataclass(frozen=True)
class LoadGenSettings:
    """Everything the child process needs to build ``TestSettings``."""

    loadgen_model: str
    scenario: str  # LoadGen spelling
    mode: str  # performance | accuracy
    qsl_rng_seed: int
    sample_index_rng_seed: int
    schedule_rng_seed: int
    mlperf_conf: str
    user_conf: str
    expected_samples: int | None
    min_duration_ms: int
    #: LoadGen's trace log (``loadgen.enable_trace``): per-query timings, opt-in.
    enable_trace: bool = False
    #: Offline's ``expected_qps`` is a guess nobody set for this machine: the child sizes
    #: the query from its warm-up instead (``offline_rate``).
    expected_qps_guess: bool = False
    #: Equal-issue mode: the loaded set a performance run is padded to whole permutations
    #: of (``equal_issue_set``); 0: off.
    equal_issue_set: int = 0

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)


def expected_qps_is_a_guess(config: RunConfig, mode: Mode) -> bool:
    """Whether an Offline performance test's ``expected_qps`` is only the built-in default
    or the scenario file's guess: not set by the user (config file, ``--set``, a flag) nor
    measured by ``suite tune`` for this system. Such a guess sizes a query too small on a
    machine faster than the one it was written for, and the test ends INVALID before its
    minimum duration; the child then derives the rate at warm-up instead."""
    if config.scenario is not Scenario.OFFLINE or mode is not Mode.PERFORMANCE:
        return False
    if config.loadgen.min_duration_ms <= 0:
        return False  # nothing to last: the sample count alone decides
    source = config.provenance.get("loadgen.expected_qps", "default")
    return source == "default" or source.startswith(f"scenarios/{config.scenario.value}.toml")


def _conf_lines(config: RunConfig) -> list[ConfLine]:
    lg = config.loadgen
    lines = [
        ConfLine("min_duration", lg.min_duration_ms, "loadgen.min_duration_ms"),
        ConfLine("min_query_count", lg.min_query_count, "loadgen.min_query_count"),
        ConfLine(
            "performance_sample_count_override",
            lg.performance_sample_count,
            "loadgen.performance_sample_count",
        ),
    ]
    if lg.max_duration_ms:
        lines.append(ConfLine("max_duration", lg.max_duration_ms, "loadgen.max_duration_ms"))
    scenario = config.scenario
    if scenario in (Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM):
        lines.append(ConfLine("target_latency", lg.expected_latency_ms,
                              "loadgen.expected_latency_ms"))
        lines.append(ConfLine("target_latency_percentile", lg.target_latency_percentile,
                              "loadgen.target_latency_percentile"))
    if scenario is Scenario.MULTI_STREAM:
        lines.append(ConfLine("samples_per_query", lg.samples_per_query,
                              "loadgen.samples_per_query"))
    if scenario is Scenario.SERVER:
        lines.append(ConfLine("target_qps", lg.target_qps, "loadgen.target_qps"))
        lines.append(ConfLine("target_latency", lg.latency_bound_ms, "loadgen.latency_bound_ms"))
        lines.append(ConfLine("target_latency_percentile", lg.target_latency_percentile,
                              "loadgen.target_latency_percentile"))
        lines.append(ConfLine("coalesce_queries", int(lg.coalesce_queries),
                              "loadgen.coalesce_queries"))
    if scenario is Scenario.OFFLINE:
        lines.append(ConfLine("target_qps", lg.expected_qps, "loadgen.expected_qps"))
    return lines


def switch_conf_lines(rules: RunRules) -> list[str]:
    """``mlperf.conf`` lines of the per-benchmark switches the round fixes: equal-issue mode
    (``sample_concatenate_permutation``) and, for a benchmark that is no LLM (whisper),
    ``use_token_latencies`` (an LLM's comes with its TTFT/TPOT, ``token_conf_lines``)."""
    bench = rules.benchmark
    model, scen = bench.loadgen_model, rules.scenario.loadgen_name
    lines = []
    if bench.equal_issue:
        lines.append(f"{model}.{scen}.sample_concatenate_permutation = 1")
    if bench.token_latencies and not rules.llm:
        lines.append(f"{model}.{scen}.use_token_latencies = 1")
    return lines


def equal_issue_padded(samples: int, loaded: int) -> int:
    """``samples`` rounded up to whole permutations of the ``loaded`` samples, as LoadGen
    pads an equal-issue performance run (Offline: the query; Server: the query count)."""
    return samples if loaded <= 0 else -(-samples // loaded) * loaded


def equal_issue_set(config: RunConfig, dataset_size: int) -> int:
    """How many samples an equal-issue performance run pads to whole permutations of: the
    loaded set (at most the performance sample count; a smaller dataset loads whole);
    0 where the benchmark does not use equal-issue mode."""
    if not config.resolved_rules.benchmark.equal_issue:
        return 0
    return min(config.loadgen.performance_sample_count, dataset_size)


def _format(value: int | float) -> str:
    # LoadGen's parser wants plain numbers; repr keeps floats exact.
    return str(value) if isinstance(value, int) else repr(float(value))


def expected_samples(config: RunConfig, mode: Mode, dataset_size: int) -> int | None:
    """How many samples LoadGen will issue, where that is known before the run."""
    lg = config.loadgen
    if mode is Mode.ACCURACY:
        return dataset_size
    seconds = lg.min_duration_ms / 1000
    loaded = equal_issue_set(config, dataset_size)
    if config.scenario is Scenario.OFFLINE:
        return equal_issue_padded(
            max(lg.min_query_count, math.floor(1.1 * seconds * lg.expected_qps)), loaded)
    if config.scenario is Scenario.SERVER:
        return max(equal_issue_padded(lg.min_query_count, loaded),
                   math.ceil(seconds * lg.target_qps))
    return None  # SingleStream/MultiStream run until the duration and count are met


def write_settings(
    config: RunConfig, mode: Mode, test_dir: Path, dataset_size: int | None = None,
) -> LoadGenSettings:
    """Write ``mlperf.conf``, ``user.conf`` and ``settings.json`` into ``test_dir``."""
    rules = config.resolved_rules
    bench = rules.benchmark
    model, scen = bench.loadgen_model, config.scenario.loadgen_name
    fixed_values = rules.fixed_settings
    fixed_keys = set(fixed_values)
    seeds = rules.seeds

    mlperf = [
        f"# Round {rules.round} values fixed for {model} {scen} (from {rules.source.name}).",
        "# Seeds are conf-only keys: LoadGen takes them from its embedded mlperf.conf;",
        "# the harness sets the same values on TestSettings directly.",
        f"*.*.qsl_rng_seed = {seeds.qsl_rng_seed}",
        f"*.*.sample_index_rng_seed = {seeds.sample_index_rng_seed}",
        f"*.*.schedule_rng_seed = {seeds.schedule_rng_seed}",
    ]
    user = [f"# Tunables for {model} {scen}; each line names its source."]
    for line in _conf_lines(config):
        text = f"{model}.{scen}.{line.key} = {_format(line.value)}"
        source = config.provenance.get(line.source_key, "default")
        if line.source_key in fixed_keys:
            mlperf.append(f"{model}.{scen}.{line.key} = {_format(fixed_values[line.source_key])}")
            if line.source_key in config.overridden_rules:
                user.append(f"# NOT SUBMITTABLE: overrides the round's value ({source})")
                user.append(text)
            elif line.value != fixed_values[line.source_key]:  # a raised minimum, --quick's
                user.append(f"# {line.source_key} from {source}")
                user.append(text)
        else:
            user.append(f"# {line.source_key} from {source}")
            user.append(text)

    mlperf += switch_conf_lines(rules)  # equal-issue mode, token latencies (whisper)
    mlperf += token_conf_lines(rules)  # LLM only
    test_dir.mkdir(parents=True, exist_ok=True)
    mlperf_path, user_path = test_dir / "mlperf.conf", test_dir / "user.conf"
    mlperf_path.write_text("\n".join(mlperf) + "\n", encoding="utf-8")
    user_path.write_text("\n".join(user) + "\n", encoding="utf-8")
    size = bench.dataset_size if dataset_size is None else dataset_size
    settings = LoadGenSettings(
        loadgen_model=model,
        scenario=scen,
        mode=mode.value,
        qsl_rng_seed=seeds.qsl_rng_seed,
        sample_index_rng_seed=seeds.sample_index_rng_seed,
        schedule_rng_seed=seeds.schedule_rng_seed,
        mlperf_conf=str(mlperf_path),
        user_conf=str(user_path),
        expected_samples=expected_samples(config, mode, size),
        min_duration_ms=config.loadgen.min_duration_ms,
        enable_trace=config.loadgen.enable_trace,
        expected_qps_guess=expected_qps_is_a_guess(config, mode),
        equal_issue_set=equal_issue_set(config, size),
    )
    (test_dir / "settings.json").write_text(settings.to_json() + "\n", encoding="utf-8")
    return settings
