"""Resolve a run's configuration from its layers, recording where every value came from.

Layers, lowest to highest precedence (each later layer overrides earlier ones key by key):

1. built-in defaults of the models below;
2. ``run_rules/<round>.toml``: what the round fixes (overriding any of these makes the
   run non-submittable);
3. ``scenarios/<scenario>.toml``: its top-level tables, then ``[benchmarks.<name>]``;
   then ``scenarios/systems/<system>/<backend>.toml`` if ``suite tune`` wrote one for
   this system (``[benchmarks.<name>.scenarios.<scenario>]``);
4. with ``--quick``: the ``[quick]`` tables of the scenario file (durations in seconds);
5. the user config file (``--config``): top level, ``[benchmarks.<name>]``,
   ``[scenarios.<scenario>]``;
6. command-line flags (``--set key=value`` and the named flags).

``[data]`` (where a user-supplied dataset, model and preprocessing cache live) has one
more source: when no layer sets a key, the benchmark's environment variable (e.g.
``SUITE_IMAGENET_DIR``) fills it, recorded as ``env SUITE_IMAGENET_DIR``. This module
is the only reader of those variables.

Unknown keys, wrong types and unknown names fail here, before any run, naming the key
and the file it came from and suggesting the closest valid name.
"""

from __future__ import annotations

import difflib
import os
import platform
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from suite.backends import BUILTIN, backend_class, parse_options
from suite.config.model import MAX_BATCH_SIZE as MAX_BATCH_SIZE
from suite.config.model import MAX_QPS as MAX_QPS
from suite.config.model import DataConfig as DataConfig
from suite.config.model import LoadGenConfig as LoadGenConfig
from suite.config.model import RunConfig as RunConfig
from suite.config.model import SutConfig as SutConfig
from suite.config.model import _Section
from suite.config.rules import DEFAULT_ROUND, RuleSet, load_rules
from suite.errors import ConfigError
from suite.paths import Paths
from suite.scenarios import Mode, Scenario

Layer = tuple[str, dict[str, Any]]


#: Environment fallbacks of ``[data]`` keys, per benchmark (used only when no layer
#: sets the key).
DATA_ENV: dict[str, dict[str, str]] = {
    "resnet50": {"data.dataset_dir": "SUITE_IMAGENET_DIR",
                 "data.model_path": "SUITE_RESNET50_ONNX"},
}


@dataclass
class ConfigRequest:
    """What the user asked for: names, files and overrides (CLI or library)."""

    benchmark: str = "digits"
    scenario: str = "offline"
    backend: str = "onnxruntime"
    mode: str = "performance"
    round: str = DEFAULT_ROUND
    quick: bool = False
    config_file: Path | None = None
    #: ``key=value`` strings from ``--set`` (value parsed as TOML, else a string).
    sets: list[str] = field(default_factory=list)
    #: Typed overrides from named flags: dotted key -> (value, flag name).
    flags: dict[str, tuple[Any, str]] = field(default_factory=dict)
    runs_dir: Path | None = None
    #: A compliance test to run (``TEST01``, ``TEST04``) and its reference run directory.
    compliance: str | None = None
    reference: Path | None = None
    #: The system whose tuned settings apply (default: ``$SUITE_SYSTEM``, else this host).
    system: str | None = None
    #: Apply the system's tuned settings (``suite tune`` itself starts without them).
    use_tuned: bool = True
    #: Run even when the pre-flight predicts an implausibly long test
    #: (``preflight.MAX_PREDICTED_S``); the linter then warns instead of refusing.
    force: bool = False


def default_system_name() -> str:
    """This machine's name as a file-name-safe slug."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", platform.node()).strip("-.")
    return name or "this-system"


def tuned_settings_path(paths: Paths, system: str, backend: str) -> Path:
    """Where ``suite tune`` writes, and ``suite run`` reads, a system's tuned settings."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", backend)
    return paths.systems / system / f"{safe}.toml"


