"""The pre-flight predicts an equal-issue SingleStream test as LoadGen sizes it
(``test_settings_internal.cc``, mlcommons/inference @ b66003e1): at least twice the
duration's queries at the expected latency, padded past the next whole permutation of the
performance samples; a benchmark without equal issue keeps the duration's count. And it
warns where a submittable Offline query would hold fewer samples than the checker wants."""

from __future__ import annotations

from suite.config.loader import ConfigRequest, load_config
from suite.config.preflight import predict
from suite.paths import find_paths


def _predict(benchmark: str) -> tuple[int, float]:
    request = ConfigRequest(benchmark=benchmark, scenario="singlestream",
                            sets=["loadgen.expected_latency_ms=100"])
    return predict(load_config(request, find_paths())[0])


def test_equal_issue_singlestream_runs_twice_the_duration_padded() -> None:
    # 2 x 600 s / 0.1 s = 12000 queries; 12000 % 43 = 3, so 40 more: 12040 (1204 s)
    assert _predict("3d-unet-99") == (12040, 1204.0)
    # whisper: 12000 % 1633 = 569, so 1064 more
    assert _predict("whisper") == (13064, 1306.4)
    assert _predict("bert-99") == (6000, 600.0)  # no equal issue: the duration's count


def _lint_rules(benchmark: str, *sets: str, quick: bool = False) -> set[str]:
    from suite.config.preflight import lint

    request = ConfigRequest(benchmark=benchmark, scenario="offline", sets=list(sets),
                            quick=quick)
    return {f.rule for f in lint(request, find_paths()).findings}


def test_an_offline_query_below_the_checkers_minimum_is_flagged() -> None:
    # yolo: LoadGen's minimum is 100, the checker's 1525; 1.1 x 600 s x 2/s = 1320 samples
    assert "LINT-OFFLINE-MIN" in _lint_rules("yolo-95", "loadgen.expected_qps=2")
    assert "LINT-OFFLINE-MIN" not in _lint_rules("yolo-95", "loadgen.expected_qps=3")
    raised = _lint_rules("yolo-99", "loadgen.expected_qps=2", "loadgen.min_query_count=1525")
    assert raised.isdisjoint({"LINT-OFFLINE-MIN", "LINT-FIXED"})
    assert "LINT-OFFLINE-MIN" not in _lint_rules("resnet50", "loadgen.expected_qps=2")
    assert "LINT-OFFLINE-MIN" not in _lint_rules("yolo-95", "loadgen.expected_qps=2",
                                                 quick=True)  # not submittable anyway
