"""One endpoint of the remote backend: its tritonclient client, its calls, its errors.

A ``Transport`` speaks to one ``grpc://`` or ``http://`` URL through ``tritonclient``:
which client module it uses, whether a client is shared (gRPC: one channel per
endpoint, HTTP/2 multiplexes) or per thread (the gevent-based REST client is not
thread-safe), the inference request in the chosen protocol (gRPC, REST with binary
tensors, or REST JSON), and the one-line ``BackendError`` any client failure becomes,
naming the endpoint. Choosing an endpoint, checking the served model against the card
and counting requests are ``remote.py``'s (with ``remote_check`` and ``remote_counts``).

tritonclient (and gevent) are imported on first use only, so importing this module
stays as light as importing the backend.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import threading
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from suite.errors import BackendError

if TYPE_CHECKING:
    from suite.types import Batch, Outputs

ENDPOINT_HINT = ("start the server (`suite serve` prints the endpoints) or fix "
                 "backend.remote.endpoints")


def endpoint_error(url: str, exc: BaseException, timeout_s: float) -> BackendError:
    """One line for any client failure, naming the endpoint and what went wrong."""
    status = getattr(exc, "status", None)
    code = str(status() if callable(status) else "") or ""
    text = exc.message() if hasattr(exc, "message") else str(exc)  # InferenceServerException
    if "DEADLINE_EXCEEDED" in code or "Deadline" in str(text) or type(exc).__name__ in (
            "Timeout", "TimeoutError", "timeout"):
        return BackendError(f"endpoint {url}: request timed out after {timeout_s:g} s",
                            hint="raise backend.remote.timeout_s, or look at the server")
    if "UNAVAILABLE" in code or isinstance(exc, OSError):
        return BackendError(f"endpoint {url} is unreachable: {text or type(exc).__name__}",
                            hint=ENDPOINT_HINT)
    shown = f" ({code})" if code and code != "None" else ""
    return BackendError(f"endpoint {url}: server error{shown}: {text}",
                        hint="see the server's log")


def client_module(grpc: bool) -> Any:
    """``tritonclient.grpc`` or ``tritonclient.http``, imported on first use (untyped)."""
    return importlib.import_module("tritonclient.grpc" if grpc else "tritonclient.http")


@functools.cache
def client_errors() -> tuple[type[BaseException], ...]:
    """What a tritonclient call raises when the endpoint fails: the client's own error,
    socket errors, and gevent's ``Timeout`` (a ``BaseException``) from the REST client."""
    errors: list[type[BaseException]] = [
        importlib.import_module("tritonclient.utils").InferenceServerException, OSError]
    if importlib.util.find_spec("gevent") is not None:
        errors.append(importlib.import_module("gevent").Timeout)
    return tuple(errors)


#: Metadata calls whose gRPC form returns protobuf unless asked for JSON.
_JSON_METHODS = frozenset({"get_server_metadata", "get_model_metadata", "get_model_config"})


class Transport:
    """One endpoint: metadata calls and inference through one tritonclient module."""

    def __init__(self, url: str, protocol: str, timeout_s: float, concurrency: int) -> None:
        self.url = url
        self.protocol = protocol  # "grpc", "rest-binary", "rest-json" (auto decided later)
        self.timeout_s = timeout_s
        self.address = urlsplit(url).netloc
        self.concurrency = concurrency
        self._local = threading.local()
        self._shared: Any = None
        self.model = ""
        self.version = ""
        self.input = ""
        self.output = ""
        self.datatype = ""
        self._module: Any = None
        self._wanted: list[Any] | None = None

    @property
    def grpc(self) -> bool:
        return self.protocol == "grpc"

    def client(self) -> Any:
        if self.grpc:
            if self._shared is None:  # one channel per endpoint: HTTP/2 multiplexes
                self._shared = client_module(True).InferenceServerClient(self.address)
            return self._shared
        client = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = client_module(False).InferenceServerClient(
                self.address, connection_timeout=self.timeout_s,
                network_timeout=self.timeout_s)
        return client

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if self.grpc:
            if method in _JSON_METHODS:
                kwargs.setdefault("as_json", True)
            kwargs.setdefault("client_timeout", self.timeout_s)
        try:
            return getattr(self.client(), method)(*args, **kwargs)
        except client_errors() as exc:
            raise endpoint_error(self.url, exc, self.timeout_s) from exc

    def infer(self, batch: Batch) -> Outputs:
        binary = self.protocol != "rest-json"
        if self._wanted is None:  # built once: infer is on the latency path
            self._module = client_module(self.grpc)
            self._wanted = [self._module.InferRequestedOutput(
                self.output, **({} if self.grpc else {"binary_data": binary}))]
        tensor = self._module.InferInput(self.input, list(batch.shape), self.datatype)
        wanted = self._wanted
        if self.grpc:
            tensor.set_data_from_numpy(batch)
            result = self.call("infer", self.model, [tensor], model_version=self.version,
                               outputs=wanted)
        else:
            tensor.set_data_from_numpy(batch, binary_data=binary)
            # MLServer refuses a JSON body sent without its content type.
            headers = None if binary else {"Content-Type": "application/json"}
            result = self.call("infer", self.model, [tensor], model_version=self.version,
                               outputs=wanted, headers=headers)
        outputs = result.as_numpy(self.output)
        if outputs is None:
            raise BackendError(f"endpoint {self.url}: the response has no output "
                               f"{self.output!r}", hint="see the server's log")
        return outputs  # type: ignore[no-any-return]

    def close(self) -> None:
        """Close the shared gRPC channel; per-thread REST clients go with their threads."""
        if self._shared is not None:
            self._shared.close()
