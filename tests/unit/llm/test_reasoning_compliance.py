"""TEST07 and TEST09 verdicts equal the official run_verification.py scripts', and the
reasoning datasets' loaders refuse bad files in one line.

Official verdicts: mlcommons/inference @ b66003e compliance/TEST07/run_verification.py and
compliance/TEST09/run_verification.py, run with their gpt-oss-120b/audit.config on the logs
these tests build (the same entries), e.g.

    python TEST09_run_verification.py -c LOGDIR -o OUT --audit-config TEST09_audit.config
    python TEST07_run_verification.py -c LOGDIR -o OUT --audit-config TEST07_audit.config \\
        --accuracy-script "cd language/gpt-oss-120b && python eval_mlperf_accuracy.py \\
        --mlperf-log {accuracy_log} --reference-data FX/gpt_oss_ref.pkl \\
        --tokenizer FX/harmony_model --num-lcb-workers 2"

TEST09: lengths 1200/1356/1278 -> "TEST PASS" (exit 0; the whole verify_output_len.txt is
OFFICIAL_09_PASS below), 1150/1150/1151 -> "TEST FAIL" (exit 1), 1406 x 3 -> "TEST PASS".
TEST07: the 24 gpt-oss fixture outputs -> "Accuracy score: 67.167", "TEST PASS"; outputs
0, 3, 6, 9 -> "Accuracy score: 25.0", "Accuracy check pass: False", "TEST FAIL".
"""

from __future__ import annotations

import json
import struct
import warnings
from pathlib import Path

import pytest

from suite.errors import DatasetError
from suite.llm import test07_09
from suite.llm.round import data, livecodebench, reasoning
from suite.llm.round.reasoning_log import log_samples
from suite.llm.round.sandbox import Limits
from tests.support import reasoning_fixtures as fx

OFFICIAL_09_PASS = """\
================================================================================
TEST09: Verify Output Token Length in Performance Mode
================================================================================

Output Token Length Statistics
----------------------------------------
Total samples: 3
Mean output tokens: 1278.00
Min output tokens: 1200
Max output tokens: 1356
Std deviation: 63.69

================================================================================
Verification Results
================================================================================
Mean output tokens: 1278.00
Min threshold: 1150.38
Max threshold: 1406.02
Min check pass: True
Max check pass: True

TEST PASS
"""


def _entries(lengths: list[int]) -> list[dict[str, object]]:
    return [{"seq_id": i, "qsl_idx": i, "data": struct.pack(f"<{n}i", *([5] * n)).hex(),
             "token_count": n} for i, n in enumerate(lengths)]


@pytest.mark.parametrize(("lengths", "official"), [
    ([1200, 1356, 1278], "TEST PASS"), ([1150, 1150, 1151], "TEST FAIL"),
    ([1406, 1406, 1406], "TEST PASS")])
def test_test09_verdict_is_the_official_one(lengths: list[int], official: str) -> None:
    verdict = test07_09.verify_09(_entries(lengths))
    assert verdict.lines()[-1] == official
    assert verdict.passed is (official == "TEST PASS")
    if lengths == [1200, 1356, 1278]:
        assert "\n".join(verdict.lines()) + "\n" == OFFICIAL_09_PASS


def test_test09_without_entries_fails() -> None:
    assert not test07_09.verify_09([]).passed


def test_audit_configs_carry_the_official_settings() -> None:
    text = test07_09.audit_text("TEST07", test07_09.AUDIT_07)
    assert test07_09.read_setting(text, "test07_accuracy_threshold") == 60.698
    text = test07_09.audit_text("TEST09", test07_09.AUDIT_09)
    assert test07_09.read_setting(text, "test09_min_output_tokens") == 1150.38
    assert test07_09.read_setting(text, "test09_max_output_tokens") == 1406.02
    assert "*.*.performance_issue_unique = 1" in text and "*.*.mode = 2" in text


@pytest.mark.parametrize(("rows", "score", "official"), [
    (list(range(24)), 67.167, "TEST PASS"), ([0, 3, 6, 9], 25.0, "TEST FAIL")])
def test_test07_verdict_is_the_official_one(tmp_path: Path, rows: list[int], score: float,
                                            official: str) -> None:
    from suite.llm.dataset import HFTokenizer

    tokenizer_json = fx.write_harmony_tokenizer(tmp_path / "model")
    entries = fx.gpt_oss_log(tokenizer_json)
    log = tmp_path / "mlperf_log_accuracy.json"
    log.write_text(json.dumps([entries[i] for i in rows]), encoding="utf-8")
    samples = log_samples(log, HFTokenizer(tokenizer_json, 4).decode_special)
    judge = reasoning.CodeJudge(livecodebench.load(fx.write_lcb(tmp_path / "lcb"),
                                                   "release_v6"), Limits(wall_s=6.0, cpu_s=2))
    result = reasoning.score(samples, [d for d, _, _ in fx.GPT_OSS],
                             [g for _, g, _ in fx.GPT_OSS], "gpt-oss-120b", judge)
    verdict = test07_09.verify_07(reasoning.printed(result, "gpt-oss-120b") + "\n")
    assert verdict.score == score
    assert verdict.lines()[-4:] == [f"Accuracy score: {score}", "Accuracy threshold: 60.698",
                                    f"Accuracy check pass: {official == 'TEST PASS'}",
                                    official]


def test_test07_unparsable_output_fails() -> None:
    verdict = test07_09.verify_07("Traceback: no score\n")
    assert not verdict.passed and verdict.lines()[-1] == "TEST FAIL"


