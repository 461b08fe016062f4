"""The digits data is read from scikit-learn's bundled file without importing
scikit-learn (its import cost 2.5-3 s of every run, in the parent and in the child):
staging the digits split loads neither scikit-learn nor scipy. That the data is exactly
what ``load_digits`` returns is in tests/integration/test_digits_source.py."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO, cli_env


def test_staging_digits_imports_no_scikit_learn() -> None:
    code = ("import sys; from suite.datasets import create; from suite.models import "
            "load_card; from suite.paths import find_paths; "
            "d = create(load_card(find_paths(), 'digits')); d.load(range(10)); "
            "print(d.total_count, 'sklearn' in sys.modules, 'scipy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=cli_env(),
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["450", "False", "False"]

