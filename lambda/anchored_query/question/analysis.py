"""The question analysed once, at the door: every later stage reads it from here.

:class:`Question` is made when a ``/v1/ask`` request is prepared (buffered or
streamed) and travels with it (``Prepared.question``). It holds what the question
is (its text, the follow-up's earlier question, the forms retrieval searches
for) and what is derived from it the first time a stage asks, then kept: the
terms of each of its texts (the tokenizer runs once per text), their spelling
corrected against the index, the prior of each of its words, and the vector of
each text. A stage asks the record (``question.terms(text)``) instead of
tokenizing, correcting or embedding again. ``tests/test_question_analysis.py``
counts the tokenizer's calls for one streamed question.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from anchored_query.question.query_forms import search_forms
from anchored_query.question.spelling import corrected, mended, respelled
from anchored_query.question.word_prior import WordPrior, term_priors, word_prior
from anchored_query.types import Turn
from build_index.tokenizer import tokenize

if TYPE_CHECKING:
    from build_index.index_format import Index

__all__ = ["Question"]


@dataclass(eq=False)
class Question:
    """One reader's question and what every stage derives from it, derived once."""

    text: str
    history: tuple[Turn, ...] = ()
    _terms: dict[str, tuple[str, ...]] = field(default_factory=dict, repr=False)
    _corrected: dict[tuple[int, str], tuple[str, ...]] = field(default_factory=dict, repr=False)
    _vectors: dict[str, npt.NDArray[np.float32]] = field(default_factory=dict, repr=False)
    _spelt: dict[tuple[int, str], str] = field(default_factory=dict, repr=False)
    _mended: dict[tuple[int, str], dict[str, str]] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, text: str, history: Sequence[Turn] = ()) -> Question:
        return cls(text, tuple(history))

    @property
    def earlier(self) -> str:
        """A follow-up's earlier question (the last user turn), ``""`` without one."""
        asked = [t.content for t in self.history if t.role == "user"]
        return asked[-1] if asked else ""

    @property
    def forms(self) -> list[str]:
        """What retrieval searches for without a model call (:mod:`.query_forms`)."""
        return search_forms(self.text, self.history)

    def terms(self, text: str | None = None) -> tuple[str, ...]:
        """:func:`build_index.tokenizer.tokenize` of ``text`` (default: the question),
        tokenized once."""
        text = self.text if text is None else text
        found = self._terms.get(text)
        if found is None:
            found = self._terms[text] = tuple(tokenize(text))
        return found

    def corrected(self, index: Index, text: str | None = None) -> tuple[str, ...]:
        """The terms of ``text`` plus the index's spelling of those it does not know
        (:func:`.spelling.corrected`), once per index."""
        text = self.text if text is None else text
        key = (id(index), text)
        found = self._corrected.get(key)
        if found is None:
            found = tuple(corrected(index.bm25, self.terms(text), self.mended(index, text)))
            self._corrected[key] = found
        return found

    def mended(self, index: Index, text: str | None = None) -> dict[str, str]:
        """The corrections read from the words of ``text`` as typed
        (:func:`.spelling.mended`), once per index."""
        text = self.text if text is None else text
        key = (id(index), text)
        found = self._mended.get(key)
        if found is None:
            found = {}
            if not all(t in index.bm25.vocab for t in self.terms(text)):
                found = mended(index.bm25, text, *_reading(index), self.terms)
            self._mended[key] = found
        return found

    def spelt(self, index: Index, text: str | None = None) -> str:
        """``text`` (default: the question) as the embedder should read it on ``index``:
        its misspelt words in the docs' spelling (:func:`.spelling.respelled`), once."""
        text = self.text if text is None else text
        key = (id(index), text)
        found = self._spelt.get(key)
        if found is None:
            found = self._spelt[key] = respelled(index.bm25, text, *_reading(index), self.terms)
        return found

    def priors(self, text: str, prior: WordPrior | None) -> dict[str, float]:
        """:func:`.word_prior.term_priors` of ``text``, its words tokenized once."""
        return term_priors(text, prior, tokens=self.terms)

    def vector(
        self, text: str, embed: Callable[[str], npt.NDArray[np.float32]]
    ) -> npt.NDArray[np.float32]:
        """The embedding of ``text`` by ``embed`` (the index's embedder), once."""
        found = self._vectors.get(text)
        if found is None:
            found = self._vectors[text] = embed(text)
        return found


def _reading(index: Index) -> tuple[Callable[[int], str], Callable[[str], bool]]:
    """What the speller reads of ``index``: a chunk's text, and whether a word is one
    of the language (its embedder's vocabulary holds it whole)."""
    chunks = index.chunks
    return (lambda row: str(chunks[row]["text"])), word_prior(index.model_dir).holds
