"""Issue 40's trials of the first hour: how often a quick Offline run is VALID, and how
often ``suite demo`` ends 0, on this machine quiet and beside a CPU hog.

Every verdict is read from the run's records, never from the bench's own timing: a quick
Offline run's ``result_validity`` (and, when INVALID, LoadGen's reasons as the run wrote
them to ``result.json``) from its LoadGen detail log; a demo's exit code and the lines it
printed about the machine's load. The hog is ``--hog N`` processes spinning in pure
Python (a 2-core hog on this 2-core machine by default), started before the trials and
killed after them; the load average is recorded beside each block.

Not a CI gate (the figures depend on the machine): issue 40 asks for them in the note.

    python bench/bench_first_hour.py --offline 20 --demos 5 [--hog 2] [--no-quiet]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any


def _spin() -> None:
    while True:
        pass


def _validity(run_dir: Path) -> str:
    """LoadGen's verdict for the run's performance test, from its detail log."""
    detail = run_dir / "performance" / "mlperf_log_detail.txt"
    for line in detail.read_text().splitlines():
        if line.startswith(":::MLLOG") and '"result_validity"' in line:
            return str(json.loads(line.removeprefix(":::MLLOG "))["value"])
    return "no result_validity record"


def _new_dirs(runs: Path, before: set[Path]) -> list[Path]:
    return sorted(p for p in set(runs.iterdir()) - before if p.is_dir())


def quick_offline(runs: Path, n: int) -> dict[str, Any]:
    """n quick digits Offline runs, one process each; verdicts from their detail logs."""
    verdicts: Counter[str] = Counter()
    exits: Counter[int] = Counter()
    invalid_reasons = []
    for _ in range(n):
        before = set(runs.iterdir())
        proc = subprocess.run([sys.executable, "-m", "suite", "run", "--benchmark", "digits",
                               "--scenario", "offline", "--quick", "--runs-dir", str(runs)],
                              capture_output=True, text=True, check=False)
        exits[proc.returncode] += 1
        (run_dir,) = _new_dirs(runs, before)
        verdict = _validity(run_dir)
        verdicts[verdict] += 1
        if verdict != "VALID":
            tests = json.loads((run_dir / "result.json").read_text())["tests"]
            invalid_reasons.append([t["performance"]["invalid_reason"] for t in tests
                                    if t.get("performance")])
    return {"runs": n, "verdicts": dict(verdicts), "exit_codes": dict(exits),
            "invalid": invalid_reasons, "load_average_after": os.getloadavg()}


def demos(runs: Path, n: int) -> dict[str, Any]:
    """n ``suite demo`` runs; exit codes and the load lines the demo printed."""
    exits: Counter[int] = Counter()
    explained = []
    for _ in range(n):
        start = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "suite", "demo", "--runs-dir", str(runs)],
                              capture_output=True, text=True, check=False,
                              env={**os.environ, "COLUMNS": "100"})
        exits[proc.returncode] += 1
        lines = [line.strip() for line in proc.stdout.splitlines() if "load average" in line]
        explained.append({"exit": proc.returncode, "seconds": round(time.monotonic() - start, 1),
                          "load_lines": lines})
    return {"demos": n, "exit_codes": dict(exits), "each": explained,
            "load_average_after": os.getloadavg()}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--offline", type=int, default=20, help="quick Offline runs per block")
    parser.add_argument("--demos", type=int, default=5, help="demos beside the hog")
    parser.add_argument("--hog", type=int, default=2, help="spinning processes (the hog)")
    parser.add_argument("--no-quiet", action="store_true", help="skip the quiet block")
    args = parser.parse_args()
    runs = Path(tempfile.mkdtemp(prefix="bench-first-hour-"))
    report: dict[str, Any] = {"cpus": os.cpu_count(), "runs_dir": str(runs)}
    if not args.no_quiet:
        report["quiet"] = {"load_average_before": os.getloadavg(),
                           **quick_offline(runs, args.offline)}
    hogs = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.hog)]
    for hog in hogs:
        hog.start()
    try:
        time.sleep(2)  # let the hog show in the load figures LoadGen's run will see
        report["hog"] = {"processes": args.hog, "load_average_before": os.getloadavg(),
                         "offline": quick_offline(runs, args.offline),
                         "demo": demos(runs, args.demos)}
    finally:
        for hog in hogs:
            hog.kill()
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
