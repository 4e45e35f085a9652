"""Cited spans: each chip highlights the part of the passage that backs its sentence."""

from __future__ import annotations

import re
import urllib.parse
from pathlib import Path
from typing import Any

from anchored_query.citations.links import OnPage, citation_link
from anchored_query.citations.spans import _Source, attach, cited_span, pieces
from anchored_query.citations.units import section_units
from anchored_query.serve.app import create_app
from anchored_query.settings import Settings
from anchored_query.types import Passage
from fakes import FakeOpenAIServer, Reply, quote_passages
from starlette.testclient import TestClient

SECTION = (
    "Run skylark cloud deploy --guided once to create the stack: it asks for a stack name "
    "and a region, and saves the answers to skylark-cloud.toml.\n"
    "skylark build\n"
    "skylark cloud deploy --guided\n"
    "Later deploys are a plain skylark cloud deploy, which reads the saved answers. "
    "A failed deploy rolls the stack back to its previous state.\n"
    "The outputs you need next:\n"
    "output | use\n"
    "FunctionUrl | The endpoint of the query function; set it as api_url in skylark.yml.\n"
    "BucketName | The bucket skylark cloud publish uploads the search index to."
)
CHUNKS = [
    {"id": "d#cloud~0", "type": "text", "offsets": [0, SECTION.index("The outputs")]},
    {
        "id": "d#cloud~1",
        "type": "table",
        "offsets": [SECTION.index("output |"), len(SECTION)],
        "header": "output | use",
    },
]


def source(text: str = SECTION, chunks: list[dict[str, Any]] | None = None) -> _Source:
    return _Source(
        text, section_units(text, CHUNKS if chunks is None else chunks), [(0, len(text))]
    )


def span(sentence: str, src: _Source | None = None) -> str:
    src = src or source()
    found = cited_span(sentence, src)
    assert found is not None, sentence
    return src.text[found[0] : found[1]]


def test_pieces_are_sentences_code_lines_and_rows() -> None:
    texts = [SECTION[p.start : p.end] for p in pieces(SECTION, source().units)]
    assert "skylark cloud deploy --guided" in texts  # one code line
    assert "A failed deploy rolls the stack back to its previous state." in texts  # one sentence
    assert any(t.startswith("BucketName | ") for t in texts)  # one row
    assert "output | use" not in texts  # a header is never a span of its own


def test_the_span_is_the_sentence_that_backs_it_not_the_best_chunk() -> None:
    # The issue's wrong target: the sentence about --guided, not "The outputs you need next:".
    got = span("Run `skylark cloud deploy --guided` once; it asks for a stack name and region.")
    assert got.startswith("Run skylark cloud deploy --guided once")
    assert "outputs" not in got


def test_a_row_backs_a_sentence_about_its_value() -> None:
    got = span("Set the FunctionUrl output as `api_url` in skylark.yml.")
    assert got == (
        "FunctionUrl | The endpoint of the query function; set it as api_url in skylark.yml."
    )


def test_a_second_sentence_is_taken_when_the_first_does_not_cover_the_claim() -> None:
    got = span("Later deploys read the saved answers, and a failed deploy rolls the stack back.")
    assert got.startswith("Later deploys") and got.endswith("previous state.")


def test_code_lines_bridge_within_their_block() -> None:
    code = "```bash\nskylark build\nskylark cloud deploy --guided\n```"
    assert span(code) == "skylark build\nskylark cloud deploy --guided"


def test_nothing_in_common_gives_no_span() -> None:
    assert cited_span("Pandas eat bamboo.", source()) is None


def test_the_region_the_model_read_bounds_the_span() -> None:
    only_table = _Source(SECTION, source().units, [(SECTION.index("output |"), len(SECTION))])
    found = cited_span("Run skylark cloud publish to upload the index to the bucket.", only_table)
    assert found is not None and SECTION[found[0] :].startswith("BucketName")


def test_attach_gives_each_chip_its_own_span_and_link() -> None:
    p = Passage(
        1, ["d#cloud~0"], "d/#cloud", "d/", "cloud", "Cloud", ["Deploy", "Cloud"], SECTION, ""
    )
    result: dict[str, Any] = {
        "mode": "llm",
        "answer": [
            {"text": "Run skylark cloud deploy --guided to create the stack.", "citations": [1]},
            {"text": "A failed deploy rolls the stack back.", "citations": [1]},
        ],
        "citations": [
            {"n": 1, "chunk_id": "d#cloud~0", "url": "d/#cloud", "highlight": SECTION[:40]}
        ],
    }
    attach(result, [p])
    first, second = (item["spans"][0] for item in result["answer"])
    assert first["highlight"].startswith("Run skylark cloud deploy --guided once")
    assert second["highlight"] == "A failed deploy rolls the stack back to its previous state."
    assert second["link"].startswith("d/?anchored-hl=A+failed+deploy")
    assert result["citations"][0]["highlight"] == first["highlight"]  # the first use
    assert result["citations"][0]["link"] == first["link"]


