"""Pure helpers of the torch backend: which batch sizes it warms, the bucket a batch is
padded to, the device-side normalisation of raw pixels, and the precision flags it
records. Kept apart from ``pytorch.py`` so each is testable on a CPU without loading
a model.

Why shapes matter on a GPU: the first call at a new batch size selects kernels (and
with ``cudnn.benchmark`` times every candidate), measured on an H100 at 3.3-27 ms
with benchmark mode off and 68-160 ms with it on. A Server run meets up to
``max_batch_size`` distinct sizes, so each must have been seen before LoadGen starts
(policy ``all``), or every batch must be padded to one of a few sizes that were
(policy ``buckets``, what CUDA graphs do).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Literal

ShapePolicy = Literal["auto", "all", "buckets"]


@dataclass(frozen=True)
class ShapePlan:
    """What ``load`` warms and how ``predict`` pads.

    ``policy`` is the one that ran ("all", "buckets" or "small": CPU's few shape
    classes); ``buckets`` is empty unless batches are padded.
    """

    policy: str
    warm: tuple[int, ...]
    buckets: tuple[int, ...] = ()

    def describe(self) -> str:
        """The ``details["shapes"]`` text, e.g. ``all 1..256`` or ``buckets 1,2,4 (padded)``."""
        if self.policy == "all":
            return f"all 1..{self.warm[-1]}"
        sizes = ",".join(map(str, self.warm))
        if self.policy == "buckets":
            return f"buckets {sizes} (padded)"
        return f"{self.policy} {sizes}"

    def bucket(self, n: int) -> int:
        """The size a batch of ``n`` runs at: the smallest bucket >= n, or n unpadded."""
        return min((size for size in self.buckets if size >= n), default=n)


def power_of_two_buckets(max_batch: int) -> tuple[int, ...]:
    """1, 2, 4, ... up to ``max_batch``, and ``max_batch`` itself."""
    sizes = {2 ** k for k in range(max_batch.bit_length()) if 2 ** k <= max_batch}
    return tuple(sorted(sizes | {max_batch}))


def plan_shapes(policy: ShapePolicy, *, cuda: bool, max_batch: int, cuda_graphs: bool = False,
                graph_sizes: tuple[int, ...] = ()) -> ShapePlan:
    """The sizes to warm for ``policy``; ``auto`` is ``all`` on CUDA (``buckets`` with
    CUDA graphs) and on a CPU the few shape classes a CPU kernel choice depends on.

    Example::

        plan_shapes("buckets", cuda=True, max_batch=6).warm  # (1, 2, 4, 6)
    """
    if policy == "auto":
        if not cuda:
            return ShapePlan("small", tuple(sorted({1, min(2, max_batch), min(3, max_batch),
                                                    max_batch})))
        policy = "buckets" if cuda_graphs else "all"
    if policy == "all":
        return ShapePlan("all", tuple(range(1, max_batch + 1)))
    buckets = tuple(sorted(set(graph_sizes))) or power_of_two_buckets(max_batch)
    if buckets[-1] < max_batch:
        # A batch larger than every bucket would run unpadded at a size never warmed.
        buckets = (*buckets, max_batch)
    return ShapePlan("buckets", buckets, buckets)


def pad_rows(torch: Any, x: Any, rows: int) -> Any:
    """``x`` with zero rows appended up to ``rows`` along the first axis (no-op if there)."""
    missing = rows - x.shape[0]
    if missing <= 0:
        return x
    return torch.cat((x, x.new_zeros((missing, *x.shape[1:]))))


def normalize_on_device(torch: Any, pixels: Any, means: Any, layout: str, dtype: Any,
                        channels_last: bool) -> Any:
    """uint8 HWC pixels (N, H, W, C), already on the device -> the model's input.

    The same numbers as ``suite.datasets.preprocess.normalize`` followed by the cast to
    the model's dtype: the subtraction is done in float32 (exact for uint8 minus a
    float32 mean), then cast. ``means`` is a float32 tensor of C values on the device.
    NCHW is a permute of the NHWC data, which is channels-last memory already; without
    channels_last it is made contiguous so compiled forwards see the strides they were
    warmed with.
    """
    x = (pixels.to(torch.float32) - means).to(dtype)
    if layout == "NCHW":
        x = x.permute(0, 3, 1, 2)
        return (x.contiguous(memory_format=torch.channels_last) if channels_last
                else x.contiguous())
    return x.contiguous()


def precision_flags(torch: Any) -> str:
    """The effective TF32 flags, as ``details["tf32"]`` records them."""
    return (f"cudnn.allow_tf32={torch.backends.cudnn.allow_tf32}, "
            f"cuda.matmul.allow_tf32={torch.backends.cuda.matmul.allow_tf32}, "
            f"float32_matmul_precision={torch.get_float32_matmul_precision()}")


def set_cuda_flags(torch: Any, cudnn_benchmark: bool, dtype: str, tf32: bool) -> None:
    """cuDNN benchmark mode and TF32 from the options (process-wide torch flags)."""
    torch.backends.cudnn.benchmark = cudnn_benchmark
    if dtype == "fp32":
        # cuDNN convolutions default to TF32 on Ampere and later: fp32 means fp32
        # unless the options say tf32, and the effective flags are recorded.
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32


def precision_record(dtype: str, tf32: bool) -> tuple[str, str]:
    """(``BackendInfo.precision``, ``weight_transformations``) for what was loaded."""
    if dtype == "fp32":
        return ("fp32 (tf32 matmul/conv)" if tf32 else "fp32"), "none"
    return dtype, f"cast to {dtype}"


#: How to get torch: the CPU build first (an open range pulls a multi-GB CUDA build), then
#: the extra, as the README says; for an installed wheel and for a checkout.
TORCH_INSTALL = ("pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu "
                 "(the CPU build; on a GPU machine the CUDA build from "
                 "https://pytorch.org/get-started/locally/), then pip install "
                 "'infersuite[torch]' (in a checkout: pip install -e '.[torch]')")


def host_outputs(tensor: Any) -> Any:
    """Floating outputs as float32 (fp16/bf16 have no numpy twin or lose nothing widened);
    integer outputs, such as an argmax head's class indices, keep their type, which the
    card's output contract checks."""
    return tensor.float() if tensor.is_floating_point() else tensor


