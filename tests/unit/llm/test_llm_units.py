"""Units of the LLM path: conf lines from the round table, the SUT's LoadGen calls (with a
recording completer and a scripted generation backend), accuracy-log decoding, the card's
weight check and the token metrics read from a detail log."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import pytest

from suite.config.rules import load_rules
from suite.errors import ModelError, SuiteError
from suite.harness.llm import sut as llm_sut
from suite.harness.llm.sut import LLMSystemUnderTest
from suite.llm.accuracy import decode_outputs
from suite.llm.card import card_name, load_llm_card, verify_weights
from suite.llm.conf import token_conf_lines
from suite.llm.generation import GenerationConfig
from suite.logs import parse_detail_log
from suite.models import Kind, card_kind
from suite.paths import find_paths
from suite.results import token_metrics
from suite.scenarios import Scenario

CONFIG = GenerationConfig(max_new_tokens=6, min_new_tokens=2, eos_id=0)


def test_conf_lines_come_from_the_round_row() -> None:
    rules = load_rules(find_paths(), "v6.1")
    bounds = rules.models["tinylm"].token_latency_ns
    assert token_conf_lines(rules.resolve("tinylm", Scenario.OFFLINE)) == [
        "tinylm.Offline.use_token_latencies = 1"]
    assert token_conf_lines(rules.resolve("tinylm", Scenario.SERVER)) == [
        "tinylm.Server.use_token_latencies = 1",
        f"tinylm.Server.ttft_latency = {bounds['Server'].ttft // 1_000_000}",
        f"tinylm.Server.tpot_latency = {bounds['Server'].tpot // 1_000_000}"]
    interactive = token_conf_lines(rules.resolve("tinylm-interactive", Scenario.SERVER))
    assert interactive[1:] == [
        f"tinylm-interactive.Server.ttft_latency = {bounds['Interactive'].ttft // 1_000_000}",
        f"tinylm-interactive.Server.tpot_latency = {bounds['Interactive'].tpot // 1_000_000}"]
    assert token_conf_lines(rules.resolve("digits", Scenario.SERVER)) == []
    # the round's llama3.1-8b Interactive: 500 ms TTFT, 30 ms TPOT (its Server: 2 s, 100 ms)
    assert token_conf_lines(rules.resolve("llama3.1-8b-interactive", Scenario.SERVER)) == [
        "llama3_1-8b-interactive.Server.use_token_latencies = 1",
        "llama3_1-8b-interactive.Server.ttft_latency = 500",
        "llama3_1-8b-interactive.Server.tpot_latency = 30"]
    assert token_conf_lines(rules.resolve("llama3.1-8b", Scenario.SERVER))[1:] == [
        "llama3_1-8b.Server.ttft_latency = 2000", "llama3_1-8b.Server.tpot_latency = 100"]


def test_llm_cards_are_recognised_and_interactive_uses_the_same_card() -> None:
    paths = find_paths()
    assert card_kind(paths, "tinylm") is Kind.TEXT_GENERATION
    assert card_kind(paths, "tinylm-interactive") is Kind.TEXT_GENERATION
    assert card_kind(paths, "digits") is Kind.TENSOR
    assert card_name("tinylm-interactive") == "tinylm"
    card = load_llm_card(paths, "tinylm-interactive")
    assert card.name == "tinylm" and card.generation.min_new_tokens >= 2


def test_modified_weights_are_refused(tmp_path: Path) -> None:
    card = load_llm_card(find_paths(), "tinylm")
    assert verify_weights(card) == card.model.torch_state_dict_sha256
    copy = tmp_path / "tinylm"
    shutil.copytree(card.directory, copy)
    with (copy / card.model.torch_state_dict).open("ab") as handle:
        handle.write(b"\0")
    with pytest.raises(ModelError, match="do not match"):
        verify_weights(card.model_copy(update={"directory": copy}))


class _Scripted:
    """A generation backend whose sequence ``seq`` emits prompt[0]+1, +2, ... then EOS."""

    max_sequences = 4

    def __init__(self) -> None:
        self.live: dict[int, list[int]] = {}

    def prefill(self, seq: int, prompt: Sequence[int]) -> int:
        length = prompt[0]
        self.live[seq] = [*range(10, 10 + length - 1), 0]
        return self.live[seq].pop(0)

    def decode(self) -> dict[int, int]:
        return {seq: toks.pop(0) if toks else 7 for seq, toks in self.live.items()}

    def release(self, seq: int) -> None:
        del self.live[seq]


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int, list[int]]] = []
        self.completed = 0

    def first_token(self, qid: int, token: int) -> None:
        self.calls.append(("first", qid, [token]))

    def complete(self, items: Sequence[tuple[int, Sequence[int]]]) -> None:
        self.calls += [("done", qid, list(tokens)) for qid, tokens in items]
        self.completed += len(items)

    def complete_empty(self, ids: Sequence[int]) -> None:
        self.calls += [("empty", qid, []) for qid in ids]


class _Dataset:
    def __init__(self) -> None:
        self.prompts = [[3], [5], [2], [9]]

    def load(self, indices: list[int]) -> None: ...

    def unload(self, indices: list[int]) -> None: ...


def _sut(first: bool) -> tuple[LLMSystemUnderTest, _Recorder]:
    recorder = _Recorder()
    sut = LLMSystemUnderTest(_Scripted(), _Dataset(), CONFIG, recorder,  # type: ignore[arg-type]
                             report_first_token=first, max_batch=2)
    return sut, recorder


def test_server_sut_reports_the_first_token_then_all_tokens() -> None:
    sut, recorder = _sut(first=True)
    sut.issue([100, 101, 102], [0, 1, 2])
    while sut.batcher.live or sut.batcher.waiting:
        sut.batcher.step()
    done = {qid: toks for kind, qid, toks in recorder.calls if kind == "done"}
    assert done == {100: [10, 11, 0], 101: [10, 11, 12, 13, 0], 102: [10, 0]}
    for qid, tokens in done.items():
        first = recorder.calls.index(("first", qid, [tokens[0]]))
        assert first < recorder.calls.index(("done", qid, tokens))
    assert sut.batcher.step_sizes[0] == 2  # max_batch: the third waited for a free slot


def test_offline_sut_sends_no_first_token_and_stops_at_max_new_tokens() -> None:
    sut, recorder = _sut(first=False)
    sut.issue([7], [3])
    while sut.batcher.live or sut.batcher.waiting:
        sut.batcher.step()
    assert recorder.calls == [("done", 7, [10, 11, 12, 13, 14, 15])]


def test_the_batch_profile_records_the_cpu_from_the_first_query_to_stop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A fake clock (read once at the first query, once at stop): the figures are exact,
    # whatever the machine's speed, and a swapped, zero or start-up-inclusive reading fails.
    cpu, wall = iter([10.0, 10.25]), iter([100.0, 101.5])
    clock = SimpleNamespace(process_time=lambda: next(cpu), perf_counter=lambda: next(wall))
    monkeypatch.setattr(llm_sut, "time", clock)
    sut, _ = _sut(first=False)
    assert "cpu_s" not in sut.batch_profile()  # no query yet: no measured phase
    sut.issue([7], [3])
    sut.issue([8], [2])  # a later query does not restart the measured phase
    while sut.batcher.live or sut.batcher.waiting:
        sut.batcher.step()
    sut.stop()
    sut.stop()  # nor does a second stop move its end
    profile = sut.batch_profile()
    assert profile["tokens"] == 6 + 2
    assert (profile["cpu_s"], profile["wall_s"]) == (0.25, 1.5)


def test_drain_answers_waiting_and_live_samples_once() -> None:
    sut, recorder = _sut(first=True)
    drained: list[bool] = []
    sut._on_drain = lambda: drained.append(True)
    sut.issue([1, 2, 3], [1, 1, 1])
    sut.batcher.step()
    sut.drain()
    sut.issue([4], [0])
    empties = sorted(qid for kind, qid, _ in recorder.calls if kind == "empty")
    assert empties == [1, 2, 3, 4] and drained == [True]
    sut.batcher.step()  # nothing left: no second answer
    assert sorted(qid for kind, qid, _ in recorder.calls if kind != "first") == [1, 2, 3, 4]


def _log(tmp: Path, entries: list[dict[str, object]]) -> Path:
    path = tmp / "mlperf_log_accuracy.json"
    path.write_text(json.dumps(entries))
    return path


def _hex(tokens: list[int]) -> str:
    return b"".join(t.to_bytes(4, "little", signed=True) for t in tokens).hex().upper()


def test_accuracy_log_decoding_refuses_gaps_and_conflicts(tmp_path: Path) -> None:
    log = _log(tmp_path, [{"seq_id": 0, "qsl_idx": 1, "data": _hex([5, 0])},
                          {"seq_id": 1, "qsl_idx": 0, "data": _hex([3, 4, 0])}])
    assert decode_outputs(log, 2) == [[3, 4, 0], [5, 0]]
    with pytest.raises(SuiteError, match="1 of 3 samples have no output"):
        decode_outputs(log, 3)
    log = _log(tmp_path, [{"seq_id": 0, "qsl_idx": 0, "data": _hex([5, 0])},
                          {"seq_id": 1, "qsl_idx": 0, "data": _hex([6, 0])}])
    with pytest.raises(SuiteError, match="two different outputs"):
        decode_outputs(log, 1)


def test_token_metrics_are_read_from_the_detail_log(tmp_path: Path) -> None:
    lines = [("result_first_token_99.00_percentile_latency_ns", 123456),
             ("result_time_per_output_token_99.00_percentile_ns", 7890),
             ("result_completed_tokens_per_second", 55.5),
             ("result_first_token_99.00_percentile_latency_ns", 1)]  # first value wins
    path = tmp_path / "mlperf_log_detail.txt"
    path.write_text("".join(":::MLLOG " + json.dumps({"key": k, "value": v}) + "\n"
                            for k, v in lines))
    assert token_metrics(parse_detail_log(path)) == {
        "ttft_p99_ns": 123456.0, "tpot_p99_ns": 7890.0, "completed_tokens_per_second": 55.5}
    path.write_text(":::MLLOG " + json.dumps({"key": "result_samples_per_second", "value": 3})
                    + "\n")
    assert token_metrics(parse_detail_log(path)) == {}


def test_static_policy_admits_only_when_the_batch_has_finished() -> None:
    from suite.llm.batcher import ContinuousBatcher, Request

    def run(static: bool) -> list[int]:
        batcher = ContinuousBatcher(_Scripted(), CONFIG, None, lambda done: None, 2,
                                    static=static)
        batcher.submit([Request(0, [2]), Request(1, [5]), Request(2, [2])])
        while batcher.live or batcher.waiting:
            batcher.step()
        return batcher.step_sizes

    # Continuous: the third request takes the first one's slot at once.
    assert run(static=False) == [2, 2, 1, 1]
    # Static: it waits until the 5-token sequence is done, then runs alone.
    assert run(static=True) == [2, 1, 1, 1, 1]


def test_a_failing_backend_fails_the_test_and_answers_every_sample() -> None:
    import time

    class _Broken(_Scripted):
        def decode(self) -> dict[int, int]:
            raise RuntimeError("device lost")

    recorder = _Recorder()
    drained: list[bool] = []
    sut = LLMSystemUnderTest(_Broken(), _Dataset(), CONFIG, recorder,  # type: ignore[arg-type]
                             report_first_token=True, max_batch=2,
                             on_drain=lambda: drained.append(True))
    sut.start()
    sut.issue([1, 2, 3], [1, 1, 1])
    deadline = time.monotonic() + 10
    while not drained and time.monotonic() < deadline:
        time.sleep(0.01)
    sut.stop()
    assert drained == [True]
    assert sorted(q for kind, q, _ in recorder.calls if kind == "empty") == [1, 2, 3]
    assert sut.failures.failures[0]["kind"] == "generation failed"
    assert "device lost" in sut.failures.failures[0]["message"]
    assert sut.failures.failed_samples == 3
