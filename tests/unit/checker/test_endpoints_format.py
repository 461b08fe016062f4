"""``suite check`` on trees in the endpoint benchmarker's format (issue 37, item 4): the
verdict of every result equals the official v6.1 checker's, on a baseline tree
(llama3.1-8b Offline + Server, deepseek-r1 Offline + Interactive: tests/support/
endpoint_trees.py) and on each of its mutations (``MUTATIONS`` there), in
``--compat-official`` mode; strict mode fails the same results, plus those of the rules the
official checker does not read (a complete run, no failed sample, the accuracy targets).

How the official verdicts below were obtained: the official checker of mlcommons/inference
@ b66003e10e2db4b8c36a448b0545ec90fcc6e9e9 (``tools/submission/submission_checker``,
extracted to /tmp/ref_ep) was run with system Python 3 and PyYAML 6.0.3 on the baseline
and on a copy of it with each mutation applied, by a scratch script outside the repo:

    cd /tmp/ref_ep/tools/submission
    python3 -m submission_checker.main --input TREE --version v6.1 --csv TREE.csv

and its ``Results <path>`` / ``NoResults <path>`` lines read per result (exit 0 on the
baseline and on each mutation recorded as passing, 1 otherwise). Two mutations crash it
(a traceback, exit 1, no verdict for any result): there, ``suite check`` fails the result
the mutation breaks, and nothing else. The figures it printed for the baseline are
``BASELINE_FIGURES``.
"""

from __future__ import annotations

import importlib
import os
import shutil
from pathlib import Path

import pytest

from suite.checker import check_path
from suite.checker.endpoints_format import read_endpoint_result
from suite.checker.models import detect_round
from suite.config.rules import load_rules
from suite.paths import find_paths
from tests.conftest import run_cli
from tests.support import endpoint_trees as et

PATHS = find_paths()
V61 = load_rules(PATHS, "v6.1")
CRASH = "crash"
_BOX = et.SYSTEM_DIR
LO, LS = "llama3.1-8b/Offline", "llama3.1-8b/Server"
RO, RI = "deepseek-r1/Offline", "deepseek-r1/Interactive"

#: The official checker's verdict per mutation: the results it fails (under
#: closed/ORG/results/box/), or CRASH. Obtained as the module docstring says.
OFFICIAL: dict[str, tuple[str, ...] | str] = {
    "result_summary.json missing": (LO,),
    "accuracy_results.json missing": (LS,),
    "config.yaml missing": CRASH,  # AttributeError: 'NoneType' object has no attribute 'lower'
    "config.yml instead of config.yaml": (),
    "result_summary.json not JSON": (RI,),
    "accuracy_results.json not JSON": (RO,),
    "accuracy_results.json a list": CRASH,  # AttributeError: 'list' object has no attribute 'get'
    "accuracy score missing": (LO,),
    "accuracy_scores empty": (LS,),
    "rouge1 below the target": (),
    "exact_match below the target": (),
    "too few accuracy samples": (LO,),
    "samples counted from response_counts.issued": (),
    "only a performance dataset scored": (LO,),
    "a model not allowed in the format (whisper)": ("whisper/Offline",),
    "min_duration_ms under 600 s": (LO,),
    "result_summary.json's min_duration_ms wins over config.yaml": (LO,),
    "dataloader seed wrong": (LS,),
    "scheduler seed wrong": (RI,),
    "seed quoted as a string": (RO,),
    "Server TTFT p99 over 2 s": (LS,),
    "Server TPOT p99 at the bound": (LS,),
    "Interactive TTFT p99 1.6 s (Server's 2 s bound would pass)": (RI,),
    "TTFT early-stopping map missing": (LS,),
    "TTFT p99 keyed '99' (read as 99.0)": (),
    "TTFT p99 keyed '99.00' (not read)": (RI,),
    "Offline TTFT p99 over 2 s (not bounded)": (),
    "LLM request latency p99 over 60 s (TTFT/TPOT only)": (),
    "Server qps missing (inferred from samples issued / duration)": (),
    "Server tps missing (the LLM figure)": (LS,),
    "Offline tps missing (the Offline figure is inferred)": (),
    "Offline duration_ns missing": (LO,),
    "an online run in the Offline directory": (RO,),
    "failed samples": (),
    "an interrupted run": (),
    "TEST06 audit says passed: false": (RO,),
    "TEST06 audit of another test": (LS,),
    "TEST06 audit not JSON": (RI,),
    "TEST06 audit missing (not required)": (),
    "README.md missing": (RI,),
    "measurements.json missing": (LO,),
    "Server directory missing (one of Server, Interactive)": (LO,),
}

#: What the official checker printed for the baseline ("Results <path> <figure>").
BASELINE_FIGURES = {RI: 19.945454545454545, RO: 19.945454545454545,
                    LO: 60.763636363636365, LS: 7291.636363636364}


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return et.build_tree(tmp_path_factory.mktemp("endpoints") / "tree")


def _failing(report: object) -> set[str]:
    return {r.id.removeprefix(f"{_BOX}/") for r in report.results  # type: ignore[attr-defined]
            if not r.valid}


def _rules_at(report: object, where: str) -> set[str]:
    return {f.rule for r in report.results if r.id == where  # type: ignore[attr-defined]
            for f in r.findings if f.severity == "error"}


def test_every_mutation_has_an_official_verdict() -> None:
    assert set(OFFICIAL) == set(et.MUTATIONS) and len(OFFICIAL) >= 20
    # the mutations exercise both verdicts
    assert sum(v == () for v in OFFICIAL.values()) >= 10
    assert sum(isinstance(v, tuple) and v != () for v in OFFICIAL.values()) >= 20


