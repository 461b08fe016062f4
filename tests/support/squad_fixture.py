"""A small SQuAD v1.1 fixture with the awkward cases, and logits to score on it.

Everything is computed from literals (no random generator), so the reference's scripts,
run once on the same files, give figures the tests can state (``tests/unit/tasks/
test_squad.py`` says how they were obtained).

Cases: accents and a non-ASCII letter in names, a dash and parentheses around dates,
no-break space (U+00A0, a BERT whitespace but not a SQuAD word break), narrow no-break
space (U+202F, a SQuAD word break), a tab and a newline, CJK characters, a zero-width space
and a control character (dropped by the tokenizer), a 120-letter word, special tokens
written in the text (``[SEP]`` alone, and ``[MASK]`` inside a word, which the reference's
transformers tokenizer splits out), words missing from the vocabulary ([UNK]), words
split into ``##`` pieces, a double space, a question longer than 64 pieces (truncated),
and a context of 553 pieces that needs three 384-token windows, with answers inside the
windows' overlaps and across a window's edge.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

CURIE = ("Marie Skłodowska-Curie (7 November 1867 – 4 July 1934) was a Polish and "
         "naturalised-French physicist and chemist who conducted pioneering research on "
         "radioactivity.\u00a0She was the first woman to win a Nobel Prize, the first person "
         "to win a Nobel Prize twice, and the only person to win a Nobel Prize in two "
         "scientific fields.")
CAFE = ("The café\u202fRené in Zürich\tserved crème brûlée;\nits owner, Jean-Luc O'Neill, "
        "spoke 日本語 and wrote \"Ünïcödé\" signs.  Prices:\u00a0$4.50 (tax incl.) at the "
        "zero\u200bwidth bar, bell\x07 ringing, and one " + "super" * 24 + " word, "
        "a [SEP] sign and a[MASK]bar.")
STATIONS = ("Alpha", "Bravo", "Charlie", "Delta", "Echo", "Foxtrot", "Golf", "Hotel",
            "India", "Juliett", "Kilo", "Lima", "Mike", "November", "Oscar", "Papa")


def long_context() -> str:
    """24 sentences, 553 word pieces: three windows."""
    sentences = []
    for year in range(24):
        station = STATIONS[year % len(STATIONS)]
        sentences.append(f"In {1900 + year}, the expedition reached station {station}-{year}, "
                         f"where the crew's logbooks recorded {year * 7 % 50} storms.")
    return " ".join(sentences)


def squad_document() -> dict[str, object]:
    """The fixture's ``dev-v1.1.json`` content."""
    longer = long_context()

    def at(context: str, text: str, occurrence: int = 0) -> dict[str, object]:
        start = -1
        for _ in range(occurrence + 1):
            start = context.index(text, start + 1)
        return {"text": text, "answer_start": start}

    def expedition(year: int) -> dict[str, object]:
        station = f"{STATIONS[year % len(STATIONS)]}-{year}"
        return {"id": f"exp-{year}", "question": f"Which station did the expedition reach "
                f"in {1900 + year}?", "answers": [at(longer, f"station {station}"),
                                                  at(longer, station)]}

    qas_curie = [
        {"id": "curie-who", "question": "Who was the first woman to win a Nobel Prize?",
         "answers": [at(CURIE, "Marie Skłodowska-Curie"), at(CURIE, "Skłodowska-Curie")]},
        {"id": "curie-born", "question": "When was Marie Curie born?",
         "answers": [at(CURIE, "7 November 1867"), at(CURIE, "1867")]},
        {"id": "curie-research", "question": "What did Curie conduct pioneering research on?",
         "answers": [at(CURIE, "radioactivity"), at(CURIE, "pioneering research on "
                                                         "radioactivity")]},
    ]
    qas_cafe = [
        {"id": "cafe-owner", "question": "Who owns the café René?",
         "answers": [at(CAFE, "Jean-Luc O'Neill")]},
        {"id": "cafe-price", "question": "What are the prices?",
         "answers": [at(CAFE, "$4.50"), at(CAFE, "$4.50 (tax incl.)")]},
        {"id": "cafe-language", "question": "Which language did the owner speak?",
         "answers": [at(CAFE, "日本語")]},
    ]
    long_question = ("Considering every expedition, every station, every logbook and every "
                     "storm that the crews recorded over all the years described here, "
                     "and ignoring the stations named after letters that appear more than "
                     "once in the alphabet of radio operators, which station did the "
                     "expedition reach in the year nineteen hundred and ten, and what "
                     "did the crew's logbooks record there about storms and weather?")
    qas_long = [expedition(1), expedition(9), expedition(12), expedition(14),
                expedition(17), expedition(23),
                {"id": "exp-long-question", "question": long_question,
                 "answers": [at(longer, "station Kilo-10"), at(longer, "Kilo-10")]}]
    return {"version": "1.1", "data": [
        {"title": "Curie", "paragraphs": [{"context": CURIE, "qas": qas_curie},
                                           {"context": CAFE, "qas": qas_cafe}]},
        {"title": "Expeditions", "paragraphs": [{"context": longer, "qas": qas_long}]},
    ]}


