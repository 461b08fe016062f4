"""qwen3.6-27b's CLI on a bad dataset file. Its run end to end (SingleStream performance
then accuracy against the synthetic engine answering from the BFCL fixture, scored as the
round's reference scores it, then package, check, verify and audit) is ONE run, in
tests/integration/test_qwen_evidence.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support import bfcl_fixtures as fx
from tests.support.reasoning_fixtures import write_harmony_tokenizer

pytest.importorskip("aiohttp", reason="the openai backend needs aiohttp (.[openai])")
pytest.importorskip("fastparquet", reason="the BFCL file is parquet (.[reasoning])")


def _files(out: Path) -> dict[str, Path]:
    return {"dataset": fx.write_parquet(out / "bfcl_v4_single_turn.parquet"),
            "answers": fx.chat_answers(out / "chat_answers.json"),
            "model": write_harmony_tokenizer(out / "model").parent}


def test_bad_bfcl_file_is_one_line_exit_1(tmp_path: Path) -> None:
    files = _files(tmp_path / "files")
    files["dataset"].write_bytes(b"PAR1 broken")
    runs = tmp_path / "runs"
    done = run_cli("run", "--benchmark", "qwen3.6-27b", "--backend", "openai", "--url",
                   "http://127.0.0.1:9", "--dataset-path", str(files["dataset"]),
                   "--model-path", str(files["model"]), "--quick", "--runs-dir", str(runs),
                   "--scenario", "singlestream", timeout=120)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    errors = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "not a parquet table" in errors[0], out
    assert "Traceback" not in out and not runs.exists()
