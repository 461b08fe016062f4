"""The round's tensor benchmarks beyond ResNet-50 (bert, 3d-unet, yolo, whisper, retinanet):
each row loads in the rounds whose checker lists it, its target is the reference times the
accuracy level as the checker computes it, its checker tables equal the round's checker row
(``[models.<name>]``, the facts of ``constants.py``), and its LoadGen values equal the
``mlperf.conf`` embedded in LoadGen (which the harness loads before our files)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from suite.config.rules import RuleSet, load_rules
from suite.errors import ConfigError
from suite.models import card_name
from suite.paths import find_paths
from suite.scenarios import Scenario

#: Benchmark -> (card, accuracy level). The levels are the factors of the checker's
#: ``accuracy-target`` entries (constants.py MODEL_CONFIG, mlcommons/inference @ b66003e1).
TENSOR = {
    "bert-99": ("bert", 0.99), "bert-99.9": ("bert", 0.999),
    "3d-unet-99": ("3d-unet", 0.99), "3d-unet-99.9": ("3d-unet", 0.999),
    "yolo-95": ("yolo", 0.95), "yolo-99": ("yolo", 0.99),
    "whisper": ("whisper", 0.99), "retinanet": ("retinanet", 0.99),
}
#: The rounds whose checker lists each benchmark: retinanet left after v6.0.
ROUNDS = {"v6.0": set(TENSOR), "v6.1": set(TENSOR) - {"retinanet"}}
#: Our own benchmarks: not in mlperf.conf, so LoadGen's embedded values say nothing of them.
OWN = {"digits", "tinylm", "tinylm-interactive"}
#: Round models LoadGen's mlperf.conf has no line for (only its "*" defaults apply): their
#: minimum query count is the checker's (constants.py MODEL_CONFIG["v6.1"] min-queries),
#: which a run must meet to be accepted (reference_models/qwen3.6-27b/model.toml).
CHECKER_MIN_QUERIES = {"qwen3.6-27b"}
#: Tree spelling of each scenario (the checker's tables use it).
TREE = {Scenario.SINGLE_STREAM: "SingleStream", Scenario.MULTI_STREAM: "MultiStream",
        Scenario.SERVER: "Server", Scenario.OFFLINE: "Offline"}


def _rules(round_name: str) -> RuleSet:
    return load_rules(find_paths(), round_name)


def test_each_round_has_the_rows_its_checker_lists() -> None:
    for round_name, names in ROUNDS.items():
        rules = _rules(round_name)
        assert names <= set(rules.benchmarks), round_name
        for name in names:
            bench = rules.benchmark(name)
            assert bench.checker_model == name and name in rules.models
            assert card_name(name) == TENSOR[name][0]
            for scenario in Scenario:  # every scenario resolves (Server: a bound of its own)
                assert rules.resolve(name, scenario).benchmark == bench
    with pytest.raises(ConfigError, match="unknown benchmark 'retinanet'"):
        _rules("v6.1").benchmark("retinanet")


def test_card_name_strips_each_accuracy_level_and_nothing_else() -> None:
    assert [card_name(n) for n in ("yolo-95", "yolo-99", "bert-99.9", "3d-unet-99")] == [
        "yolo", "yolo", "bert", "3d-unet"]
    assert [card_name(n) for n in ("whisper", "retinanet", "resnet50", "yolo-950",
                                   "model-95x", "llama2-70b-99.9-interactive")] == [
        "whisper", "retinanet", "resnet50", "yolo-950", "model-95x", "llama2-70b"]


def test_targets_are_the_reference_times_the_level_as_the_checker_computes() -> None:
    for round_name, names in ROUNDS.items():
        rules = _rules(round_name)
        assert rules.submission is not None
        for name in names:
            bench, level = rules.benchmark(name), TENSOR[name][1]
            # exactly the checker's float product: a score equal to our target passes there
            assert bench.accuracy_target == bench.reference_accuracy * level, name
            row = rules.models[name]
            assert bench.accuracy_target == pytest.approx(row.targets[bench.accuracy_metric],
                                                          rel=1e-9), name
            assert bench.accuracy_metric in rules.submission.accuracy_patterns
    whisper = _rules("v6.1").benchmark("whisper")
    assert whisper.reference_accuracy == 100.0 - 2.0671  # accuracy = 100 - WER %


def test_scenarios_and_minimums_are_the_checkers_per_category() -> None:
    for round_name, names in ROUNDS.items():
        rules = _rules(round_name)
        for name in names:
            bench, row = rules.benchmark(name), rules.models[name]
            checker = bench.checker
            required = {k: [TREE[s] for s in v] for k, v in checker.required_scenarios.items()}
            optional = {k: [TREE[s] for s in v] for k, v in checker.optional_scenarios.items()}
            assert required == row.required_scenarios, (round_name, name)
            assert {k: v for k, v in optional.items() if v} == row.optional_scenarios
            assert {TREE[s]: n for s, n in bench.checker_min_queries.items()} == row.min_queries
            assert checker.offline_min_samples_per_query == row.offline_min_samples_per_query
            assert (bench.dataset_size, bench.performance_sample_count,
                    bench.compliance_tests) == (row.dataset_size, row.performance_sample_count,
                                                row.compliance_tests), name
            if "Server" in row.latency_bound_ns:  # retinanet: the checker's latency-constraint
                fixed = rules.fixed_settings(name, Scenario.SERVER)
                assert fixed["loadgen.latency_bound_ms"] * 1_000_000 == \
                    row.latency_bound_ns["Server"]
    v60 = _rules("v6.0")
    assert v60.benchmark("retinanet").checker.required_scenarios == {"datacenter,edge": [
        Scenario.SINGLE_STREAM, Scenario.OFFLINE, Scenario.MULTI_STREAM, Scenario.SERVER]}
    assert set(v60.benchmark("whisper").checker.required_scenarios["edge"]) == {Scenario.OFFLINE}


_EMBEDDED = """
import json, sys
import mlperf_loadgen as lg
out = {}
for model in sys.argv[1:]:
    for scen in ("SingleStream", "MultiStream", "Server", "Offline"):
        ts = lg.TestSettings()
        ts.FromConfig("", model, scen, 0)
        out[f"{model}.{scen}"] = [ts.sample_concatenate_permutation, ts.use_token_latencies,
            ts.performance_sample_count_override, ts.min_query_count, ts.min_duration_ms,
            ts.server_target_latency_ns, ts.single_stream_target_latency_percentile,
            ts.multi_stream_target_latency_percentile, ts.multi_stream_samples_per_query]
