"""How long ``suite check`` takes on a whole round: the generated v6.0 tree (every model
and scenario, real LoadGen logs rewritten as official runs log them; see
tests/support/round_tree_generator.py), with each closed system copied once more, so about 130
results. The target is about 100 results in under 10 s on this machine.

    python bench/bench_checker.py            # prints one JSON object
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from suite.checker import check_path  # noqa: E402
from suite.checker.models import detect_round  # noqa: E402
from suite.config.rules import load_rules  # noqa: E402
from suite.paths import find_paths  # noqa: E402
from tests.support import round_tree_generator as gen  # noqa: E402


def _double(tree: Path) -> None:
    """Copy every closed system (results and description) under a second name."""
    sub = tree / "closed" / "ORG"
    for system in sorted(p for p in (sub / "results").iterdir() if p.is_dir()):
        shutil.copytree(system, system.with_name(system.name + "-b"))
        desc = sub / "systems" / f"{system.name}.json"
        shutil.copyfile(desc, desc.with_name(f"{system.name}-b.json"))


def measure(tmp: Path) -> dict[str, Any]:
    """Build the tree under ``tmp`` and time the round detection and both modes."""
    paths = find_paths()
    tree = gen.build_tree("v6.0", tmp / "tree", tmp / "lgcache")
    _double(tree)
    started = time.perf_counter()
    round_name = detect_round(tree, paths)
    rules = load_rules(paths, round_name)
    detect_s = time.perf_counter() - started
    out: dict[str, Any] = {"round": round_name, "detect_round_s": round(detect_s, 3)}
    for mode, compat in (("strict", False), ("compat", True)):
        started = time.perf_counter()
        report = check_path(tree, rules, compat_official=compat)
        elapsed = time.perf_counter() - started
        out[mode] = {"results": report.summary.results, "passed": report.passed,
                     "seconds": round(elapsed, 3),
                     "ms_per_result": round(1000 * elapsed / max(report.summary.results, 1), 2)}
    out["target"] = "about 100 results in under 10 s"
    out["met"] = all(out[m]["seconds"] < 10 and out[m]["passed"] for m in ("strict", "compat"))
    return out


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(measure(Path(tmp)), indent=2))
