"""The exception tree of the suite.

Every error the suite raises on purpose derives from ``SuiteError`` and carries a
``hint`` that tells the user what to do next. ``cli`` catches ``SuiteError`` once
and maps it to exit code 1; nothing below ``cli`` calls ``sys.exit``.

    SuiteError
    ├── ConfigError          bad key, value, type or name in a config layer
    ├── ModelError           model file missing, unreadable or with a wrong sha256
    ├── DatasetError         dataset missing or malformed
    ├── BackendUnavailable   the backend's packages or hardware are missing
    ├── BackendError         a backend failed to load or predict
    └── RunFailed            a LoadGen test started but did not finish cleanly
"""

from __future__ import annotations

from pathlib import Path


class SuiteError(Exception):
    """Base of every error the suite raises on purpose."""

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
