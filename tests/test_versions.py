"""Versioned docs with the real ``mike``: one index per version, one function for all.

``tests/versions_site.py`` builds a fixture site twice with ``mike deploy`` (1.0, then
2.0 with alias ``latest``; the default timeout is 10 s in 1.0 and 30 s in 2.0); the
plugin, run by mike's build, writes each version's index to a local store. Those
indexes are also published per version to moto's S3 server over real HTTP with
``anchored publish --version``. The function answers each version from its own index,
resolves aliases, refuses unknown versions naming the known ones, keeps at most
``ANCHORED_MAX_VERSIONS_LOADED`` in memory and picks up a moved alias; the ask box in
real Chromium asks the version of the page it is on, or the latest.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import anchored_query.engine as engine_module
import httpx
import pytest
from anchored_query.engine import Engine
from anchored_query.errors import QueryError
from anchored_query.question.validation import AskRequest
from anchored_query.serve.app import create_app
from anchored_query.settings import Settings
from appsettings import settings_for
from mkdocs_anchored.cli import main as anchored
from s3server import S3Bucket, moto_s3, s3
from stallings3 import StallingS3
from starlette.testclient import TestClient

from build_index.errors import IndexFormatError, PublishError
from build_index.publish import S3Location
from build_index.versions import Catalog, publish_version, read_catalog_s3
from tests.liveserver import ThreadedServer
from tests.versions_site import MikeSite, build_mike_site, mike_deploy, mike_env

__all__ = ["moto_s3", "s3"]  # fixtures used by name

Q = "What is the default timeout?"
CONFIG = re.compile(r'<script id="anchored-config" type="application/json">(.*?)</script>', re.S)


@pytest.fixture(scope="module")
def mike_site(tmp_path_factory: pytest.TempPathFactory) -> MikeSite:
    if shutil.which("git") is None:
        pytest.skip("git is needed to build with mike")
    return build_mike_site(tmp_path_factory.mktemp("mike"))


def _engine(index: str | Path, cache: Path, **env: str) -> Engine:
    values = {"ANCHORED_INDEX": str(index), "ANCHORED_CACHE_DIR": str(cache), **env}
    return Engine(Settings.from_env(values))


def _answer(result: dict[str, Any]) -> str:
    return " ".join(item["text"] for item in result["answer"])


def _check_answers(engine: Engine) -> None:
    """Each version from its own index; aliases and the default resolve to 2.0."""
    old = engine.ask(AskRequest(question=Q, version="1.0"))
    assert old["version"] == "1.0"
    assert "10 seconds" in _answer(old) and "30 seconds" not in _answer(old)
    for name in ("2.0", "latest", None):
        new = engine.ask(AskRequest(question=Q, version=name))
        assert new["version"] == "2.0", name
        assert "30 seconds" in _answer(new) and "10 seconds" not in _answer(new), name
    assert old["build_id"] != new["build_id"]
    # A page only 2.0 has is found in 2.0 only.
    found = engine.search("read a response body in chunks with client.stream", 3, "2.0")
    assert found["version"] == "2.0"
    assert found["results"][0]["url"].startswith("streaming/")
    older = engine.search("read a response body in chunks with client.stream", 3, "1.0")
    assert all(not r["url"].startswith("streaming/") for r in older["results"])
    with pytest.raises(QueryError) as caught:
        engine.ask(AskRequest(question=Q, version="3.0"))
    assert caught.value.status == 400 and caught.value.code == "unknown_version"
    assert "2.0 (latest), 1.0" in caught.value.message


# -- the catalog ------------------------------------------------------------


def test_catalog_moves_aliases_resolves_and_refuses_clashes() -> None:
    c = Catalog().with_version("1.0", build_id="a", aliases=["latest"])
    c = c.with_version("2.0", build_id="b", aliases=["latest", "stable"])
    assert [v.version for v in c.versions] == ["2.0", "1.0"]  # newest first, as mike
    assert c.find("1.0").aliases == ()  # type: ignore[union-attr]
    assert c.resolve("latest") == "2.0" and c.resolve(None) == "2.0"
    assert c.resolve("1.0") == "1.0" and c.resolve("9.9") is None
    again = c.with_version("1.0", build_id="c")  # republished: keeps its place
    assert [v.version for v in again.versions] == ["2.0", "1.0"]
    assert again.find("1.0").build_id == "c"  # type: ignore[union-attr]
    assert again.with_version("1.0", build_id="c", make_default=True).resolve(None) == "1.0"
    with pytest.raises(PublishError, match="name of a version"):
        c.with_version("3.0", build_id="d", aliases=["1.0"])
    with pytest.raises(PublishError, match="alias of another version"):
        c.with_version("stable", build_id="d")
    with pytest.raises(ValueError, match="not a usable name"):
        c.with_version("../etc", build_id="d")
    assert Catalog.from_json(again.to_json(), "x") == again
    with pytest.raises(IndexFormatError, match="twice"):
        raw = json.loads(c.to_json())
        raw["versions"][1]["aliases"] = ["latest"]
        Catalog.from_json(json.dumps(raw).encode(), "versions.json")


def test_plugin_takes_the_version_mike_is_building(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.exceptions import PluginError
    from mkdocs_anchored.plugin import AnchoredPlugin

    def configured(options: dict[str, Any]) -> AnchoredPlugin:
        plugin = AnchoredPlugin()
        errors, _ = plugin.load_config(options)
        assert errors == []
        config = MkDocsConfig(config_file_path=str(tmp_path / "mkdocs.yml"))
        config["site_dir"] = str(tmp_path / "site")
        plugin.on_config(config)
        return plugin

    class Page:
        url = "guide/"

    monkeypatch.delenv("MIKE_DOCS_VERSION", raising=False)
    plain = configured({"store": "store"})
    assert plain.index_dir == (tmp_path / "store").resolve() and "version" not in (
        plain.widget_settings(Page())  # type: ignore[arg-type]
    )
    monkeypatch.setenv("MIKE_DOCS_VERSION", "1.2")
    monkeypatch.setenv("ANCHORED_VERSION_ALIASES", "latest, stable")
    mike = configured({"store": "store"})
    assert mike.index_dir == (tmp_path / "store" / "versions" / "1.2").resolve()
    assert mike.widget_settings(Page())["version"] == "1.2"  # type: ignore[arg-type]
    assert mike._version_aliases() == ["latest", "stable"]
    s3 = configured({"store": "s3://bucket/docs", "version": "2.0", "version_aliases": ["x"]})
    assert s3.version == "2.0" and s3.index_dir is not None
    assert s3.index_dir.parts[-3:] == ("versions", "2.0", "index")
    assert s3._version_aliases() == ["x"]
    monkeypatch.setenv("MIKE_DOCS_VERSION", "../etc")
    with pytest.raises(PluginError, match="not a usable name"):
        configured({"store": "store"})


# -- the mike-built site -------------------------------------------------------


def test_mike_builds_each_version_with_its_own_index(mike_site: MikeSite) -> None:
    catalog = Catalog.from_json((mike_site.store / "versions.json").read_bytes(), "versions.json")
    assert [(v.version, v.aliases) for v in catalog.versions] == [("2.0", ("latest",)), ("1.0", ())]
    for version in ("1.0", "2.0"):
        manifest_file = mike_site.store / "versions" / version / "manifest.json"
        manifest = json.loads(manifest_file.read_text())
        assert catalog.find(version).build_id == manifest["build_id"]  # type: ignore[union-attr]
    # mike's own versions.json agrees, and each built page carries its version for the ask box.
    mike = json.loads((mike_site.pages / "versions.json").read_text())
    assert [(v["version"], v["aliases"]) for v in mike] == [("2.0", ["latest"]), ("1.0", [])]
    for version in ("1.0", "2.0"):
        page = (mike_site.pages / version / "configuration" / "index.html").read_text()
        assert json.loads(CONFIG.search(page).group(1))["version"] == version  # type: ignore[union-attr]


def test_mike_builds_llms_txt_and_twins_per_version(mike_site: MikeSite) -> None:
    """Each version's folder has its own llms.txt and twins, linked under the version."""
    from tests.llms_check import links, parse_llms_txt, target_file

    for version, pages in (("1.0", 2), ("2.0", 3)):
        root = mike_site.pages / version
        parsed = parse_llms_txt((root / "llms.txt").read_text("utf-8"))
        assert parsed.title == "Versioned Fixture"
        urls = [url for _, items in parsed.sections for _, url, _ in items]
        base = f"https://docs.example.test/{version}/"
        assert len(urls) == pages and urls[0] == base + "index.md"
        for path in [root / "llms.txt", root / "llms-full.txt", *root.rglob("*.md")]:
            for url in links(path.read_text("utf-8")):
                if url.startswith("https://docs.example.test/"):
                    assert url.startswith(base), url
                    assert target_file(root, base, url).is_file(), url  # type: ignore[union-attr]
    twin = (mike_site.pages / "2.0" / "configuration" / "index.md").read_text("utf-8")
    assert "## Timeout {#timeout}" in twin and "30 seconds" in twin
    assert "30 seconds" not in (mike_site.pages / "1.0" / "llms-full.txt").read_text("utf-8")


