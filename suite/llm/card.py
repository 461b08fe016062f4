"""LLM model cards: ``reference_models/<name>/model.toml`` with ``task = "text-generation"``.

An LLM card names the torch module and state dict (with its sha256), the tokenizer's
vocabulary, the generation rule (greedy, stop on EOS or ``max_new_tokens``), the dataset
file and the accuracy reference. The harness refuses weights whose sha256 differs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from suite.config.toml import decode_utf8, parse_toml
from suite.errors import ConfigError, ModelError
from suite.models import INTERACTIVE_SUFFIX, Kind, card_kind, card_name, sha256_file
from suite.paths import Paths

# ``card_name`` and the Interactive suffix are the core's (``suite.models``), re-exported.
__all__ = ["INTERACTIVE_SUFFIX", "LLMCard", "card_name", "load_llm_card", "verify_weights"]


class _Card(BaseModel):
    # validators built at first use: a run imports models it never validates
    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)


class LLMModelFiles(_Card):
    """``bundled``: our torch module and weights (tinylm). ``user``: the round's model,
    served by the user's engine; the harness holds only its tokenizer (``--model-path``)."""

    source: Literal["bundled", "user"] = "bundled"
    torch_module: str = Field(default="", pattern=r"^$|^[\w./-]+\.py:\w+$")
    config_class: str = "TinyLMConfig"
    torch_state_dict: str = ""
    torch_state_dict_sha256: str = Field(default="", pattern=r"^$|^[0-9a-f]{64}$")
    #: The model's Hugging Face id, as the reference names it (informative).
    hf_id: str = ""

    @model_validator(mode="after")
    def _bundled_files(self) -> LLMModelFiles:
        if self.source == "bundled" and not (self.torch_module and self.torch_state_dict
                                             and self.torch_state_dict_sha256):
            raise ValueError("a bundled model names torch_module, torch_state_dict and "
                             "torch_state_dict_sha256")
        return self


class Architecture(_Card):
    vocab_size: int = Field(gt=0)
    block_size: int = Field(gt=0)
    n_layer: int = Field(gt=0)
    n_head: int = Field(gt=0)
    d_model: int = Field(gt=0)


class TokenizerSpec(_Card):
    """``char``: ``vocab_file`` in the card's directory. ``hf``: a Hugging Face
    ``tokenizer.json`` in the model directory the user gives (``--model-path``), read with
    the ``tokenizers`` library; nothing is downloaded."""

    kind: Literal["char", "hf"]
    vocab_file: str = ""
    file: str = "tokenizer.json"
    eos_id: int = Field(ge=0)


class GenerationSpec(_Card):
    decoding: Literal["greedy", "sampling"]
    #: ``sampling`` (gpt-oss-120b's reference): the requests' temperature and top_p (an
    #: engine's card only: the in-process generator decodes greedily)
    temperature: float = Field(default=0.0, ge=0)
    top_p: float = Field(default=1.0, gt=0, le=1)
    #: the request's ``seed`` where the reference sends one (qwen3.6-27b: 42); None: none
    seed: int | None = None
    max_new_tokens: int = Field(gt=1)
    #: LoadGen rejects n_tokens <= 1 (TPOT divides by n_tokens - 1): EOS is masked before.
    #: The round's models use 1 (the reference's min_new_tokens); an engine then asked for
    #: at least 2 keeps LoadGen's rule (``requested_min_tokens``).
    min_new_tokens: int = Field(ge=1)
    response_dtype: Literal["int32"] = "int32"


class LLMDatasetSpec(_Card):
    """``tinylm-json``: ``{"samples": [{"prompt", "reference"}]}`` in the card's directory.
    ``json-records`` (CNN/DailyMail for llama3.1-8b) and ``pandas-pickle`` (OpenOrca for
    llama2-70b): the official file the user brings (``--dataset-path``), with the fields
    named here; ``sha256`` is the official file's where one is known. ``bfcl-parquet``
    (qwen3.6-27b): BFCL v4's single-turn parquet, each row chat messages and tools sent to
    /v1/chat/completions as they are (``suite.llm.round.bfcl``)."""

    name: str
    file: str
    samples: int = Field(gt=0)
    format: Literal["tinylm-json", "json-records", "pandas-pickle", "parquet",
                    "bfcl-parquet"] = "tinylm-json"
    prompt_field: str = "prompt"
    tokens_field: str = ""
    reference_field: str = "reference"
    #: each sample's sub-dataset (the reasoning LLMs' ``dataset`` column), or none
    subset_field: str = ""
    sha256: str = Field(default="", pattern=r"^$|^[0-9a-f]{64}$")
    source: str = ""


