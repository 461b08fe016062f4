"""The six audit steps (see the package docstring). Nothing here trusts a byte of the
bundle before step 1 has verified its signature with the auditor's public key."""

from __future__ import annotations

import hashlib
import json
import random
import re
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..bundle.archive import ENVELOPE_NAME, _unsafe
from ..bundle.keys import load_public
from ..bundle.verify import verify_bundle
from ..errors import SuiteError
from ..paths import Paths
from .report import AuditReport

Say = Callable[[str], None]
_ACC = re.compile(r"^accuracy=([\d.]+)%")
_HASH = re.compile(r"^hash=([0-9a-f]{64})$")


def audit(bundle: Path, public_key: Path, paths: Paths, work_dir: Path, runs_dir: Path,
          rerun: str | None = None, tolerance: float = 0.02, say: Say = lambda m: None,
          ) -> AuditReport:
    """Run the audit; ``work_dir`` receives the extracted tree (it must be empty)."""
    digest = hashlib.sha256(bundle.read_bytes()).hexdigest()
    report = AuditReport(str(bundle), digest)
    verification = verify_bundle(bundle, load_public(public_key))
    evidence = [f"{verification.files} files"] + verification.problems + [
        f"changed: {n}" for n in verification.changed] + [
        f"added: {n}" for n in verification.added] + [
        f"removed: {n}" for n in verification.removed]
    report.add(1, "signature and file list", verification.ok, evidence,
               "signature valid" if verification.signature_ok else "signature INVALID")
    if not verification.ok:
        report.stopped_at = 1
        return report
    signed = json.loads(_envelope_payload(bundle))["subject"]
    digests = {s["name"]: s["digest"]["sha256"] for s in signed}
    tree = _extract(bundle, digests, work_dir)
    predicate = verification.predicate
    results: list[dict[str, Any]] = list(predicate.get("results", []))
    say("step 2: suite check")
    _check_tree(report, tree, paths, predicate)
    say("step 3: recomputing accuracy")
    for claim in results:
        _accuracy(report, tree, paths, claim)
    chosen = _choose(results, rerun, digest)
    for claim in chosen:
        say(f"step 4: replaying {claim['result']}")
        replay = _replay(report, tree, paths, claim, runs_dir, tolerance)
        report.reran.append(claim["result"])
        if replay is not None:
            say(f"step 5: compliance tests for {claim['result']}")
            _compliance(report, tree, paths, claim, replay, runs_dir)
    if not chosen:
        report.add(4, "replay on this machine", True, ["not requested (--rerun)"], "skipped")
    _system(report, tree)
    return report


def _envelope_payload(bundle: Path) -> bytes:
    import base64

    with tarfile.open(bundle, "r:*") as tar:
        member = tar.getmember(ENVELOPE_NAME)
        handle = tar.extractfile(member)
        assert handle is not None
        envelope = json.loads(handle.read(16 << 20))
    return base64.b64decode(envelope["payload"])


def _extract(bundle: Path, digests: dict[str, str], dest: Path) -> Path:
    """Write each signed regular member, re-hashing it against the signed digest."""
    dest.mkdir(parents=True, exist_ok=True)
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
    return dest


def _check_tree(report: AuditReport, tree: Path, paths: Paths,
                predicate: dict[str, Any]) -> None:
    """The re-check must pass; an UNOFFICIAL bundle passes this step only if the re-check
    finds exactly the rule failures the bundle itself declared for each result."""
    from ..checker.walk import check_path
    from ..rules import load_rules

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
    report.add(2, "suite check on the tree", passed, evidence,
               f"{checked.summary.errors} error(s)")


def _run_info(tree: Path, result: str) -> dict[str, Any]:
    path = tree / "evidence" / result / "run.json"
    if not path.is_file():
        raise SuiteError(f"the bundle has no evidence for {result} ({path.name} missing)")
    info: dict[str, Any] = json.loads(path.read_text())
    return info


def _accuracy(report: AuditReport, tree: Path, paths: Paths, claim: dict[str, Any]) -> None:
    from .. import datasets
    from ..accuracy import decode_accuracy_log
    from ..models import load_card
    from ..postprocess import make_postprocess

    result = claim["result"]
    try:
        info = _run_info(tree, result)
        log = tree / "evidence" / result / "mlperf_log_accuracy.json"
        lines = (tree / result / "accuracy" / "accuracy.txt").read_text().splitlines()
        stated = next(float(m.group(1)) for line in lines if (m := _ACC.match(line)))
        stated_hash = next(m.group(1) for line in lines if (m := _HASH.match(line.strip())))
        card = load_card(paths, info["benchmark"])
        labels = datasets.create(card).labels
        _, dtype = make_postprocess(card)
        predictions = decode_accuracy_log(log, dtype, len(labels))
    except (OSError, StopIteration, KeyError, ValueError, SuiteError) as exc:
        report.add(3, f"accuracy of {result}", False, [f"cannot recompute: {exc}"], result)
        return
    good = int(np.sum(predictions == labels))
    value = round(100.0 * good / len(labels), 3)
    actual_hash = hashlib.sha256(log.read_bytes()).hexdigest()
    claimed = claim.get("accuracy")
    problems = []
    if actual_hash != stated_hash:
        problems.append(f"accuracy log sha256 {actual_hash} != accuracy.txt hash {stated_hash}")
    if abs(value - stated) > 0.0005:
        problems.append(f"recomputed {value:.3f}% != accuracy.txt {stated:.3f}%")
    if claimed is None or abs(value - float(claimed)) > 0.0005:
        problems.append(f"recomputed {value:.3f}% != signed claim {claimed}")
    evidence = [f"recomputed top-1 {value:.3f}% ({good}/{len(labels)}) from the full log",
                f"accuracy.txt says {stated:.3f}%, the signed claim {claimed}", *problems]
    report.add(3, f"accuracy of {result}", not problems, evidence, f"{value:.3f}%")


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


