"""``suite config``: the resolved configuration of a run and where each value came from,
as a table or as JSON (no run)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from suite.cli.app import build_request, config_options


@click.command("config")
@config_options
@click.option("--json", "as_json", is_flag=True,
              help="print {key: {value, source}} as JSON (values as --set takes them)")
def config_command(benchmark: str, scenario: str, backend: str, mode: str, round_name: str,
                   quick: bool, config_file: Path | None, sets: tuple[str, ...],
                   system: str | None, as_json: bool) -> int:
    """Print the resolved configuration and where each value came from (no run). Values
    are written as `--set KEY=VALUE` takes them (`true`, `"cuda"`, `["a", "b"]`)."""
    import json

    from rich.markup import escape
    from rich.table import Table

    from suite.api import prepare
    from suite.cli.console import err, out

    request = build_request(benchmark, scenario, backend, mode, round_name, quick, config_file,
                       list(sets), None, {})
    request.system = system
    resolved = prepare(request).config
    values = {f"loadgen.{k}": v for k, v in resolved.loadgen.model_dump(mode="json").items()}
    values |= {f"sut.{k}": v for k, v in resolved.sut.model_dump(mode="json").items()}
    values |= {f"data.{k}": v for k, v in resolved.data.model_dump(mode="json").items()}
    values |= {f"backend.{resolved.backend}.{k}": v
               for k, v in resolved.backend_options.items()}
    if as_json:
        sys.stdout.write(json.dumps({
            "benchmark": resolved.benchmark, "scenario": resolved.scenario.value,
            "backend": resolved.backend,
            "values": {key: {"value": value, "source": resolved.provenance.get(key, "default")}
                       for key, value in values.items()},
            "non_submittable_reasons": list(resolved.non_submittable_reasons)},
            indent=2, default=str) + "\n")
        return 0
    table = Table(title=f"{resolved.benchmark} {resolved.scenario.value} on {resolved.backend}")
    table.add_column("key", no_wrap=True)  # a key is what --set takes: never cut
    table.add_column("value", overflow="fold")
    table.add_column("source", overflow="fold")
    for key, value in values.items():
        source = resolved.provenance.get(key, "default")
        table.add_row(escape(key), escape(json.dumps(value, default=str)), escape(source))
    out.print(table)
    for reason in resolved.non_submittable_reasons:
        err.print(f"[yellow]not submittable:[/] {escape(reason)}")
    return 0


COMMANDS: list[click.Command] = [config_command]
