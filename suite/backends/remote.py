"""The remote backend: the model runs on serving engines over the Open Inference Protocol.

Each ``predict`` sends the batch (in pieces of at most the model's max batch size) to
one of ``endpoints`` (one URL per replica: ``grpc://host:port`` or ``http://host:port``)
through ``tritonclient`` (one ``remote_transport.Transport`` per endpoint) and returns
the output as numpy, shaped like the card's.

* **Transport**: ``grpc://`` speaks gRPC with raw tensor contents; ``http://`` speaks
  REST, with the binary tensor extension where the server lists ``binary_tensor_data``
  in its ``/v2`` metadata (Triton) and JSON where it does not (MLServer 1.7 refuses
  binary inputs). ``protocol`` overrides the choice.
* **Fan-out**: a request goes to the endpoint with the fewest requests outstanding
  (ties in turn), never above ``max_outstanding`` per endpoint; callers wait for a slot.
* **Checks before LoadGen** (``load``): every endpoint must be live and its model
  ready; the model's name, version, input and output must match the card
  (``remote_check``), and one probe request must come back with the card's output.
* **Failures**: a refused connection, a timeout (``timeout_s``), a server error (HTTP
  status or gRPC code) or a wrong output shape raise ``BackendError`` naming the
  endpoint; the SUT then completes every outstanding sample and fails the run.
* **Record**: ``BackendInfo`` carries what each server says about itself (name,
  version, extensions), the model's metadata and the transport, and where the servers
  are (``details["server_location"]``, derived in ``server_location`` from each
  endpoint's resolved addresses, with the derivation in ``server_location_from``):
  ``"loopback"`` when every endpoint is on this host (a loopback address, or one of this
  host's own), ``"remote"`` when every endpoint is on another host, ``"mixed"`` or
  ``"unknown"`` otherwise. Only a ``"remote"`` run is a network-division SUT
  (``details["division"] = "network"``): a server on this host is no network SUT, and
  its run packages as closed or open like a local one. ``run_record()`` says what each
  endpoint served (requests, samples, errors) over every client process.

The sync ``tritonclient`` clients release the GIL while waiting, so the SUT's worker
threads overlap requests; the ``processes`` worker model runs one client per process.
The REST client (gevent based) is not shared between threads: one per thread.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import ipaddress
import socket
import threading
import time
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

import numpy as np
from pydantic import Field, field_validator, model_validator

from suite.backends.base import BackendBase, BackendInfo, BackendOptions
from suite.backends.remote_check import (
    V2_DATATYPES,
    RemoteModel,
    check_model,
    grpc_metadata_parameters,
    max_batch_from,
)
from suite.backends.remote_counts import EndpointCounts
from suite.backends.remote_transport import ENDPOINT_HINT, Transport
from suite.errors import BackendError

if TYPE_CHECKING:
    from suite.models import ModelCard
    from suite.types import Batch, Outputs

Protocol = Literal["auto", "grpc", "rest-binary", "rest-json"]


class RemoteOptions(BackendOptions):
    """``[backend.remote]`` options."""

    endpoints: tuple[str, ...] = Field(
        default=("grpc://127.0.0.1:8081",), min_length=1,
        description="one URL per replica: 'grpc://host:port' or 'http://host:port'")
    protocol: Protocol = Field(
        default="auto", description="auto: gRPC for grpc:// URLs; for http:// URLs REST with "
        "binary tensors where the server lists binary_tensor_data, else REST JSON")
    model_name: str = Field(default="", description="the served model's name "
                            "(default: the benchmark's, e.g. 'digits')")
    model_version: str = Field(default="", description="the served version (default: any)")
    timeout_s: float = Field(default=10.0, gt=0, le=3600,
                             description="one request's time limit, seconds")
    max_outstanding: int = Field(default=8, ge=1, le=1024,
                                 description="requests in flight per endpoint at most")
    max_batch_size: int = Field(default=0, ge=0, le=65536, description="largest request; "
                                "0: the model's limit as the server reports it")

    @field_validator("endpoints")
    @classmethod
    def _urls(cls, endpoints: tuple[str, ...]) -> tuple[str, ...]:
        for url in endpoints:
            parts = urlsplit(url)
            if parts.scheme not in ("grpc", "http") or not parts.hostname or not parts.port:
                raise ValueError(f"endpoint {url!r}: expected 'grpc://host:port' or "
                                 "'http://host:port'")
        if len(set(endpoints)) != len(endpoints):
            raise ValueError("an endpoint is listed twice")
        return endpoints

    @model_validator(mode="after")
    def _protocol_fits(self) -> RemoteOptions:
        scheme = {"grpc": "grpc", "rest-binary": "http", "rest-json": "http"}.get(self.protocol)
        wrong = [url for url in self.endpoints if scheme and urlsplit(url).scheme != scheme]
        if wrong:
            raise ValueError(f"protocol = {self.protocol!r} needs {scheme}:// endpoints, "
                             f"not {wrong}")
        return self


def _on_this_host(address: str) -> bool:
    """Whether ``address`` is this host's: a loopback address, or one a socket here can
    bind (an address of one of this host's interfaces)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if ip.is_loopback:
        return True
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((address, 0))
    except OSError:
        return False
    return True


_WHERE = {"loopback": "this host", "remote": "another host", "mixed": "this host and another"}


def server_location(endpoints: tuple[str, ...]) -> tuple[str, str]:
    """(``"loopback"`` | ``"remote"`` | ``"mixed"`` | ``"unknown"``, how it was derived):
    where the endpoints' servers are, from the addresses each host name resolves to."""
    kinds: set[str] = set()
    steps: list[str] = []
    for host in sorted({str(urlsplit(url).hostname) for url in endpoints}):
        try:
            addresses = sorted({str(info[4][0]) for info in socket.getaddrinfo(host, None)})
        except (OSError, UnicodeError) as exc:
            kinds.add("unknown")
            steps.append(f"{host}: not resolved ({exc})")
            continue
        here = [_on_this_host(a) for a in addresses]
        kind = "loopback" if all(here) else "remote" if not any(here) else "mixed"
        kinds.add(kind)
        steps.append(f"{host} -> {' '.join(addresses)}: {_WHERE[kind]}")
    location = kinds.pop() if len(kinds) == 1 else ("unknown" if "unknown" in kinds else "mixed")
    return location, "; ".join(steps)


class _Balancer:
    """Least-outstanding choice among endpoints with a per-endpoint limit."""

    def __init__(self, count: int, limit: int, wait_s: float) -> None:
        self.limit = limit
        self.wait_s = wait_s
        self.outstanding = [0] * count
        self._next = 0
        self._cond = threading.Condition()

    def acquire(self) -> int:
        deadline = time.monotonic() + self.wait_s
        with self._cond:
            while True:
                count = len(self.outstanding)
                order = [(self._next + k) % count for k in range(count)]
                free = [i for i in order if self.outstanding[i] < self.limit]
                if free:
                    chosen = min(free, key=self.outstanding.__getitem__)
                    self.outstanding[chosen] += 1
                    self._next = (chosen + 1) % count
                    return chosen
                left = deadline - time.monotonic()
                if left <= 0:
                    raise BackendError(f"no endpoint had a free request slot within "
                                       f"{self.wait_s:g} s (backend.remote.max_outstanding)")
                self._cond.wait(left)

    def release(self, index: int) -> None:
        with self._cond:
            self.outstanding[index] -= 1
            self._cond.notify()


class RemoteBackend(BackendBase):
    """Sends batches to Open Inference Protocol servers; see the module docstring."""

    name = "remote"
    Options = RemoteOptions
    requires = (("tritonclient.grpc", "tritonclient[grpc,http]"), ("grpc", "grpcio"),
                ("geventhttpclient", "geventhttpclient"))
    extra = "remote"

    def __init__(self, options: BackendOptions | None = None) -> None:
        super().__init__(options)
        assert isinstance(self.options, RemoteOptions)
        self.opts: RemoteOptions = self.options
        self.transports: list[Transport] = []
        self.balancer = _Balancer(len(self.opts.endpoints), self.opts.max_outstanding,
                                  2 * self.opts.timeout_s)
        self.max_request = 0
        self.counts: EndpointCounts | None = None
        self._final: dict[str, Any] = {}
        self._sample_shape: tuple[int, ...] = ()
        self._dtype = np.dtype("float32")

    def load(self, card: ModelCard, max_batch_size: int) -> BackendInfo:
        opts = self.opts
        model = opts.model_name or card.name
        servers: list[str] = []
        stated: set[tuple[str, str]] = set()  # (precision, weight_transformations)
        location, derivation = server_location(opts.endpoints)
        details: dict[str, str] = {"endpoints": ",".join(opts.endpoints),
                                   "server_location": location,
                                   "server_location_from": derivation,
                                   "model_name": model, "timeout_s": f"{opts.timeout_s:g}",
                                   "max_outstanding": str(opts.max_outstanding)}
        if location == "remote":  # the SUT is across a network from LoadGen
            details["division"] = "network"
        limits: list[tuple[int, str]] = []
        for number, url in enumerate(opts.endpoints):
            scheme = urlsplit(url).scheme
            transport = Transport(url, "grpc" if scheme == "grpc" else opts.protocol,
                                  opts.timeout_s, opts.max_outstanding)
            if not transport.call("is_server_live"):
                raise BackendError(f"endpoint {url} is up but not live", hint=ENDPOINT_HINT)
            server = transport.call("get_server_metadata")
            extensions = [str(e) for e in server.get("extensions", []) or []]
            if transport.protocol == "auto":
                transport.protocol = ("rest-binary" if "binary_tensor_data" in extensions
                                      else "rest-json")
            if not transport.call("is_model_ready", model, opts.model_version):
                raise BackendError(f"endpoint {url}: model {model!r} is not ready",
                                   hint=ENDPOINT_HINT)
            remote = self._metadata(transport, model)
            check_model(remote, card, model, opts.model_version, f"endpoint {url}")
            limits.append(max_batch_from(self._model_config(transport, model), remote))
            stated.add((str(remote.parameters.get("precision", "")),
                        str(remote.parameters.get("weight_transformations", ""))))
            transport.model, transport.version = model, opts.model_version
            transport.input, transport.output = card.input.name, card.output.name
            transport.datatype = V2_DATATYPES[card.input.dtype]
            self.transports.append(transport)
            servers.append(f"{server.get('name', '?')} {server.get('version', '?')}")
            details[f"endpoint{number}"] = (
                f"{url} {transport.protocol} server={servers[-1]} "
                f"extensions={'+'.join(extensions) or '-'} versions="
                f"{'+'.join(remote.versions) or '-'} platform={remote.platform or '-'}")
        said = [limit for limit, _ in limits if limit > 0]
        self.max_request = opts.max_batch_size or (min(said) if said else max_batch_size)
        details["max_request_batch"] = str(self.max_request)
        details["max_request_batch_from"] = ("backend.remote.max_batch_size" if
                                             opts.max_batch_size else limits[0][1])
        self._sample_shape = card.output.sample_shape
        self._dtype = np.dtype(card.input.dtype)
        self._probe(card)
        # Counted from here: the probes above are checks, not the run's requests.
        self.counts = EndpointCounts(opts.endpoints)
        client = importlib.metadata.version("tritonclient")
        details["client"] = f"tritonclient {client}"
        # The server's own statement of what it runs, where every endpoint makes the same
        # one (suite serve's runtime does, from the model file); otherwise none.
        precision, transformations = stated.pop() if len(stated) == 1 else ("", "")
        return BackendInfo(name=self.name, version=" / ".join(sorted(set(servers))),
                           device=f"network ({len(opts.endpoints)} endpoint"
                           f"{'s' if len(opts.endpoints) > 1 else ''})", details=details,
                           precision=precision, weight_transformations=transformations)

    def _metadata(self, transport: Transport, model: str) -> RemoteModel:
        """The model's metadata as JSON; over gRPC with the ``parameters`` map too."""
        if not transport.grpc:
            return RemoteModel.parse(transport.call("get_model_metadata", model,
                                                    self.opts.model_version))
        message = transport.call("get_model_metadata", model, self.opts.model_version,
                                 as_json=False)
        as_json = importlib.import_module("google.protobuf.json_format").MessageToDict(
            message, preserving_proto_field_name=True)
        as_json["parameters"] = grpc_metadata_parameters(message.SerializeToString())
        return RemoteModel.parse(as_json)

    @staticmethod
    def _model_config(transport: Transport, model: str) -> dict[str, Any] | None:
        """Triton's model config (it holds ``max_batch_size``); ``None`` where the server
        has no such call (MLServer answers 404 or UNIMPLEMENTED)."""
        try:
            config: dict[str, Any] = transport.call("get_model_config", model)
        except BackendError:
            return None
        return config

    def _probe(self, card: ModelCard) -> None:
        """One request per endpoint before LoadGen: the card's output must come back."""
        shape = tuple(1 if d < 0 else d for d in card.input.shape)
        zeros = np.zeros(shape, dtype=self._dtype)
        for transport in self.transports:
            self._checked(transport, transport.infer(zeros), 1)

    def _checked(self, transport: Transport, outputs: Outputs, n: int) -> Outputs:
        want = self._sample_shape
        if outputs.shape[:1] != (n,) or len(outputs.shape) != len(want) + 1 or any(
                w >= 0 and h != w for h, w in zip(outputs.shape[1:], want, strict=False)):
            shown = ", ".join([str(n), *("?" if d < 0 else str(d) for d in want)])
            raise BackendError(f"endpoint {transport.url} returned output {transport.output!r} "
                               f"of shape {tuple(outputs.shape)}, the model card expects "
                               f"({shown})", hint="the served model is not the card's model")
        return outputs

    def _send(self, batch: Batch) -> Outputs:
        index = self.balancer.acquire()
        transport, counts = self.transports[index], self.counts
        assert counts is not None, "predict before load"
        try:
            outputs = self._checked(transport, transport.infer(batch), len(batch))
        except BackendError:
            counts.failed(index)
            raise
        finally:
            self.balancer.release(index)
        counts.answered(index, len(batch))
        return outputs

    def predict(self, batch: Batch) -> Outputs:
        step = self.max_request
        if len(batch) <= step:
            return self._send(batch)
        return np.concatenate([self._send(batch[i:i + step])
                               for i in range(0, len(batch), step)])

    def input_buffer(self, max_batch: int, sample_shape: tuple[int, ...],
                     dtype: str) -> Batch | None:
        """A zeroed buffer: a warm-up batch predicted from it before any gather must
        hold numbers. Uninitialised memory can hold NaNs, and MLServer's gRPC path fails
        a NaN output (INTERNAL "required argument is not a float")."""
        return np.zeros((max_batch, *sample_shape), dtype=dtype)

    def run_record(self) -> dict[str, Any]:
        """What each endpoint served in this run, over every client process: answered
        requests and samples, failed requests, and the processes that sent them (see
        ``remote_counts``). The LoadGen process's backend sees its worker processes'."""
        if self.counts is None:
            return self._final
        record = self.counts.record()
        protocols = {t.url: t.protocol for t in self.transports}
        for row in record["endpoints"]:
            row["protocol"] = protocols.get(row["endpoint"], "")
        return record

    def endpoint_stats(self) -> list[dict[str, Any]]:
        """``run_record()["endpoints"]``: per endpoint requests, samples and errors."""
        return list(self.run_record().get("endpoints", []))

    def close(self) -> None:
        if self.counts is not None:
            self._final = self.run_record()  # still readable after close
            self.counts.close()
            self.counts = None
        for transport in self.transports:
            transport.close()
        self.transports = []
