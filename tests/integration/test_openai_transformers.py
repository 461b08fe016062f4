"""tinylm on ``transformers serve`` (the version the ``hf`` extra installs, 5.24), on loopback.

The engine as ``suite serve tinylm --engine transformers`` starts it (``api.serve_llm``)
on tinylm exported with ``suite export tinylm DIR --verify-samples 0``; then ``suite run
--benchmark tinylm --backend openai --url URL --mode accuracy`` with nothing else set
must pass accuracy: the backend's probe learns what this engine refuses (token-id
prompts, ``return_token_ids``, ``min_tokens``) and that it ends its streams without
``data: [DONE]``, and the run's record says so in the engine's words.

Two samples keep it short (about 120 generated tokens): the dataset's samples 153 and 178,
chosen from the in-process reference run (``suite run --benchmark tinylm --backend
torch-llm --mode accuracy``): 178 ends on EOS after 53 tokens (the engine's usage counts
that EOS, its text omits it: the run must reconcile the two as the reference counts,
EOS kept), 153 runs to max_new_tokens; together they meet tinylm's ROUGE-L target and
its tokens-per-sample bounds only if every token, the EOS included, is counted as the
reference counts it.

transformers is in the dev extras, so this runs in CI; where it (or its serving
dependencies) is missing the module is skipped saying why, unless
``SUITE_REQUIRE_ENGINE=1``: then it fails.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from suite.results import RunResult
from tests.conftest import REPO, run_cli

pytest.importorskip("aiohttp",
                    reason="the openai backend needs aiohttp (pip install -e '.[openai]')")

SAMPLES = (153, 178)


def _missing() -> str:
    """Why transformers serve cannot start here ("" where it can)."""
    import sys

    from suite.serve.llm_engines import EngineError, check_transformers

    try:
        check_transformers(sys.executable)
    except EngineError as exc:
        return f"{exc} ({exc.hint})"
    return ""


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(URL, a directory holding the two samples' dataset.json) of the engine."""
    missing = _missing()
    if missing and os.environ.get("SUITE_REQUIRE_ENGINE") == "1":
        pytest.fail(f"SUITE_REQUIRE_ENGINE=1 but transformers serve cannot start: {missing}")
    if missing:
        pytest.skip(f"transformers serve cannot start here: {missing}")
    from suite import api

    root = tmp_path_factory.mktemp("transformers")
    exported = run_cli("export", "tinylm", str(root / "tinylm-hf"), "--verify-samples", "0")
    assert exported.returncode == 0, exported.stdout + exported.stderr
    data = root / "data"
    data.mkdir()
    bundled = json.loads((REPO / "reference_models" / "tinylm" / "dataset.json").read_text())
    bundled["samples"] = [bundled["samples"][i] for i in SAMPLES]
    (data / "dataset.json").write_text(json.dumps(bundled))
    with api.serve_llm("tinylm", "transformers", root, model_dir=root / "tinylm-hf",
                       timeout_s=300) as running:
        assert running.model == "tinylm"  # served under the card's name
        yield running.url, data


def test_accuracy_passes_on_transformers_serve(engine: tuple[str, Path],
                                               tmp_path: Path) -> None:
    url, data = engine
    runs = tmp_path / "runs"
    done = run_cli("run", "--benchmark", "tinylm", "--backend", "openai", "--url", url,
                   "--mode", "accuracy", "--quick", "--dataset-path", str(data),
                   "--runs-dir", str(runs), timeout=600)
    out = done.stdout + done.stderr
    run_dir = next(runs.iterdir())
    result = RunResult.load(run_dir / "result.json")
    (accuracy,) = result.tests
    assert accuracy.accuracy is not None and accuracy.accuracy.passed, out
    assert done.returncode == 0, out
    details = accuracy.backend["details"]
    # what the probe learned, in the engine's own words, and the options it ran with
    assert details["engine"] == "transformers serve"
    assert details["prompt_as"] == "text" and details["token_source"] == "tokenizer"
    assert details["min_tokens"].startswith("not asked"), details
    assert "prompt must be a string" in details["probe_learned"], details
    assert "min_tokens" in details["probe_learned"], details
    assert details["stream_end"].startswith("response end"), details
    # what the engine did: every stream ended without [DONE]; sample 178's EOS was
    # counted by its usage, omitted from its text, and kept as the reference keeps it
    run = accuracy.backend["run"]
    assert run["reconciled"] == {"ended_without_done": 2, "eos_from_usage": 1}, run
    assert run["finish_reasons"] == {"stop": 1, "length": 1}, run
    scored = (run_dir / "accuracy" / "accuracy.txt").read_text()
    assert "'gen_num': 2" in scored and "'tokens_per_sample': 58.5" in scored, scored
    # never claimed: the options the engine forced make the run not submittable, by name
    assert "min_tokens_field = false" in out and 'token_source = "tokenizer"' in out, out