def test_the_baseline_passes_with_the_official_figures(baseline: Path) -> None:
    for compat in (True, False):
        report = check_path(baseline, V61, compat_official=compat)
        bad = [(r.id, f.rule, f.message) for r in report.results for f in r.findings]
        assert report.passed and not bad, bad
        figures = {r.id.removeprefix(f"{_BOX}/"): r.value for r in report.results}
        assert figures == pytest.approx(BASELINE_FIGURES, rel=1e-12)
        assert {"EP-ARTIFACTS", "EP-MODEL", "PERF-SEEDS", "PERF-DURATION",
                "PERF-TOKEN-BOUNDS", "ACC-TARGET", "ACC-DATASET", "COMP-PASS",
                "MEAS-FILES"} <= set(report.rules_evaluated)
        # no LoadGen rule runs on a result without LoadGen logs
        assert not {"PERF-LOG", "ACC-LOG", "ACC-TRUNCATED", "COMP-DIR"} & {
            f.rule for r in report.results for f in r.findings}
    by_id = {r.id: r for r in check_path(baseline, V61).results}
    assert by_id[f"{_BOX}/{LS}"].metric == "completed tokens/s"
    assert by_id[f"{_BOX}/{LO}"].accuracy == pytest.approx(38.7792)


@pytest.mark.parametrize("name", sorted(et.MUTATIONS))
def test_a_mutation_gets_the_official_verdict(baseline: Path, tmp_path: Path,
                                              name: str) -> None:
    mutate, where, rule, strict_only = et.MUTATIONS[name]
    tree = tmp_path / "tree"
    shutil.copytree(baseline, tree)
    mutate(tree)
    official = OFFICIAL[name]
    compat = check_path(tree, V61, compat_official=True)
    strict = check_path(tree, V61)
    local = where.removeprefix(f"{_BOX}/")
    if official == CRASH:  # the official checker gives no verdict: we fail that result
        assert _failing(compat) == _failing(strict) == {local}
    else:
        assert _failing(compat) == set(official)
        assert _failing(strict) == set(official) | ({local} if strict_only else set())
    if rule is not None:
        assert rule in _rules_at(strict, where)
        assert (rule in _rules_at(compat, where)) is not strict_only
    else:
        assert official == () and strict.passed and compat.passed


def test_v60_reads_no_endpoint_format(baseline: Path) -> None:
    report = check_path(baseline, load_rules(PATHS, "v6.0"), compat_official=True)
    assert not report.passed
    assert all("EP-MODEL" in {f.rule for f in r.findings} for r in report.results)


def test_the_round_of_an_endpoint_only_tree_and_the_cli(baseline: Path,
                                                        tmp_path: Path) -> None:
    assert detect_round(baseline, PATHS) == "v6.1"  # no LoadGen seeds: the format's round
    tree = tmp_path / "tree"
    shutil.copytree(baseline, tree)
    et.MUTATIONS["Server TTFT p99 over 2 s"][0](tree)
    done = run_cli("check", str(tree), "--compat-official")
    assert done.returncode == 2 and "PERF-TOKEN-BOUNDS" in done.stdout, done.stdout[-3000:]
    assert "Traceback" not in done.stderr


def test_keys_resolve_as_the_official_parser(baseline: Path) -> None:
    got = read_endpoint_result(baseline / et.LLAMA_SRV)
    assert got.problems == []
    assert got.perf["result_first_token_99.00_percentile_latency_ns"] == pytest.approx(0.404e9)
    assert got.perf["effective_scenario"] == "online"  # config.yaml's type
    assert got.perf["effective_min_duration_ms"] == 600000
    assert got.acc["effective_accuracy_sample_count"] == 13368
    assert got.acc["accuracy_score"]["rouge1"] == "38.7792"
    missing = read_endpoint_result(baseline / "nowhere")
    assert {p.name for p, _ in missing.problems} == {"config.yaml", "result_summary.json",
                                                    "accuracy_results.json"}


def test_a_result_of_neither_format_names_both(baseline: Path, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(baseline, tree)
    for rel in (et.CONFIG, et.SUMMARY, et.ACCURACY):
        et.delete(f"{et.LLAMA_OFF}/{rel}")(tree)
    report = check_path(tree, V61, compat_official=True)
    hits = [f for r in report.results if r.id == et.LLAMA_OFF for f in r.findings
            if f.rule == "EP-ARTIFACTS"]
    assert len(hits) == 3 and all("no LoadGen log either" in f.hint for f in hits), hits
    assert _failing(report) == {LO}


def test_an_unusable_config_is_a_finding_never_a_hang(baseline: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    res = tmp_path / "res"
    shutil.copytree(baseline / et.LLAMA_OFF, res)
    (res / et.CONFIG).unlink()
    os.mkfifo(res / et.CONFIG)  # a FIFO would block a reader: it is never opened
    (res / "config.yml").write_text("type: [offline\n")
    assert [(p.name, why) for p, why in read_endpoint_result(res).problems] == [
        ("config.yaml", "not a regular file"), ("config.yml", "not valid YAML: ParserError")]
    real = importlib.import_module

    def no_yaml(name: str) -> object:
        if name == "yaml":
            raise ImportError(name)
        return real(name)

    monkeypatch.setattr(importlib, "import_module", no_yaml)
    [(path, why)] = read_endpoint_result(baseline / et.LLAMA_OFF).problems
    assert path.name == "config.yaml" and "pip install 'infersuite[endpoints]'" in why
