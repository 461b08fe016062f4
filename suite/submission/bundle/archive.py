"""The deterministic ``.tar.gz`` of a bundle, and safe streaming reads of one.

Writing: members sorted by name, regular files only, mtime 0, uid/gid 0, no user or
group names, mode 0644, PAX format; gzip with mtime 0 and no file name. Packing the
same files twice therefore gives identical bytes.

Reading never extracts: members are streamed and hashed, and anything that is not a
regular file, an absolute or ``..`` or otherwise non-normalized name, or a duplicate
is rejected with a reason naming the member.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import os
import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

from suite.errors import BundleError
from suite.models import sha256_file

__all__ = ["ENVELOPE_NAME", "MAX_BUNDLE_BYTES", "ArchiveContents", "copy_bundle",
           "read_archive", "sha256_file", "shown", "tree_files", "write_archive"]

ENVELOPE_NAME = "attestation.dsse.json"


def shown(path: Path) -> str:
    """``path`` printable whatever its bytes: a byte that is not UTF-8 as ``\\xff``."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def tree_files(root: Path) -> dict[str, Path]:
    """Every regular file under ``root`` by relative POSIX path (symlinks and names that
    are not UTF-8 refused)."""
    files: dict[str, Path] = {}
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            raise BundleError(f"{shown(path)}: symlinks are not allowed in a bundle",
                               hint="replace the link with the file it points to")
        try:
            path.relative_to(root).as_posix().encode("utf-8")
        except UnicodeEncodeError:
            # The signed Statement names every file in UTF-8 JSON: such a name has no
            # form in it (and a verifier could not match it to the archive's member).
            raise BundleError(f"{shown(path)}: the name is not UTF-8; a bundle names its "
                              "files in UTF-8", hint="rename it, or move it out of the tree"
                              ) from None
        if path.is_file():
            files[path.relative_to(root).as_posix()] = path
    return files


