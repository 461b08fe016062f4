"""The whisper stand-in: a tiny LibriSpeech-layout dataset and a tiny ONNX "whisper".

Owns ``WhisperTask.write_stand_in``. Offline, seeded, in about a second:

* ``dataset/dev-all-repack.json`` and ``dataset/dev-all-repack/*.wav`` in the
  reference's layout (16 kHz mono 16-bit PCM, lower-case transcripts): each clip says one
  word per second, a word being a pure tone of its own pitch; one clip is silent with an
  empty transcript; every fourth transcript has one word the clip does not say, so the
  word error rate is real (about 4 %) and the same on every machine;
* ``model/model.onnx`` with the official contract (``input_features``,
  ``decoder_input_ids`` -> ``logits``), built with ``onnx.helper``: the mean log-mel
  spectrum of each 1 s window (100 frames) is matched against each word's spectrum and
  silence's (a linear layer: -|x - t|^2 up to a constant), silence being
  ``<|endoftext|>``, and decoder position p (after the 4 prompt tokens) reads window
  p - 3; with greedy decoding it transcribes each tone back to its word;
* ``model/tokenizer.json`` (a word-level ``tokenizers`` file with whisper's special
  tokens) and ``model/normalizer.json`` (a few British -> American spellings).
"""

from __future__ import annotations

import json
import wave
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from suite.tasks import whisper_features as features
from suite.tasks.base import StandIn
from suite.tasks.whisper_names import (
    DECODER_INPUT,
    EOS_TOKEN,
    INPUT,
    MANIFEST,
    OUTPUT,
    PROMPT_TOKENS,
    SPELLING_MAP,
    TOKENIZER,
)

#: The words the stand-in says; the normaliser rewrites some (colour, mr, ten, it's).
WORDS = ("the", "cat", "sat", "on", "mat", "ten", "two", "colour", "mr", "smith",
         "red", "blue", "green", "runs", "fast", "slow", "and", "it's", "dog", "home")
#: Written into transcripts in place of a said word (never said: a substitution).
NEVER_SAID = ("house", "tree", "bird")
SPELLINGS = {"colour": "color", "favourite": "favorite", "theatre": "theater"}
WINDOW_FRAMES = 100  # one word per second
WINDOWS = features.N_FRAMES // WINDOW_FRAMES  # 30
PROMPT_LEN = len(PROMPT_TOKENS)
AMPLITUDE = 0.25


def _tone_hz(word: int) -> float:
    mel = np.linspace(300.0, 2100.0, len(WORDS))[word]  # on the HTK mel scale
    return float(700.0 * (10 ** (mel / 2595.0) - 1.0))


