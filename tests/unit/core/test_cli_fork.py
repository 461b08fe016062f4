"""``run_cli``'s forked commands (tests/support/cli_fork.py) give what a real
``python -m suite`` gives: exit code, standard output and error byte for byte, the test's
environment (``COLUMNS`` read by the command, not the server), and a timeout."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, cli_env
from tests.support import cli_fork


def _real(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    import sys

    return subprocess.run([sys.executable, "-m", "suite", *args], cwd=REPO,
                          env=cli_env(**env), capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(("args", "env"), [
    (("config", "--backend", "null"), {"COLUMNS": "100"}),  # the table's width: the test's
    (("nosuchcommand",), {}),  # a usage error: exit 1, one line and a hint
    (("lint", "--set", "loadgen.min_duraton_ms=5"), {}),  # a lint error: exit 1
])
def test_a_forked_command_answers_as_the_real_one(args: tuple[str, ...],
                                                  env: dict[str, str]) -> None:
    assert cli_fork.usable(env)
    forked = cli_fork.run_forked(list(args), cli_env(**env), REPO, timeout=300)
    real = _real(*args, **env)
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        real.returncode, real.stdout, real.stderr)
    assert forked.stdout or forked.stderr  # the command said something


def test_a_pythonpath_of_the_test_is_seen_by_the_command(tmp_path: Path) -> None:
    (tmp_path / "exploding_backend.py").write_text("raise RuntimeError('at import')\n")
    env = cli_env(PYTHONPATH=f"{REPO}:{tmp_path}")
    forked = cli_fork.run_forked(["config", "--backend", "exploding_backend:Backend"], env,
                                 REPO, timeout=300)
    assert forked.returncode == 1 and "RuntimeError: at import" in forked.stderr, forked


def test_other_python_variables_run_a_real_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not cli_fork.usable({"PYTHONHASHSEED": "0"})
    monkeypatch.setenv(cli_fork.SWITCH, "0")
    assert not cli_fork.usable({})


def test_a_command_past_its_timeout_is_killed(tmp_path: Path) -> None:
    # A one-minute Server test, stopped after 2 s (its LoadGen child ends by itself once
    # its parent is gone: tests/integration/test_signals.py)
    with pytest.raises(subprocess.TimeoutExpired):
        cli_fork.run_forked(["run", "--backend", "null", "--scenario", "server", "--quick",
                             "--set", "loadgen.min_duration_ms=60000",
                             "--runs-dir", str(tmp_path)], cli_env(), REPO, timeout=2)
