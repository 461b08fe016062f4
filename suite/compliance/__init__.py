"""Compliance tests (TEST01, TEST04, ...): their audit.config, and our own verification.

A compliance test is a performance run with an ``audit.config`` that LoadGen applies
on top of the settings, followed by a verification against a reference run of the
same benchmark, scenario and backend. The registry maps a test name to its
implementation; later tests (TEST06 for token outputs) plug in with one entry.
"""

from __future__ import annotations

import difflib
import importlib
import tomllib
from typing import Any

from suite.compliance.base import ComplianceTest, Verdict
from suite.errors import ConfigError
from suite.paths import Paths

__all__ = ["REGISTRY", "ComplianceTest", "Verdict", "get_test", "load_table"]

REGISTRY: dict[str, str] = {
    "TEST01": "suite.compliance.test01:Test01",
    "TEST04": "suite.compliance.test04:Test04",
}


def load_table(paths: Paths) -> dict[str, Any]:
    """``run_rules/compliance.toml``."""
    path = paths.run_rules / "compliance.toml"
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None


def get_test(name: str, paths: Paths) -> ComplianceTest:
    """The implementation of a compliance test, or a ``ConfigError`` with a suggestion."""
    key = name.upper()
    if key not in REGISTRY:
        close = difflib.get_close_matches(key, list(REGISTRY), n=1, cutoff=0.5)
        raise ConfigError(
            f"unknown compliance test '{name}' (known: {', '.join(REGISTRY)})",
            hint=f"did you mean '{close[0]}'?" if close else "",
        )
    module_name, _, class_name = REGISTRY[key].partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    test: ComplianceTest = cls(load_table(paths)[key], load_table(paths))
    return test
