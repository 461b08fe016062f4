"""qwen3.6-27b: BFCL v4 single-turn accuracy equal to the round's reference scorer.

The fixture (``tests/support/bfcl_fixtures.py``) holds 33 samples of the round's subsets
in the reference's parquet format, with hand-written responses. Each expected figure
(``REFERENCE_ROWS``, ``REFERENCE_BREAKDOWN``) is what the reference's own code computed on
the same responses: mlcommons/endpoints @ ea33275's ``BFCLv4Scorer.score()`` and
``score_breakdown()`` (src/inference_endpoint/evaluation/bfcl_v4_scorer.py, with its
``FunctionCallExtractor`` and ``core/types.py``'s ``TextModelOutput`` / ``merge_tool_calls``)
calling bfcl-eval 2026.3.23's ``ast_checker`` (the wheel from the package index), run in a
scratch directory with the suite's venv plus msgspec, requests and pandas. Only packaging
was stood in for: the package ``__init__`` modules (whose imports need Python 3.12 and a
server stack), the ``Scorer``/``Dataset`` base classes (``match_sample_index`` as written
there), and bfcl-eval's model table, of which the checker reads one fact
(``gpt-4o-2024-11-20-FC``: ``underscore_to_dot = True``). Each sample's response was given
as the reference's client accumulates a stream: ``TextModelOutput(output=<content
chunks>, tool_calls=<per-event tool-call deltas>)``, the deltas the synthetic engine
streams (``bfcl_fixtures.reference_rows``). Steps:

    python -m tests.support.bfcl_fixtures FX
    python run_reference.py FX/reference_rows.json
    # score_breakdown(): overall_accuracy 48.48, normalized_single_turn_score 58.01,
    # category_scores hallucination 50.0, live 66.67, non_live 57.37 (subsets as below);
    # per sample, the loop of score() through the scorer's own _score_hallucination /
    # FunctionCallExtractor.extract / _score_ast: REFERENCE_ROWS
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from suite.errors import DatasetError
from suite.llm.card import load_llm_card
from suite.llm.endpoint import tool_calls
from suite.llm.endpoint.backend import OpenAIBackend, OpenAIOptions
from suite.llm.endpoint.http_pool import StreamError
from suite.llm.endpoint.sse import StreamState, read_event
from suite.llm.round import bfcl, bfcl_ast, bfcl_score
from suite.paths import find_paths
from suite.serve.synthetic_llm import _chat_events
from tests.support import bfcl_fixtures as fx

pytest.importorskip("fastparquet", reason="the BFCL file is parquet (.[reasoning])")


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> list[bfcl.BfclSample]:
    return bfcl.load(fx.write_parquet(tmp_path_factory.mktemp("bfcl") / "st.parquet"))


def _streamed(response: dict[str, object]) -> bytes:
    """The response as the client records it after the synthetic engine's stream."""
    state = StreamState()
    for delta in _chat_events(response, 4):
        read_event(state, {"choices": [{"index": 0, "delta": delta}]}, chat=True)
    ids, payload = tool_calls.Finisher(lambda text: list(text.encode()), 1024)(state)
    assert ids  # counted on the text, the reasoning and the calls' JSON
    return payload


def test_scores_equal_the_reference(samples: list[bfcl.BfclSample]) -> None:
    assert [s.subset for s in samples] == [s[0] for s in fx.ordered()]
    texts = {i: bfcl_score.scored_text(json.loads(_streamed(sample[4])))
             for i, sample in enumerate(fx.ordered())}
    truths, subsets = [s.ground_truth for s in samples], [s.subset for s in samples]
    functions = [s.func_description for s in samples]
    rows = [bfcl_score.score_sample(texts[i], truths[i], subsets[i], functions[i])
            for i in range(len(samples))]
    assert rows == fx.REFERENCE_ROWS
    assert bfcl_score.score(texts, truths, subsets, functions) == fx.REFERENCE_BREAKDOWN


def test_a_missing_sample_counts_zero_and_a_duplicate_once(
        samples: list[bfcl.BfclSample], tmp_path: Path) -> None:
    """The reference scores an issued sample that never completed 0 and keeps one entry
    per sample; here the accuracy log's first entry of a sample is kept."""
    right = fx.ordered()[20][4]  # simple_python, correct
    wrong = fx.ordered()[22][4]
    log = tmp_path / "mlperf_log_accuracy.json"
    log.write_text(json.dumps([{"qsl_idx": 20, "data": _streamed(right).hex()},
                               {"qsl_idx": 20, "data": _streamed(wrong).hex()}]))
    texts = bfcl_score.log_texts(log, len(samples))
    assert list(texts) == [20]
    result = bfcl_score.score(texts, [s.ground_truth for s in samples],
                              [s.subset for s in samples],
                              [s.func_description for s in samples])
    assert result["overall_accuracy"] == round(100 / 33, 2)
    assert result["total_samples"] == 1 and result["issued_samples"] == 33


