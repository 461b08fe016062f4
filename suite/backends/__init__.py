"""The backend registry: names to classes, imported lazily.

Built-in backends are listed in ``BUILTIN`` as ``"module:Class"`` strings, so
listing them imports no framework. A backend outside the suite is named by its own
``"package.module:Class"`` spec (for example a test double, or a vendor's backend).
"""

from __future__ import annotations

import difflib
import importlib
import math
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from suite.backends.base import Backend, BackendBase, BackendInfo, BackendOptions, RawInput
from suite.errors import BackendUnavailable, ConfigError

__all__ = [
    "BUILTIN",
    "Backend",
    "BackendBase",
    "BackendInfo",
    "BackendOptions",
    "BackendStatus",
    "RawInput",
    "backend_class",
    "create",
    "ensure_available",
    "list_backends",
]

BUILTIN: dict[str, str] = {
    "null": "suite.backends.null:NullBackend",
    "openai": "suite.llm.openai_backend:OpenAIBackend",
    "onnxruntime": "suite.backends.onnxruntime:OnnxRuntimeBackend",
    "remote": "suite.backends.remote:RemoteBackend",
    "simulated": "suite.backends.simulated:SimulatedBackend",
    "torch": "suite.backends.pytorch:TorchBackend",
    "torch-llm": "suite.llm.backend:TorchLLMBackend",
    "tensorrt": "suite.backends.trt:TensorRTBackend",
}


_SPEC_HINT = "a custom backend is named 'package.module:ClassName' and must be importable"


def _import(spec: str) -> type[BackendBase]:
    module_name, _, class_name = (part.strip() for part in spec.partition(":"))
    if not module_name or not class_name:
        raise ConfigError(f"backend '{spec}' names no {'module' if not module_name else 'class'}",
                          hint=_SPEC_HINT)
    try:
        module = importlib.import_module(module_name)
        cls = getattr(module, class_name)
    # Importing runs the module's code: a custom backend can raise anything there (a
    # RuntimeError from a driver probe, a SyntaxError, a sys.exit), and every one of them
    # is "this backend cannot be used", said in one line, not a traceback.
    except (Exception, SystemExit) as exc:
        raise ConfigError(
            f"backend '{spec}' cannot be imported: {type(exc).__name__}: {exc}",
            hint=_SPEC_HINT if isinstance(exc, (ImportError, AttributeError)) else
            f"importing {module_name} raised; fix the module (python -c 'import {module_name}' "
            "shows the traceback)",
        ) from None
    if not (isinstance(cls, type) and issubclass(cls, BackendBase)):
        raise ConfigError(f"backend '{spec}' is not a suite.backends.BackendBase subclass")
    return cls


def backend_class(name: str) -> type[BackendBase]:
    """The class for a registry name or a ``module:Class`` spec; suggests close names."""
    if name in BUILTIN:
        return _import(BUILTIN[name])
    if ":" in name:
        return _import(name)
    close = difflib.get_close_matches(name, list(BUILTIN), n=1, cutoff=0.5)
    raise ConfigError(
        f"unknown backend '{name}' (known: {', '.join(BUILTIN)})",
        hint=f"did you mean '{close[0]}'?" if close else "or name a custom one as 'module:Class'",
    )


def parse_options(name: str, raw: dict[str, Any], source: str = "config") -> BackendOptions:
    """Validate ``[backend.<name>]`` options against the backend's ``Options`` model."""
    cls = backend_class(name)
    for key, value in raw.items():
        # As for every config float (config._Section): no option means inf or nan, and
        # a backend's own Options model may not say so.
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{source}: backend.{name}.{key} = {value!r}: not a finite number",
                              hint="give a finite value")
    try:
        return cls.Options.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(part) for part in first["loc"])
        raise ConfigError(f"{source}: backend.{name}.{key}: {first['msg']}") from None


def create(name: str, options: dict[str, Any] | None = None) -> BackendBase:
    """Instantiate a backend after checking it can run here.

    Example::

        backend = create("onnxruntime", {"intra_op_threads": 1})
        info = backend.load(card, max_batch_size=64)
    """
    options_model = ensure_available(name, options or {})
    return backend_class(name)(options_model)


def ensure_available(name: str, options: dict[str, Any]) -> BackendOptions:
    """Validated options, or ``BackendUnavailable`` saying what is missing and how to fix it.

    Checks the backend's packages and hardware, then what its options need (a CUDA
    device, a GPU execution provider); imports no framework, so it runs before any run.
    """
    cls = backend_class(name)
    reason = cls.unavailable_reason()
    if reason is not None:
        raise BackendUnavailable(f"backend '{name}' is not available: {reason}")
    parsed = parse_options(name, options)
    problem = cls.options_problem(parsed)
    if problem is not None:
        raise BackendUnavailable(f"backend '{name}' cannot run with these options: {problem}")
    return parsed


@dataclass(frozen=True)
class BackendStatus:
    """One row of ``suite backends``."""

    name: str
    available: bool
    reason: str


def list_backends() -> list[BackendStatus]:
    """Every built-in backend with whether it can run here and why not."""
    rows = []
    for name in BUILTIN:
        reason = backend_class(name).unavailable_reason()
        rows.append(BackendStatus(name, reason is None, reason or "ok"))
    return rows
