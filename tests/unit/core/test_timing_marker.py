"""The ``timing`` marker reports a missed latency or throughput figure, nothing else: the
hook of tests/support/timing.py, run by pytester on tests written for it (issue 35)."""

from __future__ import annotations

import pytest

from suite.results import PerformanceSummary, RunResult, Status, TestResult
from tests.support.timing import REASON, TimingMiss, invalid_only_by_timing, timing_assert

TESTS = '''
import pytest
from tests.support.timing import timing_assert

@pytest.mark.timing
def test_key_error():
    {}["missing"]

@pytest.mark.timing
def test_functional_assert():
    exit_code = 1
    assert exit_code in (0, 2), "the run failed"

@pytest.mark.timing
def test_miss():
    timing_assert(12.5 < 10, "p99 12.5 ms > 10 ms bound")

def test_miss_without_the_marker():
    timing_assert(False, "p99 12.5 ms > 10 ms bound")

@pytest.mark.timing
def test_met():
    timing_assert(True, "never shown")
'''


def _run(pytester: pytest.Pytester) -> pytest.RunResult:
    pytester.makeini("[pytest]\nmarkers =\n    timing: a latency or throughput figure\n")
    pytester.makepyfile(test_hook=TESTS)
    return pytester.runpytest("-p", "tests.support.timing", "-rxXfE")


def test_a_missed_figure_is_xfail_and_every_other_failure_fails(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SUITE_TIMING_GATE", raising=False)
    result = _run(pytester)
    outcomes = {r.nodeid.rsplit("::", 1)[1]: r.outcome for r in
                result.reprec.getreports("pytest_runtest_logreport")  # type: ignore[attr-defined]
                if r.when == "call"}
    assert outcomes == {"test_key_error": "failed", "test_functional_assert": "failed",
                        "test_miss": "skipped", "test_miss_without_the_marker": "failed",
                        "test_met": "passed"}
    result.assert_outcomes(failed=3, xfailed=1, passed=1)
    result.stdout.fnmatch_lines([
        f"XFAIL test_hook.py::test_miss - {REASON}p99 12.5 ms > 10 ms bound",
        "FAILED test_hook.py::test_key_error - KeyError*",
        "FAILED test_hook.py::test_functional_assert - AssertionError: the run failed*",
    ])


def test_suite_timing_gate_makes_a_miss_fail(pytester: pytest.Pytester,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUITE_TIMING_GATE", "1")
    result = _run(pytester)
    result.assert_outcomes(failed=4, passed=1)
    result.stdout.fnmatch_lines(["FAILED test_hook.py::test_miss - *TimingMiss: p99 12.5 ms*"])


def test_timing_assert_raises_a_timing_miss_only_on_a_miss() -> None:
    timing_assert(1 < 2, "not raised")
    with pytest.raises(TimingMiss, match=r"^too slow$"):
        timing_assert(0, "too slow")
    assert issubclass(TimingMiss, AssertionError)  # it fails an unmarked test like an assert


def _perf(**met: bool) -> PerformanceSummary:
    conditions = {"min_duration_met": True, "min_queries_met": True,
                  "perf_constraints_met": True, "early_stopping_met": True} | met
    return PerformanceSummary(
        scenario="Server", metric_key="k", metric_name="m", metric_value=1.0, unit="QPS",
        result_validity="VALID" if all(conditions.values()) else "INVALID",
        early_stopping_result=None, invalid_reason=None, num_errors=0, errors=[],
        query_count=1, latency_ns={}, effective={}, loadgen_version=None, **conditions)


def _result(*tests: TestResult) -> RunResult:
    worst = max((t.status for t in tests), key=list(Status).index)
    return RunResult.model_construct(benchmark="digits", scenario="server", tests=list(tests),
                                     compliance=None, status=worst)


def _test(status: Status, mode: str = "performance", **fields: object) -> TestResult:
    return TestResult(status=status, mode=mode, directory="d", exit_code=0,
                      **fields)  # type: ignore[arg-type]


def test_only_a_speed_condition_makes_an_invalid_run_a_timing_miss() -> None:
    valid = _test(Status.VALID, performance=_perf())
    slow = _test(Status.INVALID, performance=_perf(perf_constraints_met=False))
    assert invalid_only_by_timing([_result(valid)]) == []
    assert invalid_only_by_timing([_result(valid, slow)]) == [
        "digits server performance: latency bound exceeded"]
    errors = _test(Status.INVALID, performance=_perf(perf_constraints_met=False).model_copy(
        update={"num_errors": 2, "errors": ["e"]}))
    unexplained = _test(Status.INVALID, performance=_perf())
    failed = _test(Status.FAILED, performance=None, message="the backend raised")
    for test, why in ((errors, "LoadGen logged 2 error"), (unexplained, "every speed"),
                      (failed, "FAILED: the backend raised")):
        with pytest.raises(AssertionError, match=why) as caught:
            invalid_only_by_timing([_result(valid, test)])
        assert not isinstance(caught.value, TimingMiss)
