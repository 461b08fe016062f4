"""``run(request)``: one benchmark run of any kind, step by step (what ``suite.api.run`` does).

1. the pre-flight linter resolves the config (``suite.config.loader``) and the round's
   rules (``suite.config.rules``); the card's kind (``suite.models.card_kind``) picks the
   kind's strategy (``suite.harness.kinds``), and a backend that does not serve that kind
   is refused; the backend's packages and hardware are checked;
2. the kind prepares the run (``KindStrategy.prepare``): the model verified against its
   card (a user-supplied file that is not the reference model makes the run open
   division; a model an engine serves is probed), the dataset opened (preprocessing into
   its cache on first use, with progress), and its compliance test planned, all before a
   run directory exists, so bad input leaves nothing behind;
3. a fresh run directory records the config with provenance, the system and the dataset;
4. each LoadGen test of the mode runs in its own child process (``runner``), which builds
   the kind's system under test (``KindStrategy.build_sut``);
5. the kind scores accuracy from LoadGen's accuracy log and judges its compliance test;
6. ``result.json`` (``results``) is written and returned.

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
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from suite.config.loader import ConfigRequest, RunConfig
from suite.config.preflight import LintReport, lint_and_resolve
from suite.config.rules import RuleSet
from suite.errors import ConfigError, RunFailed, SuiteError
from suite.harness import child_start, kinds
from suite.harness.child_start import ChildStart
from suite.harness.kinds import CompliancePlan, KindStrategy, Prepared
from suite.harness.progress import ProgressCallback
from suite.harness.runner import StageCallback, create_run_dir, run_in_child
from suite.models import Kind
from suite.paths import Paths, find_paths
from suite.results import EXIT_CODES, RunResult, Status, TestResult, worst
from suite.scenarios import Mode

__all__ = ["EXIT_CODES", "ResolvedRun", "lint", "prepare", "run"]

StageCallbacks = Callable[[str], StageCallback | None]
ProgressCallbacks = Callable[[str], ProgressCallback | None]


@dataclass(frozen=True)
class ResolvedRun:
    """What ``prepare`` resolved: the config, the round's rules, the kind's strategy."""

    config: RunConfig
    rules: RuleSet
    strategy: KindStrategy
    paths: Paths


def _preflight(request: ConfigRequest, paths: Paths,
               on_lint: Callable[[LintReport], None] | None
               ) -> tuple[RunConfig, RuleSet, KindStrategy]:
    """The linter's resolution, the kind's strategy, and the backend checked against both."""
    from suite import backends

    # The linter resolves the config; the run uses that resolution (one, not two).
    lint_report, resolved = lint_and_resolve(request, paths)
    if on_lint is not None:
        on_lint(lint_report)
    if lint_report.errors or resolved is None:
        first = lint_report.errors[0]
        where = f"{first.source}: " if first.source else ""
        raise ConfigError(f"pre-flight: {where}{first.message}", hint=first.hint)
    config, rules = resolved
    strategy = kinds.for_benchmark(paths, config.benchmark)
    if config.stand_in and strategy.kind is not Kind.TENSOR:
        raise ConfigError(f"--stand-in: benchmark '{config.benchmark}' is a "
                          f"{strategy.kind.value} card; stand-ins are task cards' (suite.tasks)",
                          hint="drop --stand-in")
    _refuse_wrong_kind(config.benchmark, config.backend, strategy)
    # Missing packages, GPU or driver fail here, before a run directory or LoadGen.
    backends.ensure_available(config.backend, config.backend_options)
    return config, rules, strategy


def _refuse_wrong_kind(benchmark: str, backend: str, strategy: KindStrategy) -> None:
    """A backend that does not serve the card's kind fails here, before any run directory."""
    from suite import backends

    served = backends.serves(backend)
    if strategy.kind in served:
        return
    raise ConfigError(f"backend '{backend}' cannot run the {strategy.kind.value} benchmark "
                      f"'{benchmark}': it runs "
                      f"{' and '.join(sorted(k.value for k in served))} benchmarks only",
                      hint=strategy.backend_hint)


