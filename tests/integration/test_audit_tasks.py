"""``suite audit`` step 3 on task cards (issue 38): a packaged bert and yolo stand-in
bundle (``--unofficial``: a stand-in is never a result; the open division, as its run
records) is re-scored from its full accuracy logs by each card's task, with the stand-in
written again in the auditor's own cache; a tampered accuracy log is caught, with its
``hash=`` line left as it was and with the line forged to match. Real LoadGen runs, real
Ed25519 signatures. The two runs are the session's Offline stand-in runs of bert and yolo
(``tests/support/stand_in_runs.py``, asserted VALID and scored in ``test_task_torch.py``),
copied into a runs directory of their own."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.stand_in_runs import StandInRun, copy_into
from tests.support.submission_fixtures import SYSTEM_TOML

PASS = {"SUITE_KEY_PASSPHRASE": "audit-test-passphrase"}
RUNS = (("bert-99", "v6.1"), ("yolo-95", "v6.1"))


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory,
           stand_in_offline: Callable[[str, str], StandInRun]) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("audit_tasks")
    keys, out = base / "keys", base / "submissions"
    made = [stand_in_offline(round_name, benchmark) for benchmark, round_name in RUNS]
    for run in made:
        assert run.done.returncode == 0, run.done.stdout[-2000:] + run.done.stderr[-2000:]
    runs = copy_into(base / "runs", *made)
    assert run_cli("keygen", "--out", str(keys), **PASS).returncode == 0
    (base / "system.toml").write_text(SYSTEM_TOML)
    proc = run_cli("package", "--submitter", "Acme", "--system", "box1", "--unofficial",
                   "--division", "open", "--round", "v6.1", "--runs-dir", str(runs),
                   "--out-dir", str(out), "--key", str(keys / "signing.key"),
                   "--system-config", str(base / "system.toml"), **PASS)
    assert proc.returncode in (0, 2), proc.stdout[-2000:] + proc.stderr[-2000:]
    [tarball] = list(out.glob("*.tar.gz"))
    return {"bundle": tarball, "tree": out / tarball.name.removesuffix(".tar.gz"),
            "pub": keys / "signing.pub", "key": keys / "signing.key"}


def _audit(bundle: Path, pub: Path, tmp: Path, **env: str) -> dict:
    report = tmp / "audit.json"
    proc = run_cli("audit", str(bundle), "--key", str(pub), "--out", str(report),
                   "--runs-dir", str(tmp / "audit_runs"), timeout=600, **env)
    assert report.is_file(), proc.stdout[-2000:] + proc.stderr[-2000:]
    loaded: dict = json.loads(report.read_text())
    return loaded


def _step3(report: dict) -> dict[str, dict]:
    return {c["name"]: c for c in report["checks"] if c["step"] == 3}


def test_a_stand_in_bundle_is_re_scored_by_each_task(bundle: dict[str, Path], tmp_path: Path,
                                                     suite_home: Path) -> None:
    # SUITE_HOME: an empty cache, so the audit writes each stand-in again from its seed
    report = _audit(bundle["bundle"], bundle["pub"], tmp_path, SUITE_HOME=str(suite_home))
    checks = _step3(report)
    assert len(checks) == 2, checks
    for name, check in checks.items():
        assert check["passed"], (name, check["evidence"])
        task = "question-answering" if "bert" in name else "object-detection-yolo"
        assert f"by task '{task}'" in check["evidence"][0]
        assert "the stand-in, written again" in check["evidence"][0]
    assert (suite_home / "cache" / "stand-ins" / "bert-seed0" / "stand_in.json").is_file()
    # the signature holds, and the re-check finds exactly the failures the bundle declared
    # (a stand-in's RUN-STAND-IN among them); step 6 compares machines, not this test's
    failed = {c["step"] for c in report["checks"] if not c["passed"]}
    assert not failed & {1, 2, 3}, [c for c in report["checks"] if not c["passed"]]
    assert report["known_errors"] > 0


def _tamper(files: dict[str, Path], tmp: Path, forge_hash: bool) -> Path:
    """bert's full accuracy log with every start/end logit zeroed (another answer for
    most questions), re-signed with the same key; ``forge_hash``: accuracy.txt's hash=
    line rewritten to the tampered log's sha256, as a forger would."""
    import hashlib

    tree = tmp / "tree"
    shutil.copytree(files["tree"], tree)
    [log] = [p for p in tree.rglob("evidence/**/mlperf_log_accuracy.json") if "bert" in str(p)]
    entries = json.loads(log.read_text())
    for entry in entries:
        entry["data"] = "0" * len(entry["data"])
    log.write_text(json.dumps(entries))
    if forge_hash:
        result = log.parent.relative_to(tree / "evidence")
        txt = tree / result / "accuracy" / "accuracy.txt"
        digest = hashlib.sha256(log.read_bytes()).hexdigest()
        txt.write_text("".join(f"hash={digest}\n" if line.startswith("hash=") else line + "\n"
                               for line in txt.read_text().splitlines()))
    out = tmp / "tampered.tar.gz"
    proc = run_cli("sign", str(tree), "--out", str(out), "--key", str(files["key"]),
                   "--unofficial", **PASS)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.parametrize("forge_hash", [False, True], ids=["hash-left", "hash-forged"])
def test_a_tampered_accuracy_log_fails_step_3(bundle: dict[str, Path], tmp_path: Path,
                                              forge_hash: bool) -> None:
    report = _audit(_tamper(bundle, tmp_path, forge_hash), bundle["pub"], tmp_path)
    assert report["checks"][0]["passed"]  # the same key signed it: step 1 cannot tell
    checks = _step3(report)
    [bad] = [c for name, c in checks.items() if "bert" in name]
    [good] = [c for name, c in checks.items() if "yolo" in name]
    assert good["passed"] and not bad["passed"]
    problems = " | ".join(bad["evidence"][2:])
    if forge_hash:  # the hash agrees: only the re-score shows the forgery
        assert "accuracy log sha256" not in problems
        assert "!= accuracy.txt" in problems and "!= signed claim" in problems
    else:
        assert "accuracy log sha256" in problems
