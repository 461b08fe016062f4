"""The PyTorch backend: the model card's ``nn.Module`` and state dict, eager or compiled.

The card names the module as ``model.py:Class`` beside the ONNX file and the state
dict with its sha256; ``torch_model`` verifies both before anything is loaded, and
hashes the loaded weights again against ``weights_sha256``, the hash ``train.py``
computed from the ONNX file's initializers. So this backend provably runs the same
weights as onnxruntime.

Threads: ``predict`` is called from several SUT worker threads at once. Eager
forwards run concurrently (torch releases the GIL inside its ops, and the module is
only read under ``torch.inference_mode()``); per-thread state (pinned staging buffer,
CUDA streams) lives in a ``threading.local``. Compiled forwards are serialised, because
torch.compile's guards are not safe under concurrent calls (they recompiled mid-run),
and a CUDA-graph replay takes a lock, because a graph's static tensors are shared.

Warm-up (``shapes``): no batch size the run can produce meets the device for the first
time under LoadGen. On CUDA every size 1..max is run at load (``all``), or batches are
padded to a few buckets that are (``buckets``, as CUDA graphs are); on a CPU the shape
classes torch.compile specialises on (1, 2, 3, max). ``cudnn.benchmark`` and TF32 are
set from options, never left to process state, and recorded in ``BackendInfo``.

Task cards (``[[inputs]]``/``[[outputs]]``) run from a ``torch.export`` program instead,
called by tensor name (``torch_task``); the options live in ``torch_options``.

Raw input (CUDA): ``accept_raw_input`` takes uint8 HWC pixel batches, a quarter of
float32's bytes to copy, and normalises them on the device; ``input_buffer`` hands the
SUT page-locked buffers, so a batch gathered there is copied to the device directly.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from suite.backends.base import (
    BackendBase,
    BackendInfo,
    BackendOptions,
    RawInput,
    nvidia_gpu_problem,
)
from suite.backends.torch_model import load_card_model
from suite.backends.torch_model import weights_sha256 as weights_sha256  # re-export
from suite.backends.torch_options import TorchOptions as TorchOptions  # re-export
from suite.backends.torch_support import (
    TORCH_INSTALL,
    ShapePlan,
    StreamSlots,
    host_outputs,
    normalize_on_device,
    pad_rows,
    plan_shapes,
    precision_flags,
    precision_record,
    set_cuda_flags,
)
from suite.backends.torch_task import TaskProgram
from suite.errors import BackendError, ModelError

if TYPE_CHECKING:
    from suite.models import ModelCard
    from suite.types import Batch, Outputs

_DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


class TorchBackend(BackendBase):
    """Runs the card's PyTorch module; see the module docstring."""

    name = "torch"
    Options = TorchOptions
    requires = (("torch", "torch"),)
    extra = "torch"
    # A bare `pip install torch` pulls a multi-GB CUDA build on CPU machines.
    install = TORCH_INSTALL
    # One Server worker: a small model's eager call is mostly Python under the GIL, and a
    # second worker thread contends with it; measured in docs/tuning.md ("Worker count
    # per backend", bench/bench_server_workers.py).
    scenario_defaults: ClassVar[Mapping[str, Mapping[str, Any]]] = {
        "server": {"sut.workers": 1}}

    def __init__(self, options: BackendOptions | None = None) -> None:
        super().__init__(options)
        assert isinstance(self.options, TorchOptions)
        self.opts: TorchOptions = self.options
        self._torch: Any = None
        self._forward: Any = None
        self._dtype: Any = None
        self._device: Any = None
        self._local = threading.local()
        self._slots: StreamSlots | None = None
        self._graphs: dict[int, tuple[Any, Any, Any, threading.Lock]] = {}
        # torch.compile's guards are not safe to evaluate from two threads at once: under
        # concurrent calls torch 2.13 logged "Unexpected recompilation: runtime guards
        # failed" and recompiled inside the measured run (a 350 ms stall). Compiled calls
        # are serialised, on CUDA until their output is copied back (a compiled CUDA graph
        # reuses its output memory); eager ones run concurrently.
        self._compiled_lock = threading.Lock()
        self._max_batch = 0
        self._sample_shape: tuple[int, ...] = ()
        self._plan = ShapePlan("small", ())
        self._raw: RawInput | None = None
        self._means: Any = None
        #: Page-locked buffers handed out by ``input_buffer``, by host address.
        self._buffers: dict[int, tuple[Any, np.dtype[Any], tuple[int, ...]]] = {}
        self._program: TaskProgram | None = None

    @classmethod
    def options_problem(cls, options: BackendOptions) -> str | None:
        assert isinstance(options, TorchOptions)
        if options.device.startswith("cuda") and (gpu := nvidia_gpu_problem()) is not None:
            return f"device '{options.device}' cannot be used: {gpu}"
        return None

    #: Task cards run from a torch.export program (``torch_task``), a stand-in's too.
    serves_tasks = True
    stand_in_model = "model.pt2"

    @property
    def warm_per_thread(self) -> bool:
        # A task's program on the CPU keeps no per-thread state (no compile, no streams):
        # the SUT's one warm-up serves every worker, as for onnxruntime's CPU session.
        return self._program is None or self._program.device.type != "cpu"

    def predict_named(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        if self._program is None:
            raise BackendError("backend torch: no task card's program is loaded")
        return self._program.call(inputs)

    # -- loading ---------------------------------------------------------------------

    def build_model(self, card: ModelCard) -> Any:
        """The card's module with its verified weights, in eval mode, on the CPU.

        A subclass may build another module (``bench/gpu_resnet50.py`` does); ``load``
        places, casts, compiles and warms whatever this returns.
        """
        return load_card_model(self._torch, card)

    def load(self, card: ModelCard, max_batch_size: int) -> BackendInfo:
        import torch  # lazy: keeps `import suite` light

        self._torch, opts = torch, self.opts
        if opts.num_threads:
            torch.set_num_threads(opts.num_threads)
        if card.is_task_card:  # a torch.export program, called by tensor name (torch_task)
            self._program = TaskProgram.load(torch, card, opts)
            return self._program.info
        try:
            model = self.build_model(card)
            self._device = torch.device(opts.device)
            if self._device.type == "cuda" and not torch.cuda.is_available():
                raise BackendError(f"torch {torch.__version__} cannot use CUDA here (CPU "
                                   "build, or no usable GPU)",
                                   hint="install the CUDA build of torch, or use device 'cpu'")
            self._dtype = getattr(torch, _DTYPES[opts.dtype])
            if self._device.type == "cuda":
                set_cuda_flags(torch, opts.cudnn_benchmark, opts.dtype, opts.tf32)
            model = model.to(device=self._device, dtype=self._dtype)
            if opts.channels_last:
                model = model.to(memory_format=torch.channels_last)
            self._forward = (torch.compile(model, mode=opts.compile_mode, dynamic=True)
                             if opts.compile else model)
        except (BackendError, ModelError):
            raise
        except Exception as exc:  # torch raises plain RuntimeErrors
            raise BackendError(f"torch could not load {card.model.torch_module}: {exc}") from exc
        self._max_batch = max_batch_size
        self._sample_shape = card.input.sample_shape
        self._plan = plan_shapes(opts.shapes, cuda=self._device.type == "cuda",
                                 max_batch=max_batch_size, cuda_graphs=opts.cuda_graphs,
                                 graph_sizes=opts.cuda_graph_batch_sizes)
        self._warm_up(model)
        tf32 = (self._device.type == "cuda" and opts.dtype == "fp32"
                and bool(torch.backends.cudnn.allow_tf32))
        precision, transformations = precision_record(opts.dtype, tf32)
        return BackendInfo(
            name=self.name, version=torch.__version__, device=str(self._device),
            thread_safe=True, precision=precision, weight_transformations=transformations,
            details={
                "dtype": opts.dtype, "compile": str(opts.compile),
                "compile_mode": opts.compile_mode if opts.compile else "-",
                "cuda_graphs": ",".join(map(str, sorted(self._graphs))) or "-",
                "channels_last": str(opts.channels_last),
                "num_threads": str(torch.get_num_threads()),
                "shapes": self._plan.describe(),
                "streams": (f"{len(self._slots.warmed)} warmed at load, one per worker thread"
                            if self._slots is not None else "-"),
                "cudnn_benchmark": str(torch.backends.cudnn.benchmark),
                "tf32": precision_flags(torch),
                "threading": "compiled calls serialised (torch.compile guards are not "
                             "thread-safe); eager calls concurrent; CUDA-graph replays hold a "
                             "per-graph lock",
            },
        )

    def _warm_up(self, model: Any) -> None:
        """Run every size of the shape plan and capture CUDA graphs now, not under LoadGen."""
        if self.opts.cuda_graphs:
            self._capture_graphs(model)
        if self._device.type == "cuda":
            self._slots = StreamSlots(self._torch, self._device, self.opts.streams,
                                      self.opts.copy_stream)
        self._warm_sizes(self._sample_shape, np.float32)

    def _warm_sizes(self, shape: tuple[int, ...], dtype: Any) -> None:
        """Every warmed size, on CUDA through every worker stream (see ``StreamSlots``)."""
        for size in self._plan.warm:
            batch = np.zeros((size, *shape), dtype=dtype)
            if self._slots is None:
                self.predict(batch)
                continue
            with self._torch.inference_mode():
                for slot in self._slots.warmed:
                    self._predict_cuda(batch, slot)

    def _capture_graphs(self, model: Any) -> None:
        torch = self._torch
        side = torch.cuda.Stream(self._device)
        with torch.inference_mode():
            for size in self._plan.buckets:
                static_in = self._to_model(torch.zeros((size, *self._sample_shape),
                                                       device=self._device))
                # The documented recipe: warm up on a side stream, then capture.
                side.wait_stream(torch.cuda.current_stream(self._device))
                with torch.cuda.stream(side):
                    for _ in range(3):
                        model(static_in)
                torch.cuda.current_stream(self._device).wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    static_out = model(static_in)
                self._graphs[size] = (graph, static_in, static_out, threading.Lock())
        torch.cuda.synchronize(self._device)

    # -- raw input and host buffers ----------------------------------------------------

    def accept_raw_input(self, raw: RawInput) -> bool:
        """On CUDA, take uint8 HWC batches and normalise them on the device; a CPU gains
        nothing from it (the subtraction costs the same there), so it refuses."""
        if self._device is None or self._device.type != "cuda":
            return False
        channels = raw.shape[-1] if raw.shape else 0
        model_shape = ((channels, *raw.shape[:-1]) if raw.layout == "NCHW"
                       else tuple(raw.shape))
        if (raw.dtype != "uint8" or raw.layout not in ("NCHW", "NHWC") or len(raw.shape) != 3
                or len(raw.means) != channels or model_shape != self._sample_shape):
            return False
        torch = self._torch
        self._means = torch.tensor(raw.means, dtype=torch.float32, device=self._device)
        self._raw = raw
        # The normalising kernels and their output shapes meet the device now, too.
        self._warm_sizes(tuple(raw.shape), np.uint8)
        return True

    def input_buffer(self, max_batch: int, sample_shape: tuple[int, ...],
                     dtype: str) -> Batch | None:
        """CUDA with pin_memory: a zeroed page-locked array the device copies from
        directly (``predict`` recognises it by address and skips the staging copy)."""
        if self._device is None or self._device.type != "cuda" or not self.opts.pin_memory:
            return None
        torch = self._torch
        torch_dtype = torch.from_numpy(np.zeros((0,), dtype=dtype)).dtype
        tensor = torch.zeros((max_batch, *sample_shape), dtype=torch_dtype, pin_memory=True)
        array: Batch = tensor.numpy()
        self._buffers[array.ctypes.data] = (tensor, array.dtype, array.shape[1:])
        return array

    # -- predicting ------------------------------------------------------------------

    def _to_model(self, x: Any) -> Any:
        if self._raw is not None and x.dtype == self._torch.uint8:
            return normalize_on_device(self._torch, x, self._means, self._raw.layout,
                                       self._dtype, self.opts.channels_last)
        x = x.to(self._dtype)
        if self.opts.channels_last and x.dim() == 4:
            x = x.contiguous(memory_format=self._torch.channels_last)
        return x

    def predict(self, batch: Batch) -> Outputs:
        torch = self._torch
        with torch.inference_mode():
            if self._device.type == "cuda":
                return self._predict_cuda(batch)
            n = len(batch)
            inputs = self._to_model(pad_rows(torch, torch.from_numpy(batch),
                                             self._plan.bucket(n)))
            if self.opts.compile:
                with self._compiled_lock:
                    logits = self._forward(inputs)
            else:
                logits = self._forward(inputs)
            result: Outputs = host_outputs(logits[:n]).numpy()
            return result

    def _thread_state(self) -> Any:
        """This thread's slot (streams, staging buffer), taken at its first call."""
        local = self._local
        if not hasattr(local, "slot"):
            assert self._slots is not None
            local.slot = self._slots.take()
        return local.slot

    def _host_tensor(self, batch: Batch, local: Any) -> tuple[Any, bool]:
        """``batch`` as a CPU tensor to copy from, and whether it is page-locked."""
        torch, n = self._torch, len(batch)
        own = self._buffers.get(batch.ctypes.data) if batch.flags.c_contiguous else None
        if own is not None and own[1] == batch.dtype and own[2] == batch.shape[1:]:
            return own[0][:n], True  # batch = buffer[:n] of our page-locked buffer: no copy
        host = torch.from_numpy(batch)
        if not self.opts.pin_memory or n > self._max_batch:
            return host, False
        pinned = local.pinned
        if pinned is None or pinned.dtype != host.dtype or pinned.shape[1:] != host.shape[1:]:
            # One per thread and input form, allocated once.
            pinned = local.pinned = torch.empty((self._max_batch, *host.shape[1:]),
                                                dtype=host.dtype, pin_memory=True)
        # Safe to reuse per thread: the blocking copy back in predict orders the next call.
        return pinned[:n].copy_(host), True

    def _predict_cuda(self, batch: Batch, local: Any = None) -> Outputs:
        torch, n = self._torch, len(batch)
        local = local or self._thread_state()
        host, pinned = self._host_tensor(batch, local)
        copy_stream = local.copy or local.compute
        with torch.cuda.stream(copy_stream):
            x = host.to(self._device, non_blocking=pinned)
        with torch.cuda.stream(local.compute):
            if copy_stream is not local.compute:
                local.compute.wait_stream(copy_stream)
                x.record_stream(local.compute)  # x was allocated on the copy stream
            size = min((s for s in self._graphs if s >= n), default=0)
            if size:
                x = self._to_model(x)
                graph, static_in, static_out, lock = self._graphs[size]
                with lock:
                    # Rows n..size keep an earlier batch's inputs: rows are independent.
                    static_in[:n].copy_(x)
                    graph.replay()
                    result: Outputs = host_outputs(static_out[:n]).cpu().numpy()
                return result
            # Padded before the cast, so the model's memory format applies to every row.
            x = self._to_model(pad_rows(torch, x, self._plan.bucket(n)))
            if self.opts.compile:
                with self._compiled_lock:
                    result = host_outputs(self._forward(x)[:n]).cpu().numpy()
                return result
            result = host_outputs(self._forward(x)[:n]).cpu().numpy()
            return result

    def close(self) -> None:
        self._forward = self._program = None
        self._graphs.clear()
        self._buffers.clear()
        self._means = None
