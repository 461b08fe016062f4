"""Resolve a run's configuration from its layers, recording where every value came from.

Layers, lowest to highest precedence (each later layer overrides earlier ones key by key):

1. built-in defaults of the models below;
2. ``run_rules/<round>.toml``: what the round fixes (overriding any of these makes the
   run non-submittable);
3. ``scenarios/<scenario>.toml``: its top-level tables, then the backend's own defaults
   for the scenario (``scenario_defaults``, recorded as "default for <backend>"), then
   the file's ``[benchmarks.<name>]``; then ``scenarios/systems/<system>/<backend>.toml``
   if ``suite tune`` wrote one for this system
   (``[benchmarks.<name>.scenarios.<scenario>]``);
4. with ``--quick``: the ``[quick]`` tables of the scenario file (durations in seconds);
5. the user config file (``--config``): top level, ``[benchmarks.<name>]``,
   ``[scenarios.<scenario>]``;
   with ``--stand-in``: the card's stand-in as dataset and model, under the
   ``data.cache_dir`` the layers set (the state cache if none);
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from suite.backends import backend_class, parse_options
from suite.config.layers import (
    KEYS_HINT,
    KnownKeys,
    Layer,
    TableContext,
    check_keys,
    layers_from_table,
    parse_set,
    read_toml,
)
from suite.config.model import MAX_BATCH_SIZE as MAX_BATCH_SIZE
from suite.config.model import MAX_QPS as MAX_QPS
from suite.config.model import DataConfig as DataConfig
from suite.config.model import LoadGenConfig as LoadGenConfig
from suite.config.model import RunConfig as RunConfig
from suite.config.model import SutConfig as SutConfig
from suite.config.model import _Section
from suite.config.rules import (
    DEFAULT_ROUND,
    RuleSet,
    available_rounds,
    load_rules,
    parsed_rules_file,
)
from suite.errors import ConfigError
from suite.paths import Paths
from suite.scenarios import Mode, Scenario

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
    #: Run the card's stand-in (``--stand-in``): its task writes a small model and dataset
    #: into the cache once; quick settings; never submittable.
    stand_in: bool = False


def default_system_name() -> str:
    """This machine's name as a file-name-safe slug."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", platform.node()).strip("-.")
    return name or "this-system"


def tuned_settings_path(paths: Paths, system: str, backend: str) -> Path:
    """Where ``suite tune`` writes, and ``suite run`` reads, a system's tuned settings."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", backend)
    return paths.systems / system / f"{safe}.toml"


#: The samples a stand-in holds (``suite.harness.kinds.task`` writes it with as many).
STAND_IN_SAMPLES = 48

#: Round values that are minimums: the checker accepts more (``>=``, P-8 and P-9).
_MINIMUMS = ("loadgen.min_duration_ms", "loadgen.min_query_count")


def _allowed(key: str, value: Any, fixed: Any, source: str) -> bool:
    """A value that differs from the round's yet overrides nothing of the user's doing:
    a minimum raised, or a scenario file's ``[quick]`` table (``--quick`` is the reason)."""
    return (key in _MINIMUMS and value > fixed) or source.endswith(" [quick]")


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


