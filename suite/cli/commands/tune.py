"""``suite tune``: find and record the settings this system sustains (see ``suite.harness.tune``).
Parse, call ``suite.api``, render."""

from __future__ import annotations

from pathlib import Path

import click

from suite.cli.options import backend_for_urls, runs_dir_option


@click.command("tune")
@click.option("--benchmark", default="digits", show_default=True)
@click.option("--backend", default="onnxruntime", show_default=True)
@click.option("--scenario", "scenarios", multiple=True,
              type=click.Choice(["offline", "singlestream", "multistream", "server"]),
              help="repeatable; default: all four")
@click.option("--system", help="system name for the settings file (default: this host)")
@runs_dir_option("where the probes run", writes=True)
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
@click.option("--concurrency", default="1,4,16,64", show_default=True,
              help="LLM benchmarks: the Offline sweep's requests in flight (openai) or live "
              "sequences (torch-llm), comma-separated")
@click.option("--url", "urls", multiple=True, metavar="URL",
              help="--backend openai: a server's base URL (repeat for replicas)")
@click.option("--fresh", is_flag=True, help="ignore cached probes")
@click.option("--quick", is_flag=True, help="1 s probes and confirming runs, fewer candidates: "
              "a smoke test of the search, not a tuning")
def tune_command(benchmark: str, backend: str, scenarios: tuple[str, ...], system: str | None,
                 runs_dir: Path | None, probe_ms: int, confirm_ms: int | None, batch_sizes: str,
                 worker_counts: str, worker_models: str, steps: int, max_qps: float | None,
                 concurrency: str, urls: tuple[str, ...], fresh: bool, quick: bool) -> int:
    """Find Offline expected QPS, stream latency hints and the highest VALID Server rate
    (with its batch size and workers). Exits 2 when no confirming Server run was VALID:
    the verdict then names the VALID probes and their run directories."""
    from rich.markup import escape

    from suite.api import TuneOptions, tune
    from suite.cli.render import fit, print_tune, stderr, text_width

    source = click.get_current_context().get_parameter_source
    backend = str(backend_for_urls(backend, urls, given=source("backend")
                                   is click.core.ParameterSource.COMMANDLINE))
    options = TuneOptions.from_text(
        scenarios=scenarios, batch_sizes=batch_sizes, worker_counts=worker_counts,
        worker_models=worker_models, quick=quick, benchmark=benchmark, backend=backend,
        system=system, runs_dir=runs_dir, probe_ms=probe_ms, confirm_ms=confirm_ms,
        steps=steps, max_qps=max_qps, fresh=fresh, concurrency=concurrency, urls=urls,
        given=frozenset(name for name in ("probe_ms", "confirm_ms", "batch_sizes", "steps")
                        if source(name) is click.core.ParameterSource.COMMANDLINE))
    err, width = stderr(), text_width()

    def say(message: str) -> None:
        for line in fit(message, width):
            err.print(escape(line), highlight=False)

    report = tune(options, say=say)
    print_tune(report, benchmark, backend, width)
    return 0 if report.confirmed else 2  # a verdict, not an error: the probes ran


COMMANDS = [tune_command]
