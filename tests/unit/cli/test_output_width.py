"""Everything the CLI prints on standard output fits ``COLUMNS``, piped or not, measured as
the issue measures it (issue 40, item 6: ``COLUMNS=100 suite runs | awk '{ if (length >
100) exit 1 }'``, and the same for ``backends``, ``audit``, ``show``, ``config``).

mawk's ``length`` counts bytes, so a table drawn with box-drawing characters (3 bytes
each) is 300 "columns" wide to it: piped, tables use ASCII borders (suite.cli.console),
and these tests count bytes. ``runs`` and ``config`` have their own width tests
(tests/unit/reports/test_runs_width.py, test_config_command.py), here counted in bytes too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from suite.audit.report import AuditReport, Check, render
from suite.findings import Severity
from tests.conftest import REPO, cli_env
from tests.unit.reports.test_runs_width import _perf

WIDTH = 100


def _widest(text: str) -> int:
    """The widest line in bytes, as mawk's ``length`` counts it."""
    return max(len(line.encode("utf-8")) for line in text.splitlines())


def _suite(*args: str, cwd: Path = REPO) -> str:
    done = subprocess.run([sys.executable, "-m", "suite", *args], cwd=cwd,
                          env=cli_env(COLUMNS=str(WIDTH)), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode in (0, 2), done.stderr
    return done.stdout


@pytest.mark.parametrize("args", [("backends",), ("config", "--benchmark", "digits")])
def test_piped_tables_fit_columns_in_bytes(args: tuple[str, ...]) -> None:
    out = _suite(*args)
    assert out.strip(), "printed nothing"
    assert _widest(out) <= WIDTH, out
    assert "+--" in out  # ASCII borders off a terminal


def test_show_fits_columns_in_bytes(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "20261207T030000Z_digits_singlestream_performance"
    (run_dir / "performance").mkdir(parents=True)
    (run_dir / "result.json").write_text(json.dumps({
        "schema_version": 2, "run_id": run_dir.name, "run_dir": str(run_dir),
        "created_utc": "2026-12-07T03:00:00Z", "benchmark": "digits",
        "scenario": "singlestream", "mode": "performance", "backend": "onnxruntime",
        "round": "v6.1", "model_sha256": "0" * 64, "division": "closed",
        "submittable": False, "non_submittable_reasons": ["--quick " + "a long reason " * 30],
        "status": "VALID", "exit_code": 0,
        "tests": [{"mode": "performance", "directory": str(run_dir / "performance"),
                   "status": "VALID", "exit_code": 0,
                   "performance": _perf("singlestream", 0.05632, "ms", "90th percentile "
                                        "latency")}]}))
    out = _suite("show", str(run_dir))
    assert "singlestream" in out and "VALID" in out
    assert _widest(out) <= WIDTH, out  # the notes too: wrapped at spaces (issue 40, item 6)
    notes = out.split("\n  - ", 1)[1]
    assert " ".join(notes.split()).count("a long reason") == 30, notes  # nothing lost


def test_audit_table_fits_columns_in_bytes(monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from suite.cli.console import piped_stdout

    monkeypatch.setenv("COLUMNS", str(WIDTH))
    long = "closed/Acme/results/box1/digits/SingleStream/performance/run_1/" * 4
    report = AuditReport(bundle="/tmp/" + "b" * 150 + ".tar.gz", bundle_sha256="0" * 64,
                         checks=[Check(rule="AUDIT-3", severity=Severity.ERROR,
                                       message="accuracy recomputed", step=3,
                                       name="accuracy recomputed from the accuracy log",
                                       passed=False, found="top-1 97.9%",
                                       evidence=[long, "expected 98.1%"])])
    report.attempts = []  # not read from a bundle: nothing on disk here
    piped_stdout().print(render(report))
    out = capsys.readouterr().out
    assert "accuracy recomputed" in out and "FAIL" in out
    assert _widest(out) <= WIDTH, out
