"""Rich renderables for results. Computes nothing: every number comes from a result."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from rich.table import Table
from rich.text import Text

from suite.logs import DETAIL_LOG, parse_detail_log
from suite.reports.explain import client_notes, explain
from suite.results import AccuracyResult, RunResult, Status, TestResult

_STYLE = {Status.VALID: "green", Status.INVALID: "yellow", Status.FAILED: "red",
          Status.INTERRUPTED: "magenta"}
#: Tests whose LoadGen verdict stands. An interrupted or failed test's figures are no
#: measurement (a drain answers every outstanding sample at once): no metric, no advice,
#: even from a result.json written before collection dropped them.
_MEASURED = (Status.VALID, Status.INVALID)


#: LLM throughput, in the order a scenario's figure is looked up: Offline's tokens/s, then
#: Server's and Interactive's completed tokens/s (the figures MLPerf publishes for LLMs).
_TOKEN_RATES = (("tokens_per_second", "tokens/s"),
                ("completed_tokens_per_second", "completed tokens/s"))


def _metric(test: TestResult) -> tuple[str, str]:
    perf = test.performance
    if perf is None or test.status not in _MEASURED:
        return ("-", "-")
    for key, name in _TOKEN_RATES:  # an LLM run's figure is tokens, not samples
        if key in perf.tokens:
            return (name, f"{perf.tokens[key]:,.1f} tokens/s")
    if perf.metric_value is None:
        return ("-", "-")
    value = f"{perf.metric_value:.4f} {perf.unit}" if perf.unit == "ms" else (
        f"{perf.metric_value:,.1f} {perf.unit}")
    return (perf.metric_name, value)


def _early_stopping(test: TestResult) -> str:
    perf = test.performance
    if perf is None or perf.early_stopping_met is None or test.status not in _MEASURED:
        return "-"
    return "met" if perf.early_stopping_met else "NOT met"


def _token_latency(test: TestResult) -> str:
    """TTFT and TPOT p99 (Server, Interactive), from the detail log's figures."""
    perf = test.performance
    if perf is None or test.status not in _MEASURED:
        return "-"
    parts = [f"{label} {perf.tokens[key] / 1e6:,.2f} ms" for key, label in
             (("ttft_p99_ns", "TTFT p99"), ("tpot_p99_ns", "TPOT p99")) if key in perf.tokens]
    return ", ".join(parts) or "-"


def _token_bounds_cell(test: TestResult) -> str:
    """TTFT and TPOT p99 beside the bounds LoadGen ran with, in ms: ``45.1<2000 / 3.2<100``
    (issue 40, item 3: the default table showed only tokens/s). The bounds are the detail
    log's ``requested_server_*_latency``; none where the log does not hold them."""
    perf = test.performance
    if perf is None or test.status not in _MEASURED or "ttft_p99_ns" not in perf.tokens:
        return "-"
    detail = Path(test.directory) / DETAIL_LOG
    log = parse_detail_log(detail) if detail.is_file() else None
    cells = []
    for key, bound_key in (("ttft_p99_ns", "requested_server_ttft_latency"),
                           ("tpot_p99_ns", "requested_server_tpot_latency")):
        if key not in perf.tokens:
            continue
        value = perf.tokens[key] / 1e6
        bound = log.get(bound_key) if log is not None else None
        if isinstance(bound, int | float) and bound > 0:
            cells.append(f"{value:,.1f}{'<' if value < bound / 1e6 else '>='}{bound / 1e6:g}")
        else:
            cells.append(f"{value:,.1f}")
    return " / ".join(cells)


def _accuracy(test: TestResult, *, target: bool = True) -> str:
    acc = test.accuracy
    if acc is None:
        return "-"
    # VALID though below target: scored, not judged (a stand-in's model is not the reference)
    verdict = "pass" if acc.passed else "FAIL" if test.status is not Status.VALID else "scored"
    if acc.metric != "acc":  # a score, not a share: ROUGE-L for an LLM
        versus = f" vs ≥{acc.target:.4f}" if target else ""
        return f"{acc.metric} {acc.value:.4f}{versus} {verdict}"
    versus = f" vs ≥{acc.target:.3f}%" if target else ""
    return f"{acc.value:.3f}%{versus} {verdict}"


def _test_notes(test: TestResult) -> list[str]:
    notes = []
    if test.message:
        notes.append(test.message)
    perf = test.performance
    if perf is not None and test.status is Status.INVALID:
        # The detail log beside the result gives an LLM run's TTFT/TPOT bounds.
        detail = Path(test.directory) / DETAIL_LOG
        log = parse_detail_log(detail) if detail.is_file() else None
        notes += [f"INVALID because {item}" for item in explain(perf, log)]
    notes += [str(item) for item in client_notes(test.backend)]
    acc = test.accuracy
    if acc is not None and acc.loadgen_errors:
        notes.append(f"the accuracy log has {len(acc.loadgen_errors)} LoadGen error(s)")
    if acc is not None and not acc.passed and test.status is not Status.VALID:
        notes += [f"accuracy FAIL because {why}" for why in accuracy_reasons(acc)]
    return notes


