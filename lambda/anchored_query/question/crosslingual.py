"""Chinese questions on docs written in another language: dictionary query translation.

A classic cross-language retrieval technique (dictionary-based query
translation): the Chinese words of the question are looked up in CC-CEDICT and
their English glosses become one more search variant. The shipped English
embedder cannot relate a Chinese question to English passages, and BM25 on the
question's CJK bigrams matches nothing an English index holds (or only the odd
language name, which max-normalised BM25 would then rank first); the gloss
gives both retrievers English words to match.

* **When.** Only for a question with CJK characters against an index whose
  postings are mostly non-CJK (:func:`index_is_cjk`: decided once per loaded
  index from its BM25 vocabulary). Anything else is untouched, and the
  dictionary is never loaded.
* **Gloss** of each word: its dictionary senses (:mod:`anchored_query.question.cedict`:
  the question segmented by the dictionary, each word's senses as content
  words; characters the dictionary lacks are skipped). ASCII tokens of the
  question (``mkdocs.yml``, ``HTTP/2``) are kept as written, in place. Against
  an index, a sense is chosen per word by the docs themselves: gloss words the
  index never uses are dropped, and of several senses the one whose words
  share most chunks with the rest of the question is kept (co-occurrence
  disambiguation); the dictionary's pivot synonyms the docs use are added as
  further senses.
* **Data**: CC-CEDICT, loaded lazily at the first such question, then kept
  (:func:`anchored_query.question.cedict.dictionary`).
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt

from anchored_query.question.cedict import ZH_STOPWORDS, Dictionary, data_path, dictionary
from build_index.bm25 import BM25Index
from build_index.tokenizer import STOPWORDS, tokenize

__all__ = [
    "GLOSS_THRESHOLDS",
    "ZH_STOPWORDS",
    "Dictionary",
    "Gloss",
    "data_path",
    "dense_is_noise",
    "dictionary",
    "gloss",
    "has_cjk",
    "index_is_cjk",
    "needs_gloss",
    "same_meaning",
    "structured_scores",
    "translate",
    "unknown_share",
]

MAX_GLOSSED: Final = 16  # Chinese words glossed per question (bounds the sense choice's work)
AGREE: Final = 0.7  # cosine of a question and its gloss for an embedder that relates them
CJK_SHARE: Final = 0.2  # an index with fewer of its postings in CJK terms is "not CJK"
# The extractive answerer's refusal threshold for a question answered through its
# gloss, per embedding model (evidence.THRESHOLDS is for questions as asked). A
# dictionary gloss is a lossy translation: its words match the docs less well than
# a reader's own English would, so the evidence of an answerable glossed question
# is lower (at the English thresholds, 35 of the 66 answerable Chinese dev questions
# were answered with MiniLM). Fitted by ``tests/bench/bench_multilingual.py
# --calibrate-gloss`` on the dev Chinese questions of the four realdocs sets (84
# with MiniLM; 71 with e5, whose builds lack this project's docs) with the rule
# calibrate_abstention.py applies: the lowest threshold that answers at most 10%
# of the unanswerable ones. MiniLM's re-chosen after its English model's refit on
# all corpora (0.4708 -> 0.5247 on the new model's probabilities: 52 of 66 answered,
# 1 of 18 unanswerable).
GLOSS_THRESHOLDS: Final[Mapping[str, float]] = {
    "all-MiniLM-L6-v2": 0.5247,
    "multilingual-e5-small": 0.2619,
}

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff]+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
# A run of the question that is not Han: kept words such as mkdocs.yml, HTTP/2, 301.
_ASCII_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-/+#]*[A-Za-z0-9+#]|[A-Za-z0-9]")

_lock = threading.Lock()
_cjk_index: weakref.WeakKeyDictionary[BM25Index, bool] = weakref.WeakKeyDictionary()
_noise: weakref.WeakKeyDictionary[BM25Index, dict[str, bool]] = weakref.WeakKeyDictionary()


def _used(word: str, vocabulary: Mapping[str, int]) -> bool:
    terms = tokenize(word)
    return bool(terms) and all(t in vocabulary for t in terms)


def same_meaning(question: npt.NDArray[np.float32], gloss: npt.NDArray[np.float32]) -> bool:
    """Whether the embedder puts the question and its gloss together (cosine at least
    :data:`AGREE`): a multilingual model does (0.80-0.91 for multilingual-e5-small on
    the development questions), an English-only one does not (-0.10-0.55 for
    all-MiniLM-L6-v2), and then the question's own embedding is noise."""
    norm = float(np.linalg.norm(question) * np.linalg.norm(gloss))
    return norm > 0 and float(question @ gloss) / norm >= AGREE


