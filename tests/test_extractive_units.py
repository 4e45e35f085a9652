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
