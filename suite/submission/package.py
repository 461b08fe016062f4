"""``suite package``: from the run ledger in ``runs/`` to the official submission tree
and a signed, deterministic bundle.

For each (benchmark, scenario) it picks the best run that is valid, submittable and
passes ``suite check`` as a run directory (``--unofficial`` relaxes this for testing
and says so in the attestation), lays out the v6 tree (``performance/run_1``, a
truncated accuracy log with the full log's hash in ``accuracy.txt``, measurements,
``user.conf``, README, compliance dirs when the run has them), the system JSON,
documentation and a ``src`` pointer, then checks the tree and signs it.

LLM results (text-generation cards, ``suite.llm``) take the same layout: the detail and
summary logs carry LoadGen's token metrics (TTFT/TPOT p99, tokens/s), ``accuracy.txt`` is
the ROUGE dict the checker parses, a ``<card>-interactive`` benchmark's Server run is the
``Interactive`` scenario directory, and the predicate states each LLM result's tokens/s
(the figure MLPerf publishes for LLMs) with its TTFT and TPOT p99, read from the packaged
detail log.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from suite.checker import CheckReport, check_path
from suite.config.rules import RuleSet, SubmissionRules
from suite.errors import SuiteError
from suite.logs import parse_detail_log
from suite.models import load_card
from suite.paths import Paths
from suite.results import RunResult, Status, token_metrics
from suite.scenarios import SPECS, Scenario
from suite.submission.safety import PackageError, Precision, recorded_precision, refuse_links
from suite.version import __version__

_PERF_FILES = ("mlperf_log_detail.txt", "mlperf_log_summary.txt")
_ACC_FILES = ("mlperf_log_detail.txt", "mlperf_log_summary.txt")


@dataclass
class Candidate:
    run: RunResult
    run_dir: Path
    value: float
    passes: bool


@dataclass
class Selection:
    chosen: dict[tuple[str, str], Candidate] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)


def select_runs(runs_dir: Path, rules: RuleSet, *, unofficial: bool) -> Selection:
    """The best run per (benchmark, scenario), and why every other run was refused."""
    selection = Selection()
    pool: dict[tuple[str, str], list[Candidate]] = {}
    for run_dir in sorted(p for p in runs_dir.iterdir() if p.is_dir()) \
            if runs_dir.is_dir() else []:
        why, candidate = _candidate(run_dir, rules, unofficial)
        if candidate is None:
            if why:
                selection.refused.append(f"{run_dir.name}: {why}")
            continue
        if why:
            selection.refused.append(f"{run_dir.name}: {why} (packaged anyway: --unofficial)")
        pool.setdefault((candidate.run.benchmark, candidate.run.scenario), []).append(candidate)
    for key, candidates in pool.items():
        is_latency = SPECS[Scenario(key[1])].is_latency
        # passing runs first, then the best metric, then the newest run
        selection.chosen[key] = max(candidates, key=lambda c: (
            c.passes, -c.value if is_latency else c.value, c.run.run_id))
    return selection


def _candidate(run_dir: Path, rules: RuleSet, unofficial: bool) -> tuple[str, Candidate | None]:
    try:
        run = RunResult.load(run_dir / "result.json")
    except (OSError, ValueError) as exc:
        return f"no usable result.json ({exc})", None
    if run.compliance is not None:
        return "", None  # not a candidate: packaged as its reference run's TESTxx/
    modes = {t.mode: t for t in run.tests}
    perf = modes.get("performance")
    if perf is None or "accuracy" not in modes:
        return "needs both a performance and an accuracy test (--mode all)", None
    if run.status in (Status.FAILED, Status.INTERRUPTED):
        return f"the run {run.status.value}", None
    if run.round != rules.round:
        return f"ran under round {run.round}, packaging {rules.round}", None
    reasons = [] if run.status is Status.VALID else [f"the run is {run.status.value}"]
    reasons += [r for r in run.non_submittable_reasons if r not in reasons]
    report = check_path(run_dir, rules)
    failed = sorted({f.rule for r in report.results for f in r.findings
                     if f.severity.value == "error"})
    if failed:
        reasons.append("fails " + ", ".join(failed))
    value = perf.performance.metric_value if perf.performance else None
    passes = not reasons
    if not passes and not unofficial:
        return "; ".join(reasons), None
    return "; ".join(reasons), Candidate(run, run_dir, value or 0.0, passes)


def truncate_accuracy_log(data: bytes, keep: int) -> bytes:
    """The official truncation: head and tail ``keep`` chars around a marker."""
    text = data.decode("utf-8", errors="replace")
    if len(text) <= 2 * keep + 7:
        return data
    return (text[:keep] + "\n\n...\n\n" + text[-keep:]).encode("utf-8")


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
               system_json: dict[str, Any], precision: Precision) -> dict[str, dict[str, Any]]:
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
        extras[rel] = {"run_id": cand.run.run_id, "model_sha256": cand.run.model_sha256,
                       "created_utc": cand.run.created_utc, "backend": cand.run.backend}
        tokens = packaged_tokens(root, rel)
        if tokens:
            extras[rel]["tokens"] = tokens
    (base / "documentation").mkdir()
    lines = [f"# {submitter}: {system} ({division})", "", "| result | run |", "|---|---|"]
    lines += [f"| {rel} | {extra['run_id']} |" for rel, extra in sorted(extras.items())]
    (base / "documentation" / "README.md").write_text("\n".join(lines) + "\n")
    (base / "documentation" / "calibration.md").write_text(precision.calibration_text())
    return extras


def tree_scenario(loadgen_model: str, scenario: str) -> str:
    """The scenario directory: LoadGen runs Interactive as Server under a LoadGen model
    named ``*-interactive`` (``suite.llm.conf``); the tree names it ``Interactive``."""
    from suite.llm.card import INTERACTIVE_SUFFIX

    scen = Scenario(scenario)
    if scen is Scenario.SERVER and loadgen_model.endswith(INTERACTIVE_SUFFIX):
        return "Interactive"
    return scen.loadgen_name


def packaged_tokens(tree: Path, result_id: str) -> dict[str, float]:
    """The token metrics of a packaged result's detail log (empty: not an LLM result)."""
    path = tree / result_id / "performance" / "run_1" / "mlperf_log_detail.txt"
    return token_metrics(parse_detail_log(path)) if path.is_file() else {}


