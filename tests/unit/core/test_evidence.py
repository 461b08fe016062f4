"""Parsing LoadGen's logs, decoding the accuracy log, run directories, import cost."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from suite.accuracy import decode_accuracy_log, score_top1
from suite.errors import SuiteError
from suite.harness.runner import create_run_dir
from suite.logs import parse_detail_log
from suite.results import summarize_performance
from suite.scenarios import Scenario


def _mllog(key: str, value: object, error: bool = False) -> str:
    record = {"key": key, "value": value, "time_ms": 1.0, "namespace": "mlperf::logging",
              "event_type": "POINT_IN_TIME",
              "metadata": {"is_error": error, "is_warning": False, "file": "x", "line_no": 1,
                           "pid": 1, "tid": 1}}
    return ":::MLLOG " + json.dumps(record)


def test_detail_log_first_value_wins_and_errors_are_counted(tmp_path: Path) -> None:
    path = tmp_path / "mlperf_log_detail.txt"
    path.write_text("\n".join([
        _mllog("result_validity", "VALID"),
        _mllog("result_samples_per_second", 1234.5),
        _mllog("result_samples_per_second", 1.0),
        _mllog("error_runtime", "Attempted to complete a sample twice.", error=True),
        "garbage line",
        ":::MLLOG {not json",
        _mllog("num_errors", 1),
    ]) + "\n")
    log = parse_detail_log(path)
    assert log.values["result_samples_per_second"] == 1234.5
    assert log.errors == ["error_runtime: Attempted to complete a sample twice."]
    assert log.malformed_lines == 2
    summary = summarize_performance(log, Scenario.OFFLINE)
    assert summary.metric_value == 1234.5
    assert summary.num_errors == 1
    assert not summary.is_valid  # VALID with errors is still a failed run


def test_latency_metrics_are_converted_from_ns(tmp_path: Path) -> None:
    path = tmp_path / "mlperf_log_detail.txt"
    path.write_text(_mllog("early_stopping_latency_ss", 2_500_000) + "\n"
                    + _mllog("result_90.00_percentile_latency_ns", 2_400_000) + "\n")
    summary = summarize_performance(parse_detail_log(path), Scenario.SINGLE_STREAM)
    assert summary.metric_value == 2.5 and summary.unit == "ms"
    assert summary.latency_ns["90.00_percentile"] == 2_400_000


def _write_accuracy_log(path: Path, predictions: list[int], order: list[int]) -> None:
    entries = [{"seq_id": seq, "qsl_idx": idx,
                "data": np.array([predictions[idx]], np.int32).tobytes().hex().upper()}
               for seq, idx in enumerate(order)]
    path.write_text(json.dumps(entries))


@settings(deadline=None)  # a busy machine stalls a case now and then; no timing is tested
@given(st.lists(st.integers(0, 9), min_size=1, max_size=60), st.randoms())
def test_decode_recovers_every_prediction_in_any_order(predictions: list[int],
                                                      rng: object) -> None:
    import random
    import tempfile

    order = list(range(len(predictions)))
    assert isinstance(rng, random.Random)
    rng.shuffle(order)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mlperf_log_accuracy.json"
        _write_accuracy_log(path, predictions, [*order, *order[:3]])  # duplicates agree
        decoded = decode_accuracy_log(path, np.dtype(np.int32), len(predictions))
    assert decoded.tolist() == predictions


def test_decode_rejects_missing_conflicting_and_truncated(tmp_path: Path) -> None:
    path = tmp_path / "mlperf_log_accuracy.json"
    _write_accuracy_log(path, [1, 2, 3], [0, 1])
    with pytest.raises(SuiteError, match="1 of 3 samples have no response"):
        decode_accuracy_log(path, np.dtype(np.int32), 3)
    entries = [*json.loads(path.read_text()), {"seq_id": 9, "qsl_idx": 0, "data": "05000000"}]
    path.write_text(json.dumps(entries))
    with pytest.raises(SuiteError, match="two different responses"):
        decode_accuracy_log(path, np.dtype(np.int32), 2)
    path.write_text("[")
    with pytest.raises(SuiteError, match="not valid JSON"):
        decode_accuracy_log(path, np.dtype(np.int32), 2)


def test_score_writes_accuracy_txt_and_judges_the_target(tmp_path: Path) -> None:
    _write_accuracy_log(tmp_path / "mlperf_log_accuracy.json", [0, 1, 2, 9], [0, 1, 2, 3])
    labels = np.array([0, 1, 2, 3])
    result = score_top1(tmp_path, labels, np.dtype(np.int32), 70.0, [])
    assert (result.good, result.total, result.value, result.passed) == (3, 4, 75.0, True)
    assert (tmp_path / "accuracy.txt").read_text().startswith("accuracy=75.000%, good=3, total=4\n")
    assert not score_top1(tmp_path, labels, np.dtype(np.int32), 80.0, []).passed
    assert not score_top1(tmp_path, labels, np.dtype(np.int32), 70.0, ["error_runtime: x"]).passed


def test_run_directories_are_never_reused(tmp_path: Path) -> None:
    made = {create_run_dir(tmp_path, "digits", "offline", "all") for _ in range(5)}
    assert len(made) == 5
    assert all(p.name.startswith(tuple("0123456789")) for p in made)


def test_import_suite_loads_no_framework() -> None:
    code = ("import sys, suite, suite.cli.app; heavy = {'mlperf_loadgen', 'onnxruntime', 'torch', "
            "'sklearn', 'tensorrt', 'pycuda'} & set(sys.modules); print(sorted(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"
