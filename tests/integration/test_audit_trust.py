"""The audit and the verifier never trust a second read, never crash without a report,
and say when a bundle is UNOFFICIAL (issue 14, items 3, 4 and 11). Real bundles from
real quick digits runs, real Ed25519 keys; no replay is run here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from suite.audit import steps
from suite.paths import find_paths
from suite.submission.bundle.keys import load_public
from suite.submission.bundle.verify import Verification, verify_bundle
from tests.conftest import run_cli
from tests.support import submission_fixtures as fx

built = fx.built


OFFLINE = "closed/ORG/results/box/digits/Offline"


def _resign(built: fx.Built, tmp: Path, edit: object) -> Path:
    tree = tmp / "tree"
    shutil.copytree(built.tree, tree)
    edit(tree)  # type: ignore[operator]
    out = tmp / "edited.tar.gz"
    done = run_cli("sign", str(tree), "--out", str(out), "--key", str(built.key),
                   "--unofficial", **fx.env())
    assert done.returncode == 0, done.stderr
    return out


def test_verify_returns_the_verified_statement(built: fx.Built) -> None:
    result = verify_bundle(built.bundle, load_public(built.pub))
    assert result.ok and result.statement["_type"] == "https://in-toto.io/Statement/v1"
    assert result.subjects == {s["name"]: s["digest"]["sha256"]
                               for s in result.statement["subject"]}
    assert result.predicate is result.statement["predicate"]


def test_the_audit_extracts_against_the_verified_digests_only(
        built: fx.Built, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """If what verification vouched for differs from the archive's own envelope, the
    audit must follow verification: a second read of the envelope is never consulted."""
    real = verify_bundle

    def vouching_for_other_bytes(path: Path, public: object) -> Verification:
        result = real(path, public)  # type: ignore[arg-type]
        name = next(n for n in result.subjects if n.endswith("accuracy.txt"))
        result.subjects = {**result.subjects, name: "0" * 64}
        return result

    monkeypatch.setattr(steps, "verify_bundle", vouching_for_other_bytes)
    report = steps.audit(built.bundle, built.pub, find_paths(), tmp_path / "work",
                         tmp_path / "runs")
    assert report.stopped_at == 1 and not report.passed
    assert any("changed while the bundle was being read" in e
               for c in report.checks for e in c.evidence)


def test_unreadable_evidence_is_a_failed_check_and_the_report_is_written(
        built: fx.Built, tmp_path: Path) -> None:
    def garble(tree: Path) -> None:
        (tree / "evidence" / OFFLINE / "run.json").write_bytes(b"\xff\xfe{not utf-8\x80}")

    bundle = _resign(built, tmp_path, garble)
    report_path = tmp_path / "audit.json"
    done = run_cli("audit", str(bundle), "--key", str(built.pub), "--out", str(report_path),
                   "--rerun", "digits/Offline", "--runs-dir", str(tmp_path / "runs"))
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2 and report_path.is_file()
    report = json.loads(report_path.read_text())
    [replay] = [c for c in report["checks"] if c["step"] == 4]
    assert not replay["passed"] and "run.json is unreadable" in replay["evidence"][0]
    assert report["unofficial"] is True
    assert done.stderr.strip().splitlines()[-1].startswith("UNOFFICIAL bundle: audit FAILED")


def test_a_bad_rerun_choice_is_a_failed_check(built: fx.Built, tmp_path: Path) -> None:
    report = steps.audit(built.bundle, built.pub, find_paths(), tmp_path / "work",
                         tmp_path / "runs", rerun="digits/Nowhere")
    [choice] = [c for c in report.checks if c.step == 4]
    assert not choice.passed and "matches 0 results" in choice.evidence[0]
    assert {c.step for c in report.checks} >= {1, 2, 3, 6}  # the rest still ran


def test_a_bundle_with_a_cut_gzip_trailer_is_one_line_and_exit_1(
        built: fx.Built, tmp_path: Path) -> None:
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(built.bundle.read_bytes()[:-4])  # the ISIZE field of the trailer
    done = run_cli("verify", str(cut), "--key", str(built.pub))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "corrupt archive" in done.stderr
    result = verify_bundle(cut, load_public(built.pub))
    assert not result.ok and result.unreadable is not None


@pytest.mark.parametrize("command", ["verify", "package"])
def test_a_key_directory_is_one_line_and_exit_1(command: str, built: fx.Built,
                                                tmp_path: Path) -> None:
    keys = built.key.parent
    args = (["verify", str(built.bundle), "--key", str(keys)] if command == "verify" else
            ["package", "--submitter", "ORG", "--system", "box", "--runs-dir",
             str(built.runs), "--out-dir", str(tmp_path), "--key", str(keys)])
    done = run_cli(*args, **fx.env())
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "is a directory, not a" in done.stderr



@pytest.mark.parametrize("command", ["verify", "audit"])
def test_a_bundle_from_a_pipe_is_read_without_seeking(command: str, built: fx.Built,
                                                      tmp_path: Path) -> None:
    # `suite verify <(cat bundle)`: bash hands the command a pipe, /dev/fd/63
    import subprocess
    import sys

    from tests.conftest import REPO, cli_env

    extra = f" --runs-dir {tmp_path / 'runs'}" if command == "audit" else ""
    done = subprocess.run(["bash", "-c", f"{sys.executable} -m suite {command} "
                           f"<(cat {built.bundle}) --key {built.pub}{extra}"],
                          cwd=REPO, env=cli_env(**fx.env()), capture_output=True, text=True,
                          timeout=300)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode in (0, 2), done.stdout + done.stderr  # a verdict, not an error
    if command == "verify":
        assert done.returncode == 0 and "OK: signature valid" in done.stdout


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero on this system")
def test_audit_of_an_endless_file_is_one_line_and_exit_1(built: fx.Built) -> None:
    done = run_cli("audit", "/dev/zero", "--key", str(built.pub), timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    assert "/dev/zero: not a gzip file, so not a bundle" in done.stderr
