"""LoadGen's own Offline ceiling on this machine: how many samples per second LoadGen and
the harness's completion path (``loadgen.Completer``, on as many threads as the run's
workers) sustain with no inference at all.

A backend faster than that (the null backend, a small model on a fast accelerator) cannot
run Offline faster than this, so its warm-up rate says nothing of the run's rate:
``offline_rate`` caps its estimate here. The ceiling is measured by a null Offline test in
a child process (LoadGen runs one test per process), ``python -m suite.harness.loadgen_ceiling
OUTDIR THREADS``, and cached per machine and thread count in ``<cache>/loadgen_ceiling.json``:

* the cache keeps the highest figure measured, since an underestimate is the harmful one
  (a query sized below the machine's rate ends before its minimum duration: INVALID);
* a figure measured on a busy machine (1-minute load average above half the cores) is
  provisional: a run more than ``PROVISIONAL_S`` after it measures again, until a quiet
  measurement exists. Each measurement costs a run about 0.4 s (an interpreter, LoadGen
  and 500k samples), which a shared machine that is never quiet would otherwise pay on
  every Offline run.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from suite.errors import SuiteError

#: Samples in the measuring test: about 0.2-1 s on a 2-core machine, and about 225 MB of
#: LoadGen's per-sample state (450 B each, loadgen.md §5).
SAMPLES = 500_000
#: Batches the measuring SUT completes at once: the Offline batch of the fastest cards.
BATCH = 256
CACHE_FILE = "loadgen_ceiling.json"
#: How long a busy machine's figure serves before it is measured again.
PROVISIONAL_S = 600.0


@dataclass(frozen=True)
class Ceiling:
    """One measured ceiling, and the conditions it was measured under."""

    samples_per_s: float
    #: Threads completing samples, as the run's Offline workers do.
    threads: int
    #: The 1-minute load average and core count when it was measured.
    load_average: float
    cores: int
    measured_utc: str
    #: ``time.time()`` when it was measured (for ``PROVISIONAL_S``).
    measured_at: float
    #: True where the machine was quiet: the figure is final for this machine.
    quiet: bool
    #: "measured" now, or "cached" from an earlier run on this machine.
    source: str = "measured"


def machine_key() -> str:
    """What the ceiling depends on: the host, its cores, Python and LoadGen's version."""
    from importlib.metadata import version

    return (f"{platform.node()}|{platform.machine()}|{os.cpu_count()} cores|"
            f"python {platform.python_version()}|loadgen {version('mlcommons-loadgen')}")


