"""Compliance and power rules of one result (``COMP-*``, ``POWER-*``).

Compliance (closed and network only, as the checker's C-1..C-4): every test the model's
row lists has its ``TESTxx/`` directory with the round's files; each verification file
holds its pass lines (``TEST PASS``, or TEST06's own lines); a TEST01 whose
``verify_accuracy.txt`` does not pass may still pass through the non-deterministic
fallback that ``compliance/TEST01/README.md`` permits (baseline vs compliance accuracy
within the model's delta); TEST01/TEST04 performance logs pass the performance rules.
Beyond the official checker (strict mode), TEST06 and TEST09 are recomputed from their
accuracy logs: a verification file's text alone is no evidence.

Power (any division, only where ``performance/power/`` exists): the files the rules list
are present, and the power run's logs fit together. Values are not judged here.
"""

from __future__ import annotations

import re
from pathlib import Path

from suite.checker.context import ResultContext, log_problem, read_json, read_text
from suite.checker.findings import RuleId
from suite.checker.performance import check_compliance_log

_PERF_RUN = "performance/run_1"
#: C-4: a compliance performance run holds these (plus, optionally, the accuracy log).
_RUN_OPTIONAL = {"mlperf_log_accuracy.json"}


def check_compliance(ctx: ResultContext) -> None:
    """``COMP-DIR`` and ``COMP-PASS``: closed and network only (open is skipped)."""
    root = ctx.files.compliance_root
    if root is None or not ctx.closed_like or ctx.model is None:
        return
    for test in ctx.model.compliance_tests:
        test_dir = root / test
        needed = ctx.sub.compliance_files.get(test, [])
        with ctx.rule(RuleId.COMP_DIR, test_dir) as run:
            if run:
                _files(ctx, test, test_dir, needed)
        for name in needed:
            if name.endswith("mlperf_log_detail.txt"):
                check_compliance_log(ctx, test_dir / name)
            if name.startswith("verify_"):
                _passed(ctx, test, test_dir / name)


def _files(ctx: ResultContext, test: str, test_dir: Path, needed: list[str]) -> None:
    if not test_dir.is_dir():
        ctx.add(RuleId.COMP_DIR, test_dir, f"compliance test {test} is missing",
                expected=f"{test}/ with {', '.join(needed)}", found="missing",
                hint=f"run the {test} audit and copy its output here")
        return
    if missing := [name for name in needed if not (test_dir / name).is_file()]:
        ctx.add(RuleId.COMP_DIR, test_dir, f"{test} lacks files",
                expected=", ".join(needed), found="missing: " + ", ".join(missing))
    run_dir = test_dir / _PERF_RUN
    wanted = {Path(n).name for n in needed if n.startswith(_PERF_RUN + "/")}
    if wanted and run_dir.is_dir():
        extra = sorted(p.name for p in run_dir.iterdir()
                       if p.name not in wanted | _RUN_OPTIONAL)
        if extra:
            ctx.add(RuleId.COMP_DIR, run_dir, f"{test}/{_PERF_RUN} holds unexpected files",
                    expected=", ".join(sorted(wanted)), found=", ".join(extra))


def _passed(ctx: ResultContext, test: str, path: Path) -> None:
    with ctx.rule(RuleId.COMP_PASS, path) as run:
        text = read_text(path)
        if not run or text is None:
            return  # a missing verification file is COMP-DIR's finding
        lines = [line.strip() for line in text.splitlines()]
        groups = ctx.sub.compliance_pass_lines.get(test)
        if groups is not None:
            missing = [group[0] for group in groups if not any(g in lines for g in group)]
            if missing:
                ctx.add(RuleId.COMP_PASS, path, f"{test} verification did not pass",
                        expected="; ".join(" | ".join(g) for g in groups),
                        found="missing: " + "; ".join(missing))
            elif test == "TEST06" and ctx.strict:
                _test06_recomputed(ctx, path.parent)
            return
        marker = ctx.sub.compliance_pass_marker
        if any(marker in line for line in lines):
            if test == "TEST09" and ctx.strict:
                _test09_recomputed(ctx, path.parent)
            return
        if test == "TEST01" and path.name == "verify_accuracy.txt":
            problem = _test01_fallback(ctx, path.parent / "accuracy")
            if problem is None:
                return
            ctx.add(RuleId.COMP_PASS, path, "TEST01 accuracy did not pass, and its "
                    "non-deterministic fallback does not either", expected=marker,
                    found=problem, hint="compliance/TEST01/README.md: baseline_accuracy.txt "
                    "and compliance_accuracy.txt within the allowed delta")
            return
        ctx.add(RuleId.COMP_PASS, path, f"{test} verification did not pass",
                expected=marker, found=(text.strip().splitlines() or ["empty"])[-1])