def write_archive(out: Path, members: dict[str, bytes | Path]) -> None:
    """Write ``members`` (name -> bytes or file) as a deterministic tar.gz."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(members):
            content = members[name]
            data = content if isinstance(content, bytes) else content.read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    # a temporary sibling renamed into place: a failure never leaves half a bundle
    tmp = out.with_name(f".{out.name}.writing")
    try:
        with tmp.open("wb") as handle, gzip.GzipFile(filename="", mode="wb", fileobj=handle,
                                                     mtime=0, compresslevel=9) as gz:
            gz.write(raw.getvalue())
        os.replace(tmp, out)
    except OSError as exc:
        # a read-only folder, an immutable old bundle, a directory in its place, a full disk
        raise BundleError(f"the bundle {shown(out)} cannot be written: {exc.strerror or exc}",
                          hint="check that folder's and any old bundle's permissions, or "
                          "write it elsewhere") from None
    finally:
        with contextlib.suppress(OSError):  # a folder that refused the file holds none
            tmp.unlink(missing_ok=True)


@dataclass
class ArchiveContents:
    """What a safe read found: file digests, the envelope bytes, and rejections."""

    digests: dict[str, str] = field(default_factory=dict)
    envelope: bytes | None = None
    problems: list[str] = field(default_factory=list)
    #: why the file could not be read as a whole (not a tar.gz, cut off, bad CRC)
    unreadable: str | None = None


def _unsafe(name: str) -> str | None:
    if not name or name.startswith("/") or "\\" in name:
        return "absolute or non-POSIX path"
    parts = name.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "'..', '.' or empty path component"
    if str(PurePosixPath(name)) != name:
        return "non-normalized path"
    return None


#: Zero padding allowed after tar's end-of-archive marker: a record (10 KiB by default,
#: larger blocking factors exist), far below this.
_MAX_PADDING = 1 << 20
#: The largest bundle read, as stored (gzip) and as a tar: far above any submission (the
#: full accuracy logs of a round LLM are a few hundred MB), far below a disk or an
#: afternoon; ``/dev/zero`` or an endless pipe ends here with one line.
MAX_BUNDLE_BYTES = 4 << 30
MAX_TAR_BYTES = 16 << 30
#: tar's units: its end-of-archive marker is two zero blocks, its length whole blocks.
_BLOCK = tarfile.BLOCKSIZE


class _Unreadable(BundleError):
    """The archive ends where a bundle cannot (``read_archive`` reports it, never raises)."""


class _Trailing(_Unreadable):
    """Bytes after the signed archive: outside what the signature covers."""


class _OneGzipStream(io.RawIOBase):
    """The decompressed bytes of exactly one gzip stream. Its CRC-32 and length are
    checked at its end (``zlib``), a stream cut off before its end is ``_Unreadable``,
    and any byte after it (a second gzip stream appended) is ``_Trailing``."""

    def __init__(self, raw: IO[bytes]) -> None:
        super().__init__()
        self._raw = raw
        self._read = 0
        self._zlib = zlib.decompressobj(wbits=31)  # 31: gzip wrapper, checked
        self._buffer = b""
        self._trailing = False

    def readable(self) -> bool:
        return True

    def readinto(self, target: Any) -> int:
        while not self._buffer:
            if self._zlib.eof:
                # Said where the reader reaches the end, once the signed part is read.
                if self._trailing:
                    raise _Trailing("bytes after the end of the gzip stream (a second "
                                    "stream or appended data) are not covered by the "
                                    "signature")
                return 0
            data = self._zlib.unconsumed_tail
            if not data:
                data = self._raw.read(1 << 16)
                self._read += len(data)
                if self._read > MAX_BUNDLE_BYTES:
                    raise _Unreadable(f"larger than {MAX_BUNDLE_BYTES:,} bytes: not a bundle")
            if not data:
                raise _Unreadable("the gzip stream is cut off before its end")
            # bounded output per call: a small file cannot inflate into memory at once
            self._buffer = self._zlib.decompress(data, 1 << 20)
            if self._zlib.eof:
                self._trailing = bool(self._zlib.unused_data or self._raw.read(1))
        count = min(len(target), len(self._buffer))
        target[:count] = self._buffer[:count]
        self._buffer = self._buffer[count:]
        return count


class _Seen(io.RawIOBase):
    """What tarfile reads, counted, with the last bytes kept. tarfile reads a record
    ahead and stops at the first zero block: the bytes it buffered past that block (a
    member after a lone zero block) are never seen by a reader after it, so the check
    of the archive's end starts from here."""

    KEEP = 1 << 16  # tarfile buffers at most one record (10 KiB) ahead

    def __init__(self, source: IO[bytes]) -> None:
        super().__init__()
        self._source = source
        self.count = 0
        self.tail = bytearray()

    def readable(self) -> bool:
        return True

    def readinto(self, target: Any) -> int:
        data = self._source.read(len(target))
        count = len(data)
        target[:count] = data
        self.count += count
        if self.count > MAX_TAR_BYTES:
            raise _Unreadable(f"more than {MAX_TAR_BYTES:,} bytes of tar: not a bundle")
        self.tail += data
        del self.tail[:-self.KEEP]
        return count


def _check_end(seen: _Seen, end: int, source: IO[bytes]) -> None:
    """From ``end`` (where tarfile found its first zero block, or the data's end) to the
    end of the stream: nothing but zeros, at least the two-block end-of-archive marker,
    whole 512-byte blocks, and no more padding than ``_MAX_PADDING``."""
    buffered = seen.count - end
    if buffered > len(seen.tail):  # cannot happen with tarfile's one-record read-ahead
        raise _Trailing("the archive's end could not be checked")
    padding = buffered
    chunk = bytes(seen.tail[len(seen.tail) - buffered:]) if buffered else b""
    while True:
        if chunk.count(0) != len(chunk):
            raise _Trailing("data after the tar archive's end-of-archive marker (a member "
                            "after a zero block, or appended bytes) is not covered by the "
                            "signature")
        if padding > _MAX_PADDING:
            raise _Trailing(f"more than {_MAX_PADDING:,} bytes of zeros after the tar "
                            "archive's end: not a bundle")
        chunk = source.read(1 << 20)
        if not chunk:
            break
        padding += len(chunk)
    if padding < 2 * _BLOCK or (end + padding) % _BLOCK:
        raise _Trailing(f"the tar archive does not end in two zero blocks padded to whole "
                        f"{_BLOCK}-byte blocks ({padding} bytes after its last member)")