def load_average() -> float:
    """The 1-minute load average (0.0 where the platform has none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0.0


def _is_quiet(load: float, cores: int) -> bool:
    return load <= cores / 2


def ceiling(cache_dir: Path, threads: int, timeout_s: float = 120.0) -> Ceiling:
    """This machine's ceiling with ``threads`` completing: the cached one if it was
    measured quiet, else measured now (and cached, keeping the higher figure)."""
    path, key = cache_dir / CACHE_FILE, f"{machine_key()}|{threads} threads"
    cached = _read(path).get(key)
    if cached is not None and (cached.quiet or
                               time.time() - cached.measured_at < PROVISIONAL_S):
        return Ceiling(**{**asdict(cached), "source": "cached"})
    fresh = measure(threads, timeout_s)
    best = fresh if cached is None or fresh.samples_per_s >= cached.samples_per_s else \
        Ceiling(**{**asdict(cached), "quiet": cached.quiet or fresh.quiet, "source": "cached",
                   "measured_at": fresh.measured_at})  # the higher figure, checked now
    _write(path, key, best)
    return best


class _CeilingFailed(SuiteError):
    """The null LoadGen test that measures the ceiling did not finish."""


def measure(threads: int = 1, timeout_s: float = 120.0) -> Ceiling:
    """Run the null Offline test in a child process; its LoadGen samples/s."""
    cores = os.cpu_count() or 1
    load = load_average()
    with tempfile.TemporaryDirectory(prefix="suite-ceiling-") as out:
        # A second try after a crash: the null test's child was killed by SIGSEGV inside
        # LoadGen in two of about ten full `make test` runs here, never twice in a row.
        for _ in range(2):
            proc = subprocess.run([sys.executable, "-m", __name__, out, str(threads)],
                                  capture_output=True, text=True, timeout=timeout_s,
                                  check=False)
            if proc.returncode >= 0:
                break
        if proc.returncode != 0:
            ended = (f"killed by signal {-proc.returncode}" if proc.returncode < 0
                     else f"exit code {proc.returncode}")
            raise _CeilingFailed(f"the LoadGen ceiling test failed ({ended}): "
                                 f"{proc.stderr[-500:].strip() or 'nothing on stderr'}",
                                 hint="the warm-up rate alone sizes the Offline query; "
                                      "offline_rate.json records this as ceiling_source")
        rate = float(proc.stdout.strip().splitlines()[-1])
    load = max(load, load_average())
    return Ceiling(samples_per_s=rate, threads=threads, load_average=round(load, 2), cores=cores,
                   measured_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   measured_at=time.time(),
                   quiet=_is_quiet(load, cores))


def _read(path: Path) -> dict[str, Ceiling]:
    try:
        table = json.loads(path.read_text(encoding="utf-8"))
        return {key: Ceiling(**value) for key, value in table.items()}
    except (OSError, ValueError, TypeError):
        return {}  # none yet, or unreadable: measure again


def _write(path: Path, key: str, value: Ceiling) -> None:
    table = {k: asdict(v) for k, v in _read(path).items()}
    table[key] = {**asdict(value), "source": "measured"}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(table, indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass  # a read-only cache only costs the next run a measurement


def _run_null_test(out: Path, threads: int) -> float:
    """The measuring test itself (in the child): LoadGen's samples/s for a SUT that
    completes every sample at once, in batches through the harness's own ``Completer``,
    the query split between ``threads`` threads as Offline's workers split it."""
    import threading

    import numpy as np

    from suite.harness.loadgen import Completer, run_test
    from suite.harness.settings import LoadGenSettings
    from suite.logs import DETAIL_LOG, parse_detail_log

    model, scenario = "resnet50", "Offline"
    (out / "mlperf.conf").write_text("# the embedded mlperf.conf applies\n", encoding="utf-8")
    (out / "user.conf").write_text("\n".join([
        f"{model}.{scenario}.min_duration = 0",
        f"{model}.{scenario}.min_query_count = {SAMPLES}",
        f"{model}.{scenario}.target_qps = 1",
        f"{model}.{scenario}.performance_sample_count_override = 1024",
    ]) + "\n", encoding="utf-8")
    settings = LoadGenSettings(
        loadgen_model=model, scenario=scenario, mode="performance", qsl_rng_seed=0,
        sample_index_rng_seed=0, schedule_rng_seed=0, mlperf_conf=str(out / "mlperf.conf"),
        user_conf=str(out / "user.conf"), expected_samples=SAMPLES, min_duration_ms=0)
    completer = Completer(np.dtype(np.int64))
    responses = np.zeros(BATCH, dtype=np.int64)

    def complete(ids: list[int]) -> None:
        for start in range(0, len(ids), BATCH):
            chunk = ids[start:start + BATCH]
            completer.complete(chunk, responses[:len(chunk)])

    def issue(ids: list[int], indices: list[int]) -> None:
        share = -(-len(ids) // threads)
        workers = [threading.Thread(target=complete, args=(ids[n * share:(n + 1) * share],))
                   for n in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()

    def nothing(indices: list[int]) -> None:
        return None

    run_test(settings, out, issue, lambda: None, 1024, 1024, nothing, nothing)
    return float(parse_detail_log(out / DETAIL_LOG).get("result_samples_per_second"))


if __name__ == "__main__":
    print(_run_null_test(Path(sys.argv[1]), int(sys.argv[2])))
