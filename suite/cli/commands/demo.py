"""``suite demo``: digits on all four scenarios, performance then accuracy; proof that the
install works, not a performance claim.

The demo runs Offline before Server and asks Server for a rate this machine has just
shown it can serve: ``SERVER_SHARE`` of its own Offline samples/s, at most
``SERVER_MAX_QPS`` (the scenario file's digits rate, which a quiet 2-core machine meets)
and at least ``SERVER_MIN_QPS``. A fixed 1,000 QPS missed the 10 ms bound at a load
average of 6 on 2 cores. The rate and where it came from are printed and recorded as the
provenance of ``loadgen.target_qps`` in the Server run's ``config.json``. When a test is
INVALID anyway, one line says how busy the machine was (load average, CPU steal from
``/proc/stat``) and what to try.

The demo proves the install: it exits 0 when every step worked, and a performance test
that LoadGen judged INVALID (a latency bound or duration missed on a busy machine) is a
timing verdict, explained by that line, not a broken step (``demo_exit_code``). A test
that failed, an accuracy run below its target or an interrupted demo still exits as
``suite run`` would.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from suite.cli.options import runs_dir_option

#: Server's share of the Offline rate: a Server batch waits for arrivals and must meet
#: the latency bound, so it completes far less than Offline's full batches.
SERVER_SHARE = 0.4
#: The most the demo asks of Server: scenarios/server.toml's digits rate.
SERVER_MAX_QPS = 1000.0
#: The least: below it the quick run would take long to gather its queries.
SERVER_MIN_QPS = 50.0
#: Queries a quick Server test needs at least: LoadGen's early stopping wants 459 even
#: when every query meets the bound.
SERVER_MIN_QUERIES = 600
#: The quick Server test's own duration (scenarios/server.toml [quick]).
QUICK_SERVER_MS = 2000


@dataclass(frozen=True)
class ServerPlan:
    """The demo's Server rate, and the sentence saying where it came from."""

    target_qps: float | None  # None: the scenario file's rate (no Offline figure)
    min_duration_ms: int | None  # None: the scenario file's quick duration
    why: str


def server_plan(offline_samples_per_s: float | None, quick: bool) -> ServerPlan:
    """Server's rate from this demo's Offline samples/s (None: Offline gave no figure)."""
    if not offline_samples_per_s or offline_samples_per_s <= 0:
        return ServerPlan(None, None, "the scenario file's rate: this demo's Offline test "
                          "gave no samples/s")
    share = SERVER_SHARE * offline_samples_per_s
    qps = round(min(SERVER_MAX_QPS, max(SERVER_MIN_QPS, share)), 1)
    bound = (f"at most {SERVER_MAX_QPS:,.0f}" if share > SERVER_MAX_QPS else
             f"at least {SERVER_MIN_QPS:,.0f}" if share < SERVER_MIN_QPS else "")
    why = (f"suite demo: {SERVER_SHARE:g} x this demo's Offline {offline_samples_per_s:,.0f} "
           f"samples/s{', ' + bound if bound else ''}")
    duration = None
    if quick and qps * QUICK_SERVER_MS / 1000 < SERVER_MIN_QUERIES:
        duration = math.ceil(SERVER_MIN_QUERIES / qps * 1000)
    return ServerPlan(qps, duration, why)


def offline_rate(result: Any) -> float | None:
    """The Offline performance test's samples/s from its ``RunResult``, if it has one."""
    for test in result.tests:
        if test.mode == "performance" and test.performance is not None:
            value = test.performance.metric_value
            return float(value) if value else None
    return None


def cpu_times() -> tuple[int, int] | None:
    """(steal, total) jiffies from ``/proc/stat``'s cpu line; None where there is none."""
    try:
        fields = Path("/proc/stat").read_text(encoding="ascii").splitlines()[0].split()
    except (OSError, IndexError, UnicodeDecodeError):
        return None
    if fields[:1] != ["cpu"] or len(fields) < 9:
        return None
    values = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
    return values[7], sum(values)


