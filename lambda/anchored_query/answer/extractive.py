"""The answerer used when no LLM is configured: quote the passage that holds the answer.

1. **Sections.** The best sections by retrieval (the passages' fused scores),
   each read whole from the index with its chunks' types
   (:func:`anchored_query.answer.quote_window.read_sections`).
2. **The best unit.** Each unit is scored by the question's terms it holds,
   weighted (:mod:`anchored_query.question.question_terms`) by the index's own IDF
   times a general-language prior from the
   embedder's vocabulary (:mod:`anchored_query.question.word_prior`: so the context
   words of a long, conversational question count little and its rare,
   specific terms most, even when a common word such as "supported" happens
   to be rare on the site; a follow-up's earlier question counts half), the
   section's headings, the
   section's retrieval score and, with the index's embedder, the cosine
   between the question and the unit (the :data:`MAX_EMBEDDED` most promising
   units; a long question is compared by its sentence closest to the docs).
   Misspelt terms are matched in the index's spelling
   (:mod:`anchored_query.question.spelling`). A line that quotes the question whole
   (a benchmark's list of questions) counts half, its meaning too, and so
   does a short line pointing to another page by its title
   (:mod:`anchored_query.retrieval.pointers`).
3. **The quote.** The quote is the best unit with the structure around it
   (:func:`anchored_query.answer.quote_window.quote_window`: lead-ins, code, rows,
   tabs, a short section whole, an option's ``default:`` line). A section
   under a version heading (a changelog's, which mentions a feature when it
   changed) counts :data:`_RELEASE_NOTE` of its score unless the question
   names a version. A second section whose best
   unit is nearly as good is quoted too, without the items the first quote
   already shows (the same install block on two pages). When no unit answers
   crisply, the quote is the best section's opening.
   :func:`anchored_query.citations.units.render` makes the items (code as a fenced
   block, with the language the index recorded for it); each quote's citation
   highlights exactly the quoted text.
4. **Abstention** (:mod:`anchored_query.retrieval.evidence`): a logistic model over
   retrieval evidence that transfers across sites (best cosine, how far the
   best chunk stands out, how much of the question's IDF the best chunks hold,
   the best unit's match) gives the probability that the docs answer; under
   the calibrated threshold the answerer refuses and names the closest
   sections.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from anchored_query.answer.quote_window import (
    MAX_SECTIONS,
    Section,
    is_label,
    quote_window,
    read_sections,
)
from anchored_query.citations.units import Unit, render
from anchored_query.question import crosslingual
from anchored_query.question.analysis import Question
from anchored_query.question.question_terms import SentenceEmbedder, focus_of, question_weights
from anchored_query.question.word_prior import word_prior
from anchored_query.retrieval.evidence import (
    SURE,
    THRESHOLDS,
    WITH_PRIOR,
    Evidence,
    gather_evidence,
    probability_answerable,
)
from anchored_query.retrieval.pointers import POINTER, named_headings
from anchored_query.types import Passage, Turn
from build_index.index_format import Index
from build_index.tokenizer import tokenize

__all__ = [
    "MAX_EMBEDDED",
    "MAX_SECTIONS",
    "ExtractiveResult",
    "Quote",
    "SentenceEmbedder",
    "answer_extractively",
]

MAX_COVERED = 5  # sections named by a refusal
MAX_EMBEDDED = 10  # units compared with the question by the embedder
_EMBED_CHARS = 160
_LABEL = 0.5  # a short line without a full stop is a label, rarely the answer
# A line that quotes the question itself (a benchmark, an FAQ's question, an issue
# report) matches all its words and answers none: it counts this share.
_QUOTES_QUESTION = 0.5
_QUOTED_WORDS = 4  # a question this long or longer is recognised when quoted
_SECOND = 0.85  # a second section is quoted when its best unit scores this share of the best
_CRISP = 0.35  # below this unit score, quote the best section's opening
# A quote shows at most this many characters of text (the best line always): about two
# screens of the box at phone width (375 px, ~40 characters a line, ~9 lines a screen).
# The rest of the window is a "Continue reading" link away.
READ_CHARS = 700

# A changelog's sections sit under version headings; they mention a feature when it
# changed, the reference says how it works: unless the question names a version,
# their units count this share.
_RELEASE_NOTE = 0.7
_VERSION = re.compile(r"\b\d+\.\d+\b")


@dataclass(frozen=True)
class Blend:
    """The unit score: a linear blend of term coverage, semantic similarity (the
    cosine mapped to [0, 1] by :data:`SEMANTIC_SCALES`), the section's headings
    and the section's retrieval score."""

    lexical: float = 1.0
    semantic: float = 1.4
    heading: float = 0.9
    prior: float = 1.2


