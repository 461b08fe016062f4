"""``suite report RUN... --html OUT``: one self-contained HTML page for finished runs.

This module gathers what the runs recorded and hands it to the template
(``html_report.html.j2``) and the plots (``plots``); it recomputes nothing:

* latency: LoadGen's percentile records from each performance test's
  ``mlperf_log_detail.txt`` (min, mean, p50 ... p99.9, max), the bound from the run's
  effective settings (Server), and, when the run kept LoadGen's trace
  (``loadgen.enable_trace``), every sample's latency from ``mlperf_log_trace.json``;
* Server: the tune sweep from tune's probe cache (``<runs>/tune-cache/<system>.json``)
  and each probe's own ``result.json``;
* accuracy: ``result.json``'s accuracy record against the round's target;
* config: ``config.json`` (each key with its source), ``system.json``, ``dataset.json``;
* INVALID tests: ``explain``'s conditions; failed tests: their message and ``status.json``.

Images are PNG ``data:`` URIs and the CSS is inline: the page references nothing outside
itself, so it can be mailed or attached to an audit as one file.
"""

from __future__ import annotations

import json
import re
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from suite.errors import SuiteError
from suite.logs import DETAIL_LOG, SUMMARY_LOG, DetailLog, parse_detail_log
from suite.reports.explain import Explanation, client_notes, explain
from suite.results import RunResult, Status, TestResult, summarize_performance
from suite.scenarios import Scenario
from suite.version import __version__

TRACE_LOG = "mlperf_log_trace.json"
_TEMPLATE = Path(__file__).with_name("html_report.html.j2")
# One trace event per line. The file as a whole is not JSON (LoadGen writes some keys
# with doubled quotes), so only the per-sample begin events are read: their
# ``complete_ns`` is the sample's latency from its scheduled time, LoadGen's own figure
# (its min/max match the detail log's exactly).
_SAMPLE_BEGIN = b'{"name":"Sample","cat":"default","ph":"b"'
_COMPLETE_NS = re.compile(rb'"complete_ns":(\d+)')


@dataclass
class TestView:
    """One LoadGen test as the page shows it."""

    mode: str
    status: str
    directory: str
    metric: str = ""
    latency_ms: dict[str, float] = field(default_factory=dict)
    bound_ms: float | None = None
    percentile: float | None = None
    per_query: int = 0
    cdf_png: str = ""
    histogram_png: str = ""
    trace_note: str = ""
    explanations: list[Explanation] = field(default_factory=list)
    message: str = ""
    failures: list[dict[str, Any]] = field(default_factory=list)
    summary_log: str = ""
    #: LLM runs with token latencies: TTFT and TPOT, each with its bound (``token_views``).
    token_latency: list[TokenView] = field(default_factory=list)


@dataclass
class TokenView:
    """TTFT or TPOT of one LLM test: LoadGen's percentile records and the bound it ran
    with (``requested_server_ttft_latency`` / ``_tpot_latency``), in ms."""

    name: str
    latency_ms: dict[str, float]
    bound_ms: float | None
    cdf_png: str = ""


#: (name, the detail-log key of a percentile ``{p}``, of min/max/mean ``{s}``, the bound)
#: as LoadGen's results.cc logs a token-latency test.
_TOKEN_RECORDS = (
    ("TTFT", "result_first_token_{p}_percentile_latency_ns",
     "result_first_token_{s}_latency_ns", "requested_server_ttft_latency"),
    ("TPOT", "result_time_per_output_token_{p}_percentile_ns",
     "result_time_to_output_token_{s}", "requested_server_tpot_latency"),
)


