"""``--url`` belongs to the openai backend: it chooses it, or is refused (run and tune)."""

from __future__ import annotations

import pytest

from suite.cli.options import backend_for_urls
from suite.errors import ConfigError


def test_url_without_a_backend_chooses_openai_and_says_so(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert backend_for_urls(None, ("http://h:1",), given=False) == "openai"
    assert "the openai backend" in capsys.readouterr().err
    assert backend_for_urls("openai", ("http://h:1",), given=True) == "openai"
    assert backend_for_urls("torch-llm", (), given=True) == "torch-llm"  # no --url: as given


def test_url_with_another_backend_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match="--url is an option of the openai backend, and "
                                          "this run's is --backend torch-llm") as raised:
        backend_for_urls("torch-llm", ("http://h:1",), given=True)
    assert "\n" not in str(raised.value) and "--backend openai" in raised.value.hint
