"""The remote backend's options, refused before any server or LoadGen is involved."""

from __future__ import annotations

from typing import Any

import pytest

from suite.backends import create
from suite.errors import ConfigError
from suite.models import load_card
from suite.paths import find_paths
from tests.support.remote_fixtures import missing

if (reason := missing()) is not None:
    pytest.skip(reason, allow_module_level=True)


CARD = load_card(find_paths(), "digits")


@pytest.mark.parametrize(("options", "says"), [
    ({"endpoints": ["https://127.0.0.1:1"]}, "expected 'grpc://host:port'"),
    ({"endpoints": ["grpc://127.0.0.1"]}, "expected 'grpc://host:port'"),
    ({"endpoints": ["grpc://127.0.0.1:1"], "protocol": "rest-json"}, "needs http://"),
    ({"endpoints": ["grpc://a:1", "grpc://a:1"]}, "listed twice"),
])
def test_bad_options_are_refused(options: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        create("remote", options)
