"""Unit tests of the signing pieces: the DSSE test vector, key handling, determinism
of the archive writer, and the private-key guard."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from suite.errors import SuiteError
from suite.submission.bundle import dsse, keys
from suite.submission.bundle.archive import read_archive, write_archive
from suite.submission.bundle.sign import sign_tree
from tests.conftest import REPO


def test_pae_matches_the_dsse_test_vector() -> None:
    assert dsse.pae("http://example.com/HelloWorld", b"hello world") == \
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"


def test_sign_verify_roundtrip_and_wrong_key() -> None:
    key = Ed25519PrivateKey.generate()
    envelope = dsse.sign(b"{}", key)
    raw = __import__("json").dumps(envelope).encode()
    assert dsse.verify(raw, key.public_key()) == b"{}"
    with pytest.raises(dsse.EnvelopeError):
        dsse.verify(raw, Ed25519PrivateKey.generate().public_key())


def test_keygen_encrypts_and_refuses_the_repo(tmp_path: Path) -> None:
    private, public, keyid = keys.generate(tmp_path / "k", b"pw", forbidden=[REPO])
    assert private.stat().st_mode & 0o777 == 0o600
    assert b"ENCRYPTED PRIVATE KEY" in private.read_bytes()
    assert keys.key_id(keys.load_private(private, b"pw").public_key()) == keyid
    assert keys.key_id(keys.load_public(public)) == keyid
    with pytest.raises(keys.KeyFileError):
        keys.load_private(private, b"wrong")
    with pytest.raises(keys.KeyFileError):
        keys.generate(REPO / "keys", b"pw", forbidden=[REPO])


def test_archive_is_deterministic_and_reads_back(tmp_path: Path) -> None:
    members: dict[str, bytes | Path] = {"b.txt": b"2", "a/x.txt": b"1"}
    write_archive(tmp_path / "1.tar.gz", members)
    write_archive(tmp_path / "2.tar.gz", dict(reversed(members.items())))
    assert (tmp_path / "1.tar.gz").read_bytes() == (tmp_path / "2.tar.gz").read_bytes()
    found = read_archive(tmp_path / "1.tar.gz")
    assert sorted(found.digests) == ["a/x.txt", "b.txt"] and not found.problems


def test_a_private_key_is_never_bundled(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    keys.generate(tree / "oops", b"pw", forbidden=[])
    with pytest.raises(SuiteError, match="private key"):
        sign_tree(tree, tmp_path / "b.tar.gz", Ed25519PrivateKey.generate(), {})


def _archive(tmp_path: Path) -> tuple[Path, bytes]:
    """A small deterministic bundle archive, and its tar (uncompressed) bytes."""
    import gzip

    out = tmp_path / "b.tar.gz"
    write_archive(out, {"a.txt": b"alpha", "d/b.txt": b"beta"})
    return out, gzip.decompress(out.read_bytes())


def test_an_intact_archive_reads_whole_with_no_problem(tmp_path: Path) -> None:
    out, _ = _archive(tmp_path)
    found = read_archive(out)
    assert found.problems == [] and found.unreadable is None
    assert sorted(found.digests) == ["a.txt", "d/b.txt"]


def test_a_second_gzip_stream_appended_is_refused(tmp_path: Path) -> None:
    import gzip

    out, _ = _archive(tmp_path)
    out.write_bytes(out.read_bytes() + gzip.compress(b"unsigned"))
    found = read_archive(out)
    assert found.unreadable and "after the end of the gzip stream" in found.unreadable
    assert sorted(found.digests) == ["a.txt", "d/b.txt"]  # the signed part still reads


def test_a_tar_member_after_the_end_of_archive_marker_is_refused(tmp_path: Path) -> None:
    import gzip
    import io
    import tarfile

    out, tar_bytes = _archive(tmp_path)
    extra = io.BytesIO()
    with tarfile.open(fileobj=extra, mode="w") as tar:
        info = tarfile.TarInfo("hidden.txt")
        info.size = 6
        tar.addfile(info, io.BytesIO(b"hidden"))
    out.write_bytes(gzip.compress(tar_bytes + extra.getvalue()))
    found = read_archive(out)
    assert found.unreadable and "after the tar archive's end-of-archive marker" in \
        found.unreadable
    assert "hidden.txt" not in found.digests


def test_a_cut_off_gzip_stream_is_corrupt(tmp_path: Path) -> None:
    out, _ = _archive(tmp_path)
    out.write_bytes(out.read_bytes()[:-4])  # the length field of the trailer is gone
    found = read_archive(out)
    assert found.unreadable and "corrupt archive" in found.unreadable


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero on this system")
def test_an_endless_file_of_zeros_is_not_a_bundle_and_the_read_ends() -> None:
    found = read_archive(Path("/dev/zero"))  # reads as an empty tar, then zeros forever
    assert found.unreadable and "bytes of zeros after the tar archive's end" in \
        found.unreadable


def _member(name: str, data: bytes) -> bytes:
    """One tar member (header and data blocks), no end-of-archive marker."""
    import tarfile

    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info.tobuf(tarfile.PAX_FORMAT) + data + b"\0" * (-len(data) % 512)


def _signed_part(tar_bytes: bytes) -> bytes:
    """The members of a written archive, without its end-of-archive marker and padding."""
    import io
    import tarfile

    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        tar.getmembers()
        return tar_bytes[:tar.offset]


@pytest.mark.parametrize(("variant", "why"), [
    # tar stops at the first zero block; `tar xzf` goes on and extracts the member
    ("lone zero block, then a member", "after the tar archive's end-of-archive marker"),
    ("member after the padded end", "after the tar archive's end-of-archive marker"),
    ("garbage after the end", "after the tar archive's end-of-archive marker"),
    ("second gzip stream", "after the end of the gzip stream"),
    ("no end-of-archive marker", "does not end in two zero blocks"),
    ("padding not whole blocks", "does not end in two zero blocks"),
])
def test_only_zero_padding_of_tar_s_own_rules_may_follow_the_signed_members(
        tmp_path: Path, variant: str, why: str) -> None:
    import gzip

    out, tar_bytes = _archive(tmp_path)
    members, evil = _signed_part(tar_bytes), _member("closed/Acme/evil.txt", b"unsigned")
    data = {
        "lone zero block, then a member": members + b"\0" * 512 + evil + b"\0" * 10240,
        "member after the padded end": tar_bytes + evil + b"\0" * 1024,
        "garbage after the end": tar_bytes + b"\x01garbage",
        "second gzip stream": tar_bytes,
        "no end-of-archive marker": members,
        "padding not whole blocks": tar_bytes + b"\0" * 100,
    }[variant]
    extra = gzip.compress(evil + b"\0" * 1024) if variant == "second gzip stream" else b""
    out.write_bytes(gzip.compress(data) + extra)
    found = read_archive(out)
    assert found.unreadable and why in found.unreadable, found.unreadable
    assert "closed/Acme/evil.txt" not in found.digests


def test_a_bundle_read_from_a_pipe_verifies_without_seeking(tmp_path: Path) -> None:
    # `suite verify <(cat bundle)`: the shell hands over a pipe, which cannot seek
    import os
    import threading

    out, _ = _archive(tmp_path)
    read_fd, write_fd = os.pipe()

    def feed() -> None:
        with os.fdopen(write_fd, "wb") as pipe:
            pipe.write(out.read_bytes())

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        found = read_archive(Path(f"/dev/fd/{read_fd}"))
    finally:
        feeder.join()
        os.close(read_fd)
    assert found.problems == [] and sorted(found.digests) == ["a.txt", "d/b.txt"]


def test_a_bundle_copy_stops_at_the_cap_with_one_line(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from suite.errors import BundleError
    from suite.submission.bundle import archive

    big = tmp_path / "big.tar.gz"
    write_archive(big, {"noise.bin": os.urandom(2 << 20)})  # 2 MiB that gzip cannot shrink
    monkeypatch.setattr(archive, "MAX_BUNDLE_BYTES", 1 << 20)
    with pytest.raises(BundleError, match=r"big.tar.gz: larger than 1,048,576 bytes"):
        archive.copy_bundle(big, tmp_path / "copy")
    found = archive.read_archive(big)  # verify reads the same input under the same cap
    assert found.unreadable and "larger than 1,048,576 bytes" in found.unreadable
