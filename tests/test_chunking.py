"""Sections -> child chunks: sizes, merging, tables, code, exclusion, robustness."""

from __future__ import annotations

import random
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from build_index.chunking import (
    ChunkSettings,
    chunk_page,
    count_tokens,
    is_excluded,
    parent_window,
)
from build_index.errors import PageError
from build_index.types import Chunk, PageInput, Section

SMALL = ChunkSettings(child_min_tokens=20, child_max_tokens=60, code_max_tokens=120)


def chunk(
    html: str, chunk_settings: ChunkSettings | None = None, url: str = "p/", **kwargs: object
) -> tuple[list[Section], list[Chunk]]:
    sections, chunks = chunk_page(PageInput(url=url, html=html, **kwargs), chunk_settings)  # type: ignore[arg-type]
    check_invariants(sections, chunks)
    return sections, chunks


def check_invariants(sections: list[Section], chunks: list[Chunk]) -> None:
    """What every consumer of chunks relies on."""
    by_id = {s.id: s for s in sections}
    assert len(by_id) == len(sections)
    assert {c.parent for c in chunks} == set(by_id)
    numbers: dict[str, int] = {}
    for c in chunks:
        section = by_id[c.parent]
        n = numbers.get(c.parent, 0)
        numbers[c.parent] = n + 1
        assert c.id == f"{c.page}#{c.anchor}~{n}"
        assert (c.page, c.anchor, c.title, c.heading_path) == (
            section.page,
            section.anchor,
            section.title,
            section.heading_path,
        )
        start, end = c.offsets
        assert 0 <= start < end <= len(section.text)
        body = section.text[start:end]
        assert c.text == (f"{c.header}\n{body}" if c.header else body)
        # Never blank or padded with newlines (code lines keep their indentation).
        assert body.strip() and body == body.strip("\n")
        if c.header:
            assert c.type == "table"


def test_count_tokens() -> None:
    assert count_tokens("") == 0
    assert count_tokens("The quick brown fox.") == 5
    assert count_tokens("value_0 = f(x, y)") == 10
    assert count_tokens("中文标题") == 4
    assert count_tokens("mixed 中文 text") == 4
    assert count_tokens("a" * 100) == 10  # long runs count like subword pieces


def test_settings_reject_nonsense() -> None:
    with pytest.raises(ValueError, match="child_max_tokens"):
        ChunkSettings(child_max_tokens=0)
    # A small max with the default min is fine: the floor is capped at the max.
    chunk("<p>" + "word " * 200 + "</p>", ChunkSettings(child_max_tokens=50))


def test_small_blocks_of_a_section_merge_into_one_chunk() -> None:
    html = """<h2 id="a">A</h2><p>First paragraph.</p><ul><li>item one</li><li>item two</li></ul>
    <p>Last paragraph with a few more words in it than the list has.</p>"""
    _, chunks = chunk(html)
    assert len(chunks) == 1
    assert chunks[0].text.startswith("First paragraph.") and chunks[0].text.endswith("list has.")
    assert chunks[0].type == "text"  # the type holding most tokens


def test_chunks_never_cross_sections() -> None:
    _, chunks = chunk('<h2 id="a">A</h2><p>one</p><h2 id="b">B</h2><p>two</p>')
    assert [(c.anchor, c.text) for c in chunks] == [("a", "one"), ("b", "two")]


def test_long_paragraph_splits_on_sentence_ends_within_the_limit() -> None:
    sentences = [f"Sentence number {i} says something about topic {i}." for i in range(60)]
    _, chunks = chunk("<p>" + " ".join(sentences) + "</p>", SMALL)
    assert len(chunks) > 3
    for c in chunks:
        assert count_tokens(c.text) <= SMALL.child_max_tokens
        assert c.text.startswith("Sentence number") and c.text.endswith(".")


def test_packing_is_balanced_and_respects_the_floor() -> None:
    sentences = [f"Short sentence {i} here." for i in range(18)]  # 5 tokens each, 90 in all
    _, chunks = chunk("<p>" + " ".join(sentences) + "</p>", SMALL)
    sizes = [count_tokens(c.text) for c in chunks]
    assert len(sizes) == 2 and max(sizes) - min(sizes) <= 10


