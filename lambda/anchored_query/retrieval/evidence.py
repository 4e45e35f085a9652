"""Do the docs answer this question? Retrieval evidence and a calibrated model of it.

The extractive answerer refuses only when the docs are silent. That is
decided from signals that mean the same on any site, not from one sentence
repeating the question's words:

- ``similarity``: the best cosine between the question and a chunk in scope;
- ``margin``: how far the best chunk stands out of the 20 best (a question the
  docs answer has a few chunks far above the rest; an off-topic one a flat
  top);
- ``coverage``: the share of the question's IDF weight (the index's IDF) that
  the best BM25 chunk holds — rare, specific terms count, context words little;
- ``agreement``: the best dense chunk's BM25 score relative to the best BM25
  score (dense and lexical retrieval point at the same place);
- ``unknown``: the share of the question's terms the index has never seen
  (a misspelling the index's spelling corrects counts as seen; CJK terms and
  words that stem to a stopword, "whats", not counted), each weighted by how
  specific its word is in the language at large when a ``prior`` is given
  (:mod:`.word_prior`: an unknown "bandwidth" says more than an unknown
  "week"; MiniLM's model is fitted with it, e5's without); of a long question,
  only the terms of its sentence closest to the docs (``focus``), since its
  other sentences are context the docs need not use; of a Chinese question
  answered through its English gloss, the share of its words whose
  dictionary translation the docs never use
  (:func:`anchored_query.question.crosslingual.unknown_share`: the gloss itself keeps
  only the words the docs use, so it would look fully known);
- ``lexical`` / ``cosine``: how well the best unit the answerer found matches.

:func:`probability_answerable` is a logistic model over these, fitted per
embedding model by ``tests/bench/calibrate_abstention.py`` on question sets of
several corpora (answerable questions; near-miss unanswerable ones in their
own corpus; questions swapped between corpora), with the threshold in
:data:`THRESHOLDS` chosen there so that at most 10% of each family of
unanswerable development questions get an answer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np
import numpy.typing as npt

from anchored_query.question import crosslingual
from anchored_query.question.analysis import Question
from anchored_query.question.spelling import SHORTHAND, known_terms
from anchored_query.question.word_prior import WordPrior
from build_index.index_format import Index
from build_index.tokenizer import STOPWORDS, tokenize

__all__ = [
    "COEFFICIENTS",
    "SURE",
    "THRESHOLDS",
    "WITH_PRIOR",
    "Evidence",
    "gather_evidence",
    "probability_answerable",
]

FEATURES = ("similarity", "margin", "coverage", "agreement", "unknown", "lexical", "cosine")

# Logistic coefficients (intercept first, then FEATURES) per model; "" is the
# fallback for a model never calibrated (no dense evidence: lexical only).
COEFFICIENTS: dict[str, tuple[float, ...]] = {
    # Fitted on the development questions of all eight corpora together (the
    # realdocs sites, Skylark, the fixture site, package READMEs, this project's
    # docs), with the word prior in the evidence; checked leaving each corpus out.
    "all-MiniLM-L6-v2": (-5.922, 5.257, 8.283, 2.917, -0.645, -12.403, 0.877, 4.405),
    # Fitted on the realdocs sites built with it only (MkDocs, HTTPX, Material:
    # fewer swapped questions than for MiniLM, so a rougher fit), without the prior.
    "multilingual-e5-small": (-26.623, 13.572, 2.549, 4.616, 2.161, -16.080, 1.417, 14.140),
    "": (-2.5, 0.0, 0.0, 3.0, 1.0, -2.0, 3.0, 0.0),
}
THRESHOLDS: dict[str, float] = {
    "all-MiniLM-L6-v2": 0.5357,
    "multilingual-e5-small": 0.4053,
    "": 0.5,
}
# Over the threshold but under this, the answer is the passage closest to the
# question rather than one that surely answers it, and says so ("tentative"):
# the lowest probability at which at most 10% of the realdocs sites' near misses
# in development get an answer (calibrate_abstention.py --curve prints it). A model
# without an entry never labels its answers so.
SURE: dict[str, float] = {"all-MiniLM-L6-v2": 0.9193}
# Models whose question terms are weighed by the word prior (word_prior.py), in
# what the extractive answerer quotes, in the refusal evidence (their
# coefficients above were fitted so) and in the LLM answer's checks.
WITH_PRIOR: frozenset[str] = frozenset({"all-MiniLM-L6-v2"})
_TOP = 20
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


@dataclass(frozen=True)
class Evidence:
    """The signals of the module docstring for one question."""

    similarity: float
    margin: float
    coverage: float
    agreement: float
    unknown: float
    lexical: float
    cosine: float

    def vector(self) -> list[float]:
        values = asdict(self)
        return [float(values[name]) for name in FEATURES]


def gather_evidence(
    question: str,
    weights: Mapping[str, float],
    *,
    index: Index | None,
    question_vector: npt.NDArray[np.float32] | None,
    similarity: float | None,
    best_lexical: float,
    best_cosine: float | None,
    focus: str | None = None,
    mask: npt.NDArray[np.bool_] | None = None,
    prior: WordPrior | None = None,
    asked: str = "",
    analysed: Question | None = None,
) -> Evidence:
    """The evidence for ``question`` (``weights``: its terms' IDF, spelling corrected).

    ``focus``: the sentence of a long question that stands for it (unknown terms
    are counted there only). ``mask``: the chunks in scope (retrieval's row mask,
    e.g. the reader's language); None: every chunk. ``prior``: the general-language
    prior (:mod:`.word_prior`) that weighs each unknown term: an unknown "throttle"
    says more than an unknown "big". ``asked``: the question as the reader wrote it
    when ``question`` is its English gloss (its unknown words are counted on the
    unfiltered dictionary: :func:`anchored_query.question.crosslingual.unknown_share`).
    """
    sim = similarity if similarity is not None else 0.0
    margin = coverage = agreement = unknown = 0.0
    if mask is not None and not mask.any():
        index = None  # nothing in scope: no evidence beyond the similarity given
    if index is not None and len(index.chunks):
        # Terms in a script the index may not hold at all (a Chinese question on
        # English docs) say nothing about whether the docs answer it.
        text = focus or question
        analysed = analysed or Question.of(question)
        own = {
            t
            for t in analysed.terms(text)
            # "whats" stems to "what"; chat shorthand stands for a common word.
            if not _CJK.search(t) and t not in STOPWORDS and t not in SHORTHAND
        }
        if own:
            general = analysed.priors(text, prior)
            known = known_terms(index.bm25, sorted(own), analysed.mended(index, text))
            total = sum(general.get(t, 1.0) for t in own)
            unknown = sum(general.get(t, 1.0) for t in own - known) / total
        if asked and crosslingual.needs_gloss(asked, index.bm25):
            share = crosslingual.unknown_share(asked, index.bm25)
            unknown = share if share is not None else unknown
        lexical_scores = index.bm25.score(list(weights)) if weights else None
        dense = index.dense_scores(question_vector) if question_vector is not None else None
        if mask is not None:
            lexical_scores = None if lexical_scores is None else np.where(mask, lexical_scores, 0)
            dense = None if dense is None else np.where(mask, dense, -np.inf)
        if dense is not None:
            k = min(_TOP, len(dense) if mask is None else int(mask.sum()))
            top = np.sort(np.partition(-dense, k - 1)[:k])
            best = -float(top[0])
            if similarity is None:
                sim = best
            margin = best - float(np.mean(-top))
        if lexical_scores is not None and float(lexical_scores.max()) > 0:
            row = int(np.argmax(lexical_scores))
            terms = set(tokenize(str(index.chunks[row]["text"])))
            total = sum(weights.values()) or 1.0
            coverage = sum(w for t, w in weights.items() if t in terms) / total
            if dense is not None:
                agreement = float(lexical_scores[int(np.argmax(dense))] / lexical_scores[row])
    return Evidence(
        similarity=round(sim, 4),
        margin=round(margin, 4),
        coverage=round(coverage, 4),
        agreement=round(agreement, 4),
        unknown=round(unknown, 4),
        lexical=round(best_lexical, 4),
        cosine=round(best_cosine if best_cosine is not None else 0.0, 4),
    )


def probability_answerable(evidence: Evidence, model: str) -> float:
    """The calibrated probability that the docs answer (see the module docstring)."""
    coefficients = COEFFICIENTS.get(model, COEFFICIENTS[""])
    z = coefficients[0] + sum(
        w * x for w, x in zip(coefficients[1:], evidence.vector(), strict=True)
    )
    return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))
