"""Detection fixtures for the yolo and retinanet task tests: a COCO-format annotation file
and an accuracy log (``mlperf_log_accuracy.json``) built from known detections, pure
numpy, so that the reference's accuracy scripts and ours read the very same files.

The detections are the ground-truth boxes moved a little (true positives of varying
quality), some with the wrong category, plus false positives; one image has no ground
truth, one has ground truth but no detections (an empty response), one ground-truth box
is a crowd region, and the log holds a duplicate entry (the scripts keep the first).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np


def write_known(annotations: Path, log: Path, *, seed: int, categories: list[int],
                images: int = 12, url: str = "http://images.cocodataset.org/val2017/") -> None:
    """Write the annotation file and the accuracy log (QSL index = position in images)."""
    rng = np.random.default_rng(seed)
    entries: list[dict[str, Any]] = []
    truth: list[dict[str, Any]] = []
    records: list[dict[str, Any]] = []
    for index in range(images):
        height, width = int(rng.integers(200, 640)), int(rng.integers(200, 640))
        image_id = 5000 + 7 * index
        name = f"{image_id:012d}.jpg"
        entries.append({"id": image_id, "file_name": name, "height": height, "width": width,
                        "coco_url": url + name, "license": 1})
        rows: list[list[float]] = []
        for _ in range(0 if index == 1 else int(rng.integers(1, 5))):  # image 1: no truth
            bw, bh = rng.uniform(12, width / 2), rng.uniform(12, height / 2)
            x, y = rng.uniform(0, width - bw), rng.uniform(0, height - bh)
            category = int(rng.choice(categories))
            truth.append({"id": len(truth) + 1, "image_id": image_id, "category_id": category,
                          "bbox": [x, y, bw, bh], "area": bw * bh,
                          "iscrowd": int(index == 3 and not rows)})
            shift = rng.normal(0, 0.08, 4) * [bw, bh, bw, bh]
            found = category if rng.uniform() > 0.15 else int(rng.choice(categories))
            rows.append([(y + shift[1]) / height, (x + shift[0]) / width,
                         (y + bh + shift[3]) / height, (x + bw + shift[2]) / width,
                         rng.uniform(0.3, 1.0), found])
        for _ in range(int(rng.integers(0, 4))):  # false positives
            top, left = rng.uniform(0, 0.8, 2)
            rows.append([top, left, top + rng.uniform(0.05, 0.2), left + rng.uniform(0.05, 0.2),
                         rng.uniform(0.05, 0.6), int(rng.choice(categories))])
        if index == 4:
            rows = []  # ground truth, no detections: an empty response
        payload = np.asarray([[index, *r] for r in rows], np.float32).reshape(-1, 7)
        records.append({"qsl_idx": index, "data": payload.tobytes().hex().upper()})
    order = rng.permutation(len(records))
    logged = [records[i] for i in order] + [records[int(order[0])]]  # a duplicate, last
    for seq, record in enumerate(logged):
        record = {"seq_id": seq, **record}
        logged[seq] = record
    doc = {"info": {"description": "infersuite test fixture"},
           "licenses": [{"id": 1, "name": "CC BY", "url": "http://creativecommons.org/licenses/by/2.0/"}],
           "images": entries, "annotations": truth,
           "categories": [{"id": c, "name": f"category {c}", "supercategory": "x"}
                          for c in sorted(set(categories))]}
    annotations.parent.mkdir(parents=True, exist_ok=True)
    annotations.write_text(json.dumps(doc))
    log.write_text(json.dumps(logged))


def read_log(log: Path) -> dict[int, bytes]:
    """QSL index -> logged bytes, in log order, the first of duplicates (as the scripts)."""
    responses: dict[int, bytes] = {}
    for record in json.loads(log.read_text()):
        responses.setdefault(int(record["qsl_idx"]), bytes.fromhex(record["data"]))
    return responses
