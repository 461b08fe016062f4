"""``suite export tinylm --format hf``: the exported directory loads in ``transformers`` as
a GPT-2 and its greedy outputs equal ours token for token (the comparison a real engine
such as vLLM relies on). One export, through the CLI (which calls ``api.export``), serves
every test; the overwrite test works on a copy of it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from suite.models import sha256_file
from tests.conftest import run_cli

pytest.importorskip("transformers", reason="the check loads the export with transformers: "
                    "pip install -e '.[hf]'")


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One export through the CLI, checked on 8 prompts: its directory and its stdout."""
    out = tmp_path_factory.mktemp("export") / "tinylm-hf"
    done = run_cli("export", "tinylm", str(out), "--verify-samples", "8", timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    return out, done.stdout


def test_the_export_equals_our_model_token_for_token(exported: tuple[Path, str]) -> None:
    out, stdout = exported
    assert "greedy outputs equal on 8 of 8 prompts" in stdout
    check = json.loads((out / "export.json").read_text())["verified"]  # api.export's result
    assert (check["equal"], check["samples"]) == (8, 8), check
    assert check["max_logit_diff"] < 1e-4


def test_the_record_names_its_source_and_every_file_by_hash(
        exported: tuple[Path, str]) -> None:
    out, _ = exported
    record = json.loads((out / "export.json").read_text())
    assert record["card"] == "tinylm" and record["architecture"] == "GPT2LMHeadModel"
    assert record["source"]["sha256"] == sha256_file(
        Path(__file__).resolve().parents[2] / "reference_models" / "tinylm"
        / "tinylm_state_dict.pt")
    for name, digest in record["files"].items():
        assert sha256_file(out / name) == digest
    assert record["verified"]["equal"] == 8 and record["verified"]["samples"] == 8
    config = json.loads((out / "config.json").read_text())
    assert (config["activation_function"], config["n_positions"], config["vocab_size"]) == (
        "gelu", 192, 83)


def test_the_cli_refuses_to_overwrite_and_replaces_with_force(
        exported: tuple[Path, str], tmp_path: Path) -> None:
    out = tmp_path / "hf"
    shutil.copytree(exported[0], out)  # an earlier export (the module's, copied)
    again = run_cli("export", "tinylm", str(out), "--verify-samples", "0")
    assert again.returncode == 1 and "already holds an export" in again.stderr
    assert "Traceback" not in again.stderr
    forced = run_cli("export", "tinylm", str(out), "--verify-samples", "0", "--force")
    assert forced.returncode == 0, forced.stderr
    assert json.loads((out / "export.json").read_text())["verified"] is None


def test_a_card_that_is_not_an_llm_is_one_line(tmp_path: Path) -> None:
    done = run_cli("export", "digits", str(tmp_path / "x"))
    assert done.returncode == 1 and "is not a text-generation card" in done.stderr
    assert "Traceback" not in done.stderr
