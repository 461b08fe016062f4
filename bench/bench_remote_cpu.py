"""Where a remote request's time and CPU go: helpers for ``bench_remote.py``.

* ``TreeCpu``: CPU seconds of this process's descendants, split into the servers'
  process trees (the MLServer replicas) and the rest (the suite's run: its child process
  and worker processes), from ``/proc/<pid>/stat`` (utime + stime, plus cutime +
  cstime for children they reaped). Sampled by a thread, so a window (LoadGen running)
  can be cut out of a run: imports, model checks and warm-up stay outside it.
* ``latency_loop``: raw ``tritonclient`` batch-1 requests back to back, each timed:
  the server's own per-request latency on this box, no harness at all.
* ``cpu_per_request``: the client CPU of one batch-1 request, ours
  (``RemoteBackend.predict``) and raw ``tritonclient``, gRPC and REST JSON.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

_TICK = os.sysconf("SC_CLK_TCK")


def _raw_calls(grpc_url: str, http_url: str, sample: Any) -> tuple[Any, Any, Any]:
    """One raw batch-1 ``tritonclient`` request over gRPC and one over REST JSON, as
    callables, and the gRPC client (to close)."""
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    grpc_client = grpcclient.InferenceServerClient(grpc_url.split("://", 1)[1])
    http_client = httpclient.InferenceServerClient(http_url.split("://", 1)[1])

    def grpc_call() -> None:
        tensor = grpcclient.InferInput("input", [1, 1, 8, 8], "FP32")
        tensor.set_data_from_numpy(sample)
        grpc_client.infer("digits", [tensor]).as_numpy("logits")

    def rest_call() -> None:
        tensor = httpclient.InferInput("input", [1, 1, 8, 8], "FP32")
        tensor.set_data_from_numpy(sample, binary_data=False)
        http_client.infer("digits", [tensor],
                          headers={"Content-Type": "application/json"}).as_numpy("logits")

    return grpc_call, rest_call, grpc_client

def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds incl. reaped children) of ``pid``, or None if gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), sum(int(f) for f in fields[11:15]) / _TICK


def _box_busy() -> float:
    """CPU seconds the whole machine spent busy (all processes, every tenant)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return (sum(values[:8]) - idle) / _TICK


class TreeCpu:
    """Samples this process's descendants' CPU every ``every`` seconds."""

    def __init__(self, server_pids: list[int], every: float = 0.25) -> None:
        self.server_roots = set(server_pids)
        self.every = every
        self.samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tree-cpu", daemon=True)
        #: Called each tick; its truth is recorded as the sample's ``marked``.
        self.mark: Any = lambda: False

    def sample(self) -> dict[str, Any]:
        stats = {pid: s for pid in (int(p) for p in os.listdir("/proc") if p.isdigit())
                 if (s := _stat(pid)) is not None}
        me = os.getpid()
        side: dict[int, str] = {}

        def owner(pid: int) -> str:
            seen = []
            while pid not in side:
                if pid in self.server_roots:
                    side[pid] = "server"
                    break
                if pid == me or pid not in stats or pid <= 1:
                    side[pid] = "" if pid != me else "me"
                    break
                seen.append(pid)
                pid = stats[pid][0]
            found = side[pid]
            result = "client" if found == "me" else found
            for p in seen:
                side[p] = result
            return result

        cpu = {"client": 0.0, "server": 0.0}
        pids: dict[str, list[int]] = {"client": [], "server": []}
        for pid, (_, seconds) in stats.items():
            where = owner(pid) if pid != me else ""
            if where in cpu:
                cpu[where] += seconds
                pids[where].append(pid)
        return {"t": time.perf_counter(), "client": cpu["client"], "server": cpu["server"],
                "box": _box_busy(), "marked": bool(self.mark()),
                "client_processes": len(pids["client"])}

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.samples.append(self.sample())

    def __enter__(self) -> TreeCpu:
        self.samples.append(self.sample())
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(self.sample())

    def window(self) -> dict[str, float] | None:
        """CPU seconds each side used while ``mark`` held, and the machine's share."""
        marked = [s for s in self.samples if s["marked"]]
        if len(marked) < 2:
            return None
        first, last = marked[0], marked[-1]
        wall = last["t"] - first["t"]
        cores = os.cpu_count() or 1
        client, server = last["client"] - first["client"], last["server"] - first["server"]
        box = last["box"] - first["box"]
        return {"wall_s": round(wall, 3), "client_cpu_s": round(client, 3),
                "server_cpu_s": round(server, 3),
                # Shares of the machine (cores x wall): the rest is idle or other tenants.
                "client_share_of_box": round(client / (wall * cores), 3),
                "server_share_of_box": round(server / (wall * cores), 3),
                "others_share_of_box": round(max(0.0, box - client - server) / (wall * cores),
                                             3),
                "client_processes": max(s["client_processes"] for s in marked)}


