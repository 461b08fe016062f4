"""Unit tests of the TensorRT backend's own logic, on a CPU without tensorrt or pycuda.

TensorRT and pycuda are the layer below; here they are small fakes that record what
our code asks of them (the profiles it sets, the buffers it allocates and frees, the
order it releases objects in). The real engine runs in the contract tests on a GPU.
"""

from __future__ import annotations

import queue
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from suite.backends.trt import (
    TensorRTBackend,
    TensorRTOptions,
    _make_calibrator,
    _recorded_samples,
    _Slot,
    calibrated_samples,
    calibration_batch,
    calibration_shapes,
    precision_record,
    profile_shapes,
)
from suite.datasets import calibration_set
from suite.errors import BackendError
from suite.models import load_card
from suite.paths import find_paths

SAMPLE = (1, 8, 8)  # digits


# -- pure sizing ---------------------------------------------------------------------------


def test_serving_profile_spans_one_to_max_tuned_at_opt() -> None:
    assert profile_shapes(SAMPLE, 64, 256) == ((1, 1, 8, 8), (64, 1, 8, 8), (256, 1, 8, 8))


def test_calibration_profile_opt_is_the_calibrator_batch() -> None:
    batch = calibration_batch(32, 256)
    assert batch == 32 and calibration_batch(32, 8) == 8
    low, opt, high = calibration_shapes(SAMPLE, batch)
    assert opt[0] == batch == low[0] == high[0]
    assert calibrated_samples(1000, 32) == 992  # whole batches only


def test_precision_record() -> None:
    assert precision_record("fp32", None) == ("fp32", "none")
    assert precision_record("fp16", None) == ("fp16", "cast to fp16")
    precision, how = precision_record("int8", 992)
    assert precision.startswith("int8") and how == (
        "int8 post-training calibration (entropy, 992 samples)")
    assert "not recorded" in precision_record("int8", None)[1]


def test_recorded_samples_read_back_or_none(tmp_path: Path) -> None:
    engine = tmp_path / "m.engine"
    assert _recorded_samples(engine) is None
    engine.with_suffix(".json").write_text('{"calibrated_samples": 96}\n')
    assert _recorded_samples(engine) == 96
    engine.with_suffix(".json").write_text("not json")
    assert _recorded_samples(engine) is None


# -- fakes of tensorrt and pycuda -----------------------------------------------------------


class DeviceMemory:
    def __init__(self, nbytes: int, log: list[str]) -> None:
        self.nbytes, self.log, self.freed = nbytes, log, 0

    def free(self) -> None:
        self.freed += 1
        self.log.append(f"free {self.nbytes}")

    def __int__(self) -> int:
        return 4096


def fake_cuda(log: list[str]) -> Any:
    allocations: list[DeviceMemory] = []

    def mem_alloc(nbytes: int) -> DeviceMemory:
        allocations.append(DeviceMemory(nbytes, log))
        return allocations[-1]

    return SimpleNamespace(mem_alloc=mem_alloc, memcpy_htod=lambda dst, src: None,
                           allocations=allocations)


class Profile:
    def __init__(self) -> None:
        self.shapes: dict[str, tuple[Any, ...]] = {}

    def set_shape(self, name: str, low: Any, opt: Any, high: Any) -> None:
        self.shapes[name] = (low, opt, high)


class Config:
    def __init__(self) -> None:
        self.profiles: list[Profile] = []
        self.calibration: Profile | None = None
        self.flags: set[str] = set()
        self.int8_calibrator: Any = None
        self.builder_optimization_level = 0

    def set_memory_pool_limit(self, pool: str, size: int) -> None: ...
    def set_flag(self, flag: str) -> None: self.flags.add(flag)
    def clear_flag(self, flag: str) -> None: self.flags.discard(flag)
    def add_optimization_profile(self, p: Profile) -> None: self.profiles.append(p)
    def set_calibration_profile(self, p: Profile) -> None: self.calibration = p


def fake_trt(result: bytes | None) -> Any:
    config = Config()

    class Builder:
        def __init__(self, logger: Any) -> None: ...
        def create_network(self, flags: int) -> Any: return object()
        def create_builder_config(self) -> Config: return config
        def create_optimization_profile(self) -> Profile: return Profile()

        def build_serialized_network(self, network: Any, cfg: Config) -> bytes | None:
            # What TensorRT does with a calibrator: batches at the calibration OPT.
            batch = cfg.int8_calibrator.get_batch_size()
            assert cfg.int8_calibrator.get_batch(["input"]) is not None
            assert cfg.calibration is not None
            assert cfg.calibration.shapes["input"][1][0] == batch
            return result

    class Parser:
        num_errors = 0
        def __init__(self, network: Any, logger: Any) -> None: ...
        def parse(self, data: bytes) -> bool: return True

    class Calibrator:
        def __init__(self) -> None: ...

    return SimpleNamespace(
        Builder=Builder, OnnxParser=Parser, IInt8EntropyCalibrator2=Calibrator, config=config,
        BuilderFlag=SimpleNamespace(FP16="fp16", INT8="int8", TF32="tf32"),
        MemoryPoolType=SimpleNamespace(WORKSPACE="workspace"))


