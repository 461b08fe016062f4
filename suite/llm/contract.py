"""The text-generation backend contract (``Kind.TEXT_GENERATION``).

Every LLM backend is a ``GeneratingBackend``: it serves text-generation cards and says how
its tokens are produced (``serving``), which picks the system under test the harness
builds for it (``suite.harness.kinds.text_generation``):

* ``InProcessGenerator`` (``serving = "in-process"``): ``open`` gives a generation backend
  (``prefill``/``decode``/``release``) that the harness's continuous batcher steps;
  ``torch-llm`` is one.
* ``EndpointGenerator`` (``serving = "endpoint"``): ``settings`` gives the endpoint client
  what it needs to stream each sample from OpenAI-compatible servers; ``openai`` is one.

Before any run directory exists, ``preflight`` may check what it serves from (the
endpoint probes its servers) and returns the reasons its options make the run not
submittable.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from suite.backends.base import BackendCore, BackendInfo
from suite.models import Kind

if TYPE_CHECKING:
    from collections.abc import Callable

    from suite.llm.card import LLMCard
    from suite.llm.endpoint.check import EndpointRecord
    from suite.llm.endpoint.client import ClientSettings
    from suite.llm.generation import GenerationBackend

__all__ = ["EndpointGenerator", "GeneratingBackend", "InProcessGenerator", "Serving"]

#: How a text-generation backend produces tokens (the harness builds its SUT by this).
Serving = Literal["in-process", "endpoint"]


@dataclass(frozen=True)
class StatedWeights:
    """The submitter's statement about a remote engine's weights (not verified)."""

    #: sha256 of the reference weights the served model was made from; "" none stated
    sha256: str = ""
    #: the weights' data type the engine runs (fp16, bf16, ...); "" none stated
    precision: str = ""
    #: what was done to the reference weights ("none", "fp8 per-tensor", ...)
    quantization: str = ""


#: The request the pre-flight sends: the dataset's first prompt ids, or a tool-calling
#: card's first request (messages, tools, tool_choice: ``LLMDataset.probe_prompt``).
ProbePrompt = list[int] | dict[str, Any]


class GeneratingBackend(BackendCore):
    """What every text-generation backend has (see the module docstring)."""

    kinds: ClassVar[frozenset[Kind]] = frozenset({Kind.TEXT_GENERATION})
    serving: ClassVar[Serving]

    def preflight(self, card: LLMCard, prompt: ProbePrompt,
                  encode: Callable[[str], list[int]],
                  decode: Callable[[list[int]], str]) -> list[str]:
        """Check, before a run directory exists, that the backend can serve ``card``
        (``prompt``: the dataset's first); returns the reasons its options make the run
        not submittable. Nothing to check by default."""
        return []

    @property
    def stated(self) -> StatedWeights | None:
        """What the submitter states about weights the suite cannot hash (an engine's);
        None where the suite computes with the card's own weights file."""
        return None


class InProcessGenerator(GeneratingBackend):
    """Generation in this process: the harness's continuous batcher steps ``open``'s
    generation backend."""

    serving: ClassVar[Serving] = "in-process"

    @property
    def static_batching(self) -> bool:
        """Whether a batch runs to its end before the next one starts (the baseline)."""
        return False

    @abstractmethod
    def open(self, card: LLMCard, max_sequences: int) -> tuple[GenerationBackend,
                                                               BackendInfo]:
        """The generation backend for ``card``, and what it reports about itself."""
        raise NotImplementedError(f"backend '{self.name}' implements no open()")

    def make_completer(self) -> object | None:
        """What answers LoadGen for this backend's SUT: None for the harness's own
        ``TokenCompleter``; a test backend may return a subclass of it (this layer sits
        below the harness, so the type is checked where the harness takes it)."""
        return None


class EndpointGenerator(GeneratingBackend):
    """Tokens streamed from servers: the harness's endpoint client sends each sample."""

    serving: ClassVar[Serving] = "endpoint"

    @property
    def client_workers(self) -> int:
        """Client processes that stream the requests (0: a thread in LoadGen's process;
        -1: the default for this machine)."""
        return -1

    @property
    def stated(self) -> StatedWeights | None:
        """What the submitter states about the weights the engine serves (the suite
        cannot see them): nothing, by default."""
        return StatedWeights()

    @abstractmethod
    def settings(self, card: LLMCard) -> ClientSettings:
        """The endpoint client's settings for ``card``."""
        raise NotImplementedError(f"backend '{self.name}' implements no settings()")

    def probe(self, card: LLMCard, prompt: ProbePrompt,
              encode: Callable[[str], list[int]],
              decode: Callable[[list[int]], str]) -> EndpointRecord:
        """Ask every server what it is and stream one request (``endpoint.check``); a
        server that cannot serve the run is a ``BackendError``."""
        from suite.llm.endpoint.check import check

        return check(self.settings(card), prompt, encode, decode)

    def preflight(self, card: LLMCard, prompt: ProbePrompt,
                  encode: Callable[[str], list[int]],
                  decode: Callable[[list[int]], str]) -> list[str]:
        self.probe(card, prompt, encode, decode)
        return []
