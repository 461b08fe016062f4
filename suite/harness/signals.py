"""Termination signals on both sides of a run: how TERM, HUP and a dead parent end it.

* Parent (the CLI): ``interrupt_on_termination`` turns SIGTERM and SIGHUP into
  ``KeyboardInterrupt``, so ``timeout``, ``docker stop``, a CI cancel or a closed
  terminal end the run exactly like Ctrl-C: the child drains, the logs stay, the test
  is INTERRUPTED, ``audit.config`` is removed by its ``finally`` and the exit code is 130.
* Child: ``on_stop_signals`` calls back on SIGTERM or SIGHUP from a helper thread, at
  once, even while the main thread sits inside LoadGen's C++ ``StartTest`` (a Python
  handler alone would run only after it returns); ``die_with_parent`` asks Linux to send
  SIGTERM when the parent dies, however it dies (``kill -9`` included).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType

#: The signals that end a run like Ctrl-C does.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


@contextlib.contextmanager
def interrupt_on_termination() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise ``KeyboardInterrupt`` (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be set from the main thread
        return
    previous = {sig: signal.signal(sig, _raise_interrupt) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def on_stop_signals(callback: Callable[[str], None]) -> None:
    """Call ``callback(signal name)`` on a helper thread when SIGTERM or SIGHUP arrives.

    Python's C-level handler writes each signal's number to the wakeup fd the moment it
    arrives, whatever the main thread is doing; a thread reading that fd acts on it.
    Call from the main thread, before anything that may block in native code.
    """
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    for sig in STOP_SIGNALS:
        # The Python-level handler runs late (after LoadGen returns); the wakeup fd acts.
        signal.signal(sig, lambda signum, frame: None)
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    wanted = {int(sig): sig.name for sig in STOP_SIGNALS}

    def watch() -> None:
        while True:
            try:
                data = os.read(read_fd, 64)
            except OSError:
                return
            if not data:
                return
            for number in data:
                if number in wanted:
                    callback(wanted[number])

    threading.Thread(target=watch, name="stop-signals", daemon=True).start()


def die_with_parent(parent_pid: int | None) -> bool:
    """Ask Linux for SIGTERM when the parent process dies; False if it is already gone.

    PR_SET_PDEATHSIG fires when the thread that started this process exits; the parent
    starts the child from the thread that then waits for it, so that is the parent's end.
    """
    if sys.platform == "linux":
        import ctypes

        pr_set_pdeathsig = 1
        # The process's own symbols hold libc's: ``ctypes.util.find_library("c")`` would
        # run ``ldconfig -p`` (~25 ms of the child's path to LoadGen).
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, int(signal.SIGTERM))
    # The parent may have died before the request took effect (we were re-parented).
    return parent_pid is None or os.getppid() == parent_pid
