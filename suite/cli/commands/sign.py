"""``suite sign``: sign an existing submission tree (it must pass ``suite check``, or be
marked unofficial). Parse, call ``suite.api``, render. Exit 0 signed, 2 the tree failed a
rule, 1 error."""

from __future__ import annotations

from pathlib import Path

import click

from suite.cli.commands.package import KEY_HELP, prompt_passphrase


@click.command("sign")
@click.argument("tree", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--out", type=click.Path(path_type=Path), help="default: TREE.tar.gz")
@click.option("--key", "key_path", type=click.Path(path_type=Path), help=KEY_HELP)
@click.option("--round", "round_name", default=None)
@click.option("--unofficial", is_flag=True, help="mark the bundle unofficial")
def sign_command(tree: Path, out: Path | None, key_path: Path | None, round_name: str | None,
                 unofficial: bool) -> int:
    """Sign an existing submission tree (it must pass `suite check`, or --unofficial)."""
    from suite.api import sign

    done = sign(tree, out=out, key_path=key_path, round_name=round_name,
                unofficial=unofficial, prompt=prompt_passphrase)
    if done.bundle is None:
        click.echo(f"not signed: {tree} fails {done.report.summary.errors} rule(s); see "
                   "`suite check`, or pass --unofficial", err=True)
    else:
        click.echo(f"bundle: {done.bundle}")
    return done.exit_code


COMMANDS: list[click.Command] = [sign_command]