def test_selection_is_the_rounds_sampling() -> None:
    """Per subset in sorted order, the first int(total x pct) rows at the category's rate,
    every row of a subset of at most 25; live_relevance is in no category."""
    def rows(subset: str, count: int) -> list[bfcl.BfclSample]:
        return [bfcl.BfclSample({"messages": []}, "[]", [], subset, f"{subset}_{i}")
                for i in range(count)]
    chosen = bfcl.select([*rows("simple_python", 30), *rows("live_simple", 26),
                          *rows("irrelevance", 25), *rows("live_relevance", 5),
                          *rows("live_irrelevance", 40)])
    assert [s.sample_id for s in chosen] == (
        [f"irrelevance_{i}" for i in range(25)] + [f"live_irrelevance_{i}" for i in range(4)]
        + ["live_simple_0", "live_simple_1"] + [f"simple_python_{i}" for i in range(18)])


def _to_parquet(frame: object, path: Path) -> None:
    with warnings.catch_warnings():  # pandas 3 deprecates the fastparquet engine
        warnings.filterwarnings("ignore", message=".*fastparquet.*")
        frame.to_parquet(path, engine="fastparquet")  # type: ignore[attr-defined]


@pytest.mark.parametrize(("column", "value", "message"), [
    ("messages", "[{not json", "row 0: column 'messages' is not JSON"),
    ("messages", "{}", "row 0: column 'messages' holds dict, not a JSON list"),
    ("tools", "3", "row 0: column 'tools' holds int, not a JSON list"),
])
def test_a_bad_cell_names_row_and_column(tmp_path: Path, column: str, value: str,
                                         message: str) -> None:
    import pandas as pd

    path = fx.write_parquet(tmp_path / "st.parquet")
    frame = pd.read_parquet(path)
    frame.loc[0, column] = value
    _to_parquet(frame, path)
    with pytest.raises(DatasetError, match=message):
        bfcl.load(path)


def test_a_file_without_the_columns_is_refused(tmp_path: Path) -> None:
    import pandas as pd

    path = tmp_path / "other.parquet"
    _to_parquet(pd.DataFrame({"prompt": ["x"]}), path)
    with pytest.raises(DatasetError, match=r"no column 'messages'.*not BFCL v4"):
        bfcl.load(path)


def test_checker_corners() -> None:
    area = fx.FUNCTIONS["area"]
    answer = [{"calculate_triangle_area": {"base": [10], "height": [5, 6], "unit": [""]}}]
    call = {"calculate_triangle_area": {"base": 10, "height": 6}}
    assert bfcl_ast.check([area], [call], answer, "simple_python") == (True, "")
    # a bool is not an integer (the reference compares types exactly)
    bad = {"calculate_triangle_area": {"base": True, "height": 5}}
    assert bfcl_ast.check([area], [bad], answer, "simple_python")[1] == "type_error:simple"
    assert bfcl_ast.standardize("New York, N.Y.") == "newyorkny"
    with pytest.raises(DatasetError, match="no func_description"):
        bfcl_ast.check([], [call], answer, "simple_python")
    assert bfcl_score.extract("print(x) then f(a, b) and g(k=[1, 2], s='x')") == [
        {"name": "g", "arguments": {"k": [1, 2], "s": "x"}}]


def test_stream_assembly_and_the_engines_count() -> None:
    state = StreamState()
    pieces = [{"tool_calls": [{"index": 1, "id": "b", "type": "function",
                               "function": {"name": "second", "arguments": ""}}]},
              {"tool_calls": [{"index": 0, "id": "a", "type": "function",
                               "function": {"name": "first", "arguments": '{"x"'}}]},
              {"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]},
              {"reasoning_content": "hm"}]
    for delta in pieces:
        assert read_event(state, {"choices": [{"delta": delta}]}, chat=True)
    calls = tool_calls.assembled(state.tool_calls)
    assert [c["function"] for c in calls] == [{"arguments": '{"x": 1}', "name": "first"},
                                              {"arguments": "", "name": "second"}]
    assert tool_calls.output_text("", "hm", calls) == "hm\n" + tool_calls.dumps(calls)
    state.usage = 5  # the engine's count, held to max_tokens
    with pytest.raises(StreamError, match="generated 5 output tokens, over max_tokens 4"):
        tool_calls.Finisher(lambda text: [1], 4)(state)
    with pytest.raises(StreamError, match="not a list"):
        read_event(StreamState(), {"choices": [{"delta": {"tool_calls": {"x": 1}}}]},
                   chat=True)


def test_the_cards_request_form() -> None:
    card = load_llm_card(find_paths(), "qwen3.6-27b")
    backend = OpenAIBackend(OpenAIOptions(urls=["http://h:1"]))
    settings = backend.settings(card)
    request = {"messages": [{"role": "user", "content": "hi"}], "tools": [],
               "tool_choice": "auto"}
    body = settings.body(request)
    assert body["messages"] == request["messages"] and body["tool_choice"] == "auto"
    assert body["max_completion_tokens"] == 1024 and "max_tokens" not in body
    assert body["seed"] == 42 and body["temperature"] == 0.0
    assert "min_tokens" not in body and "return_token_ids" not in body
    assert settings.path() == "/v1/chat/completions"
    assert backend.unsubmittable(card) == []
