"""The onnxruntime backend: the card's ONNX file on the configured execution providers.

Execution providers are given in priority order (onnxruntime places each node on
the first one that supports it), each with its own provider options. A requested
provider that this onnxruntime build lacks, or that fails to initialise and is
silently dropped by onnxruntime, fails the load: a result must never measure the CPU
when the configuration says GPU.

onnxruntime releases the GIL inside ``InferenceSession.run``, so several harness
worker threads share one session. Its thread pools are sized from the options, so
they do not fight the harness's own threads for the cores. On a GPU provider, IO
binding (one binding per call, so threads never share one) puts the output on the
device and copies it back once, instead of letting ``run`` allocate per call.
"""

from __future__ import annotations

import importlib.metadata
import mmap
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from suite.backends.base import BackendBase, BackendInfo, BackendOptions, nvidia_gpu_problem
from suite.errors import BackendError, BackendUnavailable

if TYPE_CHECKING:
    from suite.models import ModelCard
    from suite.types import Batch, Outputs

Provider = Literal["CPUExecutionProvider", "CUDAExecutionProvider", "TensorrtExecutionProvider"]
_GPU_PROVIDERS = ("CUDAExecutionProvider", "TensorrtExecutionProvider")
_GPU_INSTALL = "pip uninstall -y onnxruntime && pip install onnxruntime-gpu"


#: ONNX TensorProto data types of weights, as the precision names results use.
_WEIGHT_TYPES = {1: "fp32", 10: "fp16", 16: "bf16", 11: "fp64", 3: "int8", 2: "uint8"}
#: Field numbers in onnx/onnx's ``onnx/onnx.proto``: ``ModelProto.graph``,
#: ``GraphProto.initializer`` and ``TensorProto.data_type``.
_MODEL_GRAPH, _GRAPH_INITIALIZER, _TENSOR_DATA_TYPE = 7, 5, 2


def weight_types(model: Path) -> str:
    """The data types of an ONNX file's floating and quantized initializers, e.g. "fp32"
    or "int8+fp32" (a quantized model keeps float scales), read from the file.

    Reads the top-level graph's initializers, as ``onnx.load(model,
    load_external_data=False).graph.initializer`` does (external weight data stays on
    disk), straight from the protobuf's bytes: the onnx package's import (protobuf with
    it) cost every run's model load about 0.1 s of CPU, and its parse of a ResNet-50 file
    more. Integer index tensors (shapes, axes) are not weights and are not counted.
    """
    try:
        with model.open("rb") as file, mmap.mmap(file.fileno(), 0,
                                                   access=mmap.ACCESS_READ) as data:
            types = _initializer_types(data)
    except (OSError, ValueError, _NotProtobuf) as exc:  # no protobuf; ValueError: empty
        raise BackendError(f"cannot read the weight types of {model}: {exc}",
                           hint="check that the file is an ONNX model (onnx.checker."
                                "check_model) and that it is whole") from exc
    found = {_WEIGHT_TYPES[t] for t in types if t in _WEIGHT_TYPES}
    return "+".join(sorted(found)) or "none (the graph has no weight initializers)"


def _initializer_types(data: mmap.mmap) -> set[int]:
    """``data_type`` of each initializer of the model's graph (0 where a tensor has none)."""
    found: set[int] = set()
    for number, value in _fields(data, 0, len(data)):
        if number != _MODEL_GRAPH or not isinstance(value, tuple):
            continue
        for inner, tensor in _fields(data, *value):
            if inner == _GRAPH_INITIALIZER and isinstance(tensor, tuple):
                found.add(next((v for n, v in reversed(list(_fields(data, *tensor)))
                                if n == _TENSOR_DATA_TYPE and isinstance(v, int)), 0))
    return found


class _NotProtobuf(BackendError):
    """The bytes are not the protobuf message they should be (turned into one line)."""


def _fields(data: mmap.mmap, start: int, end: int) -> Iterator[tuple[int, int | tuple[int, int]]]:
    """(field number, value) of the protobuf message in ``data[start:end]``: a varint's
    value, a length-delimited field's (start, end); fixed-size fields are skipped."""
    at = start
    while at < end:
        key, at = _varint(data, at, end)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = _varint(data, at, end)
            yield number, value
        elif wire == 2:
            length, at = _varint(data, at, end)
            if at + length > end:
                raise _NotProtobuf(f"field {number} runs past its message (byte {at})")
            yield number, (at, at + length)
            at += length
        elif wire in (1, 5):
            at += 8 if wire == 1 else 4
        else:
            raise _NotProtobuf(f"unknown protobuf wire type {wire} at byte {at}")
    if at != end:
        raise _NotProtobuf(f"a field runs past its message (byte {end})")