def test_long_list_splits_between_items() -> None:
    items = "".join(f"<li>List item {i} has several words in it</li>" for i in range(40))
    sections, chunks = chunk(f"<ul>{items}</ul>", SMALL)
    assert len(chunks) > 2
    lines = set(sections[0].text.split("\n"))
    for c in chunks:
        assert c.type == "list"
        assert all(line in lines for line in c.text.split("\n"))


def test_big_table_chunks_all_start_with_the_header() -> None:
    rows = "".join(f"<tr><td>key{i}</td><td>value {i} words</td></tr>" for i in range(80))
    html = (
        "<p>Intro.</p><table><thead><tr><th>Key</th><th>Value</th></tr></thead>"
        f"<tbody>{rows}</tbody></table><p>Outro.</p>"
    )
    [section], chunks = chunk(html, SMALL)
    tables = [c for c in chunks if c.type == "table"]
    assert len(tables) > 3
    assert [c.text for c in chunks if c.type != "table"] == ["Intro.", "Outro."]  # never merged
    for i, c in enumerate(tables):
        assert c.text.startswith("Key | Value\n")
        assert (c.header == "") == (i == 0)  # the first chunk's offsets cover the header
        assert all(line.startswith(("key", "Key")) for line in c.text.split("\n"))
    covered = "\n".join(section.text[c.offsets[0] : c.offsets[1]] for c in tables)
    assert covered == section.text[len("Intro.\n") : -len("\nOutro.")]


def test_table_without_header_repeats_nothing() -> None:
    rows = "".join(f"<tr><td>k{i}</td><td>v {i}</td></tr>" for i in range(100))
    _, chunks = chunk(f"<table>{rows}</table>", SMALL)
    assert len(chunks) > 1 and all(c.header == "" for c in chunks)


def test_code_below_the_code_limit_stays_whole() -> None:
    code = "\n".join(f"x{i} = call({i})" for i in range(12))  # ~96 tokens: > child max, < code max
    _, chunks = chunk(f"<p>Before.</p><pre><code>{code}</code></pre><p>After.</p>", SMALL)
    assert [c.type for c in chunks] == ["text", "code", "text"]
    assert chunks[1].text == code


def test_code_above_the_limit_splits_on_line_boundaries() -> None:
    code = "\n".join(f"    value_{i} = compute(x, y)  # {i}" for i in range(100))
    [section], chunks = chunk(f"<pre><code>{code}</code></pre>", SMALL)
    assert len(chunks) > 1
    for c in chunks:
        assert c.type == "code"
        assert count_tokens(c.text) <= SMALL.code_max_tokens
        start, end = c.offsets
        assert start == 0 or section.text[start - 1] == "\n"
        assert end == len(section.text) or section.text[end] == "\n"
    assert "\n".join(c.text for c in chunks) == section.text


def test_small_code_merges_with_its_paragraph() -> None:
    _, chunks = chunk("<p>Install it with pip:</p><pre><code>pip install anchored</code></pre>")
    assert [c.text for c in chunks] == ["Install it with pip:\npip install anchored"]


def test_cjk_text_without_spaces_or_punctuation_is_split() -> None:
    _, chunks = chunk("<p>" + "中文字符没有标点" * 100 + "</p>", SMALL)
    assert len(chunks) >= 800 // SMALL.child_max_tokens
    assert all(count_tokens(c.text) <= SMALL.child_max_tokens for c in chunks)


def test_front_matter_exclusion_yields_nothing() -> None:
    meta = {"search": {"exclude": True}}
    assert chunk("<h1 id='x'>X</h1><p>secret</p>", meta=meta) == ([], [])


def test_is_excluded_patterns() -> None:
    page = PageInput(url="drafts/new-feature/", html="")
    assert is_excluded(page, ["drafts/*"])
    assert is_excluded(page, ["/drafts/*"])
    assert is_excluded(page, ["drafts/new-feature"])
    assert is_excluded(page, ["*/new-*"])
    assert not is_excluded(page, ["draft/*", "other/"])
    assert not is_excluded(PageInput(url="", html=""), ["drafts/*"])
    assert is_excluded(PageInput(url="x/", html="", meta={"search": {"exclude": True}}), [])
    assert not is_excluded(PageInput(url="x/", html="", meta={"search": {"exclude": False}}), [])


