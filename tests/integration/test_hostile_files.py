"""An endless file where a key or a config belongs: the CLI ends in one line and exit 1,
within a memory limit that a whole read of it would break (issue 28)."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, cli_env

ZERO = Path("/dev/zero")
pytestmark = pytest.mark.skipif(not ZERO.exists(), reason="no /dev/zero on this system")


def _limited() -> None:
    limit = 2 << 30  # 2 GiB of address space: the CLI needs far less, a whole read more
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


@pytest.mark.parametrize(("args", "says"), [
    (["verify", "/dev/zero", "--key", "/dev/zero"], "larger than a public key file can be"),
    (["lint", "--config", "/dev/zero"], "larger than a config file can be"),
], ids=["verify --key", "lint --config"])
def test_an_endless_file_is_one_line_and_exit_1(args: list[str], says: str) -> None:
    done = subprocess.run([sys.executable, "-m", "suite", *args], cwd=REPO, env=cli_env(),
                          capture_output=True, text=True, timeout=60, preexec_fn=_limited)
    assert done.returncode == 1, done.stdout + done.stderr[-2000:]
    assert says in done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr
