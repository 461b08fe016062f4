"""whisper on LibriSpeech dev-clean + dev-other: the ``speech-recognition`` task.

Owns, as ``mlcommons/inference`` ``speech2text`` defines it, the dataset as its prep
scripts leave it, the decode loop around the user's ONNX model, the response bytes and
the accuracy (features: ``whisper_features``; alphabet and WER: ``whisper_text``;
stand-in: ``whisper_standin``).

Dataset (``download_dataset.sh``): dev-clean and dev-other are copied into one
``dev-all`` folder, converted to 16 kHz wav with lower-cased transcripts
(``utils/convert_librispeech.py``), then each speaker-chapter's utterances are joined, in
manifest order with 0.5 s of silence between them, into clips of at most 30 s
(``utils/repackage_librispeech.py``). The dataset directory holds ``dev-all-repack.json``
(a JSON list; per clip ``transcript``, ``original_duration`` and ``files[]`` with
``fname`` and ``speed``) and the clips under ``dev-all-repack/``: 1633 samples, QSL index
= position in the manifest. As the reference's ``manifest.py``: clips over 30 s and
entries whose transcript is not a string are left out, the file is the ``speed == 1``
entry. ``fname`` is resolved inside the dataset directory: as written when relative,
else by its last two parts (the reference's docker prep writes ``/data/dev-all-repack/
<clip>.wav``); a name that climbs out of the directory is refused.

Model (ours; the reference runs the Hugging Face checkpoint in vLLM): one ONNX file
taking ``input_features`` (float32 ``[batch, 128, 3000]``) and ``decoder_input_ids``
(int64 ``[batch, tokens]``), giving ``logits`` (float32 ``[batch, tokens, vocab]``): the
forward signature of ``WhisperForConditionalGeneration`` (``optimum-cli export onnx
--monolith``). Next to it, the model folder's ``tokenizer.json`` and ``normalizer.json``.
Decoding as the reference's vLLM call: the prompt ``<|startoftranscript|><|en|>
<|transcribe|><|notimestamps|>``, greedy (temperature 0: argmax over the whole
vocabulary), at most 200 new tokens, stopping at ``<|endoftext|>``; the text is the
decoded tokens without special tokens. The encoder runs again at every step (no KV cache
in this contract): exact, slow for the real model.
"""

from __future__ import annotations

import json
import os
import wave
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from suite.errors import DatasetError, ModelError, SuiteError
from suite.tasks import whisper_features as features
from suite.tasks import whisper_text as text
from suite.tasks.base import Arrays, ModelCall, StandIn, TaskScore, stack
from suite.tasks.whisper_names import (
    DECODER_INPUT,
    EOS_TOKEN,
    INPUT,
    MANIFEST,
    MAX_DURATION_S,
    MAX_NEW_TOKENS,
    OUTPUT,
    PROMPT_TOKENS,
    SPELLING_MAP,
    TOKENIZER,
    TOTAL_SAMPLES,
)


@dataclass(frozen=True)
class Clip:
    """One manifest entry the reference keeps."""

    audio: Path
    transcript: str
    duration: float


class LibriSpeechData:
    """The opened dataset: clips in manifest order, the tokenizer and the spelling map."""

    def __init__(self, root: Path, clips: list[Clip], dropped: int, model_dir: Path) -> None:
        self.root, self.clips, self.dropped = root, clips, dropped
        self.total_count = len(clips)
        self.model_dir = model_dir
        self._tokenizer: Any = None

    @property
    def tokenizer(self) -> Any:
        """The model folder's tokenizer, read on first use."""
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self.model_dir)
        return self._tokenizer

    def inputs(self, index: int) -> dict[str, npt.NDArray[Any]]:
        return {INPUT: features.log_mel(features.read_wav(self.clips[index].audio))}

    def describe(self) -> dict[str, Any]:
        return {"name": "librispeech-dev-clean+dev-other (repackaged <= 30 s)",
                "total": self.total_count, "manifest": str(self.root / MANIFEST),
                "complete": self.total_count == TOTAL_SAMPLES,
                "left_out": self.dropped,
                "hours": round(sum(c.duration for c in self.clips) / 3600, 4),
                "tokenizer": str(self.model_dir / TOKENIZER),
                "spelling_map": str(self.model_dir / SPELLING_MAP)}


def _entry_error(manifest: Path, i: int, what: str) -> DatasetError:
    return DatasetError(f"{manifest}: entry {i}: {what}",
                        hint="re-create it with speech2text/download_dataset.sh (or the "
                             "MLCommons preprocessed download)")


