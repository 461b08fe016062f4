"""``suite package`` (runs -> official tree -> check -> signed bundle) and ``suite sign``
(sign an existing tree). Exit 0 built, 2 the tree failed a rule (official packaging
is not signed then), 1 usage error or nothing to package."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

KEY_HELP = "encrypted private key (default ~/.config/infersuite/keys/signing.key); " \
           "passphrase from $SUITE_KEY_PASSPHRASE or a prompt"


def _private_key(path: Path | None) -> Ed25519PrivateKey:
    from ..bundle.keys import PRIVATE_NAME, default_key_dir, load_private, passphrase

    key_path = path or default_key_dir() / PRIVATE_NAME
    secret = passphrase(lambda: click.prompt("key passphrase", hide_input=True, err=True)
                        if sys.stdin.isatty() else "")
    return load_private(key_path, secret)


@click.command("package")
@click.option("--submitter", required=True, help="organization (the tree's submitter dir)")
@click.option("--system", "system_name", required=True, help="system name (systems/NAME.json)")
@click.option("--division", type=click.Choice(["closed", "open"]), default="closed",
              show_default=True)
@click.option("--system-config", type=click.Path(path_type=Path),
              help="TOML with the human system fields (see `suite system`)")
@click.option("--runs-dir", type=click.Path(path_type=Path), help="default: runs/")
@click.option("--out-dir", type=click.Path(path_type=Path), help="default: submissions/")
@click.option("--round", "round_name", default=None, help="default: the newest round")
@click.option("--key", "key_path", type=click.Path(path_type=Path), help=KEY_HELP)
@click.option("--unofficial", is_flag=True,
              help="package invalid or non-submittable runs anyway (marked unofficial)")
def package_command(submitter: str, system_name: str, division: str,
                    system_config: Path | None, runs_dir: Path | None, out_dir: Path | None,
                    round_name: str | None, key_path: Path | None, unofficial: bool) -> int:
    """Build submissions/<division>_<submitter>_<system>/ and its signed .tar.gz."""
    from rich.console import Console
    from rich.markup import escape

    from .. import package as pkg
    from .. import package_safety as safety
    from ..checker import check_path
    from ..checker.render import render
    from ..paths import find_paths
    from ..rules import DEFAULT_ROUND, load_rules
    from ..system_description import describe, probe, read_user_toml

    err = Console(stderr=True, soft_wrap=True)
    # every name that becomes a path component, before anything touches the disk
    submitter = safety.check_name("--submitter", submitter)
    system_name = safety.check_name("--system", system_name)
    paths = find_paths()
    rules = load_rules(paths, round_name or DEFAULT_ROUND)
    assert rules.submission is not None
    key = _private_key(key_path)  # fail on the key before any work
    selection = pkg.select_runs(runs_dir or paths.runs, rules, unofficial=unofficial)
    for reason in selection.refused:
        err.print(f"[yellow]refused:[/] {escape(reason)}")
    pkg.refuse_if_empty(selection)
    user = read_user_toml(system_config)
    declared = user.pop("weight_data_types", None)  # ours to check, not a system JSON field
    precision = safety.system_precision([c.run for c in selection.chosen.values()], declared)
    identity = {"division": division, "submitter": submitter, "system_name": system_name}
    system_json, empty, unknown = describe(rules.submission, user, probe(), **identity)
    for name in unknown:
        err.print(f"[yellow]warning:[/] unknown system field '{escape(name)}' ignored")
    name = f"{division}_{submitter}_{system_name}"
    out = (out_dir or paths.submissions)
    tree = out / name
    staged = safety.staging_dir(tree)
    try:
        extras = pkg.build_tree(staged, selection, paths, rules, division, submitter,
                                system_name, system_json, precision)
    except BaseException:
        safety.discard(staged)  # never leave a half-built tree behind
        raise
    moved = safety.place(staged, tree)
    if moved:
        err.print(f"[yellow]note:[/] {escape(str(tree))} was not a tree this command placed; "
                  f"moved aside to {escape(moved)}, not deleted")
    for rel, extra in extras.items():
        extra["loadgen_version"] = pkg.loadgen_version(tree, rel)
    report = check_path(tree, rules)
    render(report, Console(stderr=True, width=160))
    if not report.passed and not unofficial:
        err.print("[red]not signed:[/] the tree fails the rules above; fix them, or pass "
                  "--unofficial to build a test bundle")
        return 2
    from ..bundle.sign import sign_tree

    bundle = out / f"{name}.tar.gz"
    sign_tree(tree, bundle, key, pkg.predicate(
        report, extras, unofficial=unofficial, identity=identity,
        src=pkg.source_pointer(paths.home)))
    label = "[yellow]UNOFFICIAL[/] " if unofficial else ""
    err.print(f"{label}bundle: {escape(str(bundle))} ({bundle.stat().st_size} bytes); "
              f"tree: {escape(str(tree))}")
    if empty:
        err.print(f"[yellow]system fields still empty:[/] {', '.join(empty)}")
    return 0


@click.command("sign")
@click.argument("tree", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--out", type=click.Path(path_type=Path), help="default: TREE.tar.gz")
@click.option("--key", "key_path", type=click.Path(path_type=Path), help=KEY_HELP)
@click.option("--round", "round_name", default=None)
@click.option("--unofficial", is_flag=True, help="mark the bundle unofficial")
def sign_command(tree: Path, out: Path | None, key_path: Path | None, round_name: str | None,
                 unofficial: bool) -> int:
    """Sign an existing submission tree (it must pass `suite check`, or --unofficial)."""
    from .. import package as pkg
    from ..bundle.sign import sign_tree
    from ..checker import check_path
    from ..paths import find_paths
    from ..rules import DEFAULT_ROUND, load_rules

    paths = find_paths()
    rules = load_rules(paths, round_name or DEFAULT_ROUND)
    key = _private_key(key_path)
    report = check_path(tree, rules)
    if not report.passed and not unofficial:
        click.echo(f"not signed: {tree} fails {report.summary.errors} rule(s); see `suite "
                   "check`, or pass --unofficial", err=True)
        return 2
    bundle = out or tree.with_name(tree.name + ".tar.gz")
    extras = {r.id: {"loadgen_version": pkg.loadgen_version(tree, r.id)}
              for r in report.results}
    sign_tree(tree, bundle, key, pkg.predicate(report, extras, unofficial=unofficial,
                                               identity={}, src=pkg.source_pointer(paths.home)))
    click.echo(f"bundle: {bundle}")
    return 0


COMMANDS: list[click.Command] = [package_command, sign_command]
