"""The six audit steps (see the package docstring). Nothing here trusts a byte of the
bundle before step 1 has verified its signature with the auditor's public key.

LLM results (text-generation cards) are audited by their own records: step 3 recomputes
ROUGE and tokens per sample from the full accuracy log against the card's dataset, and a
replay compares the tokens/s the predicate claims (Offline: tokens/s; Server and
Interactive: completed tokens/s) and reports the replay's TTFT/TPOT p99.
"""

from __future__ import annotations

import hashlib
import json
import random
import tarfile
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from suite.audit.accuracy_step import accuracy_step
from suite.audit.inputs import AuditData
from suite.audit.report import AuditReport
from suite.audit.served import engine_differs, served_weights
from suite.audit.system_step import provenance_step, system_step
from suite.backends import BUILTIN
from suite.errors import SuiteError
from suite.harness.run import StageCallbacks
from suite.harness.runner import StageCallback
from suite.paths import Paths
from suite.results import Status
from suite.submission.bundle.archive import ENVELOPE_NAME, _unsafe, copy_bundle
from suite.submission.bundle.keys import load_public
from suite.submission.bundle.verify import verify_bundle

Say = Callable[[str], None]


def audit(bundle: Path, public_key: Path, paths: Paths, work_dir: Path, runs_dir: Path,
          rerun: str | None = None, tolerance: float = 0.02, say: Say = lambda m: None,
          allow_backends: frozenset[str] = frozenset(), inputs: AuditData | None = None
          ) -> AuditReport:
    """Run the audit; ``work_dir`` receives a private copy of the bundle and the
    extracted tree (it must be empty). ``inputs``: the auditor's copies of a round LLM's
    dataset file and model directory. Every failure is a failed check, except a file that
    cannot be a bundle at all (not gzip, over ``MAX_BUNDLE_BYTES``): a ``BundleError``."""
    inputs = inputs or AuditData()
    work_dir.mkdir(parents=True, exist_ok=True)
    # One capped read of the bundle (a file or a pipe); every later step reads this
    # private copy only, and the extraction re-hashes each file against the digests that
    # verification returned. What cannot be a bundle at all is a BundleError, as in verify.
    private = work_dir / "bundle.tar.gz"
    report = AuditReport(bundle=str(bundle), bundle_sha256=copy_bundle(bundle, private))
    with step(report, 1, "signature and file list"):
        verification = verify_bundle(private, load_public(public_key))
        evidence = [f"{verification.files} files"] + verification.problems + [
            f"changed: {n}" for n in verification.changed] + [
            f"added: {n}" for n in verification.added] + [
            f"removed: {n}" for n in verification.removed]
        report.add(1, "signature and file list", verification.ok, evidence,
                   "signature valid" if verification.signature_ok else "signature INVALID")
    if not report.checks or not report.checks[-1].passed:
        report.stopped_at = 1
        return report
    predicate = verification.predicate
    report.unofficial = bool(predicate.get("unofficial"))
    with step(report, 1, "extraction of the signed files"):
        tree = _extract(private, verification.subjects, work_dir / "tree")
    if not report.checks[-1].passed:
        report.stopped_at = 1
        return report
    raw_results = predicate.get("results", [])
    results: list[dict[str, Any]] = [r for r in raw_results if isinstance(r, dict)] \
        if isinstance(raw_results, list) else []
    say("step 2: suite check")
    with step(report, 2, "suite check on the tree"):
        _check_tree(report, tree, paths, predicate)
    say("step 3: recomputing accuracy")
    for claim in results:
        with step(report, 3, f"accuracy of {claim.get('result')}"):
            _accuracy(report, tree, paths, claim, inputs)
    chosen: list[dict[str, Any]] = []
    with step(report, 4, "choice of results to replay"):
        chosen = _choose(results, rerun, report.bundle_sha256)
    for index, claim in enumerate(chosen, 1):
        # A replay is a whole LoadGen run (minutes for a full-length one): say which of
        # how many, each test and each setup stage as it starts, and how long it took.
        what = f"{claim['result']} ({index} of {len(chosen)})"
        say(f"step 4: replaying {what}")
        replay = None
        report.reran.append(claim["result"])
        started = time.monotonic()
        with step(report, 4, f"replay of {claim['result']}"):
            replay = _replay(report, tree, paths, claim, runs_dir, tolerance, allow_backends,
                             inputs, _stages(say, claim["result"]))
        say(f"step 4: {what} done in {time.monotonic() - started:.0f} s: "
            f"{report.checks[-1].found or '-'}")
        if replay is not None:
            say(f"step 5: compliance tests for {what}")
            started = time.monotonic()
            with step(report, 5, f"compliance tests of {claim['result']}"):
                _compliance(report, tree, paths, claim, replay, runs_dir, inputs,
                            _stages(say, claim["result"]))
            say(f"step 5: {what} done in {time.monotonic() - started:.0f} s")
    if not chosen and not rerun:
        report.add(4, "replay on this machine", True, ["not requested (--rerun)"], "skipped")
    if not any(c.step == 5 for c in report.checks):  # the steps are numbered without gaps
        report.add(5, "compliance tests on this machine", True,
                   ["not run: they run after a replay, and no result was replayed"],
                   "skipped")
    with step(report, 6, "system description"):
        system_step(report, tree)
    with step(report, 6, "provenance of the claims"):
        provenance_step(report, tree)
    return report


