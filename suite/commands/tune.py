"""``suite tune``: find and record the settings this system sustains (see ``suite.tune``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click


@click.command("tune")
@click.option("--benchmark", default="digits", show_default=True)
@click.option("--backend", default="onnxruntime", show_default=True)
@click.option("--scenario", "scenarios", multiple=True,
              type=click.Choice(["offline", "singlestream", "multistream", "server"]),
              help="repeatable; default: all four")
@click.option("--system", help="system name for the settings file (default: this host)")
@click.option("--runs-dir", type=click.Path(path_type=Path), help="default: runs/")
@click.option("--probe-ms", default=2000, show_default=True, help="duration of a probe run")
@click.option("--confirm-ms", type=int,
              help="confirming run length (default: the official duration, 600 s)")
@click.option("--batch-sizes", default="1,4,16", show_default=True,
              help="Server batch sizes to try, comma-separated")
@click.option("--workers", "worker_counts", default="",
              help="Server worker counts to try, comma-separated (default: the configured "
              "sut.workers; one more than the cores can cover the time each waits for the GIL)")
@click.option("--worker-models", default="",
              help="Server worker models to try with each count: threads, processes "
              "(default: the configured sut.worker_model)")
@click.option("--steps", default=6, show_default=True, help="Server bisection steps")
@click.option("--max-qps", type=click.FloatRange(min=0, min_open=True),
              help="highest Server target_qps a probe may ask for (default: the Offline rate)")
@click.option("--fresh", is_flag=True, help="ignore cached probes")
@click.option("--quick", is_flag=True, help="1 s probes and confirming runs, fewer candidates: "
              "a smoke test of the search, not a tuning")
def tune_command(benchmark: str, backend: str, scenarios: tuple[str, ...], system: str | None,
                 runs_dir: Path | None, probe_ms: int, confirm_ms: int | None, batch_sizes: str,
                 worker_counts: str, worker_models: str, steps: int, max_qps: float | None,
                 fresh: bool, quick: bool) -> int:
    """Find Offline expected QPS, stream latency hints and the highest VALID Server rate."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from ..api import TuneOptions, tune
    from ..scenarios import Scenario

    err = Console(stderr=True, soft_wrap=True)
    models = tuple(m.strip() for m in worker_models.split(",") if m.strip())
    if unknown := sorted(set(models) - {"threads", "processes"}):
        raise click.BadParameter(f"--worker-models: unknown {', '.join(unknown)} "
                                 "(threads, processes)")
    options = TuneOptions(
        benchmark=benchmark, backend=backend, system=system, runs_dir=runs_dir,
        scenarios=tuple(Scenario(s) for s in scenarios) or tuple(Scenario), probe_ms=probe_ms,
        confirm_ms=confirm_ms, batch_sizes=tuple(_int_list("--batch-sizes", batch_sizes)),
        worker_counts=tuple(_int_list("--workers", worker_counts)), worker_models=models,
        steps=steps, max_qps=max_qps, fresh=fresh)
    if quick:  # the quick search's sizes, except where an option was given explicitly
        given = click.get_current_context().get_parameter_source
        small = TuneOptions.quick()
        options = dataclasses.replace(options, **{
            name: getattr(small, name) for name in ("probe_ms", "confirm_ms", "batch_sizes",
                                                    "steps")
            if given(name) is not click.core.ParameterSource.COMMANDLINE})
    report = tune(options, say=lambda m: err.print(escape(m)))
    table = Table(title=f"tuned {benchmark} on {backend} for system '{report.system}'")
    for column in ("scenario", "key", "value", "why"):
        table.add_column(column)
    for scenario, choices in report.choices.items():
        for choice in choices:
            table.add_row(scenario, choice.key, str(choice.value), escape(choice.why))
    Console().print(table)
    err.print(f"probes run: {report.probes_run}, reused from cache: {report.probes_cached}")
    err.print(f"written: {report.settings_file} (suite run picks it up on this system)")
    return 0


COMMANDS = [tune_command]


def _int_list(option: str, text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"{option} {text!r}: integers, comma-separated") from None
    if any(v < 1 for v in values):
        raise click.BadParameter(f"{option} {text!r}: each value must be at least 1")
    return values
