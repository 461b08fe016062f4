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



def test_a_pre_flight_error_is_printed_once(tmp_path: Path) -> None:
    done = run_cli("run", "--quick", "--runs-dir", str(tmp_path),
                   "--set", "loadgen.min_duraton_ms=5", "--set", "loadgen.nope=1")
    assert done.returncode == 1
    for key in ("loadgen.min_duraton_ms", "loadgen.nope"):  # every error, each once
        assert done.stderr.count(f"unknown key '{key}'") == 1, done.stderr
    assert "" not in done.stderr.splitlines(), done.stderr  # no empty progress line


def test_a_quick_run_gives_one_reason_and_no_fixed_value_warning(tmp_path: Path) -> None:
    done = run_cli("run", "--quick", "--backend", "null", "--runs-dir", str(tmp_path))
    assert done.returncode in (0, 2), done.stderr
    assert "LINT-FIXED" not in done.stderr and "remove the override" not in done.stderr
    reasons = [line for line in done.stdout.splitlines() if "not submittable:" in line]
    assert len(reasons) == 1 and "--quick" in reasons[0], done.stdout


def test_worker_processes_outside_server_are_refused_before_a_run_directory(
        tmp_path: Path) -> None:
    """They would fail at setup, after a FAILED run directory was made."""
    runs = tmp_path / "runs"
    proc = run_cli("run", "--scenario", "offline", "--quick", "--backend", "null", "--set",
                   'sut.worker_model="processes"', "--runs-dir", str(runs))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "sut.worker_model = 'processes' is implemented for Server only" in proc.stderr
    assert not runs.exists()
