"""whisper's task module (``suite.tasks.librispeech``): the reference's dataset layout,
its log-mel features, its response bytes, its WER, and the stand-in.

Reference figures (``EXPECTED_LINE``) are what ``speech2text/accuracy_eval.py`` of
mlcommons/inference @ b66003e10e2db4b8c36a448b0545ec90fcc6e9e9 printed on the fixture that
``build_fixture`` writes, with whisper's own normaliser (openai-whisper 20250625's
``whisper/normalizers``, its full ``english.json``):

    # from the worktree root: the fixture, and the accuracy log of its responses
    PYTHONPATH=$PWD .venv/bin/python -c "import json; from pathlib import Path; \\
      from tests.unit.tasks.test_librispeech import build_fixture as b; \\
      r = b(Path('/tmp/ref/fx')); Path('/tmp/ref/fx/log').mkdir(); \\
      json.dump([{'seq_id': i, 'qsl_idx': i, 'data': d.hex().upper()} \\
                 for i, d in r.items()], open('/tmp/ref/fx/log/mlperf_log_accuracy.json', 'w'))"
    # speech2text/{accuracy_eval,manifest,helpers,legacy_helpers}.py in /tmp/ref/s2t;
    # /tmp/ref/refpkgs: openai-whisper's whisper/normalizers (an empty whisper/__init__.py)
    # and more-itertools
    cd /tmp/ref/s2t && PYTHONPATH=/tmp/ref/refpkgs python accuracy_eval.py \\
        --log_dir /tmp/ref/fx/log --dataset_dir /tmp/ref/fx/dataset \\
        --manifest /tmp/ref/fx/dataset/dev-all-repack.json

It printed (after "WARNING: Got transcript: None. It is not a string. Dropping data
point") the line in ``EXPECTED_LINE``. The same steps on the stand-in (24 samples, seed
0) printed ``Word Error Rate: 3.825136612021858%, accuracy=96.17486338797814%``, what
``WhisperTask.score`` gives.
"""

from __future__ import annotations

import json
import types
import wave
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from suite.errors import DatasetError
from suite.tasks import TASKS
from suite.tasks import whisper_features as features
from suite.tasks import whisper_text as text
from suite.tasks.librispeech import WhisperTask
from suite.tasks.whisper_names import MANIFEST

#: (manifest transcript, what the model "said", clip seconds). The transcripts are as
#: the reference's prep writes them (lower case); the hypotheses are raw model text.
CASES: list[tuple[Any, str, float]] = [
    ("mister smith paid ten dollars for twenty one apples",
     "Mr. Smith paid $10 for 21 apples.", 3.0),
    ("", "Thank you.", 1.0),                                   # empty transcript
    ("the colour of the theatre", "The color of the theater.", 2.0),  # spelling map
    ("it is nineteen ninety nine", "It's 1999.", 2.5),         # numbers, contraction
    ("a football match", "a foot ball match", 1.5),            # concatenation rule
    ("some words are missing here", "some words missing", 2.0),  # deletions
    ("hello world", "", 1.0),                                  # nothing decoded
    ("o'neill's third visit", "O'Neill's 3rd visit!", 30.0),   # exactly 30 s
    ("cafe au lait", "Café au lait", 2.0),                     # é is not in the alphabet
    ("too long to keep", "unused", 31.0),                      # > 30 s: left out
    (None, "unused", 1.0),                                     # not a string: left out
]
#: speech2text/accuracy_eval.py's output on build_fixture (see the module docstring).
EXPECTED_LINE = "Word Error Rate: 21.21212121212121%, accuracy=78.78787878787878%"
SPELLINGS = {"colour": "color", "theatre": "theater", "favourite": "favorite"}


def write_wav(path: Path, audio: np.ndarray, rate: int = 16000, channels: int = 1) -> None:
    pcm = np.clip(np.round(audio * 32767), -32768, 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.repeat(pcm, channels).tobytes())


def chirp(seconds: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * 16000)) / 16000
    return 0.3 * np.sin(2 * np.pi * (200 + 300 * t) * t) + 0.02 * rng.standard_normal(t.size)


def entry(fname: str, transcript: Any, seconds: float) -> dict[str, Any]:
    n = int(seconds * 16000)
    return {"transcript": transcript, "original_duration": seconds,
            "original_num_samples": n,
            "files": [{"fname": fname, "speed": 1, "sample_rate": 16000.0,
                       "duration": seconds, "num_samples": n, "channels": 1}]}


