"""Compliance TEST07 and TEST09 for the reasoning LLMs (gpt-oss-120b), from the accuracy log.

Facts from ``mlcommons/inference`` @ b66003e, ``compliance/TEST07`` and ``compliance/TEST09``
(``audit.config`` and ``run_verification.py``); the verification is written here anew.

Both are performance-mode runs whose audit.config makes LoadGen issue every sample once
(``performance_issue_unique``) and log every output (``accuracy_log_sampling_target`` above
the set's size):

* **TEST07** (accuracy in performance mode), on the compliance set
  (``acc_eval_compliance_gpqa.parquet``, 990 samples): the accuracy script's output is
  searched for ``'exact_match': <number>`` and the number must be at least the audit's
  ``test07_accuracy_threshold`` (60.698); the number is the reference's printed figure (3
  places), so the verdict is the official one. ``verify_accuracy.txt`` ends with the
  official summary ("Accuracy score", "Accuracy threshold", "Accuracy check pass",
  "TEST PASS"/"TEST FAIL").
* **TEST09** (output length), on the performance set: the mean number of int32 ids over
  every logged entry (an entry without data counts 0; entries are not de-duplicated) must
  lie within ``test09_min_output_tokens`` and ``test09_max_output_tokens`` (1150.38 and
  1406.02, both inclusive); ``verify_output_len.txt`` holds the official statistics and
  verdict lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from suite.errors import SuiteError

TEST07, TEST09 = "TEST07", "TEST09"
VERIFY_07, VERIFY_09 = "verify_accuracy.txt", "verify_output_len.txt"
_SEED = 720381539243781796
#: compliance/TEST07/gpt-oss-120b/audit.config (the threshold is read by the verification)
AUDIT_07 = {"mode": 2, "accuracy_log_rng_seed": _SEED, "accuracy_log_sampling_target": 990,
            "min_query_count": 990, "min_duration": 0, "performance_issue_unique": 1,
            "sample_concatenate_permutation": 0, "test07_accuracy_threshold": 60.698}
#: compliance/TEST09/gpt-oss-120b/audit.config
AUDIT_09 = {"mode": 2, "accuracy_log_rng_seed": _SEED, "accuracy_log_sampling_target": 10000,
            "min_query_count": 6396, "min_duration": 0, "performance_issue_unique": 1,
            "sample_concatenate_permutation": 0, "test09_min_output_tokens": 1150.38,
            "test09_max_output_tokens": 1406.02}
SCORE_PATTERN = r"'exact_match':\s*([\d.]+)"
#: TEST09's bounds per model: compliance/TEST09/gpt-oss-120b/audit.config and
#: compliance/TEST09/e2e-rag-qna/audit.config (test09_min/max_output_tokens), the models of
#: the checker's models_TEST09 (``suite check`` recomputes the verdict from the log)
TEST09_BOUNDS = {"gpt-oss-120b": (1150.38, 1406.02), "e2e-rag-qna": (246.43, 301.19)}


def audit_text(name: str, audit: dict[str, float]) -> str:
    lines = [f"# {name} audit.config, written by infersuite for this run only"]
    lines += [f"*.*.{key} = {value}" for key, value in audit.items()]
    return "\n".join(lines) + "\n"


def read_setting(text: str, setting: str) -> float | None:
    """A ``*.*.<setting> = value`` of an audit.config, as the verification scripts read it
    (the last part of a key of three or more parts; TEST09 drops an inline comment)."""
    found = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = (part.strip() for part in line.split("=", 1))
        parts = key.split(".")
        if len(parts) >= 3 and parts[-1] == setting:
            try:
                found = float(value.split("#", 1)[0].strip())
            except ValueError:
                continue
    return found


@dataclass(frozen=True)
class Test07Verdict:
    score: float | None
    threshold: float
    output: str

    @property
    def passed(self) -> bool:
        return self.score is not None and self.score >= self.threshold

    def lines(self) -> list[str]:
        summary = [self.output.rstrip("\n"), "=" * 80, "TEST07 Verification Summary", "=" * 80]
        if self.score is None:
            return [*summary, "Error: Could not parse accuracy score", "TEST FAIL"]
        return [*summary, f"Accuracy score: {self.score}",
                f"Accuracy threshold: {self.threshold}",
                f"Accuracy check pass: {self.passed}",
                "TEST PASS" if self.passed else "TEST FAIL"]


def verify_07(accuracy_output: str, threshold: float = float(AUDIT_07[
        "test07_accuracy_threshold"])) -> Test07Verdict:
    """TEST07's verdict on the accuracy script's output (its first ``exact_match``)."""
    match = re.search(SCORE_PATTERN, accuracy_output)
    score = None
    if match:
        try:
            score = float(match.group(1))
        except ValueError:
            score = None
    return Test07Verdict(score, threshold, accuracy_output)


@dataclass(frozen=True)
class Test09Verdict:
    lengths: list[int]
    minimum: float
    maximum: float
    notes: list[str] = field(default_factory=list)

    @property
    def mean(self) -> float:
        return sum(self.lengths) / len(self.lengths) if self.lengths else 0.0

    @property
    def passed(self) -> bool:
        return bool(self.lengths) and self.minimum <= self.mean <= self.maximum

    def lines(self) -> list[str]:
        stats = [f"Total samples: {len(self.lengths)}", f"Mean output tokens: {self.mean:.2f}",
                 f"Min output tokens: {min(self.lengths, default=0)}",
                 f"Max output tokens: {max(self.lengths, default=0)}"]
        if self.lengths:
            spread = sum((x - self.mean) ** 2 for x in self.lengths) / len(self.lengths)
            stats.append(f"Std deviation: {spread ** 0.5:.2f}")
        low, high = self.mean >= self.minimum, self.mean <= self.maximum
        return ["=" * 80, "TEST09: Verify Output Token Length in Performance Mode", "=" * 80,
                "", "Output Token Length Statistics", "-" * 40, *stats, "", "=" * 80,
                "Verification Results", "=" * 80, f"Mean output tokens: {self.mean:.2f}",
                f"Min threshold: {self.minimum}", f"Max threshold: {self.maximum}",
                f"Min check pass: {low}", f"Max check pass: {high}", *self.notes, "",
                "TEST PASS" if self.passed else "TEST FAIL"]


def _length(hex_data: object) -> int:
    """The number of whole int32 ids in a logged hex field (0 where it is none)."""
    if not isinstance(hex_data, str) or not hex_data.strip():
        return 0
    try:
        return len(bytes.fromhex(hex_data.strip())) // 4
    except ValueError:
        return 0


def verify_09(entries: list[dict[str, object]],
              minimum: float = float(AUDIT_09["test09_min_output_tokens"]),
              maximum: float = float(AUDIT_09["test09_max_output_tokens"])) -> Test09Verdict:
    """TEST09's verdict over every logged entry (no entry: the official script stops with
    an error, which is a failed test here)."""
    if minimum > maximum:
        raise SuiteError(f"TEST09 bounds {minimum} > {maximum}",
                         hint="check the audit.config's test09_* settings")
    notes = [] if entries else ["Error: No entries found in MLPerf log"]
    return Test09Verdict([_length(e.get("data", "")) for e in entries], minimum, maximum,
                         notes)
