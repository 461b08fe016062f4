"""The simulated backend: an accelerator's timing on any CPU, with real outputs.

It stands in for a GPU so that CI and every developer can drive the Server scheduler
at accelerator rates without one. The timing model and the profiles are data
(``reference_models/simulated/profiles.toml``, whose header says what each number
means); in short, a call of ``n`` samples copies them to a device, overlaps a fixed
cost with the device's other calls, then holds the device's compute for
``per_sample_ms x n``. A call is placed on its device's timeline when it is made, as
a GPU queues work on a stream, and the calling thread then sleeps once, until its end
(a stream synchronise; ``time.sleep`` releases the GIL as a GPU call does). So the
host work around it (the SUT's gather, this backend's staging copy, completing) is
real and is what a run measures, while a host thread that wakes late, on a busy
machine, delays only itself: the device's time is the profile's.

Outputs are real: a fixed, seeded projection of 16 input values per sample onto 16
scores, shaped as the model card's output (scores for ``argmax`` cards, the rest of a
wider output zero; the argmax class for ``class_index`` cards). They are a
deterministic function of the input, so accuracy mode and the compliance tests run
end to end; the accuracy itself is meaningless, and so a simulated result is never
submittable.

Like a GPU backend it takes the dataset's raw form (uint8 pixels: normalising is
device work here) and hands the SUT preallocated staging buffers to gather into, so a
batch reaches the "device" after exactly one host copy.
"""

from __future__ import annotations

import math
import os
import random
import threading
import time
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import numpy as np
from pydantic import Field

from suite.backends.base import BackendBase, BackendInfo, BackendOptions, RawInput
from suite.backends.simulated_devices import Devices, SharedDevices
from suite.errors import BackendError

if TYPE_CHECKING:
    from suite.models import ModelCard, TensorSpec
    from suite.types import Batch, Outputs

T = TypeVar("T")

#: Input values per sample the output projection reads, and scores it computes: few
#: enough to cost microseconds per batch (a 16 x 1001 projection through BLAS woke
#: OpenBLAS's threads and took 28 ms on a busy 2-core machine).
_FEATURES = 16


class SimulatedOptions(BackendOptions):
    """``[backend.simulated]`` options."""

    profile: str = Field(default="resnet50-h100-fp16", pattern=r"^[A-Za-z0-9_.-]+$",
                         description="a profile in reference_models/simulated/profiles.toml")
    shapes: Literal["all", "buckets", "none"] = Field(
        default="all", description="all: every batch size is warmed at load; buckets: "
        "batches are padded to the next power of two, and those are warmed; none: the "
        "first call at each size pays the profile's first_shape_ms under LoadGen")
    jitter: float | None = Field(default=None, ge=0, le=1,
                                 description="override the profile's jitter (sigma)")
    seed: int = Field(default=0, description="seeds the output projection and the jitter")


@dataclass(frozen=True)
class Profile:
    """One accelerator profile (see the profiles file's header)."""

    name: str
    description: str
    fixed_ms: float
    per_sample_ms: float
    streams: int
    devices: int
    transfer_gb_s: float
    first_shape_ms: float
    jitter: float

    @property
    def peak_samples_per_s(self) -> float:
        """What the devices complete at most, however many streams are busy."""
        return self.devices * 1e3 / self.per_sample_ms if self.per_sample_ms else math.inf


def profiles_file(card: ModelCard) -> Path:
    """The profiles file beside the model cards' directories."""
    return card.directory.parent / "simulated" / "profiles.toml"


def load_profile(path: Path, name: str) -> Profile:
    """The named profile from ``path``; one clear error naming the file and key."""
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8")).get("profiles", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise BackendError(f"{path}: cannot read the simulated profiles: {exc}") from None
    if name not in table:
        raise BackendError(f"{path}: no profile '{name}'",
                           hint=f"set backend.simulated.profile to one of: {', '.join(table)}")
    raw = table[name]
    try:
        profile = Profile(
            name=name, description=str(raw.get("description", "")),
            fixed_ms=float(raw["fixed_ms"]), per_sample_ms=float(raw["per_sample_ms"]),
            streams=int(raw["streams"]), devices=int(raw["devices"]),
            transfer_gb_s=float(raw.get("transfer_gb_s", 0.0)),
            first_shape_ms=float(raw.get("first_shape_ms", 0.0)),
            jitter=float(raw.get("jitter", 0.0)))
    except (KeyError, TypeError, ValueError) as exc:
        raise BackendError(f"{path}: [profiles.{name}]: missing or invalid {exc}") from None
    numbers = (profile.fixed_ms, profile.per_sample_ms, profile.transfer_gb_s,
               profile.first_shape_ms, profile.jitter)
    if profile.streams < 1 or profile.devices < 1 or min(numbers) < 0:
        raise BackendError(f"{path}: [profiles.{name}]: streams and devices must be >= 1 "
                           "and times >= 0")
    return profile


def bucket(n: int, max_batch: int) -> int:
    """The next power of two at or above ``n``, at most ``max_batch``."""
    return min(1 << (n - 1).bit_length(), max_batch)


