"""The official system description JSON (``systems/<system>.json``).

``probe()`` reads what the machine can tell: the CPU model, processors (distinct
``physical id`` in ``/proc/cpuinfo``) and cores per processor (``cpu cores``), memory,
OS, accelerators via NVML (``pynvml`` and a driver), framework and LoadGen versions.
A probe that cannot answer leaves its fields empty and says why in ``PROBE_FAILED``
(field -> reason), never a made-up value: no NVML is not "0 accelerators", a CPU the
probe cannot read is not "1 processor". Only an NVML that answers 0 devices gives the
official CPU-only convention (the string ``"0"`` and ``"N/A"`` accelerator fields).
``number_of_nodes`` is never probed (one machine cannot see the others): the submitter
states it. ``describe()`` merges a user-written TOML for the human fields (submitter,
system name, status, cooling, ...) over the probe, fills every required key of the
round, and lists the meaningful fields still empty, with the probe's reason beside
those it could not fill.
"""

from __future__ import annotations

import platform
import tomllib
from pathlib import Path
from typing import Any

from suite.config.rules import SubmissionRules
from suite.errors import ConfigError, SuiteError
from suite.paths import CONFIG_FILE_LIMIT, read_limited
from suite.system import collect

#: The key of ``probe()``'s result that maps each field the probe could not fill to why.
PROBE_FAILED = "probe_failed"
_ACCELERATOR_FIELDS = ("accelerators_per_node", "accelerator_model_name",
                       "accelerator_memory_capacity", "accelerator_host_interconnect",
                       "accelerator_interconnect", "accelerator_memory_configuration")


class _NvmlUnanswered(SuiteError):
    """NVML could not say what accelerators there are (the fields stay for the submitter)."""


def _nvml() -> list[dict[str, Any]]:
    """Accelerators from NVML; ``_NvmlUnanswered`` saying why when NVML cannot answer."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        raise _NvmlUnanswered("not probed: pynvml is not installed") from None
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # pynvml's NVMLError: no library, no driver, ...
        raise _NvmlUnanswered(f"NVML did not start ({type(exc).__name__}: {exc})") from None
    try:
        devices = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle).total
            devices.append({"name": name.decode() if isinstance(name, bytes) else str(name),
                            "memory_bytes": int(memory)})
        return devices
    except Exception as exc:  # a device that does not answer: no count is known
        raise _NvmlUnanswered(f"NVML failed ({type(exc).__name__}: {exc})") from None
    finally:
        pynvml.nvmlShutdown()


def cpu_topology(cpuinfo: str) -> tuple[str, str, dict[str, str]]:
    """(processors, cores per processor, failures) from ``/proc/cpuinfo``'s text: the
    distinct ``physical id`` values and the ``cpu cores`` of each."""
    packages: set[str] = set()
    cores: set[str] = set()
    for line in cpuinfo.splitlines():
        key, _, value = (part.strip() for part in line.partition(":"))
        if key == "physical id":
            packages.add(value)
        elif key == "cpu cores":
            cores.add(value)
    failed: dict[str, str] = {}
    processors = str(len(packages)) if packages else ""
    if not packages:
        failed["host_processors_per_node"] = "/proc/cpuinfo lists no physical id"
    core_count = cores.pop() if len(cores) == 1 and next(iter(cores)).isdigit() else ""
    if not core_count:
        failed["host_processor_core_count"] = ("/proc/cpuinfo lists no cpu cores" if not cores
                                               else f"/proc/cpuinfo lists cpu cores "
                                               f"{sorted(cores)}: processors differ")
    return processors, core_count, failed


def probe() -> dict[str, Any]:
    """The machine's facts, in the official field names; ``PROBE_FAILED`` maps each
    field left empty to why."""
    facts = collect()
    packages = facts.get("packages", {})
    memory = facts.get("memory_bytes")
    frameworks = [f"{name} {packages[name]}" for name in ("onnxruntime", "torch", "tensorrt")
                  if name in packages]
    try:
        processors, core_count, failed = cpu_topology(
            Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace"))
    except OSError as exc:
        processors = core_count = ""
        failed = dict.fromkeys(("host_processors_per_node", "host_processor_core_count"),
                               f"/proc/cpuinfo is unreadable ({exc})")
    model = str(facts.get("cpu_model") or "")
    if model in ("", "unknown"):  # suite.system's word for "not found"
        model = ""
        failed["host_processor_model_name"] = "no model name in /proc/cpuinfo"
    if not memory:
        failed["host_memory_capacity"] = "no MemTotal in /proc/meminfo"
    failed["number_of_nodes"] = "not probed: one machine cannot count the nodes"
    probed: dict[str, Any] = {
        "number_of_nodes": "",
        "host_processor_model_name": model,
        "host_processors_per_node": processors,
        "host_processor_core_count": core_count,
        "host_memory_capacity": f"{memory / 2**30:.0f} GB" if memory else "",
        "operating_system": platform.platform(),
        "framework": ", ".join(frameworks),
        "other_software_stack": f"Python {facts.get('python')}, mlcommons-loadgen "
                                f"{packages.get('mlcommons-loadgen', '?')}",
    }
    try:
        gpus = _nvml()
    except _NvmlUnanswered as exc:
        probed |= dict.fromkeys(_ACCELERATOR_FIELDS, "")
        failed |= dict.fromkeys(_ACCELERATOR_FIELDS, str(exc))
    else:
        if gpus:
            probed |= {
                "accelerators_per_node": str(len(gpus)),
                "accelerator_model_name": gpus[0]["name"],
                "accelerator_memory_capacity": f"{gpus[0]['memory_bytes'] / 2**30:.0f} GB",
            }
        else:  # NVML answered: no device. The official CPU-only convention.
            probed |= dict.fromkeys(_ACCELERATOR_FIELDS, "N/A")
            probed["accelerators_per_node"] = "0"
    probed[PROBE_FAILED] = failed
    return probed


def read_user_toml(path: Path | None) -> dict[str, Any]:
    """The human fields: a flat TOML table (or under ``[system]``)."""
    if path is None:
        return {}
    try:
        # capped like every config file (/dev/zero or a wrong path ends in one line)
        data = tomllib.loads(read_limited(path, CONFIG_FILE_LIMIT, "system description file")
                             .decode("utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"system description file {path} does not exist") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})",
                          hint="save the file as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"system description file {path} cannot be read: "
                          f"{exc.strerror or exc}") from None
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
    failed: dict[str, str] = probed.get(PROBE_FAILED, {})
    merged = {key: "" for key in sub.system_required_fields}
    merged |= probed | user | {k: v for k, v in identity.items() if v}
    ordered = {key: merged[key] for key in sub.system_required_fields}
    ordered |= {k: v for k, v in merged.items() if k not in ordered and k in known}
    # a field the probe could not fill says why, so the submitter knows it is theirs
    empty = [f"{k} ({failed[k]})" if k in failed else k
             for k in sub.system_meaningful_fields if not ordered.get(k)]
    return ordered, empty, unknown
