"""``run(request)``: one benchmark run, step by step (what ``suite.api.run`` does).

1. resolve the config (``suite.config.loader``) and the round's rules (``suite.config.rules``);
2. verify the model file against its card (``models``: a user-supplied file that is
   not the reference model makes the run open division) and the backend's availability;
3. open the dataset (``datasets``: preprocessing into its cache on first use, with
   progress), all before a run directory exists, so bad input leaves nothing behind;
4. create a fresh run directory and record the config with provenance, the system and
   the dataset;
5. run each LoadGen test of the mode in its own child process (``runner``);
6. score accuracy from LoadGen's accuracy log (``accuracy``);
7. write ``result.json`` (``results``) and return it.

``STATUS`` in the run directory always says where the run stands: ``RUNNING since ...``
while it runs, then the run's status and exit code. A run interrupted outside a test
(TERM, HUP or Ctrl-C while scoring, say) says ``INTERRUPTED``; one that cannot write its
directory (a full disk) says ``FAILED`` with the file and errno where it still can, and
raises ``RunFailed`` naming them (no traceback, no half-written ``*.tmp``).

Example::

    result = run(ConfigRequest(scenario="offline", mode="all", quick=True))
    result.status, result.exit_code

``suite.api`` re-exports ``run``, ``prepare`` and ``lint`` beside every other
command's library call.

``import suite.harness.run`` loads no numpy, framework, LoadGen or rich: a run imports what it
uses when it uses it (issue 18: a run's fixed cost, and ``suite check`` on a laptop).
"""

from __future__ import annotations

import contextlib
import errno
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from suite.config.loader import ConfigRequest, RunConfig
from suite.config.preflight import LintReport, lint_and_resolve
from suite.config.rules import RuleSet
from suite.errors import ConfigError, RunFailed, SuiteError
from suite.harness import child_start
from suite.harness.child_start import ChildStart
from suite.harness.runner import ProgressCallback, StageCallback, create_run_dir, run_in_child
from suite.models import ModelCard, ModelIdentity, check_model, load_card
from suite.paths import Paths, find_paths
from suite.results import RunResult, Status, TestResult
from suite.scenarios import Mode

# Only what every run needs is imported above: numpy, the datasets, the backends, the
# compliance tests, the accuracy scorer and packaging are imported where they are used,
# so ``import suite.api`` (and a command that needs none of them) stays light.
if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from suite.compliance import ComplianceTest
    from suite.datasets import InMemoryDataset

__all__ = ["EXIT_CODES", "lint", "prepare", "run"]

EXIT_CODES = {Status.VALID: 0, Status.INVALID: 2, Status.FAILED: 1, Status.INTERRUPTED: 130}
_SEVERITY = [Status.VALID, Status.INVALID, Status.FAILED, Status.INTERRUPTED]


def prepare(request: ConfigRequest, paths: Paths | None = None, *,
            on_lint: Callable[[LintReport], None] | None = None
            ) -> tuple[RunConfig, RuleSet, ModelCard, ModelIdentity, Paths]:
    """Everything cheap that can fail before a run directory exists (bad input exits here).

    The pre-flight linter runs first; ``on_lint`` receives its report (to print it).
    """
    from suite import backends

    paths = paths or find_paths()
    # The linter resolves the config; the run uses that resolution (one, not two).
    lint_report, resolved = lint_and_resolve(request, paths)
    if on_lint is not None:
        on_lint(lint_report)
    if lint_report.errors or resolved is None:
        first = lint_report.errors[0]
        where = f"{first.source}: " if first.source else ""
        raise ConfigError(f"pre-flight: {where}{first.message}", hint=first.hint)
    config, rules = resolved
    card = load_card(paths, config.benchmark).with_model_path(config.data.model_path)
    model = check_model(card, paths.cache)
    # Missing packages, GPU or driver fail here, before a run directory or LoadGen.
    backends.ensure_available(config.backend, config.backend_options)
    return config, rules, card, model, paths


