"""What ``suite package`` chooses, from hand-built records (issue 28, item 5): a run
without its metric is no candidate, an LLM run is chosen by the tokens/s it is stated by,
a record without a division is refused, and only a passing compliance attempt is packaged.

The run directories hold only ``result.json`` (and a compliance run's verification file),
so ``suite check`` fails them as run directories; the tests select with ``unofficial``,
which keeps such runs and lists the reasons, or read the reasons of the refusal.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from suite.config.rules import load_rules
from suite.errors import SuiteError
from suite.paths import find_paths
from suite.submission.compliance_tree import copy_compliance as _copy_compliance
from suite.submission.package import select_runs
from suite.submission.safety import Precision

RULES = load_rules(find_paths(), "v6.1")
FP32 = {"name": "onnxruntime", "precision": "fp32", "weight_transformations": "none"}


def _perf(scenario: str, value: float | None, tokens: dict[str, float] | None = None
          ) -> dict[str, Any]:
    latency = scenario in ("singlestream", "multistream")
    return {"scenario": scenario, "metric_key": "k", "metric_name":
            "90th percentile latency (ms)" if latency else "samples per second",
            "metric_value": value, "unit": "ms" if latency else "samples/s",
            "result_validity": "VALID", "min_duration_met": True, "min_queries_met": True,
            "perf_constraints_met": True, "early_stopping_met": True,
            "early_stopping_result": None, "invalid_reason": None, "num_errors": 0,
            "errors": [], "query_count": 1, "latency_ns": {}, "effective": {},
            "loadgen_version": "6.0", "tokens": tokens or {}}


def write_run(runs: Path, name: str, *, benchmark: str = "digits", scenario: str = "offline",
              value: float | None = 1.0, tokens: dict[str, float] | None = None,
              compliance: dict[str, Any] | None = None, drop: tuple[str, ...] = (),
              **fields: Any) -> Path:
    """A run directory holding a ``result.json`` with these records."""
    run_dir = runs / name
    run_dir.mkdir(parents=True)
    tests = [{"mode": "performance", "directory": str(run_dir / "performance"),
              "status": "VALID", "exit_code": 0, "backend": FP32,
              "performance": _perf(scenario, value, tokens)}]
    if compliance is None:
        tests.append({"mode": "accuracy", "directory": str(run_dir / "accuracy"),
                      "status": "VALID", "exit_code": 0, "backend": FP32})
    record: dict[str, Any] = {
        "schema_version": 2, "run_id": name, "run_dir": str(run_dir), "created_utc": "x",
        "benchmark": benchmark, "scenario": scenario, "mode": "all", "backend": "onnxruntime",
        "round": "v6.1", "model_sha256": "0" * 64, "division": "closed", "submittable": True,
        "non_submittable_reasons": [], "status": "VALID", "exit_code": 0, "tests": tests,
        "compliance": compliance, **fields}
    for key in drop:
        record.pop(key)
    (run_dir / "result.json").write_text(json.dumps(record))
    return run_dir


def _compliance(test: str, passed: bool, attempt: int, reference: Path) -> dict[str, Any]:
    return {"test": test, "reference_run": str(reference), "passed": passed,
            "verdicts": {"accuracy": "TEST PASS" if passed else "TEST FAIL"},
            "evidence": {}, "attempt": attempt, "previous_attempts": []}


def test_a_run_without_its_metric_is_no_candidate(tmp_path: Path) -> None:
    # SingleStream is a latency: as 0.0, a missing metric ranked best (issue 28)
    write_run(tmp_path, "a_none", scenario="singlestream", value=None)
    write_run(tmp_path, "b_slow", scenario="singlestream", value=5.0)
    selection = select_runs(tmp_path, RULES, unofficial=True)
    assert selection.chosen[("digits", "singlestream")].run.run_id == "b_slow"
    [refused] = [line for line in selection.refused if line.startswith("a_none")]
    assert "recorded no 90th percentile latency (ms)" in refused
    assert "packaged anyway" not in refused


def test_an_llm_run_is_chosen_by_the_tokens_per_second_it_is_stated_by(tmp_path: Path) -> None:
    write_run(tmp_path, "a_more_tokens", benchmark="tinylm", value=10.0,
              tokens={"tokens_per_second": 100.0})
    write_run(tmp_path, "b_more_samples", benchmark="tinylm", value=20.0,
              tokens={"tokens_per_second": 50.0})
    write_run(tmp_path, "c_no_tokens", benchmark="tinylm", value=99.0)
    selection = select_runs(tmp_path, RULES, unofficial=True)
    chosen = selection.chosen[("tinylm", "offline")]
    assert chosen.run.run_id == "a_more_tokens"
    assert (chosen.metric, chosen.value) == ("tokens/s", 100.0)
    assert any(line.startswith("c_no_tokens") and "recorded no tokens/s" in line
               for line in selection.refused)


def test_a_record_without_a_division_is_refused_not_read_as_closed(tmp_path: Path) -> None:
    write_run(tmp_path, "v1_run", drop=("division",), schema_version=1)
    selection = select_runs(tmp_path, RULES, unofficial=True)
    assert not selection.chosen
    [line] = selection.refused
    assert line.startswith("v1_run: result.json records no division")


def test_only_the_newest_passing_compliance_attempt_is_packaged(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    reference = write_run(runs, "a_ref")
    for name, passed, attempt in (("b_test01_pass", True, 1), ("c_test01_fail", False, 2)):
        comp = write_run(runs, name, compliance=_compliance("TEST01", passed, attempt,
                                                            reference))
        (comp / "verify_accuracy.txt").write_text("TEST PASS\n" if passed else "TEST FAIL\n")
    [cand] = select_runs(runs, RULES, unofficial=True).chosen.values()
    out = tmp_path / "out"
    sub = RULES.submission
    assert sub is not None
    lines = _copy_compliance(cand, out, sub, Precision("fp32", "none"), find_paths())
    # the newest attempt failed: the older passing one is packaged, and the README says so
    assert (out / "TEST01" / "verify_accuracy.txt").read_text() == "TEST PASS\n"
    assert any("b_test01_pass" in line and "(packaged)" in line for line in lines)
    assert any("c_test01_fail" in line and "FAIL" in line for line in lines)


def test_a_test_with_no_passing_attempt_refuses_the_run(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    reference = write_run(runs, "a_ref")
    for name, attempt in (("b_test06_fail", 1), ("c_test06_fail", 2)):
        comp = write_run(runs, name, compliance=_compliance("TEST06", False, attempt,
                                                            reference))
        (comp / "verify_accuracy.txt").write_text("TEST06 verification failed\n")
    selection = select_runs(runs, RULES, unofficial=True)
    [line] = [r for r in selection.refused if r.startswith("a_ref")]
    assert "TEST06: no passing attempt (2 failed; the newest is c_test06_fail)" in line
    [cand] = selection.chosen.values()  # --unofficial: packaged, without the failed test
    out = tmp_path / "out"
    sub = RULES.submission
    assert sub is not None
    lines = _copy_compliance(cand, out, sub, Precision("fp32", "none"), find_paths())
    assert not (out / "TEST06").exists()
    assert "TEST06: no attempt passed; none is packaged" in lines


def test_run_names_the_runs_to_package_and_nothing_else(tmp_path: Path) -> None:
    """Issue 40, item 13: packaging chose a synthetic-endpoint run as 'best' with no way to
    name the runs; ``--run`` restricts the candidates to the runs named."""
    write_run(tmp_path, "a_fast", value=500.0)
    write_run(tmp_path, "b_slow", value=5.0)
    assert select_runs(tmp_path, RULES, unofficial=True).chosen[
        ("digits", "offline")].run.run_id == "a_fast"  # by default the best figure
    chosen = select_runs(tmp_path, RULES, unofficial=True, only=["b_slow"]).chosen
    assert [c.run.run_id for c in chosen.values()] == ["b_slow"]
    with pytest.raises(SuiteError, match="--run nosuch: no run directory of that name"):
        select_runs(tmp_path, RULES, unofficial=True, only=["nosuch"])


def _test09_log(run_dir: Path, tokens: int) -> None:
    """A TEST09 run's own accuracy log (beside its performance logs): 3 entries of
    ``tokens`` int32 ids each."""
    perf = run_dir / "performance"
    perf.mkdir(parents=True, exist_ok=True)
    entries = [{"seq_id": i, "qsl_idx": i, "data": "01000000" * tokens} for i in range(3)]
    (perf / "mlperf_log_accuracy.json").write_text(json.dumps(entries))
    (perf / "mlperf_log_detail.txt").write_text(":::MLLOG {}\n")
    (perf / "verify_output_len.txt").write_text("Mean output tokens: x\nTEST PASS\n")


def test_test07_and_test09_land_where_the_official_checker_reads_them(tmp_path: Path) -> None:
    """constants.py TEST07_ACC_PATH/TEST09_ACC_PATH: <result>/TEST07/verify_accuracy.txt,
    <result>/TEST09/verify_output_len.txt; run_verification.py copies the log to
    accuracy/ and the logs to performance/run_1/; truncate_accuracy_log.py writes
    accuracy.txt as the hash= line alone."""
    runs = tmp_path / "runs"
    reference = write_run(runs, "a_ref")
    t07 = write_run(runs, "b_test07", compliance=_compliance("TEST07", True, 1, reference))
    (t07 / "performance").mkdir()
    (t07 / "performance" / "verify_accuracy.txt").write_text("'exact_match': 71.964\nTEST PASS\n")
    (t07 / "performance" / "mlperf_log_accuracy.json").write_text("[]")
    t09 = write_run(runs, "c_test09", compliance=_compliance("TEST09", True, 1, reference))
    _test09_log(t09, 1278)
    [cand] = select_runs(runs, RULES, unofficial=True).chosen.values()
    out, sub = tmp_path / "out", RULES.submission
    assert sub is not None
    _copy_compliance(cand, out, sub, Precision("fp32", "none"), find_paths())
    assert (out / "TEST07" / "verify_accuracy.txt").read_text().endswith("TEST PASS\n")
    assert (out / "TEST09" / "verify_output_len.txt").is_file()
    log = (t09 / "performance" / "mlperf_log_accuracy.json").read_bytes()
    assert (out / "TEST09" / "accuracy" / "accuracy.txt").read_text() == \
        f"hash={hashlib.sha256(log).hexdigest()}\n"
    assert (out / "TEST09" / "performance" / "run_1" / "mlperf_log_detail.txt").is_file()


def test_a_test09_record_its_log_contradicts_is_not_packaged(tmp_path: Path) -> None:
    """A TEST09 record says it passed, but its log's outputs are 100 tokens long: the
    verdict recomputed from the log (mean 100.00 < 1150.38) refuses the package."""
    runs = tmp_path / "runs"
    reference = write_run(runs, "a_ref")
    t09 = write_run(runs, "b_test09", compliance=_compliance("TEST09", True, 1, reference))
    _test09_log(t09, 100)
    [cand] = select_runs(runs, RULES, unofficial=True).chosen.values()
    sub = RULES.submission
    assert sub is not None
    with pytest.raises(SuiteError, match=r"TEST09 recomputed from its log does not pass "
                                         r"\(mean 100.00 tokens\)"):
        _copy_compliance(cand, tmp_path / "out", sub, Precision("fp32", "none"), find_paths())
