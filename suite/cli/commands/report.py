"""``suite report RUN... --html OUT``: one self-contained HTML page for finished runs
(latency plots, the Server tune sweep, accuracy, config with sources, INVALID
explanations). The page is built by ``suite.reports.html``, from the runs' records."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("report")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--html", "out", required=True, type=click.Path(path_type=Path, dir_okay=False),
              help="write the HTML page here (images embedded, no external references)")
def report_command(run_dirs: tuple[Path, ...], out: Path) -> int:
    """Write an HTML report of finished runs: plots, tune sweep, accuracy, config."""
    from suite.errors import SuiteError
    from suite.reports.html import write_report

    for run_dir in run_dirs:  # one line, exit 1, as every other error (not a usage error)
        if not run_dir.is_dir():
            raise SuiteError(f"{run_dir} is not a directory",
                             hint="give run directories (suite runs lists them)")
    path = write_report(list(run_dirs), out)
    click.echo(f"report: {path}")
    return 0


COMMANDS: list[click.Command] = [report_command]
