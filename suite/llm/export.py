"""An LLM card's model in the layout real engines serve: Hugging Face GPT-2.

tinylm maps one to one onto GPT-2: learned token and position embeddings (``wte``,
``wpe``), pre-LN blocks (``ln_1``, ``attn.c_attn``, ``attn.c_proj``, ``ln_2``,
``mlp.c_fc``, ``mlp.c_proj``), the exact GELU (``activation_function = "gelu"``, not
``gelu_new``), a final ``ln_f`` and an LM head tied to ``wte``. GPT-2's linear layers are
``Conv1D`` (``x @ W + b`` with ``W`` of shape ``(in, out)``), so each ``nn.Linear`` weight
is transposed; the q/k/v split of ``c_attn`` is the same as ``qkv``'s.

The tokenizer goes in the ``tokenizers`` format: one word-level token per character, a
pre-tokenizer that isolates every character (newlines included) and a decoder that joins
them back without spaces. It has no unknown token: an engine that used the space as its
unknown token would strip every space.

``export_hf`` writes the directory and ``export.json`` (what was exported from what, and
the sha256 of every file); ``verify_hf`` loads the directory with ``transformers`` and
compares its greedy outputs with the in-process generation, token for token, and records
the outcome there too. torch, safetensors, tokenizers and transformers are imported only
here, when an export is asked for.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from suite.errors import ConfigError, SuiteError
from suite.llm.card import LLMCard, verify_weights
from suite.llm.dataset import CharTokenizer, LLMDataset
from suite.llm.generation import GenerationConfig, TorchGenerationBackend, generate
from suite.models import sha256_file

FORMATS = ("hf",)
RECORD = "export.json"
#: What the export writes (``export.json`` besides): a directory holding anything else
#: is not ours to overwrite.
FILES = ("model.safetensors", "config.json", "generation_config.json", "tokenizer.json",
         "tokenizer_config.json")

#: The export writes torch tensors and checks them with transformers: torch (the CPU
#: build, as the torch backend's hint says), then the ``hf`` extra.
_EXTRA = ("pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu, then "
          "pip install 'infersuite[hf]' (in a checkout: pip install -e '.[hf]')")


@dataclass(frozen=True)
class ExportCheck:
    """The exported model against the in-process one, on the first ``samples`` prompts."""

    samples: int
    equal: int
    max_logit_diff: float
    first_mismatch: int | None

    @property
    def fraction(self) -> float:
        return self.equal / self.samples if self.samples else 0.0


def _import(name: str) -> Any:
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        raise SuiteError(f"exporting a model needs the Python package '{name.split('.')[0]}'",
                         hint=_EXTRA) from None


def gpt2_state_dict(state: dict[str, Any], n_layer: int) -> dict[str, Any]:
    """Our state dict's tensors under GPT-2's names (linear weights transposed)."""
    expected = 4 + 12 * n_layer
    if len(state) != expected or "tok.weight" not in state:
        raise SuiteError(f"the state dict has {len(state)} tensors, a {n_layer}-layer tinylm "
                         f"has {expected}: this export maps tinylm's layout only")
    out = {"transformer.wte.weight": state["tok.weight"],
           "transformer.wpe.weight": state["pos.weight"],
           "transformer.ln_f.weight": state["ln_f.weight"],
           "transformer.ln_f.bias": state["ln_f.bias"]}
    names = {"ln1": ("ln_1", False), "qkv": ("attn.c_attn", True),
             "proj": ("attn.c_proj", True), "ln2": ("ln_2", False),
             "fc": ("mlp.c_fc", True), "fc_out": ("mlp.c_proj", True)}
    for i in range(n_layer):
        for ours, (theirs, conv1d) in names.items():
            weight = state[f"blocks.{i}.{ours}.weight"]
            out[f"transformer.h.{i}.{theirs}.weight"] = (
                weight.t() if conv1d else weight).contiguous()
            out[f"transformer.h.{i}.{theirs}.bias"] = state[f"blocks.{i}.{ours}.bias"]
    return out


def _config(card: LLMCard) -> dict[str, Any]:
    arch, eos = card.arch, card.tokenizer.eos_id
    return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
            "vocab_size": arch.vocab_size, "n_positions": arch.block_size,
            "n_ctx": arch.block_size, "n_embd": arch.d_model, "n_layer": arch.n_layer,
            "n_head": arch.n_head, "n_inner": 4 * arch.d_model,
            "activation_function": "gelu", "resid_pdrop": 0.0, "embd_pdrop": 0.0,
            "attn_pdrop": 0.0, "layer_norm_epsilon": 1e-5, "scale_attn_weights": True,
            "bos_token_id": eos, "eos_token_id": eos, "tie_word_embeddings": True,
            "torch_dtype": "float32", "use_cache": True}


def _tokenizer(chars: list[str]) -> Any:
    tokenizers = _import("tokenizers")
    vocab = {c: i for i, c in enumerate(chars)}
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab=vocab, unk_token=None))
    # Every character its own token, the newline included ("." would skip it).
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Split(
        tokenizers.Regex(r"[\s\S]"), behavior="isolated")
    tokenizer.decoder = tokenizers.decoders.Fuse()
    return tokenizer


def export_hf(card: LLMCard, out_dir: Path, *, force: bool = False) -> list[Path]:
    """Write ``card``'s model as a Hugging Face GPT-2 directory; returns the files written.

    An existing directory that holds anything but a previous export is refused; a
    previous export is replaced only with ``force``.
    """
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"{out_dir} exists and is not a directory",
                          hint="give a new directory for the export")
    present = sorted(p.name for p in out_dir.iterdir()) if out_dir.is_dir() else []
    foreign = [name for name in present if name not in (*FILES, RECORD)]
    if foreign:
        raise ConfigError(f"{out_dir} holds files this export did not write "
                          f"({', '.join(foreign[:3])})", hint="give a new or empty directory")
    if present and not force:
        raise ConfigError(f"{out_dir} already holds an export",
                          hint="pass --force to replace it, or give another directory")
    torch = _import("torch")
    save_file = _import("safetensors.torch").save_file
    source_sha = verify_weights(card)
    state = torch.load(card.state_dict_path, map_location="cpu", weights_only=True)
    tensors = gpt2_state_dict(state, card.arch.n_layer)
    tokenizer = LLMDataset(card).tokenizer
    assert isinstance(tokenizer, CharTokenizer)  # a bundled card's (export refuses others)
    chars, eos = tokenizer.chars, card.tokenizer.eos_id
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    _write_json(out_dir / "config.json", _config(card))
    generation = GenerationConfig.from_card(card)
    _write_json(out_dir / "generation_config.json", {
        "bos_token_id": eos, "eos_token_id": eos, "pad_token_id": eos, "do_sample": False,
        "max_new_tokens": generation.max_new_tokens,
        "min_new_tokens": generation.min_new_tokens})
    _tokenizer(chars).save(str(out_dir / "tokenizer.json"))
    _write_json(out_dir / "tokenizer_config.json", {
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": chars[eos],
        "eos_token": chars[eos], "pad_token": chars[eos],
        "model_max_length": card.arch.block_size,
        "clean_up_tokenization_spaces": False})
    written = [out_dir / name for name in FILES]
    _write_json(out_dir / RECORD, {
        "format": "hf", "architecture": "GPT2LMHeadModel", "card": card.name,
        "source": {"state_dict": card.model.torch_state_dict, "sha256": source_sha},
        "files": {p.name: sha256_file(p) for p in written}, "verified": None})
    return [*written, out_dir / RECORD]


def verify_hf(card: LLMCard, out_dir: Path, samples: int = 16) -> ExportCheck:
    """Greedy outputs of the exported model (``transformers``) against ours, token for
    token, on the first ``samples`` prompts of the card's dataset; recorded in
    ``export.json``."""
    torch = _import("torch")
    transformers = _import("transformers")
    transformers.utils.logging.disable_progress_bar()  # its own bars on our stderr
    dataset = LLMDataset(card)
    count = min(samples, dataset.total_count)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(out_dir)).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(out_dir))
    config = GenerationConfig.from_card(card)
    ours = TorchGenerationBackend(card, max_sequences=1)
    equal, worst, first = 0, 0.0, None
    # One thread: both models generate one sequence of a small model token by token, where
    # more threads only wait for each other (64 tokens: 0.30 s on one thread against 1.04 s
    # on two when the other core is busy; equal on a quiet machine).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    with contextlib.ExitStack() as restore:
        restore.callback(torch.set_num_threads, threads)
        restore.enter_context(torch.no_grad())
        for index in range(count):
            prompt = dataset.prompts[index]
            if tokenizer(dataset.prompts_text[index])["input_ids"] != prompt:
                raise SuiteError(f"{out_dir / 'tokenizer.json'}: prompt {index} tokenizes "
                                 "differently from the card's vocabulary")
            ids = torch.tensor([prompt])
            worst = max(worst, float((model(ids).logits[0] - ours.model.forward(ids)[0])
                                     .abs().max()))
            theirs = model.generate(
                ids, attention_mask=torch.ones_like(ids), do_sample=False,
                max_new_tokens=config.max_new_tokens, min_new_tokens=config.min_new_tokens,
                eos_token_id=config.eos_id, pad_token_id=config.eos_id)[0, len(prompt):]
            if theirs.tolist() == generate(ours, config, prompt, seq=index):
                equal += 1
            elif first is None:
                first = index
    result = ExportCheck(samples=count, equal=equal, max_logit_diff=worst,
                          first_mismatch=first)
    record_path = out_dir / RECORD
    record = json.loads(record_path.read_text(encoding="utf-8"))
    record["verified"] = {**asdict(result), "transformers": transformers.__version__}
    _write_json(record_path, record)
    return result


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
