"""The figure ``suite check`` reports for the round's tensor benchmarks is the one the
official checker reads: whisper's Offline result is tokens/s
(``RESULT_FIELD_BENCHMARK_OVERWRITE``), the others keep their scenario's own figure."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from suite.checker.walk import _metric
from suite.config.rules import load_rules
from suite.paths import find_paths
from suite.scenarios import SPECS, Scenario


def _figure(round_name: str, model: str, scenario: Scenario) -> tuple[str, str, bool]:
    rules = load_rules(find_paths(), round_name)
    ctx = SimpleNamespace(scenario=scenario, model=rules.models[model],
                          dir_scenario=scenario.loadgen_name)
    return _metric(cast(Any, ctx))


def test_whisper_offline_is_tokens_per_second_in_both_rounds() -> None:
    for round_name in ("v6.0", "v6.1"):
        assert _figure(round_name, "whisper", Scenario.OFFLINE) == (
            "result_tokens_per_second", "tokens/s", False)


def test_the_other_tensor_benchmarks_keep_their_scenarios_figure() -> None:
    for model, scenario in (("bert-99", Scenario.OFFLINE), ("3d-unet-99.9", Scenario.OFFLINE),
                            ("yolo-95", Scenario.MULTI_STREAM),
                            ("whisper", Scenario.SINGLE_STREAM)):
        spec = SPECS[scenario]
        assert _figure("v6.1", model, scenario) == (
            spec.metric_key, spec.metric_name, spec.unit == "ms"), model
    assert _figure("v6.1", "llama3.1-8b", Scenario.OFFLINE)[0] == "result_tokens_per_second"
