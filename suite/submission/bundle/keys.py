"""Ed25519 signing keys: generate, store encrypted, load, and compute key ids.

The private key is an encrypted PKCS#8 PEM (mode 0600) that never lives inside the
repository or a bundle; the passphrase comes from ``SUITE_KEY_PASSPHRASE`` (read here
and nowhere else) or a prompt. The key id is the securesystemslib convention (sha256
of the canonical key JSON), so other DSSE tooling can match our signatures to keys.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

from cryptography.hazmat.primitives import serialization as ser
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from suite.errors import SuiteError
from suite.paths import KEY_FILE_LIMIT, read_limited

PASSPHRASE_ENV = "SUITE_KEY_PASSPHRASE"
PRIVATE_NAME = "signing.key"
PUBLIC_NAME = "signing.pub"


class KeyFileError(SuiteError):
    """A key is missing, unreadable, of the wrong type, or the passphrase is wrong."""


def default_key_dir() -> Path:
    """``$XDG_CONFIG_HOME/infersuite/keys`` (``~/.config/infersuite/keys`` when unset), as
    the README says XDG variables move the suite's state."""
    config = os.environ.get("XDG_CONFIG_HOME", "")
    base = Path(config) if config and Path(config).is_absolute() else Path.home() / ".config"
    return base / "infersuite" / "keys"


def passphrase(prompt: Callable[[], str] | None = None) -> bytes:
    """The key passphrase: ``$SUITE_KEY_PASSPHRASE``, else ``prompt()``."""
    value = os.environ.get(PASSPHRASE_ENV)
    if value is None and prompt is not None:
        value = prompt()
    if not value:
        raise KeyFileError("no key passphrase", hint=f"set {PASSPHRASE_ENV} or run interactively")
    return value.encode()


def key_id(public: Ed25519PublicKey) -> str:
    raw = public.public_bytes(ser.Encoding.Raw, ser.PublicFormat.Raw)
    canonical = json.dumps({"keytype": "ed25519", "scheme": "ed25519",
                            "keyval": {"public": raw.hex()}},
                           sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def generate(out_dir: Path, secret: bytes, *, forbidden: list[Path]) -> tuple[Path, Path, str]:
    """Write ``signing.key`` (encrypted) and ``signing.pub`` into ``out_dir``."""
    out_dir = out_dir.expanduser().resolve()
    for root in forbidden:
        if out_dir == root.resolve() or root.resolve() in out_dir.parents:
            raise KeyFileError(f"refusing to write a private key inside {root}",
                            hint="keys live outside the repository and every bundle")
    private_path, public_path = out_dir / PRIVATE_NAME, out_dir / PUBLIC_NAME
    if private_path.exists():
        raise KeyFileError(f"{private_path} exists; not overwriting a key",
                        hint="choose another --out directory")
    out_dir.mkdir(parents=True, exist_ok=True)
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.PKCS8,
                            ser.BestAvailableEncryption(secret))
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(pem)
    public_path.write_bytes(key.public_key().public_bytes(
        ser.Encoding.PEM, ser.PublicFormat.SubjectPublicKeyInfo))
    return private_path, public_path, key_id(key.public_key())


def _missing_hint(path: Path, kind: str) -> str:
    """What to do about a missing key file: a private key is made by ``suite keygen``; a
    public one is the signer's, given by path (never looked up elsewhere: the key a
    bundle is verified against is the one the user names), so the hint names where
    ``suite keygen`` put this user's own."""
    if kind == "private":
        return "create one with `suite keygen`"
    own = default_key_dir() / PUBLIC_NAME
    if own.is_file() and path.name == PUBLIC_NAME:
        return f"your own public key (from `suite keygen`) is {own}: --key {own}"
    return ("give the path of the signer's public key (PEM), obtained out of band; yours "
            f"from `suite keygen` would be {own}")


def _key_bytes(path: Path, kind: str) -> bytes:
    """The key file's bytes; one clear line for a missing file, a directory, no access."""
    if path.is_dir():
        example = path / (PRIVATE_NAME if kind == "private" else PUBLIC_NAME)
        raise KeyFileError(f"{path} is a directory, not a {kind} key file",
                           hint=f"give the key file itself, e.g. {example}")
    try:
        return read_limited(path, KEY_FILE_LIMIT, f"{kind} key file")
    except FileNotFoundError:
        raise KeyFileError(f"no {kind} key at {path}", hint=_missing_hint(path, kind)) \
            from None
    except OSError as exc:
        raise KeyFileError(f"cannot read the {kind} key {path}: {exc.strerror or exc}") \
            from None


def load_private(path: Path, secret: bytes) -> Ed25519PrivateKey:
    data = _key_bytes(path, "private")
    try:
        key = ser.load_pem_private_key(data, password=secret)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(f"cannot load {path}: wrong passphrase or not a PEM key ({exc})") \
            from None
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"{path} is not an Ed25519 key")
    return key


def load_public(path: Path) -> Ed25519PublicKey:
    data = _key_bytes(path, "public")
    try:
        key = ser.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(f"cannot load {path}: not a PEM public key ({exc})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFileError(f"{path} is not an Ed25519 public key")
    return key
