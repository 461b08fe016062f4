"""What ``suite tune`` searches (``TuneOptions``), for every kind of benchmark.

Example::

    options = TuneOptions.quick(benchmark="digits", backend="onnxruntime")
    suite.api.tune(options)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from suite.errors import ConfigError
from suite.scenarios import Scenario

__all__ = ["TuneOptions"]


@dataclass
class TuneOptions:
    """What ``suite tune`` searches; the defaults are the command's."""

    benchmark: str = "digits"
    backend: str = "onnxruntime"
    scenarios: tuple[Scenario, ...] = tuple(Scenario)
    system: str | None = None
    runs_dir: Path | None = None
    probe_ms: int = 2000
    confirm_ms: int | None = None
    batch_sizes: tuple[int, ...] = (1, 4, 16)
    worker_counts: tuple[int, ...] = ()
    worker_models: tuple[str, ...] = ()
    steps: int = 6
    max_qps: float | None = None
    fresh: bool = False
    #: LLM benchmarks: the Offline concurrency sweep, and the openai backend's servers.
    concurrency: tuple[int, ...] = (1, 4, 16, 64)
    urls: tuple[str, ...] = ()

    @classmethod
    def quick(cls, **changes: Any) -> TuneOptions:
        """Seconds-long probes and confirming runs: a smoke test, not a tuning."""
        quick = cls(probe_ms=1000, confirm_ms=1000, batch_sizes=(1, 4), steps=2)
        return dataclasses.replace(quick, **changes)

    @classmethod
    def from_text(cls, *, scenarios: tuple[str, ...] = (), batch_sizes: str = "1,4,16",
                  worker_counts: str = "", worker_models: str = "", quick: bool = False,
                  given: frozenset[str] = frozenset(), concurrency: str = "1,4,16,64",
                  **values: Any) -> TuneOptions:
        """The options as the command line spells them: comma-separated lists, scenario
        names, and ``quick`` (its sizes, except for the options named in ``given``)."""
        models = tuple(m.strip() for m in worker_models.split(",") if m.strip())
        if unknown := sorted(set(models) - {"threads", "processes"}):
            raise ConfigError(f"--worker-models: unknown {', '.join(unknown)}",
                              hint="give threads, processes or both, comma-separated")
        options = cls(scenarios=tuple(Scenario(s) for s in scenarios) or tuple(Scenario),
                      batch_sizes=tuple(_int_list("--batch-sizes", batch_sizes)),
                      worker_counts=tuple(_int_list("--workers", worker_counts)),
                      worker_models=models,
                      concurrency=tuple(_int_list("--concurrency", concurrency)), **values)
        if quick:
            small = cls.quick()
            options = dataclasses.replace(options, **{
                name: getattr(small, name) for name in ("probe_ms", "confirm_ms",
                                                        "batch_sizes", "steps")
                if name not in given})
        return options


def _int_list(option: str, text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"{option} {text!r}: not a list of integers",
                          hint="give integers, comma-separated (1,4,16)") from None
    if any(v < 1 for v in values):
        raise ConfigError(f"{option} {text!r}: each value must be at least 1") from None
    return values
