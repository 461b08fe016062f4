"""Step 6 of ``suite audit``: every system description in the bundle against this machine.

Each ``systems/*.json`` of the tree is compared, field by field, over the hardware fields
(``HARDWARE``) with this machine's probe (``suite.submission.system_description``). A
field passes only when both sides state it and they agree: an empty or missing field in
the bundle is a finding (the description does not say what it ran on), and so is a field
this machine's probe could not read (the claim cannot be confirmed here; the evidence
says why). A system JSON that is not a JSON object is a finding too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from suite.audit.report import AuditReport

HARDWARE = ("host_processor_model_name", "host_processors_per_node",
            "host_processor_core_count", "host_memory_capacity", "accelerators_per_node",
            "accelerator_model_name")


def system_step(report: AuditReport, tree: Path) -> None:
    """One check per system description in ``tree`` (a failed check if there is none)."""
    from suite.submission.system_description import PROBE_FAILED, probe

    systems = sorted(tree.glob("*/*/systems/*.json"))
    if not systems:
        report.add(6, "system description", False, ["the bundle has no systems/*.json"])
        return
    here = probe()
    for path in systems:
        findings, agreed = compare(_read(path), here, here.get(PROBE_FAILED, {}))
        name = str(path.relative_to(tree))
        report.add(6, f"system vs {name}", not findings, findings or agreed,
                   f"{len(findings)} finding(s)")


def _read(path: Path) -> dict[str, Any] | str:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        return f"unreadable: {exc}"
    return data if isinstance(data, dict) else f"a JSON {type(data).__name__}, not an object"


def compare(described: dict[str, Any] | str, here: dict[str, Any],
            not_probed: dict[str, str]) -> tuple[list[str], list[str]]:
    """(findings, agreeing fields) of one system description against this machine."""
    if isinstance(described, str):
        return [f"the system description is {described}"], []
    findings: list[str] = []
    agreed: list[str] = []
    for key in HARDWARE:
        stated = str(described.get(key) or "").strip()
        if not stated:
            findings.append(f"{key}: empty in the bundle; the description must state it")
        elif key in not_probed or not str(here.get(key) or "").strip():
            why = not_probed.get(key, "the probe returned nothing")
            findings.append(f"{key}: bundle '{stated}', this machine cannot say ({why})")
        elif stated != str(here[key]).strip():
            findings.append(f"{key}: bundle '{stated}', this machine '{here[key]}'")
        else:
            agreed.append(f"{key}: {stated}")
    return findings, agreed
