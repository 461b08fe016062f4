"""qwen3.6-27b's accuracy: BFCL v4 single-turn, scored as the round's reference scores it.

The reference is mlcommons/endpoints' ``evaluation/bfcl_v4_scorer.py`` with
``extractor.py``'s ``FunctionCallExtractor`` and bfcl-eval's AST checker (``bfcl_ast``):

* **what is scored** of a response: its tool calls as compact JSON where it returned any,
  else its text (reasoning, then content);
* **extraction** (``extract``), first that applies: the text parses as a JSON list of
  OpenAI tool calls (objects with a ``function`` object; its ``arguments`` JSON text read
  where it parses); a JSON list of ``{"name", "arguments"}`` objects; calls written in the
  text, ``name(key=literal, ...)``, balanced parentheses and quotes, not inside another
  call, not a keyword or a common word (``print``, ``The``...), not a bare signature
  (``f(a, b)``); nothing: ``[]``;
* **a sample**: a hallucination subset (``irrelevance``, ``live_irrelevance``) scores 1
  when the response holds no tool call (what it scored is not a tool-call list), else 0;
  any other: 1 when the expected answer is empty and nothing was called; else every
  extracted call ``{name: arguments}`` (arguments JSON text read, else ``{}``) goes to the
  AST check with the sample's functions, answer and subset (``simple_java``: Java,
  ``simple_javascript``: JavaScript, else Python);
* **the figures**: a sample logged twice counts once, a sample not logged counts 0;
  per subset the mean; per category ``live`` weighted by samples, ``non_live`` the mean of
  [the mean of the ``simple_*`` subsets] and its other subsets, ``hallucination`` the
  plain mean; ``normalized_single_turn_score`` the mean of the categories;
  ``overall_accuracy`` the mean over every sample; each x 100, rounded to 2 places.

The round's checker reads ``overall_accuracy`` as its ``mAP`` (``ACC_PATTERN["mAP"]``,
target 85.3677): ``accuracy.txt`` holds ``mAP=<overall>``, then the reference's breakdown,
then the log's hash. The README's and rules' 97 % band (overall >= 83.64, normalized >=
85.32) is recorded beside it (``readme_gate``), not judged: the checker's gate is.
"""

from __future__ import annotations

import ast
import contextlib
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from suite.accuracy import read_accuracy_entries
from suite.errors import DatasetError, SuiteError
from suite.llm.round import bfcl_ast
from suite.llm.round.bfcl import CATEGORY_MAP
from suite.logs import ACCURACY_LOG
from suite.models import sha256_file

if TYPE_CHECKING:
    from suite.llm.dataset import LLMDataset

ACCURACY_TXT = "accuracy.txt"
HALLUCINATION = frozenset(CATEGORY_MAP["hallucination"])
LANGUAGE = {"simple_java": "java", "simple_javascript": "javascript"}
#: README / inference_rules.adoc: 0.97 x the reference's 86.23 and 87.96 (not the checker's)
README_GATE = {"overall_accuracy": 83.64, "normalized_single_turn_score": 85.32}
_SKIP = frozenset({
    "print", "return", "if", "for", "while", "def", "class", "import", "from", "with",
    "assert", "raise", "try", "except", "len", "str", "int", "float", "list", "dict", "set",
    "tuple", "type", "isinstance", "range", "enumerate", "zip", "map", "filter", "Note",
    "Example", "Here", "This", "The", "For"})
_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
_SIGNATURE = re.compile(r"[A-Za-z_]\w*(?:\s*:\s*\w+)?")


def scored_text(response: dict[str, Any]) -> str:
    """What the reference scores of a recorded response (module docstring)."""
    calls = response.get("tool_calls") or []
    if calls:
        return json.dumps(calls, separators=(",", ":"), ensure_ascii=False)
    return f"{response.get('reasoning') or ''}{response.get('content') or ''}"


def _tool_calls_json(text: str) -> list[dict[str, Any]] | None:
    try:
        data = json.loads(text)
    except (ValueError, TypeError):
        return None
    if not isinstance(data, list):
        return None
    calls = []
    for item in data:
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(function, dict):
            return None
        arguments = function.get("arguments", "{}")
        if isinstance(arguments, str):
            with contextlib.suppress(ValueError):
                arguments = json.loads(arguments)
        calls.append({"name": function.get("name", ""), "arguments": arguments})
    return calls or None


