"""The backend contracts: what every backend has, and what a tensor backend implements.

``BackendCore`` is what every backend has, whatever kind of benchmark it serves: its
options, the kinds it serves (``kinds``: ``suite.models.Kind``), its availability, its
run record and its lifecycle. Each kind adds its own contract on top:

* ``BackendBase`` (``Kind.TENSOR``): loads one model, predicts one batch at a time, and
  closes. It must be safe to call ``predict`` from several worker threads at once
  (onnxruntime sessions are) or say otherwise through ``BackendInfo.thread_safe``.
* ``suite.llm.contract`` (``Kind.TEXT_GENERATION``): generation in process, or streamed
  from an engine's endpoint.

Heavy frameworks are imported inside ``load`` (or ``open``), never at module import, so
``import suite`` stays fast.

Availability is decided here without importing any framework: ``find_spec`` for
the packages, and the driver library and device nodes for an NVIDIA GPU.
"""

from __future__ import annotations

import functools
import importlib.util
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from suite.models import Kind
from suite.paths import install_hint

if TYPE_CHECKING:
    from suite.models import ModelCard
    from suite.types import Batch, Outputs


class BackendOptions(BaseModel):
    """Base of every backend's options model (``[backend.<name>]`` in config files)."""

    # validators built at first use: a run imports models it never validates
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


@dataclass(frozen=True)
class BackendInfo:
    """What a loaded backend reports about itself; recorded in ``result.json``.

    ``precision`` and ``weight_transformations`` are what packaging states about the
    run (weight data types, quantization): a backend fills them from what it actually
    loaded and ran; left empty they are "not recorded", and packaging refuses to
    invent them.
    """

    name: str
    version: str
    device: str = "cpu"
    thread_safe: bool = True
    details: dict[str, str] = field(default_factory=dict)
    #: Weights and compute precision that ran: "fp32", "fp16", "bf16", "int8", ...
    precision: str = ""
    #: What was done to the reference weights: "none", or e.g. "cast to fp16",
    #: "int8 post-training calibration (entropy, 500 samples)".
    weight_transformations: str = ""


@dataclass(frozen=True)
class RawInput:
    """A dataset's staged form before normalisation, offered to a backend that can
    normalise on its device (``BackendBase.accept_raw_input``).

    Samples are ``dtype`` arrays of ``shape`` (uint8 HWC pixels for images, a quarter
    of float32's bytes to gather and transfer); the model's input is ``x - means``
    per channel (the last axis), as float, transposed to ``layout``.
    """

    shape: tuple[int, ...]
    dtype: str
    means: tuple[float, ...]
    #: The model input's layout: "NCHW" (transpose HWC to CHW) or "NHWC".
    layout: str


def importable(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it (a dotted name imports its
    parent package only). ``find_spec`` raises, rather than answering, when the parent of
    a dotted name is missing (``tritonclient.grpc`` without ``tritonclient``)."""
    return import_problem(module) is None


def import_problem(module: str) -> str | None:
    """Why ``module`` cannot be imported ("missing", or what importing its installed
    parent package raised: an ``ImportError`` of a broken install, anything its code
    raises), or ``None``; imports nothing but a dotted name's parent."""
    try:
        return None if importlib.util.find_spec(module) is not None else "missing"
    except (ModuleNotFoundError, ValueError):
        return "missing"
    except (Exception, SystemExit) as exc:  # the parent is installed; its import failed
        return f"installed, but importing it raised {type(exc).__name__}: {exc}"


@runtime_checkable
class Backend(Protocol):
    """One model, one ``predict`` per batch. See the module docstring."""

    def load(self, card: ModelCard, max_batch_size: int) -> BackendInfo:
        """Load the card's model, ready for batches of up to ``max_batch_size``."""
        ...

    def predict(self, batch: Batch) -> Outputs:
        """Run the model on ``batch`` (first axis = samples) and return its raw outputs."""
        ...

    def close(self) -> None:
        """Release the model and any device memory."""
        ...


@functools.cache
def nvidia_gpu_problem() -> str | None:
    """Why no NVIDIA GPU can be used here, or ``None`` if one can (imports nothing).

    Checks the driver's user-space library (``libcuda``) and a device node, the two
    things every CUDA framework needs, without initialising CUDA in this process.
    """
    import ctypes.util  # here: ctypes is ~5 ms of every run's imports, needed only here

    has_driver = ctypes.util.find_library("cuda") is not None or any(
        Path(d).glob("libcuda.so*") for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64",
                                              "/usr/local/nvidia/lib64", "/usr/lib/wsl/lib")
        if Path(d).is_dir()
    )
    has_device = any(Path("/dev").glob("nvidia[0-9]*")) or Path("/dev/dxg").exists()
    if not has_driver and not has_device:
        smi = "" if shutil.which("nvidia-smi") is None else " (nvidia-smi exists but finds none)"
        return f"no NVIDIA GPU: no driver library libcuda.so and no /dev/nvidia* device{smi}"
    if not has_driver:
        return "NVIDIA driver missing: /dev/nvidia* exists but libcuda.so was not found"
    if not has_device:
        return "no NVIDIA GPU: the driver library is installed but there is no /dev/nvidia* device"
    return None


