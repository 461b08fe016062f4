"""Model cards (``reference_models/<name>/model.toml``) and model-file verification.

A card names the model file, its sha256, the input and output tensors, how to turn
outputs into the response LoadGen logs, and the dataset it is scored on. The
harness refuses to run a model file whose sha256 differs from the card.
"""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import ConfigError, ModelError
from .paths import Paths


class _Card(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class ModelFiles(_Card):
    onnx_file: str
    onnx_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    opset: int | None = None
    torch_module: str | None = None
    torch_state_dict: str | None = None
    torch_state_dict_sha256: str | None = None
    weights_sha256: str | None = None


class TensorSpec(_Card):
    name: str
    shape: list[int]
    dtype: str
    layout: str | None = None

    @property
    def sample_shape(self) -> tuple[int, ...]:
        """The shape of one sample: the tensor shape without the batch axis."""
        return tuple(self.shape[1:])


class PostprocessSpec(_Card):
    kind: Literal["argmax"]
    response_dtype: Literal["int32", "int64", "float32"] = "int32"
    label_offset: int = 0


class DatasetSpec(_Card):
    name: str


class AccuracySpec(_Card):
    metric: Literal["top1"]
    unit: str = "percent"
    reference_fp32: float


class ModelCard(_Card):
    """A parsed model card; ``directory`` is where its files live."""

    schema_version: int
    name: str
    title: str = ""
    task: str = ""
    model: ModelFiles
    input: TensorSpec
    output: TensorSpec
    postprocess: PostprocessSpec
    dataset: DatasetSpec
    accuracy: AccuracySpec
    directory: Path = Path()

    @property
    def card_path(self) -> Path:
        return self.directory / "model.toml"

    @property
    def onnx_path(self) -> Path:
        return self.directory / self.model.onnx_file


def load_card(paths: Paths, name: str) -> ModelCard:
    """Parse ``reference_models/<name>/model.toml``.

    Example::

        card = load_card(find_paths(), "digits")
        card.input.sample_shape  # (1, 8, 8)
    """
    path = paths.reference_models / name / "model.toml"
    if not path.is_file():
        raise ConfigError(
            f"no model card for benchmark '{name}': {path} does not exist",
            hint="every benchmark needs reference_models/<name>/model.toml",
        )
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        return ModelCard.model_validate({**data, "directory": path.parent})
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(part) for part in first["loc"])
        raise ConfigError(f"{path}: {key}: {first['msg']}") from None


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify_model_file(card: ModelCard, path: Path | None = None) -> str:
    """Check the model file against the card; return its sha256 or raise ``ModelError``."""
    path = path or card.onnx_path
    if not path.is_file():
        raise ModelError(
            f"model file {path} is missing (named by {card.card_path})",
            hint="restore it from git (git checkout -- <file>) or retrain with the "
            "benchmark's train.py and update the card",
        )
    try:
        actual = sha256_file(path)
    except OSError as exc:
        raise ModelError(f"model file {path} cannot be read: {exc}") from None
    if actual != card.model.onnx_sha256:
        raise ModelError(
            f"model file {path} does not match its model card {card.card_path}: "
            f"sha256 {actual} != expected {card.model.onnx_sha256}",
            hint="the file was modified or replaced; restore the original "
            "(git checkout -- <file>), or if you retrained on purpose, update onnx_sha256 "
            "in the card (such a model is not the reference model)",
        )
    return actual
