"""Small CNN for scikit-learn's 8x8 handwritten digits (the embedded ``digits`` benchmark).

This file deliberately imports nothing but torch: the torch backend loads it by file
path with importlib (``model.toml`` names it as ``model.py:DigitsCNN``), so it must not
depend on the rest of the project being importable.

Input:  float32 (N, 1, 8, 8), NCHW, pixel values scaled to [0, 1] (pixel / 16.0).
Output: float32 (N, 10) logits, one per digit class 0-9.
"""

from __future__ import annotations

import torch
from torch import nn


class DigitsCNN(nn.Module):
    """Two 3x3 convolutions, one 2x2 max-pool, and a two-layer classifier head.

    Layers are named attributes (not an ``nn.Sequential``) so the state-dict keys
    (``conv1.weight``, ``fc2.bias``, ...) are stable, readable, and identical to the
    ONNX initializer names the exporter produces.
    """

    # Widths chosen to keep the model at ~9.8k parameters (~40 KB per file, so it can
    # live in git) while still reaching ~98% top-1; doubling every width to 16/32/64
    # quadruples the size for no measurable accuracy gain on this 450-sample split.
    conv1_channels: int = 8
    conv2_channels: int = 16
    hidden_units: int = 32
    num_classes: int = 10

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, self.conv1_channels, kernel_size=3, padding=1)
        self.conv2 = nn.Conv2d(self.conv1_channels, self.conv2_channels, kernel_size=3, padding=1)
        self.pool = nn.MaxPool2d(2)  # 8x8 -> 4x4
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(self.conv2_channels * 4 * 4, self.hidden_units)
        self.fc2 = nn.Linear(self.hidden_units, self.num_classes)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Map a (N, 1, 8, 8) float32 batch to (N, 10) float32 logits."""
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.flatten(self.pool(x))  # (N, 16, 4, 4) -> (N, 256)
        x = self.relu(self.fc1(x))
        logits: torch.Tensor = self.fc2(x)
        return logits
