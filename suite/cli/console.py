"""The command line's consoles: the one place that decides how wide output is and where
it goes.

* ``out``: standard output, for tables. A terminal's own width; piped (CI logs, files),
  ``COLUMNS`` when the environment sets it, else ``PIPED_WIDTH`` columns, so a table is not
  cut at 80.
* ``err``: standard error, for messages, progress and findings. Never wrapped: paths in
  messages must stay copy-pasteable.
* ``stdout(width)`` / ``stderr(width)``: a console of a given width (``None``: the
  terminal's, or rich's default when piped), for the renderers that size their own table.

Off a terminal, standard output's tables are drawn with ASCII borders (``+ - |``): a
table's width is then the same in characters and in bytes, so the tools that read piped
output (``awk '{ print length }'`` in mawk, ``cut -c``, ``wc -L`` on some systems) measure
the columns a reader sees. On a terminal rich's box-drawing characters stay.

rich is imported when a console is first made: ``out`` and ``err`` are made on first use,
and ``deferred`` hands ``suite.cli.app`` stand-ins that make them then, so that ``suite
run`` imports rich (~40 ms of CPU) once its child has its spec, not before.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, TextIO, cast

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["PIPED_WIDTH", "deferred", "err", "escape", "out", "stderr", "stdout"]

#: Tables (config, backends, diff, check, audit) on standard output, and messages on
#: standard error, never wrapped: both made on first use (``__getattr__`` below).
out: Console
err: Console

#: Columns of a table written to a pipe or a file.
PIPED_WIDTH = 160


class _AsciiBorders:
    """Standard output as rich sees it off a terminal: an ASCII stream, so rich draws
    tables with its ASCII box; text is passed through unchanged. ``sys.stdout`` is looked
    up at each write, as rich itself does, so a redirected stdout is followed."""

    encoding = "ascii"

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()

    def isatty(self) -> bool:
        return False


def stdout(width: int | None = None) -> Console:
    """A console on standard output, ``width`` columns wide (None: the terminal's)."""
    from rich.console import Console

    if sys.stdout.isatty():
        return Console(width=width)
    file: TextIO = _AsciiBorders()  # type: ignore[assignment]
    return Console(width=width, file=file)


def stderr(width: int | None = None) -> Console:
    """A console on standard error; without a width its lines are never wrapped."""
    from rich.console import Console

    if width is None:
        return Console(stderr=True, soft_wrap=True)
    return Console(stderr=True, width=width)


def piped_stdout(piped_width: int = PIPED_WIDTH) -> Console:
    """Standard output at the terminal's width, or, piped, ``COLUMNS`` where the
    environment sets it (a user who asks for 100 columns gets 100), else ``piped_width``."""
    if sys.stdout.isatty():
        return stdout(None)
    columns = os.environ.get("COLUMNS", "")
    return stdout(int(columns) if columns.isdigit() and int(columns) >= 40 else piped_width)


#: How ``out`` and ``err`` are made.
_MAKERS = {"out": piped_stdout, "err": stderr}


def __getattr__(name: str) -> Console:
    if name in _MAKERS:
        made = _MAKERS[name]()
        globals()[name] = made  # made once: later lookups find it without this hook
        return made
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Deferred:
    """``out`` or ``err`` before it is made: any use makes it (``__getattr__`` above)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(getattr(sys.modules[__name__], self._name), attr)


def deferred(name: str) -> Console:
    """A stand-in for ``out`` or ``err`` (``name``) whose methods (``print``) are the
    console's, made at the first call; pass ``getattr(console, name)`` itself where rich
    needs the console object (``Progress(console=...)``)."""
    return cast("Console", _Deferred(name))


def escape(text: str) -> str:
    """rich's markup escape, importing rich when first used."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)
