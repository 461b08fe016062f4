"""``suite report RUN... --html OUT`` on real runs (real LoadGen, real tune probes): the
page is self-contained (every image is an embedded PNG, nothing points outside the file),
and a directory without result.json is one clear error, exit 1 and no page. What each
section shows is in test_html_report_page.py."""

from __future__ import annotations

import base64
import binascii
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.html_pages import Page

pytestmark = pytest.mark.slow


PNG = b"\x89PNG\r\n\x1a\n"


def test_every_image_is_an_embedded_png_and_nothing_points_outside(
        reported: tuple[Page, list[Path], Path]) -> None:
    page = reported[0]
    assert len(page.images) >= 5  # 3 CDFs, the trace histogram, the sweep, the accuracy bar
    for image in page.images:
        prefix = "data:image/png;base64,"
        assert image["src"].startswith(prefix), image["src"][:60]
        try:
            data = base64.b64decode(image["src"][len(prefix):], validate=True)
        except binascii.Error as exc:
            pytest.fail(f"image {image.get('alt')} is not valid base64: {exc}")
        assert data.startswith(PNG), image.get("alt")
    for tag, name, value in page.references:
        internal = value.startswith("#") or (tag == "img" and value.startswith("data:image/"))
        assert internal, f"<{tag} {name}={value[:80]!r}> points outside the page"
    assert "script" not in page.tags and "link" not in page.tags and "iframe" not in page.tags
    assert "url(" not in page.style and "@import" not in page.style


def test_a_directory_without_result_json_is_one_clear_error(tmp_path: Path) -> None:
    empty = tmp_path / "not-a-run"
    empty.mkdir()
    out = tmp_path / "report.html"
    done = run_cli("report", str(empty), "--html", str(out))
    assert done.returncode == 1
    assert f"cannot read {empty / 'result.json'}" in done.stderr
    assert "Traceback" not in done.stderr
    assert not out.exists()

