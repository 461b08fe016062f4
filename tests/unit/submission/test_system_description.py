"""``suite system``: probe + user TOML -> the official JSON with every required key."""

from __future__ import annotations

import json
from pathlib import Path

from suite.config.rules import load_rules
from suite.paths import find_paths
from suite.submission.system_description import describe, probe
from tests.conftest import run_cli

SUB = load_rules(find_paths(), "v6.1").submission


def test_probe_fills_machine_fields_and_cpu_only_conventions() -> None:
    assert SUB is not None
    data, empty, unknown = describe(SUB, {"cooling": "air", "colour": "red"}, probe(),
                                    submitter="ORG", system_name="box")
    assert set(SUB.system_required_fields) <= set(data)
    assert data["host_processor_model_name"] and data["cooling"] == "air"
    assert data["submitter"] == "ORG" and unknown == ["colour"]
    if data["accelerators_per_node"] == "0":  # CPU-only: a string "0", "N/A" text fields
        assert data["accelerator_model_name"] == "N/A"
    assert "status" in empty and "cooling" not in empty


def test_system_command_writes_json_and_lists_empty_fields(tmp_path: Path) -> None:
    toml = tmp_path / "system.toml"
    toml.write_text('[system]\nsubmitter = "ORG"\nsystem_name = "box"\nstatus = "available"\n')
    done = run_cli("system", "--config", str(toml), "--out", str(tmp_path / "box.json"))
    assert done.returncode == 0, done.stderr
    data = json.loads((tmp_path / "box.json").read_text())
    assert data["system_name"] == "box" and data["division"] == "closed"
    assert "still empty" in done.stderr and "cooling" in done.stderr
