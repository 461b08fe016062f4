"""tinylm's quick runs through the real LoadGen, made once per test session and read by
every test that needs one (``tests/integration/test_llm_loadgen.py`` reads the three
scenarios' performance tests, ``test_llm_package.py`` packages, signs and audits the
Offline and Interactive runs).

* ``offline``: tinylm Offline, ``--mode all`` (performance, then accuracy);
* ``interactive``: tinylm-interactive Server, ``--mode all``;
* ``server``: tinylm Server, performance only, in a runs directory of its own, so that
  the package tree of ``runs`` holds Offline and Interactive alone (no ``Server``).

Each run is made in-process with ``suite.harness.run.run`` and must have written what it
returned (``result.json``). Tests only read these runs: a test that edits a file copies
it first. xdist keeps the modules that read them on one worker (``SHARED`` in
``tests/support/xdist_scopes.py``), so the runs are made once per ``make test``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from suite.config.loader import ConfigRequest
from suite.results import RunResult


@dataclass(frozen=True)
class TinylmRuns:
    """The session's tinylm runs by name and the directories that hold them."""

    results: dict[str, RunResult]
    #: The Offline and Interactive runs (``--mode all``): what ``suite package`` reads.
    runs: Path


def tinylm_run(runs_dir: Path, scenario: str, benchmark: str = "tinylm",
               mode: str = "performance", sets: tuple[str, ...] = ()) -> RunResult:
    """One quick torch-llm run in-process; asserts that ``result.json`` is what it returned."""
    from suite.harness.run import run

    result = run(ConfigRequest(benchmark=benchmark, backend="torch-llm", scenario=scenario,
                               mode=mode, quick=True, runs_dir=runs_dir, sets=list(sets)))
    assert RunResult.load(Path(result.run_dir) / "result.json") == result
    return result


@pytest.fixture(scope="session")
def tinylm_runs(tmp_path_factory: pytest.TempPathFactory) -> TinylmRuns:
    """Made by the first test of the session that asks for them (a plugin of
    tests/conftest.py: one definition, so one set of runs per session)."""
    base = tmp_path_factory.mktemp("tinylm-runs")
    runs = base / "runs"
    results = {"offline": tinylm_run(runs, "offline", mode="all"),
               "server": tinylm_run(base / "server-runs", "server"),
               "interactive": tinylm_run(runs, "server", "tinylm-interactive", mode="all")}
    return TinylmRuns(results, runs)
