"""DSSE v1 envelopes (secure-systems-lab/dsse): PAE, sign, verify.

Verification follows the spec's order: decode, verify the signature over PAE with a
pinned key, check the payload type, and only then hand back the *same* bytes that
were verified for parsing (never re-read the envelope afterwards). ``keyid`` is a
hint and never a reason to trust a signature.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from suite.errors import BundleError
from suite.submission.bundle.keys import key_id

IN_TOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"


class EnvelopeError(BundleError, ValueError):
    """The envelope is malformed, unsigned by the pinned key, or of the wrong type.

    Also a ``ValueError``: callers that parse a payload catch both in one clause."""


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSEv1 pre-authentication encoding; lengths are byte lengths."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(body), body)


def sign(body: bytes, key: Ed25519PrivateKey,
         payload_type: str = IN_TOTO_PAYLOAD_TYPE) -> dict[str, Any]:
    signature = key.sign(pae(payload_type, body))
    return {"payload": base64.b64encode(body).decode(), "payloadType": payload_type,
            "signatures": [{"keyid": key_id(key.public_key()),
                            "sig": base64.b64encode(signature).decode()}]}


def _b64(text: Any) -> bytes:
    if not isinstance(text, str):
        raise EnvelopeError("base64 field is not a string")
    padded = text + "=" * (-len(text) % 4)
    try:
        if "-" in text or "_" in text:
            return base64.urlsafe_b64decode(padded)
        return base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise EnvelopeError(f"bad base64: {exc}") from None


def verify(raw: bytes, public: Ed25519PublicKey,
           payload_type: str = IN_TOTO_PAYLOAD_TYPE) -> bytes:
    """The verified payload bytes, or ``EnvelopeError`` saying why not."""
    try:
        envelope = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise EnvelopeError(f"the envelope is not JSON: {exc}") from None
    if not isinstance(envelope, dict) or not isinstance(envelope.get("signatures"), list):
        raise EnvelopeError("the envelope lacks payload, payloadType or signatures")
    kind = envelope.get("payloadType")
    if not isinstance(kind, str):
        raise EnvelopeError("the envelope's payloadType is not a string")
    body = _b64(envelope.get("payload"))
    message = pae(kind, body)
    for entry in envelope["signatures"]:
        if not isinstance(entry, dict):
            continue
        try:
            public.verify(_b64(entry.get("sig")), message)
        except (InvalidSignature, EnvelopeError, ValueError):
            continue
        if kind != payload_type:
            raise EnvelopeError(f"unsupported payloadType {kind!r}")
        return body
    raise EnvelopeError("no valid signature from the given public key "
                        "(signed by another key, or the payload was altered)")
