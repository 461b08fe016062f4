"""Generated round trees (v6.0, v6.1) for the checker's tests, and their edit helpers."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from suite.config.rules import load_rules
from suite.paths import find_paths
from tests.support import round_tree_generator as gen
from tests.support.submission_fixtures import patch_log

PATHS = find_paths()


V60 = load_rules(PATHS, "v6.0")


DC = "closed/ORG/results/datacenter-box"


EDGE = "closed/ORG/results/edge-box"


LLAMA = f"{DC}/llama2-70b-99"


INTER, LSRV, LOFF = f"{LLAMA}/Interactive", f"{LLAMA}/Server", f"{LLAMA}/Offline"


RESNET_OFF = f"{EDGE}/resnet/Offline"


OPEN = f"open/OPENORG/results/datacenter-box/{gen.OPEN_DIR}/Offline"


RUN1 = "performance/run_1/mlperf_log_detail.txt"


@pytest.fixture(scope="session")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The generated v6.0 and v6.1 trees, made once per session (tests read them or copy
    ``tree``): the checker's integration and unit modules share them on one xdist worker
    (``SHARED`` in tests/support/xdist_scopes.py)."""
    base = tmp_path_factory.mktemp("round")
    return {r: gen.build_tree(r, base / r, base / "lgcache") for r in ("v6.0", "v6.1")}


@pytest.fixture
def tree(trees: dict[str, Path], tmp_path: Path) -> Path:
    return gen.copy_tree(trees["v6.0"], tmp_path / "tree")


def _findings(report: object, where: str) -> set[str]:
    by_id = {r.id: r for r in report.results}  # type: ignore[attr-defined]
    return {f.rule for f in by_id[where].findings if f.severity == "error"}


def _log(rel: str, **values: object) -> Callable[[Path], None]:
    return lambda t: patch_log(t / rel, {k.replace("__", "."): v for k, v in values.items()})


def _write(rel: str, text: str) -> Callable[[Path], None]:
    return lambda t: (t / rel).write_text(text)


def _delete(rel: str) -> Callable[[Path], None]:
    def mutate(t: Path) -> None:
        path = t / rel
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return mutate


def _edit(rel: str, old: str, new: str) -> Callable[[Path], None]:
    def mutate(t: Path) -> None:
        path = t / rel
        assert old in path.read_text()
        path.write_text(path.read_text().replace(old, new))
    return mutate
