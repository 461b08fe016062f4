"""``suite package``: from the run ledger in ``runs/`` to the official submission tree
and a signed, deterministic bundle.

``selection`` picks, for each (benchmark, scenario), the run and the compliance attempts
(see there: every choice from the runs' records). This module lays out the v6 tree
(``performance/run_1``, a truncated accuracy log with the full log's hash in
``accuracy.txt``, measurements, ``user.conf``, README, the newest *passing* attempt of each
compliance test in ``TESTxx/``), the system JSON, documentation and a ``src`` pointer, and
builds the predicate the bundle is signed with.

LLM results (text-generation cards, ``suite.llm``) take the same layout: the detail and
summary logs carry LoadGen's token metrics (TTFT/TPOT p99, tokens/s), ``accuracy.txt`` is
the ROUGE dict the checker parses, a ``<card>-interactive`` benchmark's Server run is the
``Interactive`` scenario directory, and the predicate states each LLM result's tokens/s
(the figure MLPerf publishes for LLMs, and the one its run was chosen by) with its TTFT
and TPOT p99, read from the packaged detail log.

What the predicate and ``measurements.json`` claim comes from records: ``accuracy_met`` is
the run's recorded accuracy verdict (for LLMs it includes the tokens-per-sample bounds)
and the re-check of ``accuracy.txt``; ``retraining`` is "No" only where the run recorded
the closed division (the card's reference weights, verified by hash), else left empty
for the submitter (``suite check`` then names it).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from suite.checker import CheckReport
from suite.checker.findings import ResultReport, RuleId
from suite.config.rules import RuleSet, SubmissionRules
from suite.logs import parse_detail_log
from suite.paths import ACCURACY_LOG_LIMIT, RECORD_FILE_LIMIT, Paths
from suite.results import STATED_BY_SUBMITTER, RunResult, token_metrics
from suite.submission.compliance_tree import (
    LOG_IN_PERFORMANCE,
    PERF_FILES,
    compliance_log,
    copy_compliance,
    truncate_accuracy_log,
)
from suite.submission.compliance_tree import capped as _capped
from suite.submission.provenance import PROVENANCE_NAME, claims, measurement_sources
from suite.submission.safety import Precision, refuse_links
from suite.submission.selection import (
    LLM_RATE,
    Candidate,
    Selection,
    llm_figure,
    refuse_if_empty,
    select_runs,
    tree_scenario,
)
from suite.version import __version__

#: ``workflow`` and ``suite audit`` reach the selection through this module.
__all__ = ["EVIDENCE_DIR", "LLM_RATE", "Candidate", "Selection", "build_tree", "llm_figure",
           "loadgen_version", "packaged_tokens", "predicate", "refuse_if_empty", "select_runs",
           "source_pointer", "tree_scenario", "truncate_accuracy_log", "write_evidence"]

_ACC_FILES = ("mlperf_log_detail.txt", "mlperf_log_summary.txt")


def source_pointer(home: Path) -> dict[str, Any]:
    """Repository URL and commit of the code that produced the runs."""
    def git(*args: str) -> str:
        try:
            out = subprocess.run(["git", "-C", str(home), *args], capture_output=True,
                                 text=True, timeout=10, check=False)
        except (OSError, subprocess.SubprocessError):
            return ""
        return out.stdout.strip() if out.returncode == 0 else ""

    return {"repository": git("remote", "get-url", "origin") or "unknown",
            "commit": git("rev-parse", "HEAD") or "unknown",
            "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
            "suite_version": __version__}


def build_tree(root: Path, selection: Selection, paths: Paths, rules: RuleSet,
               division: str, submitter: str, system: str,
               system_json: dict[str, Any], precision: Precision, *,
               system_provenance: dict[str, Any] | None = None
               ) -> dict[str, dict[str, Any]]:
    """Write the tree under ``root`` (an empty staging dir: see ``safety``);
    returns per-result extras for the predicate."""
    sub = rules.submission
    assert sub is not None
    base = root / division / submitter
    names = {"division": division, "submitter": submitter, "system": system}
    system_path = root / sub.paths["system"].format(**names)
    system_path.parent.mkdir(parents=True)
    system_path.write_text(json.dumps(system_json, indent=2) + "\n")
    src = source_pointer(paths.home)
    src_dir = root / sub.paths["src"].format(**names)
    src_dir.mkdir(parents=True)
    (src_dir / "source.json").write_text(json.dumps(src, indent=2) + "\n")
    (src_dir / "README.md").write_text(
        f"# Source\n\nThe code is infersuite {__version__} at {src['repository']}, commit "
        f"`{src['commit']}`{' (with uncommitted changes)' if src['dirty'] else ''}.\n")
    extras: dict[str, dict[str, Any]] = {}
    for (benchmark, scenario), cand in sorted(selection.chosen.items()):
        refuse_links(cand.run_dir)
        bench = rules.benchmark(benchmark)
        rel = sub.paths["result"].format(division=division, submitter=submitter, system=system,
                                         benchmark=bench.checker_model,
                                         scenario=tree_scenario(bench.loadgen_model, scenario))
        _result_dir(root / rel, cand, paths, sub, benchmark, precision)
        write_evidence(root / EVIDENCE_DIR / rel, cand)
        accuracy = next((t.accuracy for t in cand.run.tests if t.mode == "accuracy"), None)
        extras[rel] = {"run_id": cand.run.run_id, "model_sha256": cand.run.model_sha256,
                       "provenance": claims(cand.run),
                       "created_utc": cand.run.created_utc, "backend": cand.run.backend,
                       # the run's own verdict (an LLM's includes its token bounds); no
                       # accuracy record is no pass
                       "accuracy_passed": accuracy is not None and accuracy.passed}
        tokens = packaged_tokens(root, rel)
        if tokens:
            extras[rel]["tokens"] = tokens
    (base / "documentation").mkdir()
    lines = [f"# {submitter}: {system} ({division})", "", "| result | run |", "|---|---|"]
    lines += [f"| {rel} | {extra['run_id']} |" for rel, extra in sorted(extras.items())]
    (base / "documentation" / "README.md").write_text("\n".join(lines) + "\n")
    stated = any(c.run.provenance.get("precision") is not None
                 and c.run.provenance["precision"].source == STATED_BY_SUBMITTER
                 for c in selection.chosen.values())
    (base / "documentation" / "calibration.md").write_text(precision.calibration_text(
        "as stated by the submitter, not verified" if stated else "as recorded by the backend"))
    (base / "documentation" / PROVENANCE_NAME).write_text(json.dumps(
        {"system": system_provenance or {}, "results": {
            rel: extra["provenance"] for rel, extra in sorted(extras.items())}},
        indent=2, sort_keys=True) + "\n")
    return extras


def packaged_tokens(tree: Path, result_id: str) -> dict[str, float]:
    """The token metrics of a packaged result's detail log (empty: not an LLM result)."""
    path = tree / result_id / "performance" / "run_1" / "mlperf_log_detail.txt"
    return token_metrics(parse_detail_log(path)) if path.is_file() else {}


