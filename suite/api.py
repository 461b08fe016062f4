"""``run(request)``: one benchmark run, step by step. Usable without the CLI.

1. resolve the config (``config``) and the round's rules (``rules``);
2. verify the model file against its card (``models``) and the backend's availability;
3. create a fresh run directory and record the config with provenance and the system;
4. run each LoadGen test of the mode in its own child process (``runner``);
5. score accuracy from LoadGen's accuracy log (``accuracy``);
6. write ``result.json`` (``results``) and return it.

Example::

    result = run(ConfigRequest(scenario="offline", mode="all", quick=True))
    result.status, result.exit_code
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from . import backends, datasets
from .accuracy import score_top1
from .config import ConfigRequest, RunConfig, load_config
from .errors import SuiteError
from .logs import DETAIL_LOG, parse_detail_log
from .models import ModelCard, load_card, verify_model_file
from .paths import Paths, find_paths
from .postprocess import make_postprocess
from .results import RunResult, Status, TestResult
from .rules import RuleSet
from .runner import ProgressCallback, create_run_dir, run_in_child
from .scenarios import Mode
from .system import collect

EXIT_CODES = {Status.VALID: 0, Status.INVALID: 2, Status.FAILED: 1, Status.INTERRUPTED: 130}
_SEVERITY = [Status.VALID, Status.INVALID, Status.FAILED, Status.INTERRUPTED]


def prepare(request: ConfigRequest, paths: Paths | None = None
            ) -> tuple[RunConfig, RuleSet, ModelCard, str, Paths]:
    """Everything that can fail before a run directory exists (bad input exits here)."""
    paths = paths or find_paths()
    config, rules = load_config(request, paths)
    card = load_card(paths, config.benchmark)
    model_sha = verify_model_file(card)
    # Missing packages, GPU or driver fail here, before a run directory or LoadGen.
    backends.ensure_available(config.backend, config.backend_options)
    return config, rules, card, model_sha, paths


def run(request: ConfigRequest, paths: Paths | None = None,
        on_progress: Callable[[str], ProgressCallback | None] | None = None) -> RunResult:
    """Run the request end to end and return its ``RunResult`` (also in result.json).

    ``on_progress(test_name)`` may return a callback for that test's progress.
    """
    config, rules, card, model_sha, paths = prepare(request, paths)
    run_dir = create_run_dir(config.runs_dir, config.benchmark, config.scenario.value,
                             config.mode.value)
    status_file = run_dir / "STATUS"
    status_file.write_text(f"RUNNING since {_now()}: no result yet; if this stays, the run "
                           "was killed before it could write result.json\n")
    (run_dir / "config.json").write_text(config.model_dump_json(indent=2) + "\n")
    (run_dir / "system.json").write_text(json.dumps(collect(), indent=2) + "\n")

    tests: list[TestResult] = []
    for mode in config.mode.tests():
        callback = on_progress(mode.value) if on_progress else None
        test = run_in_child(config, rules, mode, run_dir / mode.value, paths.home, callback)
        if mode is Mode.ACCURACY and test.status is Status.VALID:
            test = _score(test, card, rules.benchmark(config.benchmark).accuracy_target)
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
        mode=config.mode.value,
        backend=config.backend,
        round=config.round,
        model_sha256=model_sha,
        submittable=config.submittable and status is Status.VALID,
        non_submittable_reasons=config.non_submittable_reasons
        + ([] if status is Status.VALID else [f"the run is {status.value}"]),
        status=status,
        exit_code=EXIT_CODES[status],
        tests=tests,
    )
    result.dump(run_dir / "result.json")
    status_file.write_text(f"{status.value} (exit code {result.exit_code}); see result.json\n")
    return result


def _score(test: TestResult, card: ModelCard, target: float) -> TestResult:
    test_dir = Path(test.directory)
    try:
        errors = parse_detail_log(test_dir / DETAIL_LOG).errors
        labels = datasets.create(card).labels
        _, response_dtype = make_postprocess(card)
        accuracy = score_top1(test_dir, labels, response_dtype, target, errors)
    except SuiteError as exc:
        return test.model_copy(update={"status": Status.FAILED, "message": str(exc)})
    status = Status.VALID if accuracy.passed else Status.INVALID
    return test.model_copy(update={"accuracy": accuracy, "status": status})


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")

