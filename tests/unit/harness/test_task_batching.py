"""A task card's batch path without per-sample Python (``kinds.task_data``,
``tasks.base``, ``loadgen.BytesCompleter``): stacked inputs staged one array per input
and gathered as slices (also across the end of the staged set) or taken into the
worker's buffer; a batch's outputs kept whole (``Rows``); responses packed in one buffer
(``Packed``) with exactly the bytes ``response`` gives; and completed in place, the
response objects reused while the buffer stays where it was."""

from __future__ import annotations

import ctypes
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from suite.backends.null import NullBackend
from suite.harness import loadgen
from suite.harness.kinds.task import TaskBackend, ensure_stand_in, open_dataset, responses
from suite.harness.kinds.task_data import ReusedBuffer, TaskDataset
from suite.models import ModelCard
from suite.tasks.base import Packed, Rows, pack_parts, pack_rows, split
from suite.tasks.squad import OUTPUTS, SquadTask
from tests.support.toy_task import ToyTask

REPO = Path(__file__).resolve().parents[3]
CARD = REPO / "tests" / "support" / "toy_task_card.toml"


@pytest.fixture
def toy(tmp_path: Path) -> tuple[ModelCard, Path]:
    data = tomllib.loads(CARD.read_text(encoding="utf-8"))
    card = ModelCard.model_validate({**data, "directory": tmp_path})
    root = tmp_path / "stand-in"
    ensure_stand_in(ToyTask(), card, root, 0)
    return card.with_model_path(str(root / "model.onnx")), root


def _dataset(toy: tuple[ModelCard, Path], max_batch: int, loaded: list[int]
             ) -> tuple[TaskDataset, Any]:
    card, root = toy
    dataset = open_dataset(ToyTask(), card, str(root / "dataset"))
    buffer = dataset.new_buffer(max_batch)  # as the SUT does, before LoadGen loads
    dataset.load(loaded)
    return dataset, buffer


def _staged(dataset: TaskDataset) -> dict[str, Any]:
    fields: dict[str, Any] = dataset.staged()[1].fields  # type: ignore[attr-defined]
    return fields


@pytest.mark.parametrize("order", [[7, 1, 5, 3, 7, 1], [3, 7, 1, 5, 3, 7, 1, 5]])
def test_batches_in_load_order_are_slices_even_across_the_end(
        toy: tuple[ModelCard, Path], order: list[int]) -> None:
    dataset, buffer = _dataset(toy, 8, [5, 3, 7, 1])
    batch = dataset.gather(np.array(order), buffer)
    samples = dataset.samples(batch)
    stacked = samples.stacked()
    assert stacked is not None and samples.indices() == order
    for name, array in stacked.items():
        assert array.flags["C_CONTIGUOUS"] and array.shape[0] == len(order)
        assert not np.shares_memory(array, buffer)  # a view of the staged inputs
        assert np.shares_memory(array, dataset._fields[name])
    np.testing.assert_array_equal(stacked["x"], dataset.data.x[order])
    np.testing.assert_array_equal(stacked["mask"], dataset.data.mask[order])
    np.testing.assert_array_equal(_staged(dataset)["x"], dataset.data.x[[5, 3, 7, 1]])
    # QSL indices of another integer type: the same slices
    narrow = dataset.samples(dataset.gather(np.array(order, np.int32), buffer)).stacked()
    assert narrow is not None and np.shares_memory(narrow["x"], dataset._fields["x"])
    np.testing.assert_array_equal(narrow["x"], dataset.data.x[order])


def test_other_batches_are_taken_into_the_workers_buffer(
        toy: tuple[ModelCard, Path]) -> None:
    dataset, buffer = _dataset(toy, 8, [5, 3, 7, 1, 9])
    order = [9, 5, 5, 1, 3, 7, 3, 9]
    stacked = dataset.samples(dataset.gather(np.array(order), buffer)).stacked()
    assert stacked is not None
    for array in stacked.values():
        assert array.flags["C_CONTIGUOUS"] and array.flags["ALIGNED"]
        assert np.shares_memory(array, buffer)
    assert not np.shares_memory(stacked["x"], stacked["mask"])
    np.testing.assert_array_equal(stacked["x"], dataset.data.x[order])
    np.testing.assert_array_equal(stacked["mask"], dataset.data.mask[order])
    # a buffer that is not the dataset's: new arrays, the same values
    other = dataset.samples(dataset.gather(np.array(order), np.zeros(3))).stacked()
    assert other is not None and not np.shares_memory(other["x"], buffer)
    np.testing.assert_array_equal(other["x"], dataset.data.x[order])


def test_one_sample_is_a_view_and_an_unloaded_one_an_error(
        toy: tuple[ModelCard, Path]) -> None:
    from suite.errors import DatasetError

    dataset, buffer = _dataset(toy, 4, [2, 6])
    one = dataset.samples(dataset.gather(np.array([6]), buffer))
    assert one.indices() == [6] and one[0]["x"].tolist() == dataset.data.x[6].tolist()
    with pytest.raises(DatasetError, match="not loaded"):
        dataset.gather(np.array([2, 4]), buffer)
    with pytest.raises(DatasetError, match="not loaded"):  # the first one unloaded
        dataset.gather(np.array([4, 2]), buffer)
    with pytest.raises(DatasetError, match="not loaded"):
        dataset.sample(4)


