"""Each compliance test's ``TESTxx/`` directory of a packaged result, from the attempt
``selection`` chose, and the official accuracy-log truncation the tree's logs get.

The attempt's evidence is copied only as its record names it (each file's sha256 taken
when the verdict was written); TEST06's and TEST09's verdicts are recomputed from their
logs before packaging (TEST07's needs the set it ran on: ``suite audit`` re-derives it).
The layout is the official one (``tools/submission/submission_checker/constants.py``
``TEST07_ACC_PATH``/``TEST09_ACC_PATH``: ``<result>/TEST07/verify_accuracy.txt``,
``<result>/TEST09/verify_output_len.txt``; ``compliance/TEST07`` and ``TEST09``
``run_verification.py`` copy ``accuracy/mlperf_log_accuracy.json`` and
``performance/run_1/{mlperf_log_summary,mlperf_log_detail}.txt`` beside it;
``tools/submission/truncate_accuracy_log.py`` truncates TEST01/07/09's logs and writes
TEST07/09's ``accuracy/accuracy.txt`` as the ``hash=`` line alone).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from suite.config.rules import SubmissionRules
from suite.errors import SuiteError
from suite.models import sha256_file
from suite.paths import ACCURACY_LOG_LIMIT, Paths, regular_file_problem
from suite.results import RunResult
from suite.submission.safety import PackageError, Precision, recorded_precision, refuse_links
from suite.submission.selection import Candidate

PERF_FILES = ("mlperf_log_detail.txt", "mlperf_log_summary.txt")


def truncate_accuracy_log(data: bytes, keep: int) -> bytes:
    """The official truncation: head and tail ``keep`` chars around a marker."""
    text = data.decode("utf-8", errors="replace")
    if len(text) <= 2 * keep + 7:
        return data
    return (text[:keep] + "\n\n...\n\n" + text[-keep:]).encode("utf-8")


def capped(path: Path, limit: int) -> bytes:
    """A run's file, whole, if it is a regular file within ``limit`` bytes."""
    if (problem := regular_file_problem(path, limit)) is not None:
        raise PackageError(f"{path} is {problem}; packaging copies a run's own files",
                           hint="replace it with the run's file, or re-run")
    return path.read_bytes()


def copy_compliance(cand: Candidate, out: Path, sub: SubmissionRules,
                     precision: Precision, paths: Paths) -> list[str]:
    """Copy the attempt ``selection`` chose for each compliance test (the newest that
    passed) into ``<result>/TESTxx/``; a test with no passing attempt gets no directory
    (only ``--unofficial`` packages such a run, and the checker then names the test).
    Returns a README line per attempt, saying which one was packaged."""
    lines = []
    for test, chosen in sorted(cand.compliance.items()):
        if recorded_precision(chosen) != precision:  # another computation than the result's
            raise PackageError(
                f"{chosen.run_dir}: the {test} run recorded "
                f"{recorded_precision(chosen).weight_data_types}, the result it audits "
                f"{precision.weight_data_types}",
                hint=f"re-run {test} against the packaged run (suite run --compliance {test})")
        source, target = Path(chosen.run_dir), out / test  # where --runs-dir holds it
        refuse_links(source)
        as_recorded(chosen, source, paths)
        (target / "performance" / "run_1").mkdir(parents=True)
        for name in PERF_FILES:
            if (source / "performance" / name).is_file():
                shutil.copyfile(source / "performance" / name,
                                target / "performance" / "run_1" / name)
        # TEST01/TEST04 write their verdicts at the run's top; TEST06 into TEST06/, beside
        # its copy of the accuracy log (as the reference's run_verification.py does);
        # TEST07/TEST09 beside their performance test's logs.
        for name in _VERIFY_FILES:
            for found in (source / name, source / test / name, source / "performance" / name):
                if found.is_file():
                    shutil.copyfile(found, target / name)
        log = compliance_log(source, test)
        if log is not None:
            (target / "accuracy").mkdir()
            full = capped(log, ACCURACY_LOG_LIMIT)
            (target / "accuracy" / "mlperf_log_accuracy.json").write_bytes(
                truncate_accuracy_log(full, sub.truncate_keep_chars))
            (target / "accuracy" / "accuracy.txt").write_text(
                f"hash={hashlib.sha256(full).hexdigest()}\n")
            for name in ("baseline_accuracy.txt", "compliance_accuracy.txt"):
                if (source / "accuracy" / name).is_file():
                    shutil.copyfile(source / "accuracy" / name, target / "accuracy" / name)
    for test, runs in sorted(cand.attempts.items()):
        for run in runs:
            comp = run.compliance
            assert comp is not None
            verdicts = ", ".join(f"{k}: {v}" for k, v in comp.verdicts.items())
            packaged = " (packaged)" if cand.compliance.get(test) is run else ""
            lines.append(f"{test} attempt {comp.attempt} `{run.run_id}`: "
                         f"{'PASS' if comp.passed else 'FAIL'}; {verdicts}{packaged}")
        if test not in cand.compliance:
            lines.append(f"{test}: no attempt passed; none is packaged")
    return lines


