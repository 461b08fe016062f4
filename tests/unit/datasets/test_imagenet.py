"""ImageNet preprocessing, its cache and val_map.txt, checked against independent math.

The fixture images come from ``reference_models/resnet50/make_fixture.py`` (images
only; no model). Expected values are computed here with Pillow (a different JPEG
decoder) and an area-resampling written from its definition in numpy, not with the
suite's OpenCV code.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from PIL import Image

from suite.config.model import DataConfig
from suite.datasets import cache as cache_module
from suite.datasets import create
from suite.datasets.cache import CropCache
from suite.datasets.imagenet import read_val_map
from suite.datasets.preprocess import CropParams, NormalizeParams, decode_and_crop, normalize
from suite.errors import DatasetError
from suite.models import load_card
from suite.paths import find_paths
from suite.postprocess import make_postprocess
from tests.conftest import REPO

MEANS = np.array([123.68, 116.78, 103.94], dtype=np.float32)


def _fixture_module() -> ModuleType:
    path = REPO / "reference_models" / "resnet50" / "make_fixture.py"
    spec = importlib.util.spec_from_file_location("make_fixture", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FIXTURE = _fixture_module()


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("imagenet") / "imagenet"
    FIXTURE.write_dataset(directory)
    return directory


def _image(directory: Path, index: int) -> Path:
    return directory / f"ILSVRC2012_val_{index + 1:08d}.JPEG"


def _area_weights(size_in: int, size_out: int) -> np.ndarray[Any, Any]:
    """Row j averages input cells [j*s, (j+1)*s) weighted by overlap (s = in/out >= 1)."""
    scale = size_in / size_out
    weights = np.zeros((size_out, size_in))
    for j in range(size_out):
        start, end = j * scale, (j + 1) * scale
        for i in range(int(np.floor(start)), min(int(np.ceil(end)), size_in)):
            weights[j, i] = max(0.0, min(end, i + 1) - max(start, i)) / scale
    return weights


def _expected_crop(path: Path) -> np.ndarray[Any, Any]:
    """Independent reference: Pillow decode, numpy area resize, the reference's crop."""
    rgb = np.asarray(Image.open(path).convert("RGB"), dtype=np.float64)
    height, width = rgb.shape[:2]
    if height > width:
        new_h, new_w = int(256 * height / width), 256
    else:
        new_h, new_w = 256, int(256 * width / height)
    assert new_h <= height and new_w <= width, "only downscaling cases are compared exactly"
    wh, ww = _area_weights(height, new_h), _area_weights(width, new_w)
    rows = np.tensordot(wh, rgb, axes=(1, 0))  # (new_h, width, 3)
    resized = np.tensordot(rows, ww, axes=(1, 1)).transpose(0, 2, 1)  # (new_h, new_w, 3)
    top, left = int((new_h - 224) / 2), int((new_w - 224) / 2)
    return resized[top:top + 224, left:left + 224]


# index: (500x375 RGB), (375x500 RGB), (500x333 gray), (640x480 CMYK), (333x500 RGB),
# (800x600 CMYK): non-square both ways, grayscale and CMYK, all downscaled.
@pytest.mark.parametrize("index", [0, 1, 9, 7, 8, 11])
def test_preprocessing_matches_independent_math(images: Path, index: int) -> None:
    path = _image(images, index)
    crop = decode_and_crop(path, CropParams())
    assert crop.shape == (224, 224, 3) and crop.dtype == np.uint8
    expected = _expected_crop(path)
    diff = np.abs(crop.astype(np.float64) - expected)
    # Different JPEG decoders and rounding: a few levels at most, ~0 on average;
    # OpenCV's CMYK->RGB rounds one level above Pillow's everywhere.
    mean_tolerance = 1.2 if FIXTURE.IMAGES[index][2] == "CMYK" else 0.6
    assert diff.max() <= 4 and diff.mean() < mean_tolerance, (diff.max(), diff.mean())

    batch = normalize(crop[None], NormalizeParams())
    assert batch.shape == (1, 3, 224, 224) and batch.dtype == np.float32
    # Channel order RGB, channel-first, means subtracted from 0-255 values (no scaling).
    for channel in range(3):
        np.testing.assert_array_equal(
            batch[0, channel], crop[:, :, channel].astype(np.float32) - MEANS[channel])
    red = FIXTURE.LABEL_BASE + FIXTURE.LABEL_STEP * index
    assert abs(float(batch[0, 0].mean()) - (red - 123.68)) < 2.0


