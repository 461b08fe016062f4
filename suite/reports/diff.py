"""``diff_runs(a, b)``: what differs between two finished run directories.

Everything is read from what a run directory records, nothing is recomputed:

* ``config.json``: the resolved config and, per key, the layer it came from
  (``provenance``); keys whose *value* differs are listed with both sources, keys with
  the same value from another layer separately;
* ``result.json``: per test (matched by mode) the scenario metric, LoadGen's latency
  percentiles (copied there from the detail log), token metrics, accuracy and the
  backend's self-description; the round, the model's sha256 and division, the status;
* ``system.json``: the machine, key by key; and the dataset record (result.json's copy
  of ``dataset.json``).

A figure one side did not record (a FAILED test, an older result.json) is ``None``
with no delta: a missing record is never read as "unchanged". A failed or interrupted
test's figures are no measurement (see ``table``), so they are not compared either.

Example::

    diff = diff_runs(Path("runs/A"), Path("runs/B"))
    [change.key for change in diff.config]  # ['sut.workers']
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from suite.config.layers import flatten
from suite.errors import SuiteError
from suite.results import RunResult, Status, TestResult

#: Config keys that are not layered settings: set by the run's request (the CLI's
#: named arguments), so they have no provenance entry.
_REQUEST_KEYS = ("benchmark", "scenario", "mode", "backend", "round", "quick", "compliance",
                 "system", "runs_dir")
REQUEST_SOURCE = "the run request"
#: The source of a key one run's config.json does not hold (a suite version before the
#: key existed); its value reads None.
NOT_RECORDED = "not recorded"
#: Test statuses whose figures are a measurement (as in ``table``).
_MEASURED = (Status.VALID, Status.INVALID)


class RunDirError(SuiteError):
    """A run directory, or one of the records it must hold, is missing or unreadable."""


class _Frozen(BaseModel):
    # validators built at first use: a run imports models it never validates
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class ConfigChange(_Frozen):
    """One config key, its value in each run and the layer each value came from."""

    key: str
    a: Any
    b: Any
    source_a: str
    source_b: str


class Change(_Frozen):
    """One recorded field (system, dataset, backend, run identity) that differs."""

    key: str
    a: Any
    b: Any


class NumberDelta(_Frozen):
    """One figure in both runs; ``delta`` is b - a and ``relative`` (b - a) / |a|."""

    name: str
    unit: str
    a: float | None
    b: float | None
    delta: float | None
    relative: float | None


class TestDiff(_Frozen):
    """One LoadGen test (``performance``, ``accuracy``) of the two runs."""

    __test__ = False  # not a pytest class

    mode: str
    status_a: str | None
    status_b: str | None
    validity_a: str | None
    validity_b: str | None
    figures: list[NumberDelta]
    backend: list[Change]


class ModelRecord(_Frozen):
    """What a run recorded about its model file."""

    sha256: str
    #: ``data.model_path``; empty: the model card's reference model.
    path: str
    division: str


class RunDiff(_Frozen):
    """The differences between run ``a`` and run ``b`` (``b`` compared against ``a``)."""

    run_a: str
    run_b: str
    #: benchmark, scenario, mode, backend, status, submittable: the runs' identity.
    identity: list[Change]
    round_a: str
    round_b: str
    model_a: ModelRecord
    model_b: ModelRecord
    #: Config keys whose value differs.
    config: list[ConfigChange]
    #: Config keys with the same value from a different layer.
    sources: list[ConfigChange]
    system: list[Change]
    dataset: list[Change]
    tests: list[TestDiff]

    @property
    def round_changed(self) -> bool:
        return self.round_a != self.round_b

    @property
    def model_changed(self) -> bool:
        """The model file differs (its sha256), or another file was named."""
        return (self.model_a.sha256 != self.model_b.sha256
                or self.model_a.path != self.model_b.path)

    def to_json(self) -> str:
        """The diff as JSON, with ``round_changed`` and ``model_changed`` spelled out."""
        data = self.model_dump(mode="json")
        data["round_changed"] = self.round_changed
        data["model_changed"] = self.model_changed
        return json.dumps(data, indent=2) + "\n"


# -- reading a run directory -----------------------------------------------------------


def _missing(label: str, path: Path) -> str:
    return (f"run {label}: {path} is missing; a run without it was killed or is still "
            "running (see its STATUS)")


def _read_json(run_dir: Path, name: str, label: str) -> dict[str, Any]:
    path = run_dir / name
    if not run_dir.is_dir():
        raise RunDirError(f"run {label}: {run_dir} is not a run directory (it does not exist "
                          "or is a file); give a directory under runs/")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunDirError(_missing(label, path)) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunDirError(f"run {label}: cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise RunDirError(f"run {label}: {path} holds a JSON {type(data).__name__}, "
                          "not an object")
    return data


class _Run:
    """The records of one run directory that a diff reads."""

    def __init__(self, run_dir: Path, label: str) -> None:
        self.dir = run_dir
        self.config = _read_json(run_dir, "config.json", label)
        path = run_dir / "result.json"
        try:
            self.result = RunResult.load(path)
        except FileNotFoundError:
            raise RunDirError(_missing(label, path)) from None
        except ValidationError as exc:  # name the field, not pydantic's "1 validation error"
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"])
            raise RunDirError(f"run {label}: cannot read {path}: {where}: "
                              f"{error['msg']}") from None
        except (OSError, ValueError) as exc:
            raise RunDirError(f"run {label}: cannot read {path}: {exc}") from None
        self.system = _read_json(run_dir, "system.json", label)

    def settings(self) -> tuple[dict[str, Any], dict[str, str]]:
        """Every config key's value and its source (``backend.<name>.<option>`` too)."""
        config = self.config
        values = {key: config.get(key) for key in _REQUEST_KEYS if key in config}
        for section in ("loadgen", "sut", "data"):
            table = config.get(section)
            if isinstance(table, Mapping):
                values |= flatten(table, f"{section}.")
        options = config.get("backend_options")
        if isinstance(options, Mapping):
            values |= flatten(options, f"backend.{config.get('backend')}.")
        recorded = config.get("provenance")
        provenance = dict(recorded) if isinstance(recorded, Mapping) else {}
        sources = {key: REQUEST_SOURCE if key in _REQUEST_KEYS
                   else str(provenance.get(key, NOT_RECORDED)) for key in values}
        return values, sources

    def model(self) -> ModelRecord:
        data = self.config.get("data")
        path = data.get("model_path", "") if isinstance(data, Mapping) else ""
        return ModelRecord(sha256=self.result.model_sha256, path=str(path or ""),
                           division=self.result.division)


