"""bert's task (``suite.tasks.squad``) against the reference's own code on the same files.

The fixture is ``tests/support/squad_fixture.py`` (awkward cases listed there). The
expected figures below were obtained by running mlcommons/inference's scripts at commit
b66003e10e2db4b8c36a448b0545ec90fcc6e9e9 (``language/bert``), with the
DeepLearningExamples submodule's ``PyTorch/LanguageModeling/BERT/tokenization.py`` at its
pinned commit b03375bd, in a scratch directory outside the repository:

* features: ``read_squad_examples`` + ``convert_examples_to_features`` (max_seq_length 384,
  doc_stride 128, max_query_length 64, ``is_training=False``), as ``squad_QSL.py`` calls
  them, with transformers 5.24's ``BertTokenizer(vocab.txt)`` (what ``squad_QSL.py``
  uses): 27 features. (DeepLearningExamples' own ``BertTokenizer`` gives the same ones
  but for ``a[MASK]bar``, which it does not split.) FEATURES_SHA256 is the sha256 of
  ``input_ids``, ``input_mask`` and ``segment_ids`` (int64 [27, 384], concatenated
  bytes); LAYOUT_SHA256 the sha256 of
  ``json.dumps([[example_index, doc_span_index, sorted(token_to_orig_map.items()),
  sorted(token_is_max_context.items()), tokens], ...], ensure_ascii=False)``.
* accuracy: ``python accuracy-squad.py --vocab_file fx/vocab.txt --val_data
  fx/dev-v1.1.json --log_file fx/mlperf_log_accuracy.json --out_file fx/predictions.json
  --features_cache_file fx/eval_features.pickle`` on the accuracy log that
  ``squad_fixture.accuracy_log(squad_fixture.logits(27, PEAKS))`` writes, printed
  FULL_LOG_LINE and wrote the predictions in PREDICTIONS; on the same log without windows
  13 and 20 and with window 0's response cut to its 82 tokens, PARTIAL_LOG_LINE.
* de-tokenization: FINAL_TEXTS are what ``get_final_text(pred, orig, True)``, imported
  from the same ``accuracy-squad.py``, returned.
* tokenizers: TOKENIZED are what transformers 5.24's ``BertTokenizer(vocab).tokenize``
  (features) and DeepLearningExamples' ``BasicTokenizer(do_lower_case=True).tokenize``
  (``get_final_text``) returned with GREEK_VOCAB. (Both were also compared with ours on
  20,000 random strings of capital and final sigmas, dotted I, combining marks, CJK,
  no-break and zero-width spaces, controls and special tokens: no difference.)
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from suite.errors import ConfigError, DatasetError, ModelError
from suite.tasks import TASKS
from suite.tasks.squad import INPUTS, OUTPUTS, SquadData, SquadTask, options_from
from suite.tasks.squad_eval import decode_logits, final_text, predict
from suite.tasks.squad_features import Options
from suite.tasks.squad_text import WordPiece, basic_tokenize
from tests.conftest import REPO
from tests.support import squad_fixture

FEATURES_SHA256 = "def7d17cc227697b8423fbc6d6a4412aff45fafb12a788eddefd294c20cba16a"
LAYOUT_SHA256 = "92bd1f5f988e53b115dab3e47c1725e38274a1504f52f7e2e5905c78c7e1d43c"
#: window -> (start, end) positions given a +20 logit (see squad_fixture.logits)
PEAKS = {0: (13, 16), 2: (39, 41), 3: (20, 25), 4: (39, 42), 5: (29, 31), 6: (44, 47),
         10: (100, 103), 13: (169, 172), 15: (377, 383), 16: (249, 259), 19: (284, 287),
         20: (156, 159), 23: (294, 290), 24: (100, 140), 25: (177, 180)}
FULL_LOG_LINE = '{"exact_match": 53.84615384615385, "f1": 66.3003663003663}'
PARTIAL_LOG_LINE = '{"exact_match": 38.46153846153846, "f1": 53.113553113553124}'
PREDICTIONS = {
    "curie-who": "Marie Skłodowska-Curie",     # projected back: accents and the dash kept
    "curie-born": "empty",                      # no valid span among the n-best
    "curie-research": "radioactivity.\u00a0She",  # alignment fails (NBSP): whole word
    "cafe-owner": "Jean-Luc O'Neill",           # the trailing comma dropped
    "cafe-price": "Prices:\u00a0$4.50",
    "cafe-language": "日本語",
    "exp-1": "station Bravo-1",
    "exp-9": "logbooks recorded 5 storms. In 1916, the expedition reached station "
             "Alpha-16, where the crew's",   # the peak's window is not max context
    "exp-12": "station Mike-12",                # answer inside the overlap, max-context window
    "exp-14": "recorded 5 storms. In 1916, the expedition",  # crosses window 0's edge
    "exp-17": "station Bravo-17",
    "exp-23": "1903, the expedition reached station Delta-3, where the crew's logbooks "
              "recorded 21 storms. In",      # the peak has its end before its start
    "exp-long-question": "Kilo-10,",            # question cut to 64 pieces
}

#: (predicted pieces' text, original words) -> the reference's get_final_text
FINAL_TEXTS = [
    ("steve smith", "Steve Smith's", "Steve Smith"),
    ("sep sign", "[SEP] sign", "[SEP] sign"),      # no match: [SEP] stays whole
    ("[SEP] sign", "a [SEP] sign", "[SEP] sign"),
    ("1895", "(1895-1943).", "1895"),
    ("cafe", "Café,", "Café"),
    ("marie sk", "Marie Skłodowska", "Marie Sk"),
    ("x", "y", "y"),                                # no match: the original words
    ("o ' neill", "O'Neill,", "O'Neill"),
    ("日 本", "日本語", "日本"),
    ("a", "\u00a0a", "\u00a0a"),                    # lengths differ: the original words
    ("istanbul", "İstanbul.", "İstanbul"),
]

GREEK_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "οδοσ", "οδος", "σας", "σασ",
               "a", "b", ".", "##σ", "##ς", "ο"]
#: text -> (the features' tokenizer, the basic tokenizer of get_final_text)
TOKENIZED = {
    "ΟΔΟΣ. ΣΑΣ": (["οδοσ", ".", "σασ"], ["οδος", ".", "σας"]),  # capital sigma, lowered
    "ΟΣ": (["ο", "##σ"], ["ος"]),
    "a[SEP]b": (["a", "[SEP]", "b"], ["a", "[", "sep", "]", "b"]),
}


@pytest.mark.parametrize("text", sorted(TOKENIZED))
def test_tokenizers_are_the_references(text: str) -> None:
    tokenizer = WordPiece({token: i for i, token in enumerate(GREEK_VOCAB)})
    assert (tokenizer.tokenize(text), basic_tokenize(text)) == TOKENIZED[text]


@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return squad_fixture.write(tmp_path_factory.mktemp("squad"))


@pytest.fixture(scope="module")
def data(fixture_dir: Path) -> SquadData:
    return SquadTask().open(fixture_dir, None)


def _responses(drop: tuple[int, ...] = ()) -> dict[int, bytes]:
    values = squad_fixture.logits(27, PEAKS)
    return {entry["qsl_idx"]: bytes.fromhex(entry["data"])
            for entry in squad_fixture.accuracy_log(values) if entry["qsl_idx"] not in drop}


def test_registered_under_the_cards_task() -> None:
    assert TASKS["question-answering"] == "suite.tasks.squad:SquadTask"
    assert SquadTask.name == "question-answering"


def test_the_card_matches_the_module_and_the_round() -> None:
    card = tomllib.loads((REPO / "reference_models" / "bert" / "model.toml")
                         .read_text(encoding="utf-8"))
    assert card["task"] == SquadTask.name
    assert [i["name"] for i in card["inputs"]] == list(INPUTS)
    assert [o["name"] for o in card["outputs"]] == list(OUTPUTS)
    assert options_from(SimpleNamespace(task_options=card["task_options"])) == Options()
    rules = tomllib.loads((REPO / "run_rules" / "v6.1.toml").read_text(encoding="utf-8"))
    assert card["accuracy"]["closed_target"] == rules["models"]["bert-99"]["targets"]["F1"]
    assert card["accuracy"]["closed_target_99_9"] == rules["models"]["bert-99.9"]["targets"][
        "F1"]
    assert card["dataset"]["total_samples"] == rules["models"]["bert-99"]["dataset_size"]


def test_features_are_the_references(data: SquadData) -> None:
    built = data.built
    assert data.total_count == 27
    for name in ("input_ids", "input_mask", "segment_ids"):
        array = getattr(built, name)
        assert array.dtype == np.int64 and array.shape == (27, 384)
    digest = hashlib.sha256(built.input_ids.tobytes() + built.input_mask.tobytes()
                            + built.segment_ids.tobytes()).hexdigest()
    assert digest == FEATURES_SHA256
    vocab = data.vocab_file.read_text(encoding="utf-8").split("\n")
    layout = []
    for row, feature in enumerate(built.features):
        context = built.examples[feature.example].context
        question = [vocab[int(i)] for i in built.input_ids[row, 1:feature.offset - 1]]
        pieces = context.pieces[feature.start:feature.start + feature.length]
        layout.append([feature.example, feature.span,
                       [[feature.offset + i, context.piece_word[feature.start + i]]
                        for i in range(feature.length)],
                       [[feature.offset + i, flag] for i, flag in enumerate(feature.max_context)],
                       ["[CLS]", *question, "[SEP]", *pieces, "[SEP]"]])
    assert hashlib.sha256(json.dumps(layout, ensure_ascii=False).encode()
                          ).hexdigest() == LAYOUT_SHA256


def test_inputs_are_a_features_rows(data: SquadData) -> None:
    sample = data.inputs(7)
    assert sorted(sample) == ["input_ids", "input_mask", "segment_ids"]
    assert all(array.shape == (384,) and array.dtype == np.int64 for array in sample.values())
    feature = data.built.features[7]
    assert int(sample["input_mask"].sum()) == feature.token_count
    assert int(sample["segment_ids"].sum()) == feature.length + 1


def test_score_is_the_references_on_a_full_log(data: SquadData) -> None:
    score = SquadTask().score(data, _responses())
    assert score.lines == (FULL_LOG_LINE,)
    assert score.metric == "F1" and score.value == pytest.approx(66.3003663003663, abs=1e-12)
    assert score.details["exact_match"] == pytest.approx(53.84615384615385, abs=1e-12)


def test_predictions_are_the_references(data: SquadData) -> None:
    responses = _responses()
    built = data.built
    for number, example in enumerate(built.examples):
        windows = [i for i, f in enumerate(built.features) if f.example == number]
        logits = [decode_logits(responses[i], 384) for i in windows]
        text = predict(example, [built.features[i] for i in windows], logits, data.options)
        assert text == PREDICTIONS[example.qas_id], example.qas_id


@pytest.mark.parametrize(("predicted", "original", "expected"), FINAL_TEXTS)
def test_final_text_is_the_references(predicted: str, original: str, expected: str) -> None:
    assert final_text(predicted, original) == expected


def test_score_with_missing_windows_and_a_short_response(data: SquadData) -> None:
    responses = _responses(drop=(13, 20))
    values = squad_fixture.logits(27, PEAKS)
    responses[0] = values[0][:82].tobytes()  # only the window's tokens: padded with -10000
    assert SquadTask().score(data, responses).lines == (PARTIAL_LOG_LINE,)


def test_the_checkers_pattern_reads_our_line() -> None:
    rules = tomllib.loads((REPO / "run_rules" / "v6.1.toml").read_text(encoding="utf-8"))
    pattern = rules["submission"]["accuracy_patterns"]["F1"]
    match = re.match(pattern, FULL_LOG_LINE)
    assert match is not None and float(match.group(1)) == pytest.approx(66.3003663003663)


def test_a_bad_response_names_its_sample(data: SquadData) -> None:
    responses = _responses()
    responses[5] = b"\x00" * 13
    with pytest.raises(DatasetError, match="sample 5 is 13 bytes"):
        SquadTask().score(data, responses)


def test_response_is_the_stacked_float32_logits() -> None:
    start = np.arange(384, dtype=np.float32)
    end = -np.arange(384, dtype=np.float32)
    data = SquadTask().response(0, {"output_start_logits": start, "output_end_logits": end})
    pairs = np.frombuffer(data, dtype=np.float32).reshape(384, 2)
    assert len(data) == 384 * 2 * 4
    assert np.array_equal(pairs[:, 0], start) and np.array_equal(pairs[:, 1], end)


def test_infer_calls_the_model_once_and_splits_its_outputs(data: SquadData) -> None:
    calls: list[int] = []

    def call(inputs: Any) -> dict[str, Any]:
        calls.append(len(inputs["input_ids"]))
        ids = inputs["input_ids"].astype(np.float32)
        return {"output_start_logits": ids, "output_end_logits": -ids}

    outputs = SquadTask().infer(call, [data.inputs(i) for i in range(5)])
    assert calls == [5] and len(outputs) == 5
    assert np.array_equal(outputs[3]["output_start_logits"], data.inputs(3)["input_ids"])
    with pytest.raises(ModelError, match="output_end_logits"):
        SquadTask().infer(lambda inputs: {"output_start_logits": inputs["input_ids"]},
                          [data.inputs(0)])


def test_a_quick_run_scores_the_questions_its_windows_reach(fixture_dir: Path) -> None:
    quick = SquadTask().open(fixture_dir, None, count=8)
    assert quick.total_count == 8
    assert [e.qas_id for e in quick.built.examples][-1] == "exp-1"  # windows 6..8: exp-1
    assert np.array_equal(quick.built.input_ids, SquadTask().open(
        fixture_dir, None).built.input_ids[:8])
    score = SquadTask().score(quick, {i: r for i, r in _responses().items() if i < 8})
    assert score.details["questions"] == 7


def test_card_options_change_the_windows(fixture_dir: Path) -> None:
    card = SimpleNamespace(task_options={"doc_stride": 64, "source": "notes are ignored"})
    narrow = SquadTask().open(fixture_dir, card)
    assert narrow.options.doc_stride == 64 and narrow.total_count > 27
    with pytest.raises(ConfigError, match=r"\[task_options\] doc_stride = '64'"):
        SquadTask().open(fixture_dir, SimpleNamespace(task_options={"doc_stride": "64"}))


def test_features_are_cached_by_content(fixture_dir: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    first = SquadTask(cache_dir=tmp_path).open(fixture_dir, None)
    assert len(list(tmp_path.glob("squad-features-*.pickle"))) == 1

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("features rebuilt despite the cache")

    monkeypatch.setattr("suite.tasks.squad.build_features", refuse)
    again = SquadTask(cache_dir=tmp_path).open(fixture_dir, None)
    assert np.array_equal(again.built.input_ids, first.built.input_ids)
    assert again.built.features == first.built.features


def test_the_references_vocab_folder_is_found(fixture_dir: Path, tmp_path: Path) -> None:
    shutil.copy(fixture_dir / "dev-v1.1.json", tmp_path / "dev-v1.1.json")
    (tmp_path / "bert_tf_v1_1_large_fp32_384_v2").mkdir()
    shutil.copy(fixture_dir / "vocab.txt", tmp_path / "bert_tf_v1_1_large_fp32_384_v2")
    assert SquadTask().open(tmp_path, None).total_count == 27


@pytest.mark.parametrize(("damage", "message"), [
    ("no-dir", r"directory .*nowhere does not exist"),
    ("no-json", r"dev-v1\.1\.json is missing"),
    ("no-vocab", r"vocab\.txt is missing"),
    ("truncated-json", r"dev-v1\.1\.json: not valid JSON \(line 1"),
    ("not-squad", r"dev-v1\.1\.json: data\[0\]\.paragraphs\[0\] has no str 'context'"),
    ("not-bert-vocab", r"vocab\.txt: not a BERT vocabulary \(no \[CLS\]\)"),
])
def test_a_bad_dataset_is_one_line_naming_the_file(fixture_dir: Path, tmp_path: Path,
                                                   damage: str, message: str) -> None:
    target = tmp_path / "nowhere" if damage == "no-dir" else tmp_path
    if damage != "no-dir":
        shutil.copy(fixture_dir / "dev-v1.1.json", tmp_path / "dev-v1.1.json")
        shutil.copy(fixture_dir / "vocab.txt", tmp_path / "vocab.txt")
    if damage == "no-json":
        (tmp_path / "dev-v1.1.json").unlink()
    elif damage == "no-vocab":
        (tmp_path / "vocab.txt").unlink()
    elif damage == "truncated-json":
        text = (tmp_path / "dev-v1.1.json").read_text(encoding="utf-8")
        (tmp_path / "dev-v1.1.json").write_text(text[:500], encoding="utf-8")
    elif damage == "not-squad":
        document = json.loads((tmp_path / "dev-v1.1.json").read_text(encoding="utf-8"))
        del document["data"][0]["paragraphs"][0]["context"]
        (tmp_path / "dev-v1.1.json").write_text(json.dumps(document), encoding="utf-8")
    elif damage == "not-bert-vocab":
        lines = (tmp_path / "vocab.txt").read_text(encoding="utf-8").split("\n")
        (tmp_path / "vocab.txt").write_text("\n".join(t for t in lines if t != "[CLS]"),
                                            encoding="utf-8")
    with pytest.raises(DatasetError, match=message) as caught:
        SquadTask().open(target, None)
    assert "\n" not in str(caught.value) and caught.value.hint


def test_the_stand_in_round_trips_through_onnxruntime(tmp_path: Path) -> None:
    ort = pytest.importorskip("onnxruntime", reason="the stand-in runs on onnxruntime")
    task = SquadTask()
    stand_in = task.write_stand_in(tmp_path / "a", samples=48, seed=3)
    data = task.open(stand_in.dataset_dir, None)
    assert data.total_count == stand_in.samples >= 48
    assert max(f.span for f in data.built.features) >= 2  # contexts needing 3+ windows
    session = ort.InferenceSession(str(stand_in.model_path),
                                   providers=["CPUExecutionProvider"])
    assert [(i.name, i.type, i.shape[1]) for i in session.get_inputs()] == [
        (name, "tensor(int64)", 384) for name in ("input_ids", "input_mask", "segment_ids")]
    assert [(o.name, o.type, o.shape[1]) for o in session.get_outputs()] == [
        (name, "tensor(float)", 384) for name in ("output_start_logits", "output_end_logits")]

    def call(inputs: Any) -> dict[str, Any]:
        names = [o.name for o in session.get_outputs()]
        return dict(zip(names, session.run(names, dict(inputs)), strict=True))

    outputs = task.infer(call, [data.inputs(i) for i in range(data.total_count)])
    responses = {i: task.response(i, out) for i, out in enumerate(outputs)}
    score = task.score(data, responses)
    assert 0.0 < score.value < 100.0 and score.details["exact_match"] > 0.0
    again = task.write_stand_in(tmp_path / "b", samples=48, seed=3)
    for name in ("dev-v1.1.json", "vocab.txt", "bert-standin.onnx"):
        assert (again.dataset_dir / name).read_bytes() == (stand_in.dataset_dir
                                                           / name).read_bytes()
