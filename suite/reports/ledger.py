"""The run ledger: every attempt under a runs directory, read from what each run recorded.

One row per run directory (one ``suite run``): its time, benchmark, scenario, backend,
mode, status and metric come from ``result.json``; nothing is recomputed. A directory
whose ``result.json`` is missing or unreadable is named in ``Ledger.skipped`` with the
reason (and what its ``STATUS`` file says), never listed and never a crash.

**Config digest.** Runs record no digest of their configuration, so the ledger computes
one: the sha256 of the run's recorded resolved config (``config.json``), in canonical
JSON (sorted keys, no whitespace) without two keys that do not change what ran:
``runs_dir`` (where the run was written) and ``provenance`` (where each value came from,
not the value). Two attempts with the same digest ran the same configuration, so the
group shows best-of-N selection: the best attempt of each group (a VALID one first, then
the metric in its direction, then the newest) is marked ``best``. A run without a
readable ``config.json`` has no digest and forms a group of its own.

``list_runs(runs_dir, filters)`` is the library call; ``suite runs`` renders it, each
row led by the run's path (what ``suite show``, ``diff`` and ``report`` take).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from suite.errors import ConfigError
from suite.results import RunResult, Status
from suite.scenarios import SPECS, Scenario

#: Keys of ``config.json`` left out of the digest: they do not change what ran.
DIGEST_EXCLUDED = ("runs_dir", "provenance")
#: Files that make a directory a run directory (``suite run`` writes STATUS first).
_RUN_MARKERS = ("result.json", "STATUS", "config.json")


@dataclass(frozen=True)
class Metric:
    """The attempt's metric as ``result.json`` recorded it (LoadGen's, or accuracy)."""

    name: str
    value: float | None
    unit: str
    higher_is_better: bool


@dataclass
class Attempt:
    """One run directory's attempt."""

    run_id: str
    run_dir: str
    time: str
    benchmark: str
    scenario: str
    backend: str
    mode: str
    system: str
    status: str
    metric: Metric | None
    submittable: bool
    #: sha256 of the canonical recorded config (see the module docstring); None: unreadable
    config_digest: str | None
    #: the best attempt of its digest group (by the metric's direction)
    best: bool = False

    @property
    def group(self) -> str:
        return self.config_digest or f"run:{self.run_id}"


@dataclass(frozen=True)
class Skipped:
    """A run directory left out of the ledger, and why."""

    path: str
    why: str


@dataclass(frozen=True)
class Filters:
    """Which attempts to list; ``None`` matches everything. ``since``: ISO date or time
    (UTC when it names no zone)."""

    benchmark: str | None = None
    scenario: str | None = None
    backend: str | None = None
    mode: str | None = None
    status: str | None = None
    since: str | None = None

    def matches(self, row: Attempt) -> bool:
        for name in ("benchmark", "scenario", "backend", "mode"):
            wanted = getattr(self, name)
            if wanted is not None and getattr(row, name).lower() != wanted.lower():
                return False
        if self.status is not None and row.status != _status(self.status):
            return False
        return self.since is None or _when(row.time) >= _since(self.since)


@dataclass
class Ledger:
    """Every attempt (oldest first), grouped by config digest, and what was skipped."""

    runs_dir: str
    rows: list[Attempt] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    def groups(self) -> list[list[Attempt]]:
        """Attempts sharing a config digest, groups in order of their first attempt."""
        grouped: dict[str, list[Attempt]] = {}
        for row in self.rows:
            grouped.setdefault(row.group, []).append(row)
        return list(grouped.values())

    def to_dict(self) -> dict[str, Any]:
        return {"runs_dir": self.runs_dir, "digest_excludes": list(DIGEST_EXCLUDED),
                "rows": [asdict(row) for row in self.rows],
                "groups": [[row.run_id for row in group] for group in self.groups()],
                "skipped": [asdict(item) for item in self.skipped]}


