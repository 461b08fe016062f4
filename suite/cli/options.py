"""Options several commands share, named once: one name per concept.

``--runs-dir DIR`` wherever runs are read or written, with its real default in ``--help``
(``runs/`` in a checkout, the user's data directory for an installed wheel) and checked
before anything is written (``suite.paths.check_runs_dir``). A command that reads runs
takes each RUN as a path or as a run's name under ``--runs-dir`` (``find_run``), so what
``suite runs`` lists can be pasted into ``show``, ``diff``, ``report`` and ``check``.
Outputs: ``--out FILE`` names an output file, ``--out-dir DIR`` an output directory;
an older spelling stays as a hidden alias.
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


def runs_dir_option(what: str = "", *, writes: bool = False,
                    default_under: str = "") -> Callable[[F], F]:
    """``--runs-dir DIR``; ``what`` says what the command does there. ``writes``: the
    command makes run directories there (the directory may be new, its parent may not);
    otherwise it reads runs, and the directory must exist. ``default_under``: the default
    is that subdirectory of the runs directory."""
    default = str(Path(_default_runs()) / default_under) if default_under else _default_runs()
    text = f"{what} (default: {default})" if what else f"default: {default}"

    def check(_ctx: click.Context, _param: click.Parameter, value: Path | None) -> Path | None:
        from suite.paths import check_runs_dir

        return None if value is None else check_runs_dir(value, create=writes)

    return click.option("--runs-dir", type=click.Path(path_type=Path), callback=check,
                        help=text)


def find_run(given: Path, runs_dir: Path | None) -> Path:
    """The run directory ``given`` names: a path to it, else a run's name (or relative path)
    under ``runs_dir`` (default: the runs directory), as ``suite runs`` lists it. ``given``
    itself when neither is a directory: the command words what is missing."""
    if given.is_dir() or given.is_absolute():
        return given
    if runs_dir is None:
        from suite.errors import SuiteError
        from suite.paths import find_paths

        try:
            runs_dir = find_paths().runs
        except SuiteError:  # a broken SUITE_HOME: the path as given, named as missing
            return given
    return runs_dir / given if (runs_dir / given).is_dir() else given


def backend_for_urls(backend: str | None, urls: tuple[str, ...], given: bool) -> str | None:
    """``--url`` belongs to the ``openai`` backend: without ``--backend`` it chooses it (and
    says so on stderr); with another ``--backend`` it is refused, never silently ignored."""
    if not urls:
        return backend
    if given and backend != "openai":
        from suite.errors import ConfigError

        raise ConfigError(f"--url is an option of the openai backend, and this run's is "
                          f"--backend {backend}",
                          hint="drop --url, or run --backend openai --url URL")
    if not given:
        click.echo("--url: the openai backend (--backend openai) serves this run", err=True)
    return "openai"
