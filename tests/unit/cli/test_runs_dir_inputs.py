"""A ``--runs-dir`` the user names is checked before anything is written (issues 28 and
29.5): a missing parent (a typo), a path that is not UTF-8, a newline in it. Each is one
``error:`` line naming the path and one ``hint:`` line, exit 1, nothing created; and no
hint points at a ``runs_dir`` config key, which the config does not have."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from suite.errors import ConfigError
from suite.paths import check_runs_dir
from tests.conftest import REPO, cli_env


def _run(runs_dir: str | bytes) -> subprocess.CompletedProcess[bytes]:
    # argv as bytes: a non-UTF-8 path reaches the suite exactly as a shell passes it
    argv = [sys.executable.encode(), b"-m", b"suite", b"run", b"--quick", b"--runs-dir",
            os.fsencode(runs_dir)]
    return subprocess.run(argv, cwd=REPO, env=cli_env(), capture_output=True, timeout=300)


def _one_error(done: subprocess.CompletedProcess[bytes]) -> str:
    text = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 1, text
    lines = text.splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: --runs-dir ") and \
        lines[1].startswith("  hint: "), text
    assert "Traceback" not in text and "runs_dir in the config" not in text
    return lines[0]


def test_a_missing_parent_is_named_and_nothing_is_created(tmp_path: Path) -> None:
    typo = tmp_path / "ruuns" / "nightly" / "a"
    line = _one_error(_run(str(typo)))
    assert f"its parent {typo.parent} does not exist" in line
    assert f"the first missing part is {tmp_path / 'ruuns'}" in line
    assert list(tmp_path.iterdir()) == []


def test_a_path_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    line = _one_error(_run(os.fsencode(tmp_path) + b"/runs-\xff"))
    assert "runs-\\xff" in line and "not UTF-8" in line
    assert list(tmp_path.iterdir()) == []


def test_a_newline_in_the_path_is_one_line(tmp_path: Path) -> None:
    line = _one_error(_run(f"{tmp_path}/runs\nold"))
    assert "runs\\nold" in line and "control character" in line
    assert list(tmp_path.iterdir()) == []


def test_a_new_leaf_under_an_existing_parent_is_accepted_but_not_made(tmp_path: Path) -> None:
    assert check_runs_dir(tmp_path / "new", create=True) == tmp_path / "new"
    assert not (tmp_path / "new").exists()  # the run makes it, once it starts
    with pytest.raises(ConfigError, match="does not exist"):
        check_runs_dir(tmp_path / "new", create=False)  # reading runs: it must exist
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match="not a directory"):
        check_runs_dir(tmp_path / "file", create=True)