def dense_is_noise(
    question: str, embed: Callable[[str], npt.NDArray[np.float32]], bm25: BM25Index
) -> bool:
    """Whether the embedder's similarities say nothing about a CJK question: it does
    not place the question near its own English gloss (:func:`same_meaning`; an
    English-only model finds any Chinese text about as close to any Chinese
    question). False for a question without CJK. The gloss is the one against
    ``bm25``, else the dictionary's unfiltered one (an index with little English).
    Remembered per index and question (the answerer asks for each pass)."""
    if not has_cjk(question):
        return False
    with _lock:
        known = _noise.setdefault(bm25, {})
        if question in known:
            return known[question]
    english = gloss(question, bm25=bm25) or gloss(question)
    noise = not english or not same_meaning(embed(question), embed(english))
    with _lock:
        if len(known) >= 256:
            known.clear()
        known[question] = noise
    return noise


def has_cjk(text: str) -> bool:
    return _CJK.search(text) is not None


def index_is_cjk(bm25: BM25Index) -> bool:
    """Whether a sizeable share (:data:`CJK_SHARE`) of the index's postings are CJK
    terms; computed once per loaded index."""
    with _lock:
        known = _cjk_index.get(bm25)
    if known is not None:
        return known
    total = int(bm25.indptr[-1]) if len(bm25.indptr) else 0
    cjk = 0
    for term, row in bm25.vocab.items():
        if _CJK.match(term):
            cjk += int(bm25.indptr[row + 1] - bm25.indptr[row])
    result = total > 0 and cjk / total >= CJK_SHARE
    with _lock:
        _cjk_index[bm25] = result
    return result


def needs_gloss(question: str, bm25: BM25Index) -> bool:
    """A CJK question against an index that is mostly not CJK."""
    return has_cjk(question) and not index_is_cjk(bm25)


@dataclass(frozen=True)
class Gloss:
    """A question's English gloss.

    ``text``: ASCII words kept in place, each Chinese word replaced by the words
    of its chosen sense ("" when nothing could be glossed): what the embedder
    reads and the answerer weighs. ``groups``: per question word, every sense
    glossed for it (each a tuple of words): what :func:`structured_scores` reads,
    so that the translations of one Chinese word count as one query term.
    """

    text: str = ""
    groups: tuple[tuple[tuple[str, ...], ...], ...] = ()


def gloss(
    question: str,
    dictionary_: Dictionary | None = None,
    bm25: BM25Index | None = None,
) -> str:
    """The question's English gloss text (:func:`translate`)."""
    return translate(question, dictionary_, bm25).text


def translate(
    question: str,
    dictionary_: Dictionary | None = None,
    bm25: BM25Index | None = None,
) -> Gloss:
    """The question's English gloss (:class:`Gloss`): ASCII words kept in place, each
    Chinese word (function words skipped, :data:`ZH_STOPWORDS`) replaced by its
    dictionary senses.

    With ``bm25`` (the index searched), translations are chosen by the target
    collection: a gloss word is kept only when the docs use it (all its terms,
    as :func:`tokenize` makes them), and of a word's senses the text keeps the
    one that co-occurs most, in the docs' chunks, with the other words of the
    question (:func:`_choose`; Ballesteros & Croft's co-occurrence
    disambiguation); ``groups`` keep every sense.
    """
    d = dictionary_ or dictionary()
    if d is None:
        return Gloss()
    items: list[list[list[str]]] = []  # per question word: its candidate senses
    glossed = False
    glossed_words = 0
    pos = 0
    keep = None if bm25 is None else (lambda w: _used(w, bm25.vocab))
    for match in _HAN.finditer(question):
        items += [[[w]] for w in _ASCII_WORD.findall(question[pos : match.start()])]
        for word in d.segment(match.group()):
            if glossed_words >= MAX_GLOSSED:
                break
            senses = d.senses_of(word, keep)
            if senses:
                items.append(senses)
                glossed = True
                glossed_words += 1
        pos = match.end()
    items += [[[w]] for w in _ASCII_WORD.findall(question[pos:])]
    if not glossed:
        return Gloss()
    groups = tuple(
        tuple(tuple(sense) for sense in senses + _synonym_senses(d, senses, keep))
        for senses in items
    )
    if bm25 is not None:
        items = _choose(items, bm25)
    text = " ".join(dict.fromkeys(w for senses in items for sense in senses for w in sense))
    return Gloss(text, groups)


def _synonym_senses(
    d: Dictionary, senses: list[list[str]], keep: Callable[[str], bool] | None
) -> list[list[str]]:
    """One more sense for each pivot synonym (:meth:`Dictionary.synonyms`) of a
    one-word sense, those the docs use (only against an index: ``keep``)."""
    if keep is None:
        return []
    have = {w for sense in senses for w in sense}
    out: list[list[str]] = []
    for sense in senses:
        if len(sense) == 1 and sense[0].isalpha():
            for synonym in d.synonyms(sense[0]):
                if synonym not in have and keep(synonym):
                    have.add(synonym)
                    out.append([synonym])
    return out


