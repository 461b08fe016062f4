"""Hints that point the right way: state directories follow XDG, a missing run directory is
named as missing, not as a killed run."""

from __future__ import annotations

from pathlib import Path

import pytest

from suite.submission.bundle.keys import default_key_dir
from tests.conftest import run_cli


def test_signing_keys_follow_xdg_config_home(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert default_key_dir() == tmp_path / "infersuite" / "keys"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/ignored")  # the spec: absolute only
    assert default_key_dir() == Path.home() / ".config" / "infersuite" / "keys"


def test_show_names_a_missing_directory_as_missing(tmp_path: Path) -> None:
    done = run_cli("show", str(tmp_path / "no-such-run"))
    assert done.returncode == 1
    assert "is not a directory" in done.stderr and "killed" not in done.stderr


def test_package_without_a_key_says_keygen_before_any_passphrase(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    done = run_cli("package", "--submitter", "ORG", "--system", "box", "--runs-dir",
                   str(runs), "--out-dir", str(tmp_path / "out"), "--unofficial",
                   XDG_CONFIG_HOME=str(tmp_path / "config"))
    assert done.returncode == 1
    assert "no signing key at" in done.stderr and "suite keygen" in done.stderr
    assert "passphrase" not in done.stderr


def test_report_names_a_missing_directory_like_every_other_error(tmp_path: Path) -> None:
    done = run_cli("report", str(tmp_path / "gone"), "--html", str(tmp_path / "r.html"))
    assert done.returncode == 1
    assert done.stderr.startswith("error: ") and "is not a directory" in done.stderr
    assert "Usage:" not in done.stderr


@pytest.mark.parametrize("args", [
    ("run", "--benchmark", "digits", "--nosuch"),                                # usage
    ("lint", "--benchmark", "digits", "--set", "loadgen.min_durationms=5"),      # a finding
    ("show", "no-such-run-anywhere"),                                            # SuiteError
    ("lint", "--config", "nosuch.toml"),                                         # no hint before
    ("verify", "x.tar.gz", "--key", "signing.pub"),                              # as docs wrote it
])
def test_every_error_has_one_style_and_a_hint(args: tuple[str, ...]) -> None:
    """Issue 40, item 10: errors came in three styles (`error LINT-…`, `error: … hint:`,
    `usage error:`), some without a hint."""
    done = run_cli(*args, timeout=120)
    assert done.returncode in (1, 2)
    lines = (done.stderr + done.stdout).splitlines()  # `lint` prints its report on stdout
    first = next(i for i, line in enumerate(lines) if line.startswith("error"))
    assert lines[first].startswith("error: ")
    assert lines[first + 1].startswith("  hint: ")
    assert "usage error" not in done.stderr + done.stdout


def test_check_on_the_shipped_empty_submissions_says_there_is_nothing_yet(
        tmp_path: Path) -> None:
    """`make check` on the empty submissions/ said "the round is unknown"."""
    (tmp_path / "submissions").mkdir()
    (tmp_path / "submissions" / ".gitkeep").write_text("")
    done = run_cli("check", str(tmp_path / "submissions"))
    assert done.returncode == 1
    assert "no submission here yet" in done.stderr and "round is unknown" not in done.stderr
    assert "make submission" in done.stderr


def test_the_endpoint_hint_is_a_command_that_parses() -> None:
    """The hint said `suite serve tinylm --engine vllm`, itself a usage error."""
    import shlex

    import click

    from suite.cli.app import app
    from suite.llm.endpoint.check import HINT

    command = HINT.split("`")[1]
    argv = shlex.split(command)
    assert argv[:2] == ["suite", "serve"]
    serve = app.get_command(click.Context(app), "serve")
    assert isinstance(serve, click.Command)
    serve.make_context("serve", argv[2:])  # a usage error raises here
