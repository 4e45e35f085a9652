# FROZEN BASELINE: the extractive answerer as it was before issue 10's rebuild.
# Kept only so that tests/bench/bench_extractive.py prints the old figures beside
# the new ones in one run. Not used by the product; do not edit or improve it.
# Verbatim copy of lambda/anchored_query/answer/extractive.py at commit 56a0a56, followed
# by answer_extractive, RELEVANCE_FLOOR and the _covered helper of engine.py at
# that commit (renamed _covered_citations, the module already has a _covered).
# ruff: noqa
# mypy: ignore-errors
"""The answerer used when no LLM is configured: quote the best sentences.

Candidates are the sentences of the best passages — prose sentences, list
items and table rows (a row is one candidate, shown verbatim as the page shows
it: its cells joined by ``" | "``). Headings, labels, a table's header row and,
unless the question asks for code or a command, code lines are not answers on
their own.

Evidence per candidate:

- **lexical** coverage: the question's content terms (the shared BM25
  tokenizer's) weighted by IDF over the candidate passages, so a term every
  candidate shares counts little and a term no candidate has counts most;
  terms found only in the passage's headings or in a table row's header count
  ``0.3``. 1.0 means every question term is there. A sentence holding a
  number counts as containing the noun a number question asks for ("Python
  3.11 or newer." answers "which Python *version*").
- **semantic** similarity (with an ``embedder``, the index's own model): the
  cosine between the question and the sentence prefixed with its section
  heading, mapped to [0, 1] by the model's scale (:data:`SEMANTIC_SCALES`).
  It rescues paraphrases ("keyboard shortcut" for the ``widget_shortcut`` row
  "Key that opens the dialog"). Only the :data:`MAX_EMBEDDED` most promising
  candidates (by term coverage, answer type and rank) are embedded.
- **answer type**: a number for "which version / how many / what port", an
  option name or flag for "how do I change / set / turn off", a command for
  "how do I install / run", "X is …" for "what is X". It counts in full only
  in a sentence that is relevant anyway.
- the share of the question's terms in the section's **headings**, and the
  passage's retrieval **rank**.

The choice is a weighted sum of these (weights fitted on development question
sets, see ``_W_LEXICAL``). Up to ``max_sentences`` are chosen greedily, each
adding question terms the others missed (an MMR-style redundancy penalty) and
each nearly good enough to answer on its own. A pick that opens with a pronoun
brings the sentence before it; a command brings the line that introduces it;
a pick that ends with a colon brings the next line unless that is a table row
(never a header). Sentences come out best first, a brought neighbour next to
its pick in page order, each citing its passage.

**Abstention.** ``confidence`` is the best candidate's *relevance*: its term
coverage blended with its clipped semantic similarity (``0.7`` and ``0.3``),
or term coverage alone without a calibrated embedder. Below ``min_score`` the
answerer abstains and names the sections that come closest. The default is
:data:`BLENDED_MIN_SCORE` with a calibrated embedder, :data:`DEFAULT_MIN_SCORE`
without. The query function also abstains when the question's best cosine to
any chunk in scope is below the model's ``RELEVANCE_FLOOR`` (engine.py).
``tests/bench/calibrate_abstention.py`` chose both bars together: the pair that
answers the most answerable development questions while at most 10% of the
unanswerable ones get an answer, in each family (near-miss and off-topic
questions in their own corpus; questions swapped with BEIR SciFact).
"""

from __future__ import annotations

from build_index.embedder import Embedder

import bisect
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from anchored_query.citations.sentences import sentence_spans
from anchored_query.types import AnswerSentence, Passage
from build_index.tokenizer import tokenize

__all__ = [
    "answer_extractive",
    "RELEVANCE_FLOOR",
    "BLENDED_MIN_SCORE",
    "DEFAULT_MIN_SCORE",
    "MAX_EMBEDDED",
    "SEMANTIC_SCALES",
    "ExtractiveResult",
    "SentenceEmbedder",
    "answer_extractively",
    "choose_threshold",
]

