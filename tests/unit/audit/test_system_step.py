"""Audit step 6 on hand-made trees (issue 28): every system description in the bundle is
compared with this machine, and an empty field, on either side, is a finding, not a pass."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from suite.audit import steps
from suite.audit.report import AuditReport
from suite.audit.system_step import system_step
from suite.submission import system_description

HERE = {"host_processor_model_name": "AMD EPYC", "host_processors_per_node": "1",
        "host_processor_core_count": "2", "host_memory_capacity": "24 GB",
        "accelerators_per_node": "0", "accelerator_model_name": "N/A"}


def _step6(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, systems: dict[str, dict[str, str]],
           here: dict[str, Any]) -> list[Any]:
    for name, fields in systems.items():
        path = tmp_path / "closed" / "ORG" / "systems" / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(fields))
    monkeypatch.setattr(system_description, "probe", lambda: here)
    report = AuditReport(bundle="b", bundle_sha256="0" * 64)
    with steps.step(report, 6, "system description"):
        system_step(report, tmp_path)
    return [c for c in report.checks if c.step == 6]


def test_every_system_in_the_bundle_is_compared(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # the first system matches this machine; the second does not and was never looked at
    checks = _step6(tmp_path, monkeypatch, {"a_box": HERE, "b_box": HERE | {
        "accelerators_per_node": "8", "accelerator_model_name": "NVIDIA H100"}}, HERE)
    assert [c.passed for c in checks] == [True, False]
    assert "accelerators_per_node: bundle '8', this machine '0'" in checks[1].evidence


def test_an_empty_field_in_the_bundle_is_a_finding(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    [check] = _step6(tmp_path, monkeypatch, {"box": HERE | {"accelerators_per_node": ""}}, HERE)
    assert not check.passed
    assert "accelerators_per_node: empty in the bundle; the description must state it" \
        in check.evidence


def test_a_field_this_machine_cannot_probe_is_a_finding(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here = HERE | {"accelerators_per_node": "", "probe_failed": {
        "accelerators_per_node": "not probed: pynvml is not installed"}}
    [check] = _step6(tmp_path, monkeypatch, {"box": HERE}, here)
    assert not check.passed
    assert ("accelerators_per_node: bundle '0', this machine cannot say (not probed: pynvml "
            "is not installed)") in check.evidence