def token_views(log: DetailLog) -> list[TokenView]:
    """TTFT and TPOT from the detail log, each where LoadGen logged it (none for a test
    without token latencies). The bound is the one LoadGen ran with, where it logged one
    (a Server or Interactive test); Offline has none."""
    from suite.reports.plots import PERCENTILES, latency_cdf

    views = []
    for name, percentile_key, stat_key, bound_key in _TOKEN_RECORDS:
        values: dict[str, float] = {}
        for stat in ("min", "mean", "max"):
            if isinstance(found := log.get(stat_key.format(s=stat)), int | float):
                values[stat] = found / 1e6
        for key in PERCENTILES:
            found = log.get(percentile_key.format(p=key.removesuffix("_percentile")))
            if isinstance(found, int | float):
                values[key] = found / 1e6
        if not any(key in values for key in PERCENTILES):
            continue
        bound = log.get(bound_key)
        bound_ms = bound / 1e6 if isinstance(bound, int | float) and bound > 0 else None
        views.append(TokenView(name, values, bound_ms,
                               latency_cdf(values, bound_ms, title=name)))
    return views


@dataclass
class RunView:
    """One run directory as the page shows it."""

    result: RunResult
    tests: list[TestView]
    config: list[tuple[str, str, str]]
    overridden: list[str]
    system: list[tuple[str, str]]
    dataset: list[tuple[str, str]]
    accuracy_png: dict[str, str]
    sweep_png: str = ""
    sweep: list[dict[str, Any]] = field(default_factory=list)
    sweep_note: str = ""
    #: LLM benchmarks: ``suite tune``'s sweep points (throughput against token latency).
    llm_sweep: list[dict[str, Any]] = field(default_factory=list)
    llm_sweep_png: str = ""


def load_result(run_dir: Path) -> RunResult:
    """``run_dir``'s ``result.json``; one clear error when it is missing or damaged."""
    path = run_dir / "result.json"
    try:
        return RunResult.load(path)
    except (OSError, ValueError) as exc:
        raise SuiteError(f"cannot read {path}: {exc}",
                         hint="give a finished run directory (one with result.json); a run "
                         "without one was killed, see its STATUS") from None


def _json(path: Path) -> dict[str, Any]:
    """A JSON record of the run, or {} when the run did not write it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def trace_latencies_ms(path: Path) -> npt.NDArray[np.float64] | None:
    """Every sample's latency (ms) from LoadGen's trace, or None without a trace (LoadGen
    leaves an empty file when the trace is off). Read line by line: an Offline trace
    runs to hundreds of MB."""
    if not path.is_file() or path.stat().st_size == 0:
        return None
    values = array("q")
    with path.open("rb") as handle:
        for line in handle:
            if line.startswith(_SAMPLE_BEGIN):
                match = _COMPLETE_NS.search(line)
                if match:
                    values.append(int(match.group(1)))
    if not values:
        return None
    return np.frombuffer(values, dtype=np.int64).astype(np.float64) / 1e6


def _flatten(data: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    for key, value in data.items():
        if isinstance(value, dict):
            rows += _flatten(value, f"{prefix}{key}.")
        else:
            rows.append((f"{prefix}{key}", json.dumps(value) if isinstance(value, list)
                         else str(value)))
    return rows


def _config_rows(config: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(key, value, source) for every resolved key, as ``config.json`` records them."""
    provenance: dict[str, str] = config.get("provenance", {})
    rows: list[tuple[str, str, str]] = [(key, str(config[key]), "the run request") for key in
            ("benchmark", "scenario", "mode", "backend", "round", "quick", "system",
             "compliance") if key in config]  # the request itself: flags or their defaults
    for section in ("loadgen", "sut", "data"):
        for key, value in config.get(section, {}).items():
            name = f"{section}.{key}"
            rows.append((name, str(value), provenance.get(name, "not recorded")))
    for key, value in config.get("backend_options", {}).items():
        source = next((v for k, v in provenance.items()
                       if k.startswith("backend.") and k.endswith(f".{key}")), "not recorded")
        rows.append((f"backend_options.{key}", str(value), source))
    return rows


