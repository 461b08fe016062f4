"""The text-generation kind (``Kind.TEXT_GENERATION``): LLM cards, token latencies.

tinylm and the round's LLMs: the card's weights are verified (a model the user's engine
serves has none of ours to hash), the dataset is the card's prompts and references, the
backend's ``preflight`` checks what it serves from (an endpoint's servers) before a run
directory exists, and the child builds the SUT the backend's ``serving`` names: the
continuous batcher over an in-process generator, or the endpoint client's streaming SUT.
Accuracy is ROUGE and tokens per sample (tinylm) or the round's targets, scored as the
reference evaluates them; compliance is TEST06 (TEST07/TEST09: ``reasoning_compliance``).
Performance, TTFT/TPOT and tokens/s come only from LoadGen's detail log (``results``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from suite.errors import BackendError, ConfigError, SuiteError
from suite.harness.kinds.base import BuiltSut, CompliancePlan, KindStrategy, Prepared
from suite.models import Kind, ModelIdentity
from suite.results import (
    AccuracyResult,
    Claim,
    ComplianceResult,
    RunResult,
    Status,
    TestResult,
)
from suite.scenarios import Scenario

if TYPE_CHECKING:
    from suite.config.loader import ConfigRequest
    from suite.config.model import RunConfig
    from suite.config.rules import ModelRules
    from suite.harness.progress import ProgressCallback
    from suite.llm.card import LLMCard
    from suite.llm.contract import (
        EndpointGenerator,
        GeneratingBackend,
        InProcessGenerator,
        StatedWeights,
    )
    from suite.llm.dataset import LLMDataset
    from suite.paths import Paths


def _dataset(card: LLMCard, config: RunConfig) -> LLMDataset:
    from suite.llm.dataset import LLMDataset, llm_cache

    return LLMDataset(card, config.data.dataset_dir, config.data.model_path,
                      llm_cache(config.data.cache_dir))


def _backend(config: RunConfig) -> GeneratingBackend:
    from suite import backends
    from suite.llm.contract import GeneratingBackend

    return backends.create_as(GeneratingBackend, config.backend, config.backend_options)


class TextGenerationKind(KindStrategy):
    kind = Kind.TEXT_GENERATION
    default_backend = "torch-llm"
    tuner = "suite.harness.llm.sweep:tune_llm"
    backend_hint = ("use --backend torch-llm (in-process) or --backend openai --url URL (a "
                    "server); leave --backend out for the card's default")
    # An LLM's Server bounds are token latencies (TTFT, TPOT), not a query's.
    query_latency_bound = False

    def prepare(self, config: RunConfig, paths: Paths,
                on_progress: Callable[[str], ProgressCallback | None] | None
                ) -> TextGenerationPrepared:
        from suite.llm.card import load_llm_card, verify_weights

        card = load_llm_card(paths, config.benchmark)
        backend = _backend(config)
        stated = backend.stated
        # A remote engine's weights are not ours to hash: never the local file's digest
        model = ModelIdentity(verify_weights(card), "closed") if stated is None \
            else _served_model(card, stated)
        dataset = _dataset(card, config)
        reasons = backend.preflight(card, dataset.probe_prompt, dataset.tokenizer.encode_text,
                                    dataset.tokenizer.decode)
        if stated is not None:
            reasons += _unstated(stated, model)
        return TextGenerationPrepared(model, dataset.total_count, reasons, card=card,
                                      dataset=dataset, stated=stated)

    def build_sut(self, home: Path, config: RunConfig, enter: Callable[[str], None],
                  on_drain: Callable[[], None]) -> BuiltSut:
        from suite.llm.card import load_llm_card
        from suite.paths import find_paths

        card = load_llm_card(find_paths(home), config.benchmark)
        backend = _backend(config)
        built = _SUT_BUILDERS[backend.serving](backend, card, config, on_drain)
        enter("warming up")
        return built

    def packaged_model(self, paths: Paths, benchmark: str,
                       run: RunResult) -> tuple[str, str]:
        """An LLM card's prompts are token ids (int32, as its responses) and its weights a
        torch state dict, or, for a model the user's engine serves, where every test's
        engine said it loaded the weights from (``/v1/models`` ``root``). Nothing recorded
        is "", which the checker refuses (MEAS-JSON): the packager does not guess."""
        from suite.llm.card import load_llm_card

        llm = load_llm_card(paths, benchmark)
        if llm.model.source != "user":
            return llm.generation.response_dtype, llm.model.torch_state_dict
        roots = {str(t.backend.get("details", {}).get("model_root", "")) for t in run.tests}
        root = roots.pop() if len(roots) == 1 else ""
        known = root and "unreported" not in root.split(", ")
        return llm.generation.response_dtype, root if known else ""

    def local_model_digest(self, paths: Paths, benchmark: str) -> str:
        """The card's local weights (for a run the suite computed itself; an endpoint
        run's replay never compares with it: ``suite.audit.steps``)."""
        from suite.llm.card import load_llm_card, verify_weights

        return verify_weights(load_llm_card(paths, benchmark))


