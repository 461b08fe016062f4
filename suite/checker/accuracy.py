"""Accuracy rules (``ACC-*``): the accuracy run's detail log, ``accuracy.txt`` (metric
line and ``hash=``), the truncated ``mlperf_log_accuracy.json`` and the dataset size.
Targets and metric regexes come from the round's tables (``ACC_PATTERN``).
"""

from __future__ import annotations

import hashlib
import re

from suite.checker.context import (
    ResultContext,
    as_int,
    check_detail_log,
    counted_errors,
    read_text,
)
from suite.checker.findings import RuleId, Severity


def check_accuracy(ctx: ResultContext) -> float | None:
    """Every ``ACC-*`` rule of one result; returns the accuracy read from accuracy.txt."""
    path = ctx.files.acc_detail
    log = ctx.log(path)
    check_detail_log(ctx, RuleId.ACC_LOG, path, log, "accuracy",
                     "copy the accuracy run's mlperf_log_detail.txt unchanged")
    if log is not None:
        with ctx.rule(RuleId.ACC_ERRORS, path) as run:
            errors = counted_errors(ctx, log)
            if run and errors:
                ctx.add(RuleId.ACC_ERRORS, path, f"LoadGen logged {len(errors)} error(s)",
                        expected="0 errors", found="; ".join(errors[:3]),
                        hint="--submission-exceptions waives only the uncommitted-build error")
        with ctx.rule(RuleId.ACC_DATASET, path) as run:
            if run and ctx.model is not None:
                raw = log.get("effective_accuracy_sample_count",
                              log.get("qsl_reported_total_count"))
                need = ctx.model.accuracy_count(ctx.dir_scenario)
                if as_int(raw) != need:
                    ctx.add(RuleId.ACC_DATASET, path, "the accuracy run does not cover the dataset",
                            expected=need, found=raw, hint="run --mode accuracy unchanged")
    if ctx.tree_mode:
        _truncated(ctx)
        check_extra_files(ctx)
    return _accuracy_txt(ctx)


def check_extra_files(ctx: ResultContext) -> None:
    """A-5: the sample outputs (SDXL images, wan videos) the round names by id."""
    if ctx.model is None or not ctx.model.accuracy_extra_files:
        return
    for folder, ids in ctx.model.accuracy_extra_files.items():
        where = ctx.files.acc_txt.parent / folder
        with ctx.rule(RuleId.ACC_EXTRA_FILES, where) as run:
            if not run:
                continue
            stems = {p.stem for p in where.iterdir()} if where.is_dir() else set()
            if missing := [i for i in ids if i not in stems]:
                ctx.add(RuleId.ACC_EXTRA_FILES, where, f"accuracy/{folder} lacks samples",
                        expected=", ".join(ids), found="missing: " + ", ".join(missing))


def _truncated(ctx: ResultContext) -> None:
    path = ctx.files.acc_json
    with ctx.rule(RuleId.ACC_TRUNCATED, path) as run:
        if not run:
            return
        limit = ctx.sub.max_accuracy_log_bytes
        if not path.is_file():
            ctx.add(RuleId.ACC_TRUNCATED, path, "mlperf_log_accuracy.json is missing",
                    expected=f"a file of <= {limit} bytes", found="missing")
        elif (size := path.stat().st_size) > limit:
            ctx.add(RuleId.ACC_TRUNCATED, path, "mlperf_log_accuracy.json is not truncated",
                    expected=f"<= {limit} bytes", found=f"{size} bytes",
                    hint="suite package truncates it and keeps the full log's hash")


def _accuracy_txt(ctx: ResultContext) -> float | None:
    path = ctx.files.acc_txt
    text = read_text(path)
    lines = [] if text is None else text.splitlines()
    with ctx.rule(RuleId.ACC_HASH, path) as run:
        hashes = [m.group(1) for line in lines if (m := re.match(ctx.sub.hash_pattern, line))]
        if run and not hashes:
            ctx.add(RuleId.ACC_HASH, path, "accuracy.txt has no hash= line",
                    expected="hash=<sha256>", found="missing" if text is None else "no hash line")
        elif run and not ctx.tree_mode and ctx.files.acc_json.is_file():
            # A run directory still has the full log, so the hash can be recomputed.
            digest = hashlib.sha256(ctx.files.acc_json.read_bytes()).hexdigest()
            if hashes[0] != digest:
                ctx.add(RuleId.ACC_HASH, path, "hash= does not match mlperf_log_accuracy.json",
                        expected=digest, found=hashes[0])
    model = ctx.model
    if model is None:
        return None
    targets = model.targets_for(ctx.dir_scenario)
    values = {metric: _metric(ctx, metric, lines) for metric in targets}
    first = next(iter(values.values()), None)
    with ctx.rule(RuleId.ACC_TARGET, path) as run:
        if not run:
            return first
        # Open division: recorded, never enforced; we say so as info.
        severity = None if ctx.closed_like else Severity.INFO
        for metric, target in targets.items():
            value = values[metric]
            if value is None:
                ctx.add(RuleId.ACC_TARGET, path, f"no {metric} value in accuracy.txt",
                        expected=f">= {target}", found="missing" if text is None else "no match",
                        severity=severity)
            elif value < target:
                ctx.add(RuleId.ACC_TARGET, path, f"{metric} below target",
                        expected=f">= {target}", found=value, severity=severity)
        for metric, upper in model.upper_limits.items():
            value = values[metric] if metric in values else _metric(ctx, metric, lines)
            if value is not None and value > upper:
                ctx.add(RuleId.ACC_TARGET, path, f"{metric} above the upper limit",
                        expected=f"<= {upper}", found=value, severity=severity)
    return first


def _metric(ctx: ResultContext, metric: str, lines: list[str]) -> float | None:
    """The first value ``ACC_PATTERN[metric]`` matches in ``lines`` (its last group)."""
    pattern = ctx.sub.accuracy_patterns.get(metric)
    if pattern is None:
        return None
    for line in lines:
        match = re.match(pattern, line)
        if match:
            try:
                return float(match.group(match.lastindex or 1))
            except (ValueError, IndexError):
                continue
    return None
