"""The simulated devices shared by Server worker processes (``SharedDevices``): calls
placed in one process queue behind those placed in another, and every process's calls
reach the one record the LoadGen process reports."""

from __future__ import annotations

import dataclasses
import multiprocessing
import time
from typing import Any

import numpy as np
import pytest

from suite.backends.simulated_devices import Devices, SharedDevices
from suite.errors import BackendError

MS = 1e-3


def _place_two(shared: SharedDevices, at: float, results: Any) -> None:
    """In a worker process: fill both streams of the one device, and record both."""
    ends = [shared.place(at, 0.0, 2 * MS, 3 * MS, cold=True) for _ in range(2)]
    for end in ends:
        shared.record(end - at, 5 * MS, 0.0)
    shared.close()
    results.put(ends)


def test_calls_placed_in_another_process_hold_the_shared_device() -> None:
    shared = Devices(1, 2).share()
    try:
        at = time.perf_counter() + 10.0  # far ahead: every call below is still running
        # As ProcessWorkers does: the shared devices go in the process's arguments
        # (a multiprocessing lock pickles only while a process is spawned).
        context = multiprocessing.get_context("spawn")
        results = context.SimpleQueue()
        worker = context.Process(target=_place_two, args=(shared, at, results))
        worker.start()
        first, second = results.get()
        worker.join(timeout=30)
        assert worker.exitcode == 0
        # The worker's two calls took both streams and queued their compute.
        assert (first, second) == (pytest.approx(at + 5 * MS), pytest.approx(at + 8 * MS))
        # Here, a third call waits for the first stream to free, then for the compute.
        third = shared.place(at, 0.0, 2 * MS, 1 * MS, cold=False)
        assert third == pytest.approx(at + 9 * MS)
        calls, cold = shared.calls()
        assert cold == 2
        assert calls[:, 0].tolist() == [pytest.approx(5 * MS), pytest.approx(8 * MS)]
        shared.clear()
        assert len(shared.calls()[0]) == 0 and shared.calls()[1] == 0
    finally:
        shared.close()


def test_a_worker_backend_places_its_calls_on_the_loadgen_process_devices(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``worker_share`` moves the backend's devices to shared memory, and a worker's
    backend that attaches them places its calls there and records them where the
    LoadGen process's ``run_record`` reads: not on a node of its own."""
    from suite.backends import simulated
    from suite.backends.simulated import SimulatedBackend, SimulatedOptions
    from suite.backends.simulated_devices import _attach
    from suite.models import load_card
    from suite.paths import find_paths

    card = load_card(find_paths(), "digits")
    main, worker = (SimulatedBackend(SimulatedOptions(profile="resnet50-4gpu-fp16",
                                                      jitter=0.0)) for _ in range(2))
    main.load(card, 16)
    worker.load(card, 16)
    for backend in (main, worker):  # calls that run for a minute: still running below
        assert backend.profile is not None
        backend.profile = dataclasses.replace(backend.profile, fixed_ms=60_000.0)
    shared = main.worker_share()
    assert main.devices is shared and main.worker_share() is shared  # made once
    # What a worker process unpickles (SharedDevices.__reduce__).
    worker.attach_share(_attach(shared.count, shared.streams, shared._block.name,
                                shared._lock))
    monkeypatch.setattr(simulated, "_sleep", lambda s: None)  # return before the end
    try:
        batch = np.zeros((3, 1, 8, 8), dtype=np.float32)
        for _ in range(3):
            worker.predict(batch)
        main.predict(batch)
        # Four calls spread over the four devices of the one node.
        now = time.perf_counter()
        busy = shared._state[:, :shared.streams].max(axis=1) > now
        assert busy.tolist() == [True, True, True, True]
        assert main.run_record()["calls"] == 4
        with pytest.raises(BackendError, match="cannot use"):
            worker.attach_share(object())
    finally:
        worker.close()
        main.close()
