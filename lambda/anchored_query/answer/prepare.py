"""The first step of ``/v1/ask``: what retrieval searches for (the question, a
follow-up's previous question, the model's rewrites when on), the reader's pages
ranked first, and the passages the answer step reads."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from anchored_query.answer import languages
from anchored_query.answer.extractive_answer import extractive_passages
from anchored_query.answer.llm_answer import passage_budget, passage_tokens, rewrites
from anchored_query.answer.prepared import Prepared
from anchored_query.answer.response import ms
from anchored_query.llm import LLMClient
from anchored_query.llm.calls import Deadline
from anchored_query.question.analysis import Question
from anchored_query.question.validation import AskRequest
from anchored_query.settings import Settings

if TYPE_CHECKING:
    from anchored_query.retrieval.loaded import Loaded


def retrieve(
    request: AskRequest,
    loaded: Loaded,
    settings: Settings,
    llm: LLMClient | None,
    deadline: Deadline,
    started: float,
) -> Prepared:
    """The passages of a checked ``request``; the LLM's when ``llm`` answers it (sized
    to its window), else the extractive answerer's."""
    timings: dict[str, float] = {}
    use_llm = llm is not None and request.mode != "extractive"

    # The question and a follow-up's previous question; the model's rewrites
    # only when ANCHORED_LLM_REWRITE is on (a second call).
    question = Question.of(request.question, request.history)  # analysed once, here
    variants = question.forms
    if llm is not None and use_llm and settings.llm_rewrite:
        t = time.perf_counter()
        variants += rewrites(llm, settings, request, deadline)
        timings["rewrite"] = ms(time.perf_counter() - t)

    t = time.perf_counter()
    # The reader's pages first; another language's only when theirs do not answer.
    hits, language = languages.rank_for_reader(
        loaded.retriever,
        variants,
        request.scope,
        request.lang,
        request.other_languages,
        languages.extractive_decider(
            loaded.retriever,
            request.question,
            request.scope,
            lambda ranked: extractive_passages(loaded.retriever, ranked),
            request.history,
            question,
        ),
        analysed=question,
    )
    if use_llm:
        passages = loaded.retriever.passages(
            hits,
            token_budget=passage_budget(settings, request),
            max_passages=settings.max_passages,
            estimate_tokens=passage_tokens,
        )
    else:
        passages = extractive_passages(loaded.retriever, hits)
    timings["retrieve"] = ms(time.perf_counter() - t)
    return Prepared(
        request,
        loaded,
        deadline,
        use_llm,
        hits,
        passages,
        timings,
        started,
        language=language,
        question=question,
    )