def _choice(value: str, enum: type[Scenario] | type[Mode], what: str) -> Any:
    try:
        return enum(value.lower())
    except ValueError:
        names = [member.value for member in enum]
        close = difflib.get_close_matches(value.lower(), names, n=1, cutoff=0.5)
        raise ConfigError(
            f"unknown {what} '{value}' (choose one of: {', '.join(names)})",
            hint=f"did you mean '{close[0]}'?" if close else "",
        ) from None


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


def _check_keys(layer: Layer, keys: KnownKeys) -> None:
    source, values = layer
    for key in values:
        if key not in keys:
            close = difflib.get_close_matches(key, sorted(keys.all()), n=1, cutoff=0.6)
            raise ConfigError(
                f"{source}: unknown key '{key}'",
                hint=f"did you mean '{close[0]}'?" if close else "see the README's config keys",
            )


def _read_toml(path: Path) -> dict[str, Any]:
    if path.is_dir():
        raise ConfigError(f"config file {path} is a directory",
                          hint="name a TOML file, e.g. --config my_settings.toml")
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})",
                          hint="TOML files are UTF-8; re-save the file as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


@dataclass(frozen=True)
class _Context:
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


def _layers_from_table(
    table: Mapping[str, Any], source: str, ctx: _Context, allow_scenarios: bool
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
            more, more_quick = _layers_from_table(
                sub, f"{source} [benchmarks.{ctx.benchmark}]", ctx, allow_scenarios
            )
            normal += more
            quicks += more_quick
    if scens is not None:
        names = [s.value for s in Scenario]
        sub = _sub_table(scens, ctx.scenario.value, source, "scenarios", names)
        if sub is not None:
            more, more_quick = _layers_from_table(
                sub, f"{source} [scenarios.{ctx.scenario.value}]", ctx, False
            )
            normal += more
            quicks += more_quick
    return normal, quicks


def _parse_set(item: str) -> Layer:
    key, sep, text = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"--set '{item}': expected KEY=VALUE, e.g. loadgen.target_qps=2000")
    try:
        value = tomllib.loads(f"v = {text.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = text.strip()  # a bare word is a string
    return (f"--set {key}", {key: value})


def _validate(section: type[_Section], prefix: str, values: dict[str, Any],
              provenance: dict[str, str]) -> Any:
    sub = {k[len(prefix) + 1:]: v for k, v in values.items() if k.startswith(prefix + ".")}
    try:
        return section.model_validate(sub)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = f"{prefix}." + ".".join(str(part) for part in first["loc"])
        got = sub.get(key.split(".", 1)[1], "<missing>")
        raise ConfigError(
            f"{provenance.get(key, 'config')}: {key} = {got!r}: {first['msg']}",
            hint=f"{key}: {section.model_fields[key.split('.', 1)[1]].description or 'see README'}"
            if key.split(".", 1)[1] in section.model_fields else "",
        ) from None


def _apply_env(benchmark: str, values: dict[str, Any], provenance: dict[str, str]) -> None:
    """Fill ``[data]`` keys no layer set from the benchmark's environment variables."""
    for key, var in DATA_ENV.get(benchmark, {}).items():
        env = os.environ.get(var, "")
        if provenance.get(key) == "default" and env:
            values[key] = env
            provenance[key] = f"env {var}"


def _absolute_paths(data: DataConfig, paths: Paths) -> DataConfig:
    def absolute(text: str) -> str:
        return str(Path(text).expanduser().resolve()) if text else ""

    return data.model_copy(update={
        "dataset_dir": absolute(data.dataset_dir),
        "model_path": absolute(data.model_path),
        "cache_dir": absolute(data.cache_dir) or str(paths.cache),
    })


def load_config(request: ConfigRequest, paths: Paths) -> tuple[RunConfig, RuleSet]:
    """Resolve ``request`` into a ``RunConfig`` (and the round's ``RuleSet``).

    Example::

        config, rules = load_config(ConfigRequest(scenario="server", quick=True), find_paths())
        config.provenance["loadgen.target_qps"]  # 'scenarios/server.toml [benchmarks.digits]'
    """
    scenario = _choice(request.scenario, Scenario, "scenario")
    mode = _choice(request.mode, Mode, "mode")
    rules = load_rules(paths, request.round)
    # Resolved once, here: an unknown benchmark fails with a suggestion, and every later
    # stage reads the benchmark's and scenario's rules from the config.
    run_rules = rules.resolve(request.benchmark, scenario)
    backend_class(request.backend)  # unknown backend fails here, with a suggestion
    ctx = _Context(request.benchmark, scenario, tuple(rules.benchmarks))
    keys = KnownKeys(request.backend)

    rules_source = f"run_rules/{rules.round}.toml"
    layers: list[Layer] = [(rules_source, run_rules.fixed_settings)]
    scenario_file = paths.scenarios / f"{scenario.value}.toml"
    normal, quick = _layers_from_table(
        _read_toml(scenario_file), f"scenarios/{scenario.value}.toml", ctx, False
    )
    layers += normal
    system = request.system or os.environ.get("SUITE_SYSTEM") or default_system_name()
    tuned_file = tuned_settings_path(paths, system, request.backend)
    if request.use_tuned and tuned_file.is_file():
        normal, _ = _layers_from_table(
            _read_toml(tuned_file), paths.label(tuned_file), ctx, True)
        layers += normal
    if request.quick:
        layers += quick
    if request.config_file is not None:
        normal, _ = _layers_from_table(
            _read_toml(request.config_file), str(request.config_file), ctx, True
        )
        layers += normal
    layers += [_parse_set(item) for item in request.sets]
    layers += [(flag, {key: value}) for key, (value, flag) in request.flags.items()]

    values: dict[str, Any] = {}
    provenance: dict[str, str] = {}
    for model, prefix in ((LoadGenConfig, "loadgen"), (SutConfig, "sut"), (DataConfig, "data")):
        for name, info in model.model_fields.items():
            values[f"{prefix}.{name}"] = info.default
            provenance[f"{prefix}.{name}"] = "default"
    for layer in layers:
        _check_keys(layer, keys)
        for key, value in layer[1].items():
            values[key] = value
            provenance[key] = layer[0]

    _apply_env(request.benchmark, values, provenance)

    loadgen = _validate(LoadGenConfig, "loadgen", values, provenance)
    sut = _validate(SutConfig, "sut", values, provenance)
    data = _absolute_paths(_validate(DataConfig, "data", values, provenance), paths)
    option_prefix = f"backend.{request.backend}."
    raw_options = {k[len(option_prefix):]: v for k, v in values.items()
                   if k.startswith(option_prefix)}
    options = parse_options(request.backend, raw_options, provenance.get(
        next(iter(k for k in values if k.startswith(option_prefix)), ""), "config"))

    fixed = run_rules.fixed_settings
    overridden = {
        key: f"{key} = {values[key]} from {provenance[key]} overrides the round's {fixed[key]}"
        for key in fixed
        if values[key] != fixed[key]
    }
    config = RunConfig(
        benchmark=request.benchmark,
        scenario=scenario,
        mode=mode,
        backend=request.backend,
        round=rules.round,
        quick=request.quick,
        runs_dir=(request.runs_dir or paths.runs).resolve(),
        loadgen=loadgen,
        sut=sut,
        data=data,
        backend_options=options.model_dump(),
        provenance={k: v for k, v in provenance.items() if not k.startswith("backend.")}
        | {k: v for k, v in provenance.items() if k.startswith(option_prefix)},
        overridden_rules=overridden,
        compliance=request.compliance.upper() if request.compliance else None,
        system=system,
        rules=run_rules,
    )
    return config, rules
