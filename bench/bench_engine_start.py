"""vLLM's two starts for tinylm (``suite serve --engine vllm --engine-start quick|full``),
side by side in one invocation: the time and CPU to the first ``/v1/models`` listing, the
CPU of 10 idle seconds, of 128 greedy requests of 64 tokens (32 at a time) and of 100
requests paced at 10/s. CPU is the engine's whole process tree (``/proc``, its live
processes and those it reaped), so a thread that spins between requests shows.

Each start is cold: ``VLLM_CACHE_ROOT`` and ``TORCHINDUCTOR_CACHE_DIR`` point into a fresh
temporary directory (a CI machine has no compile cache; the user's own caches are left
alone). Needs vLLM's environment (``make engine-vllm``)::

    python bench/bench_engine_start.py [--engine-python .venv-vllm/bin/python] [--json OUT]

Prints one line per start and the ratios quick / full.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_cpu_profile import tree_cpu  # noqa: E402  (bench/, beside this script)


def complete(url: str, index: int) -> int:
    body = json.dumps({"model": "tinylm", "prompt": f"To be, or not to be {index}",
                       "max_tokens": 64, "min_tokens": 64, "temperature": 0}).encode()
    request = urllib.request.Request(f"{url}/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as response:
        return int(json.loads(response.read())["usage"]["completion_tokens"])


def measure(start: str, python: str, work: Path, model_dir: Path) -> dict[str, Any]:
    from suite import api

    caches = work / f"caches-{start}"
    os.environ["VLLM_CACHE_ROOT"] = str(caches / "vllm")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(caches / "inductor")
    began = time.monotonic()
    with api.serve_llm("tinylm", "vllm", work / start, python=python, model_dir=model_dir,
                       timeout_s=900, start=start) as engine:
        pid = engine.process.pid
        figures: dict[str, Any] = {"start": start, "ready_s": time.monotonic() - began,
                                   "ready_cpu_s": tree_cpu(pid)}
        before = tree_cpu(pid)
        time.sleep(10)
        figures["idle_10s_cpu_s"] = tree_cpu(pid) - before
        before, t0 = tree_cpu(pid), time.monotonic()
        with ThreadPoolExecutor(32) as pool:
            tokens = sum(pool.map(lambda i: complete(engine.url, i), range(128)))
        figures |= {"burst_tokens": tokens, "burst_s": time.monotonic() - t0,
                    "burst_cpu_s": tree_cpu(pid) - before}
        before, t0 = tree_cpu(pid), time.monotonic()
        threads = []
        for index in range(100):
            thread = threading.Thread(target=complete, args=(engine.url, index))
            thread.start()
            threads.append(thread)
            time.sleep(0.1)
        for thread in threads:
            thread.join()
        figures |= {"paced_s": time.monotonic() - t0, "paced_cpu_s": tree_cpu(pid) - before}
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine-python", default=str(ROOT / ".venv-vllm" / "bin" / "python"))
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if not Path(args.engine_python).is_file():
        print(f"no vLLM interpreter at {args.engine_python}: run `make engine-vllm` or pass "
              "--engine-python", file=sys.stderr)
        return 1
    from suite import api

    with tempfile.TemporaryDirectory(prefix="bench-engine-start-") as tmp:
        model_dir = Path(tmp) / "tinylm-hf"  # one export, outside the timed start
        api.export("tinylm", model_dir, verify_samples=0, force=True)
        rows = [measure(start, args.engine_python, Path(tmp), model_dir)
                for start in ("full", "quick")]
    for row in rows:
        print(f"{row['start']:>5}: ready {row['ready_s']:.1f} s ({row['ready_cpu_s']:.1f} CPU-s); "
              f"idle 10 s: {row['idle_10s_cpu_s']:.1f} CPU-s; {row['burst_tokens']} tokens in "
              f"{row['burst_s']:.2f} s ({row['burst_cpu_s']:.1f} CPU-s); 100 paced at 10/s: "
              f"{row['paced_s']:.1f} s ({row['paced_cpu_s']:.1f} CPU-s)")
    full, quick = rows
    ratios = {key: quick[key] / full[key] for key in
              ("ready_s", "ready_cpu_s", "burst_s", "burst_cpu_s", "paced_cpu_s")}
    print("quick / full: " + ", ".join(f"{k} {v:.3f}" for k, v in ratios.items()))
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "quick_over_full": ratios}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
