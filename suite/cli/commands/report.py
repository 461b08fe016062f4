"""``suite report RUN... --html OUT``: one self-contained HTML page for finished runs
(latency plots, the Server tune sweep, accuracy, config with sources, INVALID
explanations). The page is built by ``suite.reports.html``, from the runs' records."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("report")
@click.argument("run_dirs", nargs=-1, required=True,
                type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--html", "out", required=True, type=click.Path(path_type=Path, dir_okay=False),
              help="write the HTML page here (images embedded, no external references)")
def report_command(run_dirs: tuple[Path, ...], out: Path) -> int:
    """Write an HTML report of finished runs: plots, tune sweep, accuracy, config."""
    from suite.reports.html import write_report

    path = write_report(list(run_dirs), out)
    click.echo(f"report: {path}")
    return 0


COMMANDS: list[click.Command] = [report_command]