# Chosen on the development questions of all eight corpora (a grid over the weights and
# MAX_EMBEDDED, scored by first citations and facts; the same choice held when each
# corpus was left out). The hand-set blend before was (1.0, 0.7, 0.6, 1.2) with 6 units
# embedded: the semantic match now counts twice as much.
BLEND = Blend()
# Cosine of a question to an unrelated unit (0) and to one that answers it (1); above
# that it keeps rising (of several lines that answer, the closest is the likeliest: a
# cap at 1 made "for an individual request" and "on a client instance" tie for "a
# single request").
SEMANTIC_SCALES: dict[str, tuple[float, float]] = {"all-MiniLM-L6-v2": (0.15, 0.65)}


@dataclass(frozen=True)
class Quote:
    """One quoted window: its items and the passage it cites.

    ``passage`` is the source passage with ``highlight`` set to the exact
    visible text of the quoted window (whitespace-normalised, as retrieval
    makes highlights), so landing on the citation marks what was quoted.
    """

    passage: Passage
    items: list[str]


@dataclass(frozen=True)
class ExtractiveResult:
    """What the extractive answerer found.

    ``quotes`` is empty when ``abstained``; ``confidence`` is the probability
    that the docs answer (:func:`anchored_query.retrieval.evidence.probability_answerable`);
    ``covered`` lists the numbers of the passages closest to the question,
    for a refusal to show; ``evidence`` holds the signals it was made of;
    ``tentative``: answered, but under the model's :data:`~anchored_query.retrieval.evidence.SURE`
    probability, so the quote is the closest passage, which may not answer exactly.
    """

    quotes: list[Quote]
    abstained: bool
    reason: str
    confidence: float
    covered: list[int] = field(default_factory=list)
    evidence: Evidence | None = None
    tentative: bool = False


@dataclass
class _Scored:
    unit: Unit
    section: int
    lexical: float = 0.0
    heading: float = 0.0  # the question's weight in the section's headings only
    cosine: float | None = None
    own: float = 0.0  # the unit's own relevance: its terms and its cosine
    score: float = 0.0  # own, plus its section's headings and retrieval score
    factor: float = 1.0  # a label's, a changelog's, a line quoting the question: less


