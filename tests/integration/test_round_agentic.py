"""qwen3.6-27b end to end: the real CLI and LoadGen, the ``openai`` backend sending each
sample's chat messages and tools to ``/v1/chat/completions``, and the synthetic engine
answering from the BFCL fixture (``--chat-answers``: streamed tool-call deltas, and 400
for a request without the sample's tools, ``tool_choice``, seed 42 and temperature 0);
SingleStream performance then accuracy, scored as the round's reference scores it.

The expected figures are what the reference's scorer printed on the same responses
(``bfcl_fixtures.REFERENCE_BREAKDOWN``: overall 48.48, normalized 58.01; how it was run:
tests/unit/llm/test_bfcl_scoring.py). The performance test's VALID depends on the machine:
a performance test INVALID for speed alone is a reported ``timing`` miss, judged after
the accuracy assertions; any other reason fails.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from suite.results import RunResult
from tests.conftest import only_run_dir, run_cli
from tests.support import bfcl_fixtures as fx
from tests.support.llm_endpoints import synthetic
from tests.support.reasoning_fixtures import write_harmony_tokenizer
from tests.support.timing import invalid_only_by_timing, timing_assert

pytestmark = pytest.mark.timing

pytest.importorskip("aiohttp", reason="the openai backend needs aiohttp (.[openai])")
pytest.importorskip("fastparquet", reason="the BFCL file is parquet (.[reasoning])")


def _files(out: Path) -> dict[str, Path]:
    return {"dataset": fx.write_parquet(out / "bfcl_v4_single_turn.parquet"),
            "answers": fx.chat_answers(out / "chat_answers.json"),
            "model": write_harmony_tokenizer(out / "model").parent}


def test_qwen_singlestream_both_modes(tmp_path: Path) -> None:
    files = _files(tmp_path / "files")
    runs = tmp_path / "runs"
    with synthetic("--model", "qwen3.6-27b", "--chat-answers", str(files["answers"]),
                   "--chunk-tokens", "4") as (url, _):
        done = run_cli("run", "--benchmark", "qwen3.6-27b", "--backend", "openai", "--url",
                       url, "--dataset-path", str(files["dataset"]), "--model-path",
                       str(files["model"]), "--quick", "--runs-dir", str(runs),
                       "--scenario", "singlestream", "--mode", "all", timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode == 2, out  # accuracy below the round's target
    run_dir = only_run_dir(runs)
    result = RunResult.load(run_dir / "result.json")
    performance, accuracy = result.tests
    lines = (run_dir / "accuracy" / "accuracy.txt").read_text().splitlines()
    assert lines[0] == "mAP=48.48"  # the line the checker's ACC_PATTERN["mAP"] reads
    record = ast.literal_eval(lines[1])
    assert {k: record[k] for k in fx.REFERENCE_BREAKDOWN} == fx.REFERENCE_BREAKDOWN
    assert accuracy.accuracy is not None and accuracy.accuracy.metric == "mAP"
    assert accuracy.accuracy.value == 48.48 and accuracy.status.value == "INVALID"
    assert "mAP: 48.48 >= 85.3677: FAILED" in accuracy.message
    # every response ended as the engine said: 28 with tool calls, 5 with text
    assert accuracy.backend["run"]["finish_reasons"] == {"tool_calls": 28, "stop": 5}
    alone = result.model_copy(update={"tests": [performance], "status": performance.status,
                                      "compliance": None})
    speed = invalid_only_by_timing([alone])
    timing_assert(not speed, "; ".join(speed))
    assert performance.status.value == "VALID"


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