@pytest.mark.parametrize("index", [3, 13])  # 64x48 RGB and 40x30 gray: upscaled
def test_tiny_images_are_upscaled_without_flips(images: Path, index: int) -> None:
    crop = decode_and_crop(_image(images, index), CropParams())
    assert crop.shape == (224, 224, 3)
    batch = normalize(crop[None], NormalizeParams())[0]
    red = FIXTURE.LABEL_BASE + FIXTURE.LABEL_STEP * index
    # Red is flat in the source; JPEG chroma bleeds a little into it on tiny images.
    assert abs(float(batch[0].mean()) + 123.68 - red) < 2.0
    if index == 13:  # grayscale: three equal channels
        np.testing.assert_array_equal(crop[..., 0], crop[..., 1])
        np.testing.assert_array_equal(crop[..., 1], crop[..., 2])
    else:  # green rises left to right in the source: not flipped or transposed
        green = crop[..., 1].astype(np.float64).mean(axis=0)
        assert green[-1] - green[0] > 100 and np.all(np.diff(green) >= -2)


def test_nhwc_layout_is_the_transpose(images: Path) -> None:
    crop = decode_and_crop(_image(images, 0), CropParams())[None]
    nchw = normalize(crop, NormalizeParams(layout="NCHW"))
    nhwc = normalize(crop, NormalizeParams(layout="NHWC"))
    assert nhwc.shape == (1, 224, 224, 3) and nhwc.flags.c_contiguous
    np.testing.assert_array_equal(nhwc, nchw.transpose(0, 2, 3, 1))


def _copy(images: Path, tmp_path: Path) -> Path:
    target = tmp_path / "imagenet"
    shutil.copytree(images, target)
    return target


def test_cache_is_reused_and_keyed_by_parameters(images: Path, tmp_path: Path) -> None:
    files, _ = read_val_map(images)
    root = tmp_path / "cache"
    first = CropCache(root, "imagenet2012-val", files, CropParams()).ensure(workers=2)
    assert (first.preprocessed, first.reused, first.total) == (len(files), 0, len(files))
    crops = CropCache(root, "imagenet2012-val", files, CropParams())
    stamp = crops.crops_path.stat().st_mtime_ns
    again = crops.ensure(workers=2)
    assert (again.preprocessed, again.reused) == (0, len(files))
    assert crops.crops_path.stat().st_mtime_ns == stamp  # not rewritten
    np.testing.assert_array_equal(crops.open()[5], decode_and_crop(files[5], CropParams()))

    changed = CropCache(root, "imagenet2012-val", files, CropParams(resize_short_side=288))
    assert changed.directory != crops.directory
    assert changed.ensure(workers=1).preprocessed == len(files)


