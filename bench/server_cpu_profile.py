"""Where the CPU goes in a Server run: per thread and per process, over its steady state.

Runs ``suite run --scenario server`` at ``--qps`` (on digits and onnxruntime, unless
``--benchmark``, ``--backend`` and ``--set`` say otherwise), finds the LoadGen child
process and its worker processes, and reads every thread's CPU time from ``/proc``
between 30 % and 80 % of the run: exact, and without slowing the run the way a sampling
profiler does (py-spy with native frames made the same run INVALID). Threads are named
by one ``py-spy dump --nonblocking`` of the child, taken at the end of the window,
when py-spy is installed (``pip install py-spy``): LoadGen issues on the thread that
called ``StartTest``; ``_complete_loop`` is our completion thread. Writes
``bench/results/server_cpu_<time>.json`` and prints a table.

    python bench/server_cpu_profile.py --qps 200000 --seconds 10
    python bench/server_cpu_profile.py --benchmark resnet50 --backend simulated \
        --worker-model threads --workers 8 --batch 256 --qps 9600 \
        --set 'backend.simulated.profile="resnet50-4gpu-fp16"' --set data.dataset_dir=...
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds (user + system) of each thread of ``pid``."""
    out: dict[int, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        out[int(task.name)] = (int(fields[11]) + int(fields[12])) / TICK
    return out


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text() if (task / "children").exists() else ""
        found += [int(c) for c in text.split()]
    return found


def find_child(parent: int, timeout: float = 60.0) -> int:
    """The ``suite.harness.child`` process under ``parent`` (the LoadGen process)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid in children(parent):
            if b"suite.harness.child" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
        time.sleep(0.05)
    raise RuntimeError("no suite.harness.child process appeared")


def name_threads(pid: int) -> dict[int, str]:
    """Thread id -> a role read off its Python stack (``py-spy dump``), when py-spy is here.

    ``--nonblocking``: a dump that pauses the process makes the run INVALID (seen: p99
    168 ms). It cannot read native frames, but every thread of interest has a Python one:
    LoadGen issues on the thread that called ``StartTest`` (``run_test``).
    """
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        return {}
    dump = subprocess.run([spy, "dump", "--nonblocking", "--pid", str(pid)],
                          capture_output=True, text=True, timeout=60).stdout
    roles = {"run_test": "LoadGen's issue loop and our issue callback (StartTest's thread)",
             "_complete_loop": "our completion thread (QuerySamplesComplete)",
             "_dynamic_worker": "worker thread", "_heartbeat": "heartbeat",
             "_watchdog": "SUT watchdog", "_control": "control"}
    names: dict[int, str] = {}
    for block in re.split(r"\n(?=Thread )", dump):
        head = re.match(r"Thread (\d+)", block)
        if head:
            names[int(head.group(1))] = next(
                (role for key, role in roles.items() if key in block), "other")
    return names


def _comm(pid: int, tid: int) -> str:
    """A thread without a Python frame (LoadGen's own, e.g. its log writer): its name."""
    try:
        name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
    except OSError:
        name = "?"
    return f"no Python frame (thread name {name!r})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--qps", type=float, default=200_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--worker-model", default="processes")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--benchmark", default="digits")
    parser.add_argument("--backend", default="onnxruntime")
    parser.add_argument("--set", action="append", default=[], dest="sets",
                        metavar="KEY=VALUE", help="more config (repeatable), as suite run's")
    args = parser.parse_args()
    runs = Path(tempfile.mkdtemp(prefix="server_cpu_"))
    command = [sys.executable, "-m", "suite", "run", "--scenario", "server", "--quick",
               "--benchmark", args.benchmark, "--backend", args.backend,
               *(arg for value in args.sets for arg in ("--set", value)),
               "--set", f"sut.worker_model={args.worker_model}",
               "--set", f"sut.workers={args.workers}",
               "--set", f"sut.max_batch_size={args.batch}",
               "--set", f"loadgen.target_qps={args.qps}",
               "--set", f"loadgen.min_duration_ms={int(args.seconds * 1000)}",
               "--runs-dir", str(runs)]
    parent = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    child = find_child(parent.pid)
    # LoadGen starts issuing after the child loads the model and warms up: wait for the
    # worker processes (processes model) or a busy child, then time from there.
    time.sleep(2.0)
    time.sleep(0.3 * args.seconds)
    pids = [child, *children(child)]
    before = {pid: thread_cpu(pid) for pid in pids}
    start = time.monotonic()
    time.sleep(0.5 * args.seconds)
    after = {pid: thread_cpu(pid) for pid in pids}
    wall = time.monotonic() - start
    names = name_threads(child)
    names |= {tid: _comm(child, tid) for tid in after[child] if tid not in names}
    parent.wait()
    rows: list[dict[str, Any]] = []
    for pid in pids:
        for tid, cpu in after[pid].items():
            used = (cpu - before[pid].get(tid, cpu)) / wall
            if used < 0.005:
                continue
            role = names.get(tid, "?") if pid == child else f"worker process {pid}"
            rows.append({"pid": pid, "tid": tid, "role": role, "cores": round(used, 3)})
    rows.sort(key=lambda r: -r["cores"])
    summaries = sorted(runs.glob("*/performance/mlperf_log_summary.txt"))
    text = summaries[-1].read_text() if summaries else ""
    valid = "Result is : VALID" in text
    p99 = re.search(r"99.00 percentile latency \(ns\)\s*:\s*(\d+)", text)
    result = {"qps": args.qps, "seconds": args.seconds, "worker_model": args.worker_model,
              "workers": args.workers, "batch": args.batch, "valid": valid,
              "p99_ms": int(p99.group(1)) / 1e6 if p99 else None, "window_s": round(wall, 2),
              "cores_total": round(sum(r["cores"] for r in rows), 3), "threads": rows,
              "run_dir": str(runs)}
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out = REPO / "bench" / "results" / f"server_cpu_{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    for row in rows:
        print(f"{row['cores']:6.3f} cores  {row['role']}  (pid {row['pid']}, tid {row['tid']})")
    print(f"{result['cores_total']:6.3f} cores in all; {'VALID' if valid else 'INVALID'}, "
          f"p99 {result['p99_ms']} ms; {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
