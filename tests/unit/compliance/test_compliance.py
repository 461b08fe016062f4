"""Compliance verdicts read the right record (issue 14, item 6): validity comes from the
performance test wherever it sits in ``tests``, and TEST01 compares whole responses,
not their first value. Unit tests of the verification layer on recorded results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from suite.compliance import get_test
from suite.compliance.base import performance_verdict
from suite.paths import find_paths
from suite.results import RunResult


def _perf(value: float) -> dict[str, Any]:
    return {"scenario": "offline", "metric_key": "result_samples_per_second",
            "metric_name": "samples/s", "metric_value": value, "unit": "samples/s",
            "result_validity": "VALID", "min_duration_met": True, "min_queries_met": True,
            "perf_constraints_met": True, "early_stopping_met": None,
            "early_stopping_result": None, "invalid_reason": None, "num_errors": 0,
            "errors": [], "query_count": 1, "latency_ns": {}, "effective": {},
            "loadgen_version": "5"}


def _result(run_dir: Path, *, perf_status: str = "VALID", value: float = 100.0,
            accuracy_first: bool = True, submittable: bool = False,
            compliance: str | None = None) -> RunResult:
    acc = {"mode": "accuracy", "directory": "accuracy", "status": "VALID", "exit_code": 0}
    perf = {"mode": "performance", "directory": "performance", "status": perf_status,
            "exit_code": 0, "performance": _perf(value)}
    return RunResult.model_validate({
        "run_id": run_dir.name, "run_dir": str(run_dir), "created_utc": "x",
        "benchmark": "digits", "scenario": "offline", "mode": "all", "backend": "null",
        "round": "v6.1", "model_sha256": "0" * 64, "submittable": submittable,
        "non_submittable_reasons": [], "status": "VALID", "exit_code": 0,
        "compliance": {"test": compliance, "reference_run": "r", "passed": True,
                       "verdicts": {}, "evidence": {}, "attempt": 1,
                       "previous_attempts": []} if compliance else None,
        "tests": [acc, perf] if accuracy_first else [perf, acc]})


def _saved(runs: Path, name: str, **kwargs: Any) -> RunResult:
    """A result written as ``runs/<name>/result.json``, where the spread is looked up."""
    result = _result(runs / name, **kwargs)
    (runs / name).mkdir(parents=True)
    (runs / name / "result.json").write_text(result.model_dump_json())
    return result


def test_a_short_run_within_the_measured_spread_passes_and_says_why(tmp_path: Path) -> None:
    """Honest short runs moved 16-30 % on a busy machine: with the spread measured over
    the references beside it (here 100, 112, 126: 26 %), a 1.16x TEST01 is noise."""
    ref = _saved(tmp_path, "a", value=100.0)
    _saved(tmp_path, "b", value=112.0)
    _saved(tmp_path, "c", value=126.0)
    comp = _result(tmp_path / "t01", value=116.0)
    verdict = performance_verdict(ref, comp, 0.1, 0.2, {}, two_sided=True)
    assert verdict.passed
    assert any("spread measured here: 26.0% over 3" in line for line in verdict.lines)
    assert any("within that spread" in line for line in verdict.lines)
    # A caching SUT twice as fast is beyond any such spread.
    cheat = performance_verdict(ref, _result(tmp_path / "t04", value=200.0), 0.1, 0.2, {},
                                two_sided=False)
    assert not cheat.passed and any("exceeds that spread" in line for line in cheat.lines)


def test_a_submittable_run_keeps_the_official_tolerance(tmp_path: Path) -> None:
    ref = _saved(tmp_path, "a", value=100.0, submittable=True)
    _saved(tmp_path, "b", value=126.0, submittable=True)
    comp = _result(tmp_path / "t01", value=116.0, submittable=True)
    verdict = performance_verdict(ref, comp, 0.1, 0.2, {}, two_sided=True)
    assert not verdict.passed and not any("spread" in line for line in verdict.lines)


def test_one_reference_is_no_measured_spread(tmp_path: Path) -> None:
    ref = _saved(tmp_path, "a", value=100.0)
    _saved(tmp_path, "x", value=300.0, compliance="TEST04")  # compliance runs do not count
    verdict = performance_verdict(ref, _result(tmp_path / "t", value=116.0), 0.1, 0.2, {},
                                  two_sided=True)
    assert not verdict.passed


def test_validity_is_the_performance_tests_not_the_first_tests(tmp_path: Path) -> None:
    reference = _result(tmp_path / "ref")
    invalid = _result(tmp_path / "comp", perf_status="INVALID")  # accuracy test is first
    verdict = performance_verdict(reference, invalid, 0.1, 0.2, {}, two_sided=True)
    assert not verdict.passed and "performance test INVALID" in verdict.lines[1]
    valid = _result(tmp_path / "comp2", accuracy_first=False)
    assert performance_verdict(reference, valid, 0.1, 0.2, {}, two_sided=True).passed


def _log(path: Path, responses: dict[int, np.ndarray]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([{"seq_id": i, "qsl_idx": idx, "data": arr.tobytes().hex()}
                                for i, (idx, arr) in enumerate(responses.items())]))


def test_test01_compares_the_whole_response(tmp_path: Path) -> None:
    """Same first value (the class), different rest: a mismatch, as in the official
    TEST01; the accuracy-delta fallback then decides on top-1."""
    ref_dir, comp_dir = tmp_path / "ref", tmp_path / "comp"
    truth = {i: np.array([i % 3, 7, 7, 7], dtype=np.int64) for i in range(4)}
    _log(ref_dir / "accuracy" / "mlperf_log_accuracy.json", truth)
    tampered = {i: np.array([i % 3, 0, 0, 0], dtype=np.int64) for i in range(4)}
    _log(comp_dir / "performance" / "mlperf_log_accuracy.json", tampered)
    test = get_test("TEST01", find_paths())
    labels = np.array([0, 1, 2, 0])
    verdicts = test.verify(_result(ref_dir), _result(comp_dir), comp_dir, np.int64, labels)
    accuracy = next(v for v in verdicts if v.file == "verify_accuracy.txt")
    assert "num_perf_log_data_mismatch = 4" in accuracy.lines
    assert "num_perf_log_qsl_idx_match = 0" in accuracy.lines
    assert any("accuracy-delta fallback" in line for line in accuracy.lines)
    # identical bytes match
    _log(comp_dir / "performance" / "mlperf_log_accuracy.json", truth)
    verdicts = test.verify(_result(ref_dir), _result(comp_dir), comp_dir, np.int64, labels)
    accuracy = next(v for v in verdicts if v.file == "verify_accuracy.txt")
    assert accuracy.passed and "num_perf_log_qsl_idx_match = 4" in accuracy.lines
