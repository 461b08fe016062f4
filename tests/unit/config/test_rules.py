"""The round's rules file: official values, and agreement with LoadGen's embedded conf."""

from __future__ import annotations

import subprocess
import sys

from suite.config.rules import load_rules
from suite.paths import find_paths
from suite.scenarios import Scenario


def test_resnet50_values_are_the_official_ones() -> None:
    rules = load_rules(find_paths(), "v6.1")
    resnet = rules.benchmark("resnet50")
    assert resnet.accuracy_target == 75.6954
    assert resnet.performance_sample_count == 1024
    fixed = rules.fixed_settings("resnet50", Scenario.SERVER)
    assert fixed["loadgen.latency_bound_ms"] == 15
    assert fixed["loadgen.min_duration_ms"] == 600_000
    assert rules.fixed_settings("resnet50", Scenario.OFFLINE)["loadgen.min_query_count"] == 24576
    multi = rules.fixed_settings("resnet50", Scenario.MULTI_STREAM)
    assert (multi["loadgen.samples_per_query"], multi["loadgen.min_query_count"]) == (8, 662)


def test_seeds_and_durations_match_loadgens_embedded_mlperf_conf() -> None:
    # A subprocess: FromConfig's process-global counter must not leak into other tests.
    code = (
        "import mlperf_loadgen as lg\n"
        "ts = lg.TestSettings(); ts.FromConfig('', 'resnet50', 'Server', 0)\n"
        "print(ts.qsl_rng_seed, ts.sample_index_rng_seed, ts.schedule_rng_seed, "
        "ts.min_duration_ms, ts.server_target_latency_ns, ts.performance_sample_count_override)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    rules = load_rules(find_paths(), "v6.1")
    seeds = rules.seeds
    assert [int(v) for v in out[:3]] == [seeds.qsl_rng_seed, seeds.sample_index_rng_seed,
                                         seeds.schedule_rng_seed]
    fixed = rules.fixed_settings("resnet50", Scenario.SERVER)
    assert int(out[3]) == fixed["loadgen.min_duration_ms"]
    assert int(out[4]) == fixed["loadgen.latency_bound_ms"] * 1_000_000
    assert int(out[5]) == fixed["loadgen.performance_sample_count"]


def test_each_round_table_holds_every_model_the_checker_needs() -> None:
    """The [models.*] tables: every target metric has a pattern, every LLM its Server
    token bounds, and our benchmarks agree with their model row (one source of truth
    for compliance: digits TEST01 only, resnet50 TEST01 + TEST04)."""
    import pytest

    for round_name, must in (("v6.0", {"llama2-70b-99", "mixtral-8x7b", "retinanet"}),
                             ("v6.1", {"qwen3.6-27b", "e2e-rag-qna"})):
        rules = load_rules(find_paths(), round_name)
        assert rules.submission is not None
        assert must <= set(rules.models)
        for name, model in rules.models.items():
            metrics = set(model.targets) | set(model.upper_limits)
            assert metrics <= set(rules.submission.accuracy_patterns), name
            if model.llm and name != "llama3.1-8b-edge":
                assert "Server" in model.token_latency_ns, name
        for key, bench in rules.benchmarks.items():
            row = rules.models[bench.checker_model]
            assert bench.compliance_tests == row.compliance_tests, key
            assert bench.performance_sample_count == row.performance_sample_count
            assert bench.accuracy_target == pytest.approx(row.targets[bench.accuracy_metric])
        assert rules.benchmarks["digits"].compliance_tests == ["TEST01"]
        assert rules.benchmarks["resnet50"].compliance_tests == ["TEST01", "TEST04"]
        llama = rules.models["llama2-70b-99.9"]
        assert llama.token_latency_ns["Interactive"].ttft == 450_000_000
        assert llama.one_of_scenarios["datacenter"] == [["Interactive", "Server"]]
