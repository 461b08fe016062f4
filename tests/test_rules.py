"""The round's rules file: official values, and agreement with LoadGen's embedded conf."""

from __future__ import annotations

import subprocess
import sys

from suite.paths import find_paths
from suite.rules import load_rules
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
