"""The package's shape: no import cycle, the layering contracts, and modules that stay small.

The contracts themselves live in ``pyproject.toml`` (``[tool.importlinter]``) and run in
``make lint``; these tests make a broken contract or a new cycle fail ``make test`` too.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

grimp = pytest.importorskip(
    "grimp", reason="the layering tests need grimp (import-linter, a dev dependency)")

REPO = Path(__file__).resolve().parents[3]
SUITE = REPO / "suite"


def import_cycles(package: str, ignore: Iterable[str] = ()) -> list[list[str]]:
    """Every strongly connected set of more than one module (Tarjan) in ``package``'s
    import graph: module-level, function-level and type-checking imports alike."""
    graph = grimp.build_graph(package, include_external_packages=False)
    skip = set(ignore)
    nodes = sorted(m for m in graph.modules if m not in skip)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m) - skip) for m in nodes}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in edges[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in nodes:
        if node not in index:
            visit(node)
    return cycles


def test_the_suite_has_no_import_cycle() -> None:
    # The root package is left out: its lazy ``__getattr__`` re-exports ``run`` (the
    # public face, above every layer), and every submodule import loads it first anyway.
    assert import_cycles("suite", ignore=["suite"]) == []


def test_subpackages_form_no_cycle_either() -> None:
    graph = grimp.build_graph("suite", include_external_packages=False)

    def group(module: str) -> str:
        return ".".join(module.split(".")[:2])

    edges: dict[str, set[str]] = {}
    for module in graph.modules - {"suite"}:
        for other in graph.find_modules_directly_imported_by(module) - {"suite"}:
            if group(module) != group(other):
                edges.setdefault(group(module), set()).add(group(other))
    # Depth-first search for a back edge between subpackages.
    state: dict[str, int] = {}

    def back_edge(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for other in sorted(edges.get(node, ())):
            if state.get(other) == 1:
                return [*path, node, other]
            if other not in state and (found := back_edge(other, [*path, node])):
                return found
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            assert back_edge(node, []) is None


def test_a_cycle_is_found_where_there_is_one(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "cyclic_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from cyclic_pkg import b\n")
    (package / "b.py").write_text("def f() -> None:\n    from cyclic_pkg import c\n")
    (package / "c.py").write_text("import cyclic_pkg.a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles("cyclic_pkg") == [["cyclic_pkg.a", "cyclic_pkg.b", "cyclic_pkg.c"]]


def test_the_layering_contracts_hold() -> None:
    linter = Path(sys.executable).with_name("lint-imports")
    if not linter.exists():
        pytest.skip(f"lint-imports is not installed beside {sys.executable} "
                    "(pip install -e '.[dev]')")
    done = subprocess.run([str(linter), "--config", str(REPO / "pyproject.toml")], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def test_at_most_15_modules_sit_loose_and_none_is_over_400_lines() -> None:
    loose = sorted(p.name for p in SUITE.glob("*.py"))
    assert len(loose) <= 15, loose
    long = {str(p.relative_to(REPO)): n for p in SUITE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400}
    assert long == {}
