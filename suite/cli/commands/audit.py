"""``suite audit BUNDLE --key PUB``: verify, re-check, recompute, replay (see suite.audit)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from suite.cli.options import runs_dir_option


@click.command("audit")
@click.argument("bundle", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option("--key", "public_key", required=True,
              type=click.Path(path_type=Path, exists=True, dir_okay=False),
              help="the submitter's public key")
@click.option("--rerun", help="replay results here: a result id, a comma list, 'random N' or "
              "'all' (default: no replay)")
@click.option("--tolerance", default=0.02, show_default=True,
              help="allowed shortfall of a replayed metric against its claim")
@runs_dir_option("where replays go", writes=True, default_under="audit")
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON")
@click.option("--out", type=click.Path(path_type=Path), help="also write the JSON report here")
@click.option("--sign", "sign_key", type=click.Path(path_type=Path),
              help="sign the report as a DSSE attestation with this private key")
@click.option("--allow-backend", "allow_backends", multiple=True, metavar="MODULE:CLASS",
              help="let a replay import this backend the bundle names (the suite's own "
              "backends need no permission); repeatable")
@click.option("--dataset-path", type=click.Path(path_type=Path, exists=True),
              help="a round LLM's official dataset file (llama3.1-8b, llama2-70b), or a "
              "task card's dataset directory (bert, yolo...; a stand-in's is written "
              "again): step 3 re-scores from it; it must be the one the run recorded")
@click.option("--model-path", type=click.Path(path_type=Path, exists=True, file_okay=False),
              help="the round LLM's model directory (its tokenizer.json), or the folder "
              "of whisper's tokenizer.json")
def audit_command(bundle: Path, public_key: Path, rerun: str | None, tolerance: float,
                  runs_dir: Path | None, as_json: bool, out: Path | None,
                  sign_key: Path | None, allow_backends: tuple[str, ...],
                  dataset_path: Path | None, model_path: Path | None) -> int:
    """Audit a signed bundle: exit 0 when every check passes cleanly, 2 when one fails or
    when a pass accepted an unofficial bundle's known rule failures."""
    from rich.markup import escape

    from suite.api import audit
    from suite.audit.report import render, verdict_line
    from suite.cli.console import piped_stdout, stderr

    err = stderr()
    report = audit(bundle, public_key, rerun=rerun, tolerance=tolerance, runs_dir=runs_dir,
                   say=lambda m: err.print(escape(m)), allow_backends=allow_backends,
                   dataset_path=str(dataset_path or ""), model_path=str(model_path or ""))
    text = report.to_json()
    if out is not None:
        out.write_text(text + "\n")
    if sign_key is not None:
        from suite.audit.sign import sign_report

        attestation = sign_report(report, sign_key, out or bundle.with_suffix(".audit.json"))
        err.print(f"signed audit attestation: {attestation}")
    if as_json:
        sys.stdout.write(text + "\n")
    else:
        piped_stdout().print(render(report))
    err.print(escape(verdict_line(report)))
    return report.exit_code


COMMANDS = [audit_command]
