"""Start MLServer replicas serving one model card, on free loopback ports.

Each replica gets its own directory: ``settings.json`` (host, ports, one worker in the
server process) and ``<model>/model-settings.json`` naming ``OnnxCardRuntime``, the
card's ONNX file and its tensors. ``mlserver start <dir>`` runs as a child process
whose output goes to ``<dir>/mlserver.log``; ``start_replicas`` returns once every
replica's model answers ``ready``, or raises with the log's tail.

Example::

    replicas = start_replicas(card, 2, Path("serve-tmp"))
    print([r.grpc_url for r in replicas])
    stop_replicas(replicas)
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from suite.backends.remote_check import V2_DATATYPES
from suite.errors import SuiteError
from suite.harness.signals import die_with_parent
from suite.paths import install_hint

if TYPE_CHECKING:
    from suite.models import ModelCard

RUNTIME = "suite.serve.runtime.OnnxCardRuntime"
_REPO = Path(__file__).resolve().parents[2]


class ServeError(SuiteError):
    """A server could not be configured, started or made ready."""


@dataclass
class Replica:
    """One running MLServer process and where it listens."""

    directory: Path
    host: str
    http_port: int
    grpc_port: int
    process: subprocess.Popen[bytes]
    model: str

    @property
    def grpc_url(self) -> str:
        return f"grpc://{self.host}:{self.grpc_port}"

    @property
    def http_url(self) -> str:
        return f"http://{self.host}:{self.http_port}"

    @property
    def log(self) -> Path:
        return self.directory / "mlserver.log"


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on now (the OS picks; a race with another binder is possible)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def v2_datatype(dtype: str) -> str:
    if dtype not in V2_DATATYPES:
        raise ServeError(f"dtype {dtype!r} has no Open Inference Protocol datatype here",
                         hint=f"the model card's dtypes must be one of {sorted(V2_DATATYPES)}")
    return V2_DATATYPES[dtype]


def model_settings(card: ModelCard, max_batch_size: int, onnx_path: Path | None = None,
                   name: str = "", intra_op_threads: int = 1,
                   outputs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The ``model-settings.json`` content for the card (``outputs`` replaces the card's
    declared outputs: a test serves a model that says one thing and returns another)."""
    path = (onnx_path or card.onnx_path).resolve()
    return {
        "name": name or card.name,
        "implementation": RUNTIME,
        "parameters": {"uri": str(path), "version": "1",
                       "extra": {"max_batch_size": max_batch_size,
                                 "intra_op_threads": intra_op_threads}},
        "inputs": [{"name": card.input.name, "datatype": v2_datatype(card.input.dtype),
                    "shape": list(card.input.shape)}],
        "outputs": outputs or [{"name": card.output.name,
                                "datatype": v2_datatype(card.output.dtype),
                                "shape": list(card.output.shape)}],
    }


def write_replica_dir(directory: Path, settings: dict[str, Any], host: str,
                      http_port: int, grpc_port: int) -> None:
    """One replica's ``settings.json`` and ``<model>/model-settings.json``."""
    model_dir = directory / settings["name"]
    model_dir.mkdir(parents=True, exist_ok=True)
    server = {"host": host, "http_port": http_port, "grpc_port": grpc_port,
              "metrics_port": free_port(host), "metrics_endpoint": None,
              # Inference in the server process: a worker pool would add a hop per
              # request and seconds of start-up; replicas scale out instead.
              "parallel_workers": 0, "debug": False}
    (directory / "settings.json").write_text(json.dumps(server, indent=2) + "\n")
    (model_dir / "model-settings.json").write_text(json.dumps(settings, indent=2) + "\n")


def start_replicas(card: ModelCard, count: int, workdir: Path, *, host: str = "127.0.0.1",
                   max_batch_size: int = 256, timeout_s: float = 90.0,
                   ports: list[tuple[int, int]] | None = None,
                   settings: dict[str, Any] | None = None) -> list[Replica]:
    """Start ``count`` MLServer processes serving ``card`` and wait until all are ready.

    ``ports`` gives each replica's (http, grpc) ports; by default free ones are picked.
    """
    if count < 1:
        raise ServeError(f"--replicas {count}: at least one replica is needed")
    if importlib.util.find_spec("mlserver") is None:
        raise ServeError("MLServer is not installed", hint=install_hint("remote"))
    chosen = settings or model_settings(card, max_batch_size)
    replicas: list[Replica] = []
    try:
        for number in range(count):
            http_port, grpc_port = (ports[number] if ports else
                                    (free_port(host), free_port(host)))
            directory = workdir / f"replica-{number}"
            write_replica_dir(directory, chosen, host, http_port, grpc_port)
            replicas.append(_spawn(directory, host, http_port, grpc_port, chosen["name"]))
        for replica in replicas:
            wait_ready(replica, timeout_s)
    except BaseException:
        stop_replicas(replicas)
        raise
    return replicas


def _spawn(directory: Path, host: str, http_port: int, grpc_port: int,
           model: str) -> Replica:
    env = dict(os.environ)
    # The runtime is imported by MLServer from this checkout.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_REPO), env.get("PYTHONPATH")]))
    env.setdefault("OMP_NUM_THREADS", "1")
    command = [sys.executable, "-c", "import sys; from mlserver.cli import main; "
               "sys.argv[0] = 'mlserver'; sys.exit(main())", "start", str(directory)]
    with (directory / "mlserver.log").open("wb") as log:
        # Its own session (Ctrl-C in a terminal reaches `suite serve`, which stops the
        # replicas in order), and TERM when the starting process dies, even by SIGKILL:
        # a killed test run or `suite serve` leaves no server behind.
        process = subprocess.Popen(command, cwd=directory, env=env, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True,
                                   preexec_fn=_term_with_parent)
    return Replica(directory, host, http_port, grpc_port, process, model)


def _term_with_parent() -> None:
    die_with_parent(None)


def wait_ready(replica: Replica, timeout_s: float) -> None:
    """Poll ``/v2/models/<model>/ready`` until 200, the process exits, or the timeout."""
    url = f"{replica.http_url}/v2/models/{replica.model}/ready"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if replica.process.poll() is not None:
            raise ServeError(f"mlserver for {replica.directory} exited with code "
                             f"{replica.process.returncode} before its model was ready:\n"
                             f"{log_tail(replica.log)}",
                             hint=f"is the `remote` extra installed ({install_hint('remote')})?")
        # Not listening yet, or not ready (HTTP 4xx): both are OSErrors here.
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=1.0) as response:
            if response.status == 200:
                return
        time.sleep(0.1)
    raise ServeError(f"mlserver for {replica.directory} was not ready within {timeout_s:g} s:"
                     f"\n{log_tail(replica.log)}")


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"(no log: {exc})"


def stop_replicas(replicas: list[Replica], grace_s: float = 5.0) -> None:
    """Stop each replica's process group (TERM, then KILL after ``grace_s``)."""
    for replica in replicas:
        if replica.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(replica.process.pid, signal.SIGTERM)
    for replica in replicas:
        try:
            replica.process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(replica.process.pid, signal.SIGKILL)
            replica.process.wait(timeout=grace_s)