def _served_model(card: LLMCard, stated: StatedWeights) -> ModelIdentity:
    """A served model's identity: the submitter's stated digest (not verified), closed
    only where one is stated and, for a card with reference weights of its own, equals
    theirs; open otherwise, saying why."""
    from suite.llm.card import verify_weights

    source: Literal["stated by the submitter, not verified", "not recorded"] = (
        "stated by the submitter, not verified" if stated.sha256 else "not recorded")
    if not stated.sha256:
        return ModelIdentity("", "open", "backend.openai.stated_weights_sha256 is empty: "
                             "the suite cannot see a remote engine's weights, so nothing "
                             "says they are the reference weights (open division); state "
                             "the sha256 of the reference weights the served model was made "
                             "from", source)
    reference = verify_weights(card) if card.model.source != "user" else ""
    if reference and stated.sha256 != reference:
        return ModelIdentity(stated.sha256, "open", f"the stated weights sha256 "
                             f"{stated.sha256} is not the card's reference weights "
                             f"({reference}): open division", source)
    return ModelIdentity(stated.sha256, "closed", sha256_source=source)


def _unstated(stated: StatedWeights, model: ModelIdentity) -> list[str]:
    """Why an endpoint run is not submittable for want of a statement."""
    reasons = [model.reason] if model.reason else []
    if not stated.precision:
        reasons.append("backend.openai.stated_precision is empty: the weights' data type "
                       "the engine runs is not recorded")
    if not stated.quantization:
        reasons.append("backend.openai.stated_quantization is empty: what was done to the "
                       "reference weights is not recorded (state 'none' if nothing)")
    return reasons


def _in_process_sut(backend: GeneratingBackend, card: LLMCard, config: RunConfig,
                    on_drain: Callable[[], None]) -> BuiltSut:
    """The continuous batcher over the backend's generation backend."""
    from typing import cast

    from suite.harness.llm.sut import LLMSystemUnderTest
    from suite.harness.loadgen import TokenCompleter
    from suite.harness.sut.core import SystemUnderTest
    from suite.llm.generation import GenerationConfig

    generator = cast("InProcessGenerator", backend)  # its ``serving`` says so
    gen, info = generator.open(card, config.sut.max_batch_size)
    dataset = _dataset(card, config)
    completer = generator.make_completer() or TokenCompleter()
    if not isinstance(completer, TokenCompleter):
        raise BackendError(f"backend '{config.backend}': make_completer() returned "
                           f"{type(completer).__name__}, not a TokenCompleter")
    sut = LLMSystemUnderTest(
        gen, dataset, GenerationConfig.from_card(card), completer,
        report_first_token=config.scenario is not Scenario.OFFLINE,
        max_batch=config.sut.max_batch_size, on_drain=on_drain,
        static=generator.static_batching)
    return BuiltSut(cast(SystemUnderTest, sut), asdict(info))


