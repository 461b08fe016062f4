"""Offline's query sizing (issue 29, item 2) without a run: which values are guesses, the
estimate, the ``user.conf`` rewrite, and the per-machine cache of LoadGen's ceiling (a fake
measurement and a fake clock)."""

from __future__ import annotations

from pathlib import Path

import pytest

from suite.config.loader import ConfigRequest, load_config
from suite.harness import loadgen_ceiling, offline_rate
from suite.harness.settings import expected_qps_is_a_guess, write_settings
from suite.paths import find_paths
from suite.scenarios import Mode


@pytest.mark.parametrize(("scenario", "sets", "mode", "guess"), [
    ("offline", [], Mode.PERFORMANCE, True),                       # the scenario file's
    ("offline", ["loadgen.expected_qps=5000"], Mode.PERFORMANCE, False),  # the user's
    ("offline", [], Mode.ACCURACY, False),                         # the whole dataset
    ("offline", ["loadgen.min_duration_ms=0"], Mode.PERFORMANCE, False),  # nothing to last
    ("server", [], Mode.PERFORMANCE, False),
])
def test_only_an_offline_guess_is_derived(scenario: str, sets: list[str], mode: Mode,
                                          guess: bool) -> None:
    config, _ = load_config(ConfigRequest(scenario=scenario, quick=True, sets=sets,
                                          use_tuned=False), find_paths())
    assert expected_qps_is_a_guess(config, mode) is guess


def test_the_estimate_is_headroom_times_the_smaller_rate() -> None:
    assert offline_rate.estimate(1e9, 3e6) == pytest.approx(1.5 * 3e6)  # a null backend
    assert offline_rate.estimate(1000.0, 3e6) == pytest.approx(1500.0)
    assert offline_rate.estimate(1000.0, 0.0) == pytest.approx(1500.0)  # not measured


def test_the_decision_is_written_where_loadgen_reads_it(tmp_path: Path) -> None:
    config, _ = load_config(ConfigRequest(scenario="offline", quick=True, use_tuned=False),
                            find_paths())
    settings = write_settings(config, Mode.PERFORMANCE, tmp_path)
    assert settings.expected_qps_guess
    rate = offline_rate.OfflineRate(
        expected_qps=1234.5, guess=config.loadgen.expected_qps, guess_source="x",
        warmup_samples_per_s=823.0, workers=2, batch=256, probe_s=0.3,
        loadgen_ceiling_samples_per_s=0.0, ceiling_source="not measured", headroom=1.5,
        expected_samples=1357, source="derived at warm-up: test")
    offline_rate.apply(rate, settings, tmp_path)
    conf = (tmp_path / "user.conf").read_text(encoding="utf-8").splitlines()
    at = conf.index("digits.Offline.target_qps = 1234.5")
    assert conf[at - 1] == "# loadgen.expected_qps derived at warm-up: test"
    assert sum("target_qps" in line for line in conf) == 1  # the guess's line is gone
    assert '"expected_samples": 1357' in (tmp_path / "settings.json").read_text()
    assert (tmp_path / offline_rate.RECORD_FILE).is_file()


def test_the_ceiling_cache_keeps_the_highest_and_remeasures_a_busy_figure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    figures = iter([(2e6, False), (1e6, True), (9e6, True)])

    def fake_measure(threads: int = 1, timeout_s: float = 0.0) -> loadgen_ceiling.Ceiling:
        rate, quiet = next(figures)
        return loadgen_ceiling.Ceiling(rate, threads, 0.5, 2, "t", clock[0], quiet)

    monkeypatch.setattr(loadgen_ceiling, "measure", fake_measure)
    monkeypatch.setattr(loadgen_ceiling.time, "time", lambda: clock[0])
    first = loadgen_ceiling.ceiling(tmp_path, 2)
    assert (first.samples_per_s, first.source) == (2e6, "measured")
    clock[0] += 60  # a busy figure serves a while ...
    assert loadgen_ceiling.ceiling(tmp_path, 2).source == "cached"
    clock[0] += loadgen_ceiling.PROVISIONAL_S  # ... then is measured again: lower, kept high
    second = loadgen_ceiling.ceiling(tmp_path, 2)
    assert (second.samples_per_s, second.quiet) == (2e6, True)
    clock[0] += 10 * loadgen_ceiling.PROVISIONAL_S  # quiet: final for this machine
    assert loadgen_ceiling.ceiling(tmp_path, 2).samples_per_s == 2e6


class _Dataset:
    sample_shape = (4,)
    dtype = "float32"

    def new_buffer(self, batch: int) -> object:
        import numpy as np

        return np.zeros((batch, 4), dtype=np.float32)


