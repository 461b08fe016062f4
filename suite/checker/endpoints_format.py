"""Endpoint-format results: reading the artifacts of MLCommons' endpoint benchmarker
(``mlcommons/endpoints``) that a result directory holds instead of LoadGen logs, as the
official v6.1 checker reads them (``submission_checker``: ``loader.py``,
``parsers/endpoints_parser.py``). The rules on them are ``endpoints_rules.py``.

A result is in this format when neither LoadGen detail log exists (``performance/run_1/``,
``accuracy/``). Three files are read: ``config.yaml`` (or ``config.yml``), the run's
config; ``performance/result_summary.json``, the tool's report; and
``accuracy/accuracy_results.json``, one entry per scored dataset. Their keys are mapped
onto LoadGen's (``ENDPOINTS_MAPPINGS``: ``qps`` is ``result_completed_samples_per_sec``,
``ttft.early_stopping_percentiles.99.0`` the TTFT p99, ``settings.runtime.min_duration_ms``
the minimum duration...): a key is looked up in the JSON file, then in config.yaml. The
tool's metrics snapshot (``final_snapshot.json``) is not read, by the official checker nor
here. Nothing here raises on bad input: an unusable file is a problem the rules report.

Owns: the detection (``is_endpoints_result``), the reading and key mapping
(``read_endpoint_result``) and the readers of an accuracy score.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from suite.checker.context import ResultContext, read_json
from suite.paths import RECORD_FILE_LIMIT, regular_file_problem

SUMMARY = "performance/result_summary.json"
ACCURACY = "accuracy/accuracy_results.json"
CONFIGS = ("config.yaml", "config.yml")
#: LoadGen key -> (endpoint key, alternative JSON path, config.yaml path): the rows of
#: ENDPOINTS_MAPPINGS, ENDPOINTS_JSON_ALT_PATHS and ENDPOINTS_YAML_FIELD_MAP that the
#: checks read. A key is looked up in the JSON file first, then in config.yaml.
_KEYS: dict[str, tuple[str, str | None, str | None]] = {
    "effective_scenario": ("effective_scenario", None, "type"),
    "effective_sample_index_rng_seed": ("effective_sample_index_rng_seed", None,
                                        "settings.runtime.dataloader_random_seed"),
    "effective_schedule_rng_seed": ("effective_schedule_rng_seed", None,
                                    "settings.runtime.scheduler_random_seed"),
    "effective_min_duration_ms": ("min_duration_ms", None, "settings.runtime.min_duration_ms"),
    "qsl_reported_total_count": ("n_samples_issued", None, None),
    "generated_query_count": ("generated_query_count", "n_samples_issued", None),
    "generated_query_duration": ("duration_ns", None, None),
    "num_errors": ("result.failed", "n_samples_failed", None),
    "result_completed_samples_per_sec": ("qps", None, None),
    "result_completed_tokens_per_second": ("tps", None, None),
    "result_mean_latency_ns": ("latency.avg", None, None),
    "result_90.00_percentile_latency_ns": ("latency.early_stopping_percentiles.90.0", None, None),
    "result_99.00_percentile_latency_ns": ("latency.early_stopping_percentiles.99.0", None, None),
    "result_first_token_99.00_percentile_latency_ns": (
        "ttft.early_stopping_percentiles.99.0", None, None),
    "result_time_per_output_token_99.00_percentile_ns": (
        "tpot.early_stopping_percentiles.99.0", None, None),
    "mean_output_tokens": ("output_sequence_lengths.avg", None, None),
}
#: The figure per scenario (RESULT_FIELD_ENDPOINTS["v6.1"]) and its name.
def is_endpoints_result(ctx: ResultContext) -> bool:
    """The official loader's test: neither LoadGen detail log exists."""
    return ctx.tree_mode and not ctx.files.perf_detail.exists() \
        and not ctx.files.acc_detail.exists()


@dataclass
class EndpointResult:
    """The mapped values of one result (LoadGen keys), and why a file could not be read."""

    perf: dict[str, Any] = field(default_factory=dict)
    acc: dict[str, Any] = field(default_factory=dict)
    #: (file, why) for each file that is missing or unusable
    problems: list[tuple[Path, str]] = field(default_factory=list)


def _path(data: Any, dotted: str) -> Any:
    """``dotted`` in nested objects, resolved as the official parser does: at each level the
    longest dot-joined run of parts that is a key wins (``99.0`` is one key), a trailing
    ``.0`` after a number is accepted (key ``99`` for ``99.0``), an empty object is absent."""
    if not isinstance(data, dict):
        return None
    parts, node, i = dotted.split("."), data, 0
    while i < len(parts):
        if not isinstance(node, dict):
            return node if parts[i:] == ["0"] and not isinstance(node, list) else None
        for j in range(len(parts), i, -1):
            if (key := ".".join(parts[i:j])) in node:
                node, i = node[key], j
                break
        else:
            return None
    return None if isinstance(node, dict | list) and not node else node


