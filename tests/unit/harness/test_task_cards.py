"""Task cards (``suite.tasks``) in the tensor pipeline, without LoadGen: the card model,
resolving a card's task, the staged dataset, the named backend call, the response bytes
decoded from an accuracy log, and TEST01's fallback through a task's score."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from suite.accuracy import decode_response_bytes
from suite.backends.null import NullBackend
from suite.errors import ConfigError, DatasetError, SuiteError
from suite.harness.kinds.task import (
    TaskBackend,
    ensure_stand_in,
    load_task,
    open_dataset,
    responses,
    task_spec,
)
from suite.harness.kinds.task_data import QSL_FIELD, TaskDataset
from suite.models import Kind, ModelCard, card_kind
from suite.paths import project_paths
from suite.tasks import base
from tests.support.toy_task import ToyTask, kept_columns

REPO = Path(__file__).resolve().parents[3]
CARD = REPO / "tests" / "support" / "toy_task_card.toml"


def _card(directory: Path, text: str | None = None) -> ModelCard:
    data = tomllib.loads(text if text is not None else CARD.read_text(encoding="utf-8"))
    return ModelCard.model_validate({**data, "directory": directory})


def test_a_task_card_has_every_tensor_and_its_options(tmp_path: Path) -> None:
    card = _card(tmp_path)
    assert card.is_task_card and card.postprocess.kind == "task"
    assert [t.name for t in card.inputs] == ["x", "mask"]
    assert [t.name for t in card.outputs] == ["y", "total"]
    assert card.input.name == "x" and card.output.name == "y"
    assert card.task_options == {"note": "read by the task only"}
    assert card.accuracy.metric == "acc" and card.accuracy.closed_target == 99.0


def test_a_task_table_names_the_task_beside_its_options(tmp_path: Path) -> None:
    text = CARD.read_text(encoding="utf-8").replace(
        'task = "tests.support.toy_task:ToyTask"\n', "").replace(
        "[task_options]", '[task]\nname = "tests.support.toy_task:ToyTask"')
    card = _card(tmp_path, text)
    assert card.task == "tests.support.toy_task:ToyTask"
    assert card.task_options == {"note": "read by the task only"}
    home = tmp_path / "home"
    (home / "reference_models" / "toy").mkdir(parents=True)
    (home / "reference_models" / "toy" / "model.toml").write_text(text)
    assert card_kind(project_paths(home), "toy") is Kind.TENSOR


def test_a_task_card_may_not_mix_in_a_classification_table(tmp_path: Path) -> None:
    text = CARD.read_text(encoding="utf-8") + '\n[postprocess]\nkind = "argmax"\n'
    with pytest.raises(ValueError, match=r"not \[postprocess\]"):
        _card(tmp_path, text)


def test_a_classification_card_is_no_task_card(tmp_path: Path) -> None:
    from suite.models import load_card
    from suite.paths import find_paths

    digits = load_card(find_paths(), "digits")
    assert not digits.is_task_card and task_spec(digits) is None
    assert [t.name for t in digits.inputs] == [digits.input.name]


def test_the_task_resolves_from_tasks_or_module_class(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    card = _card(tmp_path)
    assert task_spec(card) == "tests.support.toy_task:ToyTask"
    assert isinstance(load_task(card), ToyTask)
    monkeypatch.setitem(__import__("suite.tasks").tasks.TASKS, "toy-qa",
                        "tests.support.toy_task:WideToyTask")
    assert task_spec(card.model_copy(update={"task": "toy-qa"})) == \
        "tests.support.toy_task:WideToyTask"
    with pytest.raises(ConfigError, match="is no known task"):
        task_spec(card.model_copy(update={"task": "question-answering-typo"}))
    with pytest.raises(ConfigError, match="cannot be loaded"):
        load_task(card.model_copy(update={"task": "tests.support.toy_task:NoSuchTask"}))
    with pytest.raises(ConfigError, match="is not a TensorTask"):
        load_task(card.model_copy(update={"task": "collections:OrderedDict"}))


@pytest.fixture
def stand_in(tmp_path: Path) -> tuple[ModelCard, Path]:
    card = _card(tmp_path)
    root = tmp_path / "cache" / "stand-ins" / "toytask-seed0"
    ensure_stand_in(ToyTask(), card, root, 0)
    return card.with_model_path(str(root / "model.onnx")), root


def test_a_stand_in_is_written_once_and_reused(stand_in: tuple[ModelCard, Path]) -> None:
    card, root = stand_in
    record = json.loads((root / "stand_in.json").read_text())
    assert record["samples"] == 48 and record["seed"] == 0
    assert (root / "dataset" / "x.npy").is_file() and (root / "model.onnx").is_file()
    stamp = (root / "dataset" / "x.npy").stat().st_mtime_ns
    ensure_stand_in(ToyTask(), card, root, 0)  # present: not written again
    assert (root / "dataset" / "x.npy").stat().st_mtime_ns == stamp


def test_equal_shapes_are_staged_stacked(stand_in: tuple[ModelCard, Path]) -> None:
    card, root = stand_in
    dataset = open_dataset(ToyTask(), card, str(root / "dataset"))
    assert dataset.staging == "stacked" and dataset.total_count == 48
    dataset.load([5, 3, 7])
    batch = dataset.gather(np.array([7, 5]), dataset.new_buffer(4))
    samples = dataset.samples(batch)
    assert samples.indices() == [7, 5]
    stacked = base.stack(samples)
    assert stacked["x"].flags["C_CONTIGUOUS"] and stacked["x"].shape == (2, 8)
    np.testing.assert_array_equal(stacked["mask"][0], dataset.data.mask[7])
    np.testing.assert_array_equal(samples[1]["x"], dataset.data.x[5])


def test_varying_shapes_are_staged_per_sample(tmp_path: Path) -> None:
    class Varying:
        total_count = 3

        def inputs(self, index: int) -> dict[str, Any]:
            return {"x": np.zeros(index + 1, np.float32), "mask": np.ones(2, np.int64)}

        def describe(self) -> dict[str, Any]:
            return {}

    dataset = TaskDataset(_card(tmp_path), Varying())
    assert dataset.staging == "per-sample"
    dataset.load([2, 0])
    samples = dataset.samples(dataset.gather(np.array([0, 2]), dataset.new_buffer(2)))
    assert samples.stacked() is None and samples.indices() == [0, 2]
    assert samples[1]["x"].shape == (3,) and QSL_FIELD not in samples[1]
    warm = dataset.samples(np.zeros(2, dtype=object))  # a warm-up batch: sample 0 stands in
    assert warm.indices() == [-1, -1] and warm[0]["x"].shape == (1,)


def test_a_bad_dataset_directory_is_one_dataset_error(stand_in: tuple[ModelCard, Path],
                                                      tmp_path: Path) -> None:
    card, root = stand_in
    with pytest.raises(DatasetError, match="does not exist"):
        open_dataset(ToyTask(), card, str(tmp_path / "nowhere"))
    broken = tmp_path / "broken"
    shutil.copytree(root / "dataset", broken)
    (broken / "labels.json").unlink()
    with pytest.raises(DatasetError, match=r"labels\.json is missing"):
        open_dataset(ToyTask(), card, str(broken))


def test_named_outputs_become_response_bytes(stand_in: tuple[ModelCard, Path]) -> None:
    card, root = stand_in
    task = ToyTask()
    dataset = open_dataset(task, card, str(root / "dataset"))
    dataset.load(list(range(48)))
    null = NullBackend()
    null.load(card, 8)
    backend = TaskBackend(null, task, dataset, card)
    outputs = backend.predict(dataset.gather(np.array([4, 9, 2]), dataset.new_buffer(8)))
    assert outputs.indices == [4, 9, 2]
    payloads = responses(task)(outputs)
    assert [len(p) for p in payloads] == [4 * (1 + kept_columns(i)) for i in (4, 9, 2)]


def _log(path: Path, entries: list[tuple[int, bytes]]) -> Path:
    path.write_text(json.dumps([{"seq_id": n, "qsl_idx": i, "data": d.hex()}
                                for n, (i, d) in enumerate(entries)]))
    return path


def test_response_bytes_are_decoded_once_per_sample(tmp_path: Path) -> None:
    log = _log(tmp_path / "a.json", [(1, b"\x01\x02"), (0, b""), (1, b"\x01\x02")])
    assert decode_response_bytes(log, 2) == {0: b"", 1: b"\x01\x02"}
    with pytest.raises(SuiteError, match="1 of 3 samples have no response"):
        decode_response_bytes(log, 3)
    clash = _log(tmp_path / "b.json", [(0, b"\x01"), (0, b"\x02")])
    with pytest.raises(SuiteError, match="two different responses"):
        decode_response_bytes(clash, 1)


def test_test01_falls_back_to_the_tasks_score(tmp_path: Path) -> None:
    from suite.compliance.test01 import Test01

    def scorer(sampled: dict[int, bytes]) -> tuple[float, list[str]]:
        good = sum(1 for data in sampled.values() if data.startswith(b"ok"))
        value = 100.0 * good / len(sampled)
        return value, [f"accuracy={value:.3f}%, good={good}, total={len(sampled)}"]

    lines: list[str] = []
    truth = {0: [b"ok-a"], 1: [b"ok-b"]}
    check = Test01({"accuracy_delta_percent": 0.1}, {})
    (tmp_path / "acc").mkdir()
    assert check._fallback({0: [b"ok-x"], 1: [b"ok-b"]}, truth, scorer, tmp_path / "acc",
                           lines, None)
    assert (tmp_path / "acc" / "compliance_accuracy.txt").read_text().startswith(
        "accuracy=100.000%")
    assert not check._fallback({0: [b"bad"], 1: [b"ok-b"]}, truth, scorer, tmp_path / "acc",
                               lines, None)


@pytest.mark.parametrize("name", ["null", "simulated"])
def test_null_and_simulated_return_every_declared_output(name: str) -> None:
    from suite.backends import create

    card = _card(REPO / "reference_models" / "toytask")  # beside reference_models/simulated
    backend = create(name, {"profile": "digits-h100"} if name == "simulated" else {})
    backend.load(card, 8)
    outputs = backend.predict_named({"x": np.zeros((3, 8), np.float32),
                                     "mask": np.zeros((3, 8), np.int64)})
    assert {k: (v.shape, str(v.dtype)) for k, v in outputs.items()} == {
        "y": ((3, 8), "float32"), "total": ((3, 1), "float32")}
    assert backend.serves_tasks


def test_a_sample_off_the_cards_fixed_shape_is_a_dataset_error(tmp_path: Path) -> None:
    class LaterVaries:
        total_count = 2

        def inputs(self, index: int) -> dict[str, Any]:
            return {"x": np.zeros(8 - index, np.float32), "mask": np.ones(8, np.int64)}

        def describe(self) -> dict[str, Any]:
            return {}

    dataset = TaskDataset(_card(tmp_path), LaterVaries())  # sample 0 fits: stacked
    assert dataset.staging == "stacked"
    with pytest.raises(DatasetError, match=r"sample 1 input 'x' has shape \(7,\)") as raised:
        dataset.load([0, 1])
    assert "declares those axes -1" in (raised.value.hint or "")
