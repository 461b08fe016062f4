"""The pre-flight linter catches misspelled keys, unit slips, ignored and fixed
overrides before any run starts (the library call). That ``suite run`` stops on its
errors is in tests/integration/test_preflight.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from suite.config import preflight
from suite.config.loader import ConfigRequest
from suite.config.preflight import lint
from suite.paths import find_paths


def _rules(request: ConfigRequest) -> dict[str, str]:
    return {f.rule: f.hint or f.message for f in lint(request, find_paths()).findings}


def test_misspelled_key_gets_a_suggestion(tmp_path: Path) -> None:
    user = tmp_path / "user.toml"
    user.write_text("[scenarios.server.loadgen]\ntarget_qsp = 100.0\n")
    found = _rules(ConfigRequest(scenario="server", config_file=user))
    assert "loadgen.target_qps" in found["LINT-UNKNOWN-KEY"]


def test_ms_vs_ns_slip_is_flagged() -> None:
    found = _rules(ConfigRequest(scenario="server", sets=["loadgen.latency_bound_ms=15000000"]))
    assert "did you mean 15" in found["LINT-UNIT"]


def test_override_of_a_round_fixed_value_is_not_submittable() -> None:
    report = lint(ConfigRequest(sets=["loadgen.min_duration_ms=60000"]), find_paths())
    fixed = [f for f in report.findings if f.rule == "LINT-FIXED"]
    assert fixed and "not submittable" in fixed[0].message
    assert report.predicted_queries == 1 and report.predicted_seconds is not None


def test_ignored_override_and_clean_config() -> None:
    assert "LINT-IGNORED" in _rules(ConfigRequest(scenario="offline",
                                                  sets=["loadgen.target_qps=5.0"]))
    assert _rules(ConfigRequest(scenario="server")) == {}



def test_more_workers_than_the_cores_serve_is_flagged_and_an_absurd_count_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight.os, "cpu_count", lambda: 2)
    found = _rules(ConfigRequest(sets=["sut.workers=17"]))
    assert found["LINT-WORKERS"] == "use at most 16; `suite tune` finds the best count"
    assert "LINT-WORKERS" not in _rules(ConfigRequest(sets=["sut.workers=16"]))
    report = lint(ConfigRequest(sets=["sut.workers=2000"]), find_paths())
    [error] = report.errors  # issue 28: 2,000 workers on 2 cores never finished a 1 s test
    assert error.rule == "LINT-CONFIG" and "less than or equal to 256" in error.message
