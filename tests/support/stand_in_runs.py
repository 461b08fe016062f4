"""Each task card's stand-in run in Offline, ``--mode all`` (performance, then accuracy),
on its default backend (onnxruntime), made once per test session through the real CLI and
LoadGen and read by every test that needs it:

* ``tests/integration/test_task_torch.py``: the run is VALID in both modes and scores the
  whole stand-in (issue 38's Offline case of every card), and its accuracy is the figure
  the torch backend must match;
* ``tests/integration/test_audit_tasks.py``: bert's and yolo's runs, packaged, signed
  and audited.

Three modules used to make these runs each (the Offline case of
``test_task_stand_ins.py``, the onnxruntime side of the torch test, the audit's bundle):
one run per card now serves them all. xdist keeps the modules that read them on one
worker (``SHARED`` in ``tests/support/xdist_scopes.py``). Tests only read a run: one that
edits a file copies the run first (``copy_into``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import only_run_dir, run_cli


@dataclass(frozen=True)
class StandInRun:
    """One card's Offline ``--mode all`` stand-in run: the command and what it wrote."""

    done: subprocess.CompletedProcess[str]
    run_dir: Path
    result: dict[str, Any]


def copy_into(runs: Path, *made: StandInRun) -> Path:
    """``runs`` (made) holding a copy of each run's directory, under its own name: a runs
    directory of these runs alone, to package or to edit."""
    runs.mkdir(parents=True, exist_ok=True)
    for run in made:
        shutil.copytree(run.run_dir, runs / run.run_dir.name)
    return runs


@pytest.fixture(scope="session")
def stand_in_offline(tmp_path_factory: pytest.TempPathFactory
                     ) -> Callable[[str, str], StandInRun]:
    """``(round, benchmark) -> StandInRun``: the card's run, made on first request (so a
    worker makes only the cards its tests read)."""
    made: dict[tuple[str, str], StandInRun] = {}

    def get(round_name: str, benchmark: str) -> StandInRun:
        if (round_name, benchmark) not in made:
            runs = tmp_path_factory.mktemp(f"stand-in-{benchmark}") / "runs"
            done = run_cli("run", "--benchmark", benchmark, "--round", round_name,
                           "--stand-in", "--mode", "all", "--scenario", "offline",
                           "--runs-dir", str(runs), timeout=900)
            run_dir = only_run_dir(runs)
            result = json.loads((run_dir / "result.json").read_text())
            made[(round_name, benchmark)] = StandInRun(done, run_dir, result)
        return made[(round_name, benchmark)]

    return get
