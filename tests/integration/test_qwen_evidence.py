"""qwen3.6-27b end to end through the submission: ONE run (``--mode all``, SingleStream,
the checker's scenario for the edge benchmark, ``constants.py`` MODEL_CONFIG["v6.1"]) of
the real CLI and LoadGen against the synthetic engine answering from the BFCL fixture
(``--chat-answers``: streamed tool-call deltas, and 400 for a request without the
sample's tools, ``tool_choice``, seed 42 and temperature 0), then ``suite package``,
``suite check`` of the official tree, ``suite verify`` and ``suite audit`` with the
re-score from the bundle's accuracy log (recorded JSON responses, not int32 ids) by
``bfcl_score``, the scoring the run used; and one tampered re-package (every response
replaced) caught by the re-score.

The expected figure is what the reference's scorer printed on the same responses
(``bfcl_fixtures.REFERENCE_BREAKDOWN``: overall 48.48; how it was run:
tests/unit/llm/test_bfcl_scoring.py); the checker reads it as ``mAP``
(``ACC_PATTERN["mAP"]``) against 85.3677. qwen3.6-27b is in no ``models_TEST0x`` list:
the tree holds no compliance directory and the checker asks for none. The run is
``--quick`` (not submittable), so the package is ``--unofficial``.
"""

from __future__ import annotations

import ast
import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from suite.checker import check_path
from suite.config.rules import load_rules
from suite.paths import find_paths
from suite.results import RunResult
from tests.conftest import run_cli
from tests.support import bfcl_fixtures as fx
from tests.support.llm_endpoints import synthetic
from tests.support.reasoning_evidence import package
from tests.support.reasoning_fixtures import write_harmony_tokenizer
from tests.support.submission_fixtures import SYSTEM_TOML, env
from tests.support.timing import performance_valid_or_timing

pytest.importorskip("aiohttp", reason="the openai backend needs aiohttp (.[openai])")
pytest.importorskip("fastparquet", reason="the BFCL file is parquet (.[reasoning])")

RESULT = "closed/ORG/results/box/qwen3.6-27b/SingleStream"
#: what an endpoint run cannot measure, stated by the submitter (as the reasoning cards')
STATED = ("--set", f'backend.openai.stated_weights_sha256="{"ab" * 32}"',
          "--set", 'backend.openai.stated_precision="fp32"',
          "--set", 'backend.openai.stated_quantization="none"')


@dataclass
class Evidence:
    files: dict[str, Path]
    runs: Path
    base: Path
    code: int
    out: str
    tree: Path
    bundle: Path
    audit: dict[str, Any]

    @property
    def pub(self) -> Path:
        return self.base / "keys/signing.pub"


def _audit(files: dict[str, Path], bundle: Path, pub: Path) -> dict[str, Any]:
    done = run_cli("audit", str(bundle), "--key", str(pub), "--json", "--dataset-path",
                   str(files["dataset"]), "--model-path", str(files["model"]), timeout=300)
    assert done.returncode in (0, 2), done.stdout[-3000:] + done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def _accuracy_check(report: dict[str, Any]) -> dict[str, Any]:
    found = [c for c in report["checks"] if c["step"] == 3
             and c["name"] == f"accuracy of {RESULT}"]
    assert len(found) == 1, [c["name"] for c in report["checks"]]
    return found[0]


@pytest.fixture(scope="module")
def evidence(tmp_path_factory: pytest.TempPathFactory) -> Evidence:
    base = tmp_path_factory.mktemp("qwen")
    files = {"dataset": fx.write_parquet(base / "files/bfcl_v4_single_turn.parquet"),
             "answers": fx.chat_answers(base / "files/chat_answers.json"),
             "model": write_harmony_tokenizer(base / "files/model").parent}
    assert run_cli("keygen", "--out", str(base / "keys"), **env()).returncode == 0
    # the edge category: the checker requires SingleStream of an edge qwen3.6-27b
    (base / "system.toml").write_text(SYSTEM_TOML.replace('"datacenter"', '"edge"'))
    runs = base / "runs"
    with synthetic("--model", "qwen3.6-27b", "--chat-answers", str(files["answers"]),
                   "--chunk-tokens", "4") as (url, _):
        done = run_cli("run", "--benchmark", "qwen3.6-27b", "--backend", "openai", "--url",
                       url, "--dataset-path", str(files["dataset"]), "--model-path",
                       str(files["model"]), "--quick", "--runs-dir", str(runs),
                       "--scenario", "singlestream", "--mode", "all", *STATED, timeout=300)
    bundle = package(runs, base / "out", base)
    return Evidence(files, runs, base, done.returncode, done.stdout + done.stderr,
                    base / "out/closed_ORG_box", bundle,
                    _audit(files, bundle, base / "keys/signing.pub"))


