"""``suite check`` on single results of a generated v6.0 round tree: a power result's
files and logs, TEST01's fallback within the accuracy delta, open-division accuracy that is
recorded but not enforced, and an LLM result stated in tokens per second. The trees come
from the round tables and real LoadGen logs (tests/support/round_tree_generator.py); the
whole round and its forbidden mutations are in tests/integration/test_checker_round_tree.py."""

from __future__ import annotations

import json
from pathlib import Path

from suite.checker import check_path
from tests.support.round_trees import (
    INTER,
    LOFF,
    LSRV,
    OPEN,
    RESNET_OFF,
    RUN1,
    V60,
    _delete,
    _edit,
    _findings,
    _log,
    _write,
)


def _power_result(tree: Path) -> str:
    [power] = list(tree.glob("closed/ORG/results/*/*/*/performance/power"))
    return power.parents[1].relative_to(tree).as_posix()


def test_power_files_and_logs(tree: Path) -> None:
    res = _power_result(tree)
    _delete(f"{res}/performance/power/ptd_logs.txt")(tree)
    assert "POWER-FILES" in _findings(check_path(tree, V60), res)
    _write(f"{res}/performance/power/ptd_logs.txt", "ok\n")(tree)
    _write(f"{res}/performance/power/client.json", "[1")(tree)
    _log(f"{res}/performance/ranging/mlperf_log_detail.txt", effective_scenario="Server")(tree)
    report = check_path(tree, V60)
    hits = [f for r in report.results if r.id == res for f in r.findings]
    assert {f.rule for f in hits} == {"POWER-LOGS"} and len(hits) == 2


def test_test01_fallback_within_the_delta_passes(tree: Path) -> None:
    acc = tree / RESNET_OFF / "TEST01" / "accuracy"
    (tree / RESNET_OFF / "TEST01" / "verify_accuracy.txt").write_text("TEST FAIL\n")
    (acc / "baseline_accuracy.txt").write_text("accuracy=76.400%, good=1, total=1\n")
    (acc / "compliance_accuracy.txt").write_text("accuracy=76.000%, good=1, total=1\n")
    assert "COMP-PASS" not in _findings(check_path(tree, V60), RESNET_OFF)  # 0.53 % <= 1 %
    (acc / "compliance_accuracy.txt").write_text("accuracy=70.000%, good=1, total=1\n")
    assert "COMP-PASS" in _findings(check_path(tree, V60), RESNET_OFF)  # 9 % > 1 %


def test_open_division_accuracy_is_recorded_not_enforced(tree: Path) -> None:
    _edit(f"{OPEN}/accuracy/accuracy.txt", "'exact_match'", "'no_match'")(tree)
    report = check_path(tree, V60)
    [hit] = [f for r in report.results if r.id == OPEN for f in r.findings]
    assert hit.rule == "ACC-TARGET" and hit.severity == "info" and report.passed


def _add_records(path: Path, values: dict[str, object]) -> None:
    """Append records to a detail log, in the shape of its last record."""
    last = json.loads(path.read_text().splitlines()[-1].removeprefix(":::MLLOG "))
    with path.open("a") as handle:
        for key, value in values.items():
            handle.write(":::MLLOG " + json.dumps({**last, "key": key, "value": value}) + "\n")


def test_an_llm_result_is_stated_in_tokens_per_second(tree: Path) -> None:
    # The official checker's LLM result fields: Offline result_tokens_per_second; Server and
    # Interactive result_completed_tokens_per_second (never the samples/s of the others).
    rates = {LOFF: ("result_tokens_per_second", 1234.5, "tokens/s"),
             LSRV: ("result_completed_tokens_per_second", 987.25, "completed tokens/s"),
             INTER: ("result_completed_tokens_per_second", 654.0, "completed tokens/s")}
    for where, (key, value, _) in rates.items():
        _add_records(tree / where / RUN1, {key: value})
    report = check_path(tree, V60)
    by_id = {r.id: r for r in report.results}
    for where, (_, value, metric) in rates.items():
        assert (by_id[where].metric, by_id[where].value) == (metric, value), where
        assert not _findings(report, where), where
    assert by_id[RESNET_OFF].metric == "samples/s"  # not an LLM: unchanged

