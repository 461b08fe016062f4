"""``suite diff``: real runs (digits, null backend, the real LoadGen) that differ in one
key, and the diff layer on edited copies of real run records (model, round, failed test,
unreadable records)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from suite.reports.diff import NOT_RECORDED, diff_runs
from suite.results import RunResult
from tests.conftest import run_cli, speed_free_offline

#: name -> the run's extra arguments. A, B and C differ in sut.workers (C sets the same
#: value as A through the named flag: same value, another source); D repeats A.
_RUNS = {"A": ["--set", "sut.workers=2"], "B": ["--set", "sut.workers=3"],
         "C": ["--workers", "2"], "D": ["--set", "sut.workers=2"]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Four real quick runs in one runs dir (``runs_dir`` is a recorded config key)."""
    root = tmp_path_factory.mktemp("diff-runs")
    made: dict[str, Path] = {}
    for name, extra in _RUNS.items():
        runs_dir = root / "runs"
        before = set(runs_dir.iterdir()) if runs_dir.is_dir() else set()
        proc = run_cli("run", "--benchmark", "digits", "--scenario", "offline", "--backend",
                       "null", "--quick", "--runs-dir", str(runs_dir),
                       # VALID however fast the machine (see SPEED_FREE_OFFLINE)
                       *speed_free_offline(), *extra)
        assert proc.returncode == 0, proc.stderr[-2000:]
        (made[name],) = set(runs_dir.iterdir()) - before
    return made


def _diff_json(a: Path, b: Path) -> dict[str, Any]:
    proc = run_cli("diff", str(a), str(b), "--json")
    assert proc.returncode == 0, proc.stderr
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def test_runs_differing_in_one_key_show_exactly_that_key_and_its_sources(
        runs: dict[str, Path]) -> None:
    data = _diff_json(runs["A"], runs["B"])
    assert data["config"] == [{"key": "sut.workers", "a": 2, "b": 3,
                               "source_a": "--set sut.workers",
                               "source_b": "--set sut.workers"}]
    assert data["sources"] == []
    assert data["round_changed"] is False and data["model_changed"] is False
    assert data["identity"] == []  # same benchmark, scenario, mode, backend, status


def test_the_terminal_table_names_the_key_and_its_source(runs: dict[str, Path]) -> None:
    proc = run_cli("diff", str(runs["A"]), str(runs["B"]))
    assert proc.returncode == 0, proc.stderr
    assert "config keys that differ (1)" in proc.stdout
    row = next(line for line in proc.stdout.splitlines() if "sut.workers" in line)
    assert "--set sut.workers" in row and " 2 " in row and " 3 " in row
    assert "performance test: A VALID, B VALID" in proc.stdout
    assert "latency p99" in proc.stdout


def test_identical_configs_show_no_key_difference(runs: dict[str, Path]) -> None:
    data = _diff_json(runs["A"], runs["D"])
    assert data["config"] == [] and data["sources"] == []
    proc = run_cli("diff", str(runs["A"]), str(runs["D"]))
    assert "config: no key differs" in proc.stdout


def test_same_value_from_another_layer_is_a_source_change_only(
        runs: dict[str, Path]) -> None:
    data = _diff_json(runs["A"], runs["C"])
    assert data["config"] == []
    assert data["sources"] == [{"key": "sut.workers", "a": 2, "b": 2,
                                "source_a": "--set sut.workers", "source_b": "--workers"}]


def test_metric_and_percentile_deltas_come_from_each_result_json(
        runs: dict[str, Path]) -> None:
    data = _diff_json(runs["A"], runs["B"])
    perf_a, perf_b = (RunResult.load(runs[n] / "result.json").tests[0].performance
                      for n in ("A", "B"))
    assert perf_a is not None and perf_b is not None
    assert perf_a.metric_value is not None and perf_b.metric_value is not None
    (test,) = data["tests"]
    assert test["mode"] == "performance" and test["status_a"] == test["status_b"] == "VALID"
    figures = {f["name"]: f for f in test["figures"]}
    metric = figures["metric samples/s"]
    assert (metric["a"], metric["b"]) == (perf_a.metric_value, perf_b.metric_value)
    assert metric["delta"] == pytest.approx(perf_b.metric_value - perf_a.metric_value)
    assert metric["relative"] == pytest.approx(metric["delta"] / perf_a.metric_value)
    p99 = figures["latency p99"]
    assert p99["unit"] == "ms"
    assert p99["a"] == pytest.approx(perf_a.latency_ns["99.00_percentile"] / 1e6)
    assert p99["b"] == pytest.approx(perf_b.latency_ns["99.00_percentile"] / 1e6)


def test_a_missing_run_dir_is_one_line_and_exit_1(runs: dict[str, Path],
                                                  tmp_path: Path) -> None:
    missing = tmp_path / "no-such-run"
    proc = run_cli("diff", str(runs["A"]), str(missing))
    assert proc.returncode == 1
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert str(missing) in lines[0] and "run B" in lines[0]
    assert proc.stdout == ""


@pytest.mark.parametrize("name", ["result.json", "config.json", "system.json"])
def test_a_run_dir_missing_a_record_names_the_file(runs: dict[str, Path], tmp_path: Path,
                                                   name: str) -> None:
    broken = _copy(runs["B"], tmp_path)
    (broken / name).unlink()
    proc = run_cli("diff", str(runs["A"]), str(broken))
    assert proc.returncode == 1
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and str(broken / name) in lines[0], proc.stderr


def test_an_unreadable_record_names_the_file(runs: dict[str, Path], tmp_path: Path) -> None:
    broken = _copy(runs["A"], tmp_path)
    (broken / "config.json").write_text("{ not json", encoding="utf-8")
    proc = run_cli("diff", str(broken), str(runs["B"]))
    assert proc.returncode == 1
    assert str(broken / "config.json") in proc.stderr and "run A" in proc.stderr


