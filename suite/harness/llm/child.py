"""How the child process builds an LLM SUT (``suite.harness.child`` calls ``build_llm_sut``)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any, cast

from suite.backends import backend_class
from suite.backends.base import BackendInfo
from suite.config.model import RunConfig
from suite.errors import BackendError
from suite.harness.llm.endpoint_sut import EndpointSystemUnderTest
from suite.harness.llm.endpoint_workers import default_workers
from suite.harness.llm.sut import LLMSystemUnderTest
from suite.harness.loadgen import TokenCompleter
from suite.llm.backend import TorchLLMBackend
from suite.llm.card import LLMCard, load_llm_card
from suite.llm.dataset import LLMDataset, llm_cache
from suite.llm.endpoint_check import check as check_endpoint
from suite.llm.generation import GenerationConfig
from suite.llm.openai_backend import OpenAIBackend
from suite.paths import find_paths
from suite.scenarios import Scenario


def build_llm_sut(home: Path, config: RunConfig,
                  on_drain: Any = None) -> tuple[LLMSystemUnderTest, dict[str, Any]]:
    """The LLM SUT for ``config`` and its backend's record (for ``status.json``)."""
    card = load_llm_card(find_paths(home), config.benchmark)
    cls = backend_class(config.backend)
    backend = cls(cls.Options.model_validate(config.backend_options))
    if isinstance(backend, OpenAIBackend):
        return _endpoint_sut(backend, card, config, on_drain)
    if not isinstance(backend, TorchLLMBackend):
        raise BackendError(f"backend '{config.backend}' cannot run the text-generation card "
                        f"{card.card_path}; use --backend torch-llm or openai")
    gen, info = backend.open(card, config.sut.max_batch_size)
    dataset = LLMDataset(card, config.data.dataset_dir, config.data.model_path,
                          llm_cache(config.data.cache_dir))
    completer = backend.make_completer() or TokenCompleter()
    if not isinstance(completer, TokenCompleter):
        raise BackendError(f"backend '{config.backend}': make_completer() returned "
                           f"{type(completer).__name__}, not a TokenCompleter")
    sut = LLMSystemUnderTest(
        gen, dataset, GenerationConfig.from_card(card), completer,
        report_first_token=config.scenario is not Scenario.OFFLINE,
        max_batch=config.sut.max_batch_size, on_drain=on_drain,
        static=backend.options.model_dump().get("batching") == "static")
    return sut, asdict(info)


def _endpoint_sut(backend: OpenAIBackend, card: LLMCard, config: RunConfig,
                  on_drain: Any) -> tuple[LLMSystemUnderTest, dict[str, Any]]:
    """The streaming SUT, and the record of what the servers said (asked again here, so
    the record is this test's own)."""
    dataset = LLMDataset(card, config.data.dataset_dir, config.data.model_path,
                          llm_cache(config.data.cache_dir))
    settings = backend.settings(card)
    record = check_endpoint(settings, dataset.prompts[0], dataset.tokenizer.encode,
                            dataset.tokenizer.decode)
    workers = backend.opts.client_workers
    sut = EndpointSystemUnderTest(settings, dataset, TokenCompleter(),
                                  report_first_token=config.scenario is not Scenario.OFFLINE,
                                  on_drain=on_drain,
                                  workers=default_workers() if workers < 0 else workers)
    details = {**record.details(), "client_workers": str(sut.workers)}
    info = BackendInfo(name=backend.name, version=f"httptools {_version('httptools')}",
                       device="remote", thread_safe=True,
                       precision=f"as served by {details['engine']}",
                       weight_transformations="as served", details=details)
    # ``run``: what each client process spent, filled in when the SUT stops (the key is
    # there from the start, so filling it never resizes the dict a status may be writing)
    backend_record = {**asdict(info), "run": {"client_workers": sut.workers}}
    sut.backend_record = backend_record
    return cast(LLMSystemUnderTest, sut), backend_record


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "unknown"
