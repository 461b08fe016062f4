"""``suite tune`` for LLM benchmarks: throughput against token latency, on any LLM backend.

* **Offline, a concurrency sweep**: one run per value of ``concurrency`` (the ``openai``
  backend's requests in flight, ``backend.openai.max_in_flight``; ``torch-llm``'s live
  sequences, ``sut.max_batch_size``). LoadGen's tokens/s decides; the best value is the
  setting recorded.
* **Server, the highest VALID rate**: ``target_qps`` halves from the Offline sample rate
  until a run is VALID (TTFT p99 and TPOT p99 within the round's bounds, early stopping:
  LoadGen's verdict), then bisects between that and the lowest INVALID rate.

Every probe is a real run (``harness.run.run``) under ``<runs>/tune-probes``, cached by its
settings as ``suite tune`` caches its probes. Each probe's point (the setting, tokens/s,
TTFT p99, TPOT p99, validity, its run directory) goes to
``<runs>/tune-sweeps/<system>_<benchmark>_<backend>.json``, from which ``suite report
--html`` draws throughput against TTFT p99 and TPOT p99, as AIPerf and guidellm draw it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from suite.config.loader import ConfigRequest, default_system_name
from suite.errors import TuneFailed
from suite.harness.run import run
from suite.harness.tune import Choice, ProbeCache, ProbeResult, TuneReport, write_settings
from suite.harness.tune_options import TuneOptions
from suite.paths import Paths, sweep_path
from suite.results import RunResult, Status
from suite.scenarios import Scenario
from suite.version import __version__


def point_of(result: RunResult, scenario: str, setting: dict[str, Any]) -> dict[str, Any]:
    """One sweep point from a probe's result (LoadGen's figures only)."""
    test = result.tests[0]
    perf = test.performance
    tokens = perf.tokens if perf else {}
    per_s = tokens.get("completed_tokens_per_second") or tokens.get("tokens_per_second")
    return {"scenario": scenario, **setting, "valid": test.status is Status.VALID,
            "tokens_per_s": per_s, "samples_per_s": perf.metric_value if perf else None,
            "ttft_p99_ms": tokens["ttft_p99_ns"] / 1e6 if "ttft_p99_ns" in tokens else None,
            "tpot_p99_ms": tokens["tpot_p99_ns"] / 1e6 if "tpot_p99_ns" in tokens else None,
            "run_dir": result.run_dir}


class LLMTuner:
    """See the module docstring."""

    def __init__(self, paths: Paths, benchmark: str, backend: str, system: str | None,
                 runs_dir: Path, fresh: bool, say: Callable[[str], None],
                 sets: dict[str, Any]) -> None:
        self.paths, self.benchmark, self.backend = paths, benchmark, backend
        self.system = system or default_system_name()
        self.runs_dir, self.say, self.sets = runs_dir, say, sets
        self.cache = ProbeCache(runs_dir / "tune-cache" / f"{self.system}.json", fresh)
        self.report = TuneReport(self.system, backend, benchmark)
        self.points: list[dict[str, Any]] = []

    def probe(self, scenario: str, setting: dict[str, Any]) -> dict[str, Any]:
        """One run with ``setting`` (or its cached outcome); its sweep point."""
        sets = {**self.sets, **setting}
        signature = json.dumps([__version__, self.system, self.benchmark, self.backend,
                                scenario, sorted((k, repr(v)) for k, v in sets.items())])
        key = hashlib.sha256(signature.encode()).hexdigest()[:24]
        cached = self.cache.get(key)
        result: RunResult | None = None
        if cached is not None:
            try:
                result = RunResult.load(Path(cached.run_dir) / "result.json")
                self.report.probes_cached += 1
            except (OSError, ValueError):
                result = None
        if result is None:
            request = ConfigRequest(
                benchmark=self.benchmark, scenario=scenario, backend=self.backend, quick=True,
                sets=[f"{k}={json.dumps(v)}" for k, v in sets.items()],
                runs_dir=self.runs_dir / "tune-probes", system=self.system, use_tuned=False)
            result = run(request)
            test = result.tests[0]
            if test.status in (Status.FAILED, Status.INTERRUPTED):
                raise TuneFailed(f"probe failed: {test.message} ({result.run_dir})",
                                 hint="look at the probe's run directory (STATUS, logs)")
            perf = test.performance
            self.cache.put(key, ProbeResult(test.status is Status.VALID,
                                            perf.metric_value if perf else None, None,
                                            result.run_dir))
            self.report.probes_run += 1
        point = point_of(result, scenario, setting)
        self.points.append(point)
        self.say(f"  {scenario} {setting}: {'VALID' if point['valid'] else 'INVALID'}, "
                 f"{point['tokens_per_s'] or 0:,.0f} tokens/s")
        return point

    def offline(self, concurrency: list[int]) -> float:
        """The concurrency sweep; the best run's samples/s (Server's starting rate)."""
        key = ("backend.openai.max_in_flight" if self.backend == "openai"
               else "sut.max_batch_size")
        best: dict[str, Any] | None = None
        for value in concurrency:
            point = self.probe("offline", {key: value,
                                           "loadgen.min_query_count": max(128, 2 * value)})
            if point["valid"] and (best is None or (point["tokens_per_s"] or 0)
                                   > (best["tokens_per_s"] or 0)):
                best = point
        if best is None:
            raise TuneFailed("no Offline probe of the sweep was VALID",
                             hint=f"look at the probes under {self.runs_dir / 'tune-probes'}")
        self.report.choices.setdefault("offline", []).append(Choice(
            key, best[key], f"the best of the concurrency sweep {concurrency}: "
            f"{best['tokens_per_s']:,.0f} tokens/s ({best['run_dir']})"))
        return float(best["samples_per_s"] or 0.0)

    def server(self, start_qps: float, steps: int) -> float:
        """Halve to a VALID rate (or double while VALID), then bisect toward the lowest
        INVALID one."""
        low, high = 0.0, 0.0
        rate = max(start_qps, 0.1)
        for _ in range(12):
            if self.probe("server", {"loadgen.target_qps": round(rate, 2)})["valid"]:
                low = rate
                break
            high, rate = rate, rate / 2
        if not low:
            raise TuneFailed("no Server rate down to 1/4096 of Offline's was VALID",
                             hint=f"look at the probes under {self.runs_dir / 'tune-probes'}")
        for _ in range(6 if not high else 0):  # VALID at Offline's rate: double up to 64x
            if self.probe("server", {"loadgen.target_qps": round(low * 2, 2)})["valid"]:
                low *= 2
            else:
                high = low * 2
                break
        for _ in range(steps if high else 0):
            middle = round((low + high) / 2, 2)
            if self.probe("server", {"loadgen.target_qps": middle})["valid"]:
                low = middle
            else:
                high = middle
        self.report.choices.setdefault("server", []).append(Choice(
            "loadgen.target_qps", round(low, 2), "the highest VALID rate of the sweep "
            "(TTFT and TPOT p99 within the round's bounds, LoadGen's verdict)"))
        return low

    def write(self) -> Path:
        path = sweep_path(self.runs_dir, self.system, self.benchmark, self.backend)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"system": self.system, "benchmark": self.benchmark,
                                    "backend": self.backend, "points": self.points},
                                   indent=2) + "\n", encoding="utf-8")
        write_settings(self.paths, self.report)
        return path


def tune_llm(options: TuneOptions, *, say: Callable[[str], None], paths: Paths) -> TuneReport:
    """The Offline sweep (Server starts from its rate), then Server; write both files."""
    o = options
    sets: dict[str, Any] = {"backend.openai.urls": list(o.urls)} if o.urls else {}
    tuner = LLMTuner(paths, o.benchmark, o.backend, o.system,
                     (o.runs_dir or paths.runs).resolve(), o.fresh, say, sets)
    say("Offline: a concurrency sweep")
    rate = tuner.offline(list(o.concurrency))
    if Scenario.SERVER in o.scenarios:
        say("Server: the highest VALID target_qps (TTFT and TPOT bounds)")
        tuner.server(rate, o.steps)
    sweep = tuner.write()
    say(f"sweep points: {sweep}")
    return tuner.report
