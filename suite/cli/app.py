"""The ``suite`` command line. The only place that prints, owns the console, catches
``SuiteError`` and chooses the exit code:

0 every test VALID (and accuracy on target) · 2 ran but INVALID, or a target or rule
failed · 1 error (bad input, failed run) · 130 interrupted (Ctrl-C, SIGTERM or SIGHUP:
all three drain the running test and keep its logs, see ``suite.harness.signals``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from suite.cli import console
from suite.cli.console import escape
from suite.cli.options import backend_for_urls, find_run, runs_dir_option
from suite.cli.render import LintPrinter
from suite.config.loader import ConfigRequest
from suite.config.rules import DEFAULT_ROUND
from suite.errors import SuiteError
from suite.harness.signals import interrupt_on_termination
from suite.results import RunResult, Status
from suite.version import __version__

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

# The results table has its own width (cli.render.print_results). Made, and rich imported,
# at first use: a run's first output comes once its child has its spec (``LintPrinter``).
out, err = console.deferred("out"), console.deferred("err")


def config_options(func: Any) -> Any:
    """The options every config-resolving command shares."""
    options = [
        click.option("--benchmark", default="digits", show_default=True,
                     help="benchmark name (run_rules/<round>.toml)"),
        click.option("--scenario", default="offline", show_default=True,
                     help="singlestream | multistream | server | offline"),
        click.option("--backend", default=None,
                     help="backend name, or module:Class (default: the card's: onnxruntime; "
                          "torch-llm for an LLM card)"),
        click.option("--mode", default="performance", show_default=True,
                     help="performance | accuracy | all"),
        click.option("--round", "round_name", default=DEFAULT_ROUND, show_default=True,
                     help="run-rules round"),
        click.option("--quick", is_flag=True, help="seconds-long runs; not submittable"),
        click.option("--config", "config_file", type=click.Path(path_type=Path),
                     help="user config TOML"),
        click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                     help="override one config key, repeatable"),
        click.option("--system", help="whose tuned settings apply (default: this host)"),
    ]
    for option in reversed(options):
        func = option(func)
    return func


class _Suite(click.Group):
    """The ``suite`` group. The commands of ``suite.cli.commands`` are imported when a
    name is not one of this module's, or for the list (``--help``): ``suite run`` imports
    none of them (~30 ms of every run)."""

    discovered = False

    def _discover(self) -> None:
        if not self.discovered:
            self.discovered = True
            from suite.cli.commands import discover

            for command in discover():
                self.add_command(command)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None:
            self._discover()
            command = super().get_command(ctx, cmd_name)
        return command

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._discover()
        return super().list_commands(ctx)


@click.group(cls=_Suite, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="suite")
def app() -> None:
    """MLPerf-style inference benchmarks driven by the real LoadGen."""


class _Progress:
    """A rich progress bar fed by the child's heartbeats (relayed on another thread).

    With the child's live figures (``live``, a ``harness.progress.LiveStatus``): Server's achieved
    QPS, SUT-side p99 estimate against the bound and backlog, Offline's samples/s, and
    the latest early warning; the bar keeps its last line, warning included, at the end.
    """

    def __init__(self, progress: Progress | Callable[[], Progress], label: str) -> None:
        # A callable: the display, shown by this bar's first figure or stage (``_Bars``)
        self.source = progress
        self.label = label
        self.task: TaskID | None = None
        self.status: Any = None  # the latest progress.LiveStatus

    @property
    def progress(self) -> Progress:
        if callable(self.source):
            self.source = self.source()
        return self.source

    def live(self, status: Any) -> None:
        """Each beat's ``harness.progress.LiveStatus``, just before ``__call__`` (``LiveSink``)."""
        self.status = status

    def __call__(self, completed: int, expected: int | None, elapsed: float) -> None:
        from suite.harness.progress import describe, warming_up  # lazy: --help stays fast

        if self.task is None:
            self.task = self.progress.add_task(self.label, total=expected)
        if self.status is None:
            figures, warning = (f"{completed / elapsed:,.0f} samples/s"
                                if not warming_up(completed, elapsed) else
                                f"{completed:,} samples" if completed else "warming up"), ""
        else:
            figures, _, warning = describe(self.status).partition("  WARNING: ")
        text = f"{escape(self.label)} {escape(figures)}"
        if warning:
            text += f"  [bold yellow]WARNING:[/] {escape(warning)}"
        self.progress.update(self.task, completed=completed, total=expected, description=text)

    def stage(self, stage: str) -> None:
        """The child's setup stage ("loading model", "warming up", ...) until LoadGen runs."""
        if stage == "running":
            return  # the rate takes over the description
        if self.task is None:
            self.task = self.progress.add_task(f"{self.label}: {stage}", total=None)
        else:
            self.progress.update(self.task, description=f"{self.label}: {stage}")


