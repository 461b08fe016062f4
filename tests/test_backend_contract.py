"""The one contract every backend meets, run for each backend variant that can run here.

Every variant must (1) agree with onnxruntime CPU on the digits validation set within
the tolerance of its dtype (argmax identical in fp32), (2) return float32 outputs of
shape (n, 10) for batch sizes 1, odd and max, also from concurrent threads, (3) run
every scenario VALID through the real CLI and LoadGen with ``--quick``, and (4) reach
the accuracy target in accuracy mode (in fp32: the same correct count as onnxruntime).

A variant that cannot run here (missing package, no GPU) is skipped with the reason
printed (``-ra``); GPU variants also carry the ``gpu`` marker.

Timing: a shared 2-core machine can make any one LoadGen run miss its latency bound
(other tenants stall the process for milliseconds), so a performance run that ends
INVALID (exit 2) is repeated, up to three attempts, each attempt's table printed;
three INVALID runs fail the test. An error (exit 1) fails at once.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from suite.backends import BackendBase, backend_class, create
from suite.datasets.digits import validation_split
from suite.errors import ModelError
from suite.models import load_card
from suite.paths import find_paths
from suite.results import RunResult

from .conftest import REPO, cli_env, only_run_dir, run_cli
from .remote_fixtures import CONTRACT_OPTIONS, ensure_contract_servers, missing


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
ODD_BATCH = 7


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
    # A real MLServer on loopback (two replicas), over gRPC. Offline is left out: the
    # quick digits Offline issues 1.32M samples, about 40 s remotely.
    Variant("remote-mlserver-grpc", "remote", CONTRACT_OPTIONS,
            scenarios=("singlestream", "multistream", "server"), server_qps=200),
    Variant("onnxruntime", "onnxruntime"),
    Variant("torch-fp32", "torch"),
    # Every LoadGen run is a child process that imports torch (seconds on 2 cores), so
    # the variants beside torch-fp32 run only Server, where dynamic batch sizes 1..16
    # meet the 10 ms bound (a recompile or a slow dtype would show there), plus
    # accuracy mode; torch-bf16-compile runs in-process only.
    # bf16 on a CPU without bf16 units: ~1.3 ms a batch, so 1000 QPS kept the workers
    # ~65 % busy and a loaded CI box tipped it over (p99 12-14 ms, three attempts).
    Variant("torch-bf16", "torch", {"dtype": "bf16"}, "bf16", scenarios=("server",),
            server_qps=400),
    # compiled torch: p99 11-24 ms in three attempts at 1000 QPS once while the same
    # box ran a type check beside CI; half the rate keeps its ~5000 queries.
    Variant("torch-fp32-compile", "torch", {"compile": True}, scenarios=("server",),
            server_qps=500),
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


ALL = _params(VARIANTS)
COMPUTING = _params([v for v in VARIANTS if v.computes])
SCENARIOS = ["singlestream", "multistream", "server", "offline"]


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


def predict_all(backend: BackendBase, images: np.ndarray, batch: int = MAX_BATCH) -> np.ndarray:
    return np.concatenate([backend.predict(images[i:i + batch])
                           for i in range(0, len(images), batch)])


def assert_close(variant: Variant, got: np.ndarray, want: np.ndarray) -> None:
    tol = TOLERANCES[variant.dtype]
    worst = float(np.max(np.abs(got - want)))
    assert worst <= tol.atol, f"{variant.id}: max |logit difference| {worst:.3g} > {tol.atol}"
    agreement = float(np.mean(got.argmax(axis=1) == want.argmax(axis=1)))
    assert agreement >= tol.argmax_agreement, f"{variant.id}: argmax agrees on {agreement:.1%}"


# -- in-process: outputs, shapes, threads --------------------------------------------


@pytest.mark.parametrize("variant", COMPUTING)
def test_outputs_match_onnxruntime_cpu(variant: Variant, loaded: dict[str, BackendBase],
                                       card: Any, digits: Any, reference: np.ndarray) -> None:
    backend = load_variant(variant, loaded, card)
    got = predict_all(backend, digits[0])
    assert got.dtype == np.float32 and got.shape == reference.shape
    assert_close(variant, got, reference)
    if variant.dtype == "fp32":
        np.testing.assert_array_equal(got.argmax(axis=1), reference.argmax(axis=1))


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


# -- through the CLI and the real LoadGen --------------------------------------------


def run_valid(tmp: Path, *args: str, attempts: int = 3) -> RunResult:
    """A ``--quick`` performance run that must end VALID; repeated if INVALID."""
    for attempt in range(1, attempts + 1):
        runs = tmp / f"attempt{attempt}"
        runs.mkdir()
        proc = run_cli("run", "--quick", "--runs-dir", str(runs), *args)
        assert proc.returncode in (0, 2), proc.stderr
        if proc.returncode == 0:
            break
        print(f"attempt {attempt} INVALID (shared machine?):\n{proc.stdout[-3000:]}")
    assert proc.returncode == 0, f"INVALID {attempts} times:\n{proc.stdout[-3000:]}"
    result = RunResult.load(only_run_dir(runs) / "result.json")
    [test] = result.tests
    assert test.performance is not None and test.performance.result_validity == "VALID"
    return result


def offline_rate(variant: Variant, loaded: dict[str, BackendBase], card: Any,
                 digits: Any, tmp: Path) -> float:
    """Samples per second the backend sustains, to size LoadGen's Offline query."""
    if variant.computes:
        backend = load_variant(variant, loaded, card)
        batch = np.ascontiguousarray(digits[0][:MAX_BATCH].repeat(2, axis=0)[:MAX_BATCH])
        start, done = time.perf_counter(), 0
        while time.perf_counter() - start < 0.3:
            backend.predict(batch)
            done += MAX_BATCH
        return done / (time.perf_counter() - start)
    # The null and simulated backends cost (almost) nothing: the harness itself is the
    # limit, so ask LoadGen, with the variant's own options (its profile).
    runs = tmp / "probe"
    runs.mkdir()
    proc = run_cli("run", "--scenario", "offline", "--backend", variant.backend, "--quick",
                   *variant.sets(), "--set", "loadgen.expected_qps=50000",
                   "--runs-dir", str(runs))
    assert proc.returncode in (0, 2), proc.stderr
    perf = RunResult.load(only_run_dir(runs) / "result.json").tests[0].performance
    assert perf is not None
    return float(perf.metric_value)


