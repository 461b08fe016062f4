"""The backend registry: names to classes, imported lazily.

Built-in backends are listed in ``BUILTIN`` as ``"module:Class"`` strings, with the
kinds of benchmark each serves in ``BUILTIN_KINDS``, so listing them, or refusing one for
a card of another kind, imports no framework (a test checks the table against each
class's ``kinds``). A backend outside the suite is named by its own
``"package.module:Class"`` spec (for example a test double, or a vendor's backend); its
class's ``kinds`` say what it serves.
"""

from __future__ import annotations

import difflib
import importlib
import math
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import ValidationError

from suite.backends.base import (
    Backend,
    BackendBase,
    BackendCore,
    BackendInfo,
    BackendOptions,
    RawInput,
)
from suite.errors import BackendUnavailable, ConfigError
from suite.models import Kind

__all__ = [
    "BUILTIN",
    "BUILTIN_KINDS",
    "FRAMEWORKS",
    "Backend",
    "BackendBase",
    "BackendCore",
    "BackendInfo",
    "BackendOptions",
    "BackendStatus",
    "RawInput",
    "backend_class",
    "create",
    "create_as",
    "ensure_available",
    "list_backends",
    "serves",
]

BUILTIN: dict[str, str] = {
    "null": "suite.backends.null:NullBackend",
    "openai": "suite.llm.endpoint.backend:OpenAIBackend",
    "onnxruntime": "suite.backends.onnxruntime:OnnxRuntimeBackend",
    "remote": "suite.backends.remote:RemoteBackend",
    "simulated": "suite.backends.simulated:SimulatedBackend",
    "torch": "suite.backends.pytorch:TorchBackend",
    "torch-llm": "suite.llm.backend:TorchLLMBackend",
    "tensorrt": "suite.backends.trt:TensorRTBackend",
}

#: The framework a built-in backend imports when it loads a model: a child started early
#: (``suite.harness.child_start``) imports it while the parent resolves the config.
FRAMEWORKS: dict[str, str] = {"onnxruntime": "onnxruntime", "torch": "torch"}

_TENSOR = frozenset({Kind.TENSOR})
_TEXT = frozenset({Kind.TEXT_GENERATION})
#: The kinds each built-in backend serves, known without importing it (its class says the
#: same in ``kinds``; a unit test holds the two equal).
BUILTIN_KINDS: dict[str, frozenset[Kind]] = {
    "null": _TENSOR, "openai": _TEXT, "onnxruntime": _TENSOR, "remote": _TENSOR,
    "simulated": _TENSOR, "torch": _TENSOR, "torch-llm": _TEXT, "tensorrt": _TENSOR,
}


_SPEC_HINT = "a custom backend is named 'package.module:ClassName' and must be importable"


def _import(spec: str) -> type[BackendCore]:
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
    if not (isinstance(cls, type) and issubclass(cls, BackendCore)):
        raise ConfigError(f"backend '{spec}' is not a suite backend (a subclass of "
                          "suite.backends.BackendBase, or of a kind's contract in "
                          "suite.llm.contract)")
    if not cls.kinds:
        raise ConfigError(f"backend '{spec}' serves no kind of benchmark (its class's "
                          "`kinds` is empty)", hint="subclass a kind's contract: "
                          "suite.backends.BackendBase for tensor models")
    return cls


def backend_class(name: str) -> type[BackendCore]:
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


def serves(name: str) -> frozenset[Kind]:
    """The kinds of benchmark backend ``name`` serves (a built-in one without importing it)."""
    if name in BUILTIN_KINDS:
        return BUILTIN_KINDS[name]
    return backend_class(name).kinds


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
    """A tensor backend (``BackendBase``), after checking it can run here.

    Example::

        backend = create("onnxruntime", {"intra_op_threads": 1})
        info = backend.load(card, max_batch_size=64)
    """
    return create_as(BackendBase, name, options)


_Contract = TypeVar("_Contract", bound=BackendCore)


def create_as(contract: type[_Contract], name: str,
              options: dict[str, Any] | None = None) -> _Contract:
    """Backend ``name`` as the kind's ``contract`` it must implement (``BackendBase`` for a
    tensor card, ``suite.llm.contract.GeneratingBackend`` for a text-generation card),
    after checking it can run here."""
    options_model = ensure_available(name, options or {})
    cls = backend_class(name)
    if not issubclass(cls, contract):
        raise ConfigError(f"backend '{name}' ({cls.__module__}.{cls.__name__}) does not "
                          f"implement {contract.__module__}.{contract.__name__}",
                          hint="see `suite backends` for what each backend serves")
    return cls(options_model)


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
