"""The ``suite`` command's entry point, light on purpose.

For ``suite run`` it starts the first test's child interpreter before importing the
CLI, so the child's imports overlap the parent's (``suite.harness.child_start``); everything else
goes straight to ``suite.cli.app``.

Once the command has returned, its output and files are complete: the process then
exits at once (exit hooks run, streams flushed, no interpreter teardown), and a Ctrl-C,
SIGTERM or SIGHUP that arrives meanwhile ends it with 130 and one line, never with a
signal's death and no word (Python restores the default SIGINT action while it tears down).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from types import FrameType

EXIT_INTERRUPTED = 130
_LATE = (b"interrupted after the command had finished: its output and files are "
         b"complete\n")


def main() -> int:
    # No pydantic plugin applies to the suite's own models; finding none scans every
    # installed distribution's entry points, in each process (parent and child) of a run.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    if sys.argv[1:2] == ["run"]:
        from suite.harness.child_start import start_early

        start_early(sys.argv[2:])
    from suite.cli.app import main as cli_main

    try:
        code = cli_main()
    except KeyboardInterrupt:  # between the command's own handling and ours
        code = _late_signal()
    finish(code)
    return code  # not reached


def _late_signal(signum: int = 0, frame: FrameType | None = None) -> int:
    with contextlib.suppress(OSError):
        os.write(2, _LATE)
    os._exit(EXIT_INTERRUPTED)


def finish(code: int) -> None:
    """Exit with ``code`` now: wait for threads that are not daemons, run the exit hooks,
    flush stdout and stderr; a stop signal meanwhile exits 130 with one line."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _late_signal)
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
