"""The audit of an engine's result (issue 36, item 1): no local hash gates its replay,
and a replay whose engine reports itself differently from the bundle's record fails."""

from __future__ import annotations

from suite.audit.served import engine_differs, served_weights
from suite.results import Claim

ENGINE = "reported by the engine"
BUNDLE = {"weights": {"value": "ab" * 32, "source": "stated by the submitter, not verified"},
          "engine": {"value": "vllm 0.32.0", "source": ENGINE},
          "weights_location": {"value": "/models/a", "source": ENGINE}}


def test_an_engine_result_is_not_gated_on_a_local_hash() -> None:
    served, lines = served_weights(BUNDLE)
    assert served
    assert lines == [f"weights: {'ab' * 32} (stated by the submitter, not verified); a remote "
                     "engine's weights are not verified by the replay"]
    assert served_weights({"weights": {"value": "cd" * 32, "source": "measured"}}) == (False,
                                                                                       [])


def test_a_replay_against_another_engine_is_named() -> None:
    same = {"engine": Claim(value="vllm 0.32.0", source=ENGINE),
            "weights_location": Claim(value="/models/a", source=ENGINE)}
    assert engine_differs(BUNDLE, same) == []
    other = same | {"weights_location": Claim(value="/models/b", source=ENGINE)}
    assert engine_differs(BUNDLE, other) == [
        "weights_location: the bundle's engine reported '/models/a', the replay's "
        "'/models/b' (reported by the engine)"]
