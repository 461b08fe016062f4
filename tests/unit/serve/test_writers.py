"""What ``suite serve --write-triton-repo`` / ``--write-kserve-manifest`` write, in process:
the model repository and the manifest follow the card, nothing else."""

from __future__ import annotations

from pathlib import Path

from suite.models import load_card
from suite.paths import find_paths
from suite.serve.writers import kserve_manifest, triton_config, write_triton_repo

CARD = load_card(find_paths(), "digits")


def test_the_triton_config_takes_names_types_and_dims_from_the_card() -> None:
    config = triton_config(CARD, max_batch_size=32, instances=2)
    assert f'name: "{CARD.name}"' in config and 'platform: "onnxruntime_onnx"' in config
    assert "max_batch_size: 32" in config
    # dims exclude the batch axis, as Triton wants them
    assert f'name: "{CARD.input.name}", data_type: TYPE_FP32, dims: [ 1, 8, 8 ]' in config
    assert f'name: "{CARD.output.name}", data_type: TYPE_FP32, dims: [ 10 ]' in config
    assert "count: 2" in config


def test_the_repository_holds_the_config_and_the_cards_exact_model(tmp_path: Path) -> None:
    written = write_triton_repo(CARD, tmp_path / "repo", max_batch_size=8)
    config, onnx = written
    assert config == tmp_path / "repo" / CARD.name / "config.pbtxt"
    assert "max_batch_size: 8" in config.read_text()
    assert onnx == tmp_path / "repo" / CARD.name / "1" / "model.onnx"
    assert onnx.read_bytes() == CARD.onnx_path.read_bytes()


def test_the_manifest_pins_its_replicas_and_speaks_the_v2_protocol() -> None:
    manifest = kserve_manifest(CARD, "s3://bucket/repo", replicas=3)
    assert f"name: {CARD.name}-v2" in manifest
    assert "minReplicas: 3" in manifest and "maxReplicas: 3" in manifest
    assert "protocolVersion: v2" in manifest and "storageUri: s3://bucket/repo" in manifest
    assert "name: other" in kserve_manifest(CARD, "s3://b", replicas=1, name="other")
