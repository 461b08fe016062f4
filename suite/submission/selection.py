"""Which run ``suite package`` takes for each (benchmark, scenario), the figure it is
chosen and stated by, and which compliance attempt goes with it: every choice is made
from what the runs recorded, never from a default.

* **Candidates**: a ``--mode all`` run of the round being packaged that is valid,
  submittable and passes ``suite check`` as a run directory (``--unofficial`` keeps the
  others, each with its reasons). A ``result.json`` that records no division (schema 1)
  is refused, not read as closed; so is a run whose performance test recorded no figure:
  a missing metric is no candidate (as 0.0 it ranked best in latency scenarios).
* **The figure** is the one the predicate states: tokens/s for an LLM result in
  Offline, Server and Interactive (``LLM_RATE``), else the scenario's metric. Runs are
  ranked by it (higher tokens/s is better, whatever the scenario).
* **Compliance**: an attempt is evidence for a run only when it measured the same thing:
  the same benchmark, scenario and backend, the same model identity (sha256 and its
  division, the submitter's statements), and, for a served backend, the same
  servers (URLs, served model, the engine's name, version and weights location as it
  reported them) and the same options that change what the engine computes (``identity``).
  Attempts against another server are listed, never packaged. For each test, the newest
  attempt that *passed* (``compliance.passed`` in its record) goes into ``TESTxx/``; a
  test whose attempts all failed, or were all made elsewhere, makes the run no candidate,
  with a line naming the test and its newest attempt (``--unofficial`` packages the run
  without that test, so the checker reports it).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from suite.checker import check_path
from suite.config.rules import RuleSet
from suite.errors import SuiteError
from suite.results import PerformanceSummary, RunResult, Status
from suite.scenarios import SPECS, Scenario


@dataclass
class Candidate:
    run: RunResult
    run_dir: Path
    #: the figure the result is chosen and stated by (``metric`` names it)
    value: float
    passes: bool
    metric: str = ""
    higher_is_better: bool = True
    #: per compliance test: the attempt packaged (the newest passing one)
    compliance: dict[str, RunResult] = field(default_factory=dict)
    #: per compliance test: every attempt, oldest first
    attempts: dict[str, list[RunResult]] = field(default_factory=dict)


@dataclass
class Selection:
    chosen: dict[tuple[str, str], Candidate] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)


def select_runs(runs_dir: Path, rules: RuleSet, *, unofficial: bool,
                only: Sequence[str] = ()) -> Selection:
    """The best run per (benchmark, scenario), and why every other run was refused.

    ``only``: the run directories (names under ``runs_dir``) the user chose with ``--run``;
    then no other run is considered, and a name that is not there is an error."""
    selection = Selection()
    pool: dict[tuple[str, str], list[Candidate]] = {}
    run_dirs = sorted(p for p in runs_dir.iterdir() if p.is_dir()) if runs_dir.is_dir() else []
    if only:
        names = {p.name for p in run_dirs}
        missing = [name for name in only if Path(name).name not in names]
        if missing:
            raise SuiteError(f"--run {missing[0]}: no run directory of that name in {runs_dir}",
                             hint="`suite runs` lists the runs; give their names as shown")
        chosen = {Path(name).name for name in only}
        run_dirs = [p for p in run_dirs if p.name in chosen]
    for run_dir in run_dirs:
        why, candidate = _candidate(run_dir, rules, unofficial)
        if candidate is None:
            if why:
                selection.refused.append(f"{run_dir.name}: {why}")
            continue
        if why:
            selection.refused.append(f"{run_dir.name}: {why} (packaged anyway: --unofficial)")
        pool.setdefault((candidate.run.benchmark, candidate.run.scenario), []).append(candidate)
    for key, candidates in pool.items():
        # passing runs first, then the best stated figure, then the newest run
        selection.chosen[key] = max(candidates, key=lambda c: (
            c.passes, c.value if c.higher_is_better else -c.value, c.run.run_id))
    return selection


def _candidate(run_dir: Path, rules: RuleSet, unofficial: bool) -> tuple[str, Candidate | None]:
    path = run_dir / "result.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        run = RunResult.load(path)
    except (OSError, ValueError) as exc:
        return f"no usable result.json ({exc})", None
    if run.compliance is not None:
        return "", None  # not a candidate: packaged as its reference run's TESTxx/
    if not isinstance(raw, dict) or "division" not in raw:
        # schema 1 had no division; the loader's "closed" default is not a record
        return ("result.json records no division (an older record); packaging does not "
                "assume closed: re-run it"), None
    modes = {t.mode: t for t in run.tests}
    perf = modes.get("performance")
    if perf is None or "accuracy" not in modes:
        return "needs both a performance and an accuracy test (--mode all)", None
    if run.status in (Status.FAILED, Status.INTERRUPTED):
        return f"the run {run.status.value}", None
    if run.round != rules.round:
        return f"ran under round {run.round}, packaging {rules.round}", None
    try:
        metric, value, higher = stated_figure(run, perf.performance, rules)
    except SuiteError as exc:
        return str(exc), None
    reasons = [] if run.status is Status.VALID else [f"the run is {run.status.value}"]
    reasons += [r for r in run.non_submittable_reasons if r not in reasons]
    report = check_path(run_dir, rules)
    failed = sorted({f.rule for r in report.results for f in r.findings
                     if f.severity.value == "error"})
    if failed:
        reasons.append("fails " + ", ".join(failed))
    attempts, elsewhere = compliance_runs(run_dir, run)
    for test, others in sorted(elsewhere.items()):
        if test not in attempts:
            reasons.append(f"{test}: no attempt against this run's servers and config "
                           f"({len(others)} against others; the newest, {others[-1].run_id}: "
                           f"{identity_difference(run_dir, run, others[-1])})")
    chosen: dict[str, RunResult] = {}
    for test, runs in sorted(attempts.items()):
        passing = [r for r in runs if r.compliance is not None and r.compliance.passed]
        if passing:
            chosen[test] = passing[-1]
        else:
            reasons.append(f"{test}: no passing attempt ({len(runs)} failed; the newest is "
                           f"{runs[-1].run_id})")
    passes = not reasons
    if not passes and not unofficial:
        return "; ".join(reasons), None
    return "; ".join(reasons), Candidate(run, run_dir, value, passes, metric, higher,
                                         chosen, attempts)


def stated_figure(run: RunResult, perf: PerformanceSummary | None,
                  rules: RuleSet) -> tuple[str, float, bool]:
    """(name, value, higher is better) of the figure the result is stated by; a
    ``SuiteError`` naming what the performance test did not record."""
    if perf is None or perf.metric_value is None:
        name = perf.metric_name if perf is not None else "performance summary"
        raise SuiteError(f"the performance test recorded no {name}; a run without its "
                         "metric is no candidate")
    bench = rules.benchmark(run.benchmark)
    model = rules.models.get(bench.checker_model)
    scenario = tree_scenario(bench.loadgen_model, run.scenario)
    if ((model is not None and model.llm) or perf.tokens) and scenario in LLM_RATE:
        figure = llm_figure(scenario, perf.tokens)
        if figure is None:
            raise SuiteError(f"the performance test recorded no {LLM_RATE[scenario][1]}, the "
                             "figure an LLM result is stated by; no candidate")
        return figure[0], figure[1], True
    return perf.metric_name, perf.metric_value, not SPECS[Scenario(run.scenario)].is_latency


def compliance_runs(run_dir: Path, reference: RunResult
                    ) -> tuple[dict[str, list[RunResult]], dict[str, list[RunResult]]]:
    """(attempts, attempts elsewhere): compliance runs beside ``run_dir`` of
    ``reference``'s benchmark, scenario and backend, by test, oldest first, split by
    whether they measured the same thing (``identity``); those against exactly this
    reference come last (newest). Each one's ``run_dir`` is where it was found."""
    found: dict[str, list[RunResult]] = {}
    elsewhere: dict[str, list[RunResult]] = {}
    mine = identity(run_dir, reference)
    for path in sorted(run_dir.parent.glob("*/result.json")):
        try:
            other = RunResult.load(path)
        except (OSError, ValueError):
            continue
        comp = other.compliance
        if comp is None or (other.benchmark, other.scenario, other.backend) != (
                reference.benchmark, reference.scenario, reference.backend):
            continue
        same = identity(path.parent, other) == mine
        # Its evidence is read from where it was found (under the --runs-dir given), never
        # from the absolute path it recorded: a copied runs directory packages its own.
        (found if same else elsewhere).setdefault(comp.test, []).append(
            other.model_copy(update={"run_dir": str(path.parent)}))
    for runs in (*found.values(), *elsewhere.values()):
        runs.sort(key=lambda r: (r.compliance is not None
                                 and r.compliance.reference_run == str(run_dir), r.run_id))
    return found, elsewhere