def answer_extractively(
    question: str,
    passages: Sequence[Passage],
    *,
    index: Index | None = None,
    embedder: SentenceEmbedder | None = None,
    model: str = "",
    question_vector: npt.NDArray[np.float32] | None = None,
    similarity: float | None = None,
    history: Sequence[Turn] = (),
    min_confidence: float | None = None,
    mask: npt.NDArray[np.bool_] | None = None,
    asked: str = "",
    analysed: Question | None = None,
) -> ExtractiveResult:
    """Answer ``question`` with a quote of the passages (see the module docstring).

    ``passages`` come from retrieval; ``index`` (the index they come from)
    gives whole sections, chunk types, IDF and spelling, and without it each
    passage's text is read as its section. ``similarity`` is the question's
    best cosine to a chunk in scope (``Ranking.best_similarity``).
    ``min_confidence`` overrides the model's calibrated threshold (0: never
    refuse while any section matches, for calibration). ``mask``: the chunks in
    scope, which the evidence is gathered over (retrieval's row mask; None: all).
    ``asked``: the question as the reader wrote it, when ``question`` is its
    English gloss (a Chinese question on English docs): the evidence counts its
    unknown words on the whole dictionary, not on the gloss the docs filtered.
    """
    pool = [p for p in passages if not p.excluded]
    covered = _covered(pool)
    if not pool:
        return ExtractiveResult([], True, "No passages of the documentation match.", 0.0, covered)
    prior = word_prior(index.model_dir) if index is not None and model in WITH_PRIOR else None
    # The reader's question analysed once (its terms, spelling, priors), for every step.
    analysed = analysed or Question.of(asked or question, history)
    weights = question_weights(question, history, pool, index, prior, analysed)
    sections = read_sections(pool, index)
    scored = [
        _Scored(u, i)
        for i, s in enumerate(sections)
        for u in s.units
        if u.kind != "header" and u.text.strip()
    ]
    if not scored:
        return ExtractiveResult([], True, "No passages of the documentation match.", 0.0, covered)
    total = sum(weights.values()) or 1.0
    asks_version = _VERSION.search(asked or question) is not None
    asked_text = _normal(question).rstrip("?？.!")
    if len(asked_text.split()) < _QUOTED_WORDS:
        asked_text = ""
    for c in scored:
        s = sections[c.section]
        terms = _terms(c.unit)
        context = s.heading_terms | (frozenset(tokenize(c.unit.header)) if c.unit.header else set())
        c.lexical = sum(w for t, w in weights.items() if t in terms) / total
        heading = sum(w for t, w in weights.items() if t in context and t not in terms) / total
        c.heading = heading
        c.own = BLEND.lexical * c.lexical
        c.score = c.own + BLEND.heading * heading + BLEND.prior * s.prior
        if is_label(c.unit):
            c.factor *= _LABEL  # "Python version", "Set language": a label, not an answer
        if asked_text and asked_text in _normal(c.unit.text):
            c.factor *= _QUOTES_QUESTION  # 'A plain question ("Which … supported?") got …'
        if s.release_note and not asks_version:
            c.factor *= _RELEASE_NOTE
        if index is not None and c.unit.kind == "prose" and c.lexical > 0:
            # "See Getting started for the details, and Deploy to AWS …": names, not
            # an answer, when the names are most of what it shares with the question.
            named = named_headings(c.unit.text, s.passage.page, _own_path(s), index)
            held = sum(w for t, w in weights.items() if t in terms and t in named) / total
            if held >= 0.5 * c.lexical:
                c.factor *= POINTER
        c.score *= c.factor
    scale = SEMANTIC_SCALES.get(model)
    focus: str | None = None
    if embedder is not None and index is not None:
        question_vector, similarity, focus = focus_of(
            question, embedder, index, question_vector, similarity, mask
        )
    unit_vectors: npt.NDArray[np.float32] | None = None
    if embedder is not None:
        unit_vectors = _add_semantic(question, scored, sections, embedder, question_vector, scale)

    # The refusal evidence weighs the question's terms as the quote does (IDF times
    # the word prior, for a model in WITH_PRIOR: its coefficients were fitted so).
    evidence = gather_evidence(
        question,
        weights,
        index=index,
        question_vector=question_vector,
        similarity=similarity,
        best_lexical=max(c.lexical for c in scored),
        best_cosine=max((c.cosine for c in scored if c.cosine is not None), default=None),
        focus=focus,
        mask=mask,
        prior=prior,
        asked=asked,
        analysed=analysed,
    )
    # A CJK question on CJK pages, with an embedder that does not relate it to its
    # own English gloss: the dense signals are noise and the lexical-only model decides.
    calibrated = model
    if (
        not asked
        and embedder is not None
        and index is not None
        and crosslingual.dense_is_noise(question, embedder.embed_query, index.bm25)
    ):
        calibrated = ""
    confidence = probability_answerable(evidence, calibrated)
    earlier = [t.content for t in history if t.role == "user"][-1:]
    if earlier and embedder is not None and index is not None:
        # A follow-up ("and how do I lower that?") is about the turn before it too.
        combined = f"{earlier[0]} {question}"
        combined_vector = analysed.vector(analysed.spelt(index, combined), embedder.embed_query)
        follow = gather_evidence(
            combined,
            weights,
            index=index,
            question_vector=combined_vector,
            similarity=None,
            best_lexical=evidence.lexical,
            # The units' match to the question with its context, not to "and that?".
            best_cosine=(
                float((unit_vectors @ combined_vector).max())
                if unit_vectors is not None and len(unit_vectors)
                else evidence.cosine
            ),
            mask=mask,
            prior=prior,
            asked=asked,
            analysed=analysed,
        )
        if probability_answerable(follow, calibrated) > confidence:
            evidence, confidence = follow, probability_answerable(follow, calibrated)
    threshold = (
        min_confidence if min_confidence is not None else _threshold(calibrated, asked, index)
    )
    if confidence < threshold:
        return ExtractiveResult(
            [],
            True,
            "The documentation does not seem to cover this question.",
            round(confidence, 4),
            covered,
            evidence,
        )
    return ExtractiveResult(
        _choose_quotes(scored, sections),
        False,
        "Quoted from the documentation: no language model wrote this answer.",
        round(confidence, 4),
        covered,
        evidence,
        tentative=confidence < SURE.get(calibrated, 0.0),
    )


