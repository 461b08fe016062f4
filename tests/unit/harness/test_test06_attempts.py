"""TEST06 attempts are numbered from the records (issue 36, item 3): two earlier TEST06
runs of the same benchmark, scenario and backend in the runs directory make this one
attempt 3, listing them; none makes it attempt 1. The plan is built as a run builds it
(``TextGenerationPrepared.compliance`` on a loaded config, the prepared state as
``prepare`` returns it without loading the model); the verdict's accuracy-log check is
stood in for, so no LoadGen runs here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suite.config.loader import ConfigRequest, load_config
from suite.harness.kinds.text_generation import TextGenerationPrepared
from suite.llm import test06
from suite.llm.card import load_llm_card
from suite.llm.dataset import LLMDataset
from suite.models import ModelIdentity
from suite.paths import find_paths
from suite.results import RunResult, Status, TestResult


def _earlier(runs: Path, name: str) -> Path:
    run_dir = runs / f"{name}_tinylm_offline_TEST06"
    run_dir.mkdir(parents=True)
    (run_dir / "result.json").write_text(json.dumps({
        "schema_version": 2, "run_id": run_dir.name, "run_dir": str(run_dir),
        "created_utc": "x", "benchmark": "tinylm", "scenario": "offline", "mode": "TEST06",
        "backend": "torch-llm", "round": "v6.1", "model_sha256": "", "submittable": False,
        "non_submittable_reasons": [], "status": "INVALID", "exit_code": 2, "tests": []}))
    return run_dir


@pytest.mark.parametrize("earlier", [0, 2])
def test_test06_is_numbered_after_the_attempts_the_records_hold(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, earlier: int) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    made = [str(_earlier(runs, f"2026112{i}T000000Z")) for i in range(earlier)]
    paths = find_paths()
    request = ConfigRequest(benchmark="tinylm", scenario="offline", backend="torch-llm",
                            quick=True, compliance="TEST06", runs_dir=runs)
    config, _ = load_config(request, paths)
    card = load_llm_card(paths, "tinylm")
    # as ``TextGenerationKind.prepare`` returns it, without loading the model
    prepared = TextGenerationPrepared(ModelIdentity("", "closed"), 512, [], card=card,
                                      dataset=LLMDataset(card))
    plan = prepared.compliance(config, paths, request)
    monkeypatch.setattr(test06, "verify_run", lambda *a: test06.Test06Verdict(
        True, True, True, 1, []))
    test = TestResult(mode="performance", directory=str(tmp_path / "performance"),
                      status=Status.VALID, exit_code=0)
    plan.judge_test(test, tmp_path)
    outcome = plan.judge_result(prepared_result(), tmp_path).compliance
    assert outcome is not None
    assert outcome.attempt == earlier + 1
    assert outcome.previous_attempts == made


def prepared_result() -> RunResult:
    return RunResult.model_validate({
        "run_id": "r", "run_dir": "r", "created_utc": "x", "benchmark": "tinylm",
        "scenario": "offline", "mode": "TEST06", "backend": "torch-llm", "round": "v6.1",
        "model_sha256": "", "submittable": False, "non_submittable_reasons": [],
        "status": "VALID", "exit_code": 0, "tests": []})
