"""The remote backend's model check: what a server says about a model, against the card.

The Open Inference Protocol's model metadata names the model, its versions, and each
input and output tensor (name, datatype, shape with ``-1`` for a variable axis).
``check_model`` compares them with the model card before LoadGen starts; a mismatch
is one ``BackendError`` naming the endpoint, the remote side and the card's side.

``max_batch_from`` reads the largest request the model takes: Triton's model config
(``max_batch_size``), a ``max_batch_size`` metadata parameter (MLServer models served
by ``suite serve`` report one over REST), else ``0``: the server does not say.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from suite.errors import BackendError

if TYPE_CHECKING:
    from suite.models import ModelCard, TensorSpec

#: numpy dtype names to Open Inference Protocol datatypes.
V2_DATATYPES = {"float32": "FP32", "float16": "FP16", "float64": "FP64", "int64": "INT64",
                "int32": "INT32", "int8": "INT8", "uint8": "UINT8", "bool": "BOOL"}

_HINT = ("serve the card's model under its name (suite serve), or point "
         "backend.remote.endpoints / backend.remote.model_name at the right one")


@dataclass(frozen=True)
class RemoteTensor:
    name: str
    datatype: str
    shape: tuple[int, ...]

    def show(self) -> str:
        return f"{self.name!r} {self.datatype} {list(self.shape)}"


@dataclass(frozen=True)
class RemoteModel:
    """A model's metadata as the server reported it (REST JSON or gRPC as_json)."""

    name: str
    versions: tuple[str, ...]
    platform: str
    inputs: tuple[RemoteTensor, ...]
    outputs: tuple[RemoteTensor, ...]
    parameters: dict[str, Any]

    @classmethod
    def parse(cls, metadata: dict[str, Any]) -> RemoteModel:
        def tensors(key: str) -> tuple[RemoteTensor, ...]:
            return tuple(RemoteTensor(str(t.get("name", "")), str(t.get("datatype", "")),
                                      tuple(int(d) for d in t.get("shape", [])))
                         for t in metadata.get(key, []))

        return cls(str(metadata.get("name", "")),
                   tuple(str(v) for v in metadata.get("versions", []) or []),
                   str(metadata.get("platform", "")), tensors("inputs"), tensors("outputs"),
                   dict(metadata.get("parameters", {}) or {}))


def _card_tensor(spec: TensorSpec) -> RemoteTensor:
    return RemoteTensor(spec.name, V2_DATATYPES.get(spec.dtype, spec.dtype.upper()),
                        tuple(spec.shape))


def shapes_agree(remote: Sequence[int], card: Sequence[int]) -> bool:
    """Same rank, and each axis equal or variable (``-1``) on either side.

    A Triton model with batching reports the batch axis as ``-1`` like the card; one
    without reports no batch axis, so a remote shape one shorter matches the card's
    per-sample shape.
    """
    if len(remote) == len(card) - 1:
        card = card[1:]
    return len(remote) == len(card) and all(
        r == c or r < 0 or c < 0 for r, c in zip(remote, card, strict=True))


def _check_tensor(kind: str, want: RemoteTensor, have: tuple[RemoteTensor, ...],
                  where: str, card: ModelCard) -> None:
    match = next((t for t in have if t.name == want.name), None)
    if match is None or match.datatype != want.datatype or not shapes_agree(match.shape,
                                                                            want.shape):
        remote = ", ".join(t.show() for t in have) or "none"
        raise BackendError(
            f"{where}: the remote model's {kind}s do not match the model card "
            f"{card.card_path}: remote {remote}; card {want.show()}", hint=_HINT)


def check_model(model: RemoteModel, card: ModelCard, name: str, version: str,
                where: str) -> None:
    """Refuse a remote model whose name, version, input or output differ from the card."""
    if model.name != name:
        raise BackendError(f"{where}: the remote model is named {model.name!r}, the run "
                           f"asks for {name!r} (model card {card.card_path})", hint=_HINT)
    if version and model.versions and version not in model.versions:
        raise BackendError(f"{where}: model {name!r} has versions {list(model.versions)}, "
                           f"backend.remote.model_version asks for {version!r}", hint=_HINT)
    _check_tensor("input", _card_tensor(card.input), model.inputs, where, card)
    _check_tensor("output", _card_tensor(card.output), model.outputs, where, card)
    if len(model.inputs) != 1:
        raise BackendError(f"{where}: the remote model takes {len(model.inputs)} inputs "
                           f"({', '.join(t.show() for t in model.inputs)}); the card has one",
                           hint=_HINT)


def max_batch_from(config: dict[str, Any] | None, model: RemoteModel) -> tuple[int, str]:
    """The model's largest request and where that came from (``0``: not said)."""
    if config:
        inner = config.get("config", config)  # gRPC's as_json wraps it in "config"
        if "max_batch_size" in inner:
            return int(inner["max_batch_size"]), "model config"
    if "max_batch_size" in model.parameters:
        return int(model.parameters["max_batch_size"]), "model metadata parameters"
    return 0, "not reported by the server"


def grpc_metadata_parameters(serialized: bytes) -> dict[str, Any]:
    """The ``parameters`` map (field 6) of a gRPC ``ModelMetadataResponse``.

    The Open Inference Protocol's proto has it (MLServer fills it); Triton's, which
    tritonclient compiles in, does not, so tritonclient drops it. This parses the raw
    response with a private descriptor pool holding only that field (the default pool
    would clash with tritonclient's ``inference`` package).
    """
    # Imported by name: protobuf ships no type stubs here, and only gRPC needs it.
    descriptor_pb2 = importlib.import_module("google.protobuf.descriptor_pb2")
    descriptor_pool = importlib.import_module("google.protobuf.descriptor_pool")
    message_factory = importlib.import_module("google.protobuf.message_factory")

    proto = descriptor_pb2.FileDescriptorProto(name="suite_oip_metadata.proto",
                                               package="suite_oip", syntax="proto3")
    param = proto.message_type.add(name="InferParameter")
    kinds = (("bool_param", 1, descriptor_pb2.FieldDescriptorProto.TYPE_BOOL),
             ("int64_param", 2, descriptor_pb2.FieldDescriptorProto.TYPE_INT64),
             ("string_param", 3, descriptor_pb2.FieldDescriptorProto.TYPE_STRING))
    param.oneof_decl.add(name="parameter_choice")
    for name, number, kind in kinds:
        param.field.add(name=name, number=number, type=kind, oneof_index=0,
                        label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    response = proto.message_type.add(name="Metadata")
    entry = response.nested_type.add(name="ParametersEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type_name=".suite_oip.InferParameter",
                    type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    response.field.add(name="parameters", number=6,
                       type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
                       type_name=".suite_oip.Metadata.ParametersEntry",
                       label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("suite_oip.Metadata"))
    message = cls.FromString(serialized)
    parameters: dict[str, Any] = {
        key: getattr(value, value.WhichOneof("parameter_choice") or "string_param")
        for key, value in message.parameters.items()}
    return parameters
