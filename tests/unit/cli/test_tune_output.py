"""``suite tune``'s command layer above a fake ``api.tune``: its progress and verdict fit
COLUMNS=100 piped, and a search with no VALID confirming run exits 2 (a verdict, not an
error) naming the VALID probes under the real probe directory."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from suite.harness.tune_report import TuneReport, probe_line, unconfirmed_verdict
from suite.harness.tune_search import ProbeResult, Setup, confirm, search


class _NeverConfirms:
    def _result(self, valid: bool, rate: float) -> ProbeResult:
        name = f"20261207T025600Z_digits_server_performance-{rate:g}"
        return ProbeResult(valid=valid, metric=rate, mean_latency_ms=1.0, p99_ms=4.9,
                           run_dir=f"/x/tune-probes/{name}",
                           why="" if valid else "latency bound, early stopping")

    def probe(self, rate: float, setup: Setup) -> ProbeResult:
        return self._result(rate <= 1_300, rate)

    def confirm(self, rate: float, setup: Setup) -> ProbeResult:
        return self._result(False, rate)


def _fake_tune(probes: Path) -> Callable[..., TuneReport]:
    def tune(options: Any, *, say: Callable[[str], None], **_: Any) -> TuneReport:
        runner = _NeverConfirms()
        say(f"probe runs go to {probes}")
        say("  the backend completes about 159,228 samples/s with 2 workers at batch 16: the "
            "first probe aims at 262,144, not 1,200,000")
        seen = search(runner, [Setup(4, 1), Setup(16, 2, "processes")], 64_000, 3,
                      say=say)
        for probe in seen.probes:
            say(probe_line("server", f"{probe.rate:,.0f} QPS, {probe.setup.label()}, 1.0 s",
                           probe.result))
        confirm(runner, seen, say)
        report = TuneReport("box", "null", "digits", probes_dir=probes, server=seen)
        report.unconfirmed = unconfirmed_verdict(seen, probes)
        return report
    return tune


def test_unconfirmed_search_exits_2_within_100_columns(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str],
                                                       tmp_path: Path) -> None:
    import suite.api
    from suite.cli.app import main

    probes = tmp_path / "runs" / "tune-probes"
    monkeypatch.setattr(suite.api, "tune", _fake_tune(probes))
    monkeypatch.setenv("COLUMNS", "100")
    code = main(["tune", "--scenario", "server", "--backend", "null", "--quick"])
    out, err = capsys.readouterr()
    assert code == 2, err
    lines = (out + err).splitlines()
    assert [line for line in lines if len(line) > 100] == []
    assert "Server: no confirming run was VALID" in err
    assert str(probes) in err.replace("\n    ", " ")
    assert "1,250 QPS, batch 4, 1 thread" in err
    assert "<runs>" not in err and "{'" not in err
