"""The README and docs/ name only commands, options and make targets that exist.

Every fenced code block (and every inline code span that starts with a command) in
``README.md`` and ``docs/*.md`` is read line by line. A line that invokes the CLI
(``suite ...``, ``.venv/bin/suite ...``, ``python -m suite ...``, with or without a
``$`` prompt or leading ``VAR=value`` assignments) must name an existing command path,
and every ``--option`` on it must be an option of that command. A ``make`` line must
name targets of the Makefile. Lines that are output, not commands, start with neither
and are left alone. The commands are read from the click group in-process, so the
whole check takes well under a second.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

REPO = Path(__file__).resolve().parents[3]

FENCE = re.compile(r"^\s*(```+|~~~+)")
INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
MAKE_TARGET = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]*)\s*:(?!=)", re.MULTILINE)
SEPARATORS = {"|", "||", "&&", ";", "&"}
PYTHONS = re.compile(r"^(?:.*/)?python(?:3(?:\.\d+)?)?$|^\$\(PY\)$")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True)
class Invocation:
    """One command found in the docs: where it is, which program, and its words."""

    where: str
    program: str  # "suite" or "make"
    words: tuple[str, ...]


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def strip_comment(line: str) -> str:
    """The line without a shell comment (a ``#`` at a word's start, outside quotes)."""
    quote = ""
    for i, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def split_words(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError:  # an unbalanced quote in an example: plain words are enough
        return line.split()


def code_lines(text: str) -> Iterator[tuple[int, str, bool]]:
    """(line number, line, in a fenced block) for every line of code in a Markdown text.

    Fenced lines come whole, a trailing backslash joining the next line to them; an
    inline code span comes alone, numbered by the line it is on."""
    lines = text.splitlines()
    fence = ""
    pending: tuple[int, str] | None = None
    for number, line in enumerate(lines, start=1):
        match = FENCE.match(line)
        if fence:
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                fence = ""
                continue
            body = line.rstrip()
            start, so_far = pending if pending else (number, "")
            if body.endswith("\\"):
                pending = (start, so_far + body[:-1] + " ")
                continue
            pending = None
            yield start, so_far + body, True
        elif match:
            fence = match.group(1)
        else:
            for span in INLINE.findall(line):
                yield number, span, False


def invocations(line: str, where: str, *, fenced: bool) -> Iterator[Invocation]:
    """The suite and make commands a line runs (one per pipeline or list segment)."""
    text = strip_comment(line).strip() if fenced else line.strip()
    words = split_words(text)
    segment: list[str] = []
    for word in [*words, "&&"]:
        if word not in SEPARATORS:
            segment.append(word)
            continue
        found = command_of(segment, where)
        if found is not None:
            yield found
        segment = []


def command_of(words: list[str], where: str) -> Invocation | None:
    rest = list(words)
    if rest and rest[0] in ("$", ">", "%"):
        rest = rest[1:]
    while rest and ASSIGNMENT.match(rest[0]):
        rest = rest[1:]
    if not rest:
        return None
    first = rest[0]
    if first == "suite" or first.endswith("/bin/suite"):
        return Invocation(where, "suite", tuple(rest[1:]))
    if PYTHONS.match(first) and rest[1:3] == ["-m", "suite"]:
        return Invocation(where, "suite", tuple(rest[3:]))
    if first == "make":
        return Invocation(where, "make", tuple(rest[1:]))
    return None


def option_name(word: str) -> str | None:
    """The option a word names (``--set``, ``--key=x`` -> ``--key``), or None."""
    word = word.strip("[](){},")
    if not word.startswith("-") or word in ("-", "--") or re.match(r"^-\d", word):
        return None
    name = word.split("=", 1)[0]
    return name.split("/", 1)[0]  # `--quick/--full` in prose names two flags


def option_names(command: click.Command, ctx: click.Context) -> set[str]:
    names = set(command.get_help_option_names(ctx))
    for param in command.params:
        if isinstance(param, click.Option):
            names.update(param.opts)
            names.update(param.secondary_opts)
    return names


def suite_problems(group: click.Group, found: Invocation) -> list[str]:
    """What an invocation names that the CLI does not have."""
    problems: list[str] = []
    command: click.Command = group
    path = ["suite"]
    ctx = click.Context(group, info_name="suite")
    words = list(found.words)
    while isinstance(command, click.Group):
        while words and option_name(words[0]) is not None:
            name = option_name(words[0])
            if name not in option_names(command, ctx):
                problems.append(f"{found.where}: `{' '.join(path)}` has no option {name}")
            words.pop(0)
        if not words:
            return problems  # `suite`, `suite --help`
        name = words.pop(0)
        sub = command.get_command(ctx, name)
        if sub is None:
            problems.append(f"{found.where}: `{' '.join(path)}` has no command {name!r}")
            return problems
        path.append(name)
        command = sub
        ctx = click.Context(command, info_name=name, parent=ctx)
    known = option_names(command, ctx)
    for word in words:
        if word == "--":
            break
        name = option_name(word)
        if name is not None and name not in known:
            problems.append(f"{found.where}: `{' '.join(path)}` has no option {name}")
    return problems


def make_targets(makefile: Path) -> set[str]:
    text = makefile.read_text(encoding="utf-8")
    targets = set(MAKE_TARGET.findall(text))
    for line in text.splitlines():
        if line.startswith(".PHONY:"):
            targets.update(line.split(":", 1)[1].split())
    return targets


def make_problems(targets: set[str], found: Invocation) -> list[str]:
    problems = []
    for word in found.words:
        if word.startswith("-") or "=" in word:
            continue  # make's own flags and VAR=value
        if word not in targets:
            problems.append(f"{found.where}: the Makefile has no target {word!r}")
    return problems


def check_text(text: str, name: str, group: click.Group,
               targets: set[str]) -> tuple[list[str], int]:
    """(problems, number of commands checked) for one Markdown text."""
    problems: list[str] = []
    checked = 0
    for number, line, fenced in code_lines(text):
        for found in invocations(line, f"{name}:{number}", fenced=fenced):
            checked += 1
            if found.program == "suite":
                problems += suite_problems(group, found)
            else:
                problems += make_problems(targets, found)
    return problems, checked


@pytest.fixture(scope="module")
def group() -> click.Group:
    from suite.cli.app import app  # the `suite` group, discovered commands included

    assert isinstance(app, click.Group)
    return app


@pytest.fixture(scope="module")
def targets() -> set[str]:
    return make_targets(REPO / "Makefile")


def test_docs_name_only_commands_options_and_targets_that_exist(
        group: click.Group, targets: set[str]) -> None:
    problems: list[str] = []
    checked = 0
    for path in doc_files():
        found, count = check_text(path.read_text(encoding="utf-8"),
                                  str(path.relative_to(REPO)), group, targets)
        problems += found
        checked += count
    assert checked > 50, f"only {checked} commands found in the docs: is the parser broken?"
    assert not problems, "the docs name what does not exist:\n" + "\n".join(problems)


def test_the_check_reports_what_does_not_exist(group: click.Group, targets: set[str]) -> None:
    text = "\n".join([
        "Some prose with `suite lint --no-such-flag` inline.",
        "```sh",
        "suite run --no-such-option --quick",
        "$ python -m suite nosuchcommand --x",
        ".venv/bin/suite tune --scenario server \\",
        "    --bogus 3",
        "make no-such-target SCENARIO=server",
        "suite check runs/x   # --not-checked: a comment",
        "```",
        "```",
        "digits offline onnxruntime performance --not-a-command-line",
        "```",
    ])
    problems, checked = check_text(text, "FAKE.md", group, targets)
    assert checked == 6
    assert problems == [
        "FAKE.md:1: `suite lint` has no option --no-such-flag",
        "FAKE.md:3: `suite run` has no option --no-such-option",
        "FAKE.md:4: `suite` has no command 'nosuchcommand'",
        "FAKE.md:5: `suite tune` has no option --bogus",
        "FAKE.md:7: the Makefile has no target 'no-such-target'",
    ]


def test_the_check_accepts_what_exists(group: click.Group, targets: set[str]) -> None:
    text = "\n".join([
        "```console",
        "$ SUITE_HOME=/tmp/h suite run --scenario=server --quick --set sut.max_wait_us=-1",
        "suite --version && suite check --help | head",
        "make run SCENARIO=offline ARGS=\"--quick\"",
        "```",
    ])
    problems, checked = check_text(text, "OK.md", group, targets)
    assert (problems, checked) == ([], 4)
