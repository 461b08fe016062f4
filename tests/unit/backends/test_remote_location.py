"""Where a remote run's servers are, derived from the endpoints' addresses (issue 28): a
server on this host (loopback, or one of this host's own addresses) is no network SUT,
and the record says how the location was derived."""

from __future__ import annotations

import socket

import pytest

from suite.backends.remote import server_location


def test_loopback_endpoints_are_this_host() -> None:
    where, how = server_location(("grpc://127.0.0.1:8081", "http://localhost:8080"))
    assert where == "loopback"
    assert "127.0.0.1 -> 127.0.0.1: this host" in how


def test_this_hosts_own_name_is_this_host() -> None:
    # not a network SUT either: the requests never leave the machine
    assert server_location((f"grpc://{socket.gethostname()}:8081",))[0] == "loopback"


def test_another_hosts_address_is_remote_and_a_mix_is_neither() -> None:
    # 192.0.2.0/24 is TEST-NET-1 (RFC 5737): never an address of this host
    where, how = server_location(("grpc://192.0.2.7:8081",))
    assert (where, how) == ("remote", "192.0.2.7 -> 192.0.2.7: another host")
    assert server_location(("grpc://192.0.2.7:1", "grpc://127.0.0.1:2"))[0] == "mixed"


def test_an_unresolvable_host_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*_: object, **__: object) -> None:
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", fail)
    where, how = server_location(("grpc://replica.example:8081",))
    assert where == "unknown" and "replica.example: not resolved" in how
