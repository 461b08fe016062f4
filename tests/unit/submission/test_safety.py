"""``suite package`` states only recorded facts and never deletes what it did not create:
names that become paths are validated, the tree is staged and renamed into place, and
measurements.json / calibration.md come from each run's backend record (issue 14, items
2 and 8). Here the helpers (names, staging, placing, the precision record) on recorded
results; ``suite package`` on real runs is in tests/integration/test_package_safety.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from suite.results import RunResult
from suite.submission.safety import (
    PackageError,
    check_name,
    place,
    recorded_precision,
    staging_dir,
    system_precision,
)


def _run(tmp: Path, **backend: str) -> RunResult:
    data = {
        "run_id": "r1", "run_dir": str(tmp / "r1"), "created_utc": "2025-01-01T00:00:00Z",
        "benchmark": "digits", "scenario": "offline", "mode": "all", "backend": "torch",
        "round": "v6.1", "model_sha256": "0" * 64, "submittable": True,
        "non_submittable_reasons": [], "status": "VALID", "exit_code": 0,
        "tests": [{"mode": mode, "directory": mode, "status": "VALID", "exit_code": 0,
                   "backend": dict(backend)} for mode in ("performance", "accuracy")]}
    return RunResult.model_validate(data)


@pytest.mark.parametrize("bad", ["a/../../victim", "..", ".hidden", "a b", "", "x/y", "é"])
def test_unsafe_names_are_refused(bad: str) -> None:
    with pytest.raises(PackageError, match="not a valid name"):
        check_name("--system", bad)


def test_safe_names_pass() -> None:
    assert check_name("--system", "box-1.0_a") == "box-1.0_a"


def test_a_run_without_a_precision_record_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PackageError, match="has no 'precision'"):
        recorded_precision(_run(tmp_path))
    with pytest.raises(PackageError, match="has no 'weight_transformations'"):
        recorded_precision(_run(tmp_path, precision="fp32"))


def test_recorded_precision_is_what_the_backend_said(tmp_path: Path) -> None:
    found = recorded_precision(_run(tmp_path, precision="bf16",
                                    weight_transformations="cast to bf16"))
    assert (found.weight_data_types, found.weight_transformations) == ("bf16", "cast to bf16")
    assert "No quantization" not in found.calibration_text()
    assert "bf16" in found.calibration_text()


def test_one_system_may_not_mix_precisions(tmp_path: Path) -> None:
    fp32 = _run(tmp_path, precision="fp32", weight_transformations="none")
    int8 = _run(tmp_path, precision="int8", weight_transformations="int8 calibration")
    with pytest.raises(PackageError, match="different precisions"):
        system_precision([fp32, int8], None)
    with pytest.raises(PackageError, match="declares weight_data_types 'fp16'"):
        system_precision([fp32], "fp16")
    assert system_precision([fp32, fp32], "FP32").weight_data_types == "fp32"


def test_place_never_deletes_a_directory_it_did_not_create(tmp_path: Path) -> None:
    target = tmp_path / "out" / "tree"
    target.mkdir(parents=True)
    (target / "precious.txt").write_text("user data")
    staged = staging_dir(target)
    (staged / "new.txt").write_text("new")
    moved = place(staged, target)
    assert moved is not None and (Path(moved) / "precious.txt").read_text() == "user data"
    assert (target / "new.txt").is_file() and not staged.exists()
    # the tree we just placed is ours: the next placement replaces it without a copy aside
    again = staging_dir(target)
    (again / "newer.txt").write_text("newer")
    assert place(again, target) is None
    assert sorted(p.name for p in target.iterdir()) == ["newer.txt"]