# Term coverage alone (no embedder, or a model without a semantic scale).
# Calibrated on the fixture corpus of tests/test_extractive.py (22 MkDocs-style
# sections; 20 answerable and 15 unanswerable questions, top 8 passages each by
# token overlap): answerable confidences were >= 0.38, unanswerable <= 0.27.
DEFAULT_MIN_SCORE = 0.32
# Blended confidence (term coverage and semantic similarity), chosen together
# with the engine's RELEVANCE_FLOOR (0.26 for MiniLM) by
# tests/bench/calibrate_abstention.py: the pair that answers the most
# answerable development questions (skylark, fixture, pkgdocs: 79) while at
# most 10% of the unanswerable ones get an answer, in each family — 36
# unanswerable in their own corpus (near misses and off-topic: 8% answered)
# and 415 swapped between those corpora and BEIR SciFact (1%). It answered
# 100%, 94% and 83% of the answerable questions of the three sets.
BLENDED_MIN_SCORE = 0.42
MAX_PASSAGES = 8
MAX_COVERED = 5
# Sentence embeddings per question: the MAX_EMBEDDED most promising candidates
# (by term coverage, answer type and rank), at most about EMBED_TOKENS model
# tokens in all, each cut at _EMBED_CHARS, embedded in pairs of similar length
# (_EMBED_BATCH). MiniLM int8 costs 0.1-0.3 ms a token on two busy cores: the
# whole answer took 35-60 ms (p50) on the benchmark sets. Comparing every
# candidate chose no better sentences and separated answerable questions no
# better on the development sets than comparing the best 8.
MAX_EMBEDDED = 8
EMBED_TOKENS = 256

# Cosine similarity of a question to an unrelated sentence (maps to 0) and to a
# sentence that answers it (maps to 1), per embedding model. MiniLM on the
# development sets: the best sentence of a question swapped to another corpus
# has a median cosine of 0.17; sentences holding a gold fact 0.57 (quartiles
# 0.44 and 0.68). Other scales near this one calibrated the same.
SEMANTIC_SCALES: dict[str, tuple[float, float]] = {"all-MiniLM-L6-v2": (0.15, 0.65)}

# Relevance (what confidence is made of): term coverage blended with the
# semantic similarity mapped to [0, 1] by the model's scale. 0.2-0.5 separated
# answerable from unanswerable development questions equally well, 0 (term
# coverage alone) and 0.7 or more worse.
_SEMANTIC_WEIGHT = 0.3
_CONTEXT_WEIGHT = 0.3  # question terms found only in the passage's headings
# The choice of sentences: a linear score fitted (softmax over each question's
# candidates, the sentences that hold a gold fact as targets) on the
# development question sets of tests/bench/bench_extractive.py, then rounded;
# gating the answer-type bonus by relevance cost one development question and
# keeps a stray number from outranking a sentence that covers the question.
# The semantic similarity is unclipped here (higher still orders).
_W_LEXICAL = 0.8
_W_SEMANTIC = 0.5
_W_KIND = 0.5  # the sentence holds what the question asks for ...
_KIND_RELEVANCE = 0.5  # ... in full from this relevance up
_W_HEADING = 0.3  # share of the question's terms in the section's headings
_W_RANK = 0.1  # / (1 + passage rank)
_IDF_FLOOR = 0.2
_CJK_UNSEEN_WEIGHT = 0.35  # an unmatched CJK bigram is often a cross-word artefact
_EMBED_CHARS = 160
_EMBED_BATCH = 2
_MIN_NOVELTY = 0.1  # a further sentence must add this share of the question's weight
_LATER_RELEVANCE = 0.5  # ... be this share as relevant as the best one
_LATER_MIN = 0.8  # ... and this share of the answering threshold

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
_COMMAND_LINE = re.compile(
    r"^(?:\$\s|>>>|#!|(?:pipx?3?|npm|npx|yarn|pnpm|git|docker|python3?|mkdocs|brew|apt|apt-get"
    r"|yum|dnf|pacman|zypper|conda|uv|poetry|cargo|go|make|curl|wget|sudo|kubectl)\s)"
)
_YAML_LINE = re.compile(r"^[-\s]*[a-z_][\w.-]*\s*:\s*\S*\s*$")  # "dev_addr: x", not "Default: x"
_TRAILING_COMMENT = re.compile(r"\S {2,}(?:#|//) ")  # "anchored serve   # builds …"
_BARE_KEY = re.compile(r"^[\w.-]+\s*:$")
_SYMBOLS = set("{}[]()<>=;:$|\\/`\"'#*&%@^~")
_TERMINAL = ".!?。！？:："
_ANAPHORA = re.compile(
    r"^(?:it|its|this|these|that|those|they|such|both|then)\b|^(?:它|这|该|此|其)",
    re.IGNORECASE,
)
_LEADING_MARKUP = re.compile(r"^\s*(?:[-*+]\s+|\d{1,3}[.)]\s+|>\s*)")

