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


#: Every command that reads or writes runs, and so takes --runs-dir.
RUNS_COMMANDS = ("run", "demo", "runs", "show", "report", "diff", "check", "package", "tune",
                 "audit")


def test_every_command_that_reads_or_writes_runs_takes_runs_dir() -> None:
    for command in RUNS_COMMANDS:
        shown = run_cli(command, "--help")
        assert shown.returncode == 0, shown.stderr
        assert "--runs-dir" in shown.stdout, command


def test_report_writes_to_out_and_still_takes_html(tmp_path: Path) -> None:
    shown = run_cli("report", "--help").stdout
    assert "--out FILE" in shown and "--html" not in shown  # the old name is hidden
    for flag in ("--out", "--html"):  # both reach the report (which names the missing run)
        done = run_cli("report", str(tmp_path / "gone"), flag, str(tmp_path / "r.html"))
        assert done.returncode == 1 and "gone is not a directory" in done.stderr, flag
    neither = run_cli("report", str(tmp_path))
    assert neither.returncode == 1 and "--out FILE" in neither.stderr
    both = run_cli("report", str(tmp_path), "--out", "a.html", "--html", "b.html")
    assert both.returncode == 1 and "two output files given" in both.stderr


def test_one_name_for_the_system_file_and_the_batch_size() -> None:
    """Issue 40, item 9: `suite system --config` was `package --system-config`'s file and
    `serve --max-batch-size` was `run --batch-size`; the shared names work, the old too."""
    system = run_cli("system", "--help")
    assert "--system-config" in system.stdout and "--config" in system.stdout
    serve = run_cli("serve", "--help")
    assert "--batch-size" in serve.stdout and "--max-batch-size" in serve.stdout
    package = run_cli("package", "--help")
    assert "--system-config" in package.stdout
