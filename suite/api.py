"""The public face: every command is a library call here, returning a typed result.

The CLI (``suite``) is one client: it parses, calls one of these, renders the result
and maps it to the exit code. ``run`` (one benchmark run, step by step) lives in
``suite.harness.run``; the rest are below. Example::

    result = run(ConfigRequest(scenario="offline", mode="all", quick=True))
    result.status, result.exit_code

Imports are local to each call: ``import suite.api`` for ``check`` loads no LoadGen
harness, numpy or framework (a run's fixed cost, and ``suite check`` on a laptop).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from suite.config.loader import ConfigRequest
from suite.errors import ConfigError, SuiteError
from suite.harness.run import EXIT_CODES, lint, prepare, run
from suite.harness.tune_options import TuneOptions
from suite.paths import Paths, find_paths
from suite.submission.workflow import PackageResult, SignResult, package, sign

if TYPE_CHECKING:
    from suite.audit.report import AuditReport
    from suite.checker.findings import CheckReport
    from suite.harness.tune import TuneReport
    from suite.llm.card import LLMCard
    from suite.llm.export import ExportCheck
    from suite.models import ModelCard
    from suite.serve.launcher import Replica
    from suite.serve.llm_engines import RunningEngine
    from suite.submission.bundle.verify import Verification

__all__ = ["EXIT_CODES", "ConfigRequest", "ExportResult", "PackageResult", "SignResult",
           "SystemDescription", "TuneOptions", "audit", "check", "export", "first_exited",
           "keygen", "lint", "package", "prepare", "run", "serve", "serve_card", "sign",
           "system", "tune", "verify", "write_serving_files"]


def check(path: Path, round_name: str | None = None, *, compat_official: bool = False,
          submission_exceptions: bool = False, paths: Paths | None = None) -> CheckReport:
    """Check a run directory or a submission tree against a round's rules.

    Without ``round_name`` the round is the one a tree's LoadGen seeds name
    (``RoundError`` when none or two match); ``submission_exceptions`` waives LoadGen's
    uncommitted-build error only, as the official flag does.
    """
    from suite.checker import NotCheckable, check_path
    from suite.checker.models import detect_round
    from suite.config.rules import DEFAULT_ROUND, load_rules

    paths = paths or find_paths()
    if round_name is None and path.is_dir():
        round_name = detect_round(path, paths)
    rules = load_rules(paths, round_name or DEFAULT_ROUND)
    try:
        return check_path(path, rules, compat_official=compat_official,
                          submission_exceptions=submission_exceptions)
    except NotCheckable as exc:
        raise ConfigError(str(exc), hint="give a runs/<run> directory or a submission "
                          "tree root (the directory holding closed/ or open/)") from None


def verify(bundle: Path, public_key: Path) -> Verification:
    """Verify a bundle's signature with a pinned public key, then its files."""
    from suite.submission.bundle.keys import load_public
    from suite.submission.bundle.verify import verify_bundle

    result = verify_bundle(bundle, load_public(public_key))
    if result.unreadable is not None:  # not a verdict on the claims: the file is broken
        raise SuiteError(f"cannot read the bundle {result.unreadable}",
                         hint="download or copy the bundle again; it is cut off or corrupt")
    return result


def audit(bundle: Path, public_key: Path, *, rerun: str | None = None,
          tolerance: float = 0.02, runs_dir: Path | None = None,
          say: Callable[[str], None] = lambda message: None,
          paths: Paths | None = None, allow_backends: tuple[str, ...] = (),
          dataset_path: str = "", model_path: str = "") -> AuditReport:
    """Verify, re-check, recompute and (``rerun``) replay a signed bundle's claims.

    A replay runs the suite's own backends only, and any ``module:Class`` backend the
    auditor lists in ``allow_backends``: never code a bundle merely names. A round LLM's
    accuracy is re-scored from the auditor's ``dataset_path`` (its sha256 must be the
    run's) with the tokenizer in ``model_path``."""
    from suite.audit import audit as run_audit
    from suite.audit.inputs import AuditData

    paths = paths or find_paths()
    with tempfile.TemporaryDirectory(prefix="suite-audit-") as work:
        return run_audit(bundle, public_key, paths, Path(work) / "tree",
                         (runs_dir or paths.runs / "audit").resolve(), rerun, tolerance, say,
                         frozenset(allow_backends), AuditData(dataset_path, model_path))


