"""``suite export``: an LLM card's model in the layout a real engine serves."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("export")
@click.argument("benchmark_arg", metavar="[BENCHMARK]", required=False)
@click.argument("out_dir_arg", metavar="[OUT_DIR]", required=False,
                type=click.Path(path_type=Path))
@click.option("--benchmark", help="the LLM card, as every other command names it")
@click.option("--out-dir", type=click.Path(path_type=Path), help="where the model is written")
@click.option("--format", "fmt", type=click.Choice(["hf"]), default="hf", show_default=True,
              help="hf: a Hugging Face GPT-2 directory (vLLM, transformers serve, ...)")
@click.option("--verify-samples", type=click.IntRange(min=0), default=16, show_default=True,
              help="compare the exported model's greedy outputs with ours on this many "
              "prompts (needs transformers; 0: do not compare)")
@click.option("--force", is_flag=True, help="replace a previous export in OUT_DIR")
def export_command(benchmark_arg: str | None, out_dir_arg: Path | None,
                   benchmark: str | None, out_dir: Path | None, fmt: str,
                   verify_samples: int, force: bool) -> int:
    """Write the benchmark's model to the out dir for a real engine, and check it against
    ours: `suite export --benchmark tinylm --out-dir DIR` (or, as before, `suite export
    tinylm DIR`).

    Exit 0 when every compared prompt gives the same tokens, 2 when one differs."""
    from suite.api import export
    from suite.errors import ConfigError

    # One vocabulary (issue 40, item 9): the options every command has; the positional
    # form stays for the commands already written down.
    for name, option, positional in (("--benchmark", benchmark, benchmark_arg),
                                     ("--out-dir", out_dir, out_dir_arg)):
        if option is not None and positional is not None and str(option) != str(positional):
            raise ConfigError(f"suite export: {name} {option} and the argument {positional} "
                              "disagree", hint=f"give {name} once")
    benchmark = benchmark or benchmark_arg
    out_dir = out_dir or out_dir_arg
    if benchmark is None or out_dir is None:
        raise ConfigError("suite export needs a benchmark and an output directory",
                          hint="suite export --benchmark tinylm --out-dir exported/tinylm")

    if verify_samples:  # loading transformers and comparing took minutes in silence
        click.echo(f"exporting {benchmark}, then loading the export with transformers and "
                   f"comparing its greedy outputs with ours on {verify_samples} prompts (a "
                   "minute or more; --verify-samples 0 skips the comparison)", err=True)
    result = export(benchmark, out_dir, fmt=fmt, verify_samples=verify_samples, force=force)
    click.echo(f"exported {benchmark} ({fmt}) to {out_dir}: "
               + ", ".join(p.name for p in result.files))
    check = result.verification
    if check is None:
        click.echo("not compared with the in-process model (--verify-samples 0)", err=True)
        return 0
    click.echo(f"greedy outputs equal on {check.equal} of {check.samples} prompts "
               f"({check.fraction:.0%}); largest logit difference {check.max_logit_diff:.2e}")
    if check.equal != check.samples:
        click.echo(f"the exported model differs from ours first on prompt "
                   f"{check.first_mismatch}", err=True)
        return 2
    return 0


COMMANDS: list[click.Command] = [export_command]
