"""The run itself: from a resolved config to a ``RunResult`` with LoadGen's logs.

``run`` is the step-by-step orchestration (``suite.api.run``); ``runner`` starts one
child process per LoadGen test (``child``, started early by ``child_start``) and watches
it; ``settings`` and ``loadgen`` are the only places that build LoadGen's settings and
call its bindings; ``sut/`` is the system under test; ``llm/`` is the text-generation
path; ``progress``, ``signals`` and ``output_contract`` are what the child reports and
how it stops; ``tune`` searches settings by running the harness.
"""
