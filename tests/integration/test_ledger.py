"""The run ledger (`suite runs`) over real runs: VALID, INVALID, FAILED and INTERRUPTED
attempts from real LoadGen runs, a corrupt result.json that is named and skipped, grouping
by config digest with the best attempt marked, filters and --json; and the attempts a
packaged bundle records, shown by `suite audit`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from suite.errors import ConfigError
from suite.reports.ledger import Attempt, Filters, config_digest, list_runs
from tests.conftest import (
    REPO,
    cli_env,
    interrupt_once_loadgen_runs,
    run_cli,
    speed_free_offline,
)
from tests.support import submission_fixtures as fx

built = fx.built


# VALID on any machine (see SPEED_FREE_OFFLINE).
NULL_OFFLINE = ["--scenario", "offline", "--quick", "--backend", "null", *speed_free_offline()]


# 2 ms per sample, one sample per batch: about 1,000 samples/s at most against 3,000 QPS,
# so queries queue up past the latency bound (a slower machine is only more INVALID).
OVERLOADED_SERVER = ["--scenario", "server", "--quick", "--backend",
                     "tests.support.fault_backends:SlowBackend", "--set", "loadgen.target_qps=3000",
                     "--set", "sut.max_batch_size=1"]


BROKEN = ["--quick", "--backend", "tests.support.fault_backends:BrokenLoadBackend"]


LONG_SLOW = ["--scenario", "offline", "--backend", "tests.support.fault_backends:SlowBackend",
             "--set", "loadgen.min_duration_ms=120000", "--set", "sut.drain_grace_s=1",
             "--set", "loadgen.expected_qps=1000", "--set", "sut.max_batch_size=1"]


def _run(runs: Path, *args: str) -> Path:
    """One real `suite run`; returns the run directory it created."""
    before = {p for p in runs.iterdir()} if runs.is_dir() else set()
    done = run_cli("run", *args, "--runs-dir", str(runs))
    assert done.returncode in (0, 1, 2), done.stdout + done.stderr
    [new] = {p for p in runs.iterdir()} - before
    return new


def _interrupted(runs: Path) -> Path:
    """A real run stopped with Ctrl-C once LoadGen is running (as in
    tests/integration/test_faults.py)."""
    before = set(runs.iterdir())
    proc = subprocess.Popen([sys.executable, "-m", "suite", "run", *LONG_SLOW, "--runs-dir",
                             str(runs)], cwd=REPO, env=cli_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    interrupt_once_loadgen_runs(proc, runs, before)
    assert proc.returncode == 130
    [new] = set(runs.iterdir()) - before
    return new


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    runs = tmp_path_factory.mktemp("ledger") / "runs"
    runs.mkdir()
    made = {"valid_a": _run(runs, *NULL_OFFLINE), "valid_b": _run(runs, *NULL_OFFLINE),
            "invalid": _run(runs, *OVERLOADED_SERVER), "failed": _run(runs, *BROKEN),
            "interrupted": _interrupted(runs)}
    corrupt = runs / "20200101T000000Z_digits_offline_performance"
    shutil.copytree(made["valid_a"], corrupt)
    text = (corrupt / "result.json").read_text()
    (corrupt / "result.json").write_text(text[: len(text) // 2])  # cut off mid-write
    killed = runs / "20200101T000001Z_digits_server_performance"
    killed.mkdir()
    (killed / "STATUS").write_text("RUNNING since 2020-01-01T00:00:01+00:00: no result yet\n")
    (runs / "tune-probes").mkdir()  # not a run directory: neither listed nor named
    made.update(corrupt=corrupt, killed=killed, root=runs)
    return made


def _by_id(ledger_rows: list[Attempt]) -> dict[str, Attempt]:
    return {row.run_id: row for row in ledger_rows}


def test_every_status_is_listed_and_unreadable_runs_are_named(runs: dict[str, Path]) -> None:
    ledger = list_runs(runs["root"])
    rows = _by_id(ledger.rows)
    expected = {"valid_a": "VALID", "valid_b": "VALID", "invalid": "INVALID",
                "failed": "FAILED", "interrupted": "INTERRUPTED"}
    assert {rows[runs[k].name].status for k in expected} == set(expected.values())
    for key, status in expected.items():
        assert rows[runs[key].name].status == status, key
    assert len(ledger.rows) == 5
    skipped = {Path(s.path).name: s.why for s in ledger.skipped}
    assert set(skipped) == {runs["corrupt"].name, runs["killed"].name}
    assert "not valid JSON" in skipped[runs["corrupt"].name]
    assert "no result.json" in skipped[runs["killed"].name]
    assert "RUNNING since" in skipped[runs["killed"].name]
    invalid = rows[runs["invalid"].name]
    assert invalid.metric is not None and invalid.metric.unit == "samples/s"
    assert rows[runs["failed"].name].metric is None  # no measurement without a verdict


def test_same_config_attempts_share_a_digest_and_the_best_is_marked(
        runs: dict[str, Path]) -> None:
    ledger = list_runs(runs["root"])
    rows = _by_id(ledger.rows)
    a, b = rows[runs["valid_a"].name], rows[runs["valid_b"].name]
    assert a.config_digest is not None and a.config_digest == b.config_digest
    others = [rows[runs[k].name].config_digest for k in ("invalid", "failed", "interrupted")]
    assert a.config_digest not in others and len(set(others)) == 3
    [pair] = [g for g in ledger.groups() if len(g) == 2]
    assert {r.run_id for r in pair} == {a.run_id, b.run_id}
    assert a.metric is not None and b.metric is not None
    assert a.metric.value is not None and b.metric.value is not None
    best = a if a.metric.value >= b.metric.value else b
    assert [r.run_id for r in pair if r.best] == [best.run_id]


def test_the_digest_ignores_where_a_run_went_but_not_what_it_ran(
        runs: dict[str, Path]) -> None:
    config = json.loads((runs["valid_a"] / "config.json").read_text())
    moved = {**config, "runs_dir": "/elsewhere", "provenance": {}}
    assert config_digest(moved) == config_digest(config)
    changed = {**config, "sut": {**config["sut"], "workers": config["sut"]["workers"] + 1}}
    assert config_digest(changed) != config_digest(config)


def test_filters(runs: dict[str, Path]) -> None:
    root = runs["root"]
    assert [r.run_id for r in list_runs(root, Filters(status="invalid")).rows] == [
        runs["invalid"].name]
    assert {r.status for r in list_runs(root, Filters(scenario="server")).rows} == {"INVALID"}
    assert len(list_runs(root, Filters(backend="null")).rows) == 2
    assert [r.status for r in list_runs(root, Filters(
        backend="tests.support.fault_backends:BrokenLoadBackend")).rows] == ["FAILED"]
    assert list_runs(root, Filters(mode="accuracy")).rows == []
    assert len(list_runs(root, Filters(since="2020-01-01")).rows) == 5
    assert list_runs(root, Filters(since="2999-01-01T00:00:00Z")).rows == []
    # best-of-N is decided before filtering: a filter never promotes a worse attempt
    everything = {r.run_id: r.best for r in list_runs(root).rows}
    assert {r.run_id: r.best for r in list_runs(root, Filters(benchmark="digits")).rows} \
        == everything
    with pytest.raises(ConfigError, match="--status BOGUS"):
        list_runs(root, Filters(status="BOGUS"))
    with pytest.raises(ConfigError, match="--since yesterday"):
        list_runs(root, Filters(since="yesterday"))


def test_cli_json_table_and_errors(runs: dict[str, Path]) -> None:
    root = runs["root"]
    done = run_cli("runs", str(root), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert len(data["rows"]) == 5 and len(data["skipped"]) == 2
    assert sum(len(g) for g in data["groups"]) == 5
    assert f"skipped {runs['corrupt']}: result.json is not valid JSON" in done.stderr
    done = run_cli("runs", str(root), "--status", "FAILED", "--json")
    assert [r["status"] for r in json.loads(done.stdout)["rows"]] == ["FAILED"]
    table = run_cli("runs", str(root))
    assert table.returncode == 0
    for word in ("VALID", "INVALID", "FAILED", "INTERRUPTED", "samples/s"):
        assert word in table.stdout
    missing = run_cli("runs", str(root / "nope"))
    assert missing.returncode == 1
    assert "does not exist" in missing.stderr and "Traceback" not in missing.stderr


def test_a_bundle_records_every_attempt_and_the_audit_lists_them(
        built: fx.Built, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    shutil.copytree(built.runs, runs)
    again = _run(runs, "--scenario", "offline", "--mode", "all", "--quick")  # a second try
    failed = _run(runs, "--scenario", "offline", "--mode", "all", *BROKEN)
    (runs / "20200101T000000Z_broken").mkdir()
    (runs / "20200101T000000Z_broken" / "result.json").write_text("{")
    out = tmp_path / "out"
    done = run_cli("package", "--submitter", "ORG", "--system", "box", "--runs-dir",
                   str(runs), "--out-dir", str(out), "--key", str(built.key), "--unofficial",
                   "--system-config", str(built.home / "system.toml"), **fx.env())
    assert done.returncode == 0, done.stderr
    bundle = out / "closed_ORG_box.tar.gz"
    with tarfile.open(bundle) as tar:
        records = {m.name: json.loads(tar.extractfile(m).read())  # type: ignore[union-attr]
                   for m in tar if m.name.endswith("/attempts.json")}
    assert set(records) == {"evidence/closed/ORG/results/box/digits/Offline/attempts.json",
                            "evidence/closed/ORG/results/box/digits/Server/attempts.json"}
    offline = records["evidence/closed/ORG/results/box/digits/Offline/attempts.json"]
    ids = {a["run_id"]: a for a in offline["attempts"]}
    originals = [p.name for p in built.runs.iterdir() if "offline" in p.name]
    # the failed attempt ran another backend: another configuration key, not listed here
    assert set(ids) == {*originals, again.name} and failed.name not in ids
    assert {a["status"] for a in offline["attempts"]} <= {"VALID", "INVALID"}
    assert [a["run_id"] for a in offline["attempts"] if a["chosen"]] == [offline["chosen"]]
    assert offline["unreadable"][0]["run"] == "20200101T000000Z_broken"
    server = records["evidence/closed/ORG/results/box/digits/Server/attempts.json"]
    assert {a["scenario"] for a in server["attempts"]} == {"server"}

    report = tmp_path / "audit.json"
    audit = run_cli("audit", str(bundle), "--key", str(built.pub), "--out", str(report),
                    "--runs-dir", str(tmp_path / "audit_runs"), timeout=600)
    assert audit.returncode in (0, 2), audit.stdout + audit.stderr
    attempts = {r["result"]: r for r in json.loads(report.read_text())["attempts"]}
    listed = {a["run_id"] for a in attempts["closed/ORG/results/box/digits/Offline"]["attempts"]}
    assert listed == set(ids)
    assert attempts["closed/ORG/results/box/digits/Offline"]["chosen"] == offline["chosen"]
    assert "attempts behind each result" in audit.stdout
    assert audit.stdout.count("CHOSEN") == 2  # one chosen attempt per packaged result
    assert "unreadable run" in audit.stdout
    assert attempts["closed/ORG/results/box/digits/Offline"]["unreadable"][0].startswith(
        "20200101T000000Z_broken: result.json is not valid JSON")