# What a question asks for, and what a sentence holding it looks like.
_ASKS_NUMBER = re.compile(
    r"\b(?:how\s+(?:many|much|long|big|large|often|old|fast|far)"
    r"|(?:which|what)\s+(?:\w+\s+)?(?:version|versions|port|number|size|status|code|limit"
    r"|timeout|percentage|year|date)"
    r"|what\s+(?:is|are)\s+the\s+(?:maximum|minimum|max|min|limit)"
    r"|(?:default|maximum|minimum)\s+(?:size|number|port|limit|timeout))\b"
    r"|多少|几个|哪个版本|端口",
    re.IGNORECASE,
)
_NUMBER_FOCUS = re.compile(
    r"\b(?:which|what)\s+(?:\w+\s+)?(versions?|ports?|numbers?|size|status|code|limit"
    r"|timeout|percentage|year|date)\b",
    re.IGNORECASE,
)
_ASKS_SETTING = re.compile(
    r"\b(?:how\s+(?:do|can|should|would)\s+(?:i|we|you)\s+"
    r"(?:change|set|configure|enable|disable|turn|switch|customi[sz]e|adjust|override"
    r"|point|choose|pick|select|use|specify|control|stop|skip|ignore|keep|leave|limit"
    r"|exclude|include|make|give|add|remove|hide|show|raise|lower|increase|decrease)"
    r"|(?:which|what)\s+(?:option|setting|flag|parameter|argument|key|variable|field)s?"
    r"|is\s+there\s+an?\s+(?:option|setting|flag|way))\b"
    r"|如何(?:修改|设置|配置|更改|启用|禁用)|怎么(?:修改|设置|配置|改)",
    re.IGNORECASE,
)
_ASKS_COMMAND = re.compile(
    r"\b(?:how\s+(?:do|can|should)\s+(?:i|we|you)\s+"
    r"(?:install|run|start|build|deploy|publish|upgrade|update|uninstall|serve|launch"
    r"|invoke|execute|lint|test|roll\s+back|rollback)"
    r"|(?:which|what)\s+command)\b"
    r"|如何(?:安装|运行|启动|部署|发布)",
    re.IGNORECASE,
)

_VERSION = re.compile(r"(?<![\w.])v?\d+\.\d+(?![\w])", re.ASCII)  # 3.11, v1.2.0
_FACT_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,:]\d+)*(?![\w])", re.ASCII)
_IDENTIFIER = re.compile(
    r"(?<![\w-])(?:--?[A-Za-z][\w-]*|[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+"
    r"|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)+|\w+=\S+)(?![\w])",
    re.ASCII,
)
_OPTION = re.compile(r"(?<![\w-])--[A-Za-z][\w-]*", re.ASCII)


class SentenceEmbedder(Protocol):
    """What the answerer needs of :class:`build_index.embedder.Embedder`."""

    def embed_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...

    def embed_query(self, text: str) -> npt.NDArray[np.float32]: ...


@dataclass(frozen=True)
class ExtractiveResult:
    """What the extractive answerer found.

    ``sentences`` (empty when ``abstained``) are passage sentences verbatim,
    each citing its passage's context number. ``confidence`` in [0, 1] is the
    best sentence's relevance (see :func:`answer_extractively`); ``covered``
    lists the numbers of the passages closest to the question, for an
    abstention to show what the documentation does cover. ``reason`` is a
    sentence for the reader. ``embedded`` counts the sentences embedded.
    """

    sentences: list[AnswerSentence]
    abstained: bool
    reason: str
    confidence: float
    covered: list[int] = field(default_factory=list)
    embedded: int = 0


