"""infersuite: MLPerf-style inference benchmarks driven by the real MLPerf LoadGen.

The public API is ``suite.api``: every command is a library call there, returning a
typed result; the CLI (``suite``) is one client of it::

    from suite import ConfigRequest, api
    result = api.run(ConfigRequest(benchmark="digits", scenario="server", quick=True))
    report = api.check(Path(result.run_dir))

(Only ``run`` is re-exported here: ``system`` and ``audit`` are also subpackage or
submodule names.) ``__version__`` comes from ``suite.version``, the one place it
is written.

Importing ``suite`` imports no ML framework and not LoadGen.
"""

from __future__ import annotations

from suite.version import __version__

# Not ``typing``'s: ``python -m suite run`` starts its child before importing it (mypy
# reads any ``TYPE_CHECKING`` as True).
TYPE_CHECKING = False

__all__ = ["ConfigRequest", "RunConfig", "RunResult", "SuiteError", "__version__", "run"]

if TYPE_CHECKING:
    from typing import Any

    from suite.api import run
    from suite.config.loader import ConfigRequest, RunConfig
    from suite.errors import SuiteError
    from suite.results import RunResult


def __getattr__(name: str) -> Any:
    # Lazy: `import suite` must stay fast and framework-free.
    if name == "run":
        from suite.api import run

        return run
    if name in ("ConfigRequest", "RunConfig"):
        from suite.config import loader as config

        return getattr(config, name)
    if name == "SuiteError":
        from suite.errors import SuiteError

        return SuiteError
    if name == "RunResult":
        from suite.results import RunResult

        return RunResult
    raise AttributeError(f"module 'suite' has no attribute {name!r}")
