"""``suite verify BUNDLE --key PUB``: signature first, then every file. Exit 0 only if
the signature holds and no file changed, appeared or disappeared; 2 otherwise."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click


@click.command("verify")
@click.argument("bundle", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option("--key", "key_path", required=True, type=click.Path(path_type=Path),
              help="the signer's public key (PEM), obtained out of band")
@click.option("--json", "as_json", is_flag=True, help="machine-readable outcome")
def verify_command(bundle: Path, key_path: Path, as_json: bool) -> int:
    """Verify a bundle's signature with a pinned public key, then its files."""
    from suite.api import verify

    result = verify(bundle, key_path)
    if as_json:
        sys.stdout.write(json.dumps({
            "ok": result.ok, "signature_ok": result.signature_ok, "files": result.files,
            "problems": result.problems, "changed": result.changed, "added": result.added,
            "removed": result.removed,
            "unofficial": result.predicate.get("unofficial")}, indent=2) + "\n")
    else:
        for problem in result.problems:
            click.echo(f"REJECTED: {problem}")
        for label, names in (("changed", result.changed), ("added", result.added),
                             ("removed", result.removed)):
            for name in names:
                click.echo(f"{label}: {name}")
        if result.ok:
            flag = " (UNOFFICIAL bundle)" if result.predicate.get("unofficial") else ""
            click.echo(f"OK: signature valid, {result.files} files match{flag}")
        else:
            click.echo("FAILED: the bundle does not match its signed attestation")
    return 0 if result.ok else 2


COMMANDS: list[click.Command] = [verify_command]
