"""``bench/bench_engine_compare.py`` gives every client the same prompts (issue 36,
item 10): ours, as its SUT picks them, equals the lines vLLM's client and AIPerf read, for
tinylm's prompts that hold the EOS character too. (The bench itself needs vLLM and is not
run here.)"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "bench"))
import bench_engine_compare as bench


@pytest.mark.parametrize("prompt_as", ["text", "ids"])
def test_ours_sends_the_other_clients_prompts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              prompt_as: str) -> None:
    monkeypatch.setattr(bench, "PROMPT_AS", [prompt_as])
    prompts = bench.write_prompts(tmp_path, 256)
    assert prompts["prompts_equal"] is True
    lines = [json.loads(line)["prompt"] for line in Path(prompts["vllm"]).read_text().splitlines()]
    assert sum("\x03" in line for line in lines) > 100  # the EOS separator is there to lose
