"""The divisions in ``suite package``: decided by the runs' records, never a flag.

**Network.** The round's network division measures a SUT that LoadGen reaches over a
network: LoadGen and the SUT on separate hosts (``NETWORK_RULE``). A backend whose
servers are elsewhere, the ``remote`` backend and the ``openai`` endpoint backend,
records where its servers were (``details.server_location``, derived from the addresses
the URLs' hosts resolve to, with the derivation in ``server_location_from``). A run whose
every server was on another host ("remote") is a network-division result: it goes into
``network/`` only, and packaging it as closed or open is refused, saying that
``NETWORK_RULE`` decided. A run whose servers were on this host (loopback) is no network
SUT: it packages as closed or open like a run in the benchmark's own process, and
``--division network`` refuses it. A record of a served backend without a location (an
older record) is refused either way: it does not say which it is. For a network system
the system description says ``is_network: "true"`` and must fill the network fields the
round lists (``[submission] network_fields``); what the run recorded fills some of them
(the protocol, the client and server software, the connections), the user's system TOML
the rest (NICs, media, rate, topology). Any other system leaves ``is_network`` out.

**Closed and open.** Each run records its model's division (``result.json``
``division``: "open" when the model file is not the card's reference, or when an
endpoint's weights were not stated as the reference's). An open run is refused for
``--division closed`` and ``network``; a record without a division is no candidate at all
(``selection``).
"""

from __future__ import annotations

from typing import Any

from suite.results import RunResult
from suite.submission.safety import PackageError

#: What the round's network division requires of the SUT (MLPerf inference rules,
#: "Network Division": the SUT and LoadGen run on separate nodes connected by a network).
NETWORK_RULE = "the network division needs the SUT on another host than LoadGen"


def _served(test_backend: dict[str, Any]) -> bool:
    """Whether a test's backend sent its samples to servers (the ``remote`` backend, an
    endpoint backend: ``device = "remote"``) rather than computing in-process."""
    return test_backend.get("name") == "remote" or test_backend.get("device") == "remote"


def _location(run: RunResult) -> set[str]:
    """Where each test's servers were: ``"local"`` for a backend in the benchmark's own
    process, else the served backend's recorded ``server_location``."""
    where: set[str] = set()
    for test in run.tests:
        details: dict[str, Any] = test.backend.get("details", {})
        if not _served(test.backend) and "division" not in details \
                and "server_location" not in details:
            where.add("local")
        elif "server_location" not in details:
            raise PackageError(
                f"{run.run_dir}/result.json: the {test.mode} test sent its samples to "
                f"servers (backend {test.backend.get('name')}) but recorded no "
                "server_location (an older record), so neither the network division nor "
                "closed/open can be derived",
                hint="re-run it; served backends now record where their servers are")
        elif details["server_location"] == "remote":
            where.add("remote")
        elif details["server_location"] == "loopback":
            where.add("loopback")
        else:  # "mixed", "unknown": the record does not say one SUT on one side
            raise PackageError(
                f"{run.run_dir}/result.json: the {test.mode} test's servers were at "
                f"server_location {details['server_location']!r} "
                f"({details.get('server_location_from', 'no derivation recorded')}): neither "
                "a network SUT nor one on this host",
                hint="re-run with every endpoint on this host, or every one on another host")
    return where


def is_network_run(run: RunResult) -> bool:
    """Whether every test of ``run`` ran against servers on another host (``PackageError``
    if only some did: one run, one system under test)."""
    kinds = {where == "remote" for where in _location(run)}
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
        raise PackageError(f"runs whose servers were on another host ({remote}) and runs "
                           "on this host cannot be one system",
                           hint="package the runs served from another host as their own "
                           "--system with --division network")
    _model_division(runs, division)
    is_network = bool(network) and all(network.values())
    if is_network and division != "network":
        raise PackageError(f"the runs' servers were on another host than LoadGen "
                           f"({_derivations(runs)}), so they are network-division results, "
                           f"not {division}: decided by the rule '{NETWORK_RULE}'",
                           hint="use --division network")
    if not is_network and division == "network":
        here = sorted({where for run in runs for where in _location(run)} - {"local"})
        if here:
            raise PackageError(f"these runs' servers were on this host, not another "
                               f"(server_location {', '.join(here)}: {_derivations(runs)}): "
                               f"decided by the rule '{NETWORK_RULE}'",
                               hint="package them with --division closed or open; serve "
                               "from another host for the network division")
        backends = sorted({r.backend for r in runs})
        raise PackageError(f"these runs computed in the benchmark's own process (backend "
                           f"{', '.join(backends)}), no server on another host: decided by "
                           f"the rule '{NETWORK_RULE}'", hint="use --division closed or open")
    return is_network


def _derivations(runs: list[RunResult]) -> str:
    """How each run's server location was derived, as recorded."""
    found = sorted({str(t.backend.get("details", {}).get("server_location_from", ""))
                    for run in runs for t in run.tests} - {""})
    return "; ".join(found) or "no derivation recorded"


def _model_division(runs: list[RunResult], division: str) -> None:
    """An open-division run (a model other than the card's reference, as recorded) goes
    only into ``open/``."""
    if division == "open":
        return
    open_runs = sorted(run.run_id for run in runs if run.division == "open")
    if open_runs:
        raise PackageError(f"{', '.join(open_runs)} recorded the open division (not the "
                           f"card's reference model), so not {division}",
                           hint="use --division open, or re-run with the reference model")


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
            if "urls" in details:  # an endpoint backend: HTTP, the engine's own server
                urls = [u for u in str(details["urls"]).split(", ") if u]
                protocols.update(f"{u.split('://')[0].upper()} (OpenAI streaming, SSE)"
                                 for u in urls if "://" in u)
                servers.discard(str(backend.get("version", "")))
                clients.add(f"{backend.get('name')} client ({backend.get('version', '')})")
                engine = str(details.get("engine", "unreported"))
                servers.add(f"{engine} {details.get('engine_version', '')}".strip())
                endpoints = max(endpoints, len(urls))
                continue
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
