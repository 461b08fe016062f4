"""``suite.api`` is the product: every command is a typed library call, usable with no
CLI. Here, without a run: each command has its call (``suite.run`` is ``api.run``), and
``lint`` and ``system`` return typed results. The whole flow (run, check, keygen, package,
verify, audit) on a real run is in tests/integration/test_api.py."""

from __future__ import annotations

from suite import api
from suite.config.loader import ConfigRequest
from suite.findings import Severity

COMMANDS = ("run", "tune", "check", "lint", "package", "sign", "verify", "audit", "system")


def test_every_command_has_a_library_call() -> None:
    import suite

    for name in COMMANDS:
        assert callable(getattr(api, name)), name
        assert name in api.__all__
    assert suite.run is api.run


def test_lint_and_system_return_typed_results() -> None:
    report = api.lint(ConfigRequest(sets=["loadgen.min_duraton_ms=5"]))
    assert [f.severity for f in report.errors] == [Severity.ERROR]
    described = api.system()
    assert described.data["division"] == "closed" and isinstance(described.empty, list)

