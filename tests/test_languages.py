"""Multilingual docs: ``tests/fixtures/i18n-site`` (English and Chinese) built by the real
``mkdocs build`` with the real mkdocs-static-i18n and Material's language selector, indexed
by the anchored plugin; asks and searches in each language through the real app over HTTP;
the ask box in real Chromium (tests/browser/languages.test.js)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from anchored_query.answer.languages import normalize, reader_languages
from anchored_query.engine import Engine
from anchored_query.question.validation import parse_ask
from anchored_query.serve.app import create_app
from anchored_query.settings import Settings

from build_index.index_format import JsonlRows, read_index
from build_index.pipeline import BuildConfig, build
from build_index.types import PageInput
from tests.liveserver import ThreadedServer

FIXTURE = Path(__file__).parent / "fixtures" / "i18n-site"
MKDOCS = str(Path(sys.executable).parent / "mkdocs")
CONFIG = re.compile(r'<script id="anchored-config" type="application/json">(.*?)</script>', re.S)
PLUGIN_Q = "如何编写插件？"  # "How do I write a plugin?": only the English pages say


@pytest.fixture(scope="module")
def i18n_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture built once; the project folder (``site/`` and ``.anchored/index``)."""
    pytest.importorskip("mkdocs_static_i18n", reason="pip install mkdocs-static-i18n")
    project = tmp_path_factory.mktemp("i18n") / "project"
    shutil.copytree(FIXTURE, project)
    result = subprocess.run(
        [MKDOCS, "build", "--strict"], cwd=project, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return project


@pytest.fixture(scope="module")
def server(i18n_site: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    cache = tmp_path_factory.mktemp("i18n-serve")
    settings = Settings(
        index=str(i18n_site / ".anchored" / "index"),
        cache_dir=str(cache / "cache"),
        feedback=str(cache / "feedback"),
        refresh_s=0,
    )
    with ThreadedServer(create_app(settings, site_dir=i18n_site / "site")) as srv:
        yield srv


def ask(server: Any, question: str, **fields: Any) -> dict[str, Any]:
    reply = httpx.post(server.url + "/v1/ask", json={"question": question, **fields}, timeout=120)
    assert reply.status_code == 200, reply.text
    data: dict[str, Any] = reply.json()
    return data


def pages(reply: dict[str, Any]) -> set[str]:
    return {c["url"].split("#")[0] for c in reply["citations"]}


def test_both_languages_in_one_index_with_their_language(i18n_site: Path) -> None:
    index = read_index(i18n_site / ".anchored" / "index")
    langs = Counter(zip(index.chunks.pages, index.chunks.langs, strict=True))
    by_page = {page: lang for page, lang in langs}
    assert by_page["configuration/"] == "en" and by_page["zh/configuration/"] == "zh"
    assert by_page[""] == "en" and by_page["zh/"] == "zh"
    # every page of both languages, once; not the untranslated fallback copy in /zh/
    assert set(by_page) == {
        "", "configuration/", "conflicts/", "install/", "plugins/",
        "zh/", "zh/configuration/", "zh/conflicts/", "zh/install/",
    }  # fmt: skip
    assert (i18n_site / "site" / "zh" / "plugins" / "index.html").is_file()
    # the chunk records carry it right after "page" (read without parsing the rows)
    first = (i18n_site / ".anchored" / "index" / "chunks.jsonl").read_text("utf-8").split("\n")[0]
    assert re.match(r'\{"id":"[^"]*","page":"[^"]*","lang":"(en|zh)"', first)


def test_pages_carry_language_settings_and_the_language_selector(i18n_site: Path) -> None:
    site = i18n_site / "site"
    zh = (site / "zh" / "configuration" / "index.html").read_text("utf-8")
    en = (site / "configuration" / "index.html").read_text("utf-8")
    assert '<html lang="zh"' in zh and '<html lang="en"' in en
    for html in (zh, en):
        [settings] = [json.loads(m.replace("<\\/", "</")) for m in CONFIG.findall(html)]
        assert settings["languages"] == ["en", "zh"]
    # Material's language selector (mkdocs-static-i18n fills extra.alternate)
    assert 'hreflang="zh"' in en and 'hreflang="en"' in zh
    assert (site / "assets" / "anchored" / "languages.js").is_file()


@pytest.mark.parametrize(
    ("question", "lang", "page"),
    [
        ("Which port does the service listen on?", "en", "configuration/"),
        ("How are conflicts resolved?", "en", "conflicts/"),
        ("What Python version do I need?", "en", "install/"),
        ("默认端口是多少？", "zh", "zh/configuration/"),
        ("如何安装 Ferry？", "zh", "zh/install/"),
        ("需要什么版本的 Python？", "zh", "zh/install/"),
        ("日志级别怎么设置？", "zh", "zh/configuration/"),
    ],
)
def test_asks_cite_pages_of_the_readers_language(
    server: Any, question: str, lang: str, page: str
) -> None:
    reply = ask(server, question, lang=lang)
    assert not reply["abstained"], reply
    assert page in pages(reply)
    assert {c["lang"] for c in reply["citations"]} == {lang}
    assert reply["lang"] == lang and reply["other_language"] is False
    assert reply["answer_languages"] == [lang] and "note" not in reply


def test_question_only_english_pages_answer_cites_them_with_the_note(server: Any) -> None:
    reply = ask(server, PLUGIN_Q, lang="zh")
    assert not reply["abstained"], reply
    assert pages(reply) <= {"plugins/"} and "plugins/" in pages(reply)
    assert reply["other_language"] is True and reply["answer_languages"] == ["en"]
    assert "Chinese" in reply["note"] and "English" in reply["note"]
    # an English question from a Chinese page: no Chinese page matches, the English one does
    english = ask(server, "Which hook is called after each file transfer?", lang="zh-CN")
    assert "plugins/" in pages(english) and english["other_language"] is True


def test_other_languages_includes_the_other_pages(server: Any) -> None:
    question = "Where is the settings file?"  # no Chinese page has these English words
    own = ask(server, question, lang="zh", other_languages=False)
    both = ask(server, question, lang="zh", other_languages=True)
    # restricted to Chinese, the English question has no Chinese page to stand on and
    # goes to the English one with the note; with the others included, the English
    # page ranks first on its own, and the note says where the answer comes from
    assert "configuration/" in pages(own) and own["other_language"] is True
    assert "No page in Chinese" in own["note"]
    assert "configuration/" in pages(both) and both["other_language"] is True
    assert both["note"] == "This answer comes from the English pages."
    found = httpx.post(
        server.url + "/v1/search", json={"q": "端口 port", "lang": "zh"}, timeout=60
    ).json()
    assert {r["lang"] for r in found["results"]} == {"zh"} and found["other_language"] is False
    everything = httpx.post(
        server.url + "/v1/search",
        json={"q": "端口 port", "lang": "zh", "other_languages": True},
        timeout=60,
    ).json()
    assert {r["lang"] for r in everything["results"]} == {"en", "zh"}


def test_without_lang_every_language_is_searched_as_before(server: Any) -> None:
    reply = ask(server, "默认端口是多少？")
    assert "zh/configuration/" in pages(reply)
    assert "lang" not in reply and "other_language" not in reply and "note" not in reply
    assert {c["lang"] for c in reply["citations"]} == {"zh"}  # citations still say
    found = httpx.get(server.url + "/v1/search", params={"q": "port"}, timeout=60).json()
    assert {r["lang"] for r in found["results"]} >= {"en"} and "lang" not in found


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"lang": "not a tag!"}, "'lang' must be a language tag"),
        ({"lang": 5}, "'lang' must be a language tag"),
        ({"lang": "zh", "other_languages": "yes"}, "'other_languages' must be true or false"),
        ({"languages": ["zh"]}, "unknown fields: languages"),
    ],
)
def test_bad_language_fields_are_refused(server: Any, body: dict[str, Any], message: str) -> None:
    reply = httpx.post(server.url + "/v1/ask", json={"question": "port?", **body}, timeout=30)
    assert reply.status_code == 400 and message in reply.json()["error"]["message"]