#: Endpoint options that only move bytes: they change no token the engine computes.
_TRANSPORT = frozenset({"client_workers", "max_in_flight", "connect_timeout_s",
                        "first_byte_timeout_s", "total_timeout_s", "api_key_env"})
#: What an endpoint's record says about its servers.
_SERVER = ("urls", "model", "engine", "engine_version", "model_root", "api", "prompt_as",
           "token_source")


def identity(run_dir: Path, run: RunResult) -> dict[str, object]:
    """What a run measured, as its records say: the model (sha256, its source, division,
    the submitter's statements) and, for a served backend, its servers (as they reported
    themselves) and the options that change what they compute (from ``config.json``)."""
    details: dict[str, object] = {}
    options: dict[str, object] = {}
    test = run.tests[0] if run.tests else None
    if test is not None and test.backend.get("device") == "remote":
        recorded = test.backend.get("details", {})
        details = {k: recorded.get(k) for k in _SERVER}
        try:
            config = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
            options = {k: v for k, v in dict(config.get("backend_options") or {}).items()
                       if k not in _TRANSPORT}
        except (OSError, ValueError, TypeError, AttributeError):
            options = {"config.json": "unreadable"}  # never equal to a readable one
    return {"model_sha256": run.model_sha256, "division": run.division,
            "stated": {k: c.model_dump() for k, c in sorted(run.provenance.items())
                       if c.source == "stated by the submitter, not verified"},
            "servers": details, "options": options}