def structured_scores(
    bm25: BM25Index,
    groups: Sequence[Sequence[Sequence[str]]],
    correct: Callable[[list[str]], list[str]] | None = None,
) -> npt.NDArray[np.float32]:
    """BM25 of a glossed question, one query term per question word (Pirkola's
    structured query): a chunk's score for a word is the best of its senses'
    scores, a sense's score the mean BM25 weight of its words (each word's terms
    summed, as a query would). Without this, a word glossed by three senses of
    two words each would weigh six times a word glossed by one ("切换": "switch
    over, switch modes, data streams"), and a sense choice that went wrong (公告
    "post" chosen over "announcement") would lose the word altogether.
    ``correct``: applied to each word's terms (the index's spelling)."""
    total = np.zeros(bm25.n_chunks, dtype=np.float32)
    for senses in groups:
        best: npt.NDArray[np.float32] | None = None
        for sense in senses:
            score = np.zeros(bm25.n_chunks, dtype=np.float32)
            for word in sense:
                terms = tokenize(word)
                score += bm25.score(correct(terms) if correct else terms)
            score /= max(1, len(sense))
            best = score if best is None else np.maximum(best, score)
        if best is not None:
            total += best
    return total


def unknown_share(
    question: str, bm25: BM25Index, dictionary_: Dictionary | None = None
) -> float | None:
    """The share of the question's words whose translation the docs never use.

    The gloss keeps only the words the index uses, so an off-topic question
    ("什么是量子计算？") glossed against it looks fully known ("compute"). This
    counts on the unfiltered dictionary instead: each Chinese word of two or
    more characters with a meaning (single characters are mostly function
    words, whose first sense is noise: 被 "quilt") is known when the index uses
    every content word of one of its senses; each ASCII word (``mkdocs.yml``)
    when the index holds all its terms. None: nothing to count (no dictionary).
    """
    d = dictionary_ or dictionary()
    if d is None:
        return None
    known = total = 0
    for match in _HAN.finditer(question):
        for word in d.segment(match.group()):
            senses = d.senses_of(word) if len(word) > 1 else []
            if senses:
                total += 1
                known += any(all(_used(w, bm25.vocab) for w in sense) for sense in senses)
    for word in _ASCII_WORD.findall(_HAN.sub(" ", question)):
        terms = [t for t in tokenize(word) if t not in STOPWORDS]
        if terms:
            total += 1
            known += all(t in bm25.vocab for t in terms)
    return 1.0 - known / total if total else None


def _postings(words: list[str], bm25: BM25Index) -> npt.NDArray[np.int32]:
    """The chunks holding every word of a sense (each word: all its terms), else, when
    none holds them all, any of them. A sense of several common words ("put
    together") would otherwise overlap with almost anything."""
    per_word = []
    for word in words:
        terms = tokenize(word)
        if not terms or any(t not in bm25.vocab for t in terms):
            continue
        rows = [bm25.vocab[t] for t in terms]
        chunks = [bm25.indices[int(bm25.indptr[r]) : int(bm25.indptr[r + 1])] for r in rows]
        held = chunks[0]
        for other in chunks[1:]:
            held = np.intersect1d(held, other, assume_unique=True)
        per_word.append(held)
    if not per_word:
        return np.zeros(0, dtype=np.int32)
    every = per_word[0]
    for other in per_word[1:]:
        every = np.intersect1d(every, other, assume_unique=True)
    return every if len(every) else np.unique(np.concatenate(per_word))


def _choose(items: list[list[list[str]]], bm25: BM25Index) -> list[list[list[str]]]:
    """Of each word with several senses, the sense whose chunks overlap most (Dice)
    with the best-overlapping sense of every other question word; a tie keeps the
    dictionary's order."""
    sets = [[_postings(sense, bm25) for sense in senses] for senses in items]

    def dice(a: npt.NDArray[np.int32], b: npt.NDArray[np.int32]) -> float:
        total = len(a) + len(b)
        return 2.0 * len(np.intersect1d(a, b, assume_unique=True)) / total if total else 0.0

    chosen: list[list[list[str]]] = []
    for i, senses in enumerate(items):
        if len(senses) == 1:
            chosen.append(senses)
            continue
        scores = [
            sum(max(dice(own, other) for other in sets[j]) for j in range(len(items)) if j != i)
            for own in sets[i]
        ]
        best = max(range(len(senses)), key=lambda k: (scores[k], -k))
        chosen.append([senses[best]])
    return chosen
