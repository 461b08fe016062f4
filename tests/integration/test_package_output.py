"""Where ``suite package`` and ``suite sign`` write, and names they cannot sign (issue 28):
an output folder that is a file or cannot be written, an old tree or bundle that cannot
be replaced, a file whose name is not UTF-8. Each is one line naming the path and exit
1, never a traceback, and leaves no half-built tree or stray folder behind."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support import submission_fixtures as fx
from tests.unit.config.test_input_validation import _refused

built = fx.built
NAME = "closed_ORG_box"


def _package(built: fx.Built, out: Path) -> subprocess.CompletedProcess[str]:
    return run_cli("package", "--submitter", "ORG", "--system", "box", "--runs-dir",
                   str(built.runs), "--out-dir", str(out), "--key", str(built.key),
                   "--unofficial", "--system-config", str(built.home / "system.toml"),
                   **fx.env())


@contextmanager
def unwritable(path: Path) -> Iterator[None]:
    """``path`` unwritable while the block runs: read-only permissions, and for root
    (whom permissions do not stop) the immutable attribute; the test skips where
    neither holds."""
    mode = path.stat().st_mode
    path.chmod(0o555 if path.is_dir() else 0o444)
    immutable = False
    try:
        if os.geteuid() == 0:
            chattr = shutil.which("chattr")
            done = chattr and subprocess.run([chattr, "+i", str(path)], capture_output=True)
            if not done or done.returncode != 0:
                pytest.skip("running as root, where only chattr +i makes a file unwritable, "
                            "and chattr +i is refused here")
            immutable = True
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        path.chmod(mode)


def _leftovers(out: Path) -> list[str]:
    """What a failed packaging left in ``out`` beyond the tree, the bundle and its
    manifest: a half-built tree, an empty moved-aside folder, a temporary bundle."""
    return sorted(p.name for p in out.iterdir()
                  if ".building-" in p.name or ".writing" in p.name
                  or (".previous-" in p.name and not any(p.iterdir())))


def test_an_out_dir_that_is_a_file(built: fx.Built, tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.write_text("a file")
    _refused(_package(built, target), str(target), "is not a directory")
    _refused(_package(built, target / "below"), str(target / "below"), "cannot be written")
    assert target.read_text() == "a file"


def test_an_out_dir_that_cannot_be_written(built: fx.Built, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    with unwritable(out):
        _refused(_package(built, out), str(out), "cannot be written")
        _refused(_package(built, out / "new"), str(out / "new"), "cannot be written")
    assert list(out.iterdir()) == []


def test_an_old_bundle_that_cannot_be_replaced(built: fx.Built, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert _package(built, out).returncode == 0
    bundle = out / f"{NAME}.tar.gz"
    before = bundle.read_bytes()
    with unwritable(bundle):
        _refused(_package(built, out), str(bundle), "cannot be written")
    assert bundle.read_bytes() == before and _leftovers(out) == []


def test_an_old_tree_that_cannot_be_moved_aside(built: fx.Built, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert _package(built, out).returncode == 0
    with unwritable(out / NAME):
        _refused(_package(built, out), str(out / NAME), "cannot replace")
    assert _leftovers(out) == []


def test_a_directory_where_the_bundle_goes(built: fx.Built, tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / f"{NAME}.tar.gz").mkdir(parents=True)
    _refused(_package(built, out), str(out / f"{NAME}.tar.gz"), "is a directory")
    assert sorted(p.name for p in out.iterdir()) == [f"{NAME}.tar.gz"]  # refused first


@pytest.mark.parametrize("bad", [b"\xff.txt", b"\xfe\xfd/a.txt"], ids=["file", "folder"])
def test_sign_refuses_a_name_that_is_not_utf8(bad: bytes, built: fx.Built,
                                              tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(built.tree, tree)
    path = os.fsencode(tree / "closed") + b"/" + bad
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(b"x")
    shown = os.fsencode(tree / "closed").decode() + "/" + \
        bad.split(b"/")[0].decode("utf-8", "backslashreplace")
    out = tmp_path / "signed.tar.gz"
    proc = run_cli("sign", str(tree), "--key", str(built.key), "--unofficial", "--out",
                   str(out), **fx.env())
    _refused(proc, shown, "not UTF-8")
    assert not out.exists()


def test_sign_to_an_out_that_cannot_be_written(built: fx.Built, tmp_path: Path) -> None:
    out = tmp_path / "here.tar.gz"
    out.mkdir()
    proc = run_cli("sign", str(built.tree), "--key", str(built.key), "--unofficial", "--out",
                   str(out), **fx.env())
    _refused(proc, str(out), "cannot be written")