def identity_difference(run_dir: Path, run: RunResult, other: RunResult) -> str:
    """The first fields where ``other`` measured something else than ``run``."""
    mine, theirs = identity(run_dir, run), identity(Path(other.run_dir), other)
    keys = [k for k in mine if mine[k] != theirs[k]]
    parts = []
    for key in keys:
        a, b = mine[key], theirs[key]
        if isinstance(a, dict) and isinstance(b, dict):
            sub = [f"{key}.{k}: {b.get(k)!r} (this run {a.get(k)!r})"
                   for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
            parts += sub[:2]
        else:
            parts.append(f"{key}: {b!r} (this run {a!r})")
    return "; ".join(parts[:3]) or "differs"


def tree_scenario(loadgen_model: str, scenario: str) -> str:
    """The scenario directory: LoadGen runs Interactive as Server under a LoadGen model
    named ``*-interactive`` (``suite.llm.conf``); the tree names it ``Interactive``."""
    from suite.models import INTERACTIVE_SUFFIX

    scen = Scenario(scenario)
    if scen is Scenario.SERVER and loadgen_model.endswith(INTERACTIVE_SUFFIX):
        return "Interactive"
    return scen.loadgen_name


#: An LLM result's published figure per scenario directory: Offline's tokens/s, Server's and
#: Interactive's completed tokens/s (the official checker's LLM result fields).
LLM_RATE = {"Offline": ("tokens_per_second", "tokens/s"),
            "Server": ("completed_tokens_per_second", "completed tokens/s"),
            "Interactive": ("completed_tokens_per_second", "completed tokens/s")}


def llm_figure(scenario: str, tokens: dict[str, float]) -> tuple[str, float] | None:
    """(metric name, value) an LLM result is compared by; None without token metrics."""
    key, name = LLM_RATE.get(scenario, ("", ""))
    return (name, tokens[key]) if key in tokens else None


def refuse_if_empty(selection: Selection) -> None:
    if not selection.chosen:
        raise SuiteError("no run can be packaged:\n  " + "\n  ".join(
            selection.refused or ["runs/ holds no run directories"]),
            hint="run `suite run --mode all` without --quick, or pass --unofficial to test")
