"""The Server search of ``suite tune``, apart from how a probe is run: which rates and
worker setups it probes, which VALID probe it keeps, how it confirms, and how it backs
off when a confirming run is INVALID.

``ServerProbes`` runs the probes (``suite.harness.tune.Tuner`` with real LoadGen runs;
a fake one in the unit tests of this module). Every figure this module reports is a
``ProbeResult``, which the runner takes from the LoadGen log of the probe's run.

The search, for each worker setup (batch size x workers x worker model):

* halve the rate from its start until a probe is VALID, then bisect upwards. The first
  setup starts at half the Offline rate (or ``max_qps``); a later one at twice the best
  VALID rate seen so far and stops halving below half of it, so a search over several
  setups probes neither far above anything that held nor where it cannot win;
* every VALID probe is kept (``Search.valid``), best rate first.

Confirming: a run at the best VALID probe's rate and setup; if it is INVALID, the rate
backs off by ``BACKOFF`` per run, never below the next lower VALID probe's rate (a rate
that has held once), for at most ``CONFIRM_TRIES`` runs. With none VALID the outcome
names the VALID probes and the confirming runs, with their logs, and nothing is claimed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["BACKOFF", "CONFIRM_TRIES", "EARLY_STOPPING_QUERIES", "Probe", "ProbeResult",
           "Search", "ServerProbes", "Setup", "confirm", "highest_valid", "probe_ms_for",
           "search"]

#: Each confirming run after an INVALID one asks for this fraction of its rate.
BACKOFF = 0.9
#: Confirming runs at most (then the verdict names the VALID probes instead).
CONFIRM_TRIES = 4
#: Queries a Server run should issue: LoadGen's early stopping needs >= 459 with none
#: over the bound and 662 with one (reference/loadgen.md §2.3, from
#: loadgen/early_stopping.cc); 700 leaves room for one over the bound.
EARLY_STOPPING_QUERIES = 700


@dataclass(frozen=True)
class ProbeResult:
    """One probe run's outcome, every figure from its LoadGen log."""

    valid: bool
    #: The scenario's metric (Server: completed samples/s).
    metric: float | None
    mean_latency_ms: float | None
    run_dir: str
    cached: bool = False
    #: LoadGen's 99th percentile latency.
    p99_ms: float | None = None
    #: Why LoadGen called it INVALID (its detail log), shortened; "" when VALID.
    why: str = ""


@dataclass(frozen=True)
class Setup:
    """A Server worker setup: batch size, workers, worker model and the batch wait."""

    batch: int
    workers: int
    model: str = "threads"
    wait_us: int = -1

    def sets(self) -> dict[str, Any]:
        """The ``--set`` keys of this setup."""
        return {"sut.max_batch_size": self.batch, "sut.max_wait_us": self.wait_us,
                "sut.workers": self.workers, "sut.worker_model": self.model}

    def label(self) -> str:
        noun = self.model
        if self.workers == 1:
            noun = {"threads": "thread", "processes": "process"}.get(noun, noun)
        return f"batch {self.batch}, {self.workers} {noun}"


@dataclass(frozen=True)
class Probe:
    """A probe (or confirming run) at ``rate`` with ``setup``, and what LoadGen logged."""

    rate: float
    setup: Setup
    result: ProbeResult


class ServerProbes(Protocol):
    """Runs Server probes; ``confirm`` is the longer confirming run."""

    def probe(self, rate: float, setup: Setup) -> ProbeResult: ...

    def confirm(self, rate: float, setup: Setup) -> ProbeResult: ...


@dataclass
class Search:
    """What the search saw: every probe, and the confirming runs."""

    probes: list[Probe] = field(default_factory=list)
    confirming: list[Probe] = field(default_factory=list)
    #: The first VALID confirming run, if any.
    confirmed: Probe | None = None

    @property
    def valid(self) -> list[Probe]:
        """Every VALID probe, the highest rate first."""
        return sorted((p for p in self.probes if p.result.valid), key=lambda p: -p.rate)

    def best_per_setup(self) -> dict[Setup, float]:
        best: dict[Setup, float] = {}
        for p in self.valid:
            best.setdefault(p.setup, p.rate)
        return best


def probe_ms_for(rate: float, floor_ms: int) -> int:
    """A Server run's minimum duration at ``rate``: ``floor_ms``, or long enough for
    early stopping's queries."""
    return max(floor_ms, math.ceil(EARLY_STOPPING_QUERIES * 1000 / rate))


def highest_valid(probe: Callable[[float], bool], start: float, hi: float,
                  steps: int, floor: float = 0.0) -> float:
    """Halve from ``start`` (at most ``hi``) until ``probe`` is VALID, at most 10 times and
    never below ``floor``, then bisect ``steps`` times between that rate and the lowest
    INVALID one, never above ``hi``; 0 when nothing was VALID."""
    lo, rate = 0.0, min(start, hi)
    for _ in range(10):
        if rate < floor:
            break
        if probe(rate):
            lo = rate
            break
        hi, rate = rate, rate / 2
    if lo >= hi:  # VALID at the cap: nothing above it may be probed
        return lo
    for _ in range(steps if lo else 0):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if probe(mid) else (lo, mid)
    return lo


def search(runner: ServerProbes, setups: list[Setup], offline_rate: float, steps: int,
           max_qps: float | None = None,
           say: Callable[[str], None] = lambda message: None) -> Search:
    """Probe every setup (see the module docstring); nothing is confirmed yet."""
    seen = Search()
    cap = min(offline_rate, max_qps) if max_qps else offline_rate

    for setup in setups:
        def probe(rate: float, setup: Setup = setup) -> bool:
            result = runner.probe(round(rate, 1), setup)
            seen.probes.append(Probe(round(rate, 1), setup, result))
            return result.valid

        best = max((p.rate for p in seen.valid), default=0.0)
        start = 2 * best if best else offline_rate / 2
        # Below half the best rate a setup cannot win: its slow probes would only cost.
        found = highest_valid(probe, start, cap, steps, floor=best / 2)
        say(f"{setup.label()}: highest VALID probe "
            + (f"{found:,.0f} QPS" if found else "none"))
    return seen


def confirm(runner: ServerProbes, seen: Search,
            say: Callable[[str], None] = lambda message: None,
            tries: int = CONFIRM_TRIES) -> Search:
    """Confirm the best VALID probe, backing off (see the module docstring)."""
    valid = seen.valid
    if not valid:
        return seen
    best = valid[0]
    # A rate that held once is the floor of the back-off: the next lower VALID probe
    # with the same setup, else half the best rate.
    lower = [p.rate for p in valid if p.setup == best.setup and p.rate < best.rate]
    floor = lower[0] if lower else best.rate / 2
    rate = best.rate
    for _ in range(tries):
        result = runner.confirm(rate, best.setup)
        run = Probe(rate, best.setup, result)
        seen.confirming.append(run)
        if result.valid:
            seen.confirmed = run
            return seen
        if rate <= floor:
            break
        lower_rate = max(floor, round(rate * BACKOFF, 1))
        say(f"confirming run at {rate:,.0f} QPS was INVALID"
            + (f" ({result.why})" if result.why else "")
            + f": backing off to {lower_rate:,.0f} QPS")
        rate = lower_rate
    return seen
