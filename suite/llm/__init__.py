"""The LLM path: token-latency benchmarks (TTFT/TPOT) on a generation backend.

Modules, in pipeline order:

* ``card``: the LLM model card (``task = "text-generation"``) and its verification;
* ``dataset``: the committed prompts/references, their char tokenizer and token ids;
* ``generation``: the backend seam (``prefill``/``decode``/``release``) and the torch backend;
  ``backend``: its registry entry ``torch-llm`` (options: device, threads, batching);
* ``batcher``: continuous batching over that seam (and the static baseline);
* ``conf``: ``use_token_latencies`` and the TTFT/TPOT bounds;
* ``accuracy``: ROUGE and tokens per sample from the accuracy log; ``test06``: compliance;
* ``audit``: ``suite audit``'s recomputation of ROUGE from a bundle's full accuracy log;
* ``export``: a card's model in the Hugging Face GPT-2 layout real engines serve;
* ``round/``: the round's LLM datasets (``data``) and their reference scoring (``scoring``);
* ``endpoint/``: the ``openai`` backend and its client (``http_pool``, ``sse``,
  ``client``, ``workers``, ``check``, ``backend``).

The run path lives in ``suite.harness.llm``: ``sut`` (the LoadGen-facing SUT:
``FirstTokenComplete``, ``n_tokens``), ``child`` (how the child process builds it) and
``run`` (one LLM run end to end through the child process and LoadGen).

Nothing here imports torch or LoadGen at import time.
"""
