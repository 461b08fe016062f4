"""The network division in ``suite package``: decided by the runs' records, never a flag.

A run whose backend recorded ``details.division = "network"`` (the ``remote``
backend: the model answered over the network from another process or machine) is a
network-division result, and only such runs go into ``network/``: mixing them with
local runs, or packaging them as closed or open, is refused. For a network system the
system description says ``is_network: "true"`` and must fill the network fields the
round lists (``[submission] network_fields``); what the run recorded fills some of them
(the protocol, the client and server software, the connections), the user's system
TOML the rest (NICs, media, rate, topology). Any other system leaves ``is_network`` out.
"""

from __future__ import annotations

from typing import Any

from suite.results import RunResult
from suite.submission.safety import PackageError


def is_network_run(run: RunResult) -> bool:
    """Whether every test of ``run`` ran over the network (``PackageError`` if only
    some did: one run, one system under test)."""
    kinds = {test.backend.get("details", {}).get("division") == "network" for test in run.tests}
    if len(kinds) > 1:
        raise PackageError(f"{run.run_dir}/result.json: some tests ran over the network and "
                           "some did not", hint="package runs of one backend per system")
    return kinds == {True}


def network_division(runs: list[RunResult], division: str) -> bool:
    """Whether these runs make a network-division system; refuses a mix, and a division
    that contradicts the records."""
    network = {run.run_id: is_network_run(run) for run in runs}
    if len(set(network.values())) > 1:
        remote = ", ".join(sorted(rid for rid, net in network.items() if net))
        raise PackageError(f"network runs ({remote}) and local runs cannot be one system",
                           hint="package the remote runs as their own --system with "
                           "--division network")
    is_network = bool(network) and all(network.values())
    if is_network and division != "network":
        raise PackageError(f"the runs were served over the network (the remote backend), so "
                           f"they are network-division results, not {division}",
                           hint="use --division network")
    if not is_network and division == "network":
        raise PackageError("--division network takes only runs of the remote backend; these "
                           "ran locally", hint="use --division closed or open")
    return is_network


def recorded_network_fields(runs: list[RunResult]) -> dict[str, str]:
    """The network fields the runs' records answer: transports, client and server
    software, and the number of endpoints (connections, at least one per endpoint)."""
    protocols: set[str] = set()
    clients: set[str] = set()
    servers: set[str] = set()
    endpoints = 0
    for run in runs:
        for test in run.tests:
            backend: dict[str, Any] = test.backend
            details: dict[str, str] = backend.get("details", {})
            servers.add(str(backend.get("version", "")))
            clients.add(details.get("client", ""))
            found = [v for k, v in details.items() if k.startswith("endpoint") and k[8:].isdigit()]
            endpoints = max(endpoints, len(found))
            for entry in found:  # "<url> <transport> server=..."
                parts = entry.split()
                if len(parts) > 1:
                    protocols.add(parts[1])
    fields = {"network_protocol": ", ".join(sorted(p for p in protocols if p)),
              "net_software_stack_loadgen": ", ".join(sorted(c for c in clients if c)),
              "net_software_stack_sut": ", ".join(sorted(s for s in servers if s)),
              "number_connections": str(endpoints) if endpoints else ""}
    return {k: v for k, v in fields.items() if v}


def apply(system_json: dict[str, Any], runs: list[RunResult], is_network: bool,
          network_fields: list[str], user: dict[str, Any], *, unofficial: bool) -> None:
    """Set ``is_network`` and, for a network system, the network fields: the user's
    values first, then the records'; refuses (unless ``unofficial``) while any is empty."""
    if not is_network:
        # Closed and open systems leave the key out, as before: the checker (like the
        # official one) treats any non-empty is_network as asking for the network fields.
        return
    system_json["is_network"] = "true"
    recorded = recorded_network_fields(runs)
    for field in network_fields:
        if field == "is_network":
            continue
        system_json[field] = str(user.get(field) or system_json.get(field) or
                                 recorded.get(field, ""))
    empty = [f for f in network_fields if f != "is_network" and not system_json.get(f)]
    if empty and not unofficial:
        raise PackageError(
            f"a network-division system must describe its network; empty: {', '.join(empty)}",
            hint="set them in the --system-config TOML (e.g. network_type = \"Ethernet\", "
            "nic_sut = \"...\"), or package with --unofficial to test")
