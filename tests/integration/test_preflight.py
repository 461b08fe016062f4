"""``suite run`` stops on a pre-flight lint error before LoadGen starts: exit 1, the rule
and the key it meant named, no run directory. The linter's findings are in
tests/unit/config/test_preflight.py."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import run_cli


def test_run_stops_before_loadgen_on_a_lint_error(tmp_path: Path) -> None:
    done = run_cli("run", "--quick", "--runs-dir", str(tmp_path),
                   "--set", "loadgen.min_duraton_ms=5")
    assert done.returncode == 1
    assert "LINT-UNKNOWN-KEY" in done.stderr and "loadgen.min_duration_ms" in done.stderr
    assert list(tmp_path.iterdir()) == []  # no run directory: LoadGen never started

