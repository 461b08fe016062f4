"""The backend variants every backend-contract test runs, and the fixtures they share."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from suite.backends import BackendBase, backend_class, create
from suite.datasets.digits import validation_split
from suite.models import load_card
from suite.paths import find_paths
from tests.support.remote_fixtures import CONTRACT_OPTIONS, ensure_contract_servers, missing


@dataclass(frozen=True)
class Tolerance:
    """How close a dtype's logits must be to onnxruntime fp32's, and how often argmax agrees."""

    atol: float
    argmax_agreement: float


# Logits reach about 42 in magnitude. fp32 differs only by summation order (measured
# max 1.7e-5); bf16 keeps 8 mantissa bits (measured max 0.15), fp16 11 (0.05).
TOLERANCES = {
    "fp32": Tolerance(atol=1e-3, argmax_agreement=1.0),
    "fp16": Tolerance(atol=0.25, argmax_agreement=0.99),
    "bf16": Tolerance(atol=1.0, argmax_agreement=0.99),
    "int8": Tolerance(atol=4.0, argmax_agreement=0.97),
}


MAX_BATCH = 256  # digits' Offline sut.max_batch_size


@dataclass(frozen=True)
class Variant:
    """One backend with one set of options, as the contract tests it."""

    id: str
    backend: str
    options: dict[str, Any] = field(default_factory=dict)
    dtype: str = "fp32"
    computes: bool = True  # the null backend answers zeros
    gpu: bool = False
    #: Scenarios run through LoadGen (each a child process that loads the backend).
    scenarios: tuple[str, ...] = ("singlestream", "multistream", "server", "offline")
    #: Server target: well under what the variant sustains, so a loaded box stays VALID.
    server_qps: int = 1000
    #: Run accuracy mode through the CLI; False where the in-process comparison already
    #: proves the same predictions (fp32 argmax identical to onnxruntime's on the whole
    #: split) and a LoadGen run of the variant proves it loads and serves in a child.
    accuracy_run: bool = True

    def sets(self) -> list[str]:
        """``--set`` arguments that select these options on the command line."""
        args = []
        for key, value in self.options.items():
            text = repr(value).lower() if isinstance(value, bool) else repr(value)
            args += ["--set", f"backend.{self.backend}.{key}={text.replace(chr(39), chr(34))}"]
        return args


VARIANTS = [
    Variant("null", "null", computes=False),
    # An accelerator's timing on the CPU: its outputs are a projection, not the model's.
    Variant("simulated", "simulated", {"profile": "digits-h100"}, computes=False),
    # A real MLServer on loopback (two replicas), over gRPC: compared in-process here. Its
    # LoadGen runs are tests/integration/test_remote.py's test_every_scenario_valid (the
    # same backend, two replicas, gRPC and REST, every scenario VALID, the run record
    # checked); a second set here ran a 25 s Server test for a 10 ms bound that this
    # shared machine's loopback gRPC cannot show (a timing figure, see bench/bench_remote.py).
    Variant("remote-mlserver-grpc", "remote", CONTRACT_OPTIONS, scenarios=()),
    # Its accuracy run is tests/integration/test_integration.py's Offline accuracy test
    # (the same command, with every response compared to a direct prediction).
    Variant("onnxruntime", "onnxruntime", accuracy_run=False),
    Variant("torch-fp32", "torch"),
    # Every LoadGen run is a child process that imports torch (seconds on 2 cores), so
    # the variants beside torch-fp32 run only Server, where dynamic batch sizes 1..16
    # meet the 10 ms bound (a recompile or a slow dtype would show there), plus
    # accuracy mode (torch-bf16; torch-fp32-compile's predictions are compared with
    # onnxruntime's in-process, argmax for argmax); torch-bf16-compile runs in-process only.
    # bf16 on a CPU without bf16 units: ~1.3 ms a batch, so 1000 QPS kept the workers
    # ~65 % busy and a loaded CI box tipped it over (p99 12-14 ms, three attempts).
    Variant("torch-bf16", "torch", {"dtype": "bf16"}, "bf16", scenarios=("server",),
            server_qps=400),
    # compiled torch: p99 11-24 ms in three attempts at 1000 QPS once while the same
    # box ran a type check beside CI; half the rate keeps its ~5000 queries.
    Variant("torch-fp32-compile", "torch", {"compile": True}, scenarios=("server",),
            server_qps=500, accuracy_run=False),
    Variant("torch-bf16-compile", "torch", {"dtype": "bf16", "compile": True}, "bf16",
            scenarios=()),
    Variant("onnxruntime-cuda", "onnxruntime",
            {"providers": ["CUDAExecutionProvider", "CPUExecutionProvider"]}, gpu=True),
    Variant("onnxruntime-tensorrt-ep", "onnxruntime",
            {"providers": ["TensorrtExecutionProvider", "CUDAExecutionProvider",
                           "CPUExecutionProvider"]}, gpu=True),
    Variant("torch-cuda-fp32", "torch", {"device": "cuda"}, gpu=True),
    Variant("torch-cuda-fp16-graphs", "torch",
            {"device": "cuda", "dtype": "fp16", "cuda_graphs": True, "channels_last": True},
            "fp16", gpu=True),
    Variant("torch-cuda-bf16-compile", "torch",
            {"device": "cuda", "dtype": "bf16", "compile": True}, "bf16", gpu=True),
    Variant("tensorrt-fp32", "tensorrt", {"precision": "fp32"}, gpu=True),
    Variant("tensorrt-fp16", "tensorrt", {"precision": "fp16"}, "fp16", gpu=True),
    Variant("tensorrt-int8", "tensorrt", {"precision": "int8"}, "int8", gpu=True),
]


def _params(variants: list[Variant]) -> list[Any]:
    return [pytest.param(v, id=v.id, marks=[pytest.mark.gpu] if v.gpu else []) for v in variants]


COMPUTING = _params([v for v in VARIANTS if v.computes])


def skip_unless_runnable(variant: Variant) -> None:
    """Skip with the backend's own reason when the variant cannot run here."""
    cls = backend_class(variant.backend)
    reason = cls.unavailable_reason() or cls.options_problem(
        cls.Options.model_validate(variant.options))
    if reason is not None:
        pytest.skip(f"{variant.id}: {reason}")
    if variant.backend == "remote":
        if (why := missing()) is not None:
            pytest.skip(f"{variant.id}: {why}")
        ensure_contract_servers()


