"""The remote backend against real MLServer processes on loopback ports.

Two replicas serve digits for the module (started once, ~3 s); a third server is
blocked (SIGSTOP) and then killed by the failure tests; a fourth serves a model whose
output is not the card's. Every LoadGen run is the real CLI in a child process.

Timing: a shared 2-core box can push queries past the 10 ms Server bound, so an
INVALID run is repeated once and then reported as XFAIL ("timing"); an error (exit 1)
or a missing record always fails.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from suite.backends import create
from suite.errors import ConfigError
from suite.models import load_card
from suite.paths import find_paths
from tests.conftest import run_cli
from tests.support.remote_fixtures import missing

if (reason := missing()) is not None:
    pytest.skip(reason, allow_module_level=True)


CARD = load_card(find_paths(), "digits")


@pytest.mark.parametrize(("options", "says"), [
    ({"endpoints": ["https://127.0.0.1:1"]}, "expected 'grpc://host:port'"),
    ({"endpoints": ["grpc://127.0.0.1"]}, "expected 'grpc://host:port'"),
    ({"endpoints": ["grpc://127.0.0.1:1"], "protocol": "rest-json"}, "needs http://"),
    ({"endpoints": ["grpc://a:1", "grpc://a:1"]}, "listed twice"),
])
def test_bad_options_are_refused(options: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        create("remote", options)


def test_serve_writes_triton_repo_and_kserve_manifest(tmp_path: Path) -> None:
    proc = run_cli("serve", "--write-triton-repo", str(tmp_path / "repo"),
                   "--write-kserve-manifest", str(tmp_path / "isvc.yaml"),
                   "--max-batch-size", "32", "--replicas", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    config = (tmp_path / "repo" / "digits" / "config.pbtxt").read_text()
    assert 'platform: "onnxruntime_onnx"' in config and "max_batch_size: 32" in config
    assert 'name: "input", data_type: TYPE_FP32, dims: [ 1, 8, 8 ]' in config
    onnx = tmp_path / "repo" / "digits" / "1" / "model.onnx"
    assert onnx.read_bytes() == CARD.onnx_path.read_bytes()
    manifest = (tmp_path / "isvc.yaml").read_text()
    assert "protocolVersion: v2" in manifest and "minReplicas: 3" in manifest

