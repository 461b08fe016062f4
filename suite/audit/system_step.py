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
    """One check per system description in ``tree`` (a failed check if there is none),
    and one per result saying where its claims came from (``provenance``)."""
    from suite.submission.system_description import PROBE_FAILED, probe

    systems = sorted(tree.glob("*/*/systems/*.json"))
    if not systems:
        report.add(6, "system description", False, ["the bundle has no systems/*.json"])
        return
    here = probe()
    for path in systems:
        stated = _provenance(path.parent.parent).get("system") or {}
        if stated.get("source") == STATED:
            # an engine's host: this machine is not it, so nothing here can confirm it
            described = _read(path)
            fields = [f"{k}: {described.get(k) or '(empty)'}" for k in HARDWARE] \
                if isinstance(described, dict) else [f"the description is {described}"]
            framework = stated.get("framework") or {}
            report.add(6, f"system vs {path.relative_to(tree)}", isinstance(described, dict),
                       [f"{stated.get('what', 'the engine host')}: {STATED}", *fields,
                        f"framework: {framework.get('value') or '(none)'} "
                        f"({framework.get('source', 'not recorded')})"], STATED)
            continue
        findings, agreed = compare(_read(path), here, here.get(PROBE_FAILED, {}))
        name = str(path.relative_to(tree))
        report.add(6, f"system vs {name}", not findings, findings or agreed,
                   f"{len(findings)} finding(s)")


STATED = "stated by the submitter, not verified"


def _provenance(base: Path) -> dict[str, Any]:
    """``documentation/provenance.json`` of one division/submitter ({} if none)."""
    data = _read(base / "documentation" / "provenance.json")
    return data if isinstance(data, dict) else {}


def provenance_step(report: AuditReport, tree: Path) -> None:
    """Per packaged result: each claim (weights, precision, quantization, engine) with
    where it came from, as ``documentation/provenance.json`` records it; a result with
    no record fails (a missing record is not a measurement)."""
    for doc in sorted(tree.glob("*/*/documentation/provenance.json")):
        data = _read(doc)
        results = data.get("results") if isinstance(data, dict) else None
        if not isinstance(results, dict) or not results:
            report.add(6, f"provenance in {doc.relative_to(tree)}", False,
                       ["no result's provenance is recorded"], "not recorded")
            continue
        for result, claims in sorted(results.items()):
            lines = [f"{name}: {c.get('value') or '(none)'} ({c.get('source')})"
                     for name, c in sorted(claims.items()) if isinstance(c, dict)]
            sources = sorted({str(c.get("source")) for c in claims.values()
                              if isinstance(c, dict)})
            report.add(6, f"provenance of {result}", bool(lines), lines or [
                "no claim recorded"], "; ".join(sources) or "not recorded")


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
