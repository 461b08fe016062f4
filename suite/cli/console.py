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
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

from rich.console import Console

__all__ = ["PIPED_WIDTH", "err", "out", "stderr", "stdout"]

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
    if sys.stdout.isatty():
        return Console(width=width)
    file: TextIO = _AsciiBorders()  # type: ignore[assignment]
    return Console(width=width, file=file)


def stderr(width: int | None = None) -> Console:
    """A console on standard error; without a width its lines are never wrapped."""
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


#: Tables (config, backends, diff, check, audit) on standard output.
out = piped_stdout()
#: Messages on standard error, never wrapped.
err = stderr()
