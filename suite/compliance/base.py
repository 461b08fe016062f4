"""What every compliance test shares: the audit.config it writes, the stale-file guard,
the reference run, and the verdict files with the official ``TEST PASS``/``TEST FAIL``
markers (the submission checker reads only those markers)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from suite.errors import ConfigError
from suite.results import RunResult, Status, TestResult
from suite.scenarios import Scenario

AUDIT_CONFIG = "audit.config"


@dataclass(frozen=True)
class Verdict:
    """The outcome of one verification file (accuracy or performance)."""

    file: str
    passed: bool
    lines: list[str] = field(default_factory=list)

    def write(self, directory: Path) -> None:
        text = "\n".join([*self.lines, "TEST PASS" if self.passed else "TEST FAIL"]) + "\n"
        (directory / self.file).write_text(text, encoding="utf-8")


class ComplianceTest(Protocol):
    """One compliance test: its audit.config lines and its verification."""

    name: str
    needs_accuracy_reference: bool

    def audit_lines(self, loadgen_model: str) -> list[str]:
        """``*.*.key = value`` lines of its audit.config."""
        ...

    def verify(self, reference: RunResult, compliance: RunResult, run_dir: Path,
               response_dtype: Any, labels: Any) -> list[Verdict]:
        """Compare the compliance run with ``reference`` (files for it go in ``run_dir``)."""
        ...


def audit_text(test: ComplianceTest, loadgen_model: str) -> str:
    return "\n".join([f"# {test.name} audit.config, written by infersuite for this run only",
                      *test.audit_lines(loadgen_model)]) + "\n"


def refuse_stale_audit_configs(places: list[Path]) -> None:
    """Refuse to start while an ``audit.config`` lies where a run could read it."""
    for place in places:
        candidates = [place / AUDIT_CONFIG]
        if place.is_dir():
            candidates += list(place.glob(f"*/*/{AUDIT_CONFIG}"))
        for path in candidates:
            if path.exists():
                raise ConfigError(
                    f"a stale {AUDIT_CONFIG} was found at {path}: LoadGen would apply it to a run",
                    hint="it was left by a killed compliance run or copied by hand; delete it "
                    "after checking what it holds",
                )


def performance_test(result: RunResult) -> TestResult:
    """The run's performance test (never ``tests[0]``, which may be the accuracy test)."""
    test = next((t for t in result.tests if t.mode == "performance"), None)
    if test is None:
        raise ValueError(f"{result.run_dir} has no performance test")
    return test


def score(result: RunResult) -> tuple[float, str]:
    """A performance score where higher is better, and the scenario, from a run result."""
    test = performance_test(result)
    if test.performance is None or test.performance.metric_value is None:
        raise ValueError(f"{result.run_dir} has no performance metric")
    perf = test.performance
    value = perf.metric_value
    assert value is not None
    return (1.0 / value if perf.unit == "ms" else value), perf.scenario


def performance_verdict(reference: RunResult, compliance: RunResult, tolerance: float,
                        small_tolerance: float, small_latency_ns: dict[str, int],
                        two_sided: bool) -> Verdict:
    """Compare scores; ``two_sided`` (TEST01) or "not faster" only (TEST04)."""
    ref_score, scenario = score(reference)
    test_score, test_scenario = score(compliance)
    ref_status = performance_test(reference).status
    test_status = performance_test(compliance).status
    ref_valid, test_valid = ref_status is Status.VALID, test_status is Status.VALID
    tol = tolerance
    limit_ns = small_latency_ns.get(scenario)
    if limit_ns is not None and 1e6 / ref_score <= limit_ns:  # score = 1/ms
        tol = small_tolerance
    ratio = test_score / ref_score
    within = abs(ratio - 1) <= tol if two_sided else ratio < 1 + tol
    noise: list[str] = []
    if not within and not compliance.submittable:
        # A short run's score moves by more than the official tolerance between honest
        # runs on a busy machine; judge it against the spread measured here instead.
        spread, scores = measured_spread(reference)
        if spread is not None:
            allowed = max(tol, spread)
            within = abs(ratio - 1) <= allowed if two_sided else ratio < 1 + allowed
            noise = [
                f"run-to-run spread measured here: {spread:.1%} over {len(scores)} VALID "
                f"reference runs (scores {min(scores):.6g} to {max(scores):.6g})",
                ("the difference is within that spread on a non-submittable run: noise, "
                 "not a finding" if within else
                 "the difference exceeds that spread too"),
            ]
    passed = ref_valid and test_valid and scenario == test_scenario and within
    lines = [
        f"reference run: {reference.run_dir} (performance test {ref_status.value})",
        f"compliance run: {compliance.run_dir} (performance test {test_status.value})",
        f"scenario: {scenario} / {test_scenario}",
        f"reference score = {ref_score:.6g}",
        f"test score = {test_score:.6g}",
        f"test / reference = {ratio:.4f} (allowed: "
        + (f"within +-{tol:.0%})" if two_sided else f"below {1 + tol:.2f})"),
    ]
    if Scenario(scenario) in (Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM):
        lines.append("scores of latency scenarios are 1 / latency (ms)")
    return Verdict("verify_performance.txt", passed, lines + noise)


def measured_spread(reference: RunResult) -> tuple[float | None, list[float]]:
    """The relative spread, ``(max - min) / min``, of the scores of every VALID run
    beside ``reference`` that could have been its reference (same benchmark, scenario,
    backend and submittability, no compliance run); None with fewer than two."""
    scores: list[float] = []
    for path in sorted(Path(reference.run_dir).parent.glob("*/result.json")):
        try:
            other = RunResult.load(path)
        except (OSError, ValueError):
            continue  # an unreadable run is no evidence of spread
        if (other.compliance is not None or other.benchmark != reference.benchmark
                or other.scenario != reference.scenario or other.backend != reference.backend
                or other.submittable != reference.submittable):
            continue
        perf = next((t for t in other.tests if t.mode == "performance"), None)
        if perf is None or perf.status is not Status.VALID or perf.performance is None:
            continue
        try:
            scores.append(score(other)[0])
        except ValueError:
            continue
    if len(scores) < 2:
        return None, scores
    return (max(scores) - min(scores)) / min(scores), scores