@dataclass
class _Candidate:
    passage: Passage
    rank: int
    position: int
    text: str
    terms: frozenset[str]
    is_code: bool  # code the question did not ask for: only brought along by a pick
    code: bool = False  # looks like code (a command, a config line)
    context: frozenset[str] = frozenset()
    is_row: bool = False
    kind: float = 0.0  # 1.0: holds what the question asks for
    lexical: float = 0.0  # term coverage, IDF over the candidate passages
    matched: frozenset[str] = frozenset()  # question terms it answers (with the focus)
    semantic: float | None = None
    cosine: float | None = None
    heading: float = 0.0
    relevance: float = 0.0  # what confidence is made of
    score: float = 0.0  # what the choice is made of
    neighbour_of: _Candidate | None = None  # the pick that brought it along


@dataclass
class _Line:
    text: str
    plain: str
    cells: list[str] | None
    header: bool = False


def answer_extractively(
    question: str,
    passages: Sequence[Passage],
    *,
    max_sentences: int = 4,
    min_score: float | None = None,
    max_passages: int = MAX_PASSAGES,
    embedder: SentenceEmbedder | None = None,
    model: str = "",
    question_vector: npt.NDArray[np.float32] | None = None,
) -> ExtractiveResult:
    """Answer ``question`` with up to ``max_sentences`` sentences quoted from ``passages``.

    ``passages`` come in retrieval order (best first); the first
    ``max_passages`` not marked ``excluded`` are read. With ``embedder`` (the
    index's model, named ``model``; ``question_vector`` saves embedding the
    question again) the relevance of a sentence blends term coverage with
    semantic similarity, and ``min_score`` defaults to
    :data:`BLENDED_MIN_SCORE`; without one, or for a model that has no entry
    in :data:`SEMANTIC_SCALES`, confidence is term coverage alone and
    ``min_score`` defaults to :data:`DEFAULT_MIN_SCORE` (an uncalibrated
    model's similarities still order the sentences). See the module docstring.
    """
    pool = [p for p in passages if not p.excluded][:max_passages]
    covered = _covered(pool)
    q_terms = [t for t in dict.fromkeys(tokenize(question)) if t not in _FILLER]
    if not q_terms:
        q_terms = list(dict.fromkeys(tokenize(question)))
    scale = SEMANTIC_SCALES.get(model) if embedder is not None else None
    if min_score is None:
        min_score = BLENDED_MIN_SCORE if scale is not None else DEFAULT_MIN_SCORE
    if not pool or not (q_terms or embedder is not None):
        return _abstain(0.0, covered, "No passages of the documentation match the question.")

    weights = _weights(q_terms, pool)
    total = sum(weights.values()) or 1.0
    kinds = _answer_kinds(question)
    wants_code = (
        bool(_CODE_WORDS.intersection(q_terms))
        or bool(_IDENTIFIER_IN_QUESTION.search(question))
        or "command" in kinds
    )
    candidates = _candidates(pool, wants_code)
    if not candidates:
        return _abstain(0.0, covered, "No passages of the documentation match the question.")

    subject = _definition_subject(question)
    focus = _number_focus(question)
    for c in candidates:
        c.kind = _kind_match(kinds, c) or float(bool(subject) and _defines(subject, c.text))
        terms = c.terms
        if focus and c.kind and (_VERSION if "version" in focus else _FACT_NUMBER).search(c.text):
            # "Python 3.11 or newer." answers "which version" without the word.
            terms = terms | focus
        c.matched = terms
        context = c.context - terms
        c.lexical = _coverage(weights, total, terms, context) if q_terms else 0.0
        heading = sum(w for t, w in weights.items() if t in c.context)
        c.heading = min(1.0, heading / total) if q_terms else 0.0
        c.relevance = c.lexical

    embedded = 0
    if embedder is not None:
        embedded = _add_semantic(question, candidates, embedder, question_vector, scale)

    for c in candidates:
        # Holding a number (or an option, a command) counts only in a sentence
        # that is about the question at all.
        kind = c.kind * min(1.0, c.relevance / _KIND_RELEVANCE)
        c.score = (
            _W_LEXICAL * c.lexical
            + _W_SEMANTIC * (c.semantic or 0.0)
            + _W_KIND * kind
            + _W_HEADING * c.heading
            + _W_RANK / (1 + c.rank)
        )

    confidence = round(max(c.relevance for c in candidates), 4)
    if confidence < min_score:
        return _abstain(
            confidence,
            covered,
            "The documentation does not seem to cover this question.",
            embedded,
        )

    chosen = _select(candidates, weights, total, max_sentences, min_score)
    sentences = [AnswerSentence(c.text, [c.passage.n]) for c in _answer_order(chosen)]
    return ExtractiveResult(
        sentences=sentences,
        abstained=False,
        reason="Quoted from the documentation: no language model wrote this answer.",
        confidence=confidence,
        covered=covered,
        embedded=embedded,
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


def _add_semantic(
    question: str,
    candidates: list[_Candidate],
    embedder: SentenceEmbedder,
    question_vector: npt.NDArray[np.float32] | None,
    scale: tuple[float, float] | None,
) -> int:
    """Embed the most promising candidates and add their semantic similarity.

    Candidates are taken by term coverage, answer type and retrieval rank, so a
    paraphrase with no shared term still reaches the sentences of the best
    passages. With a calibrated ``scale`` the similarity also enters the relevance that
    confidence is made of; otherwise it only orders the sentences, rescaled to
    this question's candidates.
    """
    ranked = sorted(
        (c for c in candidates if not c.is_code),
        key=lambda c: (
            -(_W_LEXICAL * c.lexical + _W_KIND * c.kind + _W_RANK / (1 + c.rank)),
            c.rank,
            c.position,
        ),
    )
    order: list[_Candidate] = []
    tokens = 0
    for c in ranked[:MAX_EMBEDDED]:
        tokens += _estimate_tokens(_embedding_text(c))
        if order and tokens > EMBED_TOKENS:
            break
        order.append(c)
    if not order:
        return 0
    q = question_vector if question_vector is not None else embedder.embed_query(question)
    texts = [_embedding_text(c) for c in order]
    by_length = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    sims = [0.0] * len(texts)
    # Pairs of similar length: a batch is padded to its longest text, and on
    # two cores small batches were faster than one (8 sentences: 35 vs 55 ms).
    for k in range(0, len(by_length), _EMBED_BATCH):
        batch = by_length[k : k + _EMBED_BATCH]
        vectors = embedder.embed_passages([texts[i] for i in batch])
        for i, x in zip(batch, vectors @ q, strict=True):
            sims[i] = float(x)
    if scale is None:
        lo, hi = min(sims), max(sims)
        if hi - lo < 1e-6:
            lo, hi = hi - 1.0, hi
    else:
        lo, hi = scale
    for c, sim in zip(order, sims, strict=True):
        c.cosine = sim
        c.semantic = (sim - lo) / (hi - lo)  # not clipped: it orders sentences
        if scale is not None:
            clipped = min(1.0, max(0.0, c.semantic))
            c.relevance = (1 - _SEMANTIC_WEIGHT) * c.lexical + _SEMANTIC_WEIGHT * clipped
    if scale is not None:
        for c in candidates:
            if c.semantic is None:
                c.relevance = (1 - _SEMANTIC_WEIGHT) * c.lexical
    return len(order)


def _embedding_text(c: _Candidate) -> str:
    heading = c.passage.heading_path[-1] if c.passage.heading_path else c.passage.title
    text = c.text[:_EMBED_CHARS]
    return f"{heading}: {text}" if heading else text


def _estimate_tokens(text: str) -> int:
    """WordPiece tokens, roughly: ~4 characters each, one per CJK character."""
    cjk = sum(1 for ch in text if "\u3400" <= ch <= "\u9fff")
    return 2 + cjk + (len(text) - cjk) // 4


def _coverage(
    weights: dict[str, float], total: float, terms: frozenset[str], context: frozenset[str]
) -> float:
    """The share of the question's term weight in ``terms`` (``context`` counts 0.3)."""
    own = sum(w for t, w in weights.items() if t in terms)
    extra = sum(w for t, w in weights.items() if t in context)
    return min(1.0, (own + _CONTEXT_WEIGHT * extra) / total)


def _number_focus(question: str) -> frozenset[str]:
    """The terms of the noun a number answers ("version" in "which Python version")."""
    m = _NUMBER_FOCUS.search(question)
    return frozenset(tokenize(m.group(1))) if m else frozenset()


def _answer_kinds(question: str) -> set[str]:
    kinds: set[str] = set()
    if _ASKS_NUMBER.search(question):
        kinds.add("number")
    if _ASKS_SETTING.search(question):
        kinds.add("setting")
    if _ASKS_COMMAND.search(question):
        kinds.add("command")
    return kinds


_DEFINITION_QUESTION = re.compile(
    r"^\s*(?:what|who)\s+(?:is|are)\s+(?:an?\s+|the\s+)?([^?]{1,60}?)\s*\??\s*$", re.IGNORECASE
)
_COPULA = re.compile(r"\b(?:is|are|was|means|refers\s+to|lets|helps|makes|provides)\b", re.I)


def _definition_subject(question: str) -> frozenset[str]:
    """The terms of X in "What is X?", or nothing for other questions."""
    m = _DEFINITION_QUESTION.match(question)
    return frozenset(tokenize(m.group(1))) if m else frozenset()


def _defines(subject: frozenset[str], text: str) -> bool:
    """True for "X is …": the sentence opens with the subject and a copula."""
    body = _LEADING_MARKUP.sub("", text)
    m = _COPULA.search(body)
    if m is None or m.start() > 60:
        return False
    return subject <= frozenset(tokenize(body[: m.start()]))


def _kind_match(kinds: set[str], c: _Candidate) -> float:
    """1.0 when the sentence holds something of the kind the question asks for."""
    if not kinds:
        return 0.0
    body = _LEADING_MARKUP.sub("", c.text)
    if "number" in kinds and _FACT_NUMBER.search(body):
        return 1.0
    if "setting" in kinds and (_IDENTIFIER.search(body) or _row_names_option(c)):
        return 1.0
    if "command" in kinds and (c.code or _COMMAND_LINE.match(body) or _OPTION.search(body)):
        return 1.0
    return 0.0


def _row_names_option(c: _Candidate) -> bool:
    if not c.is_row:
        return False
    first = c.text.split("|", 1)[0].strip()
    return bool(first) and " " not in first


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


def _lines(text: str) -> list[_Line]:
    """The sentences of a passage, a table row whole, header rows marked.

    A run of consecutive lines with the same number of ``" | "``-separated
    cells is a table; a row is one candidate even when its cells hold several
    sentences. The first line of a run is the header (HTML tables always lead
    with one), and so is any later line that repeats it (a table split into
    chunks repeats its header in each).
    """
    starts: list[int] = []
    ends: list[int] = []
    raw: list[str] = []
    offset = 0
    for line in text.split("\n"):
        starts.append(offset)
        ends.append(offset + len(line))
        raw.append(line.strip())
        offset += len(line) + 1
    width = [len(r.split("|")) if " | " in r else 0 for r in raw]
    row = [False] * len(raw)
    header = [False] * len(raw)
    seen: set[str] = set()
    for i, w in enumerate(width):
        if not w:
            continue
        same_prev = i > 0 and width[i - 1] == w
        same_next = i + 1 < len(raw) and width[i + 1] == w
        if not same_prev and not same_next:
            continue  # a lone line with a pipe: a shell pipeline, not a table
        row[i] = True
        if not same_prev or raw[i] in seen:
            header[i] = True
            seen.add(raw[i])
    lines: list[_Line] = []
    done: set[int] = set()
    for span in sentence_spans(text):
        i = bisect.bisect_right(starts, span.start) - 1
        if row[i] and span.end <= ends[i]:
            if i in done:
                continue
            done.add(i)
            cells = [c.strip() for c in raw[i].split("|")]
            lines.append(_Line(raw[i], _plain(raw[i]), cells, header[i]))
        else:
            lines.append(_Line(span.text, _plain(span.text), None))
    return lines


def _candidates(pool: Sequence[Passage], wants_code: bool) -> list[_Candidate]:
    out: list[_Candidate] = []
    for rank, p in enumerate(pool):
        headings = {_plain(h) for h in (p.title, *p.heading_path) if h.strip()}
        heading_terms = _heading_terms(p)
        header_terms: frozenset[str] = frozenset()
        for position, line in enumerate(_lines(p.text)):
            text, plain = line.text, line.plain
            if line.header:
                header_terms = frozenset(tokenize(text))
                continue
            if not plain or plain in headings:
                continue
            is_row = line.cells is not None
            if is_row:
                assert line.cells is not None
                if sum(1 for cell in line.cells if cell) < 2:
                    continue
                is_code = _looks_like_code(" ".join(line.cells))
            else:
                is_code = _looks_like_code(text)
                if (
                    not is_code
                    and len(plain.split()) <= 3
                    and text[-1] not in _TERMINAL
                    and not _has_cjk(text)
                    and not _COMMAND_LINE.match(_LEADING_MARKUP.sub("", text))
                ):
                    continue  # a label ("Note", "Default") or a heading-like fragment
            if _BARE_KEY.match(_LEADING_MARKUP.sub("", text).strip()):
                continue  # "config:" opens a block and says nothing
            terms = frozenset(tokenize(text))
            if terms:
                # Code stays a candidate (a "run this:" sentence may pull it in) but is
                # only picked on its own merit when the question asks for code.
                context = heading_terms | header_terms if is_row else heading_terms
                out.append(
                    _Candidate(
                        p,
                        rank,
                        position,
                        text,
                        terms,
                        is_code and not wants_code,
                        code=is_code,
                        context=context,
                        is_row=is_row,
                    )
                )
    return out


def _select(
    candidates: list[_Candidate],
    weights: dict[str, float],
    total: float,
    max_sentences: int,
    min_score: float,
) -> list[_Candidate]:
    """Greedy MMR: each pick adds what the others missed and repeats little.

    The first pick is the best-scoring sentence; later picks must be half as
    relevant as the best and nearly (``_LATER_MIN``) good enough to answer on
    their own, add at least ``_MIN_NOVELTY`` of the question's term weight and
    share under 60 % of their terms with a sentence already chosen.
    A pick that opens with a pronoun brings the sentence before it, and so
    does a command whose previous line introduces it ("Run this:"); a pick
    that ends with a colon brings the line after it (often a command) unless
    that is a table row.
    """
    pool = sorted((c for c in candidates if not c.is_code), key=lambda c: -c.score)
    if not pool:
        return []
    best = max(c.relevance for c in pool)
    chosen: list[_Candidate] = []
    covered_terms: set[str] = set()
    by_place = {(id(c.passage), c.position): c for c in candidates}
    taken: set[tuple[int, int]] = set()
    while len(chosen) < max_sentences:
        picked: _Candidate | None = None
        picked_value = -math.inf
        for c in pool:
            if (id(c.passage), c.position) in taken:
                continue
            novelty = sum(
                w for t, w in weights.items() if t in c.matched and t not in covered_terms
            )
            novelty /= total
            redundancy = max((_jaccard(c.terms, s.terms) for s in chosen), default=0.0)
            if chosen and (
                c.relevance < max(_LATER_RELEVANCE * best, _LATER_MIN * min_score)
                or novelty < _MIN_NOVELTY
                or redundancy >= 0.6
            ):
                continue
            value = 0.5 * c.score + novelty - 0.5 * redundancy if chosen else c.score
            if value > picked_value:
                picked, picked_value = c, value
        if picked is None:
            break
        taken.add((id(picked.passage), picked.position))
        chosen.append(picked)
        covered_terms.update(t for t in weights if t in picked.matched)
        # "It defaults to 8000." needs the sentence that says what "it" is;
        # "Run the following command:" needs the command.
        neighbour = 0
        before = by_place.get((id(picked.passage), picked.position - 1))
        if _ANAPHORA.match(_LEADING_MARKUP.sub("", picked.text)):
            neighbour = -1
        elif picked.code and before is not None and before.text[-1] in ":：":
            neighbour = -1  # a command with the sentence that introduces it
        elif picked.text[-1] in ":：" and not picked.is_row:
            neighbour = 1
        if neighbour and len(chosen) < max_sentences:
            place = (id(picked.passage), picked.position + neighbour)
            extra = by_place.get(place)
            if extra is not None and place not in taken and not extra.is_row:
                taken.add(place)
                extra.neighbour_of = picked
                chosen.append(extra)
    return chosen


def _answer_order(chosen: list[_Candidate]) -> list[_Candidate]:
    """Picks in the order chosen (the best first), each with the neighbour it
    brought (before it for a pronoun, after it for a colon) in page order."""
    units: list[list[_Candidate]] = []
    for c in chosen:
        if c.neighbour_of is not None and units and units[-1][0] is c.neighbour_of:
            units[-1].append(c)
        else:
            units.append([c])
    return [c for unit in units for c in sorted(unit, key=lambda c: c.position)]


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


def _abstain(
    confidence: float, covered: list[int], reason: str, embedded: int = 0
) -> ExtractiveResult:
    return ExtractiveResult([], True, reason, confidence, covered, embedded)


def _passage_search_text(p: Passage) -> str:
    return "\n".join([p.title, *p.heading_path, p.text])


def _heading_terms(p: Passage) -> frozenset[str]:
    return frozenset(tokenize(" ".join([p.title, *p.heading_path])))


def _looks_like_code(text: str) -> bool:
    if text.startswith(("```", "~~~")):
        return True
    body = _LEADING_MARKUP.sub("", text)
    if not body:
        return False
    if _COMMAND_LINE.match(body) and body[-1] not in _TERMINAL:
        return True
    if _YAML_LINE.match(body) or _TRAILING_COMMENT.search(body):
        return True
    visible = [ch for ch in body if not ch.isspace()]
    return bool(visible) and sum(ch in _SYMBOLS for ch in visible) / len(visible) > 0.2


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def _plain(text: str) -> str:
    return " ".join(_LEADING_MARKUP.sub("", text).casefold().strip(" #:.").split())


def _has_cjk(text: str) -> bool:
    return any("\u3400" <= ch <= "\u9fff" or "\u3040" <= ch <= "\u30ff" for ch in text)


def _is_cjk_bigram(term: str) -> bool:
    return len(term) == 2 and _has_cjk(term)


# ---- from engine.py at 56a0a56 -------------------------------------------

from anchored_query.citations.verify import CitationItem, renumber, verify  # noqa: E402

RELEVANCE_FLOOR = {"all-MiniLM-L6-v2": 0.26}


def answer_extractive(
    question: str,
    passages: list[Passage],
    *,
    similarity: float,
    model: str,
    embedder: Embedder | None = None,
    question_vector: np.ndarray | None = None,
) -> dict[str, Any]:
    """The extractive answer to ``question`` as ``/v1/ask`` returns it (without ids, timings).

    Abstains when :func:`answer_extractively` does (its blended confidence,
    with sentence embeddings by ``embedder``, under its threshold; pass the
    question's ``question_vector`` when retrieval has it) or when
    ``similarity`` — the question's best cosine to a chunk in scope — is under
    the model's :data:`RELEVANCE_FLOOR`; the sentences that remain must pass
    :func:`verify`.
    """
    result = answer_extractively(
        question, passages, embedder=embedder, model=model, question_vector=question_vector
    )
    by_n = {p.n: p for p in passages}
    if result.abstained or similarity < RELEVANCE_FLOOR.get(model, 0.0):
        covered = [by_n[n] for n in result.covered if n in by_n] or passages[:5]
        return {
            "answer": [],
            "citations": _covered_citations(covered),
            "abstained": True,
            "mode": "extractive",
        }
    verified = verify(result.sentences, by_n)
    answer, citations = renumber(verified, by_n)
    return {
        "answer": answer,
        "citations": citations,
        # Not verified.abstained: a quoted sentence that happens to say "not found"
        # is the docs speaking, not the answerer declining.
        "abstained": not answer,
        "mode": "extractive",
    }


def _covered_citations(passages: list[Passage]) -> list[CitationItem]:
    """Citations for the sections the docs do cover (shown with an abstention)."""
    return [
        CitationItem(
            n=i,
            chunk_id=p.chunk_ids[0],
            url=p.url,
            title=p.title,
            heading_path=p.heading_path,
            passage=p.highlight[:600],
            highlight=p.highlight,
        )
        for i, p in enumerate(passages, start=1)
    ]
