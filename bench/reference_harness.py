"""The MLPerf reference harness, run from a user's checkout and timed like our runs.

``bench_fixed_cost_resnet50 --reference PATH`` runs ``PATH/vision/classification_and_
detection/python/main.py`` (mlcommons/inference; nothing of it is copied here) with the
``resnet50-onnxruntime`` profile: performance mode, Offline, on the bench's fixture
JPEGs and model, with ``--cache 1 --cache_dir`` (its preprocessing cache: one ``.npy``
of NCHW float32 per image, written by a first, cold run and read by the warm ones), our
run's ``sut.max_batch_size`` as ``--max-batchsize`` and its default ``--threads``
(``os.cpu_count()``). Its fixed cost is measured exactly as ours is
(``bench_fixed_cost``): wall time from process start to exit minus the span of the
``mlperf_log_detail.txt`` it writes, split by that file's mtime into the time before
LoadGen's first record (interpreter, imports, dataset listing, model load, its 5
warm-up predictions) and after the last (its results.json, teardown).

LoadGen settings: main.py reads one ``--user_conf`` (LoadGen adds its embedded
``mlperf.conf``); ``user_conf`` hands it our run's own ``user.conf`` where every key
names the reference's model (``resnet50``) and ``Offline`` (or ``*``), and otherwise
writes an equivalent file with the keys renamed; the report says which. Our run's
``mlperf.conf`` (the round's fixed values and seeds) is not passed: main.py has no option
for a second file, and the embedded one holds the same round's values.

Digits (``bench_fixed_cost --reference``): main.py has no digits dataset, so the bench
converts ours (``write_layout``: the cached validation arrays our run feeds the model,
float32 NCHW, one ``.npy`` per sample plus a ``val_map.txt``) into the layout of main.py's
generic ``--use_preprocessed_dataset`` mode, read by its ``imagenet_pytorch`` dataset
(``Imagenet`` without preprocessing, ``PostProcessArgMax(offset=0)``), and
``DigitsReference`` runs it with ``--model-name digits`` (our run's user.conf keys fit it),
explicit ``--inputs/--outputs`` and our run's QSL performance count.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import numpy as np
from bench_fixed_cost import _loadgen_span_s, _median, _wall

#: The harness inside an mlcommons/inference checkout.
MAIN = Path("vision") / "classification_and_detection" / "python" / "main.py"
#: The profile main.py runs, and the LoadGen model name it passes to ``FromConfig``.
PROFILE, MODEL_NAME = "resnet50-onnxruntime", "resnet50"
_KEY = re.compile(r"^\s*([^\s#=]+)\.([^\s#.=]+)\.([^\s#=]+)\s*=\s*(.*)$")


def reference_main(checkout: Path) -> Path:
    """The reference's ``main.py`` in ``checkout``; a clear error when it is not there."""
    main = checkout / MAIN
    if not main.is_file():
        raise SystemExit(f"--reference {checkout}: no {MAIN} (an mlcommons/inference "
                         "checkout is expected)")
    return main


def user_conf(test_dir: Path, into: Path, model_name: str = MODEL_NAME) -> tuple[Path, str]:
    """(the user.conf to give main.py, where it comes from) for our run in ``test_dir``:
    our run's own file when all its keys fit ``model_name.Offline``, else an equivalent
    file written into ``into`` with the model and scenario renamed."""
    ours = test_dir / "user.conf"
    lines = ours.read_text(encoding="utf-8").splitlines()
    keys = [match.groups() for line in lines if (match := _KEY.match(line))]
    if all(model in (model_name, "*") and scenario in ("Offline", "*")
           for model, scenario, _, _ in keys):
        return ours, f"our run's own user.conf (its keys name {model_name}.Offline)"
    into.mkdir(parents=True, exist_ok=True)
    written = into / "user.conf"
    written.write_text("".join(f"{model_name}.Offline.{key} = {value}\n"
                               for _, _, key, value in keys), encoding="utf-8")
    return written, (f"written by the bench: our run's user.conf keys renamed to "
                     f"{model_name}.Offline (ours: {sorted({k[0] for k in keys})})")


def command(main: Path, dataset: Path, model: Path, cache: Path, conf: Path,
            output: Path, batch: int) -> list[str]:
    """main.py's command line (the interpreter is this bench's: the same venv as ours)."""
    return [sys.executable, str(main), "--profile", PROFILE, "--scenario", "Offline",
            "--dataset-path", str(dataset), "--model", str(model), "--cache", "1",
            "--cache_dir", str(cache), "--user_conf", str(conf), "--output", str(output),
            "--max-batchsize", str(batch)]


