"""The ``openai`` backend against the synthetic streaming endpoint on loopback.

The real LoadGen, the real CLI, a real aiohttp server (``suite.serve.synthetic_llm``):
what a run records about the server, the key that never reaches the run directory, the
pre-flight refusals (no run directory), and every fault ending FAILED (exit 1) within
seconds, naming the URL and the sample, with the logs kept and no process left. The
synthetic endpoint stands for a server's protocol and timing only; accuracy against a
real engine is ``test_openai_vllm.py``'s.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from suite.results import RunResult
from tests.conftest import only_run_dir, run_cli
from tests.support.llm_endpoints import processes_mentioning, synthetic

pytest.importorskip("aiohttp",
                    reason="the openai backend needs aiohttp (pip install -e '.[openai]')")

QUICK = ["--benchmark", "tinylm", "--backend", "openai", "--quick"]


def run_openai(url: str, runs: Path, *extra: str, **env: str) -> tuple[int, str, float]:
    start = time.monotonic()
    proc = run_cli("run", *QUICK, "--url", url, "--runs-dir", str(runs), *extra, timeout=120,
                   **env)
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - start


def test_offline_is_valid_and_records_what_the_server_said(tmp_path: Path) -> None:
    with synthetic("--tokens", "16", "--chunk-tokens", "3") as (url, _):
        code, out, _ = run_openai(url, tmp_path, "--scenario", "offline",
                                  "--set", "loadgen.min_query_count=64")
    assert code == 0, out
    run_dir = only_run_dir(tmp_path)
    [test] = RunResult.load(run_dir / "result.json").tests
    assert test.status.value == "VALID"
    # the one pipeline's records: the linter ran, the system is described
    assert "pre-flight: predicted" in out
    assert json.loads((run_dir / "system.json").read_text())
    details = test.backend["details"]
    assert details["engine"] == "synthetic" and details["engine_version"] == "synthetic-1"
    assert details["urls"] == url and details["replicas"] == "1"
    assert details["token_source"] == "engine" and details["model"] == "tinylm"
    assert details["model_root"] == "unreported"  # its /v1/models names no weights
    status = json.loads((run_dir / "performance" / "status.json").read_text())
    profile = status["batches"]
    assert profile["kind"] == "endpoint" and profile["token_ids_from"] == {"engine": 64}
    assert profile["tokens"] == 64 * 16  # every streamed id reached LoadGen
    assert profile["sse_events"] == 64 * 7  # 6 chunks of <= 3 tokens, then the usage event


def test_server_reports_first_tokens_and_two_replicas_share_the_load(tmp_path: Path) -> None:
    with synthetic("--tokens", "8", "--ttft-ms", "2") as (a, _), \
            synthetic("--tokens", "8", "--ttft-ms", "2") as (b, _):
        code, out, _ = run_openai(a, tmp_path, "--url", b, "--scenario", "server",
                                  "--target-qps", "50")
    assert code in (0, 2), out  # VALID or INVALID by this machine's speed; never FAILED
    run_dir = only_run_dir(tmp_path)
    detail = (run_dir / "performance" / "mlperf_log_detail.txt").read_text()
    assert '"key": "result_first_token_mean_latency_ns"' in detail
    [test] = RunResult.load(run_dir / "result.json").tests
    assert test.backend["details"]["replicas"] == "2"


def test_the_api_key_is_sent_and_never_written(tmp_path: Path) -> None:
    secret = "sk-test-7f3a9c1e-never-in-a-file"
    with synthetic("--tokens", "4") as (url, _):
        code, out, _ = run_openai(url, tmp_path, "--scenario", "offline",
                                  "--set", 'backend.openai.api_key_env="SUITE_TEST_KEY"',
                                  SUITE_TEST_KEY=secret)
    assert code == 0, out
    assert secret not in out
    for path in only_run_dir(tmp_path).rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_an_unset_key_variable_is_one_line_and_no_run(tmp_path: Path) -> None:
    with synthetic("--tokens", "4") as (url, _):
        code, out, _ = run_openai(url, tmp_path, "--scenario", "offline",
                                  "--set", 'backend.openai.api_key_env="SUITE_UNSET_KEY"')
    assert code == 1 and "$SUITE_UNSET_KEY is not set" in out, out
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


@pytest.mark.parametrize(("args", "expected"), [
    ((), "does not answer"),  # nothing listens on the URL
    (("--model", "other"), "does not list the model 'tinylm' (it lists: other)"),
    (("--fault", "http-500"), "HTTP 500"),
])
def test_pre_flight_refuses_before_any_run_directory(tmp_path: Path, args: tuple[str, ...],
                                                    expected: str) -> None:
    if not args:
        with synthetic() as (url, _):
            pass  # started and stopped: its port is now closed
        code, out, _ = run_openai(url, tmp_path, "--scenario", "offline")
    else:
        with synthetic(*args) as (url, _):
            code, out, _ = run_openai(url, tmp_path, "--scenario", "offline")
    assert code == 1, out
    assert expected in out and url in out, out
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


# Every 5th request fails: the pre-flight request (the 1st) passes, the run's do not.
@pytest.mark.parametrize(("fault", "expected"), [
    ("http-500", "HTTP 500"),
    ("http-429", "HTTP 429"),
    ("cut", "cut off"),
    ("bad-json", "malformed JSON"),
    ("no-done", "without 'data: [DONE]'"),
    ("short-usage", "reports 9 completion tokens but streamed 8"),
    ("stall", "timeout"),
    ("die", "/v1/completions: sample"),
])
def test_a_fault_fails_the_run_in_seconds_naming_url_and_sample(tmp_path: Path, fault: str,
                                                                expected: str) -> None:
    with synthetic("--tokens", "8", "--fault", fault, "--fault-every", "5") as (url, server):
        code, out, seconds = run_openai(
            url, tmp_path, "--scenario", "offline",
            "--set", "backend.openai.first_byte_timeout_s=1.5")
        assert fault == "die" or server.poll() is None
    assert code == 1, out
    run_dir = only_run_dir(tmp_path)
    assert (run_dir / "STATUS").read_text().startswith("FAILED")
    assert (run_dir / "performance" / "mlperf_log_detail.txt").is_file()  # logs kept
    [test] = RunResult.load(run_dir / "result.json").tests
    message = " ".join(f["message"] for f in (test.model_dump().get("failures") or []))
    assert expected in message and url in message and "sample" in message, message
    assert seconds < 30, f"a {fault} took {seconds:.1f} s to fail the run"
    assert processes_mentioning(str(run_dir)) == [], "a process was left behind"


def test_ctrl_c_cancels_the_requests_in_flight_and_exits_promptly(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    from tests.conftest import REPO, cli_env

    def default_int() -> None:  # a background job of a non-interactive shell ignores INT
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    with synthetic("--tokens", "64", "--itl-ms", "200") as (url, _):  # 13 s a request
        proc = subprocess.Popen(
            [sys.executable, "-m", "suite", "run", *QUICK, "--url", url, "--scenario",
             "offline", "--runs-dir", str(tmp_path)], cwd=REPO, env=cli_env(),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_int)
        deadline = time.monotonic() + 60
        log = None
        while time.monotonic() < deadline and proc.poll() is None:
            logs = list(tmp_path.glob("*/performance/mlperf_log_detail.txt"))
            if logs and logs[0].stat().st_size > 0:
                log = logs[0]
                break
            time.sleep(0.05)
        assert log is not None, "LoadGen never started"
        time.sleep(0.5)  # requests are streaming now
        start = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        seconds = time.monotonic() - start
    print(f"Ctrl-C to exit: {seconds:.2f} s")
    assert proc.returncode == 130, out + err
    assert seconds < 5, f"{seconds:.1f} s from Ctrl-C to exit (requests take 13 s)"
    run_dir = only_run_dir(tmp_path)
    assert (run_dir / "STATUS").read_text().startswith("INTERRUPTED")
    assert processes_mentioning(str(run_dir)) == []


def test_tune_sweeps_concurrency_and_rate_and_the_report_draws_it(tmp_path: Path) -> None:
    with synthetic("--tokens", "8") as (url, _):
        done = run_cli("tune", "--benchmark", "tinylm", "--backend", "openai", "--url", url,
                       "--scenario", "server", "--concurrency", "2,8", "--steps", "1",
                       "--runs-dir", str(tmp_path), "--system", "sweepbox", timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    sweep = json.loads((tmp_path / "tune-sweeps" / "sweepbox_tinylm_openai.json").read_text())
    offline = [p for p in sweep["points"] if p["scenario"] == "offline"]
    server = [p for p in sweep["points"] if p["scenario"] == "server"]
    assert [p["backend.openai.max_in_flight"] for p in offline] == [2, 8]
    assert all(p["tokens_per_s"] > 0 for p in offline)
    assert server and all(p["ttft_p99_ms"] is not None and p["tpot_p99_ms"] is not None
                          for p in server)
    assert any(p["valid"] for p in server)  # the chosen rate is a VALID probe's
    assert "loadgen.target_qps" in done.stdout
    probe = Path(server[0]["run_dir"])
    page = tmp_path / "report.html"
    shown = run_cli("report", "--html", str(page), str(probe))
    assert shown.returncode == 0, shown.stderr
    html = page.read_text()
    assert "LLM tune sweep: throughput against token latency" in html
    assert html.count("<tr><td>server</td>") == len(server)
