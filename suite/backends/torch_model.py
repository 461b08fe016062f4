"""What the torch backend loads, and the proof that it is the card's model.

The card names the module as ``model.py:Class`` beside the ONNX file and the state dict
with its sha256. This module owns getting both from the card's directory: the module
class imported by file path, the state dict checked against its file hash before
``torch.load`` reads it, and the loaded tensors hashed again against ``weights_sha256``
(the hash ``train.py`` computed from the ONNX file's initializers), so the torch backend
provably runs the same weights as onnxruntime. Placing, casting, compiling and warming
the model is ``pytorch.py``'s.

torch itself is never imported here: the caller hands its module in, so importing this
file stays as light as importing the backend.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from suite.errors import ModelError
from suite.models import sha256_file

if TYPE_CHECKING:
    from suite.models import ModelCard


def load_module_class(card: ModelCard) -> Any:
    """``card.model.torch_module`` (``file.py:Class``), imported by file path."""
    spec_text = card.model.torch_module
    if not spec_text or ":" not in spec_text:
        raise ModelError(f"{card.card_path}: [model] torch_module must name 'file.py:Class'",
                         hint="the torch backend needs the module definition beside the ONNX file")
    file_name, class_name = spec_text.split(":", 1)
    path = card.directory / file_name
    if not path.is_file():
        raise ModelError(f"torch module file {path} is missing (named by {card.card_path})")
    # A private module name: two cards may both ship a model.py.
    module_name = f"_suite_model_{card.name}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ModelError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look the module up here
    try:
        spec.loader.exec_module(module)
        return getattr(module, class_name)
    except Exception as exc:  # the file is user code: any error means "cannot load"
        raise ModelError(f"cannot load {spec_text} from {path}: {exc!r}") from exc


def verified_state_dict_path(card: ModelCard) -> Path:
    """The card's state dict file, after its sha256 matched the card's."""
    name, expected = card.model.torch_state_dict, card.model.torch_state_dict_sha256
    if not name or not expected:
        raise ModelError(f"{card.card_path}: [model] needs torch_state_dict and "
                         "torch_state_dict_sha256 for the torch backend")
    path = card.directory / name
    if not path.is_file():
        raise ModelError(f"state dict {path} is missing (named by {card.card_path})",
                         hint="restore it from git, or retrain with the benchmark's train.py")
    actual = sha256_file(path)
    if actual != expected:
        raise ModelError(
            f"state dict {path} does not match its model card {card.card_path}: "
            f"sha256 {actual} != expected {expected}",
            hint="restore the original (git checkout -- <file>); a retrained model needs "
            "new hashes in the card, written by train.py",
        )
    return path


def weights_sha256(state: dict[str, Any]) -> str:
    """The card's ``weights_sha256``: every tensor as float32 little-endian, in order."""
    digest = hashlib.sha256()
    for tensor in state.values():
        array = tensor.detach().cpu().float().numpy()
        digest.update(np.ascontiguousarray(array, dtype="<f4").tobytes())
    return digest.hexdigest()


def load_card_model(torch: Any, card: ModelCard) -> Any:
    """The card's module with its verified weights, in eval mode, on the CPU."""
    module_cls = load_module_class(card)
    state = torch.load(verified_state_dict_path(card), map_location="cpu", weights_only=True)
    if card.model.weights_sha256 and weights_sha256(state) != card.model.weights_sha256:
        raise ModelError(f"the weights in {card.model.torch_state_dict} differ from "
                         f"weights_sha256 in {card.card_path}, the hash of the ONNX file's")
    model = module_cls()
    model.load_state_dict(state)
    return model.eval()
