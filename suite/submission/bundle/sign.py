"""Turn a finished tree into ``<name>.tar.gz``: digest every file, wrap the Statement
in a DSSE envelope signed with Ed25519, and write the deterministic archive."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from suite.errors import BundleError, SuiteError
from suite.submission.bundle.archive import (
    ENVELOPE_NAME,
    shown,
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
    members: dict[str, bytes | Path] = {}
    digests: dict[str, str] = {}
    for name, path in files.items():
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise BundleError(f"{shown(path)} cannot be read: {exc.strerror or exc}",
                              hint="every file of the tree is signed; make it readable"
                              ) from None
        if b"PRIVATE KEY-----" in data[:4096]:
            raise SuiteError(f"{name} looks like a private key; it must never be bundled",
                             hint="keep keys outside the tree (suite keygen --out)")
        # the bytes digested are the bytes archived: read once
        members[name] = data
        digests[name] = hashlib.sha256(data).hexdigest()
    envelope = sign(canonical(statement(digests, predicate)), key)
    members[ENVELOPE_NAME] = (json.dumps(envelope, indent=2, sort_keys=True) + "\n").encode()
    write_archive(out, members)
    return envelope
