"""Token ids to text as the round's reference evaluations decode them.

The reference evaluations decode the accuracy log with ``transformers`` (pinned 4.46.2),
``tokenizer.batch_decode(ids, skip_special_tokens=True)``. Two steps of theirs are not the
``tokenizers`` library's ``decode``, and this module owns both:

* **Clean-up of tokenization spaces.** Where the model directory's
  ``tokenizer_config.json`` sets ``clean_up_tokenization_spaces: true`` (Meta's
  Llama-3.1-8B-Instruct does), transformers 4.46.2 replaces, in this order, " ." -> ".",
  " ?" -> "?", " !" -> "!", " ," -> ",", " ' " -> "'", " n't" -> "n't", " 'm" -> "'m",
  " 's" -> "'s", " 've" -> "'ve", " 're" -> "'re" in the decoded text
  (``PreTrainedTokenizerBase.clean_up_tokenization``; 4.46.2 applies it to BPE models too,
  later versions skip it for them). Absent, the key is false.
* **Byte-fallback runs that are not valid UTF-8.** llama2-70b's reference loads the
  tokenizer with ``use_fast=False``: sentencepiece decodes a run of ``<0xHH>`` pieces one
  character at a time and maps each byte that does not start a valid character to U+FFFD,
  keeping the valid ones (``\\n`` ``E2 80``: "\\n\\ufffd\\ufffd"); ``tokenizers``'
  ``ByteFallback`` replaces every byte of such a run ("\\ufffd\\ufffd\\ufffd"). Only runs
  that are not valid UTF-8 are decoded here; everything else is ``tokenizers``' own decode.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: transformers' ``clean_up_tokenization`` replacements, in its order.
CLEAN_UP = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"),
            (" n't", "n't"), (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def clean_up_tokenization(text: str) -> str:
    """transformers' clean-up of tokenization spaces (see the module docstring)."""
    for old, new in CLEAN_UP:
        text = text.replace(old, new)
    return text


def sentencepiece_bytes(data: bytes) -> str:
    """``data`` decoded as sentencepiece decodes a run of byte pieces: one character at a
    time; a byte that does not start a valid UTF-8 character becomes U+FFFD on its own."""
    out: list[str] = []
    offset = 0
    while offset < len(data):
        for size in (1, 2, 3, 4):
            try:
                char = data[offset:offset + size].decode("utf-8")
            except UnicodeDecodeError:
                continue
            out.append(char)
            offset += size
            break
        else:
            out.append("\ufffd")
            offset += 1
    return "".join(out)


@dataclass(frozen=True)
class DecodeRules:
    """What the model directory says about decoding (``tokenizer_config.json``, the
    ``tokenizer.json`` model's byte fallback)."""

    clean_up_spaces: bool = False
    #: id -> byte of each ``<0xHH>`` piece, where the model falls back to bytes
    byte_ids: dict[int, int] | None = None
    #: ids of the special tokens (skipped, as ``skip_special_tokens=True``)
    special_ids: frozenset[int] = frozenset()

    @classmethod
    def read(cls, tokenizer_json: Path, tokenizer: Any) -> DecodeRules:
        """From the files beside the tokenizer; ``tokenizer``: the loaded ``tokenizers``
        object. A ``tokenizer_config.json`` that cannot be read is an ``OSError`` or
        ``ValueError`` for the caller to report."""
        config_path = tokenizer_json.parent / "tokenizer_config.json"
        config = json.loads(config_path.read_text(encoding="utf-8")) \
            if config_path.is_file() else {}
        clean = bool(config.get("clean_up_tokenization_spaces", False)) \
            if isinstance(config, dict) else False
        model = json.loads(tokenizer.to_str()).get("model", {})
        byte_ids = None
        if model.get("byte_fallback"):
            byte_ids = {}
            for token, index in tokenizer.get_vocab(with_added_tokens=False).items():
                match = _BYTE_PIECE.fullmatch(token)
                if match:
                    byte_ids[int(index)] = int(match.group(1), 16)
        special = frozenset(int(i) for i, added in tokenizer.get_added_tokens_decoder().items()
                            if added.special)
        return cls(clean, byte_ids or None, special)


def decode(tokenizer: Any, rules: DecodeRules, ids: list[int]) -> str:
    """``ids`` as the reference decodes them (see the module docstring)."""
    text = _bytes_as_reference(tokenizer, rules, ids) if rules.byte_ids else None
    if text is None:
        text = str(tokenizer.decode(ids, skip_special_tokens=True))
    return clean_up_tokenization(text) if rules.clean_up_spaces else text


def _bytes_as_reference(tokenizer: Any, rules: DecodeRules, ids: list[int]) -> str | None:
    """The decode with each byte run that is not valid UTF-8 decoded as sentencepiece
    does; None where every run is valid (``tokenizers`` then decodes as the reference)."""
    assert rules.byte_ids is not None
    kept = [i for i in ids if i not in rules.special_ids]
    pieces: list[str] = []
    changed = False
    position = 0
    while position < len(kept):
        if kept[position] not in rules.byte_ids:
            pieces.append(str(tokenizer.id_to_token(kept[position])))
            position += 1
            continue
        end = position
        while end < len(kept) and kept[end] in rules.byte_ids:
            end += 1
        run = bytes(rules.byte_ids[i] for i in kept[position:end])
        try:
            run.decode("utf-8")
        except UnicodeDecodeError:
            # one piece of text in place of the run: the decoder passes it through
            pieces.append(sentencepiece_bytes(run))
            changed = True
        else:
            pieces += [str(tokenizer.id_to_token(i)) for i in kept[position:end]]
        position = end
    if not changed or tokenizer.decoder is None:
        return None
    return str(tokenizer.decoder.decode(pieces))
