"""Sentence splitting for documentation text and LLM answers."""

from __future__ import annotations

import random

import pytest
from anchored_query.citations.sentences import (
    CITATION_MARKER,
    code_spans,
    outside_code,
    sentence_spans,
    split_sentences,
)


def test_plain_english() -> None:
    assert split_sentences("MkDocs is fast. It is simple! Is it free? Yes.") == [
        "MkDocs is fast.",
        "It is simple!",
        "Is it free?",
        "Yes.",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "Use a static host, e.g. GitHub Pages or S3.",
        "Set the address, i.e. the host and port.",
        "Requires MkDocs 1.2.3 or later.",
        "Edit mkdocs.yml and the docs/index.md file.",
        "Compare plugins vs. themes first.",
        "Run `mkdocs serve. --strict` to check.",
        "See No. 5 in the list.",
        "Use it for pages, images, etc. and more.",
    ],
)
def test_no_split_inside(text: str) -> None:
    assert split_sentences(text) == [text]


def test_file_name_and_version_at_sentence_end() -> None:
    assert split_sentences("Edit mkdocs.yml. Then run v1.2. Done.") == [
        "Edit mkdocs.yml.",
        "Then run v1.2.",
        "Done.",
    ]


def test_chinese_punctuation_needs_no_space() -> None:
    assert split_sentences("运行 mkdocs serve 命令。默认端口是8000！可以修改吗？可以。") == [
        "运行 mkdocs serve 命令。",
        "默认端口是8000！",
        "可以修改吗？",
        "可以。",
    ]


def test_english_full_stop_before_chinese() -> None:
    assert split_sentences("MkDocs is a generator.它很快。") == [
        "MkDocs is a generator.",
        "它很快。",
    ]


def test_line_breaks_and_list_items_are_boundaries() -> None:
    text = "Steps:\n1. Install MkDocs.\n2. Run it\n- a bullet\n* another"
    assert split_sentences(text) == [
        "Steps:",
        "1. Install MkDocs.",
        "2. Run it",
        "- a bullet",
        "* another",
    ]


def test_fenced_code_block_is_one_sentence() -> None:
    text = "Add this:\n```yaml\nsite_name: My Docs. Really\ndev_addr: 1.2.3.4:8000\n```\nDone."
    assert split_sentences(text) == [
        "Add this:",
        "```yaml\nsite_name: My Docs. Really\ndev_addr: 1.2.3.4:8000\n```",
        "Done.",
    ]


def test_unclosed_fence_runs_to_the_end() -> None:
    assert split_sentences("Run:\n```\npip install mkdocs. Yes") == [
        "Run:",
        "```\npip install mkdocs. Yes",
    ]


def test_markers_after_full_stop_stay_with_their_sentence() -> None:
    assert split_sentences("The port is 8000. [1] It can change. [2][3]") == [
        "The port is 8000. [1]",
        "It can change. [2][3]",
    ]
    assert split_sentences("端口是8000。[1]可以修改。【2】") == [
        "端口是8000。[1]",
        "可以修改。【2】",
    ]


def test_closing_quotes_stay_with_the_sentence() -> None:
    assert split_sentences('The docs say "Stop." Then go.') == ['The docs say "Stop."', "Then go."]


def test_spans_point_into_the_source() -> None:
    text = "  First one.  Second one.\nThird"
    for s in sentence_spans(text):
        assert text[s.start : s.end] == s.text


def test_code_spans_and_masking() -> None:
    text = "Use `a[1]` and ``b ` c`` here\n```\nx[2]\n```"
    spans = code_spans(text)
    assert [(text[a:b], fenced) for a, b, fenced in spans] == [
        ("`a[1]`", False),
        ("``b ` c``", False),
        ("```\nx[2]\n```", True),
    ]
    masked = outside_code(text)
    assert len(masked) == len(text)
    assert CITATION_MARKER.search(masked) is None


def test_unmatched_backtick_is_text() -> None:
    assert split_sentences("A lone ` tick. Next.") == ["A lone ` tick.", "Next."]


@pytest.mark.parametrize(
    "marker",
    [
        "[1]",
        "[1, 2]",
        "[1-3]",
        "[12,13]",
        "【4】",
        "[Source 2]",
        "[^1]",
        "[#1]",
        "[Source: 1]",
        "[1 and 2]",
        "[doc 1]",
        "[1: Configuration]",
        "[Passage 1, Passage 2]",
        "【1†source】",
    ],
)
def test_citation_marker_forms(marker: str) -> None:
    assert CITATION_MARKER.fullmatch(marker)


@pytest.mark.parametrize("text", ["[x]", "[]", "[link](url)", "[1a]", "[a1]", "(1)", "[1.5]"])
def test_not_citation_markers(text: str) -> None:
    assert CITATION_MARKER.search(text) is None


# Seeded fuzzing (no Hypothesis: its .hypothesis/ directory trips this repo's
# norecursedirs setting): the pieces that drive the splitter, in random order.
_PIECES = [" ", "\n", ".", "!", "?", "。", "？", "`", "```", "~~~", "[1]", "【2】", "e.g.", "1.2",
           "a", "B", "mkdocs.yml", "端口", '"', ")", "\t", "-", "1."]  # fmt: skip


@pytest.mark.parametrize("seed", range(200))
def test_never_raises_and_spans_are_ordered(seed: int) -> None:
    rng = random.Random(seed)
    text = "".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 60)))
    spans = sentence_spans(text)
    previous_end = 0
    for s in spans:
        assert s.text == s.text.strip() and s.text
        assert text[s.start : s.end] == s.text
        assert s.start >= previous_end
        previous_end = s.end


def test_a_citation_marker_before_the_full_stop_ends_the_sentence() -> None:
    # The fake browser LLM quotes a table row after a cited sentence; joined, the two
    # became one item citing one passage for a claim half made of the other's text.
    text = "The server listens on port 8000 by default [1]. option | default | dev_addr [2]."
    assert split_sentences(text) == [
        "The server listens on port 8000 by default [1].",
        "option | default | dev_addr [2].",
    ]
    # Without a marker, a lowercase word after the full stop still does not split.
    assert split_sentences("It is set in mkdocs.yml. see below.") == [
        "It is set in mkdocs.yml. see below."
    ]
