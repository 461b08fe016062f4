"""Turn a finished tree into ``<name>.tar.gz``: digest every file, wrap the Statement
in a DSSE envelope signed with Ed25519, and write the deterministic archive."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from suite.errors import SuiteError
from suite.submission.bundle.archive import (
    ENVELOPE_NAME,
    sha256_file,
    tree_files,
    write_archive,
)
from suite.submission.bundle.dsse import sign
from suite.submission.bundle.statement import canonical, statement


def sign_tree(tree: Path, out: Path, key: Ed25519PrivateKey,
              predicate: dict[str, Any]) -> dict[str, Any]:
    """Write the bundle to ``out``; returns the envelope."""
    try:
        files = tree_files(tree)
    except ValueError as exc:
        raise SuiteError(str(exc), hint="bundles hold regular files only") from None
    files.pop(ENVELOPE_NAME, None)  # a stale envelope is replaced, never signed
    for name, path in files.items():
        with path.open("rb") as handle:
            if b"PRIVATE KEY-----" in handle.read(4096):
                raise SuiteError(f"{name} looks like a private key; it must never be bundled",
                                 hint="keep keys outside the tree (suite keygen --out)")
    digests = {name: sha256_file(path) for name, path in files.items()}
    envelope = sign(canonical(statement(digests, predicate)), key)
    members: dict[str, bytes | Path] = dict(files)
    members[ENVELOPE_NAME] = (json.dumps(envelope, indent=2, sort_keys=True) + "\n").encode()
    write_archive(out, members)
    return envelope
