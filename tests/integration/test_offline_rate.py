"""A quick Offline run is VALID whether the machine beats the scenario file's guess of its
rate or falls short of it (issue 29, item 2): the child sizes the query from its warm-up
(``suite.harness.offline_rate``) and records how.

Both sides are the simulated backend at set speeds, in a project home whose scenario file
makes the guess: ``digits-h100`` beats a guess of 1,000 samples/s on any machine (a
launch-bound device doing 2 x 256 samples per 0.19 ms; the host adds at most its LoadGen
work), and ``slow-cpu`` (one call at a time, 1 ms a sample: at most 1,000 samples/s)
falls short of a guess of 20,000 on any machine.

What gates is how the query was sized (the record, LoadGen's settings, the formula). The
VALID verdict itself still depends on the machine: a probe taken while the other test
worker hogs the cores can read more than ``QUICK_HEADROOM`` x 1.1 low (CI once measured
346,228 samples/s against such a probe), so a run INVALID for speed alone is a reported
``timing`` miss, and any other reason fails.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from suite.harness import offline_rate
from suite.results import RunResult
from tests.conftest import REPO, only_run_dir, run_cli
from tests.support.timing import invalid_only_by_timing, timing_assert

pytestmark = pytest.mark.timing

#: The scenario file of the test's project home: the repository's layout, with the
#: guess under test for a quick digits Offline run.
SCENARIO = """
[loadgen]
expected_qps = 1000.0

[sut]
max_batch_size = 64
workers = 2

[quick.loadgen]
min_duration_ms = 1000

[benchmarks.digits.quick.loadgen]
expected_qps = {guess}

[benchmarks.digits.sut]
max_batch_size = 256
"""


def _home(tmp_path: Path, guess: float) -> Path:
    home = tmp_path / "home"
    (home / "scenarios").mkdir(parents=True)
    for shared in ("run_rules", "reference_models"):
        (home / shared).symlink_to(REPO / shared)
    (home / "scenarios" / "offline.toml").write_text(SCENARIO.format(guess=guess),
                                                      encoding="utf-8")
    return home


def _run(tmp_path: Path, guess: float, profile: str) -> tuple[dict[str, Any], dict[str, Any],
                                                              dict[str, Any]]:
    """(result.json, status.json, offline_rate.json) of a quick simulated Offline run."""
    home, runs = _home(tmp_path, guess), tmp_path / "runs"
    proc = run_cli("run", "--scenario", "offline", "--backend", "simulated", "--quick",
                   "--set", f'backend.simulated.profile="{profile}"',
                   "--runs-dir", str(runs), SUITE_HOME=str(home))
    run_dir = only_run_dir(runs)
    result = json.loads((run_dir / "result.json").read_text(encoding="utf-8"))
    test = run_dir / "performance"
    # Any reason but speed fails here; speed is judged last, in _common.
    speed = invalid_only_by_timing([RunResult.model_validate(result)])
    assert proc.returncode == (2 if speed else 0), proc.stdout[-2000:]
    status = json.loads((test / "status.json").read_text(encoding="utf-8"))
    assert (test / offline_rate.RECORD_FILE).is_file(), "no record of the derived rate"
    record = json.loads((test / offline_rate.RECORD_FILE).read_text(encoding="utf-8"))
    conf = (test / "user.conf").read_text(encoding="utf-8")
    # LoadGen read the derived rate, and the file says where it came from.
    assert f"digits.Offline.target_qps = {record['expected_qps']!r}" in conf
    assert "# loadgen.expected_qps derived at warm-up" in conf
    return result, status, record


def _common(result: dict[str, Any], status: dict[str, Any], record: dict[str, Any],
            guess: float) -> None:
    [test] = result["tests"]
    # LoadGen's own record of the rate it sized the query with is the derived one.
    assert test["performance"]["effective"]["target_qps"] == pytest.approx(
        record["expected_qps"], rel=1e-5)  # LoadGen logs 6 significant digits
    assert record["guess"] == guess
    assert record["guess_source"] == "scenarios/offline.toml [benchmarks.digits] [quick]"
    assert record["headroom"] == offline_rate.QUICK_HEADROOM
    assert (record["workers"], record["batch"]) == (2, 256)
    assert status["derived"]["offline_expected_qps"] == record["expected_qps"]
    assert status["derived"]["offline_warmup_samples_per_s"] == record["warmup_samples_per_s"]


def _valid(result: dict[str, Any], record: dict[str, Any]) -> None:
    """The verdict, judged after every functional assertion: VALID, or a timing miss."""
    [test] = result["tests"]
    speed = invalid_only_by_timing([RunResult.model_validate(result)])
    timing_assert(not speed, f"quick Offline INVALID for speed: {'; '.join(speed)} (warm-up "
                             f"{record['warmup_samples_per_s']:,.0f}/s, ceiling "
                             f"{record['loadgen_ceiling_samples_per_s']:,.0f}/s)")
    assert result["status"] == test["status"] == "VALID"
    assert test["performance"]["min_duration_met"] is True


def test_a_machine_faster_than_the_guess_runs_a_valid_quick_offline(tmp_path: Path) -> None:
    guess = 1000.0
    result, status, record = _run(tmp_path, guess, "digits-h100")
    _common(result, status, record, guess)
    warm, ceiling = record["warmup_samples_per_s"], record["loadgen_ceiling_samples_per_s"]
    # Fast enough for LoadGen's own ceiling to matter: measured (or cached) here.
    assert warm > offline_rate.CEILING_FROM and ceiling > 0
    assert record["ceiling_source"].startswith(("measured", "cached"))
    assert record["expected_qps"] == pytest.approx(
        offline_rate.QUICK_HEADROOM * min(warm, ceiling), rel=1e-3)
    assert record["expected_qps"] > guess
    _valid(result, record)


def test_a_machine_slower_than_the_guess_runs_a_short_valid_quick_offline(
        tmp_path: Path) -> None:
    guess = 20_000.0
    result, status, record = _run(tmp_path, guess, "slow-cpu")
    _common(result, status, record, guess)
    warm = record["warmup_samples_per_s"]
    # One call at a time at 1 ms a sample: the device never does more than 1,000/s.
    assert 0 < warm <= 1000 * 1.1
    assert record["loadgen_ceiling_samples_per_s"] == 0  # too slow for LoadGen's to matter
    assert record["expected_qps"] == pytest.approx(offline_rate.QUICK_HEADROOM * warm, rel=1e-3)
    # Sized from the machine, not the guess: 1.1 x 1 s x 3 x at most 1,100 samples/s.
    most = 1.1 * 1.0 * offline_rate.QUICK_HEADROOM * 1100
    assert record["expected_samples"] <= most < 1.1 * guess
    _valid(result, record)
