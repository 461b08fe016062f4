"""Find the results under a path and run every rule on each: the entry point of
``suite check``.

A *submission tree* is walked as the official loader does (division, submitter,
``results/<system>/<benchmark>/<scenario>``), plus the stray-file warnings of the
legacy checker. A *run directory* (``runs/<ts>_<bench>_<scen>_<mode>/``) is checked as
one closed result with the run's own file layout. Nothing here raises on bad input.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from suite.checker.accuracy import check_accuracy
from suite.checker.compliance import check_compliance, check_power
from suite.checker.context import ResultContext, ResultFiles, as_float, read_json
from suite.checker.endpoints_format import is_endpoints_result
from suite.checker.endpoints_rules import check_endpoints
from suite.checker.findings import RULES, CheckReport, Finding, ResultReport, RuleId, Severity
from suite.checker.models import SCENARIO_DIRS, read_model_mapping, resolve_model
from suite.checker.performance import check_performance
from suite.checker.system_rules import check_measurements, check_system
from suite.config.rules import RuleSet, SubmissionRules
from suite.errors import ConfigError
from suite.scenarios import SPECS, Scenario
from suite.version import __version__

_ROOT_OK_SUFFIXES = (".md", ".pdf")
_ROOT_OK_NAMES = ("attestation.dsse.json",)


class NotCheckable(ConfigError, ValueError):
    """``path`` is neither a run directory nor a submission tree (a usage error)."""


def is_run_dir(path: Path) -> bool:
    return (path / "config.json").is_file() or (path / "result.json").is_file()


def check_path(path: Path, rules: RuleSet, *, compat_official: bool = False,
               submission_exceptions: bool = False) -> CheckReport:
    """Check a run directory or a submission tree and return the finalized report.

    ``submission_exceptions`` is the official ``--submission-exceptions``: LoadGen's
    uncommitted-build error is waived; every other error still fails."""
    if rules.submission is None:
        raise NotCheckable(f"round {rules.round} has no [submission] table")
    if not path.is_dir():
        raise NotCheckable(f"{path} is not a directory")
    kind = "run" if is_run_dir(path) else "tree"
    report = CheckReport(tool=f"infersuite {__version__}", round=rules.round, path=str(path),
                         kind=kind, compat_official=compat_official)
    opts = _Options(compat_official, submission_exceptions)
    if kind == "run":
        _check_run_dir(path, rules, rules.submission, report, opts)
    else:
        try:
            _walk_tree(path, rules, rules.submission, report, opts)
        except OSError as exc:  # unreadable directories: a finding, never a crash
            report.findings.append(Finding(
                rule=RuleId.TREE_LAYOUT, severity=Severity.ERROR, result=None, file=str(path),
                expected="a readable tree", found=str(exc), message="could not walk the tree",
                hint="check the permissions of the tree"))
        if not report.results:
            raise NotCheckable(f"{path}: no results found (expected a run directory, or a "
                               f"tree with {'/'.join(rules.submission.divisions)} divisions)")
    return report.finalize()


def _tree_finding(report: CheckReport, root: Path, path: Path, message: str,
                  rule: RuleId = RuleId.TREE_LAYOUT, severity: Severity | None = None) -> None:
    report.findings.append(Finding(
        rule=rule, severity=severity or RULES[rule].severity, result=None,
        file=path.relative_to(root).as_posix(), expected=None, found=None, message=message,
        hint=RULES[rule].title))
    report.rules_evaluated.append(rule)


@dataclass(frozen=True)
class _Options:
    compat: bool
    exceptions: bool


def _links(root: Path, report: CheckReport) -> None:
    """Every symbolic link in the tree is an error: a tree holds its own files, and a
    link (a ``closed/`` pointing at another tree, a log at any file) would make the
    check validate another place as if it were this one. Links are not followed."""
    for folder, dirs, files in os.walk(root):
        for name in sorted(dirs + files):
            path = Path(folder) / name
            if path.is_symlink():
                # an error, where other layout surprises are warnings: what is checked
                # would not be what is submitted
                _tree_finding(report, root, path, "symbolic link (to "
                              f"{os.readlink(path)}): a tree holds its own files",
                              severity=Severity.ERROR)


def _walk_tree(root: Path, rules: RuleSet, sub: SubmissionRules, report: CheckReport,
               opts: _Options) -> None:
    _links(root, report)
    for entry in sorted(root.iterdir()):
        if entry.is_symlink():
            continue  # said by _links; never walked
        if entry.is_dir() and entry.name in sub.divisions:
            for sub_dir in sorted(entry.iterdir()):
                if sub_dir.is_dir() and not sub_dir.is_symlink():
                    _walk_submitter(root, sub_dir, entry.name, rules, sub, report, opts)
                else:
                    _tree_finding(report, root, sub_dir, "unexpected file in a division")
        elif entry.is_dir() and entry.name == "evidence" and not entry.is_symlink():
            continue  # our auditor evidence beside the official tree (see submission/package.py)
        elif not (entry.is_file() and (entry.suffix in _ROOT_OK_SUFFIXES
                                       or entry.name in _ROOT_OK_NAMES)):
            _tree_finding(report, root, entry, "unexpected entry at the root of the tree")


def _walk_submitter(root: Path, sub_dir: Path, division: str, rules: RuleSet,
                    sub: SubmissionRules, report: CheckReport, opts: _Options) -> None:
    results_dir = sub_dir / "results"
    systems = sorted(p for p in results_dir.iterdir() if p.is_dir()) \
        if results_dir.is_dir() else []
    systems_dir = sub_dir / "systems"
    if systems_dir.is_dir():
        with_results = {p.name for p in systems}
        for desc in sorted(systems_dir.glob("*.json")):
            if desc.stem not in with_results:
                _tree_finding(report, root, desc, "system description without results")
    # The submitter's model_mapping.json names custom benchmark dirs (open division only).
    mapping, map_error = read_model_mapping(sub_dir) if division == "open" else (None, None)
    for system_dir in systems:
        desc_path = systems_dir / f"{system_dir.name}.json"
        data, error = read_json(desc_path)
        for bench_dir in sorted(p for p in system_dir.iterdir() if p.is_dir()):
            ctxs = [_tree_context(root, res, division, sub_dir.name, rules, sub, opts, mapping)
                    for res in sorted(p for p in bench_dir.iterdir() if p.is_dir())]
            _scenarios(ctxs, data, bench_dir.name)
            for ctx in ctxs:
                if map_error is not None:
                    with ctx.rule(RuleId.TREE_MODEL, sub_dir / "model_mapping.json") as run:
                        if run:
                            ctx.add(RuleId.TREE_MODEL, sub_dir / "model_mapping.json",
                                    f"model_mapping.json is {map_error}",
                                    expected='{"<benchmark dir>": "<model of the round>"}',
                                    found=map_error)
                with ctx.rule(RuleId.TREE_SRC, sub_dir / "src") as run:
                    if run and not (sub_dir / "src").is_dir():
                        ctx.add(RuleId.TREE_SRC, sub_dir / "src", "the submitter has no src/",
                                expected="src/ (or a pointer to the code)", found="missing")
                check_system(ctx, desc_path, data, error, sub_dir.name)
                _check_result(ctx, report)


def _tree_context(root: Path, rdir: Path, division: str, submitter: str, rules: RuleSet,
                  sub: SubmissionRules, opts: _Options,
                  mapping: dict[str, Any] | None) -> ResultContext:
    resolved = resolve_model(rules, rdir.parent.name, mapping)
    dir_scen = SCENARIO_DIRS.get(rdir.name.lower())
    fields = {"division": division, "submitter": submitter, "system": rdir.parent.parent.name,
              "benchmark": rdir.parent.name, "scenario": rdir.name}

    def at(template: str) -> Path:  # the round's path templates place every file
        return root / sub.paths[template].format(**fields)

    files = ResultFiles(
        perf_detail=at("performance_log"), perf_summary=at("performance_summary"),
        acc_detail=at("accuracy_log"), acc_txt=at("accuracy_result"),
        acc_json=at("accuracy_json"), measurements=at("measurements"),
        user_conf=rdir / "user.conf", readme=rdir / "README.md",
        compliance_root=at("compliance"))
    ctx = ResultContext(result_id=rdir.relative_to(root).as_posix(), root=root, files=files,
                        rules=rules, sub=sub, benchmark=rdir.parent.name,
                        model_name=resolved[0] if resolved else rdir.parent.name,
                        model=resolved[1] if resolved else None,
                        scenario=dir_scen[1] if dir_scen else None,
                        dir_scenario=dir_scen[0] if dir_scen else None, division=division,
                        strict=not opts.compat, exceptions=opts.exceptions)
    with ctx.rule(RuleId.TREE_MODEL, rdir.parent) as run:
        if run and resolved is None:
            how = " or map it in model_mapping.json" if division == "open" else ""
            ctx.add(RuleId.TREE_MODEL, rdir.parent, f"unknown benchmark for round {rules.round}",
                    expected=", ".join(sorted(rules.models)), found=rdir.parent.name,
                    hint=f"name the directory after a model of the round{how}")
    with ctx.rule(RuleId.TREE_LAYOUT, rdir) as run:
        if run and dir_scen is None:
            ctx.add(RuleId.TREE_LAYOUT, rdir, "unknown scenario directory",
                    expected=", ".join(v[0] for v in SCENARIO_DIRS.values()), found=rdir.name,
                    severity=RULES[RuleId.TREE_SRC].severity)
    return ctx


def _scenarios(ctxs: list[ResultContext], system: Any, bench_name: str) -> None:
    """TREE-SCENARIOS, reported on every result of the benchmark (as L3 does)."""
    if not ctxs or not ctxs[0].closed_like or ctxs[0].model is None:
        return
    system_type = system.get("system_type") if isinstance(system, dict) else None
    if system_type not in ctxs[0].sub.system_types:
        return  # SYS-TYPE / SYS-JSON already fail these results
    key = "datacenter,edge" if system_type == "edge,datacenter" else str(system_type)
    model = ctxs[0].model
    present = {c.dir_scenario for c in ctxs if c.dir_scenario is not None}
    for ctx in ctxs:
        with ctx.rule(RuleId.TREE_SCENARIOS, ctx.files.compliance_root) as run:
            if not run:
                continue
            if key not in model.required_scenarios:
                ctx.add(RuleId.TREE_SCENARIOS, None, f"{bench_name} has no entry for {key} systems",
                        expected=", ".join(model.required_scenarios) or "none", found=key,
                        hint="the round does not allow this model on this system type")
                continue
            required = set(model.required_scenarios[key])
            allowed = required | set(model.optional_scenarios.get(key, []))
            if missing := sorted(required - present):
                ctx.add(RuleId.TREE_SCENARIOS, None, "required scenarios missing",
                        expected=", ".join(sorted(required)),
                        found="missing: " + ", ".join(missing))
            for group in model.one_of_scenarios.get(key, []):
                if not present & set(group):
                    ctx.add(RuleId.TREE_SCENARIOS, None, "none of the scenarios of which one "
                            "is required", expected="one of " + ", ".join(group), found="none")
            if extra := sorted(present - allowed):
                ctx.add(RuleId.TREE_SCENARIOS, None, "scenarios not allowed for this system type",
                        expected=", ".join(sorted(allowed)), found=", ".join(extra))


#: An LLM result's figure (detail-log key, name): tokens, not samples, as the official
#: checker reads it (submission_checker ``get_result_key``: ``result_tokens_per_second`` in
#: Offline, ``result_completed_tokens_per_second`` in Server and Interactive).
_LLM_METRIC = {Scenario.OFFLINE: ("result_tokens_per_second", "tokens/s"),
               Scenario.SERVER: ("result_completed_tokens_per_second", "completed tokens/s")}


def _metric(ctx: ResultContext) -> tuple[str, str, bool]:
    """(detail-log key, metric name, whether the unit is ms) of the result's figure."""
    assert ctx.scenario is not None
    spec = SPECS[ctx.scenario]
    field = ctx.model.result_fields.get(ctx.dir_scenario or "") if ctx.model else None
    if field is not None:  # the round's figure for this model (whisper Offline: tokens/s)
        names = dict(_LLM_METRIC.values())
        return field, names.get(field, field), False
    if ctx.model is not None and ctx.model.llm and ctx.scenario in _LLM_METRIC:
        return (*_LLM_METRIC[ctx.scenario], False)
    return spec.metric_key, spec.metric_name, spec.unit == "ms"


