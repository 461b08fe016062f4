"""ResNet-50 end to end on the synthetic fixture: real LoadGen, onnxruntime, the CLI.

The fixture (``reference_models/resnet50/make_fixture.py``, built once per session)
is 20 JPEGs and a ResNet-50 with fixed-seed weights whose answer is known: class
``label + 1`` (background offset). Two ``val_map.txt`` lines carry wrong labels, so
with the label offset applied top-1 is exactly 18/20; without it, 0/20. ResNet-50
runs at ~10 samples/s on 2 cores, so query counts are cut with ``--set`` (which makes
the runs non-submittable, as are all fixture runs: 20 images, not 50,000).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from suite.logs import parse_detail_log
from suite.models import sha256_file
from suite.results import RunResult
from tests.conftest import REPO, only_run_dir, run_cli

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Fixture:
    images: Path
    model: Path
    labels: list[int]
    expected_good: int


@pytest.fixture(scope="session")
def r50(tmp_path_factory: pytest.TempPathFactory) -> Fixture:
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("r50")
    script = REPO / "reference_models" / "resnet50" / "make_fixture.py"
    subprocess.run([sys.executable, str(script), "--out-dir", str(out)], check=True,
                   capture_output=True, text=True, timeout=300)
    meta = json.loads((out / "fixture.json").read_text())
    return Fixture(out / "imagenet", out / "resnet50_fixture.onnx", meta["labels"],
                   meta["expected_good"])


def _run(r50: Fixture, cache: Path, runs: Path, *args: str,
         images: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    env = {"SUITE_IMAGENET_DIR": str(images or r50.images),
           "SUITE_RESNET50_ONNX": str(r50.model), **env}
    return run_cli("run", "--benchmark", "resnet50", "--quick", "--runs-dir", str(runs),
                   "--set", f"data.cache_dir={cache}", "--set", "data.preprocess_workers=2",
                   *args, **env)


# Just enough queries to end quickly; every run stays a real LoadGen test.
SCENARIO_ARGS = {
    "singlestream": ["--set", "loadgen.min_query_count=8"],
    "multistream": ["--set", "loadgen.min_query_count=2"],
    "server": ["--set", "loadgen.min_query_count=8", "--set", "loadgen.target_qps=8"],
    "offline": ["--set", "loadgen.min_query_count=16", "--set", "loadgen.expected_qps=8"],
}


@pytest.mark.parametrize("scenario", list(SCENARIO_ARGS))
def test_every_scenario_runs_with_the_rounds_settings(r50: Fixture, tmp_path: Path,
                                                      scenario: str) -> None:
    runs = tmp_path / "runs"
    proc = _run(r50, tmp_path / "cache", runs, "--scenario", scenario,
                *SCENARIO_ARGS[scenario])
    assert proc.returncode in (0, 2), proc.stderr  # INVALID is timing on a busy box
    run_dir = only_run_dir(runs)
    result = RunResult.load(run_dir / "result.json")
    [test] = result.tests
    assert test.performance is not None and test.performance.metric_value is not None
    assert json.loads((run_dir / "dataset.json").read_text())["total"] == len(r50.labels)
    # The round's values reach LoadGen: seeds, sample count, bounds, Offline minimum.
    log = parse_detail_log(run_dir / "performance" / "mlperf_log_detail.txt")
    assert log.values["effective_qsl_rng_seed"] == 2085463073848966840
    assert log.values["effective_performance_sample_count"] == 1024
    mlperf_conf = (run_dir / "performance" / "mlperf.conf").read_text()
    if scenario == "server":
        assert log.values["effective_target_latency_ns"] == 15_000_000
    if scenario == "offline":
        assert "resnet50.Offline.min_query_count = 24576" in mlperf_conf
    if scenario == "multistream":
        assert log.values["effective_samples_per_query"] == 8
    assert result.division == "open" and not result.submittable
    if scenario == "offline":  # the fixture's model is not the reference: open division
        assert_open_division(proc, run_dir, r50)


def assert_open_division(proc: subprocess.CompletedProcess[str], run_dir: Path,
                         r50: Fixture) -> None:
    """A run of a model that is not the reference is open division, and says so: the
    record, STATUS and the notes under the table name the file."""
    result = RunResult.load(run_dir / "result.json")
    assert result.schema_version == 2
    assert result.division == "open" and str(r50.model) in result.division_reason
    assert result.model_sha256 == sha256_file(r50.model)
    assert not result.submittable
    assert any("open division" in r for r in result.non_submittable_reasons)
    assert "OPEN DIVISION" in (run_dir / "STATUS").read_text()
    # The notes under the table say so and name the file (the division column is --wide's).
    assert re.search(r"resnet50 offline: OPEN DIVISION: .*" + re.escape(r50.model.name),
                     proc.stdout.replace("\n", " "))
    assert "OPEN DIVISION" in proc.stdout and "resnet50_fixture.onnx" in proc.stdout


def test_accuracy_applies_the_label_offset_and_the_cache_is_reused(r50: Fixture,
                                                                    tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = _run(r50, cache, tmp_path / "runs1", "--scenario", "offline", "--mode", "accuracy")
    assert first.returncode == 0, first.stderr
    run_dir = only_run_dir(tmp_path / "runs1")
    result = RunResult.load(run_dir / "result.json")
    [test] = result.tests
    assert test.accuracy is not None
    assert (test.accuracy.good, test.accuracy.total) == (r50.expected_good, len(r50.labels))
    assert test.accuracy.value == 90.0 and test.accuracy.target == 75.6954
    assert test.accuracy.passed

    # accuracy.txt as tools/accuracy-imagenet.py prints it, then the log's hash.
    lines = (run_dir / "accuracy" / "accuracy.txt").read_text().splitlines()
    assert lines[0] == f"accuracy=90.000%, good={r50.expected_good}, total={len(r50.labels)}"
    log_bytes = (run_dir / "accuracy" / "mlperf_log_accuracy.json").read_bytes()
    assert lines[1] == f"hash={hashlib.sha256(log_bytes).hexdigest()}"
    # Responses are float32 class indices with the offset applied: exactly the labels.
    decoded = {e["qsl_idx"]: np.frombuffer(bytes.fromhex(e["data"]), np.float32)[0]
               for e in json.loads(log_bytes)}
    assert [decoded[i] for i in range(len(r50.labels))] == r50.labels

    described = json.loads((run_dir / "dataset.json").read_text())
    assert described["cache"]["preprocessed"] == len(r50.labels)
    # A second run finds the cache complete and preprocesses nothing.
    second = _run(r50, cache, tmp_path / "runs2", "--scenario", "singlestream",
                  "--mode", "accuracy")
    assert second.returncode == 0, second.stderr
    again = json.loads((only_run_dir(tmp_path / "runs2") / "dataset.json").read_text())
    assert again["cache"]["preprocessed"] == 0
    assert again["cache"]["reused"] == len(r50.labels)
    assert again["cache"]["directory"] == described["cache"]["directory"]


# A model that is not the reference runs open division: assert_open_division, on the
# Offline run of test_every_scenario_runs_with_the_rounds_settings (the same command).


def test_a_model_matching_the_card_runs_closed_division(r50: Fixture, tmp_path: Path,
                                                        suite_home: Path) -> None:
    card = suite_home / "reference_models" / "resnet50" / "model.toml"
    text = card.read_text().replace(
        'opset = 11\n', f'opset = 11\nonnx_sha256 = "{sha256_file(r50.model)}"\n')
    card.write_text(text)
    proc = _run(r50, tmp_path / "cache", tmp_path / "runs", "--scenario", "offline",
                *SCENARIO_ARGS["offline"], SUITE_HOME=str(suite_home))
    assert proc.returncode in (0, 2), proc.stderr
    result = RunResult.load(only_run_dir(tmp_path / "runs") / "result.json")
    assert result.division == "closed" and result.division_reason == ""
    assert not any("open division" in r for r in result.non_submittable_reasons)
    assert any("50000" in r for r in result.non_submittable_reasons)  # 20 images


def _copy_images(r50: Fixture, tmp_path: Path) -> Path:
    target = tmp_path / "imagenet"
    shutil.copytree(r50.images, target)
    return target


def test_bad_inputs_fail_before_a_run_and_name_the_file(r50: Fixture, tmp_path: Path) -> None:
    runs, cache = tmp_path / "runs", tmp_path / "cache"
    missing_dir = tmp_path / "no-such-imagenet"
    proc = _run(r50, cache, runs, images=missing_dir)
    assert proc.returncode == 1 and str(missing_dir) in proc.stderr

    proc = _run(r50, cache, runs, SUITE_RESNET50_ONNX=str(tmp_path / "nope.onnx"))
    assert proc.returncode == 1 and "nope.onnx" in proc.stderr

    images = _copy_images(r50, tmp_path)
    gone = images / "ILSVRC2012_val_00000005.JPEG"
    gone.unlink()
    proc = _run(r50, cache, runs, images=images)
    assert proc.returncode == 1 and str(gone) in proc.stderr and "missing" in proc.stderr

    gone.write_bytes(b"not a jpeg at all")
    proc = _run(r50, cache, runs, images=images)
    assert proc.returncode == 1 and str(gone) in proc.stderr
    assert "1 image(s) could not be preprocessed" in proc.stderr
    assert not runs.exists() or list(runs.iterdir()) == []


def test_data_locations_come_from_the_environment_with_provenance(r50: Fixture,
                                                                   tmp_path: Path) -> None:
    proc = run_cli("config", "--benchmark", "resnet50", "--scenario", "server",
                   SUITE_IMAGENET_DIR=str(r50.images), SUITE_RESNET50_ONNX=str(r50.model))
    assert proc.returncode == 0, proc.stderr
    assert "env SUITE_IMAGENET_DIR" in proc.stdout and "env SUITE_RESNET50_ONNX" in proc.stdout
    # A --set beats the environment.
    proc = run_cli("config", "--benchmark", "resnet50", "--set",
                   f"data.dataset_dir={tmp_path}", SUITE_IMAGENET_DIR=str(r50.images),
                   SUITE_RESNET50_ONNX=str(r50.model))
    assert proc.returncode == 0 and "--set data.dataset_dir" in proc.stdout
    proc = run_cli("run", "--benchmark", "resnet50", "--runs-dir", str(tmp_path / "r"),
                   SUITE_RESNET50_ONNX=str(r50.model), SUITE_IMAGENET_DIR="")
    assert proc.returncode == 1 and "SUITE_IMAGENET_DIR" in proc.stderr
