"""The ``suite`` command: argument parsing, rendering and exit codes, nothing else.

``entry`` is the console script (light on purpose), ``app`` the click group and the
``run`` command, ``commands/`` one module per other command, ``render`` the shared
rendering of library results. Every command calls ``suite.api`` and renders what it
returns.
"""
