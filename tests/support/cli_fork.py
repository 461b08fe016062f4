"""``run_cli``'s processes, forked from a server that has imported the suite once.

Every ``python -m suite`` a test starts paid the interpreter's start and the imports of
numpy, pydantic, rich, click and the suite's config, model and harness layers: about
0.6 s of CPU, five hundred times and more per ``make test``, on two cores that the
LoadGen children need too. Here one server process per xdist worker (multiprocessing's
``forkserver``) imports those modules once; each command is a fresh process forked from
it, which then does what ``python -m suite`` does: the test's environment, the
repository as its working directory, standard output and error to files (read back as
``subprocess.run`` would have captured them), ``sys.argv``, and ``suite.cli.entry.main``,
which exits the process with the command's code. The process is still separate from the
test's and from every other command's, and exits as the real command does.

What the server imports captures nothing of its environment: the CLI's consoles (which
read ``COLUMNS`` when created, ``suite.cli.console``) are left out, so each command builds
them under its own environment; no module of ``suite`` reads the environment at import.
A ``PYTHONPATH`` of the test's puts its new entries first on ``sys.path`` before the
command imports anything more (none of the modules such tests shadow, onnxruntime or
pynvml, is imported by the server); a command with any other ``PYTHON*`` variable runs
as a real ``python -m suite``, as does every command when ``SUITE_TESTS_FORK_CLI=0`` (to
compare, or to rule this out).
"""

from __future__ import annotations

import contextlib
import io
import locale
import os
import subprocess
import sys
import tempfile
from multiprocessing import context as mp_context
from multiprocessing import get_context
from pathlib import Path

#: The variable that turns the server off (``0``): every command a real subprocess.
SWITCH = "SUITE_TESTS_FORK_CLI"

#: What the server imports once: the heavy part of every command's start, none of it
#: holding a console or a value read from the environment.
PRELOAD = ["numpy", "pydantic", "click", "rich.console", "rich.table", "rich.progress",
           "suite.api", "suite.config.loader", "suite.models", "suite.backends.base",
           "suite.harness.run", "suite.harness.child_start", "tests.support.cli_fork"]

_context: list[mp_context.ForkServerContext] = []


def usable(extra_env: dict[str, str]) -> bool:
    """Whether a command with these extra variables may be forked from the server."""
    if os.environ.get(SWITCH) == "0" or sys.platform != "linux":
        return False
    return not any(key.startswith("PYTHON") and key != "PYTHONPATH" for key in extra_env)


def _server() -> mp_context.ForkServerContext:
    """The forkserver context, its server started without ``COLUMNS``/``LINES`` (pytest-xdist
    exports them; a command gets the test's environment anyway)."""
    if not _context:
        ctx = get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        saved = {k: os.environ.pop(k) for k in ("COLUMNS", "LINES") if k in os.environ}
        try:
            from multiprocessing import forkserver

            forkserver.ensure_running()
        finally:
            os.environ.update(saved)
        _context.append(ctx)
    return _context[0]


def _stream(fd: int, like: io.TextIOWrapper) -> io.TextIOWrapper:
    """A text stream on ``fd`` that writes through at once, as ``PYTHONUNBUFFERED`` makes
    a real command's (the harness child writes to the same file)."""
    return io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding=like.encoding,
                            errors=like.errors, write_through=True)


def _command(argv: list[str], env: dict[str, str], cwd: str, out: str, err: str) -> None:
    """In the forked process: become ``python -m suite ARGV`` and run it (never returns:
    ``suite.cli.entry.main`` exits the process with the command's code)."""
    for fd, path in ((1, out), (2, err)):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    sys.stdout = _stream(1, sys.__stdout__)  # type: ignore[arg-type]
    sys.stderr = _stream(2, sys.__stderr__)  # type: ignore[arg-type]
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    # The entries a fresh interpreter would have put before site-packages.
    sys.path[0:0] = [entry for entry in env.get("PYTHONPATH", "").split(os.pathsep)
                     if entry and entry not in sys.path]
    # A tracker of this process's own, as a fresh interpreter would start (shared memory
    # of process workers is tracked, and cleaned up, per command).
    from multiprocessing import resource_tracker

    resource_tracker._resource_tracker = resource_tracker.ResourceTracker()
    sys.argv = [str(Path(cwd) / "suite" / "__main__.py"), *argv]
    from suite.cli.entry import main

    sys.exit(main())


def run_forked(argv: list[str], env: dict[str, str], cwd: Path,
               timeout: float) -> subprocess.CompletedProcess[str]:
    """``python -m suite ARGV`` in a process forked from the server: what
    ``subprocess.run(..., capture_output=True, text=True, timeout=timeout)`` returns."""
    args = [sys.executable, "-m", "suite", *argv]
    with tempfile.TemporaryDirectory(prefix="suite-cli-") as tmp:
        out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
        process = _server().Process(target=_command,
                                    args=(argv, env, str(cwd), str(out), str(err)))
        process.start()
        process.join(timeout)
        if process.exitcode is None:
            process.kill()
            process.join()
            raise subprocess.TimeoutExpired(args, timeout, _read(out), _read(err))
        return subprocess.CompletedProcess(args, process.exitcode, _read(out), _read(err))


def _read(path: Path) -> str:
    """A captured stream as ``subprocess.run(text=True)`` decodes it."""
    with contextlib.suppress(FileNotFoundError):
        return path.read_text(encoding=locale.getpreferredencoding(False))
    return ""
