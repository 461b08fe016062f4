"""One vocabulary across commands (issue 40, item 9): `lint` resolves the run `run` would
(the card's default backend, `--url`, `--system`) and refuses what `run` refuses; `export`
takes `--benchmark` and `--out-dir` like every other command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO, cli_env


def _suite(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "suite", *args], cwd=REPO, env=cli_env(),
                          capture_output=True, text=True, timeout=180)


def _rules(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [f["rule"] for f in json.loads(done.stdout)["findings"]
            if f["severity"] == "error"]


def test_lint_uses_the_cards_default_backend_like_run() -> None:
    done = _suite("lint", "--benchmark", "tinylm", "--quick", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _rules(done) == []


def test_lint_refuses_a_backend_that_does_not_serve_the_card() -> None:
    done = _suite("lint", "--benchmark", "tinylm", "--backend", "onnxruntime", "--quick",
                  "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    assert _rules(done) == ["LINT-BACKEND"]
    finding = json.loads(done.stdout)["findings"][0]
    assert "cannot run the text-generation benchmark 'tinylm'" in finding["message"]
    assert "--backend torch-llm" in finding["hint"]


def test_lint_takes_url_as_run_does() -> None:
    done = _suite("lint", "--benchmark", "tinylm", "--url", "http://127.0.0.1:9", "--quick",
                  "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the openai backend (--backend openai) serves this run" in done.stderr
    clash = _suite("lint", "--benchmark", "tinylm", "--backend", "torch-llm", "--url",
                   "http://127.0.0.1:9")
    assert clash.returncode == 1 and "--url is an option of the openai backend" in clash.stderr


def test_export_takes_benchmark_and_out_dir_options(tmp_path: Path) -> None:
    out = tmp_path / "tinylm"
    done = _suite("export", "--benchmark", "tinylm", "--out-dir", str(out),
                  "--verify-samples", "0")
    assert done.returncode == 0, done.stderr
    assert (out / "config.json").is_file() and (out / "model.safetensors").is_file()
    clash = _suite("export", "tinylm", str(tmp_path / "a"), "--out-dir", str(tmp_path / "b"),
                   "--verify-samples", "0")
    assert clash.returncode == 1, clash.stderr
    assert "--out-dir" in clash.stderr and "disagree" in clash.stderr
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    missing = _suite("export", "--benchmark", "tinylm")
    assert missing.returncode == 1 and "--out-dir" in missing.stderr
