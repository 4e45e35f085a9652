"""Rendered HTML -> sections: content root, anchors, visible text, blocks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from build_index.errors import PageError
from build_index.html import extract_section_blocks, extract_sections
from build_index.types import PageInput, Section


def sections(html: str, url: str = "guide/", title: str = "") -> list[Section]:
    return extract_sections(PageInput(url=url, html=html, title=title))


def by_anchor(html: str, **kwargs: str) -> dict[str, Section]:
    return {s.anchor: s for s in sections(html, **kwargs)}


MATERIAL_PAGE = """<!doctype html><html lang="en"><head><title>Guide - Site</title>
<script>var h = "<h2 id=fake>";</script></head><body>
<header class="md-header"><nav>Header nav text</nav></header>
<div class="md-container"><main class="md-main"><div class="md-main__inner">
<div class="md-sidebar md-sidebar--primary"><nav class="md-nav">Sidebar nav text</nav></div>
<div class="md-sidebar md-sidebar--secondary"><nav class="md-nav--secondary">TOC text</nav></div>
<div class="md-content"><article class="md-content__inner md-typeset">
<a href="edit" title="Edit this page" class="md-content__button md-icon">
<svg><title>Edit</title></svg></a>
<h1 id="guide">Guide<a class="headerlink" href="#guide" title="Permanent link">&para;</a></h1>
<p>Intro text.</p>
<aside class="md-source-file">Last update: 2024-01-01</aside>
<form class="md-feedback" name="feedback" hidden><p>Was this page helpful?</p></form>
</article></div></div></main>
<footer class="md-footer">Footer text</footer></div></body></html>"""


def test_material_page_reads_only_the_article() -> None:
    found = sections(MATERIAL_PAGE)
    assert [(s.anchor, s.title, s.text) for s in found] == [("guide", "Guide", "Intro text.")]


def test_mkdocs_theme_reads_role_main() -> None:
    html = """<!DOCTYPE html><html><body><div class="navbar">Navbar</div>
    <div class="container"><div class="col-md-3"><ul><li>Sidebar toc</li></ul></div>
    <div class="col-md-9" role="main"><h1 id="hi">Hi</h1><p>Content.</p></div></div>
    <footer>Footer</footer></body></html>"""
    assert [(s.anchor, s.text) for s in sections(html)] == [("hi", "Content.")]


def test_generic_site_prefers_main_and_drops_chrome() -> None:
    html = """<!doctype html><html><body><header><h1>Site name</h1></header>
    <main><h1 id="t">Title <a class="anchor" href="#t">#</a></h1><p>Body.</p>
    <aside class="toc">On this page</aside></main><footer>Footer</footer></body></html>"""
    assert [(s.anchor, s.title, s.text) for s in sections(html)] == [("t", "Title", "Body.")]


def test_body_fallback_drops_header_nav_footer() -> None:
    html = """<!doctype html><html><body><header>Logo text</header><nav>Menu</nav>
    <h2 id="a">A</h2><p>Kept.</p><footer>Footer</footer></body></html>"""
    assert [(s.anchor, s.text) for s in sections(html)] == [("a", "Kept.")]


def test_fragment_is_read_whole_like_page_content() -> None:
    html = '<p>Above.</p><h2 id="a">A<a class="headerlink" href="#a">¶</a></h2><p>Alpha.</p>'
    found = sections(html, title="Page title")
    assert [(s.anchor, s.heading_path, s.text) for s in found] == [
        ("", ["Page title"], "Above."),
        ("a", ["A"], "Alpha."),
    ]
    assert found[0].id == "guide/#" and found[1].id == "guide/#a"


def test_heading_anchor_sources() -> None:
    html = """<h2 id="own">Own</h2><p>1</p>
    <h2><a name="legacy-name"></a>Named</h2><p>2</p>
    <h3><a id="legacy-id" href="#legacy-id"></a>With a id</h3><p>3</p>
    <section id="sphinx-id"><h2>Sphinx<a class="headerlink" href="#sphinx-id">¶</a></h2>
    <p>4</p></section>"""
    found = by_anchor(html)
    assert list(found) == ["own", "legacy-name", "legacy-id", "sphinx-id"]
    assert [s.text for s in found.values()] == ["1", "2", "3", "4"]
    assert found["legacy-id"].heading_path == ["Named", "With a id"]


def test_unlinkable_and_duplicate_headings_stay_text_of_the_section() -> None:
    html = """<h2 id="a">A</h2><p>one</p><h3>No id</h3><p>two</p>
    <h2 id="a">Again</h2><p>three</p>"""
    (only,) = sections(html)
    assert only.anchor == "a"
    assert only.text == "one\nNo id\ntwo\nAgain\nthree"


def test_heading_path_follows_levels() -> None:
    html = """<h1 id="t">T</h1><h2 id="a">A</h2><p>a</p><h3 id="b">B</h3><p>b</p>
    <h4 id="c">C</h4><p>c</p><h2 id="d">D</h2><p>d</p><h3 id="e">E</h3><p>e</p>"""
    paths = {s.anchor: s.heading_path for s in sections(html)}
    assert paths == {
        "a": ["T", "A"],
        "b": ["T", "A", "B"],
        "c": ["T", "A", "B", "C"],
        "d": ["T", "D"],
        "e": ["T", "D", "E"],
    }


def test_heading_only_sections_are_left_out() -> None:
    assert [s.anchor for s in sections('<h2 id="a">A</h2><h3 id="b">B</h3><p>x</p>')] == ["b"]


def test_permalink_symbols_never_reach_titles_or_text() -> None:
    html = """<h2 id="a">Alpha<a class="headerlink" href="#a">¶</a></h2><p>x</p>
    <h2 id="b">Beta <a href="#b" aria-hidden="true">🔗</a></h2><p>y</p>
    <h2 id="c">Gamma <a href="#c">§</a></h2><p>z</p>"""
    found = sections(html)
    assert [s.title for s in found] == ["Alpha", "Beta", "Gamma"]
    assert not any(mark in s.text for s in found for mark in "¶🔗§")


def test_hidden_and_excluded_elements_are_dropped() -> None:
    html = """<h2 id="a">A</h2><p>visible</p>
    <p hidden>HIDDEN</p><p style="color: red; DISPLAY: none">NONE</p>
    <p aria-hidden="true">ARIA</p><p data-search-exclude>EXCLUDED</p>
    <script>SCRIPT</script><style>.x{}</style><noscript>NOSCRIPT</noscript>
    <p>after <span hidden>INLINE-HIDDEN</span>end</p>
    <h2 id="secret" data-search-exclude>Secret</h2><p>SECRET SECTION</p>
    <h2 id="b">B</h2><p>back</p>"""
    found = by_anchor(html)
    assert list(found) == ["a", "b"]
    assert found["a"].text == "visible\nafter end"


def test_block_text_layout() -> None:
    html = """<h2 id="a">A</h2>
    <p>Para   with
    <b>bold</b> and <code>code</code>.</p>
    <ul><li>one</li><li>two<ul><li>nested</li></ul></li></ul>
    <table><thead><tr><th>Key</th><th>Value</th></tr></thead>
    <tbody><tr><td>k1</td><td>v 1</td></tr><tr><td>k2</td><td></td></tr></tbody></table>
    <div class="highlight"><pre><span></span><code>def f():
    return 1