def _own_path(s: Section) -> tuple[str, ...]:
    """The headings of a section's own path (its page title first)."""
    return (s.passage.title, *s.passage.heading_path)


def _choose_quotes(scored: list[_Scored], sections: list[Section]) -> list[Quote]:
    """The quotes of the best unit and, when one is about as good, of a second section."""
    best = max(scored, key=lambda c: c.score)
    if best.score < _CRISP:
        # Sections match but no line answers crisply: the best section's opening.
        first = sections[0]
        opening = next((u for u in first.units if u.kind != "header"), first.units[0])
        return [_quote(first, quote_window(first, opening, {}, _CRISP), opening)]
    quotes = [_best_quote(best, scored, sections)]
    # A second section about as good (the answer is often split across two).
    others = [c for c in scored if c.section != best.section]
    runner = max(others, key=lambda c: c.score, default=None)
    if runner is not None and runner.score >= _SECOND * best.score:
        second = _without_repeats(_best_quote(runner, scored, sections), quotes)
        if second is not None:
            quotes.append(second)
    return quotes


def _threshold(model: str, asked: str = "", index: Index | None = None) -> float:
    """The refusal threshold; a question answered through its dictionary gloss has
    its own (:data:`anchored_query.question.crosslingual.GLOSS_THRESHOLDS`)."""
    if asked and index is not None and crosslingual.needs_gloss(asked, index.bm25):
        glossed = crosslingual.GLOSS_THRESHOLDS.get(model)
        if glossed is not None:
            return glossed
    return THRESHOLDS.get(model, THRESHOLDS[""])


def _terms(u: Unit) -> frozenset[str]:
    if not u.terms:
        u.terms = frozenset(tokenize(u.text))
    return u.terms


