"""``suite lint``: the pre-flight linter on its own (``suite run`` runs it too).
Exit 0 when the config resolves (warnings included), 1 on errors."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("lint")
@click.option("--benchmark", default="digits", show_default=True)
@click.option("--scenario", default="offline", show_default=True)
@click.option("--backend", default="onnxruntime", show_default=True)
@click.option("--mode", default="performance", show_default=True)
@click.option("--round", "round_name", default=None, help="default: the newest round")
@click.option("--quick", is_flag=True)
@click.option("--config", "config_file", type=click.Path(path_type=Path))
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE")
@click.option("--force", is_flag=True, help="lint a run predicted longer than 7 days as a warning")
@click.option("--json", "as_json", is_flag=True,
              help="print the report as JSON (suite/schemas/lint-report.schema.json)")
def lint_command(benchmark: str, scenario: str, backend: str, mode: str,
                 round_name: str | None, quick: bool, config_file: Path | None,
                 sets: tuple[str, ...], force: bool, as_json: bool) -> int:
    """Lint a run's configuration without running it: keys, units, ignored and fixed values."""
    from suite.api import lint
    from suite.cli.console import stdout
    from suite.cli.render import print_lint
    from suite.config.loader import ConfigRequest
    from suite.config.rules import DEFAULT_ROUND

    request = ConfigRequest(benchmark=benchmark, scenario=scenario, backend=backend, mode=mode,
                            round=round_name or DEFAULT_ROUND, quick=quick,
                            config_file=config_file, sets=list(sets), force=force)
    report = lint(request)
    if as_json:
        click.echo(report.model_dump_json(indent=2))
    else:
        print_lint(report, stdout(160), table=True)
    return 1 if report.errors else 0


COMMANDS: list[click.Command] = [lint_command]