def build_fixture(root: Path) -> dict[int, bytes]:
    """The dataset (``root/dataset``, the reference's layout; the docker prep's absolute
    ``/data/dev-all-repack/...`` names for half the clips), the spelling map, and the
    responses the reference SUT would log for ``CASES``' hypotheses (QSL order: the
    entries the manifest keeps)."""
    dataset = root / "dataset"
    (dataset / "dev-all-repack").mkdir(parents=True)
    entries: list[dict[str, Any]] = []
    responses: dict[int, bytes] = {}
    for i, (transcript, said, seconds) in enumerate(CASES):
        name = f"dev-all-repack/84-121123_{i}.wav"
        write_wav(dataset / name, chirp(seconds, i))
        entries.append(entry(f"/data/{name}" if i % 2 else name, transcript, seconds))
        if isinstance(transcript, str) and seconds <= 30:
            responses[len(responses)] = text.encode_response(said)
    (dataset / MANIFEST).write_text(json.dumps(entries), encoding="utf-8")
    (dataset / "normalizer.json").write_text(json.dumps(SPELLINGS), encoding="utf-8")
    return responses


@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, bytes]]:
    root = tmp_path_factory.mktemp("librispeech")
    return root / "dataset", build_fixture(root)


def test_registered() -> None:
    module, _, cls = TASKS["speech-recognition"].partition(":")
    assert (module, cls) == ("suite.tasks.librispeech", "WhisperTask")
    assert WhisperTask.name == "speech-recognition"


def test_card_states_what_the_module_does() -> None:
    """The card's facts and the code agree, and its target is the round's."""
    import tomllib

    from suite.tasks import whisper_names as task
    from tests.conftest import REPO

    card = tomllib.loads((REPO / "reference_models/whisper/model.toml").read_text())
    params = card["task_options"]
    assert card["task"] == WhisperTask.name
    assert card["dataset"]["total_samples"] == task.TOTAL_SAMPLES == 1633
    assert card["dataset"]["manifest"] == MANIFEST
    assert [i["name"] for i in card["inputs"]] == [task.INPUT, task.DECODER_INPUT]
    assert [o["name"] for o in card["outputs"]] == [task.OUTPUT]
    assert tuple(params["labels"]) == text.LABELS
    assert params["prompt"] == list(task.PROMPT_TOKENS)
    assert params["max_new_tokens"] == task.MAX_NEW_TOKENS
    assert (params["n_mels"], params["n_fft"], params["hop_length"], params["n_frames"]) == (
        features.N_MELS, features.N_FFT, features.HOP_LENGTH, features.N_FRAMES)
    rules = tomllib.loads((REPO / "run_rules/v6.1.toml").read_text())
    target = rules["models"]["whisper"]["targets"]["ACCURACY"]
    assert card["accuracy"]["closed_target"] == target == pytest.approx(
        (100 - card["accuracy"]["reference_wer"]) * 0.99, abs=1e-9)


def test_manifest_keeps_what_the_reference_keeps(fixture_dir: tuple[Path, Any],
                                                 tmp_path: Path) -> None:
    dataset, responses = fixture_dir
    data = WhisperTask().open(dataset, None)
    # the > 30 s clip and the null transcript are left out, as manifest.py does
    assert data.total_count == len(responses) == len(CASES) - 2
    assert data.describe()["left_out"] == 2
    assert [c.transcript for c in data.clips] == [c[0] for c in CASES[:9]]
    assert all(c.audio.is_relative_to(dataset) for c in data.clips)
    assert WhisperTask().open(dataset, None, count=3).total_count == 3


def test_wer_matches_the_reference_script(fixture_dir: tuple[Path, dict[int, bytes]]
                                          ) -> None:
    dataset, responses = fixture_dir
    task = WhisperTask()
    data = task.open(dataset, None)
    score = task.score(data, responses)
    assert score.lines == (EXPECTED_LINE,)
    assert score.metric == "ACCURACY"
    assert score.value == pytest.approx(78.78787878787878, abs=1e-12)
    assert (score.details["word_errors"], score.details["reference_words"]) == (7.0, 33.0)


def test_response_bytes_are_the_reference_sut_encoding() -> None:
    data = text.encode_response("  Mr. O'Neill paid $10.50 (+5%) - café!  ")
    ids = np.frombuffer(data, dtype="<i8").tolist()
    # lower-cased, stripped, out-of-alphabet characters (. ( ) ! é) dropped
    assert "".join(text.LABELS[i] for i in ids) == "mr o'neill paid $1050 +5% - caf"
    assert text.decode_response(data, 0) == "mr o'neill paid $1050 +5% - caf"
    assert text.encode_response("") == b""


def test_concatenation_rule_and_corpus_sums() -> None:
    # joined words on either side count as one match (helpers.py, up to 3 words)
    assert text.sample_errors(["foot", "ball", "match"], ["football", "match"]) == (0, 2)
    assert text.sample_errors(["football", "match"], ["foot", "ball", "match"]) == (0, 3)
    assert text.sample_errors(["a", "b", "c"], ["x"]) == (3, 1)
    # an empty reference adds errors and no words
    assert text.sample_errors(["thank", "you"], []) == (2, 0)

    def ident(s: str) -> str:
        return s

    assert text.corpus_wer(["a b", "c"], ["a x", ""], ident) == (1.0, 2, 2)
    with pytest.raises(DatasetError, match="every reference transcript is empty"):
        text.corpus_wer(["a"], [""], ident)


