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
    ("tinylm", "onnxruntime", "cannot run the text-generation benchmark 'tinylm'"),
    ("digits", "openai", "runs text-generation benchmarks only, not 'digits'"),
    ("digits", "torch-llm", "runs text-generation benchmarks only, not 'digits'"),
])
def test_a_backend_of_the_wrong_kind_fails_before_any_run_directory(
        tmp_path: Path, benchmark: str, backend: str, expected: str) -> None:
    runs = tmp_path / "runs"
    done = run_cli("run", "--benchmark", benchmark, "--backend", backend, "--quick",
                   "--runs-dir", str(runs))
    assert done.returncode == 1, done.stdout + done.stderr
    assert expected in done.stderr
    assert not runs.exists()


def test_the_generating_backends_are_the_built_ins_whose_classes_generate() -> None:
    # The kind check knows built-in names without importing them (asyncio, torch): the
    # list must say what the classes do.
    from suite.backends import BUILTIN, backend_class
    from suite.errors import ConfigError
    from suite.harness.run import GENERATING_BACKENDS
    from suite.llm.backend import TorchLLMBackend
    from suite.llm.openai_backend import OpenAIBackend

    checked = 0
    for name in BUILTIN:
        try:
            cls = backend_class(name)
        except ConfigError as exc:  # a framework this machine lacks, named in the message
            print(f"not checked: {name}: {exc}")
            continue
        assert issubclass(cls, TorchLLMBackend | OpenAIBackend) == (
            name in GENERATING_BACKENDS), name
        checked += 1
    assert set(BUILTIN) >= GENERATING_BACKENDS and checked >= 5
