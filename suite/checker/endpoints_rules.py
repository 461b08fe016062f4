"""The rules on an endpoint-format result (``endpoints_format.py`` reads it), as the
official v6.1 checker applies them (the ``is_endpoints`` branches of
``submission_checker/checks/``): the LoadGen rules on the mapped values, with the official
differences. No performance sample count, qsl seed or query count; an LLM's latency is
TTFT/TPOT only, against the bounds of the mapped scenario (Interactive's for an
Interactive directory); the accuracy run needs a score (held to the target for qwen3-vl
only) and the round's sample count; compliance is the tool's ``audit/audit_<test>.json``
(and TEST09 the summary's mean output length); no ``user.conf``.

Owns ``check_endpoints``: every rule of one such result. Strict mode adds what the
official checker does not read (a complete run, no failed sample, every target the score
carries): docs/checker.md, "Endpoint-format results".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from suite.checker.accuracy import check_extra_files
from suite.checker.context import ResultContext, read_json
from suite.checker.endpoints_format import (
    ACCURACY,
    CONFIGS,
    SUMMARY,
    EndpointResult,
    number,
    official_score,
    read_endpoint_result,
    strict_score,
)
from suite.checker.findings import RuleId

_FIGURE = {"offline": ("result_samples_per_second", "samples/s"),
           "singlestream": ("result_mean_latency_ns", "mean latency (ms)"),
           "multistream": ("result_mean_latency_ns", "mean latency (ms)"),
           "server": ("result_completed_samples_per_sec", "completed samples/s"),
           "interactive": ("result_completed_samples_per_sec", "completed samples/s")}
_FIGURE_NAMES = {"result_tokens_per_second": "tokens/s",
                 "result_completed_tokens_per_second": "completed tokens/s",
                 "result_90.00_percentile_latency_ns": "90th percentile latency (ms)"}
#: The one model whose endpoint accuracy score the official checker holds to its target.
_SCORED_MODEL = "qwen3-vl-235b-a22b"
#: Results of another scenario a result may be inferred from (edge systems only).
_INFERABLE = {("singlestream", "multistream"), ("multistream", "offline"),
              ("singlestream", "offline")}


def _scenario(ctx: ResultContext, raw: Any) -> str | None:
    """The scenario the checks use (``map_endpoints_scenario``): the directory decides for
    SingleStream and Interactive, config.yaml's ``type`` otherwise (``online`` is Server)."""
    fixed = (ctx.dir_scenario or "").lower()
    if fixed == "singlestream":
        return "SingleStream"
    if fixed == "interactive" or str(raw).lower() == "interactive":
        return "Interactive"
    if not isinstance(raw, str):
        return None
    return "Server" if raw.lower() == "online" else raw


def check_endpoints(ctx: ResultContext) -> tuple[float | None, str | None, float | None]:
    """Every rule of an endpoint-format result: ``(figure, its name, accuracy)``."""
    res = ctx.files.perf_detail.parents[2]
    got = read_endpoint_result(res)
    sub_ep = ctx.sub.endpoints
    with ctx.rule(RuleId.EP_ARTIFACTS, res) as run:
        # nothing of either format: most likely a LoadGen result whose logs were lost
        neither = len(got.problems) == 3 and all(w.startswith("missing") for _, w in
                                                 got.problems)
        for path, why in got.problems if run else []:
            ctx.add(RuleId.EP_ARTIFACTS, path, f"{path.name} is {why}",
                    expected="the endpoint benchmarker's file", found=why,
                    hint="no LoadGen log either (performance/run_1/ and accuracy/"
                    "mlperf_log_detail.txt): copy the run's logs" if neither else
                    "copy the report directory of the endpoint benchmarker unchanged")
    with ctx.rule(RuleId.EP_MODEL, res) as run:
        allowed = sub_ep.models if sub_ep is not None else []
        if run and ctx.model_name not in allowed:
            ctx.add(RuleId.EP_MODEL, res, f"endpoints submission uses disallowed model "
                    f"'{ctx.model_name}'", expected="one of " + (", ".join(allowed) or
                                                             f"none in {ctx.rules.round}"),
                    found=ctx.model_name, hint="submit LoadGen logs for this model")
    scenario = _scenario(ctx, got.perf["effective_scenario"])
    _settings(ctx, got, res)
    value = name = None
    if scenario is None:
        with ctx.rule(RuleId.PERF_SCENARIO, res / CONFIGS[0]) as run:
            if run:
                ctx.add(RuleId.PERF_SCENARIO, res / CONFIGS[0], "config.yaml names no "
                        "scenario", expected="type: offline or online",
                        found=got.perf["effective_scenario"])
    else:
        _latency(ctx, got, scenario, res)
        _inferred(ctx, scenario, res)
        value, name = _figure(ctx, got, scenario, res)
    if ctx.strict:
        _strict(ctx, got, res)
    accuracy = _accuracy(ctx, got, res)
    check_extra_files(ctx)
    _audits(ctx, got, res)
    return value, name, accuracy


