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



def test_a_dataset_directory_for_bundled_digits_is_refused_in_one_line() -> None:
    """digits reads scikit-learn's bundled split: a named directory would be ignored while
    the run records it, so ``--dataset-path`` is refused with one line and exit 1."""
    proc = subprocess.run(
        [sys.executable, "-m", "suite", "run", "--benchmark", "digits", "--scenario",
         "offline", "--quick", "--dataset-path", "/nosuchdir"],
        cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "data.dataset_dir='/nosuchdir'" in errors[0]
    assert "bundled" in errors[0] and "hint: drop --dataset-path" in proc.stderr
    assert "Traceback" not in proc.stderr
