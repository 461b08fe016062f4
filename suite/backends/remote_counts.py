"""What each endpoint served, counted across every client process of one run.

The remote backend is loaded once in the LoadGen process and, with
``sut.worker_model = "processes"``, once more in each worker process; the requests of
one run are spread over all of them. This module gives the run one record anyway:

* The first backend of a process tree (the *owner*) makes a directory and names it in
  the environment (``SUITE_REMOTE_COUNTS = "<owner pid>:<dir>"``), which the worker
  processes it spawns inherit.
* Each client process (the owner and every worker whose parent is the owner, and whose
  endpoints are the owner's) maps its own file ``<pid>-<backend id>.counts`` there: int64 counters,
  one row per endpoint (answered requests, answered samples, failed requests),
  written in place per request (a memory store, no system call).
* The owner's ``record()`` reads every file: per endpoint and per process totals. The
  owner removes the directory when it is closed or garbage collected, or at exit; a
  new owner removes those whose owner died first (``suite-remote-counts-<pid>-*``).

A process whose environment names a directory owned by someone else than its parent
(a test process that started a run, say) becomes an owner itself: counts never leak
between runs.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import weakref
from pathlib import Path
from typing import Any

import numpy as np

ENV = "SUITE_REMOTE_COUNTS"
#: Columns of a process's counter row, per endpoint.
FIELDS = ("requests", "samples", "errors")
_REQUESTS, _SAMPLES, _ERRORS = range(len(FIELDS))
_PREFIX = "suite-remote-counts-"


def _remove_orphans() -> None:
    """Directories whose owner is gone: it exited hard (``os._exit`` after a drain that
    LoadGen never finished), so its finalizer never ran."""
    for path in Path(tempfile.gettempdir()).glob(f"{_PREFIX}*-*"):
        pid = path.name.removeprefix(_PREFIX).split("-", 1)[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except PermissionError:
            continue  # alive, another user's


def _remove_dir(directory: str, value: str) -> None:
    shutil.rmtree(directory, ignore_errors=True)
    if os.environ.get(ENV) == value:
        del os.environ[ENV]


class EndpointCounts:
    """This process's counters, and (in the owner) the whole run's record."""

    def __init__(self, endpoints: tuple[str, ...]) -> None:
        self.endpoints = endpoints
        shared = self._attach()
        self.owner = shared is None
        if shared is None:
            _remove_orphans()
            shared = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-"))
            (shared / "endpoints.json").write_text(json.dumps(list(endpoints)))
            value = f"{os.getpid()}:{shared}"
            os.environ[ENV] = value  # inherited by the worker processes spawned from here
            self._cleanup = weakref.finalize(self, _remove_dir, str(shared), value)
        self.directory = shared
        # One file per backend instance: a process may hold two (a benchmark's loops).
        self.path = shared / f"{os.getpid()}-{id(self):x}.counts"
        self._lock = threading.Lock()
        self.rows = np.memmap(self.path, dtype=np.int64, mode="w+",
                              shape=(len(endpoints), len(FIELDS)))

    def _attach(self) -> Path | None:
        """The parent's counts directory, when this process is one of its workers."""
        pid, _, directory = os.environ.get(ENV, "").partition(":")
        if not pid.isdigit() or int(pid) != os.getppid():
            return None
        path = Path(directory)
        try:
            listed = json.loads((path / "endpoints.json").read_text())
        except (OSError, ValueError):
            return None
        return path if listed == list(self.endpoints) else None

    def answered(self, index: int, samples: int) -> None:
        with self._lock:  # ``+=`` on an array element is a read and a write: not atomic
            row = self.rows[index]
            row[_REQUESTS] += 1
            row[_SAMPLES] += samples

    def failed(self, index: int) -> None:
        with self._lock:
            self.rows[index, _ERRORS] += 1

    def record(self) -> dict[str, Any]:
        """Per endpoint and per client process: answered requests and samples, failed
        requests. In a worker process, only its own counts."""
        files = sorted(self.directory.glob("*.counts")) if self.owner else [self.path]
        totals = np.zeros((len(self.endpoints), len(FIELDS)), dtype=np.int64)
        processes: dict[int, np.ndarray[Any, Any]] = {}
        for path in files:
            try:
                rows = np.fromfile(path, dtype=np.int64).reshape(totals.shape)
            except (OSError, ValueError):
                continue  # a worker that died while creating its file: nothing counted
            totals += rows
            pid = int(path.name.split("-", 1)[0])
            processes[pid] = processes.get(pid, 0) + rows.sum(axis=0)
        return {
            "endpoints": [{"endpoint": url, **{f: int(v) for f, v in zip(FIELDS, row,
                                                                        strict=True)}}
                          for url, row in zip(self.endpoints, totals, strict=True)],
            # Processes that sent at least one request (answered or failed).
            "client_processes": sum(1 for row in processes.values()
                                    if row[_REQUESTS] + row[_ERRORS]),
            "processes": [{"pid": pid, **{f: int(v) for f, v in zip(FIELDS, row,
                                                                   strict=True)}}
                          for pid, row in sorted(processes.items())],
        }

    def close(self) -> None:
        self.rows.flush()
        if self.owner:
            self._cleanup()
