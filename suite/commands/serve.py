"""``suite serve``: the benchmark's reference model on MLServer replicas on this machine,
or the files that serve it on Triton (``--write-triton-repo``) or KServe
(``--write-kserve-manifest``)."""

from __future__ import annotations

import json
import shlex
import tempfile
import time
from pathlib import Path

import click


@click.command("serve")
@click.option("--benchmark", default="digits", show_default=True,
              help="the model card to serve (any card with an ONNX file)")
@click.option("--replicas", default=1, show_default=True, type=click.IntRange(1, 64),
              help="MLServer processes, one port pair each")
@click.option("--host", default="127.0.0.1", show_default=True, help="address to listen on")
@click.option("--max-batch-size", default=256, show_default=True,
              type=click.IntRange(1, 65536), help="largest request the model takes")
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
def serve_command(benchmark: str, replicas: int, host: str, max_batch_size: int,
                  model_path: Path | None, workdir: Path | None,
                  write_triton_repo: Path | None, write_kserve_manifest: Path | None,
                  storage_uri: str) -> int:
    """Serve the benchmark's model on N MLServer replicas and print the endpoints."""
    from ..models import check_model, load_card
    from ..paths import find_paths
    from ..serve.launcher import start_replicas, stop_replicas
    from ..serve.writers import kserve_manifest
    from ..serve.writers import write_triton_repo as triton_repo

    card = load_card(find_paths(), benchmark)
    if model_path is not None or card.model.source == "user":
        card = card.with_model_path(str(model_path or ""))
    check_model(card)
    if write_triton_repo or write_kserve_manifest:
        if write_triton_repo:
            for path in triton_repo(card, write_triton_repo, max_batch_size):
                click.echo(f"wrote {path}")
        if write_kserve_manifest:
            write_kserve_manifest.write_text(kserve_manifest(card, storage_uri, replicas))
            click.echo(f"wrote {write_kserve_manifest}")
        return 0
    root = workdir or Path(tempfile.mkdtemp(prefix="suite-serve-"))
    running = start_replicas(card, replicas, root, host=host, max_batch_size=max_batch_size)
    try:
        grpc = [r.grpc_url for r in running]
        click.echo(f"serving {card.name} on {replicas} MLServer replica(s) (logs in {root}):")
        for replica in running:
            click.echo(f"  {replica.grpc_url}   {replica.http_url}")
        endpoints = "backend.remote.endpoints=" + json.dumps(grpc)
        click.echo("run the suite against them (gRPC; the http:// URLs speak REST):")
        click.echo(f"  python -m suite run --benchmark {benchmark} --backend remote "
                   f"--scenario server --set {shlex.quote(endpoints)}")
        click.echo("Ctrl-C stops the servers.")
        while all(r.process.poll() is None for r in running):
            time.sleep(0.5)
        dead = [r for r in running if r.process.poll() is not None]
        click.echo(f"replica {dead[0].grpc_url} exited (code {dead[0].process.returncode}); "
                   f"see {dead[0].log}", err=True)
        return 1
    finally:
        stop_replicas(running)


COMMANDS: list[click.Command] = [serve_command]
