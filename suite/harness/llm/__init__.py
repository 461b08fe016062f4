"""The text-generation run path: ``run`` (the parent's steps for an LLM card), ``child``
(the LoadGen child's SUT assembly) and ``sut`` (token-streaming SUT over a generation
backend). The model, dataset, generation loop and scoring live in ``suite.llm``.
"""
