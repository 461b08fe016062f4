"""An audit report of a bundle whose file name is not UTF-8 is still written as JSON."""

from __future__ import annotations

import json
import os

from suite.audit.report import AuditReport


def test_a_bundle_name_that_is_not_utf8_is_escaped_in_the_report() -> None:
    name = os.fsdecode(b"/tmp/bundle-\xff.tar.gz")  # how Python hands such a name over
    report = AuditReport(bundle=name, bundle_sha256="0" * 64)
    assert json.loads(report.to_json())["bundle"] == "/tmp/bundle-\\xff.tar.gz"
