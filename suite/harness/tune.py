"""``suite tune``: find the settings a system can sustain, with short probe runs first and
a confirming run last, and write them where ``suite run`` picks them up.

* Offline: ``expected_qps`` = the rate LoadGen measured in a VALID probe (LoadGen issues
  1.1 x duration x expected_qps samples, so the run lasts long enough).
* SingleStream/MultiStream: ``expected_latency_ms`` = the mean latency of a VALID probe
  (too high a hint makes LoadGen run out of generated queries).
* Server: for each candidate ``max_batch_size``, ``max_wait_us`` is derived from the
  latency bound and the batch latency measured on the backend
  (``sut.server_policy.tuned_max_wait_us``: -1, derived at each run's warm-up, wherever the
  run's policy would cap or pace the batches),
  then, for each candidate worker setup, a bisection finds the highest ``target_qps``
  that stays VALID
  (latency percentile and early stopping both count; a probe is long enough for
  early stopping's 459 queries). The best pair wins. ``max_qps`` caps the search: a
  probe issues ``target_qps`` x its duration queries, and a backend served elsewhere may
  not be ours to flood.

Every probe is a real LoadGen run through ``api.run``; its outcome is cached under the
probe's full settings, so an interrupted search resumes and a second invocation
reuses the probes. The confirming run uses the official duration unless told
otherwise; if it is INVALID the rate steps down 10 % and confirms again (a longer run
meets more of a shared machine's hiccups than a probe does).
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from suite import backends
from suite.config.loader import ConfigRequest, default_system_name, tuned_settings_path
from suite.config.model import RunConfig
from suite.errors import TuneFailed
from suite.harness.run import prepare, run
from suite.harness.sut.server_policy import BatchCost, tuned_max_wait_us
from suite.harness.tune_options import TuneOptions
from suite.models import ModelCard, check_model, load_card
from suite.paths import Paths
from suite.results import Status
from suite.scenarios import Scenario
from suite.version import __version__

_PROBES = "look at the probe runs under <runs>/tune-probes/ (their STATUS and logs)"


@dataclass(frozen=True)
class ProbeResult:
    valid: bool
    metric: float | None
    mean_latency_ms: float | None
    run_dir: str
    cached: bool = False


@dataclass
class Choice:
    """A tuned value with the evidence behind it."""

    key: str
    value: float | int | str
    why: str


@dataclass
class TuneReport:
    system: str
    backend: str
    benchmark: str
    choices: dict[str, list[Choice]] = field(default_factory=dict)
    probes_run: int = 0
    probes_cached: int = 0
    settings_file: Path | None = None


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

    def probe(self, scenario: str, sets: dict[str, Any], quick: bool = True) -> ProbeResult:
        """One LoadGen run with ``sets``, or its cached outcome."""
        signature = json.dumps([__version__, self.system, self.benchmark, self.backend,
                                self.model_sha, scenario, quick, sorted(sets.items())])
        key = hashlib.sha256(signature.encode()).hexdigest()[:24]
        cached = self.cache.get(key)
        if cached is not None:
            self.report.probes_cached += 1
            self.say(f"  {scenario} {sets}: cached ({'VALID' if cached.valid else 'INVALID'})")
            return cached
        result = run(self._request(scenario, sets, quick))
        test = result.tests[0]
        perf = test.performance
        mean = perf.latency_ns.get("mean") if perf else None
        outcome = ProbeResult(
            valid=test.status is Status.VALID,
            metric=perf.metric_value if perf else None,
            mean_latency_ms=mean / 1e6 if mean else None,
            run_dir=result.run_dir,
        )
        stalled = bool(test.failures) and test.failures[0].get("kind") == "watchdog_timeout"
        if test.status is Status.INTERRUPTED or (test.status is Status.FAILED and not stalled):
            raise TuneFailed(f"probe failed: {test.message} ({result.run_dir})", hint=_PROBES)
        if stalled:  # a stalled batch is a latency failure at this rate, not a dead end
            self.say(f"  probe stalled ({test.message}): counted as INVALID")
        self.cache.put(key, outcome)
        self.report.probes_run += 1
        self.say(f"  {scenario} {sets}: {'VALID' if outcome.valid else 'INVALID'} "
                 f"metric={outcome.metric}")
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
                                         "loadgen.expected_qps": round(expected, 1)})
            if got.valid and got.metric:
                self._choose("offline", "loadgen.expected_qps", round(got.metric, 1),
                             f"a {self.probe_ms} ms probe at expected_qps {expected:,.0f} was "
                             f"VALID at {got.metric:,.0f} samples/s ({got.run_dir})")
                return got.metric
            if not got.metric:
                break
            # Too fast (the run ended early) or too slow: aim at the measured rate.
            expected = got.metric * 1.05
        raise TuneFailed("could not find a VALID Offline probe", hint=_PROBES)

    def stream(self, scenario: str) -> float:
        config = prepare(self._request(scenario, {}), self.paths).config
        hint = config.loadgen.expected_latency_ms
        for _ in range(6):
            got = self.probe(scenario, {"loadgen.min_duration_ms": self.probe_ms,
                                        "loadgen.expected_latency_ms": round(hint, 6)})
            if got.valid and got.mean_latency_ms:
                value = round(got.mean_latency_ms, 6)
                self._choose(scenario, "loadgen.expected_latency_ms", value,
                             f"mean latency {value} ms in a VALID {self.probe_ms} ms probe "
                             f"({got.run_dir})")
                return value
            if not got.mean_latency_ms:
                break
            hint = got.mean_latency_ms * 0.8  # a little low: over-generating is harmless
        raise TuneFailed(f"could not find a VALID {scenario} probe", hint=_PROBES)

    def server(self, offline_rate: float, batch_sizes: list[int], steps: int,
               counts: list[int] | None = None, models: list[str] | None = None,
               setups: list[tuple[str, int]] | None = None,
               max_qps: float | None = None) -> float:
        """The highest VALID Server rate over ``batch_sizes`` x worker setups, confirmed,
        with the setup that reached it.

        A worker setup is ``(sut.worker_model, sut.workers)``: ``setups`` names them,
        else every pair of ``models`` x ``counts`` (each defaulting to the configured one).
        No probe asks for more than ``max_qps``.
        """
        config = prepare(self._request("server", {}), self.paths).config
        bound_us = config.loadgen.latency_bound_ms * 1000
        setups = setups or [(model, count) for model in models or [config.sut.worker_model]
                            for count in counts or [config.sut.workers]]
        best: tuple[float, dict[str, Any]] | None = None
        for batch in batch_sizes:
            cost = self._batch_cost(batch)
            for model, count in setups:
                # Whether a run's warm-up would cap or pace (tuned_max_wait_us), judged at
                # 0.8 of Offline, near where a Server rate is expected to land, or at the
                # --max-qps cap where that is lower.
                rate = min(0.8 * offline_rate, max_qps or math.inf)
                wait_us = tuned_max_wait_us(cost, bound_us / 1e6, batch, count, rate)
                self.say(f"  server batch {batch}, {count} worker {model}: measured "
                         f"{cost.fixed_s * 1e6:.0f} us + "
                         f"{cost.per_sample_s * 1e6:.2f} us per sample -> max_wait_us "
                         f"{wait_us} ({_wait_reason(wait_us, bound_us)})")
                sets: dict[str, Any] = {"sut.max_batch_size": batch, "sut.max_wait_us": wait_us,
                                        "sut.workers": count, "sut.worker_model": model}
                lo = self._highest_valid(offline_rate, sets, steps, max_qps)
                self.say(f"  server batch {batch}, {count} worker {model}: highest VALID "
                         f"probe {lo:,.0f} QPS")
                if lo > 0 and (best is None or lo > best[0]):
                    best = (lo, sets)
        if best is None:
            raise TuneFailed("no Server probe was VALID", hint="lower the batch sizes, or check "
                             "the backend's latency against the bound")
        qps, sets = best
        capped = max_qps is not None and qps >= max_qps
        qps = self._confirm_server(round(qps, 1), sets, capped)
        self._choose("server", "sut.max_batch_size", sets["sut.max_batch_size"],
                     f"highest VALID rate among batch sizes {batch_sizes}")
        self._choose("server", "sut.max_wait_us", sets["sut.max_wait_us"],
                     _wait_reason(sets["sut.max_wait_us"], bound_us))
        tried = ", ".join(f"{count} {model}" for model, count in setups)
        self._choose("server", "sut.workers", sets["sut.workers"],
                     f"highest VALID rate among worker setups: {tried}")
        self._choose("server", "sut.worker_model", sets["sut.worker_model"],
                     f"highest VALID rate among worker setups: {tried}")
        return qps

    def _highest_valid(self, offline_rate: float, sets: dict[str, Any], steps: int,
                       max_qps: float | None = None) -> float:
        """Halve from half the Offline rate (or ``max_qps``, if lower) until a probe is
        VALID, then bisect upwards, never above ``max_qps``."""
        hi = min(offline_rate, max_qps) if max_qps else offline_rate
        lo, rate = 0.0, min(offline_rate / 2, hi)
        for _ in range(10):
            if self._server_probe(rate, sets).valid:
                lo = rate
                break
            hi, rate = rate, rate / 2
        if lo >= hi:  # VALID at the cap: nothing above it may be probed
            return lo
        for _ in range(steps if lo else 0):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if self._server_probe(mid, sets).valid else (lo, mid)
        return lo

    def _server_probe(self, rate: float, sets: dict[str, Any]) -> ProbeResult:
        # Long enough for early stopping's 459 queries, with room for a few over the bound.
        duration = max(self.probe_ms, int(700_000 / rate))
        return self.probe("server", {"loadgen.target_qps": round(rate, 1),
                                     "loadgen.min_duration_ms": duration, **sets})

    def _confirm_server(self, qps: float, setup: dict[str, Any], capped: bool = False) -> float:
        if capped:
            self.say(f"  {qps:,.0f} QPS is the --max-qps cap and was VALID: the system may "
                     "sustain more (raise --max-qps to search above it)")
        source = "the --max-qps cap, VALID in a probe" if capped else \
            "highest VALID rate in the probes"
        for _ in range(6):
            sets: dict[str, Any] = {"loadgen.target_qps": qps, **setup}
            if self.confirm_ms is not None:
                sets["loadgen.min_duration_ms"] = self.confirm_ms
            got = self.probe("server", sets, quick=False)
            length = f"{self.confirm_ms} ms" if self.confirm_ms else "the official duration"
            if got.valid:
                self._choose("server", "loadgen.target_qps", qps,
                             f"{source}, confirmed by a run of {length} "
                             f"({got.run_dir})")
                return qps
            self.say(f"  confirming run at {qps:,.0f} QPS was INVALID: stepping down 10 %")
            qps = round(qps * 0.9, 1)
        raise TuneFailed("the confirming Server runs stayed INVALID", hint=_PROBES)

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

    def _choose(self, scenario: str, key: str, value: float | int | str, why: str) -> None:
        self.report.choices.setdefault(scenario, []).append(Choice(key, value, why))

    def write(self) -> Path:
        return write_settings(self.paths, self.report)


def write_settings(paths: Paths, report: TuneReport) -> Path:
    """Write ``report``'s choices where ``suite run`` picks them up (a previous file is kept
    as a dated ``.bak``: nothing is silently overwritten)."""
    path = tuned_settings_path(paths, report.system, report.backend)
    lines = [f"# Settings `suite tune` found for {report.benchmark} on {report.backend}, "
             f"system '{report.system}'.", "# `suite run` applies them after "
             "scenarios/<scenario>.toml; each value says where it came from.", ""]
    existing = path.read_text(encoding="utf-8") if path.is_file() else ""
    for scenario, choices in report.choices.items():
        sections: dict[str, list[Choice]] = {}
        for choice in choices:
            sections.setdefault(choice.key.split(".")[0], []).append(choice)
        for section, items in sections.items():
            lines.append(f"[benchmarks.{report.benchmark}.scenarios.{scenario}.{section}]")
            for item in items:
                lines.append(f"# {item.why}")
                lines.append(f"{item.key.split('.', 1)[1]} = {item.value!r}")
            lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    if existing:
        path.with_suffix(f".toml.{time.strftime('%Y%m%dT%H%M%S')}.bak").write_text(existing)
    path.write_text("\n".join(lines), encoding="utf-8")
    report.settings_file = path
    return path


def tune(options: TuneOptions, *, say: Callable[[str], None], paths: Paths) -> TuneReport:
    """Tune the options' scenarios of a tensor card (Server needs Offline's rate first)
    and write the settings file."""
    o = options
    scenarios = list(o.scenarios)
    tuner = Tuner(paths, o.benchmark, o.backend, o.system, (o.runs_dir or paths.runs).resolve(),
                  o.probe_ms, o.confirm_ms, o.fresh, say)
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