class _Backend:
    def __init__(self, fault: str) -> None:
        self.fault, self.calls = fault, 0

    def input_buffer(self, batch: int, shape: object, dtype: str) -> None:
        return None

    def predict(self, batch: object) -> None:
        import threading

        self.calls += 1
        if self.calls > 3 and self.fault == "raise":
            raise RuntimeError("injected: the device fell off the bus")
        if self.calls > 3 and self.fault == "hang":
            threading.Event().wait()


class _Sut:
    def __init__(self, fault: str) -> None:
        self.backend, self.dataset = _Backend(fault), _Dataset()


@pytest.mark.parametrize(("fault", "message"), [
    ("raise", "backend call failed: RuntimeError: injected"),
    ("hang", "took over 0.5 s")])
def test_a_probe_whose_backend_raises_or_hangs_fails_fast_naming_why(fault: str,
                                                                      message: str) -> None:
    """A backend that fails in the probe must not hang the run (before: join() forever);
    ``warm_up`` then keeps the guess and the test's SUT meets the fault."""
    import time

    started = time.monotonic()
    with pytest.raises(offline_rate.ProbeFailed, match=message):
        offline_rate.probe(_Sut(fault), workers=2, batch=2, seconds=0.2,  # type: ignore[arg-type]
                           limit_s=0.5)
    assert time.monotonic() - started < 5
    assert offline_rate.probe(_Sut("none"), workers=2, batch=2, seconds=0.05,  # type: ignore[arg-type]
                              limit_s=5) > 0


def test_a_quick_run_is_sized_with_the_wider_headroom() -> None:
    """Issue 40, item 2: a probe on a busy machine read 2.7x low and sized a quick Offline
    run that ended before its minimum duration; a quick run (about a second) takes the
    wider margin, a full run (ten minutes) keeps 1.5x."""
    # LoadGen issues 1.1 x min_duration x expected_qps samples: 2.7x low must still last
    assert 1.1 * offline_rate.QUICK_HEADROOM >= 2.7
    assert offline_rate.QUICK_HEADROOM > offline_rate.HEADROOM
    assert offline_rate.estimate(68_114.0, 0.0, offline_rate.QUICK_HEADROOM) > 184_701.0


def test_a_failed_ceiling_measurement_keeps_the_warm_up_rate(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ceiling's null LoadGen test runs in a process of its own; once in a full
    ``make test`` it died with nothing on stderr, and the measured warm-up rate was thrown
    away with it (the scenario file's guess sized the query). The warm-up rate now stands
    alone, and the record says why the ceiling is missing."""
    def failed(cache_dir: Path, threads: int, timeout_s: float = 0.0) -> None:
        raise loadgen_ceiling._CeilingFailed(
            "the LoadGen ceiling test failed (killed by signal 11): nothing on stderr")

    monkeypatch.setattr(loadgen_ceiling, "ceiling", failed)
    monkeypatch.setattr(offline_rate, "CEILING_FROM", 0.0)  # any rate asks for the ceiling
    config, _ = load_config(ConfigRequest(scenario="offline", quick=True, use_tuned=False,
                                          sets=[f"data.cache_dir='{tmp_path}'"]), find_paths())
    settings = write_settings(config, Mode.PERFORMANCE, tmp_path)
    rate = offline_rate.size_query(_Sut("none"), settings, config)  # type: ignore[arg-type]
    assert rate.warmup_samples_per_s > 0 and rate.loadgen_ceiling_samples_per_s == 0
    assert rate.expected_qps == pytest.approx(min(
        offline_rate.QUICK_HEADROOM * rate.warmup_samples_per_s, offline_rate.MAX_QPS), rel=1e-3)
    assert rate.ceiling_source == ("not measured: the LoadGen ceiling test failed (killed by "
                                   "signal 11): nothing on stderr")
    assert "and LoadGen's ceiling" not in rate.source  # no ceiling figure went into it


@pytest.mark.parametrize(("codes", "calls", "measured"), [
    ((-11, 0), 2, True),    # one crash inside LoadGen: tried again, measured
    ((-11, -11), 2, False),  # two: the ceiling is not measured
    ((1, 0), 1, False),     # an exit code is the child's own verdict: not retried
])
def test_a_crashed_ceiling_test_is_tried_once_more(
        monkeypatch: pytest.MonkeyPatch, codes: tuple[int, int], calls: int,
        measured: bool) -> None:
    import subprocess

    made: list[list[str]] = []

    def run(command: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        made.append(command)
        return subprocess.CompletedProcess(command, codes[len(made) - 1], "12345.5\n", "")

    monkeypatch.setattr(loadgen_ceiling.subprocess, "run", run)
    if measured:
        assert loadgen_ceiling.measure(2).samples_per_s == 12345.5
    else:
        with pytest.raises(loadgen_ceiling._CeilingFailed, match="the LoadGen ceiling test "
                                                                 "failed"):
            loadgen_ceiling.measure(2)
    assert len(made) == calls
