"""``suite verify``: check a bundle against a pinned public key, then its files.

Order matters: the archive is read safely (no extraction); the envelope's signature is
checked against the given key *before* its payload is trusted; only then are the
signed digests compared with the members, listing changed, added and removed files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .archive import ENVELOPE_NAME, read_archive
from .dsse import EnvelopeError, verify
from .statement import subjects


@dataclass
class Verification:
    """The outcome; ``ok`` only if the signature holds and every file matches."""

    problems: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    signature_ok: bool = False
    predicate: dict[str, Any] = field(default_factory=dict)
    files: int = 0

    @property
    def ok(self) -> bool:
        return self.signature_ok and not (self.problems or self.changed or self.added
                                          or self.removed)


def verify_bundle(path: Path, public: Ed25519PublicKey) -> Verification:
    result = Verification()
    contents = read_archive(path)
    result.problems += contents.problems
    if contents.envelope is None:
        result.problems.append(f"{ENVELOPE_NAME}: missing from the bundle")
        return result
    try:
        body = verify(contents.envelope, public)
    except EnvelopeError as exc:
        result.problems.append(f"{ENVELOPE_NAME}: {exc}")
        return result
    result.signature_ok = True
    try:
        signed = subjects(json.loads(body))  # the verified bytes, parsed once
        result.predicate = json.loads(body).get("predicate") or {}
    except (ValueError, RecursionError) as exc:
        result.problems.append(f"{ENVELOPE_NAME}: signed payload unusable: {exc}")
        return result
    actual = contents.digests
    result.files = len(actual)
    result.changed = sorted(n for n in signed if n in actual and actual[n] != signed[n])
    result.added = sorted(set(actual) - set(signed))
    result.removed = sorted(set(signed) - set(actual))
    return result
