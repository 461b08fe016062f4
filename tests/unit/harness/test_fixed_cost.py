"""A run's fixed cost (issue 18): what a run and ``import suite.api`` do not pay for.

``import suite.api`` loads no numpy, framework, LoadGen or rich; resolving a run's config
imports only the chosen backend's module; a run resolves its config once; the digits
split is parsed once and staged; every command module only parses, calls and renders.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from suite import api
from suite.config.layers import KnownKeys
from suite.config.loader import ConfigRequest, load_config
from suite.config.model import DataConfig
from suite.datasets import create
from suite.datasets.digits import DigitsDataset, staged_path, validation_split
from suite.errors import ConfigError
from suite.models import load_card
from suite.paths import find_paths
from tests.conftest import REPO


def _modules_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)))"],
        cwd=REPO, capture_output=True, text=True, check=True)
    return set(done.stdout.split())


def test_import_suite_api_loads_no_heavy_module() -> None:
    loaded = _modules_after("import suite.api")
    heavy = {"numpy", "onnxruntime", "torch", "tensorrt", "mlperf_loadgen", "rich",
             "sklearn", "suite.datasets", "suite.harness.loadgen", "suite.compliance",
             "suite.accuracy", "multiprocessing"}
    assert not heavy & loaded, sorted(heavy & loaded)


def test_resolving_a_config_imports_only_the_chosen_backend() -> None:
    loaded = _modules_after(
        "from suite.config.loader import ConfigRequest\n"
        "from suite.paths import find_paths\n"
        "from suite.config.preflight import lint_and_resolve\n"
        "report, resolved = lint_and_resolve(ConfigRequest(backend='onnxruntime', "
        "quick=True, sets=['backend.onnxruntime.intra_op_threads=1']), find_paths())\n"
        "assert resolved is not None and not report.errors, report")
    assert "suite.backends.onnxruntime" in loaded
    others = {"suite.backends.pytorch", "suite.backends.trt", "suite.backends.remote",
              "suite.backends.simulated", "suite.llm.backend"}
    assert not others & loaded, sorted(others & loaded)


def test_known_keys_still_knows_every_backend_option_and_suggests_them() -> None:
    keys = KnownKeys("onnxruntime")
    assert "backend.tensorrt.precision" in keys and "loadgen.min_duration_ms" in keys
    assert "backend.tensorrt.precison" not in keys and "backend.nope.x" not in keys
    with pytest.raises(ConfigError) as raised:
        load_config(ConfigRequest(sets=["backend.tensorrt.precison=fp16"]), find_paths())
    assert raised.value.hint == "did you mean 'backend.tensorrt.precision'?"


def test_a_run_resolves_its_config_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from suite.config.rules import RuleSet, load_rules

    calls: list[str] = []

    def counting(*args: Any, **kwargs: Any) -> RuleSet:
        calls.append("load_rules")
        return load_rules(*args, **kwargs)

    monkeypatch.setattr("suite.config.loader.load_rules", counting)
    config = api.prepare(ConfigRequest(backend="null", quick=True)).config
    assert config.backend == "null" and len(calls) == 1  # the linter's resolution, reused


def test_the_digits_split_is_staged_once_and_rebuilt_when_damaged(tmp_path: Path) -> None:
    card = load_card(find_paths(), "digits")
    images, labels = validation_split(card)
    data = DataConfig(cache_dir=str(tmp_path))
    staged = staged_path(card, tmp_path)

    first = create(card, data)
    assert staged.is_file() and not list(staged.parent.glob("*.tmp*"))
    with np.load(staged) as saved:  # what a later process (the child) loads
        assert np.array_equal(saved["images"], images)
        assert np.array_equal(saved["labels"], labels)
    assert np.array_equal(first.labels, labels)

    staged.write_bytes(b"cut short")
    again = create(card, data)
    assert isinstance(again, DigitsDataset) and np.array_equal(again.labels, labels)
    again.load(range(again.total_count))
    assert np.array_equal(again.staged()[1], images)
    with np.load(staged) as saved:
        assert np.array_equal(saved["images"], images)


def test_tune_options_from_text_keep_explicit_values_under_quick() -> None:
    options = api.TuneOptions.from_text(batch_sizes="8", quick=True,
                                        given=frozenset({"batch_sizes"}), backend="null")
    assert options.batch_sizes == (8,) and options.probe_ms == 1000 and options.steps == 2
    with pytest.raises(ConfigError, match="--batch-sizes"):
        api.TuneOptions.from_text(batch_sizes="1,x")
    with pytest.raises(ConfigError, match="--worker-models: unknown gpus"):
        api.TuneOptions.from_text(worker_models="threads,gpus")


def test_command_modules_are_thin() -> None:
    """Parse, call ``suite.api``, render, exit code: a command module reaches the run
    machinery only through ``suite.api`` (never the harness, a backend or the LLM
    internals, whose imports would also slow every command's start), and none grows past
    200 lines (the demo, the longest, orchestrates four runs)."""
    modules = sorted((REPO / "suite" / "cli" / "commands").glob("*.py"))
    assert len(modules) > 10, "the command modules moved: update this test"
    long = {path.name: n for path in modules
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > 200}
    assert not long, long
    reach = {path.name: line.strip() for path in modules
             for line in path.read_text(encoding="utf-8").splitlines()
             if line.strip().startswith(("from suite.harness", "import suite.harness",
                                         "from suite.backends", "from suite.llm"))}
    assert not reach, reach


def test_suite_run_imports_no_other_command_module() -> None:
    """``suite run`` is found without importing ``suite.cli.commands``; another command's
    name, or the list (``--help``), imports them."""
    loaded = _modules_after(
        "import click\nfrom suite.cli.app import app\n"
        "assert app.get_command(click.Context(app), 'run') is not None")
    assert not {m for m in loaded if m.startswith("suite.cli.commands")}, sorted(loaded)
    loaded = _modules_after(
        "import click\nfrom suite.cli.app import app\nctx = click.Context(app)\n"
        "assert app.get_command(ctx, 'audit') is not None\n"
        "assert {'run', 'audit', 'check', 'package'} <= set(app.list_commands(ctx))\n"
        "assert app.get_command(ctx, 'nosuch') is None")
    assert "suite.cli.commands.audit" in loaded


def test_the_early_child_preloads_the_framework_the_command_line_names() -> None:
    from suite.harness.child_start import _option

    assert _option(["--quick", "--backend", "torch"], "--backend") == "torch"
    assert _option(["--benchmark=resnet50"], "--benchmark") == "resnet50"
    assert _option(["--backend"], "--backend") == "" and _option([], "--backend") == ""
    preload = "from suite.harness.child import preload_framework\n"
    assert "onnxruntime" not in _modules_after(preload)
    # no --backend: the card's default (onnxruntime for digits, torch-llm for tinylm)
    assert "onnxruntime" in _modules_after(preload + "preload_framework('digits', '')")
    for benchmark, backend in (("digits", "null"), ("tinylm", ""), ("digits", "x.y:Z")):
        loaded = _modules_after(preload + f"preload_framework({benchmark!r}, {backend!r})")
        assert not {"onnxruntime", "torch"} & loaded, (benchmark, backend)


def test_a_preloaded_model_goes_to_the_test_of_the_same_config_only() -> None:
    from suite.harness.sut import loading

    paths = find_paths()
    config = api.prepare(ConfigRequest(quick=True)).config
    assert config.backend == "onnxruntime"
    assert loading.preload(paths.home, config)
    assert loading._preloading is not None
    loading._preloading.join()
    held = loading._preloaded
    assert held is not None
    card, backend, info = loading.load_model(paths.home, config)
    assert backend is held[2][1] and info is held[2][2] and card.name == "digits"
    assert loading.load_model(paths.home, config)[1] is not backend  # taken once
    other = config.model_copy(update={"sut": config.sut.model_copy(update={"workers": 1})})
    assert loading.preload(paths.home, config)
    assert loading._preloading is not None
    loading._preloading.join()
    held = loading._preloaded
    assert held is not None and loading.load_model(paths.home, other)[1] is not held[2][1]
    assert loading._preloaded is None  # a load for another config drops it
    null = api.prepare(ConfigRequest(backend="null", quick=True)).config
    assert not loading.preload(paths.home, null) and loading._preloaded is None


def test_a_run_parent_reads_the_staged_digits_record_without_numpy(tmp_path: Path) -> None:
    """The parent needs the split's size, its dataset.json record and (scoring) its
    labels: from the record beside the staged file, with no numpy until the labels."""
    card = load_card(find_paths(), "digits")
    opened = create(card, DataConfig(cache_dir=str(tmp_path)))  # stages it, with its record
    code = ("import sys, json\nfrom pathlib import Path\nfrom suite.datasets import for_run\n"
            "from suite.config.model import DataConfig\nfrom suite.models import load_card\n"
            "from suite.paths import find_paths\n"
            "view = for_run(load_card(find_paths(), 'digits'), "
            f"DataConfig(cache_dir={str(tmp_path)!r}))\n"
            "print(json.dumps([type(view).__name__, view.total_count, view.describe(), "
            "'numpy' in sys.modules]))\n"
            "labels = view.labels\nprint(json.dumps([labels.tolist(), 'numpy' in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, check=True)
    first, second = (json.loads(line) for line in done.stdout.splitlines())
    assert first == ["StagedDigits", opened.total_count, opened.describe(), False]
    assert second == [opened.labels.tolist(), True]


def test_a_staged_record_that_does_not_match_its_file_is_not_used(tmp_path: Path) -> None:
    from suite.datasets import for_run
    from suite.datasets.staged import described, record_path

    card = load_card(find_paths(), "digits")
    data = DataConfig(cache_dir=str(tmp_path))
    assert described(card, data) is None  # nothing staged yet: the dataset is opened
    assert isinstance(for_run(card, data), DigitsDataset)
    staged = staged_path(card, tmp_path)
    assert record_path(staged).is_file() and described(card, data) is not None
    staged.write_bytes(staged.read_bytes() + b"\0")  # another file than the one recorded
    assert described(card, data) is None
    assert isinstance(for_run(card, data), DigitsDataset)  # rebuilt, and recorded again
    assert described(card, data) is not None
    record_path(staged).write_text("{not json", encoding="utf-8")
    assert described(card, data) is None
    assert described(card, DataConfig(cache_dir=str(tmp_path), dataset_dir="/x")) is None


def test_the_cli_prints_the_preflight_when_the_first_bar_shows(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``suite run`` imports rich and prints the pre-flight's findings once its child has
    its spec (the first progress bar), or at the run's end; once, in either case."""
    from suite.cli.render import LintPrinter
    from suite.config.preflight import lint_and_resolve

    assert "rich" not in _modules_after("import suite.cli.app")
    report, _ = lint_and_resolve(ConfigRequest(backend="null", quick=True), find_paths())
    printer = LintPrinter()
    printer(report)
    assert printer.errors == 0 and "pre-flight" not in capsys.readouterr().err
    printer.flush()
    printer.flush()
    assert capsys.readouterr().err.count("pre-flight: predicted 1 queries") == 1


def test_the_weight_types_are_read_as_onnx_reads_them_without_importing_it(
        tmp_path: Path) -> None:
    """The onnxruntime backend records the file's weight types at every model load; read
    from the protobuf's bytes, they are what ``onnx.load(...).graph.initializer`` gives
    (external data, float_data, int8 with float scales, index tensors not counted)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from suite.backends.onnxruntime import _WEIGHT_TYPES, weight_types
    from suite.errors import BackendError

    def onnx_reads(path: Path) -> str:
        graph = onnx.load(str(path), load_external_data=False).graph
        found = {_WEIGHT_TYPES[t.data_type] for t in graph.initializer
                 if t.data_type in _WEIGHT_TYPES}
        return "+".join(sorted(found)) or "none (the graph has no weight initializers)"

    tensors = {
        "fp16": [numpy_helper.from_array(np.ones((3, 3), np.float16), "w")],
        "int8": [numpy_helper.from_array(np.ones(3, np.int8), "w"),
                 numpy_helper.from_array(np.ones(1, np.float32), "scale"),
                 numpy_helper.from_array(np.ones(2, np.int64), "shape")],
        "bf16": [helper.make_tensor("b", TensorProto.BFLOAT16, [2], [1, 2])],
        "index": [numpy_helper.from_array(np.ones(2, np.int64), "shape")],
        "listed": [helper.make_tensor("f", TensorProto.DOUBLE, [2], [1.0, 2.0])],
    }
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1]) for n in "xy"]
    read = []
    for name, inits in tensors.items():
        model = helper.make_model(helper.make_graph(
            [helper.make_node("Identity", ["x"], ["y"])], name, io[:1], io[1:], inits))
        for external in (False, True):
            path = tmp_path / f"{name}-{external}.onnx"
            onnx.save_model(model, str(path), save_as_external_data=external,
                            location=f"{path.name}.data", size_threshold=0)
            read.append((name, weight_types(path)))
            assert read[-1][1] == onnx_reads(path), read[-1]
    assert dict(read) == {"fp16": "fp16", "int8": "fp32+int8", "bf16": "bf16", "listed": "fp64",
                          "index": "none (the graph has no weight initializers)"}
    digits = REPO / "reference_models" / "digits" / "digits.onnx"
    assert weight_types(digits) == onnx_reads(digits) == "fp32"
    for bad in (b"", b"\x3a\xff\xff", b"no protobuf \xff\xff"):
        (tmp_path / "bad.onnx").write_bytes(bad)
        with pytest.raises(BackendError, match="cannot read the weight types"):
            weight_types(tmp_path / "bad.onnx")
    loaded = _modules_after("from pathlib import Path\n"
                            "from suite.backends.onnxruntime import weight_types\n"
                            f"assert weight_types(Path({str(digits)!r})) == 'fp32'")
    assert "onnx" not in loaded and "google.protobuf" not in loaded