def busy_line(invalid: int, before: tuple[int, int] | None, after: tuple[int, int] | None,
              load: float | None, cores: int, steps_ok: bool = True) -> str:
    """One line for a demo with INVALID performance tests: how busy the machine was, what
    to try; ``steps_ok``: nothing else went wrong, so the install is proven."""
    steal = None
    if before is not None and after is not None and after[1] > before[1]:
        steal = (after[0] - before[0]) / (after[1] - before[1])
    facts = [f"load average {load:.1f} on {cores} cores" if load is not None else
             f"{cores} cores"]
    if steal is not None:
        facts.append(f"CPU steal {steal:.0%} during the demo")
    busy = (load is not None and load > cores / 2) or (steal is not None and steal > 0.05)
    state = "the machine was busy" if busy else "the machine looked quiet"
    verdict = ("a timing verdict; every step ran, so the install works (the demo is no "
               "performance claim)" if steps_ok else "a timing verdict (see above for what "
               "else went wrong)")
    return (f"{invalid} demo performance test(s) INVALID (why: above); {state} "
            f"({', '.join(facts)}): {verdict}; rerun `suite demo` when the machine is "
            "quieter, or find this machine's settings with `suite tune`")


def demo_exit_code(results: list[Any], code: int) -> int:
    """``code`` (the worst run's), or 0 where the only verdicts below VALID are performance
    tests' INVALID: timing on this machine, which the busy line explains."""
    from suite.results import EXIT_CODES, Status

    if code != EXIT_CODES[Status.INVALID]:
        return code  # 0, an error (a broken step) or an interruption: as it is
    timing_only = all(
        result.status in (Status.VALID, Status.INVALID)
        and all(test.status is Status.VALID or (test.status is Status.INVALID
                                                 and test.mode == "performance")
                for test in result.tests)
        for result in results)
    return 0 if timing_only else code


@click.command("demo")
@click.option("--backend", default="onnxruntime", show_default=True)
@runs_dir_option("where the run directories are made", writes=True)
@click.option("--wide", is_flag=True,
              help="every column of the results table (division, metric name, early "
                   "stopping, token latencies, accuracy target)")
@click.option("--quick/--full", default=True, show_default=True,
              help="quick durations (not submittable), or the round's official ones")
def demo_command(backend: str, runs_dir: Path | None, wide: bool, quick: bool) -> int:
    """digits on all four scenarios, performance then accuracy."""
    from suite.cli import app, console
    from suite.config.rules import DEFAULT_ROUND
    from suite.results import Status

    def request(scenario: str, flags: dict[str, tuple[Any, str]]) -> Any:
        return app.build_request("digits", scenario, backend, "all", DEFAULT_ROUND, quick, None,
                            None, runs_dir, flags)

    before = cpu_times()
    results = []
    for scenario in ("singlestream", "multistream", "offline"):
        results.append(app.run_one(request(scenario, {})))
        if results[-1].status is Status.INTERRUPTED:
            return app.finish(results, wide)
    plan = server_plan(offline_rate(results[-1]), quick)
    flags: dict[str, tuple[Any, str]] = {}
    if plan.target_qps is not None:
        flags["loadgen.target_qps"] = (plan.target_qps, plan.why)
        if plan.min_duration_ms is not None:
            flags["loadgen.min_duration_ms"] = (
                plan.min_duration_ms, f"suite demo: {SERVER_MIN_QUERIES} queries at that rate")
    rate = f"{plan.target_qps:,.0f} QPS" if plan.target_qps else "the scenario file's rate"
    console.err.print(f"demo: Server at {rate} ({plan.why})", soft_wrap=True, markup=False)
    results.append(app.run_one(request("server", flags)))
    code = app.finish(results, wide)
    exit_code = demo_exit_code(results, code)
    invalid = sum(any(t.mode == "performance" and t.status is Status.INVALID
                      for t in r.tests) for r in results)
    if invalid:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        console.out.print(busy_line(invalid, before, cpu_times(), load, os.cpu_count() or 1,
                                    steps_ok=exit_code == 0),
                          soft_wrap=True, markup=False)
    return exit_code


COMMANDS = [demo_command]
