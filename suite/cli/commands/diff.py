"""``suite diff RUN_A RUN_B``: what differs between two finished runs, read from their
records (config with sources, metrics and latency percentiles, system, model, round).
Each run is a directory, or its name under ``--runs-dir`` as ``suite runs`` lists it.

Exit 0 when the runs were compared (differences are no error); 1 when a run directory
or one of its records is missing or unreadable.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from suite.cli.options import find_run, runs_dir_option


@click.command("diff")
@click.argument("run_a", type=click.Path(path_type=Path))
@click.argument("run_b", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True,
              help="print the diff as JSON (round_changed and model_changed included)")
@runs_dir_option("where a run given by name is")
def diff_command(run_a: Path, run_b: Path, as_json: bool, runs_dir: Path | None) -> int:
    """Compare run B against run A: config keys and their sources, metric and latency
    deltas per test, system and dataset differences, model and round changes."""
    from suite.cli.console import piped_stdout
    from suite.reports.diff import diff_runs
    from suite.reports.diff_render import render

    diff = diff_runs(find_run(run_a, runs_dir), find_run(run_b, runs_dir))
    if as_json:
        sys.stdout.write(diff.to_json())
        return 0
    console = piped_stdout()
    for part in render(diff):
        console.print(part)
    return 0


COMMANDS: list[click.Command] = [diff_command]
