"""A data home (``SUITE_HOME``) that knows the toy task card (``toy_task.py``): its card
under ``reference_models/toytask/`` (task ``tests.support.toy_task:ToyTask``, the
third-party ``module:Class`` seam), and the round's rules and checker row for it."""

from __future__ import annotations

import shutil
from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
REPO = SUPPORT.parent.parent

_RULES = """

[benchmarks.toytask]
loadgen_model = "toytask"
checker_model = "toytask"
dataset_size = 48
performance_sample_count = 48
accuracy_metric = "acc"
reference_accuracy = 100.0
accuracy_target = 99.0
compliance_tests = ["TEST01"]

[models."toytask"]
dataset_size = 48
performance_sample_count = 48
targets = { acc = 99.0 }
offline_min_samples_per_query = 48
compliance_tests = ["TEST01"]
min_queries = { SingleStream = 1024, MultiStream = 270336, Server = 270336, Offline = 1 }
required_scenarios = { "edge" = ["SingleStream", "Offline"] }
"""


def make_task_home(home: Path, card: str = "toytask", task: str = "",
                   dynamic: bool = False) -> Path:
    """Copy the data directories to ``home`` (if not there) and add the toy task's card
    (named ``card``; ``task``: another ``module:Class``; ``dynamic``: its inputs' feature
    axis declared -1, for samples that vary) and rules; returns ``home``."""
    for name in ("run_rules", "scenarios", "reference_models"):
        if not (home / name).exists():
            shutil.copytree(REPO / name, home / name)
    text = (SUPPORT / "toy_task_card.toml").read_text(encoding="utf-8")
    text = text.replace('name = "toytask"', f'name = "{card}"')
    if task:
        text = text.replace("tests.support.toy_task:ToyTask", task)
    if dynamic:
        text = text.replace("shape = [-1, 8]", "shape = [-1, -1]")
    (home / "reference_models" / card).mkdir(exist_ok=True)
    (home / "reference_models" / card / "model.toml").write_text(text, encoding="utf-8")
    rules = home / "run_rules" / "v6.1.toml"
    rules.write_text(rules.read_text(encoding="utf-8") + _RULES.replace("toytask", card),
                     encoding="utf-8")
    return home
