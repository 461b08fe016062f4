"""What the signed predicate and ``measurements.json`` claim comes from records (issue 28,
item 5): ``accuracy_met`` is the run's recorded verdict (an LLM's includes its
tokens-per-sample bounds) and the re-check of every target and upper limit; ``retraining``
is "No" only for a run that recorded the closed division."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from suite.checker.findings import CheckReport, Finding, ResultReport
from suite.paths import find_paths
from suite.results import RunResult
from suite.submission.package import Candidate, _result_dir, predicate
from suite.submission.safety import Precision
from tests.unit.submission.test_selection import RULES, write_run

LLM_ID = "closed/ORG/results/box/tinylm/Offline"


def _report(findings: list[Finding]) -> CheckReport:
    res = ResultReport(id=LLM_ID, division="closed", submitter="ORG", system="box",
                       benchmark="tinylm", scenario="Offline", metric="samples/s", value=1.0,
                       accuracy=6.2, accuracy_target=5.916735, findings=findings)
    return CheckReport(tool="t", round="v6.1", path="p", kind="tree", compat_official=True,
                       results=[res])


def _claim(findings: list[Finding], extra: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = predicate(_report(findings), {LLM_ID: extra}, unofficial=True,
                                    identity={}, src={})["results"][0]
    return row


def test_accuracy_met_is_the_recorded_verdict_not_only_rouge() -> None:
    # ROUGE-L 6.2 is above its target, but the run's own verdict failed (its tokens per
    # sample were outside the card's bounds): the claim must not say the accuracy was met
    failed = _claim([], {"accuracy_passed": False})
    assert failed["accuracy_met"] is False
    assert failed["accuracy_met_from"] == "run record and accuracy.txt"
    assert _claim([], {"accuracy_passed": True})["accuracy_met"] is True


def test_accuracy_met_fails_on_an_upper_limit_the_recheck_found() -> None:
    # `suite sign` of a tree has no run record: the re-check decides, every limit included
    above = Finding(rule="ACC-TARGET", severity="error", message="TOKENS_PER_SAMPLE above "
                    "the upper limit", expected="<= 69.416", found="80.0")
    claim = _claim([above], {})
    assert claim["accuracy_met"] is False
    assert claim["accuracy_met_from"] == "accuracy.txt (suite check)"


def _measurements(tmp_path: Path, division: str, benchmark: str = "digits",
                  roots: tuple[str, ...] = ()) -> dict[str, Any]:
    run_dir = write_run(tmp_path / "runs", f"run_{division}", division=division)
    if roots:  # what each test's engine said about its weights (endpoint_check)
        record = json.loads((run_dir / "result.json").read_text())
        for test, root in zip(record["tests"], roots, strict=True):
            test["backend"] = {**test["backend"], "details": {"model_root": root}}
        (run_dir / "result.json").write_text(json.dumps(record))
    (run_dir / "performance").mkdir()
    (run_dir / "accuracy").mkdir()
    (run_dir / "accuracy" / "mlperf_log_accuracy.json").write_text("[]")
    (run_dir / "accuracy" / "accuracy.txt").write_text("accuracy=99.000%\n")
    run = RunResult.load(run_dir / "result.json")
    out = tmp_path / "out" / division
    assert RULES.submission is not None
    _result_dir(out, Candidate(run, run_dir, 1.0, True), find_paths(), RULES.submission,
                benchmark, Precision("fp32", "none"))
    data: dict[str, Any] = json.loads((out / "measurements.json").read_text())
    return data


def test_retraining_is_no_only_where_the_run_recorded_the_reference_weights(
        tmp_path: Path) -> None:
    assert _measurements(tmp_path, "closed")["retraining"] == "No"
    # an open run's model is not the card's: whether it was retrained is the submitter's
    # to state (empty: suite check's MEAS-JSON names it), never a constant "No"
    assert _measurements(tmp_path, "open")["retraining"] == ""


def test_a_served_models_starting_weights_are_what_its_engine_said_it_loaded(
        tmp_path: Path) -> None:
    # llama3.1-8b's weights are the user's engine's: the packager names what the engine
    # reported (/v1/models root) for every test, and nothing where it did not say
    root = "/models/Llama-3.1-8B-Instruct"
    said = _measurements(tmp_path / "a", "closed", "llama3.1-8b", (root, root))
    assert said["starting_weights_filename"] == root
    assert said["input_data_types"] == "int32"
    # unreported by one test, or two tests on different weights: "" (MEAS-JSON names it)
    for roots in ((root, "unreported"), (root, "/models/other")):
        data = _measurements(tmp_path / roots[1].strip("/"), "closed", "llama3.1-8b", roots)
        assert data["starting_weights_filename"] == "", roots
