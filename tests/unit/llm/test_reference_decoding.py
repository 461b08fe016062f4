"""Decoding as the round's reference evaluations decode (issue 36, item 11).

**llama3.1-8b**: a fixture in the reference's formats (``cnn_eval.json``; a model
directory with ``tokenizer.json`` and a ``tokenizer_config.json`` that sets
``clean_up_tokenization_spaces: true``, as Meta's does), outputs spaced as a tokenizer's
words are (" .", " 's", " n't"), read through ``LLMDataset`` as a run reads them. The
expected figures are the reference evaluation's: the texts decoded by transformers'
``AutoTokenizer(..., use_fast=False).batch_decode(ids, skip_special_tokens=True)``
(transformers 5.24.0 in this venv, told to clean up a BPE model's spaces as the
reference's pinned 4.46.2 does), scored by ``suite.llm.round.scoring`` (equal to the
reference's ``evaluate`` scoring to the last printed digit, checked by
``bench/bench_rouge_reference.py``): ROUGE-1 73.0357, ROUGE-2 69.9675, GEN_LEN 555. The
``tokenizers`` decode alone, as before, gives ROUGE-1 70.043 and GEN_LEN 599.

**llama2-70b**: a sentencepiece-style ``tokenizer.json`` (BPE with byte fallback, Llama 2's
decoder chain). The expected texts are sentencepiece 0.2.3's
``SentencePieceProcessor.decode`` of the same pieces (a byte-fallback BPE model trained on
tinylm's text in a throwaway venv), which transformers' slow ``LlamaTokenizer`` (the
reference's ``use_fast=False``) calls."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from suite.llm.card import load_llm_card
from suite.llm.dataset import HFTokenizer, LLMDataset
from suite.llm.round import scoring
from suite.paths import find_paths
from tests.support.round_llm_fixtures import write_cnn, write_tokenizer

pytest.importorskip("tokenizers", reason="the round's tokenizers need the [hf] extra")
pytest.importorskip("rouge_score", reason="ROUGE needs the [llm] extra")


def _spaced(text: str) -> str:
    """Text as a model's tokens spell it: a space before punctuation and clitics."""
    return (re.sub(r"([.,?!])", r" \1", text).replace("'s", " 's")
            + " It 's done , is n't it ?")


@pytest.fixture(scope="module")
def llama3(tmp_path_factory: pytest.TempPathFactory) -> tuple[LLMDataset, list[list[int]]]:
    from tokenizers import Tokenizer

    out = tmp_path_factory.mktemp("llama3")
    tokenizer_json = write_tokenizer(out / "model")
    config = json.loads((out / "model" / "tokenizer_config.json").read_text())
    config["clean_up_tokenization_spaces"] = True
    (out / "model" / "tokenizer_config.json").write_text(json.dumps(config))
    cnn = write_cnn(out, tokenizer_json, 8)
    dataset = LLMDataset(load_llm_card(find_paths(), "llama3.1-8b"), str(cnn),
                         str(out / "model"))
    plain = Tokenizer.from_file(str(tokenizer_json))
    outputs = [[1, *plain.encode(_spaced(r)).ids, 2] for r in dataset.references]
    return dataset, outputs


def test_llama3_decode_cleans_up_spaces_as_the_reference(
        llama3: tuple[LLMDataset, list[list[int]]]) -> None:
    dataset, outputs = llama3
    texts = [dataset.tokenizer.decode(o) for o in outputs]
    assert texts[0].endswith("It's done, isn't it?"), texts[0]
    result = scoring.score(outputs, texts, dataset.references, with_tokens=False)
    # the reference evaluation's figures on this fixture (see the module docstring)
    assert (result["rouge1"], result["rouge2"], result["gen_len"]) == (73.0357, 69.9675, 555)


def test_llama3_decode_equals_transformers(llama3: tuple[LLMDataset, list[list[int]]]) -> None:
    transformers = pytest.importorskip("transformers", reason="the [hf] extra has transformers")
    dataset, outputs = llama3
    assert isinstance(dataset.tokenizer, HFTokenizer)
    reference = transformers.AutoTokenizer.from_pretrained(
        str(dataset.tokenizer.path.parent), use_fast=False,
        clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output=True)
    expected = reference.batch_decode(outputs, skip_special_tokens=True)
    assert [dataset.tokenizer.decode(o) for o in outputs] == expected


def test_no_clean_up_where_the_config_does_not_set_it(tmp_path: Path) -> None:
    from tokenizers import Tokenizer

    tokenizer_json = write_tokenizer(tmp_path / "model")  # its config has no such key
    ids = Tokenizer.from_file(str(tokenizer_json)).encode("done , is n't it ?").ids
    assert HFTokenizer(tokenizer_json, 2).decode(ids) == "done , is n't it ?"


def _llama2_tokenizer(directory: Path) -> Path:
    """A sentencepiece-style tokenizer.json: byte pieces <0x00>..<0xFF>, byte fallback,
    Llama 2's decoder (Replace ▁, ByteFallback, Fuse, Strip one leading space)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    vocab |= {f"<0x{b:02X}>": 3 + b for b in range(256)}
    vocab |= {"▁e": 259, "nd": 260}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>",
                                     byte_fallback=True))
    tokenizer.add_special_tokens([AddedToken(t, special=True) for t in ("<unk>", "<s>", "</s>")])
    tokenizer.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                           decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    directory.mkdir(parents=True)
    tokenizer.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(json.dumps(
        {"clean_up_tokenization_spaces": False, "legacy": False}))
    return directory / "tokenizer.json"


#: (bytes after "end", sentencepiece 0.2.3's decode): only the bad bytes are replaced
SENTENCEPIECE = [(b"\n\xe2\x80", "end\n\ufffd\ufffd"), (b"\xe2\x80", "end\ufffd\ufffd"),
                 (b"\n\xe2\x80\x99", "end\n\u2019"), (b"\xf0\x9f\x98", "end\ufffd\ufffd\ufffd"),
                 (b"\x80\x80", "end\ufffd\ufffd"), (b"\xc3\xa9\xe2", "end\u00e9\ufffd"),
                 (b"\xed\xa0\x80", "end\ufffd\ufffd\ufffd"), (b"\xc0\xaf", "end\ufffd\ufffd"),
                 (b"\xe2(\xa1", "end\ufffd(\ufffd")]


@pytest.mark.parametrize(("tail", "expected"), SENTENCEPIECE)
def test_llama2_byte_runs_decode_as_sentencepiece(tmp_path: Path, tail: bytes,
                                                  expected: str) -> None:
    tokenizer = HFTokenizer(_llama2_tokenizer(tmp_path / "model"), 2)
    ids = [1, 259, 260, *(3 + b for b in tail), 2]
    assert tokenizer.decode(ids) == expected
