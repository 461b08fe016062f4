"""``[backend.torch]``: the torch backend's options and the combinations it refuses.

Kept apart from ``pytorch.py`` (the backend) so that validating a config imports
nothing but pydantic.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from suite.backends.base import BackendOptions
from suite.backends.torch_support import ShapePolicy


class TorchOptions(BackendOptions):
    """``[backend.torch]`` options."""

    device: str = Field(default="cpu", pattern=r"^(cpu|cuda(:\d+)?)$",
                        description="'cpu', 'cuda' or 'cuda:N'")
    dtype: Literal["fp32", "fp16", "bf16"] = Field(
        default="fp32", description="weights and compute precision; inputs are cast to it "
        "and floating outputs returned as float32 (integer outputs, such as class indices, "
        "keep their type)")
    compile: bool = Field(default=False, description="wrap the model in torch.compile "
                          "(compiled during load, before LoadGen starts)")
    compile_mode: Literal["default", "reduce-overhead", "max-autotune",
                          "max-autotune-no-cudagraphs"] = Field(
        default="default", description="torch.compile mode; 'reduce-overhead' uses CUDA graphs")
    cuda_graphs: bool = Field(default=False, description="capture one CUDA graph per batch "
                              "size in cuda_graph_batch_sizes; a batch is padded to the next one")
    cuda_graph_batch_sizes: tuple[int, ...] = Field(
        default=(), description="batch sizes to capture; empty: powers of two up to, and "
        "including, sut.max_batch_size")
    channels_last: bool = Field(default=False, description="NHWC memory format for 4-D "
                                "inputs and the model's weights")
    pin_memory: bool = Field(default=True, description="CUDA: stage inputs in page-locked "
                             "host memory so the host-to-device copy is asynchronous")
    copy_stream: bool = Field(default=True, description="CUDA: copy inputs on a separate "
                              "stream per worker thread, overlapping compute")
    streams: int = Field(default=4, ge=1, le=64, description="CUDA: worker streams made "
                         "and warmed at load (every warmed size on each); each worker thread "
                         "takes one, a thread beyond these makes its own, cold. Keep it >= "
                         "sut.workers")
    num_threads: int = Field(default=1, ge=0, description="torch.set_num_threads for CPU ops; "
                             "0: torch decides. Keep workers x num_threads <= cores")
    shapes: ShapePolicy = Field(
        default="auto", description="batch sizes warmed at load: 'all' runs every size "
        "1..sut.max_batch_size; 'buckets' pads each batch to the next power of two (or "
        "cuda_graph_batch_sizes) and warms those; 'auto': all on CUDA (buckets with "
        "cuda_graphs), on a CPU the sizes 1, 2, 3 and the maximum")
    cudnn_benchmark: bool = Field(default=False, description="CUDA: torch.backends.cudnn."
                                  "benchmark; it times every kernel at each new shape "
                                  "(68-160 ms a shape measured on an H100)")
    tf32: bool = Field(default=False, description="CUDA fp32: allow TF32 in convolutions "
                       "and matmuls (faster, 10-bit mantissa); recorded in the precision")

    @model_validator(mode="after")
    def _consistent(self) -> TorchOptions:
        if self.cuda_graphs and not self.device.startswith("cuda"):
            raise ValueError("cuda_graphs needs device 'cuda' or 'cuda:N'")
        if self.cuda_graphs and self.compile:
            raise ValueError("cuda_graphs and compile exclude each other; use "
                             "compile_mode = 'reduce-overhead' for CUDA graphs under torch.compile")
        if any(size < 1 for size in self.cuda_graph_batch_sizes):
            raise ValueError("cuda_graph_batch_sizes must be positive")
        if self.cuda_graphs and self.shapes == "all":
            raise ValueError("cuda_graphs pads batches to the captured sizes; use shapes "
                             "'buckets' or 'auto' with it")
        if self.tf32 and (self.dtype != "fp32" or not self.device.startswith("cuda")):
            raise ValueError("tf32 applies to dtype 'fp32' on a CUDA device only")
        return self
