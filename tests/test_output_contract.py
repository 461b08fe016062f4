"""The backend output contract (suite/harness/output_contract.py): unit tests against the real
model cards, then the contract through the real LoadGen with hostile backends.

The integration tests need the SUT to call ``OutputContract.check`` on every batch
(suite/harness/sut/core.py and suite/harness/sut/workers.py); before that hook, each
hostile run below ends VALID with exit 0, which is the bug they pin down.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from suite.errors import BackendError
from suite.harness.output_contract import OutputContract, expected_sample_shapes
from suite.models import ModelCard, load_card
from suite.paths import find_paths
from suite.results import RunResult

from .conftest import only_run_dir, run_cli


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
    message = _error(OutputContract("tests.fault_backends:OneRowBackend", digits),
                     np.zeros((1, 10), np.float32), 64)
    assert "tests.fault_backends:OneRowBackend" in message
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


# Through the real LoadGen: each hostile backend must end its run FAILED, exit 1.

#: hostile backend -> what its run's failure message must show it returned
FAULTS = {
    "OneRowBackend": r"shape \(1, 10\) for a batch of (?P<n>\d+) samples",
    "ExtraRowsBackend": r"shape \((?P<rows>\d+), 10\) for a batch of (?P<n>\d+) samples",
    "WideBackend": r"shape \((?P<n>\d+), 11\) for a batch of (?P=n) samples",
    "IntScoresBackend": r"shape \((?P<n>\d+), 10\) and dtype int32",
    "ObjectScoresBackend": r"shape \((?P<n>\d+), 10\) and dtype object",
    "NanBackend": r"shape \((?P<n>\d+), 10\) with (?P<bad>\d+) NaN or infinite",
}
_FAST_FAIL = ["--set", "sut.watchdog_timeout_s=5", "--set", "sut.drain_grace_s=1"]


def _failed_message(proc_args: list[str], runs_dir: Path, spec: str) -> str:
    proc = run_cli(*proc_args, "--runs-dir", str(runs_dir), "--backend", spec, *_FAST_FAIL,
                   timeout=180)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert spec in proc.stderr  # the CLI's error line names the backend
    result = RunResult.load(only_run_dir(runs_dir) / "result.json")
    assert result.status.value == "FAILED" and result.exit_code == 1
    [test] = result.tests
    assert spec in test.message and "output contract" in test.message, test.message
    return test.message


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_backend_breaking_the_contract_fails_the_run(fault: str, runs_dir: Path) -> None:
    # Offline in batches of up to 64: one row for a batch is only wrong for batches > 1,
    # and the Offline SUT fills its batches.
    message = _failed_message(["run", "--scenario", "offline", "--quick", "--batch-size",
                               "64"], runs_dir, f"tests.fault_backends:{fault}")
    got = re.search(FAULTS[fault], message)
    assert got, message
    n = int(got["n"])
    assert f"expects ({n}, 10)" in message  # the card's shape for that batch
    if fault == "OneRowBackend":
        assert n > 1
    if fault == "ExtraRowsBackend":
        assert int(got["rows"]) == n + 1
    if fault == "NanBackend":
        assert int(got["bad"]) == n * 10


def test_a_worker_process_breaking_the_contract_fails_the_run(runs_dir: Path) -> None:
    # Server batches may hold one sample, so the fault is one every batch size shows.
    message = _failed_message(["run", "--scenario", "server", "--quick", "--workers", "2",
                               "--set", "sut.worker_model=processes"], runs_dir,
                              "tests.fault_backends:WideBackend")
    assert re.search(FAULTS["WideBackend"], message), message
    assert re.search(r"expects \(\d+, 10\)", message), message