#: An LLM result's published figure per scenario directory: Offline's tokens/s, Server's and
#: Interactive's completed tokens/s (the official checker's LLM result fields).
LLM_RATE = {"Offline": ("tokens_per_second", "tokens/s"),
            "Server": ("completed_tokens_per_second", "completed tokens/s"),
            "Interactive": ("completed_tokens_per_second", "completed tokens/s")}


def llm_figure(scenario: str, tokens: dict[str, float]) -> tuple[str, float] | None:
    """(metric name, value) an LLM result is compared by; None without token metrics."""
    key, name = LLM_RATE.get(scenario, ("", ""))
    return (name, tokens[key]) if key in tokens else None


#: Beside the official tree: what an auditor needs to recompute and replay each result.
EVIDENCE_DIR = "evidence"


def write_evidence(out: Path, cand: Candidate) -> None:
    """``run.json`` (the run's identity and resolved config) and the full accuracy log.

    The official tree keeps only a truncated accuracy log; the full one lets an auditor
    recompute accuracy, and its sha256 must equal the ``hash=`` line of accuracy.txt.
    """
    out.mkdir(parents=True)
    config = json.loads((cand.run_dir / "config.json").read_text())
    (out / "run.json").write_text(json.dumps({
        "run_id": cand.run.run_id, "benchmark": cand.run.benchmark,
        "scenario": cand.run.scenario, "backend": cand.run.backend, "round": cand.run.round,
        "model_sha256": cand.run.model_sha256, "config": config,
    }, indent=2, sort_keys=True) + "\n")
    shutil.copyfile(cand.run_dir / "accuracy" / "mlperf_log_accuracy.json",
                    out / "mlperf_log_accuracy.json")