def test_language_tags_are_matched_by_primary_subtag() -> None:
    assert normalize(" zh_CN ") == "zh-cn" and normalize("x") == "" and normalize("") == ""
    assert reader_languages("zh-cn", ["en", "zh"]) == ("zh",)
    assert reader_languages("zh", ["en", "zh-hans", "zh-hant"]) == ("zh-hans", "zh-hant")
    assert reader_languages("zh-hant", ["en", "zh-hans", "zh-hant"]) == ("zh-hant",)
    assert reader_languages("fr", ["en", "zh"]) == ()
    settings = Settings(index="unused")
    assert parse_ask({"question": "q", "lang": "pt-BR"}, settings).lang == "pt-br"


def test_an_index_without_languages_answers_as_before(tmp_path: Path) -> None:
    """Pages without a language (an index written before the field): no ``lang`` in the
    rows, and asks with ``lang`` get the answer they got without it, with no new fields."""
    html = (
        '<h1 id="ferry">Ferry</h1><h2 id="port">Port</h2>'
        "<p>The service listens on port 7070 by default. Set port in ferry.toml.</p>"
        '<h2 id="logs">Logs</h2><p>The log level is info unless log_level says otherwise.</p>'
    )
    index_dir = tmp_path / "index"
    build([PageInput(url="config/", html=html, title="Ferry")], index_dir, BuildConfig())
    assert '"lang"' not in (index_dir / "chunks.jsonl").read_text("utf-8")
    assert set(read_index(index_dir).chunks.langs) == {""}
    settings = Settings(index=str(index_dir), cache_dir=str(tmp_path / "c"), refresh_s=0)
    engine = Engine(settings)
    plain = engine.ask(parse_ask({"question": "Which port by default?"}, settings))
    with_lang = engine.ask(
        parse_ask({"question": "Which port by default?", "lang": "zh"}, settings)
    )
    assert [c["url"] for c in with_lang["citations"]] == [c["url"] for c in plain["citations"]]
    assert with_lang["answer"] == plain["answer"]
    assert not {"lang", "other_language", "note"} & with_lang.keys()
    assert all("lang" not in c for c in with_lang["citations"])