def vocabulary(document: dict[str, object]) -> list[str]:
    """A vocabulary covering the fixture: special tokens, punctuation, the words (some
    only as ``##`` pieces, some missing), in a fixed order."""
    from suite.tasks.squad_text import basic_tokenize

    words: set[str] = set()
    for article in document["data"]:  # type: ignore[attr-defined]
        for paragraph in article["paragraphs"]:
            words.update(basic_tokenize(paragraph["context"]))
            for qa in paragraph["qas"]:
                words.update(basic_tokenize(qa["question"]))
    # split into pieces instead of whole words; missing entirely ([UNK])
    split = {"radioactivity": ["radio", "##act", "##ivity"], "logbooks": ["log", "##books"],
             "expedition": ["exp", "##ed", "##ition"], "naturalised": ["natural", "##ised"]}
    missing = {"brulee", "zurich", "storms"}
    pieces = {piece for word in split for piece in split[word]}
    kept = sorted((words - set(split) - missing) | pieces)
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *kept]


def write(directory: Path) -> Path:
    """``dev-v1.1.json`` and ``vocab.txt`` in ``directory``; returns it."""
    directory.mkdir(parents=True, exist_ok=True)
    document = squad_document()
    (directory / "dev-v1.1.json").write_text(json.dumps(document, ensure_ascii=False),
                                             encoding="utf-8")
    (directory / "vocab.txt").write_text("\n".join(vocabulary(document)) + "\n",
                                         encoding="utf-8")
    return directory


def logits(windows: int, peaks: dict[int, tuple[int, int]]) -> npt.NDArray[np.float32]:
    """Float32 [windows, 384, 2] logits from integer arithmetic (a fixed pseudo-random
    pattern in -5..5 with ties), plus 20 at ``peaks``: window -> (start, end)."""
    index = np.arange(windows)[:, None, None]
    token = np.arange(384)[None, :, None]
    side = np.arange(2)[None, None, :]
    values = ((index * 7919 + token * 104729 + side * 31337) % 1001) / 100.0 - 5.0
    values = np.round(values, 1)  # many equal values: ties in the n-best order
    out = values.astype(np.float32)
    for window, (start, end) in peaks.items():
        out[window, start, 0] += 20.0
        out[window, end, 1] += 20.0
    return out


def accuracy_log(values: npt.NDArray[np.float32]) -> list[dict[str, Any]]:
    """LoadGen's ``mlperf_log_accuracy.json`` entries, one per window, as the reference's
    SUT logs them (the float32 [384, 2] array's bytes, hex)."""
    return [{"seq_id": index, "qsl_idx": index, "data": values[index].tobytes().hex().upper()}
            for index in range(len(values))]
