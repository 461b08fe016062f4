"""How many samples an Offline query holds, sized from the run's own warm-up.

LoadGen issues Offline's single query as ``1.1 x min_duration x offline_expected_qps``
samples, and a test whose samples are done before ``min_duration`` is INVALID ("Min
duration satisfied : NO"). A scenario file's ``expected_qps`` is a guess written for some
machine; where it is only that (``settings.expected_qps_is_a_guess``: nobody set it for
this one), the child replaces it at the end of warm-up with

    expected_qps = HEADROOM x min(warm-up rate, LoadGen's ceiling)

(``QUICK_HEADROOM`` for a ``--quick`` run: its test lasts about a second, so a generous
margin costs a second or two, while a probe on a busy machine once read 2.7x low and
sized a quick run that ended before its minimum duration.)

* the warm-up rate: full batches through the backend on ``sut.workers`` threads at once
  for about ``PROBE_S`` (after ``sut.warmup``, so nothing is cold). Inference only, so it is
  above the run's rate, which adds the gather, postprocessing and completion;
* LoadGen's ceiling (``loadgen_ceiling``): the samples/s LoadGen and the completion path
  sustain with no inference on this machine, with as many completing threads. A backend
  faster than LoadGen (the null backend) has a warm-up rate that says nothing of the
  run's; the ceiling bounds it. It is measured only where it can matter (``CEILING_FROM``).

The run cannot beat either rate, however well the two overlap, so ``min`` is an upper
bound of the run's rate and the estimate errs long, never short: an overestimate only
lengthens the test (by at most ``1.1 x HEADROOM x min / run's rate``), an underestimate
makes it INVALID. ``HEADROOM`` covers a machine that was busier during the 0.3 s probe
than during the run.

The decision is recorded where LoadGen and a reader find it: the ``user.conf`` line LoadGen
reads (with comments saying where it came from), ``settings.json``, ``offline_rate.json``
and the numbers in ``status.json`` ``derived``.
"""

from __future__ import annotations

import json
import math
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from suite.config.model import MAX_QPS
from suite.errors import SuiteError
from suite.harness.settings import LoadGenSettings, equal_issue_padded

if TYPE_CHECKING:
    from suite.config.model import RunConfig
    from suite.harness.sut.core import SystemUnderTest

#: Margin over the upper bound: a probe on a busy moment reads low (see above).
HEADROOM = 1.5
#: A --quick run's margin (see above): LoadGen issues 1.1 x min_duration x expected_qps
#: samples, so 3.0 covers a probe that read up to 3.3x low.
QUICK_HEADROOM = 3.0
#: How long the warm-up rate is measured at most (each worker's batches keep going until
#: then), and at least, where each worker has made ``PROBE_CALLS`` timed calls by then: a
#: fast backend's rate is known in milliseconds, and every run pays this time.
PROBE_S = 0.3
MIN_PROBE_S = 0.05
PROBE_CALLS = 20
#: Below this warm-up rate LoadGen's ceiling is left unmeasured: LoadGen's binding
#: completes at least 480k samples/s even one call per sample on a busy 2-vCPU box
#: (loadgen.md §0), so it cannot be the smaller rate.
CEILING_FROM = 50_000.0
RECORD_FILE = "offline_rate.json"


@dataclass(frozen=True)
class OfflineRate:
    """What the child decided for the Offline query, and from what."""

    expected_qps: float
    #: The scenario file's (or default) value it replaces, and where that came from.
    guess: float
    guess_source: str
    warmup_samples_per_s: float
    #: Threads and batch size of the measurement, and its length.
    workers: int
    batch: int
    probe_s: float
    #: LoadGen's ceiling in samples/s (0: not measured, see ``CEILING_FROM``) and whether it
    #: was measured now or cached from an earlier run on this machine.
    loadgen_ceiling_samples_per_s: float
    ceiling_source: str
    headroom: float
    expected_samples: int
    source: str

    def derived(self) -> dict[str, float]:
        """The figures for ``status.json`` ``derived`` (numbers only)."""
        return {"offline_expected_qps": self.expected_qps,
                "offline_warmup_samples_per_s": self.warmup_samples_per_s,
                "offline_loadgen_ceiling_samples_per_s": self.loadgen_ceiling_samples_per_s,
                "offline_expected_qps_headroom": self.headroom}


