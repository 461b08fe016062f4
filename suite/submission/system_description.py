"""The official system description JSON (``systems/<system>.json``).

``probe()`` reads what the machine can tell (CPU, cores, memory, OS, accelerators via
NVML when ``pynvml`` and a driver are present, framework and LoadGen versions);
``describe()`` merges a user-written TOML for the human fields (submitter, system
name, status, cooling, ...) over it, fills every required key of the round, and says
which meaningful fields are still empty. CPU-only systems get the string ``"0"``
accelerators and ``"N/A"`` accelerator fields, as the official snapshot does.
"""

from __future__ import annotations

import platform
import tomllib
from pathlib import Path
from typing import Any

from suite.config.rules import SubmissionRules
from suite.errors import ConfigError
from suite.system import collect


def _nvml() -> list[dict[str, Any]]:
    """Accelerators from NVML, or ``[]`` when pynvml or the driver is absent."""
    try:
        import pynvml  # type: ignore[import-not-found]

        pynvml.nvmlInit()
    except Exception:
        return []
    try:
        devices = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle).total
            devices.append({"name": name.decode() if isinstance(name, bytes) else str(name),
                            "memory_bytes": int(memory)})
        return devices
    finally:
        pynvml.nvmlShutdown()


def probe() -> dict[str, Any]:
    """The machine's facts, in the official field names."""
    facts = collect()
    gpus = _nvml()
    packages = facts.get("packages", {})
    memory = facts.get("memory_bytes")
    frameworks = [f"{name} {packages[name]}" for name in ("onnxruntime", "torch", "tensorrt")
                  if name in packages]
    probed: dict[str, Any] = {
        "number_of_nodes": "1",
        "host_processor_model_name": facts.get("cpu_model", ""),
        "host_processors_per_node": "1",
        "host_processor_core_count": str(facts.get("cpu_count") or ""),
        "host_memory_capacity": f"{memory / 2**30:.0f} GB" if memory else "",
        "operating_system": platform.platform(),
        "framework": ", ".join(frameworks),
        "other_software_stack": f"Python {facts.get('python')}, mlcommons-loadgen "
                                f"{packages.get('mlcommons-loadgen', '?')}",
    }
    if gpus:
        probed |= {
            "accelerators_per_node": str(len(gpus)),
            "accelerator_model_name": gpus[0]["name"],
            "accelerator_memory_capacity": f"{gpus[0]['memory_bytes'] / 2**30:.0f} GB",
        }
    else:
        probed |= {key: "N/A" for key in (
            "accelerator_model_name", "accelerator_memory_capacity",
            "accelerator_host_interconnect", "accelerator_interconnect",
            "accelerator_memory_configuration")}
        probed["accelerators_per_node"] = "0"
    return probed


def read_user_toml(path: Path | None) -> dict[str, Any]:
    """The human fields: a flat TOML table (or under ``[system]``)."""
    if path is None:
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"system description file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    table = data.get("system", data)
    return {str(k): v if isinstance(v, str) else str(v) for k, v in table.items()}


def describe(sub: SubmissionRules, user: dict[str, Any], probed: dict[str, Any],
             **identity: str) -> tuple[dict[str, Any], list[str], list[str]]:
    """``(system JSON, meaningful fields still empty, unknown user keys)``.

    Precedence: ``identity`` (command-line flags) > user TOML > probe > empty.
    """
    known = set(sub.system_required_fields) | set(sub.network_fields) | {"is_network"}
    unknown = sorted(k for k in user if k not in known)
    merged = {key: "" for key in sub.system_required_fields}
    merged |= probed | user | {k: v for k, v in identity.items() if v}
    ordered = {key: merged[key] for key in sub.system_required_fields}
    ordered |= {k: v for k, v in merged.items() if k not in ordered and k in known}
    empty = [k for k in sub.system_meaningful_fields if not ordered.get(k)]
    return ordered, empty, unknown
