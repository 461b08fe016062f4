"""System and measurement rules (``SYS-*``, ``MEAS-*``).

A system-level finding fails every result of that system, so these run per result
with the (cached) parsed system JSON; the finding then names the result it fails.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from suite.checker.context import ResultContext, as_int, read_json
from suite.checker.findings import RuleId


def check_system(ctx: ResultContext, path: Path, data: Any, error: str | None,
                 submitter: str) -> None:
    """Every ``SYS-*`` rule for the system JSON at ``path`` (already read)."""
    with ctx.rule(RuleId.SYS_JSON, path) as run:
        if run and (error is not None or not isinstance(data, dict)):
            found = error or f"a JSON {type(data).__name__}, not an object"
            ctx.add(RuleId.SYS_JSON, path, f"system description is {found}",
                    expected="a JSON object with the required fields", found=found,
                    hint="write it with `suite system`")
    if not isinstance(data, dict):
        return
    sub = ctx.sub
    with ctx.rule(RuleId.SYS_FIELDS, path) as run:
        if run:
            missing = [k for k in sub.system_required_fields if k not in data]
            empty = [k for k in sub.system_meaningful_fields if k in data and not data[k]]
            if missing:
                ctx.add(RuleId.SYS_FIELDS, path, f"{len(missing)} required field(s) missing",
                        expected="present", found=", ".join(missing),
                        hint="`suite system` lists the fields still to fill")
            if empty:
                ctx.add(RuleId.SYS_FIELDS, path, f"{len(empty)} field(s) need a meaningful value",
                        expected="non-empty", found=", ".join(empty),
                        hint="fill them in your system TOML")
    with ctx.rule(RuleId.SYS_STATUS, path) as run:
        status = data.get("status")
        if run and (not isinstance(status, str) or status.lower() not in sub.availabilities):
            ctx.add(RuleId.SYS_STATUS, path, "invalid availability status",
                    expected=" | ".join(sub.availabilities), found=status)
    with ctx.rule(RuleId.SYS_TYPE, path) as run:
        if run and data.get("system_type") not in sub.system_types:
            ctx.add(RuleId.SYS_TYPE, path, "invalid system_type",
                    expected=" | ".join(sub.system_types), found=data.get("system_type"))
    _identity(ctx, path, data, submitter)
    with ctx.rule(RuleId.SYS_COUNTS, path) as run:
        if run:
            for key in ("number_of_nodes", "accelerators_per_node"):
                if key in data and as_int(data[key]) is None:
                    ctx.add(RuleId.SYS_COUNTS, path, f"{key} is not an integer",
                            expected="an integer (CPU-only systems: \"0\")", found=repr(data[key]))
    _network(ctx, path, data)


def _identity(ctx: ResultContext, path: Path, data: dict[str, Any], submitter: str) -> None:
    with ctx.rule(RuleId.SYS_DIVISION, path) as run:
        div = data.get("division")
        if run and (not isinstance(div, str) or div.lower() != ctx.division):
            ctx.add(RuleId.SYS_DIVISION, path, "division differs from the directory",
                    expected=ctx.division, found=div)
    with ctx.rule(RuleId.SYS_SUBMITTER, path) as run:
        who = data.get("submitter")
        if run and (not isinstance(who, str) or who.lower() != submitter.lower()):
            ctx.add(RuleId.SYS_SUBMITTER, path, "submitter differs from the directory",
                    expected=submitter, found=who)


def _network(ctx: ResultContext, path: Path, data: dict[str, Any]) -> None:
    with ctx.rule(RuleId.SYS_NETWORK, path) as run:
        if not run:
            return
        raw = data.get("is_network")
        is_network = isinstance(raw, str | bool) and str(raw).lower() == "true"
        if is_network != (ctx.division == "network"):
            ctx.add(RuleId.SYS_NETWORK, path, f"is_network does not fit division {ctx.division}",
                    expected=str(ctx.division == "network").lower(), found=raw)
        if raw:
            missing = [k for k in ctx.sub.network_fields if k not in data]
            if missing:
                ctx.add(RuleId.SYS_NETWORK, path, "network fields missing",
                        expected="present", found=", ".join(missing))


def check_measurements(ctx: ResultContext) -> None:
    """``MEAS-JSON`` and ``MEAS-FILES`` for one result directory."""
    files = ctx.files
    if files.measurements is not None:
        with ctx.rule(RuleId.MEAS_JSON, files.measurements) as run:
            if run:
                data, error = read_json(files.measurements)
                if error is not None or not isinstance(data, dict):
                    ctx.add(RuleId.MEAS_JSON, files.measurements, "measurements.json is unusable",
                            expected="a JSON object", found=error or type(data).__name__)
                else:
                    bad = [k for k in ctx.sub.measurements_fields if not data.get(k)]
                    if bad:
                        ctx.add(RuleId.MEAS_JSON, files.measurements, "fields missing or empty",
                                expected=", ".join(ctx.sub.measurements_fields),
                                found="missing/empty: " + ", ".join(bad))
    for path in (files.user_conf, files.readme):
        if path is None:
            continue
        with ctx.rule(RuleId.MEAS_FILES, path) as run:
            if run and (not path.is_file() or path.stat().st_size == 0):
                ctx.add(RuleId.MEAS_FILES, path, f"{path.name} is missing or empty",
                        expected="a non-empty file",
                        found="empty" if path.is_file() else "missing")
