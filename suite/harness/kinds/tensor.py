"""The tensor kind (``Kind.TENSOR``): fixed-shape models, one ``predict`` per batch.

digits and ResNet-50: the card's model file is verified (a user's file that is not the
reference model runs in the open division), the dataset is preprocessed into its cache
before a run directory exists, the child builds the batching ``SystemUnderTest`` over a
``BackendBase``, accuracy is top-1 from LoadGen's accuracy log, and the compliance tests
are TEST01 and TEST04 against a reference run.

A task card (``[[inputs]]``/``[[outputs]]``, served by a ``suite.tasks`` module) takes the
same stages through ``kinds.task_prepare`` (its dataset, SUT parts, scoring, stand-in).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from suite.errors import ConfigError, SuiteError
from suite.harness.kinds.base import BuiltSut, CompliancePlan, KindStrategy, Prepared
from suite.models import Kind, ModelCard, check_model, load_card, verify_model_file

if TYPE_CHECKING:
    from suite.compliance import ComplianceTest
    from suite.config.loader import ConfigRequest
    from suite.config.model import RunConfig
    from suite.datasets import InMemoryDataset, RunDataset
    from suite.datasets.cache import CacheProgress
    from suite.harness.progress import ProgressCallback
    from suite.paths import Paths
    from suite.results import RunResult, TestResult


class TensorKind(KindStrategy):
    kind = Kind.TENSOR
    default_backend = "onnxruntime"
    tuner = "suite.harness.tune:tune"
    backend_hint = "use onnxruntime, torch, remote, simulated or null (see `suite backends`)"
    child_modules = ("suite.datasets", "suite.harness.output_contract",
                     "suite.harness.sut.loading", "suite.harness.sut.workers",
                     "suite.postprocess")

    def prepare(self, config: RunConfig, paths: Paths,
                on_progress: Callable[[str], ProgressCallback | None] | None
                ) -> TensorPrepared:
        from suite import datasets

        card = load_card(paths, config.benchmark)
        if card.is_task_card:  # a suite.tasks module serves it (kinds.task)
            from suite.harness.kinds.task_prepare import prepare_task

            task, card, model, staged = prepare_task(config, paths, card)
            reasons = (["open division: the model file is not the card's reference model"]
                       if model.division == "open" and not config.stand_in else [])
            return TaskPrepared(model, staged.total_count, reasons, card=card, dataset=staged,
                                task=task, stand_in=config.stand_in)
        if config.stand_in:
            raise ConfigError(f"--stand-in: benchmark '{config.benchmark}' is no task card "
                              "(suite.tasks): it has no stand-in",
                              hint="drop --stand-in; digits runs with no download at all")
        card = card.with_model_path(config.data.model_path)
        model = check_model(card, paths.cache)
        # What this process needs of the dataset (a staged digits split: its record, no
        # numpy); the progress bar is made only if there is preprocessing to show.
        dataset = datasets.for_run(card, config.data, _preprocess_progress(on_progress))
        reasons = (["open division: the model file is not the card's reference model"]
                   if model.division == "open" else [])
        return TensorPrepared(model, dataset.total_count, reasons, card=card, dataset=dataset)

    def build_sut(self, home: Path, config: RunConfig, enter: Callable[[str], None],
                  on_drain: Callable[[], None]) -> BuiltSut:
        from suite import datasets
        from suite.harness.loadgen import Completer
        from suite.harness.output_contract import OutputContract
        from suite.harness.sut.core import SystemUnderTest
        from suite.harness.sut.loading import load_model
        from suite.harness.sut.workers import WorkerSpec
        from suite.postprocess import make_postprocess

        card, backend, info = load_model(home, config)
        if card.is_task_card:
            from suite.harness.kinds.task_prepare import build_task_sut

            return build_task_sut(card, backend, info, config, enter, on_drain)
        record, backend_run = asdict(info), backend.run_record
        enter("opening dataset")
        # The parent built the preprocessing cache; here it is only opened.
        dataset = datasets.create(card, config.data)
        postprocess, response_dtype = make_postprocess(card)
        enter("warming up")
        sut = SystemUnderTest(
            backend, dataset, postprocess, Completer(response_dtype),
            config.scenario, config.sut, on_drain=on_drain,
            latency_bound_ms=config.loadgen.latency_bound_ms,
            target_qps=config.loadgen.target_qps,
            contract=OutputContract(config.backend, card),
            worker_spec=WorkerSpec(home, config),
        )
        return BuiltSut(sut, record, backend_run)

    def packaged_model(self, paths: Paths, benchmark: str,
                       run: RunResult) -> tuple[str, str]:
        card = load_card(paths, benchmark)
        return card.input.dtype, card.model.onnx_file

    def local_model_digest(self, paths: Paths, benchmark: str) -> str:
        return verify_model_file(load_card(paths, benchmark))


def _preprocess_progress(on_progress: Callable[[str], ProgressCallback | None] | None
                         ) -> CacheProgress | None:
    """The dataset's progress reports, to a "preprocess" bar made at the first report: a
    run with nothing to preprocess starts no display before its child has its spec."""
    if on_progress is None:
        return None
    made: list[ProgressCallback | None] = []

    def report(done: int, total: int | None, elapsed_s: float) -> None:
        if not made:
            made.append(on_progress("preprocess"))
        if made[0] is not None:
            made[0](done, total, elapsed_s)
    return report


@dataclass
class TensorPrepared(Prepared):
    card: ModelCard | None = None
    dataset: RunDataset | None = None

    def _parts(self) -> tuple[ModelCard, RunDataset]:
        assert self.card is not None and self.dataset is not None
        return self.card, self.dataset

    def describe_dataset(self) -> dict[str, Any]:
        return self._parts()[1].describe()

    def compliance(self, config: RunConfig, paths: Paths,
                   request: ConfigRequest) -> CompliancePlan:
        from suite.compliance import get_test
        from suite.compliance import run as compliance_run

        assert config.compliance
        check = get_test(config.compliance, paths)
        compliance_run.guard(config, paths.home)
        reference = compliance_run.find_reference(config, check, request.reference)
        attempts = compliance_run.previous_attempts(config, check)
        return _ReferencePlan(check, reference, attempts, config, *self.judged_by())

    def judged_by(self) -> tuple[Any, Any]:
        """(response dtype, labels) for the compliance verdict (TEST01's fallback); a task
        card's are (None, a scorer of sampled responses)."""
        from suite.postprocess import make_postprocess

        card, dataset = self._parts()
        return make_postprocess(card)[1], dataset.labels

    def score(self, test: TestResult, config: RunConfig) -> TestResult:
        from suite.accuracy import score_top1
        from suite.logs import DETAIL_LOG, parse_detail_log
        from suite.postprocess import make_postprocess
        from suite.results import Status

        card, dataset = self._parts()
        test_dir = Path(test.directory)
        try:
            errors = parse_detail_log(test_dir / DETAIL_LOG).errors
            _, response_dtype = make_postprocess(card)
            accuracy = score_top1(test_dir, dataset.labels, response_dtype,
                                  config.resolved_rules.benchmark.accuracy_target, errors)
        except SuiteError as exc:
            return test.model_copy(update={"status": Status.FAILED, "message": str(exc)})
        status = Status.VALID if accuracy.passed else Status.INVALID
        return test.model_copy(update={"accuracy": accuracy, "status": status})


@dataclass
class TaskPrepared(TensorPrepared):
    """A task card's run (``kinds.task_prepare``): scored by its task, TEST01's fallback
    by the task's score, the stand-in marked on the dataset's record."""

    task: Any = None
    stand_in: bool = False

    def describe_dataset(self) -> dict[str, Any]:
        described = super().describe_dataset()
        return {**described, "stand_in": True} if self.stand_in else described

    def judged_by(self) -> tuple[Any, Any]:
        from suite.harness.kinds.task_prepare import scorer

        return None, scorer(self.task, self._task_dataset())

    def score(self, test: TestResult, config: RunConfig) -> TestResult:
        from suite.harness.kinds.task_prepare import score_test

        return score_test(test, config, self.task, self._task_dataset(), self.stand_in)

    def _task_dataset(self) -> InMemoryDataset:
        return cast("InMemoryDataset", self._parts()[1])  # prepare_task's staged dataset


class _ReferencePlan(CompliancePlan):
    """TEST01 or TEST04: the run's LoadGen test under the test's audit.config, then its
    result compared with the reference run's."""

    def __init__(self, check: ComplianceTest, reference: RunResult, attempts: list[str],
                 config: RunConfig, response_dtype: Any, labels: Any) -> None:
        self.name = check.name
        self.check, self.reference, self.attempts = check, reference, attempts
        self.loadgen_model = config.resolved_rules.benchmark.loadgen_model
        self.response_dtype, self.labels = response_dtype, labels

    @contextlib.contextmanager
    def audit_config(self, test_dir: Path) -> Iterator[Path | None]:
        from suite.compliance import run as compliance_run

        # The context removes audit.config however the test ends (TERM and HUP arrive
        # here as KeyboardInterrupt, see ``signals``).
        with compliance_run.audit_config(self.check, self.loadgen_model, test_dir) as audit:
            yield audit

    def judge_result(self, result: RunResult, run_dir: Path) -> RunResult:
        from suite.compliance import run as compliance_run
        from suite.results import EXIT_CODES, Status

        try:
            outcome = compliance_run.verdict(self.check, self.reference, result, run_dir,
                                             self.response_dtype, self.labels,
                                             self.attempts)
        except (OSError, ValueError, KeyError) as exc:
            raise SuiteError(f"{self.check.name} verification failed in {run_dir}: "
                             f"{exc}") from exc
        if outcome.passed:
            return result.model_copy(update={"compliance": outcome})
        failed = ", ".join(f for f, v in outcome.verdicts.items() if v != "TEST PASS")
        return result.model_copy(update={
            "compliance": outcome, "status": Status.INVALID,
            "exit_code": EXIT_CODES[Status.INVALID],
            "submittable": False,
            "non_submittable_reasons": [*result.non_submittable_reasons,
                                        f"{self.check.name} failed ({failed})"],
        })