def read_archive(path: Path) -> ArchiveContents:
    """Stream the members of ``path``; never extracts, never follows links.

    The whole file is read in one pass, to the end of the gzip stream, so a cut-off
    or corrupted gzip trailer (CRC-32 and length) is a problem, not a silent pass; so is
    anything after the archive: a tar member past the end-of-archive marker, or a second
    gzip stream appended, which a reader could see but the signature does not cover.
    """
    found = ArchiveContents()
    try:
        raw = path.open("rb")
    except OSError as exc:
        found.unreadable = f"{path.name}: not readable ({exc})"
        found.problems.append(found.unreadable)
        return found
    with raw:
        # peek, never seek: a pipe (``suite verify <(cat bundle)``) reads as a file does
        gzipped = raw.peek(2)[:2] == b"\x1f\x8b"
        source: IO[bytes] = (io.BufferedReader(_OneGzipStream(raw))
                             if gzipped else raw)
        seen = _Seen(source)
        try:
            tar = tarfile.open(fileobj=seen, mode="r|")  # noqa: SIM115 - closed below
        except (OSError, tarfile.TarError, EOFError, zlib.error, _Unreadable) as exc:
            found.unreadable = f"{path.name}: not a readable tar archive ({exc})"
            found.problems.append(found.unreadable)
            return found
        try:
            with tar:
                for member in tar:
                    _member(tar, member, found)
                end = tar.offset
            # To the end: the gzip stream's CRC-32 and length are checked there, and past
            # tar's end-of-archive marker only its zero padding may follow, and not
            # without end (``/dev/zero`` is an endless "archive" of zero blocks).
            _check_end(seen, end, source)
        except _Trailing as exc:
            found.unreadable = f"{path.name}: {exc}"
            found.problems.append(found.unreadable)
        except (OSError, tarfile.TarError, EOFError, zlib.error, _Unreadable) as exc:
            found.unreadable = f"{path.name}: corrupt archive ({exc})"
            found.problems.append(found.unreadable)
    return found


def copy_bundle(bundle: Path, out: Path) -> str:
    """Copy a bundle (a file or a pipe) to ``out`` in one capped pass; its sha256. A
    ``BundleError`` for what cannot be one: not gzip (``/dev/zero``), over the cap."""
    digest, total = hashlib.sha256(), 0
    try:
        with bundle.open("rb") as source, out.open("wb") as target:
            if source.peek(2)[:2] != b"\x1f\x8b":
                raise BundleError(f"{shown(bundle)}: not a gzip file, so not a bundle",
                                  hint="give the .tar.gz that `suite sign` wrote")
            while chunk := source.read(1 << 20):
                total += len(chunk)
                if total > MAX_BUNDLE_BYTES:
                    raise BundleError(f"{shown(bundle)}: larger than {MAX_BUNDLE_BYTES:,} "
                                      "bytes, so not a bundle", hint="give the .tar.gz that "
                                      "`suite sign` wrote")
                digest.update(chunk)
                target.write(chunk)
    except OSError as exc:
        raise BundleError(f"{shown(bundle)}: cannot be read ({exc.strerror or exc})",
                          hint="check the path and its permissions") from None
    return digest.hexdigest()


def _member(tar: tarfile.TarFile, member: tarfile.TarInfo, found: ArchiveContents) -> None:
    name = member.name
    if (why := _unsafe(name)) is not None:
        found.problems.append(f"{name}: unsafe member name ({why})")
        return
    if not member.isreg():
        kind = "symlink" if member.issym() else "hard link" if member.islnk() else \
            "directory" if member.isdir() else "special file"
        found.problems.append(f"{name}: not a regular file ({kind})")
        return
    if name in found.digests or (name == ENVELOPE_NAME and found.envelope is not None):
        found.problems.append(f"{name}: duplicate member name")
        return
    handle = tar.extractfile(member)
    if handle is None:
        found.problems.append(f"{name}: unreadable member")
        return
    if name == ENVELOPE_NAME:
        found.envelope = handle.read(16 << 20)  # an envelope is small; cap what we read
        return
    digest = hashlib.sha256()
    for chunk in iter(lambda: handle.read(1 << 20), b""):
        digest.update(chunk)
    found.digests[name] = digest.hexdigest()