def test_parent_window() -> None:
    text = "\n".join(f"Line {i} has five tokens." for i in range(100))  # 6 tokens a line
    start = text.index("Line 50")
    end = start + len("Line 50 has five tokens.")
    assert parent_window("short", (0, 5), 100) == (0, 5)
    a, b = parent_window(text, (start, end), 60)
    assert a <= start and end <= b
    assert count_tokens(text[a:b]) <= 60
    assert (a == 0 or text[a - 1] == "\n") and (b == len(text) or text[b] == "\n")
    assert count_tokens(text[a:b]) >= 40  # grown on both sides


def test_unusable_page_raises_page_error() -> None:
    with pytest.raises(PageError, match="binary"):
        chunk_page(PageInput(url="x.bin", html="\x00\x01\x02" * 1000))


@pytest.mark.parametrize(
    "html",
    [
        "",
        "no tags at all, just text",
        "<pre><code>" + "only code\n" * 500 + "</code></pre>",
        "<table>" + "<tr><td>only</td><td>a table</td></tr>" * 500 + "</table>",
        "<p>" + "x" * 20_000 + "</p>",
        "<h2 id='a'>" + "heading " * 5_000 + "</h2><p>tiny</p>",
        "<p>readable text " * 100 + bytes(range(256)).decode("utf-8", errors="replace"),
    ],
)
def test_odd_pages_chunk_without_errors(html: str) -> None:
    chunk(html)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.one_of(
            st.sampled_from(
                [
                    "<p>",
                    "</p>",
                    "<h2 id=a>",
                    "<h2 id=b>",
                    "</h2>",
                    "<h3>",
                    "<ul><li>",
                    "</li>",
                    "<table><tr><th>",
                    "<td>",
                    "</tr>",
                    "</table>",
                    "<pre><code>",
                    "</code></pre>",
                    "<div class='admonition'>",
                    "</div>",
                    "<br>",
                    "<a name=n>",
                    " ",
                    "\n",
                    ". ",
                    "。",
                ]
            ),
            st.text(max_size=30),
        ),
        max_size=60,
    )
)
def test_random_markup_either_chunks_cleanly_or_raises_page_error(parts: list[str]) -> None:
    try:
        sections, chunks = chunk_page(PageInput(url="r/", html="".join(parts)), SMALL)
    except PageError:
        return
    check_invariants(sections, chunks)


def five_mb_page() -> str:
    rng = random.Random(7)
    words = ["anchored", "chunk", "section", "table", "code", "parent", "child", "index"]
    parts: list[str] = []
    size = i = 0
    while size < 5_000_000:
        i += 1
        sentence = " ".join(rng.choice(words) for _ in range(12)) + ". "
        kind = i % 7
        if kind == 0:
            part = f'<h2 id="s{i}">Section {i}</h2><p>{sentence * 8}</p>'
        elif kind == 1:
            part = "<table><tr><th>a</th><th>b</th></tr>" + "<tr><td>x</td><td>y</td></tr>" * 30
            part += "</table>"
        elif kind == 2:
            part = "<pre><code>" + "x = compute(a, b)\n" * 40 + "</code></pre>"
        elif kind == 3:
            part = "<p>" + sentence * 400 + "</p>"  # a long paragraph
        else:
            part = "<ul>" + f"<li>{sentence}</li>" * 10 + "</ul>"
        parts.append(part)
        size += len(part)
    return "".join(parts)


def test_five_megabyte_page_is_fast() -> None:
    html = five_mb_page()
    started = time.process_time()
    sections, chunks = chunk_page(PageInput(url="big/", html=html))
    elapsed = time.process_time() - started
    assert len(sections) > 100 and len(chunks) > 10 * len(sections)
    assert elapsed < 3.0, f"5 MB page took {elapsed:.2f} s of CPU"


def test_five_megabytes_of_unbroken_text_is_fast() -> None:
    started = time.process_time()
    _, chunks = chunk_page(PageInput(url="big/", html="word " * 1_000_000))
    elapsed = time.process_time() - started
    assert len(chunks) > 1000
    assert elapsed < 3.0, f"5 MB of text took {elapsed:.2f} s of CPU"
