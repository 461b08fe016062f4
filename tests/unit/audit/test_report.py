"""The audit report's verdict and its attempts record, without a bundle: the last line an
auditor reads follows from every check, and an unreadable record is listed, not dropped."""

from __future__ import annotations

import json

from suite.audit.report import AuditReport, attempts_from_files, verdict_line


def _report(*passed: bool, stopped_at: int | None = None,
            unofficial: bool = False) -> AuditReport:
    report = AuditReport(bundle="b.tar.gz", bundle_sha256="0" * 64, stopped_at=stopped_at,
                         unofficial=unofficial)
    for step, ok in enumerate(passed, start=1):
        report.add(step, f"check {step}", ok, [f"evidence {step}"], result="r")
    return report


def test_every_check_passing_is_a_pass() -> None:
    report = _report(True, True, True)
    assert report.passed and report.exit_code == 0
    assert verdict_line(report) == "audit PASSED: 3/3 checks passed"
    assert report.to_dict()["verdict"] == verdict_line(report)  # the JSON says the same


def test_a_pass_that_accepted_an_unofficial_bundles_errors_says_so_and_exits_2() -> None:
    report = AuditReport(bundle="b.tar.gz", bundle_sha256="0" * 64, unofficial=True)
    report.add(1, "signature and file list", True, [])
    report.add(2, "suite check on the tree", True, [], "20 error(s)", known_errors=20)
    assert report.passed and report.known_errors == 20 and report.exit_code == 2
    line = verdict_line(report)
    assert line.startswith("UNOFFICIAL bundle: audit PASSED with 20 known error(s) of an "
                           "unofficial bundle")
    assert line.endswith("2/2 checks passed")
    data = report.to_dict()
    assert (data["known_errors"], data["verdict"]) == (20, line)


def test_one_failed_check_fails_the_audit() -> None:
    report = _report(True, False, True)
    assert not report.passed and report.exit_code == 2
    assert verdict_line(report) == "audit FAILED: 2/3 checks passed"


def test_a_stopped_audit_fails_and_says_where_it_stopped() -> None:
    report = _report(True, stopped_at=2)
    assert not report.passed
    assert verdict_line(report) == "audit FAILED (stopped at step 2): 1/1 checks passed"


def test_no_check_is_no_pass_and_unofficial_is_always_named() -> None:
    assert not _report().passed
    assert verdict_line(_report(True, unofficial=True)).startswith("UNOFFICIAL bundle: audit")


def test_a_failed_check_is_an_error_finding_with_its_step() -> None:
    [check] = _report(False).checks
    assert (check.rule, check.severity.value, check.step) == ("AUDIT-1", "error", 1)


def test_attempts_records_are_read_and_a_broken_one_is_listed_with_its_problem() -> None:
    good = {"chosen": "run-b", "attempts": [
        {"run_id": "run-a", "time": "t1", "status": "INVALID"},
        {"run_id": "run-b", "time": "t2", "status": "VALID", "chosen": True,
         "metric": {"name": "samples/s", "value": 12.5, "unit": "samples/s"}}],
        "unreadable": [{"run": "run-c", "why": "no result.json"}]}
    records = attempts_from_files({
        "evidence/closed/box/digits/offline/attempts.json": json.dumps(good).encode(),
        "evidence/closed/box/digits/server/attempts.json": b"\xff not json"})
    [ok, broken] = records
    assert ok.result == "closed/box/digits/offline" and ok.chosen == "run-b"
    assert [a.run_id for a in ok.attempts] == ["run-a", "run-b"]
    assert (ok.attempts[1].metric, ok.attempts[1].value) == ("samples/s", 12.5)
    assert ok.unreadable == ["run-c: no result.json"]
    assert broken.result == "closed/box/digits/server" and not broken.attempts
    assert "is unreadable" in broken.problem


def test_the_json_carries_an_outcome_and_exit_code_no_program_can_misread() -> None:
    # An unofficial bundle that "PASSED with 28 known error(s)" read "passed": true in the
    # JSON while the exit code was 2: the outcome and the exit code say what it is.
    accepted = AuditReport(bundle="b.tar.gz", bundle_sha256="0" * 64, unofficial=True)
    accepted.add(1, "signature and file list", True, [])
    accepted.add(2, "suite check on the tree", True, [], "28 error(s)", known_errors=28)
    cases = [(accepted, "PASSED_WITH_KNOWN_ERRORS", 2), (_report(True, True), "PASSED", 0),
             (_report(True, False), "FAILED", 2), (_report(True, stopped_at=1), "FAILED", 2)]
    for report, outcome, code in cases:
        data = json.loads(report.to_json())
        assert (data["outcome"], data["exit_code"]) == (outcome, code), data["verdict"]
        assert report.exit_code == code