def resolve_audio(root: Path, manifest: Path, i: int, fname: str) -> Path:
    """The file a manifest ``fname`` names inside ``root`` (see the module docstring)."""
    name = PurePosixPath(fname.replace("\\", "/"))
    candidates: list[Path] = []
    if not name.is_absolute():
        if ".." in name.parts:
            raise _entry_error(manifest, i, f"fname {fname!r} points outside {root}")
        candidates.append(root / Path(*name.parts))
    if len(name.parts) >= 2 and ".." not in name.parts[-2:]:
        candidates.append(root / Path(*name.parts[-2:]))
    for path in candidates:
        if path.is_file():
            return path
    shown = candidates[0] if candidates else root / fname
    raise DatasetError(f"{manifest}: entry {i}: audio file {shown} not found (fname "
                       f"{fname!r})", hint=f"the clips belong under {root}/dev-all-repack/")


def _check_header(path: Path) -> None:
    try:
        with wave.open(str(path), "rb") as reader:
            rate, channels, width = (reader.getframerate(), reader.getnchannels(),
                                     reader.getsampwidth())
    except (wave.Error, EOFError, OSError) as exc:
        raise DatasetError(f"{path}: not a readable wav file ({exc})",
                           hint="the clips are 16 kHz mono 16-bit PCM wav") from None
    if (rate, channels, width) != (features.SAMPLE_RATE, 1, 2):
        features.read_wav(path)  # raises its one-line error


