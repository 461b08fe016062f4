"""``suite check PATH`` and ``suite rules``: validate a run directory or a submission
tree against a round's rules (a run also by its name under ``--runs-dir``, as ``suite
runs`` lists it). Exit 0 all pass, 2 a rule failed, 1 usage error."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from suite.cli.options import find_run, runs_dir_option

ROUND_HELP = ("run-rules round (default: the round the tree's LoadGen seeds name; "
              "a run directory: its own round)")


@click.command("check")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--round", "round_name", default=None, help=ROUND_HELP)
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON (see "
              "suite/schemas/check-report.schema.json)")
@click.option("--compat-official", is_flag=True,
              help="skip the strict-only rules to reproduce the official checker's verdicts")
@click.option("--submission-exceptions", is_flag=True,
              help="as the official flag: waive LoadGen's uncommitted-build error (only it)")
@runs_dir_option("where a run given by name is")
def check_command(path: Path, round_name: str | None, as_json: bool,
                  compat_official: bool, submission_exceptions: bool,
                  runs_dir: Path | None) -> int:
    """Validate a run directory or a submission tree; every finding names its rule."""
    from suite.api import check
    from suite.checker.render import render
    from suite.cli.console import piped_stdout

    report = check(find_run(path, runs_dir), round_name, compat_official=compat_official,
                   submission_exceptions=submission_exceptions)
    if as_json:
        sys.stdout.write(report.model_dump_json(indent=2) + "\n")
    else:
        render(report, piped_stdout())
    return 0 if report.passed else 2


@click.command("rules")
def rules_command() -> int:
    """List every rule id of suite check, its severity and its source."""
    from rich.table import Table

    from suite.checker import RULES
    from suite.cli.console import stdout

    table = Table(title="suite check rules")
    for column in ("id", "severity", "strict only", "checks", "source"):
        table.add_column(column)
    for rule in RULES.values():
        table.add_row(rule.id, rule.severity.value, "yes" if rule.strict_only else "",
                      rule.title, rule.source)
    stdout().print(table)
    return 0


COMMANDS: list[click.Command] = [check_command, rules_command]
