"""The round's tensor benchmarks beyond classification, one module per reference task.

Each module owns, for one task of ``mlcommons/inference``: the dataset layout as the user
downloads it, the reference's preprocessing, the model call around the official input and
output tensors (sliding windows, decoding loops), the response bytes the reference's SUT
logs, the reference's accuracy computation, and a stand-in (a small model with the
official I/O contract and samples in the reference's layout). The contract is
``suite.tasks.base.TensorTask``; ``TASKS`` maps a card's ``task`` to its module, imported
on use.
"""

from __future__ import annotations

#: A card's ``task`` -> ``"module:Class"`` implementing ``TensorTask``.
TASKS: dict[str, str] = {
    "speech-recognition": "suite.tasks.librispeech:WhisperTask",
    "segmentation-3d": "suite.tasks.kits19:Kits19Task",
    "object-detection-yolo": "suite.tasks.yolo:YoloTask",
    "object-detection-openimages": "suite.tasks.openimages:RetinanetTask",
    "question-answering": "suite.tasks.squad:SquadTask",
}