def read_manifest(root: Path) -> tuple[list[Clip], int]:
    """The clips ``manifest.py`` keeps, in order, and how many it leaves out."""
    manifest = root / MANIFEST
    if not root.is_dir():
        raise DatasetError(f"{root}: dataset directory not found",
                           hint="download the whisper dataset (speech2text/README.md)")
    try:
        entries = json.loads(manifest.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError(f"{manifest}: manifest not found",
                           hint="the dataset directory holds dev-all-repack.json and "
                                "dev-all-repack/ (speech2text/download_dataset.sh)") from None
    except (OSError, ValueError) as exc:
        raise DatasetError(f"{manifest}: not valid JSON ({exc})",
                           hint="re-create it with speech2text/download_dataset.sh") from None
    if not isinstance(entries, list):
        raise DatasetError(f"{manifest}: not a JSON list of clips",
                           hint="re-create it with speech2text/download_dataset.sh")
    clips: list[Clip] = []
    dropped = 0
    for i, entry in enumerate(entries):
        try:
            duration = float(entry["original_duration"])
            transcript = entry["transcript"]
            names = [f["fname"] for f in entry["files"] if f.get("speed") == 1]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise _entry_error(manifest, i, f"missing or malformed key {exc}") from None
        if duration > MAX_DURATION_S or not isinstance(transcript, str):
            dropped += 1
            continue
        if not names or not isinstance(names[0], str):
            raise _entry_error(manifest, i, "no files[] entry with speed 1 and a fname")
        audio = resolve_audio(root, manifest, i, names[0])
        _check_header(audio)
        clips.append(Clip(audio, transcript, duration))
    if not clips:
        raise DatasetError(f"{manifest}: no clip of at most {MAX_DURATION_S:g} s",
                           hint="re-create it with speech2text/download_dataset.sh")
    return clips, dropped


def load_tokenizer(model_dir: Path) -> Any:
    """The model folder's ``tokenizer.json`` (``tokenizers``, imported here)."""
    path = model_dir / TOKENIZER
    if not path.is_file():
        raise ModelError(f"{path}: the model's tokenizer not found",
                         hint="copy tokenizer.json from openai/whisper-large-v3 next to "
                              "the ONNX model")
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise SuiteError("whisper's tokenizer needs the tokenizers package",
                         hint="pip install 'infersuite[whisper]'") from None
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception on a bad file
        raise ModelError(f"{path}: not a tokenizers file ({exc})",
                         hint="use tokenizer.json of openai/whisper-large-v3") from None
    for token in (*PROMPT_TOKENS, EOS_TOKEN):
        if tokenizer.token_to_id(token) is None:
            raise ModelError(f"{path}: no special token {token}",
                             hint="use tokenizer.json of openai/whisper-large-v3")
    return tokenizer


def _model_dir(card: Any, dataset_dir: Path) -> Path:
    """The folder of the card's model file (``tokenizer.json`` and ``normalizer.json``
    beside it); the dataset directory when the card names no model file."""
    model_path = getattr(card, "model_path", None)
    if model_path is None:
        return dataset_dir
    # resolved: a linked model file (the stand-in's) has its tokenizer beside its target
    path = Path(os.fspath(model_path)).resolve()
    return path if path.is_dir() else path.parent


class WhisperTask:
    """``TensorTask`` for whisper-large-v3 (``speech-recognition``)."""

    name: ClassVar[str] = "speech-recognition"

    def __init__(self) -> None:
        self._data: LibriSpeechData | None = None

    def open(self, dataset_dir: Path, card: Any, *, count: int | None = None
             ) -> LibriSpeechData:
        root = Path(dataset_dir)
        clips, dropped = read_manifest(root)
        if count is not None:
            clips = clips[:count]
        self._data = LibriSpeechData(root, clips, dropped, _model_dir(card, root))
        if getattr(card, "model_path", None) is not None:
            _ = self._data.tokenizer  # a run learns of a bad tokenizer before it starts
        return self._data

    def _opened(self) -> LibriSpeechData:
        if self._data is None:
            raise SuiteError("the whisper task was used before its dataset was opened",
                             hint="call open() first")
        return self._data

    def infer(self, call: ModelCall, samples: Sequence[Arrays]) -> list[Arrays]:
        tokenizer = self._opened().tokenizer
        prompt = [int(tokenizer.token_to_id(t)) for t in PROMPT_TOKENS]
        eos = int(tokenizer.token_to_id(EOS_TOKEN))
        feats = stack(samples)[INPUT]
        batch = feats.shape[0]
        ids = np.tile(np.asarray(prompt, dtype=np.int64), (batch, 1))
        done = np.zeros(batch, dtype=bool)
        counts = np.zeros(batch, dtype=np.int64)
        for _ in range(MAX_NEW_TOKENS):
            logits = call({INPUT: feats, DECODER_INPUT: ids})[OUTPUT]
            if logits.ndim != 3 or logits.shape[:2] != ids.shape:
                raise ModelError(f"the model's {OUTPUT} has shape {logits.shape}; expected "
                                 f"[batch, tokens, vocab] = [{batch}, {ids.shape[1]}, ...]",
                                 hint="the model takes input_features and "
                                      "decoder_input_ids and gives logits per position")
            nxt = np.where(done, eos, logits[:, -1, :].argmax(axis=-1)).astype(np.int64)
            counts += ~done
            done |= nxt == eos
            ids = np.concatenate([ids, nxt[:, None]], axis=1)
            if done.all():
                break
        out: list[Arrays] = []
        for row, n in zip(ids[:, len(prompt):], counts, strict=True):
            tokens = row[:n]
            out.append({"tokens": tokens[tokens != eos], "n_tokens": np.asarray(n)})
        return out

    def response(self, index: int, outputs: Arrays) -> bytes:
        tokenizer = self._opened().tokenizer
        ids = [int(t) for t in np.asarray(outputs["tokens"]).reshape(-1)]
        return text.encode_response(str(tokenizer.decode(ids, skip_special_tokens=True)))

    def score(self, data: Any, responses: Mapping[int, bytes]) -> TaskScore:
        if not isinstance(data, LibriSpeechData):
            raise SuiteError("the whisper task scores only a dataset it opened",
                             hint="pass the TaskData WhisperTask.open returned")
        missing = [i for i in range(data.total_count) if i not in responses]
        if missing:
            raise SuiteError(f"the accuracy log has no response for {len(missing)} of "
                             f"{data.total_count} samples (first: {missing[0]})",
                             hint="run the accuracy mode over the whole dataset")
        hyps = [text.decode_response(responses[i], i) for i in range(data.total_count)]
        refs = [text.filter_text(c.transcript) for c in data.clips]
        normalize = text.load_normalizer(data.model_dir / SPELLING_MAP)
        wer, errors, words = text.corpus_wer(hyps, refs, normalize)
        return TaskScore(metric=text.METRIC, value=(1 - wer) * 100,
                         lines=(text.accuracy_line(wer),),
                         details={"wer": wer * 100, "word_errors": float(errors),
                                  "reference_words": float(words)})

    def write_stand_in(self, out: Path, *, samples: int = 24, seed: int = 0) -> StandIn:
        from suite.tasks.whisper_standin import write_stand_in

        return write_stand_in(Path(out), samples=samples, seed=seed)
