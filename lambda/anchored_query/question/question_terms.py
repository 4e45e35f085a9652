"""The question's side of the extractive answer: its terms' weights and, for a long
question, the sentence that asks.

- :func:`question_weights`: each query term's weight, the index's IDF (spelling
  corrected to the index's vocabulary) times how specific the word is in the
  language at large (:mod:`anchored_query.question.word_prior`); a follow-up's earlier
  question counts :data:`HISTORY_WEIGHT` of its terms.
- :func:`focus_of`: of a question written as users write issues (mostly
  context), the sentence closest to the docs stands for it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from anchored_query.question.analysis import Question
from anchored_query.question.spelling import corrected
from anchored_query.question.word_prior import WordPrior
from anchored_query.types import Passage, Turn
from build_index.index_format import Index
from build_index.tokenizer import tokenize

__all__ = [
    "HISTORY_WEIGHT",
    "LONG_QUESTION",
    "MAX_PARTS",
    "SentenceEmbedder",
    "focus_of",
    "question_weights",
]


class SentenceEmbedder(Protocol):
    """What the answerer needs of :class:`build_index.embedder.Embedder`."""

    def embed_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...

    def embed_query(self, text: str) -> npt.NDArray[np.float32]: ...


LONG_QUESTION = 25  # words: a longer question is read sentence by sentence (focus_of)
MAX_PARTS = 3
HISTORY_WEIGHT = 0.5
_SENTENCE_END = re.compile(r"(?<=[.?!。？！])\s+|(?<=[。？！])")


def focus_of(
    question: str,
    embedder: SentenceEmbedder,
    index: Index,
    vector: npt.NDArray[np.float32] | None,
    similarity: float | None,
    mask: npt.NDArray[np.bool_] | None = None,
) -> tuple[npt.NDArray[np.float32] | None, float | None, str | None]:
    """The vector of the question's sentence closest to the docs, for a long question.

    A question written as users write issues is mostly context ("we migrated
    last week and now…"); one of its sentences asks. Each sentence of a long
    question (up to :data:`MAX_PARTS`) is embedded; the one whose closest chunk
    is closest stands for the question when it beats the whole question.
    Returned: its vector, its best cosine and the sentence (None: the whole).
    """
    parts = [p.strip() for p in _SENTENCE_END.split(question) if len(p.split()) >= 3]
    if len(question.split()) < LONG_QUESTION or len(parts) < 2:
        return vector, similarity, None
    best_vector, best = vector, similarity if similarity is not None else -1.0
    chosen: str | None = None
    for part in parts[-MAX_PARTS:]:  # the asking sentence is usually near the end
        v = embedder.embed_query(part)
        scores = index.dense_scores(v)
        top = float((scores if mask is None else scores[mask]).max(initial=-1.0))
        if top > best:
            best_vector, best, chosen = v, top, part
    return best_vector, best, chosen


def question_weights(
    question: str,
    history: Sequence[Turn],
    pool: Sequence[Passage],
    index: Index | None,
    prior: WordPrior | None = None,
    analysed: Question | None = None,
) -> dict[str, float]:
    """Query terms -> weight: IDF over the index (or the passages), spelling corrected,
    times how specific the word is in the language at large (:mod:`.word_prior`).
    ``analysed``: the question analysed once (its texts' terms and priors)."""
    analysed = analysed or Question.of(question, history)
    own = list(dict.fromkeys(analysed.terms(question)))
    earlier = [t.content for t in history if t.role == "user"][-1:]
    general = analysed.priors(" ".join([*earlier, question]), prior)
    past = [t for q in earlier for t in dict.fromkeys(analysed.terms(q)) if t not in own]
    if index is not None:
        bm25 = index.bm25
        own = list(dict.fromkeys(corrected(bm25, own, analysed.mended(index, question))))
        typed = analysed.mended(index, earlier[0]) if earlier else {}
        past = list(dict.fromkeys(corrected(bm25, past, typed)))
        n = bm25.n_chunks
        indptr = bm25.indptr

        def idf(term: str) -> float:
            row = bm25.vocab.get(term)
            if row is None:
                return 0.0  # the docs never use it: it cannot pick a line
            df = int(indptr[row + 1]) - int(indptr[row])
            return math.log(1 + (n - df + 0.5) / (df + 0.5))
    else:
        docs = [frozenset(tokenize(" ".join([p.title, *p.heading_path, p.text]))) for p in pool]

        def idf(term: str) -> float:
            df = sum(term in d for d in docs)
            return math.log(1 + (len(docs) - df + 0.5) / (df + 0.5)) if df else 0.0

    weights = {t: idf(t) * general.get(t, 1.0) for t in own}
    for t in past:
        weights.setdefault(t, HISTORY_WEIGHT * idf(t) * general.get(t, 1.0))
    return {t: w for t, w in weights.items() if w > 0}
