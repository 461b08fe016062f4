"""The exception tree of the suite.

Every error the suite raises on purpose derives from ``SuiteError`` and carries a
``hint`` that tells the user what to do next. ``suite.cli.app`` catches ``SuiteError``
once and maps it to exit code 1; nothing below the CLI calls ``sys.exit``.

    SuiteError
    ├── ConfigError          bad key, value, type or name in a config layer
    │   ├── RoundError       (suite.checker.models) the tree's logs name no one supported round
    │   └── NotCheckable     (suite.checker.walk) neither a run directory nor a submission
    │                        tree; also a ValueError
    ├── ModelError           model file missing, unreadable or with a wrong sha256
    ├── DatasetError         dataset missing or malformed
    │   └── ImageError       (suite.datasets.preprocess) an image that cannot be decoded
    ├── BackendUnavailable   the backend's packages or hardware are missing
    ├── BackendError         a backend failed to load or predict
    │   ├── TransportError   (suite.llm.endpoint.http_pool) a connection to an LLM server failed
    │   └── StreamError      (suite.llm.endpoint.http_pool) one streamed LLM request failed
    ├── RunFailed            a LoadGen test started but did not finish cleanly
    ├── TuneFailed           ``suite tune`` found no VALID setting, or a probe failed
    ├── ProbeFailed          (suite.harness.offline_rate) the warm-up probe's backend call
    │                        raised or did not return in time
    ├── BundleError          a bundle or its envelope is malformed or refused
    │   └── EnvelopeError    (suite.submission.bundle.dsse) also a ValueError
    ├── InputTooLarge        a file the user named is larger than such a file can be
    ├── KeyFileError         (suite.submission.bundle.keys) a signing key is missing or unreadable
    ├── PackageError         (suite.submission.safety) a name, path or run cannot be packaged
    ├── RunDirError          (suite.reports.diff) a run directory or its records are unreadable
    ├── ServeError           (suite.serve.launcher) a model server did not come up
    └── EngineError          (suite.serve.llm_engines) an LLM engine did not start or get ready

The tree lists every public exception class (a name without a leading underscore; a
private one, such as ``suite.submission.bundle.archive._Unreadable``, stays inside its
module) under its parent in the tree; ``tests/unit/core/test_errors_tree.py`` compares it
with the classes.

Each error also says how the CLI ends: ``exit_code`` (1 for every error; 2 and 130 are
verdicts and interruptions, not errors). ``tests/unit/core/test_errors_tree.py`` (every
``raise`` of a builtin exception) and ``tests/integration/test_errors_tree.py`` (every
exception class) walk the package and fail on anything outside this tree.
"""

from __future__ import annotations

from pathlib import Path


class SuiteError(Exception):
    """Base of every error the suite raises on purpose."""

    #: the CLI's exit code for this error (see ``suite.cli.app``)
    exit_code = 1

    def __init__(self, message: str, *, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class ConfigError(SuiteError):
    """A config layer holds an unknown key, a wrong type or an unknown name."""


class ModelError(SuiteError):
    """The model file is missing, unreadable, or does not match its model card."""


class DatasetError(SuiteError):
    """The dataset is missing or malformed."""


class BackendUnavailable(SuiteError):
    """The chosen backend cannot run here (missing package, GPU or driver)."""


class BackendError(SuiteError):
    """A backend failed while loading a model or predicting."""


class RunFailed(SuiteError):
    """A LoadGen test started but failed; its run directory keeps the logs."""

    def __init__(self, message: str, *, run_dir: Path, hint: str = "") -> None:
        super().__init__(message, hint=hint)
        self.run_dir = run_dir


class TuneFailed(SuiteError):
    """``suite tune`` found no VALID setting, or one of its probe runs failed."""


class InputTooLarge(SuiteError):
    """A file the user named (a key, a config, a card) is larger than its kind can be:
    read up to a cap, never whole (``suite.paths.read_limited``), so that ``/dev/zero``
    or a wrong path ends in one line instead of filling the memory."""


class BundleError(SuiteError):
    """A bundle or its signed envelope is malformed, or a tree cannot be bundled."""
