"""Where the suite's data and the user's state live; read here and nowhere else.

The data (``run_rules/``, ``scenarios/``, ``reference_models/``) is read only. It is
found, first match wins:

1. ``home`` passed to ``find_paths``, or ``$SUITE_HOME``: a *project* directory. Its
   ``runs/``, ``submissions/``, ``cache/`` and ``scenarios/systems/`` hold the state,
   since the user owns that directory.
2. the installed wheel: ``suite/_data/`` inside the package (the build maps the
   repository's top-level folders there, see ``pyproject.toml``). Nothing is ever
   written there: runs and submissions go under the user's data directory, the
   preprocessing cache under the user's cache directory, tuned settings under the
   user's config directory (``platformdirs``: ``~/.local/share/infersuite``,
   ``~/.cache/infersuite``, ``~/.config/infersuite`` on Linux; ``XDG_*`` move them).
3. the checkout the package sits in (``pip install -e .``). ``runs/``, ``submissions/``
   and ``cache/`` stay in the checkout (all three are git-ignored); tuned settings go to
   the user's config directory, so ``suite tune`` leaves the tracked tree clean.

A ``--runs-dir``/``--out-dir`` option, or ``data.cache_dir`` in the config, moves each of
them per call. A runs directory the user names is checked before anything is written
(``check_runs_dir``): a typo in its parents is refused, not created.
"""

from __future__ import annotations

import os
import shlex
import stat
from dataclasses import dataclass
from pathlib import Path

from suite.errors import ConfigError, InputTooLarge

APP = "infersuite"
PACKAGE_DATA = Path(__file__).resolve().parent / "_data"
CHECKOUT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Paths:
    """The data directories of one suite installation and where its state goes."""

    home: Path
    runs: Path
    submissions: Path
    cache: Path
    #: where ``suite tune`` writes, and ``suite run`` reads, tuned settings
    systems: Path
    #: how the data was found: "project", "installed" or "checkout"
    layout: str = "project"

    @property
    def run_rules(self) -> Path:
        return self.home / "run_rules"

    @property
    def scenarios(self) -> Path:
        return self.home / "scenarios"

    @property
    def reference_models(self) -> Path:
        return self.home / "reference_models"

    def label(self, path: Path) -> str:
        """``path`` relative to the data home when it lies there (provenance), else absolute."""
        try:
            return str(path.relative_to(self.home))
        except ValueError:
            return str(path)


def install_hint(extra: str = "") -> str:
    """The pip command that installs infersuite (with ``extra``) the way this copy was
    installed: an editable checkout reinstalls itself, a wheel names the package (issue 40,
    item 5: a wheel user was told ``pip install -e '.[openai]'``)."""
    spec = f"[{extra}]" if extra else ""
    if (CHECKOUT / "pyproject.toml").is_file() and not (PACKAGE_DATA / "run_rules").is_dir():
        return f"pip install -e '.{spec}'"
    return f"pip install 'infersuite{spec}'"


def project_paths(home: Path) -> Paths:
    """A project directory: data and state side by side (``SUITE_HOME``, a test's copy)."""
    return Paths(home, home / "runs", home / "submissions", home / "cache",
                 home / "scenarios" / "systems", "project")


def _user_dirs() -> tuple[Path, Path, Path]:
    # Lazy: only an installed or checkout layout needs it, and `suite --help` stays fast.
    import platformdirs

    return (Path(platformdirs.user_data_dir(APP, appauthor=False)),
            Path(platformdirs.user_cache_dir(APP, appauthor=False)),
            Path(platformdirs.user_config_dir(APP, appauthor=False)))


def installed_paths(data: Path = PACKAGE_DATA) -> Paths:
    """The wheel's read-only data; every piece of state under the user's directories."""
    user_data, user_cache, user_config = _user_dirs()
    return Paths(data, user_data / "runs", user_data / "submissions", user_cache,
                 user_config / "systems", "installed")


def checkout_paths(home: Path = CHECKOUT) -> Paths:
    """A source checkout: git-ignored state in it, tuned settings under the user's config."""
    _, _, user_config = _user_dirs()
    return Paths(home, home / "runs", home / "submissions", home / "cache",
                 user_config / "systems", "checkout")


def find_paths(home: Path | None = None) -> Paths:
    """Locate the data directories and the state: see the module docstring for the order.

    Example::

        paths = find_paths()
        rules_file = paths.run_rules / "v6.1.toml"
    """
    if home is None and (env := os.environ.get("SUITE_HOME")):
        home = Path(env)
    if home is not None:
        home = home.expanduser().resolve()
        if home == PACKAGE_DATA:  # the child of an installed suite passes its home back
            return installed_paths(home)
        if home == CHECKOUT:
            return checkout_paths(home)
        _require(home, "set SUITE_HOME to a directory that holds run_rules/, scenarios/ "
                 "and reference_models/ (or unset it to use the installed data)")
        return project_paths(home)
    if (PACKAGE_DATA / "run_rules").is_dir():
        return installed_paths()
    _require(CHECKOUT, "reinstall infersuite (its wheel carries the data), or set SUITE_HOME "
             "to a checkout that holds run_rules/, scenarios/ and reference_models/")
    return checkout_paths()


