"""The LLM dataset (prompts and reference continuations) and its char tokenizer.

The card's ``[dataset] file`` (``dataset.json``) holds ``samples``: ``{"prompt", "reference"}``
pairs cut from held-out text; ``vocab.json`` holds the characters, EOS first. Both are
committed data, so no run needs the corpus package. ``data.dataset_dir`` may name a directory
with another ``dataset.json`` of the same form (a subset, for a short test); such a run is
not submittable, as for any dataset of the wrong size.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from suite.errors import DatasetError
from suite.llm.card import LLMCard


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
        if len(chars) != card.architecture.vocab_size:
            raise DatasetError(f"{path}: {len(chars)} characters, the card's vocab_size is "
                               f"{card.architecture.vocab_size}")
        return cls(chars, card.tokenizer.eos_id)

    def encode(self, text: str) -> list[int]:
        try:
            return [self._index[c] for c in text]
        except KeyError as exc:
            raise DatasetError(f"character {exc.args[0]!r} is not in the vocabulary") from None

    def decode(self, ids: list[int]) -> str:
        """Text of ``ids`` without EOS tokens (what accuracy compares)."""
        return "".join(self.chars[i] for i in ids if i != self.eos_id and 0 <= i < len(self.chars))


class LLMDataset:
    """Prompts as token ids, with their reference continuations (QSL: all in memory)."""

    name = "tinylm-shakespeare"

    def __init__(self, card: LLMCard, dataset_dir: str = "") -> None:
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
        if longest > card.architecture.block_size + 1:
            raise DatasetError(f"{self.path}: a prompt plus max_new_tokens needs {longest} "
                               f"positions; the model has {card.architecture.block_size}")

    @property
    def total_count(self) -> int:
        return len(self.prompts)

    def load(self, indices: list[int]) -> None:
        """LoadGen's QSL load: the prompts are already in memory."""

    def unload(self, indices: list[int]) -> None:
        """LoadGen's QSL unload: nothing to free."""

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "total": self.total_count, "file": str(self.path),
                "prompt_tokens_max": max(len(p) for p in self.prompts)}
