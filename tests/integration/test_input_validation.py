"""Inputs the suite once accepted (or crashed on) and must refuse: each gets one line
naming the file, key or value and what to do, and exit 1 from the CLI, before LoadGen
starts. The CLI runs as a subprocess, as a user runs it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from suite.config.loader import (
    MAX_BATCH_SIZE,
    ConfigRequest,
    load_config,
)
from suite.paths import find_paths
from tests.conftest import REPO, run_cli
from tests.unit.config.test_input_validation import LONG_SERVER, _refused


def _run(runs_dir: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    proc = run_cli("run", "--quick", "--runs-dir", str(runs_dir), *args, **env)
    assert list(runs_dir.iterdir()) == []  # refused before any run directory
    return proc


def test_run_stops_on_an_implausible_prediction(runs_dir: Path) -> None:
    _refused(_run(runs_dir, *LONG_SERVER), "loadgen.target_qps")


def test_max_batch_size_beyond_the_bound(runs_dir: Path) -> None:
    assert MAX_BATCH_SIZE == 65_536
    line = _refused(_run(runs_dir, "--batch-size", "100000000"), "sut.max_batch_size",
                    "100000000")
    assert "--batch-size" in line and "65536" in line
    config, _ = load_config(ConfigRequest(sets=["sut.max_batch_size=65536"]), find_paths())
    assert config.sut.max_batch_size == MAX_BATCH_SIZE


@pytest.mark.parametrize("flag", [["--target-qps", "inf"], ["--target-qps", "nan"],
                                  ["--set", "loadgen.target_qps=inf"]])
def test_target_qps_inf_is_one_line_not_a_traceback(flag: list[str], runs_dir: Path) -> None:
    _refused(_run(runs_dir, "--scenario", "server", *flag), "loadgen.target_qps", "finite")




def test_a_config_file_that_is_not_utf8(tmp_path: Path, runs_dir: Path) -> None:
    user = tmp_path / "latin1.toml"
    user.write_bytes("# réglages\n[sut]\nworkers = 2\n".encode("latin-1"))
    line = _refused(_run(runs_dir, "--config", str(user)), str(user), "not UTF-8")
    assert "byte 3" in line
    _refused(run_cli("lint", "--config", str(user)), str(user), "not UTF-8")


def test_a_config_file_that_is_a_directory(tmp_path: Path, runs_dir: Path) -> None:
    _refused(_run(runs_dir, "--config", str(tmp_path)), str(tmp_path), "is a directory")
    _refused(run_cli("lint", "--config", str(tmp_path)), str(tmp_path), "is a directory")


@pytest.mark.parametrize(("text", "needles"), [
    ('benchmarks = ["digits"]\n', ("'benchmarks' must be a table", "an array")),
    ('scenarios = "server"\n', ("'scenarios' must be a table", "a string")),
    ('[scenarios]\nserver = "x"\n', ("[scenarios] server = 'x'", "a table is expected")),
    ("[benchmarks]\ndigits = 3\n", ("[benchmarks] digits = 3", "a table is expected")),
    ("quick = 5\n", ("quick = 5", "a table is expected")),
])
def test_a_value_where_a_table_belongs(text: str, needles: tuple[str, ...], tmp_path: Path,
                                       runs_dir: Path) -> None:
    user = tmp_path / "user.toml"
    user.write_text(text)
    _refused(_run(runs_dir, "--scenario", "server", "--config", str(user)), str(user),
             *needles)


@pytest.mark.parametrize(("body", "needle"), [
    ("raise RuntimeError('no driver found at import')", "RuntimeError: no driver found"),
    ("def broken(:\n    pass", "SyntaxError"),
    ("import sys\nsys.exit(3)", "SystemExit: 3"),
    ("x = 1 / 0", "ZeroDivisionError"),
])
def test_a_backend_module_whose_import_raises(body: str, needle: str, tmp_path: Path,
                                              runs_dir: Path) -> None:
    (tmp_path / "exploding_backend.py").write_text(body + "\n")
    proc = _run(runs_dir, "--backend", "exploding_backend:Backend",
                PYTHONPATH=f"{REPO}:{tmp_path}")
    line = _refused(proc, "exploding_backend:Backend", "cannot be imported", needle)
    assert line.startswith("error")


@pytest.mark.parametrize(("spec", "needle"), [(":", "names no module"),
                                              ("suite.backends.null:", "names no class"),
                                              (":NullBackend", "names no module")])
def test_a_backend_spec_without_module_or_class(spec: str, needle: str,
                                                runs_dir: Path) -> None:
    _refused(_run(runs_dir, "--backend", spec), f"backend '{spec}'", needle)



# Python reads at most 4,300 decimal digits of an integer (int() raises ValueError past
# it, and tomllib lets that through); hexadecimal has no such limit, but printing the
# value in any message would then raise. Both are refused where they are read.
LONG_DECIMAL = "9" * 5000
LONG_HEX = "0x" + "f" * 4000


@pytest.mark.parametrize("command", ["run", "lint"])
@pytest.mark.parametrize("digits", [LONG_DECIMAL, LONG_HEX], ids=["decimal", "hex"])
def test_an_integer_too_long_to_print_in_a_config_file(command: str, digits: str,
                                                       tmp_path: Path, runs_dir: Path) -> None:
    user = tmp_path / "user.toml"
    user.write_text(f"[sut]\nworkers = 2\n\n[loadgen]\nmin_query_count = {digits}\n")
    args = ["--config", str(user)]
    proc = _run(runs_dir, *args) if command == "run" else run_cli("lint", *args)
    line = _refused(proc, str(user), "more than 4,300 digits")
    # where: the line (the parser gives no position) or the key (parsed, then found)
    assert (":5 (min_query_count)" if digits == LONG_DECIMAL else "loadgen.min_query_count") \
        in line


@pytest.mark.parametrize("command", ["run", "lint"])
@pytest.mark.parametrize("value", [LONG_DECIMAL, LONG_HEX, f"[1, {LONG_HEX}]"],
                         ids=["decimal", "hex", "in-an-array"])
def test_an_integer_too_long_to_print_in_set(command: str, value: str,
                                             runs_dir: Path) -> None:
    args = ["--set", f"loadgen.target_qps={value}"]
    proc = _run(runs_dir, *args) if command == "run" else run_cli("lint", *args)
    line = _refused(proc, "--set loadgen.target_qps", "more than 4,300 digits")
    assert len(line) < 300  # the value itself is never printed