class _Bars:
    """One ``_Progress`` per test, shared by the progress and the stage callbacks."""

    def __init__(self, progress: Progress | None, label: str,
                 before: Callable[[], None] = lambda: None) -> None:
        # None: the run's own, made (rich imported) when a bar first shows something
        self.made, self.label, self.before = progress, label, before
        self.bars: dict[str, _Progress] = {}

    @property
    def progress(self) -> Progress:
        if self.made is None:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self.made = Progress(TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(),
                                 console=console.err, transient=False)
        return self.made

    def stop(self) -> None:
        if self.made is not None and self.made.live.is_started:
            self.made.stop()

    def show(self) -> Progress:
        """The display, shown from a bar's first figure or stage on (the child has its
        spec by then): a run refused before (the pre-flight) leaves no empty progress
        line behind, and the pre-flight's findings are printed above it."""
        self.before()
        if not self.progress.live.is_started:
            self.progress.start()
        return self.progress

    def bar(self, mode: str) -> _Progress:
        if mode not in self.bars:
            self.bars[mode] = _Progress(self.show, f"{self.label} {mode}")
        return self.bars[mode]

    def stage(self, mode: str) -> Callable[[str], None]:
        return self.bar(mode).stage


def _run_requests(requests: list[ConfigRequest], wide: bool = False) -> int:
    results: list[RunResult] = []
    for request in requests:
        results.append(run_one(request))
        if results[-1].status is Status.INTERRUPTED:
            break
    return finish(results, wide)


def run_one(request: ConfigRequest) -> RunResult:
    """One run with its progress bars; says where its directory is (``run`` and ``demo``).

    Nothing is printed before the first bar (the child's first stage, once it has its
    spec) or the run's end: rich, the consoles and the pre-flight's findings wait until
    then, off the path to the child's spec (``suite.api.run``'s own, imported directly).
    """
    from suite.harness.run import run  # lazy: keeps `suite --help` fast

    lint = LintPrinter()
    bars = _Bars(None, f"{request.benchmark} {request.scenario} {request.backend}",
                 before=lint.flush)
    try:
        result = run(request, on_progress=bars.bar, on_lint=lint, on_stage=bars.stage)
    except SuiteError:
        if lint.errors:  # the pre-flight's refusal, printed with its rules (below)
            raise click.exceptions.Exit(1) from None
        raise
    finally:
        lint.flush()
        bars.stop()
    _say_where(result)
    return result


def finish(results: list[RunResult], wide: bool = False) -> int:
    """Print the results table; the exit code of the worst run (``run`` and ``demo``)."""
    _print_results(results, wide)
    return max((r.exit_code for r in results), key=[0, 2, 1, 130].index)


def _print_results(results: list[RunResult], wide: bool = False) -> None:
    from suite.cli.render import print_results

    print_results(results, wide=wide)


_WIDE = click.option("--wide", is_flag=True,
                     help="every column of the results table (division, metric name, early "
                          "stopping, token latencies, accuracy target)")


def _say_where(result: RunResult) -> None:
    if result.status is Status.FAILED:
        failed = next(t for t in result.tests if t.status is Status.FAILED)
        err.print(f"[red]error:[/] {result.scenario} {failed.mode} test failed: "
                  f"{escape(failed.message)}")
        err.print(f"  logs kept in {escape(failed.directory)} (see harness.log and status.json)")
    elif result.status is Status.INTERRUPTED:
        err.print(f"[magenta]interrupted:[/] partial logs kept in {escape(result.run_dir)}")
    else:
        err.print(f"run directory: {escape(result.run_dir)}")


def build_request(benchmark: str, scenario: str, backend: str | None, mode: str,
                  round_name: str, quick: bool, config: Path | None, sets: list[str] | None,
                  runs_dir: Path | None, flags: dict[str, tuple[Any, str]]) -> ConfigRequest:
    """The request the options describe (no backend: the card's kind's default)."""
    from suite.harness.kinds import for_benchmark  # suite.api.default_backend's
    from suite.paths import find_paths

    return ConfigRequest(
        benchmark=benchmark, scenario=scenario,
        backend=backend or for_benchmark(find_paths(), benchmark).default_backend,
        mode=mode, round=round_name,
        quick=quick, config_file=config, sets=sets or [],
        flags={k: v for k, v in flags.items() if v[0] is not None}, runs_dir=runs_dir,
    )


@app.command("run")
@config_options
@runs_dir_option("where the run directory is made", writes=True)
@_WIDE
@click.option("--target-qps", type=float, help="Server: loadgen.target_qps")
@click.option("--expected-qps", type=float, help="Offline: loadgen.expected_qps")
@click.option("--batch-size", type=int, help="sut.max_batch_size")
@click.option("--workers", type=int, help="sut.workers")
@click.option("--url", "urls", multiple=True, metavar="URL",
              help="--backend openai: a server's base URL (repeat for replicas): "
                   "backend.openai.urls")
