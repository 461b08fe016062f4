"""Build a small, real ResNet-50 test fixture: an ImageNet-format directory and a model.

    python reference_models/resnet50/make_fixture.py --out-dir /tmp/r50

writes ``/tmp/r50/imagenet/`` (JPEGs of different sizes and aspect ratios, RGB,
grayscale and CMYK, plus ``val_map.txt``) and ``/tmp/r50/resnet50_fixture.onnx``: a
ResNet-50 v1.5 with fixed-seed random weights and the official model's interface
(input ``input_tensor:0`` NCHW float32; outputs ``ArgMax:0`` int64 and
``softmax_tensor:0`` over 1001 classes). Nothing here is committed: CI builds it.

Known answers. Each image's red channel is one flat value, ``LABEL_BASE + LABEL_STEP
* label`` (green and blue carry a pattern), so preprocessing keeps the mean of
channel 0 at ``value - 123.68``. The model's last layer is replaced by an oracle
that reads that mean back and puts the class at ``label + 1`` (1001 classes, 0 =
background); the random ResNet-50 trunk still runs and adds a bounded 1e-3 term, so
timing is real and the answer is fixed. A harness that forgets the label offset of
-1 scores 0 %; ``WRONG_LABELS`` lines of ``val_map.txt`` carry a wrong label, so the
exact expected top-1 is ``(count - len(WRONG_LABELS)) / count``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from PIL import Image

LABEL_BASE = 40
LABEL_STEP = 4
WRONG_LABELS = (3, 7)
MEAN_R = 123.68

#: (width, height, mode) of each image; labels are the positions.
IMAGES: list[tuple[int, int, str]] = [
    (500, 375, "RGB"), (375, 500, "RGB"), (300, 300, "RGB"), (64, 48, "RGB"),
    (1024, 200, "RGB"), (200, 900, "RGB"), (256, 256, "L"), (640, 480, "CMYK"),
    (333, 500, "RGB"), (500, 333, "L"), (224, 224, "RGB"), (800, 600, "CMYK"),
    (257, 1000, "RGB"), (40, 30, "L"), (500, 500, "RGB"), (480, 640, "CMYK"),
    (612, 459, "RGB"), (350, 260, "RGB"), (1200, 800, "RGB"), (240, 320, "RGB"),
]


def image_array(width: int, height: int, label: int) -> np.ndarray:  # type: ignore[type-arg]
    """uint8 RGB (height, width, 3): flat red encodes the label, a pattern elsewhere."""
    rgb = np.empty((height, width, 3), dtype=np.uint8)
    rgb[..., 0] = LABEL_BASE + LABEL_STEP * label
    ys, xs = np.mgrid[0:height, 0:width]
    rgb[..., 1] = (xs * 255 // max(width - 1, 1)).astype(np.uint8)
    rgb[..., 2] = ((ys // 16 + xs // 16) % 2 * 160 + 40).astype(np.uint8)
    return rgb


def write_dataset(directory: Path, count: int = len(IMAGES)) -> list[int]:
    """Write ``count`` JPEGs and ``val_map.txt``; return the true labels. Past the first
    ``len(IMAGES)`` the images repeat (a different file each, the same labels), for
    runs that need a realistic number of samples."""
    directory.mkdir(parents=True, exist_ok=True)
    lines, labels = [], []
    for position in range(count):
        label = position % len(IMAGES)
        width, height, mode = IMAGES[label]
        name = f"ILSVRC2012_val_{position + 1:08d}.JPEG"
        image = Image.fromarray(image_array(width, height, label))
        if mode == "L":  # gray must still carry the label in "red": make it flat
            image = Image.new("L", (width, height), LABEL_BASE + LABEL_STEP * label)
        elif mode == "CMYK":
            image = image.convert("CMYK")
        image.save(directory / name, format="JPEG", quality=95)
        listed = (label + 1) % len(IMAGES) if position in WRONG_LABELS else label
        lines.append(f"{name} {listed}")
        labels.append(label)
    (directory / "val_map.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return labels


def export_model(path: Path, seed: int = 0) -> None:
    """Export the oracle ResNet-50 (fixed seed) with the official model's interface."""
    import torch
    from torch import nn

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from model import ResNet50  # the sibling module; this file runs as a script

    class OracleResNet50(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = ResNet50(classes=1001)
            self.register_buffer("classes", torch.arange(1001, dtype=torch.float32))

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            red = x[:, 0].mean(dim=(1, 2)) + MEAN_R
            label = torch.clamp(torch.round((red - LABEL_BASE) / LABEL_STEP), 0, 999)
            oracle = -10.0 * torch.abs(self.classes.unsqueeze(0) - (label + 1).unsqueeze(1))
            logits = oracle + 1e-3 * torch.tanh(self.net(x))
            return torch.argmax(logits, dim=1), torch.softmax(logits, dim=1)

    torch.manual_seed(seed)
    model = OracleResNet50().eval()
    dummy = torch.zeros(1, 3, 224, 224)
    torch.onnx.export(
        model, (dummy,), str(path), input_names=["input_tensor:0"],
        output_names=["ArgMax:0", "softmax_tensor:0"],
        dynamic_axes={"input_tensor:0": {0: "batch"}, "ArgMax:0": {0: "batch"},
                      "softmax_tensor:0": {0: "batch"}},
        opset_version=17, dynamo=False,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, required=True)
    parser.add_argument("--no-model", action="store_true", help="only the images")
    parser.add_argument("--count", type=int, default=len(IMAGES),
                        help=f"images to write (default {len(IMAGES)}; more repeat them)")
    args = parser.parse_args(argv)
    labels = write_dataset(args.out_dir / "imagenet", args.count)
    if not args.no_model:
        export_model(args.out_dir / "resnet50_fixture.onnx")
    expected_good = len(labels) - len(WRONG_LABELS)
    (args.out_dir / "fixture.json").write_text(json.dumps({
        "labels": labels, "wrong_labels": list(WRONG_LABELS), "expected_good": expected_good,
    }, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
