"""What ``suite package`` must get right before it writes a byte: names that become path
components, the precision every packaged run recorded, and placing the finished tree
without ever deleting something packaging did not create.

Names: the official checker has no character rule of its own for submitter and system
names (they are directory names it walks); the MLCommons repository checker rejects
names with spaces or a leading dot. We therefore accept a conservative
``[A-Za-z0-9._-]+`` that does not start with a dot, so no name can hold ``/`` or
``..`` and escape the output folder.

Precision: ``measurements.json`` and ``calibration.md`` state the weight data types
and transformations; they come only from what the backend recorded in each test of
``result.json`` (``BackendInfo.precision`` / ``weight_transformations``). A run that
recorded nothing is refused, never assumed to be FP32, and one system may not mix
precisions.

Placement: the tree is built in a temporary sibling and renamed into place. An
existing tree is removed only when its file list equals the manifest this module wrote
when it placed that tree; anything else is moved aside, never deleted.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from suite.errors import SuiteError
from suite.results import RunResult

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,127}")


class PackageError(SuiteError):
    """Packaging refuses: a bad name, a missing or mixed precision record."""


def check_name(flag: str, value: str) -> str:
    """``value`` if it is safe as one path component, else a ``PackageError``."""
    if not _NAME.fullmatch(value):
        raise PackageError(
            f"{flag} '{value}': not a valid name; it becomes a directory name in the tree",
            hint="use 1-128 of A-Z a-z 0-9 . _ - , starting with a letter, digit or _")
    return value


@dataclass(frozen=True)
class Precision:
    """What one system's runs recorded about their weights."""

    weight_data_types: str
    weight_transformations: str

    def calibration_text(self, source: str = "as recorded by the backend") -> str:
        """``source``: where the runs' precision came from ("as stated by the submitter,
        not verified" for a remote engine's)."""
        if self.weight_transformations.lower() == "none":
            body = (f"No quantization: the reference weights run unchanged "
                    f"({self.weight_data_types}, {source}).")
        else:
            body = (f"Weights run as {self.weight_data_types}; transformation of the "
                    f"reference weights, {source}: {self.weight_transformations}.")
        return f"# Calibration\n\n{body}\n"


def recorded_precision(run: RunResult) -> Precision:
    """The one precision every test of ``run`` recorded, or ``PackageError``."""
    where = f"{run.run_dir}/result.json"
    seen: set[Precision] = set()
    for test in run.tests:
        precision = str(test.backend.get("precision") or "").strip()
        transform = str(test.backend.get("weight_transformations") or "").strip()
        if not precision or not transform:
            missing = "precision" if not precision else "weight_transformations"
            raise PackageError(
                f"{where}: the {test.mode} test's backend record has no '{missing}'; "
                "packaging does not guess the weights' precision",
                hint="re-run with a backend that records its precision (this suite's "
                     "backends do; an endpoint run records what the submitter states: "
                     "backend.openai.stated_precision and stated_quantization), or leave "
                     "this run out of --runs-dir")
        seen.add(Precision(precision, transform))
    if len(seen) != 1:
        raise PackageError(f"{where}: its tests recorded different precisions "
                           f"({', '.join(sorted(p.weight_data_types for p in seen))})",
                           hint="a run must use one precision throughout; re-run it")
    return seen.pop()


def system_precision(runs: list[RunResult], declared: str | None) -> Precision:
    """The precision shared by every run of one system (and the user's declaration)."""
    found = [(run.run_id, recorded_precision(run)) for run in runs]
    kinds = sorted({(p.weight_data_types, p.weight_transformations) for _, p in found})
    if len(kinds) > 1:
        listing = "; ".join(f"{rid}: {p.weight_data_types} ({p.weight_transformations})"
                            for rid, p in sorted(found, key=lambda item: item[0]))
        raise PackageError(f"the runs of one system recorded different precisions: {listing}",
                           hint="package each precision as its own --system")
    if not kinds:
        raise PackageError("no run to take a precision record from")
    precision = Precision(*kinds[0])
    if declared is not None and declared.strip().lower() != precision.weight_data_types.lower():
        raise PackageError(
            f"the system description declares weight_data_types '{declared}', the runs "
            f"recorded '{precision.weight_data_types}'",
            hint="fix the system description, or package the runs that match it")
    return precision


MANIFEST_SUFFIX = ".infersuite-manifest.json"


def refuse_links(run_dir: Path) -> None:
    """A run directory is packaged only if it holds no symbolic link: a link would copy
    whatever it points to (any readable file) into the tree, and the bundle would sign it."""
    for path in sorted(run_dir.rglob("*")):
        if path.is_symlink():
            raise PackageError(f"{path} is a symbolic link (to {os.readlink(path)}); "
                               "packaging copies a run's own files only",
                               hint="replace the link with the run's file, or re-run")


def _manifest(target: Path) -> Path:
    return target.with_name(f".{target.name}{MANIFEST_SUFFIX}")


def _listing(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() + ("/" if p.is_dir() else "")
                  for p in root.rglob("*"))


def staging_dir(target: Path) -> Path:
    """An empty temporary sibling of ``target`` to build the tree in."""
    target.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{target.name}.building-", dir=target.parent))


def place(staged: Path, target: Path) -> str | None:
    """Rename ``staged`` to ``target``; returns where an unknown old tree was moved."""
    moved: str | None = None
    manifest = _manifest(target)
    if target.exists() or target.is_symlink():
        ours = False
        if target.is_dir() and not target.is_symlink() and manifest.is_file():
            try:
                ours = json.loads(manifest.read_text()) == _listing(target)
            except (OSError, ValueError):
                ours = False
        aside = Path(tempfile.mkdtemp(prefix=f"{target.name}.previous-", dir=target.parent))
        os.replace(target, aside / target.name)
        if ours:  # exactly the files we placed last time: ours to remove
            shutil.rmtree(aside)
        else:
            moved = str(aside / target.name)
    os.replace(staged, target)
    manifest.write_text(json.dumps(_listing(target)) + "\n")
    return moved


def discard(staged: Path) -> None:
    """Remove a staging dir this module created (after a failure)."""
    if staged.name.startswith(".") and ".building-" in staged.name:
        shutil.rmtree(staged, ignore_errors=True)
