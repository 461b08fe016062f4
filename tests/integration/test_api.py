"""``suite.api`` is the product: the whole flow (run, check, keygen, package, verify,
audit) goes through its typed library calls on a real run, with no CLI; and one run reads
and resolves the round's rules once. Each command's call, without a run, is in
tests/unit/core/test_api.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from suite import api
from suite.audit.report import AuditReport
from suite.config.loader import ConfigRequest
from suite.results import Status
from tests.conftest import SPEED_FREE_OFFLINE


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



def test_one_run_resolves_the_rounds_rules_once(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The rules file is read and resolved for the benchmark and scenario once; every later
    stage (settings, the run directory's checks, each test) reads them from the config."""
    from suite.config import loader, rules

    calls = {"load_rules": 0, "resolve": 0, "benchmark": 0}

    def counting(name: str, real: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return real(*args, **kwargs)
        return wrapper

    read = counting("load_rules", rules.load_rules)
    monkeypatch.setattr(loader, "load_rules", read)  # where load_config reads them
    monkeypatch.setattr(rules, "load_rules", read)  # and anyone else
    monkeypatch.setattr(rules.RuleSet, "resolve", counting("resolve", rules.RuleSet.resolve))
    monkeypatch.setattr(rules.RuleSet, "benchmark",
                        counting("benchmark", rules.RuleSet.benchmark))
    result = api.run(ConfigRequest(scenario="offline", mode="all", quick=True, backend="null",
                                   runs_dir=tmp_path / "runs", sets=SPEED_FREE_OFFLINE))
    assert [t.mode for t in result.tests] == ["performance", "accuracy"]  # two tests ran
    # resolve() looks the benchmark up itself: one lookup in all, none by a later stage
    assert calls == {"load_rules": 1, "resolve": 1, "benchmark": 1}