def test_an_unversioned_index_refuses_a_version(mike_site: MikeSite, tmp_path: Path) -> None:
    engine = _engine(mike_site.store / "versions" / "1.0", tmp_path / "cache")  # a plain index
    assert "version" not in engine.ask(AskRequest(question=Q))
    with pytest.raises(QueryError) as caught:
        engine.current("1.0")
    assert caught.value.code == "unknown_version" and "no versions" in caught.value.message
    assert engine.versions() is None


def test_function_answers_each_version_from_the_local_store(
    mike_site: MikeSite, tmp_path: Path
) -> None:
    engine = _engine(mike_site.store, tmp_path / "cache")
    _check_answers(engine)
    health = engine.health()
    assert health["default_version"] == "2.0"
    assert [v["version"] for v in health["versions"]] == ["2.0", "1.0"]


def test_versions_published_to_s3_are_served_from_one_deployment(
    mike_site: MikeSite, s3: S3Bucket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3.server.endpoint_url)
    store = f"s3://{s3.name}/docs"
    one, two = (str(mike_site.store / "versions" / v) for v in ("1.0", "2.0"))
    assert anchored(["publish", one, store, "--version", "1.0", "--alias", "latest"]) == 0
    assert anchored(["publish", two, store, "--version", "2.0", "--alias", "latest"]) == 0
    assert "as version 2.0 (aliases: latest)" in capsys.readouterr().out
    keys = s3.keys("docs/")
    assert "docs/versions.json" in keys and "docs/current.json" not in keys
    for version in ("1.0", "2.0"):
        assert f"docs/versions/{version}/current.json" in keys
    catalog, _, _ = read_catalog_s3(s3.client, S3Location.parse(store))
    assert catalog is not None and catalog.resolve("latest") == "2.0"
    assert catalog.find("1.0").aliases == ()  # type: ignore[union-attr]  # the alias moved
    engine = _engine(store, tmp_path / "cache", ANCHORED_MAX_VERSIONS_LOADED="1")
    _check_answers(engine)
    router = engine.versions()
    # The bound: only the version asked last (1.0, by the last search) stays in memory.
    assert router is not None and router.loaded_versions() == ["1.0"]
    assert (tmp_path / "cache" / "versions" / "1.0").is_dir()  # each version its own cache
    # A bad alias is refused before anything is uploaded; the catalog is unchanged.
    before = s3.get("docs/versions.json")
    assert anchored(["publish", one, store, "--version", "3.0", "--alias", "1.0"]) == 1
    assert s3.get("docs/versions.json") == before
    assert not any(k.startswith("docs/versions/3.0/") for k in s3.keys("docs/"))