def test_an_interrupted_build_resumes(images: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    files, _ = read_val_map(images)
    monkeypatch.setattr(cache_module, "_CHUNK", 4)
    calls = []

    def interrupt(done: int, total: int | None, elapsed: float) -> None:
        calls.append(done)
        if done >= 4:
            raise KeyboardInterrupt

    cache = CropCache(tmp_path, "imagenet2012-val", files, CropParams())
    with pytest.raises(KeyboardInterrupt):
        cache.ensure(workers=1, progress=interrupt)
    assert not cache.complete()
    report = CropCache(tmp_path, "imagenet2012-val", files, CropParams()).ensure(workers=2)
    assert 0 < report.reused < len(files)
    assert report.preprocessed == len(files) - report.reused
    np.testing.assert_array_equal(cache.open()[-1], decode_and_crop(files[-1], CropParams()))


def test_a_corrupt_image_is_named_and_nothing_is_skipped(images: Path, tmp_path: Path) -> None:
    directory = _copy(images, tmp_path)
    bad = _image(directory, 2)
    bad.write_bytes(b"\xff\xd8 this is not a JPEG")
    empty = _image(directory, 4)
    empty.write_bytes(b"")
    files, _ = read_val_map(directory)
    cache = CropCache(tmp_path / "cache", "imagenet2012-val", files, CropParams())
    with pytest.raises(DatasetError) as info:
        cache.ensure(workers=2)
    assert str(bad) in info.value.message and str(empty) in info.value.message
    assert "2 image(s)" in info.value.message
    assert not cache.complete()


def test_val_map_problems_name_the_file(images: Path, tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="does not exist"):
        read_val_map(tmp_path / "nowhere")
    directory = _copy(images, tmp_path)
    _image(directory, 6).unlink()
    with pytest.raises(DatasetError) as info:
        read_val_map(directory)
    assert str(_image(directory, 6)) in info.value.message
    (directory / "val_map.txt").write_text("ILSVRC2012_val_00000001.JPEG\n")
    with pytest.raises(DatasetError, match=r"val_map.txt:1: expected"):
        read_val_map(directory)
    (directory / "val_map.txt").unlink()
    with pytest.raises(DatasetError, match=r"val_map\.txt does not exist"):
        read_val_map(directory)


def test_dataset_loads_normalized_samples_in_val_map_order(images: Path, tmp_path: Path) -> None:
    card = load_card(find_paths(), "resnet50")
    data = DataConfig(dataset_dir=str(images), cache_dir=str(tmp_path), preprocess_workers=1)
    dataset = create(card, data)
    assert dataset.total_count == len(FIXTURE.IMAGES)
    assert list(dataset.labels[:4]) == [0, 1, 2, 4]  # line 4 carries a wrong label
    dataset.load([3, 0])
    batch = dataset.gather(np.array([0, 3]), dataset.new_buffer(2))
    assert batch.shape == (2, 3, 224, 224) and batch.dtype == np.float32
    expected = normalize(decode_and_crop(_image(images, 3), CropParams())[None],
                         NormalizeParams())[0]
    np.testing.assert_array_equal(batch[1], expected)


def test_class_index_postprocess_applies_the_label_offset() -> None:
    card = load_card(find_paths(), "resnet50")
    postprocess, dtype = make_postprocess(card)
    assert dtype == np.float32  # what accuracy-imagenet.py decodes by default
    out = postprocess(np.array([1, 1000, 5], dtype=np.int64))
    np.testing.assert_array_equal(out, np.array([0, 999, 4], dtype=np.float32))
    assert out.dtype == np.float32 and out.flags.c_contiguous


def test_resnet50_card_matches_the_round() -> None:
    import tomllib

    paths = find_paths()
    card = load_card(paths, "resnet50")
    rules = tomllib.loads((paths.run_rules / "v6.1.toml").read_text())["benchmarks"]["resnet50"]
    assert card.model.source == "user" and card.model.onnx_md5
    assert card.input.name == "input_tensor:0" and card.input.layout == "NCHW"
    assert card.output.name == "ArgMax:0" and card.output.dtype == "int64"
    assert card.postprocess.label_offset == -1
    assert card.accuracy.reference_fp32 == rules["reference_accuracy"] == 76.46
    assert rules["accuracy_target"] == pytest.approx(76.46 * 0.99, abs=1e-9)
    assert card.dataset.model_dump()["total_samples"] == rules["dataset_size"] == 50000
    assert rules["performance_sample_count"] == 1024
    assert rules["scenarios"]["server"]["latency_bound_ms"] == 15
    assert rules["scenarios"]["offline"]["min_query_count"] == 24576


def test_schema_1_results_still_load_as_closed_division(tmp_path: Path) -> None:
    from suite.results import SCHEMA_VERSION, RunResult

    old = {"schema_version": 1, "run_id": "r", "run_dir": str(tmp_path), "created_utc": "t",
           "benchmark": "digits", "scenario": "offline", "mode": "performance",
           "backend": "null", "round": "v6.1", "model_sha256": "0" * 64, "submittable": False,
           "non_submittable_reasons": [], "status": "VALID", "exit_code": 0, "tests": []}
    path = tmp_path / "result.json"
    path.write_text(json.dumps(old))
    result = RunResult.load(path)
    assert SCHEMA_VERSION == 2 and result.schema_version == 2
    assert result.division == "closed" and result.division_reason == ""
