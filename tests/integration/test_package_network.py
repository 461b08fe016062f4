"""The network division in packaging: decided by the runs' records (issues 16 and 28).

A real remote run against a real MLServer on loopback is no network SUT (the server is on
LoadGen's host): its record says ``server_location = "loopback"``, it packages into
``closed/`` like a local run, and ``--division network`` refuses it in one line. The
unit tests on recorded results (remote hosts included) are in
tests/unit/submission/test_network.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.remote_fixtures import missing, serving
from tests.unit.submission.test_network import USER


def test_a_loopback_remote_run_packages_as_closed_not_network(tmp_path: Path) -> None:
    if (why := missing()) is not None:
        pytest.skip(why)
    from suite.models import load_card
    from suite.paths import find_paths

    env = {"SUITE_KEY_PASSPHRASE": "network-test"}
    runs, keys, out = tmp_path / "runs", tmp_path / "keys", tmp_path / "out"
    with serving(load_card(find_paths(), "digits"), 1, tmp_path / "srv") as replicas:
        done = run_cli("run", "--backend", "remote", "--scenario", "singlestream", "--mode",
                       "all", "--quick", "--runs-dir", str(runs), "--set",
                       f'backend.remote.endpoints=["{replicas[0].grpc_url}"]', timeout=240)
        assert done.returncode in (0, 2), done.stdout + done.stderr
    assert run_cli("keygen", "--out", str(keys), **env).returncode == 0
    system = tmp_path / "system.toml"
    system.write_text("".join(f'{k} = "{v}"\n' for k, v in USER.items()))
    common = ["package", "--submitter", "ORG", "--system", "box", "--runs-dir", str(runs),
              "--out-dir", str(out), "--key", str(keys / "signing.key"), "--unofficial",
              "--system-config", str(system)]
    [record] = [json.loads(p.read_text()) for p in runs.glob("*/result.json")]
    details = record["tests"][0]["backend"]["details"]
    assert details["server_location"] == "loopback" and "division" not in details
    assert "127.0.0.1 -> 127.0.0.1: this host" in details["server_location_from"]
    refused = run_cli(*common, "--division", "network", **env)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "the network division needs the SUT on another host" in refused.stderr
    done = run_cli(*common, "--division", "closed", **env)
    assert done.returncode == 0, done.stdout + done.stderr
    description = json.loads((out / "closed_ORG_box/closed/ORG/systems/box.json").read_text())
    assert "is_network" not in description
    report = run_cli("check", str(out / "closed_ORG_box"), "--json")
    findings = [f["rule"] for r in json.loads(report.stdout)["results"] for f in r["findings"]]
    assert "SYS-NETWORK" not in findings, findings

