"""``suite keygen``: an Ed25519 signing key pair, private key encrypted, outside the repo."""

from __future__ import annotations

import sys
from pathlib import Path

import click


@click.command("keygen")
@click.option("--out-dir", "out_dir", type=click.Path(path_type=Path),
              help="directory for signing.key and signing.pub "
                   "(default $XDG_CONFIG_HOME/infersuite/keys, ~/.config when unset)")
@click.option("--out", "out_alias", type=click.Path(path_type=Path), hidden=True,
              help="the former name of --out-dir")
def keygen_command(out_dir: Path | None, out_alias: Path | None) -> int:
    """Generate signing.key (encrypted PKCS#8, mode 0600) and signing.pub; print the key id."""
    from suite.api import keygen

    out_dir = out_dir or out_alias
    private, public, keyid = keygen(out_dir, prompt=lambda: click.prompt(
        "new key passphrase", hide_input=True, confirmation_prompt=True, err=True)
        if sys.stdin.isatty() else "")
    click.echo(f"private key: {private}\npublic key:  {public}\nkey id:      {keyid}")
    return 0


COMMANDS: list[click.Command] = [keygen_command]
