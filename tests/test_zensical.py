"""The ask box on a site the plugin does not run in: ``tests/fixtures/qa-site`` built by
the real ``zensical`` package (which ignores the anchored plugin), then ``anchored index
SITE -o INDEX --inject``; the pages carry the plugin's assets and settings, once, and
the site served with the query function answers from them."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from anchored_query.serve.app import create_app
from anchored_query.settings import Settings

from tests.liveserver import ThreadedServer

QA_SITE = Path(__file__).parent / "fixtures" / "qa-site"
ANCHORED = str(Path(sys.executable).parent / "anchored")
CONFIG = re.compile(r'<script id="anchored-config" type="application/json">(.*?)</script>', re.S)


def _zensical() -> str:
    found = shutil.which("zensical", path=str(Path(sys.executable).parent)) or shutil.which(
        "zensical"
    )
    if found is None:
        pytest.skip("zensical is not installed (pip install zensical)")
    return found


@pytest.fixture(scope="module")
def zensical_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """qa-site built by ``zensical build``; the project folder (``site/`` inside)."""
    zensical = _zensical()
    project = tmp_path_factory.mktemp("zensical") / "project"
    shutil.copytree(QA_SITE, project)
    result = subprocess.run(
        [zensical, "build"], cwd=project, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (project / "site" / "guide" / "configuration" / "index.html").is_file()
    # Zensical ran no anchored plugin: nothing of the ask box is in the built pages
    page = (project / "site" / "guide" / "configuration" / "index.html").read_text("utf-8")
    assert "anchored-config" not in page
    return project


def _index(project: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [ANCHORED, "index", "site", "-o", "index", "--cache-dir", "cache", "--inject", *extra],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def _settings_of(page: Path) -> list[dict[str, Any]]:
    return [json.loads(m.replace("<\\/", "</")) for m in CONFIG.findall(page.read_text("utf-8"))]


def test_inject_writes_assets_and_page_settings_once(zensical_site: Path) -> None:
    site = zensical_site / "site"
    first = _index(zensical_site, "--endpoint", "https://ask.example.com/", "--starter", "Port?")
    assert "ask box in" in first.stdout
    # and the files for AI assistants (site/agents.md), beside the pages
    assert "Markdown for AI assistants: 7 pages" in first.stdout
    assert (site / "llms.txt").is_file() and (site / "llms-full.txt").is_file()
    assert (site / "guide" / "configuration" / "index.md").is_file()
    for name in ("anchored.js", "anchored.css", "dialog.js", "text.js"):
        assert (site / "assets" / "anchored" / name).is_file()
    pages = {
        "": site / "index.html",
        "guide/configuration/": site / "guide" / "configuration" / "index.html",
        "troubleshooting/": site / "troubleshooting" / "index.html",
    }
    for url, path in pages.items():
        [settings] = _settings_of(path)
        assert settings["page"] == url
        assert settings["root"] == "../" * url.count("/")
        assert settings["endpoint"] == "https://ask.example.com"
        assert settings["starters"] == ["Port?"]
        html = path.read_text("utf-8")
        head = html[: html.index("</head>")]
        root = settings["root"]
        assert f'href="{root}assets/anchored/anchored.css"' in head
        assert f'<script type="module" src="{root}assets/anchored/anchored.js">' in head
        # the relative asset URL resolves to the copied file
        assert (path.parent / root / "assets" / "anchored" / "anchored.js").resolve().is_file()
    assert not _settings_of(site / "404.html")  # not a page (static_site.py's page set)

    # again, with other settings: one block per page, the new settings
    second = _index(zensical_site, "--title", "Ask Skylark")
    assert "updated" in second.stdout
    for path in pages.values():
        html = path.read_text("utf-8")
        assert html.count("anchored-config") == 1 and html.count("anchored.js") == 1
        [settings] = _settings_of(path)
        assert settings["title"] == "Ask Skylark" and settings["endpoint"] == ""
    # the index did not take in the injected block (it is in <head>)
    chunks = (zensical_site / "index" / "chunks.jsonl").read_text("utf-8")
    assert "anchored-config" not in chunks


def test_same_settings_as_the_plugin() -> None:
    """--inject writes the keys the plugin's widget_settings writes, with its defaults."""
    from mkdocs_anchored.inject import page_settings, widget_config
    from mkdocs_anchored.plugin import AnchoredPlugin

    plugin = AnchoredPlugin()
    plugin.load_config({})

    class Page:
        url = "guide/install/"

    expected = plugin.widget_settings(Page())
    assert page_settings(widget_config({}), "guide/install/") == expected
    with pytest.raises(ValueError, match="widget_timeout"):
        widget_config({"widget_timeout": 9999})


