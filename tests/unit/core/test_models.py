"""The model card and the sha256 gate in front of every run."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from suite.errors import ModelError
from suite.models import load_card, sha256_file, verify_model_file
from suite.paths import find_paths


def test_committed_model_matches_its_card() -> None:
    card = load_card(find_paths(), "digits")
    assert verify_model_file(card) == card.model.onnx_sha256
    assert card.input.name and card.output.name
    assert card.input.sample_shape == (1, 8, 8)
    assert card.input.layout == "NCHW" and card.input.dtype == "float32"


def test_state_dict_matches_its_card() -> None:
    card = load_card(find_paths(), "digits")
    assert card.model.torch_state_dict is not None
    path = card.directory / card.model.torch_state_dict
    assert sha256_file(path) == card.model.torch_state_dict_sha256


def test_tampered_model_is_refused(suite_home: Path) -> None:
    card = load_card(find_paths(suite_home), "digits")
    data = bytearray(card.onnx_path.read_bytes())
    data[-1] ^= 0xFF
    card.onnx_path.write_bytes(bytes(data))
    with pytest.raises(ModelError) as info:
        verify_model_file(card)
    assert str(card.onnx_path) in info.value.message
    assert "sha256" in info.value.message


def test_missing_model_is_refused(suite_home: Path) -> None:
    card = load_card(find_paths(suite_home), "digits")
    card.onnx_path.unlink()
    with pytest.raises(ModelError, match="missing"):
        verify_model_file(card)


def test_card_accuracy_target_is_99_percent_of_reference() -> None:
    paths = find_paths()
    card = load_card(paths, "digits")
    rules = tomllib.loads((paths.run_rules / "v6.1.toml").read_text())["benchmarks"]["digits"]
    assert rules["reference_accuracy"] == card.accuracy.reference_fp32
    assert rules["accuracy_target"] == pytest.approx(card.accuracy.reference_fp32 * 0.99, abs=5e-4)
    assert rules["dataset_size"] == card.dataset.model_dump()["validation_samples"]



def test_model_digests_are_remembered_until_the_file_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import hashlib
    import json
    import os
    import time

    from suite import models

    monkeypatch.setattr(models, "_RACY_S", -1.0)  # the file below is seconds old
    model, cache = tmp_path / "model.onnx", tmp_path / "cache"
    model.write_bytes(b"a" * 4096)
    want = (hashlib.sha256(b"a" * 4096).hexdigest(), hashlib.md5(b"a" * 4096).hexdigest())
    assert models.model_digests(model, md5=True, cache=cache) == (*want, False)
    # The second call reads the record, not the file: a planted record proves it.
    store = cache / models.DIGESTS_FILE
    record = json.loads(store.read_text())
    (key,) = record
    record[key] = ["f" * 64, "e" * 32]
    store.write_text(json.dumps(record))
    assert models.model_digests(model, md5=True, cache=cache) == ("f" * 64, "e" * 32, True)
    assert models.model_digests(model, md5=False, cache=cache) == ("f" * 64, "", True)
    # Same size, same modification time, new bytes: the change time moved, so it is hashed
    # (rewritten until the change time moves: older kernels stamp it in 1-10 ms ticks).
    before = model.stat()
    deadline = time.monotonic() + 5
    while model.stat().st_ctime_ns == before.st_ctime_ns and time.monotonic() < deadline:
        time.sleep(0.005)
        model.write_bytes(b"b" * 4096)
    os.utime(model, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert model.stat().st_mtime_ns == before.st_mtime_ns
    assert models.model_digests(model, md5=False, cache=cache) == \
        (hashlib.sha256(b"b" * 4096).hexdigest(), "", False)


def test_a_file_changed_just_now_is_hashed_and_not_remembered(tmp_path: Path) -> None:
    from suite import models

    model, cache = tmp_path / "model.onnx", tmp_path / "cache"
    model.write_bytes(b"fresh")
    assert models.model_digests(model, md5=False, cache=cache)[1:] == ("", False)
    assert not (cache / models.DIGESTS_FILE).exists()


def test_a_run_records_whether_the_model_digest_was_read_or_remembered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from suite import models

    monkeypatch.setattr(models, "_RACY_S", -1.0)
    card = load_card(find_paths(), "resnet50")
    model = tmp_path / "resnet50.onnx"
    model.write_bytes(b"not the reference model")
    card = card.with_model_path(str(model))
    first = models.check_model(card, tmp_path / "cache")
    second = models.check_model(card, tmp_path / "cache")
    assert (first.sha256_source, second.sha256_source) == ("read", "remembered")
    assert first.sha256 == second.sha256 and first.division == second.division == "open"