def _copy(run_dir: Path, where: Path) -> Path:
    target = where / run_dir.name
    shutil.copytree(run_dir, target)
    return target


def _edit(path: Path, change: Any) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")


def test_another_model_file_is_detected_with_its_path_and_source(
        runs: dict[str, Path], tmp_path: Path) -> None:
    other = _copy(runs["D"], tmp_path)

    def model_b(config: dict[str, Any]) -> None:
        config["data"]["model_path"] = "/models/digits-int8.onnx"
        config["provenance"]["data.model_path"] = "--set data.model_path"

    def sha_b(result: dict[str, Any]) -> None:
        result["model_sha256"] = "0" * 64
        result["division"] = "open"

    _edit(other / "config.json", model_b)
    _edit(other / "result.json", sha_b)
    diff = diff_runs(runs["A"], other)
    assert diff.model_changed and not diff.round_changed
    assert diff.model_b.path == "/models/digits-int8.onnx" and diff.model_a.path == ""
    assert (diff.model_a.division, diff.model_b.division) == ("closed", "open")
    assert [(c.key, c.source_b) for c in diff.config] == [
        ("data.model_path", "--set data.model_path")]
    assert json.loads(diff.to_json())["model_changed"] is True


def test_same_file_with_another_sha256_is_a_model_change(runs: dict[str, Path],
                                                         tmp_path: Path) -> None:
    other = _copy(runs["D"], tmp_path)
    _edit(other / "result.json", lambda r: r.update(model_sha256="f" * 64))
    diff = diff_runs(runs["A"], other)
    assert diff.model_changed and diff.config == []
    assert not diff_runs(runs["A"], runs["D"]).model_changed


def test_a_round_change_is_reported(runs: dict[str, Path], tmp_path: Path) -> None:
    other = _copy(runs["D"], tmp_path)
    _edit(other / "result.json", lambda r: r.update(round="v5.1"))
    _edit(other / "config.json", lambda c: c.update(round="v5.1"))
    diff = diff_runs(runs["A"], other)
    assert diff.round_changed and (diff.round_a, diff.round_b) == (runs_round(runs), "v5.1")
    assert [(c.key, c.source_b) for c in diff.config] == [("round", "the run request")]


def runs_round(runs: dict[str, Path]) -> str:
    return RunResult.load(runs["A"] / "result.json").round


def test_system_differences_are_listed_key_by_key(runs: dict[str, Path],
                                                  tmp_path: Path) -> None:
    other = _copy(runs["D"], tmp_path)
    _edit(other / "system.json", lambda s: (s.update(cpu_count=64),
                                            s["packages"].update(numpy="0.0")))
    diff = diff_runs(runs["A"], other)
    assert {c.key for c in diff.system} == {"cpu_count", "packages.numpy"}
    assert next(c for c in diff.system if c.key == "cpu_count").b == 64


def test_a_failed_test_has_no_figures_to_compare(runs: dict[str, Path],
                                                 tmp_path: Path) -> None:
    other = _copy(runs["D"], tmp_path)
    _edit(other / "result.json",
          lambda r: (r.update(status="FAILED", exit_code=1), r["tests"][0].update(
              status="FAILED", exit_code=1)))
    diff = diff_runs(runs["A"], other)
    (test,) = diff.tests
    assert test.status_b == "FAILED" and test.figures
    assert all(f.b is None and f.delta is None and f.a is not None for f in test.figures)
    assert ("status", "VALID", "FAILED") in [(c.key, c.a, c.b) for c in diff.identity]


def test_a_key_one_run_does_not_record_is_marked_so(runs: dict[str, Path],
                                                    tmp_path: Path) -> None:
    older = _copy(runs["D"], tmp_path)
    _edit(older / "config.json", lambda c: (c["sut"].pop("heartbeat_s"),
                                            c["provenance"].pop("sut.heartbeat_s")))
    (change,) = diff_runs(older, runs["A"]).config
    assert (change.key, change.a, change.source_a) == ("sut.heartbeat_s", None, NOT_RECORDED)


def test_backend_changes_are_listed_per_test(runs: dict[str, Path], tmp_path: Path) -> None:
    other = _copy(runs["D"], tmp_path)
    _edit(other / "result.json", lambda r: r["tests"][0]["backend"].update(version="9"))
    (test,) = diff_runs(runs["A"], other).tests
    assert [(c.key, c.a, c.b) for c in test.backend] == [("version", "0", "9")]


def test_a_test_only_one_run_has_is_absent_on_the_other_side(runs: dict[str, Path],
                                                             tmp_path: Path) -> None:
    other = _copy(runs["D"], tmp_path)
    _edit(other / "result.json", lambda r: r["tests"][0].update(mode="accuracy"))
    performance, accuracy = diff_runs(runs["A"], other).tests
    assert (performance.mode, performance.status_a, performance.status_b) == (
        "performance", "VALID", None)
    assert (accuracy.mode, accuracy.status_a) == ("accuracy", None)
    assert performance.backend == [] and accuracy.backend == []
    assert all(f.b is None for f in performance.figures)


def test_a_malformed_result_json_names_the_file_and_the_field(runs: dict[str, Path],
                                                              tmp_path: Path) -> None:
    broken = _copy(runs["B"], tmp_path)
    _edit(broken / "result.json", lambda r: r.update(status="GREAT"))
    proc = run_cli("diff", str(runs["A"]), str(broken))
    assert proc.returncode == 1
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and str(broken / "result.json") in lines[0], proc.stderr
    assert "status" in lines[0]

