"""``suite tune``: a VALID confirming Server run, settings that ``suite run`` picks up, and
probes reused by a second invocation. Real LoadGen probe runs on the null backend."""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.timing import timing_miss

# Capped at a rate the null backend sustains on any machine: uncapped, the search
# starts at half the null backend's Offline rate (about 600k QPS here), and one CI run
# of it passed the 600 s timeout. The bisection itself is covered by test_tune_search.py.
MAX_QPS = 20000
TUNE = ["tune", "--scenario", "server", "--probe-ms", "1500", "--confirm-ms", "2500",
        "--batch-sizes", "16", "--workers", "2", "--steps", "3", "--backend", "null",
        "--system", "testbox", "--max-qps", str(MAX_QPS)]


def _generous_server_bound(home: Path, bound_ms: int = 1000) -> None:
    """What is under test is the flow (probe, confirm, write, reuse), not this machine's
    p99: a 1 s bound keeps the null backend VALID on a starved VM, where LoadGen's own
    issue thread has been seen to miss 10 ms at 12k QPS."""
    rules = home / "run_rules" / "v6.1.toml"
    text = rules.read_text()
    old = "[benchmarks.digits.scenarios.server]\nlatency_bound_ms = 10\n"
    assert old in text
    rules.write_text(text.replace(old, old.replace("= 10", f"= {bound_ms}")))


def test_tune_confirms_writes_settings_and_reuses_probes(suite_home: Path,
                                                        runs_dir: Path) -> None:
    _generous_server_bound(suite_home)
    first = run_cli(*TUNE, "--runs-dir", str(runs_dir), SUITE_HOME=str(suite_home),
                    timeout=600)
    assert first.returncode == 0, first.stdout + first.stderr
    ran = int(re.search(r"probes run: (\d+)", first.stderr).group(1))  # type: ignore[union-attr]
    assert ran >= 3
    settings = suite_home / "scenarios" / "systems" / "testbox" / "null.toml"
    tuned = tomllib.loads(settings.read_text())
    server = tuned["benchmarks"]["digits"]["scenarios"]["server"]
    assert 0 < server["loadgen"]["target_qps"] <= MAX_QPS
    assert server["sut"]["max_batch_size"] == 16
    assert server["sut"]["workers"] == 2
    assert server["sut"]["worker_model"] == "threads"  # the configured model, recorded
    assert "highest VALID rate among worker setups: 2 threads" in settings.read_text()
    assert "a run of 2500 ms confirmed it VALID: LoadGen" in settings.read_text()
    offline = tuned["benchmarks"]["digits"]["scenarios"]["offline"]["loadgen"]
    assert offline["expected_qps"] > 0

    # `suite run` on that system picks the values up, and says where they came from.
    shown = run_cli("config", "--scenario", "server", "--backend", "null",
                    SUITE_HOME=str(suite_home), SUITE_SYSTEM="testbox")
    assert shown.returncode == 0, shown.stderr
    assert "scenarios/systems/testbox/null.toml" in shown.stdout
    assert str(server["loadgen"]["target_qps"]) in shown.stdout

    second = run_cli(*TUNE, "--runs-dir", str(runs_dir), SUITE_HOME=str(suite_home),
                     timeout=600)
    assert second.returncode == 0, second.stderr
    assert "probes run: 0" in second.stderr
    assert f"reused from cache: {ran}" in second.stderr
    assert list(settings.parent.glob("null.toml.*.bak"))  # the first file was kept


def test_tune_on_an_accelerator_leaves_the_server_policy_to_warm_up(suite_home: Path,
                                                                   runs_dir: Path) -> None:
    """On the simulated H100 (4.5 ms a call, nearly all fixed) the run's warm-up policy
    paces batches, so tune records -1 (derive at warm-up), not a fixed wait that would
    turn the pacing and the cap off in every later run; and its first Offline probe aims
    near the backend's measured rate."""
    _generous_server_bound(suite_home)
    tune = [*TUNE[:TUNE.index("--backend")], "--backend", "simulated", "--system", "gpubox",
            "--max-qps", "3000"]
    proc = run_cli(*tune, "--runs-dir", str(runs_dir), SUITE_HOME=str(suite_home),
                   timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The first Offline probe aims near the backend's rate, not digits' 1.2M/s guess
    # (165 s for a 1.5 s probe at the simulated H100's 12k samples/s).
    assert "the first probe aims at" in proc.stderr
    settings = suite_home / "scenarios" / "systems" / "gpubox" / "simulated.toml"
    server = tomllib.loads(settings.read_text())["benchmarks"]["digits"]["scenarios"]["server"]
    assert server["sut"]["max_wait_us"] == -1
    assert "derived at each run's warm-up with the batch cap and the pacing" in \
        settings.read_text()
    # The aimed first probe is on a coarse grid, so a second invocation reuses it.
    again = run_cli(*tune, "--runs-dir", str(runs_dir), SUITE_HOME=str(suite_home),
                    timeout=600)
    assert again.returncode == 0, again.stderr
    assert re.search(r"offline expected_qps [\d,]+, 1\.5 s: VALID, [\d,]+/s, cached",
                     again.stderr)


@pytest.mark.timing
def test_tune_quick_searches_workers_proposes_them_and_fits_100_columns(
        suite_home: Path, runs_dir: Path) -> None:
    """`suite tune --quick` as a user types it (worker counts not given: 1, 2 and the
    cores), piped at COLUMNS=100: every line fits, progress is words, and it ends either
    with the setup it confirmed and the scenario-file lines it proposes, or (exit 2, a busy
    machine) with a verdict naming the VALID probes and the real directory of their logs."""
    _generous_server_bound(suite_home)
    proc = run_cli("tune", "--scenario", "server", "--quick", "--backend", "null",
                   "--system", "quickbox", "--max-qps", "2000", "--runs-dir", str(runs_dir),
                   SUITE_HOME=str(suite_home), COLUMNS="100", timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode in (0, 2), out
    # A path is never broken (it must stay copy-pasteable): one longer than the width
    # (pytest's temporary directories are) stands alone on its line, from the margin.
    too_wide = [line for line in out.splitlines()
                if len(line) > 100 and not (" " not in line and line.startswith("/"))]
    assert not too_wide, too_wide
    assert "<runs>" not in out and "{'" not in out
    probes = runs_dir.resolve() / "tune-probes"
    # the path may stand on a line of its own after the words (see above)
    assert f"probe runs go to {probes}" in " ".join(proc.stderr.split())
    cores = os.cpu_count() or 1
    for count in sorted({1, 2, cores}):
        noun = "thread" if count == 1 else "threads"
        assert re.search(rf"server [\d,]+ QPS, batch \d+, {count} {noun}, [\d.]+ s: ", out), count
    if proc.returncode == 2:
        assert "Server: no confirming run was VALID" in proc.stderr
        assert str(probes) in proc.stderr.replace("\n    ", " ")
        timing_miss("no confirming Server run was VALID on this machine (verdict shown)")
    settings = suite_home / "scenarios" / "systems" / "quickbox" / "null.toml"
    server = tomllib.loads(settings.read_text())["benchmarks"]["digits"]["scenarios"]["server"]
    workers = server["sut"]["workers"]
    assert workers in {1, 2, cores}
    assert "[benchmarks.digits.sut]" in proc.stderr
    assert f"workers = {workers}" in proc.stderr
    evidence = re.search(r"server loadgen.target_qps: (\S+)", proc.stderr)
    assert evidence is not None and (probes / evidence.group(1)).is_dir()