def _result_dir(out: Path, cand: Candidate, paths: Paths, sub: SubmissionRules,
                benchmark: str, precision: Precision) -> None:
    perf, acc = cand.run_dir / "performance", cand.run_dir / "accuracy"
    (out / "performance" / "run_1").mkdir(parents=True)
    (out / "accuracy").mkdir()
    for name in _PERF_FILES:
        if (perf / name).is_file():
            shutil.copyfile(perf / name, out / "performance" / "run_1" / name)
    for name in _ACC_FILES:
        if (acc / name).is_file():
            shutil.copyfile(acc / name, out / "accuracy" / name)
    full = (acc / "mlperf_log_accuracy.json").read_bytes()
    (out / "accuracy" / "mlperf_log_accuracy.json").write_bytes(
        truncate_accuracy_log(full, sub.truncate_keep_chars))
    metric_lines = [line for line in (acc / "accuracy.txt").read_text().splitlines()
                    if line.strip() and not line.startswith("hash=")]
    metric_lines.append(f"hash={hashlib.sha256(full).hexdigest()}")
    (out / "accuracy" / "accuracy.txt").write_text("\n".join(metric_lines) + "\n")
    for name in ("user.conf", "mlperf.conf"):
        if (perf / name).is_file():
            shutil.copyfile(perf / name, out / name)
    input_dtype, weights = _model_files(paths, benchmark)
    (out / "measurements.json").write_text(json.dumps({
        "input_data_types": input_dtype, "retraining": "No",
        "starting_weights_filename": weights,
        # what the backend recorded for this run, never a default
        "weight_data_types": precision.weight_data_types,
        "weight_transformations": precision.weight_transformations}, indent=2) + "\n")
    (out / "README.md").write_text(
        f"# {benchmark} {cand.run.scenario}\n\nReproduce with:\n\n```sh\nsuite run "
        f"--benchmark {benchmark} --scenario {cand.run.scenario} --backend "
        f"{cand.run.backend} --mode all --round {cand.run.round}\n```\n\nPackaged from run "
        f"`{cand.run.run_id}`.\n")
    attempts = _copy_compliance(cand, out, sub, precision)
    if attempts:
        with (out / "README.md").open("a") as readme:
            readme.write("\nCompliance attempts (all of them; the newest is packaged):\n\n")
            readme.writelines(f"- {line}\n" for line in attempts)


def _model_files(paths: Paths, benchmark: str) -> tuple[str, str]:
    """(input data type, starting weights file) from the benchmark's card: an LLM card's
    prompts are token ids (int32, as its responses) and its weights a torch state dict."""
    from suite.llm.card import card_name, is_llm_benchmark, load_llm_card

    if is_llm_benchmark(paths, benchmark):
        llm = load_llm_card(paths, card_name(benchmark))
        return llm.generation.response_dtype, llm.model.torch_state_dict
    card = load_card(paths, benchmark)
    return card.input.dtype, card.model.onnx_file


def _compliance_runs(cand: Candidate) -> dict[str, list[RunResult]]:
    """Compliance runs made against this run (or its benchmark/scenario/backend), oldest
    first, by test."""
    found: dict[str, list[RunResult]] = {}
    for path in sorted(cand.run_dir.parent.glob("*/result.json")):
        try:
            other = RunResult.load(path)
        except (OSError, ValueError):
            continue
        comp = other.compliance
        if comp is None or (other.benchmark, other.scenario, other.backend) != (
                cand.run.benchmark, cand.run.scenario, cand.run.backend):
            continue
        found.setdefault(comp.test, []).append(other)
    for runs in found.values():  # runs against exactly this reference come last (newest)
        runs.sort(key=lambda r: (r.compliance is not None
                                 and r.compliance.reference_run == str(cand.run_dir), r.run_id))
    return found


