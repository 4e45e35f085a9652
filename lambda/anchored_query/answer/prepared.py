"""A ``/v1/ask`` request between the engine's steps: checked, its question analysed,
its passages retrieved (``prepare.py`` makes it; the answer steps and ``response.py``
read it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from anchored_query.answer import languages
from anchored_query.llm.calls import Deadline
from anchored_query.question.analysis import Question
from anchored_query.question.validation import AskRequest
from anchored_query.retrieval.loaded import Loaded
from anchored_query.types import Passage


@dataclass
class Prepared:
    """One ``/v1/ask`` request between the steps of :class:`Engine`: checked, retrieved."""

    request: AskRequest
    loaded: Loaded
    deadline: Deadline
    use_llm: bool
    hits: Any
    passages: list[Passage]
    timings: dict[str, float]
    started: float
    # The question analysed once (question/analysis.py): every later step reads it.
    question: Question
    reason: str = ""  # set when the extractive answer replaces the LLM's
    fallback: str = ""
    # The reader's language and where the hits come from (languages.py).
    language: languages.LanguageChoice = field(default_factory=languages.LanguageChoice)
