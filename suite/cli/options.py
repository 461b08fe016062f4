"""Options several commands share, named once: one name per concept.

``--runs-dir`` (where runs are read or written) with its real default in ``--help``
(``runs/`` in a checkout, the user's data directory for an installed wheel), and
``--out-dir`` for an output directory (``--out`` names an output file).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click


def _default_runs() -> str:
    from suite.paths import find_paths

    try:
        return str(find_paths().runs)
    except Exception:  # --help must never fail on a broken environment
        return "runs/ in a checkout, else the user's data directory"


F = TypeVar("F", bound=Callable[..., Any])


def runs_dir_option(what: str = "") -> Callable[[F], F]:
    """``--runs-dir DIR``; ``what`` says what the command does there."""
    text = f"{what} (default: {_default_runs()})" if what else f"default: {_default_runs()}"
    return click.option("--runs-dir", type=click.Path(path_type=Path), help=text)