def _say(words: list[int]) -> npt.NDArray[np.float64]:
    """One second per word: a tone with 10 ms fades; silence after the last."""
    rate = features.SAMPLE_RATE
    t = np.arange(rate) / rate
    fade = np.minimum(1.0, np.minimum(t, 1.0 - t) / 0.01)
    parts = [AMPLITUDE * fade * np.sin(2 * np.pi * _tone_hz(w) * t) for w in words]
    parts.append(np.zeros(rate // 2))
    return np.concatenate(parts)


def _write_wav(path: Path, audio: npt.NDArray[np.float64]) -> None:
    pcm = np.clip(np.round(audio * 32767.0), -32768, 32767).astype("<i2")
    with wave.open(str(path), "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(features.SAMPLE_RATE)
        writer.writeframes(pcm.tobytes())


def _window_means(audio: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``[WINDOWS, n_mels]``: the mean log-mel spectrum of each 1 s window."""
    mel = features.log_mel(audio).astype(np.float64)
    means: npt.NDArray[np.float64] = mel.reshape(features.N_MELS, WINDOWS,
                                                 WINDOW_FRAMES).mean(axis=2).T
    return means


def _templates() -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """``[n_mels, words + 1]`` weights and ``[words + 1]`` biases scoring a window by its
    negative squared distance to each word's spectrum (its window in
    one clip saying every word in turn) and, last, to silence (the mean of the windows
    after it), up to the window's own squared norm, the same for every column."""
    windows = _window_means(_say(list(range(len(WORDS)))))
    spectra = [*windows[: len(WORDS)], windows[len(WORDS) + 2:].mean(axis=0)]
    table = np.stack(spectra)
    weight = (2.0 * table.T).astype(np.float32)
    bias = (-(table ** 2).sum(axis=1)).astype(np.float32)
    return weight, bias


#: What the silent clip decodes to before <|endoftext|>: LoadGen's token latencies need two
#: tokens at least a sample (as a real whisper says something on silence), and the
#: reference's response keeps letters, space and apostrophe only, so it logs nothing.
FIRST_ON_SILENCE = "."


def _vocab() -> dict[str, int]:
    specials = (EOS_TOKEN, *PROMPT_TOKENS)
    return {**{w: i for i, w in enumerate((*WORDS, *NEVER_SAID))},
            **{t: len(WORDS) + len(NEVER_SAID) + i for i, t in enumerate(specials)},
            FIRST_ON_SILENCE: len(WORDS) + len(NEVER_SAID) + len(specials)}


def _model(path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    vocab = _vocab()
    size, eos = len(vocab), vocab[EOS_TOKEN]
    weight, bias = _templates()
    w_full = np.zeros((features.N_MELS, size), dtype=np.float32)
    w_full[:, : len(WORDS)], w_full[:, eos] = weight[:, :-1], weight[:, -1]
    b_full = np.full(size, -1e9, dtype=np.float32)  # never said, specials: never chosen
    b_full[: len(WORDS)], b_full[eos] = bias[:-1], bias[-1]
    # "." scores as <|endoftext|> does, and stands in for it at the first step only.
    dot = vocab[FIRST_ON_SILENCE]
    w_full[:, dot], b_full[dot] = w_full[:, eos], b_full[eos]
    # The row read past the last window: <|endoftext|> only.
    tail = np.zeros((WINDOWS + 1, size), dtype=np.float32)
    tail[WINDOWS] = -1e9
    tail[WINDOWS, eos] = 0.0
    tail[0, eos], tail[1:, dot] = -1e9, -1e9

    def const(name: str, value: npt.NDArray[Any]) -> Any:
        return numpy_helper.from_array(value, name)

    nodes = [
        helper.make_node("Reshape", [INPUT, "win_shape"], ["windows"]),
        helper.make_node("ReduceMean", ["windows", "axis3"], ["means"], keepdims=0),
        helper.make_node("Transpose", ["means"], ["per_window"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["per_window", "weight"], ["scores0"]),
        helper.make_node("Add", ["scores0", "bias"], ["scores1"]),
        helper.make_node("Pad", ["scores1", "pads"], ["scores2"]),
        helper.make_node("Add", ["scores2", "tail"], ["scores"]),
        helper.make_node("Shape", [DECODER_INPUT], ["ids_shape"]),
        helper.make_node("Gather", ["ids_shape", "one"], ["length"], axis=0),
        helper.make_node("Range", ["zero", "length", "one"], ["positions"]),
        helper.make_node("Sub", ["positions", "prompt_off"], ["shifted"]),
        helper.make_node("Clip", ["shifted", "zero", "last"], ["window_of"]),
        helper.make_node("Gather", ["scores", "window_of"], [OUTPUT], axis=1),
    ]
    inits = [
        const("win_shape", np.array([-1, features.N_MELS, WINDOWS, WINDOW_FRAMES], np.int64)),
        const("axis3", np.array([3], np.int64)),
        const("weight", w_full), const("bias", b_full),
        const("pads", np.array([0, 0, 0, 0, 1, 0], np.int64)),
        const("tail", tail),
        const("zero", np.array(0, np.int64)), const("one", np.array(1, np.int64)),
        const("prompt_off", np.array(PROMPT_LEN - 1, np.int64)),
        const("last", np.array(WINDOWS, np.int64)),
    ]
    graph = helper.make_graph(
        nodes, "whisper_stand_in",
        [helper.make_tensor_value_info(INPUT, TensorProto.FLOAT,
                                       ["batch", features.N_MELS, features.N_FRAMES]),
         helper.make_tensor_value_info(DECODER_INPUT, TensorProto.INT64,
                                       ["batch", "tokens"])],
        [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT,
                                       ["batch", "tokens", size])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)],
                              producer_name="infersuite-stand-in")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def _tokenizer(path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel(_vocab(), unk_token=EOS_TOKEN))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.add_special_tokens([EOS_TOKEN, *PROMPT_TOKENS])
    tokenizer.save(str(path))


def _clips(samples: int, seed: int) -> list[tuple[list[int], str]]:
    """(words said, transcript) per clip: clip 1 silent with an empty transcript."""
    rng = np.random.default_rng(seed)
    out: list[tuple[list[int], str]] = []
    for i in range(samples):
        if i == 1:
            out.append(([], ""))
            continue
        said = [int(w) for w in rng.integers(0, len(WORDS), size=int(rng.integers(2, 13)))]
        words = [WORDS[w] for w in said]
        if i % 4 == 3:
            words[int(rng.integers(0, len(words)))] = NEVER_SAID[i % len(NEVER_SAID)]
        out.append((said, " ".join(words)))
    return out


def write_stand_in(out: Path, *, samples: int, seed: int) -> StandIn:
    """Write the stand-in dataset and model under ``out`` (see the module docstring)."""
    dataset, model_dir = out / "dataset", out / "model"
    clips_dir = dataset / "dev-all-repack"
    clips_dir.mkdir(parents=True, exist_ok=True)
    model_dir.mkdir(parents=True, exist_ok=True)
    entries = []
    for i, (said, transcript) in enumerate(_clips(max(samples, 2), seed)):
        audio = _say(said)
        fname = f"dev-all-repack/standin-{i // 8}_{i % 8}.wav"
        _write_wav(dataset / fname, audio)
        duration = len(audio) / features.SAMPLE_RATE
        entries.append({
            "transcript": transcript,
            "files": [{"channels": 1, "sample_rate": float(features.SAMPLE_RATE),
                       "bitdepth": 16, "duration": duration, "num_samples": len(audio),
                       "encoding": "Signed Integer PCM", "fname": fname, "speed": 1}],
            "original_duration": duration, "original_num_samples": len(audio)})
    (dataset / MANIFEST).write_text(json.dumps(entries, indent=2), encoding="utf-8")
    _model(model_dir / "model.onnx")
    _tokenizer(model_dir / TOKENIZER)
    (model_dir / SPELLING_MAP).write_text(json.dumps(SPELLINGS, indent=2), encoding="utf-8")
    return StandIn(dataset_dir=dataset, model_path=model_dir / "model.onnx",
                   samples=len(entries))