def list_runs(runs_dir: Path, filters: Filters | None = None) -> Ledger:
    """Every attempt under ``runs_dir`` that matches ``filters``, best of each group marked.

    Best-of-N is decided over the whole group before filtering, so a filter never makes
    a worse attempt look like the best one.
    """
    filters = filters or Filters()
    if filters.status is not None:
        _status(filters.status)  # a bad value fails before any reading
    if filters.since is not None:
        _since(filters.since)
    if not runs_dir.is_dir():
        raise ConfigError(f"runs directory {runs_dir} does not exist",
                          hint="give the directory `suite run --runs-dir` wrote to")
    ledger = Ledger(str(runs_dir))
    for path in sorted(p for p in runs_dir.iterdir() if p.is_dir()):
        if not any((path / name).exists() for name in _RUN_MARKERS):
            continue  # not a run directory (tune's probe cache, audit replays' parent)
        row, why = read_attempt(path)
        if row is None:
            ledger.skipped.append(Skipped(str(path), why))
        else:
            ledger.rows.append(row)
    ledger.rows.sort(key=lambda r: (r.time, r.run_id))
    for group in ledger.groups():
        _mark_best(group)
    ledger.rows = [row for row in ledger.rows if filters.matches(row)]
    return ledger


def read_attempt(run_dir: Path) -> tuple[Attempt | None, str]:
    """The attempt a run directory recorded, or None and why it cannot be read."""
    path = run_dir / "result.json"
    try:
        run = RunResult.load(path)
    except FileNotFoundError:
        return None, f"no result.json{_status_note(run_dir)}"
    except OSError as exc:
        return None, f"result.json is unreadable ({exc.strerror or exc})"
    except UnicodeDecodeError as exc:
        return None, f"result.json is not UTF-8 text ({exc.reason} at byte {exc.start})"
    except json.JSONDecodeError as exc:
        return None, (f"result.json is not valid JSON ({exc.msg}: line {exc.lineno}, "
                      f"column {exc.colno})")
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "top level"
        return None, (f"result.json does not match the result schema ({exc.error_count()} "
                      f"error(s); first: {where}: {first['msg']})")
    except ValueError as exc:  # schema_version, or a JSON value of the wrong shape
        return None, f"result.json: {str(exc).removeprefix(f'{path}: ')}"
    try:
        _when(run.created_utc)
    except ValueError:
        return None, f"result.json: created_utc {run.created_utc!r} is not an ISO time"
    config = _read_config(run_dir)
    return Attempt(
        run_id=run.run_id, run_dir=str(run_dir), time=run.created_utc,
        benchmark=run.benchmark, scenario=run.scenario, backend=run.backend, mode=run.mode,
        system=str(config.get("system", "")) if config else "", status=run.status.value,
        metric=metric_of(run), submittable=run.submittable,
        config_digest=config_digest(config) if config is not None else None), ""


def metric_of(run: RunResult) -> Metric | None:
    """The performance test's LoadGen metric, else the accuracy test's score."""
    for test in run.tests:
        perf = test.performance
        if perf is not None:
            known = perf.scenario in {s.value for s in Scenario}
            latency = SPECS[Scenario(perf.scenario)].is_latency if known else perf.unit == "ms"
            return Metric(perf.metric_name, perf.metric_value, perf.unit, not latency)
    for test in run.tests:
        if test.accuracy is not None:
            return Metric(test.accuracy.metric, test.accuracy.value, "%", True)
    return None


