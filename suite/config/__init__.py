"""From files and flags to one validated run config.

``loader`` layers the scenario file, ``--config``, ``SUITE_*`` and flags into a
``RunConfig`` (``model``) with each value's provenance, and resolves the round's rules
for its benchmark and scenario once (``rules``); ``preflight`` is the linter that runs
before anything is created.
"""