def test_rows_lang_column_read_fast_and_by_parsing() -> None:
    fast = (
        b'{"id":"a#x~0","page":"a","lang":"en","text":"t"}\n{"id":"b#y~0","page":"b","lang":"zh"}\n'
    )
    assert JsonlRows(fast, "x").langs == ["en", "zh"]
    mixed = b'{"id":"a#x~0","page":"a","text":"t"}\n{"id":"b#y~0","page":"b","lang":"zh"}\n'
    assert JsonlRows(mixed, "x").langs == ["", "zh"]
    # a text that mentions "lang" is escaped inside its string: not a column
    old = b'{"id":"a#x~0","page":"a","text":"say \\"lang\\":\\"zh\\""}\n'
    assert JsonlRows(old, "x").langs == [""]


@pytest.mark.browser
def test_ask_box_in_chromium_on_the_built_site(i18n_site: Path, tmp_path: Path) -> None:
    """tests/browser/languages.test.js in real Chromium against the built site served with
    the query function on one origin: the request carries the page's language, the
    checkbox is keyboard reachable and adds ``other_languages``, the note is shown.
    ``ANCHORED_LANG_SHOTS=DIR`` keeps the screenshot (site/images/languages.png)."""
    import os

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
        "ANCHORED_INDEX": str(i18n_site / ".anchored" / "index"),
        "ANCHORED_CACHE_DIR": str(tmp_path / "cache"),
        "ANCHORED_FEEDBACK": str(tmp_path / "feedback"),
        "ANCHORED_REFRESH_S": "0",
    }
    command = [sys.executable, "-c", server, str(i18n_site / "site")]
    with AppProcess(env, command=command, log_file=tmp_path / "server.log") as proc:
        shots = os.environ.get("ANCHORED_LANG_SHOTS", "") or str(tmp_path / "shots")
        node_env = _node_env(
            ANCHORED_TEST_URL=proc.url, ANCHORED_LANG_E2E="1", ANCHORED_SCREENSHOTS=shots
        )
        cmd = ["node", "--test", "--test-concurrency=1", "--test-reporter=tap"]
        code, out = _run([*cmd, "languages.test.js"], cwd=BROWSER, env=node_env, timeout=900)
    assert code == 0, f"languages.test.js failed (exit {code}):\n{out}"
    passed = re.search(r"^# pass (\d+)$", out, re.M)
    assert passed and int(passed.group(1)) >= 3, out