def _check_result(ctx: ResultContext, report: CheckReport) -> None:
    metric = value = None
    # No LoadGen log at all: the endpoint benchmarker's artifacts (endpoints_format.py).
    endpoints = ctx.scenario is not None and is_endpoints_result(ctx)
    if endpoints:
        value, metric, accuracy = check_endpoints(ctx)
        ctx.files.user_conf = None  # that format has no user.conf (MEAS-FILES)
    else:
        if ctx.scenario is not None:
            check_performance(ctx)
            log = ctx.log(ctx.files.perf_detail)
            key, metric, in_ms = _metric(ctx)
            if log is not None and (raw := as_float(log.get(key))) is not None:
                value = raw / 1e6 if in_ms else raw
        accuracy = check_accuracy(ctx)
    if ctx.tree_mode:
        check_measurements(ctx)
        if not endpoints:
            check_compliance(ctx)
        check_power(ctx)
    parts = ctx.result_id.split("/")
    tree = ctx.tree_mode and len(parts) >= 6
    targets = ctx.model.targets_for(ctx.dir_scenario) if ctx.model else {}
    accuracy_metric, target = next(iter(targets.items()), (None, None))
    report.results.append(ResultReport(
        id=ctx.result_id, division=ctx.division if tree else None,
        submitter=parts[1] if tree else None, system=parts[3] if tree else None,
        benchmark=ctx.benchmark, scenario=ctx.dir_scenario or
        ctx.result_id.rsplit("/", 1)[-1], metric=metric, value=value, accuracy=accuracy,
        accuracy_metric=accuracy_metric, accuracy_target=target, findings=ctx.findings))
    report.rules_evaluated.extend(ctx.evaluated)