def failure_line(stderr: str) -> str:
    """One line out of a failed run's stderr: the innermost frame and the exception."""
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', stderr)
    last = stderr.strip().splitlines()[-1] if stderr.strip() else "(no stderr)"
    if not frames:
        return last
    path, line, function = frames[-1]
    return f"{path}:{line} ({function}): {last}"


def run(args: list[str], output: Path) -> dict[str, Any]:
    """One reference run (a fresh process, cwd ``output``): its fixed cost, split, and
    what its own log says of its dataset listing. Raises ``RuntimeError`` with
    ``failure_line`` when it fails."""
    output.mkdir(parents=True, exist_ok=True)
    seconds, epoch, done = _wall(args, output)
    detail = output / "mlperf_log_detail.txt"
    if done.returncode or not detail.is_file():
        raise RuntimeError(f"exit {done.returncode}: {failure_line(done.stderr)}")
    span = _loadgen_span_s(detail)
    loadgen_end = detail.stat().st_mtime - epoch
    listing = re.search(r"loaded (\d+) images.*took=([\d.]+)sec", done.stderr)
    result: dict[str, Any] = {
        "total_s": seconds, "fixed_s": seconds - span, "loadgen_span_s": span,
        "before_loadgen_s": loadgen_end - span, "after_loadgen_s": seconds - loadgen_end,
        "dataset_listing_s": float(listing.group(2)) if listing else None}
    result = {k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()}
    result["images_listed"] = int(listing.group(1)) if listing else None
    result["warnings"] = sorted({line.strip()[:200] for line in done.stderr.splitlines()
                                 if "warn" in line.lower()})[:5]
    # main.py logs a failed prediction ("thread: failed on contentid") and answers LoadGen
    # with empty responses: the test completes, the run is not a real one.
    result["errors"] = sorted({line.strip()[:200] for line in done.stderr.splitlines()
                               if line.startswith("ERROR")})[:5]
    return result


#: The detail-log records a reference run must share with ours to be the same test, done.
SAME_TEST = ("effective_samples_per_query", "effective_target_qps",
             "effective_performance_sample_count", "qsl_reported_total_count",
             "qsl_reported_performance_count", "effective_qsl_rng_seed",
             "effective_sample_index_rng_seed", "generated_samples_per_query",
             "result_validity", "num_errors")


def sample_counts(detail_log: Path) -> dict[str, Any]:
    """What LoadGen ran in a test (ours or the reference's, to compare): its counts, read
    by the suite's own detail-log parser (the first value of a repeated key, as the
    checker reads it)."""
    from suite.logs import parse_detail_log

    wanted = ("samples_per_query", "min_duration", "min_query_count", "qsl_reported_total_count",
              "qsl_reported_performance_count", "effective_min_duration_ms",
              "effective_min_query_count", "effective_samples_per_query", *SAME_TEST)
    values = parse_detail_log(detail_log).values
    return {key: values[key] for key in wanted if key in values}


def shell_line(args: list[str]) -> str:
    """``args`` as one shell line (the report's copy of the reference's command)."""
    return shlex.join(args)


#: main.py's dataset for a preprocessed layout: ``Imagenet`` reading ``NAME.npy`` per line
#: of ``val_map.txt`` (no preprocessing), ``PostProcessArgMax(offset=0)`` on the logits.
PREPROCESSED_DATASET = "imagenet_pytorch"
LAYOUT_SOURCE = ("converted by this bench (not a dataset main.py ships): our cached digits "
                 "validation arrays, exactly as our run feeds the model (float32 NCHW, "
                 "one .npy of shape {shape} per sample, in our order), plus a val_map.txt of "
                 "their labels, in main.py's --use_preprocessed_dataset layout")


def write_layout(data: Path, into: Path) -> dict[str, Any]:
    """Our digits validation arrays (``data``: the cached ``.npz`` our runs read) as
    main.py's preprocessed-dataset layout in ``into``: what ``LAYOUT_SOURCE`` says."""
    with np.load(data) as arrays:  # as plain_loadgen.load and our DigitsDataset read it
        images = np.ascontiguousarray(arrays["images"], dtype=np.float32)
        labels = arrays["labels"]
    into.mkdir(parents=True)
    lines = []
    for number, (image, label) in enumerate(zip(images, labels, strict=True)):
        np.save(into / f"{number:05d}.npy", image)
        lines.append(f"{number:05d} {int(label)}\n")
    (into / "val_map.txt").write_text("".join(lines), encoding="utf-8")
    return {"path": str(into), "samples": len(images), "dtype": str(images.dtype),
            "sample_shape": list(images.shape[1:]), "from": str(data),
            "source": LAYOUT_SOURCE.format(shape=tuple(images.shape[1:]))}


