"""Compliance evidence is matched to the server it measured (issue 36, item 3): a TEST06
attempt against another server, another served model, another engine or other stated
weights, or with options that change what the engine computes, is never packaged beside
a main run; an attempt against the same server and config is. Hand-built records, as in
``test_selection.py``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from suite.submission.package import select_runs
from tests.unit.submission.test_selection import RULES, _compliance, write_run

URL = "http://10.0.0.7:8000"
SHA = "ab" * 32


def _endpoint_run(runs: Path, name: str, *, url: str = URL, engine: str = "vllm",
                  stated: str = SHA, options: dict[str, Any] | None = None,
                  compliance: dict[str, Any] | None = None) -> Path:
    backend = {"name": "openai", "version": "httptools 0.7.1", "device": "remote",
               "precision": "fp32", "weight_transformations": "none",
               "details": {"urls": url, "model": "tinylm", "engine": engine,
                           "engine_version": "0.32.0", "model_root": "/models/tinylm",
                           "api": "completions", "prompt_as": "ids",
                           "token_source": "engine"}}
    provenance = {"weights": {"value": stated, "source": "stated by the submitter, not "
                              "verified"}}
    run_dir = write_run(runs, name, benchmark="tinylm", tokens={"tokens_per_second": 9.0},
                        compliance=compliance, backend="openai", model_sha256=stated,
                        provenance=provenance)
    record = json.loads((run_dir / "result.json").read_text())
    for test in record["tests"]:
        test["backend"] = backend
    (run_dir / "result.json").write_text(json.dumps(record))
    (run_dir / "config.json").write_text(json.dumps({"backend_options": {
        "urls": [url], "api": "completions", "client_workers": 1, **(options or {})}}))
    return run_dir


def _attempt(runs: Path, name: str, reference: Path, **kwargs: Any) -> None:
    comp = _endpoint_run(runs, name, compliance=_compliance("TEST06", True, 1, reference),
                         **kwargs)
    (comp / "verify_accuracy.txt").write_text("First token check pass: True\n")


@pytest.mark.parametrize("other", [{"url": "http://10.0.0.8:8000"}, {"engine": "sglang"},
                                   {"stated": "cd" * 32},
                                   {"options": {"extra_body": {"temperature": 1.0}}}])
def test_test06_against_another_server_or_config_is_not_packaged(
        tmp_path: Path, other: dict[str, Any]) -> None:
    reference = _endpoint_run(tmp_path, "a_main")
    _attempt(tmp_path, "b_test06_elsewhere", reference, **other)
    selection = select_runs(tmp_path, RULES, unofficial=True)
    cand = selection.chosen[("tinylm", "offline")]
    assert "TEST06" not in cand.compliance  # not borrowed from another server
    [line] = [r for r in selection.refused if r.startswith("a_main")]
    assert "TEST06: no attempt against this run's servers and config" in line
    assert "b_test06_elsewhere" in line


def test_test06_against_the_same_server_is_packaged(tmp_path: Path) -> None:
    reference = _endpoint_run(tmp_path, "a_main")
    # a transport option (client processes) changes no token the engine computes
    _attempt(tmp_path, "b_test06_here", reference, options={"client_workers": 4})
    cand = select_runs(tmp_path, RULES, unofficial=True).chosen[("tinylm", "offline")]
    assert cand.compliance["TEST06"].run_id == "b_test06_here"
