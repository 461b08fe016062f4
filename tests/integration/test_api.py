"""``suite.api`` is the product: every command is a typed library call, usable with no
CLI, and the whole flow (run, check, keygen, package, verify, audit) goes through it."""

from __future__ import annotations

from pathlib import Path

import pytest

from suite import api
from suite.audit.report import AuditReport
from suite.config.loader import ConfigRequest
from suite.results import Status


def test_run_check_package_verify_audit_as_library_calls(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUITE_KEY_PASSPHRASE", "api-test")
    runs = tmp_path / "runs"
    result = api.run(ConfigRequest(scenario="offline", mode="all", quick=True, runs_dir=runs))
    assert result.status is Status.VALID

    report = api.check(Path(result.run_dir))
    assert report.results and report.results[0].scenario.lower() == "offline"

    private, public, keyid = api.keygen(tmp_path / "keys")
    assert private.is_file() and public.is_file() and keyid

    built = api.package("Org", "box", runs_dir=runs, out_dir=tmp_path / "out",
                        key_path=private, unofficial=True)
    assert built.bundle is not None and built.bundle.is_file() and built.exit_code == 0
    assert not built.report.passed  # quick runs are not submittable: unofficial only

    verified = api.verify(built.bundle, public)
    assert verified.ok and verified.predicate.get("unofficial") is True

    resigned = api.sign(built.tree, out=tmp_path / "again.tar.gz", key_path=private)
    assert resigned.bundle is None and resigned.exit_code == 2  # the tree fails the rules

    audited = api.audit(built.bundle, public, runs_dir=tmp_path / "audit-runs")
    assert isinstance(audited, AuditReport)
    assert audited.checks[0].step == 1 and audited.checks[0].passed