def _function_array(text: str) -> list[dict[str, Any]] | None:
    try:
        data = json.loads(text)
    except (ValueError, TypeError):
        return None
    if not isinstance(data, list) or not all(isinstance(i, dict) and "name" in i
                                             for i in data):
        return None
    return [{"name": i["name"], "arguments": i.get("arguments", {})} for i in data] or None


def _closing(text: str, start: int) -> int | None:
    """The index of the parenthesis closing the one at ``start`` (quotes respected)."""
    depth, index, single, double = 0, start, False, False
    while index < len(text):
        char = text[index]
        if char == "\\" and (single or double):
            index += 2
            continue
        if char == "'" and not double:
            single = not single
        elif char == '"' and not single:
            double = not double
        elif not single and not double:
            if char == "(":
                depth += 1
            elif char == ")":
                depth -= 1
                if depth == 0:
                    return index
        index += 1
    return None


def _arguments(text: str) -> dict[str, Any]:
    if not text:
        return {}
    try:
        tree = ast.parse(f"dict({text})", mode="eval")
    except (SyntaxError, ValueError):
        return {"_raw": text}
    found: dict[str, Any] = {}
    if isinstance(tree.body, ast.Call):
        for keyword in tree.body.keywords:
            if keyword.arg is not None:
                try:
                    found[keyword.arg] = ast.literal_eval(keyword.value)
                except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                    found[keyword.arg] = ast.unparse(keyword.value)
    return found


def _text_calls(text: str) -> list[dict[str, Any]] | None:
    calls: list[dict[str, Any]] = []
    taken: list[tuple[int, int]] = []
    for match in _CALL.finditer(text):
        if any(a <= match.start() < b for a, b in taken) or match.group(1) in _SKIP:
            continue
        opening = match.end() - 1
        closing = _closing(text, opening)
        if closing is None:
            continue
        taken.append((opening, closing + 1))
        inner = text[opening + 1:closing].strip()
        if inner and all(_SIGNATURE.fullmatch(p.strip()) for p in inner.split(",")
                         if p.strip()):
            continue  # a signature, not a call
        calls.append({"name": match.group(1), "arguments": _arguments(inner)})
    return calls or None


def extract(text: str) -> list[dict[str, Any]]:
    """The calls the reference's extractor finds in ``text`` (module docstring)."""
    text = text.strip() if isinstance(text, str) else ""
    if not text:
        return []
    calls = _tool_calls_json(text) or _function_array(text) or _text_calls(text) or []
    try:  # the reference hands the calls on as JSON text: tuples become lists, keys text
        found: list[dict[str, Any]] = json.loads(json.dumps(calls))
    except (TypeError, ValueError):  # not JSON (a set): the reference fails; no call here
        return []
    return found


def score_sample(text: str, truth: str, subset: str,
                 functions: list[dict[str, Any]] | None) -> float:
    """One sample's score, 1.0 or 0.0 (module docstring)."""
    if subset in HALLUCINATION:
        return 0.0 if _tool_calls_json(text.strip()) is not None else 1.0
    calls = extract(text)
    try:
        expected = json.loads(truth)
    except ValueError:
        return 0.0
    if not expected:
        return 0.0 if calls else 1.0
    converted = []
    for call in calls:
        if not isinstance(call, dict) or "name" not in call:
            continue
        arguments = call.get("arguments", {})
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                arguments = {}
        try:
            converted.append({call["name"]: arguments})
        except TypeError:  # a name that is no text
            return 0.0
    try:
        valid, _ = bfcl_ast.check(functions or [], converted, expected, subset,
                                  LANGUAGE.get(subset, "python"))
    except DatasetError:
        raise
    except (AttributeError, TypeError, KeyError, IndexError):
        # Arguments that are no object (a list, a number) break the reference's checker
        # as well; here such a call does not match.
        return 0.0
    return 1.0 if valid else 0.0


