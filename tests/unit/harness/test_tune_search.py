"""The Server search of ``suite tune`` (``suite.harness.tune_search``) above a fake probe
runner that is VALID up to a known rate per setup: which rates it asks for, which VALID
probe it keeps, how confirming backs off, and the verdict when nothing is confirmed.
The real-LoadGen flow is in tests/integration/test_tune.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from suite.harness.tune import worker_counts
from suite.harness.tune_report import probe_line, proposal_lines, unconfirmed_verdict
from suite.harness.tune_search import (
    CONFIRM_TRIES,
    EARLY_STOPPING_QUERIES,
    ProbeResult,
    Search,
    Setup,
    confirm,
    highest_valid,
    probe_ms_for,
    search,
)

ONE = Setup(batch=16, workers=1)
TWO = Setup(batch=16, workers=2)


class FakeProbes:
    """Probes VALID at or below ``sustains[setup]`` QPS; confirming runs VALID at or below
    ``confirms`` (a longer run meets more of a busy machine's hiccups)."""

    def __init__(self, sustains: dict[Setup, float], confirms: float = float("inf")) -> None:
        self.sustains, self.confirms = sustains, confirms
        self.asked: list[tuple[float, Setup]] = []
        self.confirmed: list[float] = []

    def _result(self, valid: bool, rate: float, kind: str) -> ProbeResult:
        return ProbeResult(valid=valid, metric=rate * 0.99, mean_latency_ms=1.0,
                           run_dir=f"/runs/tune-probes/{kind}-{rate:g}", p99_ms=2.5,
                           why="" if valid else "latency bound")

    def probe(self, rate: float, setup: Setup) -> ProbeResult:
        self.asked.append((rate, setup))
        return self._result(rate <= self.sustains[setup], rate, "probe")

    def confirm(self, rate: float, setup: Setup) -> ProbeResult:
        self.confirmed.append(rate)
        return self._result(rate <= min(self.confirms, self.sustains[setup]), rate, "confirm")


def test_halves_then_bisects_to_within_one_step() -> None:
    asked: list[float] = []

    def probe(rate: float) -> bool:
        asked.append(rate)
        return rate <= 70_000

    found = highest_valid(probe, 600_000, 1_200_000, steps=6)
    assert asked[:5] == [600_000, 300_000, 150_000, 75_000, 37_500]
    assert len(asked) == 5 + 6
    # The bracket [37.5k, 75k] halves six times: the answer is VALID and within 1/64 of it.
    assert found <= 70_000
    assert 70_000 - found < (75_000 - 37_500) / 64


def test_cap_that_is_valid_is_the_answer_and_nothing_above_is_probed() -> None:
    asked: list[float] = []
    found = highest_valid(lambda r: asked.append(r) or r <= 70_000, 600_000, 20_000, 6)
    assert found == 20_000
    assert asked == [20_000]


@pytest.mark.parametrize("hi", [1_200_000.0, 5_000.0])
def test_nothing_valid_gives_zero_after_ten_halvings(hi: float) -> None:
    asked: list[float] = []
    assert highest_valid(lambda r: asked.append(r) or False, 600_000, hi, 6) == 0
    assert len(asked) == 10  # no bisection without a VALID lower end


def test_search_keeps_every_valid_probe_best_first_and_starts_later_setups_near_it() -> None:
    fake = FakeProbes({ONE: 1_000, TWO: 600})
    seen = search(fake, [ONE, TWO], offline_rate=64_000, steps=3)
    assert fake.asked[0] == (32_000, ONE)
    assert [p.setup for p in seen.valid][:1] == [ONE]
    assert all(p.result.valid for p in seen.valid)
    assert [p.rate for p in seen.valid] == sorted((p.rate for p in seen.valid), reverse=True)
    best_one = seen.best_per_setup()[ONE]
    # The second setup starts at twice the best rate seen, not at half the Offline rate.
    first_two = next(rate for rate, setup in fake.asked if setup == TWO)
    assert first_two == round(2 * best_one, 1)
    assert 500 < best_one <= 1_000
    assert seen.best_per_setup()[TWO] <= 600


def test_confirms_the_best_valid_probe_when_its_confirming_run_is_valid() -> None:
    fake = FakeProbes({ONE: 1_000, TWO: 600})
    seen = confirm(fake, search(fake, [ONE, TWO], 64_000, steps=3))
    assert seen.confirmed is not None
    assert seen.confirmed.rate == seen.valid[0].rate
    assert seen.confirmed.setup == ONE
    assert fake.confirmed == [seen.valid[0].rate]


def test_an_invalid_confirming_run_backs_off_to_a_lower_rate_that_is_confirmed() -> None:
    fake = FakeProbes({ONE: 1_000, TWO: 600}, confirms=850)
    seen = search(fake, [ONE, TWO], 64_000, steps=3)
    best = seen.valid[0].rate
    said: list[str] = []
    confirm(fake, seen, said.append)
    assert seen.confirmed is not None
    assert fake.confirmed[0] == best
    assert fake.confirmed[1] == pytest.approx(best * 0.9, abs=0.1)
    assert seen.confirmed.rate <= 850
    assert seen.confirmed.result.valid
    assert "backing off" in said[0]


def test_the_back_off_never_goes_below_a_rate_that_held_and_stops_after_the_tries() -> None:
    fake = FakeProbes({ONE: 1_300}, confirms=0)  # no confirming run is ever VALID
    seen = search(fake, [ONE], 64_000, steps=3)
    assert [p.rate for p in seen.valid] == [1_250, 1_000]
    confirm(fake, seen)
    assert seen.confirmed is None
    # 1,250 backs off 10 % a run, down to 1,000, the next lower VALID probe, and stops.
    assert fake.confirmed == [1_250, 1_125, 1_012.5, 1_000]
    assert len(fake.confirmed) <= CONFIRM_TRIES


def test_the_verdict_names_the_valid_probes_and_their_real_logs(tmp_path: Path) -> None:
    fake = FakeProbes({ONE: 1_000}, confirms=0)
    seen = confirm(fake, search(fake, [ONE], 64_000, steps=3))
    lines = unconfirmed_verdict(seen, tmp_path / "tune-probes")
    text = "\n".join(lines)
    assert str(tmp_path / "tune-probes") in text
    assert "<runs>" not in text
    best = seen.valid[0]
    assert f"{best.rate:,.0f} QPS, batch 16, 1 thread" in text
    assert Path(best.result.run_dir).name in text
    assert all(Path(p.result.run_dir).name in text for p in seen.confirming)


def test_no_valid_probe_confirms_nothing() -> None:
    fake = FakeProbes({ONE: 0})
    seen = confirm(fake, search(fake, [ONE], 64_000, steps=3))
    assert seen.valid == [] and seen.confirmed is None and fake.confirmed == []


def test_probes_are_long_enough_for_early_stopping() -> None:
    assert probe_ms_for(638, 1000) * 638 / 1000 >= EARLY_STOPPING_QUERIES
    assert probe_ms_for(100_000, 1000) == 1000


def test_default_worker_counts_are_one_two_the_cores_and_the_configured() -> None:
    cores = os.cpu_count() or 1
    assert worker_counts(3) == sorted({1, 2, 3, cores})


def test_proposal_is_scenario_file_lines() -> None:
    lines = proposal_lines("digits", "server", TWO.sets())
    assert lines[:2] == ["# scenarios/server.toml", "[benchmarks.digits.sut]"]
    assert "workers = 2" in lines and 'worker_model = "threads"' in lines
    assert proposal_lines("llama3.1-8b", "server", ONE.sets())[1] == \
        '[benchmarks."llama3.1-8b".sut]'


def test_probe_lines_are_words_not_dicts() -> None:
    result = ProbeResult(valid=False, metric=637.9, mean_latency_ms=1.0, p99_ms=12.25,
                         run_dir="/r/tune-probes/20261207T024619Z_digits_server_performance",
                         why="latency bound")
    line = probe_line("server", "638 QPS, batch 16, 2 threads, 1.1 s", result)
    assert line == ("  server 638 QPS, batch 16, 2 threads, 1.1 s: INVALID (latency bound), "
                    "638/s, p99 12.2 ms [20261207T024619Z_digits_server_performance]")
    assert Search().valid == []


@pytest.mark.parametrize("columns", [100, 60])
def test_tune_output_fits_the_width(columns: int) -> None:
    """What the CLI prints of a probe line and of the verdict fits COLUMNS, words whole."""
    from suite.cli.render import fit

    result = ProbeResult(valid=True, metric=63_912.4, mean_latency_ms=1.0, p99_ms=0.41,
                         run_dir="/r/tune-probes/20261207T024619Z_digits_server_performance-2")
    fake = FakeProbes({ONE: 1_300, TWO: 700}, confirms=0)
    seen = confirm(fake, search(fake, [ONE, TWO], 64_000, steps=3))
    messages = [probe_line("server", "63,912 QPS, batch 256, 16 processes, 1.5 s", result),
                *unconfirmed_verdict(seen, Path("/tmp/runs/tune-probes"))]
    for message in messages:
        lines = fit(message, columns)
        assert all(len(line) <= columns for line in lines), lines
        assert " ".join(line.strip() for line in lines) == " ".join(message.split())


def test_a_later_setup_stops_halving_below_half_the_best_rate() -> None:
    fake = FakeProbes({ONE: 1_000, TWO: 100})
    seen = search(fake, [ONE, TWO], 64_000, steps=3)
    best = seen.best_per_setup()[ONE]
    asked_two = [rate for rate, setup in fake.asked if setup == TWO]
    assert min(asked_two) >= best / 2
    assert TWO not in seen.best_per_setup()


def test_with_no_valid_probe_the_verdict_names_the_lowest_rate_probed(tmp_path: Path) -> None:
    fake = FakeProbes({ONE: 0})
    seen = confirm(fake, search(fake, [ONE], 64_000, steps=3))
    text = "\n".join(unconfirmed_verdict(seen, tmp_path))
    lowest = min(seen.probes, key=lambda p: p.rate)
    assert "Server: no probe was VALID" in text and str(tmp_path) in text
    assert f"{lowest.rate:,.0f} QPS" in text and Path(lowest.result.run_dir).name in text
