"""The run's lifecycle on the parent side, before any LoadGen test: a runs directory that
cannot be created is one line naming it and its errno, and the progress display shows the
setup stage, then the rate. The lifecycle through real child processes and LoadGen is in
tests/integration/test_lifecycle.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from suite.cli import app as cli
from tests.conftest import REPO, cli_env


def test_an_unwritable_runs_dir_is_one_line_naming_it_and_the_errno(tmp_path: Path) -> None:
    # Tests may run as root, which ignores permission bits: a runs dir below a regular
    # file is unwritable for everyone (ENOTDIR).
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    runs = blocker / "runs"
    proc = subprocess.run(
        [sys.executable, "-m", "suite", "run", "--quick", "--backend", "null",
         "--runs-dir", str(runs)], cwd=REPO, env=cli_env(), capture_output=True, text=True,
        timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"--runs-dir {runs}: its parent {blocker} is not a directory" in proc.stderr


def test_the_display_shows_the_setup_stage_then_the_rate() -> None:
    import io

    from rich.console import Console
    from rich.progress import Progress

    progress = Progress(console=Console(file=io.StringIO()))
    bars = cli._Bars(progress, "digits offline null")
    bars.stage("performance")("compiling")
    [task] = progress.tasks
    assert task.description == "digits offline null performance: compiling"
    bars.bar("performance")(500, 1000, 0.5)
    assert progress.tasks == [task] and task.description.endswith("1,000 samples/s")
    assert task.completed == 500 and task.total == 1000