def config_digest(config: dict[str, Any]) -> str:
    """sha256 of the canonical config without ``DIGEST_EXCLUDED`` keys."""
    kept = {k: v for k, v in config.items() if k not in DIGEST_EXCLUDED}
    canonical = json.dumps(kept, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _read_config(run_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None  # no digest: the attempt stays in a group of its own
    return data if isinstance(data, dict) else None


def _status_note(run_dir: Path) -> str:
    try:
        text = (run_dir / "STATUS").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return " and no STATUS file"
    return f"; STATUS says: {text.splitlines()[0] if text else '(empty)'}"


def _mark_best(group: list[Attempt]) -> None:
    scored = [r for r in group if r.metric is not None and r.metric.value is not None]
    if not scored:
        return

    def rank(row: Attempt) -> tuple[bool, float, str, str]:
        assert row.metric is not None and row.metric.value is not None
        value = row.metric.value if row.metric.higher_is_better else -row.metric.value
        return row.status == Status.VALID.value, value, row.time, row.run_id

    max(scored, key=rank).best = True


def _status(text: str) -> str:
    try:
        return Status(text.upper()).value
    except ValueError:
        raise ConfigError(f"--status {text}: not a run status",
                          hint="one of " + ", ".join(s.value for s in Status)) from None


def _when(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _since(text: str) -> datetime:
    try:
        return _when(text)
    except ValueError:
        raise ConfigError(f"--since {text}: not an ISO date or time",
                          hint="e.g. 2026-11-22 or 2026-11-22T05:00:00Z") from None


def render(ledger: Ledger) -> Any:
    """A rich table, one section per digest group; ``*`` marks each group's best attempt.

    Each row starts with the run's path (relative to the current directory when it lies
    there), never folded, so it pastes into ``suite show``, ``diff``, ``report`` and
    ``check``; the run directory's name carries its start time, benchmark, scenario and
    mode (``--json`` has each as a field).
    """
    from rich import box
    from rich.table import Table
    from rich.text import Text

    # SIMPLE_HEAD drawn in ASCII: piped, rich swaps any box-drawing box for its full
    # ASCII grid ("|" between cells), which would glue the run path to its neighbours.
    simple_ascii = box.Box("    \n    \n -- \n    \n    \n    \n    \n    \n", ascii=True)
    table = Table(title=f"runs in {ledger.runs_dir}", box=simple_ascii, pad_edge=False,
                  show_edge=False, padding=(0, 0))
    # Short headers and cells: the table fits 100 columns beside a run path under ./runs
    # (issue 40, item 6: each metric cell took 7 lines at 100 columns). The path and the
    # status are never cut; a long backend name or metric folds onto a second line.
    # "*" marks each group's best attempt.
    table.add_column("*", no_wrap=True)
    table.add_column("run", no_wrap=True)
    longest_status = max((len(row.status) for row in ledger.rows), default=6)
    for column in ("backend", "status", "metric", "sub", "digest"):
        folds = column in ("backend", "metric")
        table.add_column(column, no_wrap=not folds, overflow="fold", min_width=None if folds
                         else {"status": longest_status, "sub": 3}.get(column, 7))
    styles = {"VALID": "green", "INVALID": "yellow", "FAILED": "red", "INTERRUPTED": "magenta"}
    for group in ledger.groups():
        for row in group:
            table.add_row("*" if row.best else "",
                          Text(shown_path(row.run_dir)), Text(row.backend),
                          Text(row.status, style=styles.get(row.status, "")),
                          Text(metric_text(row.metric)), "yes" if row.submittable else "no",
                          (row.config_digest or "(none)")[:7])
        table.add_section()
    return table


def shown_path(path: str) -> str:
    """``path`` relative to the current directory when it lies there (shorter, and it
    still works from here), else as it is."""
    relative = os.path.relpath(os.path.abspath(path))
    return relative if not relative.startswith(os.pardir) else path


def metric_text(metric: Metric | None) -> str:
    """``value unit`` with a short name where the unit does not say it (``p90 0.0563 ms``),
    or ``-``; ``--json`` has the full name."""
    if metric is None or metric.value is None:
        return "-"
    value = f"{metric.value:,.2f}" if abs(metric.value) >= 1 else f"{metric.value:.4g}"
    percentile = re.match(r"(\d+(?:\.\d+)?)th percentile", metric.name)
    name = f"p{percentile.group(1)} " if percentile else ""
    return f"{name}{value} {metric.unit}"


#: Beside each packaged result's evidence: every attempt of the same configuration key.
ATTEMPTS_NAME = "attempts.json"
ATTEMPTS_SCHEMA_VERSION = 1


def attempts_record(ledger: Ledger, run_id: str) -> dict[str, Any]:
    """What a bundle records for the packaged run ``run_id``: every ledger row with the
    same benchmark, scenario, mode, backend and system (the chosen one marked), and the
    run directories that could not be read (they may have been attempts too)."""
    chosen = next((row for row in ledger.rows if row.run_id == run_id), None)
    if chosen is None:
        raise ConfigError(f"run {run_id} is not in the ledger of {ledger.runs_dir}",
                          hint="`suite runs` names why a run directory cannot be read")

    def key(row: Attempt) -> tuple[str, ...]:
        return row.benchmark, row.scenario, row.mode, row.backend, row.system

    attempts = []
    for row in ledger.rows:
        if key(row) == key(chosen):
            entry = {k: v for k, v in asdict(row).items() if k != "run_dir"}
            attempts.append({**entry, "chosen": row.run_id == run_id})
    return {"schema_version": ATTEMPTS_SCHEMA_VERSION, "chosen": run_id,
            "key": dict(zip(("benchmark", "scenario", "mode", "backend", "system"),
                            key(chosen), strict=True)),
            "digest_excludes": list(DIGEST_EXCLUDED), "attempts": attempts,
            "unreadable": [{"run": Path(s.path).name, "why": s.why} for s in ledger.skipped]}
