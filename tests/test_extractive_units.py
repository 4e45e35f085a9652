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


def test_a_long_quote_is_cut_to_a_readers_length_with_a_link_to_the_rest() -> None:
    from anchored_query.answer.extractive import READ_CHARS

    intro = [f"Chapter {i} of the guide is about an unrelated subject." for i in range(8)]
    lead = "To verify the installation with anchored doctor, check each of these:"
    steps = [
        f"Check {i}: the doctor prints one line for part {i} of the installation, "
        "with what it found and what to do next."
        for i in range(10)
    ]
    passage = _passage(1, "install", "\n".join([*intro, lead, *steps]))
    result = answer_extractively(
        "how do I verify the installation with anchored doctor?", [passage], min_confidence=0.0
    )
    quote = result.quotes[0]
    assert quote.items[0] == lead, quote.items
    # Cut: what shows fits the budget, the rest is a link away, and only what shows is marked.
    assert quote.items[-1] == "[Continue reading: install](page/#install)", quote.items
    shown = quote.items[:-1]
    assert 2 <= len(shown) < 1 + len(steps)
    assert sum(len(i) for i in shown) <= READ_CHARS + len(steps[0])
    assert quote.passage.highlight == " ".join(shown)
