"""A v6.1 submission tree in the endpoint benchmarker's format (``mlcommons/endpoints``),
for ``suite check``'s tests, and the edits that mutate it.

Each result directory holds what the tool writes into its report directory
(``commands/benchmark/execute.py``, ``metrics/report.py``, ``commands/benchmark/accuracy.py``
@ ea33275): ``config.yaml`` (the run's config, dumped), ``performance/result_summary.json``
(``Report.to_json``: counts, ``duration_ns``, ``qps``/``tps`` and the ``ttft``/``tpot``/
``latency``/``output_sequence_lengths`` rollups with their ``early_stopping_percentiles``),
``performance/final_snapshot.json`` (the metrics snapshot; the checker does not read it),
``accuracy/accuracy_results.json`` (one entry per scored dataset) and, for a model with
TEST06, the audit run's ``audit_consistency_output_test.json`` (``compliance/result.py``)
in ``audit/``. No LoadGen log: that absence is what
makes the official checker (``loader.py``) read a result in this format. The values are
the round's (seeds, 600 s, dataset sizes, bounds) so that the baseline passes.

    python -m tests.support.endpoint_trees /tmp/eptree
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

SYSTEM_DIR = "closed/ORG/results/box"
LLAMA_OFF = f"{SYSTEM_DIR}/llama3.1-8b/Offline"
LLAMA_SRV = f"{SYSTEM_DIR}/llama3.1-8b/Server"
R1_OFF = f"{SYSTEM_DIR}/deepseek-r1/Offline"
R1_INT = f"{SYSTEM_DIR}/deepseek-r1/Interactive"
RESULTS = (LLAMA_OFF, LLAMA_SRV, R1_OFF, R1_INT)
SUMMARY = "performance/result_summary.json"
ACCURACY = "accuracy/accuracy_results.json"
CONFIG = "config.yaml"
AUDIT = "audit/audit_consistency_output_test.json"
#: v6.1's seeds (run_rules/v6.1.toml [seeds]): the endpoint tool has no qsl seed.
SAMPLE_SEED = 2747215439041700203
SCHEDULE_SEED = 16159082839903944936
_MODEL = {"llama3.1-8b": ("meta-llama/Llama-3.1-8B-Instruct", 13368, "cnn_dailymail"),
          "deepseek-r1": ("deepseek-ai/DeepSeek-R1", 4388, "deepseek_r1_eval")}


def _config(model: str, scenario: str) -> str:
    name, samples, dataset = _MODEL[model]
    online = scenario != "Offline"
    pattern = "    type: poisson\n    target_qps: 12.5\n" if online else \
        "    type: max_throughput\n    target_qps: null\n"
    return (f"name: {scenario.lower()}-{model}\nversion: '1.0'\n"
            f"type: {'online' if online else 'offline'}\n"
            f"model_params:\n  name: {name}\n  streaming: '{'on' if online else 'off'}'\n"
            f"  max_new_tokens: 1024\n"
            f"datasets:\n- name: {dataset}\n  type: accuracy\n  samples: {samples}\n"
            f"- name: {dataset}\n  type: performance\n  samples: {samples}\n"
            f"settings:\n  runtime:\n    min_duration_ms: 600000\n    max_duration_ms: 0\n"
            f"    n_samples_to_issue: {samples}\n"
            f"    scheduler_random_seed: {SCHEDULE_SEED}\n"
            f"    dataloader_random_seed: {SAMPLE_SEED}\n"
            f"  load_pattern:\n{pattern}"
            f"endpoint_config:\n  endpoints:\n  - http://localhost:8000\n  api_key: null\n"
            f"report_dir: logs/{model}-{scenario.lower()}\n")


def _series(p99: float, avg: float) -> dict[str, Any]:
    grid = {"99.9": p99 * 1.1, "99.0": p99, "97.0": p99 * 0.9, "95.0": p99 * 0.8,
            "90.0": p99 * 0.7, "80.0": p99 * 0.6, "75.0": p99 * 0.55, "50.0": avg}
    return {"total": avg * 1000, "min": avg / 4, "max": p99 * 1.2, "median": avg, "avg": avg,
            "std_dev": avg / 3, "percentiles": {**grid, "25.0": avg / 2, "10.0": avg / 3},
            "early_stopping_percentiles": {k: v * 1.01 for k, v in grid.items()},
            "histogram": {"buckets": [[avg / 4, p99 * 1.2]], "counts": [1000]}}


def _summary(model: str, scenario: str) -> dict[str, Any]:
    samples = _MODEL[model][1]
    interactive = scenario == "Interactive"
    ttft = 1.0e9 if model == "deepseek-r1" and interactive else 0.4e9
    tpot = 10e6 if interactive else 25e6
    duration = 660_000_000_000
    osl = 1200.0 if model == "deepseek-r1" else 120.0
    return {
        "version": "0.4.1", "git_sha": "ea33275", "test_started_at": 0,
        "n_samples_issued": samples * 3, "n_samples_completed": samples * 3,
        "n_samples_failed": 0, "duration_ns": duration, "state": "complete",
        "complete": True, "ttft": _series(ttft, ttft / 3), "tpot": _series(tpot, tpot / 2),
        "latency": _series(30e9, 9e9),
        "output_sequence_lengths": {"total": osl * samples * 3, "min": 1, "max": 4096,
                                    "median": osl, "avg": osl, "std_dev": 40.0},
        "input_sequence_lengths": {"total": 800 * samples * 3, "min": 20, "max": 3000,
                                   "median": 800, "avg": 800.0, "std_dev": 100.0},
        "legacy_loadgen_window_duration_ns": duration if scenario != "Offline" else None,
        "qps": samples * 3 / (duration / 1e9),
        "tps": osl * samples * 3 / (duration / 1e9),
        "finish_reason_counts": {"stop": samples * 3, "length": 0},
        "run_config": {"load_pattern": "poisson" if scenario != "Offline" else
                       "max_throughput", "scheduler_random_seed": SCHEDULE_SEED,
                       "dataloader_random_seed": SAMPLE_SEED},
    }


def _accuracy(model: str) -> dict[str, Any]:
    samples = _MODEL[model][1]
    score: Any = {"rouge1": "38.7792", "rouge2": "15.9075", "rougeL": "24.4957",
                  "rougeLsum": "35.7930", "gen_len": "8167644", "gen_num": samples} \
        if model == "llama3.1-8b" else 81.3583
    return {"average_accuracy": 38.7792 if model == "llama3.1-8b" else 81.3583,
            "accuracy_scores": [{
                "dataset_name": _MODEL[model][2], "extractor": "identity_extractor",
                "ground_truth_column": "ground_truth", "score": score,
                "unit_samples": samples, "num_repeats": 1, "total_samples": samples,
                "duration_s": 512.3, "complete": True, "dataset_type": "accuracy",
                "response_counts": {"issued": samples, "scored": samples, "empty": 0,
                                    "missing": 0}}]}


def _system() -> dict[str, Any]:
    from suite.config.rules import load_rules
    from suite.paths import find_paths

    sub = load_rules(find_paths(), "v6.1").submission
    assert sub is not None
    data: dict[str, Any] = {k: "N/A" for k in sub.system_required_fields}
    data.update(division="closed", submitter="ORG", status="available",
                system_type="datacenter", number_of_nodes="1", accelerators_per_node="8",
                system_name="ORG box")
    return data


def build_tree(root: Path) -> Path:
    """The passing baseline: llama3.1-8b Offline + Server, deepseek-r1 Offline +
    Interactive, all in the endpoint format, under ``root`` (returned)."""
    sub = root / "closed" / "ORG"
    (sub / "src").mkdir(parents=True)
    (sub / "src" / "README.md").write_text("the endpoint benchmarker's configs\n")
    (sub / "systems").mkdir()
    (sub / "systems" / "box.json").write_text(json.dumps(_system(), indent=1))
    for rel in RESULTS:
        model, scenario = rel.split("/")[-2:]
        res = root / rel
        (res / "performance").mkdir(parents=True)
        (res / "accuracy").mkdir()
        (res / CONFIG).write_text(_config(model, scenario))
        (res / SUMMARY).write_text(json.dumps(_summary(model, scenario), indent=2))
        (res / "performance" / "final_snapshot.json").write_text(json.dumps(
            {"counter": 7, "timestamp_ns": 1, "state": "complete", "n_pending_tasks": 0,
             "metrics": []}))
        (res / ACCURACY).write_text(json.dumps(_accuracy(model), indent=2))
        (res / "audit").mkdir()
        # compliance/result.py write_result: the record, then the validator-facing line
        (res / AUDIT).write_text(json.dumps({"test": "consistency_output_test",
                                             "passed": True, "checks": []}))
        (res / "audit" / "verify_CONSISTENCY_OUTPUT_TEST.txt").write_text(
            "Performance check pass: True\n")
        (res / "measurements.json").write_text(json.dumps({
            "input_data_types": "bf16", "retraining": "no",
            "starting_weights_filename": "hf", "weight_data_types": "fp8",
            "weight_transformations": "quantization"}))
        (res / "README.md").write_text("inference-endpoint benchmark from-config -c "
                                       "config.yaml\n")
    return root


# --- edits -------------------------------------------------------------------------------

def edit_json(rel: str, dotted: str, value: Any) -> Callable[[Path], None]:
    """Set (or, with ``DELETE``, remove) ``a.b.c`` in a JSON file of the tree."""
    def mutate(tree: Path) -> None:
        path = tree / rel
        data = json.loads(path.read_text())
        *parents, last = dotted.split("|")
        node = data
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if value is DELETE:
            del node[last]
        else:
            node[last] = value
        path.write_text(json.dumps(data))
    return mutate


DELETE = object()


def edit_text(rel: str, old: str, new: str) -> Callable[[Path], None]:
    def mutate(tree: Path) -> None:
        path = tree / rel
        text = path.read_text()
        assert old in text, (rel, old)
        path.write_text(text.replace(old, new))
    return mutate


def delete(rel: str) -> Callable[[Path], None]:
    def mutate(tree: Path) -> None:
        path = tree / rel
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return mutate


def write(rel: str, text: str) -> Callable[[Path], None]:
    def mutate(tree: Path) -> None:
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
    return mutate


def rename(rel: str, new: str) -> Callable[[Path], None]:
    def mutate(tree: Path) -> None:
        (tree / new).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).rename(tree / new)
    return mutate


def copy(rel: str, new: str) -> Callable[[Path], None]:
    def mutate(tree: Path) -> None:
        shutil.copytree(tree / rel, tree / new)
    return mutate


def both(*edits: Callable[[Path], None]) -> Callable[[Path], None]:
    def mutate(tree: Path) -> None:
        for edit in edits:
            edit(tree)
    return mutate


def rekey(rel: str, series: str, old: str, new: str) -> Callable[[Path], None]:
    """Rename a key of a series' ``early_stopping_percentiles`` map."""
    def mutate(tree: Path) -> None:
        path = tree / rel
        data = json.loads(path.read_text())
        grid = data[series]["early_stopping_percentiles"]
        grid[new] = grid.pop(old)
        path.write_text(json.dumps(data))
    return mutate


