"""The round's LLM benchmarks (llama3.1-8b, llama2-70b): their data and their scoring.

* ``data``: the official dataset files the user brings (CNN/DailyMail JSON records, the
  OpenOrca pandas pickle), read safely and cached as token ids;
* ``scoring``: the accuracy the reference evaluations compute (ROUGE-1/2/L/Lsum, GEN_LEN,
  TOKENS_PER_SAMPLE) and the verdict against the round's targets and upper limits.

The cards they serve are ``reference_models/<name>/model.toml`` (``suite.llm.card``).
"""
