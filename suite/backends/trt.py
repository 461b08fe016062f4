"""The TensorRT backend: an engine built from the card's ONNX file, run with pycuda.

Building: the ONNX parser fills a network; the builder config sets the precision
(fp32, fp16, or int8 with an entropy calibrator fed from the benchmark's calibration
set, never its scored split), one optimization profile per execution context with
batch sizes 1..``sut.max_batch_size``, and the workspace limit. A built engine is
cached on disk under a key made of the ONNX sha256, the TensorRT version, the GPU
name and compute capability, and every build option, so a changed input never
reuses a stale engine, and the build (seconds to minutes) never lands in a run.

Executing (TensorRT 10 tensor-address API): each execution context owns its
optimization profile, a CUDA stream, page-locked host buffers and device buffers
allocated once for the largest batch. ``predict`` borrows a free context from a
pool, so concurrent worker threads never share one: copy in, ``execute_async_v3``,
copy out, all async on the context's stream, then one synchronize. The CUDA
context is the device's primary context (the one TensorRT's runtime uses), pushed
on whichever thread calls.

INT8 with a dynamic batch (``trt_calibration``): TensorRT calibrates at the OPT shape
of the calibration profile (``IBuilderConfig.set_calibration_profile``), so that
profile is fixed at the calibrator's batch size, the size its device buffer holds;
the buffer is freed once the build ends, built or not. ``close`` releases in
TensorRT's documented order: execution contexts (and their buffers), then the engine,
then the runtime, then the CUDA context.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field

from suite.backends.base import BackendBase, BackendInfo, BackendOptions
from suite.backends.trt_calibration import (
    calibrated_samples,
    calibration_batch,
    calibration_shapes,
)
from suite.backends.trt_calibration import make_calibrator as _make_calibrator
from suite.errors import BackendError
from suite.models import sha256_file

if TYPE_CHECKING:
    from suite.models import ModelCard
    from suite.types import Batch, Outputs


def _default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(base) / "infersuite" / "tensorrt")


class TensorRTOptions(BackendOptions):
    """``[backend.tensorrt]`` options."""

    precision: Literal["fp32", "fp16", "int8"] = Field(
        default="fp16", description="engine precision; int8 calibrates on the benchmark's "
        "calibration set (and allows fp16 where a layer has no int8 kernel)")
    device_id: int = Field(default=0, ge=0, description="CUDA device index")
    contexts: int = Field(default=2, ge=1, description="execution contexts, each with its "
                          "own optimization profile and buffers; set it to sut.workers")
    opt_batch_size: int = Field(default=0, ge=0, description="the batch size TensorRT tunes "
                                "kernels for; 0: sut.max_batch_size")
    workspace_mib: int = Field(default=1024, ge=1, description="builder workspace limit")
    builder_optimization_level: int = Field(default=3, ge=0, le=5,
                                            description="TensorRT builder optimization level")
    calibration_samples: int = Field(default=1000, ge=1, description="int8: samples of the "
                                     "calibration set to calibrate on")
    calibration_batch_size: int = Field(default=32, ge=1, description="int8: calibration "
                                        "batch size (at most sut.max_batch_size)")
    cache_dir: str = Field(default_factory=_default_cache_dir, description="where engines "
                           "and calibration caches are kept")


@dataclass
class _Slot:
    """One execution context with everything it owns."""

    context: Any
    stream: Any
    host_in: Any
    host_out: Any
    dev_in: Any
    dev_out: Any


def profile_shapes(sample_shape: tuple[int, ...], opt_batch: int, max_batch: int
                   ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(min, opt, max) input shapes of a serving profile: batch 1..max, tuned at opt."""
    return tuple((n, *sample_shape) for n in (1, opt_batch, max_batch))  # type: ignore[return-value]


def precision_record(precision: str, samples: int | None) -> tuple[str, str]:
    """(``BackendInfo.precision``, ``weight_transformations``) of an engine."""
    if precision == "int8":
        count = "sample count not recorded" if samples is None else f"{samples} samples"
        return ("int8 (fp16 where a layer has no int8 kernel)",
                f"int8 post-training calibration (entropy, {count})")
    if precision == "fp16":
        return "fp16", "cast to fp16"
    return "fp32", "none"


