"""``suite check`` through the CLI on a packaged tree from real runs: the JSON report
validates against the published schema, and every defect at once is reported, each on
its own result, never as a traceback. A mistyped rule id is a type error (mypy). Each
rule id on a good and a mutated tree is in tests/unit/checker/test_checker_rules.py."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from tests.conftest import REPO, run_cli
from tests.support import submission_fixtures as fx
from tests.support.checker_trees import (
    MUTATIONS,
    OFF,
    PERF,
    SPERF,
    SRV,
    SYSTEM,
    _delete,
    _log,
    _sys,
    _write,
)

#: Typed packages the snippet's imports reach that have nothing to do with its types.
SKIPPED_BY_MYPY = ("torch", "numpy", "matplotlib", "onnx", "onnxruntime", "PIL",
                   "cryptography", "filelock", "pyparsing", "tokenizers", "pydantic")

# The submission fixtures these tests use (pytest finds them by these names).
built = fx.built
passing_tree = fx.passing_tree


def test_json_report_validates_against_the_published_schema(passing_tree: Path) -> None:
    schema = json.loads((REPO / "suite/schemas/check-report.schema.json").read_text())
    _sys(accelerators_per_node="N/A")(passing_tree)
    _delete(PERF)(passing_tree)
    done = run_cli("check", str(passing_tree), "--json")
    assert done.returncode == 2, done.stderr
    report = json.loads(done.stdout)
    jsonschema.validate(report, schema)
    rules = {f["rule"] for r in report["results"] for f in r["findings"]}
    assert {"SYS-COUNTS", "PERF-LOG"} <= rules
    ok = run_cli("check", str(passing_tree.parent / "missing"))
    assert ok.returncode == 1


def test_acceptance_defects_together_each_on_its_result(passing_tree: Path) -> None:
    """Issue 3, acceptance 2: every defect at once, through the CLI, never a traceback."""
    for rule_id in ("PERF-LOG", "PERF-LATENCY", "ACC-TARGET", "PERF-DURATION", "COMP-DIR"):
        MUTATIONS[rule_id][0](passing_tree)
    _log(SPERF, effective_schedule_rng_seed=7)(passing_tree)
    _sys(accelerators_per_node="N/A", system_type="cloud")(passing_tree)
    done = run_cli("check", str(passing_tree), "--json")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    by_id = {r["id"]: {f["rule"] for f in r["findings"]}
             for r in json.loads(done.stdout)["results"]}
    assert {"PERF-LOG", "ACC-TARGET", "SYS-COUNTS", "SYS-TYPE"} <= by_id[OFF]
    assert {"PERF-LATENCY", "PERF-DURATION", "PERF-SEEDS", "COMP-DIR"} <= by_id[SRV]
    assert "PERF-SEEDS" not in by_id[OFF]
    # the system JSON itself is now corrupt: still findings, not a crash
    _write(SYSTEM, "\x00\xff")(passing_tree)
    assert run_cli("check", str(passing_tree)).returncode == 2


def test_a_mistyped_rule_id_is_a_type_error(tmp_path: Path) -> None:
    """Rule ids are an enum: mypy rejects a string, and a misspelt member."""
    import subprocess
    import sys

    snippet = tmp_path / "typo.py"
    snippet.write_text(
        "from suite.checker.context import ResultContext\n"
        "from suite.checker.findings import RuleId\n\n\n"
        "def f(ctx: ResultContext) -> None:\n"
        "    ctx.add('PERF-DURATOIN', None, 'x')\n"
        "    ctx.add(RuleId.PERF_DURATOIN, None, 'x')\n")
    # The suite's modules and the standard library are checked; the large typed packages
    # they reach (torch alone is ~1,400 modules) are skipped: they type nothing here.
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\nstrict = True\nfollow_imports = silent\n\n"
                      f"[mypy-{','.join(f'{p},{p}.*' for p in SKIPPED_BY_MYPY)}]\n"
                      "follow_imports = skip\n")
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(config),
                           "--cache-dir", str(tmp_path / "cache"), str(snippet)],
                          cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1, done.stdout
    assert 'incompatible type "str"; expected "RuleId"' in done.stdout
    assert "PERF_DURATOIN" in done.stdout

