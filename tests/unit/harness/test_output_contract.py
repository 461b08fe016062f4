"""The backend output contract (suite/harness/output_contract.py): unit tests against the real
model cards (shapes, row counts, dtypes, non-finite scores, class indices, dynamic axes),
checked on every batch. The contract through the real LoadGen with hostile backends is in
tests/integration/test_output_contract.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from suite.errors import BackendError
from suite.harness.output_contract import OutputContract, expected_sample_shapes
from suite.models import ModelCard, load_card
from suite.paths import find_paths


@pytest.fixture(scope="module")
def digits() -> ModelCard:
    return load_card(find_paths(), "digits")


@pytest.fixture(scope="module")
def resnet50() -> ModelCard:
    return load_card(find_paths(), "resnet50")


def _error(contract: OutputContract, outputs: object, n: int) -> str:
    with pytest.raises(BackendError) as info:
        contract.check(outputs, n)
    return info.value.message


def test_expected_shapes_come_from_the_card(digits: ModelCard, resnet50: ModelCard) -> None:
    assert expected_sample_shapes(digits) == (tuple(digits.output.shape[1:]),) == ((10,),)
    assert expected_sample_shapes(resnet50) == ((), (1,))  # class_index: (n,) or (n, 1)


@pytest.mark.parametrize("n", [1, 7, 256])
def test_well_formed_outputs_pass_every_time(digits: ModelCard, n: int) -> None:
    contract = OutputContract("onnxruntime", digits)
    outputs = np.random.default_rng(0).standard_normal((n, 10)).astype(np.float32)
    for _ in range(3):
        contract.check(outputs, n)
        contract(outputs, n)  # the object is the check


def test_other_float_widths_pass_a_float_card(digits: ModelCard) -> None:
    contract = OutputContract("torch", digits)
    contract.check(np.zeros((4, 10), np.float16), 4)  # an fp16 backend
    contract.check(np.zeros((4, 10), np.float64), 4)


def test_one_row_for_a_whole_batch_names_backend_and_both_shapes(digits: ModelCard) -> None:
    message = _error(OutputContract("tests.support.fault_backends:OneRowBackend", digits),
                     np.zeros((1, 10), np.float32), 64)
    assert "tests.support.fault_backends:OneRowBackend" in message
    assert "(1, 10)" in message and "expects (64, 10)" in message
    assert "digits" in message


def test_extra_rows_are_refused(digits: ModelCard) -> None:
    message = _error(OutputContract("b", digits), np.zeros((65, 10), np.float32), 64)
    assert "(65, 10)" in message and "(64, 10)" in message


def test_rows_are_checked_on_every_batch_not_only_the_first(digits: ModelCard) -> None:
    contract = OutputContract("b", digits)
    contract.check(np.zeros((8, 10), np.float32), 8)  # the class (10,) float32 is now seen
    message = _error(contract, np.zeros((8, 10), np.float32), 9)
    assert "(8, 10)" in message and "(9, 10)" in message


@pytest.mark.parametrize("shape", [(16, 9), (16, 11), (16,), (16, 10, 1), (16, 1, 10)])
def test_wrong_per_sample_shape(digits: ModelCard, shape: tuple[int, ...]) -> None:
    message = _error(OutputContract("b", digits), np.zeros(shape, np.float32), 16)
    assert str(shape) in message and "(16, 10)" in message


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_, np.complex64, object, "U3"])
def test_a_dtype_of_another_kind_is_refused(digits: ModelCard, dtype: object) -> None:
    outputs = np.zeros((4, 10), dtype=dtype)  # type: ignore[call-overload]
    message = _error(OutputContract("b", digits), outputs, 4)
    assert f"dtype {outputs.dtype}" in message and "float32" in message


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_scores_are_refused(digits: ModelCard, bad: float) -> None:
    outputs = np.zeros((4, 10), np.float32)
    outputs[2, 3] = bad
    message = _error(OutputContract("b", digits), outputs, 4)
    assert "1 NaN or infinite" in message and "(4, 10)" in message


def test_a_bad_class_is_never_remembered_as_seen(digits: ModelCard) -> None:
    contract = OutputContract("b", digits)
    nan = np.full((4, 10), np.nan, np.float32)
    _error(contract, nan, 4)
    _error(contract, nan, 4)  # still refused: only a class that passed is cached
    contract.check(np.zeros((4, 10), np.float32), 4)


def test_non_arrays_are_refused(digits: ModelCard) -> None:
    assert "returned a list" in _error(OutputContract("b", digits), [[0.0] * 10] * 2, 2)
    assert "returned a NoneType" in _error(OutputContract("b", digits), None, 2)
    assert "shape ()" in _error(OutputContract("b", digits), np.float32(1.0), 1)


def test_class_index_card(resnet50: ModelCard) -> None:
    contract = OutputContract("onnxruntime", resnet50)
    contract.check(np.arange(5, dtype=np.int64), 5)
    contract.check(np.arange(5, dtype=np.int32).reshape(5, 1), 5)  # TensorRT's int32
    message = _error(contract, np.zeros((5, 1001), np.float32), 5)
    assert "(5, 1001)" in message and "(5,) or (5, 1)" in message
    assert "dtype float32" in _error(contract, np.zeros(5, np.float32), 5)
    assert "(1,)" in _error(contract, np.zeros(1, np.int64), 5)


def test_a_dynamic_axis_in_the_card_matches_any_length(digits: ModelCard) -> None:
    card = digits.model_copy(update={"output": digits.output.model_copy(
        update={"shape": [-1, -1]})})
    contract = OutputContract("b", card)
    contract.check(np.zeros((3, 12), np.float32), 3)
    assert "expects (3, ?)" in _error(contract, np.zeros((2, 12), np.float32), 3)

