"""tinylm through the real LoadGen (child process, ``--quick``): Offline, Server, Interactive.

TTFT/TPOT and tokens/s in ``result.json`` must be the detail log's values; accuracy from the
accuracy log must equal a direct batch-of-1 generation, sample for sample. VALID verdicts
depend on the machine's speed (min duration, TTFT/TPOT bounds), so an INVALID for a speed
condition alone is a ``timing_assert`` in a ``timing``-marked test; everything else gates.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from suite.config.rules import load_rules
from suite.llm.accuracy import decode_outputs, rouge
from suite.llm.card import load_llm_card
from suite.llm.dataset import LLMDataset
from suite.llm.generation import GenerationConfig, TorchGenerationBackend, generate
from suite.logs import ACCURACY_LOG, DETAIL_LOG, parse_detail_log
from suite.paths import find_paths
from suite.reports.table import results_table
from suite.results import TOKEN_KEYS, RunResult, Status
from tests.support.timing import invalid_only_by_timing, timing_assert
from tests.support.tinylm_runs import TinylmRuns, tinylm_run

pytest.importorskip("torch", reason="the LLM backend needs torch (pip install -e '.[torch]')")


SUBSET = 16


@pytest.fixture(scope="module")
def runs(tinylm_runs: TinylmRuns) -> dict[str, RunResult]:
    """The session's tinylm runs (tests/support/tinylm_runs.py): Offline and Interactive
    with ``--mode all`` (their first test is the performance test), Server performance."""
    return tinylm_runs.results


def _detail(result: RunResult) -> dict[str, object]:
    return parse_detail_log(Path(result.tests[0].directory) / DETAIL_LOG).values


@pytest.mark.parametrize("name", ["offline", "server", "interactive"])
def test_token_metrics_in_result_json_are_the_detail_logs(runs: dict[str, RunResult],
                                                          name: str) -> None:
    result = runs[name]
    assert result.status in (Status.VALID, Status.INVALID), result.tests[0].message
    assert not result.submittable and "--quick" in result.non_submittable_reasons[0]
    values = _detail(result)
    assert values["requested_use_token_latencies"] is True
    performance = result.tests[0].performance
    assert performance is not None
    expected = {k: float(values[key]) for k, key in TOKEN_KEYS.items()  # type: ignore[arg-type]
                if key in values}
    assert performance.tokens == expected
    if name == "offline":
        assert performance.tokens["tokens_per_second"] > 0
    else:
        for key in ("ttft_p99_ns", "tpot_p99_ns", "completed_tokens_per_second"):
            assert performance.tokens[key] > 0, key
    status = json.loads((Path(result.tests[0].directory) / "status.json").read_text())
    assert status["failures"] == [] and status["batches"]["kind"] == "continuous"


def test_server_and_interactive_take_their_bounds_from_the_round_table(
        runs: dict[str, RunResult]) -> None:
    rules_row = load_rules(find_paths(), "v6.1").models["tinylm"].token_latency_ns
    for name, kind in (("server", "Server"), ("interactive", "Interactive")):
        values = _detail(runs[name])
        assert values["requested_server_ttft_latency"] == rules_row[kind].ttft, name
        assert values["requested_server_tpot_latency"] == rules_row[kind].tpot, name
        assert values["effective_scenario"] == "Server"
    assert rules_row["Interactive"].ttft < rules_row["Server"].ttft


def test_results_table_shows_tokens_per_second_and_token_latencies(
        runs: dict[str, RunResult]) -> None:
    table = results_table(runs.values())
    columns = {str(column.header): [str(c) for c in column.cells] for column in table.columns}
    # one row per LoadGen test: each run's performance test is its first row
    first_rows, rows = {}, 0
    for name, result in runs.items():
        first_rows[name], rows = rows, rows + len(result.tests)
    assert len(columns["value"]) == rows
    for name, row in first_rows.items():
        tokens = runs[name].tests[0].performance.tokens  # type: ignore[union-attr]
        if runs[name].tests[0].status not in (Status.VALID, Status.INVALID):
            continue  # a failed test shows no figure (the metric test above reports why)
        rate = "tokens_per_second" if name == "offline" else "completed_tokens_per_second"
        assert columns["value"][row] == f"{tokens[rate]:,.1f} tokens/s", name
        assert columns["metric"][row].endswith("tokens/s"), name
        latency = columns["token latency"][row]
        if name == "offline":
            assert latency == "-"
        else:
            assert latency == (f"TTFT p99 {tokens['ttft_p99_ns'] / 1e6:,.2f} ms, "
                               f"TPOT p99 {tokens['tpot_p99_ns'] / 1e6:,.2f} ms"), name


@pytest.mark.timing
@pytest.mark.parametrize("name", ["offline", "server", "interactive"])
def test_every_llm_scenario_is_valid_with_quick(runs: dict[str, RunResult], name: str) -> None:
    result = runs[name]
    speed = invalid_only_by_timing([result])  # a FAILED run, LoadGen errors: a failure
    timing_assert(not speed, f"{name} INVALID: {'; '.join(speed)}")
    assert result.status is Status.VALID, result.tests[0].performance


def test_accuracy_from_the_log_equals_direct_generation(tmp_path: Path) -> None:
    card = load_llm_card(find_paths(), "tinylm")
    full = json.loads((card.directory / "dataset.json").read_text())
    subset = tmp_path / "subset"
    subset.mkdir()
    (subset / "dataset.json").write_text(json.dumps({**full, "samples":
                                                     full["samples"][:SUBSET]}))
    result = tinylm_run(tmp_path / "runs", "server", mode="accuracy",
                        sets=(f"data.dataset_dir='{subset}'",))
    test = result.tests[0]
    assert test.accuracy is not None, test.message
    assert f"the dataset has {SUBSET} samples" in " ".join(result.non_submittable_reasons)

    dataset = LLMDataset(card, str(subset))
    backend = TorchGenerationBackend(card, 1, threads=1)
    config = GenerationConfig.from_card(card)
    direct = [generate(backend, config, p) for p in dataset.prompts]
    logged = decode_outputs(Path(test.directory) / ACCURACY_LOG, SUBSET)
    assert logged == direct
    texts = [dataset.tokenizer.decode(t) for t in direct]
    scores = rouge(texts, dataset.references)
    assert test.accuracy.value == scores["rougeL"]
    assert test.accuracy.details["tokens_per_sample"] == pytest.approx(
        sum(map(len, direct)) / SUBSET, abs=1e-4)
    # Server accuracy logs carry each sample's first token and its count (TEST06's input).
    entries = json.loads((Path(test.directory) / ACCURACY_LOG).read_text())
    for entry in entries:
        tokens = np.frombuffer(bytes.fromhex(entry["data"]), dtype="<i4").tolist()
        assert entry["token_count"] == len(tokens)
    text = (Path(test.directory) / "accuracy.txt").read_text()
    assert "'rougeL'" in text and "'tokens_per_sample'" in text
    # The table shows ROUGE-L as the score it is, not as a percentage.
    column = next(c for c in results_table([result]).columns
                  if str(c.header) == "accuracy vs target")
    cell = str(next(iter(column.cells)))
    assert cell.startswith(f"ROUGEL {scores['rougeL']:.4f} vs ≥") and "%" not in cell, cell

