"""Real MLServer processes on loopback ports for the remote backend's tests.

``serving`` starts replicas through the suite's own launcher (``suite.serve``), so the
servers under test are MLServer running the project's runtime. ``lying_model_settings``
builds a second model whose metadata declares the card's output but whose ONNX file
returns 7 columns instead of 10: a server that says one thing and sends another.
MLServer is never imported here: its protobuf module clashes with tritonclient's.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from suite.backends.base import importable
from suite.models import ModelCard
from suite.serve.launcher import (
    Replica,
    _spawn,
    free_port,
    model_settings,
    start_replicas,
    stop_replicas,
    wait_ready,
    write_replica_dir,
)

MAX_BATCH = 64  # the served model's max batch: requests are split at this size


def missing() -> str | None:
    """Why real servers cannot be started here, or None."""
    absent = [m for m in ("mlserver", "tritonclient.grpc", "geventhttpclient")
              if not importable(m)]
    return (f"the remote extra is not installed (missing {absent}): "
            "pip install -e '.[remote]'") if absent else None


@contextmanager
def serving(card: ModelCard, count: int, workdir: Path, **kwargs: Any) -> Iterator[list[Replica]]:
    replicas = start_replicas(card, count, workdir, max_batch_size=MAX_BATCH, **kwargs)
    try:
        yield replicas
    finally:
        stop_replicas(replicas)


def seven_column_onnx(card: ModelCard, path: Path) -> Path:
    """An ONNX model taking the card's input and returning (N, 7) as the card's output."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weights = numpy_helper.from_array(np.ones((64, 7), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Flatten", [card.input.name], ["flat"]),
         helper.make_node("MatMul", ["flat", "w"], [card.output.name])],
        "seven", [helper.make_tensor_value_info(card.input.name, TensorProto.FLOAT,
                                                ["N", 1, 8, 8])],
        [helper.make_tensor_value_info(card.output.name, TensorProto.FLOAT, ["N", 7])],
        initializer=[weights])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.save(model, str(path))
    return path


@contextmanager
def lying_server(card: ModelCard, workdir: Path) -> Iterator[Replica]:
    """One MLServer with model ``digits`` (declares (N, 10), returns (N, 7)) and model
    ``digits7`` (declares and returns (N, 7))."""
    onnx_path = seven_column_onnx(card, workdir / "seven.onnx")
    host, http_port, grpc_port = "127.0.0.1", free_port(), free_port()
    directory = workdir / "lying"
    write_replica_dir(directory, model_settings(card, MAX_BATCH, onnx_path), host,
                      http_port, grpc_port)
    honest = [{"name": card.output.name, "datatype": "FP32", "shape": [-1, 7]}]
    write_replica_dir(directory, model_settings(card, MAX_BATCH, onnx_path, name="digits7",
                                                outputs=honest), host, http_port, grpc_port)
    replica = _spawn(directory, host, http_port, grpc_port, card.name)
    try:
        wait_ready(replica, 90.0)
        yield replica
    finally:
        stop_replicas([replica])


def signal_server(replica: Replica, sig: signal.Signals) -> None:
    """Send ``sig`` to the replica's process group (STOP blocks it, KILL kills it)."""
    os.killpg(replica.process.pid, sig)


# -- the backend contract suite's `remote` variant ------------------------------------
# Its Variant needs endpoints when the module is collected, so the ports are picked at
# import and the servers start on first use (once per session, stopped at exit).

CONTRACT_PORTS = [(free_port(), free_port()) for _ in range(2)]
CONTRACT_OPTIONS: dict[str, Any] = {
    "endpoints": [f"grpc://127.0.0.1:{grpc}" for _, grpc in CONTRACT_PORTS]}
_contract: list[Replica] = []


def ensure_contract_servers() -> None:
    """Start the two replicas behind ``CONTRACT_OPTIONS`` unless they are running."""
    if _contract and all(r.process.poll() is None for r in _contract):
        return
    import atexit
    import tempfile

    from suite.models import load_card
    from suite.paths import find_paths

    card = load_card(find_paths(), "digits")
    workdir = Path(tempfile.mkdtemp(prefix="contract-remote-"))
    _contract[:] = start_replicas(card, 2, workdir, max_batch_size=256,
                                  ports=CONTRACT_PORTS)
    atexit.register(_stop_and_remove, list(_contract), workdir)


def _stop_and_remove(replicas: list[Replica], workdir: Path) -> None:
    """Stop the session's contract servers, then remove their directory (each session
    made one in the system's temporary directory and left it behind)."""
    import shutil

    stop_replicas(replicas)
    shutil.rmtree(workdir, ignore_errors=True)


# -- client worker processes for the run record's tests --------------------------------


def predict_in_process(endpoints: list[str], batches: int, size: int) -> None:
    """A worker process's client (spawned, as the SUT's are): ``batches`` predicts."""
    import numpy as np

    from suite.backends import create
    from suite.models import load_card
    from suite.paths import find_paths

    backend = create("remote", {"endpoints": endpoints})
    backend.load(load_card(find_paths(), "digits"), 256)
    for _ in range(batches):
        backend.predict(np.zeros((size, 1, 8, 8), np.float32))
    # Like a SUT worker process: never closed, the process just ends.
