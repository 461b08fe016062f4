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

from suite.submission.bundle.archive import ENVELOPE_NAME, read_archive
from suite.submission.bundle.dsse import EnvelopeError, verify
from suite.submission.bundle.statement import subjects


@dataclass
class Verification:
    """The outcome; ``ok`` only if the signature holds and every file matches."""

    problems: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    signature_ok: bool = False
    predicate: dict[str, Any] = field(default_factory=dict)
    #: the signed subjects ``{name: sha256}`` from the verified payload bytes: later
    #: steps (the audit's extraction) use these and never re-read the envelope
    subjects: dict[str, str] = field(default_factory=dict)
    #: the whole verified in-toto Statement
    statement: dict[str, Any] = field(default_factory=dict)
    files: int = 0
    #: the archive could not be read as a whole (cut off, bad gzip CRC, not a tar)
    unreadable: str | None = None

    @property
    def ok(self) -> bool:
        return self.signature_ok and not (self.problems or self.changed or self.added
                                          or self.removed)


def verify_bundle(path: Path, public: Ed25519PublicKey) -> Verification:
    result = Verification()
    contents = read_archive(path)
    result.problems += contents.problems
    result.unreadable = contents.unreadable
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
        payload = json.loads(body)  # the verified bytes, parsed once
        signed = subjects(payload)
        predicate = payload.get("predicate") or {}
        if not isinstance(predicate, dict):
            raise EnvelopeError("the predicate is not an object")
    except (ValueError, RecursionError) as exc:
        result.problems.append(f"{ENVELOPE_NAME}: signed payload unusable: {exc}")
        return result
    result.statement, result.subjects, result.predicate = payload, signed, predicate
    actual = contents.digests
    result.files = len(actual)
    result.changed = sorted(n for n in signed if n in actual and actual[n] != signed[n])
    result.added = sorted(set(actual) - set(signed))
    result.removed = sorted(set(signed) - set(actual))
    return result