SCENARIO_SETS = {
    # A low latency hint: LoadGen must not run out of pre-generated queries. 500 ms
    # still gives MultiStream its 662 queries (under 1 ms each) and SingleStream its 100.
    "singlestream": ["--set", "loadgen.expected_latency_ms=0.004",
                     "--set", "loadgen.min_duration_ms=500"],
    "multistream": ["--set", "loadgen.expected_latency_ms=0.004",
                    "--set", "loadgen.min_duration_ms=500"],
    # ~5000 queries: early stopping needs >= 459 with no query over the 10 ms bound, and
    # tolerates about 0.6 % over it at this count; this shared 2-core VM stalls a few
    # queries per second by 5-15 ms whatever the backend (measured with max_wait 0 too).
    "server": ["--set", "loadgen.target_qps=1000", "--set", "loadgen.min_duration_ms=5000"],
}


@pytest.mark.timing  # VALID means every latency bound held on this machine
@pytest.mark.parametrize("variant", _params([v for v in VARIANTS if v.scenarios]))
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_scenario_runs_valid(variant: Variant, scenario: str, tmp_path: Path,
                                   loaded: dict[str, BackendBase], card: Any,
                                   digits: Any) -> None:
    if scenario not in variant.scenarios:
        pytest.skip(f"{variant.id}: {scenario} not run for this variant (CI time); torch "
                    f"runs it as torch-fp32, this variant runs {', '.join(variant.scenarios)}")
    skip_unless_runnable(variant)
    sets = SCENARIO_SETS.get(scenario, [])
    if scenario == "offline":
        # Offline is VALID only if the run lasts min_duration: LoadGen issues
        # 1.1 x duration x expected_qps samples, so ask for ~5x what the backend does.
        rate = offline_rate(variant, loaded, card, digits, tmp_path)
        sets = ["--set", f"loadgen.expected_qps={5 * rate:.0f}",
                "--set", "loadgen.min_duration_ms=500"]
    elif scenario == "server" and variant.server_qps != 1000:
        # The same ~5000 queries at the variant's own rate.
        sets = ["--set", f"loadgen.target_qps={variant.server_qps}",
                "--set", f"loadgen.min_duration_ms={5_000_000 // variant.server_qps}"]
    result = run_valid(tmp_path, "--scenario", scenario, "--backend", variant.backend,
                       *variant.sets(), *sets)
    assert result.backend == variant.backend