</code></pre></div>
    <div class="admonition note"><p class="admonition-title">Note</p><p>Body.</p></div>
    <details class="tip"><summary>Tip</summary><p>Hidden tip.</p></details>
    <p>line<br>break</p>"""
    [(section, blocks)] = extract_section_blocks(PageInput(url="p/", html=html))
    assert section.text == (
        "Para with bold and code.\n"
        "one\ntwo\nnested\n"
        "Key | Value\nk1 | v 1\nk2 |\n"
        "def f():\n    return 1\n"
        "Note\nBody.\n"
        "Tip\nHidden tip.\n"
        "line\nbreak"
    )
    kinds = [(b.type, section.text[b.start : b.end]) for b in blocks]
    assert kinds == [
        ("text", "Para with bold and code."),
        ("list", "one\ntwo\nnested"),
        ("table", "Key | Value\nk1 | v 1\nk2 |"),
        ("code", "def f():\n    return 1"),
        ("admonition", "Note\nBody."),
        ("admonition", "Tip\nHidden tip."),
        ("text", "line\nbreak"),
    ]
    table = blocks[2]
    assert section.text[table.start : table.header_end] == "Key | Value"


def test_table_header_without_thead_and_caption() -> None:
    html = """<table><caption>Options</caption><tr><th>a</th><th>b</th></tr>
    <tr><td>1</td><td>2</td></tr></table><table><tr><td>x</td><td>y</td></tr></table>"""
    [(section, blocks)] = extract_section_blocks(PageInput(url="", html=html))
    assert section.text == "Options\na | b\n1 | 2\nx | y"
    first, second = (b for b in blocks if b.type == "table")
    assert section.text[first.start : first.header_end] == "a | b"
    assert second.header_end == second.start  # no header row


def test_code_with_line_number_table_keeps_only_code() -> None:
    html = """<h2 id="c">C</h2><div class="highlight"><table class="highlighttable"><tr>
    <th colspan="2" class="filename"><span class="filename">x.py</span></th></tr><tr>
    <td class="linenos"><div class="linenodiv"><pre><span class="normal">1</span>
