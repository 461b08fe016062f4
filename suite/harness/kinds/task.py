"""Task cards (``suite.tasks``) in the tensor kind: what the one pipeline adds for them.

A task card is a tensor card (``suite.models.card_kind`` says so: its ``task`` is no other
kind's) whose ``task`` names a ``TensorTask``: a key of ``suite.tasks.TASKS``, or a
third-party ``"module:Class"``. ``task_spec`` resolves it once per card, here and nowhere
else; the tensor strategy (``kinds.tensor``) then asks this module for each stage:

* ``open_dataset``: the task opens the user's dataset directory, staged for LoadGen by
  ``task_data.TaskDataset``;
* ``TaskBackend``: what the SUT calls ``predict`` on: the task's ``infer`` around the
  backend's named call (``BackendBase.predict_named``), returning ``TaskOutputs``;
  ``responses`` turns them into the task's bytes (a batch the task's ``infer`` returned
  whole, ``tasks.base.Rows``, in one ``pack`` call where the task has one: one buffer, no
  per-sample Python), which ``loadgen.BytesCompleter`` hands to LoadGen per batch;
* ``score``: the accuracy log decoded to bytes per sample, ``TensorTask.score``, and
  ``accuracy.txt`` in the reference script's format with the log's hash;
* ``ensure_stand_in``: ``suite run --stand-in`` writes the task's stand-in (a small model
  with the official I/O contract, samples in the reference's layout) once into the cache
  (``paths.stand_in_dir``), where the config already points the run's dataset and model.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from suite.backends.base import BackendBase, BackendInfo
from suite.config.model import STAND_IN_REASON
from suite.errors import BackendError, ConfigError, DatasetError, SuiteError
from suite.models import ModelCard

if TYPE_CHECKING:
    from suite.harness.kinds.task_data import TaskDataset
    from suite.results import AccuracyResult
    from suite.tasks.base import Packed, Scratch, TensorTask

#: The samples a stand-in is written with.
STAND_IN_SAMPLES = 48
#: A stand-in's record in its directory, written last (its presence: complete).
STAND_IN_RECORD = "stand_in.json"
_SPEC = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
_SPEC_HINT = ("a card's task is a key of suite.tasks.TASKS, or a third-party task named "
              "'package.module:ClassName' (importable)")
#: What a class must have to be a ``TensorTask``.
_CONTRACT = ("open", "infer", "response", "score", "write_stand_in")


def task_spec(card: ModelCard) -> str | None:
    """The ``"module:Class"`` of the card's task, or None for a classification card
    (``[input]``/``[output]``/``[postprocess]``); ``ConfigError`` for a task card whose
    task is neither a ``TASKS`` key nor a ``module:Class``."""
    from suite.tasks import TASKS

    if not card.is_task_card:
        return None
    spec = TASKS.get(card.task) or (card.task if ":" in card.task else "")
    if not _SPEC.match(spec.strip()):
        known = ", ".join(sorted(TASKS)) or "none registered yet"
        raise ConfigError(f"{card.card_path}: task = {card.task!r} is no known task "
                          f"(suite.tasks.TASKS: {known}) and no 'module:Class'",
                          hint=_SPEC_HINT)
    return spec.strip()


def load_task(card: ModelCard) -> TensorTask:
    """An instance of the card's task (``task_spec``); one clear ``ConfigError`` when it
    cannot be imported or is not a ``TensorTask``."""
    spec = task_spec(card)
    assert spec is not None, "load_task is for task cards"
    module_name, _, class_name = spec.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
        task = cls()
    # A third-party task's import runs its code: whatever it raises is "this task cannot
    # be used", in one line (as for a custom backend).
    except (Exception, SystemExit) as exc:
        raise ConfigError(f"{card.card_path}: task {spec!r} cannot be loaded: "
                          f"{type(exc).__name__}: {exc}", hint=_SPEC_HINT) from None
    missing = [name for name in _CONTRACT if not callable(getattr(task, name, None))]
    if missing:
        raise ConfigError(f"{card.card_path}: task {spec!r} is not a TensorTask (no "
                          f"{', '.join(missing)})",
                          hint="implement suite.tasks.base.TensorTask")
    typed: TensorTask = task
    return typed


def open_dataset(task: TensorTask, card: ModelCard, dataset_dir: str) -> TaskDataset:
    """The task's dataset at ``dataset_dir``, staged for LoadGen; a missing or bad
    directory is one ``DatasetError`` naming it."""
    from suite.harness.kinds.task_data import TaskDataset

    if not dataset_dir:
        raise DatasetError(f"benchmark '{card.name}' needs its dataset directory "
                           f"({card.dataset.name}); none is configured",
                           hint="set data.dataset_dir (--set data.dataset_dir=/path), or run "
                                "the card's stand-in with --stand-in")
    path = Path(dataset_dir)
    if not path.is_dir():
        raise DatasetError(f"dataset directory {path} does not exist (data.dataset_dir of "
                           f"benchmark '{card.name}')",
                           hint="point data.dataset_dir at the dataset as downloaded")
    try:
        return TaskDataset(card, task.open(path, card))
    except SuiteError:
        raise
    except (OSError, ValueError, KeyError, IndexError) as exc:  # a task's unworded error
        raise DatasetError(f"dataset directory {path}: {type(exc).__name__}: {exc}",
                           hint=f"check it against the layout of {card.dataset.name}") from None


@dataclass(frozen=True)
class TaskOutputs:
    """A batch's outputs as the task's ``infer`` returned them, with the QSL indices."""

    indices: list[int]
    outputs: Sequence[Mapping[str, Any]]

    def __len__(self) -> int:
        return len(self.outputs)


class TaskBackend(BackendBase):
    """The SUT's backend for a task card: ``predict`` is the task's ``infer`` over the
    staged batch, calling the loaded backend's ``predict_named``; the rest delegates."""

    name = "task"

    def __init__(self, inner: BackendBase, task: TensorTask, dataset: TaskDataset,
                 card: ModelCard) -> None:
        super().__init__(inner.options)
        self.inner, self.task, self.dataset = inner, task, dataset
        self._outputs = tuple(spec.name for spec in card.outputs)
        self._call = inner.predict_named

    @property
    def warm_per_thread(self) -> bool:
        return self.inner.warm_per_thread

    def load(self, card: ModelCard, max_batch_size: int) -> BackendInfo:
        raise BackendError("a task backend wraps a loaded backend")

    def call(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """The model once, its outputs checked against the card's ``[[outputs]]``."""
        outputs = self._call(inputs)
        if missing := [name for name in self._outputs if name not in outputs]:
            raise BackendError(f"backend '{self.inner.name}' returned no output "
                               f"{missing[0]!r} (it returned {sorted(outputs)})")
        return outputs

    def predict(self, batch: Any) -> Any:
        samples = self.dataset.samples(batch)
        outputs = self.task.infer(self.call, samples)
        if len(outputs) != len(samples):
            raise BackendError(f"task '{self.task.name}' returned {len(outputs)} outputs "
                               f"for a batch of {len(samples)}")
        return TaskOutputs(samples.indices(), outputs)

    def begin_record(self) -> None:
        self.inner.begin_record()

    def run_record(self) -> dict[str, Any]:
        return self.inner.run_record()

    def close(self) -> None:
        self.inner.close()


class ResponseBytes(list[bytes]):
    """A batch's response bytes; ``n_tokens`` where the task counts output tokens (whisper:
    LoadGen's token latencies want each sample's count, as the reference SUT sends it)."""

    n_tokens: list[int] | None = None


def responses(task: TensorTask) -> Callable[[Any], Sequence[bytes]]:
    """The SUT's postprocess for a task card: each sample's response bytes (``Packed``
    from the task's ``pack`` where it has one and ``infer`` returned the batch whole)."""
    from suite.harness.kinds.task_data import ReusedBuffer
    from suite.tasks.base import Rows

    response = task.response
    pack: Callable[[list[int], Mapping[str, Any], Scratch], Packed] | None = getattr(
        task, "pack", None)
    scratch = ReusedBuffer()

    def postprocess(outputs: TaskOutputs) -> Sequence[bytes]:
        if pack is not None and isinstance(outputs.outputs, Rows):
            return pack(outputs.indices, outputs.outputs.batch, scratch)
        out = ResponseBytes(response(index, one) for index, one in
                            zip(outputs.indices, outputs.outputs, strict=True))
        if outputs.outputs and all("n_tokens" in one for one in outputs.outputs):
            out.n_tokens = [int(one["n_tokens"]) for one in outputs.outputs]
        return out

    return postprocess


def check_batch(outputs: Any, n: int) -> None:
    """The SUT's output contract for a task card: one output per sample."""
    if len(outputs) != n:
        raise BackendError(f"a batch of {n} samples has {len(outputs)} outputs")


def score(test_dir: Path, task: TensorTask, dataset: TaskDataset, target: float,
          errors: list[str]) -> AccuracyResult:
    """The task's accuracy from the test's accuracy log; writes ``accuracy.txt``."""
    from suite.accuracy import decode_response_bytes, write_accuracy_txt
    from suite.logs import ACCURACY_LOG
    from suite.results import AccuracyResult

    decoded = decode_response_bytes(test_dir / ACCURACY_LOG, dataset.total_count)
    result = task.score(dataset.data, decoded)
    digest = write_accuracy_txt(test_dir, result.lines)
    return AccuracyResult(
        metric=result.metric, value=round(result.value, 5), target=target,
        passed=result.value >= target and not errors, good=len(decoded),
        total=dataset.total_count, log_sha256=digest, loadgen_errors=errors[:20],
        details=dict(result.details))


def ensure_stand_in(task: TensorTask, card: ModelCard, root: Path, seed: int) -> None:
    """The stand-in of ``card`` in ``root`` (``paths.stand_in_dir``): ``dataset`` and
    ``model.onnx`` there, written by the task unless a complete one is present."""
    if (root / STAND_IN_RECORD).is_file():
        return
    tmp = root.with_name(f"{root.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
        made = task.write_stand_in(tmp / "files", samples=STAND_IN_SAMPLES, seed=seed)
        for link, target in (("dataset", made.dataset_dir), ("model.onnx", made.model_path)):
            relative = Path(target).resolve().relative_to(tmp.resolve())
            (tmp / link).symlink_to(relative)
        record = {"card": card.name, "task": card.task, "seed": seed,
                  "samples": made.samples, "reason": STAND_IN_REASON}
        (tmp / STAND_IN_RECORD).write_text(json.dumps(record, indent=1) + "\n")
        if not (root / STAND_IN_RECORD).is_file():  # else another run finished one first
            shutil.rmtree(root, ignore_errors=True)  # an incomplete one
            with contextlib.suppress(OSError):
                tmp.rename(root)
    except ValueError:
        raise ConfigError(f"task {card.task!r} wrote its stand-in outside {tmp}",
                          hint="write_stand_in must write under the directory it is given"
                          ) from None
    except OSError as exc:
        raise SuiteError(f"cannot write the stand-in of '{card.name}' in {root.parent}: "
                         f"{exc}", hint="check that the cache directory is writable "
                         "(data.cache_dir)") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if not (root / STAND_IN_RECORD).is_file():
        raise SuiteError(f"the stand-in of '{card.name}' was not written to {root}")
