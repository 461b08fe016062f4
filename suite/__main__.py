"""``python -m suite``: the same as the ``suite`` command."""

import sys

from .cli import main

sys.exit(main())
