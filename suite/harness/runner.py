"""The parent side of one LoadGen test: spawn the child, watch it, collect its evidence.

The parent never imports LoadGen. It writes the child's spec and conf files, starts
``python -m suite.harness.child`` in its own session (so a terminal Ctrl-C reaches only the
parent, which then asks the child to stop through its stdin), relays progress (with the
child's live figures and early warnings, ``progress.LiveStatus``) and its setup stage,
kills a child that stops sending heartbeats or whose setup never ends, and turns the
child's ``status.json`` and LoadGen's logs into a ``TestResult``.

A performance test is VALID or INVALID only by LoadGen's verdict in its detail log: a
missing or incomplete log fails the test, naming the file. Only a completed test carries
a performance summary: an interrupted or failed test's numbers (a drain answers every
outstanding sample at once) are no measurement.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from suite.config.model import RunConfig
from suite.errors import ConfigError, SuiteError
from suite.harness.child_start import ChildStart, child_pythonpath
from suite.harness.progress import LiveSink, LiveStatus, ProgressCallback
from suite.harness.settings import write_settings
from suite.logs import DETAIL_LOG, parse_detail_log
from suite.models import Kind
from suite.results import PerformanceSummary, Status, TestResult, summarize_performance
from suite.scenarios import Mode

#: Called with the child's stage when it changes ("loading model", ..., "running").
StageCallback = Callable[[str], None]

#: Silence tolerated beyond the SUT's own watchdog and drain grace before the child is
#: presumed dead (its heartbeat thread beats every ``sut.heartbeat_s``, setup included).
LIVENESS_SLACK_S = 30.0
#: Extra silence allowed before the first heartbeat: interpreter start and imports.
STARTUP_ALLOWANCE_S = 90.0
#: A child still alive this long after a stop request is ended (SIGKILL). It exits by
#: itself within about 0.6 s (``child.STOP_DEADLINE_S``) unless one native call holds its
#: interpreter: LoadGen handing an Offline query of millions of samples to Python takes
#: seconds, and no thread of the child runs meanwhile. Its logs so far stay on disk
#: (LoadGen's IO thread flushes them every 10 ms).
STOP_KILL_S = 1.0
#: The longest a child may stay in setup while it still beats (a model load, a cold
#: TensorRT INT8 build, compiling every batch size): it catches a setup that hangs with
#: its heartbeat thread alive. ``sut.setup_timeout_s`` overrides it where the config has it.
SETUP_TIMEOUT_S = 4 * 3600.0


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
    raise ConfigError(f"could not create a fresh run directory under {runs_dir}: 999 "
                      "names for this second are taken", hint="use another --runs-dir")


@dataclass
class _Watch:
    last_beat: float
    beats: int = 0
    completed: int = 0
    stage: str = "starting"
    setup: bool = True
    #: Why the child could not write status.json (a full disk), if it said so.
    status_error: str = ""
    #: The latest live figures the child sent (None before LoadGen runs).
    live: LiveStatus | None = None


def _relay(pipe: Any, watch: _Watch, expected: int | None,
           on_progress: ProgressCallback | None, on_stage: StageCallback | None,
           settings_file: Path | None = None) -> None:
    for line in pipe:
        try:
            beat = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "status_error" in beat:
            watch.status_error = str(beat["status_error"])
            continue
        watch.last_beat = time.monotonic()
        watch.beats += 1
        watch.completed = int(beat.get("completed", 0))
        watch.setup = bool(beat.get("setup", False))
        stage = str(beat.get("stage", "running"))
        if stage != watch.stage:
            watch.stage = stage
            if stage == "running" and settings_file is not None:
                # An Offline query sized at warm-up (offline_rate) holds another count.
                expected = _expected_samples(settings_file, expected)
            if on_stage is not None:
                on_stage(stage)
        live = beat.get("live")
        if isinstance(live, dict):
            watch.live = LiveStatus.from_json(live)
            if watch.live is not None and isinstance(on_progress, LiveSink):
                on_progress.live(watch.live)
        if on_progress is not None and not watch.setup:
            on_progress(watch.completed, expected, float(beat.get("elapsed_s", 0.0)))


def _expected_samples(settings_file: Path, fallback: int | None) -> int | None:
    """The sample count the child's ``settings.json`` holds now, else ``fallback``."""
    try:
        value = json.loads(settings_file.read_text(encoding="utf-8")).get("expected_samples")
    except (OSError, ValueError, AttributeError):
        return fallback
    return int(value) if isinstance(value, int) else fallback


def _liveness_limit(config: RunConfig, watch: _Watch) -> float:
    base = config.sut.watchdog_timeout_s + config.sut.drain_grace_s + LIVENESS_SLACK_S
    return base if watch.beats else base + STARTUP_ALLOWANCE_S


