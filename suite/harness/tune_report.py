"""What ``suite tune`` found and how it says so: the ``TuneReport`` (choices with their
evidence, the Server search, a verdict when nothing was confirmed), the settings file
``suite run`` picks up, the scenario-file lines it proposes, and its progress lines.

Every figure in these texts is a ``ProbeResult``'s, read from the probe's LoadGen log.
Progress lines are plain text; the CLI fits them to its width. A run directory is named
by its last component, under the probe directory the report names once, so that no line
carries a long path.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from suite.config.loader import tuned_settings_path
from suite.harness.tune_search import Probe, ProbeResult, Search
from suite.paths import Paths

__all__ = ["Choice", "TuneReport", "probe_line", "proposal_lines", "unconfirmed_verdict",
           "write_settings"]


@dataclass
class Choice:
    """A tuned value with the evidence behind it (``run_dir``: the run that shows it)."""

    key: str
    value: float | int | str
    why: str
    run_dir: str = ""


@dataclass
class TuneReport:
    system: str
    backend: str
    benchmark: str
    choices: dict[str, list[Choice]] = field(default_factory=dict)
    probes_run: int = 0
    probes_cached: int = 0
    settings_file: Path | None = None
    #: Where the probes' run directories are.
    probes_dir: Path | None = None
    #: The Server search, when Server was tuned.
    server: Search | None = None
    #: Lines for ``scenarios/<scenario>.toml`` that make the found setup every system's.
    proposal: list[str] = field(default_factory=list)
    #: Why nothing was claimed for Server (no confirming run was VALID); empty otherwise.
    unconfirmed: list[str] = field(default_factory=list)

    @property
    def confirmed(self) -> bool:
        """Whether every tuned scenario has a VALID record behind its choices."""
        return not self.unconfirmed


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f} ms" if value >= 1 else f"{value:.2f} ms"


def probe_line(scenario: str, asked: str, result: ProbeResult) -> str:
    """One probe as a line: what was asked, LoadGen's verdict and figures, the run."""
    verdict = "VALID" if result.valid else "INVALID"
    if result.why:
        verdict += f" ({result.why})"
    figures = []
    if result.metric is not None:
        unit = "ms" if scenario in ("singlestream", "multistream") else "/s"
        figures.append(_ms(result.metric) if unit == "ms" else f"{result.metric:,.0f}/s")
    if scenario == "server" and result.p99_ms is not None:
        figures.append(f"p99 {_ms(result.p99_ms)}")
    cached = ", cached" if result.cached else ""
    return (f"  {scenario} {asked}: {verdict}, {', '.join(figures) or 'no figures'}"
            f"{cached} [{Path(result.run_dir).name}]")


def proposal_lines(benchmark: str, scenario: str, sets: dict[str, Any]) -> list[str]:
    """The ``[benchmarks.<name>.sut]`` lines of a scenario file holding ``sets``'s
    ``sut.*`` keys (for every system; the tuned file already holds them for this one)."""
    sut = {k.split(".", 1)[1]: v for k, v in sets.items() if k.startswith("sut.")}
    if not sut:
        return []
    name = f'"{benchmark}"' if "." in benchmark else benchmark
    return [f"# scenarios/{scenario}.toml", f"[benchmarks.{name}.sut]",
            *(f"{key} = {value!r}".replace("'", '"') for key, value in sut.items())]


def _probe_ref(probe: Probe) -> str:
    got = probe.result
    figures = f"{got.metric:,.0f}/s" if got.metric is not None else "no rate"
    if got.p99_ms is not None:
        figures += f", p99 {_ms(got.p99_ms)}"
    return (f"  {probe.rate:,.0f} QPS, {probe.setup.label()}: {figures} "
            f"[{Path(got.run_dir).name}]")


def unconfirmed_verdict(search: Search, probes_dir: Path | None) -> list[str]:
    """The verdict when no confirming run was VALID: the VALID probes and the confirming
    runs (or, with no VALID probe, the lowest rate probed), each with LoadGen's figures
    and its run directory."""
    where = f" (run directories under {probes_dir})" if probes_dir else ""
    if not search.valid:
        lowest = min(search.probes, key=lambda p: p.rate, default=None)
        return [f"Server: no probe was VALID, so no target_qps is claimed{where}.",
                *(["the lowest rate probed:", _probe_ref(lowest)
                   + (f" ({lowest.result.why})" if lowest.result.why else "")]
                  if lowest else []),
                "lower --batch-sizes, or check the backend's latency against the bound"]
    lines = [f"Server: no confirming run was VALID, so no target_qps is claimed{where}.",
             "VALID probes (short runs; LoadGen's figures):"]
    lines += [_probe_ref(p) for p in search.valid[:5]]
    lines.append("confirming runs, all INVALID:")
    lines += [_probe_ref(p) + (f" ({p.result.why})" if p.result.why else "")
              for p in search.confirming]
    lines.append("rerun `suite tune --fresh` on a quieter machine (without --fresh it "
                 "reuses these runs), or run at a VALID probe's rate with --set "
                 "loadgen.target_qps=<rate>")
    return lines


def write_settings(paths: Paths, report: TuneReport) -> Path:
    """Write ``report``'s choices where ``suite run`` picks them up (a previous file is kept
    as a dated ``.bak``: nothing is silently overwritten)."""
    path = tuned_settings_path(paths, report.system, report.backend)
    lines = [f"# Settings `suite tune` found for {report.benchmark} on {report.backend}, "
             f"system '{report.system}'.", "# `suite run` applies them after "
             "scenarios/<scenario>.toml; each value says where it came from.", ""]
    existing = path.read_text(encoding="utf-8") if path.is_file() else ""
    for scenario, choices in report.choices.items():
        sections: dict[str, list[Choice]] = {}
        for choice in choices:
            sections.setdefault(choice.key.split(".")[0], []).append(choice)
        for section, items in sections.items():
            lines.append(f"[benchmarks.{report.benchmark}.scenarios.{scenario}.{section}]")
            for item in items:
                lines.append(f"# {item.why}" + (f" ({item.run_dir})" if item.run_dir else ""))
                lines.append(f"{item.key.split('.', 1)[1]} = {item.value!r}")
            lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    if existing:
        path.with_suffix(f".toml.{time.strftime('%Y%m%dT%H%M%S')}.bak").write_text(existing)
    path.write_text("\n".join(lines), encoding="utf-8")
    report.settings_file = path
    return path
