"""The PNG figures of ``suite report --html``, as ``data:`` URIs.

Each function draws what it is handed and computes no figure of its own: percentiles,
bounds and per-query latencies come from LoadGen's records (``html`` reads them).
matplotlib is imported on first use, with the file-only Agg backend (no display, no
font cache surprises from an interactive backend).
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: LoadGen's percentile records (``result_<p>_percentile_latency_ns``, keyed as
#: ``PerformanceSummary.latency_ns`` keys them) and the fraction each stands for.
PERCENTILES = {f"{p}_percentile": float(p) / 100
               for p in ("50.00", "90.00", "95.00", "97.00", "99.00", "99.90")}


def _label(key: str) -> str:
    return f"p{float(key.removesuffix('_percentile')):g}"


@dataclass(frozen=True)
class SweepPoint:
    """One Server tune probe: the rate it asked for, its p99 and LoadGen's verdict."""

    target_qps: float
    p99_ms: float
    valid: bool
    setup: str


def _figure(width: float = 7.0, height: float = 3.6) -> tuple[Figure, Axes]:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    # A bare Figure (not pyplot): nothing global to close, safe to build from any thread.
    figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
    return figure, figure.add_subplot()


def _data_uri(figure: Figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _bound(axes: Axes, bound_ms: float | None, vertical: bool = True) -> None:
    if bound_ms is None:
        return
    line = axes.axvline if vertical else axes.axhline
    line(bound_ms, color="tab:red", linestyle="--", linewidth=1.2,
         label=f"latency bound {bound_ms:g} ms")


def latency_cdf(latency_ms: dict[str, float], bound_ms: float | None,
                per_query_ms: npt.NDArray[np.float64] | None = None,
                title: str = "") -> str:
    """The CDF through LoadGen's percentile records (min, p50 ... p99.9, max), the
    empirical CDF of the per-query latencies when there are any, and the bound;
    ``title`` names a latency other than the whole query's (TTFT, TPOT)."""
    figure, axes = _figure()
    if title:
        axes.set_title(title, fontsize=10)
    points = [(latency_ms["min"], 0.0)] if "min" in latency_ms else []
    points += [(latency_ms[p], q) for p, q in PERCENTILES.items() if p in latency_ms]
    if "max" in latency_ms:
        points.append((latency_ms["max"], 1.0))
    if per_query_ms is not None and per_query_ms.size:
        ordered = np.sort(per_query_ms)
        axes.step(ordered, np.arange(1, ordered.size + 1) / ordered.size, where="post",
                  color="tab:gray", linewidth=1, label=f"per query ({ordered.size:,}, trace)")
    if points:
        xs, ys = zip(*points, strict=True)
        axes.plot(xs, ys, marker="o", color="tab:blue", label="LoadGen percentiles")
        for p, q in PERCENTILES.items():
            if p in latency_ms:
                axes.annotate(_label(p), (latency_ms[p], q), textcoords="offset points",
                              xytext=(4, -10), fontsize=8)
    if "mean" in latency_ms:
        axes.axvline(latency_ms["mean"], color="tab:green", linewidth=1,
                     label=f"mean {latency_ms['mean']:.4g} ms")
    _bound(axes, bound_ms)
    axes.set_xscale("log")  # latency tails span decades
    axes.set_xlabel(f"{title or 'latency'} (ms, log scale)")
    axes.set_ylabel("fraction of queries")
    axes.set_ylim(0, 1.02)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="lower right")
    return _data_uri(figure)


def latency_histogram(per_query_ms: npt.NDArray[np.float64], latency_ms: dict[str, float],
                      bound_ms: float | None) -> str:
    """A histogram of the per-query latencies with LoadGen's percentile marks."""
    figure, axes = _figure()
    low, high = float(per_query_ms.min()), float(per_query_ms.max())
    count = min(80, max(10, int(np.sqrt(per_query_ms.size))))
    # Log-spaced bins: the tail the bound is about stays visible next to the bulk.
    bins: int | list[float] = (np.geomspace(low, high, count + 1).tolist() if 0 < low < high
                               else count)
    axes.hist(per_query_ms, bins=bins, color="tab:blue", alpha=0.8)
    marks = ("50.00_percentile", "90.00_percentile", "99.00_percentile", "99.90_percentile")
    for row, p in enumerate(marks):
        if p in latency_ms:
            axes.axvline(latency_ms[p], color="black", linestyle=":", linewidth=1)
            # staggered: the tail's marks often sit a hair apart
            axes.annotate(_label(p), (latency_ms[p], 1), xycoords=("data", "axes fraction"),
                          xytext=(2, -12 * (row + 1)), textcoords="offset points", fontsize=8)
    _bound(axes, bound_ms)
    if 0 < low < high:
        axes.set_xscale("log")
    axes.set_xlabel("latency (ms, log scale)" if 0 < low < high else "latency (ms)")
    axes.set_ylabel("queries")
    axes.grid(alpha=0.3)
    if bound_ms is not None:
        axes.legend(fontsize=8)
    return _data_uri(figure)


