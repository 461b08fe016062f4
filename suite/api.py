"""``run(request)``: one benchmark run, step by step. Usable without the CLI.

1. resolve the config (``config``) and the round's rules (``rules``);
2. verify the model file against its card (``models``: a user-supplied file that is
   not the reference model makes the run open division) and the backend's availability;
3. open the dataset (``datasets``: preprocessing into its cache on first use, with
   progress), all before a run directory exists, so bad input leaves nothing behind;
4. create a fresh run directory and record the config with provenance, the system and
   the dataset;
5. run each LoadGen test of the mode in its own child process (``runner``);
6. score accuracy from LoadGen's accuracy log (``accuracy``);
7. write ``result.json`` (``results``) and return it.

Example::

    result = run(ConfigRequest(scenario="offline", mode="all", quick=True))
    result.status, result.exit_code
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt

from . import backends, datasets
from .accuracy import score_top1
from .compliance import ComplianceTest, get_test
from .compliance import run as compliance_run
from .config import ConfigRequest, RunConfig, load_config
from .errors import ConfigError, SuiteError
from .logs import DETAIL_LOG, parse_detail_log
from .models import ModelCard, ModelIdentity, check_model, load_card
from .paths import Paths, find_paths
from .postprocess import make_postprocess
from .preflight import LintReport, lint
from .results import RunResult, Status, TestResult
from .rules import RuleSet
from .runner import ProgressCallback, create_run_dir, run_in_child
from .scenarios import Mode
from .system import collect

EXIT_CODES = {Status.VALID: 0, Status.INVALID: 2, Status.FAILED: 1, Status.INTERRUPTED: 130}
_SEVERITY = [Status.VALID, Status.INVALID, Status.FAILED, Status.INTERRUPTED]


def prepare(request: ConfigRequest, paths: Paths | None = None, *,
            on_lint: Callable[[LintReport], None] | None = None
            ) -> tuple[RunConfig, RuleSet, ModelCard, ModelIdentity, Paths]:
    """Everything cheap that can fail before a run directory exists (bad input exits here).

    The pre-flight linter runs first; ``on_lint`` receives its report (to print it).
    """
    paths = paths or find_paths()
    lint_report = lint(request, paths)
    if on_lint is not None:
        on_lint(lint_report)
    if lint_report.errors:
        first = lint_report.errors[0]
        where = f"{first.source}: " if first.source else ""
        raise ConfigError(f"pre-flight: {where}{first.message}", hint=first.hint)
    config, rules = load_config(request, paths)
    card = load_card(paths, config.benchmark).with_model_path(config.data.model_path)
    model = check_model(card)
    # Missing packages, GPU or driver fail here, before a run directory or LoadGen.
    backends.ensure_available(config.backend, config.backend_options)
    return config, rules, card, model, paths


def run(request: ConfigRequest, paths: Paths | None = None,
        on_progress: Callable[[str], ProgressCallback | None] | None = None,
        on_lint: Callable[[LintReport], None] | None = None) -> RunResult:
    """Run the request end to end and return its ``RunResult`` (also in result.json).

    ``on_progress(test_name)`` may return a callback for that test's progress.
    """
    config, rules, card, model, paths = prepare(request, paths, on_lint=on_lint)
    check: ComplianceTest | None = None
    if config.compliance:
        check = get_test(config.compliance, paths)
        compliance_run.guard(config, paths.home)
        reference = compliance_run.find_reference(config, check, request.reference)
        attempts = compliance_run.previous_attempts(config, check)
    dataset = datasets.create(card, config.data,
                              on_progress("preprocess") if on_progress else None)
    bench = rules.benchmark(config.benchmark)
    reasons = list(config.non_submittable_reasons)
    if model.division == "open":
        reasons.append("open division: the model file is not the card's reference model")
    if dataset.total_count != bench.dataset_size:
        reasons.append(f"the dataset has {dataset.total_count} samples; round {rules.round} "
                       f"requires {bench.dataset_size}")
    run_dir = create_run_dir(config.runs_dir, config.benchmark, config.scenario.value,
                             config.compliance or config.mode.value)
    status_file = run_dir / "STATUS"
    status_file.write_text(f"RUNNING since {_now()}: no result yet; if this stays, the run "
                           "was killed before it could write result.json\n")
    (run_dir / "config.json").write_text(config.model_dump_json(indent=2) + "\n")
    (run_dir / "system.json").write_text(json.dumps(collect(), indent=2) + "\n")
    described = dataset.describe()
    (run_dir / "dataset.json").write_text(json.dumps(described, indent=2) + "\n")

    tests: list[TestResult] = []
    for mode in (Mode.PERFORMANCE,) if check else config.mode.tests():
        callback = on_progress(mode.value) if on_progress else None
        test_dir = run_dir / mode.value
        if check is not None:
            with compliance_run.audit_config(check, bench.loadgen_model, test_dir) as audit:
                test = run_in_child(config, rules, mode, test_dir, paths.home, callback, audit,
                                    dataset_size=dataset.total_count)
        else:
            test = run_in_child(config, rules, mode, test_dir, paths.home, callback,
                                dataset_size=dataset.total_count)
        if mode is Mode.ACCURACY and test.status is Status.VALID:
            test = _score(test, card, dataset.labels, bench.accuracy_target)
        tests.append(test)
        if test.status in (Status.FAILED, Status.INTERRUPTED):
            break
    status = max((t.status for t in tests), key=_SEVERITY.index)
    result = RunResult(
        run_id=run_dir.name,
        run_dir=str(run_dir),
        created_utc=_now(),
        benchmark=config.benchmark,
        scenario=config.scenario.value,
        mode=config.compliance or config.mode.value,
        backend=config.backend,
        round=config.round,
        model_sha256=model.sha256,
        division=model.division,
        division_reason=model.reason,
        dataset=described,
        submittable=not reasons and status is Status.VALID,
        non_submittable_reasons=reasons
        + ([] if status is Status.VALID else [f"the run is {status.value}"]),
        status=status,
        exit_code=EXIT_CODES[status],
        tests=tests,
    )
    if check is not None and result.status not in (Status.FAILED, Status.INTERRUPTED):
        result = _with_verdict(check, reference, result, run_dir, card, dataset.labels,
                               attempts)
    result.dump(run_dir / "result.json")
    division = "" if model.division == "closed" else " OPEN DIVISION (not the reference model);"
    status_file.write_text(f"{result.status.value} (exit code {result.exit_code});{division} "
                           "see result.json\n")
    return result


def _with_verdict(check: ComplianceTest, reference: RunResult, result: RunResult,
                  run_dir: Path, card: ModelCard, labels: npt.NDArray[np.int64],
                  attempts: list[str]) -> RunResult:
    _, response_dtype = make_postprocess(card)
    try:
        outcome = compliance_run.verdict(check, reference, result, run_dir, response_dtype,
                                         labels, attempts)
    except (OSError, ValueError, KeyError) as exc:
        raise SuiteError(f"{check.name} verification failed in {run_dir}: {exc}") from exc
    if outcome.passed:
        return result.model_copy(update={"compliance": outcome})
    failed = ", ".join(f for f, v in outcome.verdicts.items() if v != "TEST PASS")
    return result.model_copy(update={
        "compliance": outcome, "status": Status.INVALID, "exit_code": EXIT_CODES[Status.INVALID],
        "submittable": False,
        "non_submittable_reasons": [*result.non_submittable_reasons,
                                    f"{check.name} failed ({failed})"],
    })


def _score(test: TestResult, card: ModelCard, labels: npt.NDArray[np.int64],
           target: float) -> TestResult:
    test_dir = Path(test.directory)
    try:
        errors = parse_detail_log(test_dir / DETAIL_LOG).errors
        _, response_dtype = make_postprocess(card)
        accuracy = score_top1(test_dir, labels, response_dtype, target, errors)
    except SuiteError as exc:
        return test.model_copy(update={"status": Status.FAILED, "message": str(exc)})
    status = Status.VALID if accuracy.passed else Status.INVALID
    return test.model_copy(update={"accuracy": accuracy, "status": status})


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")

