"""ResNet-50's fixed cost: the wall time of a quick Offline run outside its LoadGen test,
beside a plain onnxruntime script that loads the same model and the same cached crops.

On 500 synthetic JPEGs (``reference_models/resnet50/make_fixture.py``) and the fixture's
random-weight ResNet-50 ONNX file: one run builds the preprocessing cache (cold), then
``--repeats`` runs read it (warm), each followed by the plain script (imports numpy and
onnxruntime, creates the session, maps the cached crops and converts them to the model's
NCHW float32: what any harness must do before its first query), and by
``plain_loadgen.py`` (the same LoadGen test on the run's own conf files, ``session.run`` on
batches of 16). The fixed cost is ``bench_fixed_cost``'s: process start to exit minus the
test's duration in LoadGen's detail log, split into parent, child start and after LoadGen.

``--reference PATH`` (an mlcommons/inference checkout) measures the MLPerf reference
harness too (``reference_harness``: its ``main.py``, ``resnet50-onnxruntime``, Offline,
performance mode, on the same JPEGs and model, with our run's LoadGen settings): a cold
run that builds its preprocessing cache (reported apart), then one warm run per round,
right after ours, its fixed cost taken the same way; the report gives each round's value,
the per-round ratio ours / reference and their medians, and its command line. Without
it, the reference's figure is ``REFERENCE_S``, issue 40's measurement, labelled as such.

``--this REV`` measures the tree at a git revision instead of the working tree (so that
edits made while the bench runs do not enter it), as ``bench_fixed_cost`` does.

    python bench/bench_fixed_cost_resnet50.py [--repeats 3] [--images 500] [--this REV]
                                              [--compare REV] [--reference CHECKOUT]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

import reference_harness as ref  # noqa: E402
from bench_fixed_cost import (  # noqa: E402
    _compile,
    _export,
    _median,
    _one_run,
    load_average,
    plain_run,
    run_batch,
)
from bench_models import fixture_module  # noqa: E402

#: The reference harness on ResNet-50 Offline, 500 JPEGs, warm cache (without --reference).
REFERENCE_S = 3.1
REFERENCE_SOURCE = ("MLPerf reference harness, issue 40 item 15's measurement (quiet 2-core "
                    "machine, 500 JPEGs, warm cache, 2 interleaved rounds); not measured by "
                    "this bench")

PLAIN = """
import glob, sys, time
start = time.perf_counter()
import numpy as np, onnxruntime as ort
session = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
crops = np.load(glob.glob(sys.argv[2] + "/imagenet2012-val-*/crops.npy")[0], mmap_mode="r")
batch = np.ascontiguousarray(crops[:int(sys.argv[3])].transpose(0, 3, 1, 2), dtype=np.float32)
print(time.perf_counter() - start)
"""


def one_run(dataset: Path, model: Path, cache: Path, runs: Path,
            tree: Path = REPO) -> dict[str, float]:
    split = _one_run(tree, runs, ("--benchmark", "resnet50", "--dataset-path", str(dataset),
                                  "--model-path", str(model), "--set", "loadgen.expected_qps=50",
                                  "--set", f'data.cache_dir="{cache}"'))
    # loadgen.expected_qps is set: no warm-up probe, no LoadGen ceiling to measure
    return {f"{key}_s": round(value, 3) for key, value in split.items()
            if key != "ceiling_measured"}


class Reference:
    """The reference harness's runs beside ours (``reference_harness``): one per call of
    ``after``, on the LoadGen settings of our run just made."""

    def __init__(self, checkout: Path, dataset: Path, model: Path, tmp: Path) -> None:
        self.main = ref.reference_main(checkout)
        self.dataset, self.model, self.tmp = dataset, model, tmp
        self.cache = tmp / "reference-cache"
        self.rounds: list[dict[str, Any]] = []
        self.cold: dict[str, Any] = {}
        self.command, self.user_conf, self.error = "", "", ""
        self.loadgen: dict[str, Any] = {}

    def after(self, runs: Path, name: str) -> dict[str, Any] | None:
        """A reference run on the settings of our one run in ``runs``; ``None`` (and
        ``error`` set) once it has failed: the bench goes on without it."""
        if self.error:
            return None
        (test_dir,) = runs.glob("*/performance")
        # Our resnet50 run's user.conf keys are resnet50.Offline.*, the reference's model
        # name: main.py gets our run's own file (the renamed copy is only a fallback).
        conf, self.user_conf = ref.user_conf(test_dir, self.tmp / f"reference-conf-{name}")
        output = self.tmp / f"reference-{name}"
        args = ref.command(self.main, self.dataset, self.model, self.cache, conf, output,
                           run_batch(runs))
        try:
            result = ref.run(args, output)
        except RuntimeError as failed:
            self.error = f"{ref.MAIN} ({name} run): {failed}"
            return None
        self.command = ref.shell_line(args)
        self.loadgen = {"reference": ref.sample_counts(output / "mlperf_log_detail.txt"),
                        "ours": ref.sample_counts(test_dir / "mlperf_log_detail.txt")}
        return result

    def report(self, warm: list[dict[str, float]]) -> dict[str, Any]:
        if self.error or len(self.rounds) != len(warm):
            return {"reference_error": self.error or "a round did not run",
                    "reference_cold": self.cold, "reference_rounds": self.rounds}
        ratios = [round(w["fixed_s"] / r["fixed_s"], 3)
                  for w, r in zip(warm, self.rounds, strict=True)]
        fixed = _median([r["fixed_s"] for r in self.rounds])
        return {"reference_fixed_s": fixed,
                "reference_source": "measured by this bench (--reference), warm cache",
                "reference_rounds_fixed_s": [r["fixed_s"] for r in self.rounds],
                "ratio_fixed_over_reference": ratios,
                "ratio_fixed_over_reference_median": _median(ratios),
                "met": _median([w["fixed_s"] for w in warm]) < fixed,
                "reference_cold": self.cold, "reference_rounds": self.rounds,
                "reference_command": self.command, "reference_user_conf": self.user_conf,
                "reference_loadgen_counts": self.loadgen}


def measure(tmp: Path, repeats: int, images: int, compare: Path | None = None,
            this: Path = REPO, reference: Path | None = None) -> dict[str, Any]:
    """Warm runs (median of ``repeats``) of the tree ``this`` beside the plain script and
    the plain LoadGen harness; with ``compare`` (another tree), its warm runs too,
    interleaved; with ``reference`` (a checkout), the reference harness's, interleaved."""
    fixture = fixture_module()
    dataset, model, cache = tmp / "imagenet", tmp / "resnet50_random.onnx", tmp / "cache"
    dataset.mkdir(parents=True)
    fixture.write_dataset(dataset, images)
    fixture.export_model(model)
    _compile(this)
    cold = one_run(dataset, model, cache, tmp / "runs-cold", this)
    theirs = None if reference is None else Reference(reference, dataset, model, tmp)
    if theirs is not None:  # builds its preprocessing cache: reported apart
        theirs.cold = theirs.after(tmp / "runs-cold", "cold") or {}
    warm, plain, harness, other = [], [], [], []
    if compare is not None:
        _compile(compare)
        one_run(dataset, model, cache, tmp / "runs-compare-first", compare)  # hashes the model
    loads = [load_average()]
    for i in range(repeats):
        warm.append(one_run(dataset, model, cache, tmp / f"runs-{i}", this))
        if theirs is not None and (result := theirs.after(tmp / f"runs-{i}", str(i))):
            theirs.rounds.append(result)
        if compare is not None:
            other.append(one_run(dataset, model, cache, tmp / f"runs-compare-{i}", compare))
        done = subprocess.run([sys.executable, "-c", PLAIN, str(model), str(cache),
                               str(images)], capture_output=True, text=True, check=True)
        plain.append(float(done.stdout.strip()))
        (crops,) = cache.glob("imagenet2012-val-*/crops.npy")
        harness.append(plain_run(tmp / f"runs-{i}", model, crops, "ort", 16))
        loads.append(load_average())

    fixed = _median([w["fixed_s"] for w in warm])
    compared = {} if compare is None else {
        "compare": {"warm": other, "warm_fixed_s": _median([w["fixed_s"] for w in other])},
        "fixed_cost_ratio_this_to_compare": _median(
            [w["fixed_s"] / o["fixed_s"] for w, o in zip(warm, other, strict=True)])}
    referenced = ({"reference_fixed_s": REFERENCE_S, "reference_source": REFERENCE_SOURCE,
                   "met": fixed < REFERENCE_S} if theirs is None else theirs.report(warm))
    return {"images": images, "repeats": repeats, "cold": cold, "warm": warm,
            "warm_fixed_s": fixed, "plain_script_s": _median(plain),
            "ratio_fixed_over_plain": round(fixed / _median(plain), 2),
            "plain_loadgen_fixed_s": _median(harness),
            "plain_loadgen_rounds_fixed_s": [round(h, 3) for h in harness],
            "ratio_fixed_over_plain_loadgen": _median(
                [w["fixed_s"] / h for w, h in zip(warm, harness, strict=True)]),
            **referenced, "load_average": loads, **compared}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--images", type=int, default=500)
    parser.add_argument("--compare", metavar="REV",
                        help="also measure the tree at this git revision, interleaved")
    parser.add_argument("--this", metavar="REV",
                        help="measure the tree at this revision (default: the working tree)")
    parser.add_argument("--reference", metavar="PATH_TO_INFERENCE_CHECKOUT", type=Path,
                        help="also measure the MLPerf reference harness in this "
                             "mlcommons/inference checkout, interleaved")
    args = parser.parse_args()
    if args.reference is not None:
        ref.reference_main(args.reference)  # fails now, not after the cold run
    with tempfile.TemporaryDirectory(prefix="bench-fixed-r50-") as tmp:
        compare = _export(args.compare, Path(tmp) / "compare-tree") if args.compare else None
        this = _export(args.this, Path(tmp) / "this-tree") if args.this else REPO
        report = measure(Path(tmp), args.repeats, args.images, compare, this,
                         args.reference and args.reference.resolve())
        report["revision"] = args.this or "working tree"
        if args.compare:
            report["compare"]["revision"] = args.compare
        print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
