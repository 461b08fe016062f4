"""The kinds of benchmark, as strategies of the one run pipeline.

A card declares its kind (``suite.models.card_kind`` reads it: the one place that
decides); ``STRATEGIES`` maps each kind to its strategy, named as ``"module:Class"`` so
that choosing one imports only that kind's modules. Adding a kind of benchmark is a
``Kind`` member, a strategy module (``base.KindStrategy``) and one line here.

Example::

    strategy = for_benchmark(paths, "tinylm")
    strategy.kind, strategy.default_backend  # (Kind.TEXT_GENERATION, 'torch-llm')
"""

from __future__ import annotations

import functools
import importlib

from suite.harness.kinds.base import BuiltSut, CompliancePlan, KindStrategy, Prepared
from suite.models import Kind, card_kind
from suite.paths import Paths

__all__ = ["STRATEGIES", "BuiltSut", "CompliancePlan", "KindStrategy", "Prepared",
           "for_benchmark", "preload", "strategy"]

STRATEGIES: dict[Kind, str] = {
    Kind.TENSOR: "suite.harness.kinds.tensor:TensorKind",
    Kind.TEXT_GENERATION: "suite.harness.kinds.text_generation:TextGenerationKind",
}


@functools.cache
def strategy(kind: Kind) -> KindStrategy:
    """The strategy of ``kind`` (imported on first use)."""
    module, _, name = STRATEGIES[kind].partition(":")
    cls = getattr(importlib.import_module(module), name)
    instance = cls()
    assert isinstance(instance, KindStrategy) and instance.kind is kind
    return instance


def for_benchmark(paths: Paths, benchmark: str) -> KindStrategy:
    """The strategy of the kind ``benchmark``'s card declares."""
    return strategy(card_kind(paths, benchmark))


def preload(kind: Kind) -> None:
    """Import what ``kind``'s child builds its SUT with (a child started early does this
    while it waits for its spec)."""
    for module in strategy(kind).child_modules:
        importlib.import_module(module)
