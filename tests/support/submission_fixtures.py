"""A real submission tree built once per session: two quick digits runs (Offline and
Server, performance + accuracy), a real Ed25519 key, ``suite package --unofficial``.

``passing_tree`` copies it and edits it into a tree that passes every rule (the quick
runs are short by design): durations, verdicts and compliance outputs are patched the
way a full-length run and the audit scripts would have left them. Tests mutate copies.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import run_cli

PASSPHRASE = "correct horse battery staple"
#: What a submitter of a CPU-only box writes: the probe fills none of number_of_nodes (never
#: probed) or the accelerator fields (no NVML here) with a value of its own.
SYSTEM_TOML = """\
[system]
status = "available"
system_type = "datacenter"
host_storage_capacity = "1 TB"
host_storage_type = "NVMe SSD"
host_memory_configuration = "2x 16 GB"
host_networking = "none"
host_networking_topology = "N/A"
cooling = "air"
host_network_card_count = "1"
number_of_nodes = "1"
accelerators_per_node = "0"
accelerator_model_name = "N/A"
accelerator_memory_capacity = "N/A"
accelerator_host_interconnect = "N/A"
accelerator_interconnect = "N/A"
accelerator_memory_configuration = "N/A"
"""


@dataclass
class Built:
    home: Path
    runs: Path
    tree: Path
    bundle: Path
    key: Path
    pub: Path
    package_output: str


def env() -> dict[str, str]:
    return {"SUITE_KEY_PASSPHRASE": PASSPHRASE}


#: Each test module that imports ``built`` gets its own fixture definition, so the
#: build is memoized here: the real runs happen once per session, not once per module.
_BUILT: dict[str, Built] = {}


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    if "tree" not in _BUILT:
        _BUILT["tree"] = _build(tmp_path_factory.mktemp("submission"))
    return _BUILT["tree"]


def _build(base: Path) -> Built:
    runs, out, keys = base / "runs", base / "submissions", base / "keys"
    runs.mkdir()
    for scenario in ("offline", "server"):
        done = run_cli("run", "--scenario", scenario, "--mode", "all", "--quick",
                       "--runs-dir", str(runs))
        assert done.returncode in (0, 2), done.stderr
    assert run_cli("keygen", "--out", str(keys), **env()).returncode == 0
    (base / "system.toml").write_text(SYSTEM_TOML)
    done = run_cli("package", "--submitter", "ORG", "--system", "box", "--runs-dir", str(runs),
                   "--out-dir", str(out), "--key", str(keys / "signing.key"), "--unofficial",
                   "--system-config", str(base / "system.toml"), **env())
    assert done.returncode == 0, done.stderr
    return Built(base, runs, out / "closed_ORG_box", out / "closed_ORG_box.tar.gz",
                 keys / "signing.key", keys / "signing.pub", done.stderr)


def stamp_precision(runs: Path, precision: str = "fp32", transform: str = "none",
                    *, force: bool = False) -> None:
    """Give each test's backend record a precision where the backend recorded none
    (``force``: overwrite it), to build runs of another precision for a test, or from
    a test backend that records none."""
    for path in sorted(runs.glob("*/result.json")):
        data = json.loads(path.read_text())
        changed = False
        for test in data["tests"]:
            backend = test.setdefault("backend", {})
            if force or not backend.get("precision"):
                backend["precision"], changed = precision, True
            if force or not backend.get("weight_transformations"):
                backend["weight_transformations"], changed = transform, True
        if changed:
            if not force:
                print(f"fixture: {path.parent.name} recorded no precision; stamped {precision}")
            path.write_text(json.dumps(data, indent=2))


RESULTS = "closed/ORG/results/box/digits"


def patch_log(path: Path, values: dict[str, object]) -> None:
    """Rewrite the first record of each key in a LoadGen detail log."""
    lines = []
    pending = dict(values)
    for line in path.read_text().splitlines():
        if line.startswith(":::MLLOG "):
            record = json.loads(line[len(":::MLLOG "):])
            if record.get("key") in pending:
                record["value"] = pending.pop(record["key"])
                line = ":::MLLOG " + json.dumps(record)
        lines.append(line)
    path.write_text("\n".join(lines) + "\n")


def make_passing(tree: Path) -> None:
    for scenario in ("Offline", "Server"):
        res = tree / RESULTS / scenario
        log = res / "performance/run_1/mlperf_log_detail.txt"
        patch_log(log, {"effective_min_duration_ms": 600000, "result_validity": "VALID",
                        "early_stopping_met": True, "effective_target_latency_ns": 10_000_000,
                        "result_99.00_percentile_latency_ns": 2_000_000})
        summary = res / "performance/run_1/mlperf_log_summary.txt"
        summary.write_text(summary.read_text().replace("Result is : INVALID",
                                                       "Result is : VALID"))
        for test in ("TEST01",):  # digits: TEST01 only (the round table's compliance_tests)
            (res / test / "performance/run_1").mkdir(parents=True)
            shutil.copyfile(log, res / test / "performance/run_1/mlperf_log_detail.txt")
            shutil.copyfile(summary, res / test / "performance/run_1/mlperf_log_summary.txt")
            (res / test / "verify_performance.txt").write_text("TEST PASS\n")
        (res / "TEST01/verify_accuracy.txt").write_text("TEST PASS\n")


@pytest.fixture
def passing_tree(built: Built, tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(built.tree, tree)
    make_passing(tree)
    return tree
