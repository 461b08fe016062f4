"""Inputs the suite once accepted (or crashed on) and must refuse before any run: a run
predicted to last beyond a week (unless forced or capped), a rate beyond one per
nanosecond, a non-finite config float, a val_map label outside the card's range. Each
refusal names the file, key or value and what to do. The library is called directly, and
``suite lint`` runs as a subprocess; ``suite run`` refusing inputs before LoadGen starts
is in tests/integration/test_input_validation.py."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from suite.config.loader import (
    ConfigRequest,
    LoadGenConfig,
    SutConfig,
    load_config,
)
from suite.config.preflight import MAX_PREDICTED_S, lint
from suite.datasets.imagenet import IMAGENET_LABELS, label_range, read_val_map
from suite.errors import ConfigError, DatasetError
from suite.models import load_card
from suite.paths import find_paths
from tests.conftest import run_cli


def _refused(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    """The one error line of a refused command, which must name every needle."""
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() + proc.stdout.splitlines()
             if all(needle in line for needle in needles)]
    assert lines, f"no line names {needles}:\n{proc.stdout}{proc.stderr}"
    return lines[0]


LONG_SERVER = ["--scenario", "server", "--set", "loadgen.target_qps=1e-5",
               "--set", "loadgen.min_query_count=1000000"]  # 1e11 s


def test_lint_refuses_a_run_predicted_to_last_years() -> None:
    line = _refused(run_cli("lint", *LONG_SERVER), "LINT-DURATION", "loadgen.target_qps")
    assert "years" in line and "7 days" in line


@pytest.mark.parametrize("sets", [
    ["loadgen.min_duration_ms=100000000000000"],  # 3,000 years of "ms" (ns slipped in)
    ["loadgen.min_duration_ms=" + "9" * 400],  # beyond a float: once an OverflowError
    ["loadgen.min_query_count=100000000000000", "loadgen.expected_qps=1.0"],
])
def test_long_predictions_of_every_kind_are_refused_by_the_library(sets: list[str]) -> None:
    report = lint(ConfigRequest(sets=sets), find_paths())
    [finding] = [f for f in report.findings if f.rule == "LINT-DURATION"]
    assert finding.severity == "error" and finding.key.startswith("loadgen.")
    assert report.predicted_seconds is not None
    assert report.predicted_seconds > MAX_PREDICTED_S


def test_a_long_run_can_be_forced_or_capped() -> None:
    sets = LONG_SERVER[3::2]
    for report in (lint(ConfigRequest(scenario="server", sets=sets), find_paths(), force=True),
                   lint(ConfigRequest(scenario="server", sets=sets, force=True), find_paths())):
        assert not report.errors
        assert any(f.rule == "LINT-DURATION" and "forced" in f.message
                   for f in report.findings)
    capped = lint(ConfigRequest(scenario="server",
                                sets=[*sets, "loadgen.max_duration_ms=600000"]), find_paths())
    assert not capped.errors  # LoadGen stops the test at max_duration_ms


def test_a_week_is_the_bound() -> None:
    assert MAX_PREDICTED_S == 7 * 86_400
    # 1 query per 10 s, 60,000 queries: 6.9 days, accepted.
    ok = lint(ConfigRequest(scenario="server", sets=["loadgen.target_qps=0.1",
                                                     "loadgen.min_query_count=60000"]),
              find_paths())
    assert not ok.errors and ok.predicted_seconds == pytest.approx(600_000)


def test_max_batch_size_in_a_file_names_the_file(tmp_path: Path) -> None:
    user = tmp_path / "user.toml"
    user.write_text("[sut]\nmax_batch_size = 100000000\n")
    _refused(run_cli("lint", "--config", str(user)), str(user), "sut.max_batch_size")


def test_a_rate_beyond_one_per_nanosecond_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"loadgen\.target_qps = 1000000000000\.0: .*"
                       r"less than or equal to 1000000000"):
        load_config(ConfigRequest(scenario="server", sets=["loadgen.target_qps=1e12"]),
                    find_paths())


FLOAT_KEYS = [f"loadgen.{name}" for name, info in LoadGenConfig.model_fields.items()
              if info.annotation is float]


FLOAT_KEYS += [f"sut.{name}" for name, info in SutConfig.model_fields.items()
               if info.annotation is float]


@pytest.mark.parametrize("key", FLOAT_KEYS)
@pytest.mark.parametrize("value", ["inf", "-inf", "nan"])
def test_every_config_float_refuses_non_finite_values(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(ConfigRequest(sets=[f"{key}={value}"]), find_paths())
    assert info.value.message.startswith(f"--set {key}: {key} = ")
    assert "finite" in info.value.message


def test_non_finite_in_a_config_file_names_the_file(tmp_path: Path) -> None:
    user = tmp_path / "user.toml"
    user.write_text("[sut]\nwatchdog_timeout_s = inf\n")
    with pytest.raises(ConfigError, match=re.escape(f"{user}: sut.watchdog_timeout_s = inf")):
        load_config(ConfigRequest(config_file=user), find_paths())
    assert len(FLOAT_KEYS) >= 7  # the parametrisation found the float keys


def _val_map(tmp_path: Path, lines: list[str]) -> Path:
    tmp_path.mkdir(exist_ok=True)
    for line in lines:
        (tmp_path / line.split()[0]).write_bytes(b"")
    (tmp_path / "val_map.txt").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_label_range_comes_from_the_card() -> None:
    paths = find_paths()
    assert label_range(load_card(paths, "resnet50")) == range(0, 1000)  # 1001, offset -1
    assert label_range(load_card(paths, "digits")) == range(0, 10)  # argmax over 10
    assert range(1000) == IMAGENET_LABELS


@pytest.mark.parametrize("label", ["1000", "-1", "5000"])
def test_a_val_map_label_outside_the_cards_range(label: str, tmp_path: Path) -> None:
    directory = _val_map(tmp_path, ["a.JPEG 0", "b.JPEG 999", f"c.JPEG {label}"])
    labels = label_range(load_card(find_paths(), "resnet50"))
    with pytest.raises(DatasetError) as info:
        read_val_map(directory, labels)
    assert info.value.message.startswith(f"{directory / 'val_map.txt'}:3: label {label} ")
    assert "0-999" in info.value.message and "val_map.txt" in info.value.hint
    files, got = read_val_map(_val_map(tmp_path / "ok", ["a.JPEG 0", "b.JPEG 999"]), labels)
    assert list(got) == [0, 999] and len(files) == 2


def test_a_narrower_card_narrows_the_labels(tmp_path: Path) -> None:
    directory = _val_map(tmp_path, ["a.JPEG 9", "b.JPEG 10"])
    with pytest.raises(DatasetError, match=r"val_map.txt:2: label 10 is outside 0-9"):
        read_val_map(directory, label_range(load_card(find_paths(), "digits")))



def test_preprocess_workers_is_bounded() -> None:
    # 100,000 preprocessing processes for 50,000 images passed the linter
    _refused(run_cli("lint", "--set", "data.preprocess_workers=100000"),
             "data.preprocess_workers")
    import os

    from suite.config.preflight import WORKERS_PER_CORE

    many = run_cli("lint", "--set", "data.preprocess_workers=256", "--json")
    assert many.returncode == 0, many.stdout + many.stderr
    if WORKERS_PER_CORE * (os.cpu_count() or 1) < 256:  # more than the cores can use
        assert '"LINT-WORKERS"' in many.stdout and "data.preprocess_workers" in many.stdout


def test_a_config_that_is_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    # the linter and the loader each read --config; a FIFO blocked the second open
    import os

    fifo = tmp_path / "settings.toml"
    os.mkfifo(fifo)
    done = run_cli("lint", "--config", str(fifo), timeout=30)
    _refused(done, str(fifo), "not a regular file")
