"""What a person reads about finished runs, computed from their records only.

``table`` (the results table), ``explain`` (why a run is INVALID), ``ledger`` (every
run in a runs directory), ``diff`` and ``diff_render`` (two runs side by side), ``html``
and ``plots`` (``suite report --html``).
"""
