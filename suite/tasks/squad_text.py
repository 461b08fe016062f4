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

import unicodedata
from pathlib import Path

from suite.errors import DatasetError

#: The special tokens every BERT vocabulary holds.
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
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


def _is_cjk(code: int) -> bool:
    return any(low <= code <= high for low, high in _CJK_RANGES)


def _strip_accents(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", text)
                   if unicodedata.category(c) != "Mn")


def _split_punctuation(word: str) -> list[str]:
    pieces: list[str] = []
    current = ""
    for char in word:
        if _is_punctuation(char):
            if current:
                pieces.append(current)
                current = ""
            pieces.append(char)
        else:
            current += char
    if current:
        pieces.append(current)
    return pieces


def basic_tokenize(text: str, lower_case: bool = True) -> list[str]:
    """BERT's basic tokenizer: cleaned, CJK-spaced, whitespace-split, lower-cased and
    accent-stripped (``lower_case``), with punctuation split off."""
    cleaned: list[str] = []
    for char in text:
        code = ord(char)
        if code == 0 or code == 0xFFFD or _is_control(char):
            continue
        if _is_whitespace(char):
            cleaned.append(" ")
        elif _is_cjk(code):
            cleaned.extend((" ", char, " "))
        else:
            cleaned.append(char)
    tokens: list[str] = []
    for word in "".join(cleaned).split():
        if lower_case:
            word = _strip_accents(word.lower())
        tokens.extend(_split_punctuation(word))
    return [token for token in tokens if token]  # a word of combining marks only: none


class WordPiece:
    """The full tokenizer: basic tokenization then WordPiece over ``vocab``.

    Words are memoised: a SQuAD context is tokenized one whitespace word at a time, and
    the same words recur across the 10,570 questions' contexts.
    """

    def __init__(self, vocab: dict[str, int], lower_case: bool = True) -> None:
        self.vocab = vocab
        self.lower_case = lower_case
        self._words: dict[str, list[str]] = {}

    def tokenize(self, text: str) -> list[str]:
        """``text``'s WordPiece tokens."""
        known = self._words.get(text)
        if known is not None:
            return known
        pieces: list[str] = []
        for word in basic_tokenize(text, self.lower_case):
            pieces.extend(self._word_pieces(word))
        self._words[text] = pieces
        return pieces

    def _word_pieces(self, word: str) -> list[str]:
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
