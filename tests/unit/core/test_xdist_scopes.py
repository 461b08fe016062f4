"""make test's xdist work units (tests/support/xdist_scopes.py): a module whose tests share
a module- or session-scoped fixture, or a group of ``SHARED`` modules, is one unit; every
other test is a unit of its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.xdist_scopes import SHARED, defines_wide_fixture, scope_of


def test_a_module_with_a_module_scoped_fixture_is_one_unit() -> None:
    module = "tests/integration/test_llm_export.py"
    first = scope_of(f"{module}::test_the_export_equals_our_model_token_for_token", REPO)
    second = scope_of(f"{module}::test_a_card_that_is_not_an_llm_is_one_line", REPO)
    assert first == second == module


def test_independent_tests_are_units_of_their_own() -> None:
    case = ("tests/integration/test_backend_contract.py::"
            "test_every_scenario_runs_valid[null-offline]")
    assert not defines_wide_fixture(REPO / "tests/integration/test_backend_contract.py")
    assert scope_of(case, REPO) == case
    unit = "tests/unit/core/test_xdist_scopes.py::test_independent_tests_are_units_of_their_own"
    assert scope_of(unit, REPO) == unit


@pytest.mark.parametrize("fixture", sorted(SHARED))
def test_the_modules_sharing_a_session_fixture_are_one_unit(fixture: str) -> None:
    scopes = {scope_of(f"{module}::test_x", REPO) for module in SHARED[fixture]}
    assert scopes == {f"shared:{fixture}"}
    for module in SHARED[fixture]:
        assert re.search(rf"\b{fixture}\b", (REPO / module).read_text()), \
            f"{module} does not use {fixture}"


def test_the_fixture_scopes_are_read_from_the_decorator(tmp_path: Path) -> None:
    wide, narrow = tmp_path / "test_wide.py", tmp_path / "test_narrow.py"
    wide.write_text('@pytest.fixture(scope="session")\ndef f(): ...\n')
    narrow.write_text("@pytest.fixture\ndef f(): ...\n# scope=\"module\" in a comment\n")
    assert defines_wide_fixture(wide) and not defines_wide_fixture(narrow)
    assert not defines_wide_fixture(tmp_path / "missing.py")