def accuracy_reasons(acc: AccuracyResult) -> list[str]:
    """Why an accuracy result failed, each reason from its own figures (issue 40, item 11:
    a failed target was shown only as FAIL in the table)."""
    reasons = []
    unit = "%" if acc.metric == "acc" else ""
    name = "top-1" if acc.metric == "acc" else acc.metric
    if acc.value < acc.target:
        reasons.append(f"{name} {acc.value:.4f}{unit} is below the round's target "
                       f"{acc.target:.4f}{unit} ({acc.good:,} of {acc.total:,} samples scored)")
    details = acc.details
    tokens = details.get("tokens_per_sample")
    low, high = details.get("tokens_per_sample_min"), details.get("tokens_per_sample_max")
    if tokens is not None and low is not None and high is not None and not low <= tokens <= high:
        reasons.append(f"tokens per sample {tokens:,.1f} is outside the round's bounds "
                       f"{low:,.1f}-{high:,.1f} (outputs cut short or run on)")
    if acc.loadgen_errors:
        reasons.append(f"LoadGen logged {len(acc.loadgen_errors)} error(s) during the "
                       f"accuracy run (first: {acc.loadgen_errors[0]})")
    if not reasons:  # a round target other than the first (see the test's message)
        reasons.append("a target of the round's accuracy row was missed (see the "
                       "accuracy.txt beside the accuracy log)")
    return reasons


def run_notes(results: Iterable[RunResult]) -> list[str]:
    """Why each test is INVALID or failed, and why each run is not submittable."""
    lines = []
    for result in results:
        name = f"{result.benchmark} {result.scenario}"
        for test in result.tests:
            lines += [f"{name} {test.mode}: {note}" for note in _test_notes(test)]
        if result.compliance is not None:
            comp = result.compliance
            verdicts = ", ".join(f"{file}: {v}" for file, v in comp.verdicts.items())
            against = f" against {comp.reference_run}" if comp.reference_run else ""
            lines.append(f"{name} {comp.test} attempt {comp.attempt}{against}: {verdicts}")
        if result.division == "open":
            lines.append(f"{name}: OPEN DIVISION: {result.division_reason}")
        reasons = [r for r in result.non_submittable_reasons if not r.startswith("the run is")]
        lines += [f"{name}: not submittable: {reason}" for reason in reasons]
    return list(dict.fromkeys(lines))


def results_table(results: Iterable[RunResult], title: str = "infersuite results", *,
                  compact: bool = False) -> Table:
    """One row per LoadGen test: scenario, metric, validity, accuracy, submittability.

    An LLM test's metric is its tokens/s; when any test has token latencies, a column shows
    their TTFT and TPOT p99. ``compact`` (the CLI's default, ``--wide`` shows the rest)
    fits ``COMPACT_WIDTH`` columns: a benchmark or backend every row shares moves into the
    title, and the division, the metric's name (the value carries its unit), early
    stopping, token latencies and the accuracy target are left to the wide table and the
    notes (``run_notes`` names an open division, an INVALID's cause, every not-submittable
    reason).
    """
    results = list(results)
    if compact:
        return _compact_table(results, title)
    latencies = any(test.performance is not None and "ttft_p99_ns" in test.performance.tokens
                    for result in results for test in result.tests)
    table = Table(title=title)
    for column in ("benchmark", "scenario", "backend", "mode", "division", "metric", "value",
                   *(("token latency",) if latencies else ()),
                   "validity", "early stopping", "accuracy vs target", "submittable"):
        table.add_column(column)
    for result in results:
        for test in result.tests:
            name, value = _metric(test)
            table.add_row(
                *(Text(cell) for cell in (result.benchmark, result.scenario, result.backend,
                                          _mode(result, test))),
                Text(result.division, style="yellow" if result.division == "open" else ""),
                Text(name), Text(value),
                *((Text(_token_latency(test)),) if latencies else ()),
                Text(test.status.value, style=_STYLE[test.status]), Text(_early_stopping(test)),
                Text(_accuracy(test)), Text("yes" if result.submittable else "no"),
            )
    return table


#: The compact table's token-latency column: p99 against the bound (< holds, >= misses).
TOKEN_COLUMN = "TTFT/TPOT p99 ms"
#: What the compact table fits in (a CI log, an 80-100 column terminal, a pasted issue).
COMPACT_WIDTH = 100


def _mode(result: RunResult, test: TestResult) -> str:
    return result.compliance.test if result.compliance else test.mode


def _compact_table(results: list[RunResult], title: str) -> Table:
    shared: dict[str, str] = {}
    for name in ("benchmark", "backend"):
        values = {getattr(result, name) for result in results}
        if len(values) == 1:
            shared[name] = values.pop()
    if shared:
        parts = [shared["benchmark"]] if "benchmark" in shared else []
        parts += [f"on {shared['backend']}"] if "backend" in shared else []
        title = f"{title}: {' '.join(parts)}"
    columns = [c for c in ("benchmark", "scenario", "backend", "mode") if c not in shared]
    latencies = any(test.performance is not None and "ttft_p99_ns" in test.performance.tokens
                    for result in results for test in result.tests)
    # No outer edge: four more columns for the cells, so an LLM test's row (its token
    # latencies beside the bounds) fits COMPACT_WIDTH without cutting a cell.
    table = Table(title=title, show_edge=False)
    for column in (*columns, "value", *((TOKEN_COLUMN,) if latencies else ()),
                   "validity", "accuracy", "submittable"):
        # Names and verdicts are never cut; the value and the token latencies wrap
        # (at their spaces: "435.6 / tokens/s", "35,050.9>=2000 / 82.8<200").
        wraps = column in ("value", TOKEN_COLUMN, "accuracy")
        table.add_column(column, no_wrap=not wraps,
                         overflow="fold" if column in ("value", TOKEN_COLUMN) else "ellipsis")
    for result in results:
        for test in result.tests:
            cells = {"benchmark": result.benchmark, "scenario": result.scenario,
                     "backend": result.backend, "mode": _mode(result, test)}
            table.add_row(
                *(Text(cells[column]) for column in columns), Text(_metric(test)[1]),
                *((Text(_token_bounds_cell(test)),) if latencies else ()),
                Text(test.status.value, style=_STYLE[test.status]),
                Text(_accuracy(test, target=False)),
                Text("yes" if result.submittable else "no"))
    return table

