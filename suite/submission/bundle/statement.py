"""The in-toto Statement v1 our bundles sign, and its predicate.

``subject`` lists every file of the bundle except the envelope, by relative POSIX path
with its sha256. The predicate (``PREDICATE_TYPE``, versioned) summarizes each result.
Serialization is canonical (sorted keys, compact, UTF-8) so the same inputs give the
same bytes, and so the same signature (Ed25519 is deterministic).
"""

from __future__ import annotations

import json
from typing import Any

from suite.submission.bundle.dsse import EnvelopeError

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://infersuite.dev/attestation/bench-result/v1"


def statement(files: dict[str, str], predicate: dict[str, Any]) -> dict[str, Any]:
    """``files`` maps a relative path to its sha256 hex digest."""
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": name, "digest": {"sha256": files[name]}} for name in sorted(files)],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }


def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")


def subjects(payload: Any) -> dict[str, str]:
    """``{name: sha256}`` from a parsed, verified Statement; ``ValueError`` if malformed."""
    if not isinstance(payload, dict) or payload.get("_type") != STATEMENT_TYPE:
        raise EnvelopeError("the payload is not an in-toto Statement v1")
    if payload.get("predicateType") != PREDICATE_TYPE:
        raise EnvelopeError(f"unexpected predicateType {payload.get('predicateType')!r}")
    result: dict[str, str] = {}
    for entry in payload.get("subject") or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise EnvelopeError("a subject has no name")
        digest = entry.get("digest")
        if not isinstance(digest, dict) or not isinstance(digest.get("sha256"), str):
            raise EnvelopeError(f"subject {entry['name']} has no sha256 digest")
        result[entry["name"]] = digest["sha256"]
    return result