def test_reasoning_files_load_with_subsets_and_numeric_truths(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    path = tmp_path / "r1.pkl"
    pd.DataFrame({"dataset": ["aime1983", "gpqa"], "ground_truth": [42, None],
                  "text_input": ["q one", "q two"], "tok_input": [[1, 2], [3]]}
                 ).to_pickle(path)
    records = data.parse(path, "pandas-pickle", "text_input", "tok_input", "ground_truth",
                         "dataset")
    assert records.subsets == ["aime1983", "gpqa"] and records.references == ["42", ""]
    pytest.importorskip("fastparquet", reason="parquet needs fastparquet (the reasoning extra)")
    parquet = tmp_path / "acc.parquet"
    with warnings.catch_warnings():  # pandas 3 deprecates the fastparquet engine
        warnings.filterwarnings("ignore", message=".*fastparquet.*")
        pd.DataFrame({"dataset": ["aime25"], "ground_truth": ["7"], "input_tokens": [[5, 6]]}
                     ).to_parquet(parquet, engine="fastparquet",
                                  object_encoding={"dataset": "utf8", "ground_truth": "utf8",
                                                   "input_tokens": "json"})
    records = data.parse(parquet, "parquet", "", "input_tokens,tok_input", "ground_truth",
                         "dataset")
    assert records.tokens == [[5, 6]] and records.subsets == ["aime25"]


def test_bad_reasoning_files_are_one_line(tmp_path: Path) -> None:
    pytest.importorskip("fastparquet", reason="parquet needs fastparquet (the reasoning extra)")
    bad = tmp_path / "acc.parquet"
    bad.write_bytes(b"PAR1 not really")
    with pytest.raises(DatasetError, match="not a parquet table") as raised:
        data.parse(bad, "parquet", "", "input_tokens", "ground_truth", "dataset")
    assert "\n" not in str(raised.value)
    pd = pytest.importorskip("pandas")
    no_ids = tmp_path / "r1.pkl"
    pd.DataFrame({"dataset": ["gpqa"], "text_input": ["q"]}).to_pickle(no_ids)
    with pytest.raises(DatasetError, match="record 0 has no field 'tok_input'"):
        data.parse(no_ids, "pandas-pickle", "text_input", "tok_input", "ground_truth",
                   "dataset")
    with pytest.raises(DatasetError, match="a performance set, not the accuracy set"):
        reasoning.evaluator("", "gpt-oss-120b")


@pytest.mark.parametrize("round_name", ["v6.0", "v6.1"])
def test_cards_and_round_rows_carry_the_checker_constants(round_name: str) -> None:
    """The checker's constants (tools/submission/submission_checker/constants.py @ b66003e):
    deepseek-r1 exact_match 0.99 x 81.3582 and TOKENS_PER_SAMPLE 0.9-1.1 x 3886.2274;
    gpt-oss-120b exact_match 83.13 x 0.99, TOKENS_PER_SAMPLE <= 1.1 x 9999."""
    from suite.config.rules import load_rules
    from suite.llm.card import load_llm_card
    from suite.paths import find_paths

    paths = find_paths()
    rules = load_rules(paths, round_name)
    deepseek, gpt_oss = rules.models["deepseek-r1"], rules.models["gpt-oss-120b"]
    assert deepseek.targets["exact_match"] == pytest.approx(0.99 * 81.3582)
    assert deepseek.targets["TOKENS_PER_SAMPLE"] == pytest.approx(0.9 * 3886.2274)
    assert deepseek.upper_limits["TOKENS_PER_SAMPLE"] == pytest.approx(1.1 * 3886.2274)
    assert gpt_oss.targets["exact_match"] == pytest.approx(83.13 * 0.99)
    assert gpt_oss.upper_limits["TOKENS_PER_SAMPLE"] == pytest.approx(1.1 * 9999)
    assert gpt_oss.compliance_tests == ["TEST07", "TEST09"]
    assert gpt_oss.accuracy_sample_count == 4395
    for name, model in (("deepseek-r1", deepseek), ("gpt-oss-120b", gpt_oss)):
        for benchmark in (name, f"{name}-interactive"):
            row = rules.benchmark(benchmark)
            assert row.checker_model == name and row.dataset_size == model.dataset_size
            assert row.accuracy_target == pytest.approx(model.targets["exact_match"])
        card = load_llm_card(paths, name)
        assert card.accuracy.evaluation == name and card.dataset.samples == model.dataset_size
        assert card.dataset.subset_field == "dataset"
    assert load_llm_card(paths, "deepseek-r1").generation.max_new_tokens == 20000


def test_gpt_oss_requests_sample_as_the_reference_and_deepseek_is_greedy() -> None:
    """gpt-oss-120b's generation_config.json: temperature 1.0, top_p 1.0; deepseek-r1's
    backend_registry.py: temperature 0.0. Neither is a submitter's extra_body change."""
    from suite.llm.card import load_llm_card
    from suite.llm.endpoint.backend import OpenAIBackend, OpenAIOptions
    from suite.paths import find_paths

    backend = OpenAIBackend(OpenAIOptions(urls=["http://h:1"]))
    gpt_oss = load_llm_card(find_paths(), "gpt-oss-120b")
    body = backend.settings(gpt_oss).body([1, 2])
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (1.0, 1.0, 32768)
    assert backend.unsubmittable(gpt_oss) == []
    body = backend.settings(load_llm_card(find_paths(), "deepseek-r1")).body([1, 2])
    assert body["temperature"] == 0.0 and "top_p" not in body and body["max_tokens"] == 20000
