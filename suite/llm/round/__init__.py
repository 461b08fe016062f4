"""The round's LLM benchmarks (llama3.1-8b, llama2-70b, deepseek-r1, gpt-oss-120b): their
data and their scoring.

* ``data``: the official dataset files the user brings (CNN/DailyMail JSON records, the
  OpenOrca and deepseek-r1 pandas pickles, gpt-oss-120b's parquet), read safely and cached;
* ``scoring``: the accuracy the reference evaluations compute (ROUGE-1/2/L/Lsum, GEN_LEN,
  TOKENS_PER_SAMPLE) and the verdict against the round's targets and upper limits;
* ``reasoning``, ``reasoning_log``, ``math_answers``, ``livecodebench``, ``sandbox``
  (``sandbox_child``): the reasoning LLMs' exact_match as their reference evaluations
  score it, LiveCodeBench answers run in contained child processes.

The cards they serve are ``reference_models/<name>/model.toml`` (``suite.llm.card``).
"""