def aggregate(scores: dict[str, list[float]]) -> dict[str, Any]:
    """The reference's breakdown of per-subset sample scores (module docstring)."""
    subsets = {name: sum(s) / len(s) for name, s in scores.items() if s}
    categories: dict[str, float] = {}
    for category, members in CATEGORY_MAP.items():
        present = [s for s in members if s in subsets]
        if not present:
            continue
        if category == "live":
            total = sum(len(scores[s]) for s in present)
            categories[category] = sum(subsets[s] * len(scores[s]) for s in present) / total
        elif category == "non_live":
            simple = [subsets[s] for s in present if s.startswith("simple_")]
            top = ([sum(simple) / len(simple)] if simple else []) + \
                [subsets[s] for s in present if not s.startswith("simple_")]
            categories[category] = sum(top) / len(top)
        else:
            categories[category] = sum(subsets[s] for s in present) / len(present)
    every = [x for s in scores.values() for x in s]
    overall = sum(every) / len(every) if every else 0.0
    normalized = sum(categories.values()) / len(categories) if categories else 0.0
    return {"overall_accuracy": round(overall * 100, 2),
            "normalized_single_turn_score": round(normalized * 100, 2),
            "category_scores": {k: round(v * 100, 2) for k, v in categories.items()},
            "subset_scores": {k: round(v * 100, 2) for k, v in subsets.items()}}


def score(texts: dict[int, str], truths: Sequence[str], subsets: Sequence[str],
          functions: Sequence[list[dict[str, Any]] | None]) -> dict[str, Any]:
    """The breakdown for the scored texts by sample index (missing samples count 0)."""
    scores: dict[str, list[float]] = {}
    for index, subset in enumerate(subsets):
        text = texts.get(index)
        value = 0.0 if text is None else score_sample(text, truths[index], subset,
                                                       functions[index])
        scores.setdefault(subset, []).append(value)
    result = aggregate(scores)
    result["total_samples"] = len(texts)
    result["issued_samples"] = len(subsets)
    return result


def log_texts(path: Path, total: int) -> dict[int, str]:
    """Each logged sample's scored text (the first entry of a sample logged twice)."""
    texts: dict[int, str] = {}
    for entry in read_accuracy_entries(path):
        try:
            index = int(entry["qsl_idx"])
            response = json.loads(bytes.fromhex(entry["data"]).decode("utf-8"))
        except (KeyError, ValueError, TypeError) as exc:
            raise SuiteError(f"{path}: an entry is not a recorded tool-calling response "
                             f"({type(exc).__name__}: {exc})",
                             hint="run the accuracy test again") from None
        if not isinstance(response, dict) or not 0 <= index < total:
            raise SuiteError(f"{path}: entry for qsl_idx {index} is not a response of this "
                             "dataset", hint="run the accuracy test again")
        texts.setdefault(index, scored_text(response))
    return texts


def score_log(test_dir: Path, dataset: LLMDataset, targets: dict[str, float],
              upper_limits: dict[str, float]
              ) -> tuple[dict[str, object], bool, list[str], str]:
    """The result, the verdict against the round's targets, a line per check and the
    log's hash (the shape of ``reasoning_log.score_log``); writes ``accuracy.txt``."""
    from suite.llm.round import scoring

    log = test_dir / ACCURACY_LOG
    result = rescore(log, dataset)
    passed, lines = scoring.verdict(result, targets, upper_limits)
    digest = sha256_file(log)
    (test_dir / ACCURACY_TXT).write_text(
        f"{printed(result)}\n{result!r}\nhash={digest}\n", encoding="utf-8")
    return result, passed, lines, digest


def rescore(log: Path, dataset: LLMDataset) -> dict[str, Any]:
    """The result dict of an accuracy log of recorded responses over ``dataset`` (its
    subsets, answers and functions): the reference's breakdown, ``mAP`` (the checker's
    name of overall_accuracy), ``gen_num`` and the README's band. The run scores with it,
    and the audit re-scores a bundle's log with it (``suite.llm.reasoning_audit``)."""
    if dataset.subsets is None:
        raise DatasetError(f"{dataset.path}: not a BFCL dataset", hint="check the card")
    texts = log_texts(log, len(dataset.subsets))
    result: dict[str, Any] = score(texts, dataset.references, dataset.subsets,
                                   [s.func_description for s in dataset.bfcl])
    result["mAP"] = result["overall_accuracy"]
    result["gen_num"] = result["total_samples"]
    result["readme_gate"] = {k: f"{result[k]} >= {v}: {'met' if result[k] >= v else 'not met'}"
                             for k, v in README_GATE.items()}
    return result


def printed(result: dict[str, Any]) -> str:
    """accuracy.txt's first line: what the checker's ``ACC_PATTERN["mAP"]`` reads."""
    return f"mAP={result['mAP']}"
