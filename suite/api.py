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

``STATUS`` in the run directory always says where the run stands: ``RUNNING since ...``
while it runs, then the run's status and exit code. A run interrupted outside a test
(TERM, HUP or Ctrl-C while scoring, say) says ``INTERRUPTED``; one that cannot write its
directory (a full disk) says ``FAILED`` with the file and errno where it still can, and
raises ``RunFailed`` naming them (no traceback, no half-written ``*.tmp``).

Example::

    result = run(ConfigRequest(scenario="offline", mode="all", quick=True))
    result.status, result.exit_code

Every other command is a library call here too, returning a typed result that the CLI
only renders: ``check``, ``lint``, ``tune``, ``package``, ``sign``, ``verify``,
``audit``, ``system`` and ``keygen``.
"""

from __future__ import annotations

import contextlib
import errno
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from . import backends, datasets
from .accuracy import score_top1
from .compliance import ComplianceTest, get_test
from .compliance import run as compliance_run
from .config import ConfigRequest, RunConfig, load_config
from .errors import ConfigError, RunFailed, SuiteError
from .llm.card import is_llm_benchmark
from .logs import DETAIL_LOG, parse_detail_log
from .models import ModelCard, ModelIdentity, check_model, load_card
from .paths import Paths, find_paths
from .postprocess import make_postprocess
from .preflight import LintReport
from .preflight import lint as lint_request
from .results import RunResult, Status, TestResult
from .rules import RuleSet
from .runner import ProgressCallback, StageCallback, create_run_dir, run_in_child
from .scenarios import Mode, Scenario
from .submission import PackageResult, SignResult, package, sign
from .system import collect

if TYPE_CHECKING:
    from .audit.report import AuditReport
    from .bundle.verify import Verification
    from .checker.findings import CheckReport
    from .tune import TuneReport

__all__ = ["EXIT_CODES", "PackageResult", "SignResult", "SystemDescription", "TuneOptions",
           "audit", "check", "keygen", "lint", "package", "prepare", "run", "sign",
           "system", "tune", "verify"]

EXIT_CODES = {Status.VALID: 0, Status.INVALID: 2, Status.FAILED: 1, Status.INTERRUPTED: 130}
_SEVERITY = [Status.VALID, Status.INVALID, Status.FAILED, Status.INTERRUPTED]


def prepare(request: ConfigRequest, paths: Paths | None = None, *,
            on_lint: Callable[[LintReport], None] | None = None
            ) -> tuple[RunConfig, RuleSet, ModelCard, ModelIdentity, Paths]:
    """Everything cheap that can fail before a run directory exists (bad input exits here).

    The pre-flight linter runs first; ``on_lint`` receives its report (to print it).
    """
    paths = paths or find_paths()
    lint_report = lint_request(request, paths)
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
        on_lint: Callable[[LintReport], None] | None = None,
        on_stage: Callable[[str], StageCallback | None] | None = None) -> RunResult:
    """Run the request end to end and return its ``RunResult`` (also in result.json).

    ``on_progress(test_name)`` may return a callback for that test's progress, and
    ``on_stage(test_name)`` one for its child's setup stages ("loading model", ...).
    """
    paths = paths or find_paths()
    if is_llm_benchmark(paths, request.benchmark):  # text-generation cards: suite.llm
        from .llm.run import run as run_llm

        return run_llm(request, paths, on_progress)
    config, rules, card, model, paths = prepare(request, paths, on_lint=on_lint)
    check: ComplianceTest | None = None
    reference: RunResult | None = None
    attempts: list[str] = []
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
    try:
        run_dir = create_run_dir(config.runs_dir, config.benchmark, config.scenario.value,
                                 config.compliance or config.mode.value)
    except OSError as exc:
        raise SuiteError(f"cannot create a run directory in {config.runs_dir}: "
                         f"{_os_error(exc)}", hint=_WRITABLE) from None
    status_file = run_dir / "STATUS"
    try:
        return _run_in(run_dir, config, rules, card, model, paths, dataset, check,
                       reference, attempts, reasons, on_progress, on_stage)
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


_WRITABLE = "free space there, or choose a writable --runs-dir (runs_dir in the config)"


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


def _run_in(run_dir: Path, config: RunConfig, rules: RuleSet, card: ModelCard,
            model: ModelIdentity, paths: Paths, dataset: datasets.InMemoryDataset,
            check: ComplianceTest | None, reference: RunResult | None, attempts: list[str],
            reasons: list[str],
            on_progress: Callable[[str], ProgressCallback | None] | None,
            on_stage: Callable[[str], StageCallback | None] | None) -> RunResult:
    status_file = run_dir / "STATUS"
    bench = rules.benchmark(config.benchmark)
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
            # The context removes audit.config however the test ends (TERM and HUP
            # arrive here as KeyboardInterrupt, see ``signals``).
            with compliance_run.audit_config(check, bench.loadgen_model, test_dir) as audit:
                test = run_in_child(config, rules, mode, test_dir, paths.home, callback, audit,
                                    dataset_size=dataset.total_count, on_stage=stage)
        else:
            test = run_in_child(config, rules, mode, test_dir, paths.home, callback,
                                dataset_size=dataset.total_count, on_stage=stage)
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



# -- the other commands, as library calls ----------------------------------------------
# Each returns a typed result; the CLI renders it and maps it to the exit code. Their
# imports are local: ``import suite.api`` for ``check`` must not load LoadGen's harness.


def lint(request: ConfigRequest, paths: Paths | None = None) -> LintReport:
    """The pre-flight linter's findings on ``request`` (``LintReport.errors``: exit 1)."""
    return lint_request(request, paths or find_paths())