_ES = "early_stopping_percentiles"
WHISPER = f"{SYSTEM_DIR}/whisper/Offline"

#: name -> (edit of the baseline, the result it breaks ("" where the official checker
#: passes the tree), the rule suite check reports there, whether only strict mode fails).
#: The official verdicts are recorded in tests/unit/checker/test_endpoints_format.py.
MUTATIONS: dict[str, tuple[Callable[[Path], None], str, str | None, bool]] = {
    "result_summary.json missing": (delete(f"{LLAMA_OFF}/{SUMMARY}"), LLAMA_OFF,
                                    "EP-ARTIFACTS", False),
    "accuracy_results.json missing": (delete(f"{LLAMA_SRV}/{ACCURACY}"), LLAMA_SRV,
                                      "ACC-TARGET", False),
    "config.yaml missing": (delete(f"{R1_OFF}/{CONFIG}"), R1_OFF, "EP-ARTIFACTS", False),
    "config.yml instead of config.yaml": (rename(f"{R1_OFF}/{CONFIG}", f"{R1_OFF}/config.yml"),
                                          "", None, False),
    "result_summary.json not JSON": (write(f"{R1_INT}/{SUMMARY}", "{"), R1_INT,
                                     "EP-ARTIFACTS", False),
    "accuracy_results.json not JSON": (write(f"{R1_OFF}/{ACCURACY}", "{"), R1_OFF,
                                       "ACC-TARGET", False),
    "accuracy_results.json a list": (write(f"{R1_INT}/{ACCURACY}", "[]"), R1_INT,
                                     "EP-ARTIFACTS", False),
    "accuracy score missing": (edit_json(f"{LLAMA_OFF}/{ACCURACY}", "accuracy_scores|0|score",
                                         DELETE), LLAMA_OFF, "ACC-TARGET", False),
    "accuracy_scores empty": (edit_json(f"{LLAMA_SRV}/{ACCURACY}", "accuracy_scores", []),
                              LLAMA_SRV, "ACC-TARGET", False),
    "rouge1 below the target": (edit_json(f"{LLAMA_OFF}/{ACCURACY}",
                                          "accuracy_scores|0|score|rouge1", "30.0"),
                                LLAMA_OFF, "ACC-TARGET", True),
    "exact_match below the target": (edit_json(f"{R1_OFF}/{ACCURACY}",
                                               "accuracy_scores|0|score", 70.0),
                                     R1_OFF, "ACC-TARGET", True),
    "too few accuracy samples": (edit_json(f"{LLAMA_OFF}/{ACCURACY}",
                                           "accuracy_scores|0|total_samples", 13000),
                                 LLAMA_OFF, "ACC-DATASET", False),
    "samples counted from response_counts.issued": (edit_json(
        f"{LLAMA_OFF}/{ACCURACY}", "accuracy_scores|0|total_samples", DELETE), "", None, False),
    "only a performance dataset scored": (edit_json(
        f"{LLAMA_OFF}/{ACCURACY}", "accuracy_scores|0|dataset_type", "performance"),
        LLAMA_OFF, "ACC-DATASET", False),
    "a model not allowed in the format (whisper)": (copy(LLAMA_OFF, WHISPER), WHISPER,
                                                    "EP-MODEL", False),
    "min_duration_ms under 600 s": (edit_text(f"{LLAMA_OFF}/{CONFIG}", "min_duration_ms: "
                                              "600000", "min_duration_ms: 60000"),
                                    LLAMA_OFF, "PERF-DURATION", False),
    "result_summary.json's min_duration_ms wins over config.yaml": (edit_json(
        f"{LLAMA_OFF}/{SUMMARY}", "min_duration_ms", 1000), LLAMA_OFF, "PERF-DURATION", False),
    "dataloader seed wrong": (edit_text(f"{LLAMA_SRV}/{CONFIG}", f"dataloader_random_seed: "
                                        f"{SAMPLE_SEED}", "dataloader_random_seed: 42"),
                              LLAMA_SRV, "PERF-SEEDS", False),
    "scheduler seed wrong": (edit_text(f"{R1_INT}/{CONFIG}", f"scheduler_random_seed: "
                                       f"{SCHEDULE_SEED}", "scheduler_random_seed: 42"),
                             R1_INT, "PERF-SEEDS", False),
    "seed quoted as a string": (edit_text(f"{R1_OFF}/{CONFIG}", f"dataloader_random_seed: "
                                          f"{SAMPLE_SEED}",
                                          f"dataloader_random_seed: '{SAMPLE_SEED}'"),
                                R1_OFF, "PERF-SEEDS", False),
    "Server TTFT p99 over 2 s": (edit_json(f"{LLAMA_SRV}/{SUMMARY}", f"ttft|{_ES}|99.0",
                                           2.5e9), LLAMA_SRV, "PERF-TOKEN-BOUNDS", False),
    "Server TPOT p99 at the bound": (edit_json(f"{LLAMA_SRV}/{SUMMARY}", f"tpot|{_ES}|99.0",
                                               100_000_000), LLAMA_SRV, "PERF-TOKEN-BOUNDS",
                                     False),
    "Interactive TTFT p99 1.6 s (Server's 2 s bound would pass)": (edit_json(
        f"{R1_INT}/{SUMMARY}", f"ttft|{_ES}|99.0", 1.6e9), R1_INT, "PERF-TOKEN-BOUNDS", False),
    "TTFT early-stopping map missing": (edit_json(f"{LLAMA_SRV}/{SUMMARY}", f"ttft|{_ES}",
                                                  DELETE), LLAMA_SRV, "PERF-TOKEN-BOUNDS",
                                        False),
    "TTFT p99 keyed '99' (read as 99.0)": (rekey(f"{LLAMA_SRV}/{SUMMARY}", "ttft", "99.0",
                                                 "99"), "", None, False),
    "TTFT p99 keyed '99.00' (not read)": (rekey(f"{R1_INT}/{SUMMARY}", "ttft", "99.0",
                                                "99.00"), R1_INT, "PERF-TOKEN-BOUNDS", False),
    "Offline TTFT p99 over 2 s (not bounded)": (edit_json(
        f"{LLAMA_OFF}/{SUMMARY}", f"ttft|{_ES}|99.0", 5e9), "", None, False),
    "LLM request latency p99 over 60 s (TTFT/TPOT only)": (edit_json(
        f"{R1_INT}/{SUMMARY}", f"latency|{_ES}|99.0", 9e10), "", None, False),
    "Server qps missing (inferred from samples issued / duration)": (edit_json(
        f"{LLAMA_SRV}/{SUMMARY}", "qps", DELETE), "", None, False),
    "Server tps missing (the LLM figure)": (edit_json(f"{LLAMA_SRV}/{SUMMARY}", "tps", DELETE),
                                            LLAMA_SRV, "EP-ARTIFACTS", False),
    "Offline tps missing (the Offline figure is inferred)": (edit_json(
        f"{LLAMA_OFF}/{SUMMARY}", "tps", DELETE), "", None, False),
    "Offline duration_ns missing": (edit_json(f"{LLAMA_OFF}/{SUMMARY}", "duration_ns",
                                              DELETE), LLAMA_OFF, "EP-ARTIFACTS", False),
    "an online run in the Offline directory": (edit_text(f"{R1_OFF}/{CONFIG}", "type: "
                                                         "offline", "type: online"),
                                               R1_OFF, "PERF-SCENARIO", False),
    "failed samples": (edit_json(f"{LLAMA_SRV}/{SUMMARY}", "n_samples_failed", 12),
                       LLAMA_SRV, "PERF-ERRORS", True),
    "an interrupted run": (both(edit_json(f"{R1_OFF}/{SUMMARY}", "state", "interrupted"),
                                edit_json(f"{R1_OFF}/{SUMMARY}", "complete", False)),
                           R1_OFF, "PERF-VALIDITY", True),
    "TEST06 audit says passed: false": (edit_json(f"{R1_OFF}/{AUDIT}", "passed", False),
                                        R1_OFF, "COMP-PASS", False),
    "TEST06 audit of another test": (edit_json(f"{LLAMA_SRV}/{AUDIT}", "test",
                                               "output_caching_test"), LLAMA_SRV,
                                     "COMP-PASS", False),
    "TEST06 audit not JSON": (write(f"{R1_INT}/{AUDIT}", "{"), R1_INT, "COMP-PASS", False),
    "TEST06 audit missing (not required)": (delete(f"{LLAMA_SRV}/audit"), "", None, False),
    "README.md missing": (delete(f"{R1_INT}/README.md"), R1_INT, "MEAS-FILES", False),
    "measurements.json missing": (delete(f"{LLAMA_OFF}/measurements.json"), LLAMA_OFF,
                                  "MEAS-JSON", False),
    "Server directory missing (one of Server, Interactive)": (delete(LLAMA_SRV), LLAMA_OFF,
                                                               "TREE-SCENARIOS", False),
}


if __name__ == "__main__":
    print(build_tree(Path(sys.argv[1])))