def estimate(warmup: float, ceiling: float, headroom: float = HEADROOM) -> float:
    """``headroom x min(warmup, ceiling)``; a ceiling of 0 is not measured."""
    return headroom * (min(warmup, ceiling) if ceiling > 0 else warmup)


def warm_up(sut: Any, settings: LoadGenSettings, config: RunConfig,
            test_dir: Path) -> LoadGenSettings:
    """``sut.warmup()``, then, where ``settings`` says the Offline rate is a guess, size
    the query from this run and return the settings LoadGen is to use."""
    sut.warmup()
    from suite.harness.sut.core import SystemUnderTest

    if not settings.expected_qps_guess or not isinstance(sut, SystemUnderTest):
        return settings  # set for this machine, or an LLM SUT (no batch to time)
    try:
        rate = size_query(sut, settings, config)
    except (SuiteError, subprocess.TimeoutExpired) as exc:
        # A backend that fails or hangs here fails the same way in the test, where the
        # SUT records it per sample (and its watchdog ends a hang): keep the guess.
        (test_dir / RECORD_FILE).write_text(json.dumps({
            "derived": False, "reason": str(exc), "expected_qps": config.loadgen.expected_qps,
            "source": "the guess, kept: the warm-up probe did not measure a rate"},
            indent=2) + "\n", encoding="utf-8")
        return settings
    apply(rate, settings, test_dir)
    sut.derived = {**sut.derived, **rate.derived()}
    return replace(settings, expected_samples=rate.expected_samples)


def size_query(sut: SystemUnderTest, settings: LoadGenSettings,
               config: RunConfig) -> OfflineRate:
    """Measure the warm-up rate (and LoadGen's ceiling where it matters) and decide."""
    from suite.harness import loadgen_ceiling

    workers, batch = max(1, config.sut.workers), config.sut.max_batch_size
    warm = probe(sut, workers, batch, limit_s=config.sut.watchdog_timeout_s)
    ceiling, ceiling_source = 0.0, "not measured: the warm-up rate is far below it"
    if warm >= CEILING_FROM:
        try:
            measured = loadgen_ceiling.ceiling(Path(config.data.cache_dir), workers)
        except (SuiteError, subprocess.TimeoutExpired) as exc:
            # The warm-up rate stands alone: without the ceiling a fast backend's query
            # is sized larger, so the run lasts longer than its minimum, never shorter.
            ceiling_source = f"not measured: {exc}"
        else:
            ceiling = measured.samples_per_s
            ceiling_source = (f"{measured.source} on this machine with {workers} completing "
                              f"threads ({measured.measured_utc}, load average "
                              f"{measured.load_average:g} on {measured.cores} cores)")
    headroom = QUICK_HEADROOM if config.quick else HEADROOM
    expected = min(estimate(warm, ceiling, headroom), MAX_QPS)
    lg = config.loadgen
    samples = equal_issue_padded(
        max(lg.min_query_count, math.floor(1.1 * lg.min_duration_ms / 1000 * expected)),
        settings.equal_issue_set)
    guess = lg.expected_qps
    where = config.provenance.get("loadgen.expected_qps", "default")
    ceiling_text = f" and LoadGen's ceiling {ceiling:,.0f} samples/s" if ceiling else ""
    return OfflineRate(
        expected_qps=round(expected, 1), guess=guess, guess_source=where,
        warmup_samples_per_s=round(warm, 1), workers=workers, batch=batch, probe_s=PROBE_S,
        loadgen_ceiling_samples_per_s=round(ceiling, 1), ceiling_source=ceiling_source,
        headroom=headroom, expected_samples=samples,
        source=(f"derived at warm-up: {headroom:g} x min(warm-up rate, LoadGen's ceiling) "
                f"from the warm-up rate {warm:,.0f} samples/s ({workers} threads, batches "
                f"of {batch}){ceiling_text}; replaces the guess {guess:,.0f} from {where}"))