def test_injected_site_served_with_the_query_function(zensical_site: Path, tmp_path: Path) -> None:
    """The built site plus ``/v1`` on one origin (as ``anchored serve`` serves): the pages,
    their assets and an answer citing a page of the Zensical site."""
    site = zensical_site / "site"
    if not (site / "assets" / "anchored" / "anchored.js").is_file():
        _index(zensical_site)
    settings = Settings(
        index=str(zensical_site / "index"),
        cache_dir=str(tmp_path / "cache"),
        feedback=str(tmp_path / "feedback"),
        refresh_s=0,
    )
    with ThreadedServer(create_app(settings, site_dir=site)) as srv:
        page = httpx.get(srv.url + "/guide/configuration/", timeout=30)
        assert page.status_code == 200 and "anchored-config" in page.text
        script = httpx.get(srv.url + "/assets/anchored/anchored.js", timeout=30)
        assert script.status_code == 200 and "javascript" in script.headers["content-type"]
        answer = httpx.post(
            srv.url + "/v1/ask", json={"question": "How do I change the port?"}, timeout=60
        ).json()
        assert not answer["abstained"]
        cited = {c["url"] for c in answer["citations"]}
        assert "guide/configuration/#port" in cited
        # the cited anchor exists on the Zensical page
        assert 'id="port"' in page.text


@pytest.mark.browser
def test_e2e_in_chromium_on_the_zensical_site(zensical_site: Path, tmp_path: Path) -> None:
    """tests/browser/e2e.test.js (extractive) in real Chromium against the Zensical-built
    qa-site with the injected ask box, served with the query function on one origin:
    ask, cite, land, highlight, text-fragment links, follow-up, scope, feedback, markup.
    ``ANCHORED_ZENSICAL_SHOTS=DIR`` keeps the answer picture as DIR/zensical-ask-box.png
    (site/images/zensical-ask-box.png, the docs' image)."""
    import os

    from tests.liveserver import AppProcess
    from tests.test_browser import BROWSER, NODE_PACKAGES, _node_env, _require_browser, _run

    _require_browser()
    if not all((BROWSER / "node_modules" / p).is_dir() for p in NODE_PACKAGES):
        pytest.skip("tests/browser/node_modules is missing (test_browser.py installs it)")
    site = zensical_site / "site"
    _index(zensical_site)  # the same origin: endpoint ""
    feedback = tmp_path / "feedback"
    server = (
        "import sys, uvicorn; from pathlib import Path; "
        "from anchored_query.serve.app import create_app; "
        "from anchored_query.settings import Settings; "
        "uvicorn.run(create_app(Settings.from_env(), site_dir=Path(sys.argv[1])), "
        "host='127.0.0.1', port=int(sys.argv[3]), log_level='warning')"
    )
    env = {
        "ANCHORED_INDEX": str(zensical_site / "index"),
        "ANCHORED_CACHE_DIR": str(tmp_path / "cache"),
        "ANCHORED_FEEDBACK": str(feedback),
        "ANCHORED_REFRESH_S": "0",
    }
    command = [sys.executable, "-c", server, str(site)]  # AppProcess adds --port N
    # e2e.test.js copies its answer picture as ask-box.png (the MkDocs picture's name): into
    # a folder of its own here, then to ANCHORED_ZENSICAL_SHOTS as zensical-ask-box.png.
    doc_images = tmp_path / "doc-images"
    doc_images.mkdir()
    with AppProcess(env, command=command, log_file=tmp_path / "server.log") as proc:
        node_env = _node_env(
            ANCHORED_TEST_URL=proc.url,
            ANCHORED_TEST_SITE="/",
            ANCHORED_E2E="extractive",
            ANCHORED_E2E_FEEDBACK=str(feedback),
            ANCHORED_SCREENSHOTS=str(tmp_path / "shots"),
            ANCHORED_E2E_DOC_IMAGES=str(doc_images),
        )
        cmd = ["node", "--test", "--test-concurrency=1", "--test-reporter=tap", "e2e.test.js"]
        # as long as test_browser.py gives e2e.test.js (its every-span tests take minutes)
        code, out = _run(cmd, cwd=BROWSER, env=node_env, timeout=600)
    assert code == 0, f"e2e.test.js on the Zensical site failed (exit {code}):\n{out}"
    passed = re.search(r"^# pass (\d+)$", out, re.M)
    assert passed and int(passed.group(1)) >= 6, out
    shots = os.environ.get("ANCHORED_ZENSICAL_SHOTS", "")
    if shots:
        shutil.copyfile(doc_images / "ask-box.png", Path(shots) / "zensical-ask-box.png")
