"""Train, export and verify the embedded ``digits`` benchmark model.

Reproducible end to end: the train/validation split comes from ``model.toml`` [dataset]
(so it is defined in exactly one place), all randomness is seeded, and torch runs
single-threaded with deterministic algorithms. The script then

1. saves the state dict (``digits_state_dict.pt``) and exports ONNX (``digits.onnx``,
   opset 17, input ``input``, output ``logits``, dynamic batch on axis 0);
2. checks that the ONNX file is self-contained and holds exactly the weights of the
   state-dict file (``weights_sha256``, computed independently from both files);
3. measures top-1 accuracy of the ONNX model with onnxruntime CPU on the validation
   split and checks torch and onnxruntime agree on the predicted class of every sample;
4. only if every check passes, moves the artifacts into ``--out-dir`` and writes
   ``model.toml`` there with the new sha256 values, accuracy and training settings.

Exact bytes are not expected to reproduce across torch versions or machines; the
accuracy is (to within a fraction of a percent).

Usage: ``.venv/bin/python reference_models/digits/train.py [--epochs N] [--seed S]``
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import re
import shutil
import sys
import tempfile
import time
import tomllib
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import external_data_helper, numpy_helper
from sklearn.datasets import load_digits
from torch import nn

# The same digest the suite checks the card against (run with the suite installed, as
# `make` does: `.venv/bin/python reference_models/digits/train.py`).
from suite.models import sha256_file

SCRIPT_DIR = Path(__file__).resolve().parent
CARD_NAME = "model.toml"

# Optimiser settings. They live here rather than on the command line because the card
# records them as a description string; change both together.
LEARNING_RATE = 1e-3
BATCH_SIZE = 32
OPTIMIZER_DESCRIPTION = (
    f"Adam, lr {LEARNING_RATE:g}, weight decay 0, minibatch {BATCH_SIZE}, "
    "reshuffled each epoch (seeded torch.Generator), cross-entropy loss"
)


def weights_sha256(tensors: Mapping[str, np.ndarray], order: list[str]) -> str:
    """sha256 over the tensors in ``order``, each as float32 little-endian C-order bytes.

    The same function hashes the torch state dict and the ONNX initializers, so equal
    digests mean equal weights bit for bit.
    """
    digest = hashlib.sha256()
    for name in order:
        array = tensors[name]
        if array.dtype != np.float32:
            raise TypeError(f"{name}: expected float32 weights, got {array.dtype}")
        digest.update(np.ascontiguousarray(array, dtype="<f4").tobytes())
    return digest.hexdigest()


def state_dict_arrays(state_dict: Mapping[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """State dict as numpy arrays, keeping the state-dict order."""
    return {name: t.detach().cpu().numpy() for name, t in state_dict.items()}


def load_module_class(spec_string: str, base_dir: Path) -> type[nn.Module]:
    """Load ``file.py:ClassName`` by file path, the way the torch backend will."""
    file_name, class_name = spec_string.split(":")
    spec = importlib.util.spec_from_file_location("digits_model", base_dir / file_name)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {file_name} from {base_dir}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cls = getattr(module, class_name)
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise TypeError(f"{spec_string} is not a torch.nn.Module subclass")
    return cls


def load_split(dataset: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Return (x_train, y_train, x_val, y_val) as defined by the card's [dataset] table."""
    digits = load_digits()
    pixels = np.asarray(digits.data)
    labels = np.asarray(digits.target, dtype=np.int64)
    if len(pixels) != dataset["total_samples"]:
        raise ValueError(
            f"load_digits returned {len(pixels)} samples, card says {dataset['total_samples']}"
        )
    # Cast to float32 before dividing, exactly as the card's pixel_scale comment says, so the
    # harness's preprocessing produces bit-identical inputs.
    x = (pixels.astype(np.float32) / np.float32(dataset["pixel_scale"])).reshape(-1, 1, 8, 8)
    is_val = np.arange(len(x)) % dataset["validation_modulus"] == dataset["validation_remainder"]
    if int(is_val.sum()) != dataset["validation_samples"]:
        raise ValueError(
            f"split has {int(is_val.sum())} validation samples, "
            f"card says {dataset['validation_samples']}"
        )
    return x[~is_val], labels[~is_val], x[is_val], labels[is_val]


