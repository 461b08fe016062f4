"""A LoadGen child started early (``python -m suite.harness.child --await-spec``).

Imports nothing of the suite at run time, and of the standard library only what starting
a process takes (no ``typing``, ``pathlib`` or ``json`` before the child is running): ``python
-m suite run`` starts it first thing (``__main__``), so the child's imports (pydantic,
numpy, LoadGen, the SUT) run while the parent imports its own and resolves the config.
``take()`` hands it to the first test.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import sys
import tempfile

TYPE_CHECKING = False  # ``typing`` is not imported yet when the child starts (mypy: True)
if TYPE_CHECKING:
    from pathlib import Path

    from suite.config.model import RunConfig

_early: ChildStart | None = None


def child_pythonpath() -> str:
    """The parent's import roots, made absolute: the child runs in its test directory."""
    package_root = _package_root()
    entries = [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
               if p]
    return os.pathsep.join(dict.fromkeys([package_root, *entries]))


def _package_root() -> str:
    """The directory that holds the ``suite`` package (``Path(__file__).parents[2]``)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


def start_early(argv: list[str]) -> None:
    """Start the first test's child now (``python -m suite run``, before the CLI's imports);
    one that no run takes (``--help``, a usage error) is ended at exit. ``argv`` (the
    command's arguments) names the benchmark and backend whose framework it preloads."""
    global _early
    _early = ChildStart(_option(argv, "--benchmark") or "digits", _option(argv, "--backend"))
    atexit.register(_discard_early)


def _option(argv: list[str], name: str) -> str:
    """The value of ``name`` in ``argv`` (``--name value`` or ``--name=value``), else ""."""
    for at, arg in enumerate(argv):
        if arg == name and at + 1 < len(argv):
            return argv[at + 1]
        if arg.startswith(name + "="):
            return arg[len(name) + 1:]
    return ""


def _discard_early() -> None:
    if _early is not None:
        _early.discard()


def take(benchmark: str, backend: str) -> ChildStart:
    """The child started at process start if there is one, else a new one (preloading
    ``backend``'s framework, or, if "", that of ``benchmark``'s default backend)."""
    global _early
    started, _early = _early, None
    return started if started is not None else ChildStart(benchmark, backend)


class ChildStart:
    """A child interpreter started before its test exists: its imports (pydantic, numpy,
    LoadGen, the SUT; ~0.4 s) run while the parent lints, resolves the config and stages
    the dataset, and so does the framework of the backend the run names (``benchmark`` and
    ``backend``, "" for the card's default: ``child.preload_framework``; onnxruntime is
    ~0.25 s). It waits for its spec's path on stdin; ``discard`` (EOF) ends it unused.
    Until it has a test directory its output goes to a temporary file, copied into
    harness.log if it dies before adopting the directory."""

    def __init__(self, benchmark: str, backend: str) -> None:
        self.read_fd, write_fd = os.pipe()
        # Outlives this call: closed by the test that uses the child, or by discard().
        self.early_log = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115
        package_root = _package_root()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "suite.harness.child", "--await-spec", str(write_fd),
             benchmark, backend],
            stdin=subprocess.PIPE, stdout=self.early_log, stderr=subprocess.STDOUT,
            cwd=package_root, pass_fds=(write_fd,), start_new_session=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=child_pythonpath()),
            text=True)
        os.close(write_fd)
        self.used = False

    def preload(self, config: RunConfig, home: Path) -> None:
        """Send the resolved config ahead of the spec: the child loads the model
        (``suite.harness.sut.loading.preload``) while the parent stages the dataset and
        the run directory. A child that died meanwhile is found by its test."""
        if self.used:
            return
        import json

        message = json.dumps({"preload": config.model_dump_json(), "home": str(home)})
        with contextlib.suppress(BrokenPipeError, OSError):
            assert self.process.stdin is not None
            self.process.stdin.write(message + "\n")
            self.process.stdin.flush()

    def discard(self) -> None:
        """End an unused child and close what it held. It has no test and holds nothing
        yet, so it is killed: bad input must not wait for the child's imports."""
        if self.used:
            return
        self.used = True
        self.process.kill()
        self.process.wait()
        with contextlib.suppress(OSError, ValueError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        os.close(self.read_fd)
        self.early_log.close()