@click.option("--dataset-path", metavar="PATH",
              help="the dataset (a directory, or the round LLM's official file): "
                   "data.dataset_dir")
@click.option("--model-path", metavar="PATH",
              help="the model file, or the round LLM's model directory (its tokenizer): "
                   "data.model_path")
@click.option("--compliance", metavar="TESTxx", help="run a compliance test (TEST01, TEST04)")
@click.option("--reference", type=click.Path(path_type=Path),
              help="compliance: the reference run directory (default: newest matching)")
@click.option("--force", is_flag=True,
              help="run even when the pre-flight predicts a test longer than 7 days")
@click.option("--stand-in", is_flag=True,
              help="a task card's stand-in model and dataset, written once into the cache; "
                   "quick settings; never submittable")
def run_command(benchmark: str, scenario: str, backend: str, mode: str, round_name: str,
                quick: bool, config_file: Path | None, sets: tuple[str, ...], system: str | None,
                runs_dir: Path | None, wide: bool, target_qps: float | None,
                expected_qps: float | None, batch_size: int | None, workers: int | None,
                urls: tuple[str, ...],
                dataset_path: str | None, model_path: str | None, compliance: str | None,
                reference: Path | None, force: bool, stand_in: bool) -> int:
    """Run one benchmark scenario through LoadGen."""
    backend = backend_for_urls(backend, urls, given=backend is not None)  # type: ignore[assignment]
    flags = {
        "loadgen.target_qps": (target_qps, "--target-qps"),
        "loadgen.expected_qps": (expected_qps, "--expected-qps"),
        "sut.max_batch_size": (batch_size, "--batch-size"),
        "sut.workers": (workers, "--workers"),
        "backend.openai.urls": (list(urls) or None, "--url"),
        "data.dataset_dir": (str(Path(dataset_path).resolve()) if dataset_path else None,
                             "--dataset-path"),
        "data.model_path": (str(Path(model_path).resolve()) if model_path else None,
                            "--model-path"),
    }
    request = build_request(benchmark, scenario, backend, mode, round_name, quick, config_file,
                       list(sets), runs_dir, flags)
    request.compliance, request.reference, request.system = compliance, reference, system
    request.force, request.stand_in = force, stand_in
    return _run_requests([request], wide)


@app.command("backends")
def backends_command() -> int:
    """List every backend and whether it can run here."""
    from rich.table import Table

    from suite.backends import list_backends

    table = Table(title="backends")
    for column in ("backend", "available", "why not / install"):
        table.add_column(column)
    for row in list_backends():
        table.add_row(row.name, "yes" if row.available else "[red]no[/]", escape(row.reason))
    out.print(table)
    return 0


@app.command("show")
@click.argument("runs", nargs=-1, required=True, type=click.Path(path_type=Path),
                metavar="RUN...")
@runs_dir_option("where a RUN given by name is")
@_WIDE
def show_command(runs: tuple[Path, ...], runs_dir: Path | None, wide: bool) -> int:
    """Print the results table of finished runs from their result.json; each RUN is a run
    directory or its name as `suite runs` lists it."""
    results = []
    for run_dir in (find_run(run, runs_dir) for run in runs):
        path = run_dir / "result.json"
        if not run_dir.is_dir():
            raise SuiteError(f"{run_dir} is not a directory",
                             hint="give a run directory, or a run's name as `suite runs` "
                                  "lists it (with the same --runs-dir)")
        try:
            results.append(RunResult.load(path))
        except (OSError, ValueError) as exc:
            raise SuiteError(f"cannot read {path}: {exc}",
                             hint="a run directory without result.json did not finish (it "
                                  "failed to start, or was killed); see its STATUS") from None
    _print_results(results, wide)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``suite`` and ``python -m suite``; returns the exit code."""
    try:
        with interrupt_on_termination():  # TERM and HUP end a run the way Ctrl-C does
            code = app.main(args=argv, prog_name="suite", standalone_mode=False)
    except click.exceptions.UsageError as exc:
        # The same style as every other error, with a hint that runs as written.
        command = exc.ctx.command_path if exc.ctx is not None else "suite"
        err.print(f"[red]error:[/] {escape(exc.format_message())}")
        err.print(f"  hint: see `{escape(command)} --help` for the options")
        return 1
    except (click.exceptions.Abort, KeyboardInterrupt) as exc:
        cause = exc.__cause__ or exc  # click wraps KeyboardInterrupt in Abort
        notes = "; ".join(getattr(cause, "__notes__", []))
        err.print(f"[magenta]interrupted[/]{': ' + escape(notes) if notes else ''}")
        return 130
    except SuiteError as exc:
        err.print(f"[red]error:[/] {escape(exc.message)}")
        if exc.hint:
            err.print(f"  hint: {escape(exc.hint)}")
        return 1
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    return int(code) if isinstance(code, int) else 0


if __name__ == "__main__":
    sys.exit(main())
