"""A backend's own scenario defaults (``BackendCore.scenario_defaults``): torch runs Server
with 1 worker where the user set none, recorded as "default for torch", below every layer
a user writes; other backends and scenarios keep the scenario file's count."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from suite.backends import backend_class
from suite.config.loader import ConfigRequest, load_config
from suite.paths import Paths
from tests.conftest import run_cli


def _workers(paths: Paths, **request: Any) -> tuple[int, str]:
    config, _ = load_config(ConfigRequest(scenario="server", **request), paths)
    return config.sut.workers, config.provenance["sut.workers"]


def test_torch_declares_one_server_worker() -> None:
    assert backend_class("torch").scenario_defaults == {"server": {"sut.workers": 1}}
    assert backend_class("onnxruntime").scenario_defaults == {}


def test_torch_server_runs_one_worker_recorded_as_its_default(paths: Paths) -> None:
    assert _workers(paths, backend="torch") == (1, "default for torch")
    # The scenario file's count (2) for a backend that declares none.
    assert _workers(paths, backend="onnxruntime") == (2, "scenarios/server.toml")
    # Other scenarios: the scenario file's.
    config, _ = load_config(ConfigRequest(scenario="offline", backend="torch"), paths)
    assert config.provenance["sut.workers"] == "scenarios/offline.toml"


def test_what_the_user_sets_wins_over_the_backend_default(paths: Paths,
                                                          tmp_path: Path) -> None:
    assert _workers(paths, backend="torch", sets=["sut.workers=2"]) == (2, "--set sut.workers")
    user = tmp_path / "mine.toml"
    user.write_text("[sut]\nworkers = 3\n")
    assert _workers(paths, backend="torch", config_file=user) == (3, str(user))


def test_suite_config_shows_the_default_and_its_source() -> None:
    proc = run_cli("config", "--benchmark", "digits", "--scenario", "server",
                   "--backend", "torch", "--json")
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)["values"]["sut.workers"]
    assert shown == {"value": 1, "source": "default for torch"}
