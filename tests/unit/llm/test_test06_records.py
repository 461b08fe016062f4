"""TEST06's ``verify_accuracy.txt`` says what the suite concluded (issue 28): a check
passes only on evidence. One honest sample, repeated EOS and a wrong token count are in
tests/unit/llm/test_test06.py; here: an empty first token, an output that is not token
ids, and the file's last line, which is always the verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suite.llm.test06 import VERIFY_FILE, verify_entries, verify_run


def _hexed(tokens: list[int]) -> str:
    return b"".join(t.to_bytes(4, "little") for t in tokens).hex()


def test_an_empty_first_token_is_no_first_token() -> None:
    entry = {"qsl_idx": 3, "data": _hexed([5, 6, 0]), "token_data": "", "token_count": 3}
    verdict = verify_entries([entry], offline=False, eos_id=0)
    assert verdict.first_token is False and not verdict.passed
    assert "First token check pass: False" in verdict.lines()
    assert verdict.evidence == ["qsl_idx 3: the logged first token is empty or not token ids"]


@pytest.mark.parametrize("data", ["zz", "0102", None])
def test_an_output_that_is_not_token_ids_fails_and_does_not_crash(data: str | None) -> None:
    entry = {"qsl_idx": 1, "token_data": _hexed([5]), "token_count": 1}
    if data is not None:
        entry["data"] = data
    for offline in (False, True):
        verdict = verify_entries([entry], offline=offline, eos_id=0)
        assert not verdict.passed and not verdict.eos and not verdict.length
        assert verdict.lines()[-1] == "TEST06 verification failed"
        assert "qsl_idx 1: the logged output is not int32 token ids" in verdict.evidence


def _file(tmp_path: Path, entries: list[dict[str, object]], offline: bool) -> list[str]:
    log = tmp_path / "mlperf_log_accuracy.json"
    log.write_text(json.dumps(entries))
    verify_run(log, tmp_path / "out", offline=offline, eos_id=0)
    return (tmp_path / "out" / "TEST06" / VERIFY_FILE).read_text().splitlines()


def test_the_file_ends_with_the_verdict_and_gives_the_evidence_before_it(
        tmp_path: Path) -> None:
    lines = _file(tmp_path, [], offline=True)  # nothing logged
    assert lines[-1] == "TEST06 verification failed"
    assert "no sample was logged: nothing was checked" in lines
    lines = _file(tmp_path, [{"qsl_idx": 0, "data": _hexed([7, 0, 0]), "token_count": 3}],
                  offline=True)  # one sample with repeated EOS
    assert lines == ["First token check pass: Skipped", "EOS check pass: False",
                     "Sample length check pass: True",
                     "qsl_idx 0: the output ends with 2 EOS tokens",
                     "TEST06 verification failed"]
