"""The network division in packaging: decided by the runs' records (issue 16).

One package of a real remote run (a real MLServer on loopback) into ``network/``, checked
by ``suite check``; the closed division is refused for it. The unit tests on recorded
results are in tests/unit/submission/test_network.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.remote_fixtures import missing, serving
from tests.unit.submission.test_network import USER


def test_a_remote_run_packages_into_the_network_division(tmp_path: Path) -> None:
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
    refused = run_cli(*common, "--division", "closed", **env)
    assert refused.returncode == 1 and "use --division network" in refused.stderr
    done = run_cli(*common, "--division", "network", **env)
    assert done.returncode == 0, done.stdout + done.stderr
    description = json.loads((out / "network_ORG_box/network/ORG/systems/box.json").read_text())
    assert description["is_network"] == "true"
    assert description["network_protocol"] == "grpc"
    assert description["net_software_stack_sut"].startswith("mlserver ")
    report = run_cli("check", str(out / "network_ORG_box"), "--json")
    findings = [f["rule"] for r in json.loads(report.stdout)["results"] for f in r["findings"]]
    assert "SYS-NETWORK" not in findings, findings