@dataclass
class SystemDescription:
    """The official system description JSON, and what is still missing from it."""

    data: dict[str, Any]
    empty: list[str]
    unknown: list[str]


def system(config_file: Path | None = None, *, division: str = "closed",
           round_name: str | None = None, paths: Paths | None = None) -> SystemDescription:
    """Probe this machine and merge the user's TOML into the round's system JSON."""
    from suite.config.rules import DEFAULT_ROUND, load_rules
    from suite.submission.system_description import describe, probe, read_user_toml

    rules = load_rules(paths or find_paths(), round_name or DEFAULT_ROUND)
    assert rules.submission is not None  # every round we ship has submission rules
    data, empty, unknown = describe(rules.submission, read_user_toml(config_file), probe(),
                                    division=division)
    return SystemDescription(data, empty, unknown)


def tune(options: TuneOptions, *, say: Callable[[str], None] = lambda message: None,
         paths: Paths | None = None) -> TuneReport:
    """Find and record the settings this system sustains (``suite.harness.tune`` for a
    tensor card, ``suite.harness.llm.sweep`` for a text-generation card)."""
    import importlib

    from suite.harness.kinds import for_benchmark

    paths = paths or find_paths()
    module, _, name = for_benchmark(paths, options.benchmark).tuner.partition(":")
    tuner: Callable[..., TuneReport] = getattr(importlib.import_module(module), name)
    return tuner(options, say=say, paths=paths)


def default_backend(benchmark: str, paths: Paths | None = None) -> str:
    """The backend a benchmark runs on when none is named: its kind's (torch-llm for a
    text-generation card, onnxruntime otherwise; an unknown name is left for the config
    to refuse)."""
    from suite.harness.kinds import for_benchmark

    return for_benchmark(paths or find_paths(), benchmark).default_backend


def keygen(out_dir: Path | None = None, *, prompt: Callable[[], str] | None = None,
           paths: Paths | None = None) -> tuple[Path, Path, str]:
    """An Ed25519 key pair (private key encrypted, never inside the data or submissions);
    returns (private key file, public key file, key id)."""
    from suite.submission.bundle.keys import default_key_dir, generate, passphrase

    paths = paths or find_paths()
    return generate(out_dir or default_key_dir(), passphrase(prompt),
                    forbidden=[paths.home, paths.submissions])


# -- serve: the reference model on MLServer replicas, or the files that serve it elsewhere


@dataclass(frozen=True)
class ExportResult:
    """What ``export`` wrote, and how the exported model compared with ours (None: the
    comparison was not asked for, and ``export.json`` says it was not made)."""

    files: list[Path]
    verification: ExportCheck | None


def export(benchmark: str, out_dir: Path, *, fmt: str = "hf", verify_samples: int = 16,
           force: bool = False, paths: Paths | None = None) -> ExportResult:
    """Export an LLM card's model for a real engine (``hf``: Hugging Face GPT-2 layout),
    then check the exported model's greedy outputs against ours on ``verify_samples``
    prompts (0: no check)."""
    from suite.llm.export import FORMATS, export_hf, verify_hf

    paths = paths or find_paths()
    if fmt not in FORMATS:
        raise ConfigError(f"unknown export format '{fmt}'", hint=f"choose {', '.join(FORMATS)}")
    card = _llm_card(paths, benchmark, "export applies to LLM benchmarks (tinylm)")
    files = export_hf(card, out_dir, force=force)
    verification = verify_hf(card, out_dir, verify_samples) if verify_samples > 0 else None
    return ExportResult(files, verification)


