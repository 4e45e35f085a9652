"""Polarity: a sentence that denies what its passage states, or states what it denies.

The fact, lexical and semantic tests of :mod:`anchored_query.citations.support` are blind
to negation: "HTTPX does not have a default timeout" shares every term with
"HTTPX is careful to enforce timeouts everywhere by default", and sentence
embeddings put the two close together (recorded reply httpx-01: lexical 1.0,
semantic 0.86). :func:`polarity_conflict` finds the clauses of the context
(every passage the model was shown, not only the cited ones: a sentence the
context contradicts is not shown, whatever it cites) that state what the
sentence states — those covering the largest share of its content
terms, at least :data:`POLARITY_COVERAGE` — and reports a conflict when all of
them have the other polarity (one negates, the other does not). A negation is a
word such as "not", "no", "never", "nothing", "cannot" or "n't" outside code
("not only"/"not just" add, they do not deny; "none" is left out: in
documentation it is mostly a value, ``provider: none``). Sentences in a script the passage
does not use are not compared (no comparable terms).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from anchored_query.citations.sentences import outside_code
from anchored_query.citations.support import PASSAGE_CACHE, content_terms
from anchored_query.types import Passage

__all__ = [
    "POLARITY_COVERAGE",
    "Clauses",
    "negated",
    "passage_clauses",
    "polarity_conflict",
    "polarity_terms",
]

# The passage clause must hold this share of the sentence's content terms to be taken
# as stating the same thing: "X is not enabled by default" against "X is disabled by
# default" shares only 2 of 3 and is left alone.
POLARITY_COVERAGE = 0.8

_NEGATION = re.compile(
    r"\b(?:not|no|never|nothing|nobody|neither|nor|cannot)\b|n['’]t\b", re.IGNORECASE
)
_NOT_NEGATION = re.compile(r"\bnot\s+(?:only|just|merely)\b|\bno\s+matter\b", re.IGNORECASE)
_NEGATION_TERMS = frozenset({"not", "no", "never", "none", "noth", "nothing", "cannot", "nor"})
# Clauses of a passage: lines, sentences, and the halves of a contrast.
_CLAUSE = re.compile(
    r"\n+|(?<=[.!?;])\s+|,?\s+\b(?:while|whereas|but|however|unlike)\b|;\s*", re.IGNORECASE
)


def negated(text: str) -> bool:
    """Whether ``text`` (outside code) contains a negation."""
    prose = _NOT_NEGATION.sub(" ", outside_code(text))
    return _NEGATION.search(prose) is not None


class Clauses:
    """The clauses of the passages shown, with their content terms and polarity, and
    an index from a term to the clauses that hold it as :func:`lexical_found` counts
    (exactly, or one a 4+ letter prefix of the other), so a sentence is compared with
    every clause in one pass over its own terms."""

    def __init__(self, clauses: Sequence[tuple[frozenset[str], bool]]) -> None:
        self.items = list(clauses)
        self._exact: dict[str, list[int]] = {}
        self._by_head: dict[str, list[tuple[int, str]]] = {}
        for i, (terms, _) in enumerate(self.items):
            for term in terms:
                self._exact.setdefault(term, []).append(i)
                if len(term) >= 4 and term.isalpha():
                    self._by_head.setdefault(term[:4], []).append((i, term))
        self._matches: dict[str, frozenset[int]] = {}

    def __len__(self) -> int:
        return len(self.items)

    def matches(self, term: str) -> frozenset[int]:
        """The clauses that hold ``term`` (see the class docstring), once per term."""
        found = self._matches.get(term)
        if found is None:
            hits = set(self._exact.get(term, ()))
            if len(term) >= 4 and term.isalpha():
                hits.update(
                    i
                    for i, t in self._by_head.get(term[:4], ())
                    if term.startswith(t) or t.startswith(term)
                )
            found = self._matches[term] = frozenset(hits)
        return found


def passage_clauses(passages: Sequence[Passage]) -> Clauses:
    """The clauses of ``passages`` with their terms and polarity, computed once."""
    return Clauses([clause for p in passages for clause in _clauses_of(p.text)])


@functools.lru_cache(maxsize=PASSAGE_CACHE)
def _clauses_of(text: str) -> tuple[tuple[frozenset[str], bool], ...]:
    """The clauses of one passage's text (kept across requests, as its terms are)."""
    return tuple(
        (content_terms(outside_code(clause)), negated(clause))
        for clause in _CLAUSE.split(text)
        if clause and len(clause) >= 8
    )


def polarity_terms(text: str) -> frozenset[str]:
    """The content terms of ``text`` that :func:`polarity_conflict` compares."""
    return content_terms(outside_code(text)) - _NEGATION_TERMS


def polarity_conflict(text: str, clauses: Clauses) -> str | None:
    """Why the clauses (:func:`passage_clauses`) state the opposite of ``text``, or None
    (see the module docstring)."""
    terms = polarity_terms(text)
    if len(terms) < 2:
        return None
    held: dict[int, int] = {}
    for term in terms:
        for i in clauses.matches(term):
            held[i] = held.get(i, 0) + 1
    best = 0.0
    polarities: set[bool] = set()
    for i, count in held.items():
        cover = count / len(terms)
        if cover > best + 1e-9:
            best, polarities = cover, {clauses.items[i][1]}
        elif abs(cover - best) <= 1e-9:
            polarities.add(clauses.items[i][1])
    if best < POLARITY_COVERAGE:
        return None
    own = negated(text)
    if polarities == {not own}:
        return "denies what the context states" if own else "states what the context denies"
    return None
