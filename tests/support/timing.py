"""The ``timing`` marker, and the one failure it may report instead of failing.

A test whose verdict rests on a latency or throughput figure carries ``@pytest.mark.timing``
and asserts that figure with ``timing_assert``: on a shared 2-core machine (CI, a busy
laptop) the figure can miss for reasons outside the code, so a ``TimingMiss`` raised in a
``timing``-marked test is reported as ``XFAIL timing (reported, not gating): <message>``
instead of failing the session. ``SUITE_TIMING_GATE=1`` makes it fail again (a quiet
machine).

Nothing else is converted: a ``KeyError``, a plain ``assert`` of a functional fact (an
exit code, a record, a file), a ``TimingMiss`` in a test without the marker, or any failure
in a fixture fails the test as usual. So a timing test asserts its functional facts with a
plain ``assert`` before its timing figure, and a run's INVALID verdict is a timing miss
only once ``invalid_only_by_timing`` found nothing but speed behind it.

Loaded as a plugin by ``tests/conftest.py``; ``tests/unit/core/test_timing_marker.py``
runs the hook on tests of its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any, NoReturn

import pytest

from suite.results import RunResult, Status, TestResult

#: The environment variable that makes a timing miss fail the session.
GATE = "SUITE_TIMING_GATE"
#: The start of a timing miss's XFAIL reason (pytest prints ``XFAIL <test> - <reason>``).
REASON = "timing (reported, not gating): "


class TimingMiss(AssertionError):
    """A latency or throughput figure missed its bound on this machine."""


def timing_assert(condition: object, message: str) -> None:
    """Assert a latency or throughput figure (never a functional fact): a miss is a
    ``TimingMiss``, reported as XFAIL in a ``timing``-marked test."""
    if not condition:
        raise TimingMiss(message)


def timing_miss(message: str) -> NoReturn:
    """A figure already known to have missed (a run INVALID on every attempt)."""
    raise TimingMiss(message)


# LoadGen's four conditions of a VALID performance test, all of them about speed: a run
# too short (the SUT faster or slower than the settings assumed), too few queries in the
# time, a latency bound exceeded, early stopping unmet (too many queries over the bound).
_SPEED_CONDITIONS = {
    "min_duration_met": "min duration not met",
    "min_queries_met": "min query count not met",
    "perf_constraints_met": "latency bound exceeded",
    "early_stopping_met": "early stopping not satisfied",
}


def _test_problems(run: str, test: TestResult) -> Iterator[tuple[bool, str]]:
    """(is it a matter of speed, what) for each reason ``test`` is not VALID."""
    where = f"{run} {test.mode}"
    if test.status is Status.VALID:
        return
    perf = test.performance
    if test.status is not Status.INVALID or test.mode != "performance" or perf is None:
        acc = test.accuracy
        detail = (f"accuracy {acc.value} < {acc.target}" if acc is not None and not acc.passed
                  else test.message or "no performance record")
        yield False, f"{where} is {test.status.value}: {detail}"
        return
    if perf.num_errors:
        yield False, f"{where}: LoadGen logged {perf.num_errors} error(s): {perf.errors[:3]}"
    missed = [text for field, text in _SPEED_CONDITIONS.items()
              if getattr(perf, field) is False]
    if not missed:
        yield False, f"{where} is INVALID with every speed condition met ({perf.invalid_reason})"
    for text in missed:
        yield True, f"{where}: {text}"


def invalid_only_by_timing(results: Iterable[RunResult]) -> list[str]:
    """Why ``results`` are not all VALID, if that is speed alone: every test that is not
    VALID is a performance test LoadGen judged INVALID on a speed condition only, with no
    LoadGen error. Any other reason (a FAILED or INTERRUPTED test, an accuracy below its
    target, LoadGen errors, a failed compliance accuracy verdict, an INVALID without a failed speed
    condition) is a plain ``AssertionError``: a functional failure, never a timing XFAIL.
    Returns the speed reasons, empty when every test is VALID."""
    speed: list[str] = []
    other: list[str] = []
    for result in results:
        run = f"{result.benchmark} {result.scenario}"
        for is_speed, text in (p for t in result.tests for p in _test_problems(run, t)):
            (speed if is_speed else other).append(text)
        comp = result.compliance
        for file, verdict in (comp.verdicts.items() if comp is not None else ()):
            if verdict != "TEST PASS":  # verify_performance.txt compares two runs' speed
                (speed if file == "verify_performance.txt" else other).append(
                    f"{run} {result.mode}: {file} {verdict}")
        if result.status is not Status.VALID and not speed and not other:
            other.append(f"{run} is {result.status.value} with every test VALID")
    assert not other, "not VALID for a reason other than speed: " + "; ".join(other)
    return speed


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    outcome = yield
    report = outcome.get_result()
    if (call.when == "call" and report.failed and call.excinfo is not None
            and isinstance(call.excinfo.value, TimingMiss)
            and item.get_closest_marker("timing") is not None
            and os.environ.get(GATE) != "1"):
        lines = str(call.excinfo.value).strip().splitlines()
        report.outcome = "skipped"
        report.wasxfail = f"{REASON}{(lines[0] if lines else '')[:300]}"


def performance_valid_or_timing(result: RunResult) -> None:
    """A run's performance test (its first) is VALID, or a reported timing miss when
    speed alone made it INVALID: a quick run's VALID depends on the machine. The run's other
    tests (accuracy, a compliance verdict) are judged by the caller."""
    performance = result.tests[0]
    assert performance.mode == "performance", performance.mode
    alone = result.model_copy(update={"tests": [performance], "status": performance.status,
                                      "compliance": None})
    speed = invalid_only_by_timing([alone])
    timing_assert(not speed, "; ".join(speed))
    assert performance.status is Status.VALID