def _copy_compliance(cand: Candidate, out: Path, sub: SubmissionRules,
                     precision: Precision) -> list[str]:
    """Copy the newest attempt of each compliance test into ``<result>/TESTxx/``."""
    lines = []
    for test, runs in sorted(_compliance_runs(cand).items()):
        newest = runs[-1]
        if recorded_precision(newest) != precision:  # another computation than the result's
            raise PackageError(
                f"{newest.run_dir}: the {test} run recorded "
                f"{recorded_precision(newest).weight_data_types}, the result it audits "
                f"{precision.weight_data_types}",
                hint=f"re-run {test} against the packaged run (suite run --compliance {test})")
        source, target = Path(newest.run_dir), out / test
        refuse_links(source)
        (target / "performance" / "run_1").mkdir(parents=True)
        for name in _PERF_FILES:
            if (source / "performance" / name).is_file():
                shutil.copyfile(source / "performance" / name,
                                target / "performance" / "run_1" / name)
        for name in ("verify_accuracy.txt", "verify_performance.txt"):
            if (source / name).is_file():
                shutil.copyfile(source / name, target / name)
        log = source / "accuracy" / "mlperf_log_accuracy.json"
        if log.is_file():
            (target / "accuracy").mkdir()
            full = log.read_bytes()
            (target / "accuracy" / "mlperf_log_accuracy.json").write_bytes(
                truncate_accuracy_log(full, sub.truncate_keep_chars))
            (target / "accuracy" / "accuracy.txt").write_text(
                f"hash={hashlib.sha256(full).hexdigest()}\n")
            for name in ("baseline_accuracy.txt", "compliance_accuracy.txt"):
                if (source / "accuracy" / name).is_file():
                    shutil.copyfile(source / "accuracy" / name, target / "accuracy" / name)
        for run in runs:
            comp = run.compliance
            assert comp is not None
            verdicts = ", ".join(f"{k}: {v}" for k, v in comp.verdicts.items())
            lines.append(f"{test} attempt {comp.attempt} `{run.run_id}`: {verdicts}")
    return lines


def predicate(report: CheckReport, extras: dict[str, dict[str, Any]], *, unofficial: bool,
              identity: dict[str, str], src: dict[str, Any]) -> dict[str, Any]:
    """The bench-result predicate: one summary per result, no wall-clock time."""
    results = []
    for res in report.results:
        extra = extras.get(res.id, {})
        tokens = extra.get("tokens") or {}
        # an LLM result is published by its tokens/s (the checker's own figure is samples/s)
        metric, value = llm_figure(res.scenario, tokens) or (res.metric, res.value)
        results.append({
            "result": res.id, "benchmark": res.benchmark, "scenario": res.scenario,
            "metric": metric, "value": value, "valid": res.valid,
            **({"tokens": tokens} if tokens else {}),
            "accuracy": res.accuracy, "accuracy_target": res.accuracy_target,
            "accuracy_met": res.accuracy is not None and res.accuracy_target is not None
            and res.accuracy >= res.accuracy_target,
            "failed_rules": sorted({f.rule for f in res.findings if f.severity == "error"}),
            "round": report.round, "loadgen_version": extra.get("loadgen_version"),
            "model_sha256": extra.get("model_sha256"), "run_id": extra.get("run_id"),
            "system_name": identity.get("system_name"),
        })
    return {"suite_version": __version__, "round": report.round, "unofficial": unofficial,
            **identity, "source": src,
            "check": {"passed": report.passed, "errors": report.summary.errors,
                      "warnings": report.summary.warnings},
            "results": results}


def loadgen_version(tree: Path, result_id: str) -> str | None:
    from suite.checker.context import read_detail_log

    log = read_detail_log(tree / result_id / "performance/run_1/mlperf_log_detail.txt")
    value = log.get("loadgen_version") if log is not None else None
    return str(value) if value is not None else None


def refuse_if_empty(selection: Selection) -> None:
    if not selection.chosen:
        raise SuiteError("no run can be packaged:\n  " + "\n  ".join(
            selection.refused or ["runs/ holds no run directories"]),
            hint="run `suite run --mode all` without --quick, or pass --unofficial to test")
