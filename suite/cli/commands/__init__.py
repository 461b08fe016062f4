"""Extra ``suite`` subcommands, one module per area, found at start-up.

Each module here exposes ``COMMANDS: list[click.Command]``; ``app`` adds them to the
``suite`` group. A command module imports only click and the standard library at
module level (heavy work is imported inside the command), so ``suite --help`` stays
fast.
"""

from __future__ import annotations

import importlib
import pkgutil

import click


def discover() -> list[click.Command]:
    """Every command of every module in this package, in module-name order."""
    commands: list[click.Command] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        commands.extend(getattr(module, "COMMANDS", []))
    return commands