class BackendCore:
    """What every backend has: options, the kinds it serves, availability, a run record,
    a context manager. A kind's contract (``BackendBase``, ``suite.llm.contract``)
    subclasses it; the registry takes any subclass."""

    #: Registry name, e.g. ``"onnxruntime"``.
    name: ClassVar[str] = ""
    #: The kinds of benchmark this backend serves (``suite.models.Kind``).
    kinds: ClassVar[frozenset[Kind]] = frozenset()
    #: Options model; subclasses replace it.
    Options: ClassVar[type[BackendOptions]] = BackendOptions
    #: (import name, pip requirement) pairs that must be importable.
    requires: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: The pip extra that installs ``requires``.
    extra: ClassVar[str] = ""
    #: The exact command that installs ``requires``; default: the extra, or pip names.
    install: ClassVar[str] = ""
    #: Whether the backend needs an NVIDIA GPU whatever its options.
    requires_gpu: ClassVar[bool] = False
    #: Settings this backend runs a scenario with where the user set none: scenario name
    #: (``Scenario.value``) -> {dotted key: value}. They apply above the scenario file's
    #: top-level tables and below everything else (its ``[benchmarks.<name>]`` tables,
    #: tuned settings, ``--config``, ``--set``), recorded as "default for <name>". Each
    #: must come from a measurement named where it is declared (docs/tuning.md).
    scenario_defaults: ClassVar[Mapping[str, Mapping[str, Any]]] = {}

    def __init__(self, options: BackendOptions | None = None) -> None:
        self.options = options if options is not None else self.Options()

    @classmethod
    def install_command(cls, missing: list[str]) -> str:
        if cls.install:
            return cls.install
        if cls.extra:
            return install_hint(cls.extra)
        return "pip install " + " ".join(missing)

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """Why this backend cannot run here, or ``None`` if it can (imports nothing)."""
        problems = {req: import_problem(module) for module, req in cls.requires}
        missing = [req for req, problem in problems.items() if problem == "missing"]
        reasons = [f"{req} is {problem}" for req, problem in problems.items()
                   if problem not in (None, "missing")]
        if missing:
            reasons.append(f"missing package(s) {', '.join(missing)}: install with "
                           f"`{cls.install_command(missing)}`")
        if cls.requires_gpu and (gpu := nvidia_gpu_problem()) is not None:
            reasons.append(gpu)
        return "; ".join(reasons) or None

    @classmethod
    def options_problem(cls, options: BackendOptions) -> str | None:
        """Why these options cannot run here (e.g. a CUDA device without a GPU), or ``None``.

        Like ``unavailable_reason`` it must import nothing heavy: it runs before any
        run directory exists.
        """
        return None

    def begin_record(self) -> None:
        """The measured run starts (warm-up is over): what ``run_record`` reports
        counts from here. Nothing by default."""

    def run_record(self) -> dict[str, Any]:
        """What the backend measured of its own calls since ``begin_record``, recorded
        by the child as ``backend.run`` in ``status.json`` and ``result.json``; nothing
        by default."""
        return {}

    def close(self) -> None:
        """Nothing to release by default."""

    def __enter__(self) -> BackendCore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BackendBase(BackendCore):
    """The tensor backend contract (``Kind.TENSOR``): ``load`` a card's model, ``predict``
    one batch at a time. Subclasses implement both; the rest has working defaults."""

    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.TENSOR})

    @property
    def warm_per_thread(self) -> bool:
        """Whether each worker thread warms the model itself before LoadGen starts (per-
        thread state: torch.compile's guards, CUDA streams); False where the SUT's one
        warm-up serves every thread."""
        return True

    def __init__(self, options: BackendOptions | None = None) -> None:
        super().__init__(options)
        #: Preprocessed samples of the card's dataset for calibration (``(card, count)``),
        #: set by the harness where it loads the model: backends sit below the datasets.
        self.calibration_source: Callable[[ModelCard, int], Any] | None = None

    def load(self, card: ModelCard, max_batch_size: int) -> BackendInfo:
        """Load the card's model, ready for batches of up to ``max_batch_size``."""
        raise NotImplementedError(f"backend '{self.name}' implements no load()")

    def predict(self, batch: Batch) -> Outputs:
        """Run the model on ``batch`` (first axis = samples) and return its raw outputs."""
        raise NotImplementedError(f"backend '{self.name}' implements no predict()")

    #: Whether ``predict_named`` serves a task card (``ModelCard.is_task_card``).
    serves_tasks: ClassVar[bool] = False
    #: The file of a task card's stand-in this backend loads (``suite run --stand-in``):
    #: the stand-in's ONNX model, or a file derived from it (torch: ``model.pt2``).
    stand_in_model: ClassVar[str] = "model.onnx"

    def predict_named(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """A task card's model call: every ``[[inputs]]`` tensor by name (a batch on axis
        0) to every ``[[outputs]]`` tensor by name. Backends that serve task cards
        (``serves_tasks``) implement it."""
        from suite.errors import BackendError
        raise BackendError(f"backend '{self.name}' does not run task cards",
                           hint="use onnxruntime, torch, simulated or null for this benchmark")

    def accept_raw_input(self, raw: RawInput) -> bool:
        """Whether ``predict`` will take batches in ``raw`` form and normalise them
        itself (on the device); called once after ``load``, before any batch. The
        default refuses: the dataset then stages normalised model inputs."""
        return False

    def input_buffer(self, max_batch: int, sample_shape: tuple[int, ...],
                     dtype: str) -> Batch | None:
        """A preallocated host buffer the SUT gathers batches into, one per worker
        (page-locked memory where a device copies from it), or None: the SUT then
        allocates a plain one. ``predict`` receives ``buffer[:n]`` of it."""
        return None

    def worker_share(self) -> Any:
        """State that Server worker processes must share with this process's backend
        (picklable; each worker's backend gets it through ``attach_share``), or None:
        each worker process then builds an independent backend. The simulated backend
        shares its devices, as the processes of a real server share its GPUs."""
        return None

    def attach_share(self, share: Any) -> None:
        """In a worker process: use what the LoadGen process's ``worker_share`` gave."""
        from suite.errors import BackendError

        raise BackendError(f"the {self.name} backend shares no state with worker processes")

    def __enter__(self) -> BackendBase:
        return self
