"""TEST06 through the real LoadGen on tinylm: an honest SUT passes; one that reports a
different first token, or more tokens than it produced, fails with the official lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from suite.config.loader import ConfigRequest
from suite.harness.llm.run import run
from suite.llm.test06 import verify_entries
from suite.results import RunResult, Status

pytest.importorskip("torch", reason="the LLM backend needs torch (pip install -e '.[torch]')")


def _test06(tmp: Path, scenario: str, backend: str = "torch-llm") -> tuple[RunResult, str]:
    result = run(ConfigRequest(benchmark="tinylm", backend=backend, scenario=scenario,
                               quick=True, runs_dir=tmp, compliance="TEST06"))
    verify = Path(result.run_dir) / "TEST06" / "verify_accuracy.txt"
    return result, verify.read_text(encoding="utf-8")


def test_honest_sut_passes(tmp_path: Path) -> None:
    result, text = _test06(tmp_path, "server")
    assert text.splitlines() == ["First token check pass: True", "EOS check pass: True",
                                 "Sample length check pass: True",
                                 "TEST06 verification complete"]
    assert result.compliance is not None and result.compliance.passed
    assert result.status is Status.VALID and result.mode == "TEST06"
    assert (Path(result.run_dir) / "TEST06" / "mlperf_log_accuracy.json").is_file()
    assert not (Path(result.run_dir) / "performance" / "audit.config").exists()


def test_a_lying_first_token_fails(tmp_path: Path) -> None:
    result, text = _test06(tmp_path, "server", "tests.llm_cheats:FirstTokenLiar")
    assert "First token check pass: False" in text
    assert text.splitlines()[-1] == "TEST06 verification failed"
    assert result.compliance is not None and not result.compliance.passed
    assert result.status is Status.INVALID and result.exit_code == 2


def test_an_inflated_token_count_fails(tmp_path: Path) -> None:
    result, text = _test06(tmp_path, "offline", "tests.llm_cheats:TokenCountInflater")
    assert text.splitlines()[0] == "First token check pass: Skipped"  # Offline: no first token
    assert "Sample length check pass: False" in text
    assert result.status is Status.INVALID


def _entry(data: list[int], first: list[int] | None, count: int) -> dict[str, object]:
    def hexed(tokens: list[int]) -> str:
        return b"".join(t.to_bytes(4, "little") for t in tokens).hex()

    entry: dict[str, object] = {"qsl_idx": 0, "data": hexed(data), "token_count": count}
    if first is not None:
        entry["token_data"] = hexed(first)
    return entry


def test_eos_padding_and_missing_records_fail() -> None:
    assert verify_entries([_entry([5, 6, 0], [5], 3)], offline=False, eos_id=0).passed
    padded = verify_entries([_entry([5, 6, 0, 0], [5], 4)], offline=False, eos_id=0)
    assert not padded.eos and "EOS check pass: False" in padded.lines()
    no_first = verify_entries([_entry([5, 0], None, 2)], offline=False, eos_id=0)
    assert no_first.first_token is False
    assert not verify_entries([], offline=True, eos_id=0).passed  # nothing logged: no pass


def test_the_checker_accepts_our_pass_lines_and_only_them() -> None:
    from suite.config.rules import load_rules
    from suite.llm.test06 import Test06Verdict
    from suite.paths import find_paths

    sub = load_rules(find_paths(), "v6.1").submission
    assert sub is not None
    groups = sub.compliance_pass_lines["TEST06"]

    def accepted(verdict: Test06Verdict) -> bool:
        lines = verdict.lines()
        return all(any(spelling in lines for spelling in group) for group in groups)

    assert accepted(Test06Verdict(True, True, True, 100, []))
    assert accepted(Test06Verdict(None, True, True, 100, []))  # Offline: first token skipped
    assert not accepted(Test06Verdict(False, True, True, 100, []))
    assert not accepted(Test06Verdict(True, True, False, 100, []))
