"""``suite package``: runs -> official tree -> check -> signed bundle (``suite sign``
signs an existing tree). Parse, call ``suite.api``, render. Exit 0 built, 2 the tree
failed a rule (official packaging is not signed then), 1 error or nothing to package."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from suite.cli.options import runs_dir_option

KEY_HELP = "encrypted private key (default $XDG_CONFIG_HOME/infersuite/keys/signing.key, " \
           "~/.config when unset); " \
           "passphrase from $SUITE_KEY_PASSPHRASE or a prompt"


def prompt_passphrase() -> str:
    return click.prompt("key passphrase", hide_input=True, err=True) if sys.stdin.isatty() \
        else ""


@click.command("package")
@click.option("--submitter", required=True, help="organization (the tree's submitter dir)")
@click.option("--system", "system_name", required=True, help="system name (systems/NAME.json)")
@click.option("--division", type=click.Choice(["closed", "open", "network"]), default="closed",
              show_default=True)
@click.option("--system-config", type=click.Path(path_type=Path),
              help="TOML with the human system fields (see `suite system`)")
@runs_dir_option("the runs to package")
@click.option("--out-dir", type=click.Path(path_type=Path), help="default: submissions/")
@click.option("--round", "round_name", default=None, help="default: the newest round")
@click.option("--key", "key_path", type=click.Path(path_type=Path), help=KEY_HELP)
@click.option("--run", "runs", multiple=True, metavar="RUN",
              help="package only this run (its name as `suite runs` lists it; repeat for "
              "each); default: the best run per benchmark and scenario")
@click.option("--unofficial", is_flag=True,
              help="package invalid or non-submittable runs anyway (marked unofficial)")
def package_command(submitter: str, system_name: str, division: str,
                    system_config: Path | None, runs_dir: Path | None, out_dir: Path | None,
                    round_name: str | None, key_path: Path | None, runs: tuple[str, ...],
                    unofficial: bool) -> int:
    """Build submissions/<division>_<submitter>_<system>/ and its signed .tar.gz."""
    from suite.api import package
    from suite.cli.render import print_package

    done = package(submitter, system_name, division=division, system_config=system_config,
                   runs_dir=runs_dir, out_dir=out_dir, round_name=round_name,
                   key_path=key_path, unofficial=unofficial, prompt=prompt_passphrase,
                   runs=runs)
    print_package(done, unofficial=unofficial)
    return done.exit_code


COMMANDS: list[click.Command] = [package_command]
