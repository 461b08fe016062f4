"""deepseek-r1 and gpt-oss-120b end to end: the real CLI and LoadGen, the ``openai``
backend, and the synthetic engine answering each prompt with its fixture output
(``--answers``); performance (Offline) then accuracy, scored as the reference scores it.

The expected exact_match is what the reference's script printed on the same outputs (the
fixtures without their looping LiveCodeBench answer, which the reference waits 60 s on):
``eval_accuracy.py --input-file`` the 35 deepseek-r1 outputs printed
``'exact_match': 62.857142857142854``; ``eval_mlperf_accuracy.py`` on the 23 gpt-oss-120b
outputs printed ``'exact_match': 71.964`` (how they were run:
tests/unit/llm/test_reasoning_scoring.py).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from suite.results import RunResult
from tests.conftest import only_run_dir, run_cli
from tests.support import reasoning_fixtures as fx
from tests.support.llm_endpoints import synthetic

pytest.importorskip("aiohttp", reason="the openai backend needs aiohttp (.[openai])")
pytest.importorskip("pandas", reason="the reasoning datasets are pandas files (.[llm])")
pytest.importorskip("sympy", reason="MATH500 grading needs sympy (.[reasoning])")
pytest.importorskip("pylatexenc", reason="MATH500 grading needs pylatexenc (.[reasoning])")
pytest.importorskip("fastparquet", reason="gpt-oss-120b's parquet needs .[reasoning]")


def _run(card: str, rows: list[int], tmp_path: Path) -> tuple[int, str, Path]:
    files = fx.build_run_files(tmp_path / "files", rows, card)
    runs = tmp_path / "runs"
    with synthetic("--model", card, "--answers", str(files["answers"]),
                   "--chunk-tokens", "4") as (url, _):
        done = run_cli("run", "--benchmark", card, "--backend", "openai", "--url", url,
                       "--dataset-path", str(files["dataset"]), "--model-path",
                       str(files["model"]), "--quick", "--runs-dir", str(runs),
                       "--scenario", "offline", "--mode", "all", timeout=300)
    return done.returncode, done.stdout + done.stderr, runs


def test_deepseek_r1_offline_both_modes(tmp_path: Path) -> None:
    rows = [i for i in range(len(fx.DEEPSEEK)) if i != 31]  # 31 loops
    code, out, runs = _run("deepseek-r1", rows, tmp_path)
    assert code == 2, out  # performance VALID; accuracy below the round's target
    run_dir = only_run_dir(runs)
    performance, accuracy = RunResult.load(run_dir / "result.json").tests
    assert performance.status.value == "VALID"
    first = (run_dir / "accuracy" / "accuracy.txt").read_text().splitlines()[0]
    record = ast.literal_eval(first)
    assert record["exact_match"] == 62.857142857142854 and record["num-samples"] == 35
    assert accuracy.accuracy is not None and accuracy.accuracy.metric == "exact_match"
    assert "exact_match: 62.857142857142854 >= 80.5446" in accuracy.message


def test_gpt_oss_120b_offline_both_modes(tmp_path: Path) -> None:
    rows = list(range(23))  # 23 sleeps forever
    code, out, runs = _run("gpt-oss-120b", rows, tmp_path)
    assert code == 2, out
    run_dir = only_run_dir(runs)
    assert RunResult.load(run_dir / "result.json").tests[0].status.value == "VALID"
    first = (run_dir / "accuracy" / "accuracy.txt").read_text().splitlines()[0]
    assert first == "'exact_match': 71.964"


def test_bad_reasoning_file_is_one_line_exit_1(tmp_path: Path) -> None:
    files = fx.build_run_files(tmp_path / "files", [0], "gpt-oss-120b")
    files["dataset"].write_bytes(b"PAR1 broken")
    runs = tmp_path / "runs"
    done = run_cli("run", "--benchmark", "gpt-oss-120b", "--backend", "openai", "--url",
                   "http://127.0.0.1:9", "--dataset-path", str(files["dataset"]),
                   "--model-path", str(files["model"]), "--quick", "--runs-dir", str(runs),
                   "--scenario", "offline", timeout=120)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "not a parquet table" in out and "Traceback" not in out
    assert not runs.exists()
