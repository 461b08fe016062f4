"""``torch-llm``: the registry entry (``[backend.torch-llm]`` options) for LLM cards.

The classification seam (``load``/``predict``) does not apply to a text-generation card;
``open`` gives the generation backend (``generation.TorchGenerationBackend``) instead.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from suite.backends.base import BackendBase, BackendInfo, BackendOptions, nvidia_gpu_problem
from suite.backends.torch_support import TORCH_INSTALL
from suite.errors import BackendError
from suite.llm.card import LLMCard
from suite.llm.generation import TorchGenerationBackend


class TorchLLMOptions(BackendOptions):
    device: Literal["cpu", "cuda"] = "cpu"
    threads: int = Field(default=1, ge=0, description="torch intra-op threads (0: torch's)")
    batching: Literal["continuous", "static"] = Field(
        default="continuous", description="static: the baseline (a batch runs to its end "
        "before the next one starts)")


class TorchLLMBackend(BackendBase):
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

    def load(self, card: object, max_batch_size: int) -> BackendInfo:
        raise BackendError("backend 'torch-llm' runs text-generation cards only",
                           hint="use --backend torch-llm with an LLM benchmark (tinylm)")

    def make_completer(self) -> object | None:
        """What answers LoadGen for this backend's SUT: None for the harness's own
        ``TokenCompleter``; a test backend may return a subclass of it (this layer sits
        below the harness, so the type is checked where the harness takes it)."""
        return None

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