def io_names(model: Path) -> tuple[str, str]:
    """(input, output) names of a one-input, one-output ONNX model (digits: input, logits)."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    (given,), (taken,) = session.get_inputs(), session.get_outputs()
    return given.name, taken.name


class DigitsReference:
    """main.py on the digits layout, one run per call of ``after`` on the LoadGen settings
    of our run just made (its user.conf, batch and QSL counts)."""

    def __init__(self, checkout: Path, data: Path, model: Path, tmp: Path) -> None:
        self.main, self.model, self.tmp = reference_main(checkout), model, tmp
        self.layout = write_layout(data, tmp / "reference-digits")
        self.inputs, self.outputs = io_names(model)
        self.rounds: list[dict[str, Any]] = []
        self.command, self.user_conf, self.error = "", "", ""
        self.checks: list[dict[str, Any]] = []

    def command_for(self, test_dir: Path, conf: Path, output: Path, batch: int) -> list[str]:
        spec = json.loads((test_dir / "child_spec.json").read_text(encoding="utf-8"))
        if int(spec["qsl_total"]) != self.layout["samples"]:
            raise RuntimeError(f"our run's QSL holds {spec['qsl_total']} samples, the layout "
                               f"{self.layout['samples']}")
        return [sys.executable, str(self.main), "--dataset", PREPROCESSED_DATASET,
                "--use_preprocessed_dataset", "--dataset-path", self.layout["path"],
                "--preprocessed_dir", self.layout["path"], "--backend", "onnxruntime",
                "--model", str(self.model), "--model-name", spec["settings"]["loadgen_model"],
                "--inputs", self.inputs, "--outputs", self.outputs, "--scenario", "Offline",
                "--user_conf", str(conf), "--output", str(output), "--max-batchsize",
                str(batch), "--performance-sample-count", str(spec["qsl_performance"])]

    def after(self, runs: Path, name: str, batch: int) -> dict[str, Any] | None:
        """A reference run beside our one run in ``runs``; ``None`` (``error`` set) once
        one has failed or was not the same test as ours."""
        if self.error:
            return None
        (test_dir,) = runs.glob("*/performance")
        model_name = json.loads((test_dir / "child_spec.json").read_text(
            encoding="utf-8"))["settings"]["loadgen_model"]
        # Our digits run's user.conf keys are digits.Offline.*: main.py gets --model-name
        # digits and our file as it is (a renamed copy only if they did not fit).
        conf, self.user_conf = user_conf(test_dir, self.tmp / f"reference-conf-{name}",
                                         model_name)
        output = self.tmp / f"reference-{name}"
        try:
            args = self.command_for(test_dir, conf, output, batch)
            result = run(args, output)
            theirs = sample_counts(output / "mlperf_log_detail.txt")
            ours = sample_counts(test_dir / "mlperf_log_detail.txt")
            differs = {key: [ours.get(key), theirs.get(key)] for key in SAME_TEST
                       if ours.get(key) != theirs.get(key)}
            # A busy machine can make either INVALID (latency): that is not a different test.
            differs.pop("result_validity", None)
            if differs or result["errors"] or not (output / "results.json").is_file():
                raise RuntimeError(f"not the same completed test as ours: {differs} "
                                   f"{result['errors']}")
        except RuntimeError as failed:
            self.error = f"{MAIN} ({name} run): {failed}"
            return None
        self.command = shell_line(args)
        self.checks.append({"round": name, "same_as_ours": list(SAME_TEST),
                            "reference": {k: theirs.get(k) for k in SAME_TEST}})
        return result

    def report(self, ours: list[float]) -> dict[str, Any]:
        """The report's reference entries, against our rounds' fixed costs ``ours``."""
        if self.error or len(self.rounds) != len(ours):
            return {"reference_error": self.error or "a round did not run",
                    "reference_dataset": self.layout, "reference_rounds": self.rounds}
        ratios = [round(o / r["fixed_s"], 3) for o, r in zip(ours, self.rounds, strict=True)]
        return {"reference_fixed_s": _median([r["fixed_s"] for r in self.rounds]),
                "reference_source": "measured by this bench (--reference): main.py "
                                    "unmodified, on a layout the bench converted",
                "reference_rounds_fixed_s": [r["fixed_s"] for r in self.rounds],
                "ratio_fixed_over_reference": ratios,
                "ratio_fixed_over_reference_median": _median(ratios),
                "reference_rounds": self.rounds, "reference_command": self.command,
                "reference_user_conf": self.user_conf, "reference_dataset": self.layout,
                "reference_same_test": self.checks}
