"""TEST01: the SUT really infers in performance mode.

LoadGen logs a random sample of responses during a performance run
(``accuracy_log_sampling_target``); each must equal the accuracy run's response for
the same sample. If some differ (legitimate non-determinism), the rules allow a
fallback: top-1 over the sampled set from the reference responses (baseline) and
from the compliance responses must agree within ``accuracy_delta_percent``. For a task
card ``labels`` is a scorer (sampled responses -> (value, accuracy.txt lines)): the
task's own score of each set, as the official fallback runs the benchmark's accuracy
script on both logs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from suite.compliance.base import ComplianceTest, Verdict, performance_verdict
from suite.logs import ACCURACY_LOG
from suite.results import RunResult


def _responses(path: Path) -> dict[int, list[bytes]]:
    """qsl_idx -> every full response logged for it (a list: duplicates must agree).

    The whole response is compared byte for byte, as the official TEST01 does: a SUT
    that gets the first value right and the rest wrong is not inferring honestly.
    """
    found: dict[int, list[bytes]] = {}
    entries = json.loads(path.read_text(encoding="utf-8"))
    for entry in entries:
        found.setdefault(int(entry["qsl_idx"]), []).append(bytes.fromhex(entry["data"]))
    return found


def _first(data: bytes, dtype: Any) -> int:
    """The first decoded value of a response (the top-1 class), -1 if it has none."""
    usable = len(data) - len(data) % np.dtype(dtype).itemsize
    values = np.frombuffer(data[:usable], dtype=dtype)
    return int(values[0]) if len(values) else -1


def _top1(responses: dict[int, int], labels: Any) -> float:
    good = sum(1 for idx, value in responses.items() if value == int(labels[idx]))
    return 100.0 * good / len(responses) if responses else 0.0


class Test01:
    """See the module docstring."""

    name = "TEST01"
    needs_accuracy_reference = True

    def __init__(self, table: dict[str, Any], all_tables: dict[str, Any]) -> None:
        self.table = table
        self.small = all_tables.get("small_latency_ns", {})

    def audit_lines(self, loadgen_model: str) -> list[str]:
        audit = self.table["audit"]
        target = self.table["accuracy_log_sampling_target"].get(loadgen_model, 4096)
        return [f"*.*.{key} = {value}" for key, value in audit.items()] + [
            f"*.*.accuracy_log_sampling_target = {target}"
        ]

    def verify(self, reference: RunResult, compliance: RunResult, run_dir: Path,
               response_dtype: Any, labels: Any) -> list[Verdict]:
        compliance_log = run_dir / "performance" / ACCURACY_LOG
        reference_log = Path(reference.run_dir) / "accuracy" / ACCURACY_LOG
        sampled = _responses(compliance_log)
        truth = _responses(reference_log)
        matches = mismatches = missing = 0
        for idx, values in sampled.items():
            if idx not in truth:
                missing += 1
            elif all(v == truth[idx][0] for v in values):
                matches += 1
            else:
                mismatches += 1
        lines = [
            f"compliance accuracy log: {compliance_log}",
            f"reference accuracy log: {reference_log}",
            f"num_perf_log_qsl_idx_match = {matches}",
            f"num_perf_log_data_mismatch = {mismatches}",
            f"num_missing_qsl_idxs = {missing}",
        ]
        accuracy_dir = run_dir / "accuracy"
        accuracy_dir.mkdir(exist_ok=True)
        shutil.copyfile(compliance_log, accuracy_dir / ACCURACY_LOG)
        passed = mismatches == 0 and missing == 0 and matches > 0
        if not passed and matches + mismatches > 0:
            passed = self._fallback(sampled, truth, labels, accuracy_dir, lines, response_dtype)
        return [Verdict("verify_accuracy.txt", passed, lines),
                self.performance(reference, compliance)]

    def performance(self, reference: RunResult, compliance: RunResult) -> Verdict:
        return performance_verdict(reference, compliance, self.table["performance_tolerance"],
                                   self.table["small_latency_tolerance"], self.small,
                                   two_sided=True)

    def _fallback(self, sampled: dict[int, list[bytes]], truth: dict[int, list[bytes]],
                  labels: Any, accuracy_dir: Path, lines: list[str], dtype: Any) -> bool:
        common = [idx for idx in sampled if idx in truth]
        if callable(labels):  # a task card: its own score of the sampled responses
            try:
                baseline, base_lines = labels({idx: truth[idx][0] for idx in common})
                observed, seen_lines = labels({idx: sampled[idx][0] for idx in common})
            except Exception as exc:  # a task whose score needs every sample
                lines.append(f"responses differ and the task cannot score the sampled set: "
                             f"{type(exc).__name__}: {exc}")
                return False
            (accuracy_dir / "baseline_accuracy.txt").write_text("\n".join(base_lines) + "\n")
            (accuracy_dir / "compliance_accuracy.txt").write_text("\n".join(seen_lines) + "\n")
        else:
            baseline = _top1({idx: _first(truth[idx][0], dtype) for idx in common}, labels)
            observed = _top1({idx: _first(sampled[idx][0], dtype) for idx in common}, labels)
            (accuracy_dir / "baseline_accuracy.txt").write_text(
                f"accuracy={baseline:.3f}%, good={round(baseline * len(common) / 100)}, "
                f"total={len(common)}\n")
            (accuracy_dir / "compliance_accuracy.txt").write_text(
                f"accuracy={observed:.3f}%, good={round(observed * len(common) / 100)}, "
                f"total={len(common)}\n")
        delta = abs(1 - baseline / observed) * 100 if observed else float("inf")
        limit = float(self.table["accuracy_delta_percent"])
        lines += [
            "responses differ: applying the accuracy-delta fallback the rules allow",
            f"baseline accuracy (reference responses, {len(common)} sampled) = {baseline:.3f}%",
            f"compliance accuracy (performance-mode responses) = {observed:.3f}%",
            f"|1 - baseline/compliance| x 100 = {delta:.3f} (allowed <= {limit})",
        ]
        return delta <= limit


_check: type[ComplianceTest] = Test01
