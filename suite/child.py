"""The child process that runs exactly one LoadGen test.

LoadGen cannot run a second test in a process, and a failure inside a callback
leaves it corrupt, so every test gets a fresh process (``python -m suite.child
SPEC PROGRESS_FD``). The parent (``runner``) owns config, display and results; this
process only builds the backend, dataset and SUT, runs the test, and reports:

* progress: JSON lines on the pipe ``PROGRESS_FD`` every ``sut.heartbeat_s``;
* control: a ``stop`` line on stdin drains the SUT (Ctrl-C in the parent);
* outcome: ``status.json`` in the test directory, and the exit code
  (0 completed, 1 failed, 130 interrupted).

If LoadGen has not returned ``sut.drain_grace_s`` after a drain (Server keeps its
schedule; an inline backend call may never return), the process writes its status
and exits hard: the logs written so far stay in the test directory.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import threading
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel, ConfigDict

from . import backends, datasets
from .backends import BackendBase, BackendInfo
from .config import RunConfig
from .loadgen import Completer, run_test
from .models import ModelCard, load_card
from .paths import find_paths
from .postprocess import make_postprocess
from .process_workers import WorkerSpec
from .settings import LoadGenSettings
from .sut import SystemUnderTest

EXIT_COMPLETED, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130


class ChildSpec(BaseModel):
    """Everything the child needs, written by the parent as ``child_spec.json``."""

    model_config = ConfigDict(extra="forbid")

    home: Path
    test_dir: Path
    config: RunConfig
    settings: dict[str, Any]
    qsl_total: int
    qsl_performance: int
    audit_config: Path | None = None


class _Status:
    """Writes ``status.json`` exactly once, whichever thread gets there first."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._written = False
        self.backend: dict[str, Any] = {}

    def write(self, status: str, code: int, sut: SystemUnderTest | None, **extra: Any) -> bool:
        with self._lock:
            if self._written:
                return False
            self._written = True
            record = {
                "status": status,
                "exit_code": code,
                "backend": self.backend,
                "failures": sut.failures.failures if sut else [],
                "failed_samples": sut.failures.failed_samples if sut else 0,
                "samples_completed": sut.completer.completed if sut else 0,
                "issue_calls": sut.issue_calls if sut else 0,
                "derived": sut.derived if sut else {},
                **extra,
            }
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
            tmp.replace(self.path)
            return True


def _heartbeat(out: TextIO, sut: SystemUnderTest, every: float, done: threading.Event) -> None:
    start = time.monotonic()
    while True:
        finished = done.wait(every)
        try:
            out.write(json.dumps({
                "completed": sut.completer.completed,
                "elapsed_s": round(time.monotonic() - start, 3),
                "draining": sut.draining.is_set(),
                "failed": bool(sut.failures),
            }) + "\n")
            out.flush()
        except (BrokenPipeError, ValueError):
            return  # the parent went away; LoadGen still finishes and writes its logs
        if finished:
            return


def _control(sut: SystemUnderTest, interrupted: threading.Event) -> None:
    for line in sys.stdin:
        if line.strip() == "stop":
            interrupted.set()
            sut.drain()
            return


def load_model(home: Path, config: RunConfig) -> tuple[ModelCard, BackendBase, BackendInfo]:
    """The run's model card and its backend, loaded (here and in each worker process)."""
    card = load_card(find_paths(home), config.benchmark).with_model_path(
        config.data.model_path)
    backend = backends.create(config.backend, config.backend_options)
    return card, backend, backend.load(card, config.sut.max_batch_size)


def run_child(spec: ChildSpec, progress: TextIO) -> int:
    """Run the test described by ``spec``; return the process exit code."""
    config, test_dir = spec.config, spec.test_dir
    status = _Status(test_dir / "status.json")
    settings = LoadGenSettings(**spec.settings)
    sut: SystemUnderTest | None = None
    try:
        card, backend, info = load_model(spec.home, config)
        status.backend = asdict(info)
        # The parent built the preprocessing cache; here it is only opened.
        dataset = datasets.create(card, config.data)
        postprocess, response_dtype = make_postprocess(card)
        drained = threading.Event()
        sut = SystemUnderTest(
            backend, dataset, postprocess, Completer(response_dtype),
            config.scenario, config.sut, on_drain=drained.set,
            latency_bound_ms=config.loadgen.latency_bound_ms,
            worker_spec=WorkerSpec(spec.home, config),
        )
        sut.warmup()
    except Exception as exc:
        status.write("failed", EXIT_FAILED, sut, stage="setup", error=f"{exc}",
                     traceback=traceback.format_exc())
        return EXIT_FAILED

    interrupted = threading.Event()
    done = threading.Event()
    threading.Thread(target=_heartbeat, args=(progress, sut, config.sut.heartbeat_s, done),
                     daemon=True).start()
    threading.Thread(target=_control, args=(sut, interrupted), daemon=True).start()
    threading.Thread(target=_hard_exit_after_drain,
                     args=(sut, drained, interrupted, status, config.sut.drain_grace_s),
                     daemon=True).start()
    sut.start()
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
    started = time.monotonic()
    try:
        run_test(settings, test_dir, sut.issue, sut.flush, spec.qsl_total, spec.qsl_performance,
                 sut.load, sut.unload, spec.audit_config)
    finally:
        sut.stop()
        done.set()
    extra = {"loadgen_returned": True, "duration_s": round(time.monotonic() - started, 3)}
    if interrupted.is_set():
        status.write("interrupted", EXIT_INTERRUPTED, sut, **extra)
        return EXIT_INTERRUPTED
    if sut.failures:
        status.write("failed", EXIT_FAILED, sut, stage="run", **extra)
        return EXIT_FAILED
    status.write("completed", EXIT_COMPLETED, sut, **extra)
    return EXIT_COMPLETED


def _hard_exit_after_drain(sut: SystemUnderTest, drained: threading.Event,
                           interrupted: threading.Event, status: _Status, grace: float) -> None:
    drained.wait()
    time.sleep(grace)
    # LoadGen is still running (Server keeps its schedule, or an inline call hangs).
    code = EXIT_INTERRUPTED if interrupted.is_set() else EXIT_FAILED
    name = "interrupted" if interrupted.is_set() else "failed"
    if status.write(name, code, sut, stage="run", loadgen_returned=False,
                    note=f"LoadGen had not finished {grace:g} s after the drain; "
                    "the process exited with the logs written so far"):
        sut.abandon()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    spec = ChildSpec.model_validate_json(Path(args[0]).read_text(encoding="utf-8"))
    with os.fdopen(int(args[1]), "w", buffering=1) as progress:
        return run_child(spec, progress)


if __name__ == "__main__":
    sys.exit(main())
