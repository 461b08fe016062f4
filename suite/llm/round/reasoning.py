"""exact_match of the round's reasoning LLMs (deepseek-r1, gpt-oss-120b), as the reference
evaluations score it.

Each sample's ``dataset`` names its evaluator: the first of ``gpqa``, ``mmlu_pro``,
``math500``, ``aime``, ``livecodebench`` (gpt-oss-120b: then ``mmlu``) that the lower-cased
name contains. A sample is correct when an answer is extracted and equals the ground truth:

* **multiple choice** (GPQA: A-D; MMLU-Pro: A-J): the last "ANSWER"/"FINAL ANSWER" followed
  by a letter (MMLU-Pro: else the last standalone letter);
* **MATH500**: the content of the last ``\\boxed{...}`` (braces matched), graded by
  PRM800K's rules (``math_answers``);
* **AIME**: the last ``\\boxed{digits}``, else the last ``Answer: digits``; an integer 0-999
  equal to the ground truth's;
* **LiveCodeBench**: the first fenced ``python`` block, run against the problem's tests in
  the sandbox (``sandbox``), correct when every test passes.

``deepseek-r1`` (``language/deepseek-r1/eval_accuracy.py``): outputs decoded skipping
special tokens; a sample logged twice counts once (the first); ``exact_match`` is the mean
of 100/0 per sample, ``tokens_per_sample`` the mean output length, and the reference prints
``{'exact_match': ..., 'tokens_per_sample': ..., 'num-samples': ...}``.

``gpt-oss-120b`` (``eval_mlperf_accuracy.py`` with ``eval_accuracy.py``): outputs decoded
with special tokens kept (the harmony channels); multiple choice and code are read from
the ``<|channel|>final ... <|message|>`` section where there is one (bold ``**`` removed;
first a leading letter, then "Answer: X", then the full text's ANSWER rule, then for A-J a
standalone letter); code: the last ``python`` block, else the last plain fenced block; every
log entry counts; each sub-dataset's correct count is divided by its repeats (aime25: 8,
gpqa_diamond: 5, livecodebench_v6: 3; others 1) and ``exact_match`` is 100 x the sum of
those over the sum of totals over repeats, printed to 3 places.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from suite.errors import DatasetError
from suite.llm.round import math_answers
from suite.llm.round.livecodebench import Problem
from suite.llm.round.sandbox import Limits, run_tests

Flavor = Literal["deepseek-r1", "gpt-oss-120b"]
DATASET_REPEATS = {"aime25": 8, "gpqa_diamond": 5, "livecodebench_v6": 3}
_KEYS = {"deepseek-r1": ("gpqa", "mmlu_pro", "math500", "aime", "livecodebench"),
         "gpt-oss-120b": ("gpqa", "mmlu_pro", "math500", "aime", "livecodebench", "mmlu")}
_LETTERS = {"gpqa": "D", "mmlu_pro": "J", "mmlu": "J"}


def evaluator(subset: str, flavor: Flavor) -> str:
    """The evaluator a sample's ``dataset`` value selects; an unknown one is an error."""
    name = subset.lower()
    if not name:
        raise DatasetError("a sample has no sub-dataset (no 'dataset' value): the file is "
                           "a performance set, not the accuracy set",
                           hint="score the accuracy test on the accuracy dataset file")
    for key in _KEYS[flavor]:
        if key in name:
            return key
    raise DatasetError(f"no evaluator for dataset '{subset}' (the reference knows "
                       f"{', '.join(_KEYS[flavor])})",
                       hint="give the official dataset file with --dataset-path")


def _answer_rule(text: str, top: str) -> str | None:
    pattern = (rf"\b(?:ANSWER|FINAL\s*ANSWER)\b\s*[:=]?\s*(?:\(?\s*([A-{top}])\s*\)?)"
               r"(?:\s*$|[^A-Za-z])")
    found = list(re.finditer(pattern, text, re.IGNORECASE))
    return found[-1].group(1).upper() if found else None


def _standalone(text: str, top: str) -> str | None:
    found = list(re.finditer(rf"\b([A-{top}])\b", text, re.IGNORECASE))
    return found[-1].group(1).upper() if found else None