@pytest.fixture(scope="module")
def card() -> Any:
    return load_card(find_paths(), "digits")


@pytest.fixture(scope="module")
def digits(card: Any) -> tuple[np.ndarray, np.ndarray]:
    return validation_split(card)


@pytest.fixture(scope="module")
def reference(card: Any, digits: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """onnxruntime CPU logits on the whole validation split: the contract's reference."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(card.onnx_path), providers=["CPUExecutionProvider"])
    logits: np.ndarray = session.run(None, {card.input.name: digits[0]})[0]
    return logits


@pytest.fixture(scope="module")
def loaded(card: Any) -> Iterator[dict[str, BackendBase]]:
    """Backends loaded once per variant for the in-process tests (compiling is slow)."""
    cache: dict[str, BackendBase] = {}
    yield cache
    for backend in cache.values():
        backend.close()


def load_variant(variant: Variant, loaded: dict[str, BackendBase], card: Any) -> BackendBase:
    skip_unless_runnable(variant)
    if variant.id not in loaded:
        backend = create(variant.backend, variant.options)
        backend.load(card, MAX_BATCH)
        loaded[variant.id] = backend
    return loaded[variant.id]


def assert_close(variant: Variant, got: np.ndarray, want: np.ndarray) -> None:
    tol = TOLERANCES[variant.dtype]
    worst = float(np.max(np.abs(got - want)))
    assert worst <= tol.atol, f"{variant.id}: max |logit difference| {worst:.3g} > {tol.atol}"
    agreement = float(np.mean(got.argmax(axis=1) == want.argmax(axis=1)))
    assert agreement >= tol.argmax_agreement, f"{variant.id}: argmax agrees on {agreement:.1%}"
