"""The extractive answer step of ``/v1/ask``: what :func:`answer_extractively`
quotes, as the response's answer items and citations."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from anchored_query.answer.extractive import ExtractiveResult, answer_extractively
from anchored_query.answer.prompt import estimate_tokens
from anchored_query.answer.response import covered
from anchored_query.question.analysis import Question
from anchored_query.retrieval.ranking import Retriever
from anchored_query.types import Passage, Turn
from build_index.embedder import Embedder
from build_index.index_format import Index

# The extractive answerer reads only the best passages; the LLM reads them all.
EXTRACTIVE_PASSAGES = 12
# What a tentative answer (the evidence falls short of a sure one) tells the reader.
TENTATIVE = "the docs may not answer this exactly; this is the closest passage."


def extractive_passages(retriever: Retriever, hits: Any) -> list[Passage]:
    """The passages the extractive answerer reads of ``hits`` (a ranking)."""
    return retriever.passages(
        hits, token_budget=4000, max_passages=EXTRACTIVE_PASSAGES, estimate_tokens=estimate_tokens
    )


def answer_extractive(
    question: str,
    passages: list[Passage],
    *,
    similarity: float,
    model: str,
    embedder: Embedder | None = None,
    question_vector: np.ndarray | None = None,
    index: Index | None = None,
    history: Sequence[Turn] = (),
    mask: np.ndarray | None = None,
    asked: str = "",
    decided: ExtractiveResult | None = None,
    analysed: Question | None = None,
) -> dict[str, Any]:
    """The extractive answer to ``question`` as ``/v1/ask`` returns it (without ids, timings).

    A quote of the passage that holds the answer (:func:`answer_extractively`:
    ``index`` gives it whole sections, chunk types, IDF and spelling;
    ``history`` resolves a follow-up): one answer item per quoted paragraph,
    list line, table row or code block (a fenced block), each citing its
    passage, whose ``highlight`` is exactly the quoted text. It refuses when
    the retrieval evidence says the docs are silent, and then cites the
    sections that come closest; ``tentative`` says that the evidence falls
    short of a sure answer (the quote is the closest passage). ``mask``: the
    chunks in scope (the evidence is gathered over them; retrieval's row
    mask). ``asked``: the question as the reader wrote it when ``question`` is
    its English gloss. ``decided``: the answerer's result for these very
    arguments, already computed (the language decision's, languages.py).
    ``analysed``: the request's question, analysed once (:mod:`.question.analysis`).
    """
    result = decided or answer_extractively(
        question,
        passages,
        index=index,
        embedder=embedder,
        model=model,
        question_vector=question_vector,
        similarity=similarity,
        history=history,
        mask=mask,
        asked=asked,
        analysed=analysed,
    )
    by_n = {p.n: p for p in passages}
    if result.abstained or not result.quotes:
        closest = [by_n[n] for n in result.covered if n in by_n] or passages[:5]
        return {
            "answer": [],
            "citations": covered(closest),
            "abstained": True,
            "mode": "extractive",
        }
    answer: list[dict[str, Any]] = []
    cited = [q.passage for q in result.quotes]
    for n, quote in enumerate(result.quotes, start=1):
        answer += [{"text": text, "citations": [n]} for text in quote.items]
    return {
        "answer": answer,
        "citations": covered(cited),
        "abstained": False,
        "mode": "extractive",
        # The evidence is weaker than for a sure answer: the closest passage.
        "tentative": result.tentative,
    }
