"""ResNet-50 v1.5 in plain torch (torchvision cannot be installed beside our torch).

v1.5 puts the stride of a downsampling bottleneck on its 3x3 convolution (v1 puts it
on the first 1x1). Layers [3, 4, 6, 3], widths 64-512, expansion 4, 1001 outputs as
the MLPerf model has (class 0 is background). Used only to build test fixtures with
fixed-seed random weights; the benchmark runs the user's official ONNX file.
"""

from __future__ import annotations

import torch
from torch import nn


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (carries the stride, v1.5), 1x1 expand, plus the shortcut."""

    expansion = 4

    def __init__(self, in_channels: int, width: int, stride: int) -> None:
        super().__init__()
        out_channels = width * self.expansion
        self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + self.downsample(x))


class ResNet50(nn.Module):
    """ResNet-50 v1.5: NCHW (N, 3, 224, 224) float32 in, (N, classes) logits out."""

    def __init__(self, classes: int = 1001) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        blocks: list[nn.Module] = []
        in_channels = 64
        for width, count, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for index in range(count):
                blocks.append(Bottleneck(in_channels, width, stride if index == 0 else 1))
                in_channels = width * Bottleneck.expansion
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_channels, classes)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(self.pool(self.blocks(self.stem(x))), 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.features(x))
