"""Where the suite's data directories live.

The data (``run_rules/``, ``scenarios/``, ``reference_models/``) sits at the top of
the repository, beside the ``suite`` package. ``SUITE_HOME`` points elsewhere (for
an installed, non-editable copy); it is read here and nowhere else.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError


@dataclass(frozen=True)
class Paths:
    """The data and output directories of one suite checkout."""

    home: Path

    @property
    def run_rules(self) -> Path:
        return self.home / "run_rules"

    @property
    def scenarios(self) -> Path:
        return self.home / "scenarios"

    @property
    def reference_models(self) -> Path:
        return self.home / "reference_models"

    @property
    def runs(self) -> Path:
        return self.home / "runs"

    @property
    def submissions(self) -> Path:
        return self.home / "submissions"


def find_paths(home: Path | None = None) -> Paths:
    """Locate the data directories: ``home``, else ``$SUITE_HOME``, else the checkout.

    Example::

        paths = find_paths()
        rules_file = paths.run_rules / "v6.1.toml"
    """
    if home is None:
        env = os.environ.get("SUITE_HOME")
        home = Path(env) if env else Path(__file__).resolve().parent.parent
    home = home.resolve()
    if not (home / "run_rules").is_dir():
        raise ConfigError(
            f"no run_rules/ directory under {home}",
            hint="set SUITE_HOME to the infersuite checkout that holds run_rules/, "
            "scenarios/ and reference_models/",
        )
    return Paths(home)
