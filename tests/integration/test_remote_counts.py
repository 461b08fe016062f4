"""The remote backend's run record: what each endpoint served, over every client process.

Real MLServer replicas on loopback ports; the client processes are spawned as the SUT's
worker processes are (``multiprocessing`` spawn, children of the process that loaded the
first backend).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from suite.backends import create
from suite.backends.remote_counts import ENV
from suite.datasets.digits import validation_split
from suite.errors import BackendError
from suite.models import load_card
from suite.paths import find_paths
from tests.support.remote_fixtures import MAX_BATCH, missing, predict_in_process, serving

if (reason := missing()) is not None:
    pytest.skip(reason, allow_module_level=True)


CARD = load_card(find_paths(), "digits")


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with serving(CARD, 2, tmp_path_factory.mktemp("replicas")) as running:
        yield running


def test_threads_fan_out_to_both_replicas(replicas: Any) -> None:
    urls = [r.grpc_url for r in replicas]
    backend = create("remote", {"endpoints": urls, "max_outstanding": 2})
    backend.load(CARD, 256)
    images, _ = validation_split(CARD)
    try:
        threads = [threading.Thread(target=lambda: [backend.predict(images[:150])
                                                    for _ in range(5)]) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        record = backend.run_record()  # type: ignore[attr-defined]
    finally:
        backend.close()
    endpoints = record["endpoints"]
    assert [e["endpoint"] for e in endpoints] == urls
    assert all(e["protocol"] == "grpc" and e["errors"] == 0 for e in endpoints), endpoints
    # 150 samples split at the served model's max batch (64): 3 requests per predict.
    assert sum(e["samples"] for e in endpoints) == 4 * 5 * 150
    assert sum(e["requests"] for e in endpoints) == 4 * 5 * 3
    assert all(e["requests"] > 0 for e in endpoints), endpoints
    assert record["client_processes"] == 1
    assert record["processes"] == [{"pid": os.getpid(), "requests": 60, "samples": 750 * 4,
                                    "errors": 0}]


def test_worker_processes_are_counted_by_the_first_backend(replicas: Any) -> None:
    """Two spawned client processes (as ``sut.worker_model = "processes"``) plus this one:
    the record of the backend loaded here holds all three."""
    urls = [r.grpc_url for r in replicas]
    backend = create("remote", {"endpoints": urls})
    backend.load(CARD, 256)
    try:
        backend.predict(np.zeros((3, 1, 8, 8), np.float32))
        spawn = multiprocessing.get_context("spawn")
        workers = [spawn.Process(target=predict_in_process, args=(urls, 10, 5))
                   for _ in range(2)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=120)
        assert [w.exitcode for w in workers] == [0, 0]
        record = backend.run_record()  # type: ignore[attr-defined]
    finally:
        backend.close()
    assert record["client_processes"] == 3
    by_pid = {p["pid"]: p for p in record["processes"]}
    assert by_pid[os.getpid()]["samples"] == 3
    assert sorted(by_pid) == sorted([os.getpid(), *(w.pid for w in workers)])
    assert all(by_pid[w.pid]["requests"] == 10 and by_pid[w.pid]["samples"] == 50
               for w in workers), record
    endpoints = record["endpoints"]
    assert sum(e["requests"] for e in endpoints) == 21
    assert sum(e["samples"] for e in endpoints) == 103
    assert all(e["requests"] > 0 for e in endpoints), endpoints


def test_failed_requests_are_counted_against_their_endpoint(replicas: Any) -> None:
    """A request above the served model's max batch: the server refuses it, and the
    endpoint that refused it carries the error (the other none)."""
    urls = [r.grpc_url for r in replicas]
    backend = create("remote", {"endpoints": urls, "max_batch_size": 2 * MAX_BATCH})
    backend.load(CARD, 256)
    try:
        backend.predict(np.zeros((2, 1, 8, 8), np.float32))
        with pytest.raises(BackendError) as caught:
            backend.predict(np.zeros((2 * MAX_BATCH, 1, 8, 8), np.float32))
    finally:
        backend.close()
    record = backend.run_record()  # type: ignore[attr-defined]  # kept after close
    errors = {e["endpoint"]: e["errors"] for e in record["endpoints"]}
    named = next(url for url in urls if f"endpoint {url}:" in caught.value.message)
    assert errors == {url: int(url == named) for url in urls}
    assert sum(e["requests"] for e in record["endpoints"]) == 1  # the answered one
    assert record["processes"][0]["errors"] == 1


def test_counts_of_an_unrelated_process_are_not_joined(replicas: Any,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    """An inherited directory of a process that is not this one's parent (a test process
    that started a run) is not joined: this backend owns a fresh record."""
    urls = [replicas[0].grpc_url]
    (tmp_path / "endpoints.json").write_text(f'["{urls[0]}"]')
    monkeypatch.setenv(ENV, f"1:{tmp_path}")
    backend = create("remote", {"endpoints": urls})
    backend.load(CARD, 64)
    try:
        backend.predict(np.zeros((2, 1, 8, 8), np.float32))
        assert os.environ[ENV] != f"1:{tmp_path}"  # the owner names its own directory
        record = backend.run_record()  # type: ignore[attr-defined]
    finally:
        backend.close()
    assert not list(tmp_path.glob("*.counts"))
    assert record["endpoints"][0]["samples"] == 2
    assert ENV not in os.environ or os.environ[ENV] == f"1:{tmp_path}"


def test_a_dead_owners_directory_is_removed_by_the_next_owner(replicas: Any) -> None:
    """An owner that exited hard (``os._exit``) left its directory; the next one removes it."""
    import subprocess
    import sys
    import tempfile

    proc = subprocess.run([sys.executable, "-c", (
        "import os, tempfile; d = tempfile.mkdtemp(prefix='suite-remote-counts-' + "
        "str(os.getpid()) + '-'); print(d)")], capture_output=True, text=True, check=True)
    orphan = Path(proc.stdout.strip())
    assert orphan.parent == Path(tempfile.gettempdir()) and orphan.is_dir()
    backend = create("remote", {"endpoints": [replicas[0].grpc_url]})
    backend.load(CARD, 64)
    backend.close()
    assert not orphan.exists()