def prepare(request: ConfigRequest, paths: Paths | None = None, *,
            on_lint: Callable[[LintReport], None] | None = None) -> ResolvedRun:
    """The cheap pre-flight (bad input exits here): the linter, the card's kind and the
    backend. A run then has its kind prepare the model and the dataset.

    The pre-flight linter runs first; ``on_lint`` receives its report (to print it).
    """
    paths = paths or find_paths()
    return ResolvedRun(*_preflight(request, paths, on_lint), paths)


def run(request: ConfigRequest, paths: Paths | None = None,
        on_progress: ProgressCallbacks | None = None,
        on_lint: Callable[[LintReport], None] | None = None,
        on_stage: StageCallbacks | None = None) -> RunResult:
    """Run the request end to end and return its ``RunResult`` (also in result.json).

    ``on_progress(test_name)`` may return a callback for that test's progress, and
    ``on_stage(test_name)`` one for its child's setup stages ("loading model", ...).
    """
    # The first test's child, started at process start or now: its imports overlap ours.
    started = child_start.take(request.benchmark, request.backend)
    try:
        ready = prepare(request, paths, on_lint=on_lint)
        config = ready.config
        if ready.strategy.kind is Kind.TENSOR:
            # The child loads the model while this process stages the dataset.
            started.preload(config, ready.paths.home)
        prepared = ready.strategy.prepare(config, ready.paths, on_progress)
        plan = prepared.compliance(config, ready.paths, request) if config.compliance else None
        bench = config.resolved_rules.benchmark
        reasons = list(config.non_submittable_reasons) + prepared.reasons
        # a model with a separate accuracy set (gpt-oss-120b: 4395) or compliance set
        # (TEST07: 990) runs those tests on that file
        model = config.resolved_rules.model
        sizes = {bench.dataset_size, getattr(plan, "dataset_size", bench.dataset_size)}
        if model is not None and model.accuracy_sample_count and config.mode is Mode.ACCURACY:
            sizes = {model.accuracy_sample_count}
        if prepared.dataset_size not in sizes:
            reasons.append(f"the dataset has {prepared.dataset_size} samples; round "
                           f"{config.round} requires {' or '.join(map(str, sorted(sizes)))}")
        try:
            run_dir = create_run_dir(config.runs_dir, config.benchmark,
                                     config.scenario.value,
                                     config.compliance or config.mode.value)
        except OSError as exc:
            raise SuiteError(f"cannot create a run directory in {config.runs_dir}: "
                             f"{_os_error(exc)}", hint=_WRITABLE) from None
        status_file = run_dir / "STATUS"
        try:
            return _run_in(run_dir, ready, prepared, plan, reasons, on_progress, on_stage,
                           started)
        except KeyboardInterrupt as exc:
            _mark(status_file, f"INTERRUPTED (exit code 130) at {_now()}, before result.json "
                  "was written; the logs written so far are kept\n")
            exc.add_note(f"partial logs kept in {run_dir}")
            raise
        except OSError as exc:
            where = exc.filename or run_dir
            reason = f"cannot write {where}: {_os_error(exc)}"
            _mark(status_file, f"FAILED (exit code 1): {reason}\n")
            raise RunFailed(reason, run_dir=run_dir, hint=_WRITABLE) from None
    finally:
        started.discard()


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


