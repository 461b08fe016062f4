"""The onnxruntime backend (CPU execution provider).

onnxruntime releases the GIL inside ``InferenceSession.run``, so several harness
worker threads can share one session. Its thread pools are sized from the options,
so they do not fight the harness's own threads for the cores.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from ..errors import BackendError
from .base import BackendBase, BackendInfo, BackendOptions

if TYPE_CHECKING:
    from ..models import ModelCard
    from ..types import Batch, Outputs


class OnnxRuntimeOptions(BackendOptions):
    """``[backend.onnxruntime]`` options."""

    intra_op_threads: int = Field(default=0, ge=0, description="0: onnxruntime decides")
    inter_op_threads: int = Field(default=0, ge=0, description="0: onnxruntime decides")
    graph_optimization_level: Literal["disable", "basic", "extended", "all"] = "all"


class OnnxRuntimeBackend(BackendBase):
    """Runs the card's ONNX file with onnxruntime on the CPU."""

    name = "onnxruntime"
    Options = OnnxRuntimeOptions
    requires = (("onnxruntime", "onnxruntime"),)

    def __init__(self, options: BackendOptions | None = None) -> None:
        super().__init__(options)
        self._session: Any = None
        self._input = ""
        self._output = ""

    def load(self, card: ModelCard, max_batch_size: int) -> BackendInfo:
        import onnxruntime as ort  # lazy: keeps `import suite` light

        opts = self.options
        assert isinstance(opts, OnnxRuntimeOptions)
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
        try:
            self._session = ort.InferenceSession(
                str(card.onnx_path), sess_options=session_options,
                providers=["CPUExecutionProvider"],
            )
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise BackendError(f"onnxruntime could not load {card.onnx_path}: {exc}") from exc
        self._input = card.input.name
        self._output = card.output.name
        return BackendInfo(
            name=self.name,
            version=ort.__version__,
            device="cpu",
            details={
                "providers": ",".join(self._session.get_providers()),
                "intra_op_threads": str(opts.intra_op_threads),
                "inter_op_threads": str(opts.inter_op_threads),
                "graph_optimization_level": opts.graph_optimization_level,
            },
        )

    def predict(self, batch: Batch) -> Outputs:
        outputs: Outputs = self._session.run([self._output], {self._input: batch})[0]
        return outputs

    def close(self) -> None:
        self._session = None