def _validate(section: type[_Section], prefix: str, values: dict[str, Any],
              provenance: dict[str, str]) -> Any:
    sub = {k[len(prefix) + 1:]: v for k, v in values.items() if k.startswith(prefix + ".")}
    try:
        return section.model_validate(sub)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = f"{prefix}." + ".".join(str(part) for part in first["loc"])
        got = sub.get(key.split(".", 1)[1], "<missing>")
        field = key.split(".", 1)[1]
        hint = (f"{key}: {section.model_fields[field].description or KEYS_HINT}"
                if field in section.model_fields else "")
        if first["type"].startswith("bool") and isinstance(got, str):
            # A bare word is read as a string: TOML's booleans are lower case.
            hint = f"write {key}=true or {key}=false (TOML booleans are lower case); {hint}"
        raise ConfigError(
            f"{provenance.get(key, 'config')}: {key} = {got!r}: {first['msg']}", hint=hint,
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


def every_round_benchmark(paths: Paths) -> tuple[str, ...]:
    """The benchmark names of every round's rules file (``run_rules/v*.toml``)."""
    names: dict[str, None] = {}
    for round_name in available_rounds(paths):
        if round_name.startswith("v"):  # only the names: the run's own round is validated
            path = paths.run_rules / f"{round_name}.toml"
            # parsed once per version of the file (``suite tune`` resolves a config per
            # probe), and shared with ``load_rules``
            data = parsed_rules_file(str(path), path.stat().st_mtime_ns)
            names.update(dict.fromkeys(data.get("benchmarks", {})))
    return tuple(names)


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
    # The scenario files serve every round: a benchmark of any round's rules is known there
    # (llama2-70b-99 is v6.0's only); a name in none of them is a typo.
    ctx = TableContext(request.benchmark, scenario, every_round_benchmark(paths))
    keys = KnownKeys(request.backend)

    rules_source = f"run_rules/{rules.round}.toml"
    layers: list[Layer] = [(rules_source, run_rules.fixed_settings)]
    scenario_file = paths.scenarios / f"{scenario.value}.toml"
    normal, quick = layers_from_table(
        read_toml(scenario_file), f"scenarios/{scenario.value}.toml", ctx, False
    )
    # The backend's own defaults sit above the scenario file's top-level tables (what
    # every backend gets) and below its [benchmarks.<name>] tables and everything after.
    layers += normal[:1] + _backend_defaults(request.backend, scenario) + normal[1:]
    system = request.system or os.environ.get("SUITE_SYSTEM") or default_system_name()
    tuned_file = tuned_settings_path(paths, system, request.backend)
    if request.use_tuned and tuned_file.is_file():
        normal, _ = layers_from_table(
            read_toml(tuned_file), paths.label(tuned_file), ctx, True)
        layers += normal
    if request.quick or request.stand_in:
        layers += quick
    if request.config_file is not None:
        normal, _ = layers_from_table(
            read_toml(request.config_file), str(request.config_file), ctx, True
        )
        layers += normal
    later = [parse_set(item) for item in request.sets]
    later += [(flag, {key: value}) for key, (value, flag) in request.flags.items()]
    if request.stand_in:
        layers.append(_stand_in_layer(request, _cache_dir([*layers, *later], paths), scenario))
    layers += later

    values: dict[str, Any] = {}
    provenance: dict[str, str] = {}
    for model, prefix in ((LoadGenConfig, "loadgen"), (SutConfig, "sut"), (DataConfig, "data")):
        for name, info in model.model_fields.items():
            values[f"{prefix}.{name}"] = info.default
            provenance[f"{prefix}.{name}"] = "default"
    for layer in layers:
        check_keys(layer, keys)
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
        if values[key] != fixed[key] and not _allowed(key, values[key], fixed[key],
                                                      provenance[key])
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
        stand_in=request.stand_in,
        system=system,
        rules=run_rules,
    )
    return config, rules


def _backend_defaults(backend: str, scenario: Scenario) -> list[Layer]:
    """The backend's ``scenario_defaults`` for ``scenario`` as a layer (none: [])."""
    defaults = backend_class(backend).scenario_defaults.get(scenario.value)
    return [(f"default for {backend}", dict(defaults))] if defaults else []


def _cache_dir(layers: list[Layer], paths: Paths) -> Path:
    """The run's ``data.cache_dir`` as the layers set it (the last one wins), before they
    are merged: the stand-in's directory lies in it. Unset: the state cache."""
    chosen = next((value for _, layer in reversed(layers)
                   if isinstance(value := layer.get("data.cache_dir"), str) and value), "")
    return Path(chosen).expanduser().resolve() if chosen else paths.cache


def _stand_in_layer(request: ConfigRequest, cache: Path, scenario: Scenario) -> Layer:
    """``--stand-in``: the card's stand-in (``paths.stand_in_dir`` in the run's cache
    directory) as the run's dataset and model (the file the backend loads), and settings
    that keep every scenario short whatever the machine's speed: the stand-in's samples,
    no minimum duration, a fixed query count."""
    from suite.config.model import STAND_IN_SEED
    from suite.models import card_name
    from suite.paths import stand_in_dir

    root = stand_in_dir(cache, card_name(request.benchmark), STAND_IN_SEED)
    model = getattr(backend_class(request.backend), "stand_in_model", "model.onnx")
    settings: dict[str, Any] = {
        "data.dataset_dir": str(root / "dataset"), "data.model_path": str(root / model),
        "loadgen.performance_sample_count": STAND_IN_SAMPLES, "loadgen.min_duration_ms": 0,
        # LoadGen's early stopping needs >= 662 MultiStream queries and 459 Server ones;
        # SingleStream's is met at 64 (VALID on bert's and 3d-unet's stand-ins); Offline's
        # one query holds 128 samples: a slow stand-in (3d-unet) stays within seconds
        "loadgen.min_query_count": {Scenario.OFFLINE: 128, Scenario.MULTI_STREAM: 700,
                                    Scenario.SINGLE_STREAM: 64}.get(scenario, 512)}
    return "--stand-in", settings