def _stages(say: Say, result: str) -> StageCallbacks:
    """The run's stage callbacks, said as the audit's progress: ``  RESULT: performance
    test: loading model (3 s)``."""
    started = time.monotonic()

    def for_test(test: str) -> StageCallback:
        say(f"  {result}: {test} test")
        return lambda stage: say(f"  {result}: {test} test: {stage} "
                                 f"({time.monotonic() - started:.0f} s)")
    return for_test


@contextmanager
def step(report: AuditReport, number: int, name: str) -> Iterator[None]:
    """Turn any failure inside one step into a failed check of that step.

    A ``SuiteError`` is the bundle's (or this machine's) problem and says so in one
    line; anything else is the audit's own bug: reported as an internal error with its
    traceback in the evidence, never as a verdict on the bundle.
    """
    try:
        yield
    except SuiteError as exc:
        hint = f" ({exc.hint})" if exc.hint else ""
        report.add(number, name, False, [f"{exc}{hint}"], "error")
    except Exception as exc:  # the audit's own defect: recorded with its traceback
        report.add(number, name, False, [
            f"internal error of the audit (not a verdict on the bundle): "
            f"{type(exc).__name__}: {exc}", *traceback.format_exc().splitlines()[-12:]],
            "internal error")


def _extract(bundle: Path, digests: dict[str, str], dest: Path) -> Path:
    """Write each signed regular member, re-hashing it against the signed digest."""
    dest.mkdir(parents=True, exist_ok=True)
    written: set[str] = set()
    with tarfile.open(bundle, "r:*") as tar:
        for member in tar:
            if member.name == ENVELOPE_NAME or not member.isreg() or _unsafe(member.name):
                continue
            handle = tar.extractfile(member)
            if handle is None or member.name not in digests:
                continue
            data = handle.read()
            if hashlib.sha256(data).hexdigest() != digests[member.name]:
                raise SuiteError(f"{member.name} changed while the bundle was being read")
            target = dest / member.name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            written.add(member.name)
    missing = sorted(set(digests) - written)
    if missing:
        raise SuiteError(f"{len(missing)} signed file(s) could not be extracted: "
                         + ", ".join(missing[:5]))
    return dest


def _check_tree(report: AuditReport, tree: Path, paths: Paths,
                predicate: dict[str, Any]) -> None:
    """The re-check must pass; an UNOFFICIAL bundle passes this step only if the re-check
    finds exactly the rule failures the bundle itself declared for each result."""
    from suite.checker.walk import check_path
    from suite.config.rules import load_rules

    rules = load_rules(paths, str(predicate.get("round", "")))
    checked = check_path(tree, rules)
    found = {r.id: sorted({f.rule for f in r.findings if f.severity.value == "error"})
             for r in checked.results}
    declared = {r["result"]: sorted(r.get("failed_rules", []))
                for r in predicate.get("results", [])}
    evidence = [f"round {rules.round}: {checked.summary.valid_results}/"
                f"{checked.summary.results} results valid, {checked.summary.errors} error(s)"]
    evidence += [f"{f.rule} {f.file}: {f.message}" for r in checked.results for f in r.findings
                 if f.severity.value == "error"][:10]
    passed = checked.passed
    if not passed and predicate.get("unofficial"):
        agree = all(found.get(result, []) == rules_ for result, rules_ in declared.items())
        evidence.insert(0, "UNOFFICIAL bundle: it declares its own rule failures; the re-check "
                        + ("reproduces them exactly" if agree else
                           f"disagrees: declared {declared}, found {found}"))
        passed = agree
    # A pass of a tree with errors: an UNOFFICIAL bundle's declared failures, counted.
    known = checked.summary.errors if passed and not checked.passed else 0
    report.add(2, "suite check on the tree", passed, evidence,
               f"{checked.summary.errors} error(s)", known_errors=known)


