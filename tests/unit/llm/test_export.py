"""The GPT-2 export's pieces, in process: the name and layout mapping of the weights, the
per-character tokenizer, and the refusals that keep an export from overwriting anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from suite.errors import ConfigError, SuiteError
from suite.llm.card import load_llm_card
from suite.llm.export import FILES, _tokenizer, export_hf, gpt2_state_dict
from suite.paths import find_paths

torch = pytest.importorskip("torch", reason="the export reads torch weights: install "
                            "torch==2.13.0 (the CPU build) first")


def _tiny_state(n_layer: int, d: int = 8, vocab: int = 5, block: int = 6) -> dict[str, object]:
    state: dict[str, object] = {"tok.weight": torch.randn(vocab, d),
                                "pos.weight": torch.randn(block, d),
                                "ln_f.weight": torch.randn(d), "ln_f.bias": torch.randn(d)}
    shapes = {"ln1": (d,), "qkv": (3 * d, d), "proj": (d, d), "ln2": (d,),
              "fc": (4 * d, d), "fc_out": (d, 4 * d)}
    for i in range(n_layer):
        for name, shape in shapes.items():
            state[f"blocks.{i}.{name}.weight"] = torch.randn(*shape)
            state[f"blocks.{i}.{name}.bias"] = torch.randn(shape[0])
    return state


def test_every_tensor_gets_its_gpt2_name_and_linear_weights_are_transposed() -> None:
    state = _tiny_state(2)
    out = gpt2_state_dict(state, 2)
    assert len(out) == len(state)
    assert out["transformer.wte.weight"] is state["tok.weight"]
    assert out["transformer.wpe.weight"] is state["pos.weight"]
    qkv = state["blocks.1.qkv.weight"]
    assert torch.equal(out["transformer.h.1.attn.c_attn.weight"], qkv.t())  # Conv1D: (in, out)
    assert out["transformer.h.1.attn.c_attn.weight"].shape == (8, 24)
    assert out["transformer.h.0.mlp.c_proj.weight"].shape == (32, 8)
    assert torch.equal(out["transformer.h.0.ln_1.weight"], state["blocks.0.ln1.weight"])
    assert "lm_head.weight" not in out  # tied to wte, as the config says


def test_a_state_dict_of_another_layout_is_refused() -> None:
    state = _tiny_state(2)
    del state["blocks.1.fc.bias"]
    with pytest.raises(SuiteError, match="maps tinylm's layout only"):
        gpt2_state_dict(state, 2)


def test_the_tokenizer_is_one_token_per_character_newlines_and_spaces_kept() -> None:
    pytest.importorskip("tokenizers", reason="pip install tokenizers (the [hf] extra)")
    chars = ["\x03", "\n", " ", "a", "b"]
    tokenizer = _tokenizer(chars)
    assert tokenizer.encode("a b\nba").ids == [3, 2, 4, 1, 4, 3]
    assert tokenizer.decode([3, 2, 4, 1, 4, 3]) == "a b\nba"
    with pytest.raises(Exception):  # noqa: B017 -- no unknown token: "c" cannot be encoded
        tokenizer.encode("c")


def test_a_directory_holding_other_files_or_a_previous_export_is_not_overwritten(
        tmp_path: Path) -> None:
    card = load_llm_card(find_paths(), "tinylm")
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="files this export did not write"):
        export_hf(card, tmp_path)
    (tmp_path / "notes.txt").unlink()
    (tmp_path / FILES[0]).write_bytes(b"an earlier export")
    with pytest.raises(ConfigError, match="already holds an export"):
        export_hf(card, tmp_path)
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="is not a directory"):
        export_hf(card, tmp_path / "file")
