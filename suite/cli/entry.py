"""The ``suite`` command's entry point, light on purpose.

For ``suite run`` it starts the first test's child interpreter before importing the
CLI, so the child's imports overlap the parent's (``suite.harness.child_start``); everything else
goes straight to ``suite.cli.app``.
"""

from __future__ import annotations

import sys


def main() -> int:
    if sys.argv[1:2] == ["run"]:
        from suite.harness.child_start import start_early

        start_early()
    from suite.cli.app import main as cli_main

    return cli_main()