def test_a_warm_up_batch_is_zeros_of_every_input(toy: tuple[ModelCard, Path]) -> None:
    dataset, buffer = _dataset(toy, 4, [0])
    buffer.fill(0)
    warm = dataset.samples(buffer[:3])
    stacked = warm.stacked()
    assert stacked is not None and warm.indices() == [-1, -1, -1]
    assert stacked["x"].shape == (3, 8) and not stacked["x"].any()


def test_rows_are_per_sample_views_of_the_batch() -> None:
    batch = {"a": np.arange(12).reshape(4, 3), "b": np.arange(4)}
    rows = split(batch, 4)
    assert isinstance(rows, Rows) and rows.batch is batch and len(rows) == 4
    assert rows[1]["a"].tolist() == [3, 4, 5] and int(rows[-1]["b"]) == 3
    assert [int(r["b"]) for r in rows] == [0, 1, 2, 3]
    assert [int(r["b"]) for r in rows[1:3]] == [1, 2]
    with pytest.raises(IndexError):
        rows[4]


def test_packed_rows_and_parts_are_each_samples_bytes() -> None:
    rows = np.arange(24, dtype=np.float32).reshape(4, 3, 2)
    packed = pack_rows(rows)
    assert len(packed) == 4 and packed.row_bytes == 24
    assert list(packed) == [row.tobytes() for row in rows]
    parts = [np.arange(k, dtype=np.float32) for k in (2, 0, 5)]
    joined = pack_parts(parts)
    assert list(joined) == [p.tobytes() for p in parts] and joined.row_bytes == 0
    assert list(pack_parts([])) == []


def test_squads_packed_batch_is_its_response_bytes() -> None:
    rng = np.random.default_rng(3)
    outputs = {name: rng.normal(size=(5, 384)).astype(np.float32) for name in OUTPUTS}
    task = SquadTask()
    expected = [task.response(k, row) for k, row in enumerate(split(outputs, 5))]
    assert list(task.pack(list(range(5)), outputs, np.empty)) == expected
    reused = ReusedBuffer()
    first = task.pack(list(range(5)), outputs, reused)
    assert list(first) == expected
    second = task.pack(list(range(5)), outputs, reused)
    assert second.payload.ctypes.data == first.payload.ctypes.data  # the same memory


def test_the_pipeline_packs_where_the_task_can(toy: tuple[ModelCard, Path]) -> None:
    class PackingToy(ToyTask):
        """The toy task with a ``pack``: variable-sized rows, as ``response`` gives."""

        def pack(self, indices: list[int], outputs: Any, out: Any) -> Packed:
            return pack_parts([np.frombuffer(self.response(i, row), np.uint8)
                               for i, row in zip(indices, split(outputs, len(indices)),
                                                 strict=True)])

    card, root = toy
    for task in (ToyTask(), PackingToy()):
        dataset = open_dataset(task, card, str(root / "dataset"))
        dataset.new_buffer(8)
        dataset.load(list(range(48)))
        null = NullBackend()
        null.load(card, 8)
        outputs = TaskBackend(null, task, dataset, card).predict(
            dataset.gather(np.array([4, 9, 2]), dataset.new_buffer(8)))
        made = responses(task)(outputs)
        assert isinstance(made, Packed) == isinstance(task, PackingToy)
        assert list(made) == [task.response(i, row) for i, row in
                              zip([4, 9, 2], outputs.outputs, strict=True)]


def test_packed_batches_are_completed_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[list[tuple[int, bytes]]] = []
    objects: list[list[int]] = []

    def complete(responses: list[Any]) -> None:  # LoadGen copies during the call
        sent.append([(r.id, ctypes.string_at(r.data, r.size)) for r in responses])
        objects.append([id(r) for r in responses])

    monkeypatch.setattr(loadgen.lg, "QuerySamplesComplete", complete)
    completer = loadgen.BytesCompleter()
    reused = ReusedBuffer()
    for ids, base in (([11, 12, 13], 0), ([21, 22], 100), ([31, 32, 33], 200)):
        rows = reused((len(ids), 2), np.float32)
        rows[:] = base + np.arange(2 * len(ids)).reshape(-1, 2)
        completer.complete(ids, pack_rows(rows))
        assert sent[-1] == [(qid, row.tobytes()) for qid, row in zip(ids, rows, strict=True)]
    assert objects[1] == objects[0][:2] and objects[2] == objects[0]  # reused, ids rewritten
    varied = pack_parts([np.ones(3, np.uint8), np.zeros(0, np.uint8)])
    completer.complete([41, 42], varied)
    assert sent[-1] == [(41, b"\x01\x01\x01"), (42, b"")]
    assert completer.completed == 10