def _varint(data: mmap.mmap, at: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while at < end and shift < 70:
        byte = data[at]
        value, at, shift = value | (byte & 0x7F) << shift, at + 1, shift + 7
        if byte < 0x80:
            return value, at
    raise _NotProtobuf(f"a varint runs past its message (byte {at})")


class OnnxRuntimeOptions(BackendOptions):
    """``[backend.onnxruntime]`` options."""

    providers: tuple[Provider, ...] = Field(
        default=("CPUExecutionProvider",), min_length=1,
        description="execution providers in priority order, e.g. "
        "['TensorrtExecutionProvider', 'CUDAExecutionProvider', 'CPUExecutionProvider']")
    # A list of strings, not a table: config layers flatten tables into dotted keys.
    provider_options: tuple[str, ...] = Field(
        default=(), description="'Provider:key=value' strings passed to that provider, e.g. "
        "['CUDAExecutionProvider:cudnn_conv_algo_search=HEURISTIC', "
        "'TensorrtExecutionProvider:trt_fp16_enable=True']")
    intra_op_threads: int = Field(default=0, ge=0, description="0: onnxruntime decides")
    inter_op_threads: int = Field(default=0, ge=0, description="0: onnxruntime decides")
    graph_optimization_level: Literal["disable", "basic", "extended", "all"] = Field(
        default="all", description="onnxruntime graph optimizations applied at load")
    io_binding: Literal["auto", "on", "off"] = Field(
        default="auto", description="bind the output to the GPU and copy it back once; "
        "auto: on when the first provider is a GPU one")
    device_id: int = Field(default=0, ge=0, description="GPU index for GPU providers and "
                           "IO binding (also passed as their device_id unless set there)")

    @model_validator(mode="after")
    def _consistent(self) -> OnnxRuntimeOptions:
        for item in self.provider_options:
            provider, _, setting = item.partition(":")
            if provider not in self.providers or "=" not in setting:
                raise ValueError(f"provider_options entry {item!r}: expected "
                                 "'Provider:key=value' for a provider listed in providers")
        if self.io_binding == "on" and self.providers[0] not in _GPU_PROVIDERS:
            raise ValueError("io_binding = 'on' needs a GPU provider first in providers")
        return self

    def settings_of(self, provider: str) -> dict[str, str]:
        """The ``provider_options`` entries for one provider as onnxruntime takes them."""
        chosen = {}
        for item in self.provider_options:
            name, _, setting = item.partition(":")
            if name == provider:
                key, _, value = setting.partition("=")
                chosen[key.strip()] = value.strip()
        return chosen

    @property
    def uses_gpu(self) -> bool:
        return any(p in _GPU_PROVIDERS for p in self.providers)


class OnnxRuntimeBackend(BackendBase):
    """Runs the card's ONNX file with onnxruntime; see the module docstring."""

    name = "onnxruntime"

    @property
    def warm_per_thread(self) -> bool:
        # On the CPU a session's first-run costs (arena, kernel choice) are the session's,
        # not a calling thread's: one warm-up serves every worker (ResNet-50: ~0.4 s).
        return tuple(self.opts.providers) != ("CPUExecutionProvider",)
    Options = OnnxRuntimeOptions
    requires = (("onnxruntime", "onnxruntime"),)

    def __init__(self, options: BackendOptions | None = None) -> None:
        super().__init__(options)
        assert isinstance(self.options, OnnxRuntimeOptions)
        self.opts: OnnxRuntimeOptions = self.options
        self._session: Any = None
        self._input = ""
        self._output = ""
        self._outputs: list[str] = []
        self._bind = False

    @classmethod
    def options_problem(cls, options: BackendOptions) -> str | None:
        assert isinstance(options, OnnxRuntimeOptions)
        if not options.uses_gpu:
            return None
        if (gpu := nvidia_gpu_problem()) is not None:
            return f"providers {list(options.providers)} cannot run here: {gpu}"
        try:
            importlib.metadata.version("onnxruntime-gpu")
        except importlib.metadata.PackageNotFoundError:
            return f"GPU execution providers need onnxruntime-gpu: `{_GPU_INSTALL}`"
        return None

    def _providers(self) -> list[tuple[str, dict[str, Any]]]:
        opts = self.opts
        chosen: list[tuple[str, dict[str, Any]]] = []
        for provider in opts.providers:
            settings: dict[str, Any] = opts.settings_of(provider)
            if provider in _GPU_PROVIDERS:
                settings.setdefault("device_id", str(opts.device_id))
            if provider == "CUDAExecutionProvider":
                # TF32 is on by default for CUDA convolutions; the model is fp32.
                settings.setdefault("use_tf32", "0")
            chosen.append((provider, settings))
        return chosen

    def load(self, card: ModelCard, max_batch_size: int) -> BackendInfo:
        import onnxruntime as ort  # lazy: keeps `import suite` light

        opts = self.opts
        missing = [p for p in opts.providers if p not in ort.get_available_providers()]
        if missing:
            raise BackendUnavailable(
                f"onnxruntime {ort.__version__} here lacks {missing} (it has "
                f"{ort.get_available_providers()})", hint=f"for GPU providers: `{_GPU_INSTALL}`")
        levels = {
            "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        }
        session_options = ort.SessionOptions()
        session_options.intra_op_num_threads = opts.intra_op_threads
        session_options.inter_op_num_threads = opts.inter_op_threads
        session_options.graph_optimization_level = levels[opts.graph_optimization_level]
        providers = self._providers()
        try:
            self._session = ort.InferenceSession(
                str(card.onnx_path), sess_options=session_options,
                providers=[name for name, _ in providers],
                provider_options=[settings for _, settings in providers],
            )
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise BackendError(f"onnxruntime could not load {card.onnx_path}: {exc}") from exc
        active = self._session.get_providers()
        dropped = [p for p in opts.providers if p not in active]
        if dropped:
            # onnxruntime only warns when a provider fails to initialise (missing CUDA
            # or cuDNN libraries) and carries on with the rest.
            raise BackendError(f"onnxruntime could not initialise {dropped} (active: {active})",
                               hint="check the CUDA, cuDNN and TensorRT libraries onnxruntime "
                               "needs; see its log above")
        self._input = card.input.name
        self._output = card.output.name
        self._outputs = [self._output]  # built once: predict is on the latency path
        inputs = [i.name for i in self._session.get_inputs()]
        outputs = [o.name for o in self._session.get_outputs()]
        named_out = [t.name for t in card.outputs]
        absent = [f"input {n!r}" for n in dict.fromkeys([self._input, *(
            t.name for t in card.inputs)]) if n not in inputs] + [
            f"output {n!r}" for n in dict.fromkeys([self._output, *named_out]) if n not in outputs]
        if absent:
            raise BackendError(
                f"{card.onnx_path}: the model card names {absent[0]}, the model has inputs "
                f"{inputs} and outputs {outputs}",
                hint="fix the tensor names in the model card ([input]/[output] name, or "
                     "[[inputs]]/[[outputs]] of a task card)")
        self._named_out = named_out
        # ``InferenceSession.run`` re-validates the feed on every call (1-5 us per
        # SingleStream query, measured). The names are checked above, the feed is always
        # one numpy array, and a silent provider fallback mid-run is not wanted in a
        # benchmark, so predict calls the binding's ``run`` when the session has one.
        session: Any = self._session
        fast = getattr(getattr(session, "_sess", None), "run", None)
        self._run: Callable[[list[str], dict[str, Any], Any], list[Outputs]] = (
            fast if callable(fast) else session.run)
        self._bind = opts.io_binding == "on" or (
            opts.io_binding == "auto" and opts.providers[0] in _GPU_PROVIDERS)
        # A subclass that overrides predict (a fault or padding backend, a vendor's
        # wrapper) keeps its own: the closure would shadow it.
        if not self._bind and type(self).predict is OnnxRuntimeBackend.predict:
            # SingleStream calls predict on LoadGen's issue thread: a closure over the
            # run, the names and the output list takes the branch and three attribute
            # lookups off every query.
            run, output_names, input_name = self._run, self._outputs, self._input

            def predict(batch: Batch) -> Outputs:
                outputs: Outputs = run(output_names, {input_name: batch}, None)[0]
                return outputs

            self.predict = predict  # type: ignore[method-assign]
        precision, transformations = self._precision(card, active)
        return BackendInfo(
            name=self.name,
            version=ort.__version__,
            device=f"cuda:{opts.device_id}" if opts.uses_gpu else "cpu",
            precision=precision,
            weight_transformations=transformations,
            details={
                "providers": ",".join(active),
                "intra_op_threads": str(opts.intra_op_threads),
                "inter_op_threads": str(opts.inter_op_threads),
                "graph_optimization_level": opts.graph_optimization_level,
                "io_binding": str(self._bind),
            },
        )

    def _precision(self, card: ModelCard, active: list[str]) -> tuple[str, str]:
        """What ran, read from the model file and the providers, never assumed: the
        data types of the file's weights, and whether the TensorRT provider was asked
        to build a lower-precision engine from them."""
        weights = weight_types(card.onnx_path)
        trt = self.opts.settings_of("TensorrtExecutionProvider") \
            if "TensorrtExecutionProvider" in active else {}
        enabled = {k for k, v in trt.items() if v.strip().lower() in ("1", "true")}
        if "trt_int8_enable" in enabled:
            return (f"int8 (TensorRT provider; file weights {weights})",
                    "TensorRT provider int8 calibration at engine build")
        if "trt_fp16_enable" in enabled:
            return (f"fp16 (TensorRT provider; file weights {weights})",
                    "TensorRT provider fp16 engine built from the file's weights")
        return weights, "none: the model file runs as given (its sha256 is recorded)"

    def predict(self, batch: Batch) -> Outputs:
        if self._bind:
            binding = self._session.io_binding()
            binding.bind_cpu_input(self._input, batch)
            binding.bind_output(self._output, "cuda", self.opts.device_id)
            self._session.run_with_iobinding(binding)
            bound: Outputs = binding.copy_outputs_to_cpu()[0]
            return bound
        outputs: Outputs = self._run(self._outputs, {self._input: batch}, None)[0]
        return outputs

    serves_tasks = True

    def predict_named(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """Every ``[[inputs]]`` fed by name; every ``[[outputs]]`` returned by name."""
        names = self._named_out
        return dict(zip(names, self._run(names, dict(inputs), None), strict=True))

    def close(self) -> None:
        self._session = None
        self.__dict__.pop("predict", None)  # the closure holds the session's run