def test_features_match_transformers(tmp_path: Path) -> None:
    """Against ``WhisperFeatureExtractor(feature_size=128)`` (large-v3's
    preprocessor_config.json): its torch path (what runs where torch is installed, as in
    the reference's vLLM) within 1e-4, since torch computes the STFT in float32 (measured
    max 3e-5); its numpy path (float64, as ours) within 1e-6 (measured 1.2e-7, one float32
    step). Clips of 3 s, exactly 30 s and 31 s (cut to 30 s)."""
    transformers = pytest.importorskip("transformers", reason="transformers not installed")
    extractor = transformers.WhisperFeatureExtractor(feature_size=128)
    for i, seconds in enumerate((3.0, 30.0, 31.0)):
        write_wav(tmp_path / "a.wav", chirp(seconds, i))
        audio = features.read_wav(tmp_path / "a.wav")
        ours = features.log_mel(audio)
        assert ours.shape == (128, 3000) and ours.dtype == np.float32
        theirs = extractor(audio, sampling_rate=16000, return_tensors="np").input_features[0]
        assert np.abs(ours - theirs).max() < 1e-4
        cut = np.zeros(features.N_SAMPLES, np.float32)
        cut[: min(audio.size, cut.size)] = audio[: cut.size]
        theirs_np = extractor._np_extract_fbank_features(cut[None], "cpu")[0]
        assert np.abs(ours - theirs_np).max() < 1e-6


@pytest.mark.parametrize("damage, message", [
    ("no_manifest", "dev-all-repack.json: manifest not found"),
    ("missing_audio", "audio file .*84-121123_2.wav not found"),
    ("rate_8k", "8000 Hz, 1 channel\\(s\\), 16-bit; whisper reads 16000 Hz mono"),
    ("stereo", "16000 Hz, 2 channel\\(s\\)"),
    ("escapes", "entry 0: fname '../outside.wav' points outside"),
    ("no_key", "entry 0: missing or malformed key 'files'"),
])
def test_bad_dataset_is_one_line(tmp_path: Path, damage: str, message: str) -> None:
    build_fixture(tmp_path)
    dataset = tmp_path / "dataset"
    manifest = json.loads((dataset / MANIFEST).read_text())
    clip0 = dataset / "dev-all-repack/84-121123_0.wav"
    if damage == "no_manifest":
        (dataset / MANIFEST).unlink()
    elif damage == "missing_audio":
        (dataset / "dev-all-repack/84-121123_2.wav").unlink()
    elif damage == "rate_8k":
        write_wav(clip0, chirp(1.0, 0), rate=8000)
    elif damage == "stereo":
        write_wav(clip0, chirp(1.0, 0), channels=2)
    elif damage == "escapes":
        manifest[0]["files"][0]["fname"] = "../outside.wav"
    elif damage == "no_key":
        del manifest[0]["files"]
    if damage in ("escapes", "no_key"):
        (dataset / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(DatasetError, match=message) as err:
        WhisperTask().open(dataset, None)
    assert "\n" not in str(err.value) and err.value.hint


def test_stand_in_round_trips(tmp_path: Path) -> None:
    """The stand-in, written and scored through onnxruntime in seconds: every clip whose
    transcript is what it says decodes exactly; the planted substitutions give a stable,
    non-zero WER."""
    import onnxruntime as ort

    task = WhisperTask()
    stand_in = task.write_stand_in(tmp_path, samples=8, seed=3)
    data = task.open(stand_in.dataset_dir, types.SimpleNamespace(model_path=stand_in.model_path))
    assert data.total_count == stand_in.samples == 8
    session = ort.InferenceSession(str(stand_in.model_path), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["input_features", "decoder_input_ids"]
    assert [o.name for o in session.get_outputs()] == ["logits"]

    def call(arrays: Any) -> dict[str, np.ndarray]:
        return dict(zip(["logits"], session.run(None, dict(arrays)), strict=True))

    outputs = task.infer(call, [data.inputs(i) for i in range(data.total_count)])
    responses = {i: task.response(i, out) for i, out in enumerate(outputs)}
    said = [text.decode_response(responses[i], i) for i in range(8)]
    transcripts = [c.transcript for c in data.clips]
    assert transcripts[1] == said[1] == ""
    assert [s == t for s, t in zip(said, transcripts, strict=True)] == [
        i % 4 != 3 for i in range(8)]
    score = task.score(data, responses)
    assert 0 < score.details["word_errors"] == 2  # one planted word in clips 3 and 7
    assert score.lines[0].startswith("Word Error Rate: ")
    again = WhisperTask().write_stand_in(tmp_path / "again", samples=8, seed=3)
    assert again.model_path.read_bytes() == stand_in.model_path.read_bytes()
    assert (again.dataset_dir / MANIFEST).read_text() == (
        stand_in.dataset_dir / MANIFEST).read_text()