class SimulatedBackend(BackendBase):
    """See the module docstring."""

    name = "simulated"
    Options = SimulatedOptions

    def __init__(self, options: BackendOptions | None = None) -> None:
        super().__init__(options)
        assert isinstance(self.options, SimulatedOptions)
        self.opts: SimulatedOptions = self.options
        self.profile: Profile | None = None
        self.devices = Devices(1, 1)
        #: Guards the warmed shapes and the jitter's generator.
        self._lock = threading.Lock()
        self._warm: set[int] = set()
        self._buffers: set[int] = set()
        self._local = threading.local()
        self._max_batch = 0
        self._jitter = 0.0
        self._random = random.Random(self.opts.seed)
        self._class_index = False
        self._task_outputs: list[TensorSpec] = []
        self._out_shape: tuple[int, ...] = ()
        self._weights: Any = None
        self._features: Any = None

    def load(self, card: ModelCard, max_batch_size: int) -> BackendInfo:
        profile = self.profile = load_profile(profiles_file(card), self.opts.profile)
        self.devices = Devices(profile.devices, profile.streams)
        self._max_batch = max_batch_size
        self._jitter = profile.jitter if self.opts.jitter is None else self.opts.jitter
        self._class_index = card.postprocess.kind == "class_index"
        self._task_outputs = card.outputs
        # A class_index card's output is the class (the model applied argmax): the
        # projection scores its ``classes`` and returns the argmax.
        classes = int(getattr(card.output, "classes", 0) or 0)
        self._out_shape = ((classes or 1000,) if self._class_index
                           else tuple(max(d, 1) for d in card.output.sample_shape))
        self._reshape(tuple(max(d, 1) for d in card.input.sample_shape))
        if self.opts.shapes == "all":
            self._warm = set(range(1, max_batch_size + 1))
            shapes = f"all: 1..{max_batch_size} warmed at load"
        elif self.opts.shapes == "buckets":
            self._warm = {bucket(n, max_batch_size) for n in range(1, max_batch_size + 1)}
            shapes = f"buckets: {','.join(map(str, sorted(self._warm)))} warmed at load (padded)"
        else:
            shapes = "none: each new batch size pays first_shape_ms under the run"
        return BackendInfo(
            name=self.name, version="1", device=f"simulated:{profile.name}",
            thread_safe=True, precision="simulated",
            weight_transformations="simulated: no model weights run",
            details={
                "profile": profile.name, "profile_file": str(profiles_file(card)),
                "fixed_ms": f"{profile.fixed_ms:g}", "per_sample_ms": f"{profile.per_sample_ms:g}",
                "streams": str(profile.streams), "devices": str(profile.devices),
                "transfer_gb_s": f"{profile.transfer_gb_s:g}",
                "first_shape_ms": f"{profile.first_shape_ms:g}",
                "jitter": f"{self._jitter:g}", "shapes": shapes,
                "peak_samples_per_s": f"{profile.peak_samples_per_s:.0f}",
            })

    def _reshape(self, sample_shape: tuple[int, ...]) -> None:
        """Fix which input values the projection reads, for inputs of ``sample_shape``."""
        rng = np.random.default_rng(self.opts.seed)
        size = int(np.prod(sample_shape))
        self._features = np.sort(rng.choice(size, min(_FEATURES, size), replace=False))
        width = int(np.prod(self._out_shape)) if self._out_shape else 1
        # Small integers, so that every product and sum in ``_outputs`` is exact.
        self._weights = rng.integers(
            -127, 128, (len(self._features), min(width, _FEATURES))).astype(np.float64)

    def accept_raw_input(self, raw: RawInput) -> bool:
        """Normalising is device work here: take the raw pixels, as a GPU backend would."""
        self._reshape(raw.shape)
        return True

    def input_buffer(self, max_batch: int, sample_shape: tuple[int, ...],
                     dtype: str) -> Batch | None:
        # Stands for page-locked memory: a batch gathered into it goes to the device as
        # it is; any other batch is first copied into a per-thread staging buffer.
        buffer = np.empty((max_batch, *sample_shape), dtype=dtype)
        self._buffers.add(buffer.ctypes.data)
        return buffer

    # -- predicting ------------------------------------------------------------------

    def predict(self, batch: Batch) -> Outputs:
        profile = self.profile
        if profile is None:
            raise BackendError("the simulated backend was not loaded")
        n = len(batch)
        if n > self._max_batch:
            raise BackendError(f"batch of {n} exceeds max_batch_size {self._max_batch}")
        if batch.ctypes.data not in self._buffers:
            batch = self._staged(batch)
        return self._occupy(profile, n, batch.nbytes, lambda: self._outputs(batch))

    serves_tasks = True

    def predict_named(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """A task card's call: the profile's time for the batch, then zeros of every
        ``[[outputs]]`` tensor's shape and dtype (a dynamic axis: 1 beyond the batch's)."""
        profile = self.profile
        if profile is None:
            raise BackendError("the simulated backend was not loaded")
        n = len(next(iter(inputs.values())))
        nbytes = sum(int(np.asarray(v).nbytes) for v in inputs.values())
        return self._occupy(profile, max(n, 1), nbytes, lambda: {
            spec.name: np.zeros([n, *(max(d, 1) for d in spec.shape[1:])], spec.dtype)
            for spec in self._task_outputs})

    def _occupy(self, profile: Profile, n: int, nbytes: int, outputs_of: Callable[[], T]) -> T:
        """The simulated devices busy with a batch of ``n`` (``nbytes`` of inputs) while
        ``outputs_of`` computes its outputs on the host."""
        size = bucket(n, self._max_batch) if self.opts.shapes == "buckets" else n
        transfer_s = (nbytes * size / n / (profile.transfer_gb_s * 1e9)
                      if profile.transfer_gb_s else 0.0)
        with self._lock:
            fixed_s = self._scaled(profile.fixed_ms) / 1e3
            cold = size not in self._warm
            if cold:
                self._warm.add(size)
                fixed_s += profile.first_shape_ms / 1e3
            compute_s = self._scaled(profile.per_sample_ms * size) / 1e3
        now = time.perf_counter()
        end = self.devices.place(now, transfer_s, fixed_s, compute_s, cold)
        outputs = outputs_of()  # host CPU, while the device works
        _sleep(end - time.perf_counter())  # the one wait: a stream synchronise
        self.devices.record(end - now, max(transfer_s, fixed_s) + compute_s,
                            time.perf_counter() - end)
        return outputs

    def begin_record(self) -> None:
        self.devices.clear()

    def worker_share(self) -> SharedDevices:
        """The devices, in shared memory, for Server worker processes: they place their
        calls on this node's devices, not each on a node of its own."""
        shared = self.devices = self.devices.share()
        return shared

    def attach_share(self, share: object) -> None:
        """In a worker process: use the LoadGen process's shared devices, and a jitter
        sequence of this process's own (the same seed in every worker would repeat it)."""
        if not isinstance(share, SharedDevices):
            raise BackendError(f"the simulated backend cannot use {type(share).__name__} "
                               "as its devices")
        self.devices = share
        self._random = random.Random(f"{self.opts.seed}:{os.getpid()}")

    def run_record(self) -> dict[str, Any]:
        """Where the calls' time went on the simulated devices: ``device_ms`` from each
        call to its end, ``idle_ms`` what the same call takes on an idle device,
        ``queued_ms`` their difference (waiting for a stream, the copy engine or the
        compute other calls held), and ``late_return_ms``, how long after its end the
        calling thread got to run again (the host, not the device); p50/p90/p99."""
        calls, cold_calls = self.devices.calls()
        calls = calls * 1e3
        if not len(calls):
            return {}

        def cents(values: Any) -> dict[str, float]:
            return {f"p{q}": round(float(np.percentile(values, q)), 3) for q in (50, 90, 99)}

        return {"calls": len(calls), "cold_calls": cold_calls,
                "device_ms": cents(calls[:, 0]), "idle_ms": cents(calls[:, 1]),
                "queued_ms": cents(calls[:, 0] - calls[:, 1]),
                "late_return_ms": cents(calls[:, 2])}

    def _staged(self, batch: Batch) -> Batch:
        """``batch`` copied into this thread's staging buffer (a pageable batch must be
        staged before a device can copy it)."""
        local = self._local
        buffer = getattr(local, "buffer", None)
        if buffer is None or buffer.shape[1:] != batch.shape[1:] or buffer.dtype != batch.dtype:
            buffer = local.buffer = np.empty((self._max_batch, *batch.shape[1:]), batch.dtype)
        staged: Batch = buffer[:len(batch)]
        np.copyto(staged, batch)
        return staged

    def _scaled(self, ms: float) -> float:
        if not self._jitter:
            return ms
        return ms * math.exp(self._random.gauss(0.0, self._jitter))

    def _outputs(self, batch: Batch) -> Outputs:
        n = len(batch)
        values = np.take(batch.reshape(n, -1), self._features, axis=1)
        if values.dtype.kind == "f":  # to integers: 1/256 steps
            values = np.rint(values * 256.0)
        # Integers times integers in float64 are exact, so the sum is the same in any
        # order: a sample's scores do not depend on the batch it came in (a BLAS or
        # pairwise sum's order does), or TEST01 would see accuracy and performance
        # responses differ. One broadcast, not a loop of 16: host time per batch is
        # what a Server run measures (66 us a batch of 6 looped, 16 us broadcast).
        scores = (values.astype(np.float64)[:, :, None] * self._weights).sum(axis=1)
        if self._class_index:
            result: Outputs = scores.argmax(axis=1).astype(np.int64)
            return result
        full = np.zeros((n, int(np.prod(self._out_shape))), dtype=np.float32)
        full[:, :scores.shape[1]] = scores
        shaped: Outputs = full.reshape(n, *self._out_shape)
        return shaped

    def close(self) -> None:
        self._buffers.clear()
        self.devices.close()


def _sleep(seconds: float) -> None:
    """Sleep ``seconds`` (nothing when not positive); releases the GIL."""
    if seconds > 0:
        time.sleep(seconds)