def _percentiles(values: list[float]) -> dict[str, float]:
    import numpy as np

    ms = np.asarray(values) * 1e3
    return {"count": len(values), "p50_ms": round(float(np.percentile(ms, 50)), 3),
            "p99_ms": round(float(np.percentile(ms, 99)), 3),
            "p999_ms": round(float(np.percentile(ms, 99.9)), 3),
            "max_ms": round(float(ms.max()), 3)}


def latency_loop(grpc_url: str, http_url: str, seconds: float) -> dict[str, Any]:
    """Raw tritonclient batch-1 requests back to back (one thread), each timed; the same
    for the card's onnxruntime session in this process (the model's own time)."""
    import numpy as np
    import onnxruntime as ort

    from suite.models import load_card
    from suite.paths import find_paths

    card = load_card(find_paths(), "digits")
    sample = np.zeros((1, 1, 8, 8), np.float32)
    figures: dict[str, Any] = {}
    session = ort.InferenceSession(str(card.onnx_path), providers=["CPUExecutionProvider"])
    grpc_call, rest_call, grpc_client = _raw_calls(grpc_url, http_url, sample)

    calls: dict[str, Any] = {"onnxruntime_in_process": lambda: session.run(
        None, {"input": sample}), "grpc": grpc_call, "rest_json": rest_call}
    for name, call in calls.items():
        for _ in range(50):
            call()
        times: list[float] = []
        cpu0, stop = time.process_time(), time.perf_counter() + seconds
        while (start := time.perf_counter()) < stop:
            call()
            times.append(time.perf_counter() - start)
        figures[name] = {**_percentiles(times), "client_cpu_us_per_request": round(
            (time.process_time() - cpu0) / len(times) * 1e6, 1)}
    grpc_client.close()
    return figures


def cpu_per_request(grpc_url: str, http_url: str, seconds: float) -> dict[str, float]:
    """Client CPU per batch-1 request, one thread back to back on one server: ours
    (``RemoteBackend.predict``: balancer, counters, checks, tritonclient) and raw
    tritonclient, over gRPC and over REST JSON."""
    import numpy as np

    from suite.backends import create
    from suite.models import load_card
    from suite.paths import find_paths

    card = load_card(find_paths(), "digits")
    sample = np.zeros((1, 1, 8, 8), np.float32)
    ours_grpc = create("remote", {"endpoints": [grpc_url]})
    ours_grpc.load(card, 1)
    ours_rest = create("remote", {"endpoints": [http_url]})
    ours_rest.load(card, 1)
    raw_grpc, raw_rest, grpc_client = _raw_calls(grpc_url, http_url, sample)

    figures = {}
    for name, call in (("ours_grpc", lambda: ours_grpc.predict(sample)), ("raw_grpc", raw_grpc),
                       ("ours_rest_json", lambda: ours_rest.predict(sample)),
                       ("raw_rest_json", raw_rest)):
        for _ in range(20):
            call()
        count, cpu0 = 0, time.process_time()
        stop = time.perf_counter() + seconds / 4
        while time.perf_counter() < stop:
            call()
            count += 1
        figures[f"{name}_cpu_us_per_request"] = round((time.process_time() - cpu0) / count
                                                      * 1e6, 1)
    ours_grpc.close()
    ours_rest.close()
    grpc_client.close()
    return figures