def run(request: ConfigRequest, paths: Paths | None = None,
        on_progress: Callable[[str], ProgressCallback | None] | None = None,
        on_lint: Callable[[LintReport], None] | None = None,
        on_stage: Callable[[str], StageCallback | None] | None = None) -> RunResult:
    """Run the request end to end and return its ``RunResult`` (also in result.json).

    ``on_progress(test_name)`` may return a callback for that test's progress, and
    ``on_stage(test_name)`` one for its child's setup stages ("loading model", ...).
    """
    from suite.llm.card import is_llm_benchmark

    # The first test's child, started at process start or now: its imports overlap ours.
    started = child_start.take()
    try:
        paths = paths or find_paths()
        llm = is_llm_benchmark(paths, request.benchmark)
        _refuse_wrong_kind(request.benchmark, request.backend, llm)
        if llm:  # text-generation cards: suite.llm
            from suite.harness.llm.run import run as run_llm

            started.discard()
            return run_llm(request, paths, on_progress)
        return _prepare_and_run(request, paths, started, on_progress, on_lint, on_stage)
    finally:
        started.discard()


#: The built-in backends that generate text (the rest run fixed-shape models).
GENERATING_BACKENDS = frozenset({"openai", "torch-llm"})


def _refuse_wrong_kind(benchmark: str, backend: str, llm: bool) -> None:
    """A backend that cannot run this kind of card fails here, before any run directory."""
    from suite.backends import BUILTIN, backend_class

    if backend in BUILTIN:  # known without importing either (asyncio, torch: 25 ms and more)
        generates = backend in GENERATING_BACKENDS
    else:
        from suite.llm.backend import TorchLLMBackend
        from suite.llm.openai_backend import OpenAIBackend

        generates = issubclass(backend_class(backend), TorchLLMBackend | OpenAIBackend)
    if llm and not generates:
        raise ConfigError(f"backend '{backend}' cannot run the text-generation benchmark "
                          f"'{benchmark}'", hint="use --backend torch-llm (in-process) or "
                          "--backend openai --url URL (a server); leave --backend out for "
                          "the card's default")
    if not llm and generates:
        raise ConfigError(f"backend '{backend}' runs text-generation benchmarks only, not "
                          f"'{benchmark}'", hint="use onnxruntime, torch, remote, simulated "
                          "or null (see `suite backends`)")


def _prepare_and_run(request: ConfigRequest, paths: Paths, started: ChildStart,
                     on_progress: Callable[[str], ProgressCallback | None] | None,
                     on_lint: Callable[[LintReport], None] | None,
                     on_stage: Callable[[str], StageCallback | None] | None) -> RunResult:
    from suite import datasets

    config, _, card, model, paths = prepare(request, paths, on_lint=on_lint)
    check: ComplianceTest | None = None
    reference: RunResult | None = None
    attempts: list[str] = []
    if config.compliance:
        from suite.compliance import get_test
        from suite.compliance import run as compliance_run

        check = get_test(config.compliance, paths)
        compliance_run.guard(config, paths.home)
        reference = compliance_run.find_reference(config, check, request.reference)
        attempts = compliance_run.previous_attempts(config, check)
    dataset = datasets.create(card, config.data,
                              on_progress("preprocess") if on_progress else None)
    bench = config.resolved_rules.benchmark
    reasons = list(config.non_submittable_reasons)
    if model.division == "open":
        reasons.append("open division: the model file is not the card's reference model")
    if dataset.total_count != bench.dataset_size:
        reasons.append(f"the dataset has {dataset.total_count} samples; round {config.round} "
                       f"requires {bench.dataset_size}")
    try:
        run_dir = create_run_dir(config.runs_dir, config.benchmark, config.scenario.value,
                                 config.compliance or config.mode.value)
    except OSError as exc:
        raise SuiteError(f"cannot create a run directory in {config.runs_dir}: "
                         f"{_os_error(exc)}", hint=_WRITABLE) from None
    status_file = run_dir / "STATUS"
    try:
        return _run_in(run_dir, config, card, model, paths, dataset, check,
                       reference, attempts, reasons, on_progress, on_stage, started)
    except KeyboardInterrupt as exc:
        _mark(status_file, f"INTERRUPTED (exit code 130) at {_now()}, before result.json was "
              "written; the logs written so far are kept\n")
        exc.add_note(f"partial logs kept in {run_dir}")
        raise
    except OSError as exc:
        where = exc.filename or run_dir
        reason = f"cannot write {where}: {_os_error(exc)}"
        _mark(status_file, f"FAILED (exit code 1): {reason}\n")
        raise RunFailed(reason, run_dir=run_dir, hint=_WRITABLE) from None


