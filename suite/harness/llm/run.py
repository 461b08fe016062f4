"""One LLM benchmark run end to end: ``run(request)`` for a text-generation card.

The same path as ``suite.harness.run`` for the other benchmarks: the config and the
round's rules, the card's weights verified, the dataset opened, then each LoadGen test in
its own child process (``runner.run_in_child``; the child builds its ``sut``), accuracy
from LoadGen's accuracy log (ROUGE, tokens per sample), ``result.json``. Performance,
TTFT/TPOT and tokens/s come only from LoadGen's detail log (``results``).

Example::

    result = run(ConfigRequest(benchmark="tinylm", backend="torch-llm", scenario="server",
                               quick=True))
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from suite import backends
from suite.config.loader import ConfigRequest, load_config
from suite.config.rules import ModelRules
from suite.errors import ConfigError, SuiteError
from suite.harness.runner import ProgressCallback, create_run_dir, run_in_child
from suite.llm import round_accuracy, test06
from suite.llm.accuracy import score_log, score_round_log
from suite.llm.card import LLMCard, load_llm_card, verify_weights
from suite.llm.dataset import LLMDataset, llm_cache
from suite.llm.endpoint_check import check as check_endpoint
from suite.llm.openai_backend import OpenAIBackend
from suite.logs import ACCURACY_LOG, DETAIL_LOG, parse_detail_log
from suite.paths import Paths, find_paths
from suite.results import AccuracyResult, ComplianceResult, RunResult, Status, TestResult
from suite.scenarios import Mode, Scenario

EXIT_CODES = {Status.VALID: 0, Status.INVALID: 2, Status.FAILED: 1, Status.INTERRUPTED: 130}
_SEVERITY = [Status.VALID, Status.INVALID, Status.FAILED, Status.INTERRUPTED]


def run(request: ConfigRequest, paths: Paths | None = None,
        on_progress: Callable[[str], ProgressCallback | None] | None = None) -> RunResult:
    """Run an LLM benchmark request; write and return its ``RunResult``.

    ``on_progress(test_name)`` may return a callback for that test's progress, as for
    ``suite.api.run`` (which hands text-generation benchmarks to this function).
    """
    paths = paths or find_paths()
    config, _ = load_config(request, paths)
    if config.compliance and config.compliance != test06.NAME:
        raise ConfigError(f"compliance test {config.compliance} does not apply to the LLM "
                          f"benchmark {config.benchmark}", hint="LLM benchmarks run TEST06")
    card = load_llm_card(paths, config.benchmark)
    sha = verify_weights(card)
    backends.ensure_available(config.backend, config.backend_options)
    dataset = LLMDataset(card, config.data.dataset_dir, config.data.model_path,
                          llm_cache(config.data.cache_dir))
    bench = config.resolved_rules.benchmark
    reasons = list(config.non_submittable_reasons)
    reasons += _check_endpoint(config.backend, config.backend_options, card, dataset)
    if dataset.total_count != bench.dataset_size:
        reasons.append(f"the dataset has {dataset.total_count} samples; round {config.round} "
                       f"requires {bench.dataset_size}")
    run_dir = create_run_dir(config.runs_dir, config.benchmark, config.scenario.value,
                             config.compliance or config.mode.value)
    (run_dir / "STATUS").write_text(f"RUNNING since {_now()}\n", encoding="utf-8")
    (run_dir / "config.json").write_text(config.model_dump_json(indent=2) + "\n")
    described = dataset.describe()
    (run_dir / "dataset.json").write_text(json.dumps(described, indent=2) + "\n")
    tests: list[TestResult] = []
    compliance: ComplianceResult | None = None
    modes = (Mode.PERFORMANCE,) if config.compliance else config.mode.tests()
    for mode in modes:
        test_dir = run_dir / mode.value
        audit: Path | None = None
        if config.compliance:
            test_dir.mkdir(parents=True)
            audit = test_dir / "audit.config"
            audit.write_text(test06.audit_text(), encoding="utf-8")
        callback = on_progress(mode.value) if on_progress else None
        test = run_in_child(config, mode, test_dir, paths.home, callback, audit,
                            dataset_size=dataset.total_count)
        if audit is not None:
            audit.unlink(missing_ok=True)  # never left where a later run could read it
            test, compliance = _test06(test, card, config.scenario is Scenario.OFFLINE,
                                       run_dir)
        if mode is Mode.ACCURACY and test.status is Status.VALID:
            test = score_test(test, card, dataset, bench.accuracy_target,
                              config.resolved_rules.model)
        tests.append(test)
        if test.status in (Status.FAILED, Status.INTERRUPTED):
            break
    status = max((t.status for t in tests), key=_SEVERITY.index)
    result = RunResult(
        run_id=run_dir.name, run_dir=str(run_dir), created_utc=_now(),
        benchmark=config.benchmark, scenario=config.scenario.value,
        mode=config.compliance or config.mode.value,
        backend=config.backend, round=config.round, model_sha256=sha, dataset=described,
        submittable=not reasons and status is Status.VALID,
        non_submittable_reasons=reasons + ([] if status is Status.VALID
                                           else [f"the run is {status.value}"]),
        status=status, exit_code=EXIT_CODES[status], tests=tests, compliance=compliance)
    result.dump(run_dir / "result.json")
    (run_dir / "STATUS").write_text(f"{status.value} (exit code {result.exit_code}); see "
                                    "result.json\n", encoding="utf-8")
    return result


def _check_endpoint(name: str, options: dict[str, object], card: LLMCard,
                    dataset: LLMDataset) -> list[str]:
    """For the ``openai`` backend, before any run directory exists: every server answers,
    lists the model and streams one request (a ``BackendError``, exit 1, otherwise).
    Returns the reasons the options make the run non-submittable."""
    cls = backends.backend_class(name)
    if not issubclass(cls, OpenAIBackend):
        return []
    backend = cls(cls.Options.model_validate(options))
    assert isinstance(backend, OpenAIBackend)
    check_endpoint(backend.settings(card), dataset.prompts[0], dataset.tokenizer.encode,
                   dataset.tokenizer.decode)
    return (["backend.openai.insecure = true: the servers' TLS certificates were not "
             "verified"] if backend.opts.insecure else [])


def score_test(test: TestResult, card: LLMCard, dataset: LLMDataset,
               target: float, model: ModelRules | None = None) -> TestResult:
    """The accuracy test's verdict from its accuracy log (a bad log fails the test)."""
    test_dir = Path(test.directory)
    if card.accuracy.metric == "round":
        return _score_round(test, dataset, model)
    try:
        errors = parse_detail_log(test_dir / DETAIL_LOG).errors
        scored = score_log(test_dir, card, dataset.tokenizer.decode, dataset.references, target)
    except SuiteError as exc:
        return test.model_copy(update={"status": Status.FAILED, "message": str(exc)})
    accuracy = AccuracyResult(
        metric="ROUGEL", value=scored.rouge["rougeL"], target=target,
        passed=scored.passed and not errors, good=scored.total, total=scored.total,
        log_sha256=scored.log_sha256, loadgen_errors=errors[:20],
        details={**scored.rouge, "tokens_per_sample": scored.tokens_per_sample,
                 "tokens_per_sample_min": scored.tokens_bounds[0],
                 "tokens_per_sample_max": scored.tokens_bounds[1]})
    status = Status.VALID if accuracy.passed else Status.INVALID
    return test.model_copy(update={"accuracy": accuracy, "status": status})


