"""``suite serve``: the benchmark's reference model on MLServer replicas on this machine,
or the files that serve it on Triton (``--write-triton-repo``) or KServe
(``--write-kserve-manifest``). Parse, call ``suite.api``, render."""

from __future__ import annotations

from pathlib import Path

import click

from suite.serve.llm_engines import ENGINE_STARTS


@click.command("serve")
@click.option("--benchmark", default="digits", show_default=True,
              help="the model card to serve (any card with an ONNX file)")
@click.option("--replicas", default=1, show_default=True, type=click.IntRange(1, 64),
              help="MLServer processes, one port pair each")
@click.option("--host", default="127.0.0.1", show_default=True, help="address to listen on")
@click.option("--batch-size", "--max-batch-size", "max_batch_size", default=256,
              show_default=True, type=click.IntRange(1, 65536),
              help="largest request the model takes (as `suite run --batch-size`; "
              "--max-batch-size: its old name)")
@click.option("--model-path", type=click.Path(path_type=Path),
              help="the ONNX file, for cards whose model the user supplies")
@click.option("--workdir", type=click.Path(path_type=Path),
              help="where the replicas' settings and logs go (default: a temporary directory)")
@click.option("--write-triton-repo", type=click.Path(path_type=Path),
              help="write a Triton model repository here and exit (starts nothing)")
@click.option("--write-kserve-manifest", type=click.Path(path_type=Path),
              help="write a KServe InferenceService manifest here and exit")
@click.option("--storage-uri", default="gs://YOUR-BUCKET/triton-repo", show_default=True,
              help="the manifest's storageUri: where the Triton repository was uploaded")
@click.option("--engine", type=click.Choice(["vllm", "transformers"]),
              help="an LLM card: export its model and serve it on this engine's "
                   "OpenAI-compatible server (for --backend openai)")
@click.option("--engine-python", metavar="PYTHON",
              help="--engine: the interpreter that has the engine installed (default: "
                   "$SUITE_ENGINE_PYTHON, else this one; `make engine-vllm` makes one)")
@click.option("--engine-start", type=click.Choice(ENGINE_STARTS), default="auto",
              show_default=True,
              help="--engine vllm: quick (no compilation, one process: about half the start "
                   "time on a CPU), full (vLLM's defaults); auto: quick unless a GPU is usable")
@click.option("--port", default=0, type=click.IntRange(0, 65535),
              help="--engine: the port (0: a free one)")
@click.option("--model-dir", type=click.Path(path_type=Path, file_okay=False),
              help="--engine: an exported model directory (default: export into --workdir)")
def serve_command(benchmark: str, replicas: int, host: str, max_batch_size: int,
                  model_path: Path | None, workdir: Path | None,
                  write_triton_repo: Path | None, write_kserve_manifest: Path | None,
                  storage_uri: str, engine: str | None, engine_python: str | None,
                  engine_start: str, port: int, model_dir: Path | None) -> int:
    """Serve the benchmark's model on N MLServer replicas and print the endpoints;
    with --engine, an LLM card's model on a real engine, printing its URL."""
    from suite import api
    from suite.cli.render import serving_lines

    if engine is not None:
        return _serve_engine(benchmark, engine, workdir, port, host, engine_python, model_dir,
                             engine_start)

    card = api.serve_card(benchmark, model_path)
    if write_triton_repo or write_kserve_manifest:
        for path in api.write_serving_files(
                card, triton_repo=write_triton_repo, kserve_manifest=write_kserve_manifest,
                max_batch_size=max_batch_size, storage_uri=storage_uri, replicas=replicas):
            click.echo(f"wrote {path}")
        return 0
    with api.serve(card, replicas, workdir, host=host, max_batch_size=max_batch_size) as running:
        logs = str(running[0].directory.parent)
        click.echo("\n".join(serving_lines(benchmark, card.name, running, logs)))
        dead = api.first_exited(running)
        click.echo(f"replica {dead.grpc_url} exited (code {dead.process.returncode}); "
                   f"see {dead.log}", err=True)
        return 1


def _serve_engine(benchmark: str, engine: str, workdir: Path | None, port: int, host: str,
                  python: str | None, model_dir: Path | None, start: str) -> int:
    """Serve until Ctrl-C (exit 130) or until the engine exits on its own (exit 1)."""
    import time

    from suite import api

    with api.serve_llm(benchmark, engine, workdir, port=port, host=host, python=python,
                       model_dir=model_dir, start=start) as running:
        click.echo(f"{benchmark} served by {engine} at {running.url} (model "
                   f"'{running.model}'; log {running.log})")
        click.echo(f"  suite run --benchmark {benchmark} --backend openai --url {running.url}")
        click.echo("Ctrl-C stops it.")
        try:
            while running.process.poll() is None:
                time.sleep(0.5)
        except KeyboardInterrupt:
            click.echo(f"stopping {engine}", err=True)
            return 130
        click.echo(f"{engine} exited (code {running.process.returncode}); see {running.log}",
                   err=True)
        return 1


COMMANDS: list[click.Command] = [serve_command]
