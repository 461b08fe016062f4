"""The config's layers: TOML files and ``--set`` items read into ``(source, {key: value})``
layers, and the keys a layer may set (``KnownKeys``: every model field and every
backend's options), each checked with the file and the closest valid name on error.

``loader`` stacks these layers in precedence order; ``preflight`` reads them too.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from suite.backends import BUILTIN, backend_class
from suite.config.model import DataConfig, LoadGenConfig, SutConfig
from suite.config.toml import INT_HINT, MAX_INT_DIGITS, check_value, decode_utf8, parse_toml
from suite.errors import ConfigError
from suite.paths import CONFIG_FILE_LIMIT, read_limited
from suite.scenarios import Scenario

Layer = tuple[str, dict[str, Any]]

#: Where the valid keys are listed, for an unknown key with no close match.
KEYS_HINT = "the keys are listed in docs/configuration.md"


def flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``."""
    flat: dict[str, Any] = {}
    for key, value in table.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


class KnownKeys:
    """Every dotted key a config layer may set, as a lazy set.

    ``key in keys`` imports a backend's module only for a ``backend.<name>.<option>``
    key that names it: importing all seven to list their options cost a run ~0.2 s
    (issue 18). ``all()`` lists every key (for suggestions, on the error path only).
    """

    def __init__(self, backend: str) -> None:
        self.backends = set(BUILTIN) | {backend}
        self.core = {f"{prefix}.{name}" for model, prefix in (
            (LoadGenConfig, "loadgen"), (SutConfig, "sut"), (DataConfig, "data"))
            for name in model.model_fields}

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        if key in self.core:
            return True
        # A custom backend's name has dots of its own ("pkg.mod:Class"): split at the last.
        name, _, option = key.removeprefix("backend.").rpartition(".")
        return key.startswith("backend.") and name in self.backends and \
            option in backend_class(name).Options.model_fields

    def all(self) -> set[str]:
        return self.core | {f"backend.{name}.{option}" for name in self.backends
                            for option in backend_class(name).Options.model_fields}


def known_keys(backend: str) -> set[str]:
    """Every dotted key a config layer may set (imports every backend's module; a check
    of given keys uses ``KnownKeys``)."""
    return KnownKeys(backend).all()


def check_keys(layer: Layer, keys: KnownKeys) -> None:
    source, values = layer
    for key in values:
        if key not in keys:
            close = difflib.get_close_matches(key, sorted(keys.all()), n=1, cutoff=0.6)
            raise ConfigError(
                f"{source}: unknown key '{key}'",
                hint=f"did you mean '{close[0]}'?" if close else KEYS_HINT,
            )


def read_toml(path: Path) -> dict[str, Any]:
    if path.is_dir():
        raise ConfigError(f"config file {path} is a directory",
                          hint="name a TOML file, e.g. --config my_settings.toml")
    if path.is_fifo():
        # The linter and the loader each read the file, and a pipe gives its bytes once
        # (the second open waits forever); stat() opens nothing. A device is capped below.
        raise ConfigError(f"config file {path} is not a regular file (a pipe)",
                          hint="save the settings to a file and name it, e.g. --config "
                          "my_settings.toml")
    try:
        data = read_limited(path, CONFIG_FILE_LIMIT, "config file")
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist",
                          hint="name an existing TOML file (keys as `suite config` prints "
                          "them; see docs/configuration.md), or drop --config") from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror or exc}") from None
    return parse_toml(decode_utf8(data, str(path)), str(path))


@dataclass(frozen=True)
class TableContext:
    benchmark: str
    scenario: Scenario
    benchmarks: tuple[str, ...]


def _sub_table(tables: Any, name: str, source: str, kind: str, choices: Iterable[str]) -> Any:
    if not isinstance(tables, Mapping):
        raise ConfigError(
            f"{source}: '{kind}' must be a table of tables, got {_toml_kind(tables)} "
            f"{tables!r}", hint=f"write one [{kind}.<name>] table per {kind[:-1]}")
    choices = list(choices)
    for key, value in tables.items():
        if key not in choices:
            close = difflib.get_close_matches(key, choices, n=1, cutoff=0.5)
            raise ConfigError(
                f"{source}: unknown {kind[:-1]} '{key}' in [{kind}.{key}]",
                hint=f"did you mean '{close[0]}'?" if close else f"known: {', '.join(choices)}",
            )
        if not isinstance(value, Mapping):
            raise ConfigError(
                f"{source}: [{kind}] {key} = {value!r}: a table is expected, "
                f"{_toml_kind(value)} given", hint=f"write its settings under [{kind}.{key}]")
    return tables.get(name)


def _toml_kind(value: Any) -> str:
    """What a TOML value is, in TOML's words (for 'a table expected' messages)."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "a date or time" if not isinstance(value, Mapping) else "a table"


def layers_from_table(
    table: Mapping[str, Any], source: str, ctx: TableContext, allow_scenarios: bool
) -> tuple[list[Layer], list[Layer]]:
    """Split a file's table into (normal layers, quick layers), most specific last."""
    rest = dict(table)
    quick, benches = rest.pop("quick", None), rest.pop("benchmarks", None)
    scens = rest.pop("scenarios", None) if allow_scenarios else None
    normal: list[Layer] = [(source, flatten(rest))]
    quicks: list[Layer] = []
    if quick is not None:
        if not isinstance(quick, Mapping):
            raise ConfigError(f"{source}: quick = {quick!r}: a table is expected, "
                              f"{_toml_kind(quick)} given",
                              hint="write --quick settings under [quick.<section>]")
        quicks.append((f"{source} [quick]", flatten(quick)))
    if benches is not None:
        sub = _sub_table(benches, ctx.benchmark, source, "benchmarks", ctx.benchmarks)
        if sub is not None:
            more, more_quick = layers_from_table(
                sub, f"{source} [benchmarks.{ctx.benchmark}]", ctx, allow_scenarios
            )
            normal += more
            quicks += more_quick
    if scens is not None:
        names = [s.value for s in Scenario]
        sub = _sub_table(scens, ctx.scenario.value, source, "scenarios", names)
        if sub is not None:
            more, more_quick = layers_from_table(
                sub, f"{source} [scenarios.{ctx.scenario.value}]", ctx, False
            )
            normal += more
            quicks += more_quick
    return normal, quicks


def parse_set(item: str) -> Layer:
    key, sep, text = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"--set '{item}': expected KEY=VALUE, e.g. loadgen.target_qps=2000")
    try:
        value = tomllib.loads(f"v = {text.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = text.strip()  # a bare word is a string
    except ValueError:  # int()'s digit limit, which tomllib lets through unwrapped
        raise ConfigError(f"--set {key}: an integer of more than {MAX_INT_DIGITS:,} digits",
                          hint=INT_HINT) from None
    check_value(value, f"--set {key}", "value")
    return (f"--set {key}", {key: value})
