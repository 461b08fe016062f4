"""deepseek-r1 and gpt-oss-120b through the real CLI: a bad dataset file is one line and
exit 1. Their runs (performance and accuracy scored as the reference scores them; TEST06,
TEST07 and TEST09, failing and passing; package, verify and audit) are one run per card in
tests/integration/test_reasoning_evidence_{deepseek,gpt_oss}.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support import reasoning_fixtures as fx

pytest.importorskip("aiohttp", reason="the openai backend needs aiohttp (.[openai])")
pytest.importorskip("pandas", reason="the reasoning datasets are pandas files (.[llm])")
pytest.importorskip("sympy", reason="MATH500 grading needs sympy (.[reasoning])")
pytest.importorskip("pylatexenc", reason="MATH500 grading needs pylatexenc (.[reasoning])")
pytest.importorskip("fastparquet", reason="gpt-oss-120b's parquet needs .[reasoning]")


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