#: Beside the official tree: what an auditor needs to recompute and replay each result.
EVIDENCE_DIR = "evidence"


def write_evidence(out: Path, cand: Candidate) -> None:
    """``run.json`` (the run's identity and resolved config) and the full accuracy log.

    The official tree keeps only a truncated accuracy log; the full one lets an auditor
    recompute accuracy, and its sha256 must equal the ``hash=`` line of accuracy.txt.
    """
    out.mkdir(parents=True)
    config = json.loads(_capped(cand.run_dir / "config.json", RECORD_FILE_LIMIT))
    (out / "run.json").write_text(json.dumps({
        "run_id": cand.run.run_id, "benchmark": cand.run.benchmark,
        "scenario": cand.run.scenario, "backend": cand.run.backend, "round": cand.run.round,
        "model_sha256": cand.run.model_sha256, "config": config,
        "provenance": claims(cand.run),
        # the dataset file the run read (a round LLM's: its sha256), for the audit's re-score
        "dataset": cand.run.dataset,
    }, indent=2, sort_keys=True) + "\n")
    shutil.copyfile(cand.run_dir / "accuracy" / "mlperf_log_accuracy.json",
                    out / "mlperf_log_accuracy.json")
    for test in ("TEST06", *LOG_IN_PERFORMANCE):
        chosen = cand.compliance.get(test)
        log = compliance_log(Path(chosen.run_dir), test) if chosen is not None else None
        if chosen is None or log is None:
            continue
        # the tree's copy is truncated; suite check recomputes TEST06 from this one, and
        # suite audit TEST07 (with the set it ran on, named here) and TEST09
        (out / test).mkdir()
        shutil.copyfile(log, out / test / "mlperf_log_accuracy.json")
        (out / test / "run.json").write_text(json.dumps({
            "run_id": chosen.run_id, "test": test, "dataset": chosen.dataset},
            indent=2, sort_keys=True) + "\n")


