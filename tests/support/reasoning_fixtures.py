"""Fixtures for the reasoning LLMs (deepseek-r1, gpt-oss-120b) in the reference's formats.

Hand-written model outputs that exercise every parser of the reference evaluations (wrong
format, several boxed answers, units, LaTeX, lettered options, code that fails a test,
code that loops or forks), with their sub-dataset and ground truth, and LiveCodeBench
problems in ``livecodebench/code_generation_lite``'s JSON-lines form (``test.jsonl``).

* ``DEEPSEEK``: (dataset, ground_truth, model_output) rows, the deepseek-r1 pickle's
  ``dataset``/``ground_truth`` columns and the text a model returned;
* ``GPT_OSS``: the same for gpt-oss-120b, outputs in the harmony format (analysis and final
  channels), with repeated questions as the accuracy set repeats them;
* ``write_lcb(directory)``: the LiveCodeBench problems the LiveCodeBench rows name.

``python -m tests.support.reasoning_fixtures OUT`` writes them as the reference reads them
(``deepseek_outputs.pkl``: a DataFrame with ``model_output`` and ``tok_model_output_len``;
``lcb/test.jsonl`` ... ``test6.jsonl``) for running the reference's scripts.
"""

from __future__ import annotations

import argparse
import base64
import json
import pickle
import warnings
import zlib
from pathlib import Path
from typing import Any

_SUM = "a, b = map(int, input().split())\nprint(a + b)"
_HALF = "x = int(input())\nprint(x / 2)"
_TRIPLE = ("class Solution:\n    def triple(self, nums: List[int]) -> List[int]:\n"
           "        return [3 * n for n in nums]")
PROBLEMS: list[dict[str, Any]] = [
    {"question_id": "abc001_a", "fn_name": None,
     "public": [("1 2", "3")], "private": [("10 20", "30"), ("-5 5", "0")]},
    {"question_id": "abc002_b", "fn_name": None,
     "public": [("3", "1.50")], "private": [("4", "2.0")]},
    {"question_id": "3100", "fn_name": "triple",
     "public": [("[1, 2]", "[3, 6]")], "private": [("[]", "[]"), ("[-1]", "[-3]")]},
]


def _fence(code: str, tag: str = "python") -> str:
    return f"```{tag}\n{code}\n```"