_WRITABLE = ("check that the directory exists and is writable, and that its disk has free "
             "space; or choose another --runs-dir")


def _os_error(exc: OSError) -> str:
    name = errno.errorcode.get(exc.errno or 0, "")
    return f"[Errno {exc.errno}{' ' + name if name else ''}] {exc.strerror or exc}"


def _mark(status_file: Path, text: str) -> None:
    """Rewrite STATUS; if even that fails (the disk is full), leave no half-written one."""
    try:
        status_file.write_text(text, encoding="utf-8")
    except OSError:
        with contextlib.suppress(OSError):
            status_file.unlink(missing_ok=True)


def _run_in(run_dir: Path, config: RunConfig, card: ModelCard,
            model: ModelIdentity, paths: Paths, dataset: InMemoryDataset,
            check: ComplianceTest | None, reference: RunResult | None, attempts: list[str],
            reasons: list[str],
            on_progress: Callable[[str], ProgressCallback | None] | None,
            on_stage: Callable[[str], StageCallback | None] | None,
            started: ChildStart) -> RunResult:
    from suite.system import collect

    status_file = run_dir / "STATUS"
    bench = config.resolved_rules.benchmark
    status_file.write_text(f"RUNNING since {_now()}: no result yet; if this stays, the run "
                           "was killed before it could write result.json\n")
    (run_dir / "config.json").write_text(config.model_dump_json(indent=2) + "\n")
    (run_dir / "system.json").write_text(json.dumps(collect(), indent=2) + "\n")
    described = dataset.describe()
    (run_dir / "dataset.json").write_text(json.dumps(described, indent=2) + "\n")

    tests: list[TestResult] = []
    for mode in (Mode.PERFORMANCE,) if check else config.mode.tests():
        callback = on_progress(mode.value) if on_progress else None
        stage = on_stage(mode.value) if on_stage else None
        test_dir = run_dir / mode.value
        if check is not None:
            from suite.compliance import run as compliance_run

            # The context removes audit.config however the test ends (TERM and HUP
            # arrive here as KeyboardInterrupt, see ``signals``).
            with compliance_run.audit_config(check, bench.loadgen_model, test_dir) as audit:
                test = run_in_child(config, mode, test_dir, paths.home, callback, audit,
                                    dataset_size=dataset.total_count, on_stage=stage,
                                    started=started)
        else:
            test = run_in_child(config, mode, test_dir, paths.home, callback,
                                dataset_size=dataset.total_count, on_stage=stage,
                                started=started)
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
        model_sha256_source=model.sha256_source,
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
    if check is not None and reference is not None and \
            result.status not in (Status.FAILED, Status.INTERRUPTED):
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
    from suite.compliance import run as compliance_run
    from suite.postprocess import make_postprocess

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
    from suite.accuracy import score_top1
    from suite.logs import DETAIL_LOG, parse_detail_log
    from suite.postprocess import make_postprocess

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


def lint(request: ConfigRequest, paths: Paths | None = None) -> LintReport:
    """The pre-flight linter's findings on ``request`` (``LintReport.errors``: exit 1)."""
    return lint_and_resolve(request, paths or find_paths())[0]