def _settings(ctx: ResultContext, got: EndpointResult, res: Path) -> None:
    """PERF-SEEDS (sample index and schedule: the tool has no qsl seed), PERF-DURATION."""
    config = res / CONFIGS[0]
    seeds = ctx.rules.seeds
    with ctx.rule(RuleId.PERF_SEEDS, config) as run:
        for name, want in (("sample_index_rng_seed", seeds.sample_index_rng_seed),
                           ("schedule_rng_seed", seeds.schedule_rng_seed)):
            found = got.perf[f"effective_{name}"]
            if run and found != want:
                ctx.add(RuleId.PERF_SEEDS, config, f"{name} is wrong", expected=want,
                        found=found, hint="run with the round's seeds (settings.runtime."
                        "dataloader_random_seed, scheduler_random_seed)")
    with ctx.rule(RuleId.PERF_DURATION, config) as run:
        found = got.perf["effective_min_duration_ms"]
        need = ctx.sub.test_duration_ms
        duration = number(found)
        exempt = ctx.model is not None and ctx.model.min_duration_exempt
        if run and not exempt and (duration is None or duration < need):
            ctx.add(RuleId.PERF_DURATION, config, "Test duration less than 600s in user "
                    "config", expected=need, found=found,
                    hint="settings.runtime.min_duration_ms >= 600000")


def _latency(ctx: ResultContext, got: EndpointResult, scenario: str, res: Path) -> None:
    """PERF-LATENCY for other models (p99 against the directory scenario's bound);
    PERF-TOKEN-BOUNDS for LLMs in Server and Interactive (TTFT and TPOT p99 strictly below
    the bounds of the mapped scenario: an Interactive directory gets Interactive's)."""
    summary = res / SUMMARY
    model = ctx.model
    if model is None:
        return
    if not model.llm:
        with ctx.rule(RuleId.PERF_LATENCY, summary) as run:
            bound = model.latency_bound_ns.get(ctx.dir_scenario or "")
            p99 = number(got.perf["result_99.00_percentile_latency_ns"])
            if run and bound and (p99 is None or p99 > bound):
                ctx.add(RuleId.PERF_LATENCY, summary, "Latency constraint not met",
                        expected=bound, found=got.perf["result_99.00_percentile_latency_ns"],
                        hint="latency.early_stopping_percentiles['99.0'] must be <= the bound")
        return
    if scenario not in ("Server", "Interactive"):
        return
    with ctx.rule(RuleId.PERF_TOKEN_BOUNDS, summary) as run:
        bounds = model.token_latency_ns.get(scenario)
        ttft = number(got.perf["result_first_token_99.00_percentile_latency_ns"])
        tpot = number(got.perf["result_time_per_output_token_99.00_percentile_ns"])
        if not run:
            return
        if bounds is None:
            ctx.add(RuleId.PERF_TOKEN_BOUNDS, summary, f"TTFT/TPOT latency limits missing "
                    f"for model={ctx.model_name} scenario={scenario}", expected="limits",
                    found="none")
        elif ttft is None or tpot is None:
            ctx.add(RuleId.PERF_TOKEN_BOUNDS, summary, "TTFT or TPOT percentile data missing "
                    "for LLM check", expected="ttft and tpot early_stopping_percentiles['99.0']",
                    found=f"ttft={ttft}, tpot={tpot}")
        elif not (ttft < bounds.ttft and tpot < bounds.tpot):
            ctx.add(RuleId.PERF_TOKEN_BOUNDS, summary, "Failed extra check for TTFT and TPOT",
                    expected=f"{scenario}: TTFT < {bounds.ttft}, TPOT < {bounds.tpot}",
                    found=f"TTFT {ttft:.0f}, TPOT {tpot:.0f}")


