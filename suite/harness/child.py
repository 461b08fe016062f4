"""The child process that runs exactly one LoadGen test.

LoadGen cannot run a second test in a process, and a failed callback leaves it corrupt, so
every test gets a fresh process. The parent (``runner``) owns config, display and results;
this one builds the backend, dataset and SUT, runs the test, and reports:

* progress: JSON lines on the pipe ``PROGRESS_FD`` every ``sut.heartbeat_s``; during setup
  they name the ``stage`` ("loading model", ...): a long model load stays alive;
  while LoadGen runs they carry ``live`` (``progress.LiveStatus``: the rate, Server's
  backlog and SUT-side p99 estimate, and early warnings, also kept in ``status.json``);
* control: a ``stop`` line on stdin, EOF on stdin (the parent is gone), SIGTERM or
  SIGHUP, and the parent's death (PR_SET_PDEATHSIG, see ``signals``) all stop the
  test: LoadGen running, the SUT drains; during setup, the process exits at once;
* outcome: ``status.json`` and the exit code (0 completed, 1 failed, 130 interrupted).

A stop exits once its drain has answered and LoadGen's logs are flushed (``_exit_after``);
after a failure's drain, if LoadGen has not returned ``sut.drain_grace_s`` later (an inline
backend call may never return), the process writes its status and exits, keeping the logs.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import json
import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel, ConfigDict

from suite.config.model import RunConfig
from suite.harness import kinds, signals
from suite.harness.child_status import ChildStatus as _Status
from suite.harness.loadgen import run_test
from suite.harness.offline_rate import warm_up
from suite.harness.progress import LiveEstimator, observe_sut
from suite.harness.settings import LoadGenSettings
from suite.harness.sut.batch_stats import BatchTail
from suite.harness.sut.core import SystemUnderTest
from suite.models import Kind
from suite.scenarios import Scenario

EXIT_COMPLETED, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130
NETWORK_SUT_NAME = "infersuite Network SUT"


class ChildSpec(BaseModel):
    """Everything the child needs, written by the parent as ``child_spec.json``."""

    # validators built at first use: a run imports models it never validates
    model_config = ConfigDict(extra="forbid", defer_build=True)

    home: Path
    test_dir: Path
    config: RunConfig
    settings: dict[str, Any]
    qsl_total: int
    qsl_performance: int
    audit_config: Path | None = None
    #: The parent's pid: the child stops itself when it finds another parent.
    parent_pid: int | None = None
    #: The card's kind, decided once by the parent: it picks the SUT the child builds.
    kind: Kind = Kind.TENSOR


class _State:
    """What the child is doing, for the heartbeat and for a stop request."""

    def __init__(self) -> None:
        self.stage = "starting"
        #: (stage, monotonic start) of each setup stage, in order: status.json's
        #: ``setup_stages_s`` says where a run's time before LoadGen went.
        self.stages: list[tuple[str, float]] = [(self.stage, time.monotonic())]
        self.sut: SystemUnderTest | None = None
        #: Set just before LoadGen starts: from then on a stop drains instead of exiting.
        self.running = False
        #: The live estimate, made just before LoadGen starts; fed by the heartbeat only.
        self.live: LiveEstimator | None = None
        self.interrupted = threading.Event()
        self.reason = ""
        self._lock = threading.Lock()

    def enter(self, stage: str) -> None:
        self.stage = stage
        self.stages.append((stage, time.monotonic()))

    def stage_seconds(self) -> dict[str, float]:
        """Seconds spent in each stage before ``running`` (the test's own time)."""
        ends = [start for _, start in self.stages[1:]]
        return {name: round(end - start, 4)
                for (name, start), end in zip(self.stages, ends, strict=False)}

    def first_stop(self, reason: str) -> bool:
        with self._lock:
            if self.interrupted.is_set():
                return False
            self.reason = reason
            self.interrupted.set()
            return True


def _heartbeat(out: TextIO, state: _State, every: float, done: threading.Event) -> None:
    """Beat from the start of setup: a slow model load or compile is alive, not hung."""
    start = time.monotonic()
    running_since: float | None = None
    tail = BatchTail()
    while True:
        finished = done.wait(every)
        sut = state.sut
        if state.running and running_since is None:
            running_since = time.monotonic()
        draining = sut is not None and sut.draining.is_set()
        live: dict[str, Any] = {}
        if state.running and state.live is not None and sut is not None:
            try:
                live = {"live": observe_sut(state.live, sut, tail).to_json()}
            except Exception as exc:
                # The estimate must never silence the heartbeat (the parent kills a silent
                # child): it stops, says why, and the warnings so far stay recorded.
                traceback.print_exc()
                state.live = None
                live = {"live_error": f"the live estimate stopped: {exc!r}"}
        try:
            out.write(json.dumps({
                "stage": "draining" if draining and state.running else state.stage,
                "setup": not state.running,
                "completed": sut.completer.completed if sut else 0,
                # Since LoadGen started: the display's rate must not count the setup.
                "elapsed_s": round(time.monotonic() - running_since, 3) if running_since
                else 0.0,
                "since_start_s": round(time.monotonic() - start, 3),
                "draining": draining,
                "failed": bool(sut.failures) if sut else False,
                **live,
            }) + "\n")
            out.flush()
        except (BrokenPipeError, ValueError, OSError):
            return  # the parent went away; the control pipe's EOF stops the test
        if finished:
            return


def _stop(state: _State, status: _Status, reason: str) -> None:
    """A stop request: drain a running test; during setup there is nothing to keep, exit."""
    if not state.first_stop(reason):
        return
    if not state.running:
        sut = state.sut
        if status.write("interrupted", EXIT_INTERRUPTED, sut, stage="setup",
                        setup_stage=state.stage, reason=reason):
            if sut is not None:
                sut.abandon()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(EXIT_INTERRUPTED)
        return
    assert state.sut is not None
    answered = threading.Event()
    threading.Thread(target=_exit_after, args=(state, answered, status, LOG_FLUSH_S, "the stop"),
                     daemon=True).start()
    state.sut.drain()
    answered.set()


def _control(state: _State, status: _Status) -> None:
    for line in sys.stdin:
        if line.strip() == "stop":
            _stop(state, status, "stop requested by the parent")
            return
    # EOF: the parent exited or closed the pipe; nobody will collect a longer run.
    _stop(state, status, "the parent closed the control pipe")


def run_child(spec: ChildSpec, progress: TextIO) -> int:
    """Run the test described by ``spec``; return the process exit code."""
    config, test_dir = spec.config, spec.test_dir
    status = _Status(test_dir / "status.json", progress)
    settings = LoadGenSettings(**spec.settings)
    state = _State()
    done = threading.Event()
    # Heartbeat and control start before setup: a model load, TensorRT build or compile
    # may take many minutes, and must neither look dead nor ignore a stop.
    threading.Thread(target=_heartbeat, args=(progress, state, config.sut.heartbeat_s, done),
                     name="heartbeat", daemon=True).start()
    threading.Thread(target=_control, args=(state, status), name="control", daemon=True).start()
    signals.on_stop_signals(lambda name: _stop(state, status, f"{name} received"))
    if not signals.die_with_parent(spec.parent_pid):
        _stop(state, status, "the parent exited before the test started")
    drained = threading.Event()
    try:
        state.enter("loading model")
        strategy = kinds.strategy(spec.kind)
        built = strategy.build_sut(spec.home, config, state.enter, drained.set)
        sut = state.sut = built.sut
        status.backend, status.backend_run = built.backend, built.backend_run
        settings = warm_up(sut, settings, config, test_dir)  # sizes Offline's query
        state.enter("starting workers")
        threading.Thread(target=_exit_after, args=(state, drained, status,
                                                   config.sut.drain_grace_s, "the drain"),
                         daemon=True).start()
        sut.start()
    except Exception as exc:
        status.write("failed", EXIT_FAILED, state.sut, stage="setup", setup_stage=state.stage,
                     error=f"{exc}", traceback=traceback.format_exc())
        done.set()
        return EXIT_FAILED

    # Everything alive now (framework modules, compiled graphs, the dataset) lives until
    # the end: freeze it out of the cyclic collector, whose full passes over a
    # torch.compile heap stalled Server queries by 100-300 ms.
    gc.collect()
    gc.freeze()
    if config.sut.switch_interval_us:
        # LoadGen's issue thread needs the GIL for every query; with the default 5 ms
        # switch interval a busy worker can hold it that long, which showed up as
        # 5-10 ms Server tails at a few hundred QPS.
        sys.setswitchinterval(config.sut.switch_interval_us / 1e6)
    server = config.scenario is Scenario.SERVER
    state.live = status.live = LiveEstimator(
        config.scenario.value,
        # An LLM's Server bounds are token latencies (TTFT, TPOT), not this one.
        bound_ms=float(config.loadgen.latency_bound_ms)
        if server and strategy.query_latency_bound else None,
        target_qps=config.loadgen.target_qps if server else None)
    started = time.monotonic()
    state.enter("running")
    state.running = True
    if state.interrupted.is_set():
        sut.drain()  # a stop raced the end of setup: LoadGen answers everything at once
    try:
        run_test(settings, test_dir, sut.issue, sut.flush, spec.qsl_total, spec.qsl_performance,
                 sut.load, sut.unload, spec.audit_config,
                 # a remote backend's run is a network-division run: the checker looks
                 # for "Network SUT" in the logged SUT name
                 sut_name=NETWORK_SUT_NAME if status.backend.get("details", {}).get(
                     "division") == "network" else None)
    finally:
        sut.stop()
        done.set()
    extra = {"loadgen_returned": True, "duration_s": round(time.monotonic() - started, 3),
             "setup_stages_s": state.stage_seconds()}
    if state.interrupted.is_set():
        status.write("interrupted", EXIT_INTERRUPTED, sut, reason=state.reason, **extra)
        return EXIT_INTERRUPTED
    if sut.failures:
        status.write("failed", EXIT_FAILED, sut, stage="run", **extra)
        return EXIT_FAILED
    status.write("completed", EXIT_COMPLETED, sut, **extra)
    return EXIT_COMPLETED


#: A stop never waits out LoadGen's schedule (kept until the minimum duration): once the
#: drain has answered (cut at ``STOP_DEADLINE_S``: an Offline query of millions), LoadGen's
#: IO thread (it flushes every 10 ms) gets ``LOG_FLUSH_S``. Measured: under 2 s, busy.
STOP_DEADLINE_S, LOG_FLUSH_S = 0.5, 0.1


def _exit_after(state: _State, start: threading.Event, status: _Status, grace: float,
                what: str) -> None:
    """``grace`` s after ``start`` (a stop's: at most ``STOP_DEADLINE_S``), exit unless
    LoadGen returned (the main thread then records the outcome)."""
    stop = what == "the stop"
    began, answered = time.monotonic(), start.wait(STOP_DEADLINE_S if stop else None)
    time.sleep(grace)
    code = EXIT_INTERRUPTED if state.interrupted.is_set() else EXIT_FAILED
    why = "the stop did not wait for LoadGen's schedule" if stop else \
        f"LoadGen had not finished {grace:g} s after {what}"
    if status.write("interrupted" if code == EXIT_INTERRUPTED else "failed", code, state.sut,
                    stage="run", loadgen_returned=False, reason=state.reason,
                    note=f"{why}; the process exited with the logs written so far",
                    **({"drain_answered": answered, "exit_after_stop_s":
                        round(time.monotonic() - began, 3)} if stop else {})):
        if state.sut is not None:
            state.sut.abandon()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


#: ``python -m suite.harness.child --await-spec PROGRESS_FD``: started before its test directory
#: exists (``runner.ChildStart``), so the imports above overlap the parent's pre-flight.
AWAIT_SPEC = "--await-spec"


def _adopt_test_dir(test_dir: Path) -> None:
    """Run in the test directory, writing to its harness.log, as a child started there."""
    os.chdir(test_dir)
    sys.stdout.flush()
    sys.stderr.flush()
    log = os.open(test_dir / "harness.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)


def preload_framework(benchmark: str, backend: str) -> None:
    """Import the framework of the run's backend (``backend``, or if "" the default of
    ``benchmark``'s kind) before the spec names it: only a guess from the command line,
    so any failure is left for the run, which imports it again and says what is wrong."""
    from suite.backends import FRAMEWORKS
    from suite.paths import find_paths

    try:
        name = backend or kinds.for_benchmark(find_paths(), benchmark).default_backend
        if module := FRAMEWORKS.get(name):
            importlib.import_module(module)
    except Exception:  # a guess: the run itself reports what is wrong
        pass


def _preload_model(message: str) -> None:
    """Start loading the model of the config the parent sent ahead of the spec
    (``ChildStart.preload``); the test's own load takes it (waiting for it) if the spec's
    config is the same. Anything wrong here is left for the test, which reports it."""
    from suite.harness.sut.loading import preload

    try:
        held = json.loads(message)
        preload(Path(held["home"]), RunConfig.model_validate_json(held["preload"]))
    except Exception:  # a guess: the test's own load reports what is wrong
        pass


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[0] == AWAIT_SPEC:
        # Most runs are of tensor cards: their SUT's modules load while the parent lints,
        # and so does the framework of the run's backend (onnxruntime: ~0.25 s a run).
        kinds.preload(Kind.TENSOR)
        if len(args) >= 4:
            preload_framework(args[2], args[3])
        line = sys.stdin.readline().strip()  # the spec's path, once the parent wrote it
        if line.startswith("{"):  # first the resolved config: load its model meanwhile
            _preload_model(line)  # on a thread: a spec that comes meanwhile is read
            # The heap so far (the imports) is what the test's collection before
            # ``gc.freeze`` would walk: freeze it now, out of that collection. Not
            # collected first: it holds no garbage (a collection here freed 0 of ~40k
            # objects, in 15-30 ms of the child's path to LoadGen).
            gc.freeze()
            line = sys.stdin.readline().strip()
        if not line:
            return EXIT_COMPLETED  # EOF: the parent ran no test (bad input, or it exited)
        spec_path, fd = Path(line), args[1]
        _adopt_test_dir(spec_path.parent)
    else:
        spec_path, fd = Path(args[0]), args[1]
    spec = ChildSpec.model_validate_json(spec_path.read_text(encoding="utf-8"))
    with os.fdopen(int(fd), "w", buffering=1) as progress:
        return run_child(spec, progress)


if __name__ == "__main__":
    exit_code = main()
    # The SUT has stopped and the run is on disk: run the exit hooks (finalizers: a remote
    # backend's counts directory), then skip tearing down the model, dataset and heap.
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)
