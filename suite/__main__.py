"""``python -m suite``: the same as the ``suite`` command."""

import sys

from .entry import main

sys.exit(main())
