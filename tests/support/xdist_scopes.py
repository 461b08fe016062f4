"""How ``make test`` (pytest-xdist, ``-n 2``) hands tests to its workers: a test module
whose tests share an expensive fixture runs whole on one worker, so the fixture is built
once per session instead of once per worker.

xdist's default (``--dist load``) deals the first quarter of the collection out one test
at a time, alternately: every module-scoped fixture of the integration tests (the real
LoadGen runs a module's tests read) was built on both workers. Its ``loadgroup`` mode
would hold marked tests together, but under pytest 9 it no longer does (it renames
``item._nodeid``, an attribute pytest 9 stopped reading), so the scopes are decided here,
from the test file's own text, by the controller (which collects nothing):

* a module that defines a module- or session-scoped fixture is one scope;
* the modules of one entry of ``SHARED`` are one scope together (their tests share a
  session fixture from ``tests/support``: the tinylm runs, the packaged digits tree);
* every other test is a scope of its own, dealt out one at a time, as ``load`` does.

Larger scopes are handed out first (xdist's ``loadscope`` order), so the long grouped
modules start early and the many short unit tests fill both workers at the end. Only
``--dist load`` (the default of ``-n``) and ``--dist loadgroup`` are changed; any other
``--dist`` is xdist's own.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

#: Modules whose tests share one session fixture from tests/support, by the fixture's
#: name: one scope each (the fixture is made once, on the one worker that runs them). A
#: new module that uses one adds itself here; left out, it is only slower (the fixture is
#: made again on the other worker), never wrong. A module-scoped fixture of tests/support
#: (``loaded``) is made once per module and worker: listing its module alone keeps it on
#: one worker.
SHARED: dict[str, tuple[str, ...]] = {
    # tests.support.tinylm_runs: tinylm's quick Offline, Server and Interactive runs
    "tinylm_runs": ("tests/integration/test_llm_package.py",
                    "tests/integration/test_llm_loadgen.py"),
    # tests.support.html_pages: the HTML report of three real runs and tune probes
    "reported": ("tests/integration/test_html_report.py",
                 "tests/integration/test_html_report_page.py"),
    # tests.support.round_trees: the generated v6.0 and v6.1 submission trees
    "trees": ("tests/integration/test_checker_round_tree.py",
              "tests/unit/checker/test_round_tree.py"),
    # tests.support.backend_variants: backends loaded once per module (torch.compile's
    # variants compile for seconds); the unit module's tests are short, so one unit
    # (the integration module's long runs stay spread over both workers)
    "loaded": ("tests/unit/backends/test_backend_contract.py",),
    # tests.support.stand_in_runs: each task card's Offline stand-in run (--mode all)
    "stand_in_offline": ("tests/integration/test_task_torch.py",
                         "tests/integration/test_audit_tasks.py"),
    # tests.support.submission_fixtures: two quick digits runs, a key, a packaged tree
    "built": ("tests/integration/test_audit_trust.py",
              "tests/integration/test_checker_rules.py",
              "tests/integration/test_ledger.py",
              "tests/integration/test_package_bundle.py",
              "tests/integration/test_package_output.py",
              "tests/integration/test_package_safety.py",
              "tests/unit/checker/test_checker_fuzz.py",
              "tests/unit/checker/test_checker_rules.py"),
}

_SHARED_BY_MODULE = {module: name for name, modules in SHARED.items() for module in modules}
_WIDE_FIXTURE = re.compile(
    r"""^\s*@pytest\.fixture\([^)]*scope\s*=\s*["'](module|session)["']""", re.MULTILINE)


@cache
def defines_wide_fixture(path: Path) -> bool:
    """Whether the test file at ``path`` defines a module- or session-scoped fixture."""
    try:
        return _WIDE_FIXTURE.search(path.read_text(encoding="utf-8")) is not None
    except OSError:
        return False


def scope_of(nodeid: str, rootpath: Path) -> str:
    """The work unit of the test ``nodeid``: a group's name, its module, or itself."""
    module = nodeid.split("::", 1)[0]
    if module in _SHARED_BY_MODULE:
        return f"shared:{_SHARED_BY_MODULE[module]}"
    if "::" in nodeid and defines_wide_fixture(rootpath / module):
        return module
    return nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") not in ("load", "loadgroup"):
        return None  # xdist's own scheduler for the mode asked for
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    rootpath = config.rootpath

    class SharedFixtureScheduling(LoadScopeScheduling):  # type: ignore[misc]
        """``loadscope`` with the scopes of ``scope_of``."""

        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid, rootpath)

    return SharedFixtureScheduling(config, log)
