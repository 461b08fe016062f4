"""A Triton model repository and a KServe ``InferenceService`` manifest for a model card.

Neither is run here (no Triton container, no cluster); both serve the card's ONNX file
over the Open Inference Protocol, so ``--backend remote`` runs against them unchanged:

* Triton (``write_triton_repo``): ``<dir>/<model>/config.pbtxt`` and
  ``<dir>/<model>/1/model.onnx``; ``tritonserver --model-repository <dir>`` serves REST
  on 8000 and gRPC on 8001. Triton reports ``binary_tensor_data`` and its model config
  holds ``max_batch_size``, so the backend picks binary REST and sizes its requests.
* KServe (``kserve_manifest``): an ``InferenceService`` with ``protocolVersion: v2``
  on the Triton runtime, its ``storageUri`` pointing at such a repository.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from suite.backends.remote_check import V2_DATATYPES

if TYPE_CHECKING:
    from suite.models import ModelCard


def _dims(shape: list[int]) -> str:
    return ", ".join(str(d) for d in shape[1:])  # Triton's dims exclude the batch axis


def triton_config(card: ModelCard, max_batch_size: int, instances: int = 1) -> str:
    """``config.pbtxt`` for the card's ONNX file on Triton's onnxruntime backend."""
    return (
        f'name: "{card.name}"\n'
        'platform: "onnxruntime_onnx"\n'
        f"max_batch_size: {max_batch_size}\n"
        "input [\n"
        f'  {{ name: "{card.input.name}", data_type: TYPE_{V2_DATATYPES[card.input.dtype]}, '
        f"dims: [ {_dims(card.input.shape)} ] }}\n"
        "]\n"
        "output [\n"
        f'  {{ name: "{card.output.name}", data_type: '
        f"TYPE_{V2_DATATYPES[card.output.dtype]}, dims: [ {_dims(card.output.shape)} ] }}\n"
        "]\n"
        "dynamic_batching { max_queue_delay_microseconds: 500 }\n"
        f"instance_group [ {{ kind: KIND_CPU, count: {instances} }} ]\n"
    )


def write_triton_repo(card: ModelCard, directory: Path, max_batch_size: int) -> list[Path]:
    """Write the repository; returns the files written."""
    model_dir = directory / card.name
    (model_dir / "1").mkdir(parents=True, exist_ok=True)
    config = model_dir / "config.pbtxt"
    config.write_text(triton_config(card, max_batch_size))
    onnx = model_dir / "1" / "model.onnx"
    shutil.copyfile(card.onnx_path, onnx)
    return [config, onnx]


def kserve_manifest(card: ModelCard, storage_uri: str, replicas: int,
                    name: str = "") -> str:
    """An ``InferenceService`` (serving.kserve.io/v1beta1) for the card on Triton."""
    service = name or f"{card.name}-v2"
    return (
        "apiVersion: serving.kserve.io/v1beta1\n"
        "kind: InferenceService\n"
        "metadata:\n"
        f"  name: {service}\n"
        "spec:\n"
        "  predictor:\n"
        f"    minReplicas: {replicas}\n"
        f"    maxReplicas: {replicas}\n"
        "    model:\n"
        "      modelFormat:\n"
        "        name: onnx\n"
        "      protocolVersion: v2\n"
        "      runtime: kserve-tritonserver\n"
        f"      storageUri: {storage_uri}\n"
        "      ports:\n"
        "        - name: h2c        # gRPC; the REST port (8080) stays open too\n"
        "          protocol: TCP\n"
        "          containerPort: 9000\n"
        "      resources:\n"
        "        requests: {cpu: \"1\", memory: 1Gi}\n"
        "        limits: {cpu: \"1\", memory: 1Gi}\n"
    )
