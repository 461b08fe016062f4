"""``suite system``: probe this machine and write the official system description JSON."""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command("system")
@click.option("--config", "config_file", type=click.Path(path_type=Path),
              help="TOML with the human fields (submitter, system_name, status, cooling, ...)")
@click.option("--division", default="closed", show_default=True)
@click.option("--out", type=click.Path(path_type=Path), help="write the JSON here "
              "(default: print it)")
@click.option("--round", "round_name", default=None)
def system_command(config_file: Path | None, division: str, out: Path | None,
                   round_name: str | None) -> int:
    """Probe the machine, merge your TOML, and list the required fields still empty."""
    from rich.console import Console

    from ..paths import find_paths
    from ..rules import DEFAULT_ROUND, load_rules
    from ..system_description import describe, probe, read_user_toml

    rules = load_rules(find_paths(), round_name or DEFAULT_ROUND)
    assert rules.submission is not None
    data, empty, unknown = describe(rules.submission, read_user_toml(config_file), probe(),
                                    division=division)
    text = json.dumps(data, indent=2) + "\n"
    if out is None:
        click.echo(text, nl=False)
    else:
        out.write_text(text)
    err = Console(stderr=True, soft_wrap=True)
    for name in unknown:
        err.print(f"[yellow]unknown field ignored:[/] {name}")
    if empty:
        err.print(f"[yellow]still empty ({len(empty)}):[/] {', '.join(empty)}")
    else:
        err.print("[green]every required field is filled[/]")
    return 0


COMMANDS: list[click.Command] = [system_command]
