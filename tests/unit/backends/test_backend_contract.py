"""The one contract every backend meets, in process, for each backend variant that can run here.

Every variant must return float32 outputs of shape (n, 10) for batch sizes 1, odd and
max, also from concurrent threads (each the same as its serial answer). Also: a missing
torch names its install commands, importing the suite loads no framework, a tampered
state dict and a card naming a missing input are refused at load, and onnxruntime's fast
binding agrees with its public API. Agreement with onnxruntime CPU and the runs through
the real CLI and LoadGen are in tests/integration/test_backend_contract.py.

A variant that cannot run here (missing package, no GPU) is skipped with the reason
printed (``-ra``); GPU variants also carry the ``gpu`` marker.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from suite.backends import BackendBase, create
from suite.errors import ModelError
from suite.models import load_card
from suite.paths import find_paths
from tests.conftest import REPO, cli_env
from tests.support.backend_variants import (
    COMPUTING,
    MAX_BATCH,
    VARIANTS,
    Variant,
    _params,
    assert_close,
    load_variant,
    skip_unless_runnable,
)

ODD_BATCH = 7


ALL = _params(VARIANTS)


@pytest.mark.parametrize("variant", ALL)
@pytest.mark.parametrize("size", [1, ODD_BATCH, MAX_BATCH])
def test_shapes_and_dtypes_for_batch_sizes(variant: Variant, size: int,
                                           loaded: dict[str, BackendBase], card: Any,
                                           digits: Any, reference: np.ndarray) -> None:
    backend = load_variant(variant, loaded, card)
    out = backend.predict(np.ascontiguousarray(digits[0][:size]))
    assert out.shape == (size, *card.output.sample_shape)
    assert out.dtype == np.dtype(card.output.dtype)
    assert np.all(np.isfinite(out))
    if variant.computes:  # a row does not depend on the batch it came in
        assert_close(variant, out, reference[:size])


@pytest.mark.parametrize("variant", COMPUTING)
def test_concurrent_predict_matches_serial(variant: Variant, loaded: dict[str, BackendBase],
                                           card: Any, digits: Any) -> None:
    backend = load_variant(variant, loaded, card)
    images = digits[0]
    chunks = [np.ascontiguousarray(images[i:i + 37]) for i in range(0, len(images), 37)]
    serial = [backend.predict(chunk) for chunk in chunks]
    results: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for round_ in range(3):
                for i in range(offset, len(chunks), 4):
                    results[i * 3 + round_] = backend.predict(chunks[i])
        except BaseException as exc:  # surfaced below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert len(results) == 3 * len(chunks)
    for key, out in results.items():
        assert_close(variant, out, serial[key // 3])


def test_missing_torch_names_the_cpu_and_cuda_install_commands() -> None:
    from suite.backends.pytorch import TorchBackend

    command = TorchBackend.install_command(["torch"])
    assert "pip install torch==2.13.0" in command and "pip install -e '.[torch]'" in command


def test_importing_suite_imports_no_framework() -> None:
    code = ("import sys, suite, suite.cli.app, suite.config.loader, suite.backends as b\n"
            "rows = b.list_backends()\n"
            "from suite.config.layers import known_keys\n"
            "assert 'backend.tensorrt.precision' in known_keys('onnxruntime')\n"
            "heavy = [m for m in ('torch', 'tensorrt', 'pycuda', 'onnxruntime') "
            "if m in sys.modules]\n"
            "print(len(rows) == len(b.BUILTIN) > 3, heavy)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=cli_env(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True []"


def test_a_tampered_state_dict_is_refused(suite_home: Path) -> None:
    skip_unless_runnable(Variant("torch-fp32", "torch"))
    card = load_card(find_paths(suite_home), "digits")
    assert card.model.torch_state_dict is not None
    path = card.directory / card.model.torch_state_dict
    data = bytearray(path.read_bytes())
    data[-30] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ModelError, match="does not match its model card"):
        create("torch").load(card, 8)


def test_onnxruntime_predicts_through_the_binding_and_agrees_with_the_public_api(
        card: Any, digits: tuple[np.ndarray, np.ndarray]) -> None:
    backend: Any = create("onnxruntime", {"intra_op_threads": 1})
    backend.load(card, MAX_BATCH)
    # The fast path is in use (if onnxruntime renames its binding, this says the
    # backend fell back to InferenceSession.run: correct, but slower per query).
    assert backend._run == backend._session._sess.run
    images = np.ascontiguousarray(digits[0][:MAX_BATCH])
    public = backend._session.run([card.output.name], {card.input.name: images})[0]
    np.testing.assert_array_equal(backend.predict(images), public)
    np.testing.assert_array_equal(backend.predict(images[3:4]), public[3:4])
    backend.close()


def test_a_card_naming_a_missing_input_is_refused_at_load(card: Any) -> None:
    from suite.errors import BackendError

    wrong = card.model_copy(update={"input": card.input.model_copy(update={"name": "pixels"})})
    backend = create("onnxruntime", {})
    with pytest.raises(BackendError, match=r"names input 'pixels'.*has inputs"):
        backend.load(wrong, MAX_BATCH)

