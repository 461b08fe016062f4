"""Files a user names are read up to a cap, never whole: an endless or huge file is one
clear error (issue 28: ``--key /dev/zero`` and ``--config /dev/zero`` read until killed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from suite.config.layers import read_toml
from suite.errors import InputTooLarge
from suite.paths import read_limited
from suite.submission.bundle.keys import load_public

ZERO = Path("/dev/zero")


def test_a_file_within_the_cap_is_read_whole(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x" * 10)
    assert read_limited(tmp_path / "f", 10, "thing") == b"x" * 10


def test_one_byte_over_the_cap_is_refused_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x" * 11)
    with pytest.raises(InputTooLarge, match=r"f is larger than a thing can be \(10 bytes\)"):
        read_limited(tmp_path / "f", 10, "thing")


@pytest.mark.skipif(not ZERO.exists(), reason="no /dev/zero on this system")
def test_an_endless_key_or_config_ends_in_one_error() -> None:
    with pytest.raises(InputTooLarge, match="public key file"):
        load_public(ZERO)
    with pytest.raises(InputTooLarge, match="config file"):
        read_toml(ZERO)


def _load_in_a_child(code: str, path: Path) -> str:
    """Run ``code`` (with ``path`` as ``p``) in a child: a read that blocks fails here."""
    import subprocess
    import sys

    from tests.conftest import REPO, cli_env

    done = subprocess.run([sys.executable, "-c", f"from pathlib import Path\np = Path("
                           f"{str(path)!r})\n{code}"], cwd=REPO, env=cli_env(),
                          capture_output=True, text=True, timeout=60)
    return done.stdout + done.stderr


@pytest.mark.parametrize(("what", "code", "needle"), [
    ("result.json", "from suite.results import RunResult\ntry:\n    RunResult.load(p)\n"
     "except ValueError as e:\n    print(e)", "not a regular file, so not a result.json"),
    ("a record the checker reads", "from suite.checker.context import read_json\n"
     "print(read_json(p))", "not a regular file"),
    ("an accuracy log", "from suite.accuracy import read_accuracy_entries\n"
     "from suite.errors import SuiteError\ntry:\n    read_accuracy_entries(p)\n"
     "except SuiteError as e:\n    print(e)", "is not a regular file"),
])
def test_a_run_s_records_that_are_fifos_are_refused_not_waited_on(
        tmp_path: Path, what: str, code: str, needle: str) -> None:
    import os

    fifo = tmp_path / "result.json"
    os.mkfifo(fifo)  # no writer: opening it would wait forever
    assert needle in _load_in_a_child(code, fifo), what


def test_records_and_logs_over_their_caps_are_refused(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from suite import paths
    from suite.accuracy import read_accuracy_entries
    from suite.checker.context import read_json

    big = tmp_path / "big.json"
    big.write_text("[" + "0," * 600 + "0]")
    monkeypatch.setattr("suite.checker.context.RECORD_FILE_LIMIT", 1000)
    monkeypatch.setattr("suite.accuracy.ACCURACY_LOG_LIMIT", 1000)
    assert read_json(big) == (None, "larger than 1,000 bytes")
    with pytest.raises(InputTooLarge, match=r"accuracy log .*big\.json is larger than 1,000"):
        read_accuracy_entries(big)
    assert paths.regular_file_problem(big, 2000) is None


@pytest.mark.skipif(not ZERO.exists(), reason="no /dev/zero on this system")
def test_an_endless_system_description_ends_in_one_error() -> None:
    from suite.submission.system_description import read_user_toml

    with pytest.raises(InputTooLarge, match="system description file"):
        read_user_toml(ZERO)  # `suite system --config` and `package --system-config`