def _test06_recomputed(ctx: ResultContext, test_dir: Path) -> None:
    """TEST06 from its accuracy log, never from ``verify_accuracy.txt``'s text (a hand-
    edited file claimed a pass over an empty log). The tree's copy of the log may be
    truncated; ``suite package`` keeps the whole one under ``evidence/<result>/TEST06/``,
    taken only if its sha256 is the ``hash=`` line of ``TEST06/accuracy/accuracy.txt``."""
    from suite.accuracy import read_accuracy_entries
    from suite.errors import SuiteError
    from suite.llm.test06 import verify_entries

    log = next((p for p in (test_dir / "accuracy" / "mlperf_log_accuracy.json",
                            test_dir / "mlperf_log_accuracy.json") if p.is_file()), None)
    found = _whole_log(ctx, test_dir, log)
    if log is None or found is None:
        ctx.add(RuleId.COMP_PASS, test_dir, "TEST06 cannot be recomputed: "
                + ("no accuracy log" if log is None else "its accuracy log is truncated and "
                   "evidence/ holds no whole copy with the hash accuracy.txt names"),
                expected="TEST06's accuracy log (mlperf_log_accuracy.json)", found="missing",
                hint="package the run again with `suite package`: verify_accuracy.txt "
                "alone is no evidence")
        return
    try:
        entries = read_accuracy_entries(found)
    except (SuiteError, OSError, UnicodeDecodeError) as exc:
        ctx.add(RuleId.COMP_PASS, found, "TEST06's accuracy log is unreadable",
                expected="LoadGen's mlperf_log_accuracy.json", found=str(exc))
        return
    eos = _eos_id(ctx)
    verdict = verify_entries(entries if isinstance(entries, list) else [],
                             ctx.dir_scenario == "Offline", -1 if eos is None else eos)
    if not verdict.passed:
        ctx.add(RuleId.COMP_PASS, found, "TEST06 recomputed from its accuracy log does not "
                "pass, whatever verify_accuracy.txt says",
                expected="every check passes on the logged samples",
                found="; ".join([*verdict.lines(), *verdict.evidence[:3]]))


def _test09_recomputed(ctx: ResultContext, test_dir: Path) -> None:
    """TEST09 from its accuracy log (the mean output length within the model's bounds),
    never from ``verify_output_len.txt``'s text alone; the whole log as for TEST06."""
    from suite.accuracy import read_accuracy_entries
    from suite.errors import SuiteError
    from suite.llm.test07_09 import TEST09_BOUNDS, verify_09

    log = test_dir / "accuracy" / "mlperf_log_accuracy.json"
    found = _whole_log(ctx, test_dir, log if log.is_file() else None)
    bounds = TEST09_BOUNDS.get(ctx.model_name)
    if found is None or bounds is None:
        why = (f"no bounds are known for {ctx.model_name}" if bounds is None else
               "its accuracy log is missing, or truncated with no whole copy under "
               "evidence/ of the hash accuracy.txt names")
        ctx.add(RuleId.COMP_PASS, test_dir, f"TEST09 cannot be recomputed: {why}",
                expected="TEST09's accuracy log (accuracy/mlperf_log_accuracy.json)",
                found="missing", hint="package the run again with `suite package`: "
                "verify_output_len.txt alone is no evidence")
        return
    try:
        verdict = verify_09(read_accuracy_entries(found), *bounds)
    except (SuiteError, OSError, UnicodeDecodeError) as exc:
        ctx.add(RuleId.COMP_PASS, found, "TEST09's accuracy log is unreadable",
                expected="LoadGen's mlperf_log_accuracy.json", found=str(exc))
        return
    if not verdict.passed:
        ctx.add(RuleId.COMP_PASS, found, "TEST09 recomputed from its accuracy log does not "
                "pass, whatever verify_output_len.txt says",
                expected=f"mean output tokens within [{bounds[0]}, {bounds[1]}]",
                found=f"mean {verdict.mean:.2f} over {len(verdict.lengths)} entries")


def _whole_log(ctx: ResultContext, test_dir: Path, log: Path | None) -> Path | None:
    """``log`` if it is whole JSON, else the evidence copy whose sha256 matches."""
    import hashlib
    import json

    if log is None:
        return None
    try:
        json.loads(log.read_bytes())
        return log
    except (ValueError, OSError):
        pass
    recorded = [line.removeprefix("hash=").strip() for line in
                (read_text(test_dir / "accuracy" / "accuracy.txt") or "").splitlines()
                if line.startswith("hash=")]
    copy = ctx.root / "evidence" / ctx.result_id / test_dir.name / log.name
    if recorded and copy.is_file() and \
            hashlib.sha256(copy.read_bytes()).hexdigest() == recorded[-1]:
        return copy
    return None


