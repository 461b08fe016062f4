"""A card's kind decides the default backend; a backend of the wrong kind fails at once.

Without ``--backend`` an LLM card runs on ``torch-llm`` and any other on onnxruntime; a
classification backend named for an LLM card (or the reverse) is one line and exit 1,
before any run directory exists.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from suite.api import default_backend
from tests.conftest import run_cli


def test_the_default_backend_follows_the_card() -> None:
    assert default_backend("tinylm") == "torch-llm"
    assert default_backend("tinylm-interactive") == "torch-llm"
    assert default_backend("digits") == "onnxruntime"


@pytest.mark.parametrize(("benchmark", "backend", "expected"), [
    ("tinylm", "onnxruntime", "cannot run the text-generation benchmark 'tinylm': it runs "
                              "tensor benchmarks only"),
    ("digits", "openai", "cannot run the tensor benchmark 'digits': it runs text-generation "
                         "benchmarks only"),
    ("digits", "torch-llm", "cannot run the tensor benchmark 'digits': it runs "
                            "text-generation benchmarks only"),
])
def test_a_backend_of_the_wrong_kind_fails_before_any_run_directory(
        tmp_path: Path, benchmark: str, backend: str, expected: str) -> None:
    runs = tmp_path / "runs"
    done = run_cli("run", "--benchmark", benchmark, "--backend", backend, "--quick",
                   "--runs-dir", str(runs))
    assert done.returncode == 1, done.stdout + done.stderr
    assert expected in done.stderr
    assert not runs.exists()


def test_the_registry_states_the_kinds_each_built_in_class_serves() -> None:
    # The kind check knows built-in names without importing them (asyncio, torch): the
    # table must say what the classes declare.
    from suite.backends import BUILTIN, BUILTIN_KINDS, backend_class
    from suite.errors import ConfigError

    assert set(BUILTIN_KINDS) == set(BUILTIN)
    checked = 0
    for name in BUILTIN:
        try:
            cls = backend_class(name)
        except ConfigError as exc:  # a framework this machine lacks, named in the message
            print(f"not checked: {name}: {exc}")
            continue
        assert cls.kinds == BUILTIN_KINDS[name], name
        checked += 1
    assert checked >= 5


def test_each_kind_has_one_contract_and_no_backend_only_raises() -> None:
    # A text-generation backend implements its kind's contract, not the tensor one's
    # load/predict (which it would only raise from).
    from suite.backends import BackendBase, backend_class, create_as
    from suite.errors import ConfigError
    from suite.llm.contract import EndpointGenerator, GeneratingBackend, InProcessGenerator

    openai = backend_class("openai")
    assert issubclass(openai, EndpointGenerator) and not issubclass(openai, BackendBase)
    assert issubclass(backend_class("null"), BackendBase)
    assert not issubclass(backend_class("null"), GeneratingBackend)
    assert "load" not in vars(openai) and "predict" not in vars(openai)
    with pytest.raises(ConfigError, match=r"does not implement suite\.backends\.base\.BackendBase"):
        create_as(BackendBase, "openai")
    with pytest.raises(ConfigError, match=r"does not implement suite\.llm\.contract"):
        create_as(InProcessGenerator, "null")


def test_a_custom_backend_that_serves_no_kind_is_refused_in_one_line(
        tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    done = run_cli("run", "--backend", "suite.backends.base:BackendCore", "--quick",
                   "--runs-dir", str(runs))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "serves no kind of benchmark" in done.stderr
    assert not runs.exists()
