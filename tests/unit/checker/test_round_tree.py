"""``suite check`` on a whole generated round: every model and scenario of v6.0 and v6.1
(datacenter, edge and both; closed and open; LLM and not; Interactive; TEST01/04/06/07/
08/09; power) passes in strict and in compat mode, and each mutation the written rules
forbid fails with its rule id, on the result it is about. The trees are built once per
module from the round tables and real LoadGen logs (tests/round_tree_generator.py)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from suite.checker import check_path
from suite.config.rules import load_rules
from suite.paths import find_paths
from tests.support import round_tree_generator as gen
from tests.support.submission_fixtures import patch_log

PATHS = find_paths()


V60 = load_rules(PATHS, "v6.0")


DC = "closed/ORG/results/datacenter-box"


EDGE = "closed/ORG/results/edge-box"


LLAMA = f"{DC}/llama2-70b-99"


INTER, LSRV, LOFF = f"{LLAMA}/Interactive", f"{LLAMA}/Server", f"{LLAMA}/Offline"


RESNET_OFF = f"{EDGE}/resnet/Offline"


OPEN = f"open/OPENORG/results/datacenter-box/{gen.OPEN_DIR}/Offline"


RUN1 = "performance/run_1/mlperf_log_detail.txt"


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("round")
    return {r: gen.build_tree(r, base / r, base / "lgcache") for r in ("v6.0", "v6.1")}


@pytest.fixture
def tree(trees: dict[str, Path], tmp_path: Path) -> Path:
    return gen.copy_tree(trees["v6.0"], tmp_path / "tree")


def _power_result(tree: Path) -> str:
    [power] = list(tree.glob("closed/ORG/results/*/*/*/performance/power"))
    return power.parents[1].relative_to(tree).as_posix()


def _findings(report: object, where: str) -> set[str]:
    by_id = {r.id: r for r in report.results}  # type: ignore[attr-defined]
    return {f.rule for f in by_id[where].findings if f.severity == "error"}


def _log(rel: str, **values: object) -> Callable[[Path], None]:
    return lambda t: patch_log(t / rel, {k.replace("__", "."): v for k, v in values.items()})


def _write(rel: str, text: str) -> Callable[[Path], None]:
    return lambda t: (t / rel).write_text(text)


def _delete(rel: str) -> Callable[[Path], None]:
    def mutate(t: Path) -> None:
        path = t / rel
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return mutate


def _edit(rel: str, old: str, new: str) -> Callable[[Path], None]:
    def mutate(t: Path) -> None:
        path = t / rel
        assert old in path.read_text()
        path.write_text(path.read_text().replace(old, new))
    return mutate


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

