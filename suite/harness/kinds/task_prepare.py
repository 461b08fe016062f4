"""A task card's stages of the tensor kind (``kinds.tensor`` calls them): ``prepare_task``
in the parent (the stand-in, the model checked, the dataset opened), ``build_task_sut`` in
the child (the one batching ``SystemUnderTest`` over ``task.TaskBackend``), and
``score_test`` (the accuracy test scored through the task; a stand-in's scored, not judged).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from suite.errors import ConfigError, SuiteError
from suite.harness.kinds.base import BuiltSut
from suite.harness.kinds.task import (
    TaskBackend,
    check_batch,
    ensure_stand_in,
    load_task,
    open_dataset,
    responses,
    score,
)
from suite.models import ModelCard, ModelIdentity, check_model
from suite.results import Status, TestResult

if TYPE_CHECKING:
    from suite.backends.base import BackendBase, BackendInfo
    from suite.config.model import RunConfig
    from suite.datasets.base import InMemoryDataset
    from suite.harness.kinds.task_data import TaskDataset
    from suite.paths import Paths
    from suite.tasks.base import TensorTask


def prepare_task(config: RunConfig, paths: Paths, card: ModelCard
                 ) -> tuple[TensorTask, ModelCard, ModelIdentity, TaskDataset]:
    """Everything before a run directory, for a task card: its task, the card with its
    model file, what that file is, and the dataset opened."""
    from suite.backends import backend_class
    from suite.config.model import STAND_IN_REASON, STAND_IN_SEED
    from suite.paths import stand_in_dir

    task = load_task(card)
    if not getattr(backend_class(config.backend), "serves_tasks", False):
        raise ConfigError(f"backend '{config.backend}' does not run task cards ('{card.name}': "
                          "every [[inputs]] and [[outputs]] tensor by name)",
                          hint="use onnxruntime, torch, simulated or null")
    if config.sut.worker_model == "processes":
        raise ConfigError(f"sut.worker_model = 'processes' is not implemented for task cards "
                          f"('{card.name}')", hint="set sut.worker_model = 'threads'")
    if config.stand_in:  # in the run's cache directory, as the config's paths say
        root = stand_in_dir(Path(config.data.cache_dir or paths.cache), card.name,
                            STAND_IN_SEED)
        ensure_stand_in(task, card, root, STAND_IN_SEED)
        stand_in_model(root, getattr(backend_class(config.backend), "stand_in_model", ""))
    card = card.with_model_path(config.data.model_path)
    model = check_model(card, paths.cache)
    if config.stand_in:  # the stand-in's own model: say that, not which file it is not
        model = replace(model, division="open", reason=STAND_IN_REASON)
    return task, card, model, open_dataset(task, card, config.data.dataset_dir)


def stand_in_model(root: Path, name: str) -> None:
    """The stand-in's model file ``name`` that the run's backend loads: ``model.onnx``,
    written with the stand-in, or a file derived from it once (torch's exported program,
    ``suite.tasks.standin_torch``); a name no converter makes is left to ``check_model``.

    A derived file is written beside the ONNX file's target and linked as ``root/name``,
    as ``model.onnx`` is: a task finds the files beside its model there (whisper's
    tokenizer)."""
    if not name or (root / name).is_file():
        return
    from suite.tasks.standin_torch import PROGRAM_FILE, write_program

    if name == PROGRAM_FILE:
        try:
            source = (root / "model.onnx").resolve()
            target = write_program(source, source.with_name(name))
            link = root / f".{name}.{os.getpid()}.link"
            link.unlink(missing_ok=True)
            link.symlink_to(target.relative_to(root.resolve()))
            os.replace(link, root / name)  # atomic: a concurrent run's link is the same
        except OSError as exc:
            raise SuiteError(f"cannot write the stand-in's {name} in {root}: {exc}",
                             hint="check that the cache directory is writable "
                                  "(data.cache_dir)") from None


def build_task_sut(card: ModelCard, backend: BackendBase, info: BackendInfo,
                   config: RunConfig, enter: Callable[[str], None],
                   on_drain: Callable[[], None]) -> BuiltSut:
    """In the child: the task's dataset staged and the SUT built over the loaded backend."""
    from suite.harness.loadgen import BytesCompleter
    from suite.harness.sut.core import SystemUnderTest

    if not backend.serves_tasks:
        raise ConfigError(f"backend '{config.backend}' does not run task cards ('{card.name}')",
                          hint="use onnxruntime, torch, simulated or null")
    task = load_task(card)
    enter("opening dataset")
    dataset = open_dataset(task, card, config.data.dataset_dir)
    enter("warming up")
    sut = SystemUnderTest(
        TaskBackend(backend, task, dataset, card), dataset, cast(Any, responses(task)),
        BytesCompleter(),
        config.scenario, config.sut, on_drain=on_drain,
        latency_bound_ms=config.loadgen.latency_bound_ms,
        target_qps=config.loadgen.target_qps, contract=check_batch)
    return BuiltSut(sut, asdict(info), backend.run_record)


def _staged(dataset: InMemoryDataset) -> TaskDataset:
    from suite.harness.kinds.task_data import TaskDataset

    assert isinstance(dataset, TaskDataset), "a task card's dataset is a TaskDataset"
    return dataset


def scorer(task: TensorTask, dataset: InMemoryDataset
           ) -> Callable[[Mapping[int, bytes]], tuple[float, list[str]]]:
    """TEST01's fallback for a task card: the task's score of a sampled set of responses."""

    data = _staged(dataset).data

    def score_sampled(sampled: Mapping[int, bytes]) -> tuple[float, list[str]]:
        result = task.score(data, sampled)
        return result.value, list(result.lines)

    return score_sampled


def score_test(test: TestResult, config: RunConfig, task: TensorTask,
               staged: InMemoryDataset, stand_in: bool) -> TestResult:
    """The accuracy test's verdict from its accuracy log, scored by the task."""
    from suite.logs import DETAIL_LOG, parse_detail_log

    dataset = _staged(staged)
    test_dir = Path(test.directory)
    try:
        errors = parse_detail_log(test_dir / DETAIL_LOG).errors
        accuracy = score(test_dir, task, dataset,
                         config.resolved_rules.benchmark.accuracy_target, errors)
    except SuiteError as exc:
        return test.model_copy(update={"status": Status.FAILED, "message": str(exc)})
    except Exception as exc:  # the task's score failed: the test did, in one line
        return test.model_copy(update={"status": Status.FAILED, "message": (
            f"task '{task.name}' could not score {test_dir}: {type(exc).__name__}: {exc}")})
    if stand_in:  # scored, not judged: a stand-in's model is not the reference
        return test.model_copy(update={"accuracy": accuracy, "status": Status.VALID,
                                       "message": "stand-in: accuracy scored, not judged "
                                                  "against the round's target"})
    status = Status.VALID if accuracy.passed else Status.INVALID
    return test.model_copy(update={"accuracy": accuracy, "status": status})