def test_the_run_scores_as_the_reference(evidence: Evidence) -> None:
    assert evidence.code == 2, evidence.out  # 48.48 below the checker's 85.3677
    run_dir = next(evidence.runs.iterdir())
    lines = (run_dir / "accuracy/accuracy.txt").read_text().splitlines()
    assert lines[0] == "mAP=48.48"
    record = ast.literal_eval(lines[1])
    assert {k: record[k] for k in fx.REFERENCE_BREAKDOWN} == fx.REFERENCE_BREAKDOWN
    accuracy = RunResult.load(run_dir / "result.json").tests[1]
    assert accuracy.accuracy is not None and accuracy.accuracy.metric == "mAP"
    assert accuracy.accuracy.value == 48.48 and accuracy.status.value == "INVALID"
    assert "mAP: 48.48 >= 85.3677: FAILED" in accuracy.message
    # every response ended as the engine said: 28 with tool calls, 5 with text
    assert accuracy.backend["run"]["finish_reasons"] == {"tool_calls": 28, "stop": 5}


def test_the_tree_holds_the_official_accuracy_files(evidence: Evidence) -> None:
    """The run's accuracy.txt as written (the ``mAP=`` line the checker reads, the
    breakdown, the log's hash); the whole JSON log beside the tree, hashed as stated."""
    result = evidence.tree / RESULT
    run_dir = next(evidence.runs.iterdir())
    stated = (result / "accuracy/accuracy.txt").read_text()
    assert stated == (run_dir / "accuracy/accuracy.txt").read_text()
    whole = evidence.tree / "evidence" / RESULT / "mlperf_log_accuracy.json"
    digest = hashlib.sha256(whole.read_bytes()).hexdigest()
    assert stated.splitlines()[-1] == f"hash={digest}"
    entries = json.loads(whole.read_text())
    assert sorted(int(e["qsl_idx"]) for e in entries) == list(range(33))
    assert all(json.loads(bytes.fromhex(e["data"])) for e in entries)  # JSON responses
    # the tree's copy is the official truncation (head and tail) of the whole log
    tree_log = (result / "accuracy/mlperf_log_accuracy.json").read_bytes()
    assert len(tree_log) < whole.stat().st_size and whole.read_bytes()[:4000] == tree_log[:4000]
    for name in ("accuracy/mlperf_log_accuracy.json", "performance/run_1/mlperf_log_detail.txt",
                 "performance/run_1/mlperf_log_summary.txt", "measurements.json"):
        assert (result / name).is_file(), name
    assert not [p for p in result.iterdir() if p.name.startswith("TEST")]


def _errors(tree: Path) -> dict[str, str]:
    report = check_path(tree, load_rules(find_paths(), "v6.1"))
    found = [r for r in report.results if r.id == RESULT]
    assert len(found) == 1, [r.id for r in report.results]
    return {f.rule: f.message for f in found[0].findings if f.severity == "error"}


#: what the official checker (tools/submission/submission_checker, mlcommons/inference @
#: b66003e, ``main.py --version v6.1``, run by hand on this tree without ``evidence/``)
#: logged as errors, and nothing else: the quick run's duration (performance_check), mAP
#: 48.48 below 85.3677 read from accuracy.txt (``ACC_PATTERN["mAP"]``) and 33 samples of
#: 995 (accuracy_check), the fixture system's 6 empty meaningful fields (system_check),
#: no starting_weights_filename (measurements_checks); its compliance check passed: the
#: round asks no test of qwen3.6-27b (in no ``models_TEST0x``)
OFFICIAL = {"PERF-DURATION", "ACC-TARGET", "ACC-DATASET", "SYS-FIELDS", "MEAS-JSON"}


def test_check_gives_the_official_verdicts(evidence: Evidence, tmp_path: Path) -> None:
    """The packaged tree, then accuracy.txt mutated as the official checker was run on
    it: mAP at the target (85.3677 >= 86.23 x 0.99: met), just below it, and without
    its ``hash=`` line ("not hash value for accuracy.txt")."""
    errors = _errors(evidence.tree)
    assert set(errors) == OFFICIAL, errors
    assert "mAP" in errors["ACC-TARGET"]
    tree = shutil.copytree(evidence.tree, tmp_path / "tree")
    txt = tree / RESULT / "accuracy/accuracy.txt"
    lines = txt.read_text().splitlines()
    for first, expected in (("mAP=85.3677", OFFICIAL - {"ACC-TARGET"}),
                            ("mAP=85.3676", OFFICIAL)):
        txt.write_text("\n".join([first, *lines[1:]]) + "\n")
        assert set(_errors(tree)) == expected, first
    txt.write_text("\n".join(["mAP=85.3677", *lines[1:-1]]) + "\n")
    assert set(_errors(tree)) == OFFICIAL - {"ACC-TARGET"} | {"ACC-HASH"}


