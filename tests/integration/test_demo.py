"""``suite demo`` picks Server's rate from its own Offline result and records it (issue 29,
item 1). Speed-free: the assertions hold whatever the rates, VALID or INVALID."""

from __future__ import annotations

import json
from pathlib import Path

from suite.cli.commands import demo
from tests.conftest import run_cli


def test_the_demo_runs_server_at_a_share_of_its_own_offline_rate(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    proc = run_cli("demo", "--backend", "null", "--runs-dir", str(runs))
    assert proc.returncode in (0, 2), proc.stderr[-2000:]
    by_scenario = {json.loads((d / "result.json").read_text())["scenario"]: d
                   for d in runs.iterdir()}
    assert set(by_scenario) == {"singlestream", "multistream", "offline", "server"}
    offline = json.loads((by_scenario["offline"] / "result.json").read_text())
    rate = next(t["performance"]["metric_value"] for t in offline["tests"]
                if t["mode"] == "performance")
    plan = demo.server_plan(rate, quick=True)
    config = json.loads((by_scenario["server"] / "config.json").read_text())
    assert config["loadgen"]["target_qps"] == plan.target_qps
    assert config["provenance"]["loadgen.target_qps"] == plan.why
    assert f"demo: Server at {plan.target_qps:,.0f} QPS ({plan.why})" in proc.stderr
    # Offline ran first: the Server run directory is the newest.
    assert max(by_scenario.values(), key=lambda d: d.name) == by_scenario["server"]
    statuses = [json.loads((d / "result.json").read_text())["status"]
                for d in by_scenario.values()]
    lines = [line for line in proc.stdout.splitlines() if "demo test(s) INVALID" in line]
    assert len(lines) == (1 if "INVALID" in statuses else 0), proc.stdout[-2000:]
