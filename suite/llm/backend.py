"""``torch-llm``: generation in process with torch (``[backend.torch-llm]`` options).

An ``InProcessGenerator`` (``suite.llm.contract``): ``open`` gives the generation backend
(``generation.TorchGenerationBackend``) that the harness's continuous batcher steps.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from suite.backends.base import BackendInfo, BackendOptions, nvidia_gpu_problem
from suite.backends.torch_support import TORCH_INSTALL
from suite.llm.card import LLMCard
from suite.llm.contract import InProcessGenerator
from suite.llm.generation import TorchGenerationBackend


class TorchLLMOptions(BackendOptions):
    device: Literal["cpu", "cuda"] = "cpu"
    threads: int = Field(default=1, ge=0, description="torch intra-op threads (0: torch's)")
    batching: Literal["continuous", "static"] = Field(
        default="continuous", description="static: the baseline (a batch runs to its end "
        "before the next one starts)")


class TorchLLMBackend(InProcessGenerator):
    """Torch generation with a per-sequence KV cache (CPU, or CUDA with ``device``)."""

    name = "torch-llm"
    Options = TorchLLMOptions
    requires: ClassVar[tuple[tuple[str, str], ...]] = (("torch", "torch"),)
    extra = "torch"
    install = TORCH_INSTALL

    @classmethod
    def options_problem(cls, options: BackendOptions) -> str | None:
        if isinstance(options, TorchLLMOptions) and options.device == "cuda":
            return nvidia_gpu_problem()
        return None

    @property
    def static_batching(self) -> bool:
        assert isinstance(self.options, TorchLLMOptions)
        return self.options.batching == "static"

    def open(self, card: LLMCard, max_sequences: int) -> tuple[TorchGenerationBackend,
                                                               BackendInfo]:
        """The generation backend for ``card``, and what it reports about itself."""
        import torch

        options = self.options
        assert isinstance(options, TorchLLMOptions)
        gen = TorchGenerationBackend(card, max_sequences, options.device, options.threads)
        info = BackendInfo(name=self.name, version=torch.__version__, device=options.device,
                           thread_safe=False, precision="fp32", weight_transformations="none",
                           details={"max_sequences": str(max_sequences),
                                    "threads": str(torch.get_num_threads())})
        return gen, info