#: (dataset, ground_truth, model output): deepseek-r1's evaluators
DEEPSEEK: list[tuple[str, str, str]] = [
    ("gpqa", "B", "Let me think. The energy is conserved.\n\nANSWER: B"),
    ("gpqa", "C", "The answer is (C)."),                       # no ANSWER: nothing extracted
    ("gpqa", "D", "so FINAL ANSWER: (d)"),                      # lower case, parentheses
    ("gpqa", "C", "ANSWER: A at first... on reflection ANSWER: C"),   # the last one
    ("gpqa", "A", "ANSWER: E"),                                 # not an option of A-D
    ("gpqa", "B", "['ANSWER: B']"),                             # a quoted list artifact
    ("mmlu_pro", "J", "Checking each option... ANSWER: J"),
    ("mmlu_pro", "G", "I think it's G."),                       # standalone-letter fallback
    ("mmlu_pro", "B", "The answer is h"),                       # fallback finds the wrong one
    ("mmlu_pro", "A", "no options here 123"),
    ("math500", "\\frac12", "So the value is \\boxed{\\frac{1}{2}}."),
    ("math500", "\\frac{1}{2}", "\\boxed{0.5}"),
    ("math500", "10", "The side is \\boxed{10\\text{ cm}}."),   # units
    ("math500", "4", "First \\boxed{3}, no wait: \\boxed{4}"),  # several boxed answers
    ("math500", "\\sqrt{12}", "\\boxed{2\\sqrt{3}}"),           # sympy equivalence
    ("math500", "(1, 2)", "The point is \\boxed{(1,2)}"),       # tuples
    ("math500", "x^2+1", "\\boxed{x^2+1"),                       # unbalanced brace
    ("math500", "7", "The answer is 7."),                        # no box
    ("math500", "0.75", "\\boxed{\\dfrac{3}{4}}"),
    ("math500", "90", "\\boxed{90^\\circ}"),
    ("math500", "1000", "\\boxed{1,000}"),
    ("math500", "\\frac{3}{4}", "\\boxed{6/8}"),                 # a fraction not reduced
    ("math500", "\\text{(C)}", "\\boxed{\\text{(C)}}"),
    ("aime1983", "42", "Therefore \\boxed{42}."),
    ("aime1983", "17", "Answer: 017"),
    ("aime1983", "1000", "\\boxed{1000}"),                       # out of 0-999
    ("aime1983", "12", "Answer: 12."),                           # a trailing period
    ("aime1983", "7", "\\boxed{ 7 } and Answer: 8"),              # the box wins
    ("livecodebench", "abc001_a", "Here it is:\n" + _fence(_SUM)),
    ("livecodebench", "abc001_a", _fence("a, b = map(int, input().split())\nprint(a - b)")),
    ("livecodebench", "3100", _fence(_TRIPLE)),
    ("livecodebench", "3100", _fence("class Solution:\n    def triple(self, nums):\n"
                                     "        while True:\n            pass")),   # loops
    ("livecodebench", "abc001_a", "print(3)"),                    # no fenced block
    ("livecodebench", "abc001_a", _fence("import os\nos.fork()\n" + _SUM)),     # forks
    ("livecodebench", "abc002_b", _fence(_HALF)),                 # 1.5 and 2.0 as decimals
    ("livecodebench", "abc999_z", _fence(_SUM)),                  # an unknown problem
]


def _harmony(analysis: str, final: str | None) -> str:
    text = f"<|channel|>analysis<|message|>{analysis}<|end|>"
    if final is not None:
        text += f"<|start|>assistant<|channel|>final<|message|>{final}<|return|>"
    return text


#: (dataset, ground_truth, model output): gpt-oss-120b's evaluators, repeats included
GPT_OSS: list[tuple[str, str, str]] = [
    ("gpqa_diamond", "B", _harmony("Option A looks right. ANSWER: A", "**B**")),
    ("gpqa_diamond", "B", _harmony("Thinking.", "The correct option: Answer: B")),
    ("gpqa_diamond", "C", _harmony("ANSWER: C", None)),           # no final: the full text
    ("gpqa_diamond", "A", _harmony("hmm", "I cannot decide")),    # 'I' is no option of A-D
    ("gpqa_diamond", "D", _harmony("x", "(D) because")),
    ("gpqa_diamond", "D", "Plain output ANSWER: D"),
    ("gpqa_diamond", "A", _harmony("x", "**Answer: C**")),
    ("gpqa_diamond", "A", _harmony("x", "A")),
    ("gpqa_diamond", "A", _harmony("x", "A")),
    ("gpqa_diamond", "A", _harmony("x", "")),                     # an empty final section
    ("aime25", "42", _harmony("maybe \\boxed{41}", "\\boxed{42}")),
    ("aime25", "42", _harmony("Answer: 42", "so 42")),
    ("aime25", "42", _harmony("no", "\\boxed{420}")),
    ("aime25", "42", _harmony("no", "Answer: 42.")),
    ("aime25", "42", _harmony("no", "\\boxed{042}")),
    ("aime25", "42", _harmony("no", "nothing")),
    ("aime25", "42", _harmony("no", "\\boxed{42}")),
    ("aime25", "42", _harmony("no", "\\boxed{ 42 }")),
    ("livecodebench_v6", "abc001_a", _harmony(_fence("print(0)"), _fence(_SUM))),
    ("livecodebench_v6", "abc001_a", _harmony(_fence(_SUM), "No code.")),  # from the analysis
    ("livecodebench_v6", "abc001_a", _harmony("x", _fence(_SUM, ""))),   # a plain fence
    ("livecodebench_v6", "3100", _harmony("x", _fence(_TRIPLE, "py"))),
    ("livecodebench_v6", "3100", _harmony("x", _fence("class Solution:\n    def triple("
                                                      "self, nums):\n        return nums"))),
    ("livecodebench_v6", "abc002_b", _harmony("x", _fence("import time\nwhile True:\n"
                                                          "    time.sleep(1)"))),
]


