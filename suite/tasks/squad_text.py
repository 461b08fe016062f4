"""BERT's text handling for SQuAD: the vocabulary, basic and WordPiece tokenization.

The reference (mlcommons/inference ``language/bert``) tokenizes with an uncased BERT
tokenizer built from the model's ``vocab.txt``: a basic tokenizer (drop control
characters and U+FFFD, map whitespace to a space, put spaces around CJK ideographs, split
on whitespace, lower-case and strip accents (NFD, drop combining marks), split off every
punctuation character) followed by greedy longest-match-first WordPiece (continuation
pieces prefixed ``##``; a word of more than 100 characters, or one with a piece outside
the vocabulary, becomes ``[UNK]``). ``accuracy-squad.py``'s ``get_final_text`` runs the
same basic tokenizer on the original text. This module is our implementation of those
rules; nothing here is imported from the reference.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from pathlib import Path

from suite.errors import DatasetError

#: The special tokens every BERT vocabulary holds.
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
_SPECIAL = re.compile("(" + "|".join(re.escape(token) for token in SPECIAL_TOKENS) + ")")
#: A word longer than this is one ``[UNK]`` (WordPiece's ``max_input_chars_per_word``).
MAX_WORD_CHARS = 100

_CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
)


def load_vocab(path: Path) -> dict[str, int]:
    """``vocab.txt``: one token a line, its id the line number (a repeated token keeps
    its last line, as the reference's loader does)."""
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text (byte {exc.start})",
                           hint="use the model's vocab.txt as downloaded") from None
    except OSError as exc:
        raise DatasetError(f"{path} cannot be read: {exc.strerror or exc}",
                           hint="check the file's permissions") from None
    if lines and lines[-1] == "":
        lines.pop()
    vocab = {token: index for index, token in enumerate(lines)}
    missing = [token for token in SPECIAL_TOKENS if token not in vocab]
    if missing:
        raise DatasetError(f"{path}: not a BERT vocabulary (no {', '.join(missing)})",
                           hint="use the vocab.txt that comes with the model")
    return vocab


def _is_whitespace(char: str) -> bool:
    return char in " \t\n\r" or unicodedata.category(char) == "Zs"


def _is_control(char: str) -> bool:
    return char not in "\t\n\r" and unicodedata.category(char).startswith("C")


def _is_punctuation(char: str) -> bool:
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True  # every non-alphanumeric ASCII character counts
    return unicodedata.category(char).startswith("P")


def _cleaned(char: str) -> str | None:
    code = ord(char)
    if code == 0 or code == 0xFFFD or _is_control(char):
        return None
    if _is_whitespace(char):
        return " "
    if any(low <= code <= high for low, high in _CJK_RANGES):
        return f" {char} "
    return char


class _CharTable(dict[int, "str | None"]):
    """A ``str.translate`` table filled on first sight of each character."""

    def __init__(self, rule: Callable[[str], str | None]) -> None:
        super().__init__()
        self.rule = rule

    def __missing__(self, code: int) -> str | None:
        value = self[code] = self.rule(chr(code))
        return value


#: control characters dropped, whitespace to a space, CJK ideographs spaced out
_CLEAN = _CharTable(_cleaned)
#: combining marks (Mn) dropped, after NFD: the accents
_MARKS = _CharTable(lambda char: None if unicodedata.category(char) == "Mn" else char)
#: punctuation spaced out: split off by the whitespace split that follows
_PUNCT = _CharTable(lambda char: f" {char} " if _is_punctuation(char) else char)


def _normalized(text: str, lower_case: bool) -> list[str]:
    """Words of ``text`` (no special token among them) lower-cased, accent-stripped
    and with punctuation split off. Lower-casing and NFD act on each character (the
    final-sigma rule never looks across a space), so whole text and word by word agree."""
    if lower_case:
        text = text.lower()
        if not text.isascii():
            text = unicodedata.normalize("NFD", text).translate(_MARKS)
    return text.translate(_PUNCT).split()


def _lower_each(text: str) -> str:
    """``text`` lower-cased one character at a time: a capital sigma is always ``σ``,
    never the final ``ς`` that ``str.lower`` writes at a word's end (the only
    context-dependent rule of ``str.lower``)."""
    return "".join(char.lower() for char in text) if "\u03a3" in text else text.lower()


def basic_tokenize(text: str, lower_case: bool = True) -> list[str]:
    """BERT's basic tokenizer: cleaned, CJK-spaced, whitespace-split, lower-cased and
    accent-stripped (``lower_case``), with punctuation split off; a word that is a
    special token (``[SEP]``) is kept whole."""
    text = text.translate(_CLEAN)
    words = text.split()
    if not any(word in SPECIAL_TOKENS for word in words):
        return _normalized(text, lower_case)
    tokens: list[str] = []
    for word in words:
        tokens.extend([word] if word in SPECIAL_TOKENS else _normalized(word, lower_case))
    return tokens


class WordPiece:
    """The full tokenizer: basic tokenization then WordPiece over ``vocab``.

    As the reference's tokenizer for features (transformers' ``BertTokenizer``), a
    special token is split out of the text wherever it appears (``a[SEP]b``: ``a``,
    ``[SEP]``, ``b``) and kept as it is, and the rest is lower-cased one character at a
    time before basic tokenization (``ΟΔΟΣ``: ``οδοσ``; ``accuracy-squad.py``'s
    ``get_final_text`` lower-cases whole words: ``οδος``).

    Words are memoised: a SQuAD context is tokenized one whitespace word at a time, and
    the same words recur across the 10,570 questions' contexts.
    """

    def __init__(self, vocab: dict[str, int], lower_case: bool = True) -> None:
        self.vocab = vocab
        self.lower_case = lower_case
        self._texts: dict[str, list[str]] = {}
        self._words: dict[str, list[str]] = {}

    def tokenize(self, text: str) -> list[str]:
        """``text``'s WordPiece tokens."""
        known = self._texts.get(text)
        if known is not None:
            return known
        pieces: list[str] = []
        for part in _SPECIAL.split(text):
            if part in SPECIAL_TOKENS:
                pieces.append(part)
                continue
            if self.lower_case:  # character by character, as the reference's tokenizer
                part = _lower_each(part)
            for word in basic_tokenize(part, self.lower_case):
                pieces.extend(self._word_pieces(word))
        self._texts[text] = pieces
        return pieces

    def _word_pieces(self, word: str) -> list[str]:
        known = self._words.get(word)
        if known is None:
            known = self._words[word] = self._greedy(word)
        return known

    def _greedy(self, word: str) -> list[str]:
        if len(word) > MAX_WORD_CHARS:
            return ["[UNK]"]
        pieces: list[str] = []
        start = 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    pieces.append(piece)
                    break
                end -= 1
            else:
                return ["[UNK]"]
            start = end
        return pieces

    def ids(self, tokens: list[str]) -> list[int]:
        """The vocabulary ids of ``tokens`` (all produced by ``tokenize`` or special)."""
        return [self.vocab[token] for token in tokens]
