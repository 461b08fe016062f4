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
    assert proc.returncode in (0, 2), proc.stderr[-2000:]  # checked below
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
    tests = [t for d in by_scenario.values()
             for t in json.loads((d / "result.json").read_text())["tests"]]
    timing = sum(t["mode"] == "performance" and t["status"] == "INVALID" for t in tests)
    lines = [line for line in proc.stdout.splitlines()
             if "demo performance test(s) INVALID" in line]
    assert len(lines) == (1 if timing else 0), proc.stdout[-2000:]
    # The null backend answers zeros: accuracy misses its target, a step that did not
    # work, so the demo fails whatever the timing (a timing verdict alone exits 0).
    assert any(t["mode"] == "accuracy" and t["status"] == "INVALID" for t in tests)
    assert proc.returncode == 2


def test_a_broken_install_fails_the_demo(tmp_path: Path) -> None:
    """The demo proves the install (issue 40, item 1): with onnxruntime broken on purpose
    (a package on the path whose import fails), it must not end 0."""
    import os

    broken = tmp_path / "site" / "onnxruntime"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('broken on purpose by the test')\n")
    runs = tmp_path / "runs"
    runs.mkdir()
    from tests.conftest import REPO

    path = os.pathsep.join([str(tmp_path / "site"), str(REPO)])
    proc = run_cli("demo", "--runs-dir", str(runs), timeout=120, PYTHONPATH=path)
    assert proc.returncode == 1, proc.stdout[-1500:] + proc.stderr[-1500:]
    # refused before the runs (backend unavailable) or each run FAILED in its child:
    # either way named, without a traceback, and never "the install works"
    assert "onnxruntime" in proc.stderr or "FAILED" in proc.stdout, proc.stderr[-1500:]
    assert "Traceback" not in proc.stderr
    assert "install works" not in proc.stdout