def _eos_id(ctx: ResultContext) -> int | None:
    """The EOS token id of the model's card, if the suite has one (else the EOS check
    cannot fail, and only the first-token and length checks decide)."""
    from suite.errors import SuiteError
    from suite.llm.card import load_llm_card
    from suite.paths import find_paths

    paths = find_paths()
    for name, bench in ctx.rules.benchmarks.items():
        if bench.checker_model == ctx.model_name or name == ctx.benchmark:
            try:  # the LLM card loader refuses a card of another kind, or none
                return load_llm_card(paths, name).tokenizer.eos_id
            except SuiteError:
                continue
    return None


def _test01_fallback(ctx: ResultContext, acc_dir: Path) -> str | None:
    """Why TEST01's fallback fails, or ``None`` if it passes (checker C-3)."""
    assert ctx.model is not None
    if not acc_dir.is_dir():
        return "no TEST01/accuracy directory"
    present = {p.name for p in acc_dir.iterdir()}
    if present != set(ctx.sub.test01_fallback_files):
        return f"TEST01/accuracy holds {', '.join(sorted(present)) or 'nothing'}"
    texts = [read_text(acc_dir / n) or "" for n in ("baseline_accuracy.txt",
                                                   "compliance_accuracy.txt")]
    for metric in ctx.model.targets_for(ctx.dir_scenario):
        pattern = ctx.sub.accuracy_patterns.get(metric, "")
        base, comp = (_last_value(pattern, t) for t in texts)
        if not base or not comp:  # absent (or zero), as the official checker reads it
            return f"{metric} missing in baseline or compliance accuracy"
        delta = abs(1 - base / comp) * 100
        allowed = ctx.model.delta_for(ctx.model_name, metric)
        if delta > allowed:
            return f"{metric}: delta {delta:.4f} % > {allowed} %"
    return None


def _last_value(pattern: str, text: str) -> float:
    value = 0.0
    for line in text.splitlines():
        match = re.match(pattern, line) if pattern else None
        if match:
            try:
                value = float(match.group(match.lastindex or 1))
            except (ValueError, IndexError):
                continue
    return value


def check_power(ctx: ResultContext) -> None:
    """``POWER-FILES`` and ``POWER-LOGS`` when ``performance/power/`` exists."""
    perf_root = ctx.files.perf_detail.parent.parent
    power = perf_root / "power"
    if not power.is_dir():
        return
    with ctx.rule(RuleId.POWER_FILES, power) as run:
        for rel, names in ctx.sub.power_files.items() if run else ():
            where = perf_root.parent / rel
            if missing := [n for n in names if not (where / n).is_file()]:
                ctx.add(RuleId.POWER_FILES, where, f"power result: {rel} lacks files",
                        expected=", ".join(names), found="missing: " + ", ".join(missing),
                        hint="copy the PTD client/server output and the ranging run")
    with ctx.rule(RuleId.POWER_LOGS, power) as run:
        if run:
            _power_logs(ctx, perf_root, power)


def _power_logs(ctx: ResultContext, perf_root: Path, power: Path) -> None:
    main = ctx.log(ctx.files.perf_detail)
    if main is not None:
        absent = [k for k in ("power_begin", "power_end") if main.get(k) is None]
        if absent:
            ctx.add(RuleId.POWER_LOGS, ctx.files.perf_detail, "the power run logged no "
                    "measurement window", expected="power_begin, power_end",
                    found="missing: " + ", ".join(absent))
    ranging = perf_root / "ranging" / "mlperf_log_detail.txt"
    if ranging.exists():
        log = ctx.log(ranging)
        problem = log_problem(ranging, log, ctx.log_reason(ranging))
        if problem is not None:
            ctx.add(RuleId.POWER_LOGS, ranging, f"ranging log is {problem}",
                    expected="a LoadGen mlperf_log_detail.txt", found=problem)
        elif log is not None and main is not None and (
                log.get("effective_scenario") != main.get("effective_scenario")):
            ctx.add(RuleId.POWER_LOGS, ranging, "ranging and testing runs differ in scenario",
                    expected=main.get("effective_scenario"), found=log.get("effective_scenario"))
    for name in ("client.json", "server.json"):
        path = power / name
        if path.exists():
            data, error = read_json(path)
            if error is not None or not isinstance(data, dict):
                ctx.add(RuleId.POWER_LOGS, path, f"{name} is unusable",
                        expected="a JSON object", found=error or type(data).__name__)
