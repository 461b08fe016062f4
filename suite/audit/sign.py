"""Sign an audit report as a DSSE attestation of its own (in-toto Statement v1)."""

from __future__ import annotations

import json
from pathlib import Path

from suite.audit.report import AUDIT_PREDICATE_TYPE, AuditReport


def sign_report(report: AuditReport, key_path: Path, report_path: Path) -> Path:
    """Write ``<report>.dsse.json``: the report as predicate, the bundle as subject."""
    from suite.submission.bundle import dsse
    from suite.submission.bundle.keys import load_private, passphrase
    from suite.submission.bundle.statement import canonical

    key = load_private(key_path, passphrase())
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": Path(report.bundle).name,
                     "digest": {"sha256": report.bundle_sha256}}],
        "predicateType": AUDIT_PREDICATE_TYPE,
        "predicate": report.to_dict(),
    }
    envelope = dsse.sign(canonical(statement), key)
    target = report_path.with_suffix(".dsse.json")
    target.write_text(json.dumps(envelope, indent=2) + "\n")
    return target
