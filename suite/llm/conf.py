"""LoadGen conf lines for LLM benchmarks: token latencies on, and the round's TTFT/TPOT bounds.

A benchmark is an LLM benchmark when its round row (``[models.<checker_model>]``) says
``llm = true``. Then ``use_token_latencies = 1`` in every scenario, and in Server the p99
bounds come from that row's ``token_latency_ns``: ``Server``, or ``Interactive`` for a
LoadGen model named ``*-interactive`` (Interactive is Server with tighter bounds; LoadGen
has no Interactive scenario). LoadGen reads ``ttft_latency``/``tpot_latency`` in ms.
"""

from __future__ import annotations

from suite.config.rules import RunRules


def token_conf_lines(rules: RunRules) -> list[str]:
    """``mlperf.conf`` lines the round fixes for an LLM benchmark (none for others)."""
    if not rules.llm:
        return []
    model, scen = rules.benchmark.loadgen_model, rules.scenario.loadgen_name
    lines = [f"{model}.{scen}.use_token_latencies = 1"]
    bounds = rules.token_bounds
    if bounds is not None:  # Server: resolved with the run's rules
        lines += [f"{model}.{scen}.ttft_latency = {bounds.ttft // 1_000_000}",
                  f"{model}.{scen}.tpot_latency = {bounds.tpot // 1_000_000}"]
    return lines
