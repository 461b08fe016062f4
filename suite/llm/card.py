"""LLM model cards: ``reference_models/<name>/model.toml`` with ``task = "text-generation"``.

An LLM card names the torch module and state dict (with its sha256), the tokenizer's
vocabulary, the generation rule (greedy, stop on EOS or ``max_new_tokens``), the dataset
file and the accuracy reference. The harness refuses weights whose sha256 differs.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from suite.errors import ConfigError, ModelError
from suite.models import sha256_file
from suite.paths import Paths

TASK = "text-generation"


class _Card(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class LLMModelFiles(_Card):
    source: Literal["bundled"] = "bundled"
    torch_module: str = Field(pattern=r"^[\w./-]+\.py:\w+$")
    config_class: str = "TinyLMConfig"
    torch_state_dict: str
    torch_state_dict_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class Architecture(_Card):
    vocab_size: int = Field(gt=0)
    block_size: int = Field(gt=0)
    n_layer: int = Field(gt=0)
    n_head: int = Field(gt=0)
    d_model: int = Field(gt=0)


class TokenizerSpec(_Card):
    kind: Literal["char"]
    vocab_file: str
    eos_id: int = Field(ge=0)


class GenerationSpec(_Card):
    decoding: Literal["greedy"]
    max_new_tokens: int = Field(gt=1)
    #: LoadGen rejects n_tokens <= 1 (TPOT divides by n_tokens - 1): EOS is masked before.
    min_new_tokens: int = Field(ge=2)
    response_dtype: Literal["int32"] = "int32"


class LLMDatasetSpec(_Card):
    name: str
    file: str
    samples: int = Field(gt=0)


class LLMAccuracySpec(_Card):
    metric: Literal["rougeL"]
    reference_fp32: float
    #: Mean generated tokens per sample of the fp32 reference, and the allowed relative
    #: deviation (the rules' tokens-per-sample bound, +-10 % as for llama2-70b).
    tokens_per_sample: float = Field(gt=0)
    tokens_per_sample_tolerance: float = Field(default=0.1, gt=0, lt=1)


class LLMCard(_Card):
    """A parsed LLM card; ``directory`` is where its files live."""

    schema_version: int
    name: str
    title: str = ""
    task: Literal["text-generation"]
    model: LLMModelFiles
    architecture: Architecture
    tokenizer: TokenizerSpec
    generation: GenerationSpec
    dataset: LLMDatasetSpec
    accuracy: LLMAccuracySpec
    directory: Path = Path()

    @property
    def card_path(self) -> Path:
        return self.directory / "model.toml"

    @property
    def state_dict_path(self) -> Path:
        return self.directory / self.model.torch_state_dict


#: A benchmark named ``<card>-interactive`` runs the card ``<card>`` (Interactive is the
#: Server scenario with tighter bounds; the model, dataset and accuracy are the same).
INTERACTIVE_SUFFIX = "-interactive"


def card_name(benchmark: str) -> str:
    return benchmark.removesuffix(INTERACTIVE_SUFFIX)


def _card_path(paths: Paths, name: str) -> Path:
    return paths.reference_models / card_name(name) / "model.toml"


def is_llm_benchmark(paths: Paths, name: str) -> bool:
    """True when the benchmark's card declares ``task = "text-generation"``."""
    path = _card_path(paths, name)
    try:
        return bool(tomllib.loads(path.read_text(encoding="utf-8")).get("task") == TASK)
    except (OSError, tomllib.TOMLDecodeError):
        return False  # the ordinary card loader reports a missing or broken card


def load_llm_card(paths: Paths, name: str) -> LLMCard:
    """Parse an LLM card; a bad one fails naming the file and key."""
    path = _card_path(paths, name)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        return LLMCard.model_validate({**data, "directory": path.parent})
    except FileNotFoundError:
        raise ConfigError(f"no model card for benchmark '{name}': {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(part) for part in first["loc"])
        raise ConfigError(f"{path}: {key}: {first['msg']}",
                          hint="fix the card; see reference_models/tinylm/model.toml") from None


def verify_weights(card: LLMCard) -> str:
    """The state dict's sha256, or ``ModelError`` if it is missing or not the card's."""
    path = card.state_dict_path
    if not path.is_file():
        raise ModelError(f"model weights {path} are missing (named by {card.card_path})",
                         hint="restore them from git; CI never retrains the model")
    actual = sha256_file(path)
    if actual != card.model.torch_state_dict_sha256:
        raise ModelError(
            f"model weights {path} do not match {card.card_path}: sha256 {actual} != "
            f"expected {card.model.torch_state_dict_sha256}",
            hint="restore the committed file, or after retraining update the card")
    return actual
