"""The LLM dataset (prompts and reference continuations) and its tokenizer.

tinylm: the card's ``[dataset] file`` (``dataset.json``) holds ``samples``: ``{"prompt",
"reference"}`` pairs cut from held-out text; ``vocab.json`` holds the characters, EOS
first. Both are committed data, so no run needs the corpus package. ``data.dataset_dir``
may name a directory with another ``dataset.json`` of the same form (a subset, for a short
test); such a run is not submittable, as for any dataset of the wrong size.

The round's models (llama3.1-8b, llama2-70b): the official file the user brings
(``--dataset-path``, read by ``round_data``) and the model's own ``tokenizer.json`` from
the model directory the user gives (``--model-path``), read with ``tokenizers``; the
prompts are the file's token ids, checked against the tokenizer. qwen3.6-27b: the
BFCL parquet (``round.bfcl``), each sample's chat messages and tools sent as they are
(``requests``), its ground truth, subset and function descriptions kept for scoring.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from suite.errors import DatasetError
from suite.llm.card import LLMCard
from suite.paths import install_hint


class CharTokenizer:
    """One token per character; id ``eos_id`` is the end-of-speech marker."""

    def __init__(self, chars: list[str], eos_id: int) -> None:
        self.chars = chars
        self.eos_id = eos_id
        self._index = {c: i for i, c in enumerate(chars)}

    @classmethod
    def from_card(cls, card: LLMCard) -> CharTokenizer:
        path = card.directory / card.tokenizer.vocab_file
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            chars = list(data["chars"])
        except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
            raise DatasetError(f"{path}: unreadable vocabulary ({exc})",
                               hint="restore the committed vocab.json") from None
        if len(chars) != card.arch.vocab_size:
            raise DatasetError(f"{path}: {len(chars)} characters, the card's vocab_size is "
                               f"{card.arch.vocab_size}")
        return cls(chars, card.tokenizer.eos_id)

    def encode(self, text: str) -> list[int]:
        try:
            return [self._index[c] for c in text]
        except KeyError as exc:
            raise DatasetError(f"character {exc.args[0]!r} is not in the vocabulary") from None

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode_text(self, text: str) -> list[int]:
        """``encode``: one character is one id, with no special tokens to add."""
        return self.encode(text)

    def decode(self, ids: list[int]) -> str:
        """Text of ``ids`` without EOS tokens (what accuracy compares)."""
        return "".join(self.chars[i] for i in ids if i != self.eos_id and 0 <= i < len(self.chars))


class HFTokenizer:
    """A Hugging Face ``tokenizer.json`` (the ``tokenizers`` library; nothing downloaded).
    ``decode`` decodes as the reference evaluations do (``reference_decode``): special
    tokens skipped, the model directory's ``tokenizer_config.json`` clean-up of
    tokenization spaces, and sentencepiece's handling of invalid byte-fallback runs."""

    def __init__(self, path: Path, eos_id: int) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise DatasetError("the round's LLM benchmarks need the tokenizers package",
                               hint=install_hint("hf")) from None
        if not path.is_file():
            raise DatasetError(f"tokenizer file {path} does not exist",
                               hint="--model-path: the model directory (with tokenizer.json)")
        try:
            self._tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # the library raises plain Exceptions
            raise DatasetError(f"{path}: not a tokenizer.json ({exc})") from None
        self.path, self.eos_id = path, eos_id
        self.vocab_size = self._tokenizer.get_vocab_size(with_added_tokens=True)
        from suite.llm.reference_decode import DecodeRules

        try:
            self.rules = DecodeRules.read(path, self._tokenizer)
        except (OSError, ValueError) as exc:
            raise DatasetError(f"{path.parent / 'tokenizer_config.json'}: unreadable ({exc})",
                               hint="--model-path: the model directory as published") from None

    def encode(self, text: str) -> list[int]:
        return list(self._tokenizer.encode(text).ids)

    def encode_text(self, text: str) -> list[int]:
        """The ids of generated text: without the special tokens (a Llama tokenizer's
        BOS) that ``encode`` adds to a prompt, which no engine generated."""
        return list(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def decode_plain(self, ids: list[int]) -> str:
        """``tokenizers``' own decode (special tokens skipped), without the reference's
        clean-up: what the dataset check compares with the prompt text."""
        return str(self._tokenizer.decode(ids, skip_special_tokens=True))

    def decode(self, ids: list[int]) -> str:
        from suite.llm.reference_decode import decode

        return decode(self._tokenizer, self.rules, ids)

    def decode_special(self, ids: list[int]) -> str:
        """Special tokens kept (gpt-oss-120b's reference: ``skip_special_tokens=False``),
        with the model directory's clean-up of tokenization spaces."""
        from suite.llm.reference_decode import clean_up_tokenization

        text = str(self._tokenizer.decode(ids, skip_special_tokens=False))
        return clean_up_tokenization(text) if self.rules.clean_up_spaces else text


def llm_cache(cache_dir: str) -> Path | None:
    """Where parsed round datasets are cached (``data.cache_dir``/llm), if anywhere."""
    return Path(cache_dir) / "llm" if cache_dir else None


def tokenizer_spec(tokenizer: CharTokenizer | HFTokenizer) -> tuple[str, Any, int]:
    """What rebuilds ``tokenizer`` in another process (``tokenizer_from_spec``)."""
    if isinstance(tokenizer, HFTokenizer):
        return ("hf", str(tokenizer.path), tokenizer.eos_id)
    return ("char", tokenizer.chars, tokenizer.eos_id)


def tokenizer_from_spec(spec: tuple[str, Any, int]) -> CharTokenizer | HFTokenizer:
    kind, source, eos = spec
    return HFTokenizer(Path(source), eos) if kind == "hf" else CharTokenizer(source, eos)


class LLMDataset:
    """Prompts as token ids, with their reference continuations (QSL: all in memory)."""

    name = "tinylm-shakespeare"

    def __init__(self, card: LLMCard, dataset_dir: str = "", model_path: str = "",
                 cache_dir: Path | None = None) -> None:
        self.tokenizer: CharTokenizer | HFTokenizer
        self.sha256 = ""
        self.checksum: dict[str, str] = {}
        #: each sample's sub-dataset (the reasoning LLMs, BFCL's subsets), or None
        self.subsets: list[str] | None = None
        #: a tool-calling card's requests (messages, tools, tool_choice) and samples
        self.requests: list[dict[str, Any]] = []
        self.bfcl: list[Any] = []
        if card.dataset.format != "tinylm-json":
            self._round(card, dataset_dir, model_path, cache_dir)
            return
        self.path = (Path(dataset_dir) if dataset_dir else card.directory) / card.dataset.file
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            samples = data["samples"]
            self.prompts_text = [str(s["prompt"]) for s in samples]
            self.references = [str(s["reference"]) for s in samples]
        except FileNotFoundError:
            raise DatasetError(f"dataset file {self.path} does not exist",
                               hint="unset data.dataset_dir to use the bundled dataset") from None
        except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
            raise DatasetError(f"{self.path}: not an LLM dataset ({exc})",
                               hint="expected {\"samples\": [{\"prompt\", \"reference\"}, ...]}"
                               ) from None
        if not self.prompts_text:
            raise DatasetError(f"{self.path}: no samples")
        self.tokenizer = CharTokenizer.from_card(card)
        self.prompts = [self.tokenizer.encode(p) for p in self.prompts_text]
        longest = max(len(p) for p in self.prompts) + card.generation.max_new_tokens
        if longest > card.arch.block_size + 1:
            raise DatasetError(f"{self.path}: a prompt plus max_new_tokens needs {longest} "
                               f"positions; the model has {card.arch.block_size}")

    def _round(self, card: LLMCard, dataset_path: str, model_path: str,
               cache_dir: Path | None) -> None:
        """The round's dataset file and the model's tokenizer (see the module docstring)."""
        from suite.llm.round import data as round_data

        spec = card.dataset
        self.name = spec.name
        if not dataset_path:
            raise DatasetError(f"benchmark {card.name} needs its dataset file ({spec.file})",
                               hint=f"--dataset-path PATH ({spec.source or 'see docs'})")
        if not model_path:
            raise DatasetError(f"benchmark {card.name} needs the model directory (its "
                               f"{card.tokenizer.file})", hint="--model-path DIR")
        path = Path(dataset_path)
        self.path = path / spec.file if path.is_dir() else path
        if card.tool_calling:
            self._bfcl(card, model_path)
            return
        records = round_data.load(self.path, spec.format, spec.prompt_field, spec.tokens_field,
                                  spec.reference_field, cache_dir, spec.subset_field)
        self.subsets = records.subsets
        self.sha256 = records.sha256
        self.checksum = round_data.downloader_checksum(self.path)
        self.prompts_text, self.references = records.prompts_text, records.references
        tokenizer = HFTokenizer(Path(model_path) / card.tokenizer.file, card.tokenizer.eos_id)
        self.tokenizer = tokenizer
        self.prompts = records.tokens or [tokenizer.encode(t) for t in records.prompts_text]
        top = max(max(p) for p in self.prompts)
        if top >= tokenizer.vocab_size:
            raise DatasetError(f"{self.path}: token id {top} is outside the vocabulary of "
                               f"{tokenizer.path} ({tokenizer.vocab_size} tokens): the "
                               "tokenizer does not match the dataset", hint="--model-path: "
                               f"the {card.model.hf_id or card.name} model directory")
        for index in range(min(4, len(self.prompts))):
            every = records.prompts_text[index].split()
            middle = max(0, len(every) // 2 - 3)  # clear of markup such as "<s>[INST]"
            words = every[middle:middle + 6]
            if records.tokens and words and " ".join(words) not in " ".join(
                    tokenizer.decode_plain(self.prompts[index]).split()):
                raise DatasetError(f"{self.path}: record {index}'s token ids do not decode to "
                                   f"its '{spec.prompt_field}' text with {tokenizer.path}: "
                                   "the tokenizer does not match the dataset",
                                   hint=f"--model-path: the {card.model.hf_id or card.name} "
                                        "model directory")

    def _bfcl(self, card: LLMCard, model_path: str) -> None:
        """BFCL's samples (``round.bfcl``); ``prompts``: each user message's ids, what the
        pre-flight sends and the record's prompt length."""
        from suite.llm.round import bfcl
        from suite.llm.round import data as round_data

        self.bfcl = bfcl.load(self.path)
        self.requests = [s.request for s in self.bfcl]
        self.subsets = [s.subset for s in self.bfcl]
        self.references = [s.ground_truth for s in self.bfcl]
        self.prompts_text = [s.user_text for s in self.bfcl]
        self.sha256 = round_data.file_sha256(self.path)
        self.checksum = round_data.downloader_checksum(self.path)
        # the hosted file's digest (the reference checks it only on its download path: a
        # parquet built from bfcl-eval is accepted there too): recorded, not enforced
        self.checksum["hosted_sha256_matches"] = str(self.sha256 == card.dataset.sha256).lower()
        tokenizer = HFTokenizer(Path(model_path) / card.tokenizer.file, card.tokenizer.eos_id)
        self.tokenizer = tokenizer
        # a message may be empty (BFCL's null contents): the probe still sends one token
        self.prompts = [tokenizer.encode_text(t or " ") or [0] for t in self.prompts_text]

    @property
    def probe_prompt(self) -> list[int] | dict[str, Any]:
        """What the pre-flight sends: the first sample, as the run sends it."""
        return self.requests[0] if self.requests else self.prompts[0]

    @property
    def total_count(self) -> int:
        return len(self.prompts)

    def load(self, indices: list[int]) -> None:
        """LoadGen's QSL load: the prompts are already in memory."""

    def unload(self, indices: list[int]) -> None:
        """LoadGen's QSL unload: nothing to free."""

    def describe(self) -> dict[str, Any]:
        described = {"name": self.name, "total": self.total_count, "file": str(self.path),
                     "prompt_tokens_max": max(len(p) for p in self.prompts)}
        if self.sha256:
            described["sha256"] = self.sha256
            described.update(self.checksum)
        if isinstance(self.tokenizer, HFTokenizer):
            described["tokenizer"] = str(self.tokenizer.path)
        return described
