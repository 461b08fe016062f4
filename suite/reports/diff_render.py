"""Rich renderables of a ``RunDiff`` (``suite diff``). Computes nothing: every figure
and every difference comes from ``suite.reports.diff``."""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from suite.reports.diff import NOT_RECORDED, Change, NumberDelta, RunDiff


def _value(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.6g}" if abs(value) < 1e6 else f"{value:,.1f}"
    return str(value)


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    if value.is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:,.4f}" if abs(value) < 1000 else f"{value:,.1f}"


def _relative(figure: NumberDelta) -> Text:
    if figure.relative is None:
        return Text("-" if figure.a is None or figure.b is None else "n/a (from 0)")
    style = "" if figure.relative == 0 else "cyan"
    return Text(f"{figure.relative:+.2%}", style=style)


def _changes_table(title: str, changes: list[Change]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("key", "A", "B"):
        table.add_column(column)
    for change in changes:
        table.add_row(Text(change.key), Text(_value(change.a)), Text(_value(change.b)))
    return table


def _headline(diff: RunDiff) -> Table:
    table = Table(title="suite diff: B compared against A", title_justify="left")
    for column in ("", "A", "B", "changed"):
        table.add_column(column)
    table.add_row("run", Text(diff.run_a), Text(diff.run_b), "")
    table.add_row("round", diff.round_a, diff.round_b,
                  Text("yes", style="yellow") if diff.round_changed else "no")
    model_a, model_b = diff.model_a, diff.model_b
    table.add_row("model sha256", model_a.sha256[:16], model_b.sha256[:16],
                  Text("yes", style="yellow") if diff.model_changed else "no")
    table.add_row("model path", Text(model_a.path or "(card's reference model)"),
                  Text(model_b.path or "(card's reference model)"), "")
    table.add_row("division", model_a.division, model_b.division,
                  "yes" if model_a.division != model_b.division else "no")
    for change in diff.identity:
        table.add_row(change.key, _value(change.a), _value(change.b), "yes")
    return table


def _config_table(diff: RunDiff) -> Table:
    title = f"config keys that differ ({len(diff.config)})"
    if diff.sources:
        title += f"; dimmed: same value from another source ({len(diff.sources)})"
    table = Table(title=title, title_justify="left")
    for column in ("key", "A", "source A", "B", "source B"):
        table.add_column(column)
    # same value from another layer: dim, below the real changes
    for change, style in [(c, "") for c in diff.config] + [(c, "dim") for c in diff.sources]:
        table.add_row(Text(change.key, style=style),
                      Text(_setting(change.a, change.source_a), style=style),
                      Text(change.source_a, style=style),
                      Text(_setting(change.b, change.source_b), style=style),
                      Text(change.source_b, style=style))
    return table


def _setting(value: Any, source: str) -> str:
    return "(not recorded)" if source == NOT_RECORDED and value is None else _value(value)


def _test_table(diff: RunDiff) -> list[RenderableType]:
    tables: list[RenderableType] = []
    for test in diff.tests:
        table = Table(title=f"{test.mode} test: A {test.status_a or 'absent'}, "
                      f"B {test.status_b or 'absent'}", title_justify="left")
        for column in ("figure", "unit", "A", "B", "B - A", "relative"):
            table.add_column(column, justify="left" if column in ("figure", "unit") else "right")
        for figure in test.figures:
            table.add_row(Text(figure.name), Text(figure.unit), _number(figure.a),
                          _number(figure.b), _number(figure.delta), _relative(figure))
        tables.append(table)
        if test.backend:
            tables.append(_changes_table(f"{test.mode} test: backend", test.backend))
    return tables


def render(diff: RunDiff) -> list[RenderableType]:
    """The headline, the config keys, each test's figures, then system and dataset."""
    parts: list[RenderableType] = [_headline(diff)]
    if diff.config or diff.sources:
        parts.append(_config_table(diff))
    else:
        parts.append(Text("config: no key differs (values and sources alike)"))
    parts += _test_table(diff)
    for title, changes in (("system", diff.system), ("dataset", diff.dataset)):
        parts.append(_changes_table(f"{title} differences ({len(changes)})", changes)
                     if changes else Text(f"{title}: no difference"))
    return parts

