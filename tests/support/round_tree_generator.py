"""Build a valid submission tree of a whole round from its table (``run_rules/<round>.toml``)
and real LoadGen logs, for ``suite check`` to pass and for tests to mutate.

The logs are the real LoadGen's: one short run per LoadGen scenario (and one accuracy
run) on a null SUT, each in its own process (LoadGen runs one test per process). They are
then rewritten the way a full-length official run logs them: the round's seeds, 600 s,
the model's sample counts, bounds and, for LLMs, the token latencies. Every model of the
round gets every scenario its row allows, on a datacenter, an edge or a "datacenter,edge"
system; an open-division submitter maps a custom directory through model_mapping.json;
one result carries a power measurement.

    python -m tests.support.round_tree_generator tree v6.0 /tmp/tree
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
_PREFIX = ":::MLLOG "
_SCENARIOS = ("SingleStream", "MultiStream", "Server", "Offline")
LOGGED = {"SingleStream": "SingleStream", "MultiStream": "MultiStream", "Server": "Server",
          "Offline": "Offline", "Interactive": "Server"}
#: One accuracy.txt line per metric that the round's ACC_PATTERN reads.
METRIC_LINES = {
    "acc": "accuracy={v}%, good=1, total=1", "mAP": "mAP={v}", "AUC": "AUC={v}",
    "F1": '{{"exact_match": 80.0, "f1": {v}}}', "ACCURACY": "Word Error Rate: 1.0%, "
    "accuracy={v}%", "DICE": "Accuracy: mean = {v}", "ROUGE1": "{{'rouge1': {v}}}",
    "ROUGE2": "{{'rouge2': {v}}}", "ROUGEL": "{{'rougeL': {v}}}",
    "ROUGELSUM": "{{'rougeLsum': {v}}}", "GEN_LEN": "{{'gen_len': {v}}}",
    "TOKENS_PER_SAMPLE": "{{'tokens_per_sample': {v}}}", "CLIP_SCORE": "{{'CLIP_SCORE': {v}}}",
    "FID_SCORE": "{{'FID_SCORE': {v}}}", "gsm8k_accuracy": "{{'gsm8k': {v}}}",
    "mbxp_accuracy": "{{'mbxp': {v}}}", "exact_match": "{{'exact_match': {v}}}",
    "vbench_score": "{{'vbench_score': {v}}}", "F1_HIERARCHICAL": '{{"f1": {v}}}',
    "DLRM_NE": "metric/lifetime_ne/rating: {v}", "DLRM_ACC": "metric/lifetime_accuracy/rating: {v}",
    "DLRM_AUC": "metric/lifetime_gauc/rating: {v}", "E2E_ACCURACY": "Accuracy: {v}",
}
TEST06_PASS = ("First token check pass: True\nEOS check pass: True\n"
               "Sample length check pass: True\nTEST06 verification complete\n")
#: A TEST06 accuracy log that passes the checks recomputed from it: int32 token ids, the
#: first token reported, the count matching, no EOS padding (the checker reads the log).
TEST06_LOG = json.dumps([{"seq_id": i, "qsl_idx": i, "data": "05000000" "07000000",
                          "token_data": "05000000", "token_count": 2}
                         for i in range(3)]).encode()
OPEN_DIR = "my-custom-llm"  # mapped to OPEN_MODEL by the open submitter's model_mapping.json


# --- real LoadGen logs -------------------------------------------------------------------

def _loadgen_child(scenario: str, mode: str, outdir: str) -> None:
    """One LoadGen test on a null SUT (runs in its own process)."""
    from itertools import repeat

    import mlperf_loadgen as lg
    import numpy as np

    payload = np.zeros(1, dtype=np.int32)

    def issue(samples: list[Any]) -> None:
        n = len(samples)
        lg.QuerySamplesComplete(list(map(lg.QuerySampleResponse, [s.id for s in samples],
                                         repeat(payload.ctypes.data, n), repeat(4, n))))

    settings = lg.TestSettings()
    settings.scenario = getattr(lg.TestScenario, scenario)
    settings.mode = lg.TestMode.AccuracyOnly if mode == "accuracy" else \
        lg.TestMode.PerformanceOnly
    settings.min_duration_ms = 100
    settings.min_query_count = 64
    settings.server_target_qps = 500
    settings.offline_expected_qps = 1000
    settings.multi_stream_samples_per_query = 8
    log = lg.LogSettings()
    log.log_output.outdir = outdir
    log.enable_trace = False
    sut = lg.ConstructSUT(issue, lambda: None)
    qsl = lg.ConstructQSL(64, 64, lambda s: None, lambda s: None)
    lg.StartTestWithLogSettings(sut, qsl, settings, log, "")
    lg.DestroyQSL(qsl)
    lg.DestroySUT(sut)


@dataclass
class Template:
    records: list[dict[str, Any]]
    summary: str


def loadgen_templates(cache: Path) -> dict[str, Template]:
    """Real LoadGen detail logs and summaries: each scenario's performance run, and an
    Offline accuracy run (key ``accuracy``). Cached in ``cache``."""
    out: dict[str, Template] = {}
    for name, scenario, mode in [(s, s, "performance") for s in _SCENARIOS] + [
            ("accuracy", "Offline", "accuracy")]:
        where = cache / name
        if not (where / "mlperf_log_detail.txt").is_file():
            where.mkdir(parents=True, exist_ok=True)
            subprocess.run([sys.executable, "-m", "tests.support.round_tree_generator", "loadgen",
                            scenario, mode, str(where)], cwd=REPO, check=True,
                           capture_output=True, timeout=120)
        records = [json.loads(line[len(_PREFIX):]) for line in
                   (where / "mlperf_log_detail.txt").read_text().splitlines()
                   if line.startswith(_PREFIX)]
        out[name] = Template(records, (where / "mlperf_log_summary.txt").read_text())
    return out


def rewrite(records: list[dict[str, Any]], values: dict[str, Any]) -> str:
    """The log with each key's records set to ``values`` (a key LoadGen did not log is
    added before ``result_validity``); error records dropped, as a clean build has none."""
    pending = dict(values)
    lines: list[str] = []
    tail: list[str] = []
    for record in records:
        if record.get("metadata", {}).get("is_error"):
            continue
        record = dict(record)
        if record["key"] == "result_validity":
            tail = [_line(record, k, v) for k, v in pending.items()]
            pending.clear()
            lines.extend(tail)
        if record["key"] in values:
            record["value"] = values[record["key"]]
            pending.pop(record["key"], None)
        lines.append(_PREFIX + json.dumps(record))
    lines.extend(_line(records[-1], k, v) for k, v in pending.items())
    return "\n".join(lines) + "\n"


def _line(like: dict[str, Any], key: str, value: Any) -> str:
    return _PREFIX + json.dumps({**like, "key": key, "value": value})


# --- the tree ----------------------------------------------------------------------------

def system_json(rules: Any, division: str, submitter: str, system_type: str) -> dict[str, Any]:
    sub = rules.submission
    data: dict[str, Any] = {k: "N/A" for k in sub.system_required_fields}
    data.update(division=division, submitter=submitter, status="available",
                system_type=system_type, number_of_nodes="1", accelerators_per_node="0",
                system_name=f"{submitter} {system_type} box")
    return data


def accuracy_txt(model: Any, scenario: str, full_json: bytes) -> str:
    lines = []
    targets = model.targets_for(scenario)
    for metric in list(targets) + [m for m in model.upper_limits if m not in targets]:
        low = targets.get(metric)
        high = model.upper_limits.get(metric)
        value = (low + high) / 2 if low is not None and high is not None else (
            low * 1.001 if low is not None else high * 0.999)
        lines.append(METRIC_LINES[metric].format(v=round(value, 6)))
    lines.append(f"hash={hashlib.sha256(full_json).hexdigest()}")
    return "\n".join(lines) + "\n"


def perf_values(rules: Any, name: str, model: Any, scenario: str) -> dict[str, Any]:
    seeds = rules.seeds.model_dump()
    values: dict[str, Any] = {f"effective_{k}": v for k, v in seeds.items()}
    values.update({f"requested_{k}": v for k, v in seeds.items()})
    values.update(effective_scenario=LOGGED[scenario], effective_min_duration_ms=600000,
                  effective_performance_sample_count=model.performance_sample_count,
                  result_validity="VALID", early_stopping_met=True)
    if scenario == "Offline":
        values.update(effective_samples_per_query=model.offline_min_samples_per_query or 1,
                      effective_min_query_count=max(model.min_queries.get("Offline", 1), 1))
    bound = model.latency_bound_ns.get(scenario) or model.latency_bound_ns.get(LOGGED[scenario])
    if LOGGED[scenario] == "Server":
        values["effective_target_latency_ns"] = 0 if model.llm else (bound or 10_000_000)
        values["result_99.00_percentile_latency_ns"] = (bound or 10_000_000) // 2
    if model.llm:
        values["requested_use_token_latencies"] = True
        tokens = model.token_latency_ns.get(scenario) or model.token_latency_ns.get("Server")
        if tokens is not None and LOGGED[scenario] == "Server":
            values["result_first_token_99.00_percentile_latency_ns"] = tokens.ttft // 2
            values["result_time_per_output_token_99.00_percentile_ns"] = tokens.tpot // 2
    return values


def layout(rules: Any) -> list[tuple[str, str, str, str, list[str]]]:
    """``(division, submitter, system_type, benchmark dir, scenarios)`` for every model."""
    rows = []
    for name, model in sorted(rules.models.items()):
        types = [t for t in ("datacenter", "edge") if t in model.required_scenarios] or \
            [t for t in model.required_scenarios]
        for system_type in types:
            scen = list(model.required_scenarios[system_type]) + [
                s for s in model.optional_scenarios.get(system_type, [])
                if s not in model.required_scenarios[system_type]]
            rows.append(("closed", "ORG", system_type, name, scen))
    llm = next(n for n, m in sorted(rules.models.items()) if m.llm and "Server" in
               m.token_latency_ns and "datacenter" in m.required_scenarios)
    rows.append(("open", "OPENORG", "datacenter", OPEN_DIR, ["Offline", "Server"]))
    rows.append(("open", "OPENORG", "datacenter", llm, ["Offline"]))
    return rows


def open_model(rules: Any) -> str:
    return [r for r in layout(rules) if r[1] == "OPENORG"][1][3]


def build_tree(round_name: str, root: Path, cache: Path) -> Path:
    """A valid tree of ``round_name`` under ``root`` (returned)."""
    from suite.checker.models import resolve_model
    from suite.config.rules import load_rules
    from suite.paths import find_paths

    rules = load_rules(find_paths(), round_name)
    templates = loadgen_templates(cache)
    power_done = False
    for division, submitter, system_type, bench, scenarios in layout(rules):
        sub_dir = root / division / submitter
        (sub_dir / "src").mkdir(parents=True, exist_ok=True)
        (sub_dir / "src" / "README.md").write_text("how to reproduce\n")
        system = f"{system_type.replace(',', '-')}-box"
        (sub_dir / "systems").mkdir(exist_ok=True)
        (sub_dir / "systems" / f"{system}.json").write_text(json.dumps(
            system_json(rules, division, submitter, system_type), indent=1))
        mapping = {OPEN_DIR: open_model(rules)} if division == "open" else None
        if mapping:
            (sub_dir / "model_mapping.json").write_text(json.dumps(mapping))
        resolved = resolve_model(rules, bench, mapping)
        assert resolved is not None, bench
        name, model = resolved
        for scenario in scenarios:
            res = sub_dir / "results" / system / bench / scenario
            power = not power_done and scenario == "Offline" and not model.llm
            _result(rules, name, model, scenario, res, templates, power)
            power_done = power_done or power
    return root


def _result(rules: Any, name: str, model: Any, scenario: str, res: Path,
            templates: dict[str, Template], power: bool) -> None:
    perf = res / "performance" / "run_1"
    perf.mkdir(parents=True)
    template = templates[LOGGED[scenario]]
    values = perf_values(rules, name, model, scenario)
    if power:
        values.update(power_begin="07-31-2025 09:43:18.295", power_end="07-31-2025 09:57:30.347")
    detail = rewrite(template.records, values)
    summary = template.summary.replace("INVALID", "VALID")
    (perf / "mlperf_log_detail.txt").write_text(detail)
    (perf / "mlperf_log_summary.txt").write_text(summary)
    acc = res / "accuracy"
    acc.mkdir()
    count = model.accuracy_count(scenario)
    (acc / "mlperf_log_detail.txt").write_text(rewrite(templates["accuracy"].records, {
        "qsl_reported_total_count": count, "effective_accuracy_sample_count": count,
        "effective_scenario": LOGGED[scenario]}))
    (acc / "mlperf_log_summary.txt").write_text(templates["accuracy"].summary)
    full = json.dumps([{"seq_id": 0, "qsl_idx": 0, "data": "00"}]).encode()
    (acc / "mlperf_log_accuracy.json").write_bytes(full)
    (acc / "accuracy.txt").write_text(accuracy_txt(model, scenario, full))
    for folder, ids in model.accuracy_extra_files.items():
        (acc / folder).mkdir()
        for sample in ids:
            (acc / folder / f"{sample}.png").write_bytes(b"\x89PNG")
    (res / "measurements.json").write_text(json.dumps({
        "input_data_types": "fp32", "retraining": "no", "starting_weights_filename": "w.onnx",
        "weight_data_types": "fp32", "weight_transformations": "none"}))
    (res / "user.conf").write_text(f"*.{LOGGED[scenario]}.target_qps = 1\n")
    (res / "README.md").write_text("run with the reference harness\n")
    for test in model.compliance_tests:
        _compliance(rules, test, res / test, detail, summary, full)
    if power:
        _power(res / "performance", detail, summary)


def _compliance(rules: Any, test: str, where: Path, detail: str, summary: str,
                full: bytes) -> None:
    for rel in rules.submission.compliance_files.get(test, []):
        path = where / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith("mlperf_log_detail.txt"):
            path.write_text(detail)
        elif rel.endswith("mlperf_log_summary.txt"):
            path.write_text(summary)
        elif test == "TEST06":
            path.write_text(TEST06_PASS)
        else:
            path.write_text("TEST PASS\n")
    if test == "TEST09":  # a log whose mean length is within the model's bounds
        from suite.llm.test07_09 import TEST09_BOUNDS

        low, high = TEST09_BOUNDS[where.parent.parent.name]
        log = json.dumps([{"seq_id": i, "qsl_idx": i, "data": "01000000" * round(
            (low + high) / 2)} for i in range(3)]).encode()
        (where / "accuracy").mkdir(exist_ok=True)
        (where / "accuracy" / "mlperf_log_accuracy.json").write_bytes(log)
        (where / "accuracy" / "accuracy.txt").write_text(
            f"hash={hashlib.sha256(log).hexdigest()}\n")
    if test in ("TEST01", "TEST06"):
        (where / "accuracy").mkdir(exist_ok=True)
        (where / "accuracy" / "mlperf_log_accuracy.json").write_bytes(
            TEST06_LOG if test == "TEST06" else full)
        if test == "TEST01":
            digest = hashlib.sha256(full).hexdigest()
            (where / "accuracy" / "accuracy.txt").write_text(f"hash={digest}\n")


def _power(perf_root: Path, detail: str, summary: str) -> None:
    (perf_root / "run_1" / "spl.txt").write_text("Time,07-31-2025 09:50:00.000,Watts,350.0\n")
    ranging = perf_root / "ranging"
    ranging.mkdir()
    (ranging / "mlperf_log_detail.txt").write_text(detail)
    (ranging / "mlperf_log_summary.txt").write_text(summary)
    (ranging / "spl.txt").write_text("Time,07-31-2025 09:40:00.000,Watts,360.0\n")
    power = perf_root / "power"
    power.mkdir()
    for name in ("client.json", "server.json"):
        (power / name).write_text(json.dumps({"version": "1.11.1"}))
    for name in ("client.log", "server.log", "ptd_logs.txt"):
        (power / name).write_text("ok\n")


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


if __name__ == "__main__":
    if sys.argv[1] == "loadgen":
        _loadgen_child(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        out = build_tree(sys.argv[2], Path(sys.argv[3]), Path(sys.argv[3]) / ".." / "lgcache")
        print(out)