#: What the reference scripts gave on these fixtures (tests/unit/llm/test_reasoning_scoring.py
#: says how they were run): per-row verdicts in the fixtures' order and the printed line.
REFERENCE_DEEPSEEK_ROWS = [1, 0, 1, 1, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0,
                           1, 1, 1, 0, 0, 1, 1, 0, 1, 0, 0, 0, 1, 0]
REFERENCE_DEEPSEEK_PRINTED = ("{'exact_match': 61.111111111111114, 'tokens_per_sample': "
                              "30.86111111111111, 'num-samples': 36}")
REFERENCE_GPT_OSS_ROWS = [1, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 1, 1, 1, 1,
                          0, 0]
REFERENCE_GPT_OSS_PRINTED = "'exact_match': 67.167"


def lcb_records() -> list[dict[str, str]]:
    """The problems as code_generation_lite's lines (the private tests compressed, as
    some of the real ones are)."""
    records = []
    for number, problem in enumerate(PROBLEMS):
        kind = "functional" if problem["fn_name"] else "stdin"

        def tests(pairs: list[tuple[str, str]], testtype: str = kind) -> str:
            return json.dumps([{"input": i, "output": o, "testtype": testtype}
                               for i, o in pairs])

        private = tests(problem["private"])
        if number == 0:
            private = base64.b64encode(zlib.compress(pickle.dumps(private))).decode()
        records.append({
            "question_title": f"problem {number}", "question_content": "...",
            "platform": "leetcode" if problem["fn_name"] else "atcoder",
            "question_id": problem["question_id"], "contest_id": "c1",
            "contest_date": "2023-05-01T00:00:00", "starter_code": "",
            "difficulty": "easy", "public_test_cases": tests(problem["public"]),
            "private_test_cases": private,
            "metadata": json.dumps({"func_name": problem["fn_name"]} if problem["fn_name"]
                                   else {})})
    return records


def write_lcb(directory: Path) -> Path:
    """``test.jsonl`` with every problem, and empty ``test2`` ... ``test6`` (release_v6)."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps(r) + "\n" for r in lcb_records())
    (directory / "test.jsonl").write_text(lines, encoding="utf-8")
    for number in range(2, 7):
        (directory / f"test{number}.jsonl").write_text("", encoding="utf-8")
    return directory


SPECIAL = ["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|return|>"]


def prompt_of(index: int, dataset: str) -> str:
    return f"Question {index} of {dataset}: think step by step, then answer."


def write_harmony_tokenizer(model_dir: Path) -> Path:
    """A byte-level BPE ``tokenizer.json`` trained on the gpt-oss outputs, with the harmony
    markers as special tokens (``<|return|>`` is EOS), and its ``tokenizer_config.json``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    texts = [o for _, _, o in (*GPT_OSS, *DEEPSEEK)]
    texts += [prompt_of(i, d) for i, (d, _, _) in enumerate((*GPT_OSS, *DEEPSEEK))]
    tokenizer.train_from_iterator(texts, trainer)
    model_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(model_dir / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|return|>",
              "clean_up_tokenization_spaces": False}
    (model_dir / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return model_dir / "tokenizer.json"


def gpt_oss_log(tokenizer_json: Path) -> list[dict[str, object]]:
    """LoadGen accuracy-log entries of the gpt-oss outputs (int32 ids, little-endian)."""
    import struct

    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_json))
    entries = []
    for index, (_, _, text) in enumerate(GPT_OSS):
        ids = tokenizer.encode(text).ids
        entries.append({"seq_id": index, "qsl_idx": index,
                        "data": struct.pack(f"<{len(ids)}i", *ids).hex().upper(),
                        "token_count": len(ids)})
    return entries


