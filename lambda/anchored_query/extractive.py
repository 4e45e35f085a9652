"""The answerer used when no LLM is configured: quote the best sentences.

Sentences of the top passages are scored by how much of the question they
cover — question terms (the shared BM25 tokenizer's) weighted by IDF over the
candidate passages, so a term every candidate shares counts little and a term
no candidate has counts most — plus a small bonus for the passage's retrieval
rank. Up to ``max_sentences`` are chosen greedily, each adding question terms
the others missed (an MMR-style redundancy penalty), and shown in reading order,
each citing its passage. When even the best sentence covers too little of the
question the answerer abstains and names the sections that come closest.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from anchored_query.sentences import sentence_spans
from anchored_query.types import AnswerSentence, Passage
from build_index.tokenizer import tokenize

__all__ = [
    "DEFAULT_MIN_SCORE",
    "ExtractiveResult",
    "answer_extractively",
    "choose_threshold",
]

# Calibrated on the fixture corpus of tests/test_extractive.py (22 MkDocs-style
# sections; 20 answerable and 15 unanswerable questions, top 8 passages each by
# token overlap): answerable confidences were >= 0.38, unanswerable <= 0.27
# ("dark mode on Windows" matches "strict mode is enabled"). A small corpus and a
# stand-in retriever: recalibrate on a real question set with ``choose_threshold``.
DEFAULT_MIN_SCORE = 0.32
MAX_PASSAGES = 8
MAX_COVERED = 5

_CONTEXT_WEIGHT = 0.3  # question terms found only in the passage's headings
_RANK_BONUS = 0.1  # / (1 + rank)
_IDF_FLOOR = 0.2
_CJK_UNSEEN_WEIGHT = 0.35  # an unmatched CJK bigram is often a cross-word artefact
_MAX_WORDS = 60
_MIN_NOVELTY = 0.1  # a further sentence must add this share of the question's weight

_FILLER_WORDS = (
    *("want", "need", "possible", "possibly", "way", "ways", "please", "tell", "know"),
    *("explain", "something", "anything", "thing", "things", "find", "question", "help"),
    *("put", "get", "go", "make", "happen", "happens", "mean"),
    *("如何", "怎么", "怎样", "怎么样", "什么", "为什么", "哪些", "哪个", "可以", "是否"),
    *("能否", "请问", "一下", "我们", "我的", "吗", "呢"),
)
_CODE_WORDS_RAW = (
    *("code", "config", "configure", "configuration", "yaml", "yml", "toml", "json"),
    *("example", "examples", "command", "commands", "cli", "syntax", "snippet", "sample"),
    *("script", "配置", "示例", "代码", "命令", "例子", "用法"),
)
# Stemmed like the question's terms, so they compare.
_FILLER = frozenset(t for word in _FILLER_WORDS for t in tokenize(word))
_CODE_WORDS = frozenset(t for word in _CODE_WORDS_RAW for t in tokenize(word))
_IDENTIFIER_IN_QUESTION = re.compile(r"`|--\w|\w_\w|\w\.\w", re.ASCII)
_COMMAND_LINE = re.compile(r"^(?:\$\s|>>>|#!|pipx?\s|npm\s|git\s|docker\s|python\s|mkdocs\s)")
_YAML_LINE = re.compile(r"^[-\s]*[a-z_][\w.-]*\s*:\s*\S*\s*$")  # "dev_addr: x", not "Default: x"
_SYMBOLS = set("{}[]()<>=;:$|\\/`\"'#*&%@^~")
_TERMINAL = ".!?。！？:："
_ANAPHORA = re.compile(
    r"^(?:it|its|this|these|that|those|they|such|both|then)\b|^(?:它|这|该|此|其)",
    re.IGNORECASE,
)
_LEADING_MARKUP = re.compile(r"^\s*(?:[-*+]\s+|\d{1,3}[.)]\s+|>\s*)")


@dataclass(frozen=True)
class ExtractiveResult:
    """What the extractive answerer found.

    ``sentences`` (empty when ``abstained``) are passage sentences verbatim,
    each citing its passage's context number. ``confidence`` in [0, 1] is the
    best sentence's coverage of the question (see :func:`answer_extractively`);
    ``covered`` lists the numbers of the passages closest to the question, for
    an abstention to show what the documentation does cover. ``reason`` is a
    sentence for the reader.
    """

    sentences: list[AnswerSentence]
    abstained: bool
    reason: str
    confidence: float
    covered: list[int] = field(default_factory=list)


@dataclass
class _Candidate:
    passage: Passage
    rank: int
    position: int
    text: str
    terms: frozenset[str]
    is_code: bool
    relevance: float = 0.0
    score: float = 0.0


def answer_extractively(
    question: str,
    passages: Sequence[Passage],
    *,
    max_sentences: int = 4,
    min_score: float = DEFAULT_MIN_SCORE,
    max_passages: int = MAX_PASSAGES,
) -> ExtractiveResult:
    """Answer ``question`` with up to ``max_sentences`` sentences quoted from ``passages``.

    ``passages`` come in retrieval order (best first); the first
    ``max_passages`` not marked ``excluded`` are read. A sentence's relevance
    is the IDF mass of the question's content terms it contains, divided by the
    question's total (terms found only in the passage's title or headings count
    ``0.3``), so 1.0 means every question term is there. ``confidence`` is the
    best relevance; below ``min_score`` the answerer abstains. The default
    ``min_score`` is calibrated so that unanswerable questions (asked of
    passages retrieved for them) abstain while answerable ones do not; see
    :data:`DEFAULT_MIN_SCORE` and :func:`choose_threshold` to recalibrate.
    Headings, admonition labels and code-only fragments are skipped unless the
    question asks for code or configuration.
    """
    pool = [p for p in passages if not p.excluded][:max_passages]
    covered = _covered(pool)
    q_terms = [t for t in dict.fromkeys(tokenize(question)) if t not in _FILLER]
    if not q_terms:
        q_terms = list(dict.fromkeys(tokenize(question)))
    if not pool or not q_terms:
        return _abstain(0.0, covered, "No passages of the documentation match the question.")

    weights = _weights(q_terms, pool)
    total = sum(weights.values())
    wants_code = bool(_CODE_WORDS.intersection(q_terms)) or bool(
        _IDENTIFIER_IN_QUESTION.search(question)
    )
    candidates = _candidates(pool, wants_code)
    if not candidates:
        return _abstain(0.0, covered, "No passages of the documentation match the question.")

    for c in candidates:
        context = _heading_terms(c.passage) - c.terms
        own = sum(w for t, w in weights.items() if t in c.terms)
        extra = sum(w for t, w in weights.items() if t in context)
        c.relevance = min(1.0, (own + _CONTEXT_WEIGHT * extra) / total)
        c.score = c.relevance * _length_factor(c.text) + _RANK_BONUS / (1 + c.rank)

    confidence = round(max(c.relevance for c in candidates), 4)
    if confidence < min_score:
        return _abstain(
            confidence, covered, "The documentation does not seem to cover this question."
        )

    chosen = _select(candidates, weights, total, max_sentences)
    chosen.sort(key=lambda c: (c.rank, c.position))
    sentences = [AnswerSentence(c.text, [c.passage.n]) for c in chosen]
    return ExtractiveResult(
        sentences=sentences,
        abstained=False,
        reason="Quoted from the documentation: no language model wrote this answer.",
        confidence=confidence,
        covered=covered,
    )


def choose_threshold(
    confidences: Iterable[tuple[float, bool]], *, max_false_answer_rate: float = 0.1
) -> float:
    """The lowest threshold at which at most ``max_false_answer_rate`` of the
    unanswerable questions still get an answer.

    ``confidences`` are ``(result.confidence, answerable)`` pairs from running
    :func:`answer_extractively` with ``min_score=0`` over a question set whose
    passages come from real retrieval. A lower threshold answers more of the
    answerable questions, so the lowest one that meets the rate is best.
    """
    pairs = list(confidences)
    negatives = sorted((c for c, answerable in pairs if not answerable), reverse=True)
    if not negatives:
        return 0.0
    allowed = math.floor(max_false_answer_rate * len(negatives))
    if allowed >= len(negatives):
        return 0.0
    # Answering needs confidence >= threshold: put it just above the first
    # unanswerable confidence that must be refused.
    return round(min(1.0, negatives[allowed] + 1e-4), 4)


def _weights(q_terms: list[str], pool: Sequence[Passage]) -> dict[str, float]:
    """IDF of each question term over the candidate passages (with headings)."""
    docs = [set(tokenize(_passage_search_text(p))) for p in pool]
    n = len(docs)
    weights: dict[str, float] = {}
    for term in q_terms:
        df = sum(1 for d in docs if term in d)
        weight = max(_IDF_FLOOR, math.log((n + 1) / (df + 0.5)))
        if df == 0 and _is_cjk_bigram(term):
            weight *= _CJK_UNSEEN_WEIGHT
        weights[term] = weight
    return weights


def _candidates(pool: Sequence[Passage], wants_code: bool) -> list[_Candidate]:
    out: list[_Candidate] = []
    for rank, p in enumerate(pool):
        headings = {_plain(h) for h in (p.title, *p.heading_path) if h.strip()}
        for position, span in enumerate(sentence_spans(p.text)):
            text = span.text
            plain = _plain(text)
            if not plain or plain in headings:
                continue
            is_code = _looks_like_code(text)
            if (
                not is_code
                and len(plain.split()) <= 3
                and text[-1] not in _TERMINAL
                and not _has_cjk(text)
            ):
                continue  # a label ("Note", "Default") or a heading-like fragment
            terms = frozenset(tokenize(text))
            if terms:
                # Code stays a candidate (a "run this:" sentence may pull it in) but is
                # only picked on its own merit when the question asks for code.
                out.append(_Candidate(p, rank, position, text, terms, is_code and not wants_code))
    return out


def _select(
    candidates: list[_Candidate], weights: dict[str, float], total: float, max_sentences: int
) -> list[_Candidate]:
    """Greedy MMR: each pick adds uncovered question terms and repeats little.

    The first pick is the best-scoring sentence; later picks must add at least
    ``_MIN_NOVELTY`` of the question's weight, be half as relevant as the best,
    and share under 60 % of their terms with a sentence already chosen. A pick
    that opens with a pronoun brings the sentence before it; one that ends with
    a colon brings the sentence (often a command) after it.
    """
    best = max(c.relevance for c in candidates)
    chosen: list[_Candidate] = []
    covered_terms: set[str] = set()
    pool = sorted(candidates, key=lambda c: -c.score)
    while len(chosen) < max_sentences:
        picked: _Candidate | None = None
        picked_value = -math.inf
        for c in pool:
            if c.is_code:
                continue
            novelty = sum(w for t, w in weights.items() if t in c.terms and t not in covered_terms)
            novelty /= total
            redundancy = max((_jaccard(c.terms, s.terms) for s in chosen), default=0.0)
            if chosen and (c.relevance < 0.5 * best or novelty < _MIN_NOVELTY or redundancy >= 0.6):
                continue
            value = 0.5 * c.score + novelty - 0.5 * redundancy
            if value > picked_value:
                picked, picked_value = c, value
        if picked is None:
            break
        pool.remove(picked)
        chosen.append(picked)
        covered_terms.update(t for t in weights if t in picked.terms)
        # "It defaults to 8000." needs the sentence that says what "it" is;
        # "Run the following command:" needs the command.
        neighbour = 0
        if _ANAPHORA.match(_LEADING_MARKUP.sub("", picked.text)):
            neighbour = -1
        elif picked.text[-1] in ":：":
            neighbour = 1
        if neighbour and len(chosen) < max_sentences:
            extra = next(
                (
                    c
                    for c in pool
                    if c.passage is picked.passage and c.position == picked.position + neighbour
                ),
                None,
            )
            if extra is not None:
                pool.remove(extra)
                chosen.append(extra)
    return chosen


def _covered(pool: Sequence[Passage]) -> list[int]:
    """The numbers of the best passages, one per section."""
    seen: set[str] = set()
    out: list[int] = []
    for p in pool:
        if p.section_id not in seen:
            seen.add(p.section_id)
            out.append(p.n)
        if len(out) >= MAX_COVERED:
            break
    return out


def _abstain(confidence: float, covered: list[int], reason: str) -> ExtractiveResult:
    return ExtractiveResult([], True, reason, confidence, covered)


def _passage_search_text(p: Passage) -> str:
    return "\n".join([p.title, *p.heading_path, p.text])


def _heading_terms(p: Passage) -> frozenset[str]:
    return frozenset(tokenize(" ".join([p.title, *p.heading_path])))


def _looks_like_code(text: str) -> bool:
    if text.startswith(("```", "~~~")):
        return True
    body = _LEADING_MARKUP.sub("", text)
    if _COMMAND_LINE.match(body) and body[-1] not in _TERMINAL:
        return True
    if _YAML_LINE.match(body):
        return True
    visible = [ch for ch in body if not ch.isspace()]
    return bool(visible) and sum(ch in _SYMBOLS for ch in visible) / len(visible) > 0.2


def _length_factor(text: str) -> float:
    words = len(text.split()) if not _has_cjk(text) else len(text) // 2
    if words < 4:
        return 0.7
    if words > _MAX_WORDS:
        return 0.8
    return 1.0


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def _plain(text: str) -> str:
    return " ".join(_LEADING_MARKUP.sub("", text).casefold().strip(" #:.").split())


def _has_cjk(text: str) -> bool:
    return any("\u3400" <= ch <= "\u9fff" or "\u3040" <= ch <= "\u30ff" for ch in text)


def _is_cjk_bigram(term: str) -> bool:
    return len(term) == 2 and _has_cjk(term)
