"""The MLServer runtime behind ``suite serve``: a model card's ONNX file on onnxruntime.

MLServer imports this module by the ``implementation`` path in ``model-settings.json``
(``suite.serve.runtime.OnnxCardRuntime``), inside its own process; nothing in the
suite imports it. The model-settings file carries the card's tensors as the model's
metadata, and ``parameters.extra`` carries what the runtime needs:

* ``max_batch_size``: the largest batch a request may hold, reported in the model's
  metadata parameters so the remote backend sizes its requests from it;
* ``intra_op_threads``: onnxruntime's thread pool (0: onnxruntime decides).

A request whose batch is larger, or whose input name is not the model's, is refused
with ``InferenceError`` (HTTP 400, gRPC INVALID_ARGUMENT), never run partly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from mlserver import MLModel  # type: ignore[import-untyped,import-not-found,unused-ignore]
from mlserver.codecs import NumpyCodec  # type: ignore[import-untyped,import-not-found,unused-ignore]
from mlserver.errors import InferenceError  # type: ignore[import-untyped,import-not-found,unused-ignore]
from mlserver.types import (  # type: ignore[import-untyped,import-not-found,unused-ignore]
    InferenceRequest,
    InferenceResponse,
    MetadataModelResponse,
    Parameters,
)
from mlserver.utils import get_model_uri  # type: ignore[import-untyped,import-not-found,unused-ignore]


class OnnxCardRuntime(MLModel):  # type: ignore[misc,unused-ignore]
    """One ONNX model, one input and one output, run by onnxruntime on the CPU."""

    async def load(self) -> bool:
        import onnxruntime as ort  # lazy: only the server process needs it

        extra: dict[str, Any] = dict(self.settings.parameters.extra or {})
        self._max_batch = int(extra.get("max_batch_size", 0))
        options = ort.SessionOptions()
        options.intra_op_num_threads = int(extra.get("intra_op_threads", 1))
        options.inter_op_num_threads = 1
        path = await get_model_uri(self.settings)
        self._session = ort.InferenceSession(path, sess_options=options,
                                             providers=["CPUExecutionProvider"])
        # What the model file holds, read from it: the client records it, and packaging
        # states nothing about precision that no record says.
        from suite.backends.onnxruntime import weight_types

        self._precision = weight_types(Path(path))
        self._input = self.settings.inputs[0].name
        self._output = self.settings.outputs[0].name
        self._outputs = [self._output]
        return True

    async def metadata(self) -> MetadataModelResponse:
        metadata: MetadataModelResponse = await super().metadata()
        # KServe v2 metadata has no batch limit; Triton keeps it in its model config.
        # A parameter carries it so a client can size its requests.
        metadata.parameters = Parameters(
            max_batch_size=self._max_batch, precision=self._precision,
            weight_transformations="none: onnxruntime runs the model file as given")
        return metadata

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        if len(payload.inputs) != 1 or payload.inputs[0].name != self._input:
            names = [i.name for i in payload.inputs]
            raise InferenceError(f"model {self.name} takes one input {self._input!r}, "
                                 f"the request has {names}")
        array = NumpyCodec.decode_input(payload.inputs[0])
        if self._max_batch and array.shape[0] > self._max_batch:
            raise InferenceError(f"model {self.name}: batch of {array.shape[0]} exceeds "
                                 f"max_batch_size {self._max_batch}")
        try:
            result = self._session.run(self._outputs, {self._input: array})[0]
        except Exception as exc:  # onnxruntime's errors are untyped; the client gets them
            raise InferenceError(f"model {self.name}: onnxruntime failed: {exc}") from exc
        output = NumpyCodec.encode_output(self._output, np.ascontiguousarray(result))
        return InferenceResponse(model_name=self.name, model_version=self.version,
                                 id=payload.id, outputs=[output])
