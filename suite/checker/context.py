"""The evaluation context of one result and the defensive readers every rule uses.

Nothing here raises on malformed input: a reader returns ``None`` (or a partial value)
and the caller turns that into a finding on the result it affects. ``ResultContext.rule``
is a context manager that records the rule as evaluated; an exception escaping a rule
is the checker's own bug (the readers never raise on bad input), so it becomes a
``CHECK-INTERNAL`` error finding that names the rule and carries the traceback, never a
claim that the file is malformed. ``suite check`` never crashes, and never passes a
result whose rule could not be evaluated.
"""

from __future__ import annotations

import json
import math
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from suite.checker.findings import RULES, Finding, RuleId, Severity
from suite.config.rules import ModelRules, RuleSet, SubmissionRules
from suite.errors import SuiteError
from suite.logs import DetailLog, parse_detail_log
from suite.paths import RECORD_FILE_LIMIT, regular_file_problem
from suite.scenarios import Scenario

_PREFIX = ":::MLLOG "


@dataclass
class ResultFiles:
    """Where one result's files are; ``None`` where the layout has no such file."""

    perf_detail: Path
    perf_summary: Path
    acc_detail: Path
    acc_txt: Path
    acc_json: Path
    measurements: Path | None = None
    user_conf: Path | None = None
    readme: Path | None = None
    compliance_root: Path | None = None


@dataclass
class ResultContext:
    """Everything the rules of one result need, and the findings they produce."""

    result_id: str
    root: Path
    files: ResultFiles
    rules: RuleSet
    sub: SubmissionRules
    benchmark: str
    #: The official model the benchmark directory stands for, and its rules.
    model_name: str
    model: ModelRules | None
    #: The LoadGen scenario that runs the result (Interactive runs as Server) ...
    scenario: Scenario | None
    #: ... and the scenario directory's own spelling (``Interactive``, ``Offline``, ...).
    dir_scenario: str | None = None
    division: str = "closed"
    tree_mode: bool = True
    strict: bool = True
    #: ``--submission-exceptions``: LoadGen's uncommitted-build error is waived.
    exceptions: bool = False
    findings: list[Finding] = field(default_factory=list)
    evaluated: set[str] = field(default_factory=set)
    _logs: dict[Path, tuple[DetailLog | None, str | None]] = field(default_factory=dict)

    @property
    def closed_like(self) -> bool:
        return self.division in ("closed", "network")

    def rel(self, path: Path | None) -> str | None:
        if path is None:
            return None
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    def add(self, rule_id: RuleId, file: Path | None, message: str, *, expected: Any = None,
            found: Any = None, hint: str = "", severity: Severity | None = None) -> None:
        rule = RULES[rule_id]
        self.findings.append(Finding(
            rule=rule_id, severity=severity or rule.severity, result=self.result_id,
            file=self.rel(file), expected=None if expected is None else str(expected),
            found=None if found is None else str(found), message=message,
            hint=hint or rule.title))

    def applies(self, rule_id: RuleId) -> bool:
        return self.strict or not RULES[rule_id].strict_only

    @contextmanager
    def rule(self, rule_id: RuleId, file: Path | None = None) -> Iterator[bool]:
        """Evaluate ``rule_id`` unless compat mode skips it; yields whether to run it."""
        if not self.applies(rule_id):
            yield False
            return
        self.evaluated.add(rule_id)
        try:
            yield True
        except Exception as exc:  # the checker's bug: say so, keep the traceback
            self.add(RuleId.CHECK_INTERNAL, file,
                     f"internal error of suite check while evaluating {rule_id}: "
                     f"{type(exc).__name__}: {exc}; this is not a verdict on the file",
                     found=traceback.format_exc(),
                     hint="report this with the traceback (the finding's 'found'); the "
                          f"rule {rule_id} was not evaluated, so the result cannot pass")

    def log(self, path: Path) -> DetailLog | None:
        """The parsed detail log, or ``None`` if it is missing or unreadable (cached)."""
        if path not in self._logs:
            self._logs[path] = load_detail_log(path)
        return self._logs[path][0]

    def log_reason(self, path: Path) -> str | None:
        """Why ``log(path)`` is ``None`` (missing, unreadable and why), else ``None``."""
        self.log(path)
        return self._logs[path][1]


#: The one LoadGen error ``--submission-exceptions`` waives (loadgen/version.cc).
UNCOMMITTED = "uncommitted changes"


def counted_errors(ctx: ResultContext, log: DetailLog) -> list[str]:
    """The log's LoadGen errors that count, after the exceptions the run was given."""
    if not ctx.exceptions:
        return list(log.errors)
    return [e for e in log.errors if UNCOMMITTED not in e]


def load_detail_log(path: Path) -> tuple[DetailLog | None, str | None]:
    """``(log, None)`` or ``(None, why not)``: the reason is kept for the finding."""
    try:
        if not path.exists():
            return None, "missing"
        if not path.is_file():
            return None, "not a regular file"
        return parse_detail_log(path), None
    except SuiteError as exc:
        return None, str(exc)
    except OSError as exc:
        return None, f"unreadable: {exc.strerror or exc}"
    except (AttributeError, TypeError, ValueError) as exc:  # records of an unexpected shape
        return None, f"unparsable: {type(exc).__name__}: {exc}"


def read_detail_log(path: Path) -> DetailLog | None:
    return load_detail_log(path)[0]


def check_detail_log(ctx: ResultContext, rule: RuleId, path: Path, log: DetailLog | None,
                     which: str, hint: str) -> None:
    """The ``*-LOG`` rule of a detail log: present, parsable and LoadGen's (``which``
    names the run in the finding: "performance", "accuracy")."""
    with ctx.rule(rule, path) as run:
        if run:
            problem = log_problem(path, log, ctx.log_reason(path))
            if problem is not None:
                ctx.add(rule, path, f"{which} detail log is {problem}",
                        expected="a LoadGen mlperf_log_detail.txt", found=problem, hint=hint)


def log_problem(path: Path, log: DetailLog | None, reason: str | None = None) -> str | None:
    """Why a detail log cannot be trusted, or ``None`` if it is well-formed."""
    if log is None:
        return reason or ("missing" if not path.exists() else "unreadable")
    try:
        with path.open("rb") as handle:
            first = handle.readline()
    except OSError as exc:
        return f"unreadable: {exc}"
    if not first.startswith(_PREFIX.encode()):
        return "first line does not start with ':::MLLOG'"
    if log.malformed_lines:
        return f"{log.malformed_lines} malformed line(s)"
    if not isinstance(log.values, dict) or "effective_scenario" not in log.values:
        return "no effective_scenario record"
    return None


def read_json(path: Path) -> tuple[Any, str | None]:
    """``(value, None)`` or ``(None, why not)``."""
    try:
        if (problem := regular_file_problem(path, RECORD_FILE_LIMIT)) is not None:
            return None, problem
        return json.loads(path.read_text(encoding="utf-8")), None
    except FileNotFoundError:
        return None, "missing"
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"unreadable: {exc}"
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON: {exc.msg} at line {exc.lineno}"
    except RecursionError:
        return None, "not valid JSON: nested too deeply"


def read_text(path: Path) -> str | None:
    try:
        if regular_file_problem(path, RECORD_FILE_LIMIT) is not None:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except (OSError, ValueError):
        return None


def as_int(value: Any) -> int | None:
    """An integer from an int or an integral string; never from bool or float noise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def as_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        result = float(value)
    elif isinstance(value, str):
        try:
            result = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return result if math.isfinite(result) else None
