"""``package`` (runs -> official tree -> check -> signed bundle) and ``sign`` (an existing
tree) as library calls; ``suite package`` and ``suite sign`` only render their results.

The helpers they orchestrate live in ``package`` (the tree), ``safety`` (names,
staging, placing) and ``bundle`` (the signature). Official packaging is not signed when
the tree fails a rule (``signed`` is then False and ``bundle`` None); ``unofficial``
signs it anyway, marked so in the predicate.

Beside each result's evidence, ``package`` writes ``attempts.json``: every attempt of
that result's benchmark, scenario, mode, backend and system that the run ledger
(``suite.reports.ledger``) holds, not only the chosen one. It lies in the tree, so the signed
file list covers it; ``suite audit`` shows it.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from suite.errors import SuiteError
from suite.paths import Paths, find_paths
from suite.results import RunResult

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from suite.checker.findings import CheckReport


@dataclass
class PackageResult:
    """What ``package`` built: the tree, its check report and (when signed) the bundle."""

    tree: Path
    report: CheckReport
    bundle: Path | None = None
    unofficial: bool = False
    #: runs not packaged, each with its reason
    refused: list[str] = field(default_factory=list)
    #: system TOML fields the round does not know (ignored)
    unknown_fields: list[str] = field(default_factory=list)
    #: required system fields still empty
    empty_fields: list[str] = field(default_factory=list)
    #: where a directory in the tree's place was moved aside (never deleted)
    moved_aside: str | None = None

    @property
    def signed(self) -> bool:
        return self.bundle is not None

    @property
    def exit_code(self) -> int:
        return 0 if self.signed else 2


@dataclass
class SignResult:
    tree: Path
    report: CheckReport
    bundle: Path | None = None

    @property
    def exit_code(self) -> int:
        return 0 if self.bundle is not None else 2


def private_key(path: Path | None, prompt: Callable[[], str] | None = None
                ) -> Ed25519PrivateKey:
    """The signing key at ``path`` (default: the user's key directory), passphrase from
    ``$SUITE_KEY_PASSPHRASE`` or ``prompt()``."""
    from suite.submission.bundle.keys import (
        PRIVATE_NAME,
        KeyFileError,
        default_key_dir,
        load_private,
        passphrase,
    )

    key = path or default_key_dir() / PRIVATE_NAME
    if not key.exists():  # before asking for a passphrase the key would not need
        raise KeyFileError(f"no signing key at {key}",
                           hint="make one with `suite keygen`, or give --key PATH")
    return load_private(key, passphrase(prompt))


def package(submitter: str, system_name: str, *, division: str = "closed",
            system_config: Path | None = None, runs_dir: Path | None = None,
            out_dir: Path | None = None, round_name: str | None = None,
            key_path: Path | None = None, unofficial: bool = False,
            prompt: Callable[[], str] | None = None,
            paths: Paths | None = None, runs: Sequence[str] = ()) -> PackageResult:
    """Build ``<out>/<division>_<submitter>_<system>/``, check it, and sign its bundle.
    ``runs``: package only these run directories (names under ``runs_dir``)."""
    from suite.checker import check_path
    from suite.config.rules import DEFAULT_ROUND, load_rules
    from suite.submission import network, safety
    from suite.submission import package as pkg
    from suite.submission.bundle.sign import sign_tree
    from suite.submission.system_description import describe, probe, read_user_toml

    # every name that becomes a path component, before anything touches the disk
    submitter = safety.check_name("--submitter", submitter)
    system_name = safety.check_name("--system", system_name)
    paths = paths or find_paths()
    rules = load_rules(paths, round_name or DEFAULT_ROUND)
    assert rules.submission is not None  # every round we ship has submission rules
    key = private_key(key_path, prompt)  # fail on the key before any work
    name = f"{division}_{submitter}_{system_name}"
    check_out_dir(out_dir or paths.submissions, name)  # and on where the result goes
    selection = pkg.select_runs(runs_dir or paths.runs, rules, unofficial=unofficial,
                                only=runs)
    pkg.refuse_if_empty(selection)
    user = read_user_toml(system_config)
    declared = user.pop("weight_data_types", None)  # ours to check, not a system JSON field
    precision = safety.system_precision([c.run for c in selection.chosen.values()], declared)
    chosen_runs = [c.run for c in selection.chosen.values()]
    is_network = network.network_division(chosen_runs, division)
    identity = {"division": division, "submitter": submitter, "system_name": system_name}
    # an engine's host is not this machine: described by the submitter, never probed here
    probed, system_provenance = engine_system(chosen_runs, system_config) \
        if any(served_by_engine(r) for r in chosen_runs) else (probe(), PROBED_SYSTEM)
    system_json, empty, unknown = describe(rules.submission, user, probed, **identity)
    network.apply(system_json, chosen_runs, is_network, list(rules.submission.network_fields),
                  user, unofficial=unofficial)
    out = out_dir or paths.submissions
    tree = out / name
    try:
        staged = safety.staging_dir(tree)
    except OSError as exc:  # a race: the folder was writable a moment ago
        raise _unwritable(out, exc) from None
    try:
        extras = pkg.build_tree(staged, selection, paths, rules, division, submitter,
                                system_name, system_json, precision,
                                system_provenance=system_provenance)
        write_attempts(staged, extras, runs_dir or paths.runs)
    except BaseException as exc:
        safety.discard(staged)  # never leave a half-built tree behind
        if isinstance(exc, OSError):  # a full disk, a quota: one line, not a traceback
            raise safety.PackageError(
                f"packaging stopped at {exc.filename or out}: {exc.strerror or exc}",
                hint="nothing was placed (the half-built tree is removed)") from None
        raise
    try:
        moved = safety.place(staged, tree)
    except OSError as exc:
        safety.discard(staged)
        _drop_empty_asides(tree)
        raise safety.PackageError(
            f"the tree cannot replace {tree}: {exc.strerror or exc}",
            hint="the previous tree could not be moved aside; check its permissions and "
            "attributes (chmod, lsattr), or give another --out-dir") from None
    for rel, extra in extras.items():
        extra["loadgen_version"] = pkg.loadgen_version(tree, rel)
    report = check_path(tree, rules)
    result = PackageResult(tree, report, None, unofficial, list(selection.refused),
                           list(unknown), list(empty), moved)
    if report.passed or unofficial:
        result.bundle = out / f"{name}.tar.gz"
        sign_tree(tree, result.bundle, key, pkg.predicate(
            report, extras, unofficial=unofficial, identity=identity,
            src=pkg.source_pointer(paths.home), system_provenance=system_provenance))
    return result


#: The system of runs the suite computed in: this machine's probe (plus the TOML).
PROBED_SYSTEM = {"source": "measured", "what": "probed on the packaging host, with the "
                 "submitter's --system-config for the human fields"}


def served_by_engine(run: RunResult) -> bool:
    """Whether ``run``'s tests streamed from an engine's servers (an endpoint backend)."""
    return any(t.backend.get("device") == "remote" and "urls" in t.backend.get("details", {})
               for t in run.tests)


def engine_system(runs: list[RunResult], system_config: Path | None
                  ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what stands in for the probe, the system's provenance) for endpoint runs: the
    engine's host is described by the submitter (``--system-config``, stated, not
    verified), the framework is the engine as it reported itself in the runs' records;
    nothing is probed on this machine, which is not the engine's host."""
    from suite.results import REPORTED_BY_ENGINE, STATED_BY_SUBMITTER
    from suite.submission.safety import PackageError
    from suite.submission.system_description import PROBE_FAILED

    if not all(served_by_engine(r) for r in runs):
        raise PackageError("runs served by an engine and runs computed here cannot be one "
                           "system", hint="package the endpoint runs as their own --system")
    if system_config is None:
        raise PackageError("an endpoint result's system is the engine's host, which this "
                           "machine cannot probe: describe it in --system-config",
                           hint="a TOML with the engine host's processor, memory, "
                           "accelerators, OS (host_processor_model_name = \"...\", ...)")
    engines = sorted({str(r.provenance["engine"].value) for r in runs
                      if "engine" in r.provenance
                      and r.provenance["engine"].source == REPORTED_BY_ENGINE})
    why = "not probed: the engine's host is not this machine; state it in --system-config"
    probed: dict[str, Any] = {"framework": ", ".join(engines),
                              PROBE_FAILED: {k: why for k in (
                                  "host_processor_model_name", "host_processors_per_node",
                                  "host_processor_core_count", "host_memory_capacity",
                                  "accelerators_per_node", "accelerator_model_name",
                                  "number_of_nodes")}}
    if not engines:
        probed[PROBE_FAILED]["framework"] = "the engine reported no name or version"
    provenance = {"source": STATED_BY_SUBMITTER,
                  "what": f"the engine's host, described in {system_config.name}",
                  "framework": {"value": ", ".join(engines),
                                "source": REPORTED_BY_ENGINE if engines else "not recorded"}}
    return probed, provenance


def check_out_dir(out: Path, name: str) -> None:
    """Refuse, before any work, an output folder where ``name`` and its bundle cannot be
    written: a file, a folder that cannot be created or written to, or a directory where
    the bundle goes. (An old tree or bundle that cannot be replaced fails when placed.)"""
    from suite.submission.safety import PackageError

    if out.exists() and not out.is_dir():
        raise PackageError(f"output folder {out} is not a directory",
                           hint="give --out-dir a folder (it is created if missing)")
    try:
        out.mkdir(parents=True, exist_ok=True)
        # a file made and removed: the one test of writing that holds for root, for
        # read-only mounts and for immutable folders alike (os.access does not)
        handle, probe = tempfile.mkstemp(prefix=f".{name}.write-test-", dir=out)
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        raise _unwritable(out, exc) from None
    bundle = out / f"{name}.tar.gz"
    if bundle.is_dir() and not bundle.is_symlink():
        raise PackageError(f"{bundle} is a directory, where the bundle goes",
                           hint="move it away, or give another --out-dir")


def _unwritable(out: Path, exc: OSError) -> SuiteError:
    from suite.submission.safety import PackageError

    return PackageError(f"output folder {out} cannot be written: {exc.strerror or exc}",
                        hint="give --out-dir a folder you can write to")


def _drop_empty_asides(tree: Path) -> None:
    """Remove the empty ``<tree>.previous-*`` folder a failed move aside left (it holds
    nothing, so nothing is lost; one that holds a tree stays)."""
    for aside in tree.parent.glob(f"{glob.escape(tree.name)}.previous-*"):
        with contextlib.suppress(OSError):
            aside.rmdir()  # only an empty one goes


def write_attempts(root: Path, extras: dict[str, dict[str, Any]], runs_dir: Path) -> None:
    """``evidence/<result>/attempts.json`` for each packaged result (``extras``: result id
    -> what ``build_tree`` recorded, its ``run_id`` among it)."""
    from suite.reports.ledger import ATTEMPTS_NAME, attempts_record, list_runs
    from suite.submission.package import EVIDENCE_DIR

    ledger = list_runs(runs_dir)
    for rel, extra in sorted(extras.items()):
        record = attempts_record(ledger, str(extra["run_id"]))
        target = root / EVIDENCE_DIR / rel / ATTEMPTS_NAME
        target.parent.mkdir(parents=True, exist_ok=True)
        # sorted keys and no wall-clock time: packing twice gives identical bytes
        target.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def sign(tree: Path, *, out: Path | None = None, key_path: Path | None = None,
         round_name: str | None = None, unofficial: bool = False,
         prompt: Callable[[], str] | None = None, paths: Paths | None = None) -> SignResult:
    """Sign an existing tree; it must pass ``check`` unless ``unofficial``."""
    from suite.checker import check_path
    from suite.config.rules import DEFAULT_ROUND, load_rules
    from suite.submission import package as pkg
    from suite.submission.bundle.sign import sign_tree

    paths = paths or find_paths()
    rules = load_rules(paths, round_name or DEFAULT_ROUND)
    key = private_key(key_path, prompt)
    report = check_path(tree, rules)
    result = SignResult(tree, report)
    if report.passed or unofficial:
        result.bundle = out or tree.with_name(tree.name + ".tar.gz")
        # an LLM result is signed with its tokens (and so by its tokens/s), as `package` does
        extras = {r.id: {"loadgen_version": pkg.loadgen_version(tree, r.id),
                         **({"tokens": t} if (t := pkg.packaged_tokens(tree, r.id)) else {})}
                  for r in report.results}
        sign_tree(tree, result.bundle, key, pkg.predicate(
            report, extras, unofficial=unofficial, identity={},
            src=pkg.source_pointer(paths.home)))
    return result
