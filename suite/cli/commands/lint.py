"""``suite lint``: the pre-flight linter on its own (``suite run`` runs it too).
Exit 0 when the config resolves (warnings included), 1 on errors."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("lint")
@click.option("--benchmark", default="digits", show_default=True)
@click.option("--scenario", default="offline", show_default=True)
@click.option("--backend", default=None,
              help="default: the card's, as `suite run` chooses it (onnxruntime; torch-llm "
                   "for an LLM card; openai with --url)")
@click.option("--mode", default="performance", show_default=True)
@click.option("--round", "round_name", default=None, help="default: the newest round")
@click.option("--quick", is_flag=True)
@click.option("--config", "config_file", type=click.Path(path_type=Path))
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE")
@click.option("--system", help="whose tuned settings apply (default: this host)")
@click.option("--url", "urls", multiple=True, metavar="URL",
              help="--backend openai: a server's base URL, as `suite run --url`")
@click.option("--dataset-path", metavar="PATH", help="data.dataset_dir, as `suite run`")
@click.option("--model-path", metavar="PATH", help="data.model_path, as `suite run`")
@click.option("--force", is_flag=True, help="lint a run predicted longer than 7 days as a warning")
@click.option("--json", "as_json", is_flag=True,
              help="print the report as JSON (suite/schemas/lint-report.schema.json)")
def lint_command(benchmark: str, scenario: str, backend: str | None, mode: str,
                 round_name: str | None, quick: bool, config_file: Path | None,
                 sets: tuple[str, ...], system: str | None, urls: tuple[str, ...],
                 dataset_path: str | None, model_path: str | None, force: bool,
                 as_json: bool) -> int:
    """Lint a run's configuration without running it: keys, units, ignored and fixed
    values, and whether the backend serves the benchmark; the same options as `suite run`
    resolve the same run."""
    from suite.api import lint
    from suite.cli.app import build_request
    from suite.cli.console import stdout
    from suite.cli.options import backend_for_urls
    from suite.cli.render import print_lint
    from suite.config.rules import DEFAULT_ROUND

    backend = backend_for_urls(backend, urls, given=backend is not None)
    flags = {
        "backend.openai.urls": (list(urls) or None, "--url"),
        "data.dataset_dir": (str(Path(dataset_path).resolve()) if dataset_path else None,
                             "--dataset-path"),
        "data.model_path": (str(Path(model_path).resolve()) if model_path else None,
                            "--model-path"),
    }
    request = build_request(benchmark, scenario, backend, mode, round_name or DEFAULT_ROUND,
                            quick, config_file, list(sets), None, flags)
    request.system, request.force = system, force
    report = lint(request)
    if as_json:
        click.echo(report.model_dump_json(indent=2))
    else:
        print_lint(report, stdout(160), table=True)
    return 1 if report.errors else 0


COMMANDS: list[click.Command] = [lint_command]
