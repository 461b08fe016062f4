"""One exception tree: every exception class the suite defines derives from ``SuiteError``
(so the CLI prints one line with a hint and exits 1).

An import of every module under ``suite/`` (in fresh interpreters) lists every exception
class outside the tree; anything there must be listed in ``PENDING_CLASSES`` with the
reason it is not yet in the tree. The scan of every ``raise`` is in
tests/unit/core/test_errors_tree.py.
"""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

from tests.conftest import REPO, cli_env
from tests.unit.core.test_errors_tree import ROOT

PENDING_CLASSES: dict[str, str] = {}


def _modules() -> list[str]:
    names = ["suite"]
    for info in pkgutil.walk_packages([str(ROOT)], prefix="suite."):
        names.append(info.name)
    return sorted(names)


_WALK = """
import importlib, inspect, json, sys
from suite.errors import SuiteError
outside = []
for name in json.loads(sys.argv[1]):
    module = importlib.import_module(name)
    for _, obj in inspect.getmembers(module, inspect.isclass):
        if (obj.__module__ == name and issubclass(obj, BaseException)
                and not issubclass(obj, SuiteError)):
            outside.append(f"{name}.{obj.__qualname__}")
print(json.dumps(outside))
"""


def test_every_exception_class_in_suite_is_a_suite_error() -> None:
    # In a fresh interpreter per group: MLServer (suite.serve.runtime) and tritonclient
    # (loaded by the remote backend's tests in this process) register the same protobuf
    # package and cannot be imported into one process.
    # a __main__ module runs its command on import (the CLI, the schema writer)
    names = [n for n in _modules() if not n.endswith("__main__")]
    serve = [n for n in names if n == "suite.serve" or n.startswith("suite.serve.")]
    groups = [[n for n in names if n not in serve], serve]
    outside: list[str] = []
    for group in groups:
        proc = subprocess.run([sys.executable, "-c", _WALK, json.dumps(group)], cwd=REPO,
                              env=cli_env(), capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        outside += [q for q in json.loads(proc.stdout) if q not in PENDING_CLASSES]
    assert outside == [], f"exception classes outside SuiteError: {outside}"