def _require(home: Path, hint: str) -> None:
    if not (home / "run_rules").is_dir():
        raise ConfigError(f"no run_rules/ directory under {home}", hint=hint)


#: Caps on the files a user names, far above any real one of its kind.
KEY_FILE_LIMIT = 64 << 10
CONFIG_FILE_LIMIT = 4 << 20
#: A run's or a tree's records (result.json, config.json, accuracy.txt, measurements.json,
#: system JSON), its LoadGen detail log, and its accuracy log (a round LLM's full log is a
#: few hundred MB), as check, show, diff, report, package and audit read them.
RECORD_FILE_LIMIT = 64 << 20
DETAIL_LOG_LIMIT = 1 << 30
ACCURACY_LOG_LIMIT = 4 << 30


def regular_file_problem(path: Path, limit: int) -> str | None:
    """Why ``path`` is no file to read whole ("not a regular file": a FIFO would block, a
    device never ends; or larger than ``limit``), from ``stat`` alone (nothing is opened);
    ``None`` if it is one. ``OSError`` (missing, no access) is the caller's to word."""
    info = path.stat()
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    if info.st_size > limit:
        return f"larger than {limit:,} bytes"
    return None


def read_limited(path: Path, limit: int, what: str) -> bytes:
    """The bytes of ``path`` (a ``what`` the user named), refused past ``limit`` bytes.

    Reads at most ``limit + 1`` bytes, so an endless file (``/dev/zero``, a FIFO) ends
    too. ``OSError`` is the caller's to word (missing, a directory, no access).
    """
    with path.open("rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise InputTooLarge(f"{path} is larger than a {what} can be ({limit:,} bytes)",
                            hint=f"check the path: it should name a {what}")
    return data


def stand_in_dir(cache: Path, card: str, seed: int) -> Path:
    """Where ``suite run --stand-in`` keeps the stand-in of ``card`` written with ``seed``
    (its ``dataset`` directory and ``model.onnx``, reused by later runs)."""
    return cache / "stand-ins" / f"{card}-seed{seed}"


def sweep_path(runs_dir: Path, system: str, benchmark: str, backend: str) -> Path:
    """Where ``suite tune`` keeps an LLM sweep's points (the HTML report reads them)."""
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in backend)
    return runs_dir / "tune-sweeps" / f"{system}_{benchmark}_{safe}.json"


def check_runs_dir(path: Path, *, create: bool, option: str = "--runs-dir") -> Path:
    """``path`` (a runs directory the user named) if it is usable; one ``ConfigError`` else.

    ``create``: runs are written there, so the directory itself may be missing (the run
    makes it) but its parent must exist: a missing parent is far likelier a typo than a
    wish, and ``mkdir -p`` would hide it. Otherwise runs are read, so it must exist. The
    path must be UTF-8 (it is written into JSON records) and hold no control character
    (the run's child reads its spec line by line). Nothing is created here.
    """
    text = str(path)
    # Printable whatever it holds: undecodable bytes as \xff, control characters as \n.
    shown = "".join(c if c.isprintable() else repr(c)[1:-1]
                    for c in os.fsencode(text).decode("utf-8", "backslashreplace"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes in argv arrive as lone surrogates
        raise ConfigError(f"{option} {shown}: the path is not UTF-8",
                          hint="choose a directory whose name is UTF-8 text") from None
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise ConfigError(f"{option} {shown}: the path holds a control character (a "
                          "newline, a tab)", hint="choose a directory name without one "
                          "(a stray newline often comes from a pasted line)")
    target = path.expanduser()
    if target.is_dir():
        return target
    if target.exists():
        raise ConfigError(f"{option} {shown}: not a directory",
                          hint="give a directory (runs go in subdirectories of it)")
    if not create:
        raise ConfigError(f"{option} {shown}: the directory does not exist",
                          hint="give the directory `suite run --runs-dir` wrote to")
    parent = target.absolute().parent
    if parent.exists() and not parent.is_dir():
        raise ConfigError(f"{option} {shown}: its parent {parent} is not a directory",
                          hint="check the path for a typo")
    if not parent.exists():
        missing = parent
        while not missing.parent.exists() and missing.parent != missing:
            missing = missing.parent
        first = "" if missing == parent else f" (the first missing part is {missing})"
        raise ConfigError(f"{option} {shown}: its parent {parent} does not exist{first}",
                          hint="check the path for a typo, or create the parent first: "
                               f"mkdir -p {shlex.quote(str(parent))}")
    return target
