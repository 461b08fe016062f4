"""The example system file (docs/examples/system.toml) is read as the packager reads a
user's, and every key is a field of the round's system JSON (issue 40, item 13)."""

from __future__ import annotations

from suite.config.rules import load_rules
from suite.paths import CHECKOUT, find_paths
from suite.submission.system_description import describe, read_user_toml


def test_the_example_system_file_has_only_known_fields() -> None:
    rules = load_rules(find_paths(), "v6.1")
    assert rules.submission is not None
    user = read_user_toml(CHECKOUT / "docs" / "examples" / "system.toml")
    assert user["system_type"] == "edge"
    system, _, unknown = describe(rules.submission, user, {}, division="closed",
                                  submitter="MyOrg", system_name="box")
    assert unknown == []
    assert system["cooling"] == "air" and system["system_name"] == "box"
