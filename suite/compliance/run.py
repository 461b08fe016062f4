"""Running a compliance test: the reference run, the audit.config's lifetime, the verdict.

The audit.config is written into the child's own test directory just before the child
starts and removed in a ``finally`` as soon as it exits (also on failure and Ctrl-C);
LoadGen is given its absolute path, so no other file can be read. A run refuses to
start while a stale audit.config lies in the working directory, the suite's home, or
any test directory under the runs directory. Every attempt is a run directory of its
own, and each result lists the earlier attempts: retries are recorded, never hidden.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from suite.compliance.base import (
    AUDIT_CONFIG,
    ComplianceTest,
    audit_text,
    refuse_stale_audit_configs,
)
from suite.config.model import RunConfig
from suite.errors import ConfigError
from suite.results import ComplianceResult, RunResult, Status


def guard(config: RunConfig, home: Path) -> None:
    """Refuse while a stale audit.config could be read by this or a later run."""
    refuse_stale_audit_configs([Path.cwd(), home, config.runs_dir])


def _load(path: Path) -> RunResult | None:
    try:
        return RunResult.load(path)
    except (OSError, ValueError):
        return None


def find_reference(config: RunConfig, test: ComplianceTest,
                   explicit: Path | None) -> RunResult:
    """The reference run: ``explicit``, else the newest matching valid run."""
    if explicit is not None:
        found = _load(explicit / "result.json")
        if found is None:
            raise ConfigError(f"--reference {explicit}: no readable result.json there")
        problem = _unsuitable(found, config, test)
        if problem:
            raise ConfigError(f"--reference {explicit}: {problem}")
        return found
    candidates = sorted(config.runs_dir.glob("*/result.json"), reverse=True)
    for path in candidates:
        found = _load(path)
        if found is not None and found.backend == config.backend and not _unsuitable(
                found, config, test):
            return found
    need = "performance and accuracy" if test.needs_accuracy_reference else "performance"
    raise ConfigError(
        f"{test.name} needs a VALID reference run of {config.benchmark} {config.scenario.value} "
        f"on {config.backend} with {need} results under {config.runs_dir}, and found none",
        hint=f"run `suite run --benchmark {config.benchmark} --scenario {config.scenario.value} "
        f"--backend {config.backend} --mode all` first, or pass --reference RUN_DIR",
    )


def _unsuitable(result: RunResult, config: RunConfig, test: ComplianceTest) -> str:
    if result.compliance is not None:
        return "it is itself a compliance run"
    if (result.benchmark, result.scenario) != (config.benchmark, config.scenario.value):
        return f"it is {result.benchmark} {result.scenario}, not " \
               f"{config.benchmark} {config.scenario.value}"
    modes = {t.mode: t for t in result.tests}
    perf = modes.get("performance")
    if perf is None or perf.status is not Status.VALID:
        return "it has no VALID performance test"
    if test.needs_accuracy_reference:
        acc = modes.get("accuracy")
        if acc is None or acc.status is not Status.VALID:
            return "it has no VALID accuracy test"
    return ""


def previous_attempts(config: RunConfig, test: ComplianceTest | str) -> list[str]:
    """Earlier attempts of this test (a ``ComplianceTest`` or its name, as TEST06's) for
    this benchmark, scenario and backend, from the records in the runs directory."""
    name = test if isinstance(test, str) else test.name
    earlier = []
    for path in sorted(config.runs_dir.glob(f"*_{config.benchmark}_{config.scenario.value}_"
                                            f"{name}*/result.json")):
        found = _load(path)
        if found is not None and found.backend == config.backend:
            earlier.append(found.run_dir)
    return earlier


@contextlib.contextmanager
def audit_config(test: ComplianceTest, loadgen_model: str, test_dir: Path) -> Iterator[Path]:
    """Write the test's audit.config for one child run; always remove it afterwards."""
    test_dir.mkdir(parents=True, exist_ok=True)
    path = test_dir / AUDIT_CONFIG
    path.write_text(audit_text(test, loadgen_model), encoding="utf-8")
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)
        # Keep a copy under another name: the evidence of what was applied.
        (test_dir / f"{AUDIT_CONFIG}.applied").write_text(audit_text(test, loadgen_model))


def verdict(test: ComplianceTest, reference: RunResult, result: RunResult, run_dir: Path,
            response_dtype: object, labels: object, attempts: list[str]) -> ComplianceResult:
    """Verify, write the verify_*.txt files, and summarise."""
    verdicts = test.verify(reference, result, run_dir, response_dtype, labels)
    for item in verdicts:
        item.write(run_dir)
    return ComplianceResult(
        digests=evidence_digests(run_dir),
        test=test.name,
        reference_run=reference.run_dir,
        passed=all(v.passed for v in verdicts),
        verdicts={v.file: ("TEST PASS" if v.passed else "TEST FAIL") for v in verdicts},
        evidence={v.file: v.lines for v in verdicts},
        attempt=len(attempts) + 1,
        previous_attempts=attempts,
    )


#: What ``suite package`` copies from a compliance run, relative to its directory (those
#: present are hashed into the record when the verdict is written).
EVIDENCE_FILES = ("performance/mlperf_log_detail.txt", "performance/mlperf_log_summary.txt",
                  "verify_accuracy.txt", "verify_performance.txt",
                  "accuracy/mlperf_log_accuracy.json", "accuracy/baseline_accuracy.txt",
                  "accuracy/compliance_accuracy.txt", "performance/mlperf_log_accuracy.json",
                  # TEST07/TEST09 write their verdict beside their performance test's logs
                  # (``harness.kinds.reasoning_compliance``)
                  "performance/verify_accuracy.txt", "performance/verify_output_len.txt")


def evidence_digests(run_dir: Path) -> dict[str, str]:
    """sha256 of each ``EVIDENCE_FILES`` file present under ``run_dir``."""
    from suite.models import sha256_file

    return {rel: sha256_file(run_dir / rel) for rel in EVIDENCE_FILES
            if (run_dir / rel).is_file()}
