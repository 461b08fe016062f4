"""The parent side of one LoadGen test: spawn the child, watch it, collect its evidence.

The parent never imports LoadGen. It writes the child's spec and conf files, starts
``python -m suite.child`` in its own session (so a terminal Ctrl-C reaches only the
parent, which then asks the child to stop through its stdin), relays progress, kills
a child that stops sending heartbeats, and turns the child's ``status.json`` and
LoadGen's logs into a ``TestResult``.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .config import RunConfig
from .logs import DETAIL_LOG, parse_detail_log
from .results import PerformanceSummary, Status, TestResult, summarize_performance
from .rules import RuleSet
from .scenarios import Mode
from .settings import write_settings

#: Called with (completed samples, expected samples or None, elapsed seconds).
ProgressCallback = Callable[[int, int | None, float], None]


def create_run_dir(runs_dir: Path, benchmark: str, scenario: str, mode: str) -> Path:
    """A new ``runs/<UTC timestamp>_<benchmark>_<scenario>_<mode>/``; never reuses one."""
    runs_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    base = f"{stamp}_{benchmark}_{scenario}_{mode}"
    for attempt in range(1, 1000):
        path = runs_dir / (base if attempt == 1 else f"{base}-{attempt}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise RuntimeError(f"could not create a fresh run directory under {runs_dir}")


@dataclass
class _Watch:
    last_beat: float
    beats: int = 0
    completed: int = 0


def _relay(pipe: Any, watch: _Watch, expected: int | None,
           on_progress: ProgressCallback | None) -> None:
    for line in pipe:
        try:
            beat = json.loads(line)
        except json.JSONDecodeError:
            continue
        watch.last_beat = time.monotonic()
        watch.beats += 1
        watch.completed = int(beat.get("completed", 0))
        if on_progress is not None:
            on_progress(watch.completed, expected, float(beat.get("elapsed_s", 0.0)))


def _liveness_limit(config: RunConfig, watch: _Watch) -> float:
    # Before the first heartbeat the child is loading the model and warming up.
    base = config.sut.watchdog_timeout_s + config.sut.drain_grace_s + 30.0
    return base if watch.beats else 2 * base + 60.0


def run_in_child(
    config: RunConfig,
    rules: RuleSet,
    mode: Mode,
    test_dir: Path,
    home: Path,
    on_progress: ProgressCallback | None = None,
    audit_config: Path | None = None,
    dataset_size: int | None = None,
) -> TestResult:
    """Run one LoadGen test in a fresh child process and collect its result.

    ``dataset_size`` is the QSL's total count when the dataset at hand is not the
    round's full one (a user's subset, a test fixture); default: the round's size.
    """
    bench = rules.benchmark(config.benchmark)
    total = dataset_size if dataset_size is not None else bench.dataset_size
    settings = write_settings(config, rules, mode, test_dir, total)
    spec = {
        "home": str(home),
        "test_dir": str(test_dir),
        "config": json.loads(config.model_dump_json()),
        "settings": json.loads(settings.to_json()),
        "qsl_total": total,
        "qsl_performance": config.loadgen.performance_sample_count,
        "audit_config": str(audit_config) if audit_config else None,
    }
    spec_path = test_dir / "child_spec.json"
    spec_path.write_text(json.dumps(spec, indent=2) + "\n", encoding="utf-8")

    read_fd, write_fd = os.pipe()
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=_child_pythonpath())
    with (test_dir / "harness.log").open("w", encoding="utf-8") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", "suite.child", str(spec_path), str(write_fd)],
            stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, cwd=test_dir,
            pass_fds=(write_fd,), start_new_session=True, env=env, text=True,
        )
        os.close(write_fd)
        watch = _Watch(last_beat=time.monotonic())
        with os.fdopen(read_fd, encoding="utf-8") as pipe:
            relay = threading.Thread(
                target=_relay, args=(pipe, watch, settings.expected_samples, on_progress),
                daemon=True,
            )
            relay.start()
            interrupted, killed = _wait(child, config, watch)
            relay.join(timeout=2.0)
    return _collect(config, mode, test_dir, child.returncode, interrupted, killed)


def _child_pythonpath() -> str:
    """The parent's import roots, made absolute: the child runs in its test directory."""
    package_root = str(Path(__file__).resolve().parent.parent)
    entries = [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
               if p]
    return os.pathsep.join(dict.fromkeys([package_root, *entries]))


def _wait(child: subprocess.Popen[str], config: RunConfig, watch: _Watch) -> tuple[bool, str]:
    """Wait for the child; forward Ctrl-C as a stop request; kill it if it goes silent."""
    interrupted, killed = False, ""
    stop_deadline: float | None = None
    while True:
        try:
            if child.poll() is not None:
                return interrupted, killed
            now = time.monotonic()
            if stop_deadline is not None and now > stop_deadline:
                child.kill()
                killed = "the child did not stop after the interrupt"
            elif now - watch.last_beat > _liveness_limit(config, watch):
                child.kill()
                killed = (f"the child sent no heartbeat for {now - watch.last_beat:.0f} s "
                          "and was killed")
            time.sleep(0.05)
        except KeyboardInterrupt:
            if interrupted:  # a second Ctrl-C: stop waiting politely
                child.kill()
                killed = "killed after a second interrupt"
                continue
            interrupted = True
            with contextlib.suppress(BrokenPipeError, OSError, ValueError):
                assert child.stdin is not None
                child.stdin.write("stop\n")
                child.stdin.flush()
            stop_deadline = time.monotonic() + config.sut.drain_grace_s + 15.0


def _collect(config: RunConfig, mode: Mode, test_dir: Path, returncode: int, interrupted: bool,
             killed: str) -> TestResult:
    status_path = test_dir / "status.json"
    child: dict[str, Any] = {}
    if status_path.is_file():
        with contextlib.suppress(json.JSONDecodeError):
            child = json.loads(status_path.read_text(encoding="utf-8"))
    performance: PerformanceSummary | None = None
    detail = test_dir / DETAIL_LOG
    if mode is Mode.PERFORMANCE and detail.is_file():
        with contextlib.suppress(Exception):  # a truncated log stays a failed test's evidence
            performance = summarize_performance(parse_detail_log(detail), config.scenario)

    state = child.get("status")
    message = ""
    if interrupted or state == "interrupted":
        status = Status.INTERRUPTED
        message = "interrupted (Ctrl-C)"
    elif state == "completed" and returncode == 0:
        status = Status.VALID if performance is None or performance.is_valid else Status.INVALID
    else:
        status = Status.FAILED
        message = _failure_message(child, returncode, killed)
    return TestResult(
        mode=mode.value,
        directory=str(test_dir),
        status=status,
        exit_code=returncode,
        failures=child.get("failures", []),
        failed_samples=int(child.get("failed_samples", 0)),
        message=message,
        performance=performance,
        backend=child.get("backend", {}),
    )


def _failure_message(child: dict[str, Any], returncode: int, killed: str) -> str:
    if killed:
        return killed
    if child.get("stage") == "setup":
        return f"setup failed: {child.get('error', 'unknown error')}"
    failures = child.get("failures") or []
    if failures:
        first = failures[0]
        return f"{first['kind']}: {first['message']}"
    if not child:
        return f"the child process died (exit code {returncode}) without a status; see harness.log"
    return f"the test failed (exit code {returncode})"
