"""One name per concept: ``--runs-dir`` everywhere runs are read or written (with the real
default in ``--help``), ``--out-dir`` for output directories; the old spellings still work."""

from __future__ import annotations

from pathlib import Path

from suite.paths import find_paths
from tests.conftest import run_cli


def test_runs_takes_runs_dir_as_option_or_argument(tmp_path: Path) -> None:
    empty = tmp_path / "runs"
    empty.mkdir()
    as_option = run_cli("runs", "--runs-dir", str(empty), "--json")
    as_argument = run_cli("runs", str(empty), "--json")
    assert as_option.returncode == as_argument.returncode == 0, as_option.stderr
    assert as_option.stdout == as_argument.stdout
    both = run_cli("runs", str(empty), "--runs-dir", str(tmp_path))
    assert both.returncode == 1 and "two runs directories given" in both.stderr


def test_help_prints_the_real_runs_directory() -> None:
    shown = run_cli("run", "--help")
    # click wraps long help text, also at a hyphen inside the path
    assert str(find_paths().runs) in "".join(shown.stdout.split())


def test_keygen_writes_to_out_dir_and_still_takes_out(tmp_path: Path) -> None:
    for flag in ("--out-dir", "--out"):
        where = tmp_path / flag.strip("-")
        done = run_cli("keygen", flag, str(where), SUITE_KEY_PASSPHRASE="pass phrase 123")
        assert done.returncode == 0, done.stderr
        assert (where / "signing.pub").is_file()