class TensorRTBackend(BackendBase):
    """Runs a TensorRT engine of the card's ONNX model; see the module docstring."""

    name = "tensorrt"
    Options = TensorRTOptions
    requires = (("tensorrt", "tensorrt"), ("pycuda", "pycuda"))
    extra = "tensorrt"
    requires_gpu = True

    def __init__(self, options: BackendOptions | None = None) -> None:
        super().__init__(options)
        assert isinstance(self.options, TensorRTOptions)
        self.opts: TensorRTOptions = self.options
        self._cuda: Any = None
        self._ctx: Any = None
        self._engine: Any = None
        self._runtime: Any = None
        self._slots: list[_Slot] = []
        self._pool: queue.SimpleQueue[_Slot] = queue.SimpleQueue()
        self._input = ""
        self._sample_shape: tuple[int, ...] = ()
        self._max_batch = 0
        #: Page-locked buffers handed out by ``input_buffer``, by host address.
        self._buffers: dict[int, Any] = {}
        self._calibrated: int | None = None

    # -- loading ---------------------------------------------------------------------

    def load(self, card: ModelCard, max_batch_size: int) -> BackendInfo:
        import pycuda.driver as cuda  # lazy: keeps `import suite` light
        import tensorrt as trt

        opts = self.opts
        self._cuda = cuda
        cuda.init()
        device = cuda.Device(opts.device_id)
        # The primary context is the one TensorRT's CUDA runtime calls use.
        self._ctx = device.retain_primary_context()
        self._ctx.push()
        try:
            logger = trt.Logger(trt.Logger.WARNING)
            gpu = f"{device.name()} sm_{''.join(map(str, device.compute_capability()))}"
            self._input, self._max_batch = card.input.name, max_batch_size
            self._sample_shape = card.input.sample_shape
            path, cached = self._engine_path(trt, card, gpu), True
            plan = path.read_bytes() if path.is_file() else None
            # Kept for the engine's lifetime: an engine must not outlive its runtime.
            self._runtime = runtime = trt.Runtime(logger)
            self._engine = runtime.deserialize_cuda_engine(plan) if plan else None
            if self._engine is None:
                cached, plan = False, self._build(trt, cuda, card, logger)
                path.parent.mkdir(parents=True, exist_ok=True)
                # What the build did that the engine does not say, read back on a hit;
                # written first, so a cached engine never lacks it.
                path.with_suffix(".json").write_text(json.dumps(
                    {"calibrated_samples": self._calibrated}) + "\n")
                tmp = path.with_suffix(f".tmp{os.getpid()}")
                tmp.write_bytes(plan)
                tmp.replace(path)
                self._engine = runtime.deserialize_cuda_engine(plan)
            elif opts.precision == "int8":
                self._calibrated = _recorded_samples(path)
            if self._engine is None:
                raise BackendError(f"TensorRT could not deserialize the engine {path}")
            self._check_io(trt, card)
            for index in range(opts.contexts):
                slot = self._make_slot(trt, cuda, card, index)
                self._slots.append(slot)
                self._pool.put(slot)
        finally:
            self._ctx.pop()
        precision, transformations = precision_record(opts.precision, self._calibrated)
        return BackendInfo(
            name=self.name, version=trt.__version__, device=f"cuda:{opts.device_id}",
            thread_safe=True, precision=precision, weight_transformations=transformations,
            details={"gpu": gpu, "precision": opts.precision, "engine": str(path),
                     "engine_cache": "hit" if cached else "built",
                     "contexts": str(opts.contexts), "max_batch_size": str(max_batch_size)},
        )

    def _engine_path(self, trt: Any, card: ModelCard, gpu: str) -> Path:
        opts = self.opts
        key = {
            # The file actually loaded (a user-supplied model may differ from the card).
            "onnx_sha256": sha256_file(card.onnx_path), "tensorrt": trt.__version__, "gpu": gpu,
            "precision": opts.precision, "profiles": opts.contexts,
            "batch": [1, self._opt_batch(), self._max_batch],
            "workspace_mib": opts.workspace_mib, "level": opts.builder_optimization_level,
            "calibration": [opts.calibration_samples, opts.calibration_batch_size]
            if opts.precision == "int8" else None,
            # 2: int8 engines calibrate at the calibrator's batch (earlier ones did not).
            "recipe": 2,
        }
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
        return Path(opts.cache_dir) / f"{card.name}-{opts.precision}-{digest[:20]}.engine"

    def _opt_batch(self) -> int:
        return min(self.opts.opt_batch_size or self._max_batch, self._max_batch)

    def _build(self, trt: Any, cuda: Any, card: ModelCard, logger: Any) -> bytes:
        opts = self.opts
        builder = trt.Builder(logger)
        network = builder.create_network(0)  # TensorRT 10: explicit batch is the only mode
        parser = trt.OnnxParser(network, logger)
        if not parser.parse(card.onnx_path.read_bytes()):
            errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
            raise BackendError(f"TensorRT could not parse {card.onnx_path}: {errors}")
        config = builder.create_builder_config()
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, opts.workspace_mib << 20)
        config.builder_optimization_level = opts.builder_optimization_level
        if opts.precision in ("fp16", "int8"):
            config.set_flag(trt.BuilderFlag.FP16)
        else:
            config.clear_flag(trt.BuilderFlag.TF32)  # on by default; fp32 means fp32
        shapes = profile_shapes(self._sample_shape, self._opt_batch(), self._max_batch)
        for _ in range(opts.contexts):  # one per context, so contexts never share one
            profile = builder.create_optimization_profile()
            profile.set_shape(self._input, *shapes)
            config.add_optimization_profile(profile)
        calibrator = None
        try:
            if opts.precision == "int8":
                config.set_flag(trt.BuilderFlag.INT8)
                calibrator = self._calibrator(trt, cuda, card)
                config.int8_calibrator = calibrator
                # Calibration runs at the calibration profile's OPT shape: the serving
                # profiles' OPT is the maximum batch, more than the buffer holds.
                calibration = builder.create_optimization_profile()
                calibration.set_shape(self._input, *calibration_shapes(
                    self._sample_shape, calibrator.get_batch_size()))
                config.set_calibration_profile(calibration)
            serialized = builder.build_serialized_network(network, config)
        finally:
            if calibrator is not None:
                calibrator.free()  # the device buffer is needed only while building
        if serialized is None:
            raise BackendError(f"TensorRT could not build an engine from {card.onnx_path} "
                               f"({opts.precision}); see its log above")
        return bytes(serialized)

    def _calibrator(self, trt: Any, cuda: Any, card: ModelCard) -> Any:
        calibration_set = self.calibration_source
        if calibration_set is None:
            raise BackendError("INT8 calibration needs the card's dataset, and none was "
                               "handed to the backend", hint="load the backend through the "
                               "harness (suite run), or use precision fp16 or fp32")
        opts = self.opts
        batch = calibration_batch(opts.calibration_batch_size, self._max_batch)
        data = np.ascontiguousarray(calibration_set(card, opts.calibration_samples),
                                    dtype=np.float32)
        self._calibrated = calibrated_samples(len(data), batch)
        digest = hashlib.sha256(data.tobytes()).hexdigest()[:20]
        model_sha = sha256_file(card.onnx_path)
        cache = Path(opts.cache_dir) / f"{card.name}-{model_sha[:12]}-{digest}.calib"
        return _make_calibrator(trt, cuda, data, batch, cache)

    def _check_io(self, trt: Any, card: ModelCard) -> None:
        engine = self._engine
        names = {engine.get_tensor_name(i): engine.get_tensor_mode(engine.get_tensor_name(i))
                 for i in range(engine.num_io_tensors)}
        expected = {card.input.name: trt.TensorIOMode.INPUT,
                    card.output.name: trt.TensorIOMode.OUTPUT}
        if names != expected:
            raise BackendError(f"engine tensors {sorted(names)} do not match the card's "
                               f"{sorted(expected)}")

    def _make_slot(self, trt: Any, cuda: Any, card: ModelCard, index: int) -> _Slot:
        engine = self._engine
        context = engine.create_execution_context()
        stream = cuda.Stream()
        context.set_optimization_profile_async(index, stream.handle)
        in_dtype = trt.nptype(engine.get_tensor_dtype(card.input.name))
        out_dtype = trt.nptype(engine.get_tensor_dtype(card.output.name))
        host_in = cuda.pagelocked_empty((self._max_batch, *self._sample_shape), in_dtype)
        host_out = cuda.pagelocked_empty((self._max_batch, *card.output.sample_shape), out_dtype)
        dev_in, dev_out = cuda.mem_alloc(host_in.nbytes), cuda.mem_alloc(host_out.nbytes)
        # Addresses never change: buffers are sized for the largest batch, allocated once.
        context.set_tensor_address(card.input.name, int(dev_in))
        context.set_tensor_address(card.output.name, int(dev_out))
        stream.synchronize()
        return _Slot(context, stream, host_in, host_out, dev_in, dev_out)

    # -- host buffers and predicting --------------------------------------------------

    def input_buffer(self, max_batch: int, sample_shape: tuple[int, ...],
                     dtype: str) -> Batch | None:
        """A page-locked array (pycuda ``pagelocked_empty``) the SUT gathers into;
        ``predict`` copies from it to the device directly, skipping the slot's staging
        copy. Raw input is not taken: normalising would need a kernel of our own."""
        if self._ctx is None or (max_batch, *sample_shape) != (self._max_batch,
                                                                *self._sample_shape):
            return None
        self._ctx.push()
        try:
            array: Batch = self._cuda.pagelocked_zeros((max_batch, *sample_shape), dtype)
        finally:
            self._ctx.pop()
        self._buffers[array.ctypes.data] = array
        return array

    def predict(self, batch: Batch) -> Outputs:
        n, cuda = len(batch), self._cuda
        if n > self._max_batch:
            raise BackendError(f"batch of {n} exceeds the engine's maximum {self._max_batch}")
        slot = self._pool.get()
        self._ctx.push()
        try:
            source = slot.host_in[:n]
            if (batch.ctypes.data in self._buffers and batch.dtype == source.dtype
                    and batch.flags.c_contiguous):
                source = batch  # batch = buffer[:n] of our page-locked buffer: no copy
            else:
                np.copyto(source, batch, casting="same_kind")
            slot.context.set_input_shape(self._input, (n, *self._sample_shape))
            cuda.memcpy_htod_async(slot.dev_in, source, slot.stream)
            if not slot.context.execute_async_v3(slot.stream.handle):
                raise BackendError("TensorRT execute_async_v3 failed; see its log")
            cuda.memcpy_dtoh_async(slot.host_out[:n], slot.dev_out, slot.stream)
            slot.stream.synchronize()
            # A copy: the page-locked buffer is reused by the next call.
            return np.array(slot.host_out[:n], dtype=np.float32)
        finally:
            self._ctx.pop()
            self._pool.put(slot)

    def close(self) -> None:
        """Release in TensorRT's order: contexts, engine, runtime; then the CUDA context.

        The pool holds the same slots as ``_slots``: both are emptied before the engine
        is dropped, or a context would outlive its engine.
        """
        if self._ctx is None:
            return
        self._ctx.push()
        try:
            while not self._pool.empty():
                self._pool.get_nowait()
            for slot in self._slots:
                slot.stream.synchronize()  # nothing may still run on the buffers
                slot.context = None  # the last reference: the context is destroyed here
                slot.dev_in.free()
                slot.dev_out.free()
                slot.host_in = slot.host_out = None
            self._slots.clear()
            self._buffers.clear()
            self._engine = None
            self._runtime = None
        finally:
            self._ctx.pop()
            self._ctx.detach()
            self._ctx = None


def _recorded_samples(engine_path: Path) -> int | None:
    """The calibrated sample count written beside a cached engine, or None."""
    try:
        value = json.loads(engine_path.with_suffix(".json").read_text()).get(
            "calibrated_samples")
    except (OSError, ValueError, AttributeError):
        return None  # recorded as "not recorded", never guessed
    return value if isinstance(value, int) else None