def test_extractive_table_and_titled_code_items_mark_their_rows_and_their_code() -> None:
    from anchored_query.citations.spans import _quoted_unit

    text = (
        "Add the plugin:\nmkdocs.yml\nplugins:\n  - anchored\n"
        "option | default\nstrict | false\nlang | en\ntheme | auto"
    )
    chunks = [
        {"id": "c~0", "type": "text", "offsets": [0, text.index("option")]},
        {"id": "c~1", "type": "table", "offsets": [text.index("option"), len(text)]},
    ]
    src = _Source(text, section_units(text, chunks), [(0, len(text))])
    whole = " ".join(text.split())
    table = "| option | default |\n|---|---|\n| strict | false |\n| theme | auto |"
    a, b = _quoted_unit(table, whole, src) or (0, 0)
    assert text[a:b] == "strict | false\nlang | en\ntheme | auto"  # first to last quoted row
    code = '```yaml title="mkdocs.yml"\nplugins:\n  - anchored\n```'
    found = _quoted_unit(code, whole, src)
    assert found is not None and text[found[0] : found[1]].startswith("plugins:")
    assert _quoted_unit("| nope |\n|---|\n| x |", whole, src) is None


# ---- text fragments unique on the page


def terms(link: str) -> list[str]:
    return [urllib.parse.unquote(t) for t in link.split(":~:text=", 1)[1].split(",")]


def test_a_start_term_that_occurs_earlier_grows_until_it_does_not() -> None:
    page = (
        "Intro\nThe default value is used when nothing is set. The cache is rebuilt.\n"
        "The default value is used when nothing is set. The index is rebuilt when any page "
        "changes."
    )
    start = page.rindex("The default value")
    highlight = page[start:]
    start_term, end_term = terms(citation_link("a/", highlight, OnPage(page, start, len(page))))
    assert page.find(start_term) == start or page.lower().find(start_term.lower()) < start
    # the term as grown occurs only at the passage
    assert [m.start() for m in re.finditer(re.escape(start_term), page)] == [start]
    assert end_term.endswith("changes.")


def test_a_whole_block_that_occurs_earlier_gets_a_prefix() -> None:
    page = "Use it.\nport | 8000\nThe server:\nport | 8000"
    start = page.rindex("port")
    link = citation_link("a/", "port | 8000", OnPage(page, start, len(page)))
    directive = link.split(":~:text=", 1)[1]
    prefix, rest = directive.split("-,", 1)
    assert urllib.parse.unquote(prefix) == "server:"
    assert urllib.parse.unquote(rest.split(",")[0]) == "port"


def test_without_the_page_the_old_fragment_is_kept() -> None:
    assert citation_link("a/#x", "hello world") == (
        "a/?anchored-hl=hello+world#x:~:text=hello%20world"
    )


# ---- through the app, on the qa site


def test_the_wrong_target_of_issue_12_through_the_app(
    qa_index: Path, tmp_path: Path, openai: FakeOpenAIServer
) -> None:
    """The best chunk of the section is its outputs table; the sentence quotes its start."""
    openai.script(Reply(quote_passages(k=1)))
    settings = Settings(
        index=str(qa_index),
        cache_dir=str(tmp_path / "cache"),
        feedback=str(tmp_path / "feedback"),
        refresh_s=0,
        llm_timeout_s=5,
        llm_provider="openai",
        llm_model="fake-model",
        llm_base_url=openai.url,
        llm_api_key="k",
    )
    with TestClient(create_app(settings)) as c:
        body = c.post(
            "/v1/ask", json={"question": "Which outputs of the cloud deploy do I need next?"}
        ).json()
        quoted = c.post(
            "/v1/ask",
            json={
                "question": "Which outputs of the cloud deploy do I need next?",
                "mode": "extractive",
            },
        ).json()
    assert body["mode"] == "llm" and body["answer"], body
    item = body["answer"][0]
    assert "skylark cloud deploy --guided" in item["text"]
    (own,) = item["spans"]
    assert own["highlight"].startswith("Run skylark cloud deploy --guided once")
    assert "outputs you need" not in own["highlight"]
    assert body["citations"][0]["highlight"] == own["highlight"]
    # extractive: each quoted item's chip marks the unit it quotes, inside the quote
    whole = quoted["citations"][0]["highlight"]
    for it in quoted["answer"]:
        for s in it["spans"]:
            assert s["highlight"] in whole and len(s["highlight"]) <= len(whole)
    assert len({s["highlight"] for it in quoted["answer"] for s in it["spans"]}) == len(
        quoted["answer"]
    )