def _unquote(text: str) -> str:
    if text.startswith(("['", '["')) and text.endswith(("']", '"]')):
        text = text[2:-2].strip()
    return text.replace("\\n", "\n").replace("\\'", "'")


def final_section(text: str) -> str:
    """gpt-oss-120b's harmony final channel, or the whole text where there is none."""
    text = text.strip()
    if not text:
        return ""
    match = re.search(r"<\|channel\|>final[^<]*<\|message\|>(.*?)(?:<\|return\|>|$)", text,
                      re.DOTALL)
    return match.group(1).strip() if match else text


def choice_deepseek(text: str, top: str) -> str | None:
    text = text.strip()
    if not text:
        return None
    text = _unquote(text)
    found = _answer_rule(text, top)
    if found is None and top == "J":
        found = _standalone(text, top)
    return found


def choice_gpt_oss(text: str, top: str) -> str | None:
    text = text.strip()
    if not text:
        return None
    final = _unquote(re.sub(r"\*\*([^*]+)\*\*", r"\1", final_section(text)))
    leading = re.match(rf"^[^a-zA-Z]*([A-{top}])(?:[^a-zA-Z]|$)", final.strip(),
                       re.IGNORECASE)
    if leading:
        return leading.group(1).upper()
    stated = re.search(rf"\b(?:Answer|ANSWER)\s*[:.]?\s*([A-{top}])\b", final, re.IGNORECASE)
    if stated:
        return stated.group(1).upper()
    found = _answer_rule(text.replace("\\n", "\n").replace("\\'", "'"), top)
    if found is None and top == "J":
        found = _standalone(final, top)
    return found


def boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{`` up to its matching brace."""
    text = text.strip()
    start = text.rfind("\\boxed{")
    if not text or start == -1:
        return None
    depth = 0
    for index in range(start + 7, len(text)):
        if text[index] == "{":
            depth += 1
        elif text[index] == "}":
            if depth == 0:
                return text[start + 7:index].strip()
            depth -= 1
    return None


def aime_answer(text: str) -> int | None:
    text = text.strip()
    if not text:
        return None
    found = list(re.finditer(r"\\boxed{\s*(\d+)\s*}", text))
    if not found:
        found = list(re.finditer(r"Answer:\s*(\d+)(?!\.)\b", text,
                                 re.IGNORECASE | re.MULTILINE))
    if not found:
        return None
    value = int(found[-1].group(1))
    return value if 0 <= value <= 999 else None


def code_deepseek(text: str) -> str | None:
    text = text.strip()
    match = re.search(r"```python(.*?)```", text, re.DOTALL) if text else None
    return match.group(1).strip() if match else None


def _last_block(text: str) -> str | None:
    python = list(re.finditer(r"```python(.*?)```", text, re.DOTALL))
    if python:
        return python[-1].group(1).strip()
    plain = list(re.finditer(r"```(.*?)```", text, re.DOTALL))
    if plain:
        return re.sub(r"^(?:python|py)\s*\n", "", plain[-1].group(1).strip(),
                      flags=re.IGNORECASE)
    return None


def code_gpt_oss(text: str) -> str | None:
    text = text.strip()
    if not text:
        return None
    final = final_section(text)
    if final != text and (found := _last_block(final)) is not None:
        return found
    return _last_block(text)


def extract(text: str, key: str, flavor: Flavor) -> str | int | None:
    """The answer the reference's parser extracts for evaluator ``key``."""
    if key in _LETTERS:
        pick = choice_deepseek if flavor == "deepseek-r1" else choice_gpt_oss
        return pick(text, _LETTERS[key])
    if key == "math500":
        return boxed(text)
    if key == "aime":
        return aime_answer(text)
    return code_deepseek(text) if flavor == "deepseek-r1" else code_gpt_oss(text)


@dataclass
class CodeJudge:
    """LiveCodeBench problems by question id, and each test's limits."""

    problems: Mapping[str, Problem]
    limits: Limits = field(default_factory=Limits)
    run: Callable[..., tuple[bool, str]] = run_tests

    def __call__(self, code: str, question_id: str) -> tuple[bool, str]:
        problem = self.problems.get(question_id)
        if problem is None:
            return False, f"question id '{question_id}' is not among the problems"
        return self.run(code, problem.fn_name, problem.tests, self.limits)


def judge(extracted: str | int | None, truth: str, key: str,
          code: CodeJudge | None) -> tuple[bool, str]:
    """Whether ``extracted`` is correct for ``truth`` (an empty truth: no ground truth)."""
    if extracted is None:
        return False, "no answer extracted"
    if not truth:
        return False, "no ground truth"
    if key in _LETTERS:
        letter = str(extracted).upper()
        options = "ABCDEFGHIJ"[:"ABCDEFGHIJ".index(_LETTERS[key]) + 1]
        return bool(letter) and letter in options and letter == truth.upper(), "choice"
    if key == "math500":
        given = str(extracted).strip()
        return bool(given) and math_answers.grade_answer(given, truth), "math"
    if key == "aime":
        try:
            return int(extracted) == int(truth), "aime"
        except (TypeError, ValueError):
            return False, "ground truth is not an integer"
    if code is None:
        raise DatasetError("LiveCodeBench samples need the problems' tests",
                           hint="give the LiveCodeBench directory (docs/llm-round.md)")
    return code(str(extracted), truth) if extracted else (False, "empty code")


@dataclass
class Sample:
    qsl_idx: int
    text: str
    tokens: int


def score(samples: Sequence[Sample], subsets: Sequence[str], truths: Sequence[str],
          flavor: Flavor, code: CodeJudge | None = None) -> dict[str, Any]:
    """The reference's result for the logged ``samples`` (see the module docstring)."""
    if flavor == "deepseek-r1":
        seen: set[int] = set()
        kept = []
        for sample in samples:
            if sample.qsl_idx not in seen and sample.qsl_idx < len(truths):
                seen.add(sample.qsl_idx)
                kept.append(sample)
        samples = kept
    else:
        samples = [s for s in samples if s.qsl_idx < len(truths)]
    if not samples:
        raise DatasetError("the accuracy log holds no sample of the dataset",
                           hint="run the accuracy test again")
    stats: dict[str, list[int]] = {}
    keys = [evaluator(subsets[s.qsl_idx], flavor) for s in samples]
    # code runs in child processes: several at once (the reference runs a pool too)
    with ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1))) as pool:
        verdicts = list(pool.map(
            lambda pair: judge(extract(pair[0].text, pair[1], flavor),
                               truths[pair[0].qsl_idx], pair[1], code),
            zip(samples, keys, strict=True)))
    correct = [ok for ok, _ in verdicts]
    for sample, ok in zip(samples, correct, strict=True):
        subset = subsets[sample.qsl_idx]
        counts = stats.setdefault(subset.lower(), [0, 0])
        counts[0] += ok
        counts[1] += 1
    per_dataset = {name: {"correct": c, "total": t} for name, (c, t) in sorted(stats.items())}
    tokens = sum(s.tokens for s in samples)
    if flavor == "deepseek-r1":
        return {"exact_match": 100.0 * sum(correct) / len(samples),
                "tokens_per_sample": tokens / len(samples), "num-samples": len(samples),
                "per_dataset": per_dataset, "correct": correct}
    final = maximum = 0.0
    for name in sorted(stats):
        repeats = DATASET_REPEATS.get(name, 1)
        final += stats[name][0] / repeats
        maximum += stats[name][1] / repeats
    percent = final / maximum * 100 if maximum > 0 else 0.0
    return {"exact_match": float(f"{percent:.3f}"), "exact_match_unrounded": percent,
            "tokens_per_sample": tokens / len(samples), "num-samples": len(samples),
            "per_dataset": per_dataset, "correct": correct}


def printed(result: Mapping[str, Any], flavor: Flavor) -> str:
    """The line the reference prints, which the checker and TEST07 read."""
    if flavor == "deepseek-r1":
        shown = {k: result[k] for k in ("exact_match", "tokens_per_sample", "num-samples")}
        return repr(shown)
    return f"'exact_match': {result['exact_match_unrounded']:.3f}"