# -- comparing ---------------------------------------------------------------------------


def _changes(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Change]:
    """Keys of two flat records whose values differ (a key one side lacks reads None)."""
    keys = list(dict.fromkeys([*a, *b]))
    return [Change(key=k, a=a.get(k), b=b.get(k)) for k in keys if a.get(k) != b.get(k)]


def _config_changes(a: _Run, b: _Run) -> tuple[list[ConfigChange], list[ConfigChange]]:
    values_a, sources_a = a.settings()
    values_b, sources_b = b.settings()
    changed: list[ConfigChange] = []
    moved: list[ConfigChange] = []
    for key in dict.fromkeys([*values_a, *values_b]):
        entry = ConfigChange(key=key, a=values_a.get(key), b=values_b.get(key),
                             source_a=sources_a.get(key, NOT_RECORDED),
                             source_b=sources_b.get(key, NOT_RECORDED))
        if entry.a != entry.b:
            changed.append(entry)
        elif entry.source_a != entry.source_b:
            moved.append(entry)
    return changed, moved


def number_delta(name: str, unit: str, a: float | None, b: float | None) -> NumberDelta:
    """The absolute and relative change from ``a`` to ``b`` (None where either is)."""
    delta = b - a if a is not None and b is not None else None
    relative = delta / abs(a) if delta is not None and a else None
    return NumberDelta(name=name, unit=unit, a=a, b=b, delta=delta, relative=relative)


