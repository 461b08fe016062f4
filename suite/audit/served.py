"""The audit of a result an engine computed (an endpoint run): no local file's hash stands
in for a remote engine's weights, so a replay is not gated on one. It says what the
bundle claims about the weights and where that came from, and compares what the
replay's engine reports (its name and version, where it loaded the weights from) with
the bundle's record: a different answer is another server, and the replay fails.
"""

from __future__ import annotations

from typing import Any


def served_weights(claims: dict[str, Any]) -> tuple[bool, list[str]]:
    """(whether an engine's servers computed the result, the evidence line about its
    weights) from ``run.json``'s ``provenance``."""
    if "weights_location" not in claims:
        return False, []
    weights = claims.get("weights") or {}
    return True, [f"weights: {weights.get('value') or 'none'} "
                  f"({weights.get('source', 'not recorded')}); a remote engine's weights "
                  "are not verified by the replay"]


def engine_differs(claims: dict[str, Any], replayed: dict[str, Any]) -> list[str]:
    """What the replay's engine reported differently from the bundle's record."""
    lines = []
    for name in ("engine", "weights_location"):
        before = (claims.get(name) or {}).get("value", "")
        claim = replayed.get(name)
        after = claim.value if claim is not None else ""
        if before != after:
            lines.append(f"{name}: the bundle's engine reported {before or 'nothing'!r}, "
                         f"the replay's {after or 'nothing'!r} (reported by the engine)")
    return lines