def _replay_request(info: dict[str, Any], runs_dir: Path, **extra: Any) -> Any:
    from ..config import ConfigRequest

    config = info["config"]
    sets = [f"loadgen.{k}={json.dumps(v)}" for k, v in config["loadgen"].items()]
    sets += [f"sut.{k}={json.dumps(v)}" for k, v in config["sut"].items()]
    sets += [f"backend.{config['backend']}.{k}={json.dumps(v)}"
             for k, v in config["backend_options"].items()]
    return ConfigRequest(benchmark=info["benchmark"], scenario=info["scenario"],
                         backend=info["backend"], round=info["round"], quick=config["quick"],
                         sets=sets, runs_dir=runs_dir, use_tuned=False, **extra)


def _replay(report: AuditReport, tree: Path, paths: Paths, claim: dict[str, Any],
            runs_dir: Path, tolerance: float) -> Path | None:
    from ..api import run
    from ..models import load_card, verify_model_file
    from ..scenarios import SPECS, Scenario

    result = claim["result"]
    info = _run_info(tree, result)
    try:
        local_sha = verify_model_file(load_card(paths, info["benchmark"]))
    except SuiteError as exc:
        local_sha = f"unusable ({exc})"
    if local_sha != info["model_sha256"]:
        report.add(4, f"replay of {result}", False, [
            f"refused: the local model ({local_sha}) differs from the bundle's "
            f"({info['model_sha256']}); a replay would measure another computation"],
            "refused")
        return None
    replay = run(_replay_request(info, runs_dir, mode="all"))
    perf = next((t.performance for t in replay.tests if t.mode == "performance"), None)
    measured = perf.metric_value if perf else None
    claimed = claim.get("value")
    latency = SPECS[Scenario(info["scenario"])].is_latency
    if measured is None or claimed is None:
        report.add(4, f"replay of {result}", False,
                   [f"no metric to compare (replay {replay.run_dir}: {replay.status.value})"])
        return None
    ratio = measured / float(claimed)
    ok = ratio <= 1 + tolerance if latency else ratio >= 1 - tolerance
    bound = f"<= {1 + tolerance:.2f}" if latency else f">= {1 - tolerance:.2f}"
    report.add(4, f"replay of {result}", ok, [
        f"claimed {claimed}, replayed {measured:.6g} ({perf.unit if perf else ''}); "
        f"replay / claim = {ratio:.4f}, allowed {bound} (tolerance {tolerance:.0%})",
        f"replay run: {replay.run_dir} ({replay.status.value})"], f"{ratio:.4f}")
    return Path(replay.run_dir)


def _compliance(report: AuditReport, tree: Path, paths: Paths, claim: dict[str, Any],
                replay: Path, runs_dir: Path) -> None:
    from ..api import run
    from ..rules import load_rules

    info = _run_info(tree, claim["result"])
    tests = load_rules(paths, info["round"]).benchmark(info["benchmark"]).compliance_tests
    for test in tests:
        outcome = run(_replay_request(info, runs_dir, compliance=test, reference=replay))
        comp = outcome.compliance
        passed = comp is not None and comp.passed
        verdicts = ", ".join(f"{k}: {v}" for k, v in comp.verdicts.items()) if comp else (
            f"not verified ({outcome.status.value})")
        report.add(5, f"{test} of {claim['result']}", passed,
                   [verdicts, f"run: {outcome.run_dir}"], "TEST PASS" if passed else "TEST FAIL")


_HARDWARE = ("host_processor_model_name", "host_processor_core_count", "host_memory_capacity",
             "accelerators_per_node", "accelerator_model_name")


def _system(report: AuditReport, tree: Path) -> None:
    from ..system_description import probe

    systems = sorted(tree.glob("*/*/systems/*.json"))
    if not systems:
        report.add(6, "system description", False, ["the bundle has no systems/*.json"])
        return
    described = json.loads(systems[0].read_text())
    here = probe()
    differences = [f"{key}: bundle '{described.get(key)}', this machine '{here.get(key)}'"
                   for key in _HARDWARE
                   if str(described.get(key, "")).strip() not in ("", str(here.get(key, "")))]
    report.add(6, f"system vs {systems[0].name}", not differences,
               differences or [f"{key}: {here.get(key)}" for key in _HARDWARE],
               f"{len(differences)} difference(s)")
