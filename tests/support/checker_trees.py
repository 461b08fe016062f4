"""A passing submission tree for the checker's rule tests, and the mutations that break
each rule."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from tests.support import submission_fixtures as fx

RESULTS = fx.RESULTS


patch_log = fx.patch_log




OFF, SRV = f"{RESULTS}/Offline", f"{RESULTS}/Server"


SYSTEM = "closed/ORG/systems/box.json"


def _sys(**changes: object) -> Callable[[Path], None]:
    def mutate(tree: Path) -> None:
        path = tree / SYSTEM
        data = json.loads(path.read_text())
        for key, value in changes.items():
            if value is None:
                data.pop(key)
            else:
                data[key] = value
        path.write_text(json.dumps(data))
    return mutate


def _log(rel: str, **values: object) -> Callable[[Path], None]:
    return lambda tree: patch_log(tree / rel, {k.replace("__", "."): v
                                               for k, v in values.items()})


def _write(rel: str, text: str) -> Callable[[Path], None]:
    return lambda tree: (tree / rel).write_text(text)


def _delete(rel: str) -> Callable[[Path], None]:
    def mutate(tree: Path) -> None:
        path = tree / rel
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return mutate


PERF = f"{OFF}/performance/run_1/mlperf_log_detail.txt"


SPERF = f"{SRV}/performance/run_1/mlperf_log_detail.txt"


ACC = f"{OFF}/accuracy/mlperf_log_detail.txt"


#: rule id -> (mutation, the result it must land on; None = a tree-level finding)
MUTATIONS: dict[str, tuple[Callable[[Path], None], str | None]] = {
    "TREE-LAYOUT": (_write("stray.bin", "x"), None),
    "TREE-SRC": (_delete("closed/ORG/src"), OFF),
    "TREE-SCENARIOS": (_delete(SRV), OFF),
    "SYS-JSON": (_write(SYSTEM, "{not json"), OFF),
    "SYS-FIELDS": (_sys(cooling=None), SRV),
    "SYS-STATUS": (_sys(status="soon"), OFF),
    "SYS-TYPE": (_sys(system_type="cloud"), OFF),
    "SYS-DIVISION": (_sys(division="open"), OFF),
    "SYS-SUBMITTER": (_sys(submitter="other"), OFF),
    "SYS-COUNTS": (_sys(accelerators_per_node="N/A"), OFF),
    "SYS-NETWORK": (_sys(is_network="true"), OFF),
    "MEAS-JSON": (_write(f"{OFF}/measurements.json", '{"retraining": ""}'), OFF),
    "MEAS-FILES": (_write(f"{OFF}/README.md", ""), OFF),
    "PERF-LOG": (_delete(PERF), OFF),
    "PERF-SUMMARY": (_delete(f"{SRV}/performance/run_1/mlperf_log_summary.txt"), SRV),
    "PERF-SCENARIO": (_log(PERF, effective_scenario="Server"), OFF),
    "PERF-SEEDS": (_log(PERF, effective_qsl_rng_seed=1), OFF),
    "PERF-SAMPLE-COUNT": (_log(PERF, effective_performance_sample_count=10), OFF),
    "PERF-DURATION": (_log(SPERF, effective_min_duration_ms=60000), SRV),
    "PERF-MIN-QUERIES": (_log(PERF, effective_min_query_count=0), OFF),
    "PERF-OFFLINE-SPQ": (_log(PERF, effective_samples_per_query=100), OFF),
    "PERF-EARLY-STOPPING": (_log(SPERF, early_stopping_met=False), SRV),
    "PERF-LATENCY": (_log(SPERF, effective_target_latency_ns=20_000_000), SRV),
    "PERF-LATENCY-MEASURED": (_log(SPERF, result_99__00_percentile_latency_ns=3e7), SRV),
    "PERF-VALIDITY": (_log(PERF, result_validity="INVALID"), OFF),
    "PERF-ERRORS": (lambda t: (t / PERF).open("a").write(
        ':::MLLOG {"key": "error_runtime", "value": "boom", "metadata": {"is_error": true}}\n'),
        OFF),
    "ACC-LOG": (_delete(ACC), OFF),
    "ACC-TARGET": (_write(f"{OFF}/accuracy/accuracy.txt",
                          "accuracy=50.000%, good=225, total=450\nhash=ab12\n"), OFF),
    "ACC-HASH": (_write(f"{OFF}/accuracy/accuracy.txt", "accuracy=98.667%\n"), OFF),
    "ACC-TRUNCATED": (_write(f"{OFF}/accuracy/mlperf_log_accuracy.json", "[" + " " * 20000
                             + "]"), OFF),
    "ACC-DATASET": (_log(ACC, effective_accuracy_sample_count=100), OFF),
    "ACC-ERRORS": (lambda t: (t / ACC).open("a").write(
        ':::MLLOG {"key": "error_x", "value": "bad", "metadata": {"is_error": true}}\n'), OFF),
    "COMP-DIR": (_delete(f"{SRV}/TEST01"), SRV),
    "COMP-PASS": (_write(f"{OFF}/TEST01/verify_accuracy.txt", "TEST FAIL\n"), OFF),
}