def _llm_card(paths: Paths, benchmark: str, hint: str) -> LLMCard:
    """``benchmark``'s LLM card; another kind of card is one line naming it."""
    from suite.llm.card import load_llm_card

    try:
        return load_llm_card(paths, benchmark)
    except ConfigError as exc:
        raise ConfigError(str(exc), hint=hint) from None


def serve_card(benchmark: str, model_path: Path | None = None,
               paths: Paths | None = None) -> ModelCard:
    """The card to serve, its model file verified (``--model-path`` for a user model)."""
    from suite.models import check_model, load_card

    card = load_card(paths or find_paths(), benchmark)
    if model_path is not None or card.model.source == "user":
        card = card.with_model_path(str(model_path or ""))
    check_model(card)
    return card


def write_serving_files(card: ModelCard, *, triton_repo: Path | None = None,
                        kserve_manifest: Path | None = None, max_batch_size: int = 256,
                        storage_uri: str = "", replicas: int = 1) -> list[Path]:
    """A Triton model repository and/or a KServe manifest; returns the files written."""
    from suite.serve.writers import kserve_manifest as manifest
    from suite.serve.writers import write_triton_repo

    written = list(write_triton_repo(card, triton_repo, max_batch_size)) if triton_repo else []
    if kserve_manifest is not None:
        kserve_manifest.write_text(manifest(card, storage_uri, replicas))
        written.append(kserve_manifest)
    return written


@contextmanager
def serve(card: ModelCard, replicas: int, workdir: Path | None = None, *,
          host: str = "127.0.0.1", max_batch_size: int = 256) -> Iterator[list[Replica]]:
    """MLServer replicas of ``card`` while the block runs (logs in ``workdir``, default a
    temporary directory); they are stopped however it ends."""
    from suite.serve.launcher import start_replicas, stop_replicas

    root = workdir or Path(tempfile.mkdtemp(prefix="suite-serve-"))
    running = start_replicas(card, replicas, root, host=host, max_batch_size=max_batch_size)
    try:
        yield running
    finally:
        stop_replicas(running)


def first_exited(running: list[Replica], poll_s: float = 0.5) -> Replica:
    """Block until a replica exits (Ctrl-C ends the wait) and return it."""
    while all(r.process.poll() is None for r in running):
        time.sleep(poll_s)
    return next(r for r in running if r.process.poll() is not None)


@contextmanager
def serve_llm(benchmark: str, engine: str, workdir: Path | None = None, *, port: int = 0,
              host: str = "127.0.0.1", python: str | None = None,
              model_dir: Path | None = None, paths: Paths | None = None,
              timeout_s: float = 300.0, start: str = "auto") -> Iterator[RunningEngine]:
    """An LLM card's model on a real engine while the block runs: exported (and checked)
    into ``workdir`` unless ``model_dir`` is given, served on ``port`` (0: a free one),
    started as ``start`` says (``suite.serve.llm_engines.ENGINE_STARTS``), stopped however
    the block ends."""
    from suite.serve.launcher import free_port
    from suite.serve.llm_engines import ENGINE_STARTS, ENGINES, start_engine, stop_engine

    paths = paths or find_paths()
    if engine not in ENGINES:
        raise ConfigError(f"unknown engine '{engine}'", hint=f"choose {', '.join(ENGINES)}")
    if start not in ENGINE_STARTS:
        raise ConfigError(f"unknown engine start '{start}'",
                          hint=f"choose {', '.join(ENGINE_STARTS)}")
    card = _llm_card(paths, benchmark, "--engine serves LLM benchmarks (tinylm)")
    root = workdir or Path(tempfile.mkdtemp(prefix="suite-engine-"))
    if model_dir is None:
        model_dir = root / f"{card.name}-hf"
        export(benchmark, model_dir, verify_samples=4, force=True, paths=paths)
    running = start_engine(engine, model_dir, card.name, port or free_port(host),
                           root / f"{engine}.log", host=host, python=python,
                           max_model_len=card.arch.block_size, timeout_s=timeout_s,
                           start=start)
    try:
        yield running
    finally:
        stop_engine(running)
