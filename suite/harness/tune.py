"""``suite tune``: find the settings a system can sustain, with short probe runs first and
a confirming run last, and write them where ``suite run`` picks them up.

* Offline: ``expected_qps`` = the rate LoadGen measured in a VALID probe (LoadGen issues
  1.1 x duration x expected_qps samples, so the run lasts long enough).
* SingleStream/MultiStream: ``expected_latency_ms`` = the mean latency of a VALID probe
  (too high a hint makes LoadGen run out of generated queries).
* Server: for each candidate ``max_batch_size``, ``max_wait_us`` is derived from the
  latency bound and the batch latency measured on the backend
  (``sut.server_policy.tuned_max_wait_us``: -1, derived at each run's warm-up, wherever the
  run's policy would cap or pace the batches); then, for each worker setup (by default 1,
  2 and the cores' count of the configured worker model), ``tune_search`` finds the
  highest ``target_qps`` that stays VALID (latency percentile and early stopping both
  count; a probe is long enough for early stopping's queries). ``max_qps`` caps the
  search: a probe issues ``target_qps`` x its duration queries, and a backend served
  elsewhere may not be ours to flood.

Every probe is a real LoadGen run through ``api.run``; its outcome is cached under the
probe's full settings, so an interrupted search resumes and a second invocation
reuses the probes. The confirming run uses the official duration unless told
otherwise (never shorter than early stopping needs at its rate); if it stays INVALID
``tune_search.confirm`` backs off, and with no VALID confirming run the report's verdict
names the VALID probes and their logs instead of a claim (``TuneReport.unconfirmed``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from suite import backends
from suite.config.loader import ConfigRequest, default_system_name
from suite.config.model import MAX_WORKERS, RunConfig
from suite.errors import TuneFailed
from suite.harness.run import prepare, run
from suite.harness.sut.server_policy import BatchCost, tuned_max_wait_us
from suite.harness.tune_options import TuneOptions
from suite.harness.tune_report import (
    Choice,
    TuneReport,
    probe_line,
    proposal_lines,
    unconfirmed_verdict,
    write_settings,
)
from suite.harness.tune_search import ProbeResult, Setup, confirm, probe_ms_for, search
from suite.models import ModelCard, check_model, load_card
from suite.paths import Paths
from suite.results import PerformanceSummary, Status, TestResult
from suite.scenarios import Scenario
from suite.version import __version__

# Re-exported: the LLM sweep and older callers import them from here.
__all__ = ["Choice", "ProbeCache", "ProbeResult", "TuneReport", "Tuner", "tune",
           "write_settings"]


class ProbeCache:
    """Probe outcomes keyed by everything that decides them; written after each probe."""

    def __init__(self, path: Path, fresh: bool) -> None:
        self.path = path
        self.entries: dict[str, dict[str, Any]] = {}
        if path.is_file() and not fresh:
            try:
                self.entries = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                self.entries = {}  # a damaged cache only costs re-probing

    def get(self, key: str) -> ProbeResult | None:
        entry = self.entries.get(key)
        return ProbeResult(**entry, cached=True) if entry else None

    def put(self, key: str, result: ProbeResult) -> None:
        self.entries[key] = {k: v for k, v in result.__dict__.items() if k != "cached"}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.entries, indent=2, sort_keys=True), encoding="utf-8")
        tmp.replace(self.path)


class Tuner:
    """See the module docstring."""

    def __init__(self, paths: Paths, benchmark: str, backend: str, system: str | None,
                 runs_dir: Path, probe_ms: int, confirm_ms: int | None, fresh: bool,
                 say: Callable[[str], None]) -> None:
        self.paths, self.benchmark, self.backend = paths, benchmark, backend
        self.system = system or default_system_name()
        self.runs_dir = runs_dir
        self.probe_ms, self.confirm_ms = probe_ms, confirm_ms
        self.say = say
        self.cache = ProbeCache(runs_dir / "tune-cache" / f"{self.system}.json", fresh)
        self.report = TuneReport(self.system, backend, benchmark)
        config = prepare(self._request("offline", {}), paths).config
        self.model_sha = check_model(self._card(config), paths.cache).sha256

    def _card(self, config: RunConfig) -> ModelCard:
        return load_card(self.paths, config.benchmark).with_model_path(config.data.model_path)

    def _request(self, scenario: str, sets: dict[str, Any], quick: bool = True) -> ConfigRequest:
        return ConfigRequest(
            benchmark=self.benchmark, scenario=scenario, backend=self.backend, quick=quick,
            sets=[f"{k}={v}" for k, v in sets.items()], runs_dir=self.runs_dir / "tune-probes",
            system=self.system, use_tuned=False,  # probes must not depend on a previous tune
        )

    @property
    def probes_dir(self) -> Path:
        return self.runs_dir / "tune-probes"

    def look(self) -> str:
        """The hint of a failed search: where the probes' logs are."""
        return f"look at the probe runs under {self.probes_dir} (their STATUS and logs)"

    def probe(self, scenario: str, sets: dict[str, Any], quick: bool = True,
              asked: str = "") -> ProbeResult:
        """One LoadGen run with ``sets``, or its cached outcome; ``asked`` describes it
        in the progress line (default: the settings)."""
        signature = json.dumps([__version__, self.system, self.benchmark, self.backend,
                                self.model_sha, scenario, quick, sorted(sets.items())])
        key = hashlib.sha256(signature.encode()).hexdigest()[:24]
        asked = asked or ", ".join(f"{k.split('.')[-1]} {v}" for k, v in sets.items())
        cached = self.cache.get(key)
        if cached is not None:
            self.report.probes_cached += 1
            self.say(probe_line(scenario, asked, cached))
            return cached
        result = run(self._request(scenario, sets, quick))
        test = result.tests[0]
        outcome = _outcome(test, result.run_dir)
        stalled = bool(test.failures) and test.failures[0].get("kind") == "watchdog_timeout"
        if test.status is Status.INTERRUPTED or (test.status is Status.FAILED and not stalled):
            raise TuneFailed(f"probe failed: {test.message} ({result.run_dir})",
                             hint=self.look())
        if stalled:  # a stalled batch is a latency failure at this rate, not a dead end
            self.say(f"  probe stalled ({test.message}): counted as INVALID")
        self.cache.put(key, outcome)
        self.report.probes_run += 1
        self.say(probe_line(scenario, asked, outcome))
        return outcome

    # -- scenarios --------------------------------------------------------------------

    def offline(self) -> float:
        config = prepare(self._request("offline", {}), self.paths).config
        expected = config.loadgen.expected_qps
        # LoadGen issues 1.1 x duration x expected_qps samples, so a guess far above the
        # backend's rate makes the first probe last minutes (the digits guess, 1.2M/s,
        # on a 12k/s accelerator: 165 s for a 1.5 s probe). Aim at most at 1.5 x what
        # the workers complete with full batches, timed on the backend itself, raised to
        # a power of two: probes are cached by their settings, and a timing that moves
        # by a few % between invocations must not miss the cache.
        batch = config.sut.max_batch_size
        latency = self._batch_cost(batch, calls=4).latency_s(batch)
        full = config.sut.workers * batch / max(latency, 1e-9)
        aim = float(2 ** math.ceil(math.log2(1.5 * full)))
        if aim < expected:
            self.say(f"  the backend completes about {full:,.0f} samples/s with "
                     f"{config.sut.workers} workers at batch {batch}: the first probe aims at "
                     f"{aim:,.0f}, not {expected:,.0f}")
            expected = aim
        for _ in range(6):
            got = self.probe("offline", {"loadgen.min_duration_ms": self.probe_ms,
                                         "loadgen.expected_qps": round(expected, 1)},
                             asked=f"expected_qps {expected:,.0f}, {self.probe_ms / 1000:g} s")
            if got.valid and got.metric:
                self._choose("offline", "loadgen.expected_qps", round(got.metric, 1),
                             f"a {self.probe_ms} ms probe at expected_qps {expected:,.0f} was "
                             f"VALID: LoadGen {got.metric:,.0f} samples/s", got.run_dir)
                return got.metric
            if not got.metric:
                break
            # Too fast (the run ended early) or too slow: aim at the measured rate.
            expected = got.metric * 1.05
        raise TuneFailed("could not find a VALID Offline probe", hint=self.look())

    def stream(self, scenario: str) -> float:
        config = prepare(self._request(scenario, {}), self.paths).config
        hint = config.loadgen.expected_latency_ms
        for _ in range(6):
            got = self.probe(scenario, {"loadgen.min_duration_ms": self.probe_ms,
                                        "loadgen.expected_latency_ms": round(hint, 6)},
                             asked=f"expected_latency {hint:.3g} ms, {self.probe_ms / 1000:g} s")
            if got.valid and got.mean_latency_ms:
                value = round(got.mean_latency_ms, 6)
                self._choose(scenario, "loadgen.expected_latency_ms", value,
                             f"LoadGen's mean latency {value} ms in a VALID {self.probe_ms} "
                             "ms probe", got.run_dir)
                return value
            if not got.mean_latency_ms:
                break
            hint = got.mean_latency_ms * 0.8  # a little low: over-generating is harmless
        raise TuneFailed(f"could not find a VALID {scenario} probe", hint=self.look())

    def server(self, offline_rate: float, batch_sizes: list[int], steps: int,
               counts: list[int] | None = None, models: list[str] | None = None,
               setups: list[tuple[str, int]] | None = None,
               max_qps: float | None = None) -> float:
        """The highest Server rate over ``batch_sizes`` x worker setups that a confirming
        run found VALID, with the setup that reached it (0.0: none was confirmed, and
        ``report.unconfirmed`` says why, naming the VALID probes).

        A worker setup is ``(sut.worker_model, sut.workers)``: ``setups`` names them,
        else every pair of ``models`` x ``counts`` (default: the configured model, and
        ``worker_counts``). No probe asks for more than ``max_qps``.
        """
        config = prepare(self._request("server", {}), self.paths).config
        bound_us = config.loadgen.latency_bound_ms * 1000
        setups = setups or [(model, count) for model in models or [config.sut.worker_model]
                            for count in counts or worker_counts(config.sut.workers)]
        candidates = []
        for batch in batch_sizes:
            cost = self._batch_cost(batch)
            for model, count in setups:
                # Whether a run's warm-up would cap or pace (tuned_max_wait_us), judged at
                # 0.8 of Offline, near where a Server rate is expected to land, or at the
                # --max-qps cap where that is lower.
                rate = min(0.8 * offline_rate, max_qps or math.inf)
                wait_us = tuned_max_wait_us(cost, bound_us / 1e6, batch, count, rate)
                candidates.append(Setup(batch, count, model, wait_us))
                self.say(f"  {candidates[-1].label()}: a call takes {cost.fixed_s * 1e6:,.0f}"
                         f" us + {cost.per_sample_s * 1e6:.2f} us/sample -> max_wait_us "
                         f"{wait_us}")
        runner = _ServerRunner(self)
        seen = search(runner, candidates, offline_rate, steps, max_qps, self.say)
        self.report.server = seen
        if not seen.valid:  # a verdict on this system, not an error
            self.report.unconfirmed = unconfirmed_verdict(seen, self.probes_dir)
            return 0.0
        best = seen.valid[0]
        if max_qps is not None and best.rate >= max_qps:
            self.say(f"  {best.rate:,.0f} QPS is the --max-qps cap and was VALID: the "
                     "system may sustain more (raise --max-qps to search above it)")
        confirm(runner, seen, self.say)
        if seen.confirmed is None:
            self.report.unconfirmed = unconfirmed_verdict(seen, self.probes_dir)
            return 0.0
        done = seen.confirmed
        got, setup = done.result, done.setup
        length = f"{self.confirm_ms} ms" if self.confirm_ms else "the official duration"
        source = ("the --max-qps cap" if max_qps is not None and done.rate >= max_qps
                  else "the highest VALID probe" if done.rate == best.rate
                  else f"backed off from {best.rate:,.0f} QPS, the highest VALID probe")
        self._choose("server", "loadgen.target_qps", done.rate,
                     f"{source}; a run of {length} confirmed it VALID: LoadGen "
                     f"{got.metric or 0:,.0f} samples/s, p99 {got.p99_ms or 0:,.2f} ms",
                     got.run_dir)
        tried = ", ".join(dict.fromkeys(f"{count} {model}" for model, count in setups))
        self._choose("server", "sut.max_batch_size", setup.batch,
                     f"highest VALID rate among batch sizes {batch_sizes}")
        self._choose("server", "sut.max_wait_us", setup.wait_us,
                     _wait_reason(setup.wait_us, bound_us))
        for key, value in (("sut.workers", setup.workers), ("sut.worker_model", setup.model)):
            self._choose("server", key, value,
                         f"highest VALID rate among worker setups: {tried}")
        self.report.proposal = proposal_lines(self.benchmark, "server", setup.sets())
        return done.rate

    def _batch_cost(self, batch: int, calls: int = 30) -> BatchCost:
        """The backend's batch latency, fitted as fixed + per sample from the median of
        the timed calls at batch 1 and at ``batch`` (of ``calls``, the first sixth are
        untimed: warm-up)."""
        config = prepare(self._request("server", {}), self.paths).config
        card = self._card(config)
        backend = backends.create(self.backend, config.backend_options)
        backend.load(card, batch)
        data = np.zeros((batch, *card.input.sample_shape), dtype=np.dtype(card.input.dtype))
        medians = {}
        for size in sorted({1, batch}):
            timings = []
            for _ in range(calls):
                start = time.perf_counter()
                backend.predict(data[:size])
                timings.append(time.perf_counter() - start)
            medians[size] = statistics.median(timings[max(1, calls // 6):])
        backend.close()
        return BatchCost.fit(1, medians[1], batch, medians[batch])

    # -- output -----------------------------------------------------------------------


    # -- output -----------------------------------------------------------------------

    def _choose(self, scenario: str, key: str, value: float | int | str, why: str,
                run_dir: str = "") -> None:
        self.report.choices.setdefault(scenario, []).append(Choice(key, value, why, run_dir))

    def write(self) -> Path:
        return write_settings(self.paths, self.report)


class _ServerRunner:
    """``tune_search.ServerProbes`` over a ``Tuner``: probes and confirming runs."""

    def __init__(self, tuner: Tuner) -> None:
        self.tuner = tuner

    def probe(self, rate: float, setup: Setup) -> ProbeResult:
        duration = probe_ms_for(rate, self.tuner.probe_ms)
        return self.tuner.probe("server", {"loadgen.target_qps": rate,
                                           "loadgen.min_duration_ms": duration,
                                           **setup.sets()},
                                asked=_asked(rate, setup, duration))

    def confirm(self, rate: float, setup: Setup) -> ProbeResult:
        sets: dict[str, Any] = {"loadgen.target_qps": rate, **setup.sets()}
        duration = None
        if self.tuner.confirm_ms is not None:  # never too short for early stopping
            duration = sets["loadgen.min_duration_ms"] = probe_ms_for(rate,
                                                                      self.tuner.confirm_ms)
        return self.tuner.probe("server", sets, quick=False,
                                asked="confirming " + _asked(rate, setup, duration))


def _asked(rate: float, setup: Setup, duration_ms: int | None) -> str:
    length = f"{duration_ms / 1000:.1f} s" if duration_ms else "official duration"
    return f"{rate:,.0f} QPS, {setup.label()}, {length}"


def _outcome(test: TestResult, run_dir: str) -> ProbeResult:
    """A probe's outcome from its test's LoadGen figures."""
    perf = test.performance
    mean = perf.latency_ns.get("mean") if perf else None
    p99 = perf.latency_ns.get("99.00_percentile") if perf else None
    return ProbeResult(
        valid=test.status is Status.VALID,
        metric=perf.metric_value if perf else None,
        mean_latency_ms=mean / 1e6 if mean else None,
        run_dir=run_dir,
        p99_ms=p99 / 1e6 if p99 else None,
        why="" if test.status is Status.VALID else _why(perf, test.message),
    )


def _why(perf: PerformanceSummary | None, message: str) -> str:
    """LoadGen's reason for INVALID, in a few words (its detail log's checks)."""
    if perf is None:
        return message[:60]
    checks = [(perf.perf_constraints_met, "latency bound"),
              (perf.early_stopping_met, "early stopping"),
              (perf.min_duration_met, "min duration"), (perf.min_queries_met, "min queries")]
    failed = [name for met, name in checks if met is False]
    if perf.num_errors:
        failed.append(f"{perf.num_errors} LoadGen errors")
    return ", ".join(failed) or "INVALID"


def worker_counts(configured: int) -> list[int]:
    """Server worker counts to try where none are given: 1, 2, the cores, and the
    configured count (a backend's default worker count is measured against these)."""
    cores = min(os.cpu_count() or 1, MAX_WORKERS)
    return sorted({1, 2, cores, configured})


def tune(options: TuneOptions, *, say: Callable[[str], None], paths: Paths) -> TuneReport:
    """Tune the options' scenarios of a tensor card (Server needs Offline's rate first)
    and write the settings file (without a Server claim when no confirming run was
    VALID: ``report.unconfirmed`` then says why)."""
    o = options
    scenarios = list(o.scenarios)
    tuner = Tuner(paths, o.benchmark, o.backend, o.system, (o.runs_dir or paths.runs).resolve(),
                  o.probe_ms, o.confirm_ms, o.fresh, say)
    tuner.report.probes_dir = tuner.probes_dir
    say(f"probe runs go to {tuner.probes_dir}")
    offline_rate: float | None = None
    if Scenario.OFFLINE in scenarios or Scenario.SERVER in scenarios:
        say("Offline: finding expected_qps")
        offline_rate = tuner.offline()
    for stream in (Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM):
        if stream in scenarios:
            say(f"{stream.loadgen_name}: finding expected_latency_ms")
            tuner.stream(stream.value)
    if Scenario.SERVER in scenarios and offline_rate:
        say("Server: finding the highest VALID target_qps")
        tuner.server(offline_rate, list(o.batch_sizes), o.steps, list(o.worker_counts),
                     list(o.worker_models), max_qps=o.max_qps)
    tuner.write()
    return tuner.report


def _wait_reason(wait_us: int, bound_us: float) -> str:
    """Why ``suite tune`` chose this ``sut.max_wait_us`` (tuned_max_wait_us)."""
    if wait_us < 0:
        return ("derived at each run's warm-up with the batch cap and the pacing: the "
                "backend's fixed cost per call needs them")
    return f"a quarter of the {bound_us / 1000:g} ms bound less two measured batches"
