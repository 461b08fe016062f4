"""``suite report RUN... --html OUT`` on real runs (real LoadGen, real tune probes), the page
parsed section by section: each shows what the runs recorded (trace latencies, the latency
table and bound, tune sweep, accuracy, config sources, INVALID explanations)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suite.logs import DETAIL_LOG, parse_detail_log
from suite.reports.explain import explain
from suite.reports.html import TRACE_LOG, trace_latencies_ms
from suite.results import RunResult, Status
from tests.support.html_pages import Page

pytestmark = pytest.mark.slow


def test_each_run_has_its_sections(reported: tuple[Page, list[Path], Path]) -> None:
    page, run_dirs, _ = reported
    assert len(page.runs) == len(run_dirs)
    for index, run in enumerate(page.runs):
        assert {"latency", "accuracy", "invalid", "config"} <= set(run), index
    assert "server" in page.runs[0] and "server" in page.runs[2]
    assert "server" not in page.runs[1]  # the tune sweep is a Server section


def test_trace_latencies_are_loadgens_own(reported: tuple[Page, list[Path], Path]) -> None:
    page, run_dirs, _ = reported
    test_dir = run_dirs[0] / "performance"
    assert json.loads((test_dir / "settings.json").read_text())["enable_trace"] is True
    latencies = trace_latencies_ms(test_dir / TRACE_LOG)
    assert latencies is not None
    log = parse_detail_log(test_dir / DETAIL_LOG)
    # Server: one sample per query; the trace's figures are the detail log's, exactly.
    assert latencies.size == log.get("result_query_count")
    assert round(latencies.min() * 1e6) == log.get("result_min_latency_ns")
    assert round(latencies.max() * 1e6) == log.get("result_max_latency_ns")
    assert f"{latencies.size:,} per-sample latencies" in page.text(0, "latency")
    alts = [image.get("alt") for image in page.images]
    assert alts.count("latency histogram") == 1  # only the traced run has one


def test_the_trace_is_off_by_default(reported: tuple[Page, list[Path], Path]) -> None:
    page, run_dirs, _ = reported
    test_dir = run_dirs[1] / "performance"
    assert json.loads((test_dir / "settings.json").read_text())["enable_trace"] is False
    assert trace_latencies_ms(test_dir / TRACE_LOG) is None
    assert "loadgen.enable_trace=true" in page.text(1, "latency")


def test_latency_table_is_the_detail_logs_percentiles_and_bound(
        reported: tuple[Page, list[Path], Path]) -> None:
    page, run_dirs, _ = reported
    log = parse_detail_log(run_dirs[0] / "performance" / DETAIL_LOG)
    header, values = page.rows[0]["latency"][:2]
    shown = dict(zip(header, values, strict=True))
    assert shown["99"] == f"{log.get('result_99.00_percentile_latency_ns') / 1e6:.4f} ms"
    assert shown["max"] == f"{log.get('result_max_latency_ns') / 1e6:.4f} ms"
    assert shown["bound (p99)"] == f"{log.get('effective_target_latency_ns') / 1e6:g} ms"


def test_tune_sweep_shows_every_cached_server_probe(
        reported: tuple[Page, list[Path], Path]) -> None:
    page, _, runs = reported
    cache = json.loads((runs / "tune-cache" / "htmlreport.json").read_text())
    probes = [entry for entry in cache.values()
              if RunResult.load(Path(entry["run_dir"]) / "result.json").scenario == "server"]
    assert probes, "tune cached no Server probe"
    rows = page.rows[0]["server"][1:]  # below the header
    assert sorted(row[-1] for row in rows) == sorted(entry["run_dir"] for entry in probes)
    verdicts = {row[-1]: row[-2] for row in rows}
    for entry in probes:
        assert verdicts[entry["run_dir"]] == ("VALID" if entry["valid"] else "INVALID")
    assert "tune sweep" in [image.get("alt") for image in page.images]


def test_accuracy_against_the_target(reported: tuple[Page, list[Path], Path]) -> None:
    page, run_dirs, _ = reported
    accuracy = RunResult.load(run_dirs[1] / "result.json").tests[1].accuracy
    assert accuracy is not None
    text = page.text(1, "accuracy")
    assert f"{accuracy.metric} {accuracy.value:.3f} against the target {accuracy.target:.3f}" \
        in text
    assert ("pass" if accuracy.passed else "FAIL") in text
    assert "no accuracy test in this run" in page.text(0, "accuracy")


def test_config_rows_carry_each_keys_recorded_source(
        reported: tuple[Page, list[Path], Path]) -> None:
    page, run_dirs, _ = reported
    config = json.loads((run_dirs[0] / "config.json").read_text())
    rows = {row[0]: row[1:] for row in page.rows[0]["config"] if len(row) == 3}
    assert rows["loadgen.enable_trace"] == ["True", "--set loadgen.enable_trace"]
    for key, source in config["provenance"].items():
        section, name = key.split(".", 1)
        if section in ("loadgen", "sut", "data"):
            assert rows[key] == [str(config[section][name]), source], key
    system = json.loads((run_dirs[0] / "system.json").read_text())
    assert ["cpu_model", system["cpu_model"]] in page.rows[0]["config"]


def test_an_invalid_run_shows_its_explanation(
        reported: tuple[Page, list[Path], Path]) -> None:
    page, run_dirs, _ = reported
    test = RunResult.load(run_dirs[2] / "result.json").tests[0]
    assert test.status is Status.INVALID and test.performance is not None
    reasons = explain(test.performance)
    assert reasons
    text = page.text(2, "invalid")
    for reason in reasons:
        for part in (reason.condition, reason.evidence, reason.advice):
            assert " ".join(part.split()) in text, part
    assert "every test is VALID" in page.text(0, "invalid") or \
        RunResult.load(run_dirs[0] / "result.json").status is not Status.VALID

