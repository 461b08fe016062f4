"""A benchmark's kind is decided in one place: ``suite.models.card_kind`` reads the card's
``task``; every other module gets the kind from it (through ``suite.harness.kinds``) and
dispatches through a registry keyed by ``Kind``, never by asking "is this an LLM"."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from suite.harness.kinds import STRATEGIES, for_benchmark, strategy
from suite.models import Kind, card_kind
from suite.paths import find_paths

SUITE = Path(__file__).resolve().parents[3] / "suite"


def _sources() -> dict[str, str]:
    return {str(p.relative_to(SUITE.parent)): p.read_text(encoding="utf-8")
            for p in SUITE.rglob("*.py")}


def test_only_the_card_loader_reads_a_cards_task() -> None:
    readers = [name for name, text in _sources().items()
               if re.search(r"""\.get\(["']task["']\)|\[["']task["']\]""", text)]
    assert readers == ["suite/models.py"]


def test_nothing_asks_whether_a_benchmark_is_an_llm() -> None:
    asking = [name for name, text in _sources().items()
              if re.search(r"is_llm|GENERATING_BACKENDS|isinstance\([^)]*(OpenAIBackend|"
                           r"TorchLLMBackend)", text)]
    assert asking == []


def test_the_kind_is_decided_once_by_card_kind() -> None:
    callers = sorted(name for name, text in _sources().items()
                     if "card_kind(" in text and name != "suite/models.py")
    # the strategies' registry, the LLM card loader's own check, the audit's registry
    assert callers == ["suite/audit/accuracy_step.py", "suite/harness/kinds/__init__.py",
                       "suite/llm/card.py"]


@pytest.mark.parametrize("kind", list(Kind))
def test_every_kind_has_a_strategy_that_says_so(kind: Kind) -> None:
    assert kind in STRATEGIES
    chosen = strategy(kind)
    assert chosen.kind is kind and chosen.default_backend and chosen.backend_hint


def test_cards_map_to_their_kinds() -> None:
    paths = find_paths()
    assert for_benchmark(paths, "digits").kind is Kind.TENSOR
    assert for_benchmark(paths, "resnet50").kind is Kind.TENSOR
    assert for_benchmark(paths, "tinylm-interactive").kind is Kind.TEXT_GENERATION
    assert card_kind(paths, "llama2-70b-99.9") is Kind.TEXT_GENERATION
    assert card_kind(paths, "no-such-card") is Kind.TENSOR  # its loader names what is wrong


def test_a_cards_task_implementation_is_resolved_in_one_place() -> None:
    # A task card is a tensor card (card_kind); which TensorTask serves it is resolved
    # from the parsed card's ``task`` by kinds.task.task_spec alone, never by a second
    # reader of the card or of suite.tasks.TASKS.
    users = sorted(name for name, text in _sources().items()
                   if re.search(r"\bTASKS\b", text) and not name.startswith("suite/tasks/"))
    assert users == ["suite/harness/kinds/task.py"]
