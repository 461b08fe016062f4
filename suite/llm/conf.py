"""LoadGen conf lines for LLM benchmarks: token latencies on, and the round's TTFT/TPOT bounds.

A benchmark is an LLM benchmark when its round row (``[models.<checker_model>]``) says
``llm = true``. Then ``use_token_latencies = 1`` in every scenario, and in Server the p99
bounds come from that row's ``token_latency_ns``: ``Server``, or ``Interactive`` for a
LoadGen model named ``*-interactive`` (Interactive is Server with tighter bounds; LoadGen
has no Interactive scenario). LoadGen reads ``ttft_latency``/``tpot_latency`` in ms.
"""

from __future__ import annotations

from suite.config.rules import RuleSet, TokenBounds
from suite.errors import ConfigError
from suite.scenarios import Scenario


def token_bounds(rules: RuleSet, benchmark: str) -> TokenBounds | None:
    """The Server (or Interactive) TTFT/TPOT bounds of an LLM benchmark; None otherwise."""
    bench = rules.benchmark(benchmark)
    row = rules.models.get(bench.checker_model)
    if row is None or not row.llm:
        return None
    kind = "Interactive" if bench.loadgen_model.endswith("-interactive") else "Server"
    bounds = row.token_latency_ns.get(kind)
    if bounds is None:
        raise ConfigError(f"{rules.source}: [models.\"{bench.checker_model}\"] has no "
                          f"token_latency_ns.{kind}",
                          hint="an LLM benchmark's Server run needs its TTFT/TPOT bounds")
    return bounds


def is_llm(rules: RuleSet, benchmark: str) -> bool:
    row = rules.models.get(rules.benchmark(benchmark).checker_model)
    return row is not None and row.llm


def token_conf_lines(rules: RuleSet, benchmark: str, scenario: Scenario) -> list[str]:
    """``mlperf.conf`` lines the round fixes for an LLM benchmark (none for others)."""
    if not is_llm(rules, benchmark):
        return []
    model, scen = rules.benchmark(benchmark).loadgen_model, scenario.loadgen_name
    lines = [f"{model}.{scen}.use_token_latencies = 1"]
    if scenario is Scenario.SERVER:
        bounds = token_bounds(rules, benchmark)
        assert bounds is not None
        lines += [f"{model}.{scen}.ttft_latency = {bounds.ttft // 1_000_000}",
                  f"{model}.{scen}.tpot_latency = {bounds.tpot // 1_000_000}"]
    return lines