def tune_sweep(points: Sequence[SweepPoint], bound_ms: float | None) -> str:
    """Target QPS against p99, one series per SUT setup, VALID filled, INVALID hollow."""
    figure, axes = _figure()
    setups = sorted({point.setup for point in points})
    for index, setup in enumerate(setups):
        color = f"C{index % 10}"
        mine = sorted((p for p in points if p.setup == setup), key=lambda p: p.target_qps)
        axes.plot([p.target_qps for p in mine], [p.p99_ms for p in mine], color=color,
                  linewidth=0.8, alpha=0.5)
        for valid in (True, False):
            chosen = [p for p in mine if p.valid is valid]
            style: dict[str, Any] = {"facecolors": color} if valid else {"facecolors": "none"}
            axes.scatter([p.target_qps for p in chosen], [p.p99_ms for p in chosen],
                         edgecolors=color, label=f"{setup}: {'VALID' if valid else 'INVALID'}",
                         **style)
    _bound(axes, bound_ms, vertical=False)
    axes.set_xscale("log")  # tune halves its way down, then bisects
    axes.set_xlabel("target QPS (log scale)")
    axes.set_ylabel("p99 latency (ms)")
    axes.set_yscale("log")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=7)
    return _data_uri(figure)


def llm_pareto(points: Sequence[dict[str, Any]]) -> str:
    """Tokens/s against TTFT p99 and TPOT p99 (two panels) for an LLM tune sweep's Server
    probes, VALID filled and INVALID hollow; Offline's sweep (no token latencies) is drawn
    as tokens/s against its concurrency on a third panel."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10.5, 3.4), layout="constrained")
    server = [p for p in points if p.get("scenario") == "server" and p.get("ttft_p99_ms")]
    offline = [p for p in points if p.get("scenario") == "offline"]
    panels = figure.subplots(1, 3)
    for axes, key, label in ((panels[0], "ttft_p99_ms", "TTFT p99 (ms)"),
                             (panels[1], "tpot_p99_ms", "TPOT p99 (ms)")):
        for valid in (True, False):
            chosen = [p for p in server if bool(p["valid"]) is valid and p.get(key)]
            axes.scatter([p[key] for p in chosen], [p["tokens_per_s"] for p in chosen],
                         edgecolors="C0", facecolors="C0" if valid else "none",
                         label="VALID" if valid else "INVALID")
        axes.set_xlabel(label)
        axes.set_ylabel("completed tokens/s")
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7)
    setting = next((k for k in ("backend.openai.max_in_flight", "sut.max_batch_size")
                    if offline and k in offline[0]), "")
    mine = sorted((p for p in offline if setting in p), key=lambda p: p[setting])
    panels[2].plot([p[setting] for p in mine], [p["tokens_per_s"] for p in mine],
                   marker="o", color="C1")
    panels[2].set_xlabel(f"Offline: {setting or 'concurrency'}")
    panels[2].set_ylabel("tokens/s")
    panels[2].grid(alpha=0.3)
    return _data_uri(figure)


def accuracy_bar(metric: str, value: float, target: float) -> str:
    """The measured accuracy as a bar, with the round's target as a line."""
    figure, axes = _figure(6.0, 1.6)
    axes.barh([metric], [value], color="tab:green" if value >= target else "tab:red")
    axes.axvline(target, color="black", linestyle="--", label=f"target {target:.4g}")
    axes.set_xlim(min(value, target) * 0.95, max(value, target) * 1.01 or 1)
    axes.legend(fontsize=8, loc="lower left")
    return _data_uri(figure)
