"""End to end on a real MkDocs + Material build: files -> pages -> sections -> chunks."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest
from pymdownx.slugs import slugify
from selectolax.lexbor import LexborHTMLParser

from build_index.chunking import ChunkSettings, chunk_page
from build_index.errors import AnchoredError
from build_index.static_site import pages_from_site_dir
from build_index.types import Chunk, PageInput, Section

SITE_FIXTURE = Path(__file__).parent / "fixtures" / "site-fixture"
SETTINGS = ChunkSettings()
SEPARATORS = re.compile(r"[\s|¶]+")


@pytest.fixture(scope="module")
def site(fixture_site_build: Path) -> dict[str, tuple[PageInput, list[Section], list[Chunk]]]:
    out = {}
    for page in pages_from_site_dir(fixture_site_build):
        sections, chunks = chunk_page(page, SETTINGS)
        out[page.url] = (page, sections, chunks)
    return out


def html_of(site_dir: Path, url: str) -> str:
    path = site_dir / unquote(url) / "index.html"
    return path.read_text(encoding="utf-8")


def element_ids(html: str) -> set[str]:
    tree = LexborHTMLParser(html)
    ids = {n.attributes.get("id") or "" for n in tree.css("[id]")}
    return ids | {n.attributes.get("name") or "" for n in tree.css("a[name]")}


def key(text: str) -> str:
    """How the widget compares text: no whitespace, no table bars or pilcrows, lower case."""
    return SEPARATORS.sub("", text).lower()


def test_pages_urls_and_titles(
    site: dict[str, tuple[PageInput, list[Section], list[Chunk]]],
) -> None:
    titles = {url: page.title for url, (page, _, _) in site.items()}
    assert titles == {
        "": "Anchored fixture",
        "admonitions/": "Admonitions and lists",
        "code/": "Code",
        "duplicates/": "Duplicates and ids",
        "excluded/": "Excluded",
        "no-headings/": "No headings",
        "reference/big-table/": "Big table",
        "zh/%E4%B8%AD%E6%96%87/": "中文",
    }  # no 404, search, sitemap or asset pages; URLs quoted like MkDocs' page.url


def test_urls_match_mkdocs_search_index(
    fixture_site_build: Path, site: dict[str, tuple[PageInput, list[Section], list[Chunk]]]
) -> None:
    index = json.loads((fixture_site_build / "search" / "search_index.json").read_text())
    locations = {doc["location"] for doc in index["docs"]}
    ours = {s.id for _, sections, _ in site.values() for s in sections}
    # Every section MkDocs' search found with text is ours too, at the same location.
    for doc in index["docs"]:
        if "#" in doc["location"] and doc["text"]:
            assert doc["location"] in ours
    # And ours are MkDocs' own, apart from the pieces it cannot see (and the h1,
    # which Material files under the bare page URL).
    h1 = {s.id for _, sections, _ in site.values() for s in sections if s.meta["level"] == 1}
    extra = {loc for loc in ours - locations - h1 if not loc.endswith("#")}
    assert extra == {"duplicates/#legacy-anchor", "duplicates/#legacy-id"}


def test_every_anchor_is_an_id_of_the_built_page(
    fixture_site_build: Path, site: dict[str, tuple[PageInput, list[Section], list[Chunk]]]
) -> None:
    checked = 0
    for url, (_, sections, chunks) in site.items():
        ids = element_ids(html_of(fixture_site_build, url))
        for chunk in chunks:
            assert chunk.anchor == "" or chunk.anchor in ids, chunk.id
            checked += 1
        for section in sections:
            assert section.id == f"{url}#{section.anchor}"
    assert checked > 30


def test_empty_anchor_only_for_text_above_the_first_heading(
    site: dict[str, tuple[PageInput, list[Section], list[Chunk]]],
) -> None:
    blank = {url: s for url, (_, sections, _) in site.items() for s in sections if not s.anchor}
    assert set(blank) == {"", "no-headings/"}
    assert blank[""].text.startswith("Anchored fixture home.")
    assert blank[""].text.endswith("mentions the widget.")
    assert "Welcome" not in blank[""].text
    assert blank["no-headings/"].heading_path == ["No headings"]


def test_chunk_text_is_found_at_its_offsets(
    site: dict[str, tuple[PageInput, list[Section], list[Chunk]]],
) -> None:
    for _, sections, chunks in site.values():
        by_id = {s.id: s for s in sections}
        for chunk in chunks:
            start, end = chunk.offsets
            body = by_id[chunk.parent].text[start:end]
            assert chunk.text == (f"{chunk.header}\n{body}" if chunk.header else body)


def test_section_text_is_the_page_text(
    fixture_site_build: Path, site: dict[str, tuple[PageInput, list[Section], list[Chunk]]]
) -> None:
    """Every line can be found on the live page the way the widget searches for it."""
    for url, (_, sections, _) in site.items():
        tree = LexborHTMLParser(html_of(fixture_site_build, url))
        article = tree.css_first("article.md-content__inner")
        assert article is not None
        page_key = key(article.text())
        for section in sections:
            for line in section.text.split("\n"):
                assert key(line) in page_key, (url, line)


def test_hidden_and_excluded_text_never_reaches_a_chunk(
    site: dict[str, tuple[PageInput, list[Section], list[Chunk]]],
) -> None:
    everything = "\n".join(c.text for _, _, chunks in site.values() for c in chunks)
    for marker in ("SECRET-HIDDEN-SECTION", "HIDDEN-ATTR", "DISPLAY-NONE", "ARIA-HIDDEN"):
        assert marker not in everything
    assert "An element marked for exclusion" not in everything
    assert "¶" not in everything
    assert "Edit this page" not in everything


def test_excluded_page_yields_nothing(
    site: dict[str, tuple[PageInput, list[Section], list[Chunk]]],
) -> None:
    page, sections, chunks = site["excluded/"]
    assert page.meta["search"] == {"exclude": True}  # from the site's own search index
    assert sections == [] and chunks == []


def test_chinese_heading_ids_match_the_toc_slugs(
    site: dict[str, tuple[PageInput, list[Section], list[Chunk]]],
) -> None:
    _, sections, chunks = site["zh/%E4%B8%AD%E6%96%87/"]
    slug = slugify(case="lower")
    anchors = [s.anchor for s in sections]
    expected = [slug(title, "-") for title in ("中文文档", "安装指南", "配置 Configuration 选项")]
    expected += [slug("为什么答案没有引用？", "-"), slug("安装指南", "-") + "_1"]
    assert anchors == expected
    assert anchors[3] == "为什么答案没有引用"
    mixed = next(c for c in chunks if c.anchor == "配置-configuration-选项")
    assert "child_max_tokens" in mixed.text and "中文" in mixed.text
    assert sections[3].heading_path == ["中文文档", "常见问题", "为什么答案没有引用？"]


def test_duplicate_custom_unicode_and_legacy_ids(
    site: dict[str, tuple[PageInput, list[Section], list[Chunk]]],
) -> None:
    _, sections, _ = site["duplicates/"]
    anchors = [s.anchor for s in sections]
    assert anchors == [
        "duplicate-headings",
        "example",
        "example_1",
        "example_2",
        "my-custom-id",
        "ünïcödé-héading",
        "legacy-anchor",
        "legacy-id",
    ]
    texts = {s.anchor: s.text for s in sections}
    assert texts["example_1"].startswith("Second example body")
    assert "Heading without id\nA heading that carries no id" in texts["legacy-id"]


def test_big_table_chunks_start_with_the_header(
    site: dict[str, tuple[PageInput, list[Section], list[Chunk]]],
) -> None:
    _, _, chunks = site["reference/big-table/"]
    tables = [c for c in chunks if c.anchor == "big-table" and c.type == "table"]
    assert len(tables) > 3
    header = "Option | Type | Default | Description"
    for i, chunk in enumerate(tables):
        assert chunk.text.startswith(header + "\n")
        assert chunk.header == ("" if i == 0 else header)
    rows = [line for c in tables for line in c.text.split("\n") if line != header]
    assert rows == [
        f"option_{i:02d} | int | {i * 10} | " + rows[i].split(" | ", 3)[3] for i in range(80)
    ]


def test_code_is_kept_whole_below_the_limit_and_split_on_lines_above(
    site: dict[str, tuple[PageInput, list[Section], list[Chunk]]],
) -> None:
    _, sections, chunks = site["code/"]
    medium = [c for c in chunks if c.anchor == "medium-code-block"]
    assert len(medium) == 1 and medium[0].type == "code"
    assert medium[0].text.startswith("medium.py\ndef medium():") and "step_29" in medium[0].text
    assert not re.search(r"^\s*\d+\s*$", medium[0].text, re.M)  # no line numbers

    long_section = next(s for s in sections if s.anchor == "long-code-block")
    long = [c for c in chunks if c.anchor == "long-code-block"]
    assert len(long) > 1
    for chunk in long:
        start, end = chunk.offsets
        assert start == 0 or long_section.text[start - 1] == "\n"
        assert end == len(long_section.text) or long_section.text[end] == "\n"
    assert "\n".join(c.text for c in long) == long_section.text


def test_admonitions_and_nested_lists(
    site: dict[str, tuple[PageInput, list[Section], list[Chunk]]],
) -> None:
    _, sections, chunks = site["admonitions/"]
    first, nested = sections
    assert first.text.startswith("Remember this\nThe admonition title and body")
    assert "Collapsible tip\nDetails blocks render" in first.text
    assert chunks[0].type == "admonition"
    assert nested.text == (
        "First item\nNested item one\nNested item two\nDeep ordered one\nDeep ordered two\n"
        "Second item\nDefinition-like paragraph after the list."
    )


def test_fragment_and_full_page_agree(
    site: dict[str, tuple[PageInput, list[Section], list[Chunk]]],
) -> None:
    """The plugin hands over page.content (a fragment); ``anchored index`` the whole file."""
    for url, (page, sections, _) in site.items():
        if url in ("no-headings/", "excluded/"):
            continue  # Material adds a title h1 there / nothing to compare
        article = LexborHTMLParser(page.html).css_first("article.md-content__inner")
        assert article is not None
        fragment = PageInput(url=url, html=article.inner_html or "", title=page.title)
        fragment_sections, _ = chunk_page(fragment, SETTINGS)
        assert [(s.anchor, s.text) for s in fragment_sections] == [
            (s.anchor, s.text) for s in sections
        ]


def test_skips_assets_redirects_and_unreadable_files(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "x.html").write_text("<p>asset</p>")
    (tmp_path / "_static").mkdir()
    (tmp_path / "_static" / "y.html").write_text("<p>static</p>")
    (tmp_path / "404.html").write_text("<p>not found</p>")
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "index.html").write_text(
        '<html><head><meta http-equiv="refresh" content="0; url=../new/"></head></html>'
    )
    (tmp_path / "guide.html").write_bytes(
        b"<html><head><title>Guide | Docs</title></head><body><p>ok \xff</p></body></html>"
    )
    (tmp_path / "sub dir").mkdir()
    (tmp_path / "sub dir" / "index.html").write_text("<h1>Only <em>an</em> h1</h1>")
    (tmp_path / "broken.html").symlink_to(tmp_path / "missing.html")
    (tmp_path / "search").mkdir()  # the search index's folder, at the root only
    (tmp_path / "search" / "index.html").write_text("<p>search page</p>")
    (tmp_path / "plugins" / "search").mkdir(parents=True)  # a page (Material's docs)
    (tmp_path / "plugins" / "search" / "index.html").write_text("<h1>Built-in search</h1>")
    warnings: list[str] = []
    with caplog.at_level(logging.WARNING, logger="anchored"):
        pages = list(pages_from_site_dir(tmp_path, warnings=warnings))
    assert [(p.url, p.title) for p in pages] == [
        ("guide.html", "Guide | Docs"),
        ("plugins/search/", "Built-in search"),
        ("sub%20dir/", "Only an h1"),
    ]
    assert "\ufffd" in pages[0].html
    assert len(warnings) == 1 and "broken.html" in warnings[0]
    assert "broken.html" in caplog.text


def test_missing_site_dir_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(AnchoredError, match="site directory not found"):
        list(pages_from_site_dir(tmp_path / "nope"))


@pytest.mark.parametrize("theme", ["mkdocs", "readthedocs"])
def test_other_mkdocs_themes_give_the_same_sections(
    theme: str,
    tmp_path: Path,
    site: dict[str, tuple[PageInput, list[Section], list[Chunk]]],
) -> None:
    """``div[role=main]`` of MkDocs' own themes holds exactly what Material's article does."""
    config = tmp_path / "mkdocs.yml"
    config.write_text(
        f"INHERIT: {SITE_FIXTURE / 'mkdocs.yml'}\n"
        f"docs_dir: {SITE_FIXTURE / 'docs'}\n"
        f"theme:\n  name: {theme}\n",
        encoding="utf-8",
    )
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "-q", "-f", str(config), "-d", "out"],
        cwd=tmp_path,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=True,
        capture_output=True,
        timeout=120,
    )
    for page in pages_from_site_dir(tmp_path / "out"):
        if page.url in ("no-headings/", "excluded/"):
            continue  # Material adds a title h1 / MkDocs' search cannot exclude pages
        sections, _ = chunk_page(page, SETTINGS)
        expected = site[page.url][1]
        assert [(s.anchor, s.text) for s in sections] == [(s.anchor, s.text) for s in expected]