def _setup_limit(config: RunConfig) -> float:
    return float(getattr(config.sut, "setup_timeout_s", SETUP_TIMEOUT_S))


def run_in_child(
    config: RunConfig,
    mode: Mode,
    test_dir: Path,
    home: Path,
    on_progress: ProgressCallback | None = None,
    audit_config: Path | None = None,
    dataset_size: int | None = None,
    on_stage: StageCallback | None = None,
    started: ChildStart | None = None,
    kind: Kind = Kind.TENSOR,
) -> TestResult:
    """Run one LoadGen test in a fresh child process and collect its result.

    ``dataset_size`` is the QSL's total count when the dataset at hand is not the
    round's full one (a user's subset, a test fixture); default: the round's size.
    """
    total = dataset_size if dataset_size is not None else \
        config.resolved_rules.benchmark.dataset_size
    settings = write_settings(config, mode, test_dir, total)
    spec = {
        "home": str(home),
        "test_dir": str(test_dir),
        "config": json.loads(config.model_dump_json()),
        "settings": json.loads(settings.to_json()),
        "qsl_total": total,
        "qsl_performance": config.loadgen.performance_sample_count,
        "audit_config": str(audit_config) if audit_config else None,
        "parent_pid": os.getpid(),
        "kind": kind.value,
    }
    spec_path = test_dir / "child_spec.json"
    spec_path.write_text(json.dumps(spec, indent=2) + "\n", encoding="utf-8")

    with (test_dir / "harness.log").open("w", encoding="utf-8") as log:
        if started is not None and not started.used:
            started.used = True
            child, read_fd = started.process, started.read_fd
            with contextlib.suppress(BrokenPipeError, OSError):  # dead: collected below
                assert child.stdin is not None
                child.stdin.write(f"{spec_path}\n")
                child.stdin.flush()
        else:
            started = None
            read_fd, write_fd = os.pipe()
            env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=_child_pythonpath())
            child = subprocess.Popen(
                [sys.executable, "-m", "suite.harness.child", str(spec_path), str(write_fd)],
                stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, cwd=test_dir,
                pass_fds=(write_fd,), start_new_session=True, env=env, text=True,
            )
            os.close(write_fd)
        watch = _Watch(last_beat=time.monotonic())
        with os.fdopen(read_fd, encoding="utf-8") as pipe:
            relay = threading.Thread(
                target=_relay,
                args=(pipe, watch, settings.expected_samples, on_progress, on_stage,
                      test_dir / "settings.json"),
                daemon=True,
            )
            relay.start()
            interrupted, killed = _wait(child, config, watch,
                                        lambda why: _stopping(test_dir.parent, why))
            relay.join(timeout=2.0)
    if started is not None:  # what it wrote before it had a test directory (an import error)
        started.early_log.seek(0)
        if early := started.early_log.read():
            with (test_dir / "harness.log").open("a", encoding="utf-8") as log:
                log.write(early)
        started.early_log.close()
    if killed and not (test_dir / "status.json").exists():
        _parent_status(test_dir, interrupted, child.returncode, killed)
    return collect_test(config, mode, test_dir, child.returncode, bool(interrupted),
                        killed or _status_error(watch), interrupted)


def _parent_status(test_dir: Path, interrupted: str, returncode: int, killed: str) -> None:
    """``status.json`` for a child the parent ended before it wrote its own (a stop on a
    machine so busy that the child could not exit within ``STOP_KILL_S``, a child that
    went silent): the test's record says what happened, by whom, and that the child's
    own counts are missing. Written atomically; a full disk leaves FAILED.txt's account."""
    record = {"status": "interrupted" if interrupted else "failed",
              "exit_code": 130 if interrupted else (returncode if returncode > 0 else 1),
              "reason": interrupted or killed, "note": killed,
              "written_by": "the parent: the child was ended before it wrote its status",
              "child_returncode": returncode}
    tmp = test_dir / "status.json.tmp"
    with contextlib.suppress(OSError):
        tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        tmp.replace(test_dir / "status.json")


def _status_error(watch: _Watch) -> str:
    return f"the child could not record its outcome: {watch.status_error}" \
        if watch.status_error else ""


_child_pythonpath = child_pythonpath


def _stopping(run_dir: Path, why: str) -> None:
    """STATUS says at once that the run is stopping (the final status follows)."""
    with contextlib.suppress(OSError):
        (run_dir / "STATUS").write_text(
            f"STOPPING since {time.strftime('%Y-%m-%dT%H:%M:%S%z')} ({why}): answering the "
            "outstanding queries; the logs are kept\n", encoding="utf-8")


