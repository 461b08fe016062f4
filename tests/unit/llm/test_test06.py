"""TEST06's verdict on hand-made accuracy-log entries, with no LoadGen run: EOS padding
and missing records fail, and the checker accepts our pass lines and only them. TEST06
through the real LoadGen on tinylm is in tests/integration/test_llm_test06.py."""

from __future__ import annotations

import pytest

from suite.llm.test06 import verify_entries

pytest.importorskip("torch", reason="the LLM backend needs torch (pip install -e '.[torch]')")


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


@pytest.mark.parametrize("offline", [False, True])
def test_no_logged_sample_fails_every_check_in_the_file(offline: bool) -> None:
    verdict = verify_entries([], offline=offline, eos_id=0)
    assert not verdict.passed and verdict.samples == 0
    lines = verdict.lines()
    assert "EOS check pass: False" in lines and "Sample length check pass: False" in lines
    assert ("First token check pass: Skipped" if offline
            else "First token check pass: False") in lines
    assert lines[-1] == "TEST06 verification failed"


def test_one_honest_sample_passes_and_a_wrong_count_fails() -> None:
    assert verify_entries([_entry([7], [7], 1)], offline=False, eos_id=0).passed
    wrong = verify_entries([_entry([5, 6, 0], [5], 4)], offline=False, eos_id=0)
    assert not wrong.length and not wrong.passed
    assert "token_count 4 != 3 output tokens" in wrong.evidence[0]


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
    # nothing logged: the file must not read as a pass (Offline skips the first token)
    assert not accepted(verify_entries([], offline=True, eos_id=0))