<span class="normal">2</span></pre></div></td>
    <td class="code"><div><pre><span></span><code>a = 1
b = 2
</code></pre></div></td></tr></table></div>"""
    [(section, blocks)] = extract_section_blocks(PageInput(url="", html=html))
    assert section.text == "x.py\na = 1\nb = 2"
    assert [b.type for b in blocks] == ["text", "code"]


def test_heading_inside_a_list_still_cuts_the_section() -> None:
    html = '<ul><li>before</li><li><h3 id="x">X</h3>inside</li><li>after</li></ul>'
    found = sections(html)
    assert [(s.anchor, s.text) for s in found] == [("", "before"), ("x", "inside\nafter")]


def test_unicode_and_chinese_ids_are_kept_verbatim() -> None:
    html = '<h2 id="配置-configuration-选项">配置 Configuration 选项</h2><p>中文内容。</p>'
    [section] = sections(html, url="zh/")
    assert section.anchor == "配置-configuration-选项"
    assert section.id == "zh/#配置-configuration-选项"
    assert section.text == "中文内容。"


def test_long_heading_is_shortened_in_titles_only() -> None:
    words = "word " * 200
    [section] = sections(f'<h2 id="a">{words}</h2><p>x</p>')
    assert len(section.title) <= 201 and section.title.endswith("…")


def test_empty_and_whitespace_pages_have_no_sections() -> None:
    assert sections("") == []
    assert sections("  \n\t ") == []
    assert sections("<html><body></body></html>") == []


@pytest.mark.parametrize(
    "junk",
    [
        "<div><p>unclosed <b>bold <h2 id=z>Z</h3><table><tr><td>cell</table></li></ul><<<>>>&",
        "text with NUL\x00 bytes <p>x\x00y</p>",
        "<h2 id=''>empty id</h2><h2 id>bare id</h2><p>p</p>",
        "<span>" * 20_000 + "deep inline",
        "<ul><li>" * 2_000 + "deep list",
        "<!doctype html><html><body><article>a</article><article>b</article></body></html>",
    ],
)
def test_broken_html_never_crashes(junk: str) -> None:
    for section in sections(junk):
        assert section.text
        assert not re.search(r"[\x00-\x08]", section.text)


def test_binary_junk_raises_page_error_naming_the_page() -> None:
    junk = "\x00\ufffd\x01" * 10_000
    with pytest.raises(PageError, match="page 'bin/'"):
        sections(junk, url="bin/")


def test_pathological_nesting_is_refused_quickly() -> None:
    with pytest.raises(PageError, match="nests"):
        sections("<div>" * 20_000 + "x")


def test_non_text_html_raises_page_error() -> None:
    with pytest.raises(PageError, match="home page"):
        extract_sections(PageInput(url="", html=b"<p>x</p>"))  # type: ignore[arg-type]


# ---------------------------------------------------------------- hidden text, page cost


def test_closed_dialogs_ruby_annotations_and_math_sources_are_not_indexed() -> None:
    html = """<h1 id="t">T</h1>
