"""The HTML report of an LLM run plots TTFT and TPOT against the bounds LoadGen ran with,
not the whole query's latency against a target LoadGen does not enforce in token-latency
mode (issue 40, item 3: the report drew the query latency against a 20,000 ms bound)."""

from __future__ import annotations

import base64
from pathlib import Path

from suite.logs import DetailLog
from suite.reports.html import token_views
from tests.unit.reports.test_explain import _LLM_SERVER

PNG = b"\x89PNG\r\n\x1a\n"


def _png(uri: str) -> bytes:
    assert uri.startswith("data:image/png;base64,"), uri[:40]
    return base64.b64decode(uri.split(",", 1)[1])


def test_ttft_and_tpot_each_come_with_the_bound_loadgen_ran_with() -> None:
    ttft, tpot = token_views(DetailLog(Path("d.txt"), dict(_LLM_SERVER)))
    assert (ttft.name, tpot.name) == ("TTFT", "TPOT")
    assert ttft.bound_ms == 500.0 and tpot.bound_ms == 50.0  # requested_server_*_latency
    assert ttft.latency_ms["99.00_percentile"] == 756.597996
    assert ttft.latency_ms["mean"] == 117.605045
    assert tpot.latency_ms["90.00_percentile"] == 14.290382
    assert tpot.latency_ms["mean"] == 8.034069  # result_time_to_output_token_mean
    assert _png(ttft.cdf_png).startswith(PNG) and _png(tpot.cdf_png).startswith(PNG)
    assert ttft.cdf_png != tpot.cdf_png


def test_an_offline_llm_test_has_token_latencies_without_a_bound() -> None:
    values = {k: v for k, v in _LLM_SERVER.items() if not k.startswith("requested_server")}
    views = token_views(DetailLog(Path("d.txt"), values))
    assert [v.name for v in views] == ["TTFT", "TPOT"]
    assert all(v.bound_ms is None for v in views)


def test_a_test_without_token_latencies_has_none() -> None:
    values = {k: v for k, v in _LLM_SERVER.items() if "token" not in k}
    assert token_views(DetailLog(Path("d.txt"), values)) == []
