"""Whether a backend can run is decided without importing it, and never by crashing: a
missing optional extra is a reason, even when only a submodule of it is required."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

from suite.backends.base import BackendBase, importable
from tests.conftest import REPO, cli_env

#: The optional extras' top-level packages (torch, remote, tensorrt, report, hf).
EXTRAS = ("torch", "tritonclient", "mlserver", "httpx", "tensorrt", "pycuda", "matplotlib",
          "jinja2", "transformers", "safetensors", "tokenizers")


def test_a_submodule_of_a_missing_package_is_not_importable_rather_than_an_error() -> None:
    assert importable("json") and importable("email.mime")
    assert not importable("no_such_package_here")
    assert not importable("no_such_package_here.grpc")  # find_spec itself raises here


def test_a_backend_whose_extra_is_missing_says_so() -> None:
    class NeedsGrpc(BackendBase):
        name = "needs-grpc"
        requires: ClassVar[tuple[tuple[str, str], ...]] = (
            ("no_such_package_here.grpc", "no-such-package[grpc]"),)
        extra = "remote"

    reason = NeedsGrpc.unavailable_reason()
    assert reason is not None and "no-such-package[grpc]" in reason
    assert "pip install -e '.[remote]'" in reason


def test_suite_backends_lists_every_backend_with_no_optional_extra_installed() -> None:
    # Each extra's packages are made unimportable in the child, as on a default install.
    code = (
        "import sys\n"
        f"BLOCKED = set({EXTRAS!r})\n"
        "class Blocker:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.partition('.')[0] in BLOCKED:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Blocker())\n"
        "from suite.cli.app import main\n"
        "sys.exit(main(['backends']))\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=cli_env(),
                          capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("onnxruntime", "null", "remote", "tensorrt", "pytorch"):
        assert name in done.stdout, done.stdout
    assert "tritonclient" in done.stdout  # the remote backend names what it misses


def test_an_installed_package_whose_import_fails_is_a_reason_not_a_traceback(
        tmp_path: Path) -> None:
    # An optional package that is installed but broken (an ImportError from a missing
    # shared library, not ModuleNotFoundError) raises inside find_spec of its submodule.
    broken = tmp_path / "tritonclient"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise ImportError('libcurl.so.4: cannot open')\n")
    done = subprocess.run([sys.executable, "-m", "suite", "backends"], cwd=REPO,
                          env=cli_env(PYTHONPATH=f"{tmp_path}{os.pathsep}{REPO}"),
                          capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ImportError" in done.stdout, done.stdout
