"""``suite config``: values printed as ``--set`` takes them, and ``--json`` (issue 40, item 8)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO, cli_env


def _config(*args: str, columns: str = "100") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "suite", "config", "--benchmark", "digits",
                           "--scenario", "offline", "--backend", "onnxruntime", *args],
                          cwd=REPO, env=cli_env(COLUMNS=columns), capture_output=True,
                          text=True, timeout=120)


def test_config_json_values_go_back_into_set_unchanged() -> None:
    """Every value --json prints is accepted by --set as printed (before: `True` and
    `('CPUExecutionProvider',)`, which --set rejects)."""
    proc = _config("--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    values = report["values"]
    assert values["loadgen.enable_trace"] == {"value": False, "source": "default"}
    assert values["backend.onnxruntime.providers"]["value"] == ["CPUExecutionProvider"]
    sets = [f"{key}={json.dumps(values[key]['value'])}"
            for key in ("loadgen.enable_trace", "backend.onnxruntime.providers")]
    again = _config("--json", *(arg for kv in sets for arg in ("--set", kv)))
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["values"]["loadgen.enable_trace"]["source"].startswith("--set")


def test_config_table_prints_set_syntax_within_columns() -> None:
    proc = _config()
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100  # COLUMNS, though piped
    trace = next(line for line in lines if "loadgen.enable_trace" in line)
    assert " false " in trace and "True" not in trace


def test_a_python_boolean_in_set_is_refused_with_the_toml_spelling() -> None:
    proc = _config("--set", "loadgen.enable_trace=True")
    assert proc.returncode == 1
    assert "hint: write loadgen.enable_trace=true or loadgen.enable_trace=false" in proc.stderr
