"""Which model, scenario and round a submission tree's directories stand for.

* A scenario directory (``Offline``, ``Interactive``, ...) maps to the tree spelling and
  to the LoadGen scenario that runs it: LoadGen runs ``Interactive`` as ``Server``.
* A benchmark directory resolves to a model of the round: its own name, the round's
  ``model_aliases`` (the checker's ``model_mapping``), or, in the open division, the
  submitter's ``model_mapping.json``. Anything else is unknown, and an error.
* ``detect_round`` reads the seeds the performance logs carry and names the round most
  of them belong to; no known round, or a tie, is refused (``RoundError``).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from suite.checker.context import read_json
from suite.config.rules import (
    DEFAULT_ROUND,
    TREE_SCENARIOS,
    ModelRules,
    RuleSet,
    available_rounds,
    load_rules,
)
from suite.errors import ConfigError
from suite.paths import Paths
from suite.scenarios import Scenario

#: Tree spelling (lower-cased) -> (tree spelling, the LoadGen scenario that runs it).
SCENARIO_DIRS: dict[str, tuple[str, Scenario]] = {
    "singlestream": ("SingleStream", Scenario.SINGLE_STREAM),
    "multistream": ("MultiStream", Scenario.MULTI_STREAM),
    "server": ("Server", Scenario.SERVER),
    "offline": ("Offline", Scenario.OFFLINE),
    "interactive": ("Interactive", Scenario.SERVER),
}
assert {v[0] for v in SCENARIO_DIRS.values()} == set(TREE_SCENARIOS)

_SEED_KEYS = ("qsl_rng_seed", "sample_index_rng_seed", "schedule_rng_seed")
_SEED_RE = re.compile(rb'"key": "effective_(qsl_rng_seed|sample_index_rng_seed|'
                      rb'schedule_rng_seed)", "value": (\d+)')
#: Enough results to name the round; reading every log again would double the cost.
_DETECT_LOGS = 64


class RoundError(ConfigError):
    """The tree's logs do not name exactly one supported round."""


def resolve_model(rules: RuleSet, name: str,
                  mapping: dict[str, Any] | None) -> tuple[str, ModelRules] | None:
    """``(official name, rules)`` for a benchmark directory, or ``None`` if unknown."""
    sub = rules.submission
    aliases = sub.model_aliases if sub is not None else {}
    for candidate in (name, aliases.get(name),
                      mapping.get(name) if mapping is not None else None):
        if isinstance(candidate, str):
            official = aliases.get(candidate, candidate)
            if official in rules.models:
                return official, rules.models[official]
    return None


def read_model_mapping(submitter_dir: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The open division's ``model_mapping.json``: ``(mapping, None)``, ``(None, None)``
    when there is none, or ``(None, why not)`` when it is unusable."""
    path = submitter_dir / "model_mapping.json"
    if not path.exists():
        return None, None
    data, error = read_json(path)
    if error is not None:
        return None, error
    if not isinstance(data, dict):
        return None, f"a JSON {type(data).__name__}, not an object"
    return data, None


def _tree_seeds(root: Path) -> list[tuple[int, ...]]:
    found: list[tuple[int, ...]] = []
    logs = [path for pattern in ("*/*/results/*/*/*/performance/run_1/mlperf_log_detail.txt",
                                 "*/*/results/*/*/*/TEST*/performance/run_1/"
                                 "mlperf_log_detail.txt")
            for path in sorted(root.glob(pattern))[:_DETECT_LOGS]]
    for path in logs:
        try:
            with path.open("rb") as handle:
                head = handle.read(1 << 16)  # the settings come first in every log
        except OSError:
            continue
        seeds = {m.group(1).decode(): int(m.group(2)) for m in _SEED_RE.finditer(head)}
        if all(key in seeds for key in _SEED_KEYS):
            found.append(tuple(seeds[key] for key in _SEED_KEYS))
    return found


def supported_rounds(paths: Paths) -> list[str]:
    """The rounds with a rules file (``run_rules/`` also holds ``compliance.toml``)."""
    return [r for r in available_rounds(paths) if re.fullmatch(r"v\d+\.\d+", r)]


def _endpoints_round(root: Path, paths: Paths, rounds: list[str]) -> str | None:
    """A tree of endpoint-format results only (no LoadGen log, so no qsl seed): the one
    round whose checker reads that format (``[submission.endpoints]``), if only one does."""
    if not any(root.glob("*/*/results/*/*/*/performance/result_summary.json")):
        return None
    reading = [name for name in rounds
               if (sub := load_rules(paths, name).submission) is not None
               and sub.endpoints is not None]
    return reading[0] if len(reading) == 1 else None


def detect_round(root: Path, paths: Paths) -> str:
    """The round whose seeds most of the tree's performance logs carry (a run directory:
    its own round). Raises ``RoundError`` when no round, or no single round, is named."""
    rounds = supported_rounds(paths)
    if (root / "config.json").is_file() or (root / "result.json").is_file():
        config, _ = read_json(root / "config.json")
        named = config.get("round") if isinstance(config, dict) else None
        return named if isinstance(named, str) and named in rounds else DEFAULT_ROUND
    seen = Counter(_tree_seeds(root))
    if not seen and (named := _endpoints_round(root, paths, rounds)) is not None:
        return named
    if not seen and not any(p.is_file() and not p.name.startswith(".")
                            for p in root.rglob("*")):
        # the shipped, empty submissions/: nothing to check yet (not an unknown round)
        raise RoundError(f"{root}: no submission here yet (no files)",
                         hint="build one: make submission (suite package), then "
                         f"suite check {root}")
    if not seen:
        raise RoundError(f"{root}: no performance log with seeds, so the round is unknown",
                         hint="give the round: suite check --round v6.0|v6.1")
    by_seeds = {}
    for name in rounds:
        rules = load_rules(paths, name)
        by_seeds[tuple(rules.seeds.model_dump()[k] for k in _SEED_KEYS)] = name
    votes: Counter[str] = Counter()
    for seeds, count in seen.items():
        if seeds in by_seeds:
            votes[by_seeds[seeds]] += count
    ranked = votes.most_common()
    # The round most logs name wins; the other logs then fail PERF-SEEDS. No known round,
    # or a tie between two, is ambiguous: the checker will not guess.
    if ranked and (len(ranked) == 1 or ranked[0][1] > ranked[1][1]):
        return ranked[0][0]
    parts = ", ".join(f"{by_seeds.get(s, 'unknown seeds ' + '/'.join(map(str, s)))}: "
                      f"{n} log(s)" for s, n in seen.most_common())
    raise RoundError(f"{root}: the performance logs do not name one round ({parts})",
                     hint="give the round: suite check --round <round>; the seeds of "
                          "the other logs are then reported as PERF-SEEDS errors")
