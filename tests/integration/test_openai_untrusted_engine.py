"""Engines that would slip past: the ``openai`` backend against the synthetic endpoint's
misbehaviours (``suite.serve.synthetic_llm --fault``), the real LoadGen and the real CLI.

Each misbehaviour ends the run FAILED (or the pre-flight, before any run directory)
naming what the engine did: a response past the card's ``max_new_tokens`` (also an
endless stream, which ends at the cap instead of growing memory), ``finish_reason:
abort``, ids outside the card's vocabulary, a JSON body in place of a stream. A failed
run says so beside LoadGen's own logs (``FAILED.txt``) and to ``suite check``; the options
that change what the engine computes make a run not submittable, by name; a dead client
process fails the run in seconds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from suite.results import RunResult
from tests.conftest import REPO, cli_env, only_run_dir, run_cli
from tests.support.llm_endpoints import processes_mentioning, synthetic
from tests.support.timing import timing_assert

pytest.importorskip("aiohttp",
                    reason="the openai backend needs aiohttp (pip install -e '.[openai]')")

QUICK = ["--benchmark", "tinylm", "--backend", "openai", "--quick"]


def run_openai(url: str, runs: Path, *extra: str) -> tuple[int, str]:
    proc = run_cli("run", *QUICK, "--url", url, "--runs-dir", str(runs), *extra, timeout=120)
    return proc.returncode, proc.stdout + proc.stderr


def received(url: str) -> int:
    with urllib.request.urlopen(f"{url}/synthetic/requests", timeout=10) as answer:
        return int(json.loads(answer.read())["requests"])


def failure_text(run_dir: Path) -> str:
    [test] = RunResult.load(run_dir / "result.json").tests
    return " ".join(f["message"] for f in test.failures)


@pytest.mark.parametrize(("fault", "expected"), [
    ("overshoot", "more than 2 output tokens"),  # 10 tokens for the pre-flight's 2
    ("endless", "more than 2 output tokens"),
    ("json-sse", "Content-Type 'application/json', not a stream (text/event-stream)"),
])
def test_the_pre_flight_holds_the_engine_to_what_it_asked(tmp_path: Path, fault: str,
                                                          expected: str) -> None:
    with synthetic("--tokens", "16", "--fault", fault) as (url, _):
        code, out = run_openai(url, tmp_path, "--scenario", "offline")
    assert code == 1, out
    assert expected in " ".join(out.split()) and url in out, out
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


# Every 5th request misbehaves: the parent's pre-flight (the 1st) and the child's (the 2nd)
# pass, the run's 3rd does not.
@pytest.mark.parametrize(("fault", "expected"), [
    ("overshoot", "more than 64 output tokens"),
    ("endless", "more than 64 output tokens"),
    ("abort", "finish_reason 'abort'"),
    ("oov", "outside the card's vocabulary (83 tokens)"),
])
def test_a_misbehaving_engine_fails_the_run_and_the_run_directory_says_so(
        tmp_path: Path, fault: str, expected: str) -> None:
    with synthetic("--tokens", "64", "--fault", fault, "--fault-every", "5") as (url, _):
        code, out = run_openai(url, tmp_path, "--scenario", "offline",
                               "--set", "backend.openai.client_workers=0")
    assert code == 1, out
    run_dir = only_run_dir(tmp_path)
    message = failure_text(run_dir)
    assert expected in message and url in message, message
    # LoadGen's summary may say VALID (the drain answered the rest empty): the note beside
    # it, and suite check, say FAILED.
    note = (run_dir / "performance" / "FAILED.txt").read_text()
    assert note.startswith("This LoadGen test FAILED") and expected in note, note
    checked = run_cli("check", str(run_dir))
    assert checked.returncode == 2, checked.stdout + checked.stderr
    assert "RUN-STATUS" in checked.stdout and "FAILED" in checked.stdout, checked.stdout
    assert processes_mentioning(str(run_dir)) == []


def test_after_the_first_failure_no_queued_request_is_sent(tmp_path: Path) -> None:
    with synthetic("--tokens", "2", "--fault", "http-429",
                   "--fault-every", "5") as (url, _):
        code, out = run_openai(url, tmp_path, "--scenario", "offline",
                               "--set", "backend.openai.client_workers=1",
                               "--set", "backend.openai.max_in_flight=4")
        sent = received(url)
    assert code == 1 and "HTTP 429" in failure_text(only_run_dir(tmp_path)), out
    status = json.loads((only_run_dir(tmp_path) / "performance" / "status.json").read_text())
    issued = status["samples_completed"]
    print(f"{sent} requests reached the server; LoadGen issued {issued} samples")
    # 2 pre-flights, the run's first 4 in flight (the 3rd is the 429), and the few started
    # as others finished before the 429 arrived (measured: 8); then nothing: before, the
    # client process went on through its queue until it was closed (26 and 28 of 64)
    assert sent <= 12 < issued, (sent, issued)


def test_options_that_change_what_the_engine_computes_are_named(tmp_path: Path) -> None:
    with synthetic("--tokens", "16") as (url, _):
        code, out = run_openai(
            url, tmp_path, "--scenario", "offline", "--set", "loadgen.min_query_count=32",
            "--set", "backend.openai.extra_body={max_tokens = 4, temperature = 1.0}",
            "--set", 'backend.openai.token_source="tokenizer"',
            "--set", "backend.openai.min_tokens_field=false")
    assert code == 0, out
    run_dir = only_run_dir(tmp_path)
    result = RunResult.load(run_dir / "result.json")
    reasons = " | ".join(result.non_submittable_reasons)
    assert not result.submittable
    for name in ("extra_body.max_tokens = 4", "extra_body.temperature = 1.0",
                 'token_source = "tokenizer"', "min_tokens_field = false"):
        assert name in reasons, reasons
    assert "extra_body.max_tokens" in out  # in the notes under the table
    # how the streams ended is counted: the engine stopped each at max_tokens
    status = json.loads((run_dir / "performance" / "status.json").read_text())
    assert status["batches"]["finish_reasons"] == {"length": 32}, status["batches"]


def _descendants(pid: int) -> list[int]:
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                children.append(int(entry.name))
    return [*children, *(d for c in children for d in _descendants(c))]


def _client_workers(pid: int) -> list[int]:
    found = []
    for child in _descendants(pid):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if b"spawn_main" in cmdline and b"resource_tracker" not in cmdline:
            found.append(child)
    return found


@pytest.mark.timing
@pytest.mark.parametrize("scenario", ["offline", "server"])
def test_a_dead_client_process_fails_the_run_within_seconds(tmp_path: Path,
                                                            scenario: str) -> None:
    with synthetic("--tokens", "64", "--itl-ms", "100") as (url, _):  # 6 s a request
        proc = subprocess.Popen(
            [sys.executable, "-m", "suite", "run", *QUICK, "--url", url, "--scenario",
             scenario, "--target-qps", "20", "--runs-dir", str(tmp_path),
             "--set", "backend.openai.client_workers=2"],
            cwd=REPO, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            workers: list[int] = []
            while time.monotonic() < deadline and proc.poll() is None:
                logs = list(tmp_path.glob("*/performance/mlperf_log_detail.txt"))
                workers = _client_workers(proc.pid)
                if logs and logs[0].stat().st_size > 0 and len(workers) == 2:
                    break
                time.sleep(0.05)
            assert len(workers) == 2, "LoadGen or its client processes never started"
            time.sleep(0.5)  # requests are streaming now
            start = time.monotonic()
            os.kill(workers[0], signal.SIGKILL)
            out, err = proc.communicate(timeout=60)
            seconds = time.monotonic() - start
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    print(f"kill -9 of a client process to the run's exit: {seconds:.2f} s")
    assert proc.returncode == 1, out + err
    run_dir = only_run_dir(tmp_path)
    assert (run_dir / "STATUS").read_text().startswith("FAILED")
    assert "endpoint client process" in failure_text(run_dir) and "died" in failure_text(run_dir)
    assert (run_dir / "performance" / "mlperf_log_detail.txt").is_file()  # logs kept
    assert seconds < 15, f"{seconds:.1f} s from the kill to the exit (requests take 6 s)"
    assert processes_mentioning(str(run_dir)) == [] and _client_workers(proc.pid) == []
    # the live worker's counts reach status.json, failed or not
    status = json.loads((run_dir / "performance" / "status.json").read_text())
    run = status["backend"]["run"]
    assert run["workers_reported"] == 1 and status["batches"]["requests"] > 0, run
    timing_assert(seconds < 2.0, f"{seconds:.2f} s from the kill to the exit")


def test_a_failed_server_run_reports_its_workers_counts(tmp_path: Path) -> None:
    with synthetic("--tokens", "8", "--fault", "http-500", "--fault-every", "5") as (url, _):
        code, out = run_openai(url, tmp_path, "--scenario", "server", "--target-qps", "20",
                               "--set", "backend.openai.client_workers=1")
    assert code == 1, out
    status = json.loads((only_run_dir(tmp_path) / "performance" / "status.json").read_text())
    run = status["backend"]["run"]
    assert run["workers_reported"] == 1 and run["workers"][0]["requests"] >= 3, run
    assert status["batches"]["requests"] >= 3 and status["batches"]["sse_events"] > 0


@pytest.mark.parametrize(("args", "expected", "unexpected"), [
    (("--fault", "redirect"), "HTTP 302 redirects to 'http://192.0.2.1:9/v1/models'", ""),
    (("--fault", "http-503"), "HTTP 503", "start the engine"),
])
def test_the_pre_flight_names_what_the_server_answered(tmp_path: Path, args: tuple[str, ...],
                                                      expected: str, unexpected: str) -> None:
    with synthetic(*args) as (url, _):
        code, out = run_openai(url, tmp_path, "--scenario", "offline")
    flat = " ".join(out.split())
    assert code == 1 and expected in flat, out
    assert not unexpected or unexpected not in flat, out
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_a_url_with_credentials_is_refused_and_never_written(tmp_path: Path) -> None:
    code, out = run_openai("http://user:s3cret@127.0.0.1:9/v1", tmp_path,
                           "--scenario", "offline")
    assert code == 1 and "credentials" in out, out
    assert "s3cret" not in out and len(out.strip().splitlines()) <= 3, out
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_url_chooses_the_openai_backend_or_is_refused(tmp_path: Path) -> None:
    refused = run_cli("run", "--benchmark", "tinylm", "--backend", "torch-llm", "--url",
                      "http://127.0.0.1:9", "--quick", "--runs-dir", str(tmp_path))
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "--url is an option of the openai backend" in refused.stderr, refused.stderr
    assert not tmp_path.exists() or not any(tmp_path.iterdir())
    with synthetic("--tokens", "8") as (url, _):
        chosen = run_cli("run", "--benchmark", "tinylm", "--url", url, "--quick",
                         "--set", "loadgen.min_query_count=16", "--runs-dir", str(tmp_path))
    assert chosen.returncode == 0, chosen.stdout + chosen.stderr
    assert "the openai backend" in chosen.stderr, chosen.stderr
    result = RunResult.load(only_run_dir(tmp_path) / "result.json")
    assert result.backend == "openai" and result.tests[0].backend["details"]["urls"] == url


@pytest.mark.parametrize("attempt", [1, 2])
def test_ctrl_c_at_a_terminal_keeps_an_offline_runs_logs(tmp_path: Path, attempt: int) -> None:
    """Ctrl-C at a terminal reaches the whole process group, the client processes too:
    the run ends INTERRUPTED with its status and LoadGen's summary written."""
    with synthetic("--tokens", "64", "--itl-ms", "100") as (url, _):
        proc = subprocess.Popen(
            [sys.executable, "-m", "suite", "run", *QUICK, "--url", url, "--scenario",
             "offline", "--runs-dir", str(tmp_path), "--set", "backend.openai.client_workers=2"],
            cwd=REPO, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and proc.poll() is None:
                logs = list(tmp_path.glob("*/performance/mlperf_log_detail.txt"))
                if logs and logs[0].stat().st_size > 0 and len(_client_workers(proc.pid)) == 2:
                    break
                time.sleep(0.05)
            time.sleep(0.5)  # requests are streaming now
            os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert proc.returncode == 130, out + err
    run_dir = only_run_dir(tmp_path)
    perf = run_dir / "performance"
    status = json.loads((perf / "status.json").read_text())
    assert status["status"] == "interrupted" and status["exit_code"] == 130, status
    assert (perf / "mlperf_log_summary.txt").stat().st_size > 0
    assert "BrokenPipeError" not in err and "Traceback" not in err, err
    for log in run_dir.rglob("*.log"):  # the child's own output: no worker died of it
        text = log.read_text(errors="replace")
        assert "Traceback" not in text and "KeyboardInterrupt" not in text, (log, text)
    assert processes_mentioning(str(run_dir)) == []
