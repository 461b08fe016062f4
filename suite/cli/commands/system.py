"""``suite system``: probe this machine and write the official system description JSON."""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command("system")
@click.option("--system-config", "--config", "config_file", type=click.Path(path_type=Path),
              help="TOML with the human fields (submitter, system_name, status, cooling, ...); "
              "the same file as `suite package --system-config` (--config: its old name)")
@click.option("--division", default="closed", show_default=True)
@click.option("--out", type=click.Path(path_type=Path), help="write the JSON here "
              "(default: print it)")
@click.option("--round", "round_name", default=None)
def system_command(config_file: Path | None, division: str, out: Path | None,
                   round_name: str | None) -> int:
    """Probe the machine, merge your TOML, and list the required fields still empty."""
    from suite.api import system
    from suite.cli.console import stderr

    described = system(config_file, division=division, round_name=round_name)
    data, empty, unknown = described.data, described.empty, described.unknown
    text = json.dumps(data, indent=2) + "\n"
    if out is None:
        click.echo(text, nl=False)
    else:
        out.write_text(text)
    err = stderr()
    for name in unknown:
        err.print(f"[yellow]unknown field ignored:[/] {name}")
    if empty:
        err.print(f"[yellow]still empty ({len(empty)}):[/] {', '.join(empty)}")
    else:
        err.print("[green]every required field is filled[/]")
    return 0


COMMANDS: list[click.Command] = [system_command]
