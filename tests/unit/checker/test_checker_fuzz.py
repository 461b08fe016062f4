"""``suite check`` never raises: any file of a tree replaced by arbitrary bytes, JSON
of the wrong type, or a directory where a file was, gives findings, not a traceback;
and a corrupted LoadGen detail log always gives a failing (error) finding on its result,
never a pass."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from suite.checker import check_path
from suite.config.rules import load_rules
from suite.paths import find_paths
from tests.support import submission_fixtures as fx

built = fx.built
passing_tree = fx.passing_tree  # summaries of TESTxx runs are not needed: no pass asserted

RULESET = load_rules(find_paths(), "v6.1")
_JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                        lambda c: st.lists(c, max_size=3) | st.dictionaries(
                            st.text(max_size=6), c, max_size=3), max_leaves=8)


@settings(max_examples=60, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture])
@given(index=st.integers(min_value=0), content=st.one_of(
    st.binary(max_size=300), _JSONISH.map(lambda v: json.dumps(v).encode()),
    st.just(b":::MLLOG {\"key\": \"effective_scenario\", \"metadata\": 3}\n"), st.none()))
def test_check_never_raises(passing_tree: Path, index: int, content: bytes | None) -> None:
    files = sorted(p for p in passing_tree.rglob("*") if p.is_file())
    target = files[index % len(files)]
    original = target.read_bytes()
    try:
        if content is None:
            target.unlink()
            target.mkdir()  # a directory where a file should be
        else:
            target.write_bytes(content)
        report = check_path(passing_tree, RULESET)
        assert report.summary.results >= 1
        # digits requires TEST01 only: the fixture's TEST04 run is not part of the verdict
        judged = "/TEST04/" not in target.as_posix()
        if target.name == "mlperf_log_detail.txt" and content != original and judged:
            rel = target.relative_to(passing_tree).as_posix()
            errors = [f for r in report.results for f in r.findings
                      if f.severity == "error" and f.file == rel]
            assert errors, f"{rel} corrupted ({content!r:.60}) but no error finding names it"
            assert not report.passed
    finally:
        if target.is_dir():
            shutil.rmtree(target)
        target.write_bytes(original)
