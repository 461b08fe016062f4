"""LINT-FIXED names only overrides that make a run non-submittable: a round's minimum
(``min_query_count``, ``min_duration_ms``) may be raised, as the checker's ``>=`` allows,
and ``--quick``'s own values are said once, as ``--quick``, not as the user's overrides."""

from __future__ import annotations

from pathlib import Path

from suite.config.loader import ConfigRequest, load_config
from suite.config.preflight import lint
from suite.harness.settings import write_settings
from suite.paths import find_paths
from suite.scenarios import Mode


def _fixed(request: ConfigRequest) -> list[str]:
    return [f.key or "" for f in lint(request, find_paths()).findings if f.rule == "LINT-FIXED"]


def test_a_raised_minimum_is_no_override_and_a_lowered_one_is() -> None:
    raised = ConfigRequest(benchmark="tinylm", scenario="server", backend="torch-llm",
                           sets=["loadgen.min_query_count=460",
                                 "loadgen.min_duration_ms=1200000"])
    assert _fixed(raised) == []
    config, _ = load_config(raised, find_paths())
    assert config.submittable, config.non_submittable_reasons
    lowered = ConfigRequest(sets=["loadgen.min_query_count=10"])
    [finding] = [f for f in lint(lowered, find_paths()).findings if f.rule == "LINT-FIXED"]
    assert finding.key == "loadgen.min_query_count"
    assert finding.hint.startswith("drop --set loadgen.min_query_count")


def test_quick_is_one_reason_and_no_lint_fixed() -> None:
    for benchmark, backend in (("digits", "onnxruntime"), ("tinylm", "torch-llm")):
        request = ConfigRequest(benchmark=benchmark, scenario="server", backend=backend,
                                quick=True)
        assert _fixed(request) == [], benchmark
        config, _ = load_config(request, find_paths())
        [reason] = config.non_submittable_reasons
        assert "--quick" in reason


def test_a_value_that_is_no_override_still_reaches_loadgen(tmp_path: Path) -> None:
    # LoadGen reads user.conf over mlperf.conf: a raised minimum and --quick's values must
    # be written there even though neither is an override that costs submittability.
    request = ConfigRequest(benchmark="tinylm", scenario="server", backend="torch-llm",
                            quick=True)
    config, _ = load_config(request, find_paths())
    write_settings(config, Mode.PERFORMANCE, tmp_path)
    user = (tmp_path / "user.conf").read_text(encoding="utf-8")
    assert ".Server.min_query_count = 460" in user
    assert ".Server.min_duration = 2000" in user
    assert "NOT SUBMITTABLE" not in user