def _endpoint_sut(backend: GeneratingBackend, card: LLMCard, config: RunConfig,
                  on_drain: Callable[[], None]) -> BuiltSut:
    """The streaming SUT, and the record of what the servers said (asked again here, so
    the record is this test's own)."""
    from typing import cast

    from suite.backends.base import BackendInfo
    from suite.harness.llm.endpoint_sut import EndpointSystemUnderTest
    from suite.harness.loadgen import TokenCompleter
    from suite.harness.sut.core import SystemUnderTest
    from suite.llm.contract import StatedWeights
    from suite.llm.endpoint.workers import default_workers

    endpoint = cast("EndpointGenerator", backend)  # its ``serving`` says so
    dataset = _dataset(card, config)
    record = endpoint.probe(card, dataset.probe_prompt, dataset.tokenizer.encode_text,
                            dataset.tokenizer.decode)
    workers = endpoint.client_workers
    # Every output id is checked against the tokenizer the run decodes with.
    settings = replace(endpoint.settings(card), vocab_size=dataset.tokenizer.vocab_size)
    sut = EndpointSystemUnderTest(settings, dataset, TokenCompleter(),
                                  report_first_token=config.scenario is not Scenario.OFFLINE,
                                  on_drain=on_drain,
                                  workers=default_workers() if workers < 0 else workers)
    details = {**record.details(), "client_workers": str(sut.workers)}
    stated = endpoint.stated or StatedWeights()
    # precision and quantization: the submitter's statement or nothing (packaging then
    # refuses), never a phrase that reads as a record
    info = BackendInfo(name=endpoint.name, version=f"httptools {_version('httptools')}",
                       device="remote", thread_safe=True, precision=stated.precision,
                       weight_transformations=stated.quantization, details=details)
    # ``run``: what each client process spent, filled in when the SUT stops (the key is
    # there from the start, so filling it never resizes the dict a status may be writing)
    backend_record = {**asdict(info), "run": {"client_workers": sut.workers}}
    sut.backend_record = backend_record
    return BuiltSut(cast(SystemUnderTest, sut), backend_record, sut.final_record)


#: The SUT each way of serving tokens gets (``suite.llm.contract.Serving``).
_SUT_BUILDERS: dict[str, Callable[[GeneratingBackend, LLMCard, RunConfig,
                                   Callable[[], None]], BuiltSut]] = {
    "in-process": _in_process_sut,
    "endpoint": _endpoint_sut,
}


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "unknown"


@dataclass
class TextGenerationPrepared(Prepared):
    card: LLMCard | None = None
    dataset: LLMDataset | None = None
    #: an endpoint run's statement of its weights (None: the suite computed in-process)
    stated: StatedWeights | None = None

    def provenance(self, tests: list[TestResult]) -> dict[str, Claim]:
        """An endpoint run's claims: the weights, precision and quantization as the
        submitter stated them (not verified), and what the engine reported (its name and
        version, where it loaded the weights from); in-process, the default."""
        from suite.results import NOT_RECORDED, REPORTED_BY_ENGINE, STATED_BY_SUBMITTER, Claim

        if self.stated is None:
            return super().provenance(tests)
        details: dict[str, Any] = tests[0].backend.get("details", {}) if tests else {}

        def stated(value: str) -> Claim:
            return Claim(value=value, source=STATED_BY_SUBMITTER if value else NOT_RECORDED)

        def reported(*keys: str) -> Claim:
            parts = [str(details.get(k) or "") for k in keys]
            known = [p for p in parts if p and "unreported" not in p.split(", ")]
            return Claim(value=" ".join(known),
                         source=REPORTED_BY_ENGINE if known else NOT_RECORDED)

        return {"weights": stated(self.stated.sha256),
                "precision": stated(self.stated.precision),
                "quantization": stated(self.stated.quantization),
                "engine": reported("engine", "engine_version"),
                "weights_location": reported("model_root")}

    def _parts(self) -> tuple[LLMCard, LLMDataset]:
        assert self.card is not None and self.dataset is not None
        return self.card, self.dataset

    def describe_dataset(self) -> dict[str, Any]:
        return self._parts()[1].describe()

    def compliance(self, config: RunConfig, paths: Paths, request: ConfigRequest
                   ) -> CompliancePlan:
        from suite.compliance import run as compliance_run
        from suite.harness.kinds import reasoning_compliance
        from suite.llm import test06

        if config.compliance in ("TEST07", "TEST09"):
            return reasoning_compliance.plan(config, paths, *self._parts())
        if config.compliance != test06.NAME:
            raise ConfigError(f"compliance test {config.compliance} does not apply to "
                              f"{config.benchmark}", hint="LLM benchmarks run TEST06")
        compliance_run.guard(config, paths.home)
        return _Test06Plan(self._parts()[0], config.scenario is Scenario.OFFLINE,
                           compliance_run.previous_attempts(config, test06.NAME))

    def score(self, test: TestResult, config: RunConfig) -> TestResult:
        from suite.llm.accuracy import score_log
        from suite.logs import DETAIL_LOG, parse_detail_log

        card, dataset = self._parts()
        target = config.resolved_rules.benchmark.accuracy_target
        if card.accuracy.metric == "round":
            return _score_round(test, dataset, config.resolved_rules.model, card)
        test_dir = Path(test.directory)
        try:
            errors = parse_detail_log(test_dir / DETAIL_LOG).errors
            scored = score_log(test_dir, card, dataset.tokenizer.decode, dataset.references,
                               target)
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


