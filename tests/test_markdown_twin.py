"""The Markdown twin of a page (build_index/markdown_twin.py), on small rendered fragments."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from build_index.llmstxt import (
    CACHE_FILE,
    NavItem,
    nav_sections,
    site_base,
    twin_path,
    twin_url,
    write_llms,
)
from build_index.markdown_twin import SiteLinks, page_markdown
from build_index.types import PageInput
from tests.llms_check import parse_llms_txt

SITE = "https://docs.example.test/"
PAGES = frozenset({"", "guide/", "guide/install/", "reference.html"})


def twin(html: str, url: str = "guide/", title: str = "Guide", base: str = SITE) -> str:
    return page_markdown(
        PageInput(url=url, html=html, title=title), SiteLinks(base, PAGES)
    ).markdown


@pytest.mark.parametrize(
    ("page", "url", "path"),
    [
        ("", "index.md", "index.md"),
        ("foo/bar/", "foo/bar/index.md", "foo/bar/index.md"),
        ("foo.html", "foo.md", "foo.md"),
        ("dir/foo.html", "dir/foo.md", "dir/foo.md"),
        ("caf%C3%A9/", "caf%C3%A9/index.md", "café/index.md"),
    ],
)
def test_the_twin_sits_beside_the_page(page: str, url: str, path: str) -> None:
    assert twin_url(page) == url and twin_path(page) == path


def test_headings_carry_their_anchors_and_the_title_comes_first() -> None:
    md = twin('<h2 id="setup">Set <code>up</code></h2><p>Text.</p><h3>No id</h3><p>More.</p>')
    assert md.startswith("# Guide\n\n## Set `up` {#setup}\n\nText.\n\n### No id\n\nMore.")
    own = twin('<h1 id="guide">The guide</h1><p>x</p>')
    assert own.startswith("# The guide {#guide}") and "# Guide\n" not in own


def test_code_fences_keep_the_declared_language_and_the_code() -> None:
    html = (
        '<pre><code class="language-python">print("a")\n</code></pre>'
        '<div class="language-yaml highlight"><pre><span></span><code>a: 1\n</code></pre></div>'
        "<pre><code>plain ``` fence\n</code></pre>"
    )
    md = twin(html)
    assert '```python\nprint("a")\n```' in md
    assert "```yaml\na: 1\n```" in md
    assert "````\nplain ``` fence\n````" in md


def test_tables_become_markdown_tables() -> None:
    html = (
        "<table><thead><tr><th>option</th><th>default</th></tr></thead><tbody>"
        "<tr><td><code>port</code></td><td>8000 | 8001</td></tr>"
        "<tr><td>host</td></tr></tbody></table>"
        "<table><tr><td>a</td><td>b</td></tr><tr><td>c</td><td>d</td></tr></table>"
    )
    md = twin(html)
    assert "| option | default |\n| --- | --- |\n| `port` | 8000 \\| 8001 |\n| host |  |" in md
    assert "| a | b |\n| --- | --- |\n| c | d |" in md  # no header: the first row is it


def test_admonitions_and_details_are_quoted_with_their_title() -> None:
    html = (
        '<div class="admonition warning"><p class="admonition-title">Mind the port</p>'
        "<p>Port 80 needs root.</p></div>"
        '<div class="admonition note"><p class="admonition-title">Note</p><p>Plain.</p></div>'
        '<details class="tip"><summary>More</summary><p>Hidden <em>tip</em>.</p></details>'
    )
    md = twin(html)
    assert "> **Warning: Mind the port**\n>\n> Port 80 needs root." in md
    assert "> **Note**\n>\n> Plain." in md
    assert "> **Tip: More**\n>\n> Hidden *tip*." in md


def test_lists_nest_number_and_keep_task_marks() -> None:
    html = (
        "<ul><li>one<ul><li>one.a</li></ul></li>"
        "<li><p>two</p><pre><code>x = 1</code></pre></li></ul>"
        '<ol start="3"><li>three</li><li>four</li></ol>'
        '<ul class="task-list"><li class="task-list-item"><label class="task-list-control">'
        '<input type="checkbox" checked disabled><span></span></label> done</li></ul>'
    )
    md = twin(html)
    assert "- one\n  - one.a\n- two\n\n  ```\n  x = 1\n  ```" in md
    assert "3. three\n4. four" in md
    assert "- [x] done" in md


def test_links_are_absolute_and_go_to_the_twin() -> None:
    html = (
        '<p><a href="install/#pip">pip</a>, <a href="../reference.html">ref</a>, '
        '<a href="#top">top</a>, <a href="../img/a.png">png</a>, '
        '<a href="https://example.org/x">out</a>, <a href="install">no slash</a>, '
        '<img alt="diagram" src="../img/d.svg"></p>'
    )
    md = twin(html)
    assert f"[pip]({SITE}guide/install/index.md#pip)" in md
    assert f"[ref]({SITE}reference.md)" in md
    assert f"[top]({SITE}guide/index.md#top)" in md
    assert f"[png]({SITE}img/a.png)" in md
    assert "[out](https://example.org/x)" in md
    assert f"[no slash]({SITE}guide/install/index.md)" in md
    assert f"![diagram]({SITE}img/d.svg)" in md
    assert "[pip](/guide/install/index.md#pip)" in twin(html, base="/")
    unsafe = twin(
        '<p><a href="javascript:alert(1)">click</a> <a href="JavaScript:x">two</a> '
        '<img alt="pixel" src="data:image/png;base64,AAAA"> <a href="mailto:a@b.c">mail</a></p>'
    )
    assert "click two pixel [mail](mailto:a@b.c)" in unsafe
    assert "javascript" not in unsafe.lower() and "data:" not in unsafe


def test_a_section_left_out_of_search_is_left_out_of_the_twin() -> None:
    html = (
        '<h2 id="a">Kept</h2><p>kept text</p>'
        '<h2 id="b" data-search-exclude>Dropped</h2><p>dropped text</p><pre><code>x</code></pre>'
        "<h3>No id, so no new section</h3><p>still dropped</p>"
        '<h2 id="c">Back</h2><p>back text</p>'
    )
    md = twin(html)
    assert "kept text" in md and "back text" in md
    assert "Dropped" not in md and "dropped text" not in md and "```" not in md
    assert "No id" not in md and "still dropped" not in md


def test_text_that_would_read_as_markup_is_escaped() -> None:
    md = twin("<p># not a heading</p><p>a *b* [c](d) `e` _f_ snake_case</p>")
    assert "\\# not a heading" in md
    assert "a \\*b\\* \\[c\\](d) \\`e\\` \\_f\\_ snake_case" in md


def test_llms_txt_lists_the_nav_sections_then_the_unlisted_pages(tmp_path: Path) -> None:
    pages = [
        PageInput(url="", html="<h1 id='home'>Home</h1><p>Welcome here.</p>", title="Home"),
        PageInput(url="guide/", html="<p>The guide.</p>", title="Guide"),
        PageInput(url="guide/install/", html="<p>Install [it].</p>", title="Install"),
        PageInput(url="drafts/x/", html="<p>Draft.</p>", title="X"),
        PageInput(
            url="about/",
            html="<p>About.</p>",
            title="About",
            meta={"description": "Who we are."},
        ),
    ]
    nav = [
        NavItem("Home", ""),
        NavItem("User guide", "guide/", (NavItem("Installing", "guide/install/"),)),
    ]
    assert [s.title for s in nav_sections(nav)] == ["Docs", "User guide"]
    report = write_llms(
        tmp_path,
        pages,
        site_name="Site",
        description="A site.\nTwo lines.",
        base=site_base(SITE, "2.0"),
        nav=nav,
    )
    assert report.pages == 5 and len(report.written) == 7
    text = (tmp_path / "llms.txt").read_text("utf-8")
    parsed = parse_llms_txt(text)
    assert (parsed.title, parsed.summary) == ("Site", "A site. Two lines.")
    base = SITE + "2.0/"
    assert parsed.sections == [
        ("Docs", [("Home", base + "index.md", "Welcome here.")]),
        (
            "User guide",
            [
                ("User guide", base + "guide/index.md", "The guide."),
                ("Installing", base + "guide/install/index.md", "Install [it]."),
            ],
        ),
        (
            "Optional",
            [
                ("About", base + "about/index.md", "Who we are."),
                ("X", base + "drafts/x/index.md", "Draft."),
            ],
        ),
    ]
    full = (tmp_path / "llms-full.txt").read_text("utf-8")
    assert full.index("Welcome here") < full.index("The guide") < full.index("Draft.")
    assert f"Source: <{base}guide/install/>" in full
    # unchanged: nothing rewritten; one page changed: its twin and the two lists
    assert write_llms(tmp_path, pages, site_name="Site", base=base, nav=nav).written == (
        "llms.txt",  # the description went away
        "llms-full.txt",
    )
    pages[1] = PageInput(url="guide/", html="<p>The new guide.</p>", title="Guide")
    again = write_llms(tmp_path, pages, site_name="Site", base=base, nav=nav)
    assert again.written == ("guide/index.md", "llms.txt", "llms-full.txt")


def test_an_unchanged_build_takes_its_files_from_the_cache(tmp_path: Path) -> None:
    pages = [PageInput(url="", html="<p>Home page.</p>", title="Home")]
    cache = tmp_path / "cache"
    first = write_llms(tmp_path / "a", pages, site_name="S", cache_dir=cache)
    assert first.pages == 1 and set(first.written) == {"index.md", "llms.txt", "llms-full.txt"}
    # the cache holds the files with the digest of their inputs: an unchanged build copies
    # them (here a marked copy, to show it was not made again)
    data = json.loads((cache / CACHE_FILE).read_text("utf-8"))
    data["files"]["index.md"] += "<!-- from the cache -->\n"
    (cache / CACHE_FILE).write_text(json.dumps(data), "utf-8")
    again = write_llms(tmp_path / "b", pages, site_name="S", cache_dir=cache)
    assert again.pages == 1 and "from the cache" in (tmp_path / "b" / "index.md").read_text()
    # any input changed: made again
    changed = [PageInput(url="", html="<p>Home page, edited.</p>", title="Home")]
    write_llms(tmp_path / "c", changed, site_name="S", cache_dir=cache)
    assert (tmp_path / "c" / "index.md").read_text() == "# Home\n\nHome page, edited.\n"
    write_llms(tmp_path / "d", pages, site_name="Other", cache_dir=cache)
    assert "from the cache" not in (tmp_path / "d" / "index.md").read_text()
