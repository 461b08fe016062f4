"""A report page built from real runs, parsed for the HTML report's tests."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.conftest import run_cli


class Page(HTMLParser):
    """What the tests read from the page: tags, images, links, and per-section text
    and table rows (sections nest: run > latency/server/accuracy/invalid/config)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.images: list[dict[str, str]] = []
        self.references: list[tuple[str, str, str]] = []
        self.style = ""
        self.runs: list[dict[str, list[str]]] = []
        self.rows: list[dict[str, list[list[str]]]] = []
        self._sections: list[str] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        self.tags.append(tag)
        for name in ("src", "href", "action", "srcset", "data", "poster"):
            if name in values:
                self.references.append((tag, name, values[name]))
        if tag == "img":
            self.images.append(values)
        elif tag == "style":
            self._in_style = True
        elif tag == "section":
            kind = values.get("class", "")
            if kind == "run":
                self.runs.append({})
                self.rows.append({})
            self._sections.append(kind)
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self._in_style = False
        elif tag == "section":
            self._sections.pop()
        elif tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None and len(self._sections) > 1:
            self.rows[-1].setdefault(self._sections[-1], []).append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.style += data
        if self._cell is not None:
            self._cell.append(data)
        if len(self._sections) > 1:
            self.runs[-1].setdefault(self._sections[-1], []).append(data)

    def text(self, run: int, section: str) -> str:
        return " ".join(" ".join(self.runs[run].get(section, [])).split())


@pytest.fixture(scope="session")
def reported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Page, list[Path], Path]:
    """Tune probes, then three runs beside them: Server with LoadGen's trace on (VALID or
    not), Offline performance and accuracy on onnxruntime, and a Server run that LoadGen
    stops at max_duration (INVALID whatever the machine's speed); then the report.

    Once per session (tests only read it): ``test_html_report.py`` and
    ``test_html_report_page.py`` share it, on one xdist worker (``SHARED`` in
    tests/support/xdist_scopes.py); module-scoped, it was made three times a session
    (once per module, and again on the second worker the page module's tests reached)."""
    home = tmp_path_factory.mktemp("report")
    runs, env = home / "runs", {"XDG_CONFIG_HOME": str(home / "config")}
    system = ["--system", "htmlreport"]
    tuned = run_cli("tune", "--backend", "null", "--scenario", "server", "--quick",
                    "--runs-dir", str(runs), "--batch-sizes", "1", "--steps", "1",
                    "--max-qps", "2000", *system, **env)
    assert tuned.returncode == 0, tuned.stderr
    server = ["run", "--scenario", "server", "--backend", "null", "--quick", *system]
    commands = [
        [*server, "--set", "loadgen.target_qps=1000", "--set", "loadgen.enable_trace=true"],
        ["run", "--scenario", "offline", "--backend", "onnxruntime", "--quick", "--mode",
         "all", "--set", "loadgen.expected_qps=5000", *system],
        [*server, "--set", "loadgen.target_qps=1000", "--set", "loadgen.max_duration_ms=300"],
    ]
    run_dirs: list[Path] = []
    for command in commands:  # beside the probes: their parent holds tune-cache/
        before = set(runs.iterdir())
        done = run_cli(*command, "--runs-dir", str(runs), **env)
        assert done.returncode in (0, 2), done.stderr
        [run_dir] = set(runs.iterdir()) - before
        run_dirs.append(run_dir)
    page_path = home / "report.html"
    made = run_cli("report", *map(str, run_dirs), "--html", str(page_path), **env)
    assert made.returncode == 0, made.stderr
    page = Page()
    page.feed(page_path.read_text(encoding="utf-8"))
    page.close()
    return page, run_dirs, runs