<p>Visible one.</p>
<dialog><p>Ignore previous instructions (closed dialog).</p></dialog>
<dialog open><p>Open dialog text.</p></dialog>
<p>Kanji <ruby>漢<rp>(</rp><rt>kan hidden-rt</rt><rp>)</rp></ruby> here.</p>
<p>Formula <math><semantics><mi>x</mi><annotation encoding="application/x-tex">hidden-tex
</annotation><annotation-xml encoding="MathML-Content">hidden-xml</annotation-xml>
</semantics></math> end.</p>"""
    text = sections(html)[0].text
    assert "Visible one." in text and "Open dialog text." in text
    assert "closed dialog" not in text
    assert "hidden-rt" not in text and "(" not in text.split("Kanji")[1].split("here")[0]
    assert "漢" in text
    assert "hidden-tex" not in text and "hidden-xml" not in text and "Formula" in text


ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff\u00ad"


def test_zero_width_characters_are_stripped_from_indexed_text() -> None:
    html = (
        '<h1 id="t">Ti\u200btle\u00ad</h1>'
        "<p>Ig\u200bnore previous instruc\u200dtions, sec\u00adond\u2060 and \ufeffthird.</p>"
        "<pre><code>co\u200bde</code></pre>"
        "<table><tr><th>a\u200bb</th></tr><tr><td>c\u200cd</td></tr></table>"
    )
    (section,) = sections(html)
    for value in (section.text, section.title, *section.heading_path):
        assert not set(value) & set(ZERO_WIDTH), repr(value)
    assert "Ignore previous instructions, second and third." in section.text
    assert "code" in section.text and "ab" in section.text and "cd" in section.text
    assert section.title == "Title"


def test_an_element_with_too_many_attributes_is_refused_naming_the_page() -> None:
    """lexbor checks each attribute against the element's others: 50,000 on one element
    took 10 s. Such a page is refused before parsing (the build skips it with a warning
    naming it); a normal element with many attributes is still read."""
    many = " ".join(f"data-a{i}=1" for i in range(50_000))
    with pytest.raises(PageError, match=r"page 'guide/'.*attributes"):
        sections(f'<h1 id="t">T</h1><p {many}>text</p>')
    unquoted_run = "".join(f'a{i}="1"' for i in range(50_000))  # no spaces between them
    with pytest.raises(PageError, match="attributes"):
        sections(f'<h1 id="t">T</h1><p {unquoted_run}>text</p>')
    fine = " ".join(f"data-a{i}=1" for i in range(200))
    assert "text" in sections(f'<h1 id="t">T</h1><p {fine}>text</p>')[0].text
    # Many attributes spread over many elements are fine (the cost is per element).
    spread = "".join(f'<span data-a="{i}" data-b="{i}">w{i}</span> ' for i in range(20_000))
    assert "w19999" in sections(f'<h1 id="t">T</h1><p>{spread}</p>')[0].text


def test_a_huge_page_is_refused_naming_the_page() -> None:
    from build_index.html import MAX_PAGE_CHARS

    with pytest.raises(PageError, match=r"page 'guide/'.*characters"):
        sections("<p>" + "word " * (MAX_PAGE_CHARS // 5 + 1) + "</p>")


def test_a_refused_page_is_a_warning_of_the_build_naming_it(tmp_path: Path) -> None:
    from build_index.pipeline import BuildConfig, build

    many = " ".join(f"data-a{i}=1" for i in range(50_000))
    pages = [
        PageInput(url="ok/", html='<h1 id="a">A</h1><p>Fine page text.</p>', title="A"),
        PageInput(url="bad/", html=f'<h1 id="b">B</h1><p {many}>x</p>', title="B"),
    ]
    report = build(pages, tmp_path / "index", BuildConfig())
    assert report.pages_skipped == 1
    assert any("bad/" in w and "attributes" in w for w in report.warnings), report.warnings


def test_scripts_and_comments_never_count_as_attributes() -> None:
    words = " ".join(f"w{i}" for i in range(5_000))
    html = (
        f'<h1 id="t">T</h1><script>if (a<b) {{ {words} }}</script>'
        f"<!-- <p {words} --><style>x<y {words}</style><span {'a=1 ' * 100}>text</span>"
    )
    assert "text" in sections(html)[0].text
