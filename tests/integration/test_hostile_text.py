"""Data files the suite reads that are not what they claim (issue 28): a model card or an
ImageNet ``val_map.txt`` that is not UTF-8, a card holding an integer too long to read,
a ``val_map.txt`` entry that reaches outside the dataset directory. Each is one line
naming the file (and line), exit 1, before LoadGen starts; never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from suite.datasets.imagenet import read_val_map
from suite.errors import DatasetError
from tests.conftest import run_cli
from tests.unit.config.test_input_validation import _refused

LATIN1 = "# réglages\n".encode("latin-1")  # é is one byte, not UTF-8's two


@pytest.mark.parametrize("benchmark", ["digits", "tinylm"])
def test_a_model_card_that_is_not_utf8(benchmark: str, suite_home: Path,
                                       runs_dir: Path) -> None:
    card = suite_home / "reference_models" / benchmark / "model.toml"
    card.write_bytes(LATIN1 + card.read_bytes())
    proc = run_cli("run", "--quick", "--benchmark", benchmark, "--runs-dir", str(runs_dir),
                   SUITE_HOME=str(suite_home))
    line = _refused(proc, str(card), "not UTF-8")
    assert "byte 3" in line
    assert list(runs_dir.iterdir()) == []


def test_a_model_card_with_an_integer_too_long_to_read(suite_home: Path,
                                                       runs_dir: Path) -> None:
    card = suite_home / "reference_models" / "digits" / "model.toml"
    card.write_text(card.read_text() + "\n[extra]\nnumber = " + "9" * 5000 + "\n")
    proc = run_cli("run", "--quick", "--runs-dir", str(runs_dir), SUITE_HOME=str(suite_home))
    _refused(proc, str(card), "integer too long")


def _imagenet(directory: Path, val_map: bytes) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "a.JPEG").write_bytes(b"")
    (directory / "val_map.txt").write_bytes(val_map)
    return directory


def _resnet50(tmp_path: Path, images: Path) -> list[str]:
    """A resnet50 run on the null backend: the dataset is read, no model is loaded (the
    empty file runs open division), so ``val_map.txt`` is the first thing to fail."""
    model = tmp_path / "model.onnx"
    model.write_bytes(b"")
    return ["--benchmark", "resnet50", "--backend", "null",
            "--set", f"data.dataset_dir={images}", "--set", f"data.model_path={model}",
            "--set", f"data.cache_dir={tmp_path / 'cache'}"]


def test_a_val_map_that_is_not_utf8(tmp_path: Path, runs_dir: Path) -> None:
    images = _imagenet(tmp_path / "imagenet", b"a.JPEG 1\nb\xe9.JPEG 2\n")
    proc = run_cli("run", "--quick", "--runs-dir", str(runs_dir), *_resnet50(tmp_path, images))
    line = _refused(proc, f"{images / 'val_map.txt'}:2", "not UTF-8")
    assert "byte 10" in line
    assert list(runs_dir.iterdir()) == []


@pytest.mark.parametrize("entry", ["/etc/passwd", "../outside.JPEG", "sub/../../x.JPEG",
                                   "./../x.JPEG"])
def test_a_val_map_entry_outside_the_dataset(entry: str, tmp_path: Path,
                                             runs_dir: Path) -> None:
    images = _imagenet(tmp_path / "imagenet", f"a.JPEG 1\n{entry} 2\n".encode())
    (tmp_path / "outside.JPEG").write_bytes(b"")  # it exists: only its place is wrong
    with pytest.raises(DatasetError) as info:
        read_val_map(images)
    assert info.value.message == (f"{images / 'val_map.txt'}:2: {entry!r} is outside the "
                                  "dataset directory")
    proc = run_cli("run", "--quick", "--runs-dir", str(runs_dir), *_resnet50(tmp_path, images))
    _refused(proc, f"{images / 'val_map.txt'}:2", repr(entry), "outside the dataset")


@pytest.mark.parametrize("label", ["9" * 5000, "\u00b2", "\u0661"],
                         ids=["5000-digits", "superscript-two", "arabic-indic-one"])
def test_a_val_map_label_that_is_not_ascii_digits(label: str, tmp_path: Path) -> None:
    images = _imagenet(tmp_path / "imagenet", f"a.JPEG 1\na.JPEG {label}\n".encode())
    with pytest.raises(DatasetError, match=r"val_map.txt:2: expected '<file name> <label>'"):
        read_val_map(images)


def test_a_val_map_subfolder_is_still_fine(tmp_path: Path) -> None:
    images = _imagenet(tmp_path / "imagenet", b"sub/b.JPEG 7\n./a.JPEG 3\n")
    (images / "sub").mkdir()
    (images / "sub" / "b.JPEG").write_bytes(b"")
    files, labels = read_val_map(images)
    assert files == [images / "sub" / "b.JPEG", images / "a.JPEG"]
    assert list(labels) == [7, 3]