def _inferred(ctx: ResultContext, scenario: str, res: Path) -> None:
    """PERF-SCENARIO: config.yaml runs the directory's scenario (a result inferred from
    another scenario only on an edge system, as the checker's ``inferred_check``)."""
    fixed = (ctx.dir_scenario or "").lower()
    pair = (scenario.lower(), fixed)
    if pair[0] == fixed or pair == ("server", "interactive"):
        return
    with ctx.rule(RuleId.PERF_SCENARIO, res / CONFIGS[0]) as run:
        system, _ = read_json(ctx.root / ctx.sub.paths["system"].format(
            **dict(zip(("division", "submitter", "results", "system"),
                       ctx.result_id.split("/")[:4], strict=False))))
        edge = isinstance(system, dict) and "edge" in str(system.get("system_type")).lower()
        if run and not (edge and pair in _INFERABLE):
            ctx.add(RuleId.PERF_SCENARIO, res / CONFIGS[0], f"Result can not be inferred "
                    f"for {ctx.dir_scenario} from a {scenario} run", expected=ctx.dir_scenario,
                    found=f"type: {scenario}", hint="run the directory's scenario")


def _figure(ctx: ResultContext, got: EndpointResult, scenario: str,
            res: Path) -> tuple[float | None, str | None]:
    """The result's figure (``get_performance_metric_check``), or EP-ARTIFACTS."""
    overrides = ctx.sub.endpoints.result_overrides if ctx.sub.endpoints else {}
    keys = [_FIGURE.get(scenario.lower(), (None, ""))[0]]
    keys.append(overrides.get(ctx.model_name, {}).get(scenario))
    value = name = None
    for key in [k for k in keys if k is not None] or [""]:
        raw = got.perf.get(key) if key else None
        value = number(raw)
        with ctx.rule(RuleId.EP_ARTIFACTS, res / SUMMARY) as run:
            if run and value is None:
                ctx.add(RuleId.EP_ARTIFACTS, res / SUMMARY, f"no figure for {scenario}",
                        expected=f"a number for {key or 'a known scenario'}", found=raw,
                        hint="qps/tps, duration_ns and n_samples_issued come from the tool")
        if value is None:
            return None, None
        name = _FIGURE_NAMES.get(key or "") or _FIGURE[scenario.lower()][1]
    if value is not None and scenario in ("SingleStream", "MultiStream"):
        value /= 1e6 * (1e3 if ctx.model_name.startswith("wan-") else 1)
    return value, name


def _strict(ctx: ResultContext, got: EndpointResult, res: Path) -> None:
    """Strict only (the official checker reads neither): a complete run, no failed sample."""
    summary = res / SUMMARY
    data, _ = read_json(summary)
    data = data if isinstance(data, dict) else {}
    with ctx.rule(RuleId.PERF_VALIDITY, summary) as run:
        if run and summary.exists() and (data.get("complete") is not True
                                         or data.get("state") != "complete"):
            ctx.add(RuleId.PERF_VALIDITY, summary, "the run did not complete",
                    expected="state: complete, complete: true",
                    found=f"state: {data.get('state')}, complete: {data.get('complete')}",
                    hint="an interrupted or undrained run is not a result; run again")
    with ctx.rule(RuleId.PERF_ERRORS, summary) as run:
        failed = number(got.perf["num_errors"])
        if run and failed:
            ctx.add(RuleId.PERF_ERRORS, summary, f"{failed:.0f} sample(s) failed",
                    expected="n_samples_failed: 0", found=got.perf["num_errors"],
                    hint="a run with failed requests is not a result")


