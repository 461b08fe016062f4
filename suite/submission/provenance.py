"""Where each claim of a packaged result came from, as the run recorded it.

A result's ``provenance`` (``results.RunResult.provenance``) says, for the weights, their
precision and quantization, the engine and where the engine loaded its weights, whether
each was measured, reported by the engine or stated by the submitter. Packaging writes it
as ``documentation/provenance.json`` and beside ``measurements.json``; a record without
one says "not recorded", never "measured".
"""

from __future__ import annotations

from suite.results import RunResult

__all__ = ["PROVENANCE_NAME", "claims", "measurement_sources"]


#: ``documentation/provenance.json``: where each claim of the system and results came from.
PROVENANCE_NAME = "provenance.json"


def claims(run: RunResult) -> dict[str, dict[str, str]]:
    """``run``'s provenance as plain JSON (``{claim: {value, source}}``); an older record
    without one says so rather than passing for measured."""
    if not run.provenance:
        return {"weights": {"value": run.model_sha256, "source": "not recorded"}}
    return {name: claim.model_dump() for name, claim in sorted(run.provenance.items())}


def measurement_sources(run: RunResult) -> dict[str, str]:
    """Where each ``measurements.json`` field came from, from the run's provenance."""
    from suite.results import MEASURED, NOT_RECORDED, STATED_BY_SUBMITTER

    def source(name: str) -> str:
        claim = run.provenance.get(name)
        return claim.source if claim is not None else NOT_RECORDED

    served = "weights_location" in run.provenance
    weights_source = source("weights")
    return {"starting_weights_filename": source("weights_location") if served
            else weights_source,
            "retraining": (STATED_BY_SUBMITTER if served else MEASURED)
            if run.division == "closed" and weights_source != NOT_RECORDED else NOT_RECORDED,
            "weight_data_types": source("precision"),
            "weight_transformations": source("quantization")}