def test_the_bundle_verifies(evidence: Evidence) -> None:
    done = run_cli("verify", str(evidence.bundle), "--key", str(evidence.pub), "--json")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_audit_re_scores_map_to_the_last_digit(evidence: Evidence) -> None:
    accuracy = _accuracy_check(evidence.audit)
    assert accuracy["passed"], accuracy
    shown = " ".join(accuracy["evidence"])
    assert "re-scored from the full log (33 samples) as the reference scores it: mAP=48.48" \
        in shown, shown
    assert accuracy["found"] == "mAP 48.48 (reproduced: yes; target met: no)"
    assert not [c for c in evidence.audit["checks"] if c["name"].startswith("TEST0")]


def test_a_tampered_accuracy_log_is_caught_by_the_re_score(evidence: Evidence,
                                                           tmp_path: Path) -> None:
    """Every recorded response replaced by text that calls nothing, then packaged again
    (the packager hashes the log it copies and scores nothing: the bundle is consistent
    and signed): only the re-score can tell, and it does."""
    runs = shutil.copytree(evidence.runs, tmp_path / "runs")
    log = next(runs.iterdir()) / "accuracy/mlperf_log_accuracy.json"
    entries = json.loads(log.read_text())
    empty = {"content": "no answer", "reasoning": "", "tool_calls": [],
             "finish_reason": "stop"}
    for entry in entries:
        entry["data"] = json.dumps(empty).encode().hex().upper()
    log.write_text(json.dumps(entries))
    report = _audit(evidence.files, package(runs, tmp_path / "out", evidence.base),
                    evidence.pub)
    accuracy = _accuracy_check(report)
    assert not accuracy["passed"], accuracy
    shown = " ".join(accuracy["evidence"])
    assert "re-scored line mAP=" in shown and "!= accuracy.txt's mAP=48.48" in shown, shown
    assert "reproduced: no" in accuracy["found"]


def _recompressed(path: Path, where: Path) -> Path:
    """The same rows in another file (gzip pages): another sha256, the same samples."""
    import warnings

    import pandas as pd

    where.mkdir()
    with warnings.catch_warnings():  # pandas 3 deprecates the fastparquet engine
        warnings.filterwarnings("ignore", message=".*fastparquet.*")
        frame = pd.read_parquet(path)
        frame.to_parquet(where / path.name, engine="fastparquet", compression="GZIP",
                         object_encoding={k: "utf8" for k in frame.columns})
    return where / path.name


def test_the_re_score_holds_every_printed_digit(evidence: Evidence, tmp_path: Path) -> None:
    """The audit's re-score (``reasoning_audit.recompute``) on the packaged tree: as
    packaged it reproduces; one digit of the breakdown changed (the mAP line kept), or the
    claim off by 0.01, or an auditor's dataset file other than the run's, each fails."""
    from suite.llm.card import load_llm_card
    from suite.llm.reasoning_audit import recompute

    paths = find_paths()
    card = load_llm_card(paths, "qwen3.6-27b")
    model = load_rules(paths, "v6.1").models["qwen3.6-27b"]
    tree = shutil.copytree(evidence.tree, tmp_path / "tree")
    info = json.loads((tree / "evidence" / RESULT / "run.json").read_text())

    def rescore(claim: float, dataset: Path) -> tuple[bool, str]:
        passed, shown, _ = recompute(tree, RESULT, info, {"accuracy": claim}, card, model,
                                     str(dataset), str(evidence.files["model"]))
        return passed, " ".join(shown)

    assert rescore(48.48, evidence.files["dataset"])[0]
    passed, shown = rescore(48.49, evidence.files["dataset"])
    assert not passed and "re-scored mAP 48.48 != signed claim 48.49" in shown
    other = _recompressed(evidence.files["dataset"], tmp_path / "other")
    passed, shown = rescore(48.48, other)
    assert not passed and "the run recorded" in shown, shown
    txt = tree / RESULT / "accuracy/accuracy.txt"
    txt.write_text(txt.read_text().replace("'simple_python': 38.46", "'simple_python': 38.47"))
    passed, shown = rescore(48.48, evidence.files["dataset"])
    assert not passed and "re-scored subset_scores" in shown and "38.47" in shown, shown


@pytest.mark.timing
def test_the_performance_test_is_valid(evidence: Evidence) -> None:
    """The quick SingleStream run's VALID depends on the machine: INVALID for speed
    alone is a reported timing miss."""
    performance_valid_or_timing(RunResult.load(next(evidence.runs.iterdir()) / "result.json"))
