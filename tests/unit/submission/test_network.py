"""The network division in packaging: decided by the runs' records (issues 16 and 28).

Unit tests on recorded results: the records decide the division (a remote run is a
network SUT only when its servers were on another host; one on loopback packages as
closed or open) and fill the network fields they know; the user fills the rest. One
package of a real remote run is in tests/integration/test_package_network.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from suite.results import RunResult
from suite.submission.network import apply, network_division, recorded_network_fields
from suite.submission.safety import PackageError

NETWORK_FIELDS = ["is_network", "network_type", "network_media", "network_rate",
                  "nic_loadgen", "number_nic_loadgen", "net_software_stack_loadgen",
                  "network_protocol", "number_connections", "nic_sut", "number_nic_sut",
                  "net_software_stack_sut", "network_topology"]


USER = {"network_type": "Ethernet", "network_media": "loopback", "network_rate": "n/a",
        "nic_loadgen": "lo", "number_nic_loadgen": "1", "nic_sut": "lo",
        "number_nic_sut": "1", "network_topology": "one host"}


def _run(name: str, remote: bool, location: str | None = "remote",
         division: str = "closed") -> RunResult:
    """A run's record; ``remote``: the remote backend's, its servers at ``location``
    (None: an older record, made before the location was recorded)."""
    details: dict[str, str] = {}
    if remote:
        details = {"client": "tritonclient 2.73.0",
                   "endpoint0": "grpc://10.0.0.2:1 grpc server=mlserver 1.7.1",
                   "endpoint1": "grpc://10.0.0.3:2 grpc server=mlserver 1.7.1"}
        if location is not None:
            details |= {"server_location": location,
                        "server_location_from": f"10.0.0.2 -> 10.0.0.2: {location}"}
        if location in ("remote", None):  # older records said network for every remote run
            details["division"] = "network"
    backend = {"name": "remote" if remote else "onnxruntime",
               "version": "mlserver 1.7.1" if remote else "1.20", "details": details}
    return RunResult.model_validate({
        "run_id": name, "run_dir": f"/runs/{name}", "created_utc": "x", "benchmark": "digits",
        "scenario": "offline", "mode": "all", "backend": backend["name"], "round": "v6.1",
        "model_sha256": "0" * 64, "division": division, "submittable": True,
        "non_submittable_reasons": [],
        "status": "VALID", "exit_code": 0,
        "tests": [{"mode": "performance", "directory": "performance", "status": "VALID",
                   "exit_code": 0, "backend": backend}]})


def test_the_records_decide_the_division() -> None:
    remote, local = _run("a", True), _run("b", False)
    assert network_division([remote], "network") is True
    assert network_division([local], "closed") is False
    with pytest.raises(PackageError, match="network-division results, not closed"):
        network_division([remote], "closed")
    with pytest.raises(PackageError, match="computed in the benchmark's own process"):
        network_division([local], "network")
    with pytest.raises(PackageError, match="cannot be one system"):
        network_division([remote, local], "network")


def test_a_loopback_remote_run_is_no_network_sut() -> None:
    loopback = _run("a", True, "loopback")
    # packaged like a local run, with the local runs if need be
    assert network_division([loopback], "closed") is False
    assert network_division([loopback, _run("b", False)], "open") is False
    with pytest.raises(PackageError, match=r"servers were on this host, not another "
                       r"\(server_location loopback: .*decided by the rule 'the network "
                       "division needs the SUT on another host than LoadGen'"):
        network_division([loopback], "network")


@pytest.mark.parametrize("location", [None, "mixed", "unknown"])
def test_a_remote_run_whose_record_does_not_say_where_is_refused(location: str | None) -> None:
    run = _run("a", True, location)
    for division in ("closed", "network"):
        with pytest.raises(PackageError, match="server_location"):
            network_division([run], division)


def test_an_open_run_is_refused_for_the_closed_division() -> None:
    run = _run("a", False, division="open")
    assert network_division([run], "open") is False
    with pytest.raises(PackageError, match="recorded the open division"):
        network_division([run], "closed")


def test_the_records_fill_what_they_know_and_the_user_the_rest() -> None:
    runs = [_run("a", True)]
    assert recorded_network_fields(runs) == {
        "network_protocol": "grpc", "net_software_stack_loadgen": "tritonclient 2.73.0",
        "net_software_stack_sut": "mlserver 1.7.1", "number_connections": "2"}
    system: dict[str, Any] = {}
    with pytest.raises(PackageError, match="empty: network_type"):
        apply(system, runs, True, NETWORK_FIELDS, {}, unofficial=False)
    apply(system, runs, True, NETWORK_FIELDS, USER, unofficial=False)
    assert system["is_network"] == "true" and system["nic_sut"] == "lo"
    assert system["network_protocol"] == "grpc"
    local: dict[str, Any] = {}
    apply(local, [_run("b", False)], False, NETWORK_FIELDS, {}, unofficial=False)
    assert local == {}



def _endpoint(name: str, location: str | None) -> RunResult:
    """An ``openai`` run's record: its servers at ``location`` (None: a record made before
    endpoint runs recorded where their servers were)."""
    details = {"urls": "http://10.0.0.7:8000", "replicas": "1", "model": "tinylm",
               "engine": "vllm", "engine_version": "0.32.0"}
    if location is not None:
        details |= {"server_location": location,
                    "server_location_from": f"10.0.0.7 -> 10.0.0.7: {location}"}
    backend = {"name": "openai", "version": "httptools 0.7.1", "device": "remote",
               "details": details}
    run = _run(name, False)
    test = run.tests[0].model_copy(update={"backend": backend})
    return run.model_copy(update={"backend": "openai", "tests": [test]})


def test_an_endpoint_on_another_host_is_a_network_sut_and_the_rule_is_named() -> None:
    remote = _endpoint("a", "remote")
    assert network_division([remote], "network") is True
    with pytest.raises(PackageError, match=r"on another host than LoadGen \(10.0.0.7 -> "
                       r"10.0.0.7: remote\).*not closed: decided by the rule 'the network "
                       "division needs the SUT on another host than LoadGen'"):
        network_division([remote], "closed")
    loopback = _endpoint("b", "loopback")
    assert network_division([loopback], "closed") is False
    with pytest.raises(PackageError, match="servers were on this host") as refused:
        network_division([loopback], "network")
    assert "locally" not in str(refused.value)


def test_an_endpoint_record_without_a_location_is_not_called_local() -> None:
    for division in ("closed", "network"):
        with pytest.raises(PackageError, match="recorded no server_location"):
            network_division([_endpoint("a", None)], division)


def test_an_endpoint_record_fills_the_network_fields_it_knows() -> None:
    assert recorded_network_fields([_endpoint("a", "remote")]) == {
        "network_protocol": "HTTP (OpenAI streaming, SSE)",
        "net_software_stack_loadgen": "openai client (httptools 0.7.1)",
        "net_software_stack_sut": "vllm 0.32.0", "number_connections": "1"}