def _result_dir(out: Path, cand: Candidate, paths: Paths, sub: SubmissionRules,
                benchmark: str, precision: Precision) -> None:
    perf, acc = cand.run_dir / "performance", cand.run_dir / "accuracy"
    (out / "performance" / "run_1").mkdir(parents=True)
    (out / "accuracy").mkdir()
    for name in PERF_FILES:
        if (perf / name).is_file():
            shutil.copyfile(perf / name, out / "performance" / "run_1" / name)
    for name in _ACC_FILES:
        if (acc / name).is_file():
            shutil.copyfile(acc / name, out / "accuracy" / name)
    full = _capped(acc / "mlperf_log_accuracy.json", ACCURACY_LOG_LIMIT)
    (out / "accuracy" / "mlperf_log_accuracy.json").write_bytes(
        truncate_accuracy_log(full, sub.truncate_keep_chars))
    metric_lines = [line for line in _capped(acc / "accuracy.txt", RECORD_FILE_LIMIT).decode(
                        "utf-8", "replace").splitlines()
                    if line.strip() and not line.startswith("hash=")]
    metric_lines.append(f"hash={hashlib.sha256(full).hexdigest()}")
    (out / "accuracy" / "accuracy.txt").write_text("\n".join(metric_lines) + "\n")
    for name in ("user.conf", "mlperf.conf"):
        if (perf / name).is_file():
            shutil.copyfile(perf / name, out / name)
    input_dtype, weights = _model_files(paths, benchmark, cand.run)
    (out / "measurements.json").write_text(json.dumps({
        "input_data_types": input_dtype,
        # "No" only where the run recorded the reference weights (the closed division, by
        # the model file's hash); otherwise the submitter states it and the checker asks
        "retraining": "No" if cand.run.division == "closed" else "",
        "starting_weights_filename": weights,
        # what the backend recorded for this run, never a default
        "weight_data_types": precision.weight_data_types,
        "weight_transformations": precision.weight_transformations,
        # beside the official five: where each came from (measured, reported by the
        # engine, stated by the submitter and not verified); the checker reads only five
        "provenance": measurement_sources(cand.run)}, indent=2) + "\n")
    (out / "README.md").write_text(
        f"# {benchmark} {cand.run.scenario}\n\nReproduce with:\n\n```sh\nsuite run "
        f"--benchmark {benchmark} --scenario {cand.run.scenario} --backend "
        f"{cand.run.backend} --mode all --round {cand.run.round}\n```\n\nPackaged from run "
        f"`{cand.run.run_id}`.\n")
    attempts = copy_compliance(cand, out, sub, precision, paths)
    if attempts:
        with (out / "README.md").open("a") as readme:
            readme.write("\nCompliance attempts (all of them; the newest passing one is "
                         "packaged):\n\n")
            readme.writelines(f"- {line}\n" for line in attempts)


def _model_files(paths: Paths, benchmark: str, run: RunResult) -> tuple[str, str]:
    """(input data type, starting weights file), as the benchmark's kind knows them
    (``KindStrategy.packaged_model``): nothing recorded is "", which the checker refuses
    (MEAS-JSON); the packager does not guess the weights."""
    from suite.harness.kinds import for_benchmark

    return for_benchmark(paths, benchmark).packaged_model(paths, benchmark, run)


def predicate(report: CheckReport, extras: dict[str, dict[str, Any]], *, unofficial: bool,
              identity: dict[str, str], src: dict[str, Any],
              system_provenance: dict[str, Any] | None = None) -> dict[str, Any]:
    """The bench-result predicate: one summary per result, no wall-clock time."""
    results = []
    for res in report.results:
        extra = extras.get(res.id, {})
        tokens = extra.get("tokens") or {}
        # an LLM result is published by its tokens/s (the checker's own figure is samples/s)
        metric, value = llm_figure(res.scenario, tokens) or (res.metric, res.value)
        met, met_from = accuracy_verdict(res, extra)
        results.append({
            "result": res.id, "benchmark": res.benchmark, "scenario": res.scenario,
            "metric": metric, "value": value, "valid": res.valid,
            **({"tokens": tokens} if tokens else {}),
            "accuracy": res.accuracy, "accuracy_target": res.accuracy_target,
            "accuracy_met": met, "accuracy_met_from": met_from,
            "failed_rules": sorted({f.rule for f in res.findings if f.severity == "error"}),
            "round": report.round, "loadgen_version": extra.get("loadgen_version"),
            "model_sha256": extra.get("model_sha256"), "run_id": extra.get("run_id"),
            **({"provenance": extra["provenance"]} if "provenance" in extra else {}),
            "system_name": identity.get("system_name"),
        })
    return {"suite_version": __version__, "round": report.round, "unofficial": unofficial,
            **identity, "source": src,
            **({"system_provenance": system_provenance} if system_provenance else {}),
            "check": {"passed": report.passed, "errors": report.summary.errors,
                      "warnings": report.summary.warnings},
            "results": results}


def accuracy_verdict(res: ResultReport, extra: dict[str, Any]) -> tuple[bool, str]:
    """(accuracy met, from what): the re-check of ``accuracy.txt`` (every target and upper
    limit of the round: no ``ACC-TARGET`` finding) and, where the run is known, its own
    recorded verdict too (an LLM's includes its tokens-per-sample bounds)."""
    checked = (res.accuracy is not None and res.accuracy_target is not None
               and res.accuracy >= res.accuracy_target
               and not any(f.rule == RuleId.ACC_TARGET for f in res.findings))
    if "accuracy_passed" not in extra:  # `suite sign` of a tree: no run record at hand
        return checked, "accuracy.txt (suite check)"
    return checked and bool(extra["accuracy_passed"]), "run record and accuracy.txt"


def loadgen_version(tree: Path, result_id: str) -> str | None:
    from suite.checker.context import read_detail_log

    log = read_detail_log(tree / result_id / "performance/run_1/mlperf_log_detail.txt")
    value = log.get("loadgen_version") if log is not None else None
    return str(value) if value is not None else None