def test_the_plugin_under_mike_publishes_its_version_to_s3(
    mike_site: MikeSite, s3: S3Bucket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``mike deploy`` with an ``s3://`` store: the plugin publishes the version's index
    to ``versions/<version>/`` and names it, with its alias, in ``versions.json``."""
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3.server.endpoint_url)
    store = f"s3://{s3.name}/docs"
    text = (mike_site.repo / "mkdocs.yml").read_text(encoding="utf-8")
    assert "store: ../store" in text
    config = mike_site.repo / "mkdocs-s3.yml"
    config.write_text(text.replace("store: ../store", f"store: {store}"), encoding="utf-8")
    out = mike_deploy(mike_site.repo, "2.1", "latest", config=config.name, env=mike_env())
    assert "published version 2.1" in out
    keys = s3.keys("docs/")
    assert "docs/versions/2.1/current.json" in keys and "docs/current.json" not in keys
    catalog, _, _ = read_catalog_s3(s3.client, S3Location.parse(store))
    assert catalog is not None and [(v.version, v.aliases) for v in catalog.versions] == [
        ("2.1", ("latest",))
    ]
    result = _engine(store, tmp_path / "cache").ask(AskRequest(question=Q, version="latest"))
    assert result["version"] == "2.1" and "30 seconds" in _answer(result)


def test_a_moved_alias_is_picked_up_without_a_redeploy(
    mike_site: MikeSite, s3: S3Bucket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3.server.endpoint_url)
    store = f"s3://{s3.name}/docs"
    for version in ("2.0", "1.0"):  # 1.0 published last, with latest
        publish_version(mike_site.store / "versions" / version, store, version, aliases=["latest"])
    engine = _engine(store, tmp_path / "cache", ANCHORED_REFRESH_S="0")
    assert engine.ask(AskRequest(question=Q, version="latest"))["version"] == "1.0"
    publish_version(mike_site.store / "versions" / "2.0", store, "2.0", aliases=["latest"])
    engine.current("1.0")  # starts the background catalog check
    router = engine.versions()
    assert router is not None and router.wait_for_refresh(10)
    result = engine.ask(AskRequest(question=Q, version="latest"))
    assert result["version"] == "2.0" and "30 seconds" in _answer(result)


def test_a_cold_start_prefetches_the_default_version(
    mike_site: MikeSite, s3: S3Bucket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lambda's prefetch() of a versioned store downloads the default version where its
    engine looks, so the first request finds it in the cache."""
    from anchored_query.store import prefetch, prefetches

    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3.server.endpoint_url)
    store = f"s3://{s3.name}/docs"
    for version, aliases in (("1.0", []), ("2.0", ["latest"])):
        publish_version(mike_site.store / "versions" / version, store, version, aliases=aliases)
    cache = tmp_path / "cache"
    assert prefetch.prefetch(store, cache_dir=cache)
    with prefetches._prefetches_lock:
        threads = list(prefetches._prefetches.values())
    for thread in threads:
        thread.join(60)
    build = json.loads((mike_site.store / "versions" / "2.0" / "manifest.json").read_text())
    assert (cache / "versions" / "2.0" / build["build_id"] / "manifest.json").is_file()
    assert not (cache / "versions" / "1.0").exists()
    result = _engine(store, cache).ask(AskRequest(question=Q))
    assert result["version"] == "2.0" and result["build_id"] == build["build_id"]


