"""docs/architecture.md's Layout names every module of ``suite/``, in its package's row.

The rule, as the Layout section states it: each ``.py`` file of ``suite/`` but
``__init__.py`` and ``__main__.py`` is named in backquotes, by its file name (``run.py``) or
its stem (``run``), in the row of its own package. A top-level module has a row whose first
cell is its file name; a subpackage's module is named in the row whose first cell is its
directory relative to ``suite/`` (``harness/sut/``), one row per directory of modules. The
modules are read from the file system when the test runs, so a module added or moved
fails here until the doc follows (issue 35).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from tests.conftest import REPO

SUITE = REPO / "suite"
DOC = REPO / "docs" / "architecture.md"
NOT_MODULES = {"__init__.py", "__main__.py"}


def _layout_rows(text: str) -> dict[str, set[str]]:
    """The Layout section's table rows: first cell's name -> every backquoted name in
    the row."""
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, set[str]] = {}
    for line in section.splitlines():
        if not line.startswith("|") or set(line) <= {"|", "-", " "}:
            continue
        cells = line.strip().strip("|").split("|")
        key = re.findall(r"`([^`]+)`", cells[0])
        if len(key) == 1:  # a header row has no backquoted first cell
            assert key[0] not in rows, f"two rows for {key[0]}"
            rows[key[0]] = set(re.findall(r"`([^`]+)`", line))
    return rows


def _modules() -> dict[str, list[Path]]:
    """Each directory of modules (``""`` for ``suite/`` itself, else ``"harness/sut/"``)
    and its modules."""
    found: dict[str, list[Path]] = {}
    for path in sorted(SUITE.rglob("*.py")):
        if path.name in NOT_MODULES or "__pycache__" in path.parts:
            continue
        folder = path.parent.relative_to(SUITE).as_posix()
        found.setdefault("" if folder == "." else folder + "/", []).append(path)
    return found


def _missing(rows: dict[str, set[str]], modules: dict[str, list[Path]]) -> list[str]:
    missing = []
    for folder, paths in modules.items():
        if folder and folder not in rows:
            missing.append(f"suite/{folder}: no row `{folder}` in the Layout section "
                           f"(its modules: {', '.join(p.name for p in paths)})")
            continue
        for path in paths:
            if not folder:
                if path.name not in rows:
                    missing.append(f"suite/{path.name}: no row `{path.name}`")
            elif not {path.name, path.stem} & rows[folder]:
                missing.append(f"suite/{folder}{path.name}: not named in the `{folder}` row")
    return missing


def test_the_layout_names_every_module_of_suite_in_its_packages_row() -> None:
    rows, modules = _layout_rows(DOC.read_text(encoding="utf-8")), _modules()
    assert "harness/" in rows and "errors.py" in rows and len(modules) > 10  # the parser works
    missing = _missing(rows, modules)
    assert not missing, "docs/architecture.md (Layout) misses:\n" + "\n".join(missing)


def test_every_file_a_layout_row_names_exists() -> None:
    rows = _layout_rows(DOC.read_text(encoding="utf-8"))
    stale = []
    for key, names in rows.items():
        folder = SUITE / key if key.endswith("/") else SUITE
        if key.endswith("/") or key.endswith(".py"):
            stale += [f"row `{key}`: suite/{(folder / n).relative_to(SUITE)}" for n in names
                      if re.fullmatch(r"\w+\.py", n) and not (folder / n).is_file()]
    assert not stale, "docs/architecture.md (Layout) names files that do not exist:\n" + \
        "\n".join(stale)


def _core_table(text: str) -> set[str]:
    """The modules of the Layout section's core table (``### The core: ...``)."""
    table = text.split("\n### The core:", 1)[1].split("\n### ", 1)[0]
    return {m for line in table.splitlines() if line.startswith("| `")
            for m in re.findall(r"^\| `(\w+)\.py`", line)}


def test_the_core_table_is_the_core_layer_of_the_import_contract() -> None:
    """The doc's core is the import-linter contract's bottom layer: a module of a higher
    layer (``api.py``) listed as core, or a core module missing, fails here."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    [contract] = [c for c in config["tool"]["importlinter"]["contracts"]
                  if "containers" not in c and c["type"] == "layers"]
    core = {name.strip().removeprefix("suite.") for name in contract["layers"][-1].split(":")}
    assert _core_table(DOC.read_text(encoding="utf-8")) == core


def test_a_module_missing_from_its_row_or_a_new_package_is_reported() -> None:
    rows = {"run.py": {"run.py"}, "harness/": {"harness/", "run.py", "child"}}
    modules = {"": [SUITE / "run.py", SUITE / "api.py"],
               "harness/": [SUITE / "harness/run.py", SUITE / "harness/child.py",
                            SUITE / "harness/tune.py"],
               "llm/endpoint/": [SUITE / "llm/endpoint/sse.py"]}
    assert _missing(rows, modules) == [
        "suite/api.py: no row `api.py`",
        "suite/harness/tune.py: not named in the `harness/` row",
        "suite/llm/endpoint/: no row `llm/endpoint/` in the Layout section (its modules: "
        "sse.py)"]
