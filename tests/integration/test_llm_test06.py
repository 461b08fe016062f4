"""TEST06 through the real LoadGen on tinylm: an honest SUT passes; one that reports a
different first token, or more tokens than it produced, fails with the official lines."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from suite.config.loader import ConfigRequest
from suite.harness.run import run
from suite.results import RunResult, Status

pytest.importorskip("torch", reason="the LLM backend needs torch (pip install -e '.[torch]')")


def _test06(tmp: Path, scenario: str, backend: str = "torch-llm") -> tuple[RunResult, str]:
    result = run(ConfigRequest(benchmark="tinylm", backend=backend, scenario=scenario,
                               quick=True, runs_dir=tmp, compliance="TEST06"))
    verify = Path(result.run_dir) / "TEST06" / "verify_accuracy.txt"
    return result, verify.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunResult, str]:
    """The honest SUT's Server TEST06 run, made once: the pass test reads it, the packaging
    test edits a copy of it."""
    return _test06(tmp_path_factory.mktemp("test06-honest"), "server")


def test_honest_sut_passes(honest: tuple[RunResult, str]) -> None:
    result, text = honest
    assert text.splitlines() == ["First token check pass: True", "EOS check pass: True",
                                 "Sample length check pass: True",
                                 "TEST06 verification complete"]
    assert result.compliance is not None and result.compliance.passed
    assert result.status is Status.VALID and result.mode == "TEST06"
    assert (Path(result.run_dir) / "TEST06" / "mlperf_log_accuracy.json").is_file()
    assert not (Path(result.run_dir) / "performance" / "audit.config").exists()


def test_a_lying_first_token_fails(tmp_path: Path) -> None:
    result, text = _test06(tmp_path, "server", "tests.support.llm_cheats:FirstTokenLiar")
    assert "First token check pass: False" in text
    assert text.splitlines()[-1] == "TEST06 verification failed"
    assert result.compliance is not None and not result.compliance.passed
    assert result.status is Status.INVALID and result.exit_code == 2


def test_an_inflated_token_count_fails(tmp_path: Path) -> None:
    result, text = _test06(tmp_path, "offline", "tests.support.llm_cheats:TokenCountInflater")
    assert text.splitlines()[0] == "First token check pass: Skipped"  # Offline: no first token
    assert "Sample length check pass: False" in text
    assert result.status is Status.INVALID



def test_packaging_recomputes_test06_from_the_log_not_the_text(
        honest: tuple[RunResult, str], tmp_path: Path) -> None:
    # Issue 39: an emptied TEST06 accuracy log beside a verify_accuracy.txt (and record)
    # that claim a pass was packaged with "PASS"; the packager recomputes the verdict.
    from suite.paths import find_paths
    from suite.submission.compliance_tree import as_recorded as _as_recorded
    from suite.submission.safety import PackageError

    result, _ = honest
    run_dir = tmp_path / "run"  # a copy: the shared run stays as recorded
    shutil.copytree(result.run_dir, run_dir)
    _as_recorded(result, run_dir, find_paths())  # the honest run packages
    (run_dir / "TEST06" / "mlperf_log_accuracy.json").write_text("[]\n")
    with pytest.raises(PackageError, match="TEST06 recomputed from this log does not pass"):
        _as_recorded(result, run_dir, find_paths())