def build_run_files(out: Path, rows: list[int], card: str) -> dict[str, Path]:
    """A dataset file in the card's official format holding the fixture's ``rows``, the
    synthetic engine's answers (each prompt's fixture output), the tokenizer directory and
    the LiveCodeBench files beside the dataset (``livecodebench/``)."""
    import pandas as pd
    from tokenizers import Tokenizer

    fixture = DEEPSEEK if card == "deepseek-r1" else GPT_OSS
    model = out / "model"
    tokenizer = Tokenizer.from_file(str(write_harmony_tokenizer(model)))
    write_lcb(out / "livecodebench")
    prompts = [prompt_of(i, fixture[i][0]) for i in rows]
    ids = [tokenizer.encode(p).ids for p in prompts]
    answers = [[p, tokenizer.encode(fixture[i][2]).ids] for p, i in zip(ids, rows, strict=True)]
    (out / "answers.json").write_text(json.dumps(answers), encoding="utf-8")
    columns = {"dataset": [fixture[i][0] for i in rows],
               "ground_truth": [fixture[i][1] for i in rows]}
    if card == "deepseek-r1":
        dataset = out / "mlperf_deepseek_r1_dataset_4388_fp8_eval.pkl"
        pd.DataFrame({**columns, "text_input": prompts, "tok_input": ids,
                      "question": prompts}).to_pickle(dataset)
    else:
        dataset = _gpt_oss_parquet(out / "acc_eval_inputs.parquet", columns, ids)
    return {"dataset": dataset, "model": model, "answers": out / "answers.json"}


def _gpt_oss_parquet(path: Path, columns: dict[str, list[str]], ids: list[list[int]]) -> Path:
    import pandas as pd

    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():  # pandas 3 deprecates the fastparquet engine
        warnings.filterwarnings("ignore", message=".*fastparquet.*")
        pd.DataFrame({**columns, "input_tokens": ids}).to_parquet(
            path, engine="fastparquet", object_encoding={
                "dataset": "utf8", "ground_truth": "utf8", "input_tokens": "json"})
    return path


def build_perf_set(out: Path, model: Path, count: int) -> Path:
    """gpt-oss-120b's performance set in its format (``perf_eval_ref.parquet``): ``count``
    prompts that no fixture answer lists, so the synthetic engine answers each with its
    ``--tokens`` made-up tokens (TEST09 measures their mean length, nothing else)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model / "tokenizer.json"))
    ids = [tokenizer.encode(f"Performance prompt {k}: answer at length.").ids
           for k in range(count)]
    columns = {"dataset": ["gpqa_diamond"] * count, "ground_truth": ["A"] * count}
    return _gpt_oss_parquet(out / "perf_eval_ref.parquet", columns, ids)


def main() -> None:
    import pandas as pd

    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    write_lcb(out / "lcb")
    frame = pd.DataFrame({"dataset": [d for d, _, _ in DEEPSEEK],
                          "ground_truth": [g for _, g, _ in DEEPSEEK],
                          "model_output": [o for _, _, o in DEEPSEEK],
                          "question": ["q"] * len(DEEPSEEK),
                          "tok_model_output_len": [len(o) for _, _, o in DEEPSEEK]})
    frame.to_pickle(out / "deepseek_outputs.pkl")
    tokenizer = write_harmony_tokenizer(out / "harmony_model")
    (out / "gpt_oss_log.json").write_text(json.dumps(gpt_oss_log(tokenizer)), encoding="utf-8")
    pd.DataFrame({"dataset": [d for d, _, _ in GPT_OSS],
                  "ground_truth": [g for _, g, _ in GPT_OSS]}).to_pickle(out / "gpt_oss_ref.pkl")


if __name__ == "__main__":
    main()
