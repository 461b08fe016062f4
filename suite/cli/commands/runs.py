"""``suite runs [RUNS_DIR]``: the run ledger (see ``suite.reports.ledger``), each row led by
the run's path, which ``suite show``, ``diff``, ``report`` and ``check`` take. Exit 0 when
listed, 1 when the runs directory or a filter is bad; unreadable runs are named, not fatal."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from suite.cli.options import runs_dir_option

STATUSES = ("VALID", "INVALID", "FAILED", "INTERRUPTED")


@click.command("runs")
@click.argument("runs_dir_arg", metavar="[RUNS_DIR]", required=False,
                type=click.Path(path_type=Path))
@runs_dir_option("the runs to list (RUNS_DIR, the argument, is the same)")
@click.option("--benchmark", help="only this benchmark")
@click.option("--scenario", help="only this scenario")
@click.option("--backend", help="only this backend")
@click.option("--mode", help="only this mode (performance, accuracy, all, TEST01...)")
@click.option("--status", type=click.Choice(STATUSES, case_sensitive=False),
              help="only attempts that ended so")
@click.option("--since", help="only attempts at or after this ISO date or time (UTC)")
@click.option("--json", "as_json", is_flag=True, help="print the ledger as JSON")
def runs_command(runs_dir_arg: Path | None, runs_dir: Path | None, benchmark: str | None,
                 scenario: str | None,
                 backend: str | None, mode: str | None, status: str | None,
                 since: str | None, as_json: bool) -> int:
    """Every attempt under RUNS_DIR (default: the runs directory), grouped by config
    digest with the best of each group marked."""
    from rich.markup import escape

    from suite.cli.console import piped_stdout, stderr
    from suite.paths import check_runs_dir, find_paths
    from suite.reports.ledger import Filters, list_runs, render

    if runs_dir_arg is not None:
        runs_dir_arg = check_runs_dir(runs_dir_arg, create=False, option="RUNS_DIR")
    if runs_dir and runs_dir_arg and runs_dir != runs_dir_arg:
        raise click.UsageError(f"two runs directories given: {runs_dir_arg} and --runs-dir "
                               f"{runs_dir}; give one")
    runs_dir = runs_dir or runs_dir_arg

    ledger = list_runs(runs_dir or find_paths().runs,
                       Filters(benchmark, scenario, backend, mode, status, since))
    if as_json:
        sys.stdout.write(json.dumps(ledger.to_dict(), indent=2) + "\n")
    else:
        # Off a terminal the table keeps its natural width: a run's path is never cut.
        piped_stdout(1000).print(render(ledger))
    err = stderr()
    for item in ledger.skipped:
        err.print(escape(f"skipped {item.path}: {item.why}"))
    return 0


COMMANDS: list[click.Command] = [runs_command]
