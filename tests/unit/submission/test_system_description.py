"""``suite system``: probe + user TOML -> the official JSON with every required key; a
probe that fails leaves its fields empty and says why, never a made-up value (issue 28)."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from suite.config.rules import load_rules
from suite.paths import find_paths
from suite.submission.system_description import PROBE_FAILED, cpu_topology, describe, probe
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
    # never probed, never a constant: the submitter states it, and the list says why
    assert data["number_of_nodes"] == ""
    assert any(e.startswith("number_of_nodes (not probed") for e in empty)


def _nvml(monkeypatch: pytest.MonkeyPatch, count: int | None) -> None:
    """A stand-in ``pynvml``: ``count`` devices, or (None) an NVML that will not start."""
    fake = types.ModuleType("pynvml")

    def init() -> None:
        if count is None:
            raise RuntimeError("NVML Shared Library Not Found")

    fake.nvmlInit = init  # type: ignore[attr-defined]
    fake.nvmlShutdown = lambda: None  # type: ignore[attr-defined]
    fake.nvmlDeviceGetCount = lambda: count  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", fake)


def test_a_failed_accelerator_probe_is_empty_and_says_why(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _nvml(monkeypatch, None)
    probed = probe()
    # it was "0" accelerators and "N/A": a CPU-only claim made from an error
    assert probed["accelerators_per_node"] == "" and probed["accelerator_model_name"] == ""
    assert "NVML did not start" in probed[PROBE_FAILED]["accelerators_per_node"]
    assert SUB is not None
    data, empty, _ = describe(SUB, {}, probed)
    assert data["accelerators_per_node"] == "" and PROBE_FAILED not in data
    assert any(e.startswith("accelerators_per_node (NVML did not start") for e in empty)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed at all
    assert "pynvml is not installed" in probe()[PROBE_FAILED]["accelerators_per_node"]


def test_only_an_nvml_that_answers_no_device_says_cpu_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _nvml(monkeypatch, 0)
    probed = probe()
    assert probed["accelerators_per_node"] == "0"
    assert probed["accelerator_model_name"] == "N/A"
    assert "accelerators_per_node" not in probed[PROBE_FAILED]


def test_processors_and_cores_come_from_cpuinfo() -> None:
    two_sockets = "".join(f"processor : {i}\nphysical id : {i // 4}\ncpu cores : 2\n\n"
                          for i in range(8))
    assert cpu_topology(two_sockets) == ("2", "2", {})
    # no physical id (some VMs and ARM kernels): empty and why, not "1"
    processors, cores, failed = cpu_topology("processor : 0\n")
    assert (processors, cores) == ("", "")
    assert failed["host_processors_per_node"] == "/proc/cpuinfo lists no physical id"
    assert "host_processor_core_count" in failed


def test_system_command_writes_json_and_lists_empty_fields(tmp_path: Path) -> None:
    toml = tmp_path / "system.toml"
    toml.write_text('[system]\nsubmitter = "ORG"\nsystem_name = "box"\nstatus = "available"\n')
    done = run_cli("system", "--config", str(toml), "--out", str(tmp_path / "box.json"))
    assert done.returncode == 0, done.stderr
    data = json.loads((tmp_path / "box.json").read_text())
    assert data["system_name"] == "box" and data["division"] == "closed"
    assert "still empty" in done.stderr and "cooling" in done.stderr