def _accuracy(ctx: ResultContext, got: EndpointResult, res: Path) -> float | None:
    """ACC-TARGET (a score; for qwen3-vl, or any model in strict mode, the targets) and
    ACC-DATASET (the accuracy datasets' samples, summed, are the round's count)."""
    path = res / ACCURACY
    score = got.acc["accuracy_score"]
    model = ctx.model
    targets = model.targets_for(ctx.dir_scenario) if model is not None else {}
    first = official_score(score, list(targets)) if targets else None
    with ctx.rule(RuleId.ACC_TARGET, path) as run:
        if run and score is None:
            ctx.add(RuleId.ACC_TARGET, path, "accuracy score not found",
                    expected="accuracy_scores[].score", found="none")
        elif run and ctx.closed_like and targets:
            _targets(ctx, path, score, first, targets)
    with ctx.rule(RuleId.ACC_DATASET, path) as run:
        found = got.acc["effective_accuracy_sample_count"]
        if found is None:
            found = got.acc["qsl_reported_total_count"]
        need = model.accuracy_count(ctx.dir_scenario) if model is not None else None
        if run and need is not None and found != need:
            ctx.add(RuleId.ACC_DATASET, path, "accuracy run does not cover all dataset",
                    expected=need, found=found, hint="score the whole accuracy dataset")
    return first


def _targets(ctx: ResultContext, path: Path, score: Any, first: float | None,
             targets: dict[str, float]) -> None:
    metric, target = next(iter(targets.items()))
    if ctx.model_name == _SCORED_MODEL:
        if first is None or first < target:
            ctx.add(RuleId.ACC_TARGET, path, "accuracy not met" if first is not None else
                    "could not parse accuracy score", expected=f"{metric} >= {target}",
                    found=score)
        return
    if not ctx.strict:
        return
    # strict: every target (and upper limit) whose value the score carries
    upper = ctx.model.upper_limits if ctx.model is not None else {}
    for name in dict.fromkeys([*targets, *upper]):
        found = strict_score(score, name, name == metric)
        low, high = targets.get(name), upper.get(name)
        if found is not None and ((low is not None and found < low)
                                  or (high is not None and found > high)):
            ctx.add(RuleId.ACC_TARGET, path, f"{name} not met (the official checker does "
                    "not compare endpoint scores)", expected=f">= {low}" if high is None
                    else f"{low} <= {name} <= {high}", found=found)


def _audits(ctx: ResultContext, got: EndpointResult, res: Path) -> None:
    """COMP-DIR / COMP-PASS from the tool's audits (``compliance_endpoints_check``): each
    compliance test of the model with an audit name is ``audit/audit_<name>.json`` with
    that ``test`` and ``passed: true``; missing is an error only for TEST04. TEST09 is the
    performance run's mean output tokens within the round's range. Every division."""
    model, sub_ep = ctx.model, ctx.sub.endpoints
    if model is None or sub_ep is None:
        return
    for test in model.compliance_tests:
        name = sub_ep.audits.get(test)
        path = res / "audit" / f"audit_{name}.json"
        if name is not None and not path.exists():
            with ctx.rule(RuleId.COMP_DIR, path) as run:
                if run and test == "TEST04":
                    ctx.add(RuleId.COMP_DIR, path, f"{path.name} is missing",
                            expected=f"the {test} audit", found="missing")
        elif name is not None:
            with ctx.rule(RuleId.COMP_PASS, path) as run:
                data, error = read_json(path)
                problem = error or ("not an object" if not isinstance(data, dict) else None)
                if problem is None and data.get("test") != name:
                    problem = f"test is {data.get('test')!r}"
                elif problem is None and not data.get("passed"):
                    problem = f"passed is {data.get('passed')!r}"
                if run and problem is not None:
                    ctx.add(RuleId.COMP_PASS, path, f"compliance test {name}: {problem}",
                            expected=f'{{"test": "{name}", "passed": true}}', found=problem)
        if test == "TEST09":
            low, high = sub_ep.test09_mean_output_tokens
            with ctx.rule(RuleId.COMP_PASS, res / SUMMARY) as run:
                mean = number(got.perf["mean_output_tokens"])
                if run and (mean is None or not low <= mean <= high):
                    ctx.add(RuleId.COMP_PASS, res / SUMMARY, "TEST09 (Verify Output Token "
                            "Length in Performance Mode) failed", expected=f"[{low}, {high}]",
                            found=got.perf["mean_output_tokens"])
