"""A BFCL v4 single-turn fixture for qwen3.6-27b, in the reference's format.

``SAMPLES``: (subset, user message, functions offered, BFCL ground truth, the model's
hand-written response, what it exercises). Responses are what an engine returns: text
(``content``) and tool calls (``tool_calls``: name and arguments JSON text as written,
so a malformed one stays malformed). They cover a correct call, wrong types, missing
required and optional parameters, extra parameters, a wrong function, malformed
arguments, several calls (parallel, in either order), no call, calls written in the
text, Java and JavaScript values, and the hallucination subsets.

* ``write_parquet(path)``: the reference's ``bfcl_v4_single_turn.parquet`` columns
  (``messages``, ``tools`` JSON text; ``tool_choice``; ``ground_truth``,
  ``func_description`` JSON text; ``subset``; ``sample_id``), plus a ``live_relevance`` row
  the round's selection leaves out;
* ``chat_answers(path)``: the synthetic engine's ``--chat-answers`` file;
* ``reference_rows(path)``: the samples in the round's order as the endpoint client
  would have accumulated them (content chunks, tool-call delta chunks, as the synthetic
  engine streams them), for running the reference's scorer on them
  (``tests/unit/llm/test_bfcl_scoring.py`` says how).

``python -m tests.support.bfcl_fixtures OUT`` writes all three into OUT.
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path
from typing import Any


def _fn(name: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"name": name, "description": f"{name} (fixture)",
            "parameters": {"type": "dict", "properties": props, "required": required}}


FUNCTIONS: dict[str, dict[str, Any]] = {
    "area": _fn("calculate_triangle_area", {
        "base": {"type": "integer", "description": "base"},
        "height": {"type": "integer", "description": "height"},
        "unit": {"type": "string", "description": "unit", "default": "units"}},
        ["base", "height"]),
    "factorial": _fn("math.factorial", {"number": {"type": "integer"}}, ["number"]),
    "weather": _fn("get_weather", {"city": {"type": "string"},
                                   "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                   ["city"]),
    "sort": _fn("sort_list", {"items": {"type": "array", "items": {"type": "integer"}},
                              "reverse": {"type": "boolean"}}, ["items"]),
    "hotel": _fn("book_hotel", {"location": {"type": "string"}, "nights": {"type": "integer"},
                                "prefs": {"type": "dict", "properties": {
                                    "view": {"type": "string"}, "floor": {"type": "integer"}}}},
                 ["location", "nights"]),
    "currency": _fn("convert_currency", {"amount": {"type": "float"},
                                         "source": {"type": "string"},
                                         "target": {"type": "string"}},
                    ["amount", "source", "target"]),
    "java_sum": _fn("ArrayUtils.sum", {
        "numbers": {"type": "ArrayList", "items": {"type": "integer"}},
        "verbose": {"type": "boolean"}}, ["numbers"]),
    "js_date": _fn("formatDate", {"date": {"type": "String"}, "pad": {"type": "integer"}},
                   ["date"]),
}

_AREA = [{"calculate_triangle_area": {"base": [10], "height": [5], "unit": ["units", ""]}}]
_WEATHER_2 = [{"get_weather": {"city": ["Paris"], "unit": ["celsius", ""]}},
              {"get_weather": {"city": ["Tokyo"], "unit": ["celsius", ""]}}]


def _call(name: str, arguments: Any) -> dict[str, str]:
    return {"name": name, "arguments": arguments if isinstance(arguments, str)
            else json.dumps(arguments)}


def _calls(*calls: dict[str, str], content: str = "") -> dict[str, Any]:
    return {"content": content, "tool_calls": list(calls)}


def _text(content: str) -> dict[str, Any]:
    return {"content": content, "tool_calls": []}


A, W = "calculate_triangle_area", "get_weather"
#: (subset, user text, functions, ground truth, response, what it exercises)
SAMPLES: list[tuple[str, str, list[str], list[Any], dict[str, Any], str]] = [
    ("simple_python", "Area of a triangle, base 10, height 5?", ["area"], _AREA,
     _calls(_call(A, {"base": 10, "height": 5})), "correct; optional unit left out"),
    ("simple_python", "Area again, in units, base 10 height 5.", ["area"], _AREA,
     _calls(_call(A, {"base": 10, "height": 5, "unit": "units"})), "correct with optional"),
    ("simple_python", "Triangle base ten height five.", ["area"], _AREA,
     _calls(_call(A, {"base": "10", "height": 5})), "wrong type: string for integer"),
    ("simple_python", "Triangle with base 10 only, height 5.", ["area"], _AREA,
     _calls(_call(A, {"base": 10})), "missing required parameter"),
    ("simple_python", "Blue triangle base 10 height 5.", ["area"], _AREA,
     _calls(_call(A, {"base": 10, "height": 5, "color": "blue"})), "extra parameter"),
    ("simple_python", "Compute that area: 10 by 5.", ["area"], _AREA,
     _calls(_call("triangle_area", {"base": 10, "height": 5})), "wrong function name"),
    ("simple_python", "Area for 10 and 5 please.", ["area"], _AREA,
     _calls(_call(A, '{"base": 10, "height":')), "malformed arguments JSON"),
    ("simple_python", "Just write the call for base 10 height 5.", ["area"], _AREA,
     _text("Sure: calculate_triangle_area(base=10, height=5)"), "call written in the text"),
    ("simple_python", "What is the area? base 10, height 5", ["area"], _AREA,
     _text("The area is 25."), "no call"),
    ("simple_python", "Two triangles, base 10 height 5.", ["area"], _AREA,
     _calls(_call(A, {"base": 10, "height": 5}), _call(A, {"base": 10, "height": 5})),
     "two calls where one is wanted"),
    ("simple_python", "Factorial of 5?", ["factorial"],
     [{"math.factorial": {"number": [5]}}],
     _calls(_call("math_factorial", {"number": 5})), "dotted name sent as math_factorial"),
    ("simple_python", "Convert 100 USD to EUR.", ["currency"],
     [{"convert_currency": {"amount": [100.0], "source": ["USD"], "target": ["EUR"]}}],
     _calls(_call("convert_currency", {"amount": 100, "source": "usd", "target": "EUR"})),
     "integer for float; string case-folded"),
    ("simple_python", "Weather in New York?", ["weather"],
     [{"get_weather": {"city": ["New York, NY"], "unit": ["fahrenheit"]}}],
     _calls(_call(W, {"city": "new york ny"})), "optional not marked optional, left out"),
    ("simple_java", "Sum 1, 2 and 3 in Java, verbosely.", ["java_sum"],
     [{"ArrayUtils.sum": {"numbers": [[1, 2, 3]], "verbose": [True, ""]}}],
     _calls(_call("ArrayUtils_sum", {"numbers": "new ArrayList<>(Arrays.asList(1, 2, 3))",
                                     "verbose": "true"})), "Java values converted"),
    ("simple_java", "Sum 1, 2 and 3 in Java.", ["java_sum"],
     [{"ArrayUtils.sum": {"numbers": [[1, 2, 3]], "verbose": [True, ""]}}],
     _calls(_call("ArrayUtils_sum", {"numbers": "new ArrayList<>(Arrays.asList(1, 2, 3))",
                                     "verbose": True})), "Java value not a string"),
    ("simple_javascript", "Format 2024-01-01 with padding 2.", ["js_date"],
     [{"formatDate": {"date": ["2024-01-01"], "pad": [2, ""]}}],
     _calls(_call("formatDate", {"date": "'2024-01-01'", "pad": "2"})), "JS values converted"),
    ("simple_javascript", "Format 2024-01-01, pad two.", ["js_date"],
     [{"formatDate": {"date": ["2024-01-01"], "pad": [2, ""]}}],
     _calls(_call("formatDate", {"date": "2024-01-01", "pad": "two"})), "JS wrong type"),
    ("multiple", "Weather in Paris, in celsius?", ["area", "weather"],
     [{"get_weather": {"city": ["Paris"], "unit": ["celsius", ""]}}],
     _calls(_call(W, {"city": "Paris", "unit": "celsius"})), "the right one of several"),
    ("multiple", "How warm is Paris?", ["area", "weather"],
     [{"get_weather": {"city": ["Paris"], "unit": ["celsius", ""]}}],
     _calls(_call(A, {"base": 1, "height": 1})), "the wrong one of several"),
    ("parallel", "Weather in Paris and Tokyo?", ["weather"], _WEATHER_2,
     _calls(_call(W, {"city": "Tokyo"}), _call(W, {"city": "Paris"})), "both, other order"),
    ("parallel", "Weather for Paris and Tokyo, please.", ["weather"], _WEATHER_2,
     _calls(_call(W, {"city": "Paris"})), "one of two calls"),
    ("parallel", "Paris and Tokyo weather now.", ["weather"], _WEATHER_2,
     _calls(_call(W, {"city": "Paris"}), _call(W, {"city": "Osaka"})), "one wrong value"),
    ("parallel_multiple", "Weather in Paris and the area of a 10 by 5 triangle.",
     ["weather", "area"], [{"get_weather": {"city": ["Paris"], "unit": ["celsius", ""]}},
                           *_AREA],
     _calls(_call(A, {"base": 10, "height": 5}), _call(W, {"city": "Paris"})),
     "two functions, any order"),
    ("live_simple", "Sort 1 2 3 ascending.", ["sort"],
     [{"sort_list": {"items": [[1, 2, 3]], "reverse": [False, ""]}}],
     _calls(_call("sort_list", {"items": [1, 2, 3], "reverse": False})), "list value"),
    ("live_simple", "Sort these: 3, 1, 2.", ["sort"],
     [{"sort_list": {"items": [[1, 2, 3]], "reverse": [False, ""]}}],
     _calls(_call("sort_list", {"items": [3, 1, 2]})), "list in another order"),
    ("live_multiple", "Book 2 nights in Rome, sea view.", ["hotel", "weather"],
     [{"book_hotel": {"location": ["Rome"], "nights": [2],
                      "prefs": [{"view": ["sea"], "floor": [""]}, ""]}}],
     _calls(_call("book_hotel", {"location": "Rome", "nights": 2, "prefs": {"view": "Sea"}})),
     "dict value, key by key"),
    ("live_multiple", "Book Rome for 2 nights.", ["hotel", "weather"],
     [{"book_hotel": {"location": ["Rome"], "nights": [2], "prefs": [""]}}],
     _text('[{"name": "book_hotel", "arguments": {"location": "rome", "nights": 2}}]'),
     "a JSON list of calls in the text"),
    ("live_parallel", "Weather: Paris, Tokyo.", ["weather"], _WEATHER_2,
     _calls(_call(W, {"city": "Paris", "unit": "celsius"}), _call(W, {"city": "Tokyo"})),
     "two calls"),
    ("live_parallel_multiple", "Paris weather and a 10x5 triangle area.",
     ["weather", "area"], [{"get_weather": {"city": ["Paris"], "unit": ["celsius", ""]}},
                           *_AREA],
     _calls(_call(W, {"city": "Paris"}), _call(A, {"base": 5, "height": 10})),
     "two functions, values swapped"),
    ("irrelevance", "Who wrote Hamlet?", ["area"], [],
     _text("Shakespeare; no tool computes that."), "no call: right"),
    ("irrelevance", "Who painted the Mona Lisa?", ["weather"], [],
     _calls(_call(W, {"city": "Paris"})), "a call: wrong"),
    ("live_irrelevance", "Tell me a joke.", ["weather"], [],
     _text('get_weather(city="Paris")'), "a call in the text is no tool call: right"),
    ("live_irrelevance", "What is love?", ["sort"], [],
     _calls(_call("sort_list", "{}")), "a call: wrong"),
]
#: Each sample's score in the round's order (``ordered``), as the reference's scorer gave
#: it (tests/unit/llm/test_bfcl_scoring.py says how it was run).
REFERENCE_ROWS = [1, 0, 1, 0, 1, 1, 1, 0, 1, 0, 1, 0, 1, 0, 0, 1, 1, 0, 1, 0, 1, 1, 0, 0, 0, 0,
                  0, 1, 0, 0, 1, 1, 0]
#: What the reference's ``score_breakdown()`` printed for them.
REFERENCE_BREAKDOWN = {
    "overall_accuracy": 48.48, "normalized_single_turn_score": 58.01,
    "category_scores": {"hallucination": 50.0, "live": 66.67, "non_live": 57.37},
    "subset_scores": {"irrelevance": 50.0, "live_irrelevance": 50.0, "live_multiple": 100.0,
                      "live_parallel": 100.0, "live_parallel_multiple": 0.0,
                      "live_simple": 50.0, "multiple": 50.0, "parallel": 33.33,
                      "parallel_multiple": 100.0, "simple_java": 50.0,
                      "simple_javascript": 50.0, "simple_python": 38.46},
    "total_samples": 33, "issued_samples": 33}
#: In the file, left out by the round's selection (no category holds it).
EXCLUDED = ("live_relevance", "Weather in Oslo?", ["weather"], [],
            _calls(_call(W, {"city": "Oslo"})), "live_relevance: not in the round")

_OPENAPI = {"integer": "integer", "float": "number", "string": "string", "boolean": "boolean",
            "array": "array", "dict": "object", "ArrayList": "array", "String": "string"}


def tool(function: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI tool for a BFCL function, as bfcl_eval's convert_to_tool makes one (the
    name's dots as underscores, the types in OpenAPI's words)."""
    properties = {k: {**v, "type": _OPENAPI.get(v["type"], "string")}
                  for k, v in function["parameters"]["properties"].items()}
    return {"type": "function", "function": {
        "name": function["name"].replace(".", "_"), "description": function["description"],
        "parameters": {"type": "object", "properties": properties,
                       "required": function["parameters"]["required"]}}}