def train(model: nn.Module, x: np.ndarray, y: np.ndarray, epochs: int, seed: int) -> float:
    """Minibatch Adam on the training split; returns the last epoch's mean loss."""
    x_t, y_t = torch.from_numpy(x), torch.from_numpy(y)
    # A dedicated generator keeps the shuffle order independent of any other RNG use.
    shuffle = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    mean_loss = float("nan")
    for epoch in range(epochs):
        order = torch.randperm(len(x_t), generator=shuffle)
        total = 0.0
        for start in range(0, len(order), BATCH_SIZE):
            idx = order[start : start + BATCH_SIZE]
            optimizer.zero_grad()
            loss = loss_fn(model(x_t[idx]), y_t[idx])
            loss.backward()
            optimizer.step()
            total += loss.item() * len(idx)
        mean_loss = total / len(x_t)
        if epoch == 0 or (epoch + 1) % 10 == 0 or epoch + 1 == epochs:
            print(f"  epoch {epoch + 1:3d}/{epochs}: train loss {mean_loss:.4f}")
    model.eval()
    return mean_loss


def export_onnx(model: nn.Module, path: Path, card: Mapping[str, Any]) -> None:
    """Export to a single self-contained ONNX file with a dynamic batch dimension."""
    input_name, output_name = card["input"]["name"], card["output"]["name"]
    dummy = torch.zeros(2, 1, 8, 8, dtype=torch.float32)
    # The TorchScript exporter (dynamo=False) is used because the dynamo exporter needs
    # onnxscript, which is not a dependency of this project; for a plain conv net the two
    # produce equivalent graphs, and this one keeps the state-dict names on initializers.
    with warnings.catch_warnings():
        # torch >= 2.9 warns that the TorchScript exporter is deprecated; that is the
        # deliberate choice above, so keep the warning out of the training log.
        warnings.filterwarnings(
            "ignore", message="You are using the legacy TorchScript-based ONNX export"
        )
        torch.onnx.export(
            model,
            (dummy,),
            str(path),
            dynamo=False,
            opset_version=card["model"]["opset"],
            input_names=[input_name],
            output_names=[output_name],
            dynamic_axes={input_name: {0: "batch"}, output_name: {0: "batch"}},
            do_constant_folding=True,
        )


def verify_onnx_weights(
    onnx_path: Path, reference: Mapping[str, np.ndarray], card: Mapping[str, Any]
) -> str:
    """Check the ONNX file is self-contained and well-formed; return its weights_sha256.

    The hash is computed from the ONNX file's own initializers, looked up by state-dict
    name (the exporter names each initializer after the parameter it came from; this
    function fails rather than guess if that ever stops being true).
    """
    proto = onnx.load(str(onnx_path), load_external_data=False)
    onnx.checker.check_model(proto, full_check=True)
    external = [
        t.name for t in proto.graph.initializer if external_data_helper.uses_external_data(t)
    ]
    if external:
        raise ValueError(f"ONNX file is not self-contained; external initializers: {external}")

    opsets = {o.domain: o.version for o in proto.opset_import}
    if opsets.get("", opsets.get("ai.onnx")) != card["model"]["opset"]:
        raise ValueError(f"unexpected opset import {opsets}")
    graph_inputs = [i.name for i in proto.graph.input]
    graph_outputs = [o.name for o in proto.graph.output]
    if graph_inputs != [card["input"]["name"]] or graph_outputs != [card["output"]["name"]]:
        raise ValueError(f"unexpected graph inputs {graph_inputs} / outputs {graph_outputs}")
    for value in (proto.graph.input[0], proto.graph.output[0]):
        batch_dim = value.type.tensor_type.shape.dim[0]
        if not batch_dim.dim_param:
            raise ValueError(f"{value.name}: batch dimension is not dynamic ({batch_dim})")

    initializers = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    missing = [name for name in reference if name not in initializers]
    extra = [name for name in initializers if name not in reference]
    if missing or extra:
        raise ValueError(
            f"ONNX initializers do not map onto the state dict: missing {missing}, extra {extra}"
        )
    for name, array in reference.items():
        if initializers[name].shape != array.shape:
            raise ValueError(
                f"{name}: ONNX shape {initializers[name].shape} != torch shape {array.shape}"
            )
    return weights_sha256(initializers, list(reference))


