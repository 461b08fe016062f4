"""``suite check`` knows the round's task benchmarks: each model's accuracy metric has a
target and a pattern (the official checker's ``ACC_PATTERN``) that reads the line the
reference's accuracy script prints, which is what a task's ``TaskScore.lines`` puts in
``accuracy.txt``."""

from __future__ import annotations

import re

import pytest

from suite.config.rules import load_rules
from suite.paths import find_paths

# (round, checker model, metric, an accuracy.txt line in the reference script's format,
# the value the checker must read from it)
CASES = [
    ("v6.1", "bert-99", "F1", '{"exact_match": 83.621, "f1": 90.874}', 90.874),
    ("v6.1", "bert-99.9", "F1", '{"exact_match": 83.621, "f1": 90.874}', 90.874),
    ("v6.1", "yolo-95", "mAP", "mAP=53.123%", 53.123),
    ("v6.1", "yolo-99", "mAP", "mAP=53.123%", 53.123),
    ("v6.1", "3d-unet-99", "DICE",
     "Accuracy: mean = 0.86170, kidney = 0.93470, tumor = 0.78870", 0.86170),
    ("v6.1", "3d-unet-99.9", "DICE",
     "Accuracy: mean = 0.86170, kidney = 0.93470, tumor = 0.78870", 0.86170),
    ("v6.1", "whisper", "ACCURACY", "Word Error Rate: 2.0671%, accuracy=97.9329%", 97.9329),
    ("v6.0", "retinanet", "mAP", "mAP=37.552%", 37.552),
    ("v6.0", "bert-99", "F1", '{"exact_match": 83.621, "f1": 90.874}', 90.874),
]


@pytest.mark.parametrize(("round_name", "model", "metric", "line", "value"), CASES)
def test_the_checker_reads_each_task_benchmarks_accuracy(round_name: str, model: str,
                                                         metric: str, line: str,
                                                         value: float) -> None:
    rules = load_rules(find_paths(), round_name)
    row = rules.models[model]
    assert metric in row.targets and row.targets[metric] > 0
    assert rules.submission is not None
    match = re.match(rules.submission.accuracy_patterns[metric], line)
    assert match is not None and float(match.group(match.lastindex or 1)) == value
