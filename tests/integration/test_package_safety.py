"""``suite package`` states only recorded facts and never deletes what it did not create:
names that become paths are validated, the tree is staged and renamed into place, and
measurements.json / calibration.md come from each run's backend record (issue 14, items
2 and 8). Here through ``suite package`` on real quick runs; the helpers on recorded
results are in tests/unit/submission/test_safety.py."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support import submission_fixtures as fx

built = fx.built


def _package(built: fx.Built, runs: Path, out: Path, *extra: str) -> tuple[int, str]:
    done = run_cli("package", "--submitter", "ORG", "--runs-dir", str(runs), "--out-dir",
                   str(out), "--key", str(built.key), "--unofficial", "--system-config",
                   str(built.home / "system.toml"), *extra, **fx.env())
    return done.returncode, done.stdout + done.stderr


def test_a_system_name_cannot_escape_the_output_folder(built: fx.Built,
                                                       tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("not yours")
    out = tmp_path / "a" / "b"
    out.mkdir(parents=True)
    code, text = _package(built, built.runs, out, "--system", "x/../../../victim")
    assert code == 1 and "--system" in text and "not a valid name" in text
    assert victim.read_text() == "not yours"


def test_bf16_runs_are_packaged_as_bf16(built: fx.Built, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    shutil.copytree(built.runs, runs)
    fx.stamp_precision(runs, "bf16", "cast to bf16 at load", force=True)
    code, text = _package(built, runs, tmp_path / "out", "--system", "box")
    assert code == 0, text
    base = tmp_path / "out" / "closed_ORG_box" / "closed" / "ORG"
    [meas] = list(base.glob("results/box/digits/Offline/measurements.json"))
    facts = json.loads(meas.read_text())
    assert facts["weight_data_types"] == "bf16"
    assert facts["weight_transformations"] == "cast to bf16 at load"
    assert "FP32" not in (base / "documentation" / "calibration.md").read_text()


def test_a_run_without_a_record_refuses_packaging(built: fx.Built, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    shutil.copytree(built.runs, runs)
    for path in runs.glob("*/result.json"):
        data = json.loads(path.read_text())
        for test in data["tests"]:
            test["backend"].pop("precision", None)
        path.write_text(json.dumps(data))
    code, text = _package(built, runs, tmp_path / "out", "--system", "box")
    assert code == 1 and "has no 'precision'" in text
    assert not (tmp_path / "out" / "closed_ORG_box").exists()


def test_repackaging_keeps_a_foreign_directory(built: fx.Built, tmp_path: Path) -> None:
    out = tmp_path / "out"
    foreign = out / "closed_ORG_box"
    foreign.mkdir(parents=True)
    (foreign / "notes.txt").write_text("mine")
    code, text = _package(built, built.runs, out, "--system", "box")
    assert code == 0, text
    assert "moved aside" in text
    [aside] = list(out.glob("closed_ORG_box.previous-*/closed_ORG_box/notes.txt"))
    assert aside.read_text() == "mine"
    assert (foreign / "closed").is_dir()



def test_a_symbolic_link_in_a_run_directory_is_refused_not_followed(built: fx.Built,
                                                                     tmp_path: Path) -> None:
    """Issue 28: a log linked to any readable file was copied into the bundle and signed."""
    runs = tmp_path / "runs"
    shutil.copytree(built.runs, runs)
    secret = tmp_path / "secret.txt"
    secret.write_text("not part of any run\n")
    [summary, *_] = sorted(runs.glob("*offline*/performance/mlperf_log_summary.txt"))
    summary.unlink()
    summary.symlink_to(secret)
    out = tmp_path / "out"
    code, text = _package(built, runs, out, "--system", "box")
    assert code == 1, text
    assert f"{summary} is a symbolic link" in text and "Traceback" not in text
    assert not any(out.rglob("*.tar.gz")) and not any(
        "not part of any run" in p.read_text(errors="replace")
        for p in out.rglob("*") if p.is_file())


@pytest.mark.parametrize("defect", ["symlinked detail log", "non-UTF-8 name"])
def test_check_of_a_run_directory_names_what_package_and_sign_refuse(
        defect: str, built: fx.Built, tmp_path: Path) -> None:
    [source] = sorted(built.runs.glob("*offline*"))
    run = tmp_path / source.name
    shutil.copytree(source, run)
    detail = run / "performance" / "mlperf_log_detail.txt"
    if defect == "symlinked detail log":
        kept = tmp_path / "elsewhere.txt"
        detail.rename(kept)
        detail.symlink_to(kept)  # the log reads the same through the link
        needle = "mlperf_log_detail.txt is a symbolic link"
    else:
        (Path(os.fsdecode(bytes(run / "performance") + b"/notes-\xff.txt"))).write_text("x")
        needle = "notes-\\xff.txt: the name is not UTF-8"
    done = run_cli("check", str(run), "--json")
    assert done.returncode != 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    report = json.loads(done.stdout)
    messages = [f["message"] for r in report["results"] for f in r["findings"]
                if f["rule"] == "TREE-LAYOUT"]
    assert any(needle in m for m in messages), messages