def _wait(child: subprocess.Popen[str], config: RunConfig, watch: _Watch,
          on_stop: Callable[[str], None] = lambda why: None) -> tuple[str, str]:
    """Wait for the child; forward Ctrl-C (and TERM, HUP: see ``signals``) as a stop
    request; kill it if it goes silent, or if its setup outlasts the setup bound.

    Returns (what interrupted the run, or "", why the child was killed, or "").
    """
    interrupted, killed = "", ""
    stop_deadline: float | None = None
    setup_deadline = time.monotonic() + _setup_limit(config)
    with _ExitWatch(child.pid) as exited:
        while True:
            try:
                if child.poll() is not None:
                    return interrupted, killed
                now = time.monotonic()
                if stop_deadline is not None and now > stop_deadline:
                    child.kill()
                    stop_deadline = None
                    killed = (f"the child had not exited {STOP_KILL_S:g} s after the stop "
                              "request and was ended")
                elif now - watch.last_beat > _liveness_limit(config, watch):
                    child.kill()
                    killed = (f"the child sent no heartbeat for {now - watch.last_beat:.0f} s "
                              "and was killed")
                elif watch.setup and now > setup_deadline and not interrupted:
                    child.kill()
                    killed = (f"setup did not finish within {_setup_limit(config):g} s (stage: "
                              f"{watch.stage}); the child was killed")
                exited.nap(0.05)
            except KeyboardInterrupt as exc:
                if interrupted:  # a second Ctrl-C: stop waiting politely
                    child.kill()
                    killed = "killed after a second interrupt"
                    continue
                # ``signals.interrupt_on_termination`` names the signal; Ctrl-C names none.
                interrupted = str(exc.args[0]) if exc.args else "Ctrl-C"
                on_stop(interrupted)
                with contextlib.suppress(BrokenPipeError, OSError, ValueError):
                    assert child.stdin is not None
                    child.stdin.write("stop\n")
                    child.stdin.flush()
                stop_deadline = time.monotonic() + STOP_KILL_S


class _ExitWatch:
    """Naps until a process exits or the nap ends: a pidfd wakes the parent the moment the
    child ends (a plain 50 ms poll cost every run 25 ms on average)."""

    def __init__(self, pid: int) -> None:
        self.fd: int | None = None
        self.poll = select.poll()  # not select(): it refuses descriptors past 1023
        with contextlib.suppress(AttributeError, OSError):  # before Linux 5.3: plain naps
            self.fd = os.pidfd_open(pid)
            self.poll.register(self.fd, select.POLLIN)

    def __enter__(self) -> _ExitWatch:
        return self

    def __exit__(self, *_: object) -> None:
        if self.fd is not None:
            os.close(self.fd)

    def nap(self, seconds: float) -> None:
        if self.fd is None:
            time.sleep(seconds)
        else:
            self.poll.poll(seconds * 1000)


def collect_test(config: RunConfig, mode: Mode, test_dir: Path, returncode: int,
                 interrupted: bool, killed: str = "", interrupt_reason: str = "") -> TestResult:
    """The ``TestResult`` of a finished child, from its ``status.json`` and LoadGen's logs."""
    status_path = test_dir / "status.json"
    child: dict[str, Any] = {}
    if status_path.is_file():
        with contextlib.suppress(json.JSONDecodeError):
            child = json.loads(status_path.read_text(encoding="utf-8"))
    state = child.get("status")
    message = ""
    performance: PerformanceSummary | None = None
    if interrupted or state == "interrupted":
        status = Status.INTERRUPTED
        message = f"interrupted ({interrupt_reason or child.get('reason') or 'Ctrl-C'})" + (
            f"; {killed}" if killed else "")
    elif state == "completed" and returncode == 0:
        status = Status.VALID
        if mode is Mode.PERFORMANCE:
            performance, problem = _performance(config, test_dir / DETAIL_LOG)
            if performance is None:
                status, message = Status.FAILED, problem
            elif not performance.is_valid:
                status = Status.INVALID
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


def _performance(config: RunConfig, detail: Path) -> tuple[PerformanceSummary | None, str]:
    """LoadGen's verdict from a completed test's detail log, or why there is none."""
    try:
        performance = summarize_performance(parse_detail_log(detail), config.scenario)
    except SuiteError:
        return None, f"LoadGen's detail log {detail} is missing; no verdict without it"
    except (OSError, ValueError, TypeError) as exc:
        return None, f"LoadGen's detail log {detail} is unreadable ({exc}); no verdict"
    if performance.result_validity is None:
        # LoadGen writes its verdict last: a log without it was cut short.
        return None, (f"LoadGen's detail log {detail} has no result_validity record "
                      "(truncated or not LoadGen's); no verdict without it")
    return performance, ""


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