def _run_in(run_dir: Path, ready: ResolvedRun, prepared: Prepared,
            plan: CompliancePlan | None, reasons: list[str],
            on_progress: ProgressCallbacks | None, on_stage: StageCallbacks | None,
            started: ChildStart) -> RunResult:
    from suite.system import collect

    config, paths = ready.config, ready.paths
    status_file = run_dir / "STATUS"
    status_file.write_text(f"RUNNING since {_now()}: no result yet; if this stays, the run "
                           "was killed before it could write result.json\n")
    (run_dir / "config.json").write_text(config.model_dump_json(indent=2) + "\n")
    (run_dir / "system.json").write_text(json.dumps(collect(), indent=2) + "\n")
    described = prepared.describe_dataset()
    (run_dir / "dataset.json").write_text(json.dumps(described, indent=2) + "\n")

    tests: list[TestResult] = []
    for mode in (Mode.PERFORMANCE,) if plan else config.mode.tests():
        callback = on_progress(mode.value) if on_progress else None
        stage = on_stage(mode.value) if on_stage else None
        test_dir = run_dir / mode.value
        with (plan.audit_config(test_dir) if plan else contextlib.nullcontext()) as audit:
            test = run_in_child(config, mode, test_dir, paths.home, callback, audit,
                                dataset_size=prepared.dataset_size, on_stage=stage,
                                started=started, kind=ready.strategy.kind)
        if plan is not None:
            test = plan.judge_test(test, run_dir)
        if mode is Mode.ACCURACY and test.status is Status.VALID:
            test = prepared.score(test, config)
        tests.append(test)
        if test.status in (Status.FAILED, Status.INTERRUPTED):
            _mark_test_dir(test)
            break
    status = worst([t.status for t in tests])
    model = prepared.model
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
        provenance=prepared.provenance(tests),
        submittable=not reasons and status is Status.VALID,
        non_submittable_reasons=reasons
        + ([] if status is Status.VALID else [f"the run is {status.value}"]),
        status=status,
        exit_code=EXIT_CODES[status],
        tests=tests,
    )
    if plan is not None and result.status not in (Status.FAILED, Status.INTERRUPTED):
        result = plan.judge_result(result, run_dir)
    result.dump(run_dir / "result.json")
    division = "" if model.division == "closed" else " OPEN DIVISION (not the reference model);"
    status_file.write_text(f"{result.status.value} (exit code {result.exit_code});{division} "
                           "see result.json\n")
    return result


#: Beside LoadGen's logs of a test that did not complete, where their reader looks first.
NOT_A_RESULT = "FAILED.txt"


def _mark_test_dir(test: TestResult) -> None:
    """Say in the test's directory that it FAILED (or was INTERRUPTED): LoadGen's own
    summary may say ``Result is : VALID``, since the drain answers the outstanding samples
    empty so that LoadGen can end; its bytes are LoadGen's and are left as they are."""
    with contextlib.suppress(OSError):
        (Path(test.directory) / NOT_A_RESULT).write_text(
            f"This LoadGen test {test.status.value} (exit code {test.exit_code}): "
            f"{test.message or 'see status.json'}\n"
            "mlperf_log_summary.txt and mlperf_log_detail.txt here are what LoadGen saw, not "
            "a result: the samples outstanding at the failure were answered empty so that "
            "LoadGen could end, and count there as completed. `suite check` on the run "
            "directory says FAILED (RUN-STATUS).\n", encoding="utf-8")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def lint(request: ConfigRequest, paths: Paths | None = None) -> LintReport:
    """The pre-flight linter's findings on ``request`` (``LintReport.errors``: exit 1),
    with the refusal a run would give before its run directory: a backend that does not
    serve the card's kind (``LINT-BACKEND``; ``suite lint --benchmark tinylm --backend
    onnxruntime`` passed while ``suite run`` refused it)."""
    from suite.findings import Finding, Severity

    paths = paths or find_paths()
    report, resolved = lint_and_resolve(request, paths)
    if resolved is not None:
        config = resolved[0]
        try:
            _refuse_wrong_kind(config.benchmark, config.backend,
                               kinds.for_benchmark(paths, config.benchmark))
        except ConfigError as exc:
            report.findings.append(Finding(
                rule="LINT-BACKEND", severity=Severity.ERROR, key="backend",
                source=config.provenance.get("backend", "--backend"), message=exc.message,
                hint=exc.hint))
    return report
