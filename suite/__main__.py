"""``python -m suite``: the same as the ``suite`` command."""

import sys

from suite.cli.entry import main

sys.exit(main())
