"""Whisper's audio front end for the speech-recognition task (``suite.tasks.librispeech``).

Owns reading the reference's 16 kHz mono 16-bit PCM wav clips (stdlib ``wave``) and the
log-mel spectrogram whisper-large-v3 takes as ``input_features``: the reference
(``speech2text/reference_SUT.py``: ``n_mels = 128``, ``sample_rate = 16000``) hands the
waveform to vLLM, whose Whisper processor is Hugging Face's ``WhisperFeatureExtractor``
with the model's ``preprocessor_config.json`` (feature_size 128, n_fft 400, hop 160,
chunk 30 s). The steps, computed here with numpy:

1. the waveform as float (int16 / 32768, what ``librosa.load`` gives for 16-bit PCM),
   zero-padded or cut to 30 s (480000 samples); the reference's FAQ forbids shorter inputs;
2. a centred STFT (reflect padding of n_fft // 2), periodic Hann window of 400, hop 160;
   power spectrum; the last frame dropped (3001 -> 3000 frames);
3. a 128-band mel filterbank on the Slaney mel scale with Slaney (area) normalisation,
   0 to 8000 Hz; ``log10(max(mel, 1e-10))``;
4. clamped below at (max - 8), then ``(x + 4) / 4``; float32 ``[128, 3000]``.
"""

from __future__ import annotations

import wave
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from suite.errors import DatasetError

SAMPLE_RATE = 16000
N_FFT = 400
HOP_LENGTH = 160
N_MELS = 128
CHUNK_SECONDS = 30
N_SAMPLES = SAMPLE_RATE * CHUNK_SECONDS  # 480000
N_FRAMES = N_SAMPLES // HOP_LENGTH  # 3000

#: The Slaney mel scale: linear below 1 kHz (3 mels per 200 Hz), logarithmic above.
_MEL_BREAK_HZ = 1000.0
_MEL_LINEAR = 200.0 / 3.0
_MEL_LOG_STEP = float(np.log(6.4) / 27.0)


def read_wav(path: Path) -> npt.NDArray[np.float32]:
    """The samples of a 16 kHz mono 16-bit PCM wav as float32 in [-1, 1).

    Raises ``DatasetError`` naming the file on anything else (another rate, stereo, 8 or
    24-bit, not a wav)."""
    try:
        with wave.open(str(path), "rb") as reader:
            rate, channels = reader.getframerate(), reader.getnchannels()
            width, frames = reader.getsampwidth(), reader.getnframes()
            raw = reader.readframes(frames)
    except FileNotFoundError:
        raise DatasetError(f"{path}: audio file not found",
                           hint="the manifest names it; download or re-create the "
                                "dataset (speech2text/download_dataset.sh)") from None
    except (wave.Error, EOFError, OSError) as exc:
        raise DatasetError(f"{path}: not a readable wav file ({exc})",
                           hint="the dataset's clips are 16 kHz mono 16-bit PCM wav "
                                "(utils/repackage_librispeech.py)") from None
    if rate != SAMPLE_RATE or channels != 1 or width != 2:
        raise DatasetError(
            f"{path}: {rate} Hz, {channels} channel(s), {8 * width}-bit; whisper reads "
            f"{SAMPLE_RATE} Hz mono 16-bit PCM",
            hint="convert it (sox IN -r 16000 -c 1 -b 16 OUT.wav) or re-create the dataset")
    return (np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0).astype(np.float32)


def _hz_to_mel(hz: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    hz = np.asarray(hz, dtype=np.float64)
    log_part = (_MEL_BREAK_HZ / _MEL_LINEAR
                + np.log(np.maximum(hz, _MEL_BREAK_HZ) / _MEL_BREAK_HZ) / _MEL_LOG_STEP)
    return np.where(hz < _MEL_BREAK_HZ, hz / _MEL_LINEAR, log_part)


def _mel_to_hz(mel: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    mel = np.asarray(mel, dtype=np.float64)
    break_mel = _MEL_BREAK_HZ / _MEL_LINEAR
    log_part = _MEL_BREAK_HZ * np.exp(_MEL_LOG_STEP * (np.maximum(mel, break_mel) - break_mel))
    return np.where(mel < break_mel, mel * _MEL_LINEAR, log_part)


@lru_cache(maxsize=4)
def mel_filters(n_mels: int = N_MELS) -> npt.NDArray[np.float64]:
    """``[n_mels, N_FFT // 2 + 1]`` triangular filters, Slaney scale and area norm."""
    fft_hz = np.linspace(0.0, SAMPLE_RATE / 2, N_FFT // 2 + 1)
    edges_mel = np.linspace(_hz_to_mel(np.array(0.0)), _hz_to_mel(np.array(SAMPLE_RATE / 2)),
                            n_mels + 2)
    edges = _mel_to_hz(edges_mel)
    widths = np.diff(edges)
    offsets = edges[None, :] - fft_hz[:, None]  # [bins, n_mels + 2]
    rising = -offsets[:, :-2] / widths[:-1]
    falling = offsets[:, 2:] / widths[1:]
    bank = np.maximum(0.0, np.minimum(rising, falling))  # [bins, n_mels]
    area = 2.0 / (edges[2:] - edges[:-2])
    out: npt.NDArray[np.float64] = (bank * area[None, :]).T
    return out


@lru_cache(maxsize=1)
def _hann() -> npt.NDArray[np.float64]:
    n = np.arange(N_FFT, dtype=np.float64)
    window: npt.NDArray[np.float64] = 0.5 - 0.5 * np.cos(2.0 * np.pi * n / N_FFT)
    return window


def pad_or_trim(audio: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    """The waveform cut or zero-padded to exactly 30 s."""
    out = np.zeros(N_SAMPLES, dtype=np.float64)
    kept = audio[:N_SAMPLES]
    out[: kept.shape[0]] = kept
    return out


def log_mel(audio: npt.NDArray[Any], n_mels: int = N_MELS) -> npt.NDArray[np.float32]:
    """Whisper's ``input_features`` (``[n_mels, 3000]`` float32) of a 16 kHz waveform."""
    signal = pad_or_trim(audio)
    half = N_FFT // 2
    padded = np.pad(signal, (half, half), mode="reflect")
    n_frames = 1 + (padded.shape[0] - N_FFT) // HOP_LENGTH  # 3001
    frames = np.lib.stride_tricks.as_strided(
        padded, shape=(n_frames, N_FFT),
        strides=(padded.strides[0] * HOP_LENGTH, padded.strides[0]))
    spectrum = np.fft.rfft(frames * _hann(), axis=1)
    power = spectrum.real ** 2 + spectrum.imag ** 2  # [frames, bins]
    mel = mel_filters(n_mels) @ power[:-1].T  # [n_mels, 3000]
    log_spec = np.log10(np.maximum(mel, 1e-10))
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    out: npt.NDArray[np.float32] = ((log_spec + 4.0) / 4.0).astype(np.float32)
    return out