print(json.dumps(out))
"""


def test_rows_agree_with_loadgens_embedded_mlperf_conf() -> None:
    """Every official benchmark row, LLMs included: equal-issue mode, token latencies,
    sample counts, minimum queries and durations, percentiles and the Server bound (not an
    LLM's: mlperf.conf leaves it 0 and bounds TTFT/TPOT) are LoadGen's own values."""
    rows = [(r, name, b) for r in ROUNDS for name, b in _rules(r).benchmarks.items()
            if name not in OWN]
    models = sorted({b.loadgen_model for _, _, b in rows})
    # A subprocess: FromConfig's process-global counter must not leak into other tests.
    embedded = json.loads(subprocess.run([sys.executable, "-c", _EMBEDDED, *models],
                                         capture_output=True, text=True, check=True).stdout)
    checked = 0
    for round_name, name, bench in rows:
        rules = _rules(round_name)
        llm = rules.resolve(name, Scenario.OFFLINE).llm
        for scenario, tree in TREE.items():
            (equal, tokens, psc, min_q, min_ms, server_ns, ss_pct, ms_pct,
             ms_spq) = embedded[f"{bench.loadgen_model}.{tree}"]
            fixed = rules.fixed_settings(name, scenario)
            where = (round_name, name, tree)
            assert equal == bench.equal_issue, where
            assert tokens == (bench.token_latencies or llm), where
            assert (psc or bench.dataset_size) == fixed["loadgen.performance_sample_count"], where
            if name in CHECKER_MIN_QUERIES:
                assert fixed["loadgen.min_query_count"] >= min_q, where
                assert min_ms == fixed["loadgen.min_duration_ms"], where
            else:
                assert (min_q, min_ms) == (fixed["loadgen.min_query_count"],
                                           fixed["loadgen.min_duration_ms"]), where
            if scenario is Scenario.SERVER and not llm:
                assert server_ns == fixed["loadgen.latency_bound_ms"] * 1_000_000, where
            if scenario is Scenario.SINGLE_STREAM:
                assert ss_pct * 100 == fixed["loadgen.target_latency_percentile"], where
            if scenario is Scenario.MULTI_STREAM:
                assert (ms_pct * 100, ms_spq) == (fixed["loadgen.target_latency_percentile"],
                                                  fixed["loadgen.samples_per_query"]), where
            checked += 1
    assert checked >= 4 * (len(ROUNDS["v6.0"]) + len(ROUNDS["v6.1"]))