def _test_view(run_dir: Path, test: TestResult) -> TestView:
    from suite.reports import plots as report_plots

    # The test's own folder inside the run directory given, wherever the run was moved
    # or unpacked since; the recorded absolute path only when that folder is gone.
    test_dir = run_dir / Path(test.directory).name
    if not test_dir.is_dir():
        test_dir = Path(test.directory)
    view = TestView(test.mode, test.status.value, test.directory, message=test.message,
                    failures=test.failures)
    summary = test_dir / SUMMARY_LOG
    if summary.is_file():
        view.summary_log = summary.read_text(encoding="utf-8", errors="replace")
    perf = test.performance
    if test.mode != "performance" or perf is None:
        return view
    detail = test_dir / DETAIL_LOG
    log = parse_detail_log(detail) if detail.is_file() else None
    if log is not None:  # the record itself; result.json holds a copy of the same figures
        perf = summarize_performance(log, Scenario(perf.scenario))
    if perf.metric_value is not None:
        shown = f"{perf.metric_value:.4f}" if perf.unit == "ms" else f"{perf.metric_value:,.1f}"
        view.metric = f"{perf.metric_name}: {shown} {perf.unit}"
    view.latency_ms = {key: value / 1e6 for key, value in perf.latency_ns.items()}
    bound_ns = perf.effective.get("target_latency_ns")
    view.token_latency = token_views(log) if log is not None else []
    # A token-latency test is bound by TTFT and TPOT, not by the whole query's latency
    # (LoadGen logs a target_latency it does not enforce): that bound is not drawn.
    if (perf.scenario == Scenario.SERVER.value and isinstance(bound_ns, int | float)
            and not any(t.bound_ms for t in view.token_latency)):
        view.bound_ms = bound_ns / 1e6
        view.percentile = float(perf.effective.get("target_latency_percentile", 0.99)) * 100
    per_query = trace_latencies_ms(test_dir / TRACE_LOG)
    if per_query is None:
        view.trace_note = ("no per-query record: run with --set loadgen.enable_trace=true "
                           "for LoadGen's trace and a histogram")
    else:
        view.per_query = int(per_query.size)
        view.histogram_png = report_plots.latency_histogram(per_query, view.latency_ms,
                                                            view.bound_ms)
    if view.latency_ms:
        view.cdf_png = report_plots.latency_cdf(view.latency_ms, view.bound_ms, per_query)
    if test.status is Status.INVALID:
        view.explanations = explain(perf, log)  # the log: an LLM run's TTFT/TPOT bounds
    view.explanations = [*view.explanations, *client_notes(test.backend)]
    return view


def _probe_setup(config: dict[str, Any]) -> str:
    sut = config.get("sut", {})
    return (f"batch {sut.get('max_batch_size', '?')}, {sut.get('workers', '?')} "
            f"{sut.get('worker_model', '?')}")


def tune_sweep(run_dir: Path, result: RunResult, config: dict[str, Any]
               ) -> tuple[list[dict[str, Any]], str]:
    """The Server probes ``suite tune`` cached for this run's benchmark, backend, model
    and system, each read from its own result.json; and a note on what was not found."""
    system = config.get("system", "")
    homes = {run_dir.parent, Path(config.get("runs_dir", run_dir.parent))}
    homes |= {home.parent for home in homes if home.name == "tune-probes"}
    caches = [home / "tune-cache" / f"{system}.json" for home in sorted(homes)]
    found = [path for path in caches if path.is_file()]
    if not found:
        return [], f"no tune probe cache for system '{system}' ({', '.join(map(str, caches))})"
    rows: list[dict[str, Any]] = []
    missing = 0
    for cache in found:
        for entry in _json(cache).values():
            probe_dir = Path(str(entry.get("run_dir", "")))
            try:
                probe = RunResult.load(probe_dir / "result.json")
            except (OSError, ValueError):
                missing += 1
                continue
            if (probe.scenario, probe.benchmark, probe.backend, probe.model_sha256) != (
                    "server", result.benchmark, result.backend, result.model_sha256):
                continue
            perf = probe.tests[0].performance if probe.tests else None
            qps = perf.effective.get("target_qps") if perf else None
            p99 = perf.latency_ns.get("99.00_percentile") if perf else None
            if perf is None or qps is None or p99 is None:
                missing += 1
                continue
            rows.append({"target_qps": float(qps), "p99_ms": p99 / 1e6,
                         "valid": bool(entry.get("valid")), "run_dir": str(probe_dir),
                         "setup": _probe_setup(_json(probe_dir / "config.json")),
                         "completed": perf.metric_value})
    rows.sort(key=lambda row: (row["setup"], row["target_qps"]))
    note = f"{missing} cached probe(s) without a readable result.json" if missing else ""
    if not rows:
        note = note or f"tune's cache holds no Server probe of this benchmark and backend " \
                        f"for system '{system}'"
    return rows, note