def test_a_damaged_catalog_is_read_again_only_after_a_back_off(
    s3: S3Bucket, qa_index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A damaged versions.json is a 503 with Retry-After, and S3 is not asked for it again
    until then (the cold start's back-off: 1 s, then 2 s...); fixed, it is picked up at the
    first request after the wait. Before, every request read it again and got no Retry-After.
    GETs are counted by a relay between the function and moto (tests/stallings3.py).
    The back-off starts at 3 s here (1 s by default), so that the requests meant to come
    within a wait do on a busy machine too."""
    monkeypatch.setattr(engine_module, "COLD_RETRY_BASE_S", 3.0)
    with StallingS3(s3.server.endpoint_url) as relay:
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", relay.endpoint_url)
        store = f"s3://{s3.name}/docs"
        publish_version(qa_index, store, "1.0", client=s3.client)
        key = "docs/versions.json"
        good = s3.get(key)
        s3.client.put_object(Bucket=s3.name, Key=key, Body=good[: len(good) // 2])
        app = create_app(settings_for(store, tmp_path))
        with TestClient(app, raise_server_exceptions=False) as client:
            first = client.get("/v1/search", params={"q": "port"})
            assert first.status_code == 503, first.text
            assert "versions catalog is damaged" in first.json()["error"]["message"]
            assert first.headers["retry-after"] == "3"
            assert relay.count(key) == 1
            for _ in range(5):  # within the wait: the same 503, no GET
                again = client.get("/v1/search", params={"q": "port"})
                assert again.status_code == 503 and again.json() == first.json()
                assert "retry-after" in again.headers
            assert relay.count(key) == 1

            time.sleep(3.1)  # the wait is over: read once more, still damaged, waits 6 s
            second = client.get("/v1/search", params={"q": "port"})
            assert second.status_code == 503 and second.headers["retry-after"] == "6"
            assert relay.count(key) == 2

            s3.client.put_object(Bucket=s3.name, Key=key, Body=good)
            assert client.get("/v1/search", params={"q": "port"}).status_code == 503
            assert relay.count(key) == 2
            time.sleep(6.1)
            fixed = client.get("/v1/search", params={"q": "port"})
            assert fixed.status_code == 200, fixed.text
            assert fixed.json()["version"] == "1.0"
            assert relay.count(key) >= 3


def test_http_api_takes_a_version_and_lists_known_ones(mike_site: MikeSite, tmp_path: Path) -> None:
    settings = Settings.from_env(
        {"ANCHORED_INDEX": str(mike_site.store), "ANCHORED_CACHE_DIR": str(tmp_path / "c")}
    )
    with ThreadedServer(create_app(settings)) as srv:
        url = f"http://127.0.0.1:{srv.port}"
        r = httpx.post(f"{url}/v1/ask", json={"question": Q, "version": "1.0"}, timeout=60)
        assert r.status_code == 200 and r.json()["version"] == "1.0"
        assert "10 seconds" in _answer(r.json())
        r = httpx.post(f"{url}/v1/ask", json={"question": Q}, timeout=60)
        assert r.json()["version"] == "2.0"
        r = httpx.get(f"{url}/v1/search", params={"q": "timeout", "version": "latest"})
        assert r.status_code == 200 and r.json()["version"] == "2.0"
        r = httpx.post(f"{url}/v1/search", json={"q": "timeout", "version": "1.0"})
        assert r.json()["version"] == "1.0"
        r = httpx.post(f"{url}/v1/ask", json={"question": Q, "version": "0.9"}, timeout=60)
        assert r.status_code == 400
        assert r.json()["error"]["code"] == "unknown_version"
        assert "2.0 (latest), 1.0" in r.json()["error"]["message"]
        r = httpx.post(f"{url}/v1/ask", json={"question": Q, "version": ["1.0"]}, timeout=60)
        assert r.status_code == 400 and r.json()["error"]["code"] == "bad_request"
        health = httpx.get(f"{url}/v1/health").json()
        assert health["default_version"] == "2.0" and health["version"] == "2.0"


@pytest.mark.browser
def test_widget_in_chromium_on_the_mike_site(mike_site: MikeSite, tmp_path: Path) -> None:
    """tests/browser/versions.test.js in real Chromium against the mike-built pages served
    with the function over the versioned store: ask on /1.0/ → a 1.0 answer labelled 1.0;
    the latest chosen with the keyboard → 2.0 with 2.0 links; /latest/ → 2.0.
    ``ANCHORED_VERSIONS_SHOTS=DIR`` keeps the screenshot (the docs' image)."""
    from tests.liveserver import AppProcess
    from tests.test_browser import BROWSER, NODE_PACKAGES, _node_env, _require_browser, _run

    _require_browser()
    if not all((BROWSER / "node_modules" / p).is_dir() for p in NODE_PACKAGES):
        pytest.skip("tests/browser/node_modules is missing (test_browser.py installs it)")
    server = (
        "import sys, uvicorn; from pathlib import Path; "
        "from anchored_query.serve.app import create_app; "
        "from anchored_query.settings import Settings; "
        "uvicorn.run(create_app(Settings.from_env(), site_dir=Path(sys.argv[1])), "
        "host='127.0.0.1', port=int(sys.argv[3]), log_level='warning')"
    )
    env = {
        "ANCHORED_INDEX": str(mike_site.store),
        "ANCHORED_CACHE_DIR": str(tmp_path / "cache"),
        "ANCHORED_FEEDBACK": str(tmp_path / "feedback"),
    }
    command = [sys.executable, "-c", server, str(mike_site.pages)]  # AppProcess adds --port
    with AppProcess(env, command=command, log_file=tmp_path / "server.log") as proc:
        for version in ("1.0", "2.0"):  # both indexes loaded before the browser's clock runs
            warm = {"question": Q, "version": version}
            assert httpx.post(f"{proc.url}/v1/ask", json=warm, timeout=300).status_code == 200
        extra = {"ANCHORED_VERSIONS_DOC_IMAGES": os.environ.get("ANCHORED_VERSIONS_SHOTS", "")}
        node_env = _node_env(
            ANCHORED_TEST_URL=proc.url,
            ANCHORED_VERSIONS_E2E="1",
            ANCHORED_SCREENSHOTS=str(tmp_path / "shots"),
            **{k: v for k, v in extra.items() if v},
        )
        cmd = ["node", "--test", "--test-concurrency=1", "--test-reporter=tap", "versions.test.js"]
        code, out = _run(cmd, cwd=BROWSER, env=node_env, timeout=300)
    assert code == 0, f"versions.test.js failed (exit {code}):\n{out}"
    passed = re.search(r"^# pass (\d+)$", out, re.M)
    assert passed and int(passed.group(1)) == 8, out  # 3 in Chromium, 5 without
