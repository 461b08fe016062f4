"""What an auditor brings besides the bundle and the key: the inputs a bundle does not
carry (a round LLM's official dataset file and its model directory), for step 3's
re-score and step 4's replay."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class AuditData:
    """The auditor's copies of what a round LLM's bundle does not carry: the official
    dataset file (its sha256 must be the run's) and the model directory (tokenizer)."""

    dataset_path: str = ""
    model_path: str = ""

    def flags(self) -> dict[str, tuple[Any, str]]:
        """A replay's overrides: the auditor's paths, not the submitter's."""
        flags: dict[str, tuple[Any, str]] = {}
        if self.dataset_path:
            flags["data.dataset_dir"] = (str(Path(self.dataset_path).resolve()),
                                         "suite audit --dataset-path")
        if self.model_path:
            flags["data.model_path"] = (str(Path(self.model_path).resolve()),
                                        "suite audit --model-path")
        return flags
