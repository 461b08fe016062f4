"""The run ledger and the attempts record, without a run: the best attempt follows the
metric's direction and prefers a VALID one; the audit reads a bundle's attempts only from
the verified bytes and names an unreadable attempts record. The ledger over real runs
(`suite runs`, `suite audit`) is in tests/integration/test_ledger.py."""

from __future__ import annotations

import dataclasses
import json
import tarfile
from pathlib import Path

from suite.audit.report import AuditReport, attempts_from_files
from suite.reports.ledger import Attempt, Metric, _mark_best


def _row(run_id: str, value: float, status: str = "VALID", *, higher: bool = True) -> Attempt:
    return Attempt(run_id, f"/runs/{run_id}", f"2026-01-01T00:00:0{run_id[-1]}+00:00", "digits",
                   "singlestream", "null", "performance", "", status,
                   Metric("p90", value, "ms", higher), False, "d")


def test_best_follows_the_metric_direction_and_prefers_valid() -> None:
    latency = [_row("r1", 3.0, higher=False), _row("r2", 1.0, higher=False),
               _row("r3", 0.5, "INVALID", higher=False)]
    _mark_best(latency)
    assert [r.run_id for r in latency if r.best] == ["r2"]  # lowest VALID latency
    throughput = [_row("r1", 3.0), _row("r2", 1.0)]
    _mark_best(throughput)
    assert [r.run_id for r in throughput if r.best] == ["r1"]


def test_the_audit_reads_attempts_only_from_the_verified_bytes(tmp_path: Path) -> None:
    bundle = tmp_path / "b.tar.gz"
    with tarfile.open(bundle, "w:gz"):
        pass
    report = AuditReport(bundle=str(bundle), bundle_sha256="0" * 64)
    report.add(1, "signature and file list", True, [])
    report.read_attempts()
    assert report.attempts is None  # the file's bytes are not the audited ones
    failed = AuditReport(bundle=str(bundle), bundle_sha256="0" * 64)
    failed.add(1, "signature and file list", False, [])
    assert failed.to_dict()["attempts"] is None


def test_an_unreadable_attempts_record_is_named() -> None:
    good = {"chosen": "r1", "attempts": [dataclasses.asdict(_row("r1", 2.0)) | {"chosen": True}]}
    records = attempts_from_files({
        "evidence/a/attempts.json": json.dumps(good).encode(),
        "evidence/b/attempts.json": b"{not json"})
    assert [r.result for r in records] == ["a", "b"]
    assert records[0].attempts[0].chosen and records[0].attempts[0].value == 2.0
    assert "evidence/b/attempts.json is unreadable" in records[1].problem

