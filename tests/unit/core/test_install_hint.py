"""Install hints name the way this copy was installed (issue 40, item 5): a wheel user is
told the package, not a checkout's ``pip install -e``."""

from __future__ import annotations

from pathlib import Path

import pytest

from suite import paths


def test_a_checkout_reinstalls_itself_editable() -> None:
    assert paths.install_hint("openai") == "pip install -e '.[openai]'"
    assert paths.install_hint() == "pip install -e '.'"


def test_a_wheel_names_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site-packages"
    (site / "suite" / "_data" / "run_rules").mkdir(parents=True)
    monkeypatch.setattr(paths, "CHECKOUT", site)  # no pyproject.toml beside the package
    monkeypatch.setattr(paths, "PACKAGE_DATA", site / "suite" / "_data")
    assert paths.install_hint("openai") == "pip install 'infersuite[openai]'"
    from suite.backends.remote import RemoteBackend

    assert RemoteBackend.install_command(["httpx"]) == "pip install 'infersuite[remote]'"