@pytest.mark.parametrize("variant", _params([v for v in VARIANTS if v.scenarios and v.computes]))
def test_accuracy_mode_reaches_the_target(variant: Variant, runs_dir: Path, card: Any,
                                          digits: Any, reference: np.ndarray) -> None:
    skip_unless_runnable(variant)
    proc = run_cli("run", "--scenario", "offline", "--mode", "accuracy", "--quick",
                   "--backend", variant.backend, *variant.sets(), "--runs-dir", str(runs_dir))
    assert proc.returncode == 0, proc.stderr + proc.stdout[-2000:]
    [test] = RunResult.load(only_run_dir(runs_dir) / "result.json").tests
    assert test.accuracy is not None and test.accuracy.passed, test.accuracy
    if variant.dtype == "fp32":  # the same computation: the same samples right
        assert test.accuracy.good == int((reference.argmax(axis=1) == digits[1]).sum())


# -- clear absence ---------------------------------------------------------------------


def test_an_unavailable_backend_fails_before_loadgen(runs_dir: Path) -> None:
    reason = backend_class("tensorrt").unavailable_reason()
    if reason is None:
        pytest.skip("tensorrt is available here; its absence cannot be shown")
    proc = run_cli("run", "--backend", "tensorrt", "--quick", "--runs-dir", str(runs_dir))
    assert proc.returncode == 1
    assert "backend 'tensorrt' is not available" in proc.stderr
    assert reason in proc.stderr.replace("\n", "")
    assert list(runs_dir.iterdir()) == []  # no run directory: LoadGen never started
    listing = run_cli("backends")  # the same reason, in the table
    row = next(line for line in listing.stdout.splitlines() if "tensorrt" in line)
    assert listing.returncode == 0 and "no" in row and "pip install" in listing.stdout
    if "missing package" in reason:
        assert "tensorrt, pycuda" in reason and "pip install -e '.[tensorrt]'" in reason


def test_a_cuda_option_without_a_gpu_fails_before_loadgen(runs_dir: Path) -> None:
    from suite.backends.base import nvidia_gpu_problem

    if nvidia_gpu_problem() is None:
        pytest.skip("this machine has a GPU; the no-GPU refusal cannot be shown")
    proc = run_cli("run", "--backend", "torch", "--set", "backend.torch.device=cuda",
                   "--quick", "--runs-dir", str(runs_dir))
    assert proc.returncode == 1
    assert "device 'cuda' cannot be used" in proc.stderr and "GPU" in proc.stderr
    assert list(runs_dir.iterdir()) == []


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


def test_backend_options_are_validated_config_keys() -> None:
    proc = run_cli("config", "--backend", "torch", "--set", "backend.torch.dtype=bf16",
                   "--set", "backend.torch.compile=true")
    assert proc.returncode == 0, proc.stderr
    assert "backend.torch.dtype" in proc.stdout and "bf16" in proc.stdout
    bad = run_cli("config", "--backend", "torch", "--set", "backend.torch.dtype=int4")
    assert bad.returncode == 1 and "backend.torch.dtype" in bad.stderr
    graphs = run_cli("config", "--backend", "torch", "--set", "backend.torch.cuda_graphs=true")
    assert graphs.returncode == 1 and "cuda_graphs needs device" in graphs.stderr


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
