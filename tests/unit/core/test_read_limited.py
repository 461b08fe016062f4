"""Files a user names are read up to a cap, never whole: an endless or huge file is one
clear error (issue 28: ``--key /dev/zero`` and ``--config /dev/zero`` read until killed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from suite.config.layers import read_toml
from suite.errors import InputTooLarge
from suite.paths import read_limited
from suite.submission.bundle.keys import load_public

ZERO = Path("/dev/zero")


def test_a_file_within_the_cap_is_read_whole(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x" * 10)
    assert read_limited(tmp_path / "f", 10, "thing") == b"x" * 10


def test_one_byte_over_the_cap_is_refused_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x" * 11)
    with pytest.raises(InputTooLarge, match=r"f is larger than a thing can be \(10 bytes\)"):
        read_limited(tmp_path / "f", 10, "thing")


@pytest.mark.skipif(not ZERO.exists(), reason="no /dev/zero on this system")
def test_an_endless_key_or_config_ends_in_one_error() -> None:
    with pytest.raises(InputTooLarge, match="public key file"):
        load_public(ZERO)
    with pytest.raises(InputTooLarge, match="config file"):
        read_toml(ZERO)