class ProbeFailed(SuiteError):
    """The warm-up probe's backend call raised, or did not return within the limit."""


def probe(sut: SystemUnderTest, workers: int, batch: int, seconds: float = PROBE_S,
          limit_s: float = 60.0) -> float:
    """Samples/s of full batches through the backend on ``workers`` threads at once, as
    Offline's workers run them; each thread's first call is untimed (per-thread state).
    ``ProbeFailed`` when a call raises or the probe outlasts ``limit_s`` (the SUT's
    watchdog bound): the probe's threads are daemons, and a hung one is left behind."""
    backend, dataset = sut.backend, sut.dataset
    start = [0.0]
    # The clock starts when the last thread has made its untimed call (the action runs
    # once, before any thread is released).
    ready = threading.Barrier(workers, action=lambda: start.__setitem__(0, time.perf_counter()))
    done: list[tuple[int, float]] = []  # (samples, end) per thread
    errors: list[str] = []

    def work() -> None:
        try:
            timed()
        except threading.BrokenBarrierError:
            pass  # another thread failed first
        except Exception as exc:  # the backend's own errors, whatever their type
            errors.append(f"{type(exc).__name__}: {exc}")
            ready.abort()

    def timed() -> None:
        buffer = backend.input_buffer(batch, dataset.sample_shape, str(dataset.dtype))
        if buffer is None:
            buffer = dataset.new_buffer(batch)
        buffer.fill(0)  # uninitialised memory can hold NaN
        backend.predict(buffer[:batch])
        ready.wait()
        samples, calls, deadline = 0, 0, start[0] + seconds
        enough = start[0] + min(MIN_PROBE_S, seconds)
        while True:  # at least one timed call, however slow
            backend.predict(buffer[:batch])
            samples, calls = samples + batch, calls + 1
            now = time.perf_counter()
            if now >= deadline or (calls >= PROBE_CALLS and now >= enough):
                break
        done.append((samples, now))

    threads = [threading.Thread(target=work, name=f"offline-probe-{n}", daemon=True)
               for n in range(workers)]
    for thread in threads:
        thread.start()
    until = time.perf_counter() + limit_s + seconds
    for thread in threads:
        thread.join(max(0.0, until - time.perf_counter()))
    if errors:
        raise ProbeFailed(f"the warm-up probe's backend call failed: {errors[0]}")
    if any(thread.is_alive() for thread in threads):
        ready.abort()
        raise ProbeFailed(f"the warm-up probe's backend call took over {limit_s:g} s")
    total = sum(samples for samples, _ in done)
    return total / max(max(end for _, end in done) - start[0], 1e-9)


def apply(rate: OfflineRate, settings: LoadGenSettings, test_dir: Path) -> None:
    """Write the decision where LoadGen reads it (user.conf) and where a reader looks."""
    key = f"{settings.loadgen_model}.{settings.scenario}.target_qps = "
    path = Path(settings.user_conf)
    lines = path.read_text(encoding="utf-8").splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(key))
    if at and lines[at - 1].startswith("# loadgen.expected_qps"):
        at -= 1
        del lines[at]
    lines[at:at + 1] = [f"# loadgen.expected_qps {rate.source}", f"{key}{rate.expected_qps!r}"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (test_dir / RECORD_FILE).write_text(json.dumps(asdict(rate), indent=2) + "\n",
                                        encoding="utf-8")
    record = json.loads((test_dir / "settings.json").read_text(encoding="utf-8"))
    record["expected_samples"] = rate.expected_samples
    record["offline_expected_qps"] = rate.expected_qps
    (test_dir / "settings.json").write_text(json.dumps(record, indent=2) + "\n",
                                            encoding="utf-8")
