"""The extractive answerer's choice of the line to quote, on hand-made passages."""

from __future__ import annotations

from anchored_query.answer.extractive import answer_extractively
from anchored_query.types import Passage


def _passage(n: int, anchor: str, text: str) -> Passage:
    return Passage(
        n=n,
        chunk_ids=[f"page/#{anchor}~0"],
        section_id=f"page/#{anchor}",
        page="page/",
        anchor=anchor,
        title="Page",
        heading_path=["Page", anchor],
        text=text,
        highlight=text,
        score=1.0,
    )


def test_a_line_that_quotes_the_question_is_not_its_answer() -> None:
    question = "Which LLM providers are supported?"
    quoting = _passage(
        1,
        "benchmarks",
        'A plain question ("Which LLM providers are supported?") got one cited sentence.',
    )
    answering = _passage(
        2, "settings", "The supported LLM providers are openai and bedrock (Amazon Bedrock)."
    )
    result = answer_extractively(question, [quoting, answering], min_confidence=0.0)
    assert result.quotes[0].passage.anchor == "settings", result.quotes
    # Without the answering section, the quoting line is still what there is to quote.
    alone = answer_extractively(question, [quoting], min_confidence=0.0)
    assert alone.quotes and alone.quotes[0].passage.anchor == "benchmarks"


def test_structure_is_kept_lists_as_lists_tables_as_tables_code_titles_as_captions() -> None:
    from anchored_query.citations.units import render, section_units

    text = (
        "Install it, then:\n"
        "add the plugin\n"
        "build the site\n"
        "mkdocs.yml\n"
        "plugins:\n  - anchored\n"
        "option | default\n"
        "strict | false\n"
        "lang | en"
    )
    lead, item1, item2 = "Install it, then:", "add the plugin", "build the site"
    at = text.index
    chunks = [
        {"type": "text", "offsets": [0, len(lead)]},
        {"type": "list", "offsets": [at(item1), at(item2) + len(item2)]},
        {"type": "text", "offsets": [at("mkdocs.yml"), at("mkdocs.yml") + 10]},
        {"type": "table", "offsets": [at("option"), len(text)]},
    ]
    code_start = at("plugins:")
    code = [[code_start, code_start + len("plugins:\n  - anchored"), "yaml"]]
    units = section_units(text, chunks, code)
    items = render([u for u in units if u.kind != "header"])
    assert items == [
        lead,
        "- add the plugin",
        "- build the site",
        '```yaml title="mkdocs.yml"\nplugins:\n  - anchored\n```',
        "| option | default |\n|---|---|\n| strict | false |\n| lang | en |",
    ], items
    # A file name that is not above a code block stays a line of its own.
    assert render([u for u in units if u.text == "mkdocs.yml"]) == ["mkdocs.yml"]
