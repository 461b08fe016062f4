"""Config layering, provenance, and bad-input errors (before any run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from suite.config.loader import ConfigRequest, load_config
from suite.errors import ConfigError
from suite.paths import Paths
from tests.conftest import run_cli


def test_layers_apply_in_documented_order(paths: Paths, tmp_path: Path) -> None:
    user = tmp_path / "user.toml"
    user.write_text(
        "[sut]\nmax_wait_us = 700\n"
        "[benchmarks.digits.sut]\nworkers = 1\n"
        "[scenarios.server.loadgen]\ntarget_qps = 1500.0\n"
    )
    config, _ = load_config(
        ConfigRequest(scenario="server", quick=True, config_file=user,
                      sets=["sut.max_batch_size=8"],
                      flags={"sut.workers": (2, "--workers")}),
        paths,
    )
    prov = config.provenance
    assert prov["loadgen.latency_bound_ms"] == "run_rules/v6.1.toml"
    assert prov["loadgen.min_duration_ms"] == "scenarios/server.toml [quick]"
    assert config.loadgen.target_qps == 1500.0
    assert prov["loadgen.target_qps"] == f"{user} [scenarios.server]"
    assert (config.sut.max_wait_us, prov["sut.max_wait_us"]) == (700, str(user))
    assert config.sut.max_batch_size == 8
    assert prov["sut.max_batch_size"] == "--set sut.max_batch_size"
    assert (config.sut.workers, prov["sut.workers"]) == (2, "--workers")
    assert prov["sut.heartbeat_s"] == "default"


def test_benchmark_table_overrides_scenario_defaults(paths: Paths) -> None:
    config, _ = load_config(ConfigRequest(scenario="offline"), paths)
    assert config.provenance["loadgen.expected_qps"] == "scenarios/offline.toml [benchmarks.digits]"
    assert config.provenance["backend.onnxruntime.intra_op_threads"] == "scenarios/offline.toml"
    assert config.backend_options["intra_op_threads"] == 1


def test_official_config_is_submittable_and_overrides_are_not(paths: Paths) -> None:
    official, _ = load_config(ConfigRequest(scenario="server"), paths)
    assert official.submittable
    assert official.loadgen.min_duration_ms == 600_000
    quick, _ = load_config(ConfigRequest(scenario="server", quick=True), paths)
    assert not quick.submittable
    assert any("--quick" in reason for reason in quick.non_submittable_reasons)
    changed, _ = load_config(
        ConfigRequest(scenario="server", sets=["loadgen.latency_bound_ms=50"]), paths)
    assert "loadgen.latency_bound_ms" in changed.overridden_rules
    assert "50" in changed.overridden_rules["loadgen.latency_bound_ms"]


@pytest.mark.parametrize(
    ("request_kwargs", "message", "suggestion"),
    [
        ({"scenario": "sever"}, "unknown scenario 'sever'", "server"),
        ({"backend": "onnxruntim"}, "unknown backend 'onnxruntim'", "onnxruntime"),
        ({"benchmark": "digit"}, "unknown benchmark 'digit'", "digits"),
        ({"mode": "acuracy"}, "unknown mode 'acuracy'", "accuracy"),
        ({"round": "v6.2"}, "unknown round 'v6.2'", "v6.1"),
        ({"sets": ["loadgen.target_qs=5"]}, "unknown key 'loadgen.target_qs'",
         "loadgen.target_qps"),
        ({"sets": ["loadgen.target_qps=fast"]}, "loadgen.target_qps = 'fast'", ""),
        ({"sets": ["sut.workers=1.5"]}, "sut.workers", ""),
        ({"sets": ["backend.onnxruntime.intra_op_thread=2"]},
         "unknown key 'backend.onnxruntime.intra_op_thread'", "intra_op_threads"),
    ],
)
def test_bad_input_names_the_key_and_suggests(paths: Paths, request_kwargs: dict[str, object],
                                              message: str, suggestion: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(ConfigRequest(**request_kwargs), paths)  # type: ignore[arg-type]
    assert message in info.value.message
    assert suggestion in info.value.hint


def test_unknown_key_in_a_file_names_the_file(paths: Paths, tmp_path: Path) -> None:
    user = tmp_path / "mine.toml"
    user.write_text("[sut]\nmax_batch = 4\n")
    with pytest.raises(ConfigError) as info:
        load_config(ConfigRequest(config_file=user), paths)
    assert str(user) in info.value.message and "sut.max_batch" in info.value.message
    assert "sut.max_batch_size" in info.value.hint


def test_wrong_type_in_a_file_names_file_and_key(paths: Paths, tmp_path: Path) -> None:
    user = tmp_path / "mine.toml"
    user.write_text('[loadgen]\nmin_duration_ms = "ten minutes"\n')
    with pytest.raises(ConfigError) as info:
        load_config(ConfigRequest(config_file=user), paths)
    assert str(user) in info.value.message and "loadgen.min_duration_ms" in info.value.message


def test_every_scenario_file_resolves_for_every_benchmark_and_backend(paths: Paths) -> None:
    for scenario in ("singlestream", "multistream", "server", "offline"):
        for backend in ("null", "onnxruntime"):
            for quick in (False, True):
                config, rules = load_config(
                    ConfigRequest(scenario=scenario, backend=backend, quick=quick), paths)
                assert config.scenario.value == scenario
                assert set(rules.fixed_settings("digits", config.scenario)) <= set(
                    config.provenance)


def test_cli_usage_error_exits_1(runs_dir: Path) -> None:
    proc = run_cli("run", "--no-such-flag")
    assert proc.returncode == 1
    assert "no-such-flag" in proc.stderr

