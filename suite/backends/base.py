"""The ``Backend`` contract every system-under-test backend implements.

A backend loads one model, predicts one batch at a time, and closes. It must be
safe to call ``predict`` from several worker threads at once (onnxruntime sessions
are) or say otherwise through ``BackendInfo.thread_safe``. Heavy frameworks are
imported inside ``load``, never at module import, so ``import suite`` stays fast.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from ..models import ModelCard
    from ..types import Batch, Outputs


class BackendOptions(BaseModel):
    """Base of every backend's options model (``[backend.<name>]`` in config files)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class BackendInfo:
    """What a loaded backend reports about itself; recorded in ``result.json``."""

    name: str
    version: str
    device: str = "cpu"
    thread_safe: bool = True
    details: dict[str, str] = field(default_factory=dict)


@runtime_checkable
class Backend(Protocol):
    """One model, one ``predict`` per batch. See the module docstring."""

    def load(self, card: ModelCard, max_batch_size: int) -> BackendInfo:
        """Load the card's model, ready for batches of up to ``max_batch_size``."""
        ...

    def predict(self, batch: Batch) -> Outputs:
        """Run the model on ``batch`` (first axis = samples) and return its raw outputs."""
        ...

    def close(self) -> None:
        """Release the model and any device memory."""
        ...


class BackendBase:
    """Convenience base: options handling, availability check, context manager."""

    #: Registry name, e.g. ``"onnxruntime"``.
    name: ClassVar[str] = ""
    #: Options model; subclasses replace it.
    Options: ClassVar[type[BackendOptions]] = BackendOptions
    #: (import name, pip requirement) pairs that must be importable.
    requires: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: The pip extra that installs ``requires``.
    extra: ClassVar[str] = ""

    def __init__(self, options: BackendOptions | None = None) -> None:
        self.options = options if options is not None else self.Options()

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """Why this backend cannot run here, or ``None`` if it can (imports nothing)."""
        missing = [req for module, req in cls.requires if importlib.util.find_spec(module) is None]
        if not missing:
            return None
        install = f"pip install -e '.[{cls.extra}]'" if cls.extra else "pip install " + " ".join(
            missing
        )
        return f"missing package(s) {', '.join(missing)}: install with `{install}`"

    def load(self, card: ModelCard, max_batch_size: int) -> BackendInfo:
        """Load the card's model, ready for batches of up to ``max_batch_size``."""
        raise NotImplementedError

    def predict(self, batch: Batch) -> Outputs:
        """Run the model on ``batch`` (first axis = samples) and return its raw outputs."""
        raise NotImplementedError

    def close(self) -> None:
        """Nothing to release by default."""

    def __enter__(self) -> BackendBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
