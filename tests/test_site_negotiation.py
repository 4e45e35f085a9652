"""``anchored serve`` serves a page's Markdown twin to ``Accept: text/markdown`` (issue 22,
item 5), over real HTTP, on a site the plugin built (its twins are the build's)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from anchored_query.serve.app import create_app
from anchored_query.serve.site import prefers_markdown, twin_of
from anchored_query.settings import Settings
from liveserver import ThreadedServer

MARKDOWN = {"Accept": "text/markdown"}
BROWSER = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}


@pytest.mark.parametrize(
    ("accept", "wanted"),
    [
        ("text/markdown", True),
        ("text/markdown, text/html;q=0.5", True),
        ("text/x-markdown", True),
        ("text/html, text/markdown;q=0.9", False),
        (BROWSER["Accept"], False),
        ("*/*", False),
        ("text/markdown;q=0", False),
        ("", False),
    ],
)
def test_what_asks_for_markdown(accept: str, wanted: bool) -> None:
    assert prefers_markdown(accept) is wanted


def test_the_twin_of_a_page() -> None:
    assert twin_of(".") == "index.md"
    assert twin_of("") == "index.md"
    assert twin_of("guide/configuration") == "guide/configuration/index.md"
    assert twin_of("guide/configuration/") == "guide/configuration/index.md"
    assert twin_of("guide/index.html") == "guide/index.md"
    assert twin_of("about.html") == "about.md"
    assert twin_of("assets/anchored.js") is None


def test_anchored_serve_negotiates_markdown(
    qa_project: Path, qa_index: Path, tmp_path: Path
) -> None:
    site = qa_project / "site"
    twin = site / "guide" / "configuration" / "index.md"
    assert twin.is_file(), "the plugin writes a twin beside every page"
    settings = Settings(index=str(qa_index), cache_dir=str(tmp_path), refresh_s=0)
    app = create_app(settings, site_dir=site)
    with ThreadedServer(app) as srv, httpx.Client(base_url=srv.url, timeout=30) as http:
        page = http.get("/guide/configuration/", headers=MARKDOWN)
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/markdown")
        assert page.headers["vary"] == "Accept"
        assert page.text == twin.read_text(encoding="utf-8")
        home = http.get("/", headers=MARKDOWN)
        assert home.text == (site / "index.md").read_text(encoding="utf-8")
        html = http.get("/guide/configuration/", headers=BROWSER)
        assert html.headers["content-type"].startswith("text/html")
        assert html.headers["vary"] == "Accept"
        assert "anchored-config" in html.text
        # A file that is not a page, and a page without a twin, are served as they are.
        css = http.get("/assets/anchored/anchored.css", headers=MARKDOWN)
        assert css.status_code in (200, 404)
        assert not css.headers.get("content-type", "").startswith("text/markdown")
        twin.unlink()
        try:
            fallback = http.get("/guide/configuration/", headers=MARKDOWN)
        finally:
            twin.write_text(page.text, encoding="utf-8")
        assert fallback.headers["content-type"].startswith("text/html")
        # The API is not the site: its JSON answers whatever is accepted.
        assert http.get("/v1/health", headers=MARKDOWN).json()["status"] in ("ok", "loading")