def llm_sweep(run_dir: Path, result: RunResult, config: dict[str, Any]) -> list[dict[str, Any]]:
    """The points of ``suite tune``'s LLM sweep for this run's benchmark, backend and
    system (``harness.llm.sweep``), where the runs directory holds one."""
    from suite.paths import sweep_path

    homes = {run_dir.parent, Path(config.get("runs_dir", run_dir.parent))}
    homes |= {home.parent for home in homes if home.name == "tune-probes"}
    for home in sorted(homes):
        path = sweep_path(home, str(config.get("system", "")), result.benchmark,
                          result.backend)
        points = _json(path).get("points")
        if isinstance(points, list) and points:
            return [p for p in points if isinstance(p, dict) and p.get("tokens_per_s")]
    return []


def run_view(run_dir: Path) -> RunView:
    """Everything the page shows for one run directory."""
    from suite.reports import plots as report_plots

    result = load_result(run_dir)
    config = _json(run_dir / "config.json")
    view = RunView(
        result=result,
        tests=[_test_view(run_dir, test) for test in result.tests],
        config=_config_rows(config) if config else [],
        overridden=list(config.get("overridden_rules", {}).values()),
        system=_flatten(_json(run_dir / "system.json")),
        dataset=_flatten(_json(run_dir / "dataset.json")),
        accuracy_png={test.mode: report_plots.accuracy_bar(test.accuracy.metric,
                                                           test.accuracy.value,
                                                           test.accuracy.target)
                      for test in result.tests if test.accuracy is not None},
    )
    if any(t.performance is not None and t.performance.tokens for t in result.tests):
        view.llm_sweep = llm_sweep(run_dir, result, config)
        if view.llm_sweep:
            view.llm_sweep_png = report_plots.llm_pareto(view.llm_sweep)
    elif result.scenario == Scenario.SERVER.value:
        view.sweep, view.sweep_note = tune_sweep(run_dir, result, config)
        if view.sweep:
            bound = config.get("loadgen", {}).get("latency_bound_ms")
            view.sweep_png = report_plots.tune_sweep(
                [report_plots.SweepPoint(row["target_qps"], row["p99_ms"], row["valid"],
                                         row["setup"]) for row in view.sweep],
                float(bound) if isinstance(bound, int | float) else None)
    return view


def render(run_dirs: list[Path]) -> str:
    """The HTML page for ``run_dirs``, in the order given."""
    try:
        import jinja2
    except ImportError:
        raise SuiteError("suite report --html needs jinja2 and matplotlib",
                         hint="pip install 'infersuite[report]'") from None
    try:
        import matplotlib  # noqa: F401  (report_plots imports it on first use)
    except ImportError:
        raise SuiteError("suite report --html needs matplotlib",
                         hint="pip install 'infersuite[report]'") from None
    runs = [run_view(run_dir) for run_dir in run_dirs]
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    template = env.from_string(_TEMPLATE.read_text(encoding="utf-8"))
    return template.render(runs=runs, version=__version__)


def write_report(run_dirs: list[Path], out: Path) -> Path:
    """Render ``run_dirs`` into ``out`` (written whole, never half a page)."""
    page = render(run_dirs)
    tmp = out.with_name(out.name + ".tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(page, encoding="utf-8")
        tmp.replace(out)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise SuiteError(f"cannot write {out}: {exc.strerror}",
                         hint="choose a writable --html path") from None
    return out
