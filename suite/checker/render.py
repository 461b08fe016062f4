"""The human report of ``suite check``: one table of results, then every finding."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from suite.checker.findings import CheckReport, Finding, Severity

_STYLE = {Severity.ERROR: "red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def render(report: CheckReport, console: Console) -> None:
    mode = "compat-official" if report.compat_official else "strict"
    table = Table(title=f"suite check {escape(report.path)} ({report.kind}, round "
                        f"{report.round}, {mode})")
    for column in ("result", "metric", "value", "accuracy", "verdict"):
        table.add_column(column)
    for res in report.results:
        value = "-" if res.value is None else f"{res.value:,.3f}"
        name = f"{res.accuracy_metric} " if res.accuracy_metric else ""
        acc = "-" if res.accuracy is None else (
            f"{escape(name)}{res.accuracy:.3f} (≥{res.accuracy_target})")
        verdict = "[green]PASS[/]" if res.valid else "[red]FAIL[/]"
        table.add_row(escape(res.id), escape(res.metric or "-"), value, acc, verdict)
    console.print(table)
    for finding in report.findings:
        _finding(console, finding)
    for res in report.results:
        for finding in res.findings:
            _finding(console, finding)
    s = report.summary
    verdict = "[green]PASSED[/]" if report.passed else "[red]FAILED[/]"
    console.print(f"{verdict}: {s.valid_results}/{s.results} results valid, "
                  f"{s.errors} error(s), {s.warnings} warning(s)")


def _finding(console: Console, f: Finding) -> None:
    where = escape(f.file or f.result or "")
    line = f"[{_STYLE[f.severity]}]{f.severity.value}[/] [bold]{f.rule}[/] {where}: " \
           f"{escape(f.message)}"
    if f.expected is not None or f.found is not None:
        line += f" (expected {escape(str(f.expected))}, found {escape(str(f.found))})"
    console.print(line, soft_wrap=True)
    if f.hint:
        console.print(f"    hint: {escape(f.hint)}", soft_wrap=True)
