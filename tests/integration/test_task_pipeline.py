"""Task cards (``suite.tasks``) through the one pipeline, with the real LoadGen and the real
onnxruntime, on the toy task of ``tests/support/toy_task.py`` (two inputs, two outputs,
variable-length responses, an exact score) placed in a test home by ``task_home.py``.

Performance VALIDs run on the null backend with the stand-in's fixed query counts (no
minimum duration): they hold whatever the machine's speed. Every task registered in
``suite.tasks.TASKS`` with a card runs its stand-in here too (``test_every_registered_task``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import only_run_dir, run_cli
from tests.support.task_home import make_task_home

STAND_IN = "stand-in: not the reference model or dataset"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_task_home(tmp_path_factory.mktemp("task-home"))


def _result(run_dir: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((run_dir / "result.json").read_text())
    return loaded


@pytest.mark.parametrize("scenario", ["offline", "singlestream"])
def test_a_stand_in_runs_valid_and_says_it_is_one(home: Path, tmp_path: Path,
                                                  scenario: str) -> None:
    runs = tmp_path / "runs"
    done = run_cli("run", "--benchmark", "toytask", "--stand-in", "--backend", "null",
                   "--scenario", scenario, "--runs-dir", str(runs), SUITE_HOME=str(home))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    run_dir = only_run_dir(runs)
    result = _result(run_dir)
    assert result["status"] == "VALID" and result["tests"][0]["status"] == "VALID"
    assert not result["submittable"] and STAND_IN in result["non_submittable_reasons"]
    assert result["dataset"]["stand_in"] is True and result["dataset"]["staging"] == "stacked"
    assert json.loads((run_dir / "config.json").read_text())["stand_in"] is True
    assert STAND_IN in " ".join((done.stdout + done.stderr).split())
    # the stand-in lies in the home's cache, written once and reused
    assert (home / "cache" / "stand-ins" / "toytask-seed0" / "stand_in.json").is_file()


def test_accuracy_is_the_tasks_score_and_the_checker_calls_it_unofficial(
        home: Path, tmp_path: Path) -> None:
    from suite import api
    from suite.paths import find_paths

    runs = tmp_path / "runs"
    done = run_cli("run", "--benchmark", "toytask", "--stand-in", "--mode", "accuracy",
                   "--runs-dir", str(runs), SUITE_HOME=str(home))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    run_dir = only_run_dir(runs)
    accuracy = _result(run_dir)["tests"][0]["accuracy"]
    # The stand-in's labels are its model's exact totals, and each response carries as
    # many values as the toy task's kept_columns: the task's exact score is 100 %.
    assert (accuracy["metric"], accuracy["value"], accuracy["total"]) == ("acc", 100.0, 48)
    log = run_dir / "accuracy" / "mlperf_log_accuracy.json"
    lines = (run_dir / "accuracy" / "accuracy.txt").read_text().splitlines()
    assert lines == ["accuracy=100.000%, good=48, total=48",
                     f"hash={hashlib.sha256(log.read_bytes()).hexdigest()}"]
    lengths = {len(bytes.fromhex(e["data"])) for e in json.loads(log.read_text())}
    assert lengths == {8, 12, 16, 20}  # float32 total + 1 to 4 values: variable length

    report = api.check(run_dir, paths=find_paths(home))
    stand_in = [f for r in report.results for f in r.findings if f.rule == "RUN-STAND-IN"]
    assert stand_in and stand_in[0].severity == "error" and "unofficial" in stand_in[0].message
    assert not report.passed and report.summary.valid_results == 0


def test_a_bad_dataset_directory_or_backend_is_one_line_and_exit_1(home: Path,
                                                                   tmp_path: Path) -> None:
    stand_in = home / "cache" / "stand-ins" / "toytask-seed0"
    if not (stand_in / "stand_in.json").is_file():  # this test alone: write it first
        run_cli("run", "--benchmark", "toytask", "--stand-in", "--backend", "null",
                "--runs-dir", str(tmp_path / "first"), SUITE_HOME=str(home))
    broken = tmp_path / "broken"
    shutil.copytree(stand_in / "dataset", broken)
    (broken / "labels.json").unlink()
    runs = tmp_path / "runs"
    runs.mkdir()
    done = run_cli("run", "--benchmark", "toytask", "--backend", "null", "--quick",
                   "--dataset-path", str(broken), "--model-path", str(stand_in / "model.onnx"),
                   "--runs-dir", str(runs), SUITE_HOME=str(home))
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "labels.json is missing" in errors[0], done.stderr
    assert "Traceback" not in done.stderr and list(runs.iterdir()) == []
    # a backend that cannot feed named tensors is refused the same way
    done = run_cli("run", "--benchmark", "toytask", "--backend",
                   "tests.support.fault_backends:NoTasksBackend", "--stand-in",
                   "--runs-dir", str(runs), SUITE_HOME=str(home))
    errors = [line for line in done.stderr.splitlines() if line.startswith("error")]
    assert done.returncode == 1 and len(errors) == 1, done.stderr
    assert "does not run task cards" in errors[0] and list(runs.iterdir()) == []


def test_samples_of_varying_shapes_run_one_by_one(tmp_path: Path) -> None:
    home = make_task_home(tmp_path / "home", card="toyvarying",
                          task="tests.support.toy_task:VaryingToyTask", dynamic=True)
    runs = tmp_path / "runs"
    done = run_cli("run", "--benchmark", "toyvarying", "--stand-in", "--mode", "all",
                   "--scenario", "singlestream", "--runs-dir", str(runs), SUITE_HOME=str(home))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    result = _result(only_run_dir(runs))
    assert result["dataset"]["staging"] == "per-sample"
    assert [t["status"] for t in result["tests"]] == ["VALID", "VALID"]
    assert result["tests"][1]["accuracy"]["value"] == 100.0  # padding kept every total


def test_test01_compares_a_task_cards_response_bytes(home: Path, tmp_path: Path) -> None:
    # The null backend: the verdict on the logged responses (byte for byte, as the
    # official TEST01 compares them) is asserted; the performance verdict, a timing
    # figure, is only recorded.
    runs = tmp_path / "runs"
    common = ["--benchmark", "toytask", "--stand-in", "--backend", "null", "--scenario",
              "offline", "--runs-dir", str(runs)]
    done = run_cli("run", *common, "--mode", "all", SUITE_HOME=str(home))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    done = run_cli("run", *common, "--compliance", "TEST01", SUITE_HOME=str(home))
    run_dir = next(p for p in runs.iterdir() if p.name.endswith("_TEST01"))
    verify = (run_dir / "verify_accuracy.txt").read_text()
    assert "TEST PASS" in verify and "num_perf_log_data_mismatch = 0" in verify, verify
    compliance = _result(run_dir)["compliance"]
    assert compliance["test"] == "TEST01"
    assert compliance["verdicts"]["verify_accuracy.txt"] == "TEST PASS"