def _add_semantic(
    question: str,
    scored: list[_Scored],
    sections: list[Section],
    embedder: SentenceEmbedder,
    question_vector: npt.NDArray[np.float32] | None,
    scale: tuple[float, float] | None,
) -> npt.NDArray[np.float32]:
    """Cosine of the question and the most promising units, into their scores.

    Returned: the embedded units' vectors (a follow-up's evidence reuses them).
    """
    ranked = sorted(scored, key=lambda c: -c.score)
    # The best unit of each section first (the semantic match also reranks sections).
    firsts: dict[int, _Scored] = {}
    for c in ranked:
        firsts.setdefault(c.section, c)
    order = list(firsts.values())[:MAX_EMBEDDED]
    chosen = {id(c) for c in order}
    order += [c for c in ranked if id(c) not in chosen][: MAX_EMBEDDED - len(order)]
    q = question_vector if question_vector is not None else embedder.embed_query(question)
    texts = [_embedding_text(c, sections[c.section]) for c in order]
    by_length = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    sims = [0.0] * len(texts)
    embedded: list[npt.NDArray[np.float32]] = []
    for k in range(0, len(by_length), 2):  # pairs of similar length pad little
        batch = by_length[k : k + 2]
        vectors = embedder.embed_passages([texts[i] for i in batch])
        embedded += list(vectors)
        for i, x in zip(batch, vectors @ q, strict=True):
            sims[i] = float(x)
    lo, hi = scale if scale is not None else (min(sims) - 1e-6, max(sims) + 1e-6)
    for c, sim in zip(order, sims, strict=True):
        c.cosine = sim
        semantic = BLEND.semantic * max(0.0, (sim - lo) / (hi - lo))
        c.own += semantic
        c.score += semantic * c.factor  # a changelog's line counts less in meaning too
    return np.stack(embedded) if embedded else np.zeros((0, len(q)), dtype=np.float32)


def _embedding_text(c: _Scored, s: Section) -> str:
    heading = s.passage.heading_path[-1] if s.passage.heading_path else s.passage.title
    text = c.unit.text[:_EMBED_CHARS]
    return f"{heading}: {text}" if heading else text


def _best_quote(best: _Scored, scored: list[_Scored], sections: list[Section]) -> Quote:
    section = sections[best.section]
    by_unit = {id(c.unit): c.own for c in scored if c.section == best.section}
    return _quote(section, quote_window(section, best.unit, by_unit, best.own), best.unit)


def _quote(section: Section, window: list[Unit], best: Unit) -> Quote:
    """The window as answer items, cut to what a reader scans (:func:`_readable`); when cut,
    a last item links to the section ("Continue reading"). The highlight is what is shown."""
    shown = _readable(window, best)
    start = min(u.start for u in shown)
    end = max(u.end for u in shown)
    highlight = " ".join(section.text[start:end].split())
    items = render(shown)
    if len(shown) < len(window):
        p = section.passage
        where = p.heading_path[-1] if p.heading_path else p.title
        items.append(f"[Continue reading: {_link_text(where)}]({p.url})")
    return Quote(replace(section.passage, highlight=highlight), items)


def _readable(window: list[Unit], best: Unit) -> list[Unit]:
    """The window's units up to :data:`READ_CHARS` of text, the best unit always among them."""
    shown: list[Unit] = []
    size = 0
    for u in window:
        if shown and size + len(u.text) > READ_CHARS and any(x is best for x in shown):
            break
        shown.append(u)
        size += len(u.text)
    return shown


def _link_text(text: str) -> str:
    """``text`` safe inside a Markdown link's brackets."""
    return re.sub(r"([\\\[\]*_`])", r"\\\1", text)


def _without_repeats(quote: Quote, earlier: Sequence[Quote]) -> Quote | None:
    """``quote`` without the items an earlier quote already shows (the same install
    block on two pages); None when nothing is left but lead-ins and labels."""
    shown = {_normal(item) for q in earlier for item in q.items}
    items = [item for item in quote.items if _normal(item) not in shown]
    if len(items) == len(quote.items):
        return quote
    if not any(item.startswith("```") or _answers(item) for item in items):
        return None
    return replace(quote, items=items)


def _answers(item: str) -> bool:
    """Not a lead-in ("Install it with:") nor a label ("Python version")."""
    return _normal(item)[-1:] not in ":：" and len(item.split()) >= 4


def _normal(item: str) -> str:
    return " ".join(item.split()).casefold()


def _covered(pool: Sequence[Passage]) -> list[int]:
    """The numbers of the best passages, one per section."""
    seen: set[str] = set()
    out: list[int] = []
    for p in sorted(pool, key=lambda p: -p.score):
        if p.section_id not in seen:
            seen.add(p.section_id)
            out.append(p.n)
        if len(out) >= MAX_COVERED:
            break
    return out
