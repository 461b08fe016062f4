"""``suite report RUN... --out FILE``: one self-contained HTML page for finished runs
(latency plots, the Server tune sweep, accuracy, config with sources, INVALID
explanations). The page is built by ``suite.reports.html``, from the runs' records.
``--html FILE`` is the former name of ``--out`` (``--out`` names an output file in every
command)."""

from __future__ import annotations

from pathlib import Path

import click

from suite.cli.options import find_run, runs_dir_option

_FILE = click.Path(path_type=Path, dir_okay=False)


@click.command("report")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path),
                metavar="RUN...")
@click.option("--out", type=_FILE, metavar="FILE",
              help="write the HTML page here (images embedded, no external references)")
@click.option("--html", "html_alias", type=_FILE, hidden=True, help="the former name of --out")
@runs_dir_option("where a RUN given by name is")
def report_command(run_dirs: tuple[Path, ...], out: Path | None, html_alias: Path | None,
                   runs_dir: Path | None) -> int:
    """Write an HTML report of finished runs: plots, tune sweep, accuracy, config. Each RUN
    is a run directory or its name as `suite runs` lists it."""
    from suite.errors import SuiteError
    from suite.reports.html import write_report

    if out and html_alias and out != html_alias:
        raise click.UsageError(f"two output files given: --out {out} and --html {html_alias}; "
                               "give one")
    out = out or html_alias
    if out is None:
        raise click.UsageError("missing option '--out FILE': the HTML page to write")
    found = [find_run(run, runs_dir) for run in run_dirs]
    for run_dir in found:  # one line, exit 1, as every other error (not a usage error)
        if not run_dir.is_dir():
            raise SuiteError(f"{run_dir} is not a directory",
                             hint="give run directories, or runs' names as `suite runs` "
                                  "lists them (with the same --runs-dir)")
    path = write_report(found, out)
    click.echo(f"report: {path}")
    return 0


COMMANDS: list[click.Command] = [report_command]