def check(path: Path, round_name: str | None = None, *, compat_official: bool = False,
          submission_exceptions: bool = False, paths: Paths | None = None) -> CheckReport:
    """Check a run directory or a submission tree against a round's rules.

    Without ``round_name`` the round is the one a tree's LoadGen seeds name
    (``RoundError`` when none or two match); ``submission_exceptions`` waives LoadGen's
    uncommitted-build error only, as the official flag does.
    """
    from .checker import NotCheckable, check_path
    from .checker.models import detect_round
    from .rules import DEFAULT_ROUND, load_rules

    paths = paths or find_paths()
    if round_name is None and path.is_dir():
        round_name = detect_round(path, paths)
    rules = load_rules(paths, round_name or DEFAULT_ROUND)
    try:
        return check_path(path, rules, compat_official=compat_official,
                          submission_exceptions=submission_exceptions)
    except NotCheckable as exc:
        raise ConfigError(str(exc), hint="give a runs/<run> directory or a submission "
                          "tree root (the directory holding closed/ or open/)") from None


def verify(bundle: Path, public_key: Path) -> Verification:
    """Verify a bundle's signature with a pinned public key, then its files."""
    from .bundle.keys import load_public
    from .bundle.verify import verify_bundle

    result = verify_bundle(bundle, load_public(public_key))
    if result.unreadable is not None:  # not a verdict on the claims: the file is broken
        raise SuiteError(f"cannot read the bundle {result.unreadable}",
                         hint="download or copy the bundle again; it is cut off or corrupt")
    return result


def audit(bundle: Path, public_key: Path, *, rerun: str | None = None,
          tolerance: float = 0.02, runs_dir: Path | None = None,
          say: Callable[[str], None] = lambda message: None,
          paths: Paths | None = None) -> AuditReport:
    """Verify, re-check, recompute and (``rerun``) replay a signed bundle's claims."""
    import tempfile

    from .audit import audit as run_audit

    paths = paths or find_paths()
    with tempfile.TemporaryDirectory(prefix="suite-audit-") as work:
        return run_audit(bundle, public_key, paths, Path(work) / "tree",
                         (runs_dir or paths.runs / "audit").resolve(), rerun, tolerance, say)


@dataclass
class SystemDescription:
    """The official system description JSON, and what is still missing from it."""

    data: dict[str, Any]
    empty: list[str]
    unknown: list[str]


def system(config_file: Path | None = None, *, division: str = "closed",
           round_name: str | None = None, paths: Paths | None = None) -> SystemDescription:
    """Probe this machine and merge the user's TOML into the round's system JSON."""
    from .rules import DEFAULT_ROUND, load_rules
    from .system_description import describe, probe, read_user_toml

    rules = load_rules(paths or find_paths(), round_name or DEFAULT_ROUND)
    assert rules.submission is not None  # every round we ship has submission rules
    data, empty, unknown = describe(rules.submission, read_user_toml(config_file), probe(),
                                    division=division)
    return SystemDescription(data, empty, unknown)


@dataclass
class TuneOptions:
    """What ``suite tune`` searches; the defaults are the command's."""

    benchmark: str = "digits"
    backend: str = "onnxruntime"
    scenarios: tuple[Scenario, ...] = tuple(Scenario)
    system: str | None = None
    runs_dir: Path | None = None
    probe_ms: int = 2000
    confirm_ms: int | None = None
    batch_sizes: tuple[int, ...] = (1, 4, 16)
    worker_counts: tuple[int, ...] = ()
    worker_models: tuple[str, ...] = ()
    steps: int = 6
    max_qps: float | None = None
    fresh: bool = False

    @classmethod
    def quick(cls, **changes: Any) -> TuneOptions:
        """Seconds-long probes and confirming runs: a smoke test, not a tuning."""
        import dataclasses

        quick = cls(probe_ms=1000, confirm_ms=1000, batch_sizes=(1, 4), steps=2)
        return dataclasses.replace(quick, **changes)


def tune(options: TuneOptions, *, say: Callable[[str], None] = lambda message: None,
         paths: Paths | None = None) -> TuneReport:
    """Find and record the settings this system sustains (see ``suite.tune``)."""
    from .tune import tune as run_tune

    paths = paths or find_paths()
    o = options
    return run_tune(paths, o.benchmark, o.backend, list(o.scenarios), o.system,
                    (o.runs_dir or paths.runs).resolve(), o.probe_ms, o.confirm_ms,
                    list(o.batch_sizes), o.steps, o.fresh, say, list(o.worker_counts),
                    list(o.worker_models), o.max_qps)


def keygen(out_dir: Path | None = None, *, prompt: Callable[[], str] | None = None,
           paths: Paths | None = None) -> tuple[Path, Path, str]:
    """An Ed25519 key pair (private key encrypted, never inside the data or submissions);
    returns (private key file, public key file, key id)."""
    from .bundle.keys import default_key_dir, generate, passphrase

    paths = paths or find_paths()
    return generate(out_dir or default_key_dir(), passphrase(prompt),
                    forbidden=[paths.home, paths.submissions])
