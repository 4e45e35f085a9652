"""Records passed between retrieval, prompt, LLM, citation and answer stages."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class Passage:
    """One numbered passage in the context the answerer reads.

    ``n`` is the global number the program assigns (1-based, in context order);
    the model cites ``[n]``. ``text`` is what the model reads (adjacent child
    chunks merged, or the parent section when it fits the budget); ``highlight``
    is the exact visible text on the published page to highlight when the
    passage is cited (the matched child chunk(s)).
    """

    n: int
    chunk_ids: list[str]
    section_id: str
    page: str
    anchor: str
    title: str
    heading_path: list[str]
    text: str
    highlight: str
    score: float = 0.0
    excluded: bool = False

    @property
    def url(self) -> str:
        """``page#anchor`` relative to the site root (no ``#`` for an empty anchor)."""
        return f"{self.page}#{self.anchor}" if self.anchor else self.page


@dataclass(frozen=True)
class Turn:
    """One earlier turn of the conversation."""

    role: Literal["user", "assistant"]
    content: str


@dataclass(frozen=True)
class AnswerSentence:
    """One sentence of an answer with the passage numbers it cites (context numbering)."""

    text: str
    citations: list[int] = field(default_factory=list)
    # False: shown, but no check could confirm it (citations/verify.py); a "note" says
    # what the documentation does not cover (it needs no citation).
    supported: bool = True
    kind: Literal["answer", "note"] = "answer"


@dataclass(frozen=True)
class Scope:
    """Page-prefix filters chosen by the reader ("only this section")."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def is_whole_site(self) -> bool:
        return not self.include and not self.exclude
