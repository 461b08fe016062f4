"""Bad config input, before any run: an unknown benchmark table in a user file names the
closest benchmark, and each bad flag or value given to the real CLI exits 1 naming it,
with nothing written under the runs directory. Layering and provenance are in
tests/unit/config/test_loader.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from suite.config.loader import ConfigRequest, load_config
from suite.errors import ConfigError
from suite.paths import Paths
from tests.conftest import run_cli


def test_unknown_benchmark_table_in_a_file(paths: Paths, tmp_path: Path) -> None:
    user = tmp_path / "mine.toml"
    user.write_text("[benchmarks.resnet.sut]\nworkers = 2\n")
    with pytest.raises(ConfigError) as info:
        load_config(ConfigRequest(config_file=user), paths)
    assert "resnet" in info.value.message and "resnet50" in info.value.hint


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--scenario", "sever"], "did you mean 'server'"),
        (["--backend", "tensorrtt"], "unknown backend 'tensorrtt'"),
        (["--set", "loadgen.expected_qs=1"], "loadgen.expected_qps"),
        (["--set", "sut.workers=two"], "sut.workers"),
        (["--config", "/nonexistent/user.toml"], "/nonexistent/user.toml"),
    ],
)
def test_cli_bad_input_exits_1_before_any_run(args: list[str], needle: str,
                                              runs_dir: Path) -> None:
    proc = run_cli("run", "--quick", "--runs-dir", str(runs_dir), *args)
    assert proc.returncode == 1, proc.stderr
    assert needle in " ".join(proc.stderr.split())
    assert list(runs_dir.iterdir()) == []  # nothing half-written

