"""Does a reply only paste its passages? Then it is a quote, and is judged as one.

Each sentence a model copies from a passage is supported by it, so verification
shows it as verified. That says nothing about whether the copied text answers the
question: a small model given passages that come close to an unanswerable question
can paste them, sentence after sentence, each attributed to the passage it came
from. A reply that adds nothing of its own is the quoted answer written out again,
and the quoted answer has its own test of whether the docs answer the question at
all (:mod:`anchored_query.retrieval.evidence`): the engine applies that test to a
pasted reply, and when the quote would refuse, the reply is shown as what the docs
come closest to (``coverage`` "none"), not as an answer (``Engine.answer_with_llm``).

A sentence is *pasted* when its words, in order (case, punctuation, Markdown marks
and citation markers aside), occur in one passage and it has at least
:data:`MIN_WORDS` of them; code blocks and shorter sentences ("Yes.", "toggle:")
are not counted either way. A reply is pasted when at least :data:`SHARE` of its
counted sentences (one or more) are pasted. On the recorded replies
(``tests/bench/bench_verifier.py``) no capable model's reply is pasted (one has 1
of 2 sentences copied); of the 1.5B model's, two answerable ones (7 of 8, 4 of 5;
the quote answers both, so they stay answers) and an unanswerable one: asked
whether Material supports PlantUML "like it does Mermaid", it copied the one
sentence about Mermaid. With at least three sentences required, as first written,
that reply was shown as a full answer; with one, it is an abstention, and no
answerable question's answer changed.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Sequence

from anchored_query.citations.sentences import CITATION_MARKER
from anchored_query.citations.support import PASSAGE_CACHE
from anchored_query.types import Passage

__all__ = ["MIN_SENTENCES", "MIN_WORDS", "SHARE", "is_pasted", "pasted_share"]

MIN_WORDS = 5
MIN_SENTENCES = 1  # (3 let a one-sentence paste through: see above)
SHARE = 0.8

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def _words(text: str) -> str:
    text = CITATION_MARKER.sub(" ", unicodedata.normalize("NFKC", text))
    return " ".join(_WORD.findall(text.casefold()))


@functools.lru_cache(maxsize=PASSAGE_CACHE)
def _body(text: str) -> str:
    """A passage's words, padded, kept across requests (a streamed reply is checked at
    each paragraph, with the same passages)."""
    return f" {_words(text)} "


def pasted_share(sentences: Iterable[str], passages: Sequence[Passage]) -> tuple[int, int]:
    """(pasted, counted): how many of the counted sentences occur in a passage."""
    bodies = [_body(p.text + "\n" + p.highlight) for p in passages]
    counted = pasted = 0
    for text in sentences:
        if text.lstrip().startswith(("```", "~~~")):
            continue
        words = _words(text)
        if len(words.split()) < MIN_WORDS:
            continue
        counted += 1
        pasted += any(f" {words} " in body for body in bodies)
    return pasted, counted


def is_pasted(sentences: Iterable[str], passages: Sequence[Passage]) -> bool:
    """Whether the reply's sentences only paste passage text (see the module docstring)."""
    pasted, counted = pasted_share(sentences, passages)
    return counted >= MIN_SENTENCES and pasted >= SHARE * counted