def ort_logits(onnx_path: Path, x: np.ndarray, card: Mapping[str, Any]) -> np.ndarray:
    """Run the ONNX model with onnxruntime CPU, single-threaded; returns logits."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    (logits,) = session.run([card["output"]["name"]], {card["input"]["name"]: x})
    return np.asarray(logits, dtype=np.float32)


def rewrite_card(text: str, values: Mapping[str, str]) -> str:
    """Replace ``key = value`` on the line that starts with each key, keeping comments.

    Targeted text substitution rather than re-serialising the TOML, so the file's
    comments and layout survive. Every key in this card is unique, so a key at the
    start of a line identifies exactly one line; anything else is an error.
    """
    for key, new_value in values.items():
        pattern = re.compile(rf'^({re.escape(key)}\s*=\s*)("[^"]*"|[^\s#]+)', re.MULTILINE)

        # A function, not a replacement string, so the value is inserted literally.
        def keep_key(match: re.Match[str], value: str = new_value) -> str:
            return f"{match.group(1)}{value}"

        text, count = pattern.subn(keep_key, text)
        if count != 1:
            raise ValueError(f"expected exactly one '{key} =' line in {CARD_NAME}, found {count}")
    return text


def parse_args(card: Mapping[str, Any]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=SCRIPT_DIR,
        help="where to write the .onnx, .pt and updated model.toml "
        "(default: this script's directory)",
    )
    parser.add_argument(
        "--epochs",
        type=int,
        default=card["training"]["epochs"],
        help="training epochs (default: [training] epochs in model.toml)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed for every RNG (default: 0)")
    return parser.parse_args()


def main() -> int:
    card_text = (SCRIPT_DIR / CARD_NAME).read_text(encoding="utf-8")
    card = tomllib.loads(card_text)
    args = parse_args(card)
    out_dir: Path = args.out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)

    # Determinism: seed every RNG, one thread (so reductions happen in a fixed order),
    # and make torch refuse any op without a deterministic implementation.
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    x_train, y_train, x_val, y_val = load_split(card["dataset"])
    dataset = card["dataset"]
    print(
        f"data: {len(x_train)} train / {len(x_val)} validation samples (validation iff "
        f"i % {dataset['validation_modulus']} == {dataset['validation_remainder']})"
    )

    model_cls = load_module_class(card["model"]["torch_module"], SCRIPT_DIR)
    model = model_cls()
    n_params = sum(p.numel() for p in model.parameters())
    print(
        f"model: {card['model']['torch_module']}, {n_params} parameters; "
        f"training {args.epochs} epochs, seed {args.seed}, torch {torch.__version__}"
    )
    t0 = time.perf_counter()
    final_loss = train(model, x_train, y_train, args.epochs, args.seed)
    train_seconds = time.perf_counter() - t0
    print(f"trained in {train_seconds:.1f} s (final train loss {final_loss:.4f})")

    with torch.no_grad():
        torch_val_logits = model(torch.from_numpy(x_val)).numpy()
        train_pred = model(torch.from_numpy(x_train)).numpy().argmax(axis=1)
    torch_train_acc = 100.0 * float(np.mean(train_pred == y_train))

    onnx_name, pt_name = card["model"]["onnx_file"], card["model"]["torch_state_dict"]
    # Build and verify everything in a scratch directory; only a fully verified set of
    # artifacts replaces the existing one, so a failed run never leaves the card's hashes
    # pointing at mismatched files.
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".train-") as tmp:
        tmp_dir = Path(tmp)
        onnx_path, pt_path = tmp_dir / onnx_name, tmp_dir / pt_name
        torch.save(model.state_dict(), pt_path)
        export_onnx(model, onnx_path, card)
        written = sorted(p.name for p in tmp_dir.iterdir())
        if written != sorted((onnx_name, pt_name)):
            raise RuntimeError(f"export wrote unexpected files: {written}")

        # Hash the weights three ways: the in-memory model, the .pt file as reloaded from
        # disk, and the ONNX file's initializers. All three must agree.
        in_memory = state_dict_arrays(model.state_dict())
        reloaded = state_dict_arrays(torch.load(pt_path, map_location="cpu", weights_only=True))
        if list(reloaded) != list(in_memory):
            raise RuntimeError(f"state-dict keys changed on reload: {list(reloaded)}")
        w_model = weights_sha256(in_memory, list(in_memory))
        w_pt = weights_sha256(reloaded, list(in_memory))
        w_onnx = verify_onnx_weights(onnx_path, reloaded, card)
        if not w_model == w_pt == w_onnx:
            raise RuntimeError(f"weights differ: model {w_model}, .pt {w_pt}, .onnx {w_onnx}")
        print(f"weights: model, {pt_name} and {onnx_name} hash identically ({w_onnx})")

        ort_val_logits = ort_logits(onnx_path, x_val, card)
        ort_pred, torch_pred = ort_val_logits.argmax(axis=1), torch_val_logits.argmax(axis=1)
        disagree = np.flatnonzero(ort_pred != torch_pred)
        max_diff = float(np.max(np.abs(ort_val_logits - torch_val_logits)))
        if disagree.size:
            raise RuntimeError(
                f"torch and onnxruntime disagree on validation samples {disagree.tolist()}"
            )
        print(
            f"torch vs onnxruntime: argmax agrees on all {len(x_val)} validation samples "
            f"(max |logit diff| {max_diff:.2e})"
        )
        # The harness may send any batch size; spot-check batch sizes 1 and 7 give the same logits.
        for batch in (1, 7):
            small = ort_logits(onnx_path, x_val[:batch], card)
            if not np.allclose(small, ort_val_logits[:batch], atol=1e-5):
                raise RuntimeError(
                    f"onnxruntime logits for batch size {batch} differ from the full batch"
                )

        accuracy = round(100.0 * float(np.mean(ort_pred == y_val)), 3)
        print(
            f"accuracy: top-1 {accuracy:.3f}% on validation (onnxruntime CPU {ort.__version__}); "
            f"train {torch_train_acc:.3f}% (torch)"
        )

        onnx_sha, pt_sha = sha256_file(onnx_path), sha256_file(pt_path)
        for name in (onnx_name, pt_name):
            os.replace(tmp_dir / name, out_dir / name)

    new_card = rewrite_card(
        card_text,
        {
            "onnx_sha256": f'"{onnx_sha}"',
            "torch_state_dict_sha256": f'"{pt_sha}"',
            "weights_sha256": f'"{w_onnx}"',
            "reference_fp32": f"{accuracy:.3f}",
            "seed": str(args.seed),
            "epochs": str(args.epochs),
            "optimizer": f'"{OPTIMIZER_DESCRIPTION}"',
        },
    )
    # Parse the result back: a substitution that broke the TOML must not go unnoticed.
    check = tomllib.loads(new_card)
    if check["model"]["onnx_sha256"] != onnx_sha or check["accuracy"]["reference_fp32"] != accuracy:
        raise RuntimeError(f"rewritten {CARD_NAME} does not read back the new values")
    card_path = out_dir / CARD_NAME
    card_path.write_text(new_card, encoding="utf-8")
    if card_path.parent != SCRIPT_DIR:
        # model.toml names model.py relative to itself; keep the out-dir self-consistent.
        shutil.copy2(SCRIPT_DIR / card["model"]["torch_module"].split(":")[0], out_dir)

    for name, sha in ((onnx_name, onnx_sha), (pt_name, pt_sha)):
        print(f"wrote {out_dir / name} ({(out_dir / name).stat().st_size} bytes, sha256 {sha})")
    print(
        f"updated {card_path}: sha256 fields, reference_fp32 = {accuracy:.3f}, "
        "seed, epochs, optimizer"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