def _resolve(key: str, data: Any, config: Any) -> Any:
    name, alt, in_config = _KEYS[key]
    value = _path(data, name)
    if value is None and alt is not None:
        value = _path(data, alt)
    if value is None and in_config is not None:
        value = _path(config, in_config)
    return value if value is not None else _path(config, name)


def _read_config(res: Path, problems: list[tuple[Path, str]]) -> Any:
    present = [res / name for name in CONFIGS if (res / name).exists()]
    if not present:
        problems.append((res / CONFIGS[0], "missing (neither config.yaml nor config.yml)"))
        return {}
    try:
        yaml: Any = importlib.import_module("yaml")
    except ImportError:
        problems.append((present[0], "unreadable: PyYAML is not installed "
                                     "(pip install 'infersuite[endpoints]')"))
        return {}
    errors = []
    for path in present:  # the first that parses, as the official loader reads them
        try:
            if (problem := regular_file_problem(path, RECORD_FILE_LIMIT)) is not None:
                errors.append((path, problem))
                continue
            return yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, UnicodeDecodeError) as exc:
            errors.append((path, f"unreadable: {exc}"))
        except yaml.YAMLError as exc:
            errors.append((path, f"not valid YAML: {type(exc).__name__}"))
    problems.extend(errors)
    return {}


def _read_object(path: Path, problems: list[tuple[Path, str]]) -> dict[str, Any]:
    data, error = read_json(path)
    if error is not None or not isinstance(data, dict):
        problems.append((path, error or f"a JSON {type(data).__name__}, not an object"))
        return {}
    return data


def read_endpoint_result(res: Path) -> EndpointResult:
    """The three files of ``res``, mapped onto LoadGen's keys (never raises)."""
    out = EndpointResult()
    config = _read_config(res, out.problems)
    summary = _read_object(res / SUMMARY, out.problems)
    accuracy = _read_object(res / ACCURACY, out.problems)
    out.perf = {key: _resolve(key, summary, config) for key in _KEYS}
    perf = out.perf
    if perf["generated_query_count"] is None:
        perf["generated_query_count"] = perf["qsl_reported_total_count"]
    # Offline has no figure of its own: samples issued over the duration.
    count, duration, scenario = (perf["generated_query_count"],
                                 perf["generated_query_duration"], perf["effective_scenario"])
    key = "result_samples_per_second" if str(scenario).lower() == "offline" else \
        "result_completed_samples_per_sec"
    if perf.get(key) is None and number(count) and number(duration) and scenario:
        perf[key] = count / (duration / 1e9)
    entries = accuracy.get("accuracy_scores")
    entries = [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
    counts = [_whole(e.get("total_samples")) if e.get("total_samples") is not None else
              _whole(_path(e, "response_counts.issued")) for e in entries
              if e.get("dataset_type") in (None, "accuracy")]
    counted = [c for c in counts if c is not None]
    acc: dict[str, Any] = {
        "qsl_reported_total_count": _resolve("qsl_reported_total_count", accuracy, config),
        "effective_accuracy_sample_count": int(sum(counted)) if counted else None,
        "accuracy_score": next((e["score"] for e in entries if e.get("score") is not None),
                               None)}
    out.acc = acc
    return out


def _whole(value: Any) -> int | None:
    """A sample count as the official parser takes it (``int(value)``)."""
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def number(value: Any) -> float | None:
    """A JSON/YAML number (not a numeric string: the official checker compares the raw
    value, and a string fails there)."""
    if isinstance(value, int | float) and not (isinstance(value, float) and math.isnan(value)):
        return float(value)
    return None



def as_number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def official_score(score: Any, metrics: list[str]) -> float | None:
    """A score as one number, as the checker reads qwen3-vl's: the score itself, or the
    first of the metrics' names (then ``f1``, ``score``, ``accuracy``) in a score object."""
    if not isinstance(score, dict):
        return as_number(score) if not isinstance(score, bool) else float(score)
    names = [n for m in metrics for n in (m, m.lower(), m.split("_")[-1].lower())]
    for name in [*names, "f1", "score", "accuracy"]:
        if (found := as_number(score.get(name))) is not None:
            return found
    return None


def strict_score(score: Any, metric: str, first: bool) -> float | None:
    """One metric of a score: a bare number is the first metric; in a score object the
    metric's name, case-insensitive (``rougeL`` for ``ROUGEL``)."""
    if not isinstance(score, dict):
        return as_number(score) if first else None
    lowered = {str(k).lower(): v for k, v in score.items()}
    return as_number(lowered.get(metric.lower()))
