"""TEST07 and TEST09 of the reasoning LLMs, orchestrated as TEST06 is (``text_generation``).

The run's LoadGen test runs under the test's audit.config (performance mode, every sample
issued once and logged); the verdict, from that accuracy log, decides the test's status:

* TEST07: the log scored as the card's reference scores it (``reasoning_log``, on the
  dataset file of the run: the compliance set), its printed line searched for
  ``'exact_match'`` and compared with the audit's threshold (``test07_09.verify_07``);
* TEST09: the mean output length over every logged entry within the audit's bounds
  (``test07_09.verify_09``).

The verification file (``verify_accuracy.txt``, ``verify_output_len.txt``) is written in
the test's directory, with the official lines.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from suite.errors import ConfigError, SuiteError
from suite.harness.kinds.base import CompliancePlan
from suite.results import ComplianceResult, RunResult, Status, TestResult

if TYPE_CHECKING:
    from suite.config.model import RunConfig
    from suite.llm.card import LLMCard
    from suite.llm.dataset import LLMDataset
    from suite.paths import Paths


class ReasoningPlan(CompliancePlan):
    def __init__(self, name: str, card: LLMCard, dataset: LLMDataset,
                 attempts: list[str]) -> None:
        self.name, self.card, self.dataset, self.attempts = name, card, dataset, attempts
        self.outcome: ComplianceResult | None = None
        #: the set the test runs on (TEST07: the compliance set; ``harness.run`` compares)
        from suite.llm import test07_09

        audit = test07_09.AUDIT_07 if name == test07_09.TEST07 else test07_09.AUDIT_09
        self.dataset_size = int(audit["min_query_count"])

    @contextlib.contextmanager
    def audit_config(self, test_dir: Path) -> Iterator[Path | None]:
        from suite.llm import test07_09

        audit = test07_09.AUDIT_07 if self.name == test07_09.TEST07 else test07_09.AUDIT_09
        # each sample of the set once: the set's size (990 or 6396, the audit's
        # min_query_count) or the file's, if smaller (a fixture), is also the performance
        # sample count (mlperf.conf's is the performance set's 6396; LoadGen cannot issue
        # more unique samples than it has loaded)
        queries = min(int(audit["min_query_count"]), self.dataset.total_count)
        audit = {**audit, "min_query_count": queries,
                 "performance_sample_count_override": queries}
        test_dir.mkdir(parents=True, exist_ok=True)
        path = test_dir / "audit.config"
        path.write_text(test07_09.audit_text(self.name, audit), encoding="utf-8")
        try:
            yield path
        finally:
            path.unlink(missing_ok=True)  # never left where a later run could read it

    def _verdict(self, test_dir: Path) -> tuple[bool, list[str], str]:
        from suite.accuracy import read_accuracy_entries
        from suite.llm import test07_09
        from suite.llm.round import reasoning, reasoning_log
        from suite.logs import ACCURACY_LOG

        log = test_dir / ACCURACY_LOG
        if self.name == test07_09.TEST09:
            verdict09 = test07_09.verify_09(read_accuracy_entries(log))
            return verdict09.passed, verdict09.lines(), test07_09.VERIFY_09
        # the log scored as the card's reference scores it (``suite audit`` re-derives the
        # same verdict with the same function: ``suite.llm.reasoning_audit``)
        result = reasoning_log.rescore(log, self.dataset, self.card.accuracy)
        flavor = reasoning_log.flavor_of(self.card.accuracy)
        verdict07 = test07_09.verify_07(reasoning.printed(result, flavor) + "\n")
        return verdict07.passed, verdict07.lines(), test07_09.VERIFY_07

    def judge_test(self, test: TestResult, run_dir: Path) -> TestResult:
        if test.status in (Status.FAILED, Status.INTERRUPTED):
            return test
        test_dir = Path(test.directory)
        try:
            passed, lines, verify_file = self._verdict(test_dir)
        except SuiteError as exc:
            return test.model_copy(update={"status": Status.FAILED, "message": str(exc)})
        (test_dir / verify_file).write_text("\n".join(lines) + "\n", encoding="utf-8")
        from suite.compliance.run import evidence_digests

        self.outcome = ComplianceResult(
            # what ``suite package`` copies: the logs and the verdict, hashed as written
            digests=evidence_digests(run_dir),
            test=self.name, reference_run="", passed=passed,
            verdicts={"verdict": lines[-1]}, evidence={verify_file: lines},
            attempt=len(self.attempts) + 1, previous_attempts=list(self.attempts))
        # LoadGen's performance verdict of an audit run says nothing; the test's does.
        return test.model_copy(update={"status": Status.VALID if passed else Status.INVALID})

    def judge_result(self, result: RunResult, run_dir: Path) -> RunResult:
        return result.model_copy(update={"compliance": self.outcome})


def plan(config: RunConfig, paths: Paths, card: LLMCard,
         dataset: LLMDataset) -> ReasoningPlan:
    """TEST07 or TEST09 for a card whose round lists it."""
    from suite.compliance import run as compliance_run

    model = config.resolved_rules.model
    listed = list(model.compliance_tests) if model is not None else []
    if config.compliance not in listed:
        raise ConfigError(f"compliance test {config.compliance} does not apply to "
                          f"{config.benchmark} (the round lists {', '.join(listed) or 'none'})",
                          hint=f"run {' or '.join(listed) or 'TEST06'}")
    if not card.accuracy.evaluation:
        raise ConfigError(f"{config.compliance} scores a reasoning card's outputs; "
                          f"{config.benchmark} is not one", hint="run TEST06")
    compliance_run.guard(config, paths.home)
    assert config.compliance is not None
    return ReasoningPlan(config.compliance, card, dataset,
                         compliance_run.previous_attempts(config, config.compliance))
