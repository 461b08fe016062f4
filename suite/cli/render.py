"""How the CLI shows the library's results: the renderers several commands share.

Commands parse, call ``suite.api`` and hand the result to a function here; nothing here
decides a status or an exit code. Rich is imported inside each function, so importing
this module (as ``suite run`` does for its pre-flight findings) costs nothing.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from suite.config.preflight import LintReport
    from suite.harness.tune import TuneReport
    from suite.results import RunResult
    from suite.serve.launcher import Replica
    from suite.submission.workflow import PackageResult


def stderr() -> Any:
    """The console for messages: never wrapped, so paths in them stay copy-pasteable."""
    from suite.cli.console import stderr

    return stderr()


def print_lint(report: LintReport, console: Any, *, table: bool) -> None:
    """Findings, then (``table``) the effective settings, then the prediction."""
    from rich.markup import escape
    from rich.table import Table

    for f in report.findings:
        # One style for every error the CLI prints: "error: MESSAGE", then "  hint: ..."
        # (the rule and where it was set follow the message, for grep and the docs).
        style = "red" if f.severity == "error" else "yellow"
        where = f" ({escape(f.source)})" if f.source else ""
        console.print(f"[{style}]{f.severity}:[/] {escape(f.message)} [{f.rule}]{where}",
                      soft_wrap=True, highlight=False)
        if f.hint:
            console.print(f"  hint: {escape(f.hint)}", soft_wrap=True)
    if table and report.effective:
        grid = Table(title="effective settings")
        for column in ("key", "value", "source"):
            grid.add_column(column)
        for key, (value, source) in report.effective.items():
            grid.add_row(escape(key), escape(str(value)), escape(source))
        console.print(grid)
    if report.predicted_queries is not None and report.predicted_seconds is not None:
        console.print(f"pre-flight: predicted {report.predicted_queries:,} queries, "
                      f"about {report.predicted_seconds:,.1f} s per performance test")


class LintPrinter:
    """A run's pre-flight findings (``on_lint``), printed once by ``flush``: above its first
    progress bar, or at its end; that way nothing (rich included) is imported or printed
    before the child has its spec. Remembers whether any was an error: the run then stops
    with that error, which is not printed a second time."""

    def __init__(self) -> None:
        self.errors = 0
        self.report: LintReport | None = None

    def __call__(self, report: LintReport) -> None:
        self.report, self.errors = report, len(report.errors)

    def flush(self) -> None:
        if self.report is not None:
            from suite.cli import console

            report, self.report = self.report, None
            print_lint(report, console.err, table=False)


def print_results(results: list[RunResult], *, wide: bool) -> None:
    """The results table on stdout, then the notes (why INVALID, why not submittable).

    The compact table fits 100 columns (``reports.table.COMPACT_WIDTH``); ``wide`` adds
    every column. Off a terminal (a CI log, a pipe) the table is laid out for that width.
    """
    import sys
    import textwrap

    from rich.markup import escape

    from suite.cli.console import stdout
    from suite.reports.table import COMPACT_WIDTH, results_table, run_notes

    width = None if sys.stdout.isatty() else (160 if wide else COMPACT_WIDTH)
    console = stdout(width)
    console.print(results_table(results, compact=not wide))
    for note in run_notes(results):
        # Wrapped to the table's width at spaces only: a path or a key is never broken
        # (one longer than the line stays whole, so it can still be copied).
        console.print(escape(textwrap.fill(note, width=console.width, initial_indent="  - ",
                                           subsequent_indent="    ", break_long_words=False,
                                           break_on_hyphens=False)), soft_wrap=True)


#: Columns of progress lines where neither ``COLUMNS`` nor a narrower terminal says.
TEXT_WIDTH = 100


def text_width() -> int:
    """The width progress lines fit: ``COLUMNS`` where set, else the terminal's width
    capped at ``TEXT_WIDTH``, and ``TEXT_WIDTH`` piped."""
    import os
    import sys

    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) >= 40:
        return int(columns)
    if sys.stderr.isatty():
        return min(TEXT_WIDTH, os.get_terminal_size(sys.stderr.fileno()).columns)
    return TEXT_WIDTH


def fit(message: str, width: int) -> list[str]:
    """``message`` as lines of at most ``width`` columns, continued 4 columns further in.
    Words are never broken, so a path stays whole (a path longer than the width is the
    one thing that can exceed it)."""
    import textwrap

    indent = message[:len(message) - len(message.lstrip())]
    lines = textwrap.wrap(message, width, subsequent_indent=indent + "    ",
                          break_long_words=False, break_on_hyphens=False) or [""]
    # A word (a path) too long for its indented line starts at the margin instead.
    return [line.lstrip() if len(line) > width else line for line in lines]


def print_tune(report: TuneReport, benchmark: str, backend: str,
               width: int | None = None) -> None:
    """The chosen settings as a table on stdout; then on stderr the runs behind them, the
    scenario-file lines it proposes, the verdict when Server was not confirmed, and the
    bookkeeping; all within ``width`` (default: ``text_width()``)."""
    from pathlib import Path

    from rich.markup import escape
    from rich.table import Table

    from suite.cli.console import stderr, stdout

    width = width or text_width()
    table = Table(title=f"tuned {benchmark} on {backend} for system '{report.system}'")
    for column in ("scenario", "key", "value", "why"):
        table.add_column(column)
    for scenario, choices in report.choices.items():
        for choice in choices:
            table.add_row(scenario, choice.key, str(choice.value), escape(choice.why))
    if report.choices:
        stdout(width).print(table)
    err = stderr()

    def say(message: str) -> None:
        for line in fit(message, width):
            err.print(escape(line), highlight=False)

    evidence = [(s, c) for s, choices in report.choices.items() for c in choices if c.run_dir]
    if evidence:
        say("the runs behind them" + (f", under {report.probes_dir}:" if report.probes_dir
                                       else ":"))
        for scenario, choice in evidence:
            say(f"  {scenario} {choice.key}: {Path(choice.run_dir).name}")
    if report.proposal:
        say("to make this setup every system's default, add to the scenario file:")
        for line in report.proposal:
            say(f"  {line}")
    for line in report.unconfirmed:
        say(line)
    say(f"probes run: {report.probes_run}, reused from cache: {report.probes_cached}")
    if report.settings_file is not None:
        say(f"written: {report.settings_file} (suite run picks it up on this system)")


def print_package(done: PackageResult, *, unofficial: bool) -> None:
    """What packaging refused and moved, the check's findings, and the bundle built."""
    from rich.markup import escape

    from suite.checker.render import render
    from suite.cli.console import stderr

    err = stderr()
    for reason in done.refused:
        err.print(f"[yellow]refused:[/] {escape(reason)}")
    for name in done.unknown_fields:
        err.print(f"[yellow]warning:[/] unknown system field '{escape(name)}' ignored")
    if done.moved_aside:
        err.print(f"[yellow]note:[/] {escape(str(done.tree))} was not a tree this command "
                  f"placed; moved aside to {escape(done.moved_aside)}, not deleted")
    render(done.report, stderr(160))
    if done.bundle is None:
        err.print("[red]not signed:[/] the tree fails the rules above; fix them, or pass "
                  "--unofficial to build a test bundle")
        return
    label = "[yellow]UNOFFICIAL[/] " if unofficial else ""
    err.print(f"{label}bundle: {escape(str(done.bundle))} ({done.bundle.stat().st_size} "
              f"bytes); tree: {escape(str(done.tree))}")
    if done.empty_fields:
        err.print(f"[yellow]system fields still empty:[/] {', '.join(done.empty_fields)}")


def serving_lines(benchmark: str, card_name: str, running: list[Replica], logs: str) -> list[str]:
    """What ``suite serve`` prints once its replicas listen: endpoints and the run command."""
    import json

    endpoints = "backend.remote.endpoints=" + json.dumps([r.grpc_url for r in running])
    return [f"serving {card_name} on {len(running)} MLServer replica(s) (logs in {logs}):",
            *(f"  {r.grpc_url}   {r.http_url}" for r in running),
            "run the suite against them (gRPC; the http:// URLs speak REST):",
            f"  python -m suite run --benchmark {benchmark} --backend remote "
            f"--scenario server --set {shlex.quote(endpoints)}",
            "Ctrl-C stops the servers."]
