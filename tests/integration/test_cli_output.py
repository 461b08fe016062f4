"""What `suite run`, `show` and `runs` print, over one real quick run (issue 29.6, 29.7):
the results table fits 100 columns (``--wide`` adds the rest), and a run's path as
`suite runs` prints it pastes into `suite show`, `diff` and `report`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import cli_env, only_run_dir, run_cli


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The runs directory holding one quick digits run (both tests), and what it printed."""
    runs = tmp_path_factory.mktemp("output") / "runs"
    done = run_cli("run", "--quick", "--mode", "all", "--runs-dir", str(runs))
    assert done.returncode in (0, 2), done.stderr  # VALID or INVALID: LoadGen's verdict
    return runs, done.stdout


def _run_cell(line: str) -> str:
    """The run column of a `suite runs` row: after the best-attempt mark, up to the first
    space (a run path has none here)."""
    return line.lstrip("* ").split()[0]


def test_the_results_table_fits_100_columns_and_wide_shows_the_rest(
        quick_run: tuple[Path, str]) -> None:
    runs, printed = quick_run
    table = printed.split("\n  - ")[0]  # the notes below may be longer: never wrapped
    assert max(len(line) for line in table.splitlines()) <= 100, table
    # piped, rich draws ASCII borders and the compact table has no outer edge: the body
    # rows are the lines after the header's rule ("-----+-----")
    lines = table.splitlines()
    rule = next(i for i, line in enumerate(lines) if line and set(line) <= {"-", "+"})
    rows = lines[rule + 1:]
    # one line per test: nothing wrapped to fit
    assert [r.split("|")[1].strip() for r in rows] == ["performance", "accuracy"], table
    assert "samples/s" in rows[0] and ("pass" in rows[1] or "FAIL" in rows[1]), table
    assert "early stopping" not in table
    wide = run_cli("show", "--wide", str(only_run_dir(runs)))
    assert wide.returncode == 0, wide.stderr
    for column in ("division", "early stopping", "accuracy vs target"):
        assert column in wide.stdout


def test_a_path_printed_by_runs_works_in_show_diff_and_report(
        quick_run: tuple[Path, str], tmp_path: Path) -> None:
    runs, _ = quick_run
    run_dir = only_run_dir(runs)
    listed = run_cli("runs", str(runs))
    [line] = [line for line in listed.stdout.splitlines() if run_dir.name in line]
    path = _run_cell(line)
    assert path == str(run_dir)
    shown = run_cli("show", path)
    assert shown.returncode == 0 and "performance" in shown.stdout, shown.stderr
    assert run_cli("diff", path, path).returncode == 0
    report = run_cli("report", path, "--out", str(tmp_path / "r.html"))
    assert report.returncode == 0 and (tmp_path / "r.html").is_file(), report.stderr
    # By name under --runs-dir, and relative to where `suite runs` ran
    by_name = run_cli("show", "--runs-dir", str(runs), run_dir.name)
    assert by_name.returncode == 0, by_name.stderr
    here = subprocess.run([sys.executable, "-m", "suite", "runs", "runs"], cwd=runs.parent,
                          env=cli_env(), capture_output=True, text=True, timeout=120)
    [line] = [line for line in here.stdout.splitlines() if run_dir.name in line]
    relative = _run_cell(line)
    assert relative == f"runs/{run_dir.name}"
    again = subprocess.run([sys.executable, "-m", "suite", "show", relative], cwd=runs.parent,
                           env=cli_env(), capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