#: The verification files the compliance tests write (TEST09's is verify_output_len.txt:
#: compliance/TEST09/run_verification.py; the checker's TEST09_ACC_PATH names it).
_VERIFY_FILES = ("verify_accuracy.txt", "verify_performance.txt", "verify_output_len.txt")
#: Tests whose accuracy log is their performance test's own (every sample logged):
#: compliance/TEST07 and TEST09 run_verification.py copy it to TESTxx/accuracy/.
LOG_IN_PERFORMANCE = ("TEST07", "TEST09")


def compliance_log(source: Path, test: str) -> Path | None:
    """A compliance run's accuracy log (whole), where its test leaves it; None: none."""
    places = [source / "accuracy" / "mlperf_log_accuracy.json",
              source / test / "mlperf_log_accuracy.json"]
    if test in LOG_IN_PERFORMANCE:
        places.append(source / "performance" / "mlperf_log_accuracy.json")
    return next((f for f in places if f.is_file()), None)


def as_recorded(chosen: RunResult, source: Path, paths: Paths) -> None:
    """The compliance run's evidence is what its record names: each file its verdict
    hashed (``ComplianceResult.digests``) still has that sha256, and a TEST06 verdict
    recomputed from its accuracy log still passes (an edited copy is refused)."""
    comp = chosen.compliance
    assert comp is not None
    for rel, digest in sorted(comp.digests.items()):
        path = source / rel
        if not path.is_file() or sha256_file(path) != digest:
            raise PackageError(
                f"{path}: {'missing' if not path.is_file() else 'changed'} since the "
                f"{comp.test} verdict was written (its record names sha256 {digest[:12]}...)",
                hint=f"package the runs as recorded, or re-run {comp.test}")
    if comp.test == "TEST06":
        _test06_holds(chosen, source, paths)
    if comp.test == "TEST09":
        _test09_holds(chosen, source)


def _test06_holds(chosen: RunResult, source: Path, paths: Paths) -> None:
    from suite.accuracy import read_accuracy_entries
    from suite.llm.card import card_name, load_llm_card
    from suite.llm.test06 import NAME, verify_entries

    log = source / NAME / "mlperf_log_accuracy.json"
    try:
        eos = load_llm_card(paths, card_name(chosen.benchmark)).tokenizer.eos_id
        verdict = verify_entries(read_accuracy_entries(log), chosen.scenario == "offline",
                                 eos)
    except SuiteError as exc:
        raise PackageError(f"{log}: TEST06 cannot be recomputed: {exc}",
                           hint="re-run TEST06 (suite run --compliance TEST06)") from None
    if not verdict.passed:
        raise PackageError(f"{log}: TEST06 recomputed from this log does not pass ("
                           f"{'; '.join(verdict.lines())}), although its record says it did",
                           hint="package the runs as recorded, or re-run TEST06")


def _test09_holds(chosen: RunResult, source: Path) -> None:
    """TEST09's verdict recomputed from its log (the mean output length needs nothing
    else); TEST07's needs the set it ran on, and ``suite audit`` re-derives it."""
    from suite.accuracy import read_accuracy_entries
    from suite.llm.test07_09 import verify_09

    log = compliance_log(source, "TEST09")
    try:
        verdict = verify_09(read_accuracy_entries(log)) if log is not None else None
    except SuiteError as exc:
        raise PackageError(f"{log}: TEST09 cannot be recomputed: {exc}",
                           hint="re-run TEST09 (suite run --compliance TEST09)") from None
    if verdict is None or not verdict.passed:
        found = "no accuracy log" if verdict is None else f"mean {verdict.mean:.2f} tokens"
        raise PackageError(f"{source}: TEST09 recomputed from its log does not pass ({found}),"
                           " although its record says it did",
                           hint="package the runs as recorded, or re-run TEST09")