def _run_info(tree: Path, result: str) -> dict[str, Any]:
    path = tree / "evidence" / result / "run.json"
    if not path.is_file():
        raise SuiteError(f"the bundle has no evidence for {result} ({path.name} missing)")
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise SuiteError(f"evidence/{result}/run.json is unreadable: {exc}") from None
    needed = ("benchmark", "scenario", "backend", "round", "model_sha256", "config")
    if not isinstance(info, dict) or any(key not in info for key in needed):
        raise SuiteError(f"evidence/{result}/run.json lacks one of {', '.join(needed)}")
    return info


def _accuracy(report: AuditReport, tree: Path, paths: Paths, claim: dict[str, Any],
              data: AuditData) -> None:
    """Step 3 for one result: its kind's recomputation (``accuracy_step``)."""
    result = claim["result"]
    try:
        info = _run_info(tree, result)
    except (OSError, KeyError, ValueError, SuiteError) as exc:
        report.add(3, f"accuracy of {result}", False, [f"cannot recompute: {exc}"], result)
        return
    accuracy_step(report, tree, paths, claim, info, data)


def _choose(results: list[dict[str, Any]], rerun: str | None, seed: str) -> list[dict[str, Any]]:
    if not rerun:
        return []
    if rerun == "all":
        return results
    if rerun.startswith("random"):
        try:
            count = int(rerun.split()[1])
        except (IndexError, ValueError):
            raise SuiteError(f"--rerun '{rerun}': expected 'random N'") from None
        # Seeded by the bundle's hash: another auditor can reproduce the choice.
        return random.Random(seed).sample(results, min(count, len(results)))
    chosen = []
    for wanted in (w.strip() for w in rerun.split(",") if w.strip()):
        matches = [r for r in results if r["result"] == wanted or r["result"].endswith(
            "/" + wanted)]
        if len(matches) != 1:
            known = ", ".join(r["result"] for r in results)
            raise SuiteError(f"--rerun: '{wanted}' matches {len(matches)} results",
                             hint=f"results in this bundle: {known}")
        chosen += matches
    return chosen


def _replay_request(info: dict[str, Any], runs_dir: Path, data: AuditData,
                    **extra: Any) -> Any:
    from suite.config.loader import ConfigRequest

    config = info["config"]
    sets = [f"loadgen.{k}={json.dumps(v)}" for k, v in config["loadgen"].items()]
    sets += [f"sut.{k}={json.dumps(v)}" for k, v in config["sut"].items()]
    sets += [f"backend.{config['backend']}.{k}={json.dumps(v)}"
             for k, v in config["backend_options"].items()]
    return ConfigRequest(benchmark=info["benchmark"], scenario=info["scenario"],
                         backend=info["backend"], round=info["round"], quick=config["quick"],
                         sets=sets, runs_dir=runs_dir, use_tuned=False, flags=data.flags(),
                         **extra)


