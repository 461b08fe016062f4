"""One run pipeline for every kind of benchmark: the same stages, records and refusals.

Each case is one kind's cheapest card on its in-process backend (a new kind adds a case
here, not a new suite of end-to-end runs): both kinds lint before a run directory exists,
write the same records (``system.json`` included, so ``suite diff`` compares two runs),
and end FAILED with their logs kept when the disk fills, or INTERRUPTED when stopped
outside a LoadGen test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suite.cli import app as cli
from suite.harness import run as harness_run
from suite.harness import runner
from suite.models import Kind, card_kind
from suite.paths import find_paths
from tests.conftest import run_cli, speed_free_offline
from tests.integration.test_lifecycle import _fill, _tmpfs

#: (benchmark, backend) of each kind: the cheapest card and its in-process backend.
KINDS = {
    Kind.TENSOR: ("digits", "null"),
    Kind.TEXT_GENERATION: ("tinylm", "torch-llm"),
}
RECORDS = ("STATUS", "config.json", "system.json", "dataset.json", "result.json")
#: What each kind's quick run adds: the null backend's Offline query at a fixed sample
#: count and no minimum duration (sized from its warm-up rate, millions of samples, it
#: lasted 10-25 s on a busy machine; none of these tests looks at the count).
QUICK = {Kind.TENSOR: speed_free_offline(), Kind.TEXT_GENERATION: []}


def _kind_params() -> list[object]:
    return [pytest.param(kind, id=kind.value) for kind in KINDS]


def test_every_kind_has_a_case_here() -> None:
    assert set(KINDS) == set(Kind)
    for kind, (benchmark, _) in KINDS.items():
        assert card_kind(find_paths(), benchmark) is kind


def _needs(backend: str) -> None:
    if backend == "torch-llm":
        pytest.importorskip("torch", reason="the LLM backend needs torch")


@pytest.mark.parametrize("kind", _kind_params())
def test_two_runs_write_the_same_records_and_diff_cleanly(kind: Kind, tmp_path: Path) -> None:
    benchmark, backend = KINDS[kind]
    _needs(backend)
    runs = tmp_path / "runs"
    for sets in ((), ("--set", "loadgen.performance_sample_count=8")):
        done = run_cli("run", "--benchmark", benchmark, "--backend", backend, "--quick",
                       "--runs-dir", str(runs), *QUICK[kind], *sets)
        assert done.returncode in (0, 2), done.stdout + done.stderr
        assert "pre-flight: predicted" in done.stderr + done.stdout  # the linter ran
    first, second = sorted(p for p in runs.iterdir() if p.is_dir())
    for run_dir in (first, second):
        for name in RECORDS:
            assert (run_dir / name).is_file(), f"{run_dir.name} lacks {name}"
        system = json.loads((run_dir / "system.json").read_text())
        assert system, "an empty system description"
        assert (run_dir / "STATUS").read_text().startswith(("VALID", "INVALID"))
    diff = run_cli("diff", str(first), str(second))
    assert diff.returncode == 0, diff.stdout + diff.stderr
    assert "loadgen.performance_sample_count" in diff.stdout


@pytest.mark.parametrize("kind", _kind_params())
def test_a_bad_config_is_refused_by_the_linter_before_a_run_directory(
        kind: Kind, tmp_path: Path) -> None:
    benchmark, backend = KINDS[kind]
    runs = tmp_path / "runs"
    done = run_cli("run", "--benchmark", benchmark, "--backend", backend, "--quick",
                   "--runs-dir", str(runs), "--set", "loadgen.min_duraton_ms=5")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "LINT-UNKNOWN-KEY" in done.stderr and "loadgen.min_duration_ms" in done.stderr
    assert not runs.exists()


@pytest.mark.parametrize("kind", _kind_params())
def test_a_full_disk_ends_failed_in_one_line_with_the_logs_kept_and_no_tmp(
        kind: Kind, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    benchmark, backend = KINDS[kind]
    _needs(backend)
    runs = tmp_path / "full"
    real = runner.run_in_child

    def then_fill(*args: object, **kwargs: object) -> object:
        test = real(*args, **kwargs)  # type: ignore[arg-type]
        _fill(runs)  # the disk fills after the test: result.json no longer fits
        return test

    with _tmpfs(runs, "4m"):
        monkeypatch.setattr(harness_run, "run_in_child", then_fill)
        code = cli.main(["run", "--benchmark", benchmark, "--backend", backend, "--quick",
                         "--runs-dir", str(runs), *QUICK[kind]])
        err = capsys.readouterr().err
        run_dir = next(p for p in runs.iterdir() if p.is_dir())
        assert code == 1, err
        assert f"cannot write {run_dir / 'result.json'}: [Errno 28 ENOSPC]" in err, err
        assert "Traceback" not in err
        status = (run_dir / "STATUS").read_text()
        assert status.startswith("FAILED (exit code 1): cannot write") and "ENOSPC" in status
        assert (run_dir / "performance" / "mlperf_log_detail.txt").stat().st_size > 0
        assert not list(run_dir.rglob("*.tmp"))
        assert not (run_dir / "result.json").exists()


@pytest.mark.parametrize("kind", _kind_params())
def test_a_stop_outside_a_test_ends_interrupted_with_the_logs_kept(
        kind: Kind, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    benchmark, backend = KINDS[kind]
    _needs(backend)
    runs = tmp_path / "runs"
    real = runner.run_in_child

    def then_stop(*args: object, **kwargs: object) -> object:
        real(*args, **kwargs)  # type: ignore[arg-type]
        raise KeyboardInterrupt  # Ctrl-C (TERM and HUP arrive the same way) while scoring

    monkeypatch.setattr(harness_run, "run_in_child", then_stop)
    code = cli.main(["run", "--benchmark", benchmark, "--backend", backend, "--quick",
                     "--runs-dir", str(runs), *QUICK[kind]])
    capsys.readouterr()
    run_dir = next(p for p in runs.iterdir() if p.is_dir())
    assert code == 130
    assert (run_dir / "STATUS").read_text().startswith("INTERRUPTED (exit code 130)")
    assert (run_dir / "performance" / "mlperf_log_detail.txt").stat().st_size > 0
