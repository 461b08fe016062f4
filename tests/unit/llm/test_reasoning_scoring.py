"""deepseek-r1's and gpt-oss-120b's exact_match equal the reference evaluations' figures.

The fixtures (``tests/support/reasoning_fixtures.py``) are hand-written outputs in the
reference's formats. Each expected figure below is what the reference's own script printed
on the same inputs, run from mlcommons/inference @ b66003e (language/deepseek-r1 and
language/gpt-oss-120b, with the pinned submodules openai/prm800k @ 7ecc794 and
LiveCodeBench @ b1e7cab) in a scratch directory, with the suite's venv (pandas 3.1.1,
transformers 5.24.0, sympy 1.14.0, pylatexenc 2.11) and two stand-in modules on
PYTHONPATH: ``datasets.load_dataset`` returning the fixture's code_generation_lite lines
(the reference downloads them from Hugging Face) and ``anthropic`` with the two prompt
constants LiveCodeBench's prompt module imports. Steps:

    python -m tests.support.reasoning_fixtures FX
    cd language/deepseek-r1 && LCB_FIXTURE_DIR=FX/lcb PYTHONPATH=STUBS python eval_accuracy.py \\
        --input-file FX/deepseek_outputs.pkl --output-file FX/ds_eval.pkl
    # printed: {'exact_match': 61.111111111111114, 'tokens_per_sample': 30.86111111111111,
    #           'num-samples': 36}; per-row prompt_accuracy from FX/ds_eval_evaluated.pkl
    cd language/gpt-oss-120b && LCB_FIXTURE_DIR=FX/lcb PYTHONPATH=STUBS python \\
        eval_mlperf_accuracy.py --mlperf-log FX/gpt_oss_log.json --reference-data \\
        FX/gpt_oss_ref.pkl --tokenizer FX/harmony_model --num-lcb-workers 2 \\
        --output-file FX/go_result.json --verbose
    # printed: 'exact_match': 67.167 (aime25 5/8, gpqa_diamond 7/10, livecodebench_v6 4/6);
    # per-row is_correct from FX/go_result.json
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import pytest

from suite.errors import DatasetError
from suite.llm.round import livecodebench, math_answers, reasoning, sandbox
from suite.llm.round.reasoning_log import log_samples
from suite.llm.round.sandbox import Limits
from tests.support import reasoning_fixtures as fx

pytest.importorskip("sympy", reason="MATH500 grading needs sympy (the reasoning extra)")
pytest.importorskip("pylatexenc", reason="MATH500 grading needs pylatexenc (the reasoning extra)")

#: short limits: the verdicts are the reference's (which waits 60 s per test)
FAST = Limits(wall_s=6.0, cpu_s=2)


@pytest.fixture(scope="module")
def lcb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fx.write_lcb(tmp_path_factory.mktemp("lcb"))


def test_deepseek_matches_the_reference(lcb_dir: Path) -> None:
    judge = reasoning.CodeJudge(livecodebench.load(lcb_dir, "release_v1"), FAST)
    samples = [reasoning.Sample(i, out, len(out)) for i, (_, _, out) in enumerate(fx.DEEPSEEK)]
    # the log's duplicate of a sample counts once (the first), as the reference's dedup
    samples.append(reasoning.Sample(0, "ANSWER: A", 9))
    result = reasoning.score(samples, [d for d, _, _ in fx.DEEPSEEK],
                             [g for _, g, _ in fx.DEEPSEEK], "deepseek-r1", judge)
    assert [int(c) for c in result["correct"]] == fx.REFERENCE_DEEPSEEK_ROWS
    assert reasoning.printed(result, "deepseek-r1") == fx.REFERENCE_DEEPSEEK_PRINTED


def test_gpt_oss_matches_the_reference(tmp_path: Path, lcb_dir: Path) -> None:
    from suite.llm.dataset import HFTokenizer

    tokenizer_json = fx.write_harmony_tokenizer(tmp_path / "model")
    log = tmp_path / "mlperf_log_accuracy.json"
    import json

    log.write_text(json.dumps(fx.gpt_oss_log(tokenizer_json)), encoding="utf-8")
    tokenizer = HFTokenizer(tokenizer_json, eos_id=4)
    samples = log_samples(log, tokenizer.decode_special)
    assert "<|channel|>final<|message|>**B**<|return|>" in samples[0].text
    judge = reasoning.CodeJudge(livecodebench.load(lcb_dir, "release_v6"), FAST)
    result = reasoning.score(samples, [d for d, _, _ in fx.GPT_OSS],
                             [g for _, g, _ in fx.GPT_OSS], "gpt-oss-120b", judge)
    assert [int(c) for c in result["correct"]] == fx.REFERENCE_GPT_OSS_ROWS
    assert reasoning.printed(result, "gpt-oss-120b") == fx.REFERENCE_GPT_OSS_PRINTED
    assert result["per_dataset"]["aime25"] == {"correct": 5, "total": 8}


@pytest.mark.parametrize(("given", "truth", "expected"), [
    ("\\frac{1}{2}", "\\frac12", True), ("0.5", "\\frac{1}{2}", True),
    ("10\\text{ cm}", "10", True), ("2\\sqrt{3}", "\\sqrt{12}", True),
    ("6/8", "\\frac{3}{4}", False), ("1,000", "1000", True), ("(1,2)", "(2, 1)", False),
    ("\\$5", "5", True), ("x+y+z+w", "w+x+y+z", False),  # too many unknowns for sympy
    ("3.0", "3", True), ("4", "2^2", False),               # an integer must match exactly
])
def test_math_equivalence_follows_prm800k(given: str, truth: str, expected: bool) -> None:
    assert math_answers.grade_answer(given, truth) is expected


def test_parsers_edge_cases() -> None:
    assert reasoning.boxed("\\boxed{\\frac{1}{\\sqrt{2}}} and \\boxed{x}") == "x"
    assert reasoning.boxed("\\boxed{\\frac{1}{2}") is None
    assert reasoning.aime_answer("\\boxed{12} Answer: 13") == 12
    assert reasoning.choice_gpt_oss("<|channel|>final<|message|>**C**<|return|>", "D") == "C"
    assert reasoning.code_gpt_oss("```py\nprint(1)\n```") == "print(1)"
    with pytest.raises(DatasetError, match="no evaluator for dataset 'trivia'"):
        reasoning.evaluator("trivia", "deepseek-r1")


def _survivors(marker: str) -> list[str]:
    listed = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True)
    return [line for line in listed.stdout.splitlines() if marker in line]


def test_sandbox_contains_a_loop_and_a_fork() -> None:
    start = time.monotonic()
    assert sandbox.run_test("while True: pass", None, "", "1", FAST).startswith("time limit")
    sleeper = "import time\nwhile True:\n    time.sleep(0.1)"
    assert sandbox.run_test(sleeper, None, "", "1", FAST).startswith("time limit")
    assert time.monotonic() - start < 20
    forks = "import os\nos.fork()\nprint(1)"
    assert sandbox.run_test(forks, None, "", "1", FAST) != "passed"
    marker = "sleep 4242"
    spawns = f"import os\nos.posix_spawn('/bin/sh', ['sh', '-c', '{marker}'], {{}})\nprint(1)"
    sandbox.run_test(spawns, None, "", "1", FAST)
    assert _survivors(marker) == []  # its process group was killed with it


def test_sandbox_contains_writes_and_sockets(tmp_path: Path) -> None:
    if not sandbox.isolation().namespaces:
        pytest.skip(f"no namespaces here: {sandbox.isolation().detail}")
    outside = tmp_path / "outside.txt"
    writes = (f"class Solution:\n    def f(self, a):\n        open({str(outside)!r}, 'w')"
              ".write('x')\n        return a")
    assert sandbox.run_test(writes, "f", "1", "1", FAST) != "passed"
    assert not outside.exists()
    inside = "class Solution:\n    def f(self, a):\n        open('mine', 'w').write('x')\n" \
             "        return a"
    assert sandbox.run_test(inside, "f", "1", "1", FAST) == "passed"
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(0.2)
        port = server.getsockname()[1]
        dials = (f"class Solution:\n    def f(self, a):\n        import socket\n        "
                 f"socket.create_connection(('127.0.0.1', {port}), timeout=1)\n        return a")
        assert sandbox.run_test(dials, "f", "1", "1", FAST).startswith("runtime error")
        with pytest.raises(TimeoutError):
            server.accept()


def test_sandbox_limits_file_size_and_memory() -> None:
    big = "class Solution:\n    def f(self, a):\n        open('big', 'w').write('x' * (64 << 20))" \
          "\n        return a"
    assert sandbox.run_test(big, "f", "1", "1", FAST) != "passed"
    hungry = "class Solution:\n    def f(self, a):\n        b = bytearray(8 << 30)\n" \
             "        return a"
    assert sandbox.run_test(hungry, "f", "1", "1", FAST) != "passed"


def test_livecodebench_files_bad_input(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="does not exist"):
        livecodebench.load(tmp_path / "none", "release_v1")
    (tmp_path / "test.jsonl").write_text('{"question_id": "q"}\n', encoding="utf-8")
    with pytest.raises(DatasetError, match="line 1: not a LiveCodeBench problem"):
        livecodebench.load(tmp_path, "release_v1")
    import base64
    import pickle
    import zlib

    hostile = base64.b64encode(zlib.compress(pickle.dumps(Path("x")))).decode()
    line = {"question_id": "q", "public_test_cases": "[]", "private_test_cases": hostile,
            "metadata": "{}"}
    import json

    (tmp_path / "test.jsonl").write_text(json.dumps(line) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="refused"):
        livecodebench.load(tmp_path, "release_v1")

