"""Shared helpers: run the real CLI in a subprocess, find its run directory."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from suite.paths import Paths, find_paths

REPO = Path(__file__).resolve().parent.parent

# Fixtures shared by a unit module and its integration counterpart (pytest finds them by
# name): the backend variants, the generated round trees, a report page of real runs.
# The `timing` marker's hook is a plugin of its own (tests.support.timing), so that
# tests/unit/core/test_timing_marker.py can run it on tests of its own with pytester.
# tests.support.xdist_scopes keeps a module's tests on one xdist worker when they share a
# module- or session-scoped fixture (make test's -n 2), so the fixture is built once;
# tests.support.tinylm_runs holds tinylm's runs, which the LLM integration modules share;
# tests.support.stand_in_runs each task card's Offline stand-in run (torch test, audit).
pytest_plugins = ["tests.support.backend_variants", "tests.support.round_trees",
                  "tests.support.html_pages", "tests.support.timing",
                  "tests.support.xdist_scopes", "tests.support.tinylm_runs",
                  "tests.support.stand_in_runs", "pytester"]

# The user's config directory (tuned settings, default keys) is the test session's own:
# settings `suite tune` wrote on this machine must not change what a test run does.
# Removed when the process ends: each pytest process (the controller and every xdist
# worker) makes one, and they used to pile up in the system's temporary directory.
_CONFIG_HOME = tempfile.mkdtemp(prefix="suite-tests-config-")
os.environ["XDG_CONFIG_HOME"] = _CONFIG_HOME  # in-process calls too (suite.paths)
atexit.register(shutil.rmtree, _CONFIG_HOME, True)

# The suite's bytecode, compiled once by the controller before any worker or subprocess
# starts. Every LoadGen child (`python -m suite.harness.child`), server and engine a test
# starts is a fresh interpreter, and where PYTHONDONTWRITEBYTECODE is set (as on this
# project's machines) each one compiled every suite module it imports from source
# again: about 0.06 CPU-s a child, hundreds of times a session. Python still reads bytecode
# under that variable; it only never writes it. The files go where Python puts them
# (suite/**/__pycache__, ignored by git) and are checked against their sources' mtime and
# size at import, as always; an installed wheel ships the same.
if "PYTEST_XDIST_WORKER" not in os.environ:
    import compileall

    compileall.compile_dir(str(Path(__file__).resolve().parent.parent / "suite"), quiet=1)

# A session started in the background by a non-interactive shell (`make test &`, nohup in
# a script) inherits SIGINT ignored, and so would every `suite` it starts (an ignored
# signal stays ignored across exec): the Ctrl-C tests would then see a run that cannot be
# interrupted. Python's own handler here becomes the default action in each child.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


#: ``--set`` values that make a quick null-backend Offline test VALID however fast or slow
#: the machine: no minimum duration and a fixed sample count. LoadGen sizes an Offline
#: query from ``expected_qps``, and the null backend's rate moves between about 1 and 3.5 M
#: samples/s on a busy or a quiet 2-core machine: a query sized from a guess ends before
#: min_duration (INVALID) whenever the machine beats the guess.
SPEED_FREE_OFFLINE = ["loadgen.min_duration_ms=0", "loadgen.min_query_count=100000"]


def speed_free_offline() -> list[str]:
    """``SPEED_FREE_OFFLINE`` as command-line arguments."""
    return [arg for value in SPEED_FREE_OFFLINE for arg in ("--set", value)]


def cli_env(**extra: str) -> dict[str, str]:
    """The environment for a CLI subprocess: the repo (and tests/) importable, and a
    private user config directory."""
    env = dict(os.environ)
    # pytest-xdist's workers export COLUMNS=80, and the CLI honours COLUMNS when piped: a
    # test that wants a width passes COLUMNS itself
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    env["XDG_CONFIG_HOME"] = _CONFIG_HOME
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def run_cli(*args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m suite ARGS`` from the repo root; never hangs the test session. A process
    of its own, forked from a server that imported the suite once (tests/support/cli_fork.py)
    unless ``env`` changes what Python imports."""
    from tests.support import cli_fork

    if cli_fork.usable(env):
        return cli_fork.run_forked(list(args), cli_env(**env), REPO, timeout)
    return subprocess.run(
        [sys.executable, "-m", "suite", *args],
        cwd=REPO, env=cli_env(**env), capture_output=True, text=True, timeout=timeout,
    )


def interrupt_once_loadgen_runs(proc: subprocess.Popen[str], runs_dir: Path,
                                before: set[Path] | None = None) -> tuple[str, str]:
    """Send Ctrl-C (SIGINT) to a ``suite run`` once LoadGen has written to a new run's
    performance detail log, a second later; its (stdout, stderr). Fails the test if
    LoadGen never starts within 60 s."""
    known = before or set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        new = sorted(set(runs_dir.iterdir()) - known) if runs_dir.is_dir() else []
        logs = [p / "performance" / "mlperf_log_detail.txt" for p in new]
        if logs and logs[0].is_file() and logs[0].stat().st_size > 0:
            break
        time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("the run to interrupt never started LoadGen")
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    return proc.communicate(timeout=90)


def only_run_dir(runs_dir: Path) -> Path:
    """The single run directory a command created under ``runs_dir``."""
    dirs = [p for p in runs_dir.iterdir() if p.is_dir()]
    assert len(dirs) == 1, f"expected one run directory, found {dirs}"
    return dirs[0]


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    path = tmp_path / "runs"
    path.mkdir()
    return path


@pytest.fixture(scope="module")
def paths() -> Paths:
    """The checkout's (or the installed wheel's) data directories."""
    return find_paths()


@pytest.fixture
def suite_home(tmp_path: Path) -> Path:
    """A private copy of the data directories, safe to tamper with (SUITE_HOME)."""
    home = tmp_path / "home"
    for name in ("run_rules", "scenarios", "reference_models"):
        shutil.copytree(REPO / name, home / name)
    return home


# -- the `timing` marker ------------------------------------------------------------
# A test marked `timing` asserts a latency or throughput figure with
# tests.support.timing.timing_assert. On a shared 2-core machine (CI, a busy laptop) such a
# figure can miss for reasons outside the code, so that miss (a TimingMiss), and only that,
# is reported as XFAIL ("timing (reported, not gating): ...") instead of failing the
# session; any other failure of a timing test fails. SUITE_TIMING_GATE=1 makes the misses
# gate too (a quiet machine). Such tests retry internally where a single run is noisy (see
# run_valid's attempts). The hook is in tests/support/timing.py.


# -- the `slow` marker ----------------------------------------------------------------
# Everything under tests/integration/ runs the real LoadGen or a server, a CLI run or a
# wheel build in a subprocess: it is `slow`, so `pytest -m "not slow"` (make test-fast) is
# the unit tests of every package alone. A few unit modules still start a cheap process
# (an import check, a CLI refusing bad input) or share one small fixture built from real
# runs once per module (the checker's passing tree); the whole fast loop stays short.
_INTEGRATION = Path(__file__).resolve().parent / "integration"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(_INTEGRATION):
            item.add_marker(pytest.mark.slow)
