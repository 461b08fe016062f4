"""``suite package`` (runs -> official tree -> check -> signed bundle) and ``suite sign``
(sign an existing tree): parse, call ``suite.api``, render. Exit 0 built, 2 the tree
failed a rule (official packaging is not signed then), 1 error or nothing to package."""

from __future__ import annotations

import sys
from pathlib import Path

import click

KEY_HELP = "encrypted private key (default ~/.config/infersuite/keys/signing.key); " \
           "passphrase from $SUITE_KEY_PASSPHRASE or a prompt"


def _prompt() -> str:
    return click.prompt("key passphrase", hide_input=True, err=True) if sys.stdin.isatty() \
        else ""


@click.command("package")
@click.option("--submitter", required=True, help="organization (the tree's submitter dir)")
@click.option("--system", "system_name", required=True, help="system name (systems/NAME.json)")
@click.option("--division", type=click.Choice(["closed", "open", "network"]), default="closed",
              show_default=True)
@click.option("--system-config", type=click.Path(path_type=Path),
              help="TOML with the human system fields (see `suite system`)")
@click.option("--runs-dir", type=click.Path(path_type=Path), help="default: runs/")
@click.option("--out-dir", type=click.Path(path_type=Path), help="default: submissions/")
@click.option("--round", "round_name", default=None, help="default: the newest round")
@click.option("--key", "key_path", type=click.Path(path_type=Path), help=KEY_HELP)
@click.option("--unofficial", is_flag=True,
              help="package invalid or non-submittable runs anyway (marked unofficial)")
def package_command(submitter: str, system_name: str, division: str,
                    system_config: Path | None, runs_dir: Path | None, out_dir: Path | None,
                    round_name: str | None, key_path: Path | None, unofficial: bool) -> int:
    """Build submissions/<division>_<submitter>_<system>/ and its signed .tar.gz."""
    from rich.console import Console
    from rich.markup import escape

    from ..api import package
    from ..checker.render import render

    err = Console(stderr=True, soft_wrap=True)
    done = package(submitter, system_name, division=division, system_config=system_config,
                   runs_dir=runs_dir, out_dir=out_dir, round_name=round_name,
                   key_path=key_path, unofficial=unofficial, prompt=_prompt)
    for line in [f"[yellow]refused:[/] {escape(r)}" for r in done.refused] + [
            f"[yellow]warning:[/] unknown system field '{escape(n)}' ignored"
            for n in done.unknown_fields]:
        err.print(line)
    if done.moved_aside:
        err.print(f"[yellow]note:[/] {escape(str(done.tree))} was not a tree this command "
                  f"placed; moved aside to {escape(done.moved_aside)}, not deleted")
    render(done.report, Console(stderr=True, width=160))
    if done.bundle is None:
        err.print("[red]not signed:[/] the tree fails the rules above; fix them, or pass "
                  "--unofficial to build a test bundle")
        return done.exit_code
    label = "[yellow]UNOFFICIAL[/] " if unofficial else ""
    err.print(f"{label}bundle: {escape(str(done.bundle))} ({done.bundle.stat().st_size} "
              f"bytes); tree: {escape(str(done.tree))}")
    if done.empty_fields:
        err.print(f"[yellow]system fields still empty:[/] {', '.join(done.empty_fields)}")
    return done.exit_code


@click.command("sign")
@click.argument("tree", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--out", type=click.Path(path_type=Path), help="default: TREE.tar.gz")
@click.option("--key", "key_path", type=click.Path(path_type=Path), help=KEY_HELP)
@click.option("--round", "round_name", default=None)
@click.option("--unofficial", is_flag=True, help="mark the bundle unofficial")
def sign_command(tree: Path, out: Path | None, key_path: Path | None, round_name: str | None,
                 unofficial: bool) -> int:
    """Sign an existing submission tree (it must pass `suite check`, or --unofficial)."""
    from ..api import sign

    done = sign(tree, out=out, key_path=key_path, round_name=round_name,
                unofficial=unofficial, prompt=_prompt)
    if done.bundle is None:
        click.echo(f"not signed: {tree} fails {done.report.summary.errors} rule(s); see "
                   "`suite check`, or pass --unofficial", err=True)
    else:
        click.echo(f"bundle: {done.bundle}")
    return done.exit_code


COMMANDS: list[click.Command] = [package_command, sign_command]