class StreamSlots:
    """The CUDA streams worker threads compute on, made during ``load`` so they can be warmed.

    PyTorch's caching allocator keeps freed device memory per stream, and each thread's
    page-locked staging buffer is allocated at its first call. A stream made at a worker
    thread's first call therefore meets ``cudaMalloc`` (which can synchronise the device)
    for every new batch size under LoadGen, while the warm-up on the loading thread's own
    stream warmed nothing the workers use: on an H100, ResNet-50 fp16 Server was INVALID
    even at 448 QPS (p99 116-166 ms, a stall at the start) while digits held 20k QPS.
    ``count`` slots (a compute stream, an optional copy stream, the staging buffer) are
    made here and warmed by the backend; each thread takes one at its first call, and a
    thread beyond ``count`` makes its own, cold, rather than share one.
    """

    def __init__(self, torch: Any, device: Any, count: int, copy_stream: bool) -> None:
        self._torch, self._device, self._copy = torch, device, copy_stream
        self.warmed: list[Any] = [self.make() for _ in range(count)]
        self._free = list(reversed(self.warmed))
        self._lock = threading.Lock()

    def make(self) -> Any:
        """A new slot: its own compute stream, a copy stream if asked, no buffer yet."""
        stream = self._torch.cuda.Stream
        return SimpleNamespace(compute=stream(self._device),
                               copy=stream(self._device) if self._copy else None, pinned=None)

    def take(self) -> Any:
        """A warmed slot not yet taken, else a new one (a thread keeps what it takes)."""
        with self._lock:
            if self._free:
                return self._free.pop()
        return self.make()