def _score_round(test: TestResult, dataset: LLMDataset, model: ModelRules | None,
                 card: LLMCard) -> TestResult:
    """A round model's accuracy: every target of the round's checker row must hold."""
    from suite.llm.accuracy import score_round_log
    from suite.llm.round import reasoning_log, scoring
    from suite.logs import DETAIL_LOG, parse_detail_log

    if model is None:
        return test.model_copy(update={"status": Status.FAILED, "message": "the round has "
                                       "no accuracy targets for this benchmark's model"})
    test_dir = Path(test.directory)
    try:
        errors = parse_detail_log(test_dir / DETAIL_LOG).errors
        result, passed, lines, digest = reasoning_log.score_log(
            test_dir, dataset, card.accuracy, model.targets, model.upper_limits
        ) if card.accuracy.evaluation else score_round_log(
            test_dir, dataset.tokenizer.decode, dataset.references, model.targets,
            model.upper_limits)
    except SuiteError as exc:
        return test.model_copy(update={"status": Status.FAILED, "message": str(exc)})
    first = next(iter(model.targets))
    key = scoring.METRIC_KEYS.get(first, first)
    accuracy = AccuracyResult(
        metric=first, value=float(str(result.get(key, 0.0))), target=model.targets[first],
        passed=passed and not errors, good=int(str(result["gen_num"])),
        total=int(str(result["gen_num"])), log_sha256=digest, loadgen_errors=errors[:20],
        details={k: float(v) for k, v in result.items() if isinstance(v, int | float)})
    status = Status.VALID if accuracy.passed else Status.INVALID
    return test.model_copy(update={"accuracy": accuracy, "status": status,
                                   "message": "; ".join(lines)})


class _Test06Plan(CompliancePlan):
    """TEST06: the run's LoadGen test under TEST06's audit.config (accuracy logged in
    performance mode); the verdict, from that accuracy log, decides the test's status."""

    def __init__(self, card: LLMCard, offline: bool, attempts: list[str]) -> None:
        from suite.llm import test06

        self.name = test06.NAME
        self.card, self.offline = card, offline
        #: the earlier attempts the records hold (this one is numbered after them)
        self.attempts = attempts
        self.outcome: ComplianceResult | None = None

    @contextlib.contextmanager
    def audit_config(self, test_dir: Path) -> Iterator[Path | None]:
        from suite.llm import test06

        test_dir.mkdir(parents=True, exist_ok=True)
        audit = test_dir / "audit.config"
        audit.write_text(test06.audit_text(), encoding="utf-8")
        try:
            yield audit
        finally:
            audit.unlink(missing_ok=True)  # never left where a later run could read it

    def judge_test(self, test: TestResult, run_dir: Path) -> TestResult:
        from suite.llm import test06
        from suite.logs import ACCURACY_LOG

        if test.status in (Status.FAILED, Status.INTERRUPTED):
            return test
        try:
            verdict = test06.verify_run(Path(test.directory) / ACCURACY_LOG, run_dir,
                                        self.offline, self.card.tokenizer.eos_id)
        except SuiteError as exc:
            return test.model_copy(update={"status": Status.FAILED, "message": str(exc)})
        lines = verdict.lines()
        self.outcome = ComplianceResult(
            test=test06.NAME, reference_run="", passed=verdict.passed,
            verdicts={line.partition(":")[0]: line.partition(": ")[2] for line in lines[:3]},
            evidence={test06.VERIFY_FILE: [*lines, *verdict.evidence]},
            attempt=len(self.attempts) + 1, previous_attempts=list(self.attempts))
        # LoadGen's performance verdict of a 100-query audit run says nothing; TEST06's does.
        return test.model_copy(update={"status": Status.VALID if verdict.passed
                                       else Status.INVALID})

    def judge_result(self, result: RunResult, run_dir: Path) -> RunResult:
        return result.model_copy(update={"compliance": self.outcome})