def percentile_name(key: str) -> str:
    """LoadGen's ``99.90_percentile`` is ``p99.9``; ``mean``, ``min``, ``max`` stay."""
    if key.endswith("_percentile"):
        number = key.removesuffix("_percentile")
        try:
            return f"p{float(number):g}"
        except ValueError:
            return key
    return key


def _figures(test: TestResult | None) -> dict[str, tuple[str, float]]:
    """A measured test's figures by name: (unit, value). Failed tests have none."""
    if test is None or test.status not in _MEASURED:
        return {}
    figures: dict[str, tuple[str, float]] = {}
    perf = test.performance
    if perf is not None:
        if perf.metric_value is not None and math.isfinite(perf.metric_value):
            figures[f"metric {perf.metric_name}"] = (perf.unit, perf.metric_value)
        for key, value in perf.latency_ns.items():
            figures[f"latency {percentile_name(key)}"] = ("ms", value / 1e6)
        for key, value in perf.tokens.items():
            unit = "ms" if key.endswith("_ns") else "tokens/s"
            scaled = value / 1e6 if key.endswith("_ns") else value
            figures[f"tokens {key.removesuffix('_ns')}"] = (unit, scaled)
        if perf.query_count is not None:
            figures["queries"] = ("queries", float(perf.query_count))
    acc = test.accuracy
    if acc is not None:
        figures[f"accuracy {acc.metric}"] = ("%", acc.value)
        for key, value in acc.details.items():
            figures[f"accuracy {key}"] = ("", value)
    return figures


def _test_diff(mode: str, a: TestResult | None, b: TestResult | None) -> TestDiff:
    fig_a, fig_b = _figures(a), _figures(b)
    figures = [number_delta(name, (fig_a.get(name) or fig_b[name])[0],
                            fig_a[name][1] if name in fig_a else None,
                            fig_b[name][1] if name in fig_b else None)
               for name in dict.fromkeys([*fig_a, *fig_b])]

    def validity(test: TestResult | None) -> str | None:
        return test.performance.result_validity if test and test.performance else None

    # a test only one run has: its backend record is no difference, only its absence
    backend = _changes(flatten(a.backend), flatten(b.backend)) if a and b else []
    return TestDiff(mode=mode, status_a=a.status.value if a else None,
                    status_b=b.status.value if b else None,
                    validity_a=validity(a), validity_b=validity(b), figures=figures,
                    backend=backend)


def _identity(a: RunResult, b: RunResult) -> list[Change]:
    def record(result: RunResult) -> dict[str, Any]:
        return {"benchmark": result.benchmark, "scenario": result.scenario,
                "mode": result.mode, "backend": result.backend,
                "status": result.status.value, "submittable": result.submittable}

    return _changes(record(a), record(b))


def diff_runs(a: Path, b: Path) -> RunDiff:
    """Compare run directory ``b`` against ``a``; ``RunDirError`` names a missing record."""
    run_a, run_b = _Run(a, "A"), _Run(b, "B")
    tests_a = {test.mode: test for test in run_a.result.tests}
    tests_b = {test.mode: test for test in run_b.result.tests}
    config, sources = _config_changes(run_a, run_b)
    return RunDiff(
        run_a=str(a), run_b=str(b),
        identity=_identity(run_a.result, run_b.result),
        round_a=run_a.result.round, round_b=run_b.result.round,
        model_a=run_a.model(), model_b=run_b.model(),
        config=config, sources=sources,
        system=_changes(flatten(run_a.system), flatten(run_b.system)),
        dataset=_changes(flatten(run_a.result.dataset), flatten(run_b.result.dataset)),
        tests=[_test_diff(mode, tests_a.get(mode), tests_b.get(mode))
               for mode in dict.fromkeys([*tests_a, *tests_b])],
    )