def _run_failed(path: Path) -> tuple[str, str] | None:
    """(the file, what it says) where a run directory's own record says the run did not
    complete: result.json's status, or STATUS where no result was written."""
    result, _ = read_json(path / "result.json")
    if isinstance(result, dict) and result.get("status") in ("FAILED", "INTERRUPTED"):
        tests = [t for t in result.get("tests") or [] if isinstance(t, dict)]
        why = next((str(t.get("message") or "") for t in tests if t.get("message")), "")
        return "result.json", f"{result['status']}: {why[:300]}"
    status = path / "STATUS"
    if not (path / "result.json").is_file() and status.is_file():
        text = status.read_text(encoding="utf-8", errors="replace").strip()
        if not text.startswith(("COMPLETED", "VALID", "INVALID")):
            return "STATUS", text.splitlines()[0][:300] if text else "left no status"
    return None


def _check_run_dir(path: Path, rules: RuleSet, sub: SubmissionRules,
                   report: CheckReport, opts: _Options) -> None:
    config, _ = read_json(path / "config.json")
    config = config if isinstance(config, dict) else {}
    parts = path.name.split("_")
    benchmark = str(config.get("benchmark") or (parts[1] if len(parts) > 3 else "unknown"))
    scen_name = str(config.get("scenario") or (parts[2] if len(parts) > 3 else "unknown"))
    try:
        scenario: Scenario | None = Scenario(scen_name.lower())
    except ValueError:
        scenario = None
    files = ResultFiles(
        perf_detail=path / "performance/mlperf_log_detail.txt",
        perf_summary=path / "performance/mlperf_log_summary.txt",
        acc_detail=path / "accuracy/mlperf_log_detail.txt",
        acc_txt=path / "accuracy/accuracy.txt",
        acc_json=path / "accuracy/mlperf_log_accuracy.json")
    # A run names our benchmark (resnet50); the checker's table names the model (resnet).
    bench = rules.benchmarks.get(benchmark)
    resolved = resolve_model(rules, bench.checker_model if bench else benchmark, None)
    ctx = ResultContext(result_id=path.name, root=path, files=files, rules=rules, sub=sub,
                        benchmark=benchmark, model_name=resolved[0] if resolved else benchmark,
                        model=resolved[1] if resolved else None, scenario=scenario,
                        dir_scenario=scenario.loadgen_name if scenario else None,
                        tree_mode=False, strict=not opts.compat, exceptions=opts.exceptions)
    with ctx.rule(RuleId.RUN_STATUS, path / "result.json") as run:
        if run and (failed := _run_failed(path)):
            ctx.add(RuleId.RUN_STATUS, path / failed[0], f"the run {failed[1]}: its "
                    "LoadGen logs say what LoadGen saw, not a result", expected="VALID",
                    found=failed[1].split()[0], hint="fix the failure and run again")
    with ctx.rule(RuleId.RUN_STAND_IN, path / "config.json") as run:
        if run and config.get("stand_in") is True:
            ctx.add(RuleId.RUN_STAND_IN, path / "config.json", "unofficial: a --stand-in run "
                    "(stand-in: not the reference model or dataset) is never a closed or "
                    "open result", expected="the reference model and dataset",
                    found="stand_in = true", hint="run with the real dataset and model "
                    "(data.dataset_dir, data.model_path) for a result")
    with ctx.rule(RuleId.TREE_LAYOUT, path / "config.json") as run:
        if run and (ctx.model is None or scenario is None):
            ctx.add(RuleId.TREE_LAYOUT, path / "config.json", "unknown benchmark or scenario",
                    expected=json.dumps(sorted(rules.benchmarks)),
                    found=f"{benchmark} {scen_name}", severity=RULES[RuleId.TREE_SRC].severity)
        if run:
            _unpackageable(ctx, path)
    _check_result(ctx, report)


def _unpackageable(ctx: ResultContext, run_dir: Path) -> None:
    """What ``package`` and ``sign`` refuse, said by ``check`` too: a symbolic link (it
    would copy whatever it points to) and a name that is not UTF-8 (a bundle names its
    files in UTF-8)."""
    for found in sorted(run_dir.rglob("*")):
        shown = os.fsencode(found).decode("utf-8", "backslashreplace")
        if found.is_symlink():
            ctx.add(RuleId.TREE_LAYOUT, found, f"{shown} is a symbolic link; package and "
                    "sign take a run's own files only", expected="a regular file",
                    found=f"a link to {os.readlink(found)}",
                    hint="replace the link with the run's file, or re-run")
        elif shown != str(found):  # the location too is shown, never the raw bytes
            ctx.add(RuleId.TREE_LAYOUT, Path(shown), f"{shown}: the name is not UTF-8; a bundle "
                    "names its files in UTF-8", expected="a UTF-8 name", found=shown,
                    hint="rename it, or move it out of the run directory")