class LLMAccuracySpec(_Card):
    """``rougeL`` (tinylm): ROUGE-L and tokens per sample against this card's reference.
    ``round``: the round's targets for the model (``run_rules``: ROUGE1/2/L/Lsum, GEN_LEN
    or TOKENS_PER_SAMPLE with their upper limits), scored as the reference evaluates."""

    metric: Literal["rougeL", "round"]
    reference_fp32: float = 0.0
    #: Mean generated tokens per sample of the fp32 reference, and the allowed relative
    #: deviation (the rules' tokens-per-sample bound, +-10 % as for llama2-70b).
    tokens_per_sample: float = Field(default=1.0, gt=0)
    tokens_per_sample_tolerance: float = Field(default=0.1, gt=0, lt=1)
    #: ``round`` with exact_match: which reference evaluation scores it
    #: (``suite.llm.round.reasoning``; ``bfcl-v4``: ``suite.llm.round.bfcl_score``); ""
    #: for the ROUGE models
    evaluation: Literal["", "deepseek-r1", "gpt-oss-120b", "bfcl-v4"] = ""
    #: the LiveCodeBench release the evaluation loads (``livecodebench.RELEASE_FILES``)
    livecodebench_release: Literal["", "release_v1", "release_v6"] = ""


class LLMCard(_Card):
    """A parsed LLM card; ``directory`` is where its files live."""

    schema_version: int
    name: str
    title: str = ""
    task: Literal["text-generation"]
    model: LLMModelFiles
    #: Our own model's shape (bundled models only).
    architecture: Architecture | None = None
    tokenizer: TokenizerSpec
    generation: GenerationSpec
    dataset: LLMDatasetSpec
    accuracy: LLMAccuracySpec
    directory: Path = Path()

    @property
    def tool_calling(self) -> bool:
        """Whether each sample is chat messages with tools (BFCL), answered by tool calls."""
        return self.dataset.format == "bfcl-parquet"

    @property
    def card_path(self) -> Path:
        return self.directory / "model.toml"

    @property
    def arch(self) -> Architecture:
        """Our model's shape; a card whose model an engine serves has none."""
        if self.architecture is None:
            raise ModelError(f"{self.card_path}: the model is served by your engine "
                             "(source = \"user\"); it has no in-process architecture",
                             hint="use --backend openai --url URL with this benchmark")
        return self.architecture

    @property
    def state_dict_path(self) -> Path:
        return self.directory / self.model.torch_state_dict


def _card_path(paths: Paths, name: str) -> Path:
    return paths.reference_models / card_name(name) / "model.toml"


def load_llm_card(paths: Paths, name: str) -> LLMCard:
    """Parse an LLM card; a bad one fails naming the file and key, and another kind of
    card is one line naming its kind."""
    path = _card_path(paths, name)
    if path.is_file() and (kind := card_kind(paths, name)) is not Kind.TEXT_GENERATION:
        raise ConfigError(f"benchmark '{name}' is not a text-generation card ({path} is a "
                          f"{kind.value} card)", hint="LLM commands (export, serve --engine) "
                          "take an LLM benchmark: tinylm, llama3.1-8b, llama2-70b")
    try:
        data = parse_toml(decode_utf8(path.read_bytes(), str(path)), str(path))
        return LLMCard.model_validate({**data, "directory": path.parent})
    except FileNotFoundError:
        raise ConfigError(f"no model card for benchmark '{name}': {path} does not exist") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(part) for part in first["loc"])
        raise ConfigError(f"{path}: {key}: {first['msg']}",
                          hint="fix the card; see reference_models/tinylm/model.toml") from None


def verify_weights(card: LLMCard) -> str:
    """The state dict's sha256, or ``ModelError`` if it is missing or not the card's; ""
    for a model the user's engine serves (its weights are not ours to hash)."""
    if card.model.source == "user":
        return ""
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
