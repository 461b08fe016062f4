"""Every rule id of ``suite check`` passes on a good tree and fails on a mutated one,
on the right result; the compat mode reproduces the official verdicts, and a checker bug
or an unreadable log is reported as such. The JSON report through the CLI is in
tests/integration/test_checker_rules.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from suite.checker import RULES, check_path
from suite.checker.findings import RuleId
from suite.checker.walk import NotCheckable
from suite.config.rules import load_rules
from suite.paths import find_paths
from tests.support import submission_fixtures as fx
from tests.support.checker_trees import (
    MUTATIONS,
    PERF,
    SRV,
    _log,
)

# The submission fixtures these tests use (pytest finds them by these names).
passing_tree = fx.passing_tree


built = fx.built


RULESET = load_rules(find_paths(), "v6.1")


#: Not a rule about a file: the checker's own failure (see the tests below).
NOT_FILE_RULES = {RuleId.CHECK_INTERNAL}


#: Rules of models digits is not (LLMs, SDXL, power results): test_checker_round_tree and
#: test_round_tree give each a passing and a failing tree of the whole round.
ROUND_TREE_RULES = {RuleId.PERF_TOKEN_LATENCIES, RuleId.PERF_TOKEN_BOUNDS,
                    RuleId.ACC_EXTRA_FILES, RuleId.POWER_FILES, RuleId.POWER_LOGS,
                    RuleId.TREE_MODEL}


#: Rules of a run directory, not of a tree: a FAILED run's own record
#: (tests/integration/test_openai_untrusted_engine.py fails one, and checks it), and a
#: --stand-in run's (tests/integration/test_task_pipeline.py checks one).
RUN_DIR_RULES = {RuleId.RUN_STATUS, RuleId.RUN_STAND_IN}


#: Rules of endpoint-format results: tests/unit/checker/test_endpoints_format.py fails each.
ENDPOINT_RULES = {RuleId.EP_ARTIFACTS, RuleId.EP_MODEL}


def test_every_rule_has_a_failing_example() -> None:
    assert set(MUTATIONS) == set(RULES) - NOT_FILE_RULES - ROUND_TREE_RULES - RUN_DIR_RULES \
        - ENDPOINT_RULES


def test_passing_tree_passes_every_rule(passing_tree: Path) -> None:
    report = check_path(passing_tree, RULESET)
    assert [f for r in report.results for f in r.findings] == [] and report.findings == []
    assert report.passed and report.summary.results == 2
    # each rule ran and passed here
    assert set(report.rules_evaluated) == set(RULES) - NOT_FILE_RULES - RUN_DIR_RULES - (
        ROUND_TREE_RULES - {RuleId.TREE_MODEL}) - ENDPOINT_RULES


@pytest.mark.parametrize("rule_id", sorted(MUTATIONS))
def test_rule_fails_on_the_right_result(rule_id: str, passing_tree: Path) -> None:
    mutate, where = MUTATIONS[rule_id]
    mutate(passing_tree)
    report = check_path(passing_tree, RULESET)
    if where is None:
        assert rule_id in {f.rule for f in report.findings}
        return
    by_id = {r.id: r for r in report.results}
    hits = [f for f in by_id[where].findings if f.rule == rule_id]
    assert hits, [f.rule for f in by_id[where].findings]
    assert hits[0].message and hits[0].hint and hits[0].result == where
    assert not by_id[where].valid


def test_compliance_performance_logs_obey_the_settings_rules(passing_tree: Path) -> None:
    _log(f"{SRV}/TEST01/performance/run_1/mlperf_log_detail.txt",
         effective_sample_index_rng_seed=5)(passing_tree)
    report = check_path(passing_tree, RULESET)
    hits = [f for r in report.results for f in r.findings if f.rule == "PERF-SEEDS"]
    assert [(h.result, h.file) for h in hits] == [
        (SRV, f"{SRV}/TEST01/performance/run_1/mlperf_log_detail.txt")]


def test_compat_official_reproduces_official_verdicts(passing_tree: Path) -> None:
    for rule_id in ("PERF-VALIDITY", "PERF-ERRORS", "PERF-LATENCY-MEASURED", "PERF-SUMMARY"):
        MUTATIONS[rule_id][0](passing_tree)
    assert not check_path(passing_tree, RULESET).passed
    assert check_path(passing_tree, RULESET, compat_official=True).passed
    # --submission-exceptions makes the official checker read the perf-log errors (P-3)
    assert not check_path(passing_tree, RULESET, compat_official=True,
                          submission_exceptions=True).passed


def test_run_directory_check_recomputes_the_accuracy_hash(built: fx.Built,
                                                          tmp_path: Path) -> None:
    run = next(p for p in sorted(built.runs.iterdir()) if p.name.endswith("offline_all"))
    copy = tmp_path / run.name
    shutil.copytree(run, copy)
    report = check_path(copy, RULESET)
    rules = {f.rule for f in report.results[0].findings}
    assert report.kind == "run" and "PERF-DURATION" in rules and "ACC-HASH" not in rules
    txt = copy / "accuracy/accuracy.txt"
    txt.write_text(txt.read_text().replace("hash=", "hash=0"))
    rules = {f.rule for f in check_path(copy, RULESET).results[0].findings}
    assert "ACC-HASH" in rules


def test_a_checker_bug_is_an_internal_error_not_a_malformed_file(
        passing_tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from suite.checker import performance

    def broken(*args: object) -> str | None:
        raise RuntimeError("a bug in the rule")

    monkeypatch.setattr(performance, "log_problem", broken)
    report = check_path(passing_tree, RULESET)
    hits = [f for r in report.results for f in r.findings]
    assert hits and all(f.rule == "CHECK-INTERNAL" for f in hits)
    assert "internal error of suite check while evaluating PERF-LOG" in hits[0].message
    assert "malformed" not in hits[0].hint and "RuntimeError: a bug in the rule" in (
        hits[0].found or "")
    assert "Traceback" in (hits[0].found or "")  # the traceback is kept, in the finding
    assert not report.passed  # a rule that could not run is never a pass


def test_an_unreadable_log_keeps_its_reason(passing_tree: Path) -> None:
    (passing_tree / PERF).write_text(
        ':::MLLOG {"key": "effective_scenario", "value": "Offline", "metadata": 3}\n')
    report = check_path(passing_tree, RULESET)
    [hit] = [f for r in report.results for f in r.findings if f.rule == "PERF-LOG"]
    assert "AttributeError" in hit.message and hit.found and "unparsable" in hit.found



def test_symbolic_links_in_a_tree_are_named_and_never_followed(passing_tree: Path,
                                                                tmp_path: Path) -> None:
    """Issue 28: a ``closed/`` linked to another tree was validated as if it were this
    one, and a linked log was read as the result's own."""
    [summary, *_] = sorted(passing_tree.rglob("performance/run_1/mlperf_log_summary.txt"))
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_bytes(summary.read_bytes())
    summary.unlink()
    summary.symlink_to(elsewhere)
    report = check_path(passing_tree, RULESET)
    links = [f for f in report.findings if "symbolic link" in f.message]
    assert [f.rule for f in links] == ["TREE-LAYOUT"] and not report.passed
    assert links[0].file == summary.relative_to(passing_tree).as_posix()

    other = tmp_path / "other"
    shutil.move(str(passing_tree / "closed"), other)
    (passing_tree / "closed").symlink_to(other, target_is_directory=True)
    with pytest.raises(NotCheckable):  # nothing of its own left to check: never the link's
        check_path(passing_tree, RULESET)