def _score_round(test: TestResult, dataset: LLMDataset, model: ModelRules | None) -> TestResult:
    """A round model's accuracy: every target of the round's checker row must hold."""
    if model is None:
        return test.model_copy(update={"status": Status.FAILED, "message": "the round has "
                                       "no accuracy targets for this benchmark's model"})
    test_dir = Path(test.directory)
    try:
        errors = parse_detail_log(test_dir / DETAIL_LOG).errors
        result, passed, lines, digest = score_round_log(
            test_dir, dataset.tokenizer.decode, dataset.references, model.targets,
            model.upper_limits)
    except SuiteError as exc:
        return test.model_copy(update={"status": Status.FAILED, "message": str(exc)})
    first = next(iter(model.targets))
    key = round_accuracy.METRIC_KEYS.get(first, first)
    accuracy = AccuracyResult(
        metric=first, value=float(str(result.get(key, 0.0))), target=model.targets[first],
        passed=passed and not errors, good=int(str(result["gen_num"])),
        total=int(str(result["gen_num"])), log_sha256=digest, loadgen_errors=errors[:20],
        details={k: float(v) for k, v in result.items() if isinstance(v, int | float)})
    status = Status.VALID if accuracy.passed else Status.INVALID
    return test.model_copy(update={"accuracy": accuracy, "status": status,
                                   "message": "; ".join(lines)})


def _test06(test: TestResult, card: LLMCard, offline: bool,
            run_dir: Path) -> tuple[TestResult, ComplianceResult | None]:
    """TEST06's verdict from the run's accuracy log; it decides the test's status."""
    if test.status in (Status.FAILED, Status.INTERRUPTED):
        return test, None
    try:
        verdict = test06.verify_run(Path(test.directory) / ACCURACY_LOG, run_dir, offline,
                                    card.tokenizer.eos_id)
    except SuiteError as exc:
        return test.model_copy(update={"status": Status.FAILED, "message": str(exc)}), None
    lines = verdict.lines()
    result = ComplianceResult(
        test=test06.NAME, reference_run="", passed=verdict.passed,
        verdicts={line.partition(":")[0]: line.partition(": ")[2] for line in lines[:3]},
        evidence={test06.VERIFY_FILE: [*lines, *verdict.evidence]}, attempt=1,
        previous_attempts=[])
    # LoadGen's performance verdict of a 100-query audit run says nothing; TEST06's does.
    status = Status.VALID if verdict.passed else Status.INVALID
    return test.model_copy(update={"status": status}), result


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