def _replay(report: AuditReport, tree: Path, paths: Paths, claim: dict[str, Any],
            runs_dir: Path, tolerance: float, allow_backends: frozenset[str],
            data: AuditData, stages: StageCallbacks | None = None) -> Path | None:
    from suite.harness.kinds import for_benchmark
    from suite.harness.run import run
    from suite.scenarios import SPECS, Scenario
    from suite.submission.package import llm_figure

    result = claim["result"]
    info = _run_info(tree, result)
    backend = str(info["backend"])
    if backend not in BUILTIN and backend not in allow_backends:
        # A replay imports the backend's module: code the bundle names, not the auditor.
        report.add(4, f"replay of {result}", False, [
            f"refused: the bundle's backend '{backend}' is not one of the suite's own; a "
            "replay would import and run its code", "read it, then allow it with "
            f"--allow-backend {backend}"], "refused")
        return None
    strategy = for_benchmark(paths, str(info["benchmark"]))
    claims: dict[str, Any] = info.get("provenance") or {}
    # a remote engine's weights cannot be hashed here: no local file stands in for them
    served, weight_lines = served_weights(claims)
    if not served:
        try:
            local_sha = strategy.local_model_digest(paths, str(info["benchmark"]))
        except SuiteError as exc:
            local_sha = f"unusable ({exc})"
        if local_sha != info["model_sha256"]:
            report.add(4, f"replay of {result}", False, [
                f"refused: the local model ({local_sha}) differs from the bundle's "
                f"({info['model_sha256']}); a replay would measure another computation"],
                "refused")
            return None
    replay = run(_replay_request(info, runs_dir, data, mode="all"), on_stage=stages)
    if served:
        differ = engine_differs(claims, replay.provenance)
        if differ:
            report.add(4, f"replay of {result}", False, [
                *weight_lines, *differ, f"replay run: {replay.run_dir}"], "another engine")
            return None
    test = next((t for t in replay.tests if t.mode == "performance"), None)
    perf = test.performance if test else None
    measured = perf.metric_value if perf else None
    unit = perf.unit if perf else ""
    token_lines: list[str] = []
    if perf is not None and perf.tokens:  # an LLM claim is its tokens/s: the same figure
        figure = llm_figure(str(claim.get("scenario")), perf.tokens) if perf else None
        measured, unit = (figure[1], figure[0]) if figure else (None, "")
        tokens = perf.tokens if perf else {}
        token_lines = [f"replay {name} p99 {tokens[key] / 1e6:.2f} ms"
                       for key, name in (("ttft_p99_ns", "TTFT"), ("tpot_p99_ns", "TPOT"))
                       if key in tokens]
    claimed = claim.get("value")
    latency = SPECS[Scenario(info["scenario"])].is_latency
    if measured is None or claimed is None or test is None:
        report.add(4, f"replay of {result}", False,
                   [f"no metric to compare (replay {replay.run_dir}: {replay.status.value})"])
        return None
    claimed_validity = _claimed_validity(tree, result)
    if test.status is not Status.VALID and claimed_validity != "INVALID":
        # a ratio of an INVALID replay says nothing: LoadGen did not accept the run
        report.add(4, f"replay of {result}", False, [
            f"the replay is {test.status.value}, the bundle's log says {claimed_validity}; "
            "only a VALID replay can confirm a claim",
            f"replay run: {replay.run_dir} ({replay.status.value})"], test.status.value)
        return None
    ratio = measured / float(claimed)
    ok = ratio <= 1 + tolerance if latency else ratio >= 1 - tolerance
    bound = f"<= {1 + tolerance:.2f}" if latency else f">= {1 - tolerance:.2f}"
    report.add(4, f"replay of {result}", ok, [
        f"claimed {claimed}, replayed {measured:.6g} ({unit}); "
        f"replay / claim = {ratio:.4f}, allowed {bound} (tolerance {tolerance:.0%})",
        *token_lines, *weight_lines, f"replay run: {replay.run_dir} ({replay.status.value})",
        *([f"the replay is {test.status.value} and so is the signed claim: compared as-is"]
          if test.status is not Status.VALID else [])], f"{ratio:.4f}")
    return Path(replay.run_dir)


def _claimed_validity(tree: Path, result: str) -> str:
    """LoadGen's ``result_validity`` in the signed performance log ("missing" if none)."""
    from suite.checker.context import read_detail_log

    log = read_detail_log(tree / result / "performance/run_1/mlperf_log_detail.txt")
    value = log.get("result_validity") if log is not None else None
    return str(value) if value is not None else "missing"


def _compliance(report: AuditReport, tree: Path, paths: Paths, claim: dict[str, Any],
                replay: Path, runs_dir: Path, data: AuditData,
                stages: StageCallbacks | None = None) -> None:
    from suite.config.rules import load_rules
    from suite.harness.run import run

    info = _run_info(tree, claim["result"])
    tests = load_rules(paths, info["round"]).benchmark(info["benchmark"]).compliance_tests
    for test in tests:
        outcome = run(_replay_request(info, runs_dir, data, compliance=test,
                                      reference=replay), on_stage=stages)
        comp = outcome.compliance
        passed = comp is not None and comp.passed
        verdicts = ", ".join(f"{k}: {v}" for k, v in comp.verdicts.items()) if comp else (
            f"not verified ({outcome.status.value})")
        report.add(5, f"{test} of {claim['result']}", passed,
                   [verdicts, f"run: {outcome.run_dir}"], "TEST PASS" if passed else "TEST FAIL")
