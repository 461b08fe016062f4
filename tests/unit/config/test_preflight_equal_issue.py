"""The pre-flight predicts an equal-issue SingleStream test as LoadGen sizes it
(``test_settings_internal.cc``, mlcommons/inference @ b66003e1): at least twice the
duration's queries at the expected latency, padded past the next whole permutation of the
performance samples; a benchmark without equal issue keeps the duration's count."""

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