def int8_backend(tmp_path: Path) -> tuple[TensorRTBackend, Any]:
    card = load_card(find_paths(), "digits")
    backend = TensorRTBackend(TensorRTOptions(precision="int8", calibration_samples=100,
                                              cache_dir=str(tmp_path)))
    backend._input, backend._max_batch, backend._sample_shape = "input", 256, SAMPLE
    backend.calibration_source = calibration_set  # what the harness hands it (sut.loading)
    return backend, card


# -- the int8 build ------------------------------------------------------------------------


@pytest.mark.parametrize("result", [b"plan", None])
def test_int8_build_calibrates_at_the_buffer_batch_and_frees_it(tmp_path: Path,
                                                               result: bytes | None) -> None:
    backend, card = int8_backend(tmp_path)
    log: list[str] = []
    trt, cuda = fake_trt(result), fake_cuda(log)
    if result is None:
        with pytest.raises(BackendError, match="could not build"):
            backend._build(trt, cuda, card, None)
    else:
        assert backend._build(trt, cuda, card, None) == b"plan"
    (buffer,) = cuda.allocations
    assert buffer.nbytes == 32 * 64 * 4  # the calibrator's batch of float32 samples
    calibration = trt.config.calibration.shapes["input"]
    assert calibration[1] == (32, *SAMPLE)  # OPT = what the buffer holds
    assert [p.shapes["input"][1][0] for p in trt.config.profiles] == [256, 256]  # serving
    assert buffer.freed == 1, "the calibrator's device buffer must be freed after the build"
    assert backend._calibrated == 96


def test_calibrator_walks_whole_batches_and_frees_once(tmp_path: Path) -> None:
    log: list[str] = []
    cuda = fake_cuda(log)
    data = np.zeros((70, *SAMPLE), dtype=np.float32)
    calibrator = _make_calibrator(fake_trt(None), cuda, data, 32, tmp_path / "c.calib")
    assert calibrator.get_batch_size() == 32
    assert [calibrator.get_batch(["input"]) for _ in range(3)] == [[4096], [4096], None]
    calibrator.free()
    calibrator.free()
    assert cuda.allocations[0].freed == 1


# -- release order ---------------------------------------------------------------------------


class Tracked:
    """Appends its name to the log when its last reference goes."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    def __del__(self) -> None:
        self.log.append(f"del {self.name}")


class Stream:
    def synchronize(self) -> None: ...


class PrimaryContext:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def push(self) -> None: ...
    def pop(self) -> None: ...
    def detach(self) -> None: self.log.append("detach")


def loaded_with_fakes(log: list[str]) -> TensorRTBackend:
    """A backend holding fake engine objects the way ``load`` leaves real ones."""
    backend = TensorRTBackend(TensorRTOptions(precision="fp16"))
    backend._ctx = PrimaryContext(log)
    backend._runtime = Tracked("runtime", log)
    backend._engine = Tracked("engine", log)
    backend._pool = queue.SimpleQueue()
    for index in range(2):
        slot = _Slot(Tracked(f"context{index}", log), Stream(), np.zeros(4), np.zeros(4),
                     DeviceMemory(index, log), DeviceMemory(index, log))
        backend._slots.append(slot)
        backend._pool.put(slot)
    return backend


def test_close_releases_contexts_then_engine_then_runtime() -> None:
    log: list[str] = []
    backend = loaded_with_fakes(log)
    backend.close()
    assert log == ["del context0", "free 0", "free 0", "del context1", "free 1", "free 1",
                   "del engine", "del runtime", "detach"]
    backend.close()  # a second close does nothing
    assert log[-1] == "detach" and log.count("detach") == 1


# -- page-locked input buffers ------------------------------------------------------------------


def test_predict_copies_from_our_page_locked_buffer_directly() -> None:
    sources: list[int] = []
    backend = TensorRTBackend(TensorRTOptions(precision="fp16"))
    backend._ctx = PrimaryContext([])
    backend._input, backend._max_batch, backend._sample_shape = "input", 4, (3,)
    backend._cuda = SimpleNamespace(
        pagelocked_zeros=lambda shape, dtype: np.zeros(shape, dtype),
        memcpy_htod_async=lambda dst, src, stream: sources.append(src.ctypes.data),
        memcpy_dtoh_async=lambda dst, src, stream: None)
    context = SimpleNamespace(set_input_shape=lambda name, shape: None,
                              execute_async_v3=lambda handle: True)
    slot = _Slot(context, SimpleNamespace(handle=0, synchronize=lambda: None),
                 np.zeros((4, 3), np.float32), np.zeros((4, 2), np.float32), 0, 0)
    backend._pool.put(slot)
    assert backend.input_buffer(8, (3,), "float32") is None  # not the engine's shape
    buffer = backend.input_buffer(4, (3,), "float32")
    assert buffer is not None
    buffer[:2] = 1.0
    backend.predict(buffer[:2])
    backend.predict(np.ones((2, 3), np.float32))
    assert sources == [buffer.ctypes.data, slot.host_in.ctypes.data]