def _row(index: int, sample: tuple[str, str, list[str], list[Any], dict[str, Any], str]
         ) -> dict[str, str]:
    subset, text, functions, truth, _, _ = sample
    described = [FUNCTIONS[f] for f in functions]
    return {"messages": json.dumps([{"role": "user", "content": text}]),
            "tools": json.dumps([tool(f) for f in described]), "tool_choice": "auto",
            "ground_truth": json.dumps(truth) if truth else "[]",
            "func_description": json.dumps(described), "subset": subset,
            "sample_id": f"{subset}_{index}"}


def write_parquet(path: Path) -> Path:
    import pandas as pd

    rows = [_row(i, s) for i, s in enumerate([*SAMPLES, EXCLUDED])]
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():  # pandas 3 deprecates the fastparquet engine
        warnings.filterwarnings("ignore", message=".*fastparquet.*")
        pd.DataFrame(rows).to_parquet(path, engine="fastparquet",
                                      object_encoding={k: "utf8" for k in rows[0]})
    return path


def ordered() -> list[tuple[str, str, list[str], list[Any], dict[str, Any], str]]:
    """The samples in the round's order (by subset name, file order within)."""
    return sorted(SAMPLES, key=lambda s: s[0])


def chat_answers(path: Path) -> Path:
    """The synthetic engine's answers, each expecting the card's request form (its
    max_completion_tokens is not among them: the pre-flight asks for 2)."""
    answers = [[text, response, {"tools": [tool(FUNCTIONS[f])["function"]["name"]
                                           for f in functions],
                                 "tool_choice": "auto", "seed": 42, "temperature": 0.0}]
               for _, text, functions, _, response, _ in SAMPLES]
    path.write_text(json.dumps(answers), encoding="utf-8")
    return path


def reference_rows(path: Path, chunk: int = 4) -> Path:
    """The samples as the reference's client accumulates the synthetic engine's stream."""
    from suite.serve.synthetic_llm import _chat_events

    rows = []
    for subset, _, functions, truth, response, _ in ordered():
        events = _chat_events(response, chunk)
        rows.append({"subset": subset, "ground_truth": json.dumps(truth) if truth else "[]",
                     "func_description": json.dumps([FUNCTIONS[f] for f in functions]),
                     "content_chunks": [e["content"] for e in events if "content" in e],
                     "tool_call_chunks": [e["tool_calls"] for e in events
                                          if "tool_calls" in e]})
    path.write_text(json.dumps(rows), encoding="utf-8")
    return path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    write_parquet(out / "bfcl_v4_single_turn.parquet")
    chat_answers(out / "chat_answers.json")
    reference_rows(out / "reference_rows.json")


if __name__ == "__main__":
    main()
